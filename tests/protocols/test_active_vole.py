"""Silent VOLE (:mod:`shaper.protocols.active.vole`): the pool's values carry valid MACs and
are uniform, the triples made on it are right, the native LPN encoder matches an independent
re-computation of its code, and every deviation of a receiver or an owner is caught or harmless:

=========================================  =================================================
deviation                                  caught by / outcome
=========================================  =================================================
a receiver's level sums, one byte off      the run's check (both sides' sums) or nothing
  on one side only                         (the owner took the other side): caught or right
a receiver's level sums, every byte off    the run's check, always
a receiver's d (its masked MAC share)      the run's check
an owner's base corrections (COPE)         the run's check where the receiver's key bit
                                           uses them, no effect elsewhere (MASCOT)
the run's check opening not sent           the receive timeout
a correction broadcast to one peer only    the views differ / the MAC check
a correction of c shifted                  the triples' sacrifice
=========================================  =================================================
"""

import importlib.util

import numpy as np
import pytest

from shaper.net import run_in_memory
from shaper.protocols.active import ActiveEngine, preprocessing, vole

from .deviating import Deviation, run
from .test_active import assert_all_stopped, honest

NATIVE = importlib.util.find_spec("shaper._native") is not None and vole.available()
pytestmark = pytest.mark.skipif(not NATIVE, reason="silent VOLE needs the native extension")

P = (1 << 61) - 1
Q50 = 1125899906842597
COUNT = vole.SILENT_MIN


def shared_program(session, count=COUNT, moduli=(P,)):
    e = ActiveEngine(session)
    x = preprocessing.random_shared(e, count, moduli, e.keys(moduli))
    y = preprocessing.random_shared(e, 8, moduli, e.keys(moduli))
    return x.reveal(), y.reveal(), e.silent.made


@pytest.mark.parametrize("parties", [2, 3])
def test_shared_pool_values_open_with_valid_macs_and_look_uniform(parties):
    res = run_in_memory(parties, shared_program)
    x, y, made = res[0]
    assert all(np.array_equal(r[0], x) and np.array_equal(r[1], y) for r in res)
    assert made == vole.LPN.usable  # one run served both takes (its first values: the next base)
    v = x[:, 0]
    assert len(set(v.tolist())) == COUNT and not set(y[:, 0].tolist()) & set(v.tolist())
    # the top bit is set about half the time (a uniform residue mod 2^61 - 1)
    assert abs(float(np.mean(v >> np.uint64(60))) - 0.5) < 0.05


def test_later_runs_take_their_base_from_the_last_run_and_stay_checked(monkeypatch):
    calls = []
    real = vole.cope_split
    monkeypatch.setattr(vole, "cope_split", lambda *a, **k: calls.append(1) or real(*a, **k))

    def prog(session):
        e = ActiveEngine(session)
        x = preprocessing.random_shared(e, vole.LPN.usable + 5, (P,), e.keys((P,)))
        return x[-COUNT:].reveal(), e.silent.runs

    res = run_in_memory(2, prog)
    assert res[0][1] == 2 and len(calls) == 2  # one COPE base per party, for the first run only
    assert len(set(res[0][0][:, 0].tolist())) == COUNT


def owner_program(session, owner):
    from shaper.protocols.active.shares import AuthShares

    e = ActiveEngine(session)
    values, macs = e.silent.take(e, P, e.keys((P,)), owner, COUNT)
    later = e.silent.take(e, P, e.keys((P,)), owner, 100)
    shares = np.zeros((COUNT, 1), np.uint64) if values is None else values[:, None]
    x = AuthShares(e, shares, macs[:, :, None], (P,))
    return x.reveal(), values, later[1].shape, (later[0] is None) == (session.index != owner)


@pytest.mark.parametrize("parties", [2, 3])
def test_an_owners_pool_values_are_known_to_it_alone_and_authenticated(parties):
    owner = parties - 1
    res = run_in_memory(parties, owner_program, owner)
    opened, mine, shape = res[0][0], res[owner][1], res[0][2]
    assert np.array_equal(opened[:, 0], mine) and shape == (2, 100) and all(r[3] for r in res)
    assert len(set(mine.tolist())) == COUNT


