"""Arithmetic mod small odd moduli, the family below the secret-sharing engines, the triple
sources and the RNS kernels: residues are ``uint64`` arrays (..., L), column c reduced mod the
basis' modulus q_c < 2^62, and every function here is batched over whole arrays.

* :func:`basis` checks a basis; :func:`lift_public` reduces public integers (any sign) into it;
* :func:`add_mod`, :func:`sub_mod`, :func:`neg_mod` (branch-free numpy), :func:`mul_mod` and
  :func:`matmul_mod` (native Montgomery kernels; exact Python integers where the extension is
  not built), :class:`Ring` (the same over a basis where modulus 0 means 2^64);
* :func:`pack_bits` / :func:`unpack_bits`: bit-sliced words, 64 bits per ``uint64``;
* :func:`is_prime` (the one primality test), :func:`ntt_primes` and :func:`smallest_root` (the
  NTT-friendly primes q = 1 mod 2n of the RNS kernels, SEAL's rule), :func:`bit_reverse` and
  :func:`galois_permutation` (the NTT's index maps, :mod:`shaper.kernels.rns` has the contract).

Nothing here is constant time; the engines use it on shares and public values.
"""

from __future__ import annotations

from typing import Any, Sequence

import gmpy2
import numpy as np

from ..errors import ConfigError

try:  # optional: a checkout without a build computes exactly with Python integers
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["Ring", "add_mod", "basis", "bit_reverse", "galois_permutation", "is_prime", "lift_public", "matmul_mod", "moduli_array", "mul_mod",
           "neg_mod", "ntt_primes", "pack_bits", "prime_factors", "primes_one_mod", "smallest_root", "sub_mod",
           "unpack_bits"]

def basis(moduli: int | Sequence[int]) -> tuple[int, ...]:
    """A checked basis: odd moduli 3 <= q < 2^62, distinct."""
    mods = (int(moduli),) if isinstance(moduli, (int, np.integer)) else tuple(int(q) for q in moduli)
    if not mods:
        raise ConfigError("a basis needs at least one modulus")
    for q in mods:
        if q < 3 or q % 2 == 0 or q >= 1 << 62:
            raise ConfigError(f"modulus {q} must be odd, at least 3 and below 2^62 (Z_2: use bit shares; "
                              "Z_2^64: the engine's ring shares)")
    if len(set(mods)) != len(mods):
        raise ConfigError(f"the basis repeats a modulus: {mods}")
    return mods


def moduli_array(mods: Sequence[int]) -> np.ndarray:
    """The moduli as a uint64 array (broadcasts against residues (..., L))."""
    return np.asarray(mods, dtype=np.uint64)


def lift_public(values: Any, mods: Sequence[int]) -> np.ndarray:
    """Public integers (Python ints or an integer array, any sign) reduced into every modulus:
    uint64 (..., L)."""
    if isinstance(values, (int, np.integer)):
        return np.array([int(values) % q for q in mods], dtype=np.uint64)
    arr = np.asarray(values)
    if arr.dtype == object:
        flat = [[int(v) % q for q in mods] for v in arr.ravel()]
        return np.array(flat, dtype=np.uint64).reshape(arr.shape + (len(mods),))
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)[..., None] % moduli_array(mods)
    if arr.dtype.kind in "ib":
        signed = arr.astype(np.int64)[..., None]
        return (signed % np.asarray(mods, dtype=np.int64)).astype(np.uint64)
    raise TypeError(f"public values for a prime-field basis must be integers, got dtype {arr.dtype}")


def add_mod(x: np.ndarray, y: np.ndarray, qs: np.ndarray) -> np.ndarray:
    s = np.asarray(x + y)  # both < q < 2^62: no wrap
    # s - q wraps to above 2^63 exactly when s < q, so the minimum is the reduced sum
    return np.minimum(s, s - qs, out=s)


def sub_mod(x: np.ndarray, y: np.ndarray, qs: np.ndarray) -> np.ndarray:
    d = np.asarray(x - y)  # wraps to above 2^63 exactly when x < y; then d + q wraps back below q
    return np.minimum(d, d + qs, out=d)


def neg_mod(x: np.ndarray, qs: np.ndarray) -> np.ndarray:
    return np.where(x == 0, x, qs - x)


