"""RNS polynomial kernels for RNS-CKKS: one interface, two implementations.

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

import numpy as np


def bit_reverse(n: int) -> np.ndarray:
    """``brv(k)`` for k = 0..n-1 (n a power of two)."""
    bits = n.bit_length() - 1
    k = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        out |= ((k >> b) & 1) << (bits - 1 - b)
    return out


def galois_permutation(n: int, g: int) -> np.ndarray:
    """Index array p with ``sigma_g(A)[k] = A[p[k]]`` for NTT-form rows of length n."""
    if g % 2 == 0 or not 0 < g < 2 * n:
        raise ValueError(f"Galois element must be odd and in (0, {2 * n}), got {g}")
    brv = bit_reverse(n)
    exps = 2 * brv + 1  # evaluation exponent of index k
    where = np.empty(2 * n, dtype=np.int64)
    where[exps] = np.arange(n)
    return where[(g * exps) % (2 * n)]
