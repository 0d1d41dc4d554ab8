"""A peer's public key and ciphertexts are data an adversary chose: Paillier's h_s is derived from
n (a crafted h_s is ignored), OU keys are checked, ciphertexts with the wrong Jacobi symbol are
refused where they arrive, and malformed arrays and key files fail with named errors."""

import json
import os
import struct

import gmpy2
import numpy as np
import pytest

from shaper.arrays import object_array
from shaper.crypto import paillier, serialization, wire
from shaper.crypto.ahe import EncryptedArray
from shaper.crypto.ou import OUPublicKey
from shaper.crypto.paillier import PaillierPublicKey, derive_hs
from shaper.errors import InvalidCiphertextError, KeyValidationError, SerializationError

from .. import vectors as V


def _paillier_key_bytes(pk, hs):
    """A public key as its owner could write it, with an h_s of the owner's choice."""
    width = (pk.bits + 7) // 8
    body = (wire.int_field(pk.n, width) + wire.int_field(hs, 2 * width)
            + struct.pack("<IB", pk.exponent_bits, int(pk.djn)))
    return wire.header(wire.KIND_PUBLIC, wire.SCHEME_PAILLIER) + body


def _owner_reads_multiplier(pk, c, result, limit):
    """What a key owner holding c tries: is the re-randomised c^k one of ±c^k for a small k?"""
    n2 = pk.n_squared
    for k in range(limit):
        ck = gmpy2.powmod(c, k, n2)
        if result in (ck, n2 - ck):
            return k
    return None


def test_a_crafted_h_s_of_order_two_no_longer_exposes_the_peers_multiplier(paillier_keys):
    pk, sk = paillier_keys
    n2 = pk.n_squared
    crafted = _paillier_key_bytes(pk, n2 - 1)  # h_s = -1: h_s^r is ±1 for every r
    peer_view = serialization.key_from_bytes(crafted)
    assert peer_view.hs == derive_hs(pk.n) and peer_view.hs != n2 - 1
    assert peer_view == pk  # the same plaintext space: ciphertexts still combine
    # The peer multiplies the owner's ciphertext by its secret k and re-randomises, as in a
    # secure mat-vec or FNP; the owner knows c and tries to read k out of the randomness.
    c = sk.encrypt([5])._c.ravel().tolist()[0]
    k = 37
    result = peer_view.raw_rerandomize(peer_view.raw_mul_plain([c], [k]))[0]
    assert sk.decrypt(EncryptedArray(pk, object_array([result]))).tolist() == [5 * k]
    assert _owner_reads_multiplier(pk, c, result, 200) is None
    # with the crafted base the same computation would have handed k over
    leaky = gmpy2.powmod(c, k, n2) * gmpy2.powmod(n2 - 1, 12345, n2) % n2
    assert _owner_reads_multiplier(pk, c, leaky, 200) == k


def test_h_s_is_derived_from_n_alone_and_the_same_everywhere(paillier_keys):
    pk, sk = paillier_keys
    hs = derive_hs(pk.n)
    assert derive_hs(int(pk.n)) == hs
    assert gmpy2.powmod(hs, 2, pk.n_squared) != 1
    lam = (sk.p - 1) * (sk.q - 1)
    assert gmpy2.powmod(hs, lam, pk.n_squared) == 1  # an n-th residue: encryption stays correct
    fresh, fresh_sk = paillier.keygen(512)
    assert fresh.hs == derive_hs(fresh.n)
    assert fresh_sk.decrypt(fresh.encrypt([-3, 4])).tolist() == [-3, 4]
    # JSON (ours, with its hs ignored) and a key file written before the rule load with h_s derived
    doc = json.loads(serialization.key_to_json(pk))
    doc["hs"] = wire.b64(pk.n_squared - 1)
    assert serialization.key_from_json(json.dumps(doc)).hs == hs
    old_file = _paillier_key_bytes(pk, V.PAILLIER_HS)  # a random h_s, as keys were made before
    loaded = serialization.key_from_bytes(old_file)
    assert loaded.hs == hs
    # ciphertexts made under the old h_s still decrypt
    old_ct = pk.encrypt([11]).to_bytes()
    assert sk.decrypt(EncryptedArray.from_bytes(old_ct, loaded)).tolist() == [11]


@pytest.mark.parametrize("hs", ["minus_one", "zero", "n"])
def test_an_explicit_degenerate_h_s_is_refused(paillier_keys, hs):
    pk, _ = paillier_keys
    value = {"minus_one": pk.n_squared - 1, "zero": 0, "n": pk.n}[hs]
    with pytest.raises(KeyValidationError, match="h_s"):
        PaillierPublicKey(pk.n, value)


def _with_symbol_minus_one(pk, m):
    """A valid-looking Paillier ciphertext (a unit mod n^2) whose Jacobi symbol is -1."""
    n, n2 = pk.n, pk.n_squared
    y = next(gmpy2.mpz(y) for y in range(2, 1000) if gmpy2.jacobi(y, n) == -1)
    return (1 + m * n) * gmpy2.powmod(y, n, n2) % n2


def test_a_ciphertext_with_symbol_minus_one_is_refused_where_it_arrives(paillier_keys):
    pk, sk = paillier_keys
    c = _with_symbol_minus_one(pk, 9)
    # the channel it would open: the symbol of the re-randomised c^k is (-1)^k, for anyone to see
    for k in (4, 7):
        out = pk.raw_rerandomize(pk.raw_mul_plain([c], [k]))[0]
        assert gmpy2.jacobi(out % pk.n, pk.n) == (-1) ** k
    honest = pk.encrypt([1, 2, 3])
    assert all(gmpy2.jacobi(x % pk.n, pk.n) == 1 for x in honest._c.ravel().tolist())
    crafted = EncryptedArray(pk, object_array([honest._c[0], c])).to_bytes()
    with pytest.raises(InvalidCiphertextError, match="index 1 has Jacobi symbol -1"):
        EncryptedArray.from_bytes(crafted, pk)
    with pytest.raises(InvalidCiphertextError, match="Jacobi"):
        pk.validate_received([c])
    assert sk.decrypt(EncryptedArray.from_bytes(honest.to_bytes(), pk)).tolist() == [1, 2, 3]


