"""The active engine's ring Z_2^64 (SPDZ2k) against deviating parties, at 2, 3 and 5 parties,
and its kernels against Python integers.

The program: integer inputs from both ends, a product plus an input opened to all, a product
opened to party 0 only, and a truncated fixed-point product (which takes random bits from
squares, made with level-2 triples checked at level 3). Every deviation below is caught (every
honest party raises before any output) or, for the selective failures, caught or harmless:

=========================  ==========================================  ==========================
deviation                  where                                       caught by
=========================  ==========================================  ==========================
share offset               an authentication's check opening, a        the MAC check of the
                           Beaver, sacrifice, truncation, random-bit   level it touches
                           or output opening, or every opening
equivocation               a Beaver opening, to one peer only          the views / MAC check
wrong COPE corrections     every entry of an authentication message    the MAC check
wrong Gilboa corrections   every entry of a triple's cross terms       the sacrifice / MAC check
masked check value w       the MAC check's broadcast w                 the check (w ≠ y~ or z)
flipped check opening      the committed z                             the commitment
rushing                    read the honest z first, open one that      the commitment
                           cancels them
MAC share offset           this party's MAC share of an opening        the MAC check
input shifted/equivocated  the deviating party's own input broadcast   the views differ
skipped check              nothing sent in a MAC check                 receive timeout
selective failure          one entry of a COPE or Gilboa correction    caught when the bit
                                                                       is 1, no effect else
=========================  ==========================================  ==========================
"""

import numpy as np
import pytest

from shaper.kernels import z2k
from shaper.net import run_in_memory
from shaper.protocols.active import ActiveEngine
from shaper.protocols.active import spdz2k

from .deviating import Deviation, run
from .test_active import assert_all_stopped, honest

pytestmark = pytest.mark.skipif(not spdz2k.available(), reason="the SPDZ2k ring needs the native extension")

XS, YS, FS = [3, -5, 7], [2, 2, -9], [1.5, -2.25]
M64 = 1 << 64


def program(session, cls=ActiveEngine):
    e = cls(session)
    x = e.share(XS, owner=0, frac_bits=0)
    y = e.share(YS, owner=session.n - 1, frac_bits=0)
    f = e.share(FS, owner=0)
    return (x * y + x).reveal(), (x * y).reveal(to=0), (f * f).reveal()


def check_right(results, deviant=None):
    for i, r in enumerate(results):
        if deviant is not None and i == deviant % len(results):
            continue
        assert r[0] == "ok", r
        opened, private, square = r[1]
        assert opened.tolist() == [a * b + a for a, b in zip(XS, YS)]
        assert (private.tolist() == [a * b for a, b in zip(XS, YS)]) if i == 0 else private is None
        assert np.max(np.abs(square - np.square(FS))) <= 2 ** -16


def test_the_honest_run_is_right():
    for parties in (2, 3, 5):
        check_right(run(parties, program, timeout=20))


OPEN = r"act-z2k-open-{}-\d+"
CAUGHT = {
    "offset-input-mask-check": Deviation(OPEN.format("input-authentication-check"), "offset", nth=0),
    "offset-triple-auth-check": Deviation(OPEN.format("triples-authentication-check"), "offset", nth=0),
    "offset-sacrifice": Deviation(OPEN.format("triple-sacrifice"), "offset", nth=1),
    "offset-beaver": Deviation(OPEN.format("multiplication"), "offset", nth=0),
    "offset-output": Deviation(OPEN.format("output"), "offset", nth=0),
    "offset-private-output": Deviation(OPEN.format("private-output"), "offset", nth=0),
    "offset-truncation": Deviation(OPEN.format("truncation"), "offset", nth=0),
    "offset-random-bit-square": Deviation(OPEN.format("random-bits"), "offset", nth=0),
    "offset-every-opening": Deviation(r"act-z2k-open-.*", "offset", nth=None),
    "offset-high-word-of-a-level-2-opening": Deviation(OPEN.format("random-bits"), "offset", nth=0, index=1),
    "equivocate-beaver": Deviation(OPEN.format("multiplication"), "equivocate", nth=0),
    "wrong-cope-message": Deviation(r"act-z2k-auth-\d+", "offset", nth=1, index=None),
    "wrong-gilboa-message": Deviation(r"act-z2k-gilboa-\d+", "offset", nth=0, index=None),
    "shifted-check-w": Deviation(r"act-z2k-check-output-\d+/w", "offset", nth=0),
    "shifted-high-word-of-check-w": Deviation(r"act-z2k-check-output-\d+/w", "offset", nth=0, index=1),
    "flipped-check-opening": Deviation(r"act-z2k-check-.*/open", "flip", nth=0, index=40),
    "shifted-own-input": Deviation(r"act-z2k-input-\d+", "offset", nth=0),
    "equivocated-own-input": Deviation(r"act-z2k-input-\d+", "equivocate", nth=0),
}


#: five parties run a representative subset (the rest is the same code at 2 and 3)
FIVE = ("offset-beaver", "offset-every-opening", "equivocate-beaver", "wrong-gilboa-message", "shifted-check-w")


