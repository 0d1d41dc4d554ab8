"""BGV serialisation (shaper.crypto.bgv.serial): round trips of every object (bytes equal after a
second round trip, loaded keys and ciphertexts work), every malformed input refused by name,
insecure parameter sets only on request, 0600 secret-key files and atomic saves."""

from __future__ import annotations

import math
import os
import stat
import struct

import numpy as np
import pytest

from shaper.crypto import wire
from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.bgv import serial as Z
from shaper.crypto.bgv.algebra import algebra
from shaper.crypto.bgv.slots import SlotEvaluator, rotate
from shaper.crypto.prg import Prg
from shaper.errors import KeyValidationError, SerializationError

HEAD = 8                       # "SHPR" | u16 version | u8 kind | u8 scheme
FP = HEAD + 16                 # then the parameter fingerprint
PARAMS_NAME = HEAD + 24        # u32 m, u16 L+1, u16 k, u16 digits, i32 weight, f64 sigma, u8 insecure, u8 name len


@pytest.fixture(scope="module")
def params():
    return P.named("test-257")


@pytest.fixture(scope="module")
def rot_units():
    return [u for u, _ in algebra(257).rotation(0, 1)]  # one rotation along the (bad) dimension: two keys


@pytest.fixture(scope="module")
def keys(params, rot_units):
    return S.keygen(params, [2, 4, *rot_units], prg=Prg(b"\x01" * 32))


@pytest.fixture(scope="module")
def ev(params, keys):
    return S.Evaluator(params, keys.relin, keys.galois)


@pytest.fixture(scope="module")
def slots(ev):
    return np.random.default_rng(3).integers(0, 2 ** ev.algebra.d, ev.algebra.nslots, dtype=np.uint64)


@pytest.fixture(scope="module")
def ct(keys, ev, slots):
    return S.encrypt(keys.public, ev.encode(slots), prg=Prg(b"\x02" * 32))


def _again(data: bytes, params=None, **kw) -> bytes:
    return Z.to_bytes(Z.from_bytes(data, params, **kw))


def _patch(data: bytes, at: int, new: bytes) -> bytes:
    raw = bytearray(data)
    raw[at:at + len(new)] = new
    return bytes(raw)


def _secure_small() -> P.Parameters:
    # φ = 1030, log2 QP ≈ 25: rated by the HE Standard's table (148 bits)
    return P.Parameters.from_primes(1031, [2063], [12373], name="small-secure")


# -- round trips ------------------------------------------------------------------------------------

def test_parameters_round_trip_with_name_and_flags(params):
    data = Z.to_bytes(params)
    back = Z.from_bytes(data, insecure=True)
    assert back == params and back.name == "test-257" and back.insecure and back.digits == params.digits
    assert back.fingerprint() == params.fingerprint() and _again(data, insecure=True) == data
    secure = _secure_small()
    assert secure.security >= 128 and not secure.insecure
    back = Z.from_bytes(Z.to_bytes(secure))  # a rated set needs no flag
    assert back == secure and not back.insecure and _again(Z.to_bytes(secure)) == Z.to_bytes(secure)
    sparse = P.Parameters.from_primes(257, params.primes, params.special, digits=2, hamming_weight=64,
                                      sigma=4.0, name="sparse", insecure=True)
    back = Z.from_bytes(Z.to_bytes(sparse), insecure=True)
    assert back == sparse and back.hamming_weight == 64 and back.sigma == 4.0 and back.digits == 2


