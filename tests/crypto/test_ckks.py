"""RNS-CKKS (shaper.crypto.ckks): encoder laws, every homomorphic operation against numpy on the
decrypted slots, keys from given polynomials against Python-integer arithmetic, error cases,
serialisation, and the precision the documentation states (full size with the native kernels).
"""

from __future__ import annotations

import math
import os
import stat
import struct

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.prg import Prg
from shaper.errors import (
    ConfigError,
    KeyMismatchError,
    PlaintextOverflowError,
    ScaleError,
    SerializationError,
)
from shaper.kernels.rns import native_selected

N = 1024
STEPS = [1, 2, 3, 5, -1, -4, 100]


@pytest.fixture(scope="module")
def params():
    return ckks.Parameters.from_literal(N, [60, 40, 40, 40], 60, 40, insecure=True)


@pytest.fixture(scope="module")
def keys(params):
    steps = sorted(set(STEPS) | set(ckks.Evaluator.matvec_steps(16)))
    return ckks.KeySet(params, rotations=steps, conjugation=True)


@pytest.fixture(scope="module")
def enc(params):
    return ckks.Encoder(params)


@pytest.fixture(scope="module")
def ev(params, keys):
    return ckks.Evaluator(params, keys.relin, keys.galois)


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)


def dec(keys, enc, ct, complex=False):
    return enc.decode(ckks.decrypt(keys.secret, ct), complex=complex)


def err(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


# -- parameters ---------------------------------------------------------------------------------

def test_parameters_from_literal_checks_security():
    p = ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 6, 60, 53)
    assert p.security == 128 and p.max_level == 6 and p.slots == 8192
    assert [q.bit_length() for q in p.moduli] == [60] + [53] * 6 and p.special.bit_length() == 60
    assert all(q % (2 * p.n) == 1 for q in p.primes)
    assert p.special > p.moduli[0]  # SEAL's rule: same-size primes handed out smallest first
    assert abs(p.log_pq - 438) < 0.01
    with pytest.raises(ConfigError, match="exceeds the HE Standard's 438 bits"):
        ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 6, 61, 53)
    assert ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 6, 61, 53, insecure=True).security is None
    assert "INSECURE" in repr(ckks.Parameters.from_literal(1024, [40, 30], 40, 30, insecure=True))
    with pytest.raises(ConfigError, match="power of two"):
        ckks.Parameters.from_literal(1000, [40], 40, 30, insecure=True)
    with pytest.raises(ConfigError, match="outside"):
        ckks.Parameters.from_literal(1024, [62], 62, 30, insecure=True)
    with pytest.raises(ConfigError, match="special prime"):
        ckks.Parameters.from_literal(1024, [50, 40], 40, 30, insecure=True)


def test_parameters_from_primes_validates():
    p = ckks.Parameters.from_literal(1024, [50, 40], 50, 30, insecure=True)
    with pytest.raises(ConfigError, match="not a prime"):
        ckks.Parameters.from_primes(1024, [p.moduli[0] + 2048, p.moduli[1]], p.special, 2.0 ** 30, insecure=True)
    with pytest.raises(ConfigError, match="distinct"):
        ckks.Parameters.from_primes(1024, [p.moduli[1], p.moduli[1]], p.special, 2.0 ** 30, insecure=True)
    assert ckks.Parameters.from_primes(1024, p.moduli, p.special, 2.0 ** 30, insecure=True) == p


# -- encoder ------------------------------------------------------------------------------------

def test_encoder_round_trip_and_slot_laws(params, enc, rng):
    ctx = params.context
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    w = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    pz, pw = enc.encode(z), enc.encode(w)
    assert err(enc.decode(pz, complex=True), z) < 2 ** -28
    assert err(enc.decode(enc.encode(z.real)), z.real) < 2 ** -28
    mods = params.mods(pz.level)
    # product of polynomials <-> product of slots (scale multiplies)
    prod = ckks.Plaintext(params, ctx.mul(pz.data, pw.data, mods), pz.scale * pw.scale)
    assert err(enc.decode(prod, complex=True), z * w) < 2 ** -26
    # X -> X^(5^r) rotates left by r; X -> X^(-1) conjugates
    for r in (1, 7, -3):
        g = ckks.galois_element(params, r)
        rot = ckks.Plaintext(params, ctx.automorph(pz.data, g), pz.scale)
        assert err(enc.decode(rot, complex=True), np.roll(z, -r)) < 2 ** -28
    conj = ckks.Plaintext(params, ctx.automorph(pz.data, ckks.conjugation_element(params)), pz.scale)
    assert err(enc.decode(conj, complex=True), np.conj(z)) < 2 ** -28


