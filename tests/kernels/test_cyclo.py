"""The double-CRT transform over Z_q[X]/Phi_m for odd m (shaper.kernels.cyclo contract): both
implementations against first principles in Python integers (Phi_m by long division, schoolbook
products, direct evaluation at zeta^u, a(X^t) on coefficients), then the native
``CycloContext`` against the numpy reference bit for bit (skipped where the extension lacks it)."""

import functools
import random

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shaper.kernels import cyclo
from shaper.kernels.cyclo import (
    cofactor,
    context,
    cyclotomic,
    ntt_size,
    prime_step,
    primes,
    units,
)
from shaper.kernels.cyclo_ref import prime_factors

needs_native = pytest.mark.skipif(not cyclo.native_available(),
                                  reason="native extension not built (or lacks CycloContext)")
BACKENDS = [pytest.param(False, id="reference"), pytest.param(True, id="native", marks=needs_native)]
# 257 (prime), 4369 = 17 * 257, 1271 = 31 * 41, 45 = 9 * 5 (a prime power factor), 3, 105 = 3 * 5 * 7
RINGS = [3, 45, 105, 257, 1271, 4369]


# -- first-principles helpers (Python integers) ----------------------------------------------------


@functools.cache
def phi_by_division(m: int) -> tuple[int, ...]:
    """Phi_m over the integers: X^m - 1 divided by Phi_d for every proper divisor d (long division)."""
    num = [-1] + [0] * (m - 1) + [1]
    for d in range(1, m):
        if m % d == 0:
            den = phi_by_division(d)
            dd = len(den) - 1
            quo = [0] * (len(num) - dd)
            for i in range(len(quo) - 1, -1, -1):
                c = quo[i] = num[i + dd]  # den is monic
                for j, x in enumerate(den):
                    num[i + j] -= c * x
            assert not any(num[:dd])
            num = quo
    return tuple(num)


def reduce_mod_phi(poly, m: int, q: int) -> list[int]:
    """poly mod (Phi_m, q): fold by X^m = 1 (Phi_m divides X^m - 1), then long division."""
    folded = [0] * m
    for i, c in enumerate(poly):
        folded[i % m] += int(c)
    phi_poly = phi_by_division(m)
    phi = len(phi_poly) - 1
    rem = np.array([c % q for c in folded], dtype=object)
    top = np.array(phi_poly, dtype=object)
    for i in range(m - 1, phi - 1, -1):
        c = rem[i]
        if c:
            rem[i - phi:i + 1] = (rem[i - phi:i + 1] - c * top) % q
    return [int(c) for c in rem[:phi]]


def schoolbook_mod_phi(a, b, m: int, q: int) -> list[int]:
    """a b mod (Phi_m, q) with Python integers (np.convolve over object arrays is schoolbook)."""
    return reduce_mod_phi(np.convolve(np.array(a, dtype=object), np.array(b, dtype=object)), m, q)


def gcd(a: int, b: int) -> int:
    return int(np.gcd(a, b))


def evaluate(coeffs, x: int, q: int) -> int:
    out = 0
    for c in reversed(coeffs):
        out = (out * x + int(c)) % q
    return out


def random_rows(rng, ctx, limbs) -> np.ndarray:
    """Uniform residues, row l mod primes[limbs[l]], with edge values 0, 1, q - 1 up front."""
    rows = []
    for limb in limbs:
        q = ctx.primes[limb]
        row = rng.integers(0, q, ctx.phi, dtype=np.uint64)
        row[:3] = [q - 1, 0, 1][:ctx.phi]
        rows.append(row)
    return np.ascontiguousarray(np.stack(rows))


@functools.cache
def ring(m: int, count: int = 2, bits: int = 50) -> tuple[int, ...]:
    return tuple(primes(m, max(bits, prime_step(m).bit_length() + 1), count))


def mul_rows(x: np.ndarray, y: np.ndarray, ctx, limbs) -> np.ndarray:
    q = np.array([ctx.primes[limb] for limb in limbs], dtype=object)[:, None]
    return (x.astype(object) * y.astype(object) % q).astype(np.uint64)


# -- the ring's polynomials -------------------------------------------------------------------------


@pytest.mark.parametrize("m", [3, 9, 15, 21, 45, 105, 127, 255, 257, 315, 1271, 4369])
def test_cyclotomic_matches_long_division_and_cofactor_completes_xm_minus_1(m):
    assert cyclotomic(m) == phi_by_division(m)
    product = np.convolve(np.array(cyclotomic(m), dtype=object), np.array(cofactor(m), dtype=object))
    assert product.tolist() == [-1] + [0] * (m - 1) + [1]
    assert len(cyclotomic(m)) - 1 == len(units(m)) == sum(1 for i in range(1, m) if gcd(i, m) == 1)


def test_units_are_the_evaluation_order():
    u = units(45)
    assert u.dtype == np.int64 and not u.flags.writeable
    assert u.tolist() == [i for i in range(45) if gcd(i, 45) == 1]


