"""daBits and the conversions on them (``shaper.protocols.active.dabits``) against deviating
parties, at 2, 3 and 5 parties.

=====================================  ========================================  ===========================
deviation                              where                                     outcome
=====================================  ========================================  ===========================
field bits = NOT its Z_2 bits          a party's inputs into the fields          the parity check stops
                                                                                 every honest party
2 where its bit is 1                   a party's inputs                          the square (bit) check
1 in one limb, 0 in the others         one input (an idempotent of Z_Q)          the CRT range check
1/2 mod Q                              one input                                 the square check
a mask out of range                    a party's check masks                     the CRT range check
another mask within range              a party's check mask                      harmless (T moves by an
                                                                                 even amount, in range)
one entry of an input broadcast        the message (limb 0 of daBit 0)           the batch's check (views)
any opening offset                     every field opening of the batch          the triples' sacrifice
                                                                                 (their MACs, else)
the masked bit of a conversion         Z_2 -> Z_q's opened x XOR b               the bit MAC check
two parties both negate                a coalition at 3 and 5 parties            harmless: the XOR of the
                                                                                 two negations is the right
                                                                                 daBit, the outputs are right
skipped opening                        the consistency opening not sent          receive timeout
=====================================  ========================================  ===========================
"""

import importlib.util
import math

import numpy as np
import pytest

from shaper.errors import ConfigError
from shaper.protocols.active import ActiveEngine
from shaper.protocols.active.dabits import MAX_BATCH, MIN_BATCH, _beta, _fits, check_plan
from shaper.protocols.ot import InsecureLinks

from .deviating import Deviation, run
from .test_active import assert_all_stopped, honest

NATIVE = importlib.util.find_spec("shaper._native") is not None
P61 = (1 << 61) - 1
P50 = 1125899906842597
P31 = 2147483647
BASIS = (P61, P50, P31)
Q = math.prod(BASIS)
COUNT = 150


def _engine(session, cls=ActiveEngine):
    return cls(session, links=None if NATIVE else InsecureLinks(session))


class Mutating(ActiveEngine):
    """A party that inputs ``mutate(its bits, its masks)`` into the fields instead of its daBit
    shares and masks (everything it sends is otherwise well-formed)."""

    mutate = staticmethod(lambda bits, masks: (bits, masks))

    def share_mod(self, values, *, owner, moduli):
        if owner == self.me and values is not None and len(values) > self.soundness:
            vals = list(values)
            bits, masks = self.mutate(vals[:-self.soundness], vals[-self.soundness:])
            values = np.array(list(bits) + list(masks), dtype=object)
        return super().share_mod(values, owner=owner, moduli=moduli)


def mutating(fn):
    return type("M", (Mutating,), {"mutate": staticmethod(fn)})


def dabit_program(session, deviant=(), cls=Mutating, count=COUNT, basis=BASIS):
    e = _engine(session, cls if session.index in deviant else ActiveEngine)
    b2, bf = e.dabits(count, basis)
    return b2.reveal(), bf.reveal()


def assert_dabits_right(results):
    for r in results:
        assert r[0] == "ok", r
        bits, field = r[1]
        for c in range(field.shape[1]):
            np.testing.assert_array_equal(field[:, c], bits.astype(np.uint64))


# -- honest runs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("parties", [2, 3, 5])
def test_dabits_are_one_bit_in_z2_and_every_limb(parties):
    res = run(parties, dabit_program, timeout=20)
    assert_dabits_right(res)
    assert 40 < res[0][1][0].sum() < 110  # 150 uniform bits


def test_a_basis_too_small_for_the_check_gets_helper_primes():
    q = 35184371138561  # one 45-bit prime: beta does not fit below q / 2
    batch, ext = check_plan((q,), 2, 1000)
    assert ext[0] == q and len(ext) >= 2 and all(p > 1 << 60 for p in ext[1:])
    assert _fits(ext, 2, batch) and not _fits((q,), 2, batch)
    res = run(2, dabit_program, (), Mutating, 100, (q,), timeout=20)
    assert_dabits_right(res)
    assert res[0][1][1].shape == (100, 1)  # the helper limbs are dropped


