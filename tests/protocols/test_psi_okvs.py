"""OT-based PSI (protocol "okvs": a clustered 3-hash OKVS over SoftSpoken's subspace VOLE with a
binary BCH code) against Python's own set intersection: every case of test_psi.py, output to one
party or both, unequal sizes, cluster/batch/chunk boundaries, forced collisions in the ids and in
the OKVS (a pure-Python decoder as the oracle), the code against a GF(2^8) construction written
here, the parameters against scipy's binomial tail, malformed and truncated messages from a
deviating peer, a peer killed mid-run, two processes over TLS, and the automatic protocol choice.

okvs has no Python fallback: the tests that run it skip where the extension lacks the OKVS
kernels; the protocol choice and the parameter arithmetic run everywhere. ``SHAPER_NATIVE=off``
selects the modular-arithmetic engine only: OKVS (like ECDH) still runs in the extension there.
"""

import math
import os
import random
import re
import time
import unicodedata

import numpy as np
import pytest

from shaper.errors import KernelError, PartyError
from shaper.kernels import okvs as okvs_kernel
from shaper.net import NetConfig, launch, run_in_memory
from shaper.protocols import psi
from shaper.protocols.psi import okvs
from shaper.protocols.psi.items import PackedItems

from .test_psi import CASES, _check_both

NEEDS_OKVS = pytest.mark.skipif(not okvs_kernel.available(),
                                reason="OT-based PSI runs in the native extension only (no Python OT extension)")
OKVS = {"protocol": "okvs"}


def _native():
    return okvs_kernel.engine()


def _run(a, b, **options):
    def job(session):
        return psi.intersect(session, a if session.index == 0 else b, **{**OKVS, **options})

    return run_in_memory(2, job, timeout=120)


def _ids(prefix, values):
    return [f"{prefix}{i}" for i in values]


def _digests(n, rng):
    return rng.integers(0, 256, (n, 16), dtype=np.uint8)


def _decode(params, P, cluster, pos, dense):
    """Decode(P, x) for rows from ``okvs_rows``, written from the documented layout: the XOR of P
    at x's 3 sparse positions and at its dense positions (bit i: position sparse + i) within
    its cluster's block of sparse + dense values."""
    _, _, sparse, width_dense = params
    base = cluster.astype(np.int64) * (sparse + width_dense)
    pos = pos.astype(np.int64)
    value = P[base + pos[:, 0]] ^ P[base + pos[:, 1]] ^ P[base + pos[:, 2]]
    for i in range(width_dense):
        hit = ((dense >> np.uint64(i)) & np.uint64(1)).astype(bool)
        value = value ^ np.where(hit, P[base + sparse + i], np.uint64(0))
    return value


def _core(pos, sparse):
    """The rows left after peeling the 3-uniform hypergraph (the 2-core), in pure Python."""
    users = [[] for _ in range(sparse)]
    for i, row in enumerate(pos):
        for c in row:
            users[c].append(i)
    live = [True] * len(pos)
    degree = [len(u) for u in users]
    queue = [c for c in range(sparse) if degree[c] == 1]
    while queue:
        c = queue.pop()
        if degree[c] != 1:
            continue
        (i,) = [j for j in users[c] if live[j]]
        live[i] = False
        for d in pos[i]:
            degree[d] -= 1
            if degree[d] == 1:
                queue.append(d)
    return [i for i in range(len(pos)) if live[i]]


# -- 1. every case of test_psi.py, output to both -------------------------------------------------
@NEEDS_OKVS
@pytest.mark.parametrize("case", list(CASES))
def test_both_parties_learn_the_intersection_in_one_order(case):
    a, b = CASES[case]
    for x, y in ((a, b), (b, a)):  # either party the smaller (the learner R) or the tie's lower index
        ra, rb = _run(x, y, to="both")
        _check_both(x, y, ra, rb)
        assert ra.stats["protocol"] == rb.stats["protocol"] == "okvs"


@NEEDS_OKVS
def test_auto_runs_okvs_and_order_by_id_is_the_sorted_ids():
    a, b = _ids("k", range(0, 12000, 2)), _ids("k", range(0, 12000, 3))
    ra, rb = run_in_memory(2, lambda s: psi.intersect(s, a if s.index == 0 else b, order="id"), timeout=120)
    assert ra.stats["protocol"] == rb.stats["protocol"] == "okvs"
    _check_both(a, b, ra, rb)
    assert [a[i] for i in ra.indices] == sorted(set(a) & set(b))


# -- 2. output to one party -------------------------------------------------------------------------
@NEEDS_OKVS
@pytest.mark.parametrize("to", [0, 1, "party0", "party1"])
def test_one_party_learns_and_the_other_learns_nothing(to):
    """Party 0 holds the larger set, so to=0 makes the larger set R (the encoder)."""
    a, b = _ids("u", range(0, 15000, 3)), _ids("u", range(0, 15000, 4))[:3500]
    assert len(a) > len(b)
    ra, rb = _run(a, b, to=to)
    learner = to if isinstance(to, int) else int(to[-1])
    told, other = (ra, rb) if learner == 0 else (rb, ra)
    mine, theirs = (a, b) if learner == 0 else (b, a)
    expected = set(a) & set(b)
    got = [mine[i] for i in told.indices]
    assert set(got) == expected and len(got) == len(expected) and told.size == len(expected)
    assert told.peer_size == len(theirs) and other.peer_size == len(mine)
    assert other.indices is None and other.size is None
    assert told.stats["protocol"] == other.stats["protocol"] == "okvs"


@NEEDS_OKVS
@pytest.mark.parametrize("to", [0, 1])
def test_one_party_learns_with_an_empty_side(to):
    for a, b in (([], ["x", "y"]), (["x", "y"], []), ([], [])):
        ra, rb = _run(a, b, to=to)
        told, other = (ra, rb) if to == 0 else (rb, ra)
        assert len(told.indices) == 0 and told.size == 0 and other.indices is None and other.size is None
        assert ra.peer_size == len(b) and rb.peer_size == len(a)


# -- 3. unequal sizes, several clusters, batches and mask chunks -------------------------------------
@NEEDS_OKVS
@pytest.mark.parametrize("sizes", [(1, 5000), (5000, 3), (5000, 1)])
def test_very_unequal_sizes(sizes):
    n_a, n_b = sizes
    a = _ids("v", range(0, 2 * n_a, 2))
    b = _ids("v", range(0, 4 * n_b, 4)) if n_b > 1 else ["v0"]
    _check_both(a, b, *_run(a, b))
    for to in (0, 1):  # the larger set as R, then the smaller
        ra, rb = _run(a, b, to=to)
        told, mine = (ra, a) if to == 0 else (rb, b)
        assert {mine[i] for i in told.indices} == set(a) & set(b)