# -- primes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m, bits", [(3, 20), (45, 30), (257, 40), (4369, 50), (53261, 60), (53261, 42), (53261, 62)])
def test_primes_are_the_largest_of_their_size_with_the_congruence(m, bits):
    step = prime_step(m)
    assert step == 2 * ntt_size(m) * m and ntt_size(m) >= 2 * m - 2
    got = primes(m, bits, 3)
    assert all(q % step == 1 and gmpy2.is_prime(q) and q.bit_length() == bits for q in got)
    assert got == sorted(got, reverse=True)
    # no prime of the congruence above the first or between consecutive ones
    candidate = ((1 << bits) - 1) // step * step + 1
    for q in got:
        while candidate > q:
            assert not gmpy2.is_prime(candidate)
            candidate -= step
        candidate -= step
    assert primes(m, bits, 2, exclude=[got[0]]) == got[1:]


def test_ntt_size_is_the_least_power_of_two_covering_the_bluestein_convolution():
    assert [ntt_size(m) for m in (3, 5, 45, 257, 4369, 28679, 53261, 65537)] == \
        [8, 8, 128, 512, 16384, 65536, 131072, 131072]


def test_primes_say_when_too_few_exist():
    with pytest.raises(ValueError, match=r"only 0 primes of 30 bits .*none has fewer than 35 bits"):
        primes(53261, 30, 1)
    with pytest.raises(ValueError, match="bits must be in"):
        primes(45, 63, 1)
    with pytest.raises(ValueError, match="m must be odd"):
        primes(46, 40, 1)


# -- laws, both implementations ------------------------------------------------------------------------


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m", RINGS)
def test_pointwise_products_are_schoolbook_products_mod_phi_m(m, native):
    qs = ring(m)
    ctx = context(m, qs, native=native)
    a, b, want = product_case(m)
    got = ctx.inverse(mul_rows(ctx.forward(a), ctx.forward(b), ctx, [0, 1]))
    assert got.dtype == np.uint64 and got.shape == (2, ctx.phi)
    assert got.tolist() == want