def test_encoder_zero_pads_and_rejects_bad_input(params, enc):
    out = enc.decode(enc.encode([1.5, -2.0]))
    assert err(out[:2], [1.5, -2.0]) < 1e-9 and err(out[2:], 0) < 1e-9
    with pytest.raises(ValueError, match="do not fit"):
        enc.encode(np.zeros(params.slots + 1))
    with pytest.raises(ValueError, match="NaN"):
        enc.encode([1.0, float("nan")])
    with pytest.raises(PlaintextOverflowError, match="beyond the modulus range"):
        enc.encode(np.full(params.slots, 2.0 ** 40), level=0)


# -- encryption and every operation against numpy ----------------------------------------------

def test_encrypt_decrypt_public_and_secret(params, keys, enc, rng):
    x = rng.uniform(-1, 1, params.slots)
    for key in (keys.public, keys.secret):
        ct = ckks.encrypt(key, enc.encode(x))
        assert ct.level == params.max_level and ct.size == 2
        assert err(dec(keys, enc, ct), x) < 2 ** -25
    low = ckks.encrypt(keys.public, enc.encode(x, level=1))
    assert low.level == 1 and err(dec(keys, enc, low), x) < 2 ** -25


def test_linear_operations(params, keys, enc, ev, rng):
    x, y, c = (rng.uniform(-1, 1, params.slots) for _ in range(3))
    cx, cy = ckks.encrypt(keys.public, enc.encode(x)), ckks.encrypt(keys.secret, enc.encode(y))
    tol = 2 ** -24
    assert err(dec(keys, enc, ev.add(cx, cy)), x + y) < tol
    assert err(dec(keys, enc, ev.sub(cx, cy)), x - y) < tol
    assert err(dec(keys, enc, ev.negate(cx)), -x) < tol
    assert err(dec(keys, enc, ev.add_plain(cx, enc.encode(c))), x + c) < tol
    assert err(dec(keys, enc, ev.sub_plain(cx, enc.encode(c))), x - c) < tol
    prod = ev.mul_plain(cx, enc.encode(c))
    assert err(dec(keys, enc, ev.rescale(prod)), x * c) < tol
    const = ev.rescale(ev.mul_const(cx, c))
    assert math.isclose(const.scale, cx.scale) and err(dec(keys, enc, const), x * c) < tol
    assert err(dec(keys, enc, ev.rescale(ev.mul_const(cx, 0.5))), 0.5 * x) < tol
    low = ev.drop_level(cx, 1)
    assert low.level == 1 and err(dec(keys, enc, low), x) < tol


def test_multiply_relinearise_rescale(params, keys, enc, ev, rng):
    x, y, u, v = (rng.uniform(-1, 1, params.slots) for _ in range(4))
    cx, cy, cu, cv = (ckks.encrypt(keys.public, enc.encode(t)) for t in (x, y, u, v))
    prod = ev.mul_rescale(cx, cy)
    assert prod.level == params.max_level - 1
    assert math.isclose(prod.scale, cx.scale * cy.scale / params.moduli[params.max_level])
    assert err(dec(keys, enc, prod), x * y) < 2 ** -22
    assert err(dec(keys, enc, ev.rescale(ev.square(cx))), x * x) < 2 ** -22
    # lazy relinearisation: a sum of unrelinearised products decrypts (3 components) and
    # relinearises once to the same value
    lazy = ev.add(ev.mul(cx, cy, relinearize=False), ev.mul(cu, cv, relinearize=False))
    assert lazy.size == 3 and err(dec(keys, enc, lazy), x * y + u * v) < 2 ** -20
    assert err(dec(keys, enc, ev.rescale(ev.relinearize(lazy))), x * y + u * v) < 2 ** -20
    # depth: down to level 0
    acc, want = cx, x
    while acc.level > 0:
        acc, want = ev.mul_rescale(acc, ev.drop_level(cy, acc.level)), want * y
    assert err(dec(keys, enc, acc), want) < 2 ** -18


