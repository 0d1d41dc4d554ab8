"""Range-checked inputs over an RNS basis (``ActiveEngine.share_mod_in_range(moduli=...)``):
one integer in [lo, hi] in every limb, against deviating owners and parties.

=====================================  ========================================  ===========================
deviation                              where                                     outcome
=====================================  ========================================  ===========================
an entry one past either end           the owner's values                        refused by the owner's own
                                                                                 code, nothing sent
different in-range values per limb     the owner's proofs in the anchor limbs    the digit check (one
                                                                                 integer in every limb)
a lift input off in one limb           another party's r_i                       the lift's range check
an offset opening                      every field opening                       the MAC check (or the
                                                                                 sacrifice)
=====================================  ========================================  ===========================
"""

import importlib.util
import math

import numpy as np
import pytest

from shaper.protocols.active import ActiveEngine
from shaper.protocols.ot import InsecureLinks

from .deviating import Deviation, run
from .test_active import assert_all_stopped

NATIVE = importlib.util.find_spec("shaper._native") is not None
CKKS = (1152921504606748673, 35184371138561, 35184370941953, 35184370352129, 35184370155521,
        35184369893377, 35184368877569, 35184368320513, 1152921504606683137)
LO, HI = -(1 << 40), 1 << 40
VALS = [LO, HI, 0, 1, -1, 12345678901, -98765432109, HI - 1, LO + 1]


def _engine(session, cls=ActiveEngine):
    return cls(session, links=None if NATIVE else InsecureLinks(session))


def program(session, basis=CKKS, owner=0, cls=ActiveEngine, deviant=(), values=VALS, lo=LO, hi=HI):
    e = _engine(session, cls if session.index in deviant else ActiveEngine)
    x = e.share_mod_in_range(values if session.index == owner else None, owner=owner, moduli=basis, lo=lo, hi=hi)
    return x.reveal()


