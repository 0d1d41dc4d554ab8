"""Encoding numbers as plaintexts: signed integers and fixed point with a power-of-two scale.

A real value x is encoded as the integer round(x * 2^frac_bits); integers are encoded exactly
(times 2^frac_bits). Signed integers map into Z_N symmetrically: v -> v mod N, and a residue r
decodes to r when r <= max_int, to r - N when r >= N - max_int, and raises in between. The gap
(max_int, N - max_int) is the overflow band: a homomorphic result that left the range lands there
with high probability and is reported instead of silently wrapping (python-paillier uses the same
convention with max_int = N // 3 - 1, which keeps the two libraries' encodings compatible).

The same rules (rounding, NaN/infinity and non-integer checks) give the elements of the ring
Z_2^64 that secret shares live in (:func:`ring_encode`, :func:`ring_decode`): numpy ``uint64``
arrays, arithmetic wrapping mod 2^64, a value read back as a signed 64-bit integer, so
|round(x * 2^frac_bits)| must stay below 2^63.

Everything here is batched: inputs are numpy arrays (or array-likes), outputs are numpy arrays;
big integers travel as object arrays of Python ints.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import PlaintextOverflowError

_INT64_SAFE = 1 << 62

#: Statistical security parameter σ (bits): a value hidden under an additive mask gets a mask
#: σ bits wider than the value (statistical distance 2^-σ), and so do random exponents that must
#: look uniform. The one σ every protocol uses.
SIGMA = 40


def _bound_error(value: Any, encoded: int, max_int: int, frac_bits: int) -> PlaintextOverflowError:
    return PlaintextOverflowError(
        f"value {value!r} encodes to {encoded} at scale 2^{frac_bits}, outside the plaintext "
        f"range ±{max_int} (about {max_int.bit_length()} bits); use a larger key, fewer "
        "fraction bits, or smaller values"
    )


def _check_frac_bits(frac_bits: int) -> int:
    if isinstance(frac_bits, bool) or not isinstance(frac_bits, (int, np.integer)):
        raise TypeError(f"frac_bits must be an integer, got {type(frac_bits).__name__}")
    frac_bits = int(frac_bits)
    if frac_bits < 0:
        raise ValueError(f"frac_bits must be >= 0, got {frac_bits}")
    return frac_bits


def _float_error(value: float, frac_bits: int) -> Exception:
    if not math.isfinite(value):
        return ValueError(f"cannot encode non-finite value {value!r}")
    return TypeError(
        f"value {value!r} is not an integer and frac_bits is 0: encode it as fixed point by "
        "passing frac_bits > 0 (e.g. frac_bits=16)"
    )


def encode(values: Any, frac_bits: int, max_int: int) -> np.ndarray:
    """Encode ``values`` (any shape) as signed integers ``round(v * 2^frac_bits)``.

    Returns an object array of Python ints of the same shape. Raises
    :class:`~shaper.errors.PlaintextOverflowError` naming the first value whose encoding exceeds
    ``±max_int``, ``TypeError`` for a non-integer with ``frac_bits == 0`` or an unsupported type,
    ``ValueError`` for NaN or infinity.
    """
    frac_bits = _check_frac_bits(frac_bits)
    # Python lists go element by element: numpy would turn [0, 2**63 + 1] into float64 and
    # silently drop low bits.
    arr = values if isinstance(values, np.ndarray) else as_exact_array(values)
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        out = [_encode_scalar(v, frac_bits) for v in flat]
        result = _object(out).reshape(arr.shape)
    elif arr.dtype.kind == "b":
        result = _encode_int_array(arr.astype(np.int64), frac_bits)
    elif arr.dtype.kind in "iu":
        result = _encode_int_array(arr, frac_bits)
    elif arr.dtype.kind == "f":
        result = _encode_float_array(arr.astype(np.float64), frac_bits)
    else:
        raise TypeError(f"cannot encode values of dtype {arr.dtype}; pass integers or floats")
    check_bound(result, max_int, frac_bits, original=arr)
    return result


def as_exact_array(values: Any) -> np.ndarray:
    """``values`` as an array without lossy conversions: numpy arrays and numpy scalars are
    kept, anything else (Python ints of any size, floats, nested lists) becomes an object array."""
    if isinstance(values, np.ndarray):
        return values
    if isinstance(values, np.generic):
        return np.asarray(values)
    return np.array(values, dtype=object)


def has_floats(arr: np.ndarray) -> bool:
    """Whether an array holds non-integer numbers (float dtype, or floats in an object array)."""
    if arr.dtype.kind == "f":
        return True
    if arr.dtype == object:
        return any(isinstance(v, (float, np.floating)) for v in arr.ravel().tolist())
    return False


def _encode_scalar(v: Any, frac_bits: int) -> int:
    if isinstance(v, (bool, np.bool_)):
        return int(v) << frac_bits
    if isinstance(v, (int, np.integer)) or type(v).__name__ == "mpz":
        return int(v) << frac_bits
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not math.isfinite(f) or (frac_bits == 0 and not f.is_integer()):
            raise _float_error(f, frac_bits)
        return int(round(math.ldexp(f, frac_bits)))
    raise TypeError(f"cannot encode {type(v).__name__} value {v!r}; pass integers or floats")


def _object(items: list) -> np.ndarray:
    return np.fromiter(items, dtype=object, count=len(items))


def _to_object(ints: np.ndarray) -> np.ndarray:
    return _object(ints.ravel().tolist()).reshape(ints.shape)


def _encode_int_array(arr: np.ndarray, frac_bits: int) -> np.ndarray:
    obj = _to_object(arr)
    if frac_bits:
        obj = obj * (1 << frac_bits)
    return obj


def _scaled_floats(arr: np.ndarray, frac_bits: int) -> np.ndarray:
    """``rint(arr * 2^frac_bits)`` as float64, after the checks every float encoding makes."""
    finite = np.isfinite(arr)
    if not finite.all():
        bad = arr.ravel()[np.flatnonzero(~finite.ravel())[0]]
        raise _float_error(float(bad), frac_bits)
    if frac_bits == 0:
        frac = arr != np.floor(arr)
        if frac.any():
            raise _float_error(float(arr.ravel()[np.flatnonzero(frac.ravel())[0]]), frac_bits)
    scaled = np.rint(np.ldexp(arr, frac_bits))
    if scaled.size and not np.isfinite(scaled).all():
        idx = np.flatnonzero(~np.isfinite(scaled.ravel()))[0]
        raise PlaintextOverflowError(
            f"value {arr.ravel()[idx]!r} overflows a float at scale 2^{frac_bits}"
        )
    return scaled


def _encode_float_array(arr: np.ndarray, frac_bits: int) -> np.ndarray:
    scaled = _scaled_floats(arr, frac_bits)
    if scaled.size == 0 or np.abs(scaled).max() < _INT64_SAFE:
        return _to_object(scaled.astype(np.int64))
    return _object([int(x) for x in scaled.ravel().tolist()]).reshape(arr.shape)


def check_bound(encoded: np.ndarray, max_int: int, frac_bits: int = 0, original: Any = None) -> None:
    """Raise if any encoded integer exceeds ``±max_int``."""
    if encoded.size == 0:
        return
    flat = encoded.ravel().tolist()
    if max(map(abs, flat)) <= max_int:
        return
    i = next(k for k, v in enumerate(flat) if abs(v) > max_int)
    shown = np.asarray(original).ravel()[i] if original is not None else flat[i]
    raise _bound_error(shown.item() if hasattr(shown, "item") else shown, flat[i], max_int, frac_bits)


def to_residues(encoded: np.ndarray, modulus: int) -> np.ndarray:
    """Signed integers to residues in [0, modulus) (object array)."""
    return np.asarray(encoded, dtype=object) % modulus


def from_residues(residues: Any, modulus: int, max_int: int) -> np.ndarray:
    """Residues in [0, modulus) to signed integers (object array of Python ints).

    Raises :class:`PlaintextOverflowError` naming the first residue in the overflow band
    (max_int, modulus - max_int).
    """
    flat = [int(r) for r in np.asarray(residues, dtype=object).ravel().tolist()]
    high = modulus - max_int
    out = []
    for i, r in enumerate(flat):
        if r <= max_int:
            out.append(r)
        elif r >= high:
            out.append(r - modulus)
        else:
            raise PlaintextOverflowError(
                f"decrypted value at index {i} lies in the overflow band: a homomorphic result "
                f"exceeded the plaintext range ±{max_int} (about {max_int.bit_length()} bits) and "
                "wrapped around; the value is lost"
            )
    return _object(out).reshape(np.shape(residues))


def decode(encoded: np.ndarray, frac_bits: int) -> np.ndarray:
    """Signed integers back to numbers.

    ``frac_bits == 0``: an int64 array when every value fits, otherwise an object array of Python
    ints. ``frac_bits > 0``: float64 (correctly rounded ``v / 2^frac_bits``).
    """
    frac_bits = _check_frac_bits(frac_bits)
    obj = np.asarray(encoded, dtype=object)
    if frac_bits:
        if not obj.size:
            return np.zeros(obj.shape)
        try:
            as_float = obj.astype(np.float64)
        except OverflowError as exc:
            raise PlaintextOverflowError(
                f"a decoded value at scale 2^{frac_bits} is too large for float64"
            ) from exc
        return np.ldexp(as_float, -frac_bits)
    flat = obj.ravel().tolist()
    if not flat:
        return np.zeros(obj.shape, dtype=np.int64)
    if max(flat) < (1 << 63) and min(flat) >= -(1 << 63):
        return np.array(flat, dtype=np.int64).reshape(obj.shape)
    return obj.copy()


def as_csr(matrix: Any) -> Any:
    """A plaintext matrix (scipy sparse, numpy, nested lists) as a canonical CSR matrix
    (explicit zeros dropped, indices sorted) without lossy casts: exact integers that fit in
    int64, or floats; anything else raises."""
    import scipy.sparse as sp  # costs ~100 ms to import: only matrix users pay it

    if sp.issparse(matrix):
        csr = sp.csr_matrix(matrix, copy=True)
    else:
        arr = as_exact_array(matrix)
        if arr.ndim != 2:
            raise ValueError(f"plaintext matrix must be 2-D, got shape {arr.shape}")
        if arr.dtype == object:  # from nested lists: exact integers or floats, never a silent cast
            if has_floats(arr):
                arr = arr.astype(np.float64)
            elif all(-(1 << 63) <= int(v) < (1 << 63) for v in arr.ravel().tolist()):
                arr = arr.astype(np.int64)
            else:
                raise ValueError("plaintext matrix entries must fit in int64 (or be floats)")
        if arr.dtype.kind not in "iubf":
            raise TypeError(f"cannot multiply by a matrix of dtype {arr.dtype}")
        csr = sp.csr_matrix(arr)
    csr.eliminate_zeros()
    csr.sort_indices()
    return csr


# -- the ring Z_2^64 ------------------------------------------------------------------------------
MASK64 = (1 << 64) - 1
_RING_FLOAT_LIMIT = float(1 << 63)


def _ring_overflow(arr: np.ndarray, frac_bits: int) -> PlaintextOverflowError:
    flat = arr.ravel().tolist()
    lim = 2.0 ** (63 - frac_bits)
    bad = next((v for v in flat if not (isinstance(v, (int, float, np.integer, np.floating)) and abs(float(v)) < lim)),
               flat[0] if flat else None)
    return PlaintextOverflowError(
        f"value {bad!r} does not fit the 64-bit ring at scale 2^{frac_bits}: |value| must be below "
        f"2^{63 - frac_bits} (reduce frac_bits or the value)"
    )


def ring_encode(values: Any, frac_bits: int) -> np.ndarray:
    """Reals or integers to ring elements (``uint64``, any shape) ``round(v * 2^frac_bits)
    mod 2^64``, with :func:`encode`'s rounding and checks; raises
    :class:`~shaper.errors.PlaintextOverflowError` when |value| * 2^frac_bits reaches 2^63."""
    if isinstance(frac_bits, bool) or not isinstance(frac_bits, (int, np.integer)) or not 0 <= frac_bits <= 62:
        raise ValueError(f"frac_bits must be in [0, 62], got {frac_bits}")
    arr = values if isinstance(values, np.ndarray) else as_exact_array(values)
    kind = arr.dtype.kind
    if kind in "iub":
        lim = (1 << 63) >> frac_bits
        if arr.size and (int(arr.max()) >= lim or (kind == "i" and int(arr.min()) < -lim)):
            raise _ring_overflow(arr, frac_bits)
        return (arr.astype(np.int64) * np.int64(1 << frac_bits)).view(np.uint64)
    if kind == "f":
        scaled = _scaled_floats(arr.astype(np.float64), frac_bits)
        if scaled.size and np.abs(scaled).max() >= _RING_FLOAT_LIMIT:
            raise _ring_overflow(arr, frac_bits)
        return scaled.astype(np.int64).view(np.uint64)
    if arr.dtype == object:
        ints = [_encode_scalar(v, frac_bits) for v in arr.ravel().tolist()]
        if any(not -(1 << 63) <= v < (1 << 63) for v in ints):
            raise _ring_overflow(arr, frac_bits)
        return np.array([v & MASK64 for v in ints], dtype=np.uint64).reshape(arr.shape)
    raise TypeError(f"cannot encode values of dtype {arr.dtype} into the ring")


def to_signed(ring: np.ndarray) -> np.ndarray:
    """Ring elements read as signed 64-bit integers (a view, no copy)."""
    return np.asarray(ring, dtype=np.uint64).view(np.int64)


def ring_decode(ring: np.ndarray, frac_bits: int) -> np.ndarray:
    """Ring elements to numbers: int64 when ``frac_bits == 0``, float64 otherwise."""
    signed = to_signed(ring)
    if frac_bits == 0:
        return signed.copy()
    return np.ldexp(signed.astype(np.float64), -frac_bits)


def ring_from_ints(values: Any) -> np.ndarray:
    """Python integers (any size, any sign) reduced mod 2^64."""
    flat = np.asarray(values, dtype=object).ravel().tolist()
    return np.array([int(v) & MASK64 for v in flat], dtype=np.uint64).reshape(np.shape(values))


def ring_to_ints(ring: np.ndarray, signed: bool = False) -> np.ndarray:
    """Ring elements as an object array of Python ints (unsigned [0, 2^64) or signed)."""
    src = to_signed(ring) if signed else np.asarray(ring, dtype=np.uint64)
    out = np.fromiter(src.ravel().tolist(), dtype=object, count=src.size)
    return out.reshape(src.shape)
