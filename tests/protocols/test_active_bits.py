"""The active engine's bits (``shaper.protocols.active.bits``) against deviating parties, at 2, 3
and 5 parties, through the harness in ``deviating.py``.

=========================  ===========================================  =============================
deviation                  where                                        outcome
=========================  ===========================================  =============================
flipped share bit          any opening (bucketing's d, Beaver, output)  bit MAC check: every honest
                                                                        party stops
flipped private output     the share sent to the one recipient          the recipient stops; the
                                                                        others had no output
equivocation               a Beaver opening, to one peer only           that peer's MAC check stops
                                                                        it; another finishes right
                                                                        or stops
wrong cross term U         a leaky AND's z (every word)                 the AND check
wrong check term W         a leaky AND's check (every row)              the AND check
one cross / check bit      one word / one row (selective failure)       caught when x_j = 1, right
                                                                        otherwise
wrong zero-sharing pad     the AND check's mask                         the AND check
rushing / flipped opening  the AND check's committed value              the commitment
wrong MAC digest           the bit MAC check                            the digest differs
different bits to          the aBits of one party (three parties or     the aBit consistency check
different peers            more)
skipped check              the bit MAC check's digest not sent          receive timeout
=========================  ===========================================  =============================
"""

import importlib.util

import numpy as np
import pytest

from shaper.errors import ConfigError, DeviationError
from shaper.net import run_in_memory
from shaper.protocols.active import ActiveEngine
from shaper.protocols.active.bits import MIN_BATCH, AuthBits, batches, bucket_size
from shaper.protocols.commit import NONCE_BYTES
from shaper.protocols.ot import InsecureLinks, OtLinks

from .deviating import Deviation, run
from .test_active import assert_all_stopped, honest

NATIVE = importlib.util.find_spec("shaper._native") is not None
RNG = np.random.default_rng(7)
XB = RNG.integers(0, 2, (2, 70)).astype(bool)
YB = RNG.integers(0, 2, (2, 70)).astype(bool)
ROWS = r"(?:abit|clear-ot)-rows-\d+"  # the aBits' OT messages (native links / clear links)


def _engine(session, cls=ActiveEngine):
    return cls(session, links=None if NATIVE else InsecureLinks(session))


def bit_program(session, cls=ActiveEngine):
    """Bits from both ends, an AND, XOR and NOT opened to all, an AND opened to party 0 only."""
    e = _engine(session, cls)
    x = e.share_bits(XB, owner=0)
    y = e.share_bits(YB, owner=session.n - 1)
    return ((x & y) ^ ~x).reveal(), (x & y).reveal(to=0)


def want():
    return (XB & YB) ^ ~XB, XB & YB


def assert_right(results):
    everyone, to0 = want()
    for i, r in enumerate(results):
        assert r[0] == "ok", r
        assert np.array_equal(r[1][0], everyone)
        assert np.array_equal(r[1][1], to0) if i == 0 else r[1][1] is None


def assert_stopped_or_right(results, deviant):
    """Every honest party either stopped or finished with the right outputs; if the deviation
    changed nothing, every honest party finished."""
    everyone, to0 = want()
    n = len(results)
    for i, r in enumerate(results):
        if i == deviant % n:
            continue
        if r[0] == "ok":
            assert np.array_equal(r[1][0], everyone)
            assert np.array_equal(r[1][1], to0) if i == 0 else r[1][1] is None
        else:
            assert r[1] in ("DeviationError", "PeerError", "FrameError", "TimeoutError"), r


@pytest.mark.parametrize("parties", [2, 3, 5])
def test_the_honest_run_is_right(parties):
    assert_right(run(parties, bit_program))


