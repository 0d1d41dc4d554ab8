"""The RNS polynomial kernels (shaper.kernels.rns contract): the numpy reference against first
principles in Python integers and SEAL's prime chains, then the native ``RnsContext`` against
the reference bit for bit (skipped where the extension lacks it)."""

import functools
import random

import gmpy2
import numpy as np
import pytest

from shaper.kernels import rns

from shaper.kernels.rns import RnsReference, galois_permutation, is_prime, ntt_primes, rns_context, smallest_root

# -- first-principles helpers (Python integers, no numpy arithmetic) ---------------------------


def brv(k: int, n: int) -> int:
    bits = n.bit_length() - 1
    return int(format(k, f"0{bits}b")[::-1], 2) if bits else 0


def direct_ntt(coeffs: list[int], q: int, psi: int) -> list[int]:
    """A[k] = a(psi^(2 brv(k) + 1)) by plain evaluation."""
    n = len(coeffs)
    return [sum(c * pow(psi, (2 * brv(k, n) + 1) * j, q) for j, c in enumerate(coeffs)) % q for k in range(n)]


def negacyclic(a: list[int], b: list[int], q: int) -> list[int]:
    n = len(a)
    out = [0] * n
    for i in range(n):
        for j in range(n):
            if i + j < n:
                out[i + j] += a[i] * b[j]
            else:
                out[i + j - n] -= a[i] * b[j]
    return [x % q for x in out]


def centred(x: int, q: int) -> int:
    return x if x <= (q - 1) // 2 else x - q


def random_rows(rng, ctx, mods, lead=()) -> np.ndarray:
    """Uniform reduced residues of shape lead + (len(mods), n)."""
    return np.ascontiguousarray(np.stack(
        [rng.integers(0, ctx.primes[m], size=lead + (ctx.n,), dtype=np.uint64) for m in mods], axis=-2))


def as_ints(a: np.ndarray) -> list:
    return a.astype(object).tolist()


@functools.cache
def reference(n: int, primes: tuple) -> RnsReference:
    return RnsReference(n, list(primes))


P30_16 = tuple(ntt_primes(16, 30, 3))
P60_16 = tuple(ntt_primes(16, 60, 3))