def test_check_plan_sizes():
    # one 61-bit prime holds 2^16 daBits at two parties, not at five (then the batch shrinks)
    assert check_plan((P61,), 2, 1 << 16) == (1 << 16, (P61,))
    batch, ext = check_plan((P61,), 5, 1 << 16)
    assert ext == (P61,) and MIN_BATCH <= batch < 1 << 16 and _fits((P61,), 5, batch)
    assert check_plan(BASIS, 2, 10 ** 7)[0] == MAX_BATCH
    # the bound every honest run stays under, and the idempotent margin
    assert _beta(100, 2) < math.isqrt(Q) - 1


def test_conversions_refuse_what_they_cannot_do():
    def prog(session):
        e = _engine(session)
        out = []
        for fn in (lambda: e.trits_to_mod(None, BASIS), lambda: e.mod_to_bits(e.random_mod(3, BASIS)),
                   lambda: e.bits_to_mod(np.zeros(3, bool), BASIS), lambda: e.dabits(-1, BASIS)):
            try:
                fn()
                out.append("no error")
            except Exception as exc:  # noqa: BLE001 - the type is what the test compares
                out.append(type(exc).__name__)
        return out

    res = run(2, prog)
    assert res[0] == ("ok", ["UnsupportedConversion", "ValueError", "TypeError", "ValueError"])
    with pytest.raises(ConfigError):
        check_plan((4,), 2, 10)


# -- deviations in what a party inputs ---------------------------------------------------------------
@pytest.mark.parametrize("parties", [2, 3, 5])
def test_field_bits_that_negate_the_z2_bits_are_caught(parties):
    cls = mutating(lambda bits, masks: ([1 - int(b) for b in bits], masks))
    deviant = parties - 1
    res = run(parties, dabit_program, (deviant,), cls, deviant=deviant, timeout=20)
    assert_all_stopped(res, deviant, words="differ between Z_2 and the fields")


def test_a_two_instead_of_a_one_is_caught():
    cls = mutating(lambda bits, masks: ([2 * int(b) for b in bits], masks))
    res = run(2, dabit_program, (0,), cls, deviant=0, timeout=20)
    assert_all_stopped(res, 0, words="not a bit")


