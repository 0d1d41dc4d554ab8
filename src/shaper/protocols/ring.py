"""The ring Z_2^64: fixed-point encoding, signed decoding and local share truncation.

Ring elements are numpy ``uint64`` arrays; arithmetic wraps mod 2^64 (numpy's unsigned overflow).
A real x is encoded as round(x * 2^f) mod 2^64 and decoded by reading the element as a signed
64-bit integer and dividing by 2^f. Values must stay within ±2^63 / 2^f; ``encode`` raises
:class:`~shaper.errors.PlaintextOverflowError` naming value, bound and scale otherwise.

Local truncation (SecureML): to divide a shared value x = x0 + x1 (mod 2^64) by 2^t without
interaction, party 0 replaces x0 by floor(x0 / 2^t) and party 1 replaces x1 by
2^64 - floor((2^64 - x1) / 2^t). The result is floor(x / 2^t) or one more, *unless* the shares
straddle the wrap-around, which happens with probability about 2^(l + 1 - 64) for |x| < 2^l
(e.g. 2^-36 for l = 27): then the result is off by about 2^(64 - t). Use it where that failure
rate is acceptable; values that cross the HE boundary use exact integer shares instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import PlaintextOverflowError

MASK64 = (1 << 64) - 1
_MAX_FLOAT_SCALED = float(1 << 63)


def encode(values: Any, frac_bits: int) -> np.ndarray:
    """Reals or integers to ring elements (uint64) at scale 2^frac_bits."""
    if frac_bits < 0 or frac_bits > 62:
        raise ValueError(f"frac_bits must be in [0, 62], got {frac_bits}")
    arr = values if isinstance(values, np.ndarray) else np.array(values, dtype=object)
    if arr.dtype.kind in "iu" or arr.dtype.kind == "b":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= (1 << 63) >> frac_bits:
            _raise(arr, frac_bits)
        wide = arr.astype(np.int64)
        lim = (1 << 63) >> frac_bits
        if arr.size and (int(wide.max()) >= lim or int(wide.min()) < -lim):
            _raise(arr, frac_bits)
        return (wide * np.int64(1 << frac_bits)).view(np.uint64)
    if arr.dtype.kind == "f":
        scaled = np.rint(np.ldexp(arr.astype(np.float64), frac_bits))
        if not np.isfinite(scaled).all() or (scaled.size and np.abs(scaled).max() >= _MAX_FLOAT_SCALED):
            _raise(arr, frac_bits)
        return scaled.astype(np.int64).view(np.uint64)
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        ints = []
        for v in flat:
            if isinstance(v, (float, np.floating)):
                if not np.isfinite(v):
                    _raise(arr, frac_bits)
                ints.append(int(round(float(v) * (1 << frac_bits))))
            else:
                ints.append(int(v) << frac_bits)
        if any(not -(1 << 63) <= v < (1 << 63) for v in ints):
            _raise(arr, frac_bits)
        return np.array([v & MASK64 for v in ints], dtype=np.uint64).reshape(arr.shape)
    raise TypeError(f"cannot encode values of dtype {arr.dtype} into the ring")


def _raise(arr: np.ndarray, frac_bits: int) -> None:
    flat = arr.ravel().tolist()
    lim = 2.0 ** (63 - frac_bits)
    bad = next((v for v in flat if not (isinstance(v, (int, float, np.integer, np.floating)) and abs(float(v)) < lim)),
               flat[0] if flat else None)
    raise PlaintextOverflowError(
        f"value {bad!r} does not fit the 64-bit ring at scale 2^{frac_bits}: |value| must be below "
        f"2^{63 - frac_bits} (reduce frac_bits or the value)"
    )


def to_signed(ring: np.ndarray) -> np.ndarray:
    """Ring elements read as signed 64-bit integers."""
    return np.asarray(ring, dtype=np.uint64).view(np.int64)


def decode(ring: np.ndarray, frac_bits: int) -> np.ndarray:
    """Ring elements to numbers: int64 when ``frac_bits == 0``, float64 otherwise."""
    signed = to_signed(ring)
    if frac_bits == 0:
        return signed.copy()
    return np.ldexp(signed.astype(np.float64), -frac_bits)


def truncate_share(share: np.ndarray, bits: int, party: int) -> np.ndarray:
    """This party's half of a local (SecureML) truncation by ``bits``; see the module notes."""
    if bits == 0:
        return share.copy()
    if not 0 < bits < 64:
        raise ValueError(f"truncation must be by 1..63 bits, got {bits}")
    s = np.asarray(share, dtype=np.uint64)
    shift = np.uint64(bits)
    if party == 0:
        return s >> shift
    return np.uint64(0) - ((np.uint64(0) - s) >> shift)


def from_ints(values: Any) -> np.ndarray:
    """Python integers (any size, any sign) reduced mod 2^64."""
    flat = np.asarray(values, dtype=object).ravel().tolist()
    return np.array([int(v) & MASK64 for v in flat], dtype=np.uint64).reshape(np.shape(values))


def to_ints(ring: np.ndarray, signed: bool = False) -> np.ndarray:
    """Ring elements as an object array of Python ints (unsigned [0, 2^64) or signed)."""
    src = to_signed(ring) if signed else np.asarray(ring, dtype=np.uint64)
    out = np.fromiter(src.ravel().tolist(), dtype=object, count=src.size)
    return out.reshape(src.shape)
