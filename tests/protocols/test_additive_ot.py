"""The additive engine beyond Z_2^64: prime-field / RNS and bit-sliced shares, triples, conversions
between domains, against Python integers and numpy, at n = 2, 3, 5 (and one eight-party run).

Preprocessing is OT extension (:class:`OtTriples`) where the native extension is built; without
it the same tests run on the insecure dealer (its triples and its correlated OTs in the clear),
so the engine's logic is checked on every CI run. Only what is about OT itself (its triples'
traffic, SoftSpoken's k, the hybrid engine on OT triples) needs the extension."""

import importlib.util
import warnings

import numpy as np
import pytest

from shaper.net import run_in_memory
from shaper.protocols import Hybrid2PC, InsecureDealer, OtTriples
from shaper.protocols.additive import AdditiveEngine, ModShares

NATIVE = importlib.util.find_spec("shaper._native") is not None
needs_ot = pytest.mark.skipif(not NATIVE, reason="OT extension runs in the native extension only")


def _source():
    if NATIVE:
        return OtTriples()
    warnings.simplefilter("ignore")  # the dealer warns on purpose
    return InsecureDealer()

P61 = (1 << 61) - 1
P50 = 1125899906842597  # the largest prime below 2^50
BASIS = (P61, P50, 3)
rng = np.random.default_rng(16)  # test data only


def _engine(session):
    return AdditiveEngine(session, triple_source=_source(), frac_bits=0)


def _ints(values, q):
    return [int(v) % q for v in np.asarray(values).ravel()]


def _field_job(session, xs, ys, mx, my):
    e = _engine(session)
    last = session.n - 1
    x = e.share_mod(xs, owner=0, moduli=BASIS)
    y = e.share_mod(ys, owner=last, moduli=BASIS)
    a = e.share_mod(mx, owner=last, moduli=P61)
    b = e.share_mod(my, owner=0, moduli=P61)
    return {"sum": (x + y).reveal(), "diff": (x - y - 7).reveal(to=1), "pub": (x * -3 + 5).reveal(),
            "prod": (x * y).reveal(), "mm": (a @ b).reveal(), "rand": e.random_mod(4, BASIS).share}


@pytest.mark.parametrize("n", [2, 3, 5])
def test_prime_fields_and_rns_match_python_integers(n):
    xs = [0, 1, -1, P61 - 1, 1 << 60, -(1 << 62), 123456789] + list(rng.integers(-(1 << 62), 1 << 62, 9))
    ys = [5, P61 - 1, -1, P61 - 1, 3, 7, 1 << 49] + list(rng.integers(-(1 << 62), 1 << 62, 9))
    mx, my = rng.integers(-(1 << 62), 1 << 62, (3, 4)), rng.integers(-(1 << 62), 1 << 62, (4, 2))
    res = run_in_memory(n, _field_job, xs, ys, mx, my, timeout=120)
    for c, q in enumerate(BASIS):
        want = {"sum": [(int(a) + int(b)) % q for a, b in zip(xs, ys)],
                "diff": [(int(a) - int(b) - 7) % q for a, b in zip(xs, ys)],
                "pub": [(-3 * int(a) + 5) % q for a in xs],
                "prod": [int(a) * int(b) % q for a, b in zip(xs, ys)]}
        for key, vals in want.items():
            got = res[1][key]
            assert [int(v) for v in got[:, c]] == vals, (key, q)
    mm = [[sum(int(mx[i, t]) * int(my[t, j]) for t in range(4)) % P61 for j in range(2)] for i in range(3)]
    assert res[0]["mm"][..., 0].tolist() == mm
    assert res[0]["diff"] is None
    # each party's random share is reduced, and the parties' shares differ
    for r in res:
        assert np.all(r["rand"] < np.array(BASIS, np.uint64))
    assert not np.array_equal(res[0]["rand"], res[1]["rand"])


def _bits_job(session, xb, yb):
    e = _engine(session)
    x = e.share_bits(xb, owner=0)
    y = e.share_bits(yb, owner=session.n - 1)
    return (x & y).reveal(), (x ^ y).reveal(to=0), (~x).reveal(), (x & np.uint64(0)).reveal()