@pytest.mark.parametrize("parties", [2, 3])
def test_triples_on_the_silent_pool_are_right(parties):
    def prog(session):
        e = ActiveEngine(session)
        a, b, c = e.triples(COUNT // 5 + 1, (P, Q50))
        return a.reveal(), b.reveal(), c.reveal(), e.silent.made

    res = run_in_memory(parties, prog)
    a, b, c, made = res[0]
    assert made > 0  # the pool served them
    for col, q in enumerate((P, Q50)):
        assert [int(x) * int(y) % q for x, y in zip(a[:, col], b[:, col])] == [int(z) for z in c[:, col]]


def test_an_engine_without_the_pool_makes_the_same_kind_of_triples():
    def prog(session):
        e = ActiveEngine(session, silent=False)
        a, b, c = e.triples(COUNT // 5 + 1, (P,))
        return a.reveal(), b.reveal(), c.reveal(), e.silent

    a, b, c, pool = run_in_memory(2, prog)[0]
    assert pool is None
    assert [int(x) * int(y) % P for x, y in zip(a[:, 0], b[:, 0])] == [int(z) for z in c[:, 0]]


SUMS = r"act-silent-vole-\d+/sums"


@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("tag, index", [(SUMS, None), (r"act-silent-vole-\d+/d", 3)])
def test_a_deviating_receiver_in_a_run_is_caught(parties, tag, index):
    dev = [Deviation(tag=tag, action="offset", delta=1, index=index, nth=0)]
    res = run(parties, shared_program, deviant=parties - 1, deviations=dev, timeout=20)
    assert_all_stopped(res, parties - 1, words="MAC check")


def _caught_or_harmless(res, deviant):
    mine = honest(res, deviant)
    if all(r[0] == "ok" for r in mine):
        assert all(np.array_equal(r[1][0], mine[0][1][0]) for r in mine)  # checked and alike
        return "harmless"
    assert_all_stopped(res, deviant, words="MAC check")
    return "caught"


@pytest.mark.parametrize("parties", [2, 3])
def test_an_owner_that_corrupts_its_base_corrections_is_caught_when_they_count(parties):
    # one COPE correction (bit 7 of the first key's row): used by the receiver only where its
    # key's bit 7 is 1 (MASCOT's selective failure: caught then, no effect otherwise); every
    # correction off is always caught
    outcomes = set()
    for _ in range(3):
        dev = [Deviation(tag=r"ot-cot-\d+c", action="offset", delta=1, index=7, nth=0)]
        outcomes.add(_caught_or_harmless(run(parties, shared_program, deviant=parties - 1, deviations=dev,
                                             timeout=20), parties - 1))
    dev = [Deviation(tag=r"ot-cot-\d+c", action="offset", delta=1, index=None, nth=0)]
    assert _caught_or_harmless(run(parties, shared_program, deviant=parties - 1, deviations=dev, timeout=20),
                               parties - 1) == "caught"


@pytest.mark.parametrize("parties", [2, 3])
def test_one_sides_level_sum_off_is_caught_or_changes_nothing(parties):
    # byte 0 of the sums message: level 0, side 0 of tree 0; the owner reads it only when its
    # point's lowest bit is 1 (the selective failure the analysis allows: one predicate)
    outcomes = set()
    for _ in range(4):
        dev = [Deviation(tag=SUMS, action="offset", delta=1, index=0, nth=0)]
        outcomes.add(_caught_or_harmless(run(parties, shared_program, deviant=parties - 1, deviations=dev,
                                             timeout=20), parties - 1))


def test_a_party_that_skips_the_runs_check_stalls_everyone():
    dev = [Deviation(tag=r"act-open-\d+", action="drop", nth=0)]
    res = run(2, shared_program, deviant=1, deviations=dev, timeout=5)
    assert_all_stopped(res, 1, kinds=("PeerTimeout",), words="act-open")


def correction_program(session):
    e = ActiveEngine(session)
    a, b, c = e.triples(COUNT // 5 + 1, (P,))
    return c.reveal()


@pytest.mark.parametrize("action, parties, words", [("equivocate", 3, ""), ("offset", 2, "sacrifice")])
def test_a_wrong_or_equivocated_correction_is_caught(action, parties, words):
    dev = [Deviation(tag=r"act-auth-correct-\d+", action=action, delta=5, index=COUNT // 5 + 3, moduli=(P,))]
    res = run(parties, correction_program, deviant=0, deviations=dev, timeout=20)
    assert_all_stopped(res, 0, words=words)


def test_the_native_lpn_encoder_matches_its_code_recomputed():
    """The code's rows rebuilt from AES-128-CTR (little-endian counter blocks) with the
    ``cryptography`` package, applied with Python integers: an oracle independent of the kernel."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    from shaper import _native

    q, k, n = Q50, 40, 25
    rng = np.random.default_rng(5)
    base = rng.integers(0, q, size=(2, k), dtype=np.uint64)
    noise = rng.integers(0, q, size=(2, n), dtype=np.uint64)
    seed = b"0123456789abcdef"
    got = _native.vole_lpn(base, noise, q, seed)
    enc = Cipher(algorithms.AES(seed), modes.ECB()).encryptor()
    r_inv = pow(1 << 64, -1, q)
    for i in range(n):
        stream = enc.update(b"".join((i * 8 + j).to_bytes(16, "little") for j in range(8)))
        idx = []
        for j in range(10):
            x = (int.from_bytes(stream[4 * j:4 * j + 4], "little") * k) >> 32
            while x in idx:
                x = (x + 1) % k
            idx.append(x)
        coef = [(int.from_bytes(stream[48 + 8 * j:56 + 8 * j], "little") >> 2) * r_inv % q for j in range(10)]
        for r in range(2):
            want = (int(noise[r, i]) + sum(c * int(base[r, x]) for c, x in zip(coef, idx))) % q
            assert int(got[r, i]) == want
    with pytest.raises(ValueError, match="reduced"):
        _native.vole_lpn(base + np.uint64(q), noise, q, seed)


def test_punctured_trees_give_every_leaf_but_the_point():
    from shaper import _native

    t, h = 6, 5
    roots = np.frombuffer(bytes(range(16 * t)), dtype=np.uint8).reshape(t, 16)
    leaves, sums = _native.vole_ggm_expand(roots, h)
    points = np.array([0, 31, 7, 16, 3, 22], dtype=np.uint64)
    bits = (points[:, None] >> np.arange(h, dtype=np.uint64)) & np.uint64(1)
    side = (1 - bits).astype(np.int64).ravel()
    chosen = np.ascontiguousarray(sums.reshape(t * h, 2, 16)[np.arange(t * h), side])
    got = _native.vole_ggm_punctured(chosen, points, h).reshape(t, 1 << h, 16)
    want = leaves.reshape(t, 1 << h, 16)
    for g in range(t):
        for x in range(1 << h):
            assert (got[g, x] == 0).all() if x == points[g] else (got[g, x] == want[g, x]).all()
    values, tree_sums = _native.vole_leaf_values(got.reshape(-1, 16), P, 2, 1 << h, points)
    full, _ = _native.vole_leaf_values(leaves, P, 2, 1 << h)
    for g in range(t):
        block = slice(g << h, (g + 1) << h)
        assert int(tree_sums[1, g]) == (sum(int(v) for v in full[1, block]) - int(full[1, (g << h) + int(points[g])])) % P
        assert int(values[0, (g << h) + int(points[g])]) == 0
    with pytest.raises(ValueError, match="outside"):
        _native.vole_ggm_punctured(chosen, points + np.uint64(64), h)
    with pytest.raises(ValueError, match="outside"):
        _native.vole_leaf_values(got.reshape(-1, 16), P, 2, 1 << h, points + np.uint64(32))


# -- range proofs on the pairwise pool -----------------------------------------------------------
B40 = 1 << 40
WIDE_ENTRIES = [int(v) for v in np.random.default_rng(7).integers(-B40, B40, 3000)] + [-B40, B40, 0]


def pool_range_program(session, values=WIDE_ENTRIES, lo=-B40, hi=B40):
    """3003 entries of 41 bits: 23 committed values each, a batch that takes the pairwise pool."""
    e = ActiveEngine(session)
    x = e.share_mod_in_range(values if session.index == 0 else None, owner=0, modulus=P, lo=lo, hi=hi)
    return [int(v) - P if int(v) > P // 2 else int(v) for v in x.reveal()[..., 0].ravel()], e.pairwise.runs


@pytest.mark.parametrize("parties", [2, 3])
def test_pairwise_pool_parts_are_each_pairs_vole(parties):
    """Every pair (owner, i) holds a VOLE under i's own key: K_i + S_i = alpha_i y, and the
    owner's MAC shares are alpha_o y + sum_i S_i (checked against every party's key)."""
    def prog(session):
        e = ActiveEngine(session)
        values, macs = e.pairwise.take(e, P, 2, 0, 1000)
        return values, macs, [int(a) for a in e.alpha(P)[:2]]

    res = run_in_memory(parties, prog)
    y, parts, alpha_o = res[0]
    assert parts.shape == (2 * (parties - 1), 1000)
    for i in range(1, parties):
        _, k_i, alpha_i = res[i]
        s_i = parts[2 * (i - 1):2 * i]
        for key in range(2):
            assert [(int(a) + int(b)) % P for a, b in zip(k_i[key], s_i[key])] == \
                [alpha_i[key] * int(v) % P for v in y]


@pytest.mark.parametrize("parties", [2, 3])
def test_a_large_range_checked_input_takes_the_pool_and_keeps_its_bounds(parties):
    res = run_in_memory(parties, pool_range_program)
    assert all(r[0] == WIDE_ENTRIES and r[1] >= 1 for r in res)


def test_a_deviating_owner_on_the_pool_cannot_input_one_past_the_bound(monkeypatch):
    from shaper.protocols.active import ranges

    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)
    res = run(3, pool_range_program, WIDE_ENTRIES[:-1] + [B40 + 1], timeout=30)
    assert_all_stopped(res, 0, words="range proof failed")


@pytest.mark.parametrize("parties, index", [(2, 5), (3, None)])
def test_a_shifted_commitment_correction_is_caught_before_any_proof(parties, index):
    dev = [Deviation(tag=r"act-range-correct-\d+", action="offset", delta=1, index=index, nth=0)]
    res = run(parties, pool_range_program, deviant=0, deviations=dev, timeout=30)
    assert dev[0].fired
    assert_all_stopped(res, 0, words="MAC check failed")


@pytest.mark.parametrize("parties, shifts, words", [
    (3, {1: 1, 2: -1}, "did not use one MAC key"),   # the global key stays right: the pairwise answers
    (2, {1: 1}, "MAC check failed"),                 # the global key is off
])
def test_verifiers_that_shift_their_keys_in_the_pools_base_get_no_proof(parties, shifts, words):
    """Verifiers shift their keys in the pool's base (two of them by +1 and -1, which keeps every
    MAC check right): their pool values then fail their pairwise relation by a combination of
    the owner's secret base values, the owner's check of their answers fails, and no proof is
    sent (a proof over such a VOLE would give entries away)."""
    from .test_active import ChunkLinks, _Recorder

    views = {}

    def prog(session):
        if session.index == 0:
            return pool_range_program(session)
        view = views.setdefault(session.index, {})
        recorded = _Recorder(session, view)
        e = ActiveEngine(recorded, links=ChunkLinks(recorded, row=1, shift=shifts[session.index]))
        e.share_mod_in_range(None, owner=0, modulus=P, lo=-B40, hi=B40)
        return "ok"

    res = run(parties, prog, timeout=30)
    assert res[0][0] == "error" and words in res[0][2], res[0]
    for i in range(1, parties):
        assert not any(t.endswith("/proof") for t in views[i].get("arrays", {}))