def _tapped(session, log):
    """Log (tag, bytes) of every bytes message this party receives."""
    real = session.recv_bytes

    def recv_bytes(peer, tag="", **kwargs):
        data = real(peer, tag, **kwargs)
        log.append((tag, len(data)))
        return data

    session.recv_bytes = recv_bytes


@NEEDS_OKVS
@pytest.mark.parametrize("n_a, n_b, to", [(3000, 3000, "both"), (2500, 3700, "both"), (3700, 2100, 0),
                                          (2000, 2000, 1)])
def test_many_clusters_batches_and_mask_chunks(monkeypatch, n_a, n_b, to):
    """With 64 ids per cluster, 3 clusters per batch and 1000 masks per chunk, a few thousand
    ids cross every boundary (one run's S has exactly 3 chunks of masks): the messages have
    the documented counts and lengths, and the result is the set intersection."""
    monkeypatch.setattr(okvs, "TARGET", 64)
    monkeypatch.setattr(okvs, "BATCH_CLUSTERS", 3)
    monkeypatch.setattr(okvs, "MASK_CHUNK", 1000)
    rng = random.Random(n_a + n_b)
    a, b = _ids("m", rng.sample(range(8000), n_a)), _ids("m", rng.sample(range(8000), n_b))
    logs = ([], [])
    events = ([], [])

    def job(session):
        _tapped(session, logs[session.index])
        return psi.intersect(session, a if session.index == 0 else b, protocol="okvs", to=to,
                             progress=events[session.index].append)

    ra, rb = run_in_memory(2, job, timeout=120)
    expected = set(a) & set(b)
    if to == "both":
        _check_both(a, b, ra, rb)
        r = 0 if (n_a, 0) < (n_b, 1) else 1
    else:
        r = to
        told, mine = (ra, a) if r == 0 else (rb, b)
        assert [mine[i] for i in told.indices] and {mine[i] for i in told.indices} == expected
    n_r, n_s = (n_a, n_b) if r == 0 else (n_b, n_a)
    clusters, capacity, sparse, dense = okvs.params_for(n_r)
    assert clusters == math.ceil(n_r / 64) and clusters > 3
    batches = math.ceil(clusters / 3)
    width = okvs.mask_bytes(n_r, n_s)
    # S received one "psi-okvs-u" per batch of 3 clusters: 24 bytes per position, rounded to 128
    got_u = [size for tag, size in logs[1 - r] if tag == "psi-okvs-u"]
    in_batch = [min(3, clusters - 3 * k) for k in range(batches)]
    assert got_u == [24 * math.ceil(c * (sparse + dense) / 128) * 128 for c in in_batch]
    # R received S's masks in chunks of 1000 rows
    got_m = [size for tag, size in logs[r] if tag == "psi-okvs-m"]
    assert got_m == [min(1000, n_s - c) * width for c in range(0, n_s, 1000)] and len(got_m) > 1
    assert [size for tag, size in logs[1 - r] if tag in ("psi-okvs-a", "psi-okvs-soft")] == [6 * 32, 6 * 4096]
    assert [size for tag, size in logs[r] if tag == "psi-okvs-b"] == [6 * 128 * 32]
    for party in (0, 1):
        okvs_events = [e for e in events[party] if e.get("stage") == "okvs"]
        assert [e["done"] for e in okvs_events] == list(range(1, batches + 1))
        assert {e["total"] for e in okvs_events} == {batches}


# -- 4. forced collisions ---------------------------------------------------------------------------
def _norm(x):
    return unicodedata.normalize("NFC", x).strip().casefold()


@NEEDS_OKVS
def test_ids_equal_after_strip_and_casefold_match():
    a = ["  Alice", "BOB", "carol ", "Zoë", "STRASSE", "e\u0301", "plain"]
    b = ["alice", "bob ", "dave", "ZOË", "straße", "\u00e9", "Plain\t"]
    ra, rb = _run(a, b, strip=True, casefold=True)
    got_a, got_b = [_norm(a[i]) for i in ra.indices], [_norm(b[i]) for i in rb.indices]
    assert got_a == got_b and set(got_a) == {_norm(x) for x in a} & {_norm(x) for x in b}
    assert len(got_a) == 6  # all but carol
    ra, rb = _run(a, b)  # exact (NFC only): "é" composed and decomposed are one id
    assert [a[i] for i in ra.indices] == ["e\u0301"] and [b[i] for i in rb.indices] == ["\u00e9"]
    with pytest.raises(PartyError, match="appears more than once"):
        _run(["Bob", " bob"], ["bob"], strip=True, casefold=True)
    ra, rb = _run(["x", "Bob", " bob", "BOB "], ["bob", "y"], strip=True, casefold=True, duplicates="first")
    assert ra.indices.tolist() == [1] and rb.indices.tolist() == [0] and ra.peer_size == 2 and rb.peer_size == 2


@NEEDS_OKVS
def test_multi_column_keys():
    rng = random.Random(5)
    a = list(dict.fromkeys((f"n{rng.randrange(20)}", rng.randrange(10)) for _ in range(40)))
    b = list(dict.fromkeys((f"n{rng.randrange(20)}", rng.randrange(10)) for _ in range(300)))
    assert set(a) & set(b)
    _check_both(a, b, *_run(a, b, columns=2))
    a, b = [("a b", 1), ("a", "b 1"), ("x", 7)], [("a", "b 1"), ("a b", "2"), ("ab", 1), ("x", "7")]
    ra, rb = _run(a, b, columns=2)  # the columns are not joined ambiguously; 7 is "7"
    assert sorted(ra.indices.tolist()) == [1, 2] and sorted(rb.indices.tolist()) == [0, 3]


@NEEDS_OKVS
def test_okvs_rows_are_well_formed():
    native = _native()
    rng = np.random.default_rng(20)
    params = (7, 1000, 11, 13)
    d = _digests(5000, rng)
    seed = os.urandom(16)
    cluster, pos, dense, value = native.okvs_rows(params, seed, d)
    assert cluster.shape == (5000,) and pos.shape == (5000, 3) and dense.shape == value.shape == (5000,)
    assert cluster.max() < 7 and set(np.unique(cluster).tolist()) == set(range(7))
    assert pos.max() < 11 and (pos[:, 0] != pos[:, 1]).all() and (pos[:, 0] != pos[:, 2]).all() \
        and (pos[:, 1] != pos[:, 2]).all()
    assert (dense < 2 ** 13).all() and dense.max() >= 2 ** 12
    again = native.okvs_rows(params, seed, d)
    assert all((x == y).all() for x, y in zip(again, (cluster, pos, dense, value)))
    other = native.okvs_rows(params, os.urandom(16), d)
    assert (other[3] != value).mean() > 0.99  # the seed keys the rows


