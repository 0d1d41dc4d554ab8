"""The kernel interface: batch modular arithmetic that the crypto layer is written against.

A kernel computes on whole batches of big integers. Values go in as sequences of Python ints or
``gmpy2.mpz`` (numpy object arrays are fine) and come back as lists of ``gmpy2.mpz``; exponents
of fixed-base exponentiations go in as 2-D ``uint8`` arrays of little-endian bytes (one row per
element), which is also the layout native kernels read without conversion.

Implementations: :mod:`shaper.kernels.gmp` (gmpy2, one core) and
:mod:`shaper.kernels.parallel` (splits big batches over a pool of worker processes, each running
the gmpy2 kernel). The native (Rust, AVX-512 IFMA) and GPU kernels plug in behind the same
interface.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

IntLike = int  # Python int or gmpy2.mpz


@dataclass(frozen=True)
class FixedBaseSpec:
    """A base whose powers are precomputed once and reused for many exponentiations.

    ``exponent_bits`` is the longest exponent the table must serve; a kernel picks the window
    width from it and its memory budget, and may build windows lazily. Two specs with the same
    base and modulus share one table (per ``constant_time`` setting).

    ``constant_time=False`` lets the native kernel use wide windows read by index (10 bits
    where the memory budget allows, as HEU does): about 40 % faster, but the table addresses
    depend on the exponent, so a process sharing the CPU could learn it from cache timing. The
    gmpy2 kernel is never constant time, whatever this says.
    """

    base: int
    modulus: int
    exponent_bits: int
    constant_time: bool = True
    key: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.modulus < 3:
            raise ValueError(f"fixed-base modulus must be >= 3, got {self.modulus}")
        if not 0 < self.base < self.modulus:
            raise ValueError("fixed-base base must lie in (0, modulus)")
        if self.exponent_bits <= 0:
            raise ValueError(f"exponent_bits must be positive, got {self.exponent_bits}")
        width = (int(self.modulus).bit_length() + 7) // 8
        digest = hashlib.sha256(
            int(self.base).to_bytes(width, "little") + int(self.modulus).to_bytes(width, "little")
        ).digest()[:16]
        object.__setattr__(self, "key", digest)


class Kernel(Protocol):
    """Batch modular arithmetic. All methods are pure functions of their inputs."""

    name: str

    def powmod(self, bases: Sequence[IntLike], exponents: Sequence[IntLike], modulus: IntLike) -> list:
        """``[b_i ** e_i mod modulus]``; exponents non-negative."""

    def powmod_same_exponent(self, bases: Sequence[IntLike], exponent: IntLike, modulus: IntLike) -> list:
        """``[b_i ** exponent mod modulus]`` (CRT decryption halves, packing squarings)."""

    def fixed_base_powmod(
        self,
        specs: Sequence[FixedBaseSpec],
        exponents: Sequence[np.ndarray],
        multipliers: Sequence[IntLike] | None,
        modulus: IntLike,
    ) -> list:
        """``[m_i * prod_j specs[j].base ** e_{j,i} mod modulus]``.

        ``exponents[j]`` is a (count, width) uint8 array of little-endian exponent bytes for
        ``specs[j]``; all specs share ``modulus``; ``multipliers`` (or 1) is per element.
        """

    def mulmod(self, a: Sequence[IntLike], b: Sequence[IntLike], modulus: IntLike) -> list:
        """``[a_i * b_i mod modulus]``."""

    def invert(self, values: Sequence[IntLike], modulus: IntLike) -> list:
        """``[a_i ** -1 mod modulus]``; raises ``ZeroDivisionError`` for a non-unit."""

    def horner(self, columns: Sequence[Sequence[IntLike]], shift_bits: int, modulus: IntLike) -> list:
        """Packing by Horner's rule with squaring chains: for each position g,
        ``acc = columns[-1][g]``, then for j from the second-to-last column down to 0,
        ``acc = acc ** (2 ** shift_bits) * columns[j][g] mod modulus``."""

    def horner_multiexp(self, bases: Sequence[Sequence[Sequence[IntLike]]],
                        exponents: Sequence[Sequence[Sequence[IntLike]]], shift_bits: int, modulus: IntLike) -> list:
        """Like :meth:`horner`, with each slot's value a product of powers
        ``prod_t bases[t][j][g] ** exponents[t][j][g]`` (exponents below 2^shift_bits); the
        exponentiations share the slot's squaring chain (TriGen's packed cross terms)."""

    def gather(self, calls: Sequence[tuple[str, tuple]]) -> list:
        """Run independent calls ``(method name, args)`` and return their results in order; a
        multi-core kernel schedules all their work together."""

    def prod_rows(
        self,
        values: Sequence[IntLike],
        indices: np.ndarray,
        indptr: np.ndarray,
        modulus: IntLike,
    ) -> list:
        """Sparse gather-product (the CSR structure of a plaintext matrix):
        ``out[i] = prod_{k in [indptr[i], indptr[i+1])} values[indices[k]] mod modulus``;
        an empty row gives 1."""


def check_fixed_base_args(specs: Sequence[FixedBaseSpec], exponents: Sequence[np.ndarray],
                          multipliers: Sequence | None, modulus: int) -> int:
    """The checks every kernel's ``fixed_base_powmod`` makes; returns the value count."""
    if len(specs) != len(exponents) or not specs:
        raise ValueError("fixed_base_powmod needs one exponent array per spec")
    count = int(exponents[0].shape[0])
    if any(int(e.shape[0]) != count for e in exponents):
        raise ValueError("exponent arrays differ in length")
    if multipliers is not None and len(multipliers) != count:
        raise ValueError(f"{len(multipliers)} multipliers for {count} exponents")
    if any(int(s.modulus) != int(modulus) for s in specs):
        raise ValueError("all fixed-base specs of one call must share the modulus")
    return count


