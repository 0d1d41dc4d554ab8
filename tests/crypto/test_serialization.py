"""Binary and JSON formats: round trips, 0600 private keys, and every rejection path."""

import json
import os
import stat
import struct

import numpy as np
import pytest

from shaper.crypto import pack, serialization
from shaper.crypto.ahe import EncryptedArray
from shaper.crypto.packing import PackedArray
from shaper.errors import InvalidCiphertextError, KeyMismatchError, KeyValidationError, SerializationError


def test_key_roundtrips_binary_and_json(scheme_keys):
    pk, sk = scheme_keys
    for to, frm in ((serialization.key_to_bytes, serialization.key_from_bytes),
                    (serialization.key_to_json, serialization.key_from_json)):
        pk2 = frm(to(pk))
        sk2 = frm(to(sk))
        assert pk2 == pk and type(pk2) is type(pk)
        assert pk2.exponent_bits == pk.exponent_bits
        assert sk2.decrypt(pk2.encrypt([1, -2, 3])).tolist() == [1, -2, 3]
        assert sk.decrypt(sk2.public_key.encrypt([7])).tolist() == [7]


def test_binary_key_width_is_fixed_by_key_size(paillier_keys):
    pk, _ = paillier_keys
    data = serialization.key_to_bytes(pk)
    width = (pk.bits + 7) // 8
    assert len(data) == 8 + (4 + width) + (4 + 2 * width) + 5


def test_private_key_file_is_0600_and_loads(tmp_path, scheme_keys):
    pk, sk = scheme_keys
    for fmt in ("binary", "json"):
        path = serialization.save_key(sk, tmp_path / f"key.{fmt}", format=fmt)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert serialization.load_key(path).public_key == pk
    pub = serialization.save_key(pk, tmp_path / "pub.bin")
    assert serialization.load_key(pub) == pk
    # An existing, wider file is narrowed before the secret is written.
    target = tmp_path / "existing"
    target.write_text("x")
    os.chmod(target, 0o644)
    serialization.save_key(sk, target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600


def test_encrypted_array_roundtrip(scheme_keys):
    pk, sk = scheme_keys
    enc = pk.encrypt(np.array([[1.5, -2.0], [0.25, 8.0]]), frac_bits=6)
    data = enc.to_bytes()
    back = EncryptedArray.from_bytes(data, pk)
    assert back.shape == (2, 2) and back.frac_bits == 6
    np.testing.assert_array_equal(sk.decrypt(back), sk.decrypt(enc))
    scalar = EncryptedArray.from_bytes(enc[0, 1].to_bytes(), pk)
    assert scalar.shape == () and float(sk.decrypt(scalar)) == -2.0


def test_packed_array_roundtrip(scheme_keys):
    pk, sk = scheme_keys
    packed = pack(pk.encrypt([5, -6, 7, 8]), 10)
    back = PackedArray.from_bytes(packed.to_bytes(), pk)
    assert sk.decrypt(back).tolist() == [5, -6, 7, 8]


def test_rejects_wrong_key_and_scheme(paillier_keys, fresh_paillier_keys, ou_keys):
    pk, _ = paillier_keys
    data = pk.encrypt([1]).to_bytes()
    with pytest.raises(KeyMismatchError, match="serialised under key"):
        EncryptedArray.from_bytes(data, fresh_paillier_keys[0])
    with pytest.raises(KeyMismatchError, match="scheme"):
        EncryptedArray.from_bytes(data, ou_keys[0])
    with pytest.raises(SerializationError, match="expected a packed array"):
        PackedArray.from_bytes(data, pk)


def test_rejects_malformed_bytes(paillier_keys):
    pk, _ = paillier_keys
    good = pk.encrypt([1, 2]).to_bytes()
    with pytest.raises(SerializationError, match="not shaper data"):
        EncryptedArray.from_bytes(b"JUNK" + good[4:], pk)
    with pytest.raises(SerializationError, match="version"):
        EncryptedArray.from_bytes(good[:4] + struct.pack("<H", 99) + good[6:], pk)
    with pytest.raises(SerializationError, match="truncated"):
        EncryptedArray.from_bytes(good[:-1], pk)
    with pytest.raises(SerializationError, match="trailing"):
        EncryptedArray.from_bytes(good + b"\x00", pk)
    with pytest.raises(SerializationError, match="expected bytes"):
        EncryptedArray.from_bytes("text", pk)
    with pytest.raises(SerializationError, match="expected a key"):
        serialization.key_from_bytes(good)


def test_rejects_out_of_range_ciphertext_in_bytes(paillier_keys):
    pk, sk = paillier_keys
    good = bytearray(pk.encrypt([1, 2]).to_bytes())
    width = (pk.ciphertext_modulus.bit_length() + 7) // 8
    good[-width:] = b"\x00" * width  # second ciphertext := 0
    with pytest.raises(InvalidCiphertextError, match="index 1"):
        EncryptedArray.from_bytes(bytes(good), pk)
    good[-width:] = int(sk.p).to_bytes(width, "little")
    with pytest.raises(InvalidCiphertextError, match="shares a factor"):
        EncryptedArray.from_bytes(bytes(good), pk)


def test_rejects_inconsistent_keys(paillier_keys):
    pk, sk = paillier_keys
    doc = json.loads(serialization.key_to_json(sk))
    doc["q"] = doc["p"]
    with pytest.raises(KeyValidationError):
        serialization.key_from_json(json.dumps(doc))
    with pytest.raises(SerializationError, match="base64url"):
        serialization.key_from_json(json.dumps({"kty": "DAJ", "n": 5}))
    with pytest.raises(SerializationError, match="unknown key type"):
        serialization.key_from_json('{"kty": "RSA"}')
    with pytest.raises(SerializationError, match="does not parse"):
        serialization.key_from_json("{")


def test_reads_a_plain_python_paillier_jwk(paillier_keys):
    pk, sk = paillier_keys
    import base64

    b64 = lambda v: base64.urlsafe_b64encode(int(v).to_bytes((int(v).bit_length() + 7) // 8, "big")).rstrip(b"=").decode()  # noqa: E731
    pub_doc = {"kty": "DAJ", "alg": "PAI-GN1", "key_ops": ["encrypt"], "n": b64(pk.n), "kid": "from pheutil"}
    priv_doc = {"kty": "DAJ", "key_ops": ["decrypt"], "p": b64(sk.p), "q": b64(sk.q), "pub": pub_doc, "kid": "x"}
    pk2 = serialization.key_from_json(json.dumps(pub_doc))
    sk2 = serialization.key_from_json(json.dumps(priv_doc))
    assert pk2 == pk and sk2.decrypt(pk2.encrypt([99])).tolist() == [99]
