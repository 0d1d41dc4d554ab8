"""python-paillier interoperability: keys and ciphertexts convert both ways and decrypt in the
other library."""

import numpy as np
import phe
import pytest

from shaper.crypto import paillier


def test_keys_convert_both_ways(paillier_keys):
    pk, sk = paillier_keys
    phe_pk, phe_sk = paillier.to_phe(pk), paillier.to_phe(sk)
    assert phe_pk.n == pk.n and {phe_sk.p, phe_sk.q} == {sk.p, sk.q}
    assert paillier.from_phe(phe_pk) == pk
    assert paillier.from_phe(phe_sk).public_key == pk


def test_phe_decrypts_our_integers_and_fixed_point(paillier_keys):
    pk, sk = paillier_keys
    phe_sk = paillier.to_phe(sk)
    ints = [0, 1, -1, 2**60, -(2**60)]
    assert [phe_sk.decrypt(x) for x in paillier.to_phe(pk.encrypt(ints))] == ints
    for frac in (8, 10):  # a multiple of 4 maps exactly; others are rescaled first
        x = np.array([0.5, -3.75, 1024.125])
        numbers = paillier.to_phe(pk.encrypt(x, frac_bits=frac))
        assert [phe_sk.decrypt(v) for v in numbers] == x.tolist()
    evaluated = pk.encrypt([3]) * 5 + 2
    assert phe_sk.decrypt(paillier.to_phe(evaluated)[0]) == 17


def test_we_decrypt_phe_ciphertexts():
    phe_pk, phe_sk = phe.generate_paillier_keypair(n_length=512)
    sk = paillier.from_phe(phe_sk)
    values = [5, -17, 2**40, 0.5, -2.25]
    numbers = [phe_pk.encrypt(v) for v in values]
    enc = paillier.from_phe(numbers)
    np.testing.assert_allclose(sk.decrypt(enc), values)
    assert sk.decrypt(paillier.from_phe(phe_pk.encrypt(-42))).tolist() == -42
    # Homomorphic results from phe, then further work in shaper.
    mixed = paillier.from_phe([phe_pk.encrypt(3) * 4 + phe_pk.encrypt(1)])
    assert sk.decrypt(mixed * 2).tolist() == [26]


def test_shaper_encrypts_under_an_imported_phe_public_key():
    phe_pk, phe_sk = phe.generate_paillier_keypair(n_length=512)
    pk = paillier.from_phe(phe_pk)
    assert not pk.djn and pk.exponent_bits == 512 + 40  # foreign primes: full-length exponent
    enc = pk.encrypt([7, -8]) + 1
    assert [phe_sk.decrypt(x) for x in paillier.to_phe(enc)] == [8, -7]


def test_nested_lists_keep_their_shape(paillier_keys):
    pk, sk = paillier_keys
    nested = paillier.to_phe(pk.encrypt(np.arange(6).reshape(2, 3)))
    assert len(nested) == 2 and len(nested[0]) == 3
    assert sk.decrypt(paillier.from_phe(nested)).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_conversion_errors(ou_keys):
    pk, _ = ou_keys
    with pytest.raises(TypeError, match="only Paillier"):
        paillier.to_phe(pk.encrypt([1]))
    with pytest.raises(TypeError):
        paillier.to_phe("key")
    with pytest.raises(TypeError):
        paillier.from_phe(["not a number"])
    with pytest.raises(ValueError):
        paillier.from_phe([])