def test_secret_key_round_trip_and_0600_file(params, keys, ct, slots, tmp_path):
    data = Z.to_bytes(keys.secret)
    assert len(data) == FP + params.phi  # one byte per coefficient
    back = Z.from_bytes(data, params)
    assert np.array_equal(back.coeffs, keys.secret.coeffs) and back.coeffs.dtype == np.int8
    assert _again(data, params) == data
    assert np.array_equal(S.decrypt(back, ct), slots)
    path = Z.save(keys.secret, tmp_path / "bgv.sk")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert np.array_equal(Z.load(path, params).coeffs, keys.secret.coeffs)
    # an existing wider file is replaced by a 0600 one; a secret file others may read is refused
    target = tmp_path / "existing.sk"
    target.write_bytes(b"x")
    os.chmod(target, 0o644)
    Z.save(keys.secret, target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    os.chmod(target, 0o640)
    with pytest.raises(KeyValidationError, match="mode 0640"):
        Z.load(target, params)


def test_public_objects_are_written_without_0600(params, keys, tmp_path):
    path = Z.save(keys.public, tmp_path / "bgv.pk")
    assert Z.load(path, params).b.shape == keys.public.b.shape
    path = Z.save(params, tmp_path / "bgv.params")
    assert Z.load(path, insecure=True) == params


def test_public_key_round_trip_encrypts(params, keys, ev, slots):
    data = Z.to_bytes(keys.public)
    assert len(data) == FP + 2 * 8 * (params.max_level + 1) * params.phi
    back = Z.from_bytes(data, params)
    assert np.array_equal(back.b, keys.public.b) and np.array_equal(back.a, keys.public.a)
    assert _again(data, params) == data
    assert np.array_equal(S.decrypt(keys.secret, S.encrypt(back, ev.encode(slots))), slots)


def test_ciphertext_round_trip_decrypts_at_every_shape(params, keys, ev, ct, slots):
    data = Z.to_bytes(ct)
    back = Z.from_bytes(data, params)
    assert back.level == ct.level == params.max_level and back.noise == ct.noise
    assert np.array_equal(back.parts, ct.parts) and _again(data, params) == data
    assert np.array_equal(S.decrypt(keys.secret, back), slots)
    low = S.switch_to(ev.mul(back, back), 5)  # a product, switched down
    assert low.level == 5
    back_low = Z.from_bytes(Z.to_bytes(low), params)
    assert back_low.level == low.level and back_low.noise == low.noise
    assert np.array_equal(S.decrypt(keys.secret, back_low), S.decrypt(keys.secret, low))
    three = S.Ciphertext(np.concatenate([ct.parts, ct.parts[1:]]), ct.level, ct.noise, params)
    data3 = Z.to_bytes(three)
    assert Z.from_bytes(data3, params).parts.shape == (3, params.max_level + 1, params.phi)
    assert _again(data3, params) == data3


def test_switching_keys_round_trip_with_their_exponent(params, keys, ev, ct, slots):
    relin = Z.to_bytes(Z.SwitchingKeyFor(0, keys.relin))
    assert len(relin) == FP + 4 + 2 * 8 * params.digits * len(params.basis) * params.phi
    back = Z.from_bytes(relin, params)
    assert isinstance(back, Z.SwitchingKeyFor) and back.exponent == 0 and _again(relin, params) == relin
    frob = Z.from_bytes(Z.to_bytes(Z.SwitchingKeyFor(2, keys.galois[2])), params)
    assert frob.exponent == 2 and np.array_equal(frob.key.b, keys.galois[2].b)
    loaded = S.Evaluator(params, back.key, {2: frob.key})
    sim = SlotEvaluator(ev.algebra)
    assert np.array_equal(S.decrypt(keys.secret, loaded.mul(ct, ct)), sim.mul(slots, slots))
    assert np.array_equal(S.decrypt(keys.secret, loaded.frobenius(ct, 1)), sim.frobenius(slots, 1))


def test_key_bundle_round_trip_multiplies_and_rotates(params, keys, ev, ct, slots, rot_units, tmp_path):
    bundle = Z.KeyBundle.from_keyset(keys)
    data = Z.to_bytes(bundle)
    back = Z.from_bytes(data, params)
    assert isinstance(back, Z.KeyBundle) and sorted(back.galois) == sorted(keys.galois) == sorted([2, 4, *rot_units])
    assert _again(data, params) == data
    path = Z.save(bundle, tmp_path / "bgv.keys")
    assert Z.to_bytes(Z.load(path, params)) == data
    loaded = back.evaluator()
    sim = SlotEvaluator(ev.algebra)
    y = np.random.default_rng(9).integers(0, 2 ** ev.algebra.d, ev.algebra.nslots, dtype=np.uint64)
    cy = S.encrypt(back.public, loaded.encode(y))
    checks = {
        "mul": (loaded.mul(ct, cy), sim.mul(slots, y)),
        "rotate 1": (rotate(loaded, ct, 0, 1), rotate(sim, slots, 0, 1)),
        "frobenius 2": (loaded.frobenius(ct, 2), sim.frobenius(slots, 2)),
    }
    for name, (got, want) in checks.items():
        assert np.array_equal(S.decrypt(keys.secret, got), want), name
    joined = back.with_secret(Z.from_bytes(Z.to_bytes(keys.secret), params))
    assert isinstance(joined, S.KeySet) and np.array_equal(S.decrypt(joined.secret, cy), y)


def test_a_keyset_or_bare_switching_key_is_not_serialised_whole(keys):
    with pytest.raises(TypeError, match="holds the secret key"):
        Z.to_bytes(keys)
    with pytest.raises(TypeError, match="SwitchingKeyFor"):
        Z.to_bytes(keys.relin)
    with pytest.raises(TypeError, match="cannot serialise"):
        Z.to_bytes(object())


# -- parameters: security -------------------------------------------------------------------------

def test_insecure_parameters_are_refused_without_insecure_true(params, tmp_path):
    data = Z.to_bytes(params)
    with pytest.raises(SerializationError, match="marked insecure"):
        Z.from_bytes(data)
    path = Z.save(params, tmp_path / "p.bin")
    with pytest.raises(SerializationError, match="marked insecure"):
        Z.load(path)
    # the flag cleared: the set is still re-rated on load (0 bits) and refused
    cleared = _patch(data, PARAMS_NAME - 2, b"\x00")
    with pytest.raises(SerializationError, match="rated 0 bits"):
        Z.from_bytes(cleared)
    assert Z.from_bytes(cleared, insecure=True) == params
    # a narrower error than the rating assumes
    weak = P.Parameters.from_primes(1031, [2063], [12373], sigma=1.0, name="weak-sigma")
    with pytest.raises(SerializationError, match="sigma 1.0 is below 3.2"):
        Z.from_bytes(Z.to_bytes(weak))
    assert Z.from_bytes(Z.to_bytes(weak), insecure=True).sigma == 1.0


@pytest.mark.parametrize("case, at, new, match", [
    ("even m", HEAD, struct.pack("<I", 256), "not an odd number"),
    ("huge chain count", HEAD + 4, struct.pack("<H", 65535), "chain primes"),
    ("no special primes", HEAD + 6, struct.pack("<H", 0), "special primes"),
    ("digits 0", HEAD + 8, struct.pack("<H", 0), "digits must be"),
    ("weight -2", HEAD + 10, struct.pack("<i", -2), "Hamming weight"),
    ("NaN sigma", HEAD + 14, struct.pack("<d", math.nan), "sigma"),
    ("inf sigma", HEAD + 14, struct.pack("<d", math.inf), "sigma"),
    ("flag 2", HEAD + 22, b"\x02", "insecure flag"),
    ("long name", HEAD + 23, b"\xff", "name of 255 bytes"),
    ("control character in the name", PARAMS_NAME, b"\x07", "not printable"),
    ("composite prime", PARAMS_NAME + 8, struct.pack("<Q", 257 * 4 + 1), "is not a prime"),
])
def test_malformed_parameters_are_refused_by_name(params, case, at, new, match):
    with pytest.raises(SerializationError, match=match):
        Z.from_bytes(_patch(Z.to_bytes(params), at, new), insecure=True)


# -- framing ----------------------------------------------------------------------------------------

def test_truncated_and_padded_input_is_refused(params, keys, ct):
    for obj in (params, keys.secret, keys.public, Z.SwitchingKeyFor(0, keys.relin), ct):
        data = Z.to_bytes(obj)
        with pytest.raises(SerializationError, match="truncated"):
            Z.from_bytes(data[:-1], params, insecure=True)
        with pytest.raises(SerializationError, match="trailing"):
            Z.from_bytes(data + b"\x00", params, insecure=True)
    with pytest.raises(SerializationError, match="truncated"):
        Z.from_bytes(Z.to_bytes(ct)[:FP - 3], params)
    with pytest.raises(SerializationError, match="expected bytes"):
        Z.from_bytes("text", params)


def test_wrong_magic_version_kind_and_scheme_are_refused(params, ct):
    data = Z.to_bytes(ct)
    with pytest.raises(SerializationError, match="not shaper data"):
        Z.from_bytes(b"JUNK" + data[4:], params)
    with pytest.raises(SerializationError, match="format version 2"):
        Z.from_bytes(_patch(data, 4, struct.pack("<H", 2)), params)
    with pytest.raises(SerializationError, match="unknown BGV object kind 3"):
        Z.from_bytes(_patch(data, 6, bytes([wire.KIND_ARRAY])), params)
    with pytest.raises(SerializationError, match="not BGV data"):
        Z.from_bytes(_patch(data, 7, bytes([wire.SCHEME_CKKS])), params)
    with pytest.raises(SerializationError, match="unknown scheme id 99"):
        Z.from_bytes(_patch(data, 7, b"\x63"), params)
    # a kind that is valid but not what the body holds: its length check fails
    with pytest.raises(SerializationError):
        Z.from_bytes(_patch(data, 6, bytes([wire.KIND_PUBLIC])), params)


def test_wrong_fingerprint_and_missing_parameters_are_refused(params, keys, ct):
    other = P.Parameters.from_primes(257, params.primes, params.special, digits=2, name="other", insecure=True)
    for obj in (keys.secret, keys.public, Z.SwitchingKeyFor(0, keys.relin), Z.KeyBundle.from_keyset(keys), ct):
        data = Z.to_bytes(obj)
        with pytest.raises(SerializationError, match="different BGV parameter set.*'other'"):
            Z.from_bytes(data, other)
        with pytest.raises(SerializationError, match="needs its BGV Parameters"):
            Z.from_bytes(data)
    with pytest.raises(SerializationError, match="fingerprint mismatch"):
        Z.from_bytes(_patch(Z.to_bytes(ct), HEAD, b"\x00"), params)


# -- bodies -----------------------------------------------------------------------------------------

def test_a_residue_not_below_its_prime_is_refused_naming_the_row(params, keys, ct):
    phi = params.phi
    data = Z.to_bytes(keys.public)  # b: row r, coefficient j at FP + 8 (r φ + j)
    bad = _patch(data, FP + 8 * (3 * phi + 5), struct.pack("<Q", params.primes[3]))
    with pytest.raises(SerializationError, match=rf"public key b: row 3 \(prime q_3 = {params.primes[3]}\).*"
                                                 r"coefficient 5, not below its prime"):
        Z.from_bytes(bad, params)
    bad = _patch(data, len(data) - 8, struct.pack("<Q", 2 ** 64 - 1))
    with pytest.raises(SerializationError, match=rf"public key a: row {params.max_level} .*not below its prime"):
        Z.from_bytes(bad, params)
    # a switching key's special-prime row (digit 1, row L + 1 = p_0)
    rows = len(params.basis)
    key = Z.to_bytes(Z.SwitchingKeyFor(0, keys.relin))
    at = FP + 4 + 8 * ((1 * rows + params.max_level + 1) * phi)
    bad = _patch(key, at, struct.pack("<Q", params.special[0]))
    with pytest.raises(SerializationError, match=rf"switching key b\[1\]: row {params.max_level + 1} \(prime p_0"):
        Z.from_bytes(bad, params)
    cdata = Z.to_bytes(ct)
    bad = _patch(cdata, len(cdata) - 8, struct.pack("<Q", params.primes[-1] + 1))
    with pytest.raises(SerializationError, match=rf"ciphertext parts\[1\]: row {params.max_level}"):
        Z.from_bytes(bad, params)


@pytest.mark.parametrize("value", [2, -2, 127, -128])
def test_a_secret_coefficient_outside_minus_one_to_one_is_refused(params, keys, value):
    data = Z.to_bytes(keys.secret)
    with pytest.raises(SerializationError, match=rf"secret key coefficient 7 is {value}, not in"):
        Z.from_bytes(_patch(data, FP + 7, struct.pack("<b", value)), params)


def test_a_sparse_secret_of_the_wrong_weight_is_refused(params):
    sparse = P.Parameters.from_primes(257, params.primes, params.special, digits=3, hamming_weight=64,
                                      name="sparse", insecure=True)
    coeffs = S.sample_secret(sparse, Prg(b"\x03" * 32))
    sk = S.SecretKey(sparse, coeffs)
    data = Z.to_bytes(sk)
    assert np.array_equal(Z.from_bytes(data, sparse).coeffs, coeffs)
    zero = int(np.flatnonzero(coeffs == 0)[0])
    with pytest.raises(SerializationError, match="65 nonzero coefficients; the parameters fix exactly 64"):
        Z.from_bytes(_patch(data, FP + zero, b"\x01"), sparse)


@pytest.mark.parametrize("above", [1, 2, 65535 - 24])
def test_a_ciphertext_level_out_of_range_is_refused(params, ct, above):
    level = params.max_level + above
    with pytest.raises(SerializationError, match=rf"level {level} is outside 0..{params.max_level}"):
        Z.from_bytes(_patch(Z.to_bytes(ct), FP + 1, struct.pack("<H", level)), params)


@pytest.mark.parametrize("noise", [math.nan, math.inf, -math.inf, -1.0, -5e-324, 1e300, 2.0 ** 1000])
def test_an_absurd_noise_estimate_is_refused(params, ct, noise):
    with pytest.raises(SerializationError, match="noise estimate"):
        Z.from_bytes(_patch(Z.to_bytes(ct), FP + 3, struct.pack("<d", noise)), params)


def test_a_noise_estimate_is_checked_against_the_ciphertexts_level(params, ev, ct):
    low = S.switch_to(ct, 0)
    data = Z.to_bytes(low)
    assert Z.from_bytes(_patch(data, FP + 3, struct.pack("<d", 0.0)), params).noise == 0.0
    with pytest.raises(SerializationError, match="Q_0"):
        Z.from_bytes(_patch(data, FP + 3, struct.pack("<d", float(params.primes[0]))), params)


@pytest.mark.parametrize("parts", [0, 1, 4, 255])
def test_a_ciphertext_of_other_than_two_or_three_parts_is_refused(params, ct, parts):
    data = Z.to_bytes(ct)
    with pytest.raises(SerializationError, match=f"a ciphertext of {parts} parts"):
        Z.from_bytes(_patch(data, FP, bytes([parts])), params)
    # even with the bytes of a fourth part present
    if parts == 4:
        extra = data + data[FP + 11:FP + 11 + 8 * (params.max_level + 1) * params.phi] * 2
        with pytest.raises(SerializationError, match="a ciphertext of 4 parts"):
            Z.from_bytes(_patch(extra, FP, b"\x04"), params)


def test_a_huge_declared_count_with_few_bytes_is_refused_before_allocating(params, keys):
    data = Z.to_bytes(Z.KeyBundle.from_keyset(keys))
    at = FP + 2 * 8 * (params.max_level + 1) * params.phi  # the bundle's u16 switching-key count
    assert struct.unpack("<H", data[at:at + 2])[0] == 1 + len(keys.galois)
    with pytest.raises(SerializationError, match=r"declares 65535 switching keys .*1\.\.256 allowed"):
        Z.from_bytes(_patch(data, at, struct.pack("<H", 65535)), params)
    with pytest.raises(SerializationError, match="declares 200 switching keys"):
        Z.from_bytes(_patch(data, at, struct.pack("<H", 200))[:at + 100], params)
    with pytest.raises(SerializationError, match="declares 0 switching keys"):
        Z.from_bytes(_patch(data, at, struct.pack("<H", 0)), params)
    # parameters declaring many primes with a few bytes: refused, never read
    pdata = Z.to_bytes(params)
    with pytest.raises(SerializationError, match="chain primes"):
        Z.from_bytes(_patch(pdata, HEAD + 4, struct.pack("<H", 1000)), insecure=True)


def test_switching_key_exponents_are_checked(params, keys):
    data = Z.to_bytes(Z.SwitchingKeyFor(2, keys.galois[2]))
    for u in (1, 257, 300, 2 ** 32 - 1):
        with pytest.raises(SerializationError, match=f"exponent {u} is neither 0"):
            Z.from_bytes(_patch(data, FP, struct.pack("<I", u)), params)
    with pytest.raises(SerializationError, match="exponent 1 is neither 0"):
        Z.to_bytes(Z.SwitchingKeyFor(1, keys.relin))
    # in a bundle: relinearisation first, then strictly increasing exponents
    bundle = Z.to_bytes(Z.KeyBundle.from_keyset(keys))
    first = FP + 2 * 8 * (params.max_level + 1) * params.phi + 2
    with pytest.raises(SerializationError, match="key 0 has exponent 2: the first must be 0"):
        Z.from_bytes(_patch(bundle, first, struct.pack("<I", 2)), params)
    key_bytes = 4 + 2 * 8 * params.digits * len(params.basis) * params.phi
    smallest = min(keys.galois)
    with pytest.raises(SerializationError, match="strictly increase"):
        Z.from_bytes(_patch(bundle, first + 2 * key_bytes, struct.pack("<I", smallest)), params)


# -- atomic saves -----------------------------------------------------------------------------------

def test_a_failed_save_leaves_the_previous_file_and_no_temporary(params, keys, monkeypatch, tmp_path):
    path = Z.save(keys.secret, tmp_path / "bgv.sk")
    before = path.read_bytes()

    def disk_full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    other = S.keygen(params, prg=Prg(b"\x04" * 32))
    with pytest.raises(OSError, match="No space left"):
        Z.save(other.secret, path)
    with pytest.raises(OSError, match="No space left"):
        Z.save(Z.KeyBundle.from_keyset(other), tmp_path / "bgv.keys")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bgv.sk"]  # no partial file, no temporary
    assert path.read_bytes() == before and stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_an_unserialisable_object_creates_no_file(keys, tmp_path):
    with pytest.raises(TypeError):
        Z.save(keys, tmp_path / "keys.bin")
    bad = S.Ciphertext(np.zeros((4, 1, 256), dtype=np.uint64), 0, 1.0, keys.public.params)
    with pytest.raises(SerializationError, match="4 parts"):
        Z.save(bad, tmp_path / "ct.bin")
    assert list(tmp_path.iterdir()) == []
