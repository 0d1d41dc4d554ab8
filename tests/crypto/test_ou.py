"""Okamoto-Uchiyama specifics: key structure, plaintext bound, fast decryption exponent."""

import gmpy2
import numpy as np
import pytest

from shaper.crypto import ou
from shaper.crypto.ou import OUPrivateKey, OUPublicKey
from shaper.errors import KeyValidationError, PlaintextOverflowError

from .. import vectors as V


def test_keygen_structure():
    pk, sk = ou.keygen(1024)
    assert pk.n.bit_length() == 1024
    assert sk.p * sk.p * sk.q == pk.n
    assert (sk.p - 1) % sk.t == 0 and sk.t.bit_length() == 160
    assert pk.exponent_bits == 160  # twice the 80-bit security level of a 1024-bit modulus
    assert pk.max_int == 2 ** (pk.prime_bits - 2) - 1 < sk.p // 2
    p2 = sk.p * sk.p
    assert gmpy2.powmod(pk.H, sk.t, p2) == 1
    gt = gmpy2.powmod(pk.G, sk.t, p2)
    assert gt != 1 and gmpy2.powmod(gt, sk.p, p2) == 1


def test_security_levels_follow_key_size():
    assert ou.security_bits(2048) == 112 and ou.security_bits(3072) == 128 and ou.security_bits(1024) == 80


def test_decryption_against_textbook_formula(ou_keys):
    pk, sk = ou_keys
    p, p2 = int(sk.p), int(sk.p) ** 2
    m = 987654321
    c = int(pk.encrypt([m]).ciphertexts[0])
    # Textbook OU decryption with exponent p - 1 agrees with the fast t-exponent one.
    L = lambda x: (x - 1) // p  # noqa: E731
    textbook = L(pow(c, p - 1, p2)) * pow(L(pow(int(pk.G), p - 1, p2)), -1, p) % p
    assert textbook == m == sk.raw_decrypt([c])[0]


def test_plaintext_bound_enforced_below_p(ou_keys):
    pk, sk = ou_keys
    assert pk.max_int < sk.p
    with pytest.raises(PlaintextOverflowError, match="outside the plaintext range"):
        pk.encrypt([pk.max_int + 1])
    with pytest.raises(PlaintextOverflowError, match="outside the plaintext range"):
        pk.encrypt([-(pk.max_int + 1)])
    edge = pk.encrypt([pk.max_int, -pk.max_int])
    np.testing.assert_array_equal(sk.decrypt(edge).astype(object), [pk.max_int, -pk.max_int])


def test_key_validation(ou_keys):
    pk, sk = ou_keys
    with pytest.raises(KeyValidationError, match="p\\^2 q"):
        OUPrivateKey(pk, V.OU_P, V.OU_Q + 2, V.OU_T)
    with pytest.raises(KeyValidationError, match="does not divide"):
        OUPrivateKey(pk, V.OU_P, V.OU_Q, 1000003)
    bad_h = OUPublicKey(pk.n, pk.G, 7, pk.prime_bits)
    with pytest.raises(KeyValidationError, match="H\\^t"):
        OUPrivateKey(bad_h, V.OU_P, V.OU_Q, V.OU_T)
    with pytest.raises(KeyValidationError, match="inconsistent"):
        OUPublicKey(pk.n, pk.G, pk.H, 100)


def test_rejects_small_keys():
    with pytest.raises(KeyValidationError):
        ou.keygen(300)


@pytest.mark.fullsize
def test_full_size_roundtrip():
    pk, sk = ou.keygen(2048)
    assert pk.exponent_bits == 224 and sk.t.bit_length() == 224
    x = np.array([-(2**62), 5, 2**62])
    np.testing.assert_array_equal(sk.decrypt(pk.encrypt(x) * 2 - 1), x.astype(object) * 2 - 1)