@NEEDS_OKVS
def test_okvs_with_a_two_core_solves_it_over_the_dense_positions():
    """Tiny clusters (3 to 5 sparse positions for 4 to 20 items) leave a 2-core after peeling,
    so the dense Gaussian elimination path runs; with as many sparse positions as items, part of
    the rows peel and the rest form the core. Decode(P, x) == H(x) for every x, by the Python
    decoder."""
    native = _native()
    rng = np.random.default_rng(21)
    kinds = {"none": 0, "part": 0, "all": 0}
    for trial in range(340):
        n = 4 + trial % 17
        sparse = (3, 4, 5, n)[trial // 17 % 4]
        dense = 48 if trial % 5 else 64  # 64: the whole u64 is the dense mask
        params = (1, n, sparse, dense)
        d, seed = _digests(n, rng), os.urandom(16)
        cluster, pos, dense_mask, value = native.okvs_rows(params, seed, d)
        core = len(_core(pos.tolist(), sparse))
        kinds["none" if core == 0 else "all" if core == n else "part"] += 1
        P = native.okvs_encode(params, seed, d)
        assert P.dtype == np.uint64 and P.shape == (sparse + dense,)
        np.testing.assert_array_equal(_decode(params, P, cluster, pos, dense_mask), value)
    assert kinds["part"] >= 20 and kinds["all"] >= 100, kinds  # partial and whole 2-cores were exercised


@NEEDS_OKVS
def test_okvs_repeated_rows_are_dependent_but_consistent():
    """A repeated digest gives a row equal to another (same positions, same value): the
    elimination finds it dependent and consistent, and encoding succeeds."""
    native = _native()
    rng = np.random.default_rng(22)
    d = _digests(12, rng)
    d = np.concatenate([d, d[[0, 5, 5]]])
    params = (1, 15, 4, 40)
    seed = os.urandom(16)
    P = native.okvs_encode(params, seed, d)
    rows = native.okvs_rows(params, seed, d)
    np.testing.assert_array_equal(_decode(params, P, *rows[:3]), rows[3])


@NEEDS_OKVS
def test_okvs_refuses_what_it_cannot_encode():
    native = _native()
    rng = np.random.default_rng(23)
    with pytest.raises(ValueError, match=r"cannot encode a cluster of 100 items \(its 2-core has no solution over "
                                         r"the 8 dense positions\)"):
        native.okvs_encode((1, 100, 3, 8), os.urandom(16), _digests(100, rng))
    with pytest.raises(ValueError, match="holds 20 items, more than its capacity 5"):
        native.okvs_encode((1, 5, 10, 8), os.urandom(16), _digests(20, rng))
    for bad, message in [((0, 5, 3, 8), "1 to 2\\^24 clusters"), ((1, 0, 3, 8), "capacity must be"),
                         ((1, 5, 2, 8), "3 to 2\\^32 sparse"), ((1, 5, 3, 0), "1 to 64 dense"),
                         ((1, 5, 3, 65), "1 to 64 dense")]:
        with pytest.raises(ValueError, match=message):
            native.okvs_encode(bad, os.urandom(16), _digests(3, rng))
    with pytest.raises(ValueError, match="seed must be 16 bytes"):
        native.okvs_rows((1, 5, 3, 8), b"\0" * 15, _digests(3, rng))
    with pytest.raises(ValueError, match="shape"):
        native.okvs_rows((1, 5, 3, 8), b"\0" * 16, rng.integers(0, 256, (3, 8), dtype=np.uint8))


@NEEDS_OKVS
def test_receiver_refuses_a_cluster_over_capacity():
    native = _native()
    rng = np.random.default_rng(24)
    keys = os.urandom(6 * 2048), os.urandom(6 * 2048)
    def items(params, n):
        return native.OkvsItems(params, os.urandom(16), _digests(n, rng), 16, 10)

    with pytest.raises(ValueError, match="cluster 0 holds 10 items, more than its capacity 2"):
        native.OkvsReceiver(items((1, 2, 3, 8), 10), *keys, os.urandom(96))
    with pytest.raises(ValueError, match=r"cluster \d holds \d+ items, more than its capacity 3"):
        native.OkvsReceiver(items((4, 3, 4, 8), 40), *keys, os.urandom(96))
    with pytest.raises(ValueError, match="6 lanes need 12288 bytes"):
        native.OkvsReceiver(items((1, 20, 30, 8), 10), keys[0][:-1], keys[1], os.urandom(96))
    used = items((1, 10, 13, 8), 10)
    native.OkvsReceiver(used, *keys, os.urandom(96))
    with pytest.raises(ValueError, match="these OKVS items were used already"):
        native.OkvsReceiver(used, *keys, os.urandom(96))


def _simulated_base_ots():
    """The base OTs' outcome without running them: the sender's (k0, k1) per lane and OT, the
    receiver's choice bits Δ and the keys it chose (what BaseOtSender/BaseOtReceiver produce)."""
    k0, k1 = np.frombuffer(os.urandom(6 * 2048), np.uint8), np.frombuffer(os.urandom(6 * 2048), np.uint8)
    deltas = os.urandom(96)
    bits = np.unpackbits(np.frombuffer(deltas, np.uint8), bitorder="little").astype(bool)  # lane l, OT i: 128 l + i
    chosen = np.where(np.repeat(bits, 16), k1, k0)
    return k0.tobytes(), k1.tobytes(), deltas, chosen.tobytes()


@NEEDS_OKVS
def test_the_kernels_alone_give_equal_masks_exactly_on_common_items():
    """OkvsReceiver and OkvsSender without the network: masks agree on the common items and on
    no other; a message of the wrong length or a batch out of turn is refused by name."""
    native = _native()
    rng = np.random.default_rng(25)
    r_d, s_d = _digests(3000, rng), _digests(2500, rng)
    s_d[:900] = r_d[1000:1900]
    params, seed, width = (4, 1200, 1524, 50), os.urandom(16), 10
    k0, k1, deltas, chosen = _simulated_base_ots()
    r = native.OkvsReceiver(native.OkvsItems(params, seed, r_d, 3, width), k0, k1, os.urandom(96))
    s = native.OkvsSender(native.OkvsItems(params, seed, s_d, 3, width), chosen, deltas, r.setup_message)
    assert len(r.setup_message) == 6 * 4096 and r.batches == s.batches == 2
    r_masks, s_masks = np.zeros((3000, width), np.uint8), np.zeros((2500, width), np.uint8)
    with pytest.raises(ValueError, match="out of turn"):
        r.batch(1)
    for b in range(r.batches):
        u, mine, _ = r.batch(b)
        assert len(u) == r.message_len(b) == s.message_len(b)
        with pytest.raises(ValueError, match=f"message of batch {b} must be {len(u)} bytes, got {len(u) - 1}"):
            s.batch(b, u[:-1])
        start, stop = r.items(b)
        r_masks[r.order()[start:stop]] = mine
        start, stop = s.items(b)
        s_masks[s.order()[start:stop]] = s.batch(b, u)[0]
    with pytest.raises(ValueError, match="batch 2 of 2"):
        r.batch(2)
    assert sorted(r.order().tolist()) == list(range(3000)) and sorted(s.order().tolist()) == list(range(2500))
    theirs = {bytes(m) for m in s_masks}
    found = [i for i in range(3000) if bytes(r_masks[i]) in theirs]
    assert found == list(range(1000, 1900))
    assert all(bytes(r_masks[1000 + i]) == bytes(s_masks[i]) for i in range(900))
    assert len({bytes(m) for m in r_masks}) == 3000 and len(theirs) == 2500


# -- 5. the code against an independent GF(2^8) construction --------------------------------------
def _gf256():
    exp, log = [0] * 510, [0] * 256
    x = 1
    for i in range(255):
        exp[i] = exp[i + 255] = x
        log[x] = i
        x <<= 1
        if x & 0x100:
            x ^= 0x11D  # x^8 + x^4 + x^3 + x^2 + 1
    return exp, log


def _gf_mul(a, b, exp, log):
    return 0 if a == 0 or b == 0 else exp[log[a] + log[b]]


def _poly_eval(poly_bits, point, exp, log):
    """A GF(2) polynomial (bit i: coefficient of x^i) at a point of GF(2^8)."""
    value, power = 0, 1
    for i in range(poly_bits.bit_length()):
        if poly_bits >> i & 1:
            value ^= power
        power = _gf_mul(power, point, exp, log)
    return value


def _clmul(a, b):
    out = 0
    while a:
        low = a & -a
        out ^= b << (low.bit_length() - 1)
        a ^= low
    return out


def _generator():
    """The product of the distinct minimal polynomials of α^1..α^36 over GF(2)."""
    exp, log = _gf256()
    g, seen = 1, set()
    for i in range(1, 37):
        coset = frozenset(i * 2 ** j % 255 for j in range(8))
        if coset in seen:
            continue
        seen.add(coset)
        poly = [1]  # over GF(2^8), lowest degree first
        for e in coset:
            root = exp[e]
            poly = [(poly[k - 1] if k else 0) ^ (_gf_mul(poly[k], root, exp, log) if k < len(poly) else 0)
                    for k in range(len(poly) + 1)]
        assert set(poly) <= {0, 1}, "a minimal polynomial has binary coefficients"
        g = _clmul(g, sum(c << k for k, c in enumerate(poly)))
    return g


def _codeword_ints(words):
    return [int(c0) | int(c1) << 64 | int(c2) << 128 for c0, c1, c2 in words]


@NEEDS_OKVS
def test_the_code_is_v_times_the_bch_generator():
    native = _native()
    exp, log = _gf256()
    g = _generator()
    assert g.bit_length() - 1 == 124
    assert all(_poly_eval(g, exp[i], exp, log) == 0 for i in range(1, 37))
    assert _poly_eval(g, exp[37], exp, log) != 0  # designed distance exactly 37 (α^37 is no root)
    rng = np.random.default_rng(30)
    v = rng.integers(0, 2 ** 64, 500, dtype=np.uint64, endpoint=False)
    v[:3] = [1, 1 << 63, 2 ** 64 - 1]
    code = native.okvs_code(v)
    assert code.dtype == np.uint64 and code.shape == (500, 3)
    words = _codeword_ints(code)
    assert words[0] == g
    assert all(c == _clmul(int(x), g) for c, x in zip(words, v))
    assert all(c >> 188 == 0 for c in words)  # degree ≤ 63 + 124: the last 4 of 192 bits stay 0
    for c in words[:20]:  # every codeword is a BCH codeword: α^1..α^36 are its roots
        assert all(_poly_eval(c, exp[i], exp, log) == 0 for i in range(1, 37))
    w = rng.integers(0, 2 ** 64, 500, dtype=np.uint64)
    np.testing.assert_array_equal(native.okvs_code(v ^ w), code ^ native.okvs_code(w))  # linear
    np.testing.assert_array_equal(native.okvs_code(np.zeros(4, np.uint64)), np.zeros((4, 3), np.uint64))


@NEEDS_OKVS
def test_every_codeword_has_weight_at_least_37():
    native = _native()
    rng = np.random.default_rng(31)
    singles = np.uint64(1) << np.arange(64, dtype=np.uint64)
    pairs = np.array([(1 << i) | (1 << j) for i in range(64) for j in range(i)], dtype=np.uint64)
    randoms = rng.integers(1, 2 ** 64, 4000, dtype=np.uint64, endpoint=False)
    bursts = np.array([((1 << k) - 1) << s for k in range(2, 20) for s in range(0, 64 - k, 3)], dtype=np.uint64)
    v = np.concatenate([singles, pairs, randoms, bursts])
    assert (v != 0).all()
    code = native.okvs_code(v)
    weight = np.unpackbits(code.view(np.uint8), axis=1).sum(axis=1)
    assert weight.min() >= 37, f"a codeword of weight {weight.min()} for v={int(v[weight.argmin()]):#x}"


# -- 6. the OKVS at realistic size and at the protocol's own small parameters --------------------------
@NEEDS_OKVS
def test_okvs_at_twenty_thousand_ids_decodes_every_value():
    native = _native()
    ids = _ids("real-", range(20_000))
    d = PackedItems.encode(ids).digests(okvs.DIGEST_PREFIX, 16)
    params = okvs.params_for(20_000)
    assert params[0] == 2
    seed = os.urandom(16)
    P = native.okvs_encode(params, seed, d)
    assert P.shape == (params[0] * (params[2] + params[3]),)
    cluster, pos, dense, value = native.okvs_rows(params, seed, d)
    np.testing.assert_array_equal(_decode(params, P, cluster, pos, dense), value)
    assert np.bincount(cluster, minlength=2).max() <= params[1]
    others = native.okvs_rows(params, seed, PackedItems.encode(_ids("other-", range(2000))).digests(
        okvs.DIGEST_PREFIX, 16))
    assert not (_decode(params, P, *others[:3]) == others[3]).any()  # non-members: random (2^-64 each)
    broken = P.copy()
    broken[int(pos[0, 0]) + int(cluster[0]) * (params[2] + params[3])] ^= np.uint64(1)
    assert (_decode(params, broken, cluster, pos, dense) != value).sum() >= 1  # the decoder reads P


@NEEDS_OKVS
def test_small_clusters_at_the_protocols_own_parameters_all_encode():
    """A set of R's below 2^14 ids is one cluster of capacity n with 1.27 n sparse positions. Every
    one of 300 random sets must encode (the failure chance is meant to be below 2^-40)."""
    native = _native()
    rng = np.random.default_rng(32)
    failed = {}
    for n in (3, 10, 60, 100, 300, 1000):
        params = okvs.params_for(n)
        assert params[:2] == (1, n)
        for _ in range(50):
            d, seed = _digests(n, rng), os.urandom(16)
            try:
                P = native.okvs_encode(params, seed, d)
            except ValueError:
                failed[n] = failed.get(n, 0) + 1
                continue
            cluster, pos, dense, value = native.okvs_rows(params, seed, d)
            np.testing.assert_array_equal(_decode(params, P, cluster, pos, dense), value)
    assert not failed, f"sets of n ids that failed to encode at okvs.params_for(n), of 50 each: {failed}"


@NEEDS_OKVS
def test_a_learner_with_a_few_hundred_ids_never_fails():
    """The same through the protocol: 20 runs with a 300-id learner all finish."""
    b = _ids("f", range(0, 1200, 2))
    errors = []
    for k in range(20):
        a = _ids("f", random.Random(k).sample(range(1200), 300))
        try:
            ra, _ = _run(a, b, to=0)
        except PartyError as exc:
            errors.append(str(exc).splitlines()[0])
            continue
        assert {a[i] for i in ra.indices} == set(a) & set(b)
    assert not errors, f"{len(errors)} of 20 runs failed: {errors[0]}"


# -- 7. parameters ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, clusters", [(1 << 20, 64), (1 << 24, 1024), (20_000, 2), (3000, 47), (100_000, 7),
                                         (50, 3)])
