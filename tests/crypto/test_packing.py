"""Packing many bounded values into one ciphertext, and the checks on unpacking."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shaper.crypto import pack
from shaper.crypto.packing import SIGMA, PackedArray, layout
from shaper.errors import KeyMismatchError, PackingError

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_layout_follows_protocols_formula(paillier_keys):
    pk, _ = paillier_keys
    lay = layout(pk, 64)
    assert lay.slot_bits == 64 + SIGMA + 2
    assert lay.slots == (pk.n.bit_length() - 1) // lay.slot_bits


@SETTINGS
@given(bits=st.integers(1, 80), data=st.data())
def test_signed_roundtrip_at_slot_edges(scheme_keys, bits, data):
    pk, sk = scheme_keys
    lim = (1 << bits) - 1
    edges = [lim, -lim, 0, 1, -1]
    rest = data.draw(st.lists(st.integers(-lim, lim), max_size=12))
    values = edges + rest
    packed = pack(pk.encrypt(values), bits)
    assert packed.ciphertext_count == -(-len(values) // packed.layout.slots)
    assert sk.decrypt(packed).tolist() == values


@SETTINGS
@given(bits=st.integers(1, 64), data=st.data())
def test_unsigned_roundtrip(scheme_keys, bits, data):
    pk, sk = scheme_keys
    values = data.draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=1, max_size=15))
    assert sk.decrypt(pack(pk.encrypt(values), bits, signed=False)).tolist() == values


def test_fixed_point_values_pack(paillier_keys):
    pk, sk = paillier_keys
    x = np.array([0.5, -2.25, 7.125])
    out = sk.decrypt(pack(pk.encrypt(x, frac_bits=8), 12))
    np.testing.assert_array_equal(out, x)


def test_packed_matches_unpacked_decryption(scheme_keys):
    pk, sk = scheme_keys
    x = np.arange(-50, 50) * 997
    e = pk.encrypt(x)
    np.testing.assert_array_equal(sk.decrypt(pack(e, 20)), sk.decrypt(e))


@pytest.mark.parametrize("value", [1 << 20, -(1 << 20) - 5, 1 << 30])
def test_bound_violation_is_detected(paillier_keys, value):
    pk, sk = paillier_keys
    packed = pack(pk.encrypt([1, value, 3]), 20)
    with pytest.raises(PackingError, match="declared bound"):
        sk.decrypt(packed)


def test_unsigned_negative_is_detected(paillier_keys):
    pk, sk = paillier_keys
    with pytest.raises(PackingError):
        sk.decrypt(pack(pk.encrypt([5, -1, 2]), 16, signed=False))


def test_slot_too_wide_for_key(paillier_keys):
    pk, _ = paillier_keys
    with pytest.raises(PackingError, match="does not fit"):
        layout(pk, 600)
    with pytest.raises(PackingError):
        layout(pk, 0)


def test_packed_rerandomize_and_key_checks(paillier_keys, fresh_paillier_keys):
    pk, sk = paillier_keys
    packed = pack(pk.encrypt([1, 2, 3]), 8)
    again = packed.rerandomize()
    assert again._c.tolist() != packed._c.tolist()
    assert sk.decrypt(again).tolist() == [1, 2, 3]
    with pytest.raises(KeyMismatchError):
        fresh_paillier_keys[1].decrypt(packed)
    with pytest.raises(PackingError):
        PackedArray(pk, packed._c, 1000, packed.layout)
    assert len(pack(pk.encrypt(np.zeros(0, dtype=int)), 8)) == 0
