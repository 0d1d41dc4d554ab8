"""Integer and fixed-point encodings against plain Python arithmetic."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shaper.crypto import encoding
from shaper.errors import PlaintextOverflowError

N = (1 << 127) - 1  # a stand-in plaintext modulus
MAX = N // 3 - 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-MAX, MAX), max_size=20))
def test_integers_roundtrip_through_residues(values):
    enc = encoding.encode(np.array(values, dtype=object), 0, MAX)
    res = encoding.to_residues(enc, N)
    assert all(0 <= r < N for r in res.tolist())
    back = encoding.from_residues(res, N, MAX)
    assert back.tolist() == values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=20), st.integers(0, 40))
def test_fixed_point_error_is_half_an_ulp(values, frac):
    x = np.array(values, dtype=np.float64)
    if frac == 0:
        x = np.round(x)
    enc = encoding.encode(x, frac, MAX)
    back = encoding.decode(enc, frac)
    assert np.all(np.abs(back - x) <= 2.0 ** (-frac - 1) + 1e-9 * np.abs(x))


def test_decode_dtypes():
    assert encoding.decode(np.array([1, -2], dtype=object), 0).dtype == np.int64
    big = encoding.decode(np.array([2**70, -1], dtype=object), 0)
    assert big.dtype == object and big.tolist() == [2**70, -1]
    assert encoding.decode(np.array([3], dtype=object), 1).tolist() == [1.5]


def test_integer_inputs_are_exact_at_any_scale():
    enc = encoding.encode(np.array([2**62, -(2**62)]), 20, MAX)
    assert enc.tolist() == [2**82, -(2**82)]
    enc = encoding.encode([2**100, True, np.int32(-5)], 0, MAX)
    assert enc.tolist() == [2**100, 1, -5]


def test_overflow_message_names_value_bound_and_scale():
    with pytest.raises(PlaintextOverflowError) as info:
        encoding.encode(np.array([1.0, 3.0e20]), 16, 2**64)
    msg = str(info.value)
    assert "3e+20" in msg and "2^16" in msg and str(2**64) in msg


def test_non_integer_float_needs_fraction_bits():
    with pytest.raises(TypeError, match="frac_bits > 0"):
        encoding.encode([0.5], 0, MAX)
    assert encoding.encode([2.0], 0, MAX).tolist() == [2]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="non-finite"):
        encoding.encode([bad], 8, MAX)


def test_unsupported_types_rejected():
    with pytest.raises(TypeError):
        encoding.encode(["3"], 0, MAX)
    with pytest.raises(TypeError):
        encoding.encode([1], 1.5, MAX)
    with pytest.raises(ValueError):
        encoding.encode([1], -1, MAX)


def test_overflow_band_reported_with_index():
    res = np.array([1, MAX + 1, N - 1], dtype=object)
    with pytest.raises(PlaintextOverflowError, match="index 1"):
        encoding.from_residues(res, N, MAX)


def test_float_overflow_is_reported():
    with pytest.raises(PlaintextOverflowError):
        encoding.decode(np.array([1 << 1100], dtype=object), 3)


def test_python_lists_with_big_ints_stay_exact():
    # numpy 2 would turn this list into float64 and drop the low bit
    assert encoding.encode([0, 2**63 + 1], 0, MAX).tolist() == [0, 2**63 + 1]
    assert encoding.encode([[1, 2**70 + 3], [0.5, -1]], 4, MAX).tolist() == [[16, (2**70 + 3) * 16], [8, -16]]