def test_capacity_is_the_least_with_a_binomial_tail_below_2_to_minus_40(n, clusters):
    c = okvs.capacity_for(n, clusters)
    assert math.ceil(n / clusters) <= c <= n
    stats = pytest.importorskip("scipy.stats")
    p = 1 / clusters
    assert clusters * stats.binom.sf(c, n, p) <= 2.0 ** -40
    assert clusters * stats.binom.sf(c - 1, n, p) > 2.0 ** -40


def test_parameters():
    assert okvs.capacity_for(5000, 1) == 5000 and okvs.capacity_for(0, 3) == 1
    assert okvs.mask_bytes(1 << 20, 1 << 20) == 10 and okvs.mask_bytes(1 << 24, 1 << 24) == 11
    for n_r, n_s in [(1, 1), (2, 3), (1000, 1), (1 << 20, (1 << 20) + 1), (12345, 678)]:
        bits = 40 + math.ceil(math.log2(n_r)) + math.ceil(math.log2(n_s))
        assert okvs.mask_bytes(n_r, n_s) == math.ceil(bits / 8)
    for n in (1 << 20, 1 << 24):
        clusters, capacity, sparse, dense = okvs.params_for(n)
        assert clusters == n // okvs.TARGET and capacity == okvs.capacity_for(n, clusters)
        assert clusters * (sparse + dense) / n <= 1.38  # positions per id
        assert sparse >= 1.27 * capacity and dense <= 64
    for n in (1, 2, 3, 100, 16384, 16385, 50_000, 1 << 20):  # what R announces, S accepts
        params = okvs.params_for(n)
        assert okvs._check_params(list(params), n) == params
        assert okvs.clusters_for(n) == params[0] == max(1, math.ceil(n / okvs.TARGET))


