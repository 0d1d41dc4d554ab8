"""Two-party hybrid protocols against the plaintext reference backend (and plain numpy)."""

import os
import stat

import numpy as np
import pytest
import scipy.sparse as sp

from shaper.crypto import encoding, paillier
from shaper.errors import ConfigError, PartyError, PlaintextOverflowError
from shaper.net import launch, run_in_memory
from shaper.protocols import Hybrid2PC, Reference
from shaper.protocols.triples import TripleStore

from . import programs as P

MASK = (1 << 64) - 1


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    """These tests use 640-bit keys: the explicit switch for keys below 2048 bits."""
    monkeypatch.setenv("SHAPER_INSECURE_KEY_BITS", "1")


def two(fn, *args, **kwargs):
    return run_in_memory(2, fn, *args, **kwargs)


# -- keys ----------------------------------------------------------------------------------------
def test_keys_below_2048_bits_need_the_explicit_switch(monkeypatch):
    monkeypatch.delenv("SHAPER_INSECURE_KEY_BITS")
    with pytest.raises(ConfigError, match="below the 2048 bits.*SHAPER_INSECURE_KEY_BITS=1"):
        Hybrid2PC.setup(None, key_bits=1024)
    keys = paillier.keygen(512)
    with pytest.raises(ConfigError, match="512-bit keys"):
        Hybrid2PC.setup(None, keys=keys)
    monkeypatch.setenv("SHAPER_INSECURE_KEY_BITS", "0")  # only "1" switches it on
    with pytest.raises(ConfigError, match="insecure_key_bits=True"):
        Hybrid2PC.setup(None, key_bits=640)


def test_a_peer_key_of_another_size_is_refused_by_name():
    # party 1 brings a 512-bit key while the agreed size at party 0 is 640 bits (a downgrade):
    # each refuses the other's key, naming the peer
    with pytest.raises(PartyError, match="'party[01]' sent a (512|640)-bit paillier key; the agreed size is (640|512)"):
        two(P.key_size_job, {0: 640, 1: 512})


def test_a_peer_key_with_a_crafted_h_s_is_used_with_h_s_derived():
    hs = two(P.crafted_hs_job)
    n_squared, derived, seen = hs[0]
    assert seen == derived and seen != n_squared - 1


def ring_sum(a, b):
    return (np.asarray(a, dtype=np.uint64) + np.asarray(b, dtype=np.uint64))


def ulps(a, b, frac):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) * (1 << frac)


# -- sharing and linear operations ---------------------------------------------------------------
def test_share_and_reveal_edge_values():
    edge = np.array([0, 1, -1, 2**63 - 1, -(2**63), 123456789012345], dtype=np.int64)
    (both0, none0, s0), (both1, only1, s1) = two(P.share_roundtrip_job, edge, 0)
    np.testing.assert_array_equal(both0, edge)
    np.testing.assert_array_equal(only1, edge)
    assert none0 is None
    np.testing.assert_array_equal(ring_sum(s0, s1), edge.view(np.uint64))
    assert not np.array_equal(s1, edge.view(np.uint64))  # a share is not the value
    top = (2 ** (63 - 16) - 1) + 0.5  # largest fixed-point magnitude at f = 16
    got = two(P.share_roundtrip_job, np.array([top, -top, 2.0**-16]), 16)[0][0]
    np.testing.assert_array_equal(got, [top, -top, 2.0**-16])


def test_fixed_point_overflow_raises():
    with pytest.raises(PlaintextOverflowError, match="2\\^16"):
        Reference().share([2.0**48], owner=0)
    with pytest.raises(PartyError, match="does not fit the 64-bit ring"):
        two(P.share_roundtrip_job, np.array([2.0**50]), 16)


def test_linear_operations_match_reference():
    xv, yv = np.array([1.5, -2.25, 1000.0]), np.array([-0.5, 4.0, 0.125])
    want = P.prog_linear(Reference(), xv, yv)
    for got in two(P.linear_job, xv, yv):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


# -- Beaver ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["dealer", "trigen"])
def test_beaver_multiplication(source):
    xv = np.array([1.5, -2.25, 3.0, 0.0, -1000.5])
    yv = np.array([2.0, 0.5, -1.0, 7.25, 0.001])
    want_exact, want, want_pub = P.prog_mul(Reference(), xv, yv)
    for exact, got, pub in two(P.mul_job, xv, yv, source):
        np.testing.assert_array_equal(exact, want_exact)  # ring: bit-exact
        assert ulps(got, want, 16) <= 1 and ulps(pub, want_pub, 16) <= 1  # truncation: 1 ulp
    q = lambda v: np.round(v * 2**16) / 2**16  # noqa: E731 - inputs as encoded at f = 16
    np.testing.assert_allclose(want, q(xv) * q(yv), atol=2**-15)


