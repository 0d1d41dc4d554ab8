"""shaper's CKKS against Microsoft SEAL (through TenSEAL's ``sealapi`` bindings).

* The same bit sizes give SEAL's prime chain.
* SEAL's secret key, read from SEAL, is ternary under shaper's inverse NTT and shaper's NTT
  reproduces SEAL's data bit for bit: the two store polynomials in the same NTT order.
* With SEAL's secret key, shaper decrypts SEAL's ciphertexts and SEAL decrypts shaper's
  (SEAL places slot j at zeta^(3^j), shaper at zeta^(5^j): the tests map between the orders).
* The same inputs through multiply + relinearise + rescale, rotation and conjugation give the
  same decrypted results in both, within noise.
"""

from __future__ import annotations

import os
import struct
import tempfile

import numpy as np
import pytest

from shaper.crypto import ckks

try:
    import tenseal.sealapi as seal
    SKIP = None
except (ImportError, OSError) as exc:  # the wheel is missing or cannot load on this platform
    seal, SKIP = None, f"TenSEAL (SEAL) cannot be imported here: {type(exc).__name__}: {exc}"

pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")

N = 8192
BITS = [60, 40, 40, 60]
SCALE = 2.0 ** 40


def seal_context(n: int, bits: list[int]):
    parms = seal.EncryptionParameters(seal.SCHEME_TYPE.CKKS)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus(seal.CoeffModulus.Create(n, bits))
    ctx = seal.SEALContext(parms, True, seal.SEC_LEVEL_TYPE.TC128)
    assert ctx.parameters_set(), ctx.parameters_error_message()
    return parms, ctx


def words(obj, count: int) -> np.ndarray:
    return np.fromiter((obj[i] for i in range(count)), dtype=np.uint64, count=count)


def ciphertext_array(ct) -> np.ndarray:
    shape = (ct.size(), ct.coeff_modulus_size(), ct.poly_modulus_degree())
    return words(ct, int(np.prod(shape))).reshape(shape)


def seal_version(ctx) -> tuple[int, int]:
    pt = seal.Plaintext()
    seal.CKKSEncoder(ctx).encode(0.0, 1.0, pt)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pt")
        pt.save(path)
        with open(path, "rb") as fh:
            head = fh.read(16)
    return head[3], head[4]


def seal_ciphertext(ctx, data: np.ndarray, parms_id, scale: float):
    """A SEAL Ciphertext holding ``data`` (size, limbs, N) in NTT form: SEAL's uncompressed
    serialisation (16-byte header, then the body), loaded through a file."""
    major, minor = seal_version(ctx)

    def header(total: int) -> bytes:
        return struct.pack("<HBBBBHQ", 0xA15E, 16, major, minor, 0, 0, total)

    size, limbs, n = data.shape
    flat = np.ascontiguousarray(data, dtype="<u8").ravel()
    dyn = struct.pack("<Q", flat.size) + flat.tobytes()
    body = (struct.pack("<4Q", *parms_id) + b"\x01" + struct.pack("<QQQdQ", size, n, limbs, scale, 1)
            + header(16 + len(dyn)) + dyn)
    ct = seal.Ciphertext()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ct")
        with open(path, "wb") as fh:
            fh.write(header(16 + len(body)) + body)
        ct.load(ctx, path)
    return ct


def seal_order(n: int) -> tuple[np.ndarray, np.ndarray]:
    """For SEAL slot j: the shaper slot holding the same evaluation point and whether it is the
    conjugate point (SEAL: zeta^(3^j); shaper: zeta^(5^k))."""
    two_n, slots = 2 * n, n // 2
    where = {pow(5, k, two_n): k for k in range(slots)}
    index, conj = np.empty(slots, dtype=np.int64), np.zeros(slots, dtype=bool)
    for j in range(slots):
        e = pow(3, j, two_n)
        if e in where:
            index[j] = where[e]
        else:
            index[j], conj[j] = where[two_n - e], True
    return index, conj


def to_seal_order(ours: np.ndarray, n: int) -> np.ndarray:
    index, conj = seal_order(n)
    out = ours[index]
    return np.where(conj, np.conj(out), out)


@pytest.fixture(scope="module")
def world():
    parms, ctx = seal_context(N, BITS)
    moduli = [m.value() for m in parms.coeff_modulus()]
    params = ckks.Parameters.from_primes(N, moduli[:-1], moduli[-1], SCALE)
    kg = seal.KeyGenerator(ctx)
    sk = kg.secret_key()
    sk_ntt = words(sk.data(), len(moduli) * N).reshape(len(moduli), N)
    return parms, ctx, params, kg, sk, sk_ntt


def test_prime_chains_equal_seal():
    for n, bits in [(16384, [60] + [53] * 6 + [60]), (8192, [60, 40, 40, 60]), (4096, [36, 36, 37]),
                    (32768, [60] + [50] * 14 + [60])]:
        want = [m.value() for m in seal.CoeffModulus.Create(n, bits)]
        assert ckks.chain_primes(n, bits) == want, (n, bits)
    p = ckks.Parameters.from_literal(16384, [60] + [53] * 6, 60, 53)
    want = [m.value() for m in seal.CoeffModulus.Create(16384, [60] + [53] * 6 + [60])]
    assert list(p.primes) == want


