"""Paillier (DJN) specifics: key structure, known answers, the two encryption paths, CRT."""

import gmpy2
import numpy as np
import pytest

from shaper.crypto import paillier
from shaper.crypto.paillier import PaillierPrivateKey, PaillierPublicKey, is_djn_form
from shaper.errors import KeyValidationError
from shaper.kernels import int_to_exponent_bytes

from .. import vectors as V


def test_kat_formula_is_independent():
    n = V.PAILLIER_P * V.PAILLIER_Q
    for m, r, c in V.PAILLIER_KAT:
        assert (1 + (m % n) * n) * pow(V.PAILLIER_HS, r, n * n) % (n * n) == c


@pytest.mark.parametrize("owner", [False, True], ids=["public", "key-owner-crt"])
def test_known_answer_vectors(paillier_keys, owner):
    pk, sk = paillier_keys
    messages = [m for m, _, _ in V.PAILLIER_KAT]
    exps = int_to_exponent_bytes([r for _, r, _ in V.PAILLIER_KAT], width=pk.exponent_bits // 8)
    encryptor = sk if owner else pk
    got = encryptor.raw_encrypt(messages, exps)
    assert [int(c) for c in got] == [c for _, _, c in V.PAILLIER_KAT]
    assert sk.raw_decrypt(got) == [m % pk.n for m in messages]


def test_keygen_produces_djn_keys_of_exact_size():
    pk, sk = paillier.keygen(768)
    assert pk.n.bit_length() == 768 == pk.bits
    assert sk.p.bit_length() == sk.q.bit_length() == 384
    assert is_djn_form(sk.p, sk.q) and pk.djn
    assert pk.exponent_bits == 384
    lam = (sk.p - 1) * (sk.q - 1)
    assert gmpy2.powmod(pk.hs, lam, pk.n_squared) == 1  # h_s is an n-th residue
    assert gmpy2.jacobi(pk.n_squared - pk.hs, pk.n) == 1
    assert pk.max_int == pk.n // 3 - 1


def test_public_and_key_owner_encryption_agree_bit_for_bit(fresh_paillier_keys):
    pk, sk = fresh_paillier_keys
    values = [0, 1, -1, pk.max_int, -pk.max_int, 2**64]
    width = (pk.exponent_bits + 7) // 8
    exps = (np.arange(len(values) * width) * 37 % 256).astype(np.uint8).reshape(len(values), width)
    assert pk.raw_encrypt(values, exps) == sk.raw_encrypt(values, exps)
    out = sk.decrypt(sk.encrypt(values))
    assert out.tolist() == values


def test_crt_decryption_matches_textbook_paillier(fresh_paillier_keys):
    pk, sk = fresh_paillier_keys
    n, n2 = int(pk.n), int(pk.n_squared)
    lam = int((sk.p - 1) * (sk.q - 1))
    mu = pow(lam, -1, n)
    cts = pk.encrypt(np.arange(-5, 5)).ciphertexts.tolist()
    textbook = [((pow(c, lam, n2) - 1) // n) * mu % n for c in cts]
    assert sk.raw_decrypt(cts) == textbook


def test_key_owner_encryption_decrypts(fresh_paillier_keys):
    pk, sk = fresh_paillier_keys
    x = np.array([3.25, -7.5])
    np.testing.assert_allclose(sk.decrypt(sk.encrypt(x, frac_bits=12)), x)


def test_shortened_exponent_is_explicit_and_recorded():
    pk, sk = paillier.keygen(512, exponent_bits=224)
    assert pk.exponent_bits == 224
    np.testing.assert_array_equal(sk.decrypt(pk.encrypt([42])), [42])
    with pytest.raises(KeyValidationError, match="too short"):
        paillier.keygen(512, exponent_bits=64)


@pytest.mark.parametrize("bits", [256, 511, 513])
def test_keygen_rejects_bad_sizes(bits):
    with pytest.raises(KeyValidationError):
        paillier.keygen(bits)


def test_key_validation_on_construction(paillier_keys):
    pk, sk = paillier_keys
    with pytest.raises(KeyValidationError, match="do not multiply"):
        PaillierPrivateKey(pk, V.PAILLIER_P, V.PAILLIER_Q + 2)
    with pytest.raises(KeyValidationError, match="n-th residue"):
        PaillierPrivateKey(PaillierPublicKey(pk.n, 5), V.PAILLIER_P, V.PAILLIER_Q)
    with pytest.raises(KeyValidationError, match="odd non-square"):
        PaillierPublicKey(pk.n + 1, 3)
    with pytest.raises(KeyValidationError, match="at least 512"):
        PaillierPublicKey(3 * 5 * 7 * 11 * 13 * 17 * 19 * 23 * 29 * 31 * 37 * 41 * 43 * 47, 2)
    with pytest.raises(KeyValidationError, match="unit"):
        PaillierPublicKey(pk.n, V.PAILLIER_P)


@pytest.mark.fullsize
@pytest.mark.parametrize("bits", [2048, 3072])
def test_full_size_keys_roundtrip(bits):
    pk, sk = paillier.keygen(bits)
    assert pk.n.bit_length() == bits and pk.exponent_bits == bits // 2
    x = np.array([-(2**62), 0, 2**62, 123456789])
    e = pk.encrypt(x)
    np.testing.assert_array_equal(sk.decrypt(e * 3 + e), x.astype(object) * 4)
    np.testing.assert_array_equal(sk.decrypt(sk.encrypt(x)), x)