@pytest.mark.parametrize(("parties", "name"), [(p, n) for p in (2, 3) for n in sorted(CAUGHT)] + [(5, n) for n in FIVE])
def test_every_deviation_stops_every_honest_party(parties, name):
    d = CAUGHT[name]
    dev = Deviation(d.tag, d.action, nth=d.nth, delta=d.delta, index=d.index)
    res = run(parties, program, deviant=-1, deviations=[dev], timeout=20)
    assert dev.fired, f"{name}: the deviation never happened"
    assert_all_stopped(res, -1)


SELECTIVE = {
    "cope-correction-entry": Deviation(r"act-z2k-auth-\d+", "offset", nth=1),
    "gilboa-correction-entry": Deviation(r"act-z2k-gilboa-\d+", "offset", nth=0),
}


@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("name", sorted(SELECTIVE))
def test_a_selective_failure_is_caught_or_changes_nothing(parties, name):
    d = SELECTIVE[name]
    for _ in range(3):
        dev = Deviation(d.tag, d.action, nth=d.nth)
        res = run(parties, program, deviant=-1, deviations=[dev], timeout=20)
        assert dev.fired
        mine = honest(res, -1)
        if all(r[0] == "ok" for r in mine):
            check_right(res, -1)
        else:
            assert all(r[0] == "error" and r[1] in ("DeviationError", "PeerError") for r in mine), mine


class MacOffset(ActiveEngine):
    """Adds one to its MAC share of every ring value it opens."""

    def __init__(self, session):
        super().__init__(session)
        ring = self._ring()
        original = ring.open

        def open_with_wrong_mac(x, phase):
            mac = x.mac.copy()
            mac[0, 0] += np.uint64(1)
            return original(spdz2k.Wide(x.level, x.share, mac), phase)

        ring.open = open_with_wrong_mac


class SkipsChecks(ActiveEngine):
    """Never takes part in the ring's MAC check."""

    def __init__(self, session):
        super().__init__(session)
        self._ring().check = lambda level, phase="output": None


def _deviant(cls):
    def prog(session):
        return program(session, cls if session.index == session.n - 1 else ActiveEngine)
    return prog


@pytest.mark.parametrize("parties", [2, 3])
def test_a_wrong_mac_share_is_caught(parties):
    assert_all_stopped(run(parties, _deviant(MacOffset), deviant=-1, timeout=20), -1, words="MAC check failed")


def test_a_party_that_skips_the_check_stalls_everyone_and_nothing_is_output():
    res = run(2, _deviant(SkipsChecks), deviant=-1, timeout=1.5)
    for r in honest(res, -1):
        assert r[0] == "error" and r[1] in ("PeerTimeout", "PeerError", "DeviationError"), r


@pytest.mark.parametrize("parties", [2, 3])
def test_a_rushing_party_cannot_cancel_the_honest_mac_differences(parties):
    """The deviating party shifts the high word of its masked combination w (the low word still
    matches the opened values, so only the z sum can catch it), reads every honest z and opens
    the one that makes the sum zero: the commitment it sent first stops it."""
    digest = 32 + 32  # nonce, view digest
    words = 2

    def forge(mine, theirs):
        total = sum(int.from_bytes(b[digest:digest + 8 * words], "little") for b in theirs)
        forged = (-total) % (1 << (64 * words))
        return mine[:digest] + forged.to_bytes(8 * words, "little") + mine[digest + 8 * words:]

    devs = [Deviation(r"act-z2k-check-output-\d+/w", "offset", nth=0, index=1),
            Deviation(r"act-z2k-check-output-\d+/open", "rush", nth=0)]
    res = run(parties, program, deviant=-1, deviations=devs, rush=forge, timeout=20)
    assert devs[1].fired
    assert_all_stopped(res, -1, words="does not match its commitment")


def test_wrong_values_raise_and_the_engine_stops():
    def prog(session):
        e = MacOffset(session) if session.index == 1 else ActiveEngine(session)
        x = e.share([1, 2], owner=0, frac_bits=0)
        try:
            x.reveal()
        except Exception as exc:  # noqa: BLE001 - the first failure
            first = type(exc).__name__
        try:
            x.reveal()
        except Exception as exc:  # noqa: BLE001
            return first, type(exc).__name__, str(exc)
        return first, "no error"

    res = run_in_memory(2, prog, timeout=60)
    assert res[0][0] == "DeviationError" and res[0][1] == "DeviationError" and "stopped" in res[0][2]


# -- the protocol's pieces against independent oracles ----------------------------------------------
def _ints(a):
    a = np.asarray(a, dtype=np.uint64)
    return [sum(int(w) << (64 * k) for k, w in enumerate(row)) for row in a.reshape(-1, a.shape[-1])]