# -- 8. malformed and truncated messages from a deviating party ------------------------------------
def _deviating(session, tag, alter, *, pipelined=False):
    """Make this party send ``alter(value)`` instead of its message under ``tag`` (None: send
    nothing). ``pipelined``: the message goes through ``send_pipelined`` (S's masks), and
    ``alter(k, payload)`` gets each chunk with its index."""
    if pipelined:
        real_pipelined = session.send_pipelined

        def send_pipelined(peer, items, produce, tag=""):
            if tag == wanted:
                payloads = [alter(k, produce(item)) for k, item in enumerate(items)]
                items, produce = [p for p in payloads if p is not None], bytes
            return real_pipelined(peer, items, produce, tag=tag)

        wanted = tag
        session.send_pipelined = send_pipelined
        return
    real = session.send

    def send(peer, value, t=""):
        if t == tag:
            value = alter(value)
            if value is None:
                return 0
        return real(peer, value, t)

    session.send = send


def _deviate(a, b, who, tag, alter, pipelined=False, **options):
    """Run with party ``who`` deviating; returns the PartyError's text and every party's error."""
    seen = []

    def job(session):
        if session.index == who:
            _deviating(session, tag, alter, pipelined=pipelined)
        try:
            return psi.intersect(session, a if session.index == 0 else b, **{**OKVS, **options})
        except Exception as exc:
            seen.append((session.index, type(exc).__name__, str(exc)))
            raise

    with pytest.raises(PartyError) as info:
        run_in_memory(2, job, config=NetConfig(timeout=60), timeout=120)
    return str(info.value), seen


A, B = _ids("d", range(30)), _ids("d", range(12, 62))  # party 0 (the smaller set) is R for to="both"


def _setup(**changes):
    return lambda v: {**v, **changes}


def _params(clusters, capacity, sparse=None, dense=None):
    """R's announced parameters, consistent with each other except where told otherwise."""
    return [clusters, capacity, okvs.sparse_for(capacity) if sparse is None else sparse,
            okvs.dense_for(capacity, clusters) if dense is None else dense]