@pytest.mark.parametrize("parties", [2, 3, 5])
def test_one_bit_in_one_limb_only_is_caught(parties):
    e_first = (Q // P61) * pow(Q // P61, -1, P61) % Q  # 1 mod P61, 0 mod the others
    cls = mutating(lambda bits, masks: ([e_first] + list(bits[1:]), masks))
    res = run(parties, dabit_program, (1,), cls, deviant=1, timeout=20)
    assert_all_stopped(res, 1, words="not one integer across the limbs")


def test_a_half_is_caught():
    half = pow(2, -1, Q)
    cls = mutating(lambda bits, masks: ([half] + list(bits[1:]), masks))
    res = run(2, dabit_program, (1,), cls, deviant=1, timeout=20)
    assert_all_stopped(res, 1, words="not a bit")


def test_masks_out_of_range_are_caught_and_a_mask_within_range_is_harmless():
    huge = mutating(lambda bits, masks: (bits, [1 << 100] * len(masks)))
    res = run(2, dabit_program, (0,), huge, deviant=0, timeout=20)
    assert_all_stopped(res, 0, words="not one integer across the limbs")
    odd = mutating(lambda bits, masks: (bits, [masks[0] + 1] + list(masks[1:])))  # T_0 + 2: parity kept, so
    res = run(2, dabit_program, (0,), odd, deviant=0, timeout=20)  # an offset of one in m_0 moves T_0 by 2
    assert all(r[0] == "ok" for r in res)  # ... and changes nothing the check relies on: harmless
    assert_dabits_right(res)


@pytest.mark.parametrize("parties", [3, 5])
def test_a_coalition_that_negates_twice_is_harmless(parties):
    cls = mutating(lambda bits, masks: ([1 - int(b) for b in bits], masks))
    res = run(parties, dabit_program, (0, 1), cls, deviant=[0, 1], timeout=20)
    assert_dabits_right(res)  # NOT a XOR NOT b = a XOR b: the daBits are right


# -- deviations in messages -------------------------------------------------------------------------
def test_an_offset_input_broadcast_is_caught():
    dev = Deviation(r"act-input-\d+", "offset", nth=0, index=0, moduli=BASIS)
    res = run(2, dabit_program, deviant=1, deviations=[dev], timeout=20)
    assert dev.fired
    # the engine's check of the batch runs the views' comparison first: the offset broadcast is
    # not what the deviant recorded, so that is what stops the honest parties (the semantic
    # versions of this deviation, above, reach the daBit checks themselves)
    assert_all_stopped(res, 1, words="MAC check failed")


@pytest.mark.parametrize("parties", [2, 3])
def test_offset_openings_are_caught_by_the_mac_check(parties):
    dev = Deviation(r"act-open-\d+", "offset", nth=None, index=0, moduli=BASIS)
    res = run(parties, dabit_program, deviant=0, deviations=[dev], timeout=20)
    assert dev.fired
    assert_all_stopped(res, 0)  # the first opening touched is the triples' sacrifice, which stops there


def test_a_skipped_opening_stops_every_honest_party():
    dev = Deviation(r"act-open-\d+", "drop", nth=None)
    res = run(2, dabit_program, deviant=1, deviations=[dev], timeout=2)
    for r in honest(res, 1):
        assert r[0] == "error"


def conversion_program(session):
    e = _engine(session)
    x = e.share_bits(np.array([True, False, True, True]), owner=0)
    return e.bits_to_mod(x, BASIS).reveal()


def test_an_offset_masked_bit_in_a_conversion_is_caught():
    # the conversion's own opening of x XOR b is the last bit opening before the output
    dev = Deviation(r"act-bopen-\d+", "offset", nth=None, index=0)
    res = run(2, conversion_program, deviant=1, deviations=[dev], timeout=20)
    assert dev.fired
    assert_all_stopped(res, 1, words="MAC check")


def test_conversions_are_right_at_five_parties():
    res = run(5, conversion_program, timeout=20)
    for r in res:
        assert r[0] == "ok"
        np.testing.assert_array_equal(r[1][:, 0], [1, 0, 1, 1])


def a2b_program(session):
    e = _engine(session)
    v = e.share_mod([5, P61 - 1, 0] if session.index == 0 else None, owner=0, moduli=(P61,))
    return e.mod_to_bits(v).reveal()


def test_a2b_is_right_and_its_deviations_are_caught():
    res = run(3, a2b_program, timeout=20)
    for r in res:
        assert r[0] == "ok"
        planes = r[1]
        assert [sum(int(planes[j, i]) << j for j in range(61)) for i in range(3)] == [5, P61 - 1, 0]
    # the opened c = x + r mod q, offset: the MAC check before the output
    dev = Deviation(r"act-open-\d+", "offset", nth=None, index=0, moduli=(P61,))
    res = run(2, a2b_program, deviant=1, deviations=[dev], timeout=20)
    assert dev.fired
    assert_all_stopped(res, 1)


def ternary_program(session):
    e = _engine(session)
    return e.ternary(40, BASIS).reveal()


def test_a_flipped_ternary_rejection_is_caught_before_the_draws_are_used():
    # the rejection flags are the first bit opening of ternary(): a flipped one would keep a
    # (1, 1) draw; the bit MAC check runs right after it
    dev = Deviation(r"act-bopen-\d+", "offset", nth=0, index=0)
    res = run(2, ternary_program, deviant=0, deviations=[dev], timeout=20)
    assert dev.fired
    assert_all_stopped(res, 0, words="bit MAC check")


class BitFlipping(ActiveEngine):
    """A party whose Z_2 input of its private bits is the negation of what it proves in the
    field (the private bits of Z_q -> Z_2)."""

    def share_bits(self, bits, *, owner):
        if owner == self.me and bits is not None:
            bits = ~np.asarray(bits, dtype=bool)
        return super().share_bits(bits, owner=owner)


@pytest.mark.parametrize("parties", [2, 3])
def test_private_bits_that_differ_between_z2_and_the_field_are_caught(parties):
    def prog(session):
        e = _engine(session, BitFlipping if session.index == parties - 1 else ActiveEngine)
        v = e.share_mod([5, 6] if session.index == 0 else None, owner=0, moduli=(P61,))
        return e.mod_to_bits(v).reveal()

    res = run(parties, prog, deviant=parties - 1, timeout=20)
    assert_all_stopped(res, parties - 1, words="differ between Z_2 and the field")


def test_z_q_to_z2_over_a_narrow_prime_uses_dabits():
    q = 2147483647  # 31 bits: too narrow for the private bits' check, so daBits (with helper primes)

    def prog(session):
        e = _engine(session)
        v = e.share_mod([0, 1, q - 1, 12345] if session.index == 0 else None, owner=0, moduli=(q,))
        return e.mod_to_bits(v).reveal()

    res = run(2, prog, timeout=20)
    planes = res[0][1]
    assert [sum(int(planes[j, i]) << j for j in range(31)) for i in range(4)] == [0, 1, q - 1, 12345]


class ZeroCoins(Mutating):
    """Every party: the bit check's first ``zeroed`` combinations drawn as zero (the 1/q event
    of one combination, forced), to show the others still stop a non-bit."""

    zeroed = 1

    def joint_coins(self, what):
        coins = super().joint_coins(what)
        if what != "dabit-coins":
            return coins
        engine = self

        class Zeroing:
            calls = 0

            def below(self, bound, n):
                Zeroing.calls += 1
                out = coins.below(bound, n)
                return np.zeros_like(out) if Zeroing.calls <= engine.zeroed * len(BASIS) else out

            def __getattr__(self, name):
                return getattr(coins, name)

        return Zeroing()


def test_the_bit_check_has_combinations_to_spare():
    # party 0 inputs 2 where its Z_2 share is 0: the XOR with the honest bit is 2 or -1, a small
    # non-bit of the right parity, which only the bit check stops
    two = staticmethod(lambda bits, masks: ([2 if int(b) == 0 else 1 for b in bits], masks))

    def prog(session, zeroed):
        honest_cls = type("H", (ZeroCoins,), {"zeroed": zeroed})
        cls = type("D", (ZeroCoins,), {"mutate": two, "zeroed": zeroed}) if session.index == 0 else honest_cls
        e = _engine(session, cls)
        b2, bf = e.dabits(COUNT, BASIS)
        return b2.reveal(), bf.reveal()

    res = run(2, prog, 1, deviant=0, timeout=20)   # the first combination zero: the next one stops it
    assert_all_stopped(res, 0, words="not a bit")
    # every combination zero (probability 1/q each): the non-bits pass the parity check, which
    # is why there is more than one combination
    res = run(2, prog, 10, deviant=0, timeout=20)
    assert all(r[0] == "ok" for r in res)
    bits, field = res[1][1]
    assert np.any(field[:, 0] != bits.astype(np.uint64))


# -- fixed Hamming weight -----------------------------------------------------------------------------
def weight_program(session, count, length, weight):
    from shaper.protocols.additive import sampling

    e = _engine(session)
    return sampling.hamming_weight(e, count, length, weight, BASIS).reveal()  # the module function dispatches


def test_fixed_weight_vectors_have_the_law():
    count, length, weight = 300, 8, 3
    res = run(2, weight_program, count, length, weight, timeout=60)
    out = res[0][1]
    limbs = [np.array([[int(v) - q if int(v) > q // 2 else int(v) for v in row] for row in out[..., c]])
             for c, q in enumerate(BASIS)]
    assert all(np.array_equal(limbs[0], limb) for limb in limbs)
    v = limbs[0]
    assert set(np.unique(v)) == {-1, 0, 1}
    assert np.all((v != 0).sum(axis=1) == weight)
    per_position = (v != 0).sum(axis=0)  # expected 112.5 each, sd 7.9: a window of 5 sd
    assert np.all((per_position > 72) & (per_position < 153)), per_position
    signs = v[v != 0]
    assert 380 < (signs > 0).sum() < 520  # 900 signs, sd 15


def test_fixed_weight_at_three_parties_and_every_entry_nonzero():
    res = run(3, weight_program, 2, 40, 40, timeout=60)
    for r in res:
        assert r[0] == "ok"
        v = r[1][..., 0]
        assert np.all((v == 1) | (v == BASIS[0] - 1))


def test_a_flipped_weight_verdict_is_caught_before_a_vector_is_kept():
    # the opened [weight == h] of the draws: a flipped one would keep a vector of another weight;
    # the bit MAC check runs before any vector is kept
    dev = Deviation(r"act-bopen-\d+", "offset", nth=None, index=0)
    res = run(2, weight_program, 3, 8, 3, deviant=1, deviations=[dev], timeout=20)
    assert dev.fired
    assert_all_stopped(res, 1, words="bit MAC check")
