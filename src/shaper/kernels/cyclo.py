"""The double-CRT transform of Z_q[X]/Phi_m(X) for odd m, the ring of GHS-style BGV ([HElib]
``DoubleCRT``, ``bluestein.cpp``; shared/research/ghs.md §2 "Transform", §7 step 2): one interface,
two implementations; this module is the family's face (:func:`context` picks the native kernels or
the numpy reference :mod:`shaper.kernels.cyclo_ref`).

The contract, shared bit for bit by the native Rust kernels (``shaper._native.CycloContext``) and
the reference:

* **Ring**: m odd, 3 <= m <= 2^16 + 1; phi = phi(m). A polynomial of degree < phi (the canonical
  representative mod Phi_m) is a row of phi ``uint64`` coefficients reduced mod one prime.
* **Primes** (:func:`primes`): q < 2^62 prime with q = 1 (mod 2 N m), where N is the Bluestein
  NTT length, the least power of two >= 2m - 2 (at least 8; N = 2^17 for m = 53261, so
  q = 1 mod 2^18 * 53261, about 2^33.7: the smallest such prime has 37 bits, and a 22-bit q_0 as
  in HElib-14's chain is impossible). ``primes(m, bits, count)`` returns the ``count`` largest
  such primes of exactly ``bits`` bits, largest first.
* **Roots**: zeta_q, the evaluation root of prime q, is its *smallest* primitive m-th root of
  unity (as an integer in [1, q)).
* **Evaluation order**: the units of Z_m in increasing order (``CycloContext.units``).
* **forward** (coefficients -> values): ``out[l, i] = a_l(zeta_q^units[i]) mod q`` with
  q = ``primes[limbs[l]]``. **inverse** is its exact inverse: the coefficients of the unique
  polynomial of degree < phi with those values. Pointwise products of values are products in
  Z_q[X]/Phi_m.
* **Automorphism** kappa_t: a(X) -> a(X^t), t a unit mod m: kappa_t(a)(zeta^u) = a(zeta^(u t)),
  so the values of kappa_t(a) are ``a_values[:, automorphism_index(t)]`` with
  ``automorphism_index(t)[i]`` = the index of ``units[i] * t mod m`` in ``units``.

Arrays are ``(L, phi)`` C-contiguous ``uint64`` with ``L = len(limbs)`` (default: every prime,
in order); entries must be reduced (ValueError naming the row otherwise), as must shapes, dtypes
and limb indices (ValueError naming the problem). Both directions return new arrays. The native
kernels release the GIL and transform the rows on the native pool in parallel.

**Batched arithmetic** (one call per ring operation, any number of leading axes): ``add``,
``sub``, ``mul`` (new arrays), ``mul_acc`` (``acc += a b`` in place) and ``mul_scalar`` (row l
times ``scalars[l]``) take C-contiguous ``uint64`` arrays of shape ``(..., L, phi)``, row l of
every item reduced mod ``primes[limbs[l]]``; operands have equal shapes, or one of them is
``(L, phi)`` and serves every item (broadcast over the leading axes). Every input is checked to
be reduced (ValueError naming the operand, the row, the item when there are several, and the
entry); the native kernels check each chunk of a row while it is in cache, which costs about
nothing beside the memory traffic, and ``mul_acc`` leaves ``acc`` as it was when it refuses.

**extend** (the centred fast basis extension of Halevi, Polyakov and Shoup with the quotient
estimated in floating point, defined exactly so that both implementations agree bit for bit):
residues ``(len(src), phi)`` of x mod the distinct primes p_i = ``primes[src[i]]``, D = prod p_i,
to x' mod each t = ``primes[dst[j]]``, ``(len(dst), phi)``:

* one source: x' is the residue taken as signed (x > p // 2 becomes x - p), reduced mod t;
* several: y_i = x_i ((D / p_i)^-1 mod p_i) mod p_i; frac = sum_i float64(y_i) / float64(p_i),
  IEEE doubles added left to right in i (starting from the first quotient); u = floor(frac + 0.5);
  x' = sum_i y_i (D / p_i) - u D, reduced mod t.

So x' = x (mod D) and |x'| <= D / 2, except within the float's rounding of the boundary D / 2
(there |x'| <= D / 2 + D).

**divide_round** and **digits** are BGV's two uses of ``extend``, fused (one call each, the same
residues as :class:`shaper.crypto.bgv.ring.Ring`'s step-by-step versions): ``divide_round(a,
limbs, drop)`` is (a - delta) D^-1 on the limbs that ``drop`` leaves, with delta = 2 extend([a
2^-1]_D) in evaluation form (delta = a mod D, delta even: the modulus switch that keeps the
plaintext mod 2); ``digits(a, limbs, groups, target)`` gives, per group G, a's own rows on G
and forward(extend(a's coefficients on G)) on the other target limbs (the key-switching digits).
Every step is exact modular arithmetic but the rounding of ``extend``, so any order of the
steps gives the same residues; the native kernels transform each kept (or target) row and apply
the final products in one pass.

Method (both implementations): Bluestein over the whole length m (HElib's; with m odd an m-th
root suffices, i j = h (i^2 + j^2 - (i - j)^2) with h = 2^-1 mod m), and for the inverse a
reduction mod Phi_m through Psi_m = (X^m - 1) / Phi_m: the quotient is the top of g Psi_m. The
native kernels run the convolutions as negacyclic NTTs of length N (and two shorter ones for the
reduction) on the RNS kernels' NTT; the reference runs them as exact integer products. See
``native/src/cyclo.rs`` and :mod:`shaper.kernels.cyclo_ref` for the derivations.

Nothing here is constant time; the transform runs on public or encrypted data.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .cyclo_ref import (
    MAX_M,
    CycloReference,
    check_m,
    check_primes,
    cofactor,
    cyclotomic,
    ntt_size,
    prime_step,
    smallest_primitive_root,
    units,
)
from .modq import primes_one_mod
from .native import mode as native_mode

try:  # the extension is optional: a source checkout without a build runs on the reference
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["MAX_M", "CycloContext", "CycloReference", "context", "cofactor", "cyclotomic", "native_available",
           "native_selected", "ntt_size", "prime_step", "primes", "smallest_primitive_root", "units"]


def native_available() -> bool:
    """True when the extension is built and has the transform (``CycloContext``)."""
    return _native is not None and hasattr(_native, "CycloContext")


def native_selected() -> bool:
    """True when :func:`context` hands out the native kernels by default (built, and not switched
    off with ``SHAPER_NATIVE=off``)."""
    return native_available() and native_mode() != "off"


def primes(m: int, bits: int, count: int, exclude: Sequence[int] = ()) -> list[int]:
    """The ``count`` largest primes q with 2^(bits-1) < q < 2^bits and q = 1 (mod 2 N m)
    (:func:`prime_step`), largest first, skipping ``exclude``; bits in [2, 62]. Raises
    ``ValueError`` saying how many exist (and the fewest bits that could work) when there are
    fewer than ``count``."""
    m = check_m(m)
    for name, value in (("bits", bits), ("count", count)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {value!r}")
    bits, count = int(bits), int(count)
    if not 2 <= bits <= 62:
        raise ValueError(f"bits must be in [2, 62] (the native primes are below 2^62), got {bits}")
    if count < 0:
        raise ValueError(f"count must be non-negative, got {count}")
    step = prime_step(m)
    out = primes_one_mod(step, bits, count, exclude)
    if len(out) < count:
        raise ValueError(f"only {len(out)} primes of {bits} bits are 1 mod 2 N m = {step} "
                         f"(m = {m}, N = {ntt_size(m)}); {count} were asked for "
                         f"(none has fewer than {step.bit_length() + 1} bits)")
    return out


class CycloContext:
    """The transform for one odd m and a tuple of primes (made by :func:`context`, cached).

    Attributes: ``m``, ``phi``, ``primes`` (tuple), ``roots`` (tuple: zeta per prime, the
    smallest primitive m-th root), ``units`` (int64, read-only: the evaluation order),
    ``ntt_size`` (the native Bluestein length N), ``native`` (which implementation runs)."""

    def __init__(self, m: int, prime_list: tuple[int, ...], impl: Any, native: bool) -> None:
        self.m = m
        self.primes = prime_list
        self.units = units(m)
        self.phi = len(self.units)
        self.ntt_size = ntt_size(m)
        self.native = native
        self.roots = tuple(int(r) for r in impl.roots)
        self._impl = impl
        self._automorphisms: dict[int, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"CycloContext(m={self.m}, phi={self.phi}, primes={list(self.primes)}, native={self.native})"

    def _limbs(self, limbs: Sequence[int] | None) -> list[int]:
        if limbs is None:
            return list(range(len(self.primes)))
        out = []
        for limb in limbs:
            if isinstance(limb, bool) or not isinstance(limb, (int, np.integer)):
                raise ValueError(f"limbs must be prime indices, got {limb!r}")
            limb = int(limb)
            if not 0 <= limb < len(self.primes):
                raise ValueError(f"limb {limb} out of range (the context has {len(self.primes)} primes)")
            out.append(limb)
        if not out:
            raise ValueError("limbs is empty")
        return out

    def _array(self, a: Any, what: str, limbs: list[int]) -> np.ndarray:
        if not isinstance(a, np.ndarray):
            raise ValueError(f"{what} must be a numpy uint64 array, got {type(a).__name__}")
        if a.dtype != np.uint64:
            raise ValueError(f"{what} must be a numpy uint64 array, got dtype {a.dtype}")
        if a.shape != (len(limbs), self.phi):
            raise ValueError(f"{what} has shape {a.shape}, expected ({len(limbs)}, {self.phi}) "
                             f"(len(limbs), phi(m)) for m = {self.m}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous")
        return a

    def forward(self, coeffs: np.ndarray, limbs: Sequence[int] | None = None) -> np.ndarray:
        """Coefficients ``(L, phi)`` (row l reduced mod ``primes[limbs[l]]``) -> values ``(L, phi)``:
        ``[l, i] = a_l(zeta^units[i])``."""
        limbs = self._limbs(limbs)
        return self._impl.forward(self._array(coeffs, "coeffs", limbs), limbs)

    def inverse(self, values: np.ndarray, limbs: Sequence[int] | None = None) -> np.ndarray:
        """Values ``(L, phi)`` -> the coefficients ``(L, phi)`` of the polynomial of degree < phi
        taking them (the canonical representative mod Phi_m)."""
        limbs = self._limbs(limbs)
        return self._impl.inverse(self._array(values, "values", limbs), limbs)

    def automorphism_index(self, t: int) -> np.ndarray:
        """int64 ``(phi,)``, read-only, cached: the values of kappa_t(a) = a(X^t) are
        ``a_values[:, index]``; t must be a unit mod m (any representative, negative too)."""
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise ValueError(f"t must be an integer unit mod m, got {t!r}")
        t = int(t) % self.m
        if np.gcd(t, self.m) != 1:
            raise ValueError(f"t = {t} (mod m) is not a unit mod m = {self.m}: X -> X^t is no automorphism")
        index = self._automorphisms.get(t)
        if index is None:
            position = np.zeros(self.m, dtype=np.int64)
            position[self.units] = np.arange(self.phi, dtype=np.int64)
            index = position[self.units * t % self.m]
            index.flags.writeable = False
            self._automorphisms[t] = index
        return index

    galois_index = automorphism_index

    # -- batched arithmetic -------------------------------------------------------------------------

    def _batch(self, a: Any, what: str, limbs: list[int]) -> np.ndarray:
        if not isinstance(a, np.ndarray):
            raise ValueError(f"{what} must be a numpy uint64 array, got {type(a).__name__}")
        if a.dtype != np.uint64:
            raise ValueError(f"{what} must be a numpy uint64 array, got dtype {a.dtype}")
        if a.ndim < 2 or a.shape[-2:] != (len(limbs), self.phi):
            raise ValueError(f"{what} has shape {a.shape}, expected (..., {len(limbs)}, {self.phi}) "
                             f"(..., len(limbs), phi(m)) for m = {self.m}")
        if not a.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous")
        return a

    @staticmethod
    def _batch_shape(operands: list[tuple[str, np.ndarray]]) -> tuple[int, ...]:
        """The result's shape: the operands' shapes are equal, or some are (L, phi) and broadcast."""
        full = max((x.shape for _, x in operands), key=len)
        for what, x in operands:
            if x.ndim > 2 and x.shape != full:
                raise ValueError(f"{what} has shape {x.shape}, but the batch is {full}: operands must have equal "
                                 f"shapes or be (len(limbs), phi)")
        return full

    def _binary(self, name: str, a: Any, b: Any, limbs: Sequence[int] | None) -> np.ndarray:
        limbs = self._limbs(limbs)
        a, b = self._batch(a, "a", limbs), self._batch(b, "b", limbs)
        self._batch_shape([("a", a), ("b", b)])
        return getattr(self._impl, name)(a, b, limbs)

    def add(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int] | None = None) -> np.ndarray:
        """a + b mod each row's prime: ``(..., L, phi)`` operands of equal shapes, or one of them
        ``(L, phi)`` broadcast over the other's leading axes; a new array of the larger shape."""
        return self._binary("add", a, b, limbs)

    def sub(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int] | None = None) -> np.ndarray:
        """a - b mod each row's prime (shapes as for :meth:`add`)."""
        return self._binary("sub", a, b, limbs)

    def mul(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int] | None = None) -> np.ndarray:
        """a b mod each row's prime (shapes as for :meth:`add`): the ring product of values."""
        return self._binary("mul", a, b, limbs)

    def mul_acc(self, acc: np.ndarray, a: np.ndarray, b: np.ndarray, limbs: Sequence[int] | None = None) -> None:
        """In place: ``acc += a b`` mod each row's prime. acc is ``(..., L, phi)`` and writable; a
        and b have acc's shape or ``(L, phi)`` and must not overlap acc. acc is left unchanged when
        the call is refused."""
        limbs = self._limbs(limbs)
        acc, a, b = self._batch(acc, "acc", limbs), self._batch(a, "a", limbs), self._batch(b, "b", limbs)
        if not acc.flags.writeable:
            raise ValueError("acc must be a writable array")
        for what, x in (("a", a), ("b", b)):
            if np.may_share_memory(acc, x):
                raise ValueError(f"acc shares memory with {what}: pass a copy")
        if self._batch_shape([("acc", acc), ("a", a), ("b", b)]) != acc.shape:
            raise ValueError(f"acc has shape {acc.shape}, smaller than a's {a.shape} or b's {b.shape}: "
                             f"acc must hold the whole result")
        self._impl.mul_acc(acc, a, b, limbs)

    def mul_scalar(self, a: np.ndarray, scalars: Sequence[int], limbs: Sequence[int] | None = None) -> np.ndarray:
        """Row l of a ``(..., L, phi)`` times ``scalars[l]``, one integer per limb, reduced mod
        ``primes[limbs[l]]`` (ValueError naming the scalar otherwise)."""
        limbs = self._limbs(limbs)
        a = self._batch(a, "a", limbs)
        if isinstance(scalars, np.ndarray):
            scalars = scalars.tolist()
        values = []
        for i, s in enumerate(scalars):
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                raise ValueError(f"scalars[{i}] must be an integer, got {s!r}")
            if not 0 <= int(s) < self.primes[limbs[min(i, len(limbs) - 1)]]:
                raise ValueError(f"scalars[{i}] = {s} is not reduced mod its prime "
                                 f"{self.primes[limbs[min(i, len(limbs) - 1)]]}")
            values.append(int(s))
        if len(values) != len(limbs):
            raise ValueError(f"{len(values)} scalars for {len(limbs)} limbs")
        return self._impl.mul_scalar(a, values, limbs)

    def extend(self, residues: np.ndarray, src: Sequence[int], dst: Sequence[int]) -> np.ndarray:
        """The centred fast basis extension (Halevi-Polyakov-Shoup with the quotient estimated in
        float64), the contract's ``extend``: x given by ``residues`` ``(len(src), phi)`` (row i
        reduced mod p_i = ``primes[src[i]]``, src distinct; D = prod p_i) -> x' mod each
        ``primes[dst[j]]``, ``(len(dst), phi)``, with x' = x mod D and |x'| <= D/2 except at the
        float's edge (then |x'| <= D/2 + D). See the module docstring for the exact arithmetic."""
        src = self._limb_list(src, "src")
        dst = self._limb_list(dst, "dst", allow_empty=True)
        if len(set(src)) != len(src):
            twice = next(x for i, x in enumerate(src) if x in src[:i])
            raise ValueError(f"src names limb {twice} twice (the sources' primes must be distinct)")
        return self._impl.extend(self._array(residues, "residues", src), src, dst)

    def divide_round(self, a: np.ndarray, limbs: Sequence[int] | None, drop: Sequence[int]) -> np.ndarray:
        """Exact division by D = the product of ``drop``'s primes with rounding that keeps the
        plaintext mod 2 (BGV's modulus switch; ``shaper.crypto.bgv.ring.Ring.divide_round``, bit
        for bit): ``a`` ``(..., L, phi)`` in evaluation form over ``limbs`` (distinct; default
        every prime) -> ``(..., len(keep), phi)`` over keep = limbs without drop (in order), equal
        to (a - delta) D^-1 with delta = 2 extend([a 2^-1]_D) in evaluation form (so delta = a
        mod D, delta = 0 mod 2). ``drop``: distinct limbs among ``limbs``, leaving at least one."""
        limbs = self._limb_list(self._limbs(limbs), "limbs", distinct=True)
        drop = self._limb_list(drop, "drop", distinct=True)
        missing = [x for x in drop if x not in limbs]
        if missing:
            raise ValueError(f"drop names limb {missing[0]}, which is not among the limbs")
        if len(drop) == len(limbs):
            raise ValueError("drop must leave at least one limb")
        return self._impl.divide_round(self._batch(a, "a", limbs), limbs, drop)

    def digits(self, a: np.ndarray, limbs: Sequence[int], groups: Sequence[Sequence[int]],
               target: Sequence[int]) -> np.ndarray:
        """Key-switching digits (``shaper.crypto.bgv.ring.Ring.digits``, bit for bit): ``a``
        ``(len(limbs), phi)`` in evaluation form over ``limbs`` (distinct); ``groups``: disjoint
        non-empty lists of limbs, each among ``limbs`` and ``target`` (distinct limbs) ->
        ``(len(groups), len(target), phi)``: for group G, target row t is a's own row where t is
        in G, and elsewhere forward(extend(a's coefficients on G, G, the other target limbs))."""
        limbs = self._limb_list(limbs, "limbs", distinct=True)
        target = self._limb_list(target, "target", distinct=True)
        if isinstance(groups, (str, bytes)) or len(groups) == 0:
            raise ValueError("groups is empty")
        checked: list[list[int]] = []
        seen: set[int] = set()
        for gi, group in enumerate(groups):
            group = self._limb_list(group, f"groups[{gi}]")
            for x in group:
                if x not in limbs:
                    raise ValueError(f"groups[{gi}] names limb {x}, which is not among the limbs")
                if x not in target:
                    raise ValueError(f"groups[{gi}] names limb {x}, which is not among the target limbs")
                if x in seen:
                    raise ValueError(f"groups[{gi}] names limb {x}, which an earlier group (or this one) has")
                seen.add(x)
            checked.append(group)
        return self._impl.digits(self._array(a, "a", limbs), limbs, checked, target)

    def _limb_list(self, limbs: Sequence[int], what: str, allow_empty: bool = False,
                   distinct: bool = False) -> list[int]:
        if limbs is None or isinstance(limbs, (str, bytes)):
            raise ValueError(f"{what} must be a list of prime indices, got {limbs!r}")
        if allow_empty and len(limbs) == 0:
            return []
        try:
            out = self._limbs(limbs)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
        if distinct and len(set(out)) != len(out):
            twice = next(x for i, x in enumerate(out) if x in out[:i])
            raise ValueError(f"{what} names limb {twice} twice")
        return out


def context(m: int, primes: Sequence[int], *, native: bool | None = None) -> CycloContext:
    """The transform for odd m over ``primes`` (each prime, < 2^62, 1 mod :func:`prime_step`,
    distinct: ValueError naming the prime otherwise), cached per (m, primes, native). ``native=True``
    insists on the extension (``RuntimeError`` when it is missing), ``native=False`` takes the
    reference; the default follows ``SHAPER_NATIVE`` (``off`` means the reference)."""
    if native is None:
        native = native_selected()
    elif native and not native_available():
        raise RuntimeError("the native extension shaper._native is not built or lacks CycloContext")
    m = check_m(m)
    return _context(m, check_primes(m, primes), bool(native))


@functools.lru_cache(maxsize=16)
def _context(m: int, prime_list: tuple[int, ...], native: bool) -> CycloContext:
    impl = _native.CycloContext(m, list(prime_list)) if native else CycloReference(m, prime_list)
    return CycloContext(m, prime_list, impl, native)

