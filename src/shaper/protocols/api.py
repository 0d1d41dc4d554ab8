"""The one interface every secret-sharing engine implements, and the shared arrays that forward
their operators to it (SecretFlow SPU's kernel set, MPyC's ``sectypes`` idea).

An :class:`Engine` is one party's side of a protocol over Z_2^64 with fixed-point values
(scale 2^frac_bits), and, where it says so in :attr:`Engine.domains`, over odd moduli
(:class:`ModShares`: one prime field, or an RNS basis) and over Z_2 (:class:`XorShares`,
bit-sliced). A :class:`Shared` array is this party's share of a value, tied to its engine:
``x + y``, ``x * 0.5``, ``x * y``, ``x @ w``, ``x.truncate()``, ``x.reveal()`` all call the
engine, so one program runs unchanged on every engine::

    def program(engine, xv, yv):
        x = engine.share(xv, owner=0)
        y = engine.share(yv, owner=1)
        return ((x * y + 1.5) @ w).reveal()

The engines: :class:`~shaper.protocols.reference.Reference` (plaintext, any number of parties:
the oracle and a debug mode), :class:`~shaper.protocols.additive.AdditiveEngine` (additive
sharing among any n >= 2 parties over all three domains, Beaver products with triples from a
pluggable source: GMPFHE's MPC), :class:`~shaper.protocols.hybrid.Hybrid2PC` (that engine for
two parties plus the Paillier boundary: TriGen, H2S/S2H; SHAPER) and
:class:`~shaper.protocols.replicated.Replicated3PC` (three parties, replicated sharing, Araki
et al.). ``tests/protocols/conformance.py`` runs the same programs on each, over every domain
it declares, at 2, 3 and 5 parties.

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
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..arrays import is_sparse
from ..crypto import encoding
from ..errors import ConfigError, ShaperError
from ..kernels.modq import add_mod, lift_public, moduli_array, mul_mod, neg_mod, pack_bits, unpack_bits

__all__ = ["DOMAINS", "Engine", "ModShares", "Shared", "UnsupportedConversion", "XorShares", "public_mask",
           "public_matmul", "stack_bits"]

#: the share domains: fixed point over Z_2^64 (:class:`Shared`), odd moduli (:class:`ModShares`)
#: and bits (:class:`XorShares`)
DOMAINS = ("ring", "mod", "bits")


class UnsupportedConversion(ShaperError, TypeError):
    """The engine has no such conversion (see :attr:`Engine.conversions`)."""


class ModShares:
    """This party's additive shares over a basis of odd moduli (Z_q for one modulus, an RNS basis
    for many): uint64 (..., L), column c reduced mod q_c, x = sum of the parties' shares mod q_c.
    Linear operations are local; products, openings and inputs go to the engine (its
    ``mul_mod``, ``matmul_mod``, ``reveal_mod``, ``add_public_mod``)."""

    __slots__ = ("engine", "moduli", "share")
    __array_ufunc__ = None

    def __init__(self, engine: Any, share: np.ndarray, moduli: Sequence[int]) -> None:
        self.engine = engine
        self.share = np.asarray(share, dtype=np.uint64)
        self.moduli = tuple(moduli)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.share.shape[:-1]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> "ModShares":
        idx = index if isinstance(index, tuple) else (index,)
        return ModShares(self.engine, self.share[idx + (Ellipsis,)] if Ellipsis not in idx else self.share[idx],
                         self.moduli)

    def reshape(self, *shape: Any) -> "ModShares":
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return ModShares(self.engine, self.share.reshape(tuple(dims) + (len(self.moduli),)), self.moduli)

    def limb(self, c: int) -> "ModShares":
        """The shares of limb c alone (a one-modulus basis)."""
        return ModShares(self.engine, self.share[..., c:c + 1], (self.moduli[c],))

    def _same(self, other: "ModShares") -> None:
        if other.moduli != self.moduli:
            raise ConfigError(f"shares over different bases: {self.moduli} and {other.moduli}")

    def __add__(self, other: Any) -> "ModShares":
        qs = moduli_array(self.moduli)
        if isinstance(other, ModShares):
            self._same(other)
            return ModShares(self.engine, add_mod(self.share, other.share, qs), self.moduli)
        return self.engine.add_public_mod(self, other)

    __radd__ = __add__

    def __neg__(self) -> "ModShares":
        return ModShares(self.engine, neg_mod(self.share, moduli_array(self.moduli)), self.moduli)

    def __sub__(self, other: Any) -> "ModShares":
        return self + (-other if isinstance(other, ModShares) else _negate_public(other))

    def __rsub__(self, other: Any) -> "ModShares":
        return (-self) + other

    def __mul__(self, other: Any) -> "ModShares":
        if isinstance(other, ModShares):
            return self.engine.mul_mod(self, other)
        lifted = lift_public(other, self.moduli)
        return ModShares(self.engine, mul_mod(self.share, lifted, self.moduli), self.moduli)

    __rmul__ = __mul__

    def __matmul__(self, other: "ModShares") -> "ModShares":
        return self.engine.matmul_mod(self, other)

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        return self.engine.reveal_mod(self, to)

    def __repr__(self) -> str:
        return f"ModShares(shape={self.shape}, moduli={self.moduli})"




def stack_bits(parts: Sequence[XorShares]) -> XorShares:
    """Bit arrays stacked along a new leading axis, by their own type (authenticated bits keep
    their MACs): the way binary circuits build bit-plane stacks on any engine."""
    return type(parts[0]).stack(parts)


def _negate_public(value: Any) -> Any:
    if isinstance(value, (int, np.integer)):
        return -int(value)
    arr = np.asarray(value)
    return -arr.astype(object) if arr.dtype.kind == "u" else -arr




class XorShares:
    """This party's XOR shares of bit arrays (Z_2), bit-sliced: uint64 words (..., W) holding
    ``bits`` bits along the last axis (bit j is bit j % 64 of word j // 64; padding bits are
    garbage and ignored). XOR and NOT are local; AND and openings go to the engine (``and_bits``,
    ``reveal_bits``, ``xor_public_bits``)."""

    __slots__ = ("bits", "engine", "words")
    __array_ufunc__ = None

    def __init__(self, engine: Any, words: np.ndarray, bits: int) -> None:
        self.engine = engine
        self.words = np.asarray(words, dtype=np.uint64)
        self.bits = int(bits)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.words.shape[:-1] + (self.bits,)

    def __getitem__(self, index: Any) -> "XorShares":
        """Index the leading (non-bit) axes: a row of a bit-plane stack."""
        return XorShares(self.engine, self.words[index], self.bits)

    def _like(self, words: np.ndarray) -> "XorShares":
        return XorShares(self.engine, words, self.bits)

    def __xor__(self, other: Any) -> "XorShares":
        if isinstance(other, XorShares):
            return self._like(self.words ^ other.words)
        return self.engine.xor_public_bits(self, other)

    __rxor__ = __xor__

    def __invert__(self) -> "XorShares":
        return self.engine.xor_public_bits(self, True)

    def __and__(self, other: Any) -> "XorShares":
        if isinstance(other, XorShares):
            return self.engine.and_bits(self, other)
        return self._like(self.words & public_mask(other))

    __rand__ = __and__

    def reveal(self, to: int | None = None) -> np.ndarray | None:
        return self.engine.reveal_bits(self, to)

    @staticmethod
    def stack(parts: Sequence["XorShares"]) -> "XorShares":
        """Stack along a new leading axis (a bit-plane stack)."""
        first = parts[0]
        return XorShares(first.engine, np.stack([p.words for p in parts]), first.bits)

    def lanes(self, start: int, stop: int) -> "XorShares":
        """Bits ``start`` .. ``stop`` - 1 of the bit axis (every leading index alike)."""
        if not 0 <= start < stop <= self.bits:
            raise ValueError(f"lanes {start}..{stop} of {self.bits} bits")
        return XorShares(self.engine, pack_bits(unpack_bits(self.words, self.bits)[..., start:stop]), stop - start)

    @staticmethod
    def join(parts: Sequence["XorShares"]) -> "XorShares":
        """Concatenate along the bit axis (the same leading shape)."""
        first = parts[0]
        return XorShares(first.engine, pack_bits(np.concatenate([unpack_bits(p.words, p.bits) for p in parts], axis=-1)),
                         sum(p.bits for p in parts))

    def __repr__(self) -> str:
        return f"XorShares(shape={self.shape})"




def public_mask(value: Any) -> np.ndarray | np.uint64:
    """A public bit (all lanes) or packed words, as words to AND/XOR with."""
    if isinstance(value, (bool, np.bool_, int, np.integer)) and not isinstance(value, np.ndarray):
        if int(value) not in (0, 1):
            raise ValueError(f"a public bit must be 0 or 1, got {value}")
        return np.uint64(0xFFFFFFFFFFFFFFFF if value else 0)
    return np.asarray(value, dtype=np.uint64)


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
    #: share domains this engine supports (of :data:`DOMAINS`); the others raise
    #: :class:`UnsupportedConversion` naming the engine
    domains: ClassVar[frozenset[str]] = frozenset({"ring"})

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

    # -- other domains: engines that hold them override these and list them in ``domains`` --------
    def share_mod(self, values: Any, *, owner: int, moduli: Any) -> ModShares:
        """Secret-share the owner's integers (any sign) over a basis of odd moduli."""
        raise self._no_domain("mod")

    def reveal_mod(self, x: ModShares, to: int | None = None) -> np.ndarray | None:
        """Open residues (..., L) to ``to`` (all when ``None``)."""
        raise self._no_domain("mod")

    def mul_mod(self, x: ModShares, y: ModShares) -> ModShares:
        raise self._no_domain("mod")

    def share_bits(self, bits: Any, *, owner: int) -> XorShares:
        """Secret-share the owner's bool array (..., N) as XOR shares."""
        raise self._no_domain("bits")

    def reveal_bits(self, x: XorShares, to: int | None = None) -> np.ndarray | None:
        """Open bits (bool (..., N)) to ``to`` (all when ``None``)."""
        raise self._no_domain("bits")

    def and_bits(self, x: XorShares, y: XorShares) -> XorShares:
        raise self._no_domain("bits")

    def _no_domain(self, domain: str) -> UnsupportedConversion:
        have = ", ".join(d for d in DOMAINS if d in self.domains)
        return UnsupportedConversion(f"{type(self).__name__} has no {domain!r} share domain (it supports: {have})")

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
