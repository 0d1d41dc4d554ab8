"""Binary fields GF(2^d) and polynomials over GF(2), for the slots of GHS-style BGV (ghs.md §3, §7 step 1).

Two representations are used throughout, both "bit i is the coefficient of Y^i" (low degree in the low
bit):

* a polynomial over GF(2) of any degree is a Python ``int`` (``clmul``, ``poly_mod``, ``poly_gcd``,
  ``is_irreducible``); these are for one-off work such as choosing the field modulus or reducing a
  degree < m polynomial mod Φ_m;
* an element of GF(2^d) = GF(2)[Y]/(P(Y)), d <= 63, is an unsigned integer < 2^d, and arrays of
  elements are numpy ``uint64`` arrays. :class:`Field` does arithmetic on such arrays elementwise
  (numpy broadcasting rules): ``mul`` by shift-and-xor over the d bits of one factor, and every
  GF(2)-linear map (multiplication by a constant, the Frobenius x -> x^(2^j)) through byte tables:
  x is split into ceil(d/8) bytes and the images of the 256 values of each byte are looked up and
  xored, so a linear map costs ceil(d/8) table look-ups per element.

The default modulus of GF(2^d) (``field(d)``) is the smallest irreducible polynomial of degree d,
ordering polynomials by their integer encoding. Nothing here is secret-dependent in the sense of the
scheme (plaintext algebra only); nothing is constant-time.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...kernels.modq import prime_factors

__all__ = [
    "Field",
    "field",
    "clmul",
    "poly_mod",
    "poly_mulmod",
    "poly_gcd",
    "is_irreducible",
    "smallest_irreducible",
    "bits_to_int",
    "int_to_bits",
    "prime_factors",
]

MAX_DEGREE = 63


# ----------------------------------------------------------------------------------------------
# GF(2)[X] on Python ints
# ----------------------------------------------------------------------------------------------


def clmul(a: int, b: int) -> int:
    """Carry-less product of two GF(2)[X] polynomials (bit i = coefficient of X^i)."""
    if a.bit_length() < b.bit_length():
        a, b = b, a
    result = 0
    while b:
        low = b & -b
        result ^= a << (low.bit_length() - 1)
        b ^= low
    return result


def poly_mod(a: int, p: int) -> int:
    """a mod p in GF(2)[X] (p != 0), by xor long division."""
    if p == 0:
        raise ValueError("poly_mod: division by the zero polynomial")
    dp = p.bit_length()
    while a.bit_length() >= dp:
        a ^= p << (a.bit_length() - dp)
    return a


def poly_mulmod(a: int, b: int, p: int) -> int:
    """a * b mod p in GF(2)[X]; a, b need not be reduced."""
    return poly_mod(clmul(poly_mod(a, p), poly_mod(b, p)), p)


def poly_gcd(a: int, b: int) -> int:
    """The monic gcd of two GF(2)[X] polynomials (0 only if both are 0)."""
    while b:
        a, b = b, poly_mod(a, b)
    return a




def _x_pow_2k_mod(k: int, p: int) -> int:
    """X^(2^k) mod p, by k squarings."""
    x = poly_mod(2, p)
    for _ in range(k):
        x = poly_mulmod(x, x, p)
    return x


def is_irreducible(p: int) -> bool:
    """Rabin's test: p of degree d >= 1 is irreducible over GF(2) iff X^(2^d) = X mod p and
    gcd(X^(2^(d/q)) - X, p) = 1 for every prime q | d."""
    d = p.bit_length() - 1
    if d < 1:
        return False
    if d == 1:
        return True
    if not p & 1:  # divisible by X
        return False
    if _x_pow_2k_mod(d, p) != 2:
        return False
    for q in prime_factors(d):
        if poly_gcd(p, _x_pow_2k_mod(d // q, p) ^ 2) != 1:
            return False
    return True


@lru_cache(maxsize=None)
def smallest_irreducible(d: int) -> int:
    """The irreducible polynomial of degree d over GF(2) with the smallest integer encoding."""
    if d < 1:
        raise ValueError(f"smallest_irreducible: degree must be >= 1, got {d}")
    if d == 1:
        return 0b10  # X
    for p in range((1 << d) | 1, 1 << (d + 1), 2):
        if is_irreducible(p):
            return p
    raise AssertionError("unreachable: irreducible polynomials exist in every degree")


def bits_to_int(bits: np.ndarray) -> int:
    """A 0/1 vector (bit i = coefficient of X^i; values taken mod 2) as a GF(2)[X] Python int."""
    b = (np.asarray(bits).astype(np.int64, copy=False) & 1).astype(np.uint8)
    return int.from_bytes(np.packbits(b, bitorder="little").tobytes(), "little")


def int_to_bits(a: int, n: int) -> np.ndarray:
    """The n low coefficients of the GF(2)[X] polynomial a as a uint8 0/1 vector."""
    if a < 0:
        raise ValueError("int_to_bits: negative integer")
    nbytes = (n + 7) // 8
    a &= (1 << n) - 1 if n else 0
    raw = np.frombuffer(a.to_bytes(max(nbytes, 1), "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].copy()


# ----------------------------------------------------------------------------------------------
# GF(2^d) on numpy uint64 arrays
# ----------------------------------------------------------------------------------------------


class Field:
    """GF(2^d) = GF(2)[Y]/(P(Y)); elements are unsigned ints < 2^d, arrays are numpy uint64.

    Build it with :func:`field`, which caches one instance per (d, P). Array methods take anything
    ``np.asarray`` turns into non-negative integers < 2^d (no range check in the hot paths; use
    :meth:`check` at API boundaries) and return uint64 arrays of the broadcast shape.
    """

    def __init__(self, d: int, modulus: int) -> None:
        if not 1 <= d <= MAX_DEGREE:
            raise ValueError(f"GF(2^d) needs 1 <= d <= {MAX_DEGREE} to fit uint64, got d = {d}")
        if modulus.bit_length() != d + 1:
            raise ValueError(f"the modulus of GF(2^{d}) must have degree {d}, got {modulus:#x}")
        if not is_irreducible(modulus):
            raise ValueError(f"the modulus {modulus:#x} of GF(2^{d}) is not irreducible")
        self.d = d
        self.modulus = modulus
        self.order = 1 << d
        self._nbytes = (d + 7) // 8
        self._frob_tables: dict[int, np.ndarray] = {}
        self._trace_mask: int | None = None

    def __repr__(self) -> str:
        return f"Field(d={self.d}, modulus={self.modulus:#x})"

    # -- scalars (Python ints) -------------------------------------------------------------
    def smul(self, a: int, b: int) -> int:
        """Product of two elements given as Python ints."""
        return poly_mod(clmul(a, b), self.modulus)

    def spow(self, a: int, e: int) -> int:
        """a^e for a Python-int element and an integer e >= 0 (e < 0 inverts a first)."""
        if e < 0:
            a, e = self.spow(a, self.order - 2), -e
        result, base = 1, a
        while e:
            if e & 1:
                result = self.smul(result, base)
            base = self.smul(base, base)
            e >>= 1
        return result

    def sorder(self, a: int) -> int:
        """Multiplicative order of a non-zero element."""
        if a == 0:
            raise ValueError("the zero element has no multiplicative order")
        n = self.order - 1
        for q in prime_factors(n):
            while n % q == 0 and self.spow(a, n // q) == 1:
                n //= q
        return n

    # -- arrays -----------------------------------------------------------------------------
    def check(self, x: np.ndarray | int, what: str = "value") -> np.ndarray:
        """x as a uint64 array, refusing values outside [0, 2^d)."""
        arr = np.asarray(x)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{what}: GF(2^{self.d}) elements must be integers, got dtype {arr.dtype}")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.order):
            raise ValueError(f"{what}: GF(2^{self.d}) elements must lie in [0, 2^{self.d})")
        return arr.astype(np.uint64, copy=False)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Elementwise product, shift-and-xor over the d bits of b."""
        a, b = np.broadcast_arrays(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
        x = a.copy()
        acc = np.zeros(x.shape, dtype=np.uint64)
        one, ones = np.uint64(1), np.uint64((1 << 64) - 1)
        top, poly = np.uint64(self.d), np.uint64(self.modulus)
        for bit in range(self.d):
            acc ^= x & (((b >> np.uint64(bit)) & one) * ones)
            if bit + 1 < self.d:
                x <<= one
                x ^= poly * ((x >> top) & one)
        return acc

    def linear_table(self, images: np.ndarray) -> np.ndarray:
        """Byte tables for the GF(2)-linear map sending Y^i to images[i] (i < d): shape
        (ceil(d/8), 256) uint64, for :meth:`apply_linear`."""
        images = np.asarray(images, dtype=np.uint64)
        if images.shape != (self.d,):
            raise ValueError(f"linear_table: need {self.d} basis images, got shape {images.shape}")
        padded = np.zeros(8 * self._nbytes, dtype=np.uint64)
        padded[: self.d] = images
        v = np.arange(256, dtype=np.uint64)
        bits = (v[:, None] >> np.arange(8, dtype=np.uint64)[None, :]) & np.uint64(1)  # (256, 8)
        tables = np.zeros((self._nbytes, 256), dtype=np.uint64)
        for byte in range(self._nbytes):
            chunk = padded[8 * byte: 8 * byte + 8]
            t = np.zeros(256, dtype=np.uint64)
            for k in range(8):
                t ^= chunk[k] * bits[:, k]
            tables[byte] = t
        return tables

    def apply_linear(self, tables: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Apply the linear map given by :meth:`linear_table` tables to every element of x."""
        x = np.asarray(x, dtype=np.uint64)
        out = tables[0][x & np.uint64(0xFF)]
        for byte in range(1, tables.shape[0]):
            out ^= tables[byte][(x >> np.uint64(8 * byte)) & np.uint64(0xFF)]
        return out

    def const_table(self, c: int) -> np.ndarray:
        """Byte tables for x -> c*x."""
        basis = np.array([1 << i for i in range(self.d)], dtype=np.uint64)
        return self.linear_table(self.mul(basis, np.uint64(c)))

    def mul_const(self, x: np.ndarray, c: int) -> np.ndarray:
        """c * x for a fixed element c (byte tables; fast for large x)."""
        return self.apply_linear(self.const_table(c), x)

    def frobenius_table(self, j: int) -> np.ndarray:
        """Byte tables for x -> x^(2^j) (cached)."""
        j %= self.d
        t = self._frob_tables.get(j)
        if t is None:
            images = np.array([self.spow(1 << i, 1 << j) for i in range(self.d)], dtype=np.uint64)
            t = self.linear_table(images)
            self._frob_tables[j] = t
        return t

    def square(self, x: np.ndarray) -> np.ndarray:
        return self.apply_linear(self.frobenius_table(1), x)

    def frobenius(self, x: np.ndarray, j: int | np.ndarray) -> np.ndarray:
        """x^(2^j) elementwise; j an int or an integer array broadcastable against x."""
        if np.ndim(j) == 0:
            return self.apply_linear(self.frobenius_table(int(j)), x)
        x, jj = np.broadcast_arrays(np.asarray(x, dtype=np.uint64), np.asarray(j) % self.d)
        out = np.empty(x.shape, dtype=np.uint64)
        for value in np.unique(jj):
            sel = jj == value
            out[sel] = self.apply_linear(self.frobenius_table(int(value)), x[sel])
        return out

    def conjugates(self, x: np.ndarray) -> np.ndarray:
        """All Frobenius powers: shape (d,) + x.shape, entry j = x^(2^j)."""
        x = np.asarray(x, dtype=np.uint64)
        out = np.empty((self.d,) + x.shape, dtype=np.uint64)
        out[0] = x
        sq = self.frobenius_table(1)
        for j in range(1, self.d):
            out[j] = self.apply_linear(sq, out[j - 1])
        return out

    def pow(self, x: np.ndarray, e: int) -> np.ndarray:
        """x^e elementwise for an integer e >= 0 (0^0 = 1)."""
        if e < 0:
            raise ValueError("Field.pow: negative exponent; use inv")
        x = np.asarray(x, dtype=np.uint64)
        result = np.ones(x.shape, dtype=np.uint64)
        base = x.copy()
        while e:
            if e & 1:
                result = self.mul(result, base)
            e >>= 1
            if e:
                base = self.square(base)
        return result

    def inv(self, x: np.ndarray) -> np.ndarray:
        """Multiplicative inverse elementwise (x^(2^d - 2)); refuses zero."""
        x = np.asarray(x, dtype=np.uint64)
        if np.any(x == 0):
            raise ZeroDivisionError(f"inverse of zero in GF(2^{self.d})")
        return self.pow(x, self.order - 2)

    def trace(self, x: np.ndarray) -> np.ndarray:
        """The absolute trace Tr(x) = sum_j x^(2^j) in GF(2), as uint64 0/1; it is the parity of
        x & tau for the mask tau of traces of the basis."""
        if self._trace_mask is None:
            tau = 0
            for i in range(self.d):
                c, t = 1 << i, 0
                for _ in range(self.d):
                    t ^= c
                    c = self.smul(c, c)
                if t not in (0, 1):
                    raise AssertionError("trace not in GF(2)")
                tau |= t << i
            self._trace_mask = tau
        y = np.asarray(x, dtype=np.uint64) & np.uint64(self._trace_mask)
        return _parity64(y)


def _parity64(y: np.ndarray) -> np.ndarray:
    y = y.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        y ^= y >> np.uint64(shift)
    return y & np.uint64(1)


@lru_cache(maxsize=None)
def field(d: int, modulus: int | None = None) -> Field:
    """GF(2^d) modulo ``modulus`` (an irreducible degree-d polynomial as an int), by default the
    smallest irreducible one. Cached."""
    if not 1 <= d <= MAX_DEGREE:
        raise ValueError(f"GF(2^d) needs 1 <= d <= {MAX_DEGREE} to fit uint64, got d = {d}")
    return Field(d, smallest_irreducible(d) if modulus is None else modulus)
