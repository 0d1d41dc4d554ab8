"""RNS polynomial kernels for RNS-CKKS: one interface, two implementations; this module is the
family's face (:func:`rns_context` picks the native kernels or the numpy reference).

A polynomial of R_Q = Z_Q[X]/(X^N + 1) with Q = q_0 q_1 ... q_r is held as a ``uint64`` array of
shape ``(r + 1, N)``: row ``i`` is the polynomial reduced mod the prime ``mods[i]`` of a
:class:`RnsContext`. Arrays may carry leading axes (``(..., rows, N)``, e.g. a ciphertext's two
components ``(2, rows, N)``); every kernel applies the same ``mods`` to the last-but-one axis.
Entries are always fully reduced (``0 <= x < q``) on input and output; kernels raise
``ValueError`` naming the row when an input is not.

The contract, shared bit for bit by the native Rust kernels (``shaper._native.RnsContext``)
and the numpy reference (:mod:`shaper.kernels.rns_ref`, the test oracle):

* **Primes**: each prime q is < 2^62 and q = 1 (mod 2N). ``psi`` of a prime is its *smallest*
  primitive 2N-th root of unity (``psi^N = -1 mod q``) unless the caller passes roots.
* **NTT** (``ntt``, in place): row values ``a_0..a_{N-1}`` (coefficients) become
  ``A[k] = a(psi^(2 * brv(k) + 1)) mod q`` for k = 0..N-1, where ``brv`` reverses the
  log2(N) bits of k (the natural output order of a Cooley–Tukey negacyclic NTT with
  bit-reversed powers of psi). ``intt`` is its exact inverse. Pointwise products in this
  domain are negacyclic polynomial products.
* **Automorphism** ``X -> X^g`` (g odd, 0 < g < 2N) on NTT-form rows: since
  sigma_g(a)(psi^e) = a(psi^(g e)), ``out[k] = A[k']`` where ``2 brv(k') + 1 = g (2 brv(k) + 1)
  mod 2N``. :func:`galois_permutation` gives the index array ``k -> k'``.
* **Centred lift**: a residue x mod q stands for x if x <= (q - 1) / 2, else x - q.
* **divide_round_last** (rescale and mod-down): rows ``0..r`` of an NTT-form array over
  ``mods = [m_0..m_r]``; with t = the centred lift of ``intt(row r)``, row i < r becomes
  ``(A_i - ntt(t mod m_i)) * m_r^{-1} mod m_i``; row r is dropped. This is round(a / m_r)
  coefficient-wise (ties cannot occur: m_r is odd).
* **decompose** (key-switching digits, one digit per ciphertext prime, one special prime):
  input NTT-form rows over ``mods = [m_0..m_l]`` (leading axes allowed) and the special prime
  index ``sp``; output shape ``(..., l + 1, l + 2, N)``: digit j is the centred lift of
  ``intt(row j)`` reduced mod every prime of ``mods + [sp]`` and NTT'd (row j of digit j equals
  input row j).
* **key_switch**: digits ``D`` (from ``decompose``) and a switching key ``K`` of shape
  ``(D, 2, len(primes), N)`` indexed by *context* prime (digit, component b/a, row), NTT form;
  output ``(2, l + 1, N)`` = ``divide_round_last`` over ``mods + [sp]`` of
  ``sum_j sigma_g(D_j) * K[mods[j], c, mods + [sp]]`` (so D > max(mods)), where sigma_g is the
  automorphism (g = 1: none) — the hoisted-rotation form. With the CKKS basis
  [q_0..q_L, p] and ``mods = [0..l]`` this is key digits 0..l on rows 0..l and L + 1.

Rules both implementations enforce: N a power of two in 8..2^17; primes distinct, below 2^62,
1 mod 2N; ``mul_scalar`` scalars reduced; ``ntt_primes(n, bits, ...)`` returns primes of exactly
``bits`` bits (2^(bits-1) < q < 2^bits, as SEAL).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .modq import bit_reverse, galois_permutation, is_prime, ntt_primes, smallest_root
from .native import mode as native_mode
from .rns_ref import RnsReference

try:  # the extension is optional: a source checkout without a build runs on the reference
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["RnsReference", "bit_reverse", "galois_permutation", "is_prime", "native_available", "native_selected",
           "ntt_primes", "rns_context", "smallest_root"]


def native_available() -> bool:
    """True when the extension is built and has the RNS kernels (``RnsContext``)."""
    return _native is not None and hasattr(_native, "RnsContext")


def native_selected() -> bool:
    """True when :func:`rns_context` hands out the native kernels by default (built, and not
    switched off with ``SHAPER_NATIVE=off``)."""
    return native_available() and native_mode() != "off"


def rns_context(n: int, primes: Sequence[int], roots: Sequence[int] | None = None, *, native: bool | None = None) -> Any:
    """RNS kernels for ``primes``: the native ``RnsContext`` where the extension has it, else
    :class:`~shaper.kernels.rns_ref.RnsReference`. ``native=True`` insists on the extension
    (``RuntimeError`` when it is missing), ``native=False`` takes the reference; the default
    follows ``SHAPER_NATIVE`` (``off`` means the reference)."""
    if native is None:
        native = native_selected()
    elif native and not native_available():
        raise RuntimeError("the native extension shaper._native is not built or lacks RnsContext")
    if native:
        return _native.RnsContext(n, list(primes), None if roots is None else list(roots))
    return RnsReference(n, primes, roots)