# -- NTT ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [16, 64])
@pytest.mark.parametrize("bits", [30, 61])
def test_ntt_is_evaluation_at_bit_reversed_odd_powers_of_psi(n, bits):
    primes = ntt_primes(n, bits, 3)
    ctx = reference(n, tuple(primes))
    rng = np.random.default_rng(n + bits)
    mods = [2, 0]
    a = random_rows(rng, ctx, mods, (2,))
    a[0, 0, :5] = [0, 1, primes[2] - 1, (primes[2] - 1) // 2, (primes[2] + 1) // 2]
    out = a.copy()
    ctx.ntt(out, mods)
    for lead in range(2):
        for r, m in enumerate(mods):
            want = direct_ntt([int(x) for x in a[lead, r]], primes[m], ctx.roots[m])
            assert [int(x) for x in out[lead, r]] == want


@pytest.mark.parametrize("n", [8, 16, 256, 4096])
def test_intt_inverts_ntt(n):
    ctx = reference(n, tuple(ntt_primes(n, 50, 2) + ntt_primes(n, 61, 1)))
    rng = np.random.default_rng(n)
    a = random_rows(rng, ctx, [0, 1, 2], (3,))
    b = a.copy()
    ctx.ntt(b, [0, 1, 2])
    assert not np.array_equal(a, b)
    ctx.intt(b, [0, 1, 2])
    assert np.array_equal(a, b)


@pytest.mark.parametrize("n", [16, 64])
def test_pointwise_product_in_ntt_form_is_the_negacyclic_product(n):
    primes = ntt_primes(n, 60, 2)
    ctx = reference(n, tuple(primes))
    rng = np.random.default_rng(7)
    a, b = random_rows(rng, ctx, [0, 1]), random_rows(rng, ctx, [0, 1])
    fa, fb = a.copy(), b.copy()
    ctx.ntt(fa, [0, 1])
    ctx.ntt(fb, [0, 1])
    prod = ctx.mul(fa, fb, [0, 1])
    ctx.intt(prod, [0, 1])
    for r, q in enumerate(primes):
        assert [int(x) for x in prod[r]] == negacyclic([int(x) for x in a[r]], [int(x) for x in b[r]], q)


def test_elementwise_kernels_match_python_integers():
    ctx = reference(16, P60_16)
    rng = np.random.default_rng(3)
    mods = [1, 2, 0]
    a, b, c = (random_rows(rng, ctx, mods, (2,)) for _ in range(3))
    q = [[ctx.primes[m]] for m in mods]
    qa = np.array(q, dtype=object)
    A, B, C = (x.astype(object) for x in (a, b, c))
    assert np.array_equal(ctx.add(a, b, mods).astype(object), (A + B) % qa)
    assert np.array_equal(ctx.sub(a, b, mods).astype(object), (A - B) % qa)
    assert np.array_equal(ctx.neg(a, mods).astype(object), (-A) % qa)
    assert np.array_equal(ctx.mul(a, b, mods).astype(object), (A * B) % qa)
    scalars = np.array([ctx.primes[m] - 2 for m in mods], dtype=np.uint64)
    assert np.array_equal(ctx.mul_scalar(a, scalars, mods).astype(object), (A * (qa - 2)) % qa)
    acc = c.copy()
    assert ctx.mul_acc(acc, a, b, mods) is None
    assert np.array_equal(acc.astype(object), (C + A * B) % qa)
    t = ctx.tensor(a, b, mods).astype(object)
    assert t.shape == (3, 3, 16)
    assert np.array_equal(t[0], A[0] * B[0] % qa)
    assert np.array_equal(t[1], (A[0] * B[1] + A[1] * B[0]) % qa)
    assert np.array_equal(t[2], A[1] * B[1] % qa)


# -- automorphism --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [16, 64])
def test_automorph_in_ntt_form_is_x_to_the_g_on_coefficients(n):
    primes = ntt_primes(n, 53, 2)
    ctx = reference(n, tuple(primes))
    rng = np.random.default_rng(n)
    a = random_rows(rng, ctx, [0, 1])
    fa = a.copy()
    ctx.ntt(fa, [0, 1])
    gs = range(1, 2 * n, 2) if n == 16 else [1, 3, 5, 25, pow(5, 7, 2 * n), 2 * n - 1]
    for g in gs:
        want = np.zeros_like(a)
        for r, q in enumerate(primes):
            for i in range(n):
                e = g * i % (2 * n)
                v = int(a[r, i])
                if e < n:
                    want[r, e] = v
                else:
                    want[r, e - n] = (q - v) % q
        ctx.ntt(want, [0, 1])
        assert np.array_equal(ctx.automorph(fa, g), want), g


def test_automorph_rejects_even_or_out_of_range_galois_elements():
    ctx = reference(16, P30_16)
    a = np.zeros((1, 16), dtype=np.uint64)
    for g in (0, 2, 4, 32, 33, -1):
        with pytest.raises(ValueError):
            ctx.automorph(a, g)
    with pytest.raises(ValueError):
        galois_permutation(16, 6)


# -- divide and round, decomposition, key switching ----------------------------------------------


@pytest.mark.parametrize("bits", [[30, 30, 30], [50, 61, 53, 60]])
def test_divide_round_last_is_rounded_division_of_the_crt_value(bits):
    n = 64
    primes = []
    for b in bits:
        primes.append(ntt_primes(n, b, 1, exclude=primes)[0])
    ctx = reference(n, tuple(primes))
    r = len(primes)
    mods = list(range(r))
    Q = 1
    for q in primes:
        Q *= q
    last = primes[-1]
    rnd = random.Random(sum(bits))
    xs = [[rnd.randrange(Q) for _ in range(n)] for _ in range(2)]
    # rounding edges: x = (q_last -+ 1) / 2 mod q_last, and the ends of [0, Q)
    for k, t in enumerate([(last - 1) // 2, (last + 1) // 2, 0, 1, last - 1]):
        xs[0][k] = rnd.randrange(Q // last) * last + t
    xs[1][:3] = [0, Q - 1, Q // 2]
    a = np.array([[[x % q for x in row] for q in primes] for row in xs], dtype=np.uint64)
    ctx.ntt(a, mods)
    out = ctx.divide_round_last(a, mods)
    assert out.shape == (2, r - 1, n)
    ctx.intt(out, mods[:-1])
    want = [[[((2 * x + last) // (2 * last)) % q for x in row] for q in primes[:-1]] for row in xs]
    assert as_ints(out) == want


def test_decompose_gives_each_rows_centred_lift_over_every_prime():
    n = 16
    primes = ntt_primes(n, 50, 3) + ntt_primes(n, 61, 1)
    ctx = reference(n, tuple(primes))
    mods, sp = [2, 0, 1], 3
    ext = mods + [sp]
    rnd = random.Random(5)
    coeffs = [[rnd.randrange(primes[m]) for _ in range(n)] for m in mods]
    coeffs[0][:5] = [0, 1, primes[2] - 1, (primes[2] - 1) // 2, (primes[2] + 1) // 2]
    a = np.array([direct_ntt(c, primes[m], ctx.roots[m]) for c, m in zip(coeffs, mods)], dtype=np.uint64)
    d = ctx.decompose(a, mods, sp)
    assert d.shape == (3, 4, n)
    for j, m in enumerate(mods):
        lift = [centred(c, primes[m]) for c in coeffs[j]]
        for i, e in enumerate(ext):
            assert [int(x) for x in d[j, i]] == direct_ntt([c % primes[e] for c in lift], primes[e], ctx.roots[e])
        assert np.array_equal(d[j, j], a[j])
    # leading axes: each row set decomposes on its own
    stacked = np.ascontiguousarray(np.stack([a, ctx.neg(a, mods)]))
    both = ctx.decompose(stacked, mods, sp)
    assert both.shape == (2, 3, 4, n)
    assert np.array_equal(both[0], d)
    assert np.array_equal(both[1], ctx.decompose(np.ascontiguousarray(stacked[1]), mods, sp))


@pytest.mark.parametrize("g", [1, 3, 5, 31])
def test_key_switch_is_the_sum_of_rotated_digits_times_key_rows_divided_by_the_special_prime(g):
    n = 16
    primes = ntt_primes(n, 60, 5)
    ctx = reference(n, tuple(primes))
    rng = np.random.default_rng(g)
    mods, sp = [0, 3, 1], 4
    ext = mods + [sp]
    a = random_rows(rng, ctx, mods)
    d = ctx.decompose(a, mods, sp)
    key = random_rows(rng, ctx, range(5), (5, 2))  # (D, 2, R, n) over every context prime
    acc = np.zeros((2, 4, n), dtype=np.uint64)
    for j, m in enumerate(mods):
        dj = ctx.automorph(d[j], g) if g != 1 else d[j]
        acc = ctx.add(acc, ctx.mul(np.stack([dj, dj]), np.ascontiguousarray(key[m][:, ext]), ext), ext)
    want = ctx.divide_round_last(acc, ext)
    assert np.array_equal(ctx.key_switch(d, key, mods, sp, g), want)


def _signed(coeffs, q):
    return np.array([[centred(int(x), q) for x in row] for row in coeffs], dtype=object)


@pytest.mark.parametrize("g", [1, 5, 127])
def test_key_switch_with_a_gadget_key_switches_the_secret(g):
    """A hybrid key-switching key for sigma_g(s) -> s (digit j encrypts P (Q/q_j)[(Q/q_j)^-1]_{q_j}
    sigma_g(s), i.e. P sigma_g(s) on row j and 0 on the others): the switched pair decrypts under
    s to sigma_g(c) sigma_g(s) up to a small error, at a lower level too."""
    n, L = 64, 3
    primes = ntt_primes(n, 50, L + 1) + ntt_primes(n, 60, 1)
    R = len(primes)
    ctx = reference(n, tuple(primes))
    everything = list(range(R))
    rng = np.random.default_rng(g)

    def small(values, lead=()):
        x = np.broadcast_to(values, lead + (n,))
        out = np.stack([np.asarray(x % q, dtype=np.uint64) for q in primes], axis=-2)
        out = np.ascontiguousarray(out)
        ctx.ntt(out, everything)
        return out

    s = small(rng.integers(-1, 2, n))
    s_rot = ctx.automorph(s, g)
    P = primes[-1]
    key = np.zeros((L + 1, 2, R, n), dtype=np.uint64)
    for j in range(L + 1):
        a = random_rows(rng, ctx, everything)
        e = small(rng.integers(-3, 4, n))
        b = ctx.add(ctx.neg(ctx.mul(a, s, everything), everything), e, everything)
        gadget = np.zeros(R, dtype=np.uint64)
        gadget[j] = P % primes[j]
        b = ctx.add(b, ctx.mul_scalar(s_rot, gadget, everything), everything)
        key[j] = np.stack([b, a])
    for level in (L, 1):
        mods = list(range(level + 1))
        c = random_rows(rng, ctx, mods)
        out = ctx.key_switch(ctx.decompose(c, mods, R - 1), key, mods, R - 1, g)
        s_l = np.ascontiguousarray(s[mods])
        dec = ctx.add(out[0], ctx.mul(out[1], s_l, mods), mods)
        noise = ctx.sub(dec, ctx.mul(ctx.automorph(c, g), np.ascontiguousarray(s_rot[mods]), mods), mods)
        ctx.intt(noise, mods)
        for r, m in enumerate(mods):
            assert max(abs(v) for v in _signed(noise[r:r + 1], primes[m])[0]) < 4 * n


# -- primes and roots ----------------------------------------------------------------------------


def _sieve(limit: int) -> np.ndarray:
    flags = np.ones(limit, dtype=bool)
    flags[:2] = False
    for p in range(2, int(limit ** 0.5) + 1):
        if flags[p]:
            flags[p * p::p] = False
    return np.flatnonzero(flags)


def test_ntt_primes_are_the_largest_primes_one_mod_2n_below_2_to_the_bits():
    primes = _sieve(1 << 22)
    for n, bits in [(16, 20), (64, 22), (256, 21), (1024, 22)]:
        want = [int(p) for p in primes[::-1] if p < (1 << bits) and p > (1 << (bits - 1)) and p % (2 * n) == 1]
        count = min(6, len(want))
        assert ntt_primes(n, bits, count) == want[:count]
        assert ntt_primes(n, bits, 2, exclude=want[:3]) == want[3:5]
    # 40-bit primes walking down with gmpy2's own prime search
    want, p = [], 1 << 40
    while len(want) < 3:
        p = int(gmpy2.prev_prime(p))
        if p % 32 == 1:
            want.append(p)
    assert ntt_primes(16, 40, 3) == want


@pytest.mark.parametrize("n, bits", [(16384, [60, 53, 53, 53, 53, 53, 53, 60]), (8192, [60, 40, 40, 60]),
                                     (4096, [36, 36, 37])])
def test_ntt_primes_match_seals_coeff_modulus_chains(n, bits):
    sealapi = pytest.importorskip("tenseal.sealapi", reason="tenseal (SEAL) is not installed")
    chain = [m.value() for m in sealapi.CoeffModulus.Create(n, bits)]
    for b in set(bits):
        seal = [q for q, qb in zip(chain, bits) if qb == b]
        # SEAL hands out each bit size's primes smallest first
        assert ntt_primes(n, b, len(seal)) == sorted(seal, reverse=True)


def test_ntt_primes_refuse_impossible_requests():
    with pytest.raises(ValueError):
        ntt_primes(4096, 14, 1)  # only 8193 = 3 * 2731 is 1 mod 8192 between 2^13 and 2^14
    with pytest.raises(ValueError):
        ntt_primes(12, 30, 1)
    with pytest.raises(ValueError):
        ntt_primes(16, 63, 1)


def test_is_prime_agrees_with_gmpy2_and_rejects_strong_pseudoprimes():
    rnd = random.Random(1)
    values = list(range(2000)) + [rnd.getrandbits(62) | 1 for _ in range(3000)]
    for v in values:
        assert is_prime(v) == bool(gmpy2.is_prime(v)), v
    # strong pseudoprimes to bases 2..7 and 2..23; a Carmichael number
    for v in (3215031751, 3825123056546413051, 561, 2152302898747):
        assert not is_prime(v)
    assert is_prime((1 << 61) - 1)


def test_default_root_is_the_smallest_primitive_2n_th_root():
    for n, q in [(16, 97), (16, 193), (16, 7681), (16, 12289), (64, 12289), (8, 17), (8, 113)]:
        roots = [x for x in range(2, q) if pow(x, n, q) == q - 1]
        assert smallest_root(q, n) == roots[0]
        assert RnsReference(n, [q]).roots == [roots[0]]
    for n in (16, 4096):
        for q in ntt_primes(n, 61, 2):
            psi = smallest_root(q, n)
            assert pow(psi, n, q) == q - 1
    # every primitive root is an odd power of psi; none smaller than the chosen one
    q = ntt_primes(64, 30, 1)[0]
    psi = smallest_root(q, 64)
    assert min(pow(psi, k, q) for k in range(1, 128, 2)) == psi


def test_custom_roots_are_used_and_checked():
    q = ntt_primes(16, 30, 1)[0]
    psi = smallest_root(q, 16)
    other = pow(psi, 3, q)
    ctx = RnsReference(16, [q], [other])
    a = np.zeros((1, 16), dtype=np.uint64)
    a[0, 1] = 1  # the polynomial X evaluates to the roots themselves
    ctx.ntt(a, [0])
    assert [int(x) for x in a[0]] == [pow(other, 2 * brv(k, 16) + 1, q) for k in range(16)]
    for bad in ([psi * psi % q], [1], [0], [q + psi], [psi, psi]):
        with pytest.raises(ValueError):
            RnsReference(16, [q], bad)


# -- argument checks -------------------------------------------------------------------------------


def test_contexts_refuse_bad_n_and_bad_primes():
    q = ntt_primes(16, 30, 1)[0]
    for n in (0, 1, 4, 3, 12, -16, 1 << 18):
        with pytest.raises(ValueError):
            RnsReference(n, [q])
    only_mod_16 = next(p for p in ntt_primes(8, 30, 8) if p % 32 != 1)  # prime, 1 mod 16, not mod 32
    above = next(p for p in range((1 << 62) + 1, (1 << 63), 32) if is_prime(p))
    for primes in ([q * q], [q, 97 * 193], [only_mod_16], [above], [], [2], [q, 1], [q, q]):
        with pytest.raises(ValueError):
            RnsReference(16, primes)


def _check_errors(ctx, *, native=False):
    """Every kernel raises ValueError on unreduced rows, wrong shapes and bad prime indices."""
    n, R = ctx.n, len(ctx.primes)
    rng = np.random.default_rng(0)
    mods = [0, 1]
    ok = random_rows(rng, ctx, mods)
    bad = ok.copy()
    bad[1, 3] = ctx.primes[1]  # = q: not reduced
    wrong = random_rows(rng, ctx, [0, 1, 2])
    short = np.zeros((2, n // 2), dtype=np.uint64)
    calls = {
        "ntt": lambda x: ctx.ntt(x.copy(), mods),
        "intt": lambda x: ctx.intt(x.copy(), mods),
        "add": lambda x: ctx.add(x, ok, mods),
        "add_b": lambda x: ctx.add(ok, x, mods),
        "sub": lambda x: ctx.sub(x, ok, mods),
        "neg": lambda x: ctx.neg(x, mods),
        "mul": lambda x: ctx.mul(ok, x, mods),
        "mul_acc": lambda x: ctx.mul_acc(ok.copy(), x, ok, mods),
        "mul_acc_acc": lambda x: ctx.mul_acc(x.copy(), ok, ok, mods),
        "mul_scalar": lambda x: ctx.mul_scalar(x, np.ones(2, dtype=np.uint64), mods),
        "tensor": lambda x: ctx.tensor(np.stack([x, ok]), np.stack([ok, ok]), mods),
        "divide_round_last": lambda x: ctx.divide_round_last(x, mods),
        "decompose": lambda x: ctx.decompose(x, mods, R - 1),
    }
    for call in calls.values():
        for arg in (bad, wrong, short):
            with pytest.raises(ValueError):
                call(arg)
    with pytest.raises(ValueError, match="row 1"):
        ctx.add(bad, ok, mods)
    for bad_mods in ([0, R], [0]):
        with pytest.raises(ValueError):
            ctx.add(ok, ok, bad_mods)
    with pytest.raises((ValueError, OverflowError)):  # the extension takes indices as unsigned
        ctx.add(ok, ok, [-1, 0])
    with pytest.raises(ValueError):
        ctx.mul_scalar(ok, np.ones(3, dtype=np.uint64), mods)
    with pytest.raises(ValueError):
        ctx.divide_round_last(ok[:1].copy(), [0])
    with pytest.raises(ValueError):
        ctx.decompose(ok, mods, 1)  # special prime inside mods
    with pytest.raises(ValueError):
        ctx.decompose(ok, mods, R)
    digits = ctx.decompose(ok, mods, R - 1)
    key = random_rows(rng, ctx, range(R), (R, 2))
    for g in (2, 0, 2 * n, 2 * n + 1):
        with pytest.raises(ValueError):
            ctx.automorph(ok, g)
        with pytest.raises(ValueError):
            ctx.key_switch(digits, key, mods, R - 1, g)
    bad_digits = digits.copy()
    bad_digits[0, 2, 0] = ctx.primes[R - 1]
    bad_key = key.copy()
    bad_key[1, 0, R - 1, 5] = ctx.primes[R - 1]
    for d, k in ((bad_digits, key), (digits, bad_key), (digits[:, :2].copy(), key), (digits, key[:, :, :2].copy()),
                 (digits, key[:1].copy())):
        with pytest.raises(ValueError):
            ctx.key_switch(d, k, mods, R - 1)


def _check_unreduced_scalars(ctx):
    ok = random_rows(np.random.default_rng(1), ctx, [0, 1])
    for s in (ctx.primes[0], ctx.primes[0] + 5, (1 << 64) - 1):
        with pytest.raises(ValueError):
            ctx.mul_scalar(ok, np.array([s, 1], dtype=np.uint64), [0, 1])


def _check_read_only_arrays(ctx):
    ok = random_rows(np.random.default_rng(1), ctx, [0, 1])
    frozen = ok.copy()
    frozen.flags.writeable = False
    for call in (lambda: ctx.ntt(frozen, [0, 1]), lambda: ctx.intt(frozen, [0, 1]),
                 lambda: ctx.mul_acc(frozen, ok, ok, [0, 1])):
        try:
            call()
        except ValueError:
            pass
        except BaseException as e:  # noqa: BLE001 - a Rust panic is a BaseException
            pytest.fail(f"a read-only array raised {type(e).__name__}: {e}, not ValueError")
        else:
            pytest.fail("a read-only array was accepted by an in-place kernel")
    assert np.array_equal(frozen, ok)


def test_reference_kernels_refuse_bad_arguments():
    _check_errors(reference(16, tuple(ntt_primes(16, 30, 4))))
    _check_unreduced_scalars(reference(16, tuple(ntt_primes(16, 30, 4))))
    _check_read_only_arrays(reference(16, tuple(ntt_primes(16, 30, 4))))


def test_reference_refuses_arrays_of_other_dtypes():
    ctx = reference(16, P30_16)
    with pytest.raises(TypeError):
        ctx.add(np.zeros((1, 16), dtype=np.int64), np.zeros((1, 16), dtype=np.uint64), [0])


# -- the factory -----------------------------------------------------------------------------------


def test_rns_context_honours_native_false_and_shaper_native_off(monkeypatch):
    q = ntt_primes(16, 30, 1)
    assert isinstance(rns_context(16, q, native=False), RnsReference)
    monkeypatch.setenv("SHAPER_NATIVE", "off")
    assert isinstance(rns_context(16, q), RnsReference)
    monkeypatch.setenv("SHAPER_NATIVE", "auto")
    ctx = rns_context(16, q)
    if rns.native_available():
        from shaper import _native

        assert isinstance(ctx, _native.RnsContext)
    else:
        assert isinstance(ctx, RnsReference)


def test_rns_context_with_native_true_needs_the_extension():
    if rns.native_available():
        from shaper import _native

        assert isinstance(rns_context(16, ntt_primes(16, 30, 1), native=True), _native.RnsContext)
    else:
        with pytest.raises(RuntimeError):
            rns_context(16, ntt_primes(16, 30, 1), native=True)


# == native RnsContext against the reference, bit for bit ===========================================

needs_native = pytest.mark.skipif(not rns.native_available(), reason="native extension not built")
BITS = [30, 50, 53, 60, 61]
NS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


@functools.cache
def pair(n: int, primes: tuple):
    """(reference, native) contexts over the same primes."""
    from shaper import _native

    return reference(n, primes), _native.RnsContext(n, list(primes))


def chain(n: int, bits) -> tuple:
    """Four primes: all of ``bits`` bits, or one of each size in a list."""
    if isinstance(bits, int):
        return tuple(ntt_primes(n, bits, 4))
    out: list[int] = []
    for b in bits:
        out.append(ntt_primes(n, b, 1, exclude=out)[0])
    return tuple(out)


def operands(rng, ctx, mods, lead=(), shift=1):
    """Random rows whose first 25 entries run through every pair of the edge residues 0, 1,
    q-1, (q-1)/2 and (q+1)/2 (``shift`` 1 and 5 give the two members of each pair)."""
    a = random_rows(rng, ctx, mods, lead)
    k = min(25, ctx.n)
    for r, m in enumerate(mods):
        q = ctx.primes[m]
        edges = np.array([0, 1, q - 1, (q - 1) // 2, (q + 1) // 2], dtype=np.uint64)
        a[..., r, :k] = edges[(np.arange(k) // shift) % 5]
    return a


def same(ref_out, nat_out, what):
    assert isinstance(nat_out, np.ndarray) and nat_out.dtype == np.uint64, what
    assert nat_out.shape == ref_out.shape, what
    if not np.array_equal(ref_out, nat_out):
        bad = np.argwhere(ref_out != nat_out)[0]
        pytest.fail(f"{what}: first difference at {tuple(bad)}: reference {ref_out[tuple(bad)]}, "
                    f"native {nat_out[tuple(bad)]} ({len(np.argwhere(ref_out != nat_out))} entries differ)")


def galois_elements(n):
    gs = {1, 3, 5, 2 * n - 1, pow(5, 2, 2 * n), pow(5, n // 4 + 1, 2 * n), pow(5, n // 2 - 1, 2 * n)}
    return sorted(g for g in gs if g % 2)


@needs_native
@pytest.mark.parametrize("n, bits, count, exclude", [
    (16, 30, 5, []), (4096, 60, 3, []), (16384, 53, 6, []), (8192, 40, 2, []), (1024, 61, 4, []),
    (4096, 62, 2, []), (2, 20, 3, []), (1, 30, 2, []), (1 << 17, 62, 2, []), (4096, 60, 2, ntt_primes(4096, 60, 3)[::2]), (16384, 60, 0, []),
])
def test_native_ntt_primes_match_the_reference(n, bits, count, exclude):
    from shaper import _native

    assert _native.ntt_primes(n, bits, count, exclude) == ntt_primes(n, bits, count, exclude)
    assert _native.ntt_primes(n, bits, count) == ntt_primes(n, bits, count)


@needs_native
@pytest.mark.parametrize("args", [(4096, 14, 1), (12, 30, 1), (24, 40, 1), (16, 63, 1), (16, 1, 1), (16, 30, -1),
                                  (0, 30, 1)])
def test_native_ntt_primes_refuse_what_the_reference_refuses(args):
    from shaper import _native

    with pytest.raises((ValueError, OverflowError)):
        ntt_primes(*args)
    with pytest.raises((ValueError, OverflowError)):
        _native.ntt_primes(*args)


@needs_native
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("bits", BITS + [[61, 30, 53, 50]])
def test_native_elementwise_kernels_and_transforms_match_the_reference(n, bits):
    ref, nat = pair(n, chain(n, bits))
    assert (nat.n, list(nat.primes), list(nat.roots)) == (ref.n, ref.primes, ref.roots)
    rng = np.random.default_rng(n)
    mods = [3, 0, 2]
    lead = (2, 3) if n <= 256 else (2,)
    a, b = operands(rng, ref, mods, lead, 1), operands(rng, ref, mods, lead, 5)
    for name in ("ntt", "intt"):
        x, y = a.copy(), a.copy()
        assert getattr(ref, name)(x, mods) is None and getattr(nat, name)(y, mods) is None
        same(x, y, name)
    for name in ("add", "sub", "mul"):
        same(getattr(ref, name)(a, b, mods), getattr(nat, name)(a, b, mods), name)
    same(ref.neg(a, mods), nat.neg(a, mods), "neg")
    x, y = b.copy(), b.copy()
    ref.mul_acc(x, a, a, mods)
    assert nat.mul_acc(y, a, a, mods) is None
    same(x, y, "mul_acc")
    scalars = np.array([0, 1, ref.primes[2] - 1], dtype=np.uint64)
    same(ref.mul_scalar(a, scalars, mods), nat.mul_scalar(a, scalars, mods), "mul_scalar")
    scalars = np.array([rng.integers(0, ref.primes[m]) for m in mods], dtype=np.uint64)
    same(ref.mul_scalar(b, scalars, mods), nat.mul_scalar(b, scalars, mods), "mul_scalar")
    ta, tb = (a, b) if a.ndim == 3 else (np.ascontiguousarray(a[:, 0]), np.ascontiguousarray(b[:, -1]))
    same(ref.tensor(ta, tb, mods), nat.tensor(ta, tb, mods), "tensor")
    for g in galois_elements(n) + [int(rng.integers(0, n)) * 2 + 1]:
        same(ref.automorph(a, g), nat.automorph(a, g), f"automorph g={g}")
    x = np.ascontiguousarray(a[..., :2, :])
    same(ref.divide_round_last(x, mods[:2]), nat.divide_round_last(x, mods[:2]), "divide_round_last (2 primes)")
    same(ref.divide_round_last(a, mods), nat.divide_round_last(a, mods), "divide_round_last")


@needs_native
@pytest.mark.parametrize("n", [16, 64, 256, 1024, 4096])
@pytest.mark.parametrize("bits", BITS + [[50, 61, 30, 60]])
def test_native_decompose_and_key_switch_match_the_reference(n, bits):
    ref, nat = pair(n, chain(n, bits))
    rng = np.random.default_rng(n + 1)
    mods, sp = [0, 2, 1], 3
    ext = mods + [sp]
    a = operands(rng, ref, mods)
    digits = ref.decompose(a, mods, sp)
    same(digits, nat.decompose(a, mods, sp), "decompose")
    short = np.ascontiguousarray(a[1:])
    same(ref.decompose(short, mods[1:], sp), nat.decompose(short, mods[1:], sp), "decompose at a lower level")
    two = operands(rng, ref, mods, (2,), 5)
    same(ref.decompose(two, mods, sp), nat.decompose(two, mods, sp), "decompose with a leading axis")
    key = operands(rng, ref, range(4), (3, 2), 5)  # D = 3 digits (max(mods) + 1), rows by context prime
    gs = galois_elements(n) if n <= 1024 else [1, pow(5, 3, 2 * n), 2 * n - 1]
    for g in gs:
        same(ref.key_switch(digits, key, mods, sp, g), nat.key_switch(digits, key, mods, sp, g), f"key_switch g={g}")
    edge = operands(rng, ref, ext, (3,), 1)
    same(ref.key_switch(edge, key, mods, sp), nat.key_switch(edge, key, mods, sp), "key_switch, edge digits")
    # edge residues in the coefficient domain: the centred lifts sit at -(q-1)/2, (q-1)/2, -1, 0, 1
    coeffs = operands(rng, ref, ext, (2,), 5)
    ref.ntt(coeffs, ext)
    same(ref.divide_round_last(coeffs, ext), nat.divide_round_last(coeffs, ext),
         "divide_round_last, edge coefficients in the last row")
    low = np.ascontiguousarray(coeffs[0, :3])
    same(ref.decompose(low, mods, sp), nat.decompose(low, mods, sp), "decompose, edge coefficients")


@needs_native
def test_native_kernels_refuse_bad_arguments():
    _check_errors(pair(16, chain(16, 30))[1])
    _check_errors(pair(64, chain(64, [61, 30, 53, 50]))[1])


@needs_native
def test_native_mul_scalar_refuses_unreduced_scalars():
    _check_unreduced_scalars(pair(16, chain(16, 30))[1])


@needs_native
def test_native_in_place_kernels_refuse_read_only_arrays_with_value_error():
    _check_read_only_arrays(pair(16, chain(16, 30))[1])


@needs_native
def test_native_contexts_refuse_what_the_reference_refuses():
    from shaper import _native

    q = ntt_primes(16, 30, 1)[0]
    psi = smallest_root(q, 16)
    only_mod_16 = next(p for p in ntt_primes(8, 30, 8) if p % 32 != 1)
    above = next(p for p in range((1 << 62) + 1, (1 << 63), 32) if is_prime(p))
    cases = [(0, [q]), (3, [q]), (4, [q]), (12, [q]), (1 << 18, [q]), (16, [q * q]), (16, [q, 97 * 193]),
             (16, [only_mod_16]), (16, [above]), (16, []), (16, [q, 1]), (16, [q, q])]
    for n, primes in cases:
        with pytest.raises(ValueError):
            RnsReference(n, primes)
        with pytest.raises((ValueError, OverflowError)):
            _native.RnsContext(n, primes)
    for roots in ([psi * psi % q], [1], [0], [q + psi], [psi, psi]):
        with pytest.raises(ValueError):
            _native.RnsContext(16, [q], roots)
    custom = pow(psi, 5, q)
    nat = _native.RnsContext(16, [q], [custom])
    ref = RnsReference(16, [q], [custom])
    assert list(nat.roots) == [custom]
    a = random_rows(np.random.default_rng(1), ref, [0])
    x, y = a.copy(), a.copy()
    ref.ntt(x, [0])
    nat.ntt(y, [0])
    same(x, y, "ntt with a custom root")


@needs_native
def test_native_matches_the_reference_on_seals_n_2_14_chain():
    n = 1 << 14
    primes = tuple(ntt_primes(n, 53, 2) + ntt_primes(n, 60, 1))
    ref, nat = pair(n, primes)
    rng = np.random.default_rng(14)
    mods = [0, 1, 2]
    a = operands(rng, ref, mods)
    x, y = a.copy(), a.copy()
    ref.ntt(x, mods)
    nat.ntt(y, mods)
    same(x, y, "ntt at n = 2^14")
    same(ref.divide_round_last(x, mods), nat.divide_round_last(x, mods), "divide_round_last at n = 2^14")
    same(ref.automorph(x, 5 ** 9 % (2 * n)), nat.automorph(x, 5 ** 9 % (2 * n)), "automorph at n = 2^14")
    ref.intt(x, mods)
    nat.intt(y, mods)
    same(x, y, "intt at n = 2^14")


def _from_signed_cases(n):
    rng = np.random.default_rng(n)
    edges = np.array([0, -1, 1, (1 << 62) - 1, -(1 << 62) + 1, -(1 << 40), 1 << 61], dtype=np.int64)
    x = rng.integers(-(1 << 62) + 1, 1 << 62, size=(2, n), dtype=np.int64)
    x[0, :edges.size] = edges[: min(edges.size, n)]
    return x


def test_reference_from_signed_against_python_integers():
    n = 16
    ctx = RnsReference(n, chain(n, [30, 61, 50]))
    x = _from_signed_cases(n)
    out = ctx.from_signed(x, [2, 0, 1])
    for k, m in enumerate([2, 0, 1]):
        q = ctx.primes[m]
        assert out[:, k].tolist() == [[int(v) % q for v in row] for row in x]
    with pytest.raises(ValueError, match="below 2"):
        ctx.from_signed(np.full(n, 1 << 62, dtype=np.int64), [0])
    with pytest.raises(ValueError, match="last axis"):
        ctx.from_signed(np.zeros(n + 1, dtype=np.int64), [0])


@needs_native
@pytest.mark.parametrize("n", [16, 4096])
def test_native_from_signed_matches_the_reference(n):
    ref, nat = pair(n, chain(n, [30, 61, 53, 60]))
    x = _from_signed_cases(n)
    for mods in ([0], [3, 1, 2], [0, 1, 2, 3]):
        same(ref.from_signed(x, mods), nat.from_signed(x, mods), f"from_signed {mods}")
    for bad in (np.full(n, 1 << 62, dtype=np.int64), np.full(n, np.iinfo(np.int64).min, dtype=np.int64)):
        with pytest.raises(ValueError):
            ref.from_signed(bad, [0])
        with pytest.raises(ValueError):
            nat.from_signed(bad, [0])
