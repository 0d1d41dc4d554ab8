"""The plaintext algebra GF(2)[X]/Φ_m as slots in GF(2^d): HElib's hypercube rows, decode against
schoolbook evaluation, the ring laws (products, automorphisms, Frobenius, rotations) checked on
coefficients with Python-int carry-less arithmetic mod X^m - 1, and the AES field embedding."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shaper.crypto.bgv import gf2
from shaper.crypto.bgv.algebra import HELIB_AES_GENS, algebra

SMALL_RINGS = (257, 771, 1271, 4369, 63, 75, 1155)


# ---------------------------------------------------------------------------------------------
# oracles: GF(2)[X] on Python ints, independent of the DFT code
# ---------------------------------------------------------------------------------------------


def _cyclic_mul(a: int, b: int, m: int) -> int:
    """a*b mod X^m - 1 over GF(2)."""
    c = gf2.clmul(a, b)
    mask = (1 << m) - 1
    while c >> m:
        c = (c & mask) ^ (c >> m)
    return c


def _cyclic_automorphism(bits: np.ndarray, u: int, m: int) -> np.ndarray:
    """a(X^u) mod X^m - 1 as a length-m 0/1 vector."""
    out = np.zeros(m, dtype=np.uint8)
    idx = np.flatnonzero(np.asarray(bits) & 1)
    np.bitwise_xor.at(out, idx * u % m, 1)
    return out


def _to_bits(a: int, n: int) -> np.ndarray:
    return gf2.int_to_bits(a, n)


def _schoolbook_slots(alg, bits, which) -> list[int]:
    """a(ζ^t) by Horner's rule with Python-int field arithmetic, for slots ``which``."""
    f = alg.field
    out = []
    for s in which:
        z = f.spow(alg.zeta, int(alg.reps[s]))
        acc = 0
        for b in reversed([int(x) & 1 for x in bits]):
            acc = f.smul(acc, z) ^ b
        out.append(acc)
    return out


def _poly_divexact(num: list[int], den: list[int]) -> list[int]:
    num = list(num)
    q = [0] * (len(num) - len(den) + 1)
    for i in range(len(q) - 1, -1, -1):
        c = num[i + len(den) - 1] // den[-1]
        q[i] = c
        for j, dj in enumerate(den):
            num[i + j] -= c * dj
    assert not any(num), "not an exact division"
    return q


def _cyclotomic_by_division(n: int, cache: dict[int, list[int]] = {}) -> list[int]:
    """Φ_n = (X^n - 1) / ∏_{δ | n, δ < n} Φ_δ, integer long division."""
    if n not in cache:
        p = [-1] + [0] * (n - 1) + [1]
        for delta in range(1, n):
            if n % delta == 0:
                p = _poly_divexact(p, _cyclotomic_by_division(delta))
        cache[n] = p
    return cache[n]


def _helib_find_generators(m: int) -> tuple[list[int], list[int]]:
    """HElib's findGenerators (NumbTh.cpp, no candidates) in plain Python, for small m."""
    from math import gcd

    units = [i for i in range(m) if gcd(i, m) == 1]
    pow2 = set()
    x = 1
    while x not in pow2:
        pow2.add(x)
        x = 2 * x % m
    sub = set(pow2)
    gens, ords = [], []
    while True:
        orders = {}
        for i in units:
            k, y = 1, i
            while y not in sub:
                y, k = y * i % m, k + 1
            orders[i] = k
        largest = max(orders.values())
        if largest == 1:
            return gens, ords
        best, quality = None, 0
        for i in units:
            if orders[i] != largest:
                continue
            j = pow(i, largest, m)
            if j == 1:
                best, quality = i, 2
                break
            if quality < 1 and j in pow2:
                best, quality = i, 1
        gens.append(best)
        ords.append(largest)
        sub = {h * pow(best, e, m) % m for h in sub for e in range(largest)}


def _aes_mul(a: int, b: int) -> int:
    """FIPS-197 §4.2 multiplication by xtime."""
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        if a & 0x100:
            a ^= 0x11B
        b >>= 1
    return r