CAUGHT = {
    "flip-bucket-opening": (Deviation(r"act-bopen-\d+", "offset", nth=0), "bit MAC check (AND triples)"),
    "flip-beaver-opening": (Deviation(r"act-bopen-\d+", "offset", nth=1), "bit MAC check"),
    # an AND's opening just before the output: caught by the check that precedes every output
    "flip-output": (Deviation(r"act-bopen-\d+", "offset", nth=2), "bit MAC check (before output)"),
    "flip-every-opening": (Deviation(r"act-bopen-\d+", "offset", nth=None), "bit MAC check"),
    "wrong-cross-terms": (Deviation(r"act-land-\d+/u", "offset", nth=None, index=None), "AND triples' check failed"),
    "wrong-check-terms": (Deviation(r"act-land-\d+/w", "offset", nth=None, index=None), "AND triples' check failed"),
    "flipped-check-opening": (Deviation(r"act-land-\d+/x/open", "flip", nth=0, index=40),
                              "does not match its commitment"),
    "wrong-mac-digest": (Deviation(r"act-bcheck-\d+", "flip", nth=0), "bit MAC check"),
}


@pytest.mark.parametrize("parties", [2, 3, 5])
@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_every_deviation_stops_every_honest_party(parties, name):
    d, words = CAUGHT[name]
    dev = Deviation(d.tag, d.action, nth=d.nth, delta=d.delta, index=d.index)
    res = run(parties, bit_program, deviant=-1, deviations=[dev])
    assert dev.fired, f"{name}: the deviation never happened"
    assert_all_stopped(res, -1, words=words)


@pytest.mark.parametrize("parties", [3, 5])
def test_a_wrong_zero_sharing_pad_is_caught(parties):
    """(Three parties or more; two compare hashes.) Pads go from the lower index to the higher:
    party 0 flips the one it sends to party 1 (the same flip towards every peer would cancel
    out: the pads would still share zero)."""
    dev = Deviation(r"act-land-\d+/pad", "flip", nth=None, peers=("party1",))
    res = run(parties, bit_program, deviant=0, deviations=[dev])
    assert dev.fired
    assert_all_stopped(res, 0, words="AND triples' check failed")


@pytest.mark.parametrize("parties", [2, 3])
def test_a_deviating_first_party_is_caught_too(parties):
    """Party 0 holds the public constants' bits: its flipped opening is caught as well."""
    dev = Deviation(r"act-bopen-\d+", "offset", nth=1)
    assert_all_stopped(run(parties, bit_program, deviant=0, deviations=[dev]), 0, words="bit MAC check")


@pytest.mark.parametrize("parties", [2, 3, 5])
def test_a_flipped_private_output_stops_its_recipient(parties):
    """The deviating party's share of the private output (the sixth opening, after the second
    AND's bucketing and Beaver openings; to party 0 only) is flipped: party 0 stops; the others
    had no output to get wrong."""
    dev = Deviation(r"act-bopen-\d+", "offset", nth=5)
    res = run(parties, bit_program, deviant=-1, deviations=[dev])
    assert dev.fired
    assert res[0][0] == "error" and res[0][1] == "DeviationError" and "private output" in res[0][2], res[0]
    for r in honest(res, -1)[1:]:
        assert r[0] == "error" or r[1][1] is None


@pytest.mark.parametrize("parties", [3, 5])
def test_an_equivocating_party_is_caught_by_the_peer_it_lied_to(parties):
    dev = Deviation(r"act-bopen-\d+", "equivocate", nth=1)
    res = run(parties, bit_program, deviant=-1, deviations=[dev])
    assert dev.fired
    assert res[0][0] == "error" and res[0][1] == "DeviationError", res[0]
    assert_stopped_or_right(res, -1)


SELECTIVE = {
    # one word of U (one triple's cross term) or one row of W: the honest share moves by x_j
    "one-cross-term": Deviation(r"act-land-\d+/u", "offset", nth=0, index=0),
    "one-check-term": Deviation(r"act-land-\d+/w", "offset", nth=0, index=0),
}


@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("name", sorted(SELECTIVE))
def test_a_selective_failure_is_caught_or_changes_nothing(parties, name):
    d = SELECTIVE[name]
    outcomes = set()
    for _ in range(30):
        dev = Deviation(d.tag, d.action, nth=d.nth, index=d.index)
        res = run(parties, bit_program, deviant=-1, deviations=[dev])
        assert dev.fired
        assert_stopped_or_right(res, -1)
        outcomes.add(all(r[0] == "ok" for r in honest(res, -1)))
        if False in outcomes:
            break
    # the secret bit was 1 in one of up to thirty runs (2^-30 otherwise; about two runs on
    # average): the check fired and stopped the honest parties
    assert False in outcomes