def test_rotations_conjugation_and_hoisting(params, keys, enc, ev, rng):
    x = rng.uniform(-1, 1, params.slots)
    z = x + 1j * rng.uniform(-1, 1, params.slots)
    cx, cz = ckks.encrypt(keys.public, enc.encode(x)), ckks.encrypt(keys.public, enc.encode(z))
    for s in STEPS:
        assert err(dec(keys, enc, ev.rotate(cx, s)), np.roll(x, -s)) < 2 ** -22
    assert err(dec(keys, enc, ev.conjugate(cz), complex=True), np.conj(z)) < 2 ** -22
    hoisted = ev.rotate_many(cx, STEPS + [0])
    assert np.array_equal(hoisted[0].data, cx.data) and hoisted[0] is not cx
    for s in STEPS:  # hoisting decomposes once: bit-identical to one rotation at a time
        assert np.array_equal(hoisted[s].data, ev.rotate(cx, s).data)
    after = ev.rotate(ev.mul_rescale(cx, cx), 3)  # below the top level
    assert err(dec(keys, enc, after), np.roll(x * x, -3)) < 2 ** -20


def test_matvec_baby_step_giant_step(params, keys, enc, ev, rng):
    d = 16
    m, v = rng.uniform(-1, 1, (d, d)), rng.uniform(-1, 1, d)
    ct = ckks.encrypt(keys.public, enc.encode(np.tile(v, params.slots // d)))
    out = ev.matvec(m, ct)
    assert out.level == ct.level - 1 and math.isclose(out.scale, ct.scale)
    assert err(dec(keys, enc, out), np.tile(m @ v, params.slots // d)) < 2 ** -20
    assert ckks.Evaluator.matvec_steps(d) == [1, 2, 3, 4, 8, 12]


# -- clear errors -------------------------------------------------------------------------------

def test_mismatches_raise_by_name(params, keys, enc, ev, rng):
    x = rng.uniform(-1, 1, params.slots)
    cx = ckks.encrypt(keys.public, enc.encode(x))
    low = ev.mul_rescale(cx, cx)
    with pytest.raises(ScaleError, match="levels 3 and 2"):
        ev.add(cx, low)
    with pytest.raises(ScaleError, match="scales differ"):
        ev.add(ev.drop_level(cx, 2), low)
    with pytest.raises(ScaleError, match="level 0"):
        ev.rescale(ev.drop_level(cx, 0))
    with pytest.raises(ScaleError, match="encode the plaintext at the ciphertext's level"):
        ev.mul_plain(low, enc.encode(x))
    with pytest.raises(ConfigError, match="no Galois key"):
        ev.rotate(cx, 77)
    with pytest.raises(ConfigError, match="relinearisation key"):
        ckks.Evaluator(params).mul(cx, cx)
    other = ckks.Parameters.from_literal(N, [60, 40, 40, 40], 60, 41, insecure=True)
    with pytest.raises(KeyMismatchError):
        ckks.Evaluator(other).add(cx, cx)
    with pytest.raises(KeyMismatchError):
        ckks.encrypt(keys.public, ckks.Encoder(other).encode(x))


# -- keys from given polynomials ----------------------------------------------------------------

def negacyclic(a, b, q):
    """Schoolbook product in Z_q[X]/(X^n + 1) with Python integers (independent oracle)."""
    n = len(a)
    out = [0] * n
    for i, ai in enumerate(a):
        if ai:
            for j, bj in enumerate(b):
                k = i + j
                if k < n:
                    out[k] += ai * bj
                else:
                    out[k - n] -= ai * bj
    return [v % q for v in out]


def test_keys_from_given_polynomials_match_integer_arithmetic():
    params = ckks.Parameters.from_literal(16, [30, 25], 30, 20, insecure=True)
    ctx = params.context
    rows = list(range(len(params.primes)))
    prg = Prg(bytes(32))
    s = ckks.sample_ternary(params.n, prg)
    sk = ckks.SecretKey.from_coefficients(params, s)
    a_coeffs = [[int(v) for v in prg.below(q, params.n)] for q in params.primes]
    a = np.array(a_coeffs, dtype=np.uint64)
    ctx.ntt(a, rows)
    e = ckks.sample_gaussian(params.n, 3.2, prg)
    pk = ckks.public_key(sk, a=a, e=e)
    b = pk.data[0].copy()
    ctx.intt(b, rows)
    for r, q in enumerate(params.primes):  # b = -a s + e, row by row
        want = [(x - y) % q for x, y in zip((int(v) % q for v in e), negacyclic(a_coeffs[r], [int(v) for v in s], q))]
        assert [int(v) for v in b[r]] == want
    # relinearisation key: b_j + a_j s = e_j + [row = j] p s^2 on every row
    rlk = ckks.relin_key(sk, e=np.zeros((len(params.moduli), params.n), dtype=np.int64))
    s2 = ctx.mul(sk.ntt, sk.ntt, rows)
    for j, q in enumerate(params.moduli):
        got = ctx.add(rlk.data[j, 0], ctx.mul(rlk.data[j, 1], sk.ntt, rows), rows)
        for r in rows:
            want = (params.special % q) * s2[r].astype(object) % q if r == j else np.zeros(params.n, dtype=object)
            assert np.array_equal(got[r].astype(object), want)
    assert ckks.SecretKey.from_coefficients(params, s).coefficients.tolist() == s.tolist()
    with pytest.raises(ConfigError, match="integer coefficients"):
        ckks.SecretKey.from_coefficients(params, np.zeros(params.n + 1, dtype=np.int64))


def test_gaussian_sampler_has_the_documented_width():
    x = ckks.sample_gaussian(400_000, 3.2)
    assert abs(float(np.std(x)) - math.sqrt(3.2 ** 2 + 1 / 12)) < 0.03 and abs(float(np.mean(x))) < 0.03
    assert int(np.max(np.abs(x))) <= 19
    # every value's frequency against the rounded normal's mass (within 5 binomial sigmas)
    for k in range(-10, 11):
        p = 0.5 * (math.erf((k + 0.5) / (3.2 * math.sqrt(2))) - math.erf((k - 0.5) / (3.2 * math.sqrt(2))))
        assert abs(float(np.mean(x == k)) - p) < 5 * math.sqrt(p * (1 - p) / x.size) + 1e-6, k
    t = ckks.sample_ternary(30_000)
    assert set(np.unique(t).tolist()) == {-1, 0, 1} and abs(float(np.mean(t == 0)) - 1 / 3) < 0.02


# -- serialisation ------------------------------------------------------------------------------

def test_serialisation_round_trips_and_validates(params, keys, enc, ev, tmp_path, rng):
    x = rng.uniform(-1, 1, params.slots)
    assert ckks.from_bytes(ckks.to_bytes(params), insecure=True) == params  # a test set: only when asked
    sym = ckks.encrypt(keys.secret, enc.encode(x))
    pub = ckks.encrypt(keys.public, enc.encode(x))
    three = ev.mul(pub, pub, relinearize=False)
    for ct in (sym, pub, three):
        back = ckks.from_bytes(ckks.to_bytes(ct), params)
        assert np.array_equal(back.data, ct.data) and back.scale == ct.scale
    n_rows = params.max_level + 1
    assert len(ckks.to_bytes(sym)) < 8 * params.n * n_rows + 100  # seeded: c1 is 32 bytes
    assert len(ckks.to_bytes(pub)) > 2 * 8 * params.n * n_rows
    for key in (keys.public, keys.relin, next(iter(keys.galois.values()))):
        back = ckks.from_bytes(ckks.to_bytes(key), params)
        assert np.array_equal(back.data, key.data)
    rk = ckks.to_bytes(keys.relin)
    assert len(rk) < 8 * params.n * (len(params.primes)) * len(params.moduli) + 100  # a_j as one seed
    path = ckks.save(keys.secret, tmp_path / "ckks.sk")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert np.array_equal(ckks.load(path, params).coefficients, keys.secret.coefficients)
    # tampering and mismatches
    raw = bytearray(ckks.to_bytes(pub))
    with pytest.raises(SerializationError, match="truncated"):
        ckks.from_bytes(bytes(raw[:-1]), params)
    bad = bytearray(raw)
    bad[-8:] = (2 ** 64 - 1).to_bytes(8, "little")
    with pytest.raises(SerializationError, match="not below its prime"):
        ckks.from_bytes(bytes(bad), params)
    other = ckks.Parameters.from_literal(N, [60, 40, 40, 40], 60, 41, insecure=True)
    with pytest.raises(SerializationError, match="fingerprint"):
        ckks.from_bytes(bytes(raw), other)
    with pytest.raises(SerializationError, match="needs its Parameters"):
        ckks.from_bytes(bytes(raw))


def test_an_insecure_parameter_file_loads_only_when_asked(params, tmp_path):
    path = ckks.save(params, tmp_path / "params.shpr")
    assert params.security is None  # the test set is outside the HE Standard
    with pytest.raises(SerializationError, match="insecure test set"):
        ckks.load(path)
    assert ckks.load(path, insecure=True) == params
    secure = ckks.Parameters.from_literal(2048, [25], 27, 20)
    assert ckks.from_bytes(ckks.to_bytes(secure)) == secure


def _with_scale(data: bytes, offset_from_end: int, value: float) -> bytes:
    raw = bytearray(data)
    at = len(raw) - offset_from_end
    raw[at:at + 8] = struct.pack("<d", value)
    return bytes(raw)


@pytest.mark.parametrize("scale", [5e-324, 0.5, -2.0 ** 40, 0.0, math.inf, -math.inf, math.nan, 1e300, 2.0 ** 62])
def test_absurd_parameter_scales_are_refused(params, scale):
    data = ckks.to_bytes(params)  # ... u64 p, f64 scale, f64 sigma, u8 security
    with pytest.raises(SerializationError, match="scale"):
        ckks.from_bytes(_with_scale(data, 17, scale), insecure=True)


@pytest.mark.parametrize("scale", [5e-324, 0.5, -1.0, 0.0, math.inf, math.nan, 1e300])
def test_absurd_ciphertext_scales_are_refused(params, keys, enc, scale):
    ct = ckks.encrypt(keys.public, enc.encode(np.zeros(params.slots)))
    raw = bytearray(ckks.to_bytes(ct))
    at = 8 + 16 + 2  # header, parameter fingerprint, u8 components, u8 level
    raw[at:at + 8] = struct.pack("<d", scale)
    with pytest.raises(SerializationError, match="scale"):
        ckks.from_bytes(bytes(raw), params)


# -- precision at full size (native kernels) -----------------------------------------------------

@pytest.mark.skipif(not native_selected(), reason="native RNS kernels not in use (extension absent or SHAPER_NATIVE=off): "
                    "full size needs them; the numpy reference runs the small-N tests above")
def test_full_size_precision_matches_the_documented_bits():
    params = ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 6, 60, 53)
    keys = ckks.KeySet(params)
    enc, ev = ckks.Encoder(params), ckks.Evaluator(params, keys.relin)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, params.slots)
    ct = ckks.encrypt(keys.public, enc.encode(x))
    # precision in bits: -log2 of the mean absolute slot error (Lattigo's "average precision");
    # the worst slot is about 3 bits below it
    def bits(got, want):
        e = np.abs(got - want)
        return -math.log2(float(e.mean())), -math.log2(float(e.max()))

    fresh, fresh_worst = bits(dec(keys, enc, ct), x)
    assert fresh >= 40 and fresh_worst >= 37, f"fresh precision {fresh:.1f} bits (worst slot {fresh_worst:.1f})"
    acc, want = ct, x
    for _ in range(6):  # six sequential products by fresh values of magnitude about 1
        y = rng.uniform(0.9, 1.1, params.slots) * rng.choice([-1.0, 1.0], params.slots)
        cy = ckks.encrypt(keys.public, enc.encode(y, level=acc.level))
        acc, want = ev.mul_rescale(acc, cy), want * y
    assert acc.level == 0
    deep, deep_worst = bits(dec(keys, enc, acc), want)
    assert deep >= 30 and deep_worst >= 30, f"precision after 6 products {deep:.1f} bits (worst slot {deep_worst:.1f})"