def test_secret_key_ntt_layout_is_seal_layout(world):
    _, _, params, _, _, sk_ntt = world
    ctx = params.context
    rows = list(range(len(params.primes)))
    coeffs = sk_ntt.copy()
    ctx.intt(coeffs, rows)
    centred = [np.where(coeffs[r] > params.primes[r] // 2, coeffs[r].astype(np.int64) - np.int64(params.primes[r]),
                        coeffs[r].astype(np.int64)) for r in rows]
    assert set(np.unique(centred[0]).tolist()) == {-1, 0, 1}
    for r in rows:
        assert np.array_equal(centred[r], centred[0])
    ours = ckks.SecretKey.from_coefficients(params, centred[0])
    assert np.array_equal(ours.ntt, sk_ntt)  # bit for bit


def test_cross_decryption_and_same_results(world):
    rng = np.random.default_rng(3)
    _, ctx, params, kg, sk, sk_ntt = world
    rows = list(range(len(params.primes)))
    coeffs = sk_ntt.copy()
    params.context.intt(coeffs, rows)
    s = np.where(coeffs[0] > params.primes[0] // 2, coeffs[0].astype(np.int64) - np.int64(params.primes[0]),
                 coeffs[0].astype(np.int64))
    keys = ckks.KeySet(params, rotations=[1], conjugation=True, secret=ckks.SecretKey.from_coefficients(params, s))
    enc, ev = ckks.Encoder(params), ckks.Evaluator(params, keys.relin, keys.galois)

    # SEAL side: its own public, relinearisation and Galois keys under the same secret
    pk, rlk, gk = seal.PublicKey(), seal.RelinKeys(), seal.GaloisKeys()
    kg.create_public_key(pk)
    kg.create_relin_keys(rlk)
    kg.create_galois_keys([3, 2 * N - 1], gk)  # rotate by one (generator 3), conjugate
    sencoder, sev = seal.CKKSEncoder(ctx), seal.Evaluator(ctx)
    encryptor, decryptor = seal.Encryptor(ctx, pk), seal.Decryptor(ctx, sk)
    slots = params.slots
    x, y = rng.uniform(-1, 1, slots), rng.uniform(-1, 1, slots)

    def seal_encrypt(v):
        pt, ct = seal.Plaintext(), seal.Ciphertext()
        sencoder.encode(v.tolist(), SCALE, pt)
        encryptor.encrypt(pt, ct)
        return ct

    def seal_decrypt(ct):
        pt = seal.Plaintext()
        decryptor.decrypt(ct, pt)
        return np.array(sencoder.decode_double(pt))

    # 1. shaper decrypts a SEAL ciphertext (SEAL order -> shaper order)
    sx = seal_encrypt(x)
    mine = ckks.Ciphertext(params, ciphertext_array(sx), sx.scale)
    got = to_seal_order(enc.decode(ckks.decrypt(keys.secret, mine), complex=True), N)
    assert np.max(np.abs(got - x)) < 2 ** -25

    # 2. SEAL decrypts a shaper ciphertext
    ours = ckks.encrypt(keys.public, enc.encode(x))
    back = seal_decrypt(seal_ciphertext(ctx, ours.data, sx.parms_id(), ours.scale))
    assert np.max(np.abs(back - to_seal_order(x, N).real)) < 2 ** -25

    # 3. the same computation in both: (x * y) rotated left by one, and a conjugate
    sy = seal_encrypt(y)
    prod = seal.Ciphertext()
    sev.multiply(sx, sy, prod)
    sev.relinearize_inplace(prod, rlk)
    sev.rescale_to_next_inplace(prod)
    rot = seal.Ciphertext()
    sev.rotate_vector(prod, 1, gk, rot)
    seal_result = seal_decrypt(rot)
    cx, cy = ckks.encrypt(keys.public, enc.encode(x)), ckks.encrypt(keys.public, enc.encode(y))
    our_result = enc.decode(ckks.decrypt(keys.secret, ev.rotate(ev.mul_rescale(cx, cy), 1)))
    # a key switch adds up to ~2^20 absolute noise (p / q_0 = 1 here): 2^-20 at scale 2^40
    want = np.roll(x * y, -1)
    assert np.max(np.abs(seal_result - want)) < 2 ** -16
    assert np.max(np.abs(our_result - want)) < 2 ** -16
    assert np.max(np.abs(our_result - seal_result)) < 2 ** -15
    assert abs(rot.scale - ev.mul_rescale(cx, cy).scale) < 1e-6 * rot.scale  # same prime dropped, same scale

    # 4. a rescaled SEAL product decrypts under shaper too (level below the top)
    mine = ckks.Ciphertext(params, ciphertext_array(prod), prod.scale)
    got = to_seal_order(enc.decode(ckks.decrypt(keys.secret, mine), complex=True), N).real
    assert np.max(np.abs(got - x * y)) < 2 ** -20

    # 5. conjugation agrees on complex inputs
    z = x + 1j * y
    pt, sz = seal.Plaintext(), seal.Ciphertext()
    sencoder.encode(z.tolist(), SCALE, pt)
    encryptor.encrypt(pt, sz)
    conj = seal.Ciphertext()
    sev.complex_conjugate(sz, gk, conj)
    dec = seal.Plaintext()
    decryptor.decrypt(conj, dec)
    seal_conj = np.array(sencoder.decode_complex(dec))
    our_conj = enc.decode(ckks.decrypt(keys.secret, ev.conjugate(ckks.encrypt(keys.public, enc.encode(z)))),
                          complex=True)
    assert np.max(np.abs(seal_conj - np.conj(z))) < 2 ** -16
    assert np.max(np.abs(our_conj - np.conj(z))) < 2 ** -16
    assert np.max(np.abs(our_conj - seal_conj)) < 2 ** -15