MALFORMED = [
    pytest.param(0, "psi-hello", _setup(version="shaper-psi/okvs/0"), "peer runs PSI protocol 'shaper-psi/okvs/0'",
                 id="hello-version"),
    pytest.param(0, "psi-hello", _setup(n=-1), "announced an invalid set size -1", id="hello-negative-n"),
    pytest.param(0, "psi-hello", _setup(n="30"), "announced an invalid set size '30'", id="hello-text-n"),
    pytest.param(1, "psi-hello", _setup(n=2 ** 32 + 1), "more than OT-based PSI takes", id="hello-huge-n"),
    pytest.param(0, "psi-hello", _setup(n=29), r"OKVS parameters \[1, 30, 81, 47\] do not fit its 29 ids",
                 id="hello-n-short-by-one"),
    pytest.param(0, "psi-hello", _setup(to="party0"), "disagree on to", id="hello-to"),
    pytest.param(0, "psi-okvs-setup", _setup(seed="zz" * 16), "OKVS seed is not 16 bytes of hex: 'zzzz",
                 id="seed-not-hex"),
    pytest.param(0, "psi-okvs-setup", lambda v: {**v, "seed": v["seed"][:30]}, "OKVS seed is not 16 bytes of hex",
                 id="seed-15-bytes"),
    pytest.param(0, "psi-okvs-setup", lambda v: {**v, "seed": v["seed"] + "00"}, "OKVS seed is not 16 bytes of hex",
                 id="seed-17-bytes"),
    pytest.param(0, "psi-okvs-setup", lambda v: {**v, "seed": v["seed"][:31]}, "OKVS seed is not 16 bytes of hex",
                 id="seed-odd-hex"),
    pytest.param(0, "psi-okvs-setup", _setup(seed=7), "OKVS seed is not 16 bytes of hex: 7", id="seed-int"),
    pytest.param(0, "psi-okvs-setup", lambda v: [v], "OKVS seed is not 16 bytes of hex: None", id="setup-a-list"),
    pytest.param(0, "psi-okvs-setup", _setup(params=_params(2, 15)), r"\[2, 15, \d+, \d+\] do not fit its 30 ids",
                 id="params-clusters"),
    pytest.param(0, "psi-okvs-setup", _setup(params=_params(1, 31)), r"\[1, 31, \d+, \d+\] do not fit its 30 ids",
                 id="params-capacity-above-n"),
    pytest.param(0, "psi-okvs-setup", _setup(params=_params(1, 14)), r"\[1, 14, \d+, \d+\] do not fit its 30 ids",
                 id="params-capacity-below-mean"),
    pytest.param(0, "psi-okvs-setup", _setup(params=_params(1, 30, sparse=40)), r"\[1, 30, 40, 47\] do not fit",
                 id="params-sparse"),
    pytest.param(0, "psi-okvs-setup", _setup(params=_params(1, 30, dense=64)), r"\[1, 30, 81, 64\] do not fit",
                 id="params-dense"),
    pytest.param(0, "psi-okvs-setup", _setup(params=[1, 30, 39]), "OKVS parameters are malformed",
                 id="params-three"),
    pytest.param(0, "psi-okvs-setup", _setup(params=[True, 30, 39, 48]), "OKVS parameters are malformed",
                 id="params-bool"),
    pytest.param(0, "psi-okvs-setup", _setup(params=[1.0, 30, 39, 48]), "OKVS parameters are malformed",
                 id="params-float"),
    pytest.param(0, "psi-okvs-setup", _setup(params=None), "OKVS parameters are malformed: None", id="params-none"),
    pytest.param(0, "psi-okvs-a", lambda v: v[:-1], "sent 191 bytes under tag 'psi-okvs-a'; expected 192",
                 id="a-truncated"),
    pytest.param(0, "psi-okvs-a", lambda v: bytes(len(v)), "base-OT message is invalid", id="a-identity"),
    pytest.param(1, "psi-okvs-b", lambda v: v[:-1], "sent 24575 bytes under tag 'psi-okvs-b'; expected 24576",
                 id="b-truncated"),
    pytest.param(1, "psi-okvs-b", lambda v: v[:-32], "sent 24544 bytes under tag 'psi-okvs-b'; expected 24576",
                 id="b-one-point-short"),
    pytest.param(1, "psi-okvs-b", lambda v: bytes(len(v)), "base-OT reply is invalid", id="b-identity"),
    pytest.param(0, "psi-okvs-soft", lambda v: v[:-1], "sent 24575 bytes under tag 'psi-okvs-soft'; expected 24576",
                 id="soft-truncated"),
    pytest.param(0, "psi-okvs-u", lambda v: v[:-1], r"sent 3071 bytes under tag 'psi-okvs-u'; expected 3072",
                 id="u-one-byte-short"),
    pytest.param(0, "psi-okvs-u", lambda v: v + b"\0", r"sent 3073 bytes under tag 'psi-okvs-u'; expected 3072",
                 id="u-one-byte-long"),
    pytest.param(0, "psi-rows", lambda v: np.append(v, 50), "intersection rows are out of range or repeated",
                 id="rows-past-the-end"),
    pytest.param(0, "psi-rows", lambda v: np.append(v, -1), "intersection rows are out of range or repeated",
                 id="rows-negative"),
    pytest.param(0, "psi-rows", lambda v: np.append(v, v[0]), "intersection rows are out of range or repeated",
                 id="rows-repeated"),
    pytest.param(0, "psi-rows", lambda v: np.arange(31), "intersection rows are out of range or repeated",
                 id="rows-more-than-r-has"),
    pytest.param(0, "psi-rows", lambda v: v.astype(np.int32), "sent dtype int32 under tag 'psi-rows'; expected int64",
                 id="rows-int32"),
    pytest.param(0, "psi-rows", lambda v: v.reshape(-1, 1), "intersection rows are out of range or repeated",
                 id="rows-2d"),
]


@NEEDS_OKVS
@pytest.mark.parametrize("who, tag, alter, message", MALFORMED)
def test_a_malformed_message_is_refused_by_name(who, tag, alter, message):
    """Party 0 (R) or party 1 (S) follows the protocol but alters one message: the honest party
    ends with an error naming the problem, and that error is the run's root cause."""
    text, seen = _deviate(A, B, who, tag, alter)
    assert re.search(message, text), text
    honest = [m for i, _, m in seen if i == 1 - who]
    assert len(honest) == 1 and re.search(message, honest[0]), seen


@NEEDS_OKVS
@pytest.mark.parametrize("chunk", ["first-truncated", "last-truncated", "first-long"])
def test_a_malformed_mask_chunk_is_refused_by_name(monkeypatch, chunk):
    monkeypatch.setattr(okvs, "MASK_CHUNK", 1000)
    a, b = _ids("w", range(40)), _ids("w", range(2300))  # S = party 1: chunks of 1000, 1000 and 300 masks
    width = okvs.mask_bytes(40, 2300)
    k, rows, delta = {"first-truncated": (0, 1000, -1), "last-truncated": (2, 300, -width),
                      "first-long": (0, 1000, 1)}[chunk]

    def alter(i, payload):
        if i != k:
            return payload
        return payload[:delta] if delta < 0 else payload + bytes(delta)

    text, seen = _deviate(a, b, 1, "psi-okvs-m", alter, pipelined=True, to=0)
    message = f"party 'party1' sent {rows * width + delta} bytes under tag 'psi-okvs-m'; expected {rows * width}"
    assert message in text
    assert seen[0][:2] == (0, "FrameError")