@functools.cache
def product_case(m: int):
    """Random a, b over both primes of ring(m) and the schoolbook products mod (Phi_m, q)."""
    qs = ring(m)
    rng = np.random.default_rng(m)
    phi = len(units(m))
    a = np.stack([rng.integers(0, q, phi, dtype=np.uint64) for q in qs])
    b = np.stack([rng.integers(0, q, phi, dtype=np.uint64) for q in qs])
    b[1, :phi // 2] = qs[1] - 1
    want = [schoolbook_mod_phi(a[i].tolist(), b[i].tolist(), m, q) for i, q in enumerate(qs)]
    return a, b, want


@pytest.mark.parametrize("native", BACKENDS)
@settings(max_examples=25, deadline=None)
@given(m=st.sampled_from([3, 5, 9, 15, 21, 25, 27, 33, 45, 63, 77, 105, 121, 225, 231, 257, 1271]),
       seed=st.integers(0, 2**32 - 1), data=st.data())
def test_inverse_undoes_forward_and_forward_undoes_inverse(native, m, seed, data):
    ctx = context(m, ring(m, 3, bits=data.draw(st.sampled_from([40, 62]))), native=native)
    rng = np.random.default_rng(seed)
    limbs = data.draw(st.lists(st.integers(0, 2), min_size=1, max_size=4))
    a = random_rows(rng, ctx, limbs)
    assert np.array_equal(ctx.inverse(ctx.forward(a, limbs), limbs), a)
    assert np.array_equal(ctx.forward(ctx.inverse(a, limbs), limbs), a)


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m", [3, 45, 105, 257])
def test_forward_evaluates_at_powers_of_the_smallest_primitive_root(m, native):
    qs = ring(m)
    ctx = context(m, qs, native=native)
    a = random_rows(np.random.default_rng(7), ctx, [0, 1])
    values = ctx.forward(a)
    for row, q in enumerate(qs):
        zeta = ctx.roots[row]
        # zeta has order exactly m, and it is the least of the primitive m-th roots zeta^u
        assert pow(zeta, m, q) == 1 and all(pow(zeta, m // f, q) != 1 for f in prime_factors(m))
        assert zeta == min(pow(zeta, int(u), q) for u in ctx.units)
        want = [evaluate(a[row].tolist(), pow(zeta, int(u), q), q) for u in ctx.units]
        assert values[row].tolist() == want


def kappa(coeffs, t: int, m: int, q: int) -> list[int]:
    """a(X^t) mod (Phi_m, q) on coefficients: X^i -> X^(i t mod m), then reduce."""
    out = [0] * m
    for i, c in enumerate(coeffs):
        out[i * t % m] += int(c)
    return reduce_mod_phi(out, m, q)


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m, ts", [(45, [2, 7, -1, 44]), (105, [2, 11, 104]), (257, [3, 256]), (1271, [2, 5, 1270])])
def test_automorphism_index_permutes_values_as_x_to_x_t_on_coefficients(m, ts, native):
    ctx = context(m, ring(m), native=native)
    a = random_rows(np.random.default_rng(m + 1), ctx, [0, 1])
    values = ctx.forward(a)
    for t in ts:
        index = ctx.automorphism_index(t)
        assert index.dtype == np.int64 and index.shape == (ctx.phi,) and sorted(index.tolist()) == list(range(ctx.phi))
        assert ctx.automorphism_index(t) is index and ctx.galois_index(t) is index  # cached
        moved = np.stack([kappa(a[r].tolist(), t % m, m, q) for r, q in enumerate(ctx.primes)]).astype(np.uint64)
        assert np.array_equal(ctx.forward(moved), values[:, index]), t
    with pytest.raises(ValueError, match="not a unit"):
        ctx.automorphism_index(prime_factors(m)[0])


def test_automorphisms_compose_like_units():
    ctx = context(105, ring(105), native=False)
    for s, t in [(2, 11), (13, 97), (-1, 2)]:
        left, right = ctx.automorphism_index(s), ctx.automorphism_index(t)
        # kappa_s(kappa_t(a)) = kappa_(s t)(a): values[:, right][:, left] = values[:, right[left]]
        assert np.array_equal(right[left], ctx.automorphism_index(s * t))


# -- native against the reference, bit for bit --------------------------------------------------------


@needs_native
@pytest.mark.parametrize("m, count, bits", [(3, 2, 40), (5, 1, 40), (45, 3, 62), (105, 2, 36), (257, 3, 55),
                                            (1271, 2, 60), (4369, 2, 58), (28679, 1, 60), (53261, 1, 60),
                                            (45045, 1, 50), (65537, 1, 61)])
def test_native_equals_reference_on_random_inputs(m, count, bits):
    """Including the seed's rings, 45045 = 3^2 5 7 11 13 (m - phi > phi: the quotient is longer than
    the remainder) and the edges 5, 65537 = 2^16 + 1 where N = 2m - 2 exactly."""
    qs = tuple(primes(m, bits, count))
    ref, nat = context(m, qs, native=False), context(m, qs, native=True)
    assert nat.native and not ref.native
    assert nat.roots == ref.roots
    rng = np.random.default_rng(m * bits)
    limbs = list(range(count))[::-1] + [0]  # reordered, repeated
    a = random_rows(rng, nat, limbs)
    for direction in ("forward", "inverse"):
        got, want = getattr(nat, direction)(a, limbs), getattr(ref, direction)(a, limbs)
        assert got.dtype == np.uint64 and got.shape == a.shape and got.flags.c_contiguous
        assert np.array_equal(got, want), direction
    if m == 53261:  # the round trip on the largest ring, natively only (the reference took its turn above)
        assert np.array_equal(nat.inverse(nat.forward(a, limbs), limbs), a)


@needs_native
def test_native_rows_transform_alike_on_one_thread_and_on_the_pool():
    from shaper import _native

    qs = ring(4369, 3)
    ctx = context(4369, qs, native=True)
    a = random_rows(np.random.default_rng(3), ctx, [0, 1, 2, 1])
    before = _native.threads()
    try:
        _native.set_threads(1)
        one = ctx.forward(a, [0, 1, 2, 1]), ctx.inverse(a, [0, 1, 2, 1])
        _native.set_threads(2)
        two = ctx.forward(a, [0, 1, 2, 1]), ctx.inverse(a, [0, 1, 2, 1])
    finally:
        _native.set_threads(before)
    assert all(np.array_equal(x, y) for x, y in zip(one, two))
    for r, limb in enumerate([0, 1, 2, 1]):  # each row with its own prime, as a single-limb call
        assert np.array_equal(one[0][r], ctx.forward(a[r:r + 1], [limb])[0])


# -- refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("native", BACKENDS)
def test_bad_arrays_and_limbs_are_refused_by_name(native):
    qs = ring(45)
    ctx = context(45, qs, native=native)
    good = np.zeros((2, ctx.phi), dtype=np.uint64)
    for direction in (ctx.forward, ctx.inverse):
        what = "coeffs" if direction == ctx.forward else "values"
        with pytest.raises(ValueError, match=f"{what} must be a numpy uint64 array, got dtype int64"):
            direction(good.astype(np.int64))
        with pytest.raises(ValueError, match="uint64 array, got list"):
            direction(good.tolist())
        with pytest.raises(ValueError, match=r"has shape \(2, 25\), expected \(2, 24\)"):
            direction(np.zeros((2, 25), dtype=np.uint64))
        with pytest.raises(ValueError, match=r"expected \(1, 24\)"):
            direction(good, [0])
        with pytest.raises(ValueError, match=r"has shape \(48,\)"):
            direction(good.reshape(-1))
        with pytest.raises(ValueError, match="C-contiguous"):
            direction(np.zeros((ctx.phi, 2), dtype=np.uint64).T)
        with pytest.raises(ValueError, match=r"limb 2 out of range \(the context has 2 primes\)"):
            direction(good, [0, 2])
        with pytest.raises(ValueError, match="limb -1 out of range"):
            direction(good, [0, -1])
        with pytest.raises(ValueError, match="prime indices"):
            direction(good, [0, True])
        with pytest.raises(ValueError, match="limbs is empty"):
            direction(good[:0], [])
        bad = good.copy()
        bad[1, 5] = qs[1]
        with pytest.raises(ValueError, match=f"{what}: row 1 .* not reduced mod its prime {qs[1]}"):
            direction(bad)
        direction(bad, [0, 0])  # row 1 is reduced mod qs[0] > qs[1]: each row is checked against its own limb
        with pytest.raises(ValueError, match="row 0"):
            direction(bad[::-1].copy(), [1, 1])


@pytest.mark.parametrize("native", BACKENDS)
def test_bad_rings_and_primes_are_refused_by_name(native):
    q = ring(45)[0]
    with pytest.raises(ValueError, match="m must be odd"):
        context(44, [q], native=native)
    with pytest.raises(ValueError, match="m must be odd"):
        context(1, [q], native=native)
    with pytest.raises(ValueError, match="m must be odd"):
        context(65539, [q], native=native)
    with pytest.raises(TypeError, match="m must be an odd integer"):
        context(45.0, [q], native=native)
    with pytest.raises(ValueError, match=r"primes\[0\] = .* is not 1 mod 2 N m = 11520 \(m = 45, N = 128\)"):
        context(45, [int(gmpy2.next_prime(q))], native=native)
    composite = next(c for c in range(q + prime_step(45), 1 << 62, prime_step(45)) if not gmpy2.is_prime(c))
    with pytest.raises(ValueError, match=r"primes\[1\] = .* is not a prime"):
        context(45, [q, composite], native=native)
    with pytest.raises(ValueError, match="appears twice"):
        context(45, [q, q], native=native)
    with pytest.raises(ValueError, match="at least one prime"):
        context(45, [], native=native)


@needs_native
def test_native_context_checks_its_own_inputs():
    """The extension class refuses what the face would (for callers that reach it directly)."""
    from shaper import _native

    q = ring(45)[0]
    with pytest.raises(ValueError, match="m must be odd"):
        _native.CycloContext(44, [q])
    with pytest.raises(ValueError, match="not 1 mod 2 N m"):
        _native.CycloContext(45, [int(gmpy2.next_prime(q))])
    raw = _native.CycloContext(45, [q])
    assert raw.ntt_size == ntt_size(45) and raw.phi == 24 and raw.primes == [q]
    with pytest.raises(ValueError, match="shape"):
        raw.forward(np.zeros((2, 24), dtype=np.uint64), [0])
    with pytest.raises(ValueError, match="limb 3 out of range"):
        raw.inverse(np.zeros((1, 24), dtype=np.uint64), [3])


# -- the factory -----------------------------------------------------------------------------------------


def test_context_is_cached_and_honours_native_false_and_shaper_native_off(monkeypatch):
    qs = ring(45)
    ref = context(45, qs, native=False)
    assert not ref.native and context(45, list(qs), native=False) is ref
    assert ref.m == 45 and ref.phi == 24 and ref.primes == qs and len(ref.roots) == 2
    monkeypatch.setenv("SHAPER_NATIVE", "off")
    assert context(45, qs) is ref
    monkeypatch.setenv("SHAPER_NATIVE", "auto")
    assert context(45, qs).native == cyclo.native_available()


def test_context_with_native_true_needs_the_extension():
    if cyclo.native_available():
        assert context(45, ring(45), native=True).native
    else:
        with pytest.raises(RuntimeError):
            context(45, ring(45), native=True)


def test_random_odd_rings_round_trip_on_the_reference():
    """Odd m drawn at random (any factorisation) — the reference needs no special structure."""
    rnd = random.Random(5)
    for m in rnd.sample(range(3, 400, 2), 6):
        ctx = context(m, ring(m, 1), native=False)
        a = random_rows(np.random.default_rng(m), ctx, [0])
        b = random_rows(np.random.default_rng(m + 1), ctx, [0])
        got = ctx.inverse(mul_rows(ctx.forward(a), ctx.forward(b), ctx, [0]))
        assert got[0].tolist() == schoolbook_mod_phi(a[0].tolist(), b[0].tolist(), m, ctx.primes[0]), m


# -- batched arithmetic and basis extension ------------------------------------------------------


def batch(rng, ctx, limbs, lead=()) -> np.ndarray:
    """Uniform residues of shape lead + (len(limbs), phi), with 0, 1, q - 1 up front in each row."""
    out = np.empty(lead + (len(limbs), ctx.phi), dtype=np.uint64)
    for r, limb in enumerate(limbs):
        q = ctx.primes[limb]
        out[..., r, :] = rng.integers(0, q, lead + (ctx.phi,), dtype=np.uint64)
        out[..., r, :3] = [q - 1, 0, 1]
    return out


def q_column(ctx, limbs) -> np.ndarray:
    return np.array([ctx.primes[limb] for limb in limbs], dtype=object)[:, None]


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m", [257, 4369])
def test_batched_ops_are_python_integer_arithmetic_with_broadcasting(m, native):
    qs = ring(m, 2) + ring(m, 1, bits=62)  # two 50-bit primes and a 62-bit one
    ctx = context(m, qs, native=native)
    rng = np.random.default_rng(m)
    limbs = [2, 0, 1, 0]  # reordered, repeated
    q = q_column(ctx, limbs)
    a, b, c = batch(rng, ctx, limbs, (2, 3)), batch(rng, ctx, limbs, (2, 3)), batch(rng, ctx, limbs)
    for x, y in ((a, b), (a, c), (c, a), (c, c)):
        ox, oy = x.astype(object), y.astype(object)
        for op, want in (("add", (ox + oy) % q), ("sub", (ox - oy) % q), ("mul", ox * oy % q)):
            got = getattr(ctx, op)(x, y, limbs)
            assert got.dtype == np.uint64 and got.flags.c_contiguous and got.shape == want.shape, op
            assert np.array_equal(got, want.astype(np.uint64)), op
    acc = a.copy()
    assert ctx.mul_acc(acc, b, c, limbs) is None
    assert np.array_equal(acc, ((a.astype(object) + b.astype(object) * c.astype(object)) % q).astype(np.uint64))
    acc = c.copy()
    ctx.mul_acc(acc, c, c, limbs)
    assert np.array_equal(acc, ((c.astype(object) * (c.astype(object) + 1)) % q).astype(np.uint64))
    scalars = [qs[2] - 1, 0, 1, 12345]
    want = a.astype(object) * np.array(scalars, dtype=object)[:, None] % q
    assert np.array_equal(ctx.mul_scalar(a, scalars, limbs), want.astype(np.uint64))
    assert np.array_equal(ctx.mul_scalar(a, np.array(scalars, dtype=np.uint64), limbs), want.astype(np.uint64))
    # limbs default to every prime in order
    d = batch(rng, ctx, [0, 1, 2])
    assert np.array_equal(ctx.mul(d, d), (d.astype(object) ** 2 % q_column(ctx, [0, 1, 2])).astype(np.uint64))


def crt_centred(columns, ps) -> list[int]:
    """x from its residues mod ps (Python integers), centred in (-D/2, D/2]."""
    d = 1
    for p in ps:
        d *= p
    out = []
    for residues in zip(*columns):
        x = sum(int(r) * (d // p) * pow(d // p, -1, p) for r, p in zip(residues, ps)) % d
        out.append(x - d if x > d // 2 else x)
    return out


def residues_of(xs, ps) -> np.ndarray:
    return np.array([[x % p for x in xs] for p in ps], dtype=np.uint64)


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m", [257, 4369])
def test_extend_is_the_centred_crt_lift(m, native):
    qs = ring(m, 3) + ring(m, 2, bits=62)
    ctx = context(m, qs, native=native)
    rng = np.random.default_rng(m + 7)
    dst = [4, 0, 3, 1, 2, 0]  # sources among the destinations too, and a repeat
    for src in ([1], [3], [0, 2], [2, 0, 1], [3, 4], [0, 1, 2, 3, 4]):
        ps = [qs[i] for i in src]
        d = 1
        for p in ps:
            d *= p
        x = batch(rng, ctx, src)
        # x = 0, -1, and near +-D/2 (2^-30 D inside: well beyond the float sum's error) up front
        edges = [0, -1, d // 2 - (d >> 30), -(d // 2) + (d >> 30), 1, d // 3]
        x[:, :len(edges)] = residues_of(edges, ps)
        got = ctx.extend(x, src, dst)
        assert got.dtype == np.uint64 and got.shape == (len(dst), ctx.phi) and got.flags.c_contiguous
        lifted = crt_centred(list(x), ps)
        assert lifted[:len(edges)] == edges
        for j, limb in enumerate(dst):
            assert got[j].tolist() == [v % qs[limb] for v in lifted], (src, limb)
    assert ctx.extend(x, src, []).shape == (0, ctx.phi)


@pytest.mark.parametrize("native", BACKENDS)
def test_extend_at_the_float_boundary_stays_congruent_and_nearly_centred(native):
    """Right at x = +-D/2 the float sum may round either way: x' = x (mod D) and |x'| <= D/2 + D.
    x' itself is read back by CRT over six primes (their product dwarfs 3 D)."""
    m = 257
    qs = ring(m, 6, bits=62)
    ctx = context(m, qs, native=native)
    src = [0, 1, 2]
    d = qs[0] * qs[1] * qs[2]
    xs = [d // 2 + k for k in range(-8, 9)] + [-(d // 2) + k for k in range(-8, 9)] + [0, 1, -1]
    xs += [5] * (ctx.phi - len(xs))
    out = ctx.extend(residues_of(xs, qs[:3]), src, list(range(6)))
    for x, y in zip(xs, crt_centred(list(out), qs)):
        assert (x - y) % d == 0 and abs(y) <= d // 2 + d


@needs_native
def test_native_batched_ops_and_extend_equal_the_reference_at_m_53261():
    """Bit for bit on the seed's AES ring, including the float rounding of extend right at the
    boundary D/2, and on one thread as on two."""
    from shaper import _native

    m = 53261
    qs = tuple(primes(m, 45, 2) + primes(m, 60, 1))
    ref, nat = context(m, qs, native=False), context(m, qs, native=True)
    rng = np.random.default_rng(53261)
    limbs = [0, 2]
    a, b, c = batch(rng, nat, limbs, (2,)), batch(rng, nat, limbs, (2,)), batch(rng, nat, limbs)
    before = _native.threads()
    try:
        for threads in (1, 2):
            _native.set_threads(threads)
            for op in ("add", "sub", "mul"):
                assert np.array_equal(getattr(nat, op)(a, c, limbs), getattr(ref, op)(a, c, limbs)), op
                assert np.array_equal(getattr(nat, op)(a, b, limbs), getattr(ref, op)(a, b, limbs)), op
            acc_n, acc_r = a.copy(), a.copy()
            nat.mul_acc(acc_n, b, c, limbs)
            ref.mul_acc(acc_r, b, c, limbs)
            assert np.array_equal(acc_n, acc_r)
            assert np.array_equal(nat.mul_scalar(a, [3, qs[2] - 1], limbs), ref.mul_scalar(a, [3, qs[2] - 1], limbs))
            for src, dst in (([1, 0], [2, 0, 1]), ([2, 0, 1], [1]), ([2], [0, 1])):
                ps = [qs[i] for i in src]
                d = 1
                for p in ps:
                    d *= p
                x = batch(rng, nat, src)
                near = [d // 2 + k for k in range(-40, 41)] + [-(d // 2) + k for k in range(-40, 41)]
                x[:, :len(near)] = residues_of(near, ps)
                got, want = nat.extend(x, src, dst), ref.extend(x, src, dst)
                assert np.array_equal(got, want), (src, dst)
    finally:
        _native.set_threads(before)


@pytest.mark.parametrize("native", BACKENDS)
def test_batched_ops_and_extend_refuse_bad_inputs_by_name(native):
    qs = ring(45)
    ctx = context(45, qs, native=native)
    good = np.zeros((3, 2, ctx.phi), dtype=np.uint64)
    one = np.zeros((2, ctx.phi), dtype=np.uint64)
    for op in (ctx.add, ctx.sub, ctx.mul):
        with pytest.raises(ValueError, match="b must be a numpy uint64 array, got dtype int64"):
            op(good, good.astype(np.int64))
        with pytest.raises(ValueError, match="a must be a numpy uint64 array, got list"):
            op(good.tolist(), good)
        with pytest.raises(ValueError, match=r"b has shape \(3, 2, 25\), expected \(\.\.\., 2, 24\)"):
            op(good, np.zeros((3, 2, 25), dtype=np.uint64))
        with pytest.raises(ValueError, match=r"a has shape \(144,\)"):
            op(good.reshape(-1), good)
        with pytest.raises(ValueError, match=r"b has shape \(2, 2, 24\), but the batch is \(3, 2, 24\)"):
            op(good, good[:2])
        with pytest.raises(ValueError, match="b must be C-contiguous"):
            op(good, good[..., ::-1])
        with pytest.raises(ValueError, match=r"expected \(\.\.\., 1, 24\)"):
            op(good, good, [0])
        with pytest.raises(ValueError, match="limb 2 out of range"):
            op(good, good, [0, 2])
        bad = good.copy()
        bad[2, 1, 5] = qs[1]
        with pytest.raises(ValueError, match=f"a: row 1 of item 2 \\(entry 5\\) is not reduced mod its prime {qs[1]}"):
            op(bad, one)
        with pytest.raises(ValueError, match=r"b: row 1 of item 2 \(entry 5\)"):
            op(one, bad)
        op(bad, one, [0, 0])  # row 1 is reduced mod qs[0] > qs[1]: each row against its own limb
        bad1 = one.copy()
        bad1[0, 7] = np.uint64(2**64 - 1)
        with pytest.raises(ValueError, match=r"b: row 0 \(entry 7\)"):
            op(good, bad1)
    acc = good + np.uint64(1)
    bad = good.copy()
    bad[1, 0, 3] = qs[0]
    with pytest.raises(ValueError, match=r"b: row 0 of item 1 \(entry 3\)"):
        ctx.mul_acc(acc, good, bad)
    assert np.array_equal(acc, good + np.uint64(1))  # untouched
    with pytest.raises(ValueError, match="acc shares memory with b"):
        ctx.mul_acc(acc, good, acc[1:2])
    with pytest.raises(ValueError, match=r"acc has shape \(2, 24\), smaller"):
        ctx.mul_acc(one.copy(), good, one)
    frozen = acc.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="acc must be a writable array"):
        ctx.mul_acc(frozen, acc, acc)
    with pytest.raises(ValueError, match=f"scalars\\[1\\] = {qs[1]} is not reduced mod its prime {qs[1]}"):
        ctx.mul_scalar(good, [1, qs[1]])
    with pytest.raises(ValueError, match=r"scalars\[0\] = -1 is not reduced"):
        ctx.mul_scalar(good, [-1, 1])
    with pytest.raises(ValueError, match="1 scalars for 2 limbs"):
        ctx.mul_scalar(good, [1])
    with pytest.raises(ValueError, match="scalars\\[0\\] must be an integer"):
        ctx.mul_scalar(good, [1.0, 1])
    with pytest.raises(ValueError, match="src names limb 0 twice"):
        ctx.extend(one, [0, 0], [1])
    with pytest.raises(ValueError, match="src: limbs is empty"):
        ctx.extend(one[:0], [], [1])
    with pytest.raises(ValueError, match="dst: limb 5 out of range"):
        ctx.extend(one, [0, 1], [5])
    with pytest.raises(ValueError, match=r"residues has shape \(2, 24\), expected \(1, 24\)"):
        ctx.extend(one, [0], [1])
    bad = one.copy()
    bad[1, 4] = qs[1]
    with pytest.raises(ValueError, match=f"residues: row 1 \\(entry 4\\) is not reduced mod its prime {qs[1]}"):
        ctx.extend(bad, [0, 1], [0])


@needs_native
def test_native_batched_ops_check_their_own_inputs():
    """The extension class refuses shapes and unreduced entries itself (for direct callers)."""
    from shaper import _native

    q = ring(45)[0]
    raw = _native.CycloContext(45, [q])
    a = np.zeros((2, 1, 24), dtype=np.uint64)
    with pytest.raises(ValueError, match="must have shape"):
        raw.mul(a, np.zeros((1, 25), dtype=np.uint64), [0])
    with pytest.raises(ValueError, match="operands must have equal shapes"):
        raw.add(a, np.zeros((3, 1, 24), dtype=np.uint64), [0])
    with pytest.raises(ValueError, match="limb 1 out of range"):
        raw.sub(a, a, [1])
    with pytest.raises(ValueError, match="acc must hold the whole result"):
        raw.mul_acc(np.zeros((1, 24), dtype=np.uint64), a, a, [0])
    with pytest.raises(ValueError, match=r"scalars\[0\]"):
        raw.mul_scalar(a, [q], [0])
    with pytest.raises(ValueError, match="src names limb 0 twice"):
        raw.extend(np.zeros((2, 24), dtype=np.uint64), [0, 0], [0])


# -- divide_round and digits (ring.py's, fused) ----------------------------------------------------


def coefficient_columns(ctx, values, limbs) -> list[list[int]]:
    """The coefficients of each row (inverse transform) as Python integers."""
    return [[int(c) for c in row] for row in ctx.inverse(np.ascontiguousarray(values), limbs)]


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m", [257, 4369])
def test_divide_round_is_exact_division_keeping_the_plaintext_bit(m, native):
    """Coefficient by coefficient: out = (c - delta) / D with delta = 2 [c 2^-1]_D centred, i.e.
    delta = c mod D and delta even, on the kept primes."""
    qs = ring(m, 3) + ring(m, 2, bits=60)
    ctx = context(m, qs, native=native)
    rng = np.random.default_rng(m + 3)
    limbs = [0, 3, 1, 4, 2]
    for drop in ([4], [3, 4], [2, 0]):
        keep = [x for x in limbs if x not in drop]
        a = batch(rng, ctx, limbs, (2,))
        got = ctx.divide_round(a, limbs, drop)
        assert got.shape == (2, len(keep), ctx.phi) and got.dtype == np.uint64
        ps = [qs[x] for x in drop]
        d = 1
        for p in ps:
            d *= p
        for item in range(2):
            top = coefficient_columns(ctx, a[item, [limbs.index(x) for x in drop]], drop)
            x_d = crt_centred(top, ps)  # a mod D, centred (only its class mod D matters)
            y = [(v * pow(2, -1, d)) % d for v in x_d]
            delta = [2 * (v - d if v > d // 2 else v) for v in y]
            rows = coefficient_columns(ctx, got[item], keep)
            for j, limb in enumerate(keep):
                q = qs[limb]
                c = coefficient_columns(ctx, a[item, [limbs.index(limb)]], [limb])[0]
                assert rows[j] == [(ci - de) * pow(d, -1, q) % q for ci, de in zip(c, delta)], (drop, limb)


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("m", [257, 4369])
def test_digits_are_the_centred_group_residues_on_every_target_prime(m, native):
    qs = ring(m, 4) + ring(m, 2, bits=60)
    ctx = context(m, qs, native=native)
    rng = np.random.default_rng(m + 5)
    limbs, target = [0, 1, 2, 3], [0, 1, 2, 3, 4, 5]
    groups = [[0, 2], [1], [3]]
    a = batch(rng, ctx, limbs)
    got = ctx.digits(a, limbs, groups, target)
    assert got.shape == (3, 6, ctx.phi) and got.dtype == np.uint64
    coeffs = coefficient_columns(ctx, a, limbs)
    for gi, group in enumerate(groups):
        for x in group:  # the group's own rows: a itself
            assert np.array_equal(got[gi, target.index(x)], a[limbs.index(x)])
        digit = crt_centred([coeffs[limbs.index(x)] for x in group], [qs[x] for x in group])
        rows = coefficient_columns(ctx, got[gi], target)
        for j, t in enumerate(target):
            assert rows[j] == [v % qs[t] for v in digit], (group, t)


@needs_native
def test_native_divide_round_and_digits_equal_the_reference():
    m = 4369
    qs = ring(m, 4) + ring(m, 2, bits=60)
    ref, nat = context(m, qs, native=False), context(m, qs, native=True)
    rng = np.random.default_rng(9)
    limbs = [0, 1, 2, 3, 4, 5]
    a = batch(rng, nat, limbs, (2,))
    for drop in ([4, 5], [3], [5, 0]):
        assert np.array_equal(nat.divide_round(a, limbs, drop), ref.divide_round(a, limbs, drop)), drop
    x = np.ascontiguousarray(a[0, :4])
    for groups, target in (([[0, 1], [2, 3]], [0, 1, 2, 3, 4, 5]), ([[2], [0, 3]], [3, 5, 2, 0, 4])):
        assert np.array_equal(nat.digits(x, [0, 1, 2, 3], groups, target), ref.digits(x, [0, 1, 2, 3], groups, target))


@needs_native
def test_native_divide_round_and_digits_at_m_53261_equal_their_steps():
    """On the AES ring the fused kernels equal the unfused native steps (each tested against the
    reference above), as ring.py composes them; one thread and two alike."""
    from shaper import _native

    m = 53261
    qs = tuple(primes(m, 45, 3) + primes(m, 60, 1))
    ctx = context(m, qs, native=True)
    rng = np.random.default_rng(2)
    limbs, drop, keep = [0, 1, 2, 3], [3], [0, 1, 2]
    a = batch(rng, ctx, limbs, (2,))
    half = [pow(2, -1, qs[3])]
    d_inv = [pow(qs[3], -1, qs[x]) for x in keep]
    want = np.empty((2, 3, ctx.phi), dtype=np.uint64)
    for i in range(2):
        lift = ctx.extend(ctx.mul_scalar(ctx.inverse(a[i, 3:], drop), half, drop), drop, keep)
        delta = ctx.forward(ctx.add(lift, lift, keep), keep)
        want[i] = ctx.mul_scalar(ctx.sub(np.ascontiguousarray(a[i, :3]), delta, keep), d_inv, keep)
    x = np.ascontiguousarray(a[0, :3])
    coeffs = ctx.inverse(x, keep)
    digit = ctx.forward(ctx.extend(coeffs[[0, 2]], [0, 2], [1, 3]), [1, 3])
    before = _native.threads()
    try:
        for threads in (1, 2):
            _native.set_threads(threads)
            assert np.array_equal(ctx.divide_round(a, limbs, drop), want)
            got = ctx.digits(x, keep, [[0, 2], [1]], [0, 1, 2, 3])
            assert np.array_equal(got[0, [0, 2]], x[[0, 2]]) and np.array_equal(got[0, [1, 3]], digit)
    finally:
        _native.set_threads(before)


@pytest.mark.parametrize("native", BACKENDS)
def test_divide_round_and_digits_refuse_bad_inputs_by_name(native):
    qs = ring(45, 3)
    ctx = context(45, qs, native=native)
    a = np.zeros((2, 3, ctx.phi), dtype=np.uint64)
    with pytest.raises(ValueError, match="drop names limb 2, which is not among the limbs"):
        ctx.divide_round(a[:, :2].copy(), [0, 1], [2])
    with pytest.raises(ValueError, match="drop must leave at least one limb"):
        ctx.divide_round(a, [0, 1, 2], [2, 0, 1])
    with pytest.raises(ValueError, match="drop names limb 2 twice"):
        ctx.divide_round(a, [0, 1, 2], [2, 2])
    with pytest.raises(ValueError, match="limbs names limb 1 twice"):
        ctx.divide_round(a, [0, 1, 1], [2])
    with pytest.raises(ValueError, match="drop: limbs is empty"):
        ctx.divide_round(a, [0, 1, 2], [])
    with pytest.raises(ValueError, match=r"a has shape \(2, 3, 24\), expected \(\.\.\., 2, 24\)"):
        ctx.divide_round(a, [0, 1], [1])
    bad = a.copy()
    bad[1, 2, 0] = qs[2]
    with pytest.raises(ValueError, match=r"a: row 2 of item 1 \(entry 0\)"):
        ctx.divide_round(bad, [0, 1, 2], [0])
    x = np.zeros((3, ctx.phi), dtype=np.uint64)
    with pytest.raises(ValueError, match=r"groups\[1\] names limb 0, which an earlier group"):
        ctx.digits(x, [0, 1, 2], [[0], [0, 1]], [0, 1, 2])
    with pytest.raises(ValueError, match=r"groups\[0\] names limb 2, which is not among the target limbs"):
        ctx.digits(x, [0, 1, 2], [[2]], [0, 1])
    with pytest.raises(ValueError, match=r"groups\[0\] names limb 2, which is not among the limbs"):
        ctx.digits(x[:2].copy(), [0, 1], [[2]], [0, 1, 2])
    with pytest.raises(ValueError, match="groups is empty"):
        ctx.digits(x, [0, 1, 2], [], [0, 1, 2])
    with pytest.raises(ValueError, match="target names limb 1 twice"):
        ctx.digits(x, [0, 1, 2], [[0]], [0, 1, 1])
    with pytest.raises(ValueError, match=r"a has shape \(3, 24\), expected \(2, 24\)"):
        ctx.digits(x, [0, 1], [[0]], [0, 1])
    x[1, 3] = qs[1]
    with pytest.raises(ValueError, match=r"a: row 1 \(entry 3\)"):
        ctx.digits(x, [0, 1, 2], [[0]], [0, 1, 2])
