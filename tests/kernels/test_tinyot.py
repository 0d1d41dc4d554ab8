"""The AND triples' local kernels (``shaper.kernels.tinyot``): the native build against the numpy
path it replaces, and both against the formulas of WRK17's bucketing."""

import numpy as np
import pytest

from shaper.kernels import tinyot

rng = np.random.default_rng(7)


def _paths(monkeypatch, fn, *args):
    got = fn(*args)
    monkeypatch.setattr(tinyot, "_native_ok", lambda: False)
    want = fn(*args)
    monkeypatch.undo()
    return got, want


@pytest.mark.parametrize("peers", [1, 2, 4])
def test_buckets_combine_by_the_formulas_on_both_paths(monkeypatch, peers):
    w, n, b = 1 + 2 * peers, 500, 3
    leaky = rng.integers(0, 1 << 63, (n * b, 3, w), dtype=np.uint64)
    idx = rng.permutation(n * b).reshape(n, b).astype(np.uint64)
    (d, a, y1), (d2, a2, y12) = _paths(monkeypatch, tinyot.open_, leaky, idx)
    for u, v in ((d, d2), (a, a2), (y1, y12)):
        np.testing.assert_array_equal(u, v)
    g = leaky[idx.astype(np.int64)]
    np.testing.assert_array_equal(a, g[:, 0, 0] ^ g[:, 1, 0] ^ g[:, 2, 0])
    np.testing.assert_array_equal(y1, g[:, 0, 1])
    np.testing.assert_array_equal(d.reshape(n, b - 1, w), g[:, :1, 1] ^ g[:, 1:, 1])
    bits = rng.integers(0, 2, (n, b - 1)).astype(bool)
    c, c2 = _paths(monkeypatch, tinyot.close, leaky, idx, bits)
    np.testing.assert_array_equal(c, c2)
    want = g[:, 0, 2].copy()
    for k in range(1, b):
        want ^= g[:, k, 2] ^ np.where(bits[:, k - 1, None], g[:, k, 0], np.uint64(0))
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("peers", [1, 3])
def test_rows_and_their_global_mac_shares_on_both_paths(monkeypatch, peers):
    n, lo = 300, 40
    bits = rng.integers(0, 2, n).astype(bool)
    macs = [rng.integers(0, 256, (lo + n + 5, 16), dtype=np.uint8) for _ in range(peers)]
    keys = [rng.integers(0, 256, (lo + n + 5, 16), dtype=np.uint8) for _ in range(peers)]
    delta = np.uint64(0x0123456789ABCDEF)
    outs = []
    for native in (True, False):
        if not native:
            monkeypatch.setattr(tinyot, "_native_ok", lambda: False)
        out = np.zeros((n, 3, 1 + 2 * peers), np.uint64)
        g = tinyot.rows_into(out, 1, bits, macs, keys, lo, delta)
        outs.append((out, g))
    (o1, g1), (o2, g2) = outs
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(g1, g2)
    low = lambda r: r[lo:lo + n].copy().view(np.uint64)[:, 0]  # noqa: E731
    want = np.where(bits, delta, np.uint64(0))
    for k in range(peers):
        want = want ^ low(macs[k]) ^ low(keys[k])
        np.testing.assert_array_equal(o1[:, 1, 1 + k], low(macs[k]))
        np.testing.assert_array_equal(o1[:, 1, 1 + peers + k], low(keys[k]))
    np.testing.assert_array_equal(g1, want)
    np.testing.assert_array_equal(o1[:, 1, 0], bits.astype(np.uint64))
    assert not o1[:, 0].any() and not o1[:, 2].any()   # the other parts untouched
