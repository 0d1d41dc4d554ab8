"""The slot simulator and the evaluator-generic rotate: slot arithmetic, rotations equal to hypercube
rolls on the simulator and on a coefficient-level evaluator (GF(2)[X]/Φ_m polynomials, automorphisms
as coefficient permutations), and rotate's use of the evaluator interface only."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shaper.crypto.bgv import gf2
from shaper.crypto.bgv.algebra import HELIB_AES_GENS, algebra
from shaper.crypto.bgv.slots import SlotEvaluator, rotate

RINGS = [(257, None), (4369, None), (4369, HELIB_AES_GENS[4369]), (1271, None), (28679, None)]


def _random(alg, seed):
    return np.random.default_rng(seed).integers(0, 1 << alg.d, alg.nslots, dtype=np.uint64)


class PolynomialEvaluator:
    """Unencrypted ring arithmetic: a "ciphertext" is a GF(2)[X]/Φ_m polynomial (Python int)."""

    def __init__(self, alg):
        self.algebra = alg
        self.phi = gf2.bits_to_int(np.array(alg.cyclotomic()) & 1)

    def encode(self, slots):
        return gf2.bits_to_int(self.algebra.encode(slots))

    def add(self, x, y):
        return x ^ y

    def mul_plain(self, x, p):
        return gf2.poly_mod(gf2.clmul(x, p), self.phi)

    def automorphism(self, x, u):
        m = self.algebra.m
        bits = gf2.int_to_bits(x, self.algebra.phi)
        out = np.zeros(m, dtype=np.uint8)
        np.bitwise_xor.at(out, np.flatnonzero(bits) * u % m, 1)
        return gf2.bits_to_int(self.algebra.reduce(out))

    def decode(self, x):
        return self.algebra.decode(gf2.int_to_bits(x, self.algebra.phi))


class Opaque:
    """A ciphertext stand-in that supports nothing but being passed back to its evaluator."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __getattr__(self, name):
        raise AssertionError(f"rotate looked inside a ciphertext ({name})")


class RecordingEvaluator:
    """Wraps the simulator, hides its ciphertexts behind Opaque and counts calls."""

    def __init__(self, alg):
        self.algebra = alg
        self.sim = SlotEvaluator(alg)
        self.calls: list[str] = []

    def encode(self, slots):
        self.calls.append("encode")
        return ("plaintext", self.sim.encode(slots))

    def add(self, x, y):
        self.calls.append("add")
        return Opaque(self.sim.add(x.value, y.value))

    def mul_plain(self, x, p):
        self.calls.append("mul_plain")
        return Opaque(self.sim.mul_plain(x.value, p[1]))

    def automorphism(self, x, u):
        self.calls.append("automorphism")
        return Opaque(self.sim.automorphism(x.value, u))


@pytest.mark.parametrize("m, gens", RINGS)
def test_rotate_on_the_simulator_rolls_the_hypercube(m, gens):
    alg = algebra(m, gens)
    ev = SlotEvaluator(alg)
    x = _random(alg, 1)
    for dim, order in enumerate(alg.ords):
        for k in sorted({0, 1, order - 1, order // 2 + 1, -2}):
            want = np.roll(x.reshape(alg.ords), k, axis=dim).reshape(-1)
            assert np.array_equal(rotate(ev, x, dim, k), want), (dim, k)


@pytest.mark.parametrize("m, gens", [(257, None), (4369, HELIB_AES_GENS[4369]), (1271, None)])
def test_rotate_on_ring_polynomials_rolls_the_decoded_hypercube(m, gens):
    alg = algebra(m, gens)
    ev = PolynomialEvaluator(alg)
    x = _random(alg, 2)
    for dim, order in enumerate(alg.ords):
        for k in (1, order - 1):
            got = ev.decode(rotate(ev, ev.encode(x), dim, k))
            assert np.array_equal(got, np.roll(x.reshape(alg.ords), k, axis=dim).reshape(-1)), (dim, k)


@pytest.mark.parametrize("m, gens", RINGS)
def test_rotate_costs_one_automorphism_on_good_dimensions_and_two_masked_on_bad_ones(m, gens):
    alg = algebra(m, gens)
    x = Opaque(_random(alg, 3))
    for dim, good in enumerate(alg.good):
        ev = RecordingEvaluator(alg)
        out = rotate(ev, x, dim, 1)
        want = np.roll(x.value.reshape(alg.ords), 1, axis=dim).reshape(-1)
        assert np.array_equal(out.value, want)
        if good:
            assert ev.calls == ["automorphism"]
        else:
            assert sorted(ev.calls) == sorted(["encode", "mul_plain", "automorphism"] * 2 + ["add"])
        ev = RecordingEvaluator(alg)
        assert rotate(ev, x, dim, alg.ords[dim]) is x and ev.calls == []


@pytest.mark.parametrize("m", [257, 1271, 28679])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_simulator_arithmetic_is_slotwise_gf2d_arithmetic(m, seed):
    alg = algebra(m)
    ev = SlotEvaluator(alg)
    f = alg.field
    x, y = _random(alg, seed), _random(alg, seed + 1)
    p = ev.encode(y)
    assert np.array_equal(ev.add(x, y), x ^ y) and np.array_equal(ev.add_plain(x, p), x ^ y)
    assert np.array_equal(ev.mul(x, y), f.mul(x, y)) and np.array_equal(ev.mul_plain(x, p), f.mul(x, y))
    assert np.array_equal(ev.square(x), f.mul(x, x))
    assert np.array_equal(ev.frobenius(x, 3), ev.automorphism(x, pow(2, 3, m)))
    # the simulator agrees with the ring: decode(encode(x)·encode(y)) = x·y
    poly = PolynomialEvaluator(alg)
    assert np.array_equal(poly.decode(poly.mul_plain(poly.encode(x), poly.encode(y))), ev.mul(x, y))


def test_simulator_refuses_malformed_slot_vectors():
    ev = SlotEvaluator(algebra(257))
    with pytest.raises(ValueError, match="shape"):
        ev.add(np.zeros(16, dtype=np.uint64), np.zeros(17, dtype=np.uint64))
    with pytest.raises(ValueError, match="2\\^16"):
        ev.encode(np.full(16, 1 << 20, dtype=np.uint64))
    with pytest.raises(ValueError, match="integers"):
        ev.mul(np.zeros(16), np.zeros(16, dtype=np.uint64))


def test_gf2d_field_arithmetic_agrees_with_python_ints():
    rng = np.random.default_rng(6)
    for d in (8, 16, 20, 24, 48, 63):
        f = gf2.field(d)
        a, b = (rng.integers(0, 1 << min(d, 62), 64, dtype=np.uint64) for _ in range(2))
        got = f.mul(a, b)
        assert [int(v) for v in got] == [f.smul(int(x), int(y)) for x, y in zip(a, b)]
        nz = np.where(a == 0, 1, a)
        assert np.all(f.mul(nz, f.inv(nz)) == 1)
        assert np.array_equal(f.frobenius(a, d), a)
        assert np.array_equal(f.mul_const(a, int(b[0])), f.mul(a, b[0]))
        assert set(f.trace(a).tolist()) <= {0, 1}
    assert gf2.smallest_irreducible(8) == 0x11B  # the AES polynomial is the first irreducible octic
    assert gf2.is_irreducible(0x1002B) and not gf2.is_irreducible(0x10001)