def test_beaver_matrix_multiplication():
    rng = np.random.default_rng(7)  # test data only
    xv = rng.integers(-50, 50, (3, 4)) / 8
    yv = rng.integers(-50, 50, (4, 2)) / 4
    want_exact, want = P.prog_matmul(Reference(), xv, yv)
    for source in ("dealer", "trigen"):
        for exact, got in two(P.matmul_job, xv, yv, source):
            np.testing.assert_array_equal(exact, want_exact)
            assert ulps(got, want, 16) <= 1
    np.testing.assert_allclose(want, xv @ yv, atol=2**-14)


# -- TriGen ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pack", [True, False])
def test_trigen_triples_satisfy_c_equals_ab(pack):
    (a0, b0, c0), (a1, b1, c1) = two(P.trigen_job, 40, pack)
    a, b, c = ring_sum(a0, a1), ring_sum(b0, b1), ring_sum(c0, c1)
    np.testing.assert_array_equal(c, a * b)
    assert len(set(a.tolist())) == 40  # fresh randomness
    assert not np.array_equal(a0, a1)


def test_trigen_matrix_triple():
    (a0, b0, c0), (a1, b1, c1) = two(P.trigen_matrix_job, 3, 4, 2)
    np.testing.assert_array_equal(ring_sum(c0, c1), np.matmul(ring_sum(a0, a1), ring_sum(b0, b1)))


def test_triple_store_offline_phase(tmp_path):
    path = str(tmp_path / "triples")
    assert two(P.store_job, path, 7) == [7, 7]
    for party in (0, 1):
        assert stat.S_IMODE(os.stat(f"{path}.{party}.npz").st_mode) == 0o600
    xv, yv = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, -1.0])
    (first, second), _ = two(P.from_store_job, path, xv, yv)
    np.testing.assert_allclose(first[1], xv * yv)
    assert "TriplesExhausted" in second  # prog_mul uses 2 x 3 triples: 1 left, 3 needed
    with pytest.raises(ValueError, match="party 0"):
        TripleStore.load(f"{path}.0.npz", 1)


def test_a_store_that_lost_triples_in_a_crash_is_lined_up_with_the_peers(tmp_path):
    path = str(tmp_path / "triples")
    assert two(P.store_job, path, 20) == [20, 20]
    xv, yv = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, -1.0])
    result, _ = two(P.wasted_store_job, path, xv, yv)
    np.testing.assert_allclose(result[1], xv * yv)


# -- H2S ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pack", [True, False])
def test_h2s_ring_mode_is_bit_exact(pack):
    values = np.array([0, 1, -1, 2**62, -(2**62), 999, -123456789], dtype=object)
    (s0, r0, _), (s1, r1, _) = two(P.h2s_job, values, 64, "ring", 0, pack)
    want = encoding.ring_from_ints(values)
    np.testing.assert_array_equal(ring_sum(s0, s1), want)
    np.testing.assert_array_equal(r0, encoding.ring_decode(want, 0))


def test_h2s_packed_equals_unpacked():
    values = np.arange(-300, 300) * 7919
    packed = two(P.h2s_job, values, 40, "ring", 0, True, 0, 100)[0][1]
    unpacked = two(P.h2s_job, values, 40, "ring", 0, False)[0][1]
    np.testing.assert_array_equal(packed, unpacked)
    np.testing.assert_array_equal(packed, values)


@pytest.mark.parametrize("pack", [True, False])
def test_h2s_integer_mode_fuses_exact_truncation(pack):
    values = np.array([0.0, 0.5, -0.5, 2**30 + 0.25, -(2**30) - 0.75, 255.99, -256.0, 12345.678])
    t = 12
    (s0, r0, f0), (s1, _, _) = two(P.h2s_job, values, 48, "integer", t, pack, 16)
    assert f0 == 4  # scale 2^16, 12 bits truncated
    encoded = [int(round(v * 2**16)) for v in values]
    total = np.array([int(a) + int(b) for a, b in zip(s0, s1)])
    floor = np.array([e >> t for e in encoded])
    assert np.all((total - floor >= 0) & (total - floor <= 1))  # floor or one more, never a wrap
    ref = Reference().h2s(encoded, holder=1, value_bits=48, mode="integer", truncate_bits=t, frac_bits=16)
    assert np.all(np.abs(total - np.array(ref.values.tolist())) <= 1)
    assert np.max(np.abs(np.asarray(r0, dtype=float) - values)) <= 2 ** -4  # within one unit at 2^-4