@pytest.mark.parametrize("n", [2, 3, 5])
def test_bit_shares_and_xor_not(n):
    xb, yb = rng.integers(0, 2, (3, 200)).astype(bool), rng.integers(0, 2, (3, 200)).astype(bool)
    res = run_in_memory(n, _bits_job, xb, yb, timeout=120)
    for i, (land, lxor, lnot, zero) in enumerate(res):
        np.testing.assert_array_equal(land, xb & yb)
        np.testing.assert_array_equal(lnot, ~xb)
        assert not zero.any()
        if i == 0:
            np.testing.assert_array_equal(lxor, xb ^ yb)


def _triples_job(session):
    e = _engine(session)
    src = e.triple_source
    return {"ring": src.elementwise(e, 300), "matrix": src.matrix(e, 3, 5, 2),
            "mod": src.mod_triples(e, 200, BASIS), "modmm": src.mod_matrix(e, 300, 2, 3, P50),
            "bits": src.bit_triples(e, 800), "trunc": src.truncation_pairs(e, 100, 13)}


@pytest.mark.parametrize("n", [2, 3])
def test_triples_satisfy_their_relations(n):
    res = run_in_memory(n, _triples_job, timeout=120)

    def total(key, i, op=np.add, dtype=np.uint64):
        out = res[0][key][i].astype(dtype)
        for r in res[1:]:
            out = op(out, r[key][i].astype(dtype))
        return out

    a, b, c = (total("ring", i) for i in range(3))
    np.testing.assert_array_equal(a * b, c)
    a, b, c = (total("matrix", i) for i in range(3))
    np.testing.assert_array_equal(np.matmul(a, b), c)
    objs = [[r["mod"][i].astype(object) for r in res] for i in range(3)]
    for col, q in enumerate(BASIS):
        a, b, c = (sum(parts)[:, col] % q for parts in objs)
        assert all(x * y % q == z for x, y, z in zip(a, b, c))
    a, b, c = (sum(r["modmm"][i].astype(object) for r in res) % P50 for i in range(3))
    assert ((a.dot(b)) % P50 == c).all()
    a, b, c = (total("bits", i, np.bitwise_xor) for i in range(3))
    np.testing.assert_array_equal(a & b, c)
    assert np.unpackbits(c.view(np.uint8)).mean() == pytest.approx(0.25, abs=0.01)  # 51200 ANDs: 5 sigma
    r, shifted = total("trunc", 0), total("trunc", 1)
    np.testing.assert_array_equal((r.view(np.int64) >> 13).view(np.uint64), shifted)


def _powers_job(session):
    e = _engine(session)
    four, (a, a2) = e.powers(150, BASIS), e.square_pairs(100, (P50,))
    return {"four": [p.share for p in four], "five": e.triple_source.powers(e, 40, (P61,), 5),
            "square": (a.share, a2.share)}


@pytest.mark.parametrize("n", [2, 3, 5])
def test_power_tuples_and_square_pairs_are_powers_of_one_uniform_value(n):
    res = run_in_memory(n, _powers_job, timeout=120)
    four = [sum(r["four"][e].astype(object) for r in res) for e in range(4)]
    for col, q in enumerate(BASIS):
        a = four[0][:, col] % q
        for e in range(1, 4):
            assert [int(v) for v in four[e][:, col] % q] == [pow(int(x), e + 1, q) for x in a], (q, e + 1)
        if q > 3:
            assert len(set(a)) == len(a)  # 150 distinct draws: not a constant
    five = sum(r["five"].astype(object) for r in res) % P61
    assert all(int(five[e, i, 0]) == pow(int(five[0, i, 0]), e + 1, P61) for e in range(5) for i in range(40))
    a, a2 = (sum(r["square"][i].astype(object) for r in res) % P50 for i in range(2))
    assert [int(x) for x in a2[:, 0]] == [int(x) * int(x) % P50 for x in a[:, 0]]
    # no party's own share is the value (each is masked by the others')
    assert not any((r["square"][0] % P50 == a).all() for r in res)