# ---------------------------------------------------------------------------------------------
# parameters: HElib's rows
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m, phi, d, nslots", [
    (257, 256, 16, 16),
    (771, 512, 16, 32),
    (4369, 4096, 16, 256),
    (28679, 23040, 24, 960),
    (53261, 46080, 24, 1920),
])
def test_phi_d_and_slot_count_match_helib(m, phi, d, nslots):
    alg = algebra(m)
    assert (alg.phi, alg.d, alg.nslots) == (phi, d, nslots)
    assert int(np.prod(alg.ords)) == nslots


@pytest.mark.parametrize("m, ords, good", [
    (771, (32,), (False,)),
    (4369, (16, 16), (True, False)),
    (21845, (16, 4, 16), (True, True, False)),
    (28679, (16, 6, 10), (True, True, False)),
    (53261, (16, 12, 10), (True, True, False)),
])
def test_helib_table_generators_give_helib_orders_and_good_flags(m, ords, good):
    alg = algebra(m, gens=HELIB_AES_GENS[m])
    assert alg.gens == HELIB_AES_GENS[m]
    assert alg.ords == ords
    assert alg.good == good


@pytest.mark.parametrize("m, gens, ords, good", [
    (257, (3,), (16,), (False,)),
    (771, (5,), (32,), (False,)),
    (1271, (37, 95), (30, 2), (True, False)),
    (4369, (3, 317), (128, 2), (False, False)),
    (28679, (5, 9400, 1161), (240, 2, 2), (True, True, False)),
    (53261, (3, 11), (240, 8), (True, False)),
])
def test_greedy_generators_are_pinned(m, gens, ords, good):
    alg = algebra(m)
    assert (alg.gens, alg.ords, alg.good) == (gens, ords, good)


@pytest.mark.parametrize("m", [257, 771, 1271, 4369, 1155, 63])
def test_greedy_generators_match_a_plain_python_helib_find_generators(m):
    alg = algebra(m)
    gens, ords = _helib_find_generators(m)
    assert alg.gens == tuple(gens) and alg.ords == tuple(ords)


@pytest.mark.parametrize("m", SMALL_RINGS + (28679,))
def test_good_flags_and_frobenius_twists_describe_g_to_its_order(m):
    alg = algebra(m)
    for g, o, good, j in zip(alg.gens, alg.ords, alg.good, alg.frob_twist):
        assert good == (pow(g, o, m) == 1)
        if j >= 0:
            assert pow(g, o, m) == pow(2, j, m)


@pytest.mark.parametrize("m", SMALL_RINGS)
def test_representatives_tile_the_units_modulo_powers_of_two(m):
    alg = algebra(m)
    seen = {int(t) * pow(2, j, m) % m for t in alg.reps for j in range(alg.d)}
    assert len(seen) == alg.phi == alg.nslots * alg.d
    # hypercube order: slot index is the mixed radix of the exponents, first generator most significant
    for s in (0, alg.nslots // 3, alg.nslots - 1):
        e = np.unravel_index(s, alg.ords)
        t = 1
        for g, ei in zip(alg.gens, e):
            t = t * pow(g, int(ei), m) % m
        assert alg.reps[s] == t and tuple(alg.exponents[s]) == tuple(int(x) for x in e)


def test_explicit_generators_that_do_not_generate_are_refused():
    with pytest.raises(ValueError, match="do not generate"):
        algebra(53261, gens=(43863, 28680))
    with pytest.raises(ValueError, match="redundant"):
        algebra(257, gens=(2,))


@pytest.mark.parametrize("bad", [1, 0, -3, 2, 4096, 2.0, True, "257"])
def test_even_or_small_moduli_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="cyclotomic index m"):
        algebra(bad)


# ---------------------------------------------------------------------------------------------
# the field and Φ_m
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", SMALL_RINGS)
def test_zeta_has_order_m_and_the_field_modulus_is_the_smallest_irreducible(m):
    alg = algebra(m)
    f = alg.field
    assert f.sorder(alg.zeta) == m
    assert gf2.is_irreducible(f.modulus)
    assert not any(gf2.is_irreducible(p) for p in range(1 << alg.d, f.modulus))


