"""The one interface every secret-sharing engine implements, and the shared arrays that forward
their operators to it (SecretFlow SPU's kernel set, MPyC's ``sectypes`` idea).

An :class:`Engine` is one party's side of a protocol over Z_2^64 with fixed-point values
(scale 2^frac_bits). A :class:`Shared` array is this party's share of a value, tied to its engine:
``x + y``, ``x * 0.5``, ``x * y``, ``x @ w``, ``x.truncate()``, ``x.reveal()`` all call the
engine, so one program runs unchanged on every engine::

    def program(engine, xv, yv):
        x = engine.share(xv, owner=0)
        y = engine.share(yv, owner=1)
        return ((x * y + 1.5) @ w).reveal()

The engines: :class:`~shaper.protocols.reference.Reference` (plaintext, any number of parties:
the oracle and a debug mode), :class:`~shaper.protocols.hybrid.Hybrid2PC` (two parties, additive
sharing + Paillier, SHAPER) and :class:`~shaper.protocols.replicated.Replicated3PC` (three
parties, replicated sharing, Araki et al.). ``tests/protocols/conformance.py`` runs the same
programs on each.

What every engine provides:

====================  =======================================================================
``share``             secret-share an array held by ``owner`` (others' values are ignored)
``reveal``            open to one party or all, decoded at the array's scale
``reveal_ring``       open to one party or all, as raw ring elements (uint64)
``add``, ``sub``      shared ± shared, shared ± public (local)
``neg``               −shared (local)
``mul_public``        shared × public integers (exact, local) or reals (then truncated)
``mul``               shared × shared, element-wise (interactive; truncated back by default)
``matmul``            shared @ shared (interactive), shared @ public and public @ shared (local)
``truncate``          divide by 2^bits, lowering the scale
``conversions``       names of the conversions the engine supports (``h2s``, ``s2h``, ...)
====================  =======================================================================

Each engine states its security model and what each party learns in its own module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar

import numpy as np

from ..arrays import is_sparse
from ..crypto import encoding
from ..errors import ShaperError

__all__ = ["Engine", "Shared", "UnsupportedConversion", "public_matmul"]


class UnsupportedConversion(ShaperError, TypeError):
    """The engine has no such conversion (see :attr:`Engine.conversions`)."""


def public_matmul(matrix: Any, ring_values: np.ndarray) -> np.ndarray:
    """``matrix @ ring_values`` mod 2^64 for a public integer matrix (dense or scipy sparse)."""
    if is_sparse(matrix):
        import scipy.sparse as sp  # present: ``matrix`` is one of its types

        csr = matrix.tocsr()
        if csr.dtype.kind == "f" and not np.all(csr.data == np.round(csr.data)):
            raise TypeError("public matrices applied to ring shares must be integer (encode reals first)")
        data = csr.data.astype(np.int64).view(np.uint64)
        wrapped = sp.csr_matrix((data, csr.indices, csr.indptr), shape=csr.shape)
        return np.asarray(wrapped @ ring_values, dtype=np.uint64)
    arr = np.asarray(matrix)
    if arr.dtype.kind == "f":
        if not np.all(arr == np.round(arr)):
            raise TypeError("public matrices applied to ring shares must be integer (encode reals first)")
        arr = arr.astype(np.int64)
    return np.matmul(arr.astype(np.int64).view(np.uint64), ring_values)


class Shared(ABC):
    """This party's share of an array over Z_2^64 at scale 2^frac_bits, tied to its engine.

    A subclass says how its share is laid out: :attr:`components` (the uint64 arrays of one
    shape that make up this party's share: one for additive sharing, two for replicated) and
    :meth:`with_components`. Shape operations apply to every component; arithmetic goes to the
    engine."""

    __slots__ = ("engine", "frac_bits")
    __array_ufunc__ = None  # numpy defers to our reflected operators

    engine: "Engine"
    frac_bits: int

    @property
    @abstractmethod
    def components(self) -> tuple[np.ndarray, ...]:
        """The uint64 arrays (one shape) that hold this party's share."""

    @abstractmethod
    def with_components(self, components: tuple[np.ndarray, ...], frac_bits: int | None = None) -> "Shared":
        """A new shared array of the same type and engine (scale unchanged unless given)."""

    def map(self, fn: Callable[[np.ndarray], np.ndarray], frac_bits: int | None = None) -> "Shared":
        """Apply a local, linear numpy operation to every component."""
        return self.with_components(tuple(np.asarray(fn(c)) for c in self.components), frac_bits)

    # -- array protocol ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.components[0].shape

    @property
    def ndim(self) -> int:
        return self.components[0].ndim

    @property
    def size(self) -> int:
        return self.components[0].size

    def __len__(self) -> int:
        return len(self.components[0])

    def __getitem__(self, index: Any) -> "Shared":
        return self.map(lambda c: c[index])

    def reshape(self, *shape: Any) -> "Shared":
        return self.map(lambda c: c.reshape(*shape))

    @property
    def T(self) -> "Shared":
        return self.map(lambda c: c.T)

    def copy(self) -> "Shared":
        return self.map(np.copy)

    def sum(self, axis: int | None = None) -> "Shared":
        return self.map(lambda c: c.sum(axis=axis, dtype=np.uint64))

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a shared array is unknown until it is revealed")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, frac_bits={self.frac_bits}, party={self.engine.me})"

    def rescaled(self, frac_bits: int) -> "Shared":
        """Same value at a larger scale (a local multiplication by 2^difference)."""
        if frac_bits < self.frac_bits:
            raise ValueError(f"cannot lower the scale from 2^{self.frac_bits} to 2^{frac_bits} without truncation")
        if frac_bits == self.frac_bits:
            return self
        k = np.uint64(1 << (frac_bits - self.frac_bits))
        return self.map(lambda c: c * k, frac_bits)

    # -- operators: all forwarded to the engine ------------------------------------------------
    def __add__(self, other: Any) -> "Shared":
        if is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self.engine.add(self, other)

    __radd__ = __add__

    def __neg__(self) -> "Shared":
        return self.engine.neg(self)

    def __sub__(self, other: Any) -> "Shared":
        if is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self.engine.sub(self, other)

    def __rsub__(self, other: Any) -> "Shared":
        return self.engine.add(self.engine.neg(self), other)

    def mul_public(self, value: Any, *, frac_bits: int | None = None, truncate: bool = True) -> "Shared":
        """See :meth:`Engine.mul_public`."""
        return self.engine.mul_public(self, value, frac_bits=frac_bits, truncate=truncate)

    def __mul__(self, other: Any) -> "Shared":
        if isinstance(other, Shared):
            return self.engine.mul(self, other)
        if is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self.engine.mul_public(self, other)

    __rmul__ = __mul__

    def __matmul__(self, other: Any) -> "Shared":
        if isinstance(other, Shared):
            return self.engine.matmul(self, other)
        return self.engine.matmul_public(self, other, left=False)

    def __rmatmul__(self, other: Any) -> "Shared":
        return self.engine.matmul_public(self, other, left=True)

    def truncate(self, bits: int | None = None) -> "Shared":
        """Divide by 2^bits (default: down to the engine's scale) and lower the scale."""
        target = self.engine.frac_bits if bits is None else self.frac_bits - bits
        shift = self.frac_bits - target
        if shift < 0:
            raise ValueError(f"cannot truncate a value at scale 2^{self.frac_bits} by {bits} bits")
        return self.engine.truncate(self, shift) if shift else self

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        """Open the value to party ``to`` (or to all when ``None``), decoded at its scale."""
        return self.engine.reveal(self, to)


class Engine(ABC):
    """One party's side of a secret-sharing protocol over Z_2^64 (see the module notes).

    Subclasses implement the interactive steps (``share``, ``reveal_ring``, ``mul``, ``matmul``,
    ``truncate``) and :meth:`add_public` (how a public constant enters the shares); the local
    linear operations are written once here in terms of :attr:`Shared.components`."""

    #: this party's index among the computing parties
    me: int
    #: number of computing parties
    parties: int
    #: default fixed-point scale of :meth:`share` and target scale of ``truncate()``
    frac_bits: int
    #: conversions this engine supports, by method name
    conversions: ClassVar[frozenset[str]] = frozenset()

    # -- interactive steps ------------------------------------------------------------------------
    @abstractmethod
    def share(self, values: Any, *, owner: int, frac_bits: int | None = None) -> Shared:
        """Secret-share ``values`` held by party ``owner`` (the others' ``values`` are ignored)
        at scale 2^frac_bits (default: the engine's)."""

    @abstractmethod
    def reveal_ring(self, x: Shared, to: int | None = None, **options: Any) -> np.ndarray | None:
        """Open ``x`` as ring elements (uint64) to party ``to`` (all when ``None``); ``None`` at
        the parties that learn nothing."""

    @abstractmethod
    def mul(self, x: Shared, y: Shared, *, truncate: bool = True) -> Shared:
        """Element-wise product; with ``truncate``, brought back to x's scale."""

    @abstractmethod
    def matmul(self, x: Shared, y: Shared, *, truncate: bool = True) -> Shared:
        """Product of shared (m, k) and (k, n) arrays; with ``truncate``, back to x's scale."""

    @abstractmethod
    def truncate(self, x: Shared, bits: int) -> Shared:
        """x / 2^bits at scale 2^(x.frac_bits - bits): floor, or one more (protocol-dependent
        error rates are stated in each engine's module)."""

    @abstractmethod
    def add_public(self, x: Shared, ring_values: np.ndarray) -> Shared:
        """x + c for public ring elements c (already encoded at x's scale; broadcastable)."""

    # -- written once for every engine --------------------------------------------------------
    def reveal(self, x: Shared, to: int | None = None, **options: Any) -> np.ndarray | None:
        """Open ``x`` to party ``to`` (all when ``None``), decoded at its scale: int64 for scale
        0, float64 otherwise. ``options`` (e.g. a message ``tag``) go to :meth:`reveal_ring`."""
        raw = self.reveal_ring(x, to, **options)
        return None if raw is None else encoding.ring_decode(raw, x.frac_bits)

    def add(self, x: Shared, y: Any) -> Shared:
        """x + y for shared or public y (scales aligned to the larger one)."""
        if isinstance(y, Shared):
            self._same_engine(y)
            frac = max(x.frac_bits, y.frac_bits)
            a, b = x.rescaled(frac), y.rescaled(frac)
            return a.with_components(tuple(p + q for p, q in zip(a.components, b.components)), frac)
        return self.add_public(x, encoding.ring_encode(encoding.as_exact_array(y), x.frac_bits))

    def neg(self, x: Shared) -> Shared:
        return x.map(lambda c: np.uint64(0) - c)

    def sub(self, x: Shared, y: Any) -> Shared:
        if isinstance(y, Shared):
            return self.add(x, self.neg(y))
        pub = encoding.ring_encode(encoding.as_exact_array(y), x.frac_bits)
        return self.add_public(x, np.uint64(0) - pub)

    def mul_public(self, x: Shared, value: Any, *, frac_bits: int | None = None, truncate: bool = True) -> Shared:
        """Multiply by public numbers. Integers are exact and keep the scale; reals are encoded
        at ``frac_bits`` (default: x's scale) and, if ``truncate``, the product is truncated
        back to x's scale."""
        arr = encoding.as_exact_array(value)
        if not encoding.has_floats(arr):
            k = encoding.ring_encode(arr, 0)
            return x.map(lambda c: c * k)
        f = x.frac_bits if frac_bits is None else frac_bits
        k = encoding.ring_encode(arr, f)
        product = x.map(lambda c: c * k, x.frac_bits + f)
        return product.truncate(f) if truncate else product

    def matmul_public(self, x: Shared, matrix: Any, *, left: bool) -> Shared:
        """``matrix @ x`` (``left``) or ``x @ matrix`` for a public integer matrix (local)."""
        if left:
            return x.map(lambda c: public_matmul(matrix, c))
        transposed = matrix.T if is_sparse(matrix) else np.asarray(matrix).T
        return x.map(lambda c: public_matmul(transposed, c.T).T)

    # -- conversions: engines that support one override it and list it in ``conversions`` ------
    def h2s(self, *args: Any, **options: Any) -> Any:
        """Ciphertexts -> shares (engines with an HE boundary)."""
        raise self._unsupported("h2s")

    def s2h(self, *args: Any, **options: Any) -> Any:
        """Shares -> ciphertexts (engines with an HE boundary)."""
        raise self._unsupported("s2h")

    @staticmethod
    def check_matmul(x: Shared, y: Shared) -> tuple[int, int, int]:
        """(m, k, n) of a shared (m, k) @ (k, n) product; raises ``ValueError`` otherwise."""
        if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
            raise ValueError(f"matmul needs (m, k) @ (k, n), got {x.shape} @ {y.shape}")
        return x.shape[0], x.shape[1], y.shape[1]

    def _same_engine(self, y: Shared) -> None:
        if y.engine is not self:
            raise ValueError("shared arrays from different engines cannot be combined")

    def _unsupported(self, name: str) -> UnsupportedConversion:
        have = ", ".join(sorted(self.conversions)) or "none"
        return UnsupportedConversion(f"{type(self).__name__} has no {name} conversion (it supports: {have})")