EDGE = {P61: [0, 1, 2, P61 - 1, P61 - 2, (1 << 60), (1 << 60) - 1, 1 << 32],
        17: [0, 1, 15, 16], 3: [0, 1, 2]}


def _convert_job(session, bits, trits, values):
    e = _engine(session)
    out = {}
    x = e.share_bits(bits, owner=session.n - 1)
    out["b2a"] = e.bits_to_mod(x, BASIS).reveal()
    t = e.share_mod(trits, owner=0, moduli=3)
    out["t2a"] = e.trits_to_mod(t, (P61, 17)).reveal()
    out["t2a-plain"] = e.trits_to_mod(t, P50, balanced=False).reveal()
    for q, vals in values.items():
        v = e.share_mod(vals, owner=session.n - 1, moduli=q)
        out[f"a2b-{q}"] = e.mod_to_bits(v).reveal()
    r, rq = e.dabits(50, (P61, 17))
    out["dabit"] = (r.reveal(), rq.reveal())
    return out


@pytest.mark.parametrize("n", [2, 3, 5])
def test_conversions_on_edge_values(n):
    bits = np.array([0, 1, 1, 0, 1] * 13, dtype=bool)
    trits = np.array([0, 1, 2] * 7)
    res = run_in_memory(n, _convert_job, bits, trits, EDGE, timeout=180)
    for out in res:
        np.testing.assert_array_equal(out["b2a"], np.repeat(bits[:, None].astype(np.uint64), 3, axis=1))
        want = np.array([[t if t < 2 else q - 1 for q in (P61, 17)] for t in trits], dtype=np.uint64)
        np.testing.assert_array_equal(out["t2a"], want)
        np.testing.assert_array_equal(out["t2a-plain"][:, 0], trits.astype(np.uint64))
        for q, vals in EDGE.items():
            planes = out[f"a2b-{q}"]  # (bitlen(q), N)
            assert planes.shape == (q.bit_length(), len(vals))
            got = (planes.astype(object) * np.array([1 << j for j in range(q.bit_length())], object)[:, None]).sum(0)
            assert list(got) == vals, q
        r, rq = out["dabit"]
        np.testing.assert_array_equal(rq, np.repeat(r[:, None].astype(np.uint64), 2, axis=1))


