"""Prime generation for key material, from the OS CSPRNG.

Candidates are uniform odd integers of the exact bit length (top two bits set, so a product of
two such primes has exactly the sum of their lengths) with the requested residue; primality is
GMP's ``mpz_probab_prime_p`` (trial division, Baillie-PSW, then extra Miller-Rabin rounds with
random bases), which has no known pseudoprime.
"""

from __future__ import annotations

from gmpy2 import mpz

from ..kernels.modq import is_prime
from .prg import system_randbits


def random_prime(bits: int, *, residue: int = 1, modulus: int = 2) -> mpz:
    """A uniform-ish random prime of exactly ``bits`` bits with ``p % modulus == residue``
    (``modulus`` a power of two, ``residue`` odd), top two bits set."""
    if bits < 16:
        raise ValueError(f"prime size must be at least 16 bits, got {bits}")
    if modulus & (modulus - 1) or residue % 2 == 0 or not 0 < residue < modulus:
        raise ValueError("modulus must be a power of two and residue an odd residue below it")
    top = mpz(3) << (bits - 2)
    while True:
        cand = mpz(system_randbits(bits)) | top
        cand = cand - (cand % modulus) + residue
        if cand.bit_length() != bits:
            continue
        if is_prime(cand):
            return cand


def random_prime_with_factor(bits: int, factor: int) -> tuple[mpz, mpz]:
    """A prime p of exactly ``bits`` bits with p = 2*factor*u + 1 (so ``factor`` divides p - 1);
    returns (p, u). Used by Okamoto-Uchiyama keys (a large prime-order subgroup for fast
    decryption)."""
    factor = mpz(factor)
    u_bits = bits - factor.bit_length() - 1
    if u_bits < 2:
        raise ValueError(f"cannot fit a {factor.bit_length()}-bit factor in a {bits}-bit prime")
    while True:
        u = mpz(system_randbits(u_bits)) | (mpz(1) << (u_bits - 1))
        p = 2 * factor * u + 1
        if p.bit_length() != bits or not (p >> (bits - 2)) & 1:
            continue
        if is_prime(p):
            return p, u
