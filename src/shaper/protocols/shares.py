"""Shared arrays: this party's additive share of a fixed-point array.

* :class:`SharedArray`: shares over the ring Z_2^64 (numpy uint64), x = x0 + x1 mod 2^64, with a
  fixed-point scale ``frac_bits``. Addition, subtraction and multiplication by public integers are
  local; multiplication by a public real needs a truncation; multiplying two shared arrays and
  revealing go through the context (a two-party protocol, or the plaintext reference backend).
* :class:`IntegerShares`: exact integer shares, x = x0 + x1 over the integers, used where values
  cross the HE boundary (H2S in integer mode) so that truncation can be exact; x0 is statistically
  masked (σ = 40 bits). Convert to ring shares with :meth:`IntegerShares.to_ring`.

The context (``ctx``) is a :class:`~shaper.protocols.hybrid.Hybrid2PC` or
:class:`~shaper.protocols.reference.Reference2PC`; both expose the same operations, so a program
written against one runs on the other (the reference backend is the test oracle).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..crypto import encoding
from . import ring


def _is_sparse(obj: Any) -> bool:
    import sys

    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(obj))


def public_matmul(matrix: Any, ring_values: np.ndarray) -> np.ndarray:
    """``matrix @ ring_values`` mod 2^64 for a public integer matrix (dense or scipy sparse)."""
    if _is_sparse(matrix):
        csr = matrix.tocsr()
        if csr.dtype.kind == "f":
            if not np.all(csr.data == np.round(csr.data)):
                raise TypeError("public matrices applied to ring shares must be integer (encode reals first)")
        data = csr.data.astype(np.int64).view(np.uint64)
        import scipy.sparse as sp

        wrapped = sp.csr_matrix((data, csr.indices, csr.indptr), shape=csr.shape)
        return np.asarray(wrapped @ ring_values, dtype=np.uint64)
    arr = np.asarray(matrix)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.round(arr)):
            raise TypeError("public matrices applied to ring shares must be integer (encode reals first)")
        arr = arr.astype(np.int64)
    return np.matmul(arr.astype(np.int64).view(np.uint64), ring_values)


class SharedArray:
    """This party's share (uint64) of an array shared over Z_2^64 at scale 2^frac_bits."""

    __slots__ = ("ctx", "share", "frac_bits")
    __array_ufunc__ = None

    def __init__(self, ctx: Any, share: np.ndarray, frac_bits: int) -> None:
        self.ctx = ctx
        self.share = np.asarray(share, dtype=np.uint64)
        self.frac_bits = int(frac_bits)

    # -- array protocol ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.share.shape

    @property
    def ndim(self) -> int:
        return self.share.ndim

    @property
    def size(self) -> int:
        return self.share.size

    def __len__(self) -> int:
        return len(self.share)

    def __getitem__(self, index: Any) -> "SharedArray":
        return SharedArray(self.ctx, np.asarray(self.share[index]), self.frac_bits)

    def reshape(self, *shape: Any) -> "SharedArray":
        return SharedArray(self.ctx, self.share.reshape(*shape), self.frac_bits)

    @property
    def T(self) -> "SharedArray":
        return SharedArray(self.ctx, self.share.T, self.frac_bits)

    def copy(self) -> "SharedArray":
        return SharedArray(self.ctx, self.share.copy(), self.frac_bits)

    def __repr__(self) -> str:
        return f"SharedArray(shape={self.shape}, frac_bits={self.frac_bits}, party={self.ctx.me})"

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a shared array is unknown until it is revealed")

    # -- helpers ------------------------------------------------------------------------------
    def _new(self, share: np.ndarray, frac_bits: int | None = None) -> "SharedArray":
        return SharedArray(self.ctx, share, self.frac_bits if frac_bits is None else frac_bits)

    def rescaled(self, frac_bits: int) -> "SharedArray":
        """Same value at a larger scale (a local multiplication by 2^difference)."""
        if frac_bits < self.frac_bits:
            raise ValueError(f"cannot lower the scale from 2^{self.frac_bits} to 2^{frac_bits} without truncation")
        if frac_bits == self.frac_bits:
            return self
        return self._new(self.share * np.uint64(1 << (frac_bits - self.frac_bits)), frac_bits)

    def _public(self, value: Any, frac_bits: int) -> np.ndarray:
        return ring.encode(encoding.as_exact_array(value), frac_bits)

    # -- linear operations (local) ------------------------------------------------------------
    def __add__(self, other: Any) -> "SharedArray":
        if isinstance(other, SharedArray):
            frac = max(self.frac_bits, other.frac_bits)
            a, b = self.rescaled(frac), other.rescaled(frac)
            return self._new(a.share + b.share, frac)
        if isinstance(other, IntegerShares):
            return self + other.to_ring()
        if _is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        pub = self._public(other, self.frac_bits)
        # A public value is added by party 0 only, so the sum of shares moves by it once.
        added = self.share + pub if self.ctx.me == 0 else self.share + np.zeros_like(pub)
        return self._new(added)

    __radd__ = __add__

    def __neg__(self) -> "SharedArray":
        return self._new(np.uint64(0) - self.share)

    def __sub__(self, other: Any) -> "SharedArray":
        if isinstance(other, (SharedArray, IntegerShares)):
            return self + (-other)
        if _is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        pub = self._public(other, self.frac_bits)
        return self._new(self.share - pub if self.ctx.me == 0 else self.share - np.zeros_like(pub))

    def __rsub__(self, other: Any) -> "SharedArray":
        return (-self) + other

    def mul_public(self, value: Any, *, frac_bits: int | None = None, truncate: bool = True) -> "SharedArray":
        """Multiply by public numbers. Integers are exact and keep the scale; reals are encoded at
        ``frac_bits`` (default: this array's scale) and, if ``truncate``, the product is truncated
        back to this array's scale (probabilistic local truncation, see :mod:`ring`)."""
        arr = encoding.as_exact_array(value)
        if not encoding.has_floats(arr):
            k = ring.encode(arr, 0)
            return self._new(self.share * k)
        f = self.frac_bits if frac_bits is None else frac_bits
        product = self._new(self.share * ring.encode(arr, f), self.frac_bits + f)
        return product.truncate(f) if truncate else product

    def __mul__(self, other: Any) -> "SharedArray":
        if isinstance(other, SharedArray):
            return self.ctx.mul(self, other)
        if _is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self.mul_public(other)

    __rmul__ = __mul__

    def __matmul__(self, other: Any) -> "SharedArray":
        if isinstance(other, SharedArray):
            return self.ctx.matmul(self, other)
        if _is_sparse(other):
            return self._new(public_matmul(other.T, self.share.T).T)
        return self._new(public_matmul(np.asarray(other).T, self.share.T).T)

    def __rmatmul__(self, other: Any) -> "SharedArray":
        return self._new(public_matmul(other, self.share))

    def sum(self, axis: int | None = None) -> "SharedArray":
        return self._new(np.asarray(self.share.sum(axis=axis, dtype=np.uint64)))

    # -- protocol operations --------------------------------------------------------------------
    def truncate(self, bits: int | None = None) -> "SharedArray":
        """Divide by 2^bits (default: down to the context's scale) and lower the scale."""
        target = self.ctx.frac_bits if bits is None else self.frac_bits - bits
        shift = self.frac_bits - target
        if shift < 0:
            raise ValueError(f"cannot truncate a value at scale 2^{self.frac_bits} by {bits} bits")
        return self.ctx.truncate(self, shift) if shift else self

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        """Open the value to party ``to`` (or to both when ``None``)."""
        return self.ctx.reveal(self, to)