@NEEDS_OKVS
def test_masks_out_of_order_are_refused_by_name(monkeypatch):
    """S must send its masks sorted by value (R merges them against its own): two swapped masks
    in a chunk end R's run with a FrameError naming the order, not a wrong intersection."""
    monkeypatch.setattr(okvs, "MASK_CHUNK", 1000)
    a, b = _ids("w", range(40)), _ids("w", range(2300))
    width = okvs.mask_bytes(40, 2300)

    def swap(i, payload):
        if i != 1:
            return payload
        rows = bytearray(payload)
        rows[:width], rows[width:2 * width] = payload[width:2 * width], payload[:width]
        return bytes(rows)

    text, seen = _deviate(a, b, 1, "psi-okvs-m", swap, pipelined=True, to=0)
    assert "the peer's masks are malformed: the peer's masks are not in ascending order" in text
    assert seen[0][:2] == (0, "FrameError")


@NEEDS_OKVS
def test_missing_masks_or_a_lying_size_end_in_clear_errors(monkeypatch):
    """S sends one chunk of masks fewer (then ends its run): R ends with an error, not a hang. S
    announces fewer ids than it holds: its masks do not fit what R expects."""
    monkeypatch.setattr(okvs, "MASK_CHUNK", 1000)
    a, b = _ids("w", range(40)), _ids("w", range(2300))
    text, seen = _deviate(a, b, 1, "psi-okvs-m", lambda k, chunk: None if k == 2 else chunk, pipelined=True, to=0)
    assert [(i, kind) for i, kind, _ in seen] == [(0, "PeerError")]
    assert "party 'party1'" in seen[0][2], seen
    width = okvs.mask_bytes(40, 2299)
    text, seen = _deviate(a, b, 1, "psi-hello", _setup(n=2299), to=0)
    assert f"sent {300 * width} bytes under tag 'psi-okvs-m'; expected {299 * width}" in text


# -- 9. a peer killed mid-run --------------------------------------------------------------------------
def _dies_after_first_u(session, how):
    real = session.send

    def send(peer, value, tag=""):
        sent = real(peer, value, tag)
        if tag == "psi-okvs-u":
            if how == "raise":
                raise RuntimeError("killed after its first OKVS message")
            if how == "stall":
                session.recv(peer, "never", timeout=120)  # alive but silent, until the peer gives up
            if how == "exit":
                os._exit(3)
        return sent

    session.send = send


@NEEDS_OKVS
@pytest.mark.parametrize("how", ["raise", "stall"])
def test_a_peer_killed_after_its_first_okvs_message(monkeypatch, how):
    """R (party 0) dies, or stalls, after its first of several OKVS messages: S ends with a clear
    error (the abort, or its receive timeout), never a hang."""
    monkeypatch.setattr(okvs, "TARGET", 64)
    monkeypatch.setattr(okvs, "BATCH_CLUSTERS", 2)
    a, b = _ids("k", range(600)), _ids("k", range(300, 1000))
    seen = []

    def job(session):
        if session.index == 0:
            _dies_after_first_u(session, how)
        try:
            return psi.intersect(session, a if session.index == 0 else b, protocol="okvs")
        except Exception as exc:
            seen.append((session.index, type(exc).__name__, str(exc)))
            raise

    start = time.monotonic()
    with pytest.raises(PartyError) as info:
        run_in_memory(2, job, config=NetConfig(timeout=4 if how == "stall" else 60), timeout=120)
    assert time.monotonic() - start < 100
    s_errors = [(kind, text) for i, kind, text in seen if i == 1]
    assert len(s_errors) == 1
    if how == "raise":
        assert "killed after its first OKVS message" in str(info.value)
        assert s_errors[0][0] == "PeerError" and "party 'party0' aborted: RuntimeError" in s_errors[0][1]
        assert "psi-okvs-u" in s_errors[0][1]  # the last message it sent
    else:
        assert s_errors[0][0] == "PeerTimeout"
        assert "no message tagged 'psi-okvs-u' from party 'party0' within 4" in s_errors[0][1]


def _process_job(session, ids, kill, record):
    if kill and session.index == 0:
        _dies_after_first_u(session, "exit")
    try:
        result = psi.intersect(session, ids[session.index], protocol="okvs")
    except Exception as exc:
        with open(f"{record}.{session.index}", "w") as f:
            f.write(f"{type(exc).__name__}: {exc}")
        raise
    return [ids[session.index][i] for i in result.indices]


@NEEDS_OKVS
def test_a_process_that_exits_mid_run_ends_the_run(tmp_path):
    ids = (_ids("e", range(0, 40)), _ids("e", range(20, 80)))
    start = time.monotonic()
    with pytest.raises(PartyError, match="party 'party0' failed: .*exited with code 3"):
        launch(2, _process_job, ids, True, str(tmp_path / "error"), timeout=120)
    assert time.monotonic() - start < 100
    survivor = (tmp_path / "error.1").read_text()
    assert survivor.startswith(("PeerError", "NetError")) and "party0" in survivor, survivor


# -- 10. two processes over loopback TLS ---------------------------------------------------------------
@NEEDS_OKVS
def test_two_processes_over_tls(tmp_path):
    ids = (_ids("t", range(0, 12000, 3)), _ids("t", range(0, 12000, 2)))
    a, b = launch(2, _process_job, ids, False, str(tmp_path / "error"), timeout=120)
    assert a == b and set(a) == set(ids[0]) & set(ids[1]) and len(a) == 2000


# -- 11. the automatic choice ---------------------------------------------------------------------------
def test_resolve_picks_okvs_where_it_applies(monkeypatch):
    monkeypatch.setattr(okvs_kernel, "available", lambda: True)
    assert psi.resolve() == psi.resolve("auto") == "okvs"
    assert psi.resolve(cardinality_only=True) == "ecdh"
    assert psi.resolve(checkpoint=True) == "ecdh"
    assert psi.resolve(labelled=True) == "okvs"
    assert psi.resolve(labelled=True, cardinality_only=True) == psi.resolve(labelled=True, checkpoint=True) == "fnp"
    for name in ("okvs", "ecdh", "fnp", "bogus"):
        assert psi.resolve(name, cardinality_only=True, checkpoint=True) == name  # explicit names pass
    monkeypatch.setattr(okvs_kernel, "available", lambda: False)
    assert psi.resolve() == "ecdh" and psi.resolve(labelled=True) == "fnp"


def test_resolve_follows_the_build():
    assert psi.resolve() == ("okvs" if okvs_kernel.available() else "ecdh")


def test_okvs_without_the_kernels_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(okvs_kernel, "_native", None)
    assert not okvs_kernel.available() and psi.resolve() == "ecdh"
    with pytest.raises(KernelError, match="protocol 'okvs'\\) needs shaper's native extension"):
        okvs_kernel.engine()
    with pytest.raises(PartyError, match="needs shaper's native extension"):
        _run(["a"], ["a"])


