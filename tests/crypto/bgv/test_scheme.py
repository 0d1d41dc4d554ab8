"""BGV over Φ_m for odd m (shaper.crypto.bgv.ring / scheme): the double-CRT layer against
Python-integer arithmetic, every homomorphic operation against the slot simulator, the noise
estimate against the measured phase, and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.bgv.algebra import algebra
from shaper.crypto.bgv.ring import Ring
from shaper.crypto.prg import Prg


@pytest.fixture(scope="module")
def small():
    params = P.named("test-257")
    return params, Ring(params)


@pytest.fixture(scope="module")
def keys257():
    params = P.named("test-257")
    alg = algebra(257)
    units = sorted({int(u) for dim in range(len(alg.gens)) for k in range(1, alg.ords[dim])
                    for u, _ in alg.rotation(dim, k)} | {pow(2, j, 257) for j in range(1, alg.d)})
    return params, S.keygen(params, [u for u in units if u != 1], prg=Prg(b"\x07" * 32))


def _cyclotomic(m):
    return [int(c) for c in algebra(m).cyclotomic()]


def _mod_phi(coeffs, m, q):
    """coefficients (any length) mod (Φ_m, q) by long division with Python ints."""
    phi_poly = _cyclotomic(m)
    deg = len(phi_poly) - 1
    c = [int(x) % q for x in coeffs]
    for i in range(len(c) - 1, deg - 1, -1):
        t = c[i]
        if t:
            for j in range(deg + 1):
                c[i - deg + j] = (c[i - deg + j] - t * phi_poly[j]) % q
    return c[:deg] + [0] * max(0, deg - len(c))


def test_the_basis_extension_is_the_centred_value_mod_every_target(small):
    params, ring = small
    rng = np.random.default_rng(1)
    src, dst = [1, 2, 3], [0, 4, len(params.primes)]
    d = math.prod(params.basis[i] for i in src)
    xs = [int(v) for v in rng.integers(-2**62, 2**62, ring.phi)]
    xs = [x % d - d // 2 for x in xs]
    res = np.asarray([[x % params.basis[i] for x in xs] for i in src], dtype=np.uint64)
    out = ring.extend(res, src, dst)
    for k, limb in enumerate(dst):
        q = params.basis[limb]
        assert [int(v) for v in out[k]] == [x % q for x in xs]


def test_dividing_by_a_prime_rounds_and_keeps_the_parity(small):
    params, ring = small
    rng = np.random.default_rng(2)
    limbs = ring.chain(3)
    q3 = params.primes[3]
    xs = [int(v) for v in rng.integers(-2**60, 2**60, ring.phi)]
    res = np.asarray([[x % params.primes[i] for x in xs] for i in limbs], dtype=np.uint64)
    out = ring.inverse(ring.divide_round(ring.forward(res, limbs), limbs, [3]), limbs[:3])
    q0 = params.primes[0]
    got = [int(v) if v <= q0 // 2 else int(v) - q0 for v in out[0]]
    for x, y in zip(xs, got, strict=True):
        assert abs(y - x / q3) <= 1.5 and (y - x) % 2 == 0  # (x - δ)/q with δ even: parity of x kept


def test_ring_products_equal_schoolbook_products_mod_phi(small):
    params, ring = small
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, ring.phi)
    b = rng.integers(-50, 50, ring.phi)
    limbs = [0, 1]
    prod = ring.inverse(ring.mul(ring.encode_signed(a, limbs), ring.encode_signed(b, limbs), limbs), limbs)
    full = np.convolve(a.astype(object), b.astype(object))
    for k, limb in enumerate(limbs):
        assert [int(v) for v in prod[k]] == _mod_phi(full, params.m, params.basis[limb])


def test_encrypt_then_decrypt_returns_the_slots(keys257):
    params, keys = keys257
    ev = S.Evaluator(params, keys.relin, keys.galois)
    rng = np.random.default_rng(4)
    slots = rng.integers(0, 2**ev.algebra.d, ev.algebra.nslots, dtype=np.uint64)
    ct = S.encrypt(keys.public, ev.encode(slots))
    assert np.array_equal(S.decrypt(keys.secret, ct), slots)
    assert ct.level == params.max_level


def _random_slots(ev, seed):
    return np.random.default_rng(seed).integers(0, 2**ev.algebra.d, ev.algebra.nslots, dtype=np.uint64)


def test_every_operation_matches_the_slot_simulator(keys257):
    from shaper.crypto.bgv.slots import SlotEvaluator, rotate

    params, keys = keys257
    ev = S.Evaluator(params, keys.relin, keys.galois)
    sim = SlotEvaluator(ev.algebra)
    x, y, c = (_random_slots(ev, s) for s in (5, 6, 7))
    cx, cy = (S.encrypt(keys.public, ev.encode(v)) for v in (x, y))
    pc = ev.encode(c)
    checks = {
        "add": (ev.add(cx, cy), sim.add(x, y)),
        "mul": (ev.mul(cx, cy), sim.mul(x, y)),
        "add_plain": (ev.add_plain(cx, pc), sim.add_plain(x, sim.encode(c))),
        "mul_plain": (ev.mul_plain(cx, pc), sim.mul_plain(x, sim.encode(c))),
        "frobenius 3": (ev.frobenius(cx, 3), sim.frobenius(x, 3)),
        "rotate 5": (rotate(ev, cx, 0, 5), rotate(sim, x, 0, 5)),
        "depth 3": (ev.mul(ev.mul(ev.mul(cx, cy), cx), ev.mul(cy, cy)),
                    sim.mul(sim.mul(sim.mul(x, y), x), sim.mul(y, y))),
    }
    for name, (ct, want) in checks.items():
        assert np.array_equal(S.decrypt(keys.secret, ct), want), name


def test_the_noise_estimate_bounds_the_measured_phase(keys257):
    params, keys = keys257
    ev = S.Evaluator(params, keys.relin, keys.galois)
    x = S.encrypt(keys.public, ev.encode(_random_slots(ev, 8)))
    cts = [x, ev.mul(x, x), ev.frobenius(x, 1), ev.mul(ev.mul(x, x), ev.mul(x, x)), S.switch_to(x, 0)]
    for ct in cts:
        low = S.switch_to(ct, 0)
        measured = S.canonical_norm(S.phase(keys.secret, low), params.m)
        assert measured <= S.TAIL * low.noise, (ct.level, measured, low.noise)
        assert measured >= low.noise / 2**8  # an estimate, not a vacuous bound


def test_modulus_switching_keeps_the_plaintext(keys257):
    params, keys = keys257
    ev = S.Evaluator(params, keys.relin, keys.galois)
    slots = _random_slots(ev, 9)
    ct = S.encrypt(keys.public, ev.encode(slots))
    for level in (params.max_level - 1, 3, 0):
        assert np.array_equal(S.decrypt(keys.secret, S.switch_to(ct, level)), slots)


def test_a_circuit_too_deep_is_refused_by_name(keys257):
    params, keys = keys257
    ev = S.Evaluator(params, keys.relin, keys.galois)
    x = S.encrypt(keys.public, ev.encode(_random_slots(ev, 10)))
    with pytest.raises(S.NoiseBudgetExceeded, match="too deep"):
        for _ in range(64):
            x = ev.mul(x, x)


def test_a_wrapped_error_is_refused_at_decryption(keys257):
    params, keys = keys257
    ev = S.Evaluator(params, keys.relin, keys.galois)
    ct = S.switch_to(S.encrypt(keys.public, ev.encode(_random_slots(ev, 11))), 0)
    ring = ev.ring
    q0 = params.primes[0]  # an error spread over all of q_0: what a wrapped error looks like
    junk = ring.forward(np.random.default_rng(12).integers(0, q0, (1, params.phi)).astype(np.uint64), [0])
    bad = S.Ciphertext(np.stack([ring.add(ct.parts[0], junk, [0]), ct.parts[1]]), 0, ct.noise, params)
    with pytest.raises(S.NoiseBudgetExceeded, match="cannot be decrypted"):
        S.decrypt(keys.secret, bad)


def test_a_fixed_weight_secret_has_exactly_that_weight():
    params = P.Parameters.from_primes(257, P.named("test-257").primes, P.named("test-257").special, digits=2,
                                      hamming_weight=17, insecure=True)
    for seed in range(5):
        s = S.sample_secret(params, Prg(bytes([seed]) * 32))
        assert int(np.count_nonzero(s)) == 17 and set(np.unique(s)) <= {-1, 0, 1}


def test_parameter_sets_and_their_ratings():
    assert P.estimate_security(32768, 881) == 128 and 120 < P.estimate_security(32768, 900) < 128
    assert P.estimate_security(46080, 1240) == 128 and P.estimate_security(46080, 1387) < 128
    assert P.estimate_security(16384, 300) >= 192
    assert P.estimate_security(46080, 1000, hamming_weight=64) == 0
    with pytest.raises(ValueError, match="rated 0 bits"):  # φ = 256: far below any table
        P.Parameters.from_primes(257, P.named("test-257").primes, P.named("test-257").special, digits=2)
    with pytest.raises(ValueError, match="unknown BGV parameter set"):
        P.named("nope")
    with pytest.raises(ValueError, match="odd"):
        P.Parameters.create(256, 40, [36], [60], digits=1, insecure=True)