class IntegerShares:
    """This party's exact integer share (object array of Python ints) at scale 2^frac_bits."""

    __slots__ = ("ctx", "values", "frac_bits")
    __array_ufunc__ = None

    def __init__(self, ctx: Any, values: np.ndarray, frac_bits: int) -> None:
        self.ctx = ctx
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
        return IntegerShares(self.ctx, np.asarray(self.values[index], dtype=object), self.frac_bits)

    def __repr__(self) -> str:
        return f"IntegerShares(shape={self.shape}, frac_bits={self.frac_bits}, party={self.ctx.me})"

    def to_ring(self) -> SharedArray:
        """The same value as ring shares (reduce mod 2^64; exact because 2^64 divides nothing away)."""
        return SharedArray(self.ctx, ring.from_ints(self.values), self.frac_bits)

    def __add__(self, other: Any) -> "IntegerShares":
        if isinstance(other, IntegerShares):
            if other.frac_bits != self.frac_bits:
                raise ValueError("integer shares of different scales cannot be added")
            return IntegerShares(self.ctx, self.values + other.values, self.frac_bits)
        enc = encoding.encode(other, self.frac_bits, 1 << 4096)
        add = enc if self.ctx.me == 0 else enc * 0
        return IntegerShares(self.ctx, self.values + add, self.frac_bits)

    __radd__ = __add__

    def __neg__(self) -> "IntegerShares":
        return IntegerShares(self.ctx, -self.values, self.frac_bits)

    def __sub__(self, other: Any) -> "IntegerShares":
        return self + (-other if isinstance(other, IntegerShares) else -encoding.as_exact_array(other))

    def __mul__(self, other: Any) -> "IntegerShares":
        arr = encoding.as_exact_array(other)
        if encoding.has_floats(arr):
            raise TypeError("integer shares multiply by integers only")
        return IntegerShares(self.ctx, self.values * arr.astype(object), self.frac_bits)

    __rmul__ = __mul__

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        """Open the exact integers (decoded at this scale) to party ``to`` or both."""
        return self.ctx.reveal_integer(self, to)