def test_a_coalition_of_deviating_parties_is_caught():
    devs = {3: [Deviation(r"act-land-\d+/u", "offset", nth=None, index=None)],
            4: [Deviation(r"act-bopen-\d+", "offset", nth=1)]}
    assert_all_stopped(run(5, bit_program, deviant=[3, 4], deviations=devs), [3, 4])


def test_a_rushing_party_cannot_cancel_the_and_check():
    """It reads every honest party's committed AND-check value first and opens one that makes the
    XOR zero (after a wrong cross term): its opening no longer matches its commitment."""
    def forge(mine, theirs):
        total = 0
        for t in theirs:
            total ^= int.from_bytes(t[NONCE_BYTES:], "little")
        return mine[:NONCE_BYTES] + total.to_bytes(16, "little")

    devs = [Deviation(r"act-land-\d+/u", "offset", nth=None, index=None), Deviation(r"act-land-\d+/x/open", "rush")]
    res = run(3, bit_program, deviant=-1, deviations=devs, rush=forge)
    assert_all_stopped(res, -1, words="commitment")


def test_a_party_that_skips_the_bit_check_stalls_everyone():
    dev = Deviation(r"act-bcheck-\d+", "drop", nth=None)
    res = run(2, bit_program, deviant=-1, deviations=[dev], timeout=1.0)
    assert dev.fired
    for r in honest(res, -1):
        assert r[0] == "error", r


def _two_faced(choices, receive):
    """Other choice bits towards the first peer than towards the rest."""
    flipped = np.array(choices, dtype=np.uint8, copy=True)
    flipped[0] ^= 1
    return {p: (flipped if i == 0 else choices) for i, p in enumerate(receive)}


class _TwoFacedLinks(OtLinks):
    def rows(self, choices, count, receive, send):
        if choices is not None and len(receive) >= 2:
            choices = _two_faced(choices, receive)
        return super().rows(choices, count, receive, send)


class _TwoFacedClear(InsecureLinks):
    def rows(self, choices, count, receive, send):
        if choices is not None and len(receive) >= 2:
            choices = _two_faced(choices, receive)
        return super().rows(choices, count, receive, send)


class _TwoFaced(ActiveEngine):
    def _bit_links(self):
        if self._blinks_obj is None:
            self._bit_delta = self.prg.random_bytes(16)
            cls = _TwoFacedLinks if NATIVE else _TwoFacedClear
            self._blinks_obj = (cls(self.session, label="abit", delta=self._bit_delta) if NATIVE
                                else cls(self.session, delta=self._bit_delta))
        return self._blinks_obj


@pytest.mark.parametrize("parties", [3, 5])
def test_a_party_with_different_bits_for_different_peers_is_caught(parties):
    """Its input bits towards its first peer differ from those towards the others (each OT on
    its own is well-formed): the aBit consistency check stops every honest party."""
    def prog(session):
        cls = _TwoFaced if session.index == session.n - 1 else ActiveEngine
        return bit_program(session, cls)

    res = run_in_memory(parties, _outcome, prog, timeout=120)
    mine = res[:-1]
    assert all(r[0] == "error" for r in mine), res
    assert any("consistency check" in r[2] for r in mine), res


def _outcome(session, prog):
    try:
        return ("ok", prog(session))
    except Exception as exc:  # noqa: BLE001
        session.abort(exc)
        return ("error", type(exc).__name__, str(exc))