def test_h2s_detects_a_broken_bound():
    # Unpacked: a value far beyond its bound shows above the mask range.
    with pytest.raises(PartyError, match="exceeds its declared bound"):
        two(P.overflow_job, 2**60, 10, False)
    # Packed: a negative overflow in the top slot wraps the whole packed plaintext. (A spill into a
    # neighbouring slot is indistinguishable from its mask: packing relies on the declared bound.)
    with pytest.raises(PartyError, match="bound|exceeds"):
        two(P.overflow_job, -(2**60), 10, True)


def test_h2s_masks_hide_the_value():
    """The key owner sees u = v + 2^beta + r: r must be uniform over [0, 2^(beta+σ)) whatever v is."""
    bits, count = 8, 2048
    seen_small = np.array(two(P.mask_job, count, 0, bits)[0], dtype=object)
    seen_large = np.array(two(P.mask_job, count, 2**bits - 1, bits)[0], dtype=object)
    for seen, v in ((seen_small, 0), (seen_large, 2**bits - 1)):
        r = np.array([int(u) - v - (1 << bits) for u in seen])
        assert r.min() >= 0 and max(int(x) for x in r) < 1 << (bits + 40)
        top = np.array([int(x) >> (bits + 40 - 4) for x in r])  # top 4 bits: 16 equal buckets
        counts = np.bincount(top, minlength=16)
        chi2 = float(((counts - count / 16) ** 2 / (count / 16)).sum())
        assert chi2 < 60  # 15 degrees of freedom: p < 1e-7 above this; a short mask gives thousands
    # The two views are statistically indistinguishable: a two-sample z-test on their high bits
    # (|z| < 5 holds with probability 1 - 6e-7 when they come from the same distribution).
    hi_small = np.array([int(u) >> 40 for u in seen_small], dtype=float)
    hi_large = np.array([int(u) >> 40 for u in seen_large], dtype=float)
    z = (hi_small.mean() - hi_large.mean()) / np.sqrt(hi_small.var() / count + hi_large.var() / count)
    assert abs(z) < 5


# -- S2H ---------------------------------------------------------------------------------------------
def test_s2h_ring_and_integer():
    values = np.array([0, 5, -5, 2**40, -(2**62)], dtype=np.int64)
    decrypted = two(P.s2h_job, values, "ring")[0]
    assert [v % (1 << 64) for v in decrypted] == [int(v) & MASK for v in values]  # x mod 2^64
    exact = two(P.s2h_job, values, "integer")[0]
    assert exact == values.tolist()  # integer shares: exactly x


# -- secure sparse mat-vec ----------------------------------------------------------------------------
def _sparse(rows, cols, nnz, values, seed):
    rng = np.random.default_rng(seed)  # test data only
    r, c = rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)
    data = rng.choice(values, nnz)
    m = sp.csr_matrix((data, (r, c)), shape=(rows, cols))
    m.sum_duplicates()
    return m


@pytest.mark.parametrize("values, pack", [([1], True), ([1, -1, 3, -100], True), ([1, 2], False)])
def test_sparse_matvec_is_bit_exact(values, pack):
    X = _sparse(40, 25, 120, values, 3)
    yv = np.random.default_rng(4).integers(-(2**40), 2**40, 25)
    got, report = two(P.sparse_job, X, yv, pack)[0]
    want = (X.astype(np.int64).toarray().astype(object) @ yv.astype(object))
    np.testing.assert_array_equal(got, encoding.ring_from_ints(want))
    np.testing.assert_array_equal(P.prog_sparse(Reference(), X, yv), encoding.ring_from_ints(want))
    assert report["items"] >= 1


def test_protocols_over_tls_processes():
    (prod0, sparse0), (prod1, sparse1) = launch(2, P.everything_job, timeout=300)
    want = np.array([1.25, -2.5, 3.0, 0.0]) * np.array([0.5, 4.0, -1.5, 7.0])
    np.testing.assert_allclose(prod0, want, atol=2**-15)
    np.testing.assert_array_equal(prod0, prod1)
    np.testing.assert_array_equal(sparse0, encoding.ring_from_ints([12, 9, 5]))


def test_example_runs():
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "hybrid_sparse_matvec.py"
    proc = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    error = float(proc.stdout.split("max error   :")[1].split()[0])
    assert error < 1e-3