def _wrap_job(session, q):
    """Z_q -> Z_2 where the parties' shares straddle the modulus: each share near q."""
    e = _engine(session)
    n = session.n
    vals = np.array([0, 1, q - 1, q - 2, q // 2], dtype=np.uint64)
    # party i holds q - 1 - i (mod q) tweaked so that the sum is vals: all shares large
    share = np.full(len(vals), q - 1 - session.index, dtype=np.uint64)
    if session.index == 0:
        rest = sum(q - 1 - i for i in range(1, n)) % q
        share = np.array([(int(v) - rest) % q for v in vals], dtype=np.uint64)
    x = ModShares(e, share[:, None], (q,))
    planes = e.mod_to_bits(x).reveal()
    return (planes.astype(object) * np.array([1 << j for j in range(q.bit_length())], object)[:, None]).sum(0)


@pytest.mark.parametrize("n", [2, 3])
def test_bit_decomposition_when_shares_wrap(n):
    for got in run_in_memory(n, _wrap_job, P61, timeout=120):
        assert list(got) == [0, 1, P61 - 1, P61 - 2, P61 // 2]


def _eight_job(session):
    e = _engine(session)
    x = e.share_mod(np.arange(-8, 8), owner=7, moduli=(P61, 17))
    y = e.share_mod(np.arange(16), owner=0, moduli=(P61, 17))
    z = e.bits_to_mod(e.share_bits(np.arange(16) % 3 == 0, owner=3), (P61, 17))
    return (x * y + z).reveal(to=2)


def test_eight_parties():
    res = run_in_memory(8, _eight_job, timeout=300)
    want = [[(int(a) * int(b) + (b % 3 == 0)) % q for q in (P61, 17)] for a, b in zip(range(-8, 8), range(16))]
    assert res[2].tolist() == want
    assert all(r is None for i, r in enumerate(res) if i != 2)


def _hybrid_job(session, xv, yv):
    e = Hybrid2PC.setup(session, key_bits=640, triple_source=OtTriples(), frac_bits=16)
    x, y = e.share(xv, owner=0), e.share(yv, owner=1)
    return (x * y).reveal(), (x.reshape(2, 3) @ y.reshape(3, 2)).reveal()


@needs_ot
def test_hybrid_two_party_engine_runs_on_ot_triples():
    xv, yv = rng.normal(size=6), rng.normal(size=6)
    for prod, mm in run_in_memory(2, _hybrid_job, xv, yv, timeout=120):
        np.testing.assert_allclose(prod, xv * yv, atol=1e-3)
        np.testing.assert_allclose(mm, xv.reshape(2, 3) @ yv.reshape(3, 2), atol=1e-3)


def _traffic_job(session, op, count, moduli):
    e = _engine(session)
    src = e.triple_source
    from shaper.protocols.ot import links_for

    links_for(session).ensure([p for p in range(session.n) if p != session.index])
    bits = e.random_bits((), count)
    trits = e.random_mod(count, (3,))
    session.barrier()
    before = session.stats.bytes_sent
    {"ring-triple": lambda: src.elementwise(e, count), "mod-triple": lambda: src.mod_triples(e, count, moduli),
     "bit-triple": lambda: src.bit_triples(e, count // 64), "b2a": lambda: e.bits_to_mod(bits, moduli),
     "t2a": lambda: e.trits_to_mod(trits, moduli), "square": lambda: e.square_pairs(count, moduli),
     "power-4": lambda: e.powers(count, moduli, 4)}[op]()
    return session.stats.bytes_sent - before


@needs_ot
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("op", ["ring-triple", "mod-triple", "bit-triple", "b2a", "t2a", "square", "power-4"])
def test_declared_costs_match_the_traffic(n, op):
    """What docs/mpc.md prints (shaper.protocols.additive.costs) is what a run sends, +-2 %. The
    table is per item; each OT extension message also carries the consistency check's fixed
    1 KiB (256 extra rows and the 32-byte check), so the cheap Z_2 triples run a larger batch."""
    from shaper.protocols.additive.costs import COSTS

    count, moduli = 1 << (16 if op == "bit-triple" else 13), (P61, (1 << 31) - 1)
    sent = run_in_memory(n, _traffic_job, op, count, moduli, timeout=120)
    # per-limb OT counts: the mean bit length over the limbs
    w = (61 + 31) / 2 if op in ("mod-triple", "square", "power-4") else 61
    declared = COSTS[op].bytes(n, len(moduli), w)
    per_item = sum(sent) / n / count
    assert per_item == pytest.approx(declared, rel=0.02), (op, n, per_item, declared)


def _links_job(session, ks):
    from shaper.protocols.ot import OtLinks

    links = OtLinks(session, k=ks[session.index])
    values = np.arange(1000, dtype=np.uint64) % np.uint64(P61)
    offsets = (np.arange(1000, dtype=np.uint64) * np.uint64(7919))[:, None] % np.uint64(P61)
    other = 1 - session.index
    recv, sent = links.cot({other: values}, {other: offsets}, [P61], 61)
    return recv[other][:, 0], sent[other][:, 0]


@needs_ot
@pytest.mark.parametrize("k", [1, 2, 4])
def test_links_with_each_softspoken_k_give_gilboa_products(k):
    (r0, s0), (r1, s1) = run_in_memory(2, _links_job, (k, k), timeout=60)
    i = np.arange(1000)
    want = [(int(x) % P61) * (int(x) * 7919 % P61) % P61 for x in i]
    assert [(int(a) + int(b)) % P61 for a, b in zip(r0, s1)] == want
    assert [(int(a) + int(b)) % P61 for a, b in zip(r1, s0)] == want


@needs_ot
def test_links_with_different_k_are_refused_by_name():
    from shaper.errors import PartyError

    with pytest.raises(PartyError, match=r"SoftSpoken k = (2, this party with k = 4|4, this party with k = 2); every party"):
        run_in_memory(2, _links_job, (4, 2), timeout=60)