@pytest.mark.parametrize("m", [257, 771, 1271, 63, 75, 105, 1155, 4369, 315])
def test_cyclotomic_matches_long_division_of_x_to_the_m_minus_one(m):
    assert algebra(m).cyclotomic() == _cyclotomic_by_division(m)


def test_cyclotomic_of_a_prime_is_all_ones_and_of_105_has_a_minus_two():
    assert algebra(257).cyclotomic() == [1] * 257
    assert -2 in algebra(105).cyclotomic()


@pytest.mark.parametrize("m", [257, 1271, 4369])
def test_zeta_to_every_unit_is_a_root_of_phi_mod_two(m):
    alg = algebra(m)
    phi2 = [c & 1 for c in alg.cyclotomic()]
    which = range(0, alg.nslots, max(1, alg.nslots // 16))
    assert _schoolbook_slots(alg, phi2, which) == [0] * len(which)


# ---------------------------------------------------------------------------------------------
# decode / encode
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", SMALL_RINGS)
def test_decode_equals_schoolbook_evaluation_at_zeta_to_the_representatives(m):
    alg = algebra(m)
    bits = np.random.default_rng(m).integers(0, 2, alg.phi)
    which = range(alg.nslots) if alg.nslots * alg.phi <= 80_000 else range(0, alg.nslots, alg.nslots // 8)
    assert [int(v) for v in alg.decode(bits)[list(which)]] == _schoolbook_slots(alg, bits, which)


def test_decode_of_the_monomials_one_and_x():
    alg = algebra(1271)
    one = np.zeros(alg.phi, dtype=np.uint8)
    one[0] = 1
    assert np.all(alg.decode(one) == 1)
    x = np.roll(one, 1)
    want = [alg.field.spow(alg.zeta, int(t)) for t in alg.reps]
    assert [int(v) for v in alg.decode(x)] == want


@pytest.mark.parametrize("m", SMALL_RINGS)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_encode_then_decode_is_the_identity_on_slots(m, seed):
    alg = algebra(m)
    v = np.random.default_rng(seed).integers(0, 1 << alg.d, alg.nslots, dtype=np.uint64)
    bits = alg.encode(v)
    assert bits.dtype == np.uint8 and bits.shape == (alg.phi,)
    assert np.array_equal(alg.decode(bits), v)


@pytest.mark.parametrize("m", SMALL_RINGS)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_decode_then_encode_is_the_identity_on_polynomials(m, seed):
    alg = algebra(m)
    bits = np.random.default_rng(seed).integers(0, 2, alg.phi).astype(np.uint8)
    assert np.array_equal(alg.encode(alg.decode(bits)), bits)


@pytest.mark.parametrize("m", [257, 1271, 4369])
def test_decode_reads_a_longer_vector_modulo_x_to_the_m_minus_one(m):
    alg = algebra(m)
    long = np.random.default_rng(1).integers(0, 2, m)
    assert np.array_equal(alg.decode(long), alg.decode(alg.reduce(long)))
    assert np.array_equal(alg.decode(long * 3), alg.decode(long))  # coefficients taken mod 2


def test_encode_and_decode_refuse_malformed_input_by_name():
    alg = algebra(257)
    with pytest.raises(ValueError, match="shape"):
        alg.encode(np.zeros(15, dtype=np.uint64))
    with pytest.raises(ValueError, match="2\\^16"):
        alg.encode(np.full(16, 1 << 16, dtype=np.uint64))
    with pytest.raises(ValueError, match="exceed m"):
        alg.decode(np.zeros(258, dtype=np.uint8))
    with pytest.raises(ValueError, match="1-D"):
        alg.decode(np.zeros((2, 2), dtype=np.uint8))


# ---------------------------------------------------------------------------------------------
# ring laws against coefficient arithmetic
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", SMALL_RINGS)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_decode_of_a_product_is_the_slotwise_product(m, seed):
    alg = algebra(m)
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(0, 2, alg.phi) for _ in range(2))
    c = _cyclic_mul(gf2.bits_to_int(a), gf2.bits_to_int(b), m)
    want = alg.field.mul(alg.decode(a), alg.decode(b))
    assert np.array_equal(alg.decode(_to_bits(c, m)), want)
    # the same product reduced mod Φ_m (Python-int long division) as the brief's oracle
    reduced = gf2.poly_mod(gf2.clmul(gf2.bits_to_int(a), gf2.bits_to_int(b)),
                           gf2.bits_to_int(np.array(alg.cyclotomic()) & 1))
    assert np.array_equal(alg.decode(_to_bits(reduced, alg.phi)), want)


@pytest.mark.parametrize("m", SMALL_RINGS)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_decode_of_an_automorphism_is_automorphism_on_slots(m, seed, data):
    alg = algebra(m)
    units = [u for u in range(1, m) if np.gcd(u, m) == 1]
    u = data.draw(st.sampled_from(units))
    a = np.random.default_rng(seed).integers(0, 2, alg.phi)
    kappa = _cyclic_automorphism(a, u, m)
    want = alg.automorphism_on_slots(u, alg.decode(a))
    assert np.array_equal(alg.decode(kappa), want)
    assert np.array_equal(alg.decode(alg.reduce(kappa)), want)


@pytest.mark.parametrize("m", SMALL_RINGS)
def test_kappa_two_squares_every_slot_and_frobenius_j_is_kappa_two_to_the_j(m):
    alg = algebra(m)
    v = np.random.default_rng(2).integers(0, 1 << alg.d, alg.nslots, dtype=np.uint64)
    assert np.array_equal(alg.automorphism_on_slots(2, v), alg.field.mul(v, v))
    for j in (0, 1, 3, alg.d - 1, alg.d + 2):
        assert np.array_equal(alg.frobenius(v, j), alg.automorphism_on_slots(pow(2, j, m), v))
    assert np.array_equal(alg.frobenius(v, alg.d), v)


@pytest.mark.parametrize("m", [257, 1271, 4369])
def test_automorphisms_compose_like_units(m):
    alg = algebra(m)
    v = np.random.default_rng(3).integers(0, 1 << alg.d, alg.nslots, dtype=np.uint64)
    u, w = alg.gens[0], (m - 1)
    both = alg.automorphism_on_slots(w, alg.automorphism_on_slots(u, v))
    assert np.array_equal(both, alg.automorphism_on_slots(u * w % m, v))


def test_automorphism_by_a_non_unit_is_refused():
    with pytest.raises(ValueError, match="not a unit"):
        algebra(4369).automorphism_on_slots(17, np.zeros(256, dtype=np.uint64))


# ---------------------------------------------------------------------------------------------
# rotations
# ---------------------------------------------------------------------------------------------

ROTATION_RINGS = [(257, None), (4369, None), (4369, HELIB_AES_GENS[4369]), (1271, None), (771, None),
                  (28679, HELIB_AES_GENS[28679])]


@pytest.mark.parametrize("m, gens", ROTATION_RINGS)
def test_rotation_terms_rotate_the_hypercube_along_every_dimension(m, gens):
    alg = algebra(m, gens)
    v = np.random.default_rng(4).integers(0, 1 << alg.d, alg.nslots, dtype=np.uint64)
    for dim, order in enumerate(alg.ords):
        for k in sorted({1, 2, order - 1, order // 2, order, order + 1, -1}):
            got = np.zeros_like(v)
            for u, mask in alg.rotation(dim, k):
                x = v if mask is None else alg.field.mul(v, mask)
                got ^= alg.automorphism_on_slots(u, x)
            want = np.roll(v.reshape(alg.ords), k, axis=dim).reshape(-1)
            assert np.array_equal(got, want), (dim, k)
            assert np.array_equal(alg.rotate_slots(v, dim, k), want)


@pytest.mark.parametrize("m, gens", ROTATION_RINGS)
def test_good_dimensions_rotate_with_one_automorphism_and_bad_ones_with_two_masked(m, gens):
    alg = algebra(m, gens)
    for dim, (g, order, good) in enumerate(zip(alg.gens, alg.ords, alg.good)):
        assert alg.rotation(dim, 0) == [(1, None)]
        terms = alg.rotation(dim, 1)
        if good:
            assert terms == [(pow(g, -1, m), None)]
        else:
            (u1, m1), (u2, m2) = terms
            assert (u1, u2) == (pow(g, -1, m), pow(g, order - 1, m))
            assert np.array_equal(m1 + m2, np.ones(alg.nslots, dtype=np.uint64))
            # the masks select source slots: the last layer along dim is the one that wraps
            assert np.array_equal(m2 == 1, alg.exponents[:, dim] == order - 1)


def test_rotation_refuses_a_missing_dimension():
    with pytest.raises(ValueError, match="dimension"):
        algebra(257).rotation(1, 1)


# ---------------------------------------------------------------------------------------------
# the AES field
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [257, 4369, 28679])
def test_embedding_is_a_field_homomorphism_with_fips_197_multiplication(m):
    alg = algebra(m)
    f = alg.field
    a, b = np.meshgrid(np.arange(256), np.arange(256))
    a, b = a.ravel(), b.ravel()
    want = np.array([_aes_mul(int(x), int(y)) for x, y in zip(a, b)])
    assert np.array_equal(f.mul(alg.embed(a), alg.embed(b)), alg.embed(want))
    assert np.array_equal(alg.embed(a) ^ alg.embed(b), alg.embed(a ^ b))
    assert np.array_equal(alg.extract(f.mul(alg.embed(a), alg.embed(b))), want)
    assert alg.extract(f.mul(alg.embed(0x57), alg.embed(0x83))) == 0xC1


def test_embedding_commutes_with_frobenius_and_extract_inverts_it():
    alg = algebra(53261)
    bytes_ = np.arange(256)
    e = alg.embed(bytes_)
    assert len(set(e.tolist())) == 256 and alg.embed(1) == 1
    assert np.array_equal(alg.extract(e), bytes_)
    squares = np.array([_aes_mul(int(x), int(x)) for x in bytes_])
    assert np.array_equal(alg.field.square(e), alg.embed(squares))
    assert np.array_equal(alg.field.frobenius(e, 8), e)  # GF(2^8) is fixed by Frobenius^8
    assert alg.extract(alg.embed(np.array([0x53], dtype=np.uint8))).dtype == np.uint8


def test_extract_refuses_values_outside_the_aes_subfield():
    alg = algebra(257)
    image = set(alg.embed(np.arange(256)).tolist())
    outside = next(x for x in range(2, 1 << 16) if x not in image)
    with pytest.raises(ValueError, match="not in the image"):
        alg.extract(np.array([1, outside], dtype=np.uint64))


def test_aes_helpers_refuse_a_degree_not_divisible_by_eight():
    alg = algebra(1271)  # d = 20: a fine ring, but no GF(2^8) inside GF(2^20)
    assert alg.d == 20
    with pytest.raises(ValueError, match="8 \\| d"):
        alg.embed(np.array([1]))
    with pytest.raises(ValueError, match="8 \\| d"):
        alg.extract(np.array([1]))


# ---------------------------------------------------------------------------------------------
# the full-size ring
# ---------------------------------------------------------------------------------------------


def test_53261_builds_and_round_trips_in_seconds():
    start = time.perf_counter()
    alg = algebra(53261, gens=HELIB_AES_GENS[53261])
    rng = np.random.default_rng(5)
    v = rng.integers(0, 1 << 24, alg.nslots, dtype=np.uint64)
    bits = alg.encode(v)
    assert np.array_equal(alg.decode(bits), v)
    a = rng.integers(0, 2, alg.phi)
    assert np.array_equal(alg.encode(alg.decode(a)), a)
    assert time.perf_counter() - start < 10