def centered(out, basis):
    return [[int(v) - q if int(v) > q // 2 else int(v) for v in out[:, c]] for c, q in enumerate(basis)]


@pytest.mark.parametrize("parties", [2, 3, 5])
def test_entries_are_one_integer_in_every_limb_and_the_bounds_are_accepted(parties):
    res = run(parties, program, CKKS, parties - 1, timeout=30)
    for r in res:
        assert r[0] == "ok", r
        assert all(limb == VALS for limb in centered(r[1], CKKS))


def test_a_basis_of_two_wide_primes():
    basis = ((1 << 61) - 1, 1125899906842597)
    res = run(2, program, basis, timeout=30)
    assert all(limb == VALS for limb in centered(res[0][1], basis))


@pytest.mark.parametrize("value", [HI + 1, LO - 1])
def test_the_owner_refuses_an_entry_one_past_either_end(value):
    res = run(2, program, CKKS, 0, ActiveEngine, (), [0, value], timeout=5)
    assert res[0][0] == "error" and res[0][1] == "ValueError" and "outside the agreed range" in res[0][2]
    assert res[1][0] == "error"  # the other party waited for an input that never came


class LimbSplitting(ActiveEngine):
    """An owner that proves, in the anchor's second limb, the entries plus one (every one still in
    range): each limb's proof passes, but the limbs hold different integers."""

    def _limb_in_range(self, values, owner, q, lo, hi, keys):
        self._limbs = getattr(self, "_limbs", 0) + 1
        if self._limbs == 2:
            values = [v + 1 for v in values]
        return super()._limb_in_range(values, owner, q, lo, hi, keys)


@pytest.mark.parametrize("parties", [2, 3, 5])
def test_different_values_in_different_limbs_are_caught(parties):
    vals = [0, 5, 17, HI - 1]
    res = run(parties, program, CKKS, 0, LimbSplitting, (0,), vals, deviant=0, timeout=30)
    assert_all_stopped(res, 0, words="not one integer in every limb")


class LiftSkewing(ActiveEngine):
    """A party whose lift inputs are off by one in the first limb only."""

    def share_mod(self, values, *, owner, moduli):
        mods = tuple(moduli)
        if owner == self.me and values is not None and len(mods) > 3 and len(values) > 64:
            q = math.prod(mods)
            e0 = (q // mods[0]) * pow(q // mods[0], -1, mods[0]) % q  # 1 mod the first limb, 0 mod the rest
            values = np.array([int(v) + e0 for v in values], dtype=object)
        return super().share_mod(values, owner=owner, moduli=mods)


def test_a_lift_input_that_is_not_one_integer_is_caught():
    vals = list(range(100))
    res = run(2, program, CKKS, 0, LiftSkewing, (1,), vals, 0, 1000, deviant=1, timeout=30)
    assert_all_stopped(res, 1, words="lift's range check failed")


def test_offset_openings_are_caught():
    dev = Deviation(r"act-open-\d+", "offset", nth=None, index=0)
    res = run(2, program, CKKS, 0, deviant=1, deviations=[dev], timeout=30)
    assert dev.fired
    assert_all_stopped(res, 1)


def test_one_prime_or_a_basis_not_both():
    def prog(session):
        e = _engine(session)
        try:
            e.share_mod_in_range([1], owner=0, lo=0, hi=3, modulus=CKKS[0], moduli=CKKS)
        except Exception as exc:  # noqa: BLE001 - the type is what the test compares
            return type(exc).__name__

    assert run(2, prog)[0] == ("ok", "ConfigError")


@pytest.mark.parametrize("values", [[5, 7], list(range(5000))])
def test_every_party_sizes_the_anchor_alike_whatever_the_count(values):
    # the owner knows the count before the others do: the anchor must not depend on it
    res = run(2, program, CKKS, 0, ActiveEngine, (), values, 0, 1 << 30, timeout=30)
    for r in res:
        assert r[0] == "ok", r
        assert all(limb == values for limb in centered(r[1], CKKS))


def test_a2b_of_a_limb_from_a_basis_with_a_narrow_prime():
    basis = (CKKS[0], 2147483647)  # the 31-bit prime needs 3 MAC keys; the 60-bit limb alone 2

    def prog(session):
        e = _engine(session)
        x = e.share_mod([3, 12345678901234] if session.index == 0 else None, owner=0, moduli=basis)
        return e.mod_to_bits(x.limb(0)).reveal()

    res = run(2, prog, timeout=30)
    planes = res[0][1]
    assert [sum(int(planes[j, i]) << j for j in range(planes.shape[0])) for i in range(2)] == [3, 12345678901234]


class ShapeSwitching(ActiveEngine):
    """An owner that announces one entry fewer in the anchor's second limb."""

    def _limb_in_range(self, values, owner, q, lo, hi, keys):
        self._limbs = getattr(self, "_limbs", 0) + 1
        if self._limbs == 2:
            values = values[:-1]
        return super()._limb_in_range(values, owner, q, lo, hi, keys)


def test_different_shapes_in_different_limbs_are_caught():
    res = run(2, program, CKKS, 0, ShapeSwitching, (0,), [1, 2, 3], deviant=0, timeout=30)
    assert_all_stopped(res, 0, words="different shapes in different limbs")


@pytest.mark.parametrize("anchor", [(2305843009213693951,), ((1 << 61) - 1, 2305843009213693967),
                                    (2305843009213693967, 2305843009213693973, 1152921504606683137)])
def test_the_vectorised_crt_gives_the_centred_integers_in_every_target(anchor):
    """crt_into (Garner digits, the sign from Q/2's digits, Horner per target) against Python's
    integers: random values over the whole centred range, its ends, and small ones of both signs."""
    import math
    import random

    from shaper.protocols.active.lift import crt_into

    rng = random.Random(5)
    big = math.prod(anchor)
    xs = [rng.randrange(-big // 2 + 1, big // 2 + 1) for _ in range(500)] + [big // 2, -(big // 2) + 1, 0, -1, 1]
    xs += [rng.randrange(-(1 << 40), 1 << 40) for _ in range(200)]
    residues = np.array([[x % q for q in anchor] for x in xs], dtype=np.uint64)
    targets = (9007199251660801, 1152921504606683137, 2305843009213693951)
    got = crt_into(residues, anchor, targets)
    assert got.tolist() == [[x % q for q in targets] for x in xs]


# -- small ranges: one proof limb, the other limbs checked into it ---------------------------------
SMALL = [-19, 19, 0, 5, -7] * 300  # 1500 entries: two batches of the consistency check


@pytest.mark.parametrize("parties", [2, 3])
def test_a_small_range_is_proven_in_one_limb_and_is_one_integer_everywhere(parties):
    from shaper.protocols.active import ranges

    assert ranges._small_fits(CKKS, 38) and not ranges._small_fits(CKKS, 1000)
    res = run(parties, program, CKKS, 0, ActiveEngine, (), SMALL, -19, 19, timeout=30)
    assert all(r[0] == "ok" for r in res)
    assert centered(res[0][1], CKKS) == [SMALL] * len(CKKS)


class SmallSkewing(ActiveEngine):
    """An owner whose plain input in the limbs besides the proof limb is off by one in one limb
    (``what`` "value": entry 1000; "mask": the check's first mask)."""

    what = "value"

    def share_mod(self, values, *, owner, moduli):
        mods = tuple(moduli)
        target = len(SMALL) if self.what == "value" else None
        if owner == self.me and values is not None and len(mods) > 1 and \
                (len(values) == target or (target is None and len(mods) == len(CKKS))):
            values = np.array([int(v) for v in values], dtype=object)
            q = math.prod(mods)
            values[0 if target is None else 1000] += (q // mods[1]) * pow(q // mods[1], -1, mods[1]) % q
        return super().share_mod(values, owner=owner, moduli=mods)


class MaskSkewing(SmallSkewing):
    what = "mask"


@pytest.mark.parametrize("cls", [SmallSkewing, MaskSkewing])
@pytest.mark.parametrize("parties", [2, 3])
def test_a_small_range_input_off_in_one_limb_is_caught(cls, parties):
    res = run(parties, program, CKKS, 0, cls, (0,), SMALL, -19, 19, deviant=0, timeout=30)
    assert_all_stopped(res, 0, words="not one integer in every limb")