@pytest.mark.parametrize("options, message", [
    ({"cardinality_only": True}, "protocol 'okvs' cannot tell only the intersection's size"),
    ({"checkpoint_dir": "unused"}, "protocol 'okvs' keeps no checkpoint"),
    ({"payload_bytes": 4}, "labelled PSI gives the payloads to one party"),
    ({"payload_bytes": 4, "to": 0}, r"the party that does not learn passes one payload per id \(1\), got none"),
    ({"payload_bytes": 1 << 16, "to": 0}, "payload_bytes must be 0 to 32768"),
    ({"to": "party7"}, "to must be 'both' or a party of the session"),
])
def test_explicit_okvs_refuses_options_it_cannot_serve(options, message, tmp_path):
    if "checkpoint_dir" in options:
        options = {**options, "checkpoint_dir": str(tmp_path)}
    if ("to must be" in message or "payload" in message) and not okvs_kernel.available():
        pytest.skip("the choice of learner and the payloads are checked after the kernels are found")
    with pytest.raises(PartyError, match=message):
        _run(["a"], ["a"], **options)
    assert not any(tmp_path.iterdir())


@NEEDS_OKVS
def test_auto_runs_ecdh_or_fnp_where_okvs_does_not_apply(tmp_path):
    a, b = _ids("r", range(0, 60, 2)), _ids("r", range(0, 60, 3))
    expected = set(a) & set(b)

    def job(session, **options):
        return psi.intersect(session, a if session.index == 0 else b, **options)

    ra, rb = run_in_memory(2, job, cardinality_only=True)
    assert ra.stats["protocol"] == rb.stats["protocol"] == "ecdh" and ra.size == rb.size == len(expected)
    ra, rb = run_in_memory(2, job, checkpoint_dir=str(tmp_path))
    assert ra.stats["protocol"] == "ecdh"
    _check_both(a, b, ra, rb)

    def labelled(session):
        pay = {"payloads": [x.encode() for x in b]} if session.index else {}
        return psi.intersect(session, a if session.index == 0 else b, to=0, payload_bytes=4, key_bits=768,
                             checkpoint_dir=str(tmp_path / "fnp"), **pay)

    ra, rb = run_in_memory(2, labelled)
    assert ra.stats["protocol"] == "fnp"  # labelled and checkpointed: okvs keeps no checkpoint
    assert {a[i]: p.rstrip(b"\0").decode() for i, p in zip(ra.indices, ra.stats["payloads"])} == \
        {x: x for x in expected}


@NEEDS_OKVS
def test_a_party_without_the_kernels_meets_an_okvs_peer_with_a_clear_error(monkeypatch):
    """"auto" on a party without the OKVS kernels picks ECDH: the hello names both protocols."""
    import threading

    real = okvs_kernel.available
    monkeypatch.setattr(okvs_kernel, "available", lambda: real() and threading.current_thread().name != "party-party1")
    with pytest.raises(PartyError, match=r"peer runs PSI protocol 'shaper-psi/(ecdh|okvs)[^']*', this party "
                                         r"'shaper-psi/(okvs|ecdh)"):
        run_in_memory(2, lambda s: psi.intersect(s, ["a", "b"]), timeout=60)


@NEEDS_OKVS
def test_okvs_runs_the_same_with_shaper_native_off(monkeypatch):
    """SHAPER_NATIVE picks the modular-arithmetic engine; OT-based PSI has only its native core and
    runs there under every setting (CI's SHAPER_NATIVE=off pass runs this module unchanged)."""
    monkeypatch.setenv("SHAPER_NATIVE", "off")
    a, b = CASES["disjoint"][0] + ["s"], CASES["disjoint"][1] + ["s"]
    ra, rb = run_in_memory(2, lambda s: psi.intersect(s, a if s.index == 0 else b), timeout=60)
    assert ra.stats["protocol"] == "okvs"
    _check_both(a, b, ra, rb)


# -- labelled PSI -------------------------------------------------------------------------------------------
@NEEDS_OKVS
@pytest.mark.parametrize("learner", [0, 1])
def test_labelled_okvs_gives_the_learner_exactly_the_payloads_of_the_shared_ids(monkeypatch, learner):
    """The learner (either party, the larger set or the smaller) gets, for each of its matched
    rows, the other party's payload byte for byte: empty, short, full-length, binary and UTF-8
    payloads, across clusters, batches and mask chunks; the other party learns nothing."""
    monkeypatch.setattr(okvs, "TARGET", 64)
    monkeypatch.setattr(okvs, "BATCH_CLUSTERS", 3)
    monkeypatch.setattr(okvs, "MASK_CHUNK", 500)
    rng = random.Random(11)
    a, b = _ids("l", rng.sample(range(4000), 900)), _ids("l", rng.sample(range(4000), 2100))
    ids = (a, b)
    sender = 1 - learner
    payload = {x: (b"" if i % 7 == 0 else bytes([i % 256]) * (i % 24) + x.encode() if i % 3 else
                   "é✓".encode() * 3) for i, x in enumerate(ids[sender])}
    width = max(len(p) for p in payload.values())

    def job(session):
        mine = ids[session.index]
        pay = {"payloads": [payload[x] for x in mine]} if session.index == sender else {}
        return psi.intersect(session, mine, protocol="auto", to=learner, payload_bytes=width, **pay)

    results = run_in_memory(2, job)
    got, other = results[learner], results[sender]
    assert got.stats["protocol"] == "okvs"
    mine = ids[learner]
    assert {mine[i] for i in got.indices} == set(a) & set(b)
    assert [payload[mine[i]] for i in got.indices] == got.stats["payloads"]
    assert other.indices is None and other.size is None and "payloads" not in other.stats


@NEEDS_OKVS
def test_labelled_okvs_refuses_a_payload_that_opens_too_long():
    """A sender that seals a length above payload_bytes (here: it tampers with the sealed rows'
    length bytes) makes the learner stop with a FrameError naming it, not hand back garbage."""
    a, b = _ids("t", range(40)), _ids("t", range(20, 60))

    def tamper(k, chunk):
        rows = np.frombuffer(chunk, np.uint8).reshape(-1, 6).copy()
        rows[:, 1] ^= 0x80  # the length's high byte: every payload opens to over 32 KiB
        return rows.tobytes()

    def job(session):
        if session.index == 1:
            _deviating(session, "psi-okvs-p", tamper, pipelined=True)
        pay = {"payloads": [x.encode()[:4] for x in b]} if session.index else {}
        return psi.intersect(session, a if session.index == 0 else b, protocol="okvs", to=0, payload_bytes=4, **pay)

    with pytest.raises(PartyError, match="the peer's payload for a shared id opens to .* more than payload_bytes=4"):
        run_in_memory(2, job, config=NetConfig(timeout=60), timeout=120)
