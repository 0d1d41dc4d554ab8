"""Additive shares over Z_2^64 (x = x_0 + x_1 + ... mod 2^64) and exact integer shares.

* :class:`SharedArray`: this party's share (one uint64 array) of a fixed-point array; its
  operators forward to its engine (:class:`~shaper.protocols.api.Shared`). Engines with additive
  shares: :class:`~shaper.protocols.additive.AdditiveEngine` (and
  :class:`~shaper.protocols.hybrid.Hybrid2PC`, built on it) and the plaintext
  :class:`~shaper.protocols.reference.Reference`, all built on :class:`AdditiveSharing`.
* :class:`IntegerShares`: exact integer shares, x = x0 + x1 over the integers, used where values
  cross the HE boundary (H2S in integer mode) so that truncation can be exact; x0 is statistically
  masked (σ = 40 bits). Convert to ring shares with :meth:`IntegerShares.to_ring`.

Local truncation (SecureML, :func:`truncate_share`): to divide a shared value x = x0 + x1 (mod
2^64) by 2^t without interaction, party 0 replaces x0 by floor(x0 / 2^t) and party 1 replaces x1
by 2^64 - floor((2^64 - x1) / 2^t). The result is floor(x / 2^t) or one more, *unless* the shares
straddle the wrap-around, which happens with probability about 2^(l + 1 - 64) for |x| < 2^l
(e.g. 2^-36 for l = 27): then the result is off by about 2^(64 - t). Use it where that failure
rate is acceptable; values that cross the HE boundary use exact integer shares instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...crypto import encoding
from ..api import Engine, Shared


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


class SharedArray(Shared):
    """This party's additive share (uint64) of an array over Z_2^64 at scale 2^frac_bits."""

    __slots__ = ("share",)

    def __init__(self, engine: "AdditiveSharing", share: np.ndarray, frac_bits: int) -> None:
        self.engine = engine
        self.share = np.asarray(share, dtype=np.uint64)
        self.frac_bits = int(frac_bits)

    @property
    def components(self) -> tuple[np.ndarray, ...]:
        return (self.share,)

    def with_components(self, components: tuple[np.ndarray, ...], frac_bits: int | None = None) -> "SharedArray":
        (share,) = components
        return SharedArray(self.engine, share, self.frac_bits if frac_bits is None else frac_bits)


class AdditiveSharing(Engine):
    """What engines with additive ring shares have in common: a public constant is added by
    party 0 alone, and integer shares join ring arithmetic by reduction mod 2^64."""

    me: int

    def add_public(self, x: Shared, ring_values: np.ndarray) -> SharedArray:
        assert isinstance(x, SharedArray)
        share = x.share + ring_values if self.me == 0 else x.share + np.zeros_like(ring_values)
        return SharedArray(self, share, x.frac_bits)

    def add(self, x: Shared, y: Any) -> Shared:
        return super().add(x, y.to_ring() if isinstance(y, IntegerShares) else y)

    def sub(self, x: Shared, y: Any) -> Shared:
        return super().sub(x, y.to_ring() if isinstance(y, IntegerShares) else y)


class IntegerShares:
    """This party's exact integer share (object array of Python ints) at scale 2^frac_bits."""

    __slots__ = ("engine", "values", "frac_bits")
    __array_ufunc__ = None

    def __init__(self, engine: Any, values: np.ndarray, frac_bits: int) -> None:
        self.engine = engine
        self.values = np.asarray(values, dtype=object)
        self.frac_bits = int(frac_bits)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    @property
    def size(self) -> int:
        return self.values.size

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: Any) -> "IntegerShares":
        return IntegerShares(self.engine, np.asarray(self.values[index], dtype=object), self.frac_bits)

    def __repr__(self) -> str:
        return f"IntegerShares(shape={self.shape}, frac_bits={self.frac_bits}, party={self.engine.me})"

    def to_ring(self) -> SharedArray:
        """The same value as ring shares (reduce mod 2^64; exact because 2^64 divides nothing away)."""
        return SharedArray(self.engine, encoding.ring_from_ints(self.values), self.frac_bits)

    def __add__(self, other: Any) -> "IntegerShares":
        if isinstance(other, IntegerShares):
            if other.frac_bits != self.frac_bits:
                raise ValueError("integer shares of different scales cannot be added")
            return IntegerShares(self.engine, self.values + other.values, self.frac_bits)
        enc = encoding.encode(other, self.frac_bits, 1 << 4096)
        add = enc if self.engine.me == 0 else enc * 0
        return IntegerShares(self.engine, self.values + add, self.frac_bits)

    __radd__ = __add__

    def __neg__(self) -> "IntegerShares":
        return IntegerShares(self.engine, -self.values, self.frac_bits)

    def __sub__(self, other: Any) -> "IntegerShares":
        return self + (-other if isinstance(other, IntegerShares) else -encoding.as_exact_array(other))

    def __mul__(self, other: Any) -> "IntegerShares":
        arr = encoding.as_exact_array(other)
        if encoding.has_floats(arr):
            raise TypeError("integer shares multiply by integers only")
        return IntegerShares(self.engine, self.values * arr.astype(object), self.frac_bits)

    __rmul__ = __mul__

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        """Open the exact integers (decoded at this scale) to party ``to`` or both."""
        return self.engine.reveal_integer(self, to)