def test_triples_are_right_and_the_bucket_sizes_are_wrks():
    """Checked triples satisfy c = a AND b and every MAC matches its key (opened and compared
    in the clear here, as an oracle); the bucket sizes are WRK17's."""
    assert [bucket_size(c) for c in (10, 3_099, 3_100, 279_999, 280_000, 1 << 22)] == [5, 5, 4, 4, 3, 3]

    def prog(session):
        e = _engine(session)
        (ab, am, ak), (bb, bm, bk), (cb, cm, ck) = (e._split(m) for m in e.bit_triples(300))
        delta = int(e._delta64)
        return ab, bb, cb, am, ak, bm, bk, cm, ck, delta

    for parties in (2, 3):
        res = run_in_memory(parties, prog, timeout=120)
        a = np.bitwise_xor.reduce([r[0] for r in res])
        b = np.bitwise_xor.reduce([r[1] for r in res])
        c = np.bitwise_xor.reduce([r[2] for r in res])
        assert np.array_equal(c, a & b) and a.any() and b.any() and not a.all()
        for i in range(parties):  # M_i^j = K_j^i XOR x_i Delta_j for every pair and value
            for j in range(parties):
                if i == j:
                    continue
                ki = j if j < i else j - 1   # i's index of peer j
                kj = i if i < j else i - 1   # j's index of peer i
                for bits_at, mac_at, key_at in ((0, 3, 4), (1, 5, 6), (2, 7, 8)):
                    mac = res[i][mac_at][ki]
                    key = res[j][key_at][kj]
                    expect = key ^ np.where(res[i][bits_at], np.uint64(res[j][9]), np.uint64(0))
                    assert np.array_equal(mac, expect)


def test_authenticated_bits_refuse_plain_shares_and_bad_shapes():
    def prog(session):
        e = _engine(session)
        x = e.share_bits(XB, owner=0)
        out = {}
        from shaper.protocols.api import XorShares
        try:
            x ^ XorShares(e, x.words, x.bits)
        except TypeError as exc:
            out["plain"] = str(exc)
        try:
            x & e.share_bits(np.zeros((2, 3), bool), owner=0)
        except ValueError as exc:
            out["shape"] = str(exc)
        assert isinstance(x[0], AuthBits) and x[0].shape == (70,)
        for bad in ((slice(None), 0), (Ellipsis, 0), (0, 1)):  # the bit axis is not indexable
            try:
                x[bad]
            except IndexError:
                out.setdefault("index", []).append("refused")
        return out

    res = run_in_memory(2, prog, timeout=60)
    assert "unauthenticated" in res[0]["plain"] and "bits" in res[0]["shape"]
    assert res[0]["index"] == ["refused"] * 3


def test_an_engine_stops_after_a_failed_bit_check():
    def prog(session):
        e = _engine(session)
        x = e.share_bits(XB, owner=0)
        try:
            (x & x).reveal()
        except DeviationError:
            pass
        try:
            x.reveal()
        except DeviationError as exc:
            return str(exc)
        return "went on"

    dev = Deviation(r"act-bopen-\d+", "offset", nth=1)
    res = run(2, prog, deviant=1, deviations=[dev])
    assert res[0][0] == "ok" and "stopped after a failed check" in res[0][1], res


# -- binary circuits on authenticated bits: comparisons and adders ------------------------------------
W = 20
VALUES = [np.array([0, 5, 1 << 19, (1 << 20) - 1, 7, 12345]), np.array([0, 6, 1 << 19, 3, (1 << 20) - 1, 12344]),
          np.array([1, 5, 0, 9, 8, 99999]), np.array([3, 3, 3, 3, 3, 3]), np.array([2, 2, 2, 2, 2, 2])]