def _words(values, L):
    return np.asarray([[(v >> (64 * k)) % M64 for k in range(L)] for v in values], dtype=np.uint64)


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_ring_arithmetic_matches_python_integers(L):
    rng = np.random.default_rng(L)
    a, b = rng.integers(0, M64, (40, L), dtype=np.uint64), rng.integers(0, M64, (40, L), dtype=np.uint64)
    w = rng.integers(0, M64, 40, dtype=np.uint64)
    mod = 1 << (64 * L)
    A, B = _ints(a), _ints(b)
    assert _ints(z2k.add(a, b)) == [(x + y) % mod for x, y in zip(A, B)]
    assert _ints(z2k.sub(a, b)) == [(x - y) % mod for x, y in zip(A, B)]
    assert _ints(z2k.neg(a)) == [(-x) % mod for x in A]
    assert _ints(z2k.mul(a, b)) == [(x * y) % mod for x, y in zip(A, B)]
    assert _ints(z2k.mul_word(a, w)) == [(x * int(v)) % mod for x, v in zip(A, w)]
    assert _ints(z2k.dot(w, a)[None]) == [sum(x * int(v) for x, v in zip(A, w)) % mod]
    s = z2k.sum_axis(a.reshape(8, 5, L), axis=0)
    assert _ints(s) == [sum(A[r * 5 + c] for r in range(8)) % mod for c in range(5)]
    assert _ints(z2k.sum_axis(a.reshape(8, 5, L), axis=None)) == [sum(A) % mod]
    if L > 1:
        m = rng.integers(-5, 5, (3, 8))
        out = z2k.matmul(m.astype(np.int64).view(np.uint64), a.reshape(8, 5, L))
        # a public integer is a word (its value mod 2^64): what the value mod 2^64 needs, the MACs
        # moving alike
        want = [sum((int(m[r, t]) % M64) * A[t * 5 + c] for t in range(8)) % mod for r in range(3) for c in range(5)]
        assert _ints(out) == want


def test_inverse_square_roots_and_halving():
    rng = np.random.default_rng(5)
    v = [int(x) * 2 + 1 for x in rng.integers(0, 1 << 62, 50)] + [1, (1 << 128) - 1]
    sq = _words([(x * x) % (1 << 128) for x in v], 2)
    y = _ints(spdz2k._inverse_sqrt(sq))
    for x, yy in zip(v, y):
        d = (x * yy) % (1 << 126)
        assert d in (1, (1 << 126) - 1, 1 + (1 << 125), (1 << 125) - 1)   # +-1 mod 2^125
    even = [2 * int(x) for x in rng.integers(0, 1 << 62, 20)] + [(1 << 191) - 2]
    assert _ints(spdz2k._halve(_words(even, 3))) == [(x // 2) % (1 << 191) for x in even]


def test_triples_are_right_at_every_level():
    def prog(session):
        e = ActiveEngine(session)
        ring = e._ring()
        out = {}
        for level in (1, 2):
            a, b, c = ring.take_triples(level, 5)
            opened = [ring.open(v, "test") for v in (a, b, c)]
            ring.check(level, "test")
            out[level] = [_ints(o) for o in opened]
        bits = ring.random_bits(300)
        got = ring.open(bits, "test")
        ring.check(1, "test")
        out["bits"] = got[:, 0].tolist()
        return out

    for parties in (2, 3):
        res = run_in_memory(parties, prog, timeout=120)
        for level in (1, 2):
            a, b, c = res[0][level]
            mod = 1 << (64 * level)
            assert [(x * y) % mod for x, y in zip(a, b)] == c
            assert len(set(a)) == 5  # random, not constant
        bits = res[0]["bits"]
        assert set(bits) == {0, 1} and 90 < sum(bits) < 210


def test_empty_arrays_go_through_every_operation():
    def prog(session):
        e = ActiveEngine(session)
        x = e.share(np.zeros(0), owner=0)
        y = e.share(np.zeros((0, 3)), owner=1)
        return (x * x).reveal().shape, (y * 2.5).reveal(to=0), (y + 1).reveal().shape

    res = run_in_memory(2, prog, timeout=60)
    assert res[0][0] == (0,) and res[0][1].shape == (0, 3) and res[0][2] == (0, 3) and res[1][1] is None


def test_the_ring_is_refused_by_name_without_its_kernels(monkeypatch):
    """Where the native ring kernels are not built the engine holds no ring and says so."""
    monkeypatch.setattr(spdz2k, "available", lambda: False)

    def prog(session):
        e = ActiveEngine(session)
        try:
            e.share([1.0], owner=0)
        except Exception as exc:  # noqa: BLE001
            return "ring" in e.domains, type(exc).__name__, str(exc)
        return "ring" in e.domains, "no error", ""

    res = run_in_memory(2, prog, timeout=30)
    assert res[0][0] is False and "no 'ring' share domain" in res[0][2], res


def test_the_ring_runs_on_ot_rows_computed_in_the_clear():
    """The same protocol over InsecureLinks (the tests' OT in the clear) gives the same results."""
    from shaper.protocols.ot import InsecureLinks

    def prog(session):
        e = ActiveEngine(session, links=InsecureLinks(session))
        x = e.share(XS, owner=0, frac_bits=0)
        return (x * x).reveal()

    res = run_in_memory(2, prog, timeout=60)
    assert res[0].tolist() == [v * v for v in XS]