def exponent_digits(exponent_bytes: np.ndarray, window: int, windows: int) -> np.ndarray:
    """Split little-endian exponent bytes into ``windows`` base-2^window digits, vectorised.

    Returns an int64 array of shape (count, windows); bits beyond the stored bytes are zero.
    """
    data = np.ascontiguousarray(exponent_bytes, dtype=np.uint8)
    if data.ndim != 2:
        raise ValueError(f"exponent bytes must be a 2-D uint8 array, got shape {data.shape}")
    count = data.shape[0]
    if window == 8:
        out = np.zeros((count, windows), dtype=np.int64)
        take = min(windows, data.shape[1])
        out[:, :take] = data[:, :take]
        if data.shape[1] > windows and data[:, windows:].any():
            raise ValueError("exponent longer than the table serves")
        return out
    bits = np.unpackbits(data, axis=1, bitorder="little")
    total = window * windows
    if bits.shape[1] < total:
        bits = np.concatenate([bits, np.zeros((count, total - bits.shape[1]), dtype=np.uint8)], axis=1)
    elif bits.shape[1] > total:
        if bits[:, total:].any():
            raise ValueError("exponent longer than the table serves")
        bits = bits[:, :total]
    weights = (1 << np.arange(window, dtype=np.int64))
    return bits.reshape(count, windows, window).astype(np.int64) @ weights


def significant_windows(exponent_bytes: np.ndarray, window: int) -> int:
    """Number of base-2^window digits needed for the largest exponent in the batch."""
    data = np.asarray(exponent_bytes, dtype=np.uint8)
    if data.size == 0:
        return 0
    nonzero_cols = np.flatnonzero(data.any(axis=0))
    if nonzero_cols.size == 0:
        return 0
    top = int(nonzero_cols[-1])
    bits = 8 * top + int(data[:, top].max()).bit_length()
    return (bits + window - 1) // window


def int_to_exponent_bytes(values: Sequence[int], width: int | None = None) -> np.ndarray:
    """Non-negative Python ints to the (count, width) little-endian uint8 layout."""
    ints = [int(v) for v in values]
    if any(v < 0 for v in ints):
        raise ValueError("exponents must be non-negative")
    if width is None:
        width = max(1, (max((v.bit_length() for v in ints), default=1) + 7) // 8)
    buf = b"".join(v.to_bytes(width, "little") for v in ints)
    return np.frombuffer(buf, dtype=np.uint8).reshape(len(ints), width).copy()
