"""Conformance of both additive schemes (Paillier, OU) with the shared EncryptedArray interface.

Every test runs once per scheme (``scheme_keys`` fixture). Plain numpy / Python integers are the
oracle.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shaper.crypto import concatenate
from shaper.crypto.ahe import EncryptedArray
from shaper.errors import InvalidCiphertextError, KeyMismatchError, PlaintextOverflowError

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
small_ints = st.integers(min_value=-(2**60), max_value=2**60)


def test_encrypt_decrypt_roundtrip_keeps_shape_and_dtype(scheme_keys):
    pk, sk = scheme_keys
    x = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    enc = pk.encrypt(x)
    assert enc.shape == (3, 4) and len(enc) == 3 and enc.size == 12
    out = sk.decrypt(enc)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, x)


def test_encryption_is_randomised(scheme_keys):
    pk, _ = scheme_keys
    a = pk.encrypt([5, 5, 5]).ciphertexts
    assert len(set(a.tolist())) == 3


@SETTINGS
@given(a=st.lists(small_ints, min_size=1, max_size=6), data=st.data())
def test_homomorphic_addition_laws(scheme_keys, a, data):
    pk, sk = scheme_keys
    b = data.draw(st.lists(small_ints, min_size=len(a), max_size=len(a)))
    k = data.draw(small_ints)
    ea, eb = pk.encrypt(a), pk.encrypt(b)
    a_, b_ = np.array(a, dtype=object), np.array(b, dtype=object)
    assert sk.decrypt(ea + eb).tolist() == (a_ + b_).tolist()
    assert sk.decrypt(ea - eb).tolist() == (a_ - b_).tolist()
    assert sk.decrypt(-ea).tolist() == (-a_).tolist()
    assert sk.decrypt(ea + k).tolist() == (a_ + k).tolist()
    assert sk.decrypt(k - ea).tolist() == (k - a_).tolist()
    assert sk.decrypt(ea + b_).tolist() == (a_ + b_).tolist()
    assert int(sk.decrypt(ea.sum())) == sum(a)


@SETTINGS
@given(a=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6), data=st.data())
def test_homomorphic_scalar_multiplication(scheme_keys, a, data):
    pk, sk = scheme_keys
    ks = data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=len(a), max_size=len(a)))
    k = data.draw(st.integers(-(2**40), 2**40))
    ea = pk.encrypt(a)
    a_, ks_ = np.array(a, dtype=object), np.array(ks, dtype=object)
    assert sk.decrypt(ea * ks_).tolist() == (a_ * ks_).tolist()
    assert sk.decrypt(ea * k).tolist() == (a_ * k).tolist()
    assert sk.decrypt(k * ea).tolist() == (a_ * k).tolist()


def test_scalar_edge_cases(scheme_keys):
    pk, sk = scheme_keys
    e = pk.encrypt([7, -3, 11])
    np.testing.assert_array_equal(sk.decrypt(e * 0), [0, 0, 0])
    np.testing.assert_array_equal(sk.decrypt(e * 1), [7, -3, 11])
    np.testing.assert_array_equal(sk.decrypt(e * -1), [-7, 3, -11])
    np.testing.assert_array_equal(sk.decrypt(e * np.array([0, 1, -1])), [0, -3, -11])


def test_broadcasting_and_reductions(scheme_keys):
    pk, sk = scheme_keys
    x = np.arange(12).reshape(3, 4)
    e = pk.encrypt(x)
    np.testing.assert_array_equal(sk.decrypt(e + np.array([1, 2, 3, 4])), x + np.array([1, 2, 3, 4]))
    np.testing.assert_array_equal(sk.decrypt(e * np.array([[2], [3], [4]])), x * np.array([[2], [3], [4]]))
    np.testing.assert_array_equal(sk.decrypt(e.sum(axis=0)), x.sum(axis=0))
    np.testing.assert_array_equal(sk.decrypt(e.sum(axis=1)), x.sum(axis=1))
    assert int(sk.decrypt(e.sum())) == x.sum()
    np.testing.assert_array_equal(sk.decrypt(e[1:, ::2]), x[1:, ::2])
    np.testing.assert_array_equal(sk.decrypt(e.T), x.T)
    np.testing.assert_array_equal(sk.decrypt(e.reshape(-1)), x.reshape(-1))
    assert int(sk.decrypt(e[2, 3])) == 11


def test_concatenate_aligns_scales(scheme_keys):
    pk, sk = scheme_keys
    a = pk.encrypt([1, 2])
    b = pk.encrypt([0.5], frac_bits=4)
    c = concatenate([a, b])
    assert c.frac_bits == 4
    np.testing.assert_array_equal(sk.decrypt(c), [1.0, 2.0, 0.5])


def test_fixed_point_arithmetic(scheme_keys):
    pk, sk = scheme_keys
    x = np.array([0.5, -1.25, 3.0])
    e = pk.encrypt(x, frac_bits=16)
    np.testing.assert_allclose(sk.decrypt(e * 0.25), x * 0.25)
    assert (e * 0.25).frac_bits == 32
    np.testing.assert_allclose(sk.decrypt(e + 1.5), x + 1.5)
    np.testing.assert_allclose(sk.decrypt(e * 3), x * 3)
    ints = pk.encrypt([1, 2, 3])
    np.testing.assert_allclose(sk.decrypt(ints + e), np.array([1, 2, 3]) + x)
    np.testing.assert_allclose(sk.decrypt(ints.mul(np.array([0.5, 0.5, 0.5]), frac_bits=8)), [0.5, 1.0, 1.5])


def test_rerandomize_changes_ciphertexts_not_plaintexts(scheme_keys):
    pk, sk = scheme_keys
    e = pk.encrypt([3, -4, 5])
    r = e.rerandomize()
    assert not set(e.ciphertexts.tolist()) & set(r.ciphertexts.tolist())
    np.testing.assert_array_equal(sk.decrypt(r), [3, -4, 5])
    z = pk.encrypt_zero(3)
    np.testing.assert_array_equal(sk.decrypt(e + z), [3, -4, 5])


def test_plaintext_overflow_names_value_bound_and_scale(scheme_keys):
    pk, _ = scheme_keys
    with pytest.raises(PlaintextOverflowError, match=r"outside the plaintext range.*scale 2\^0|scale 2\^0.*outside"):
        pk.encrypt([pk.max_int + 1])
    with pytest.raises(PlaintextOverflowError, match="scale 2\\^8"):
        pk.encrypt([float(pk.max_int)], frac_bits=8)
    pk.encrypt([pk.max_int, -pk.max_int])  # the bound itself is fine


def test_overflow_band_detected_on_decryption(scheme_keys):
    pk, sk = scheme_keys
    big = pk.encrypt([pk.max_int])
    with pytest.raises(PlaintextOverflowError, match="overflow band"):
        sk.decrypt(big + big)


def test_invalid_ciphertexts_are_rejected_by_index(scheme_keys):
    pk, sk = scheme_keys
    good = int(pk.encrypt([1]).ciphertexts[0])
    N = int(pk.ciphertext_modulus)
    for bad in (0, N, N + 5, -3):
        with pytest.raises(InvalidCiphertextError, match="index 1"):
            pk.ciphertext_array([good, bad])
    factor = int(sk.p)
    with pytest.raises(InvalidCiphertextError, match="index 2 shares a factor"):
        pk.ciphertext_array([good, good, factor])


def test_decrypt_validates_its_input(scheme_keys):
    pk, sk = scheme_keys
    forged = EncryptedArray(pk, np.array([int(sk.p)], dtype=object))
    with pytest.raises(InvalidCiphertextError):
        sk.decrypt(forged)


def test_mixing_keys_raises(scheme_keys, fresh_paillier_keys):
    pk, sk = scheme_keys
    other_pk, other_sk = fresh_paillier_keys
    a, b = pk.encrypt([1]), other_pk.encrypt([1])
    with pytest.raises(KeyMismatchError):
        a + b
    with pytest.raises(KeyMismatchError):
        other_sk.decrypt(a)
    with pytest.raises(KeyMismatchError):
        concatenate([a, b])


def test_unsupported_operations_explain_themselves(scheme_keys):
    pk, _ = scheme_keys
    e = pk.encrypt([1, 2])
    with pytest.raises(TypeError, match="additive HE"):
        e * e
    with pytest.raises(TypeError, match="cannot be divided"):
        e / 2
    with pytest.raises(TypeError, match="truth value"):
        bool(e)
    with pytest.raises(TypeError, match="frac_bits > 0"):
        e + 0.5
    with pytest.raises(ValueError, match="non-finite"):
        pk.encrypt([float("nan")], frac_bits=8)
    with pytest.raises(ValueError, match="lower the scale"):
        pk.encrypt([1.0], frac_bits=8).rescaled(4)


def test_empty_arrays(scheme_keys):
    pk, sk = scheme_keys
    e = pk.encrypt(np.zeros(0, dtype=np.int64))
    assert e.shape == (0,)
    assert sk.decrypt(e).shape == (0,)
    assert int(sk.decrypt(e.sum())) == 0


def test_list_operands_are_exact(scheme_keys):
    pk, sk = scheme_keys
    big = 2**63 + 1
    e = pk.encrypt([0, big])
    assert sk.decrypt(e).tolist() == [0, big]
    assert sk.decrypt(e * [3, big]).tolist() == [0, big * big]
    assert sk.decrypt(e + [big, 0]).tolist() == [big, big]
    assert sk.decrypt([[1, 1]] @ e).tolist() == [big]


def test_montgomery_storage_matches_integer_storage(scheme_keys):
    """With the native kernel, arrays keep ciphertexts in Montgomery form; every deterministic
    operation must give the very ciphertexts the integer path gives."""
    from shaper.kernels import get_kernel

    pk, sk = scheme_keys
    x = np.arange(-5, 7, dtype=np.int64).reshape(3, 4)
    fast = pk.encrypt(x)
    if not getattr(get_kernel(), "montgomery", False):  # gmpy2: integers throughout
        assert fast._mont is None and (fast + fast)._mont is None
        return
    assert fast._mont is not None  # the fast storage is really in use
    slow = EncryptedArray(pk, fast.ciphertexts.copy(), fast.frac_bits)
    assert slow._mont is None

    def same(a, b):
        assert a.shape == b.shape and a.frac_bits == b.frac_bits
        np.testing.assert_array_equal(a.ciphertexts, b.ciphertexts)

    same(fast + fast, slow + slow)
    same(fast + fast[1], slow + slow[1])  # broadcasting
    same(fast.T[::2], slow.T[::2])
    same(fast * 7, slow * 7)
    same(fast * np.array([0, 1, 2, 3]), slow * np.array([0, 1, 2, 3]))
    same(fast.sum(axis=0), slow.sum(axis=0))
    same(fast.sum(axis=1), slow.sum(axis=1))
    same(fast.sum(), slow.sum())
    same(concatenate([fast, fast[:1]]), concatenate([slow, slow[:1]]))
    same(fast.reshape(4, 3).ravel(), slow.reshape(4, 3).ravel())
    np.testing.assert_array_equal(sk.decrypt((fast * -3 + fast.rescaled(2)).rescaled(2)),
                                  sk.decrypt((slow * -3 + slow.rescaled(2)).rescaled(2)))
    np.testing.assert_array_equal(sk.decrypt(fast.rerandomize()), x)