class Ring:
    """Add / subtract / negate residues uint64 (..., L) over a basis in which modulus 0 means
    2^64 (wrapping uint64 arithmetic); odd moduli use :func:`add_mod` and :func:`neg_mod`."""

    def __init__(self, moduli: Sequence[int]) -> None:
        self.moduli = list(moduli)
        self.wrap = all(q == 0 for q in self.moduli)
        if not self.wrap and any(q == 0 for q in self.moduli):
            raise ValueError("a basis cannot mix 2^64 with odd moduli")
        self.qs = np.asarray(self.moduli, dtype=np.uint64)

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x + y if self.wrap else add_mod(x, y, self.qs)

    def neg(self, x: np.ndarray) -> np.ndarray:
        return np.uint64(0) - x if self.wrap else neg_mod(x, self.qs)

    def sub(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.add(x, self.neg(y))

    def double(self, x: np.ndarray) -> np.ndarray:
        return self.add(x, x)

    def scale(self, x: np.ndarray, c: int) -> np.ndarray:
        """x times the public integer c (any sign), in one pass (native Montgomery for odd moduli)."""
        if self.wrap:
            return x * np.uint64(c % (1 << 64))
        return mul_mod(x, np.asarray([c % q for q in self.moduli], dtype=np.uint64), self.moduli)

    def lift_bits(self, bits: np.ndarray) -> np.ndarray:
        """0/1 values (...,) as residues (..., L)."""
        return np.broadcast_to(bits.astype(np.uint64)[..., None], bits.shape + (len(self.moduli),)).copy()


def mul_mod(x: np.ndarray, y: np.ndarray, mods: Sequence[int]) -> np.ndarray:
    """x * y element-wise mod the basis (native Montgomery kernel; Python integers, exact and
    slow, where the extension is not built)."""
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    L = len(mods)
    a = np.ascontiguousarray(np.broadcast_to(x, shape), dtype=np.uint64).reshape(-1, L)
    b = np.ascontiguousarray(np.broadcast_to(y, shape), dtype=np.uint64).reshape(-1, L)
    if _native is None:
        prod = a.astype(object) * b.astype(object) % np.asarray(mods, dtype=object)
        return prod.astype(np.uint64).reshape(shape)
    return _native.mod_mul(a, b, moduli_array(mods)).reshape(shape)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """A bool/0-1 array (..., N) as words (..., ceil(N / 64)) (bit j -> word j // 64, bit j % 64)."""
    arr = np.asarray(bits).astype(bool)
    n = arr.shape[-1]
    pad = (-n) % 64
    if pad:
        arr = np.concatenate([arr, np.zeros(arr.shape[:-1] + (pad,), bool)], axis=-1)
    packed = np.packbits(arr, axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view(np.uint64).reshape(arr.shape[:-1] + ((n + pad) // 64,))


def unpack_bits(words: np.ndarray, n: int) -> np.ndarray:
    """The first n bits of words (..., W) as a bool array (..., n)."""
    w = np.ascontiguousarray(words, dtype=np.uint64)
    raw = np.unpackbits(w.view(np.uint8).reshape(w.shape[:-1] + (8 * w.shape[-1],)), axis=-1, bitorder="little")
    return raw[..., :n].astype(bool)


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


def matmul_mod(a: np.ndarray, b: np.ndarray, q: int) -> np.ndarray:
    """(m, k) @ (k, n) of residues mod one modulus q (native; exact Python integers without it)."""
    if _native is None:
        prod = np.asarray(a, dtype=np.uint64).astype(object) @ np.asarray(b, dtype=np.uint64).astype(object)
        return (prod % int(q)).astype(np.uint64)
    return _native.mod_matmul(a, b, q)


def is_prime(value: int) -> bool:
    """The one primality test: GMP's ``mpz_probab_prime_p`` (trial division, Baillie–PSW, then
    40 Miller–Rabin rounds with random bases): exact below 2^64, and no known pseudoprime above
    (Paillier and OU primes)."""
    return bool(gmpy2.is_prime(gmpy2.mpz(int(value)), 64))  # GMP runs BPSW and reps - 24 MR rounds


def ntt_primes(n: int, bits: int, count: int, exclude: Sequence[int] = ()) -> list[int]:
    """The ``count`` largest primes q with 2^(bits-1) < q < 2^bits and q = 1 (mod 2n), largest
    first, skipping those in ``exclude`` — SEAL's ``CoeffModulus`` rule (SEAL hands out each
    bit size's primes smallest first; sort to compare). Raises ``ValueError`` when fewer exist."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer power of two, got {n!r}")
    if n < 1 or int(n) & (int(n) - 1):
        raise ValueError(f"n must be a power of two, got {n}")
    n, bits, count = int(n), int(bits), int(count)
    if not 2 <= bits <= 62:
        raise ValueError(f"bits must be in [2, 62], got {bits}")
    if count < 0:
        raise ValueError(f"count must be non-negative, got {count}")
    step = 2 * n
    out = primes_one_mod(step, bits, count, exclude)
    if len(out) < count:
        raise ValueError(f"only {len(out)} primes of {bits} bits are 1 mod {step} (asked for {count})")
    return out


def primes_one_mod(step: int, bits: int, count: int, exclude: Sequence[int] = ()) -> list[int]:
    """Up to ``count`` of the largest primes q = 1 (mod step) with 2^(bits-1) < q < 2^bits, largest
    first, skipping ``exclude`` (fewer when fewer exist: the callers name the shortfall)."""
    skip = {int(e) for e in exclude}
    q = ((1 << bits) - 1) // step * step + 1  # the largest value = 1 mod step below 2^bits
    lower = 1 << (bits - 1)
    out: list[int] = []
    while len(out) < count and q > lower:
        if q not in skip and is_prime(q):
            out.append(q)
        q -= step
    return out


def prime_factors(n: int) -> tuple[int, ...]:
    """The distinct prime factors of n >= 1, increasing (trial division: n is small here)."""
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        out.append(n)
    return tuple(out)


def smallest_root(q: int, n: int) -> int:
    """The smallest primitive 2n-th root of unity mod the prime q (q = 1 mod 2n)."""
    q, n = int(q), int(n)
    exponent = (q - 1) // (2 * n)
    x = 2
    while True:  # x^((q-1)/2n) is primitive exactly when x is a quadratic non-residue
        psi = pow(x, exponent, q)
        if pow(psi, n, q) == q - 1:
            break
        x += 1
    # the primitive 2n-th roots are the odd powers of any one of them
    square = psi * psi % q
    best = cur = psi
    for _ in range(n - 1):
        cur = cur * square % q
        best = min(best, cur)
    return best