def test_ou_ciphertexts_with_symbol_minus_one_are_refused(ou_keys):
    pk, _ = ou_keys
    n = pk.n
    y = next(gmpy2.mpz(y) for y in range(2, 1000) if gmpy2.jacobi(y, n) == -1)
    crafted = EncryptedArray(pk, object_array([y])).to_bytes()
    with pytest.raises(InvalidCiphertextError, match="Jacobi"):
        EncryptedArray.from_bytes(crafted, pk)


def test_crafted_ou_randomisers_are_refused(ou_keys):
    pk, _ = ou_keys
    n, p2, q = pk.n, V.OU_P * V.OU_P, V.OU_Q
    with pytest.raises(KeyValidationError, match="small order"):
        OUPublicKey(n, pk.G, n - 1, pk.prime_bits)  # H = -1: H^r is ±1
    # H of order 2293 (a prime factor of q - 1): 1 mod p^2, a 2293rd root of unity mod q
    root = next(r for g in range(2, 100) if (r := pow(g, (q - 1) // 2293, q)) != 1)
    small = (q * pow(q, -1, p2) + root * p2 * pow(p2, -1, q)) % n  # CRT: 1 mod p^2, root mod q
    assert small % p2 == 1 and small % q == root and pow(small, 2293, n) == 1
    with pytest.raises(KeyValidationError, match="small order"):
        OUPublicKey(n, pk.G, small, pk.prime_bits)
    minus = next(gmpy2.mpz(y) for y in range(2, 1000) if gmpy2.jacobi(y, n) == -1)
    with pytest.raises(KeyValidationError, match="Jacobi symbol -1"):
        OUPublicKey(n, pk.G, minus, pk.prime_bits)
    with pytest.raises(KeyValidationError, match="Jacobi symbol -1"):
        OUPublicKey(n, minus, pk.H, pk.prime_bits)


# -- malformed arrays and key files ----------------------------------------------------------------
def _array_bytes(pk, shape, values):
    head = wire.header(wire.KIND_ARRAY, pk.scheme_id) + pk.fingerprint
    head += struct.pack("<iB", 0, len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
    return head + wire.ciphertext_block(values, wire.ciphertext_width(pk))


@pytest.mark.parametrize("value", ["zero", "N", "n", "p"])
def test_from_bytes_refuses_values_that_are_not_ciphertexts(paillier_keys, value):
    pk, sk = paillier_keys
    c = {"zero": 0, "N": pk.n_squared, "n": pk.n, "p": sk.p}[value]
    if value == "N":  # N itself does not fit the fixed width of a ciphertext: write N - 1 + 1 by hand
        data = bytearray(_array_bytes(pk, (1,), [1]))
        width = wire.ciphertext_width(pk)
        raw = int(c).to_bytes(width + 1, "little")
        assert raw[-1] == 0
        data[-width:] = raw[:width]
        data = bytes(data)
    else:
        data = _array_bytes(pk, (1,), [c])
    with pytest.raises(InvalidCiphertextError):
        EncryptedArray.from_bytes(data, pk)


@pytest.mark.parametrize("shape", [(0, 2 ** 64 - 1), (2 ** 64 - 1, 0), (0, 2 ** 63), (1 << 49,), (1 << 30, 1 << 30, 0, 5)])
def test_impossible_shapes_are_serialization_errors(paillier_keys, shape):
    pk, _ = paillier_keys
    with pytest.raises(SerializationError, match="shape"):
        EncryptedArray.from_bytes(_array_bytes(pk, shape, []), pk)


def test_an_empty_array_still_round_trips(paillier_keys):
    pk, _ = paillier_keys
    back = EncryptedArray.from_bytes(_array_bytes(pk, (0, 3), []), pk)
    assert back.shape == (0, 3)


def test_load_key_names_a_file_that_is_not_a_key(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"\xff\xfe not utf-8 \x80")
    with pytest.raises(SerializationError, match="neither"):
        serialization.load_key(path)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o700])
def test_a_private_key_file_others_may_read_is_refused(tmp_path, paillier_keys, mode):
    pk, sk = paillier_keys
    for fmt in ("binary", "json"):
        path = serialization.save_key(sk, tmp_path / f"key.{fmt}", format=fmt)
        os.chmod(path, mode)
        if mode & 0o077:
            with pytest.raises(KeyValidationError, match="chmod 600"):
                serialization.load_key(path)
        else:
            assert serialization.load_key(path).public_key == pk
        os.chmod(path, 0o600)
        assert serialization.load_key(path).public_key == pk
    public = serialization.save_key(pk, tmp_path / "pub.bin")
    os.chmod(public, 0o644)
    assert serialization.load_key(public) == pk  # public keys are public


def test_a_ckks_secret_key_file_others_may_read_is_refused(tmp_path):
    from shaper.crypto import ckks

    params = ckks.Parameters.from_literal(64, [50, 40], 50, 40, insecure=True)
    secret = ckks.KeySet(params).secret
    path = ckks.save(secret, tmp_path / "ckks.sk")
    assert np.array_equal(ckks.load(path, params).coefficients, secret.coefficients)
    os.chmod(path, 0o644)
    with pytest.raises(KeyValidationError, match="chmod 600"):
        ckks.load(path, params)