def _planes(values):
    v = np.asarray(values, dtype=np.uint64)
    return ((v[None, :] >> np.arange(W, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(bool)


def circuits(session):
    """Every party's 20-bit integers as authenticated bit planes; party 0's against the last
    party's: x >= y, x + y (ripple carry) and (x + y) mod q."""
    from shaper.protocols.additive.convert import compare_ge, mod_add_bits, ripple_add

    e = _engine(session)
    n = session.n
    x = e.share_bits(_planes(VALUES[0]) if session.index == 0 else None, owner=0)
    y = e.share_bits(_planes(VALUES[n - 1]) if session.index == n - 1 else None, owner=n - 1)
    q = (1 << W) - 3
    xs = e.share_bits(_planes(VALUES[0] % q) if session.index == 0 else None, owner=0)
    ys = e.share_bits(_planes(VALUES[n - 1] % q) if session.index == n - 1 else None, owner=n - 1)
    return (compare_ge(e, x, y).reveal(), ripple_add(e, x, y).reveal(to=0), mod_add_bits(e, xs, ys, q).reveal())


def _ints(planes):
    return (planes.astype(np.int64) << np.arange(planes.shape[0])[:, None]).sum(axis=0)


@pytest.mark.parametrize("parties", [2, 3, 5])
def test_comparisons_and_adders_run_on_authenticated_bits(parties):
    res = run(parties, circuits)
    assert all(r[0] == "ok" for r in res), res
    x, y = VALUES[0], VALUES[parties - 1]
    ge, total, mod = res[0][1]
    q = (1 << W) - 3
    assert ge.tolist() == (x >= y).tolist()
    assert _ints(total).tolist() == (x + y).tolist()
    assert _ints(mod).tolist() == ((x % q + y % q) % q).tolist()
    assert all(r[1][1] is None for r in res[1:])


def test_a_comparison_with_a_flipped_and_opening_stops_every_honest_party():
    dev = Deviation(r"act-bopen-\d+", "offset", nth=7)
    res = run(3, circuits, deviant=-1, deviations=[dev])
    assert dev.fired
    assert_all_stopped(res, -1, words="bit MAC check")


def test_the_module_conversions_run_the_active_engines_own_checked_ones():
    """The passive OT chains trust every party's inputs: on the active engine the module-level
    conversions and the Gaussian sampler go to its daBit methods (authenticated results), and
    the chains without an active counterpart (Z_3, the Z_2^64 lift) are refused, never run
    passively."""
    from shaper.protocols.active.shares import AuthShares
    from shaper.protocols.additive import sampling
    from shaper.protocols.additive.convert import bits_to_mod, bits_to_ring, mod_to_bits
    from shaper.protocols.api import UnsupportedConversion

    p61 = (1 << 61) - 1

    def prog(session):
        out = []
        for fn in (lambda e: bits_to_ring(e, e.share_bits(XB, owner=0), p61),
                   lambda e: e.trits_to_mod(None, p61), lambda e: sampling.ternary(e, 4, p61)):
            try:
                fn(_engine(session))  # a fresh engine each: a refused step stops an engine for good
                out.append("ran")
            except (UnsupportedConversion, ConfigError) as exc:
                out.append(type(exc).__name__)
        e = _engine(session)
        b = bits_to_mod(e, e.share_bits(XB, owner=0), p61)
        planes = mod_to_bits(e, e.share_mod([1, 2, p61 - 1], owner=0, moduli=(p61,)))
        g = sampling.gaussian(e, 64, p61)
        kinds = (type(b).__name__, type(planes).__name__, type(g).__name__)
        return out, kinds, b.reveal()[..., 0], planes.reveal(), isinstance(g, AuthShares)

    res = run_in_memory(2, prog, timeout=120)
    refused, kinds, b, planes, auth = res[0]
    assert refused == ["UnsupportedConversion", "UnsupportedConversion", "ConfigError"]
    assert kinds == ("AuthShares", "AuthBits", "AuthShares") and auth
    np.testing.assert_array_equal(b, XB.astype(np.uint64))
    got = [sum(int(planes[j, i]) << j for j in range(planes.shape[0])) for i in range(3)]
    assert got == [1, 2, p61 - 1]


@pytest.mark.skipif(not NATIVE, reason="the native GF(2^128) kernels")
def test_the_native_gf128_combination_matches_the_definition():
    """gf128_combine is Horner's rule over GF(2^128) (x^128 + x^7 + x^2 + x + 1), the same
    field as the clear links' pure-Python one, for every row count (whole steps of 16 and not)."""
    import os

    import shaper._native as nat
    from shaper.protocols.ot import _gf128_mul

    for m in (1, 5, 16, 17, 40, 64):
        rows = np.frombuffer(os.urandom(16 * m), dtype=np.uint8).reshape(m, 16)
        seed = os.urandom(16)
        s, acc = int.from_bytes(seed, "little"), 0
        for row in rows:
            acc = _gf128_mul(acc, s) ^ int.from_bytes(row.tobytes(), "little")
        assert nat.gf128_combine(rows, seed) == acc.to_bytes(16, "little")
        a, b = os.urandom(16), os.urandom(16)
        assert nat.gf128_mul(a, b) == _gf128_mul(int.from_bytes(a, "little"), int.from_bytes(b, "little")).to_bytes(16, "little")



def test_an_output_that_xors_inputs_shows_the_xor_not_the_inputs():
    """Inputs go through a mask: every party's share of an input is uniform, so the shares a
    recipient receives for x XOR y (no AND in between) are not the owners' inputs."""
    bx = RNG.integers(0, 2, 256).astype(bool)
    by = RNG.integers(0, 2, 256).astype(bool)

    def prog(session):
        e = _engine(session)
        x = e.share_bits(bx if session.index == 1 else None, owner=1)
        y = e.share_bits(by if session.index == 2 else None, owner=2)
        z = x ^ y
        return x.plain(), y.plain(), z.plain(), z.reveal(to=0)

    res = run_in_memory(3, prog, timeout=120)
    assert np.array_equal(res[0][3], bx ^ by)
    for i, (xs, ys, zs, _) in enumerate(res):
        for share, secret in ((xs, bx), (ys, by), (zs, bx ^ by)):
            assert 64 < np.count_nonzero(share ^ secret) < 192   # uniform, not the value
    assert not np.array_equal(res[1][2], bx) and not np.array_equal(res[2][2], by)


def test_every_batch_of_and_triples_is_large_enough_for_its_bucket_size():
    """One AND gate still buckets a batch of MIN_BATCH triples (the rest stays in the pool), and
    large requests split evenly: no remainder batch is bucketed with too few triples."""
    assert batches(1) == [MIN_BATCH] and batches(MIN_BATCH + 1) == [MIN_BATCH + 1]
    big = batches((1 << 19) + 1)
    assert len(big) == 2 and min(big) >= 1 << 18 and sum(big) == (1 << 19) + 1
    assert all(bucket_size(b) <= 4 for b in batches(10) + big)

    def prog(session):
        e = _engine(session)
        x = e.share_bits(XB[:1, :3], owner=0)
        (x & x).reveal()
        made, pooled = e.bit_triples_made, len(e._bit_pool[0])
        (x & x).reveal()  # from the pool: nothing new
        return made, pooled, e.bit_triples_made

    made, pooled, after = run_in_memory(2, prog, timeout=120)[0]
    assert made >= MIN_BATCH and pooled == made - 3 and after == made


class _SplitClear(InsecureLinks):
    """Clear links whose sender uses another Delta towards its first peer."""

    def delta(self, peer):
        first = [p for p in range(self.session.n) if p != self.me][0]
        return bytes(b ^ 0x5A for b in self.global_delta) if peer == first else self.global_delta


class _SplitDelta(ActiveEngine):
    def _bit_links(self):
        if self._blinks_obj is None:
            self._bit_delta = self.prg.random_bytes(16)
            self._blinks_obj = (OtLinks(self.session, label="abit", delta=None) if NATIVE  # a fresh Delta per peer
                                else _SplitClear(self.session, delta=self._bit_delta))
        return self._blinks_obj


def test_a_party_with_a_different_delta_per_peer_only_makes_the_and_check_fail():
    """The XOR of the G then carries (x y_i XOR z_i) D for an honest party i, which the
    deviating party cannot cancel; over a batch of at least MIN_BATCH triples the check passes
    only if every such bit is zero: every honest party stops, every time."""
    def prog(session):
        cls = _SplitDelta if session.index == session.n - 1 else ActiveEngine
        return bit_program(session, cls)

    for _ in range(2):
        res = run_in_memory(3, _outcome, prog, timeout=120)
        mine = res[:-1]
        assert all(r[0] == "error" for r in mine), res
        assert any(r[1] == "DeviationError" and "AND triples' check failed" in r[2] for r in mine), res
