"""CKKS parameters: ring degree, the prime chain, the special prime, the default scale, and the
security check against the Homomorphic Encryption Standard.

A parameter set is the ring R = Z[X]/(X^N + 1), ciphertext primes q_0 (the base prime, which
holds the decrypted value at level 0) and q_1..q_L (the scaling primes, one consumed per
rescale), and one special prime p for key switching (one key-switching digit per ciphertext
prime, as SEAL does; p must have at least as many bits as every q_i: key switching divides the
noise of each digit, which is below q_i, by p).

Primes are chosen by SEAL's rule (``CoeffModulus::Create``): for each bit size b, the largest
primes below 2^b that are 1 mod 2N, handed out smallest first in the order the sizes are
listed. The same bit sizes therefore give SEAL's prime chain (the test suite checks it).

Security: with uniform ternary secrets and error width sigma = 3.2, the HE Standard (Albrecht
et al. 2018, table 1; the bounds SEAL enforces) allows log2(P Q) up to 27, 54, 109, 218, 438,
881 bits at N = 2^10 .. 2^15 for 128-bit classical security. ``from_literal`` refuses larger
moduli unless ``insecure=True``, which marks the set as a test set (``security`` = None; it
appears in ``repr`` and in serialised parameters).
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError
from ...kernels.modq import is_prime

#: log2(PQ) allowed for 128-bit classical security, uniform ternary secret, sigma = 3.2
HE_STANDARD_128 = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
#: error standard deviation (HE Standard); the sampler clips at 6 sigma
SIGMA = 3.2


def chain_primes(n: int, bit_sizes: Sequence[int]) -> list[int]:
    """SEAL's prime selection: for each bit size, the ``count`` largest primes below 2^bits that
    are 1 mod 2n, handed out smallest first in the order the sizes appear (so with sizes
    [60, ..., 60] the special prime is the largest)."""
    from ...kernels.rns import ntt_primes

    counts: dict[int, int] = {}
    for b in bit_sizes:
        counts[b] = counts.get(b, 0) + 1
    pools = {b: ntt_primes(n, b, c) for b, c in counts.items()}  # largest first
    return [pools[b].pop() for b in bit_sizes]  # SEAL hands them out from the smallest


@dataclass(frozen=True, eq=False)
class Parameters:
    """A validated CKKS parameter set (build it with :meth:`from_literal` or :meth:`from_primes`).

    ``moduli`` are q_0..q_L, ``special`` the key-switching prime p, ``scale`` the default
    encoding scale Delta, ``security`` 128 or None for a test set outside the HE Standard.
    """

    n: int
    moduli: tuple[int, ...]
    special: int
    scale: float
    security: int | None
    sigma: float = SIGMA
    _context: list = field(default_factory=list, repr=False)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_literal(cls, n: int, q_bits: Sequence[int], p_bits: int, scale_bits: int, *,
                     insecure: bool = False) -> Parameters:
        """Parameters from bit sizes: ``n`` the ring degree (power of two), ``q_bits`` the
        ciphertext primes (base prime first, then one per level), ``p_bits`` the special prime,
        scale 2^``scale_bits``. Raises :class:`~shaper.errors.ConfigError` when the set is not
        128-bit secure by the HE Standard, unless ``insecure=True`` (tests only)."""
        _check_degree(n)
        q_bits = [int(b) for b in q_bits]
        if not q_bits:
            raise ConfigError("a CKKS chain needs at least one ciphertext prime")
        low = (2 * n).bit_length() + 1
        for b in q_bits + [int(p_bits)]:
            if not low <= b <= 61:
                raise ConfigError(f"prime size {b} bits is outside {low}..61 (primes must be 1 mod 2N = {2 * n} "
                                  "and below 2^61 for the kernels)")
        total = sum(q_bits) + p_bits
        _check_security(n, total, insecure)
        primes = chain_primes(n, q_bits + [int(p_bits)])
        return cls.from_primes(n, primes[:-1], primes[-1], 2.0 ** scale_bits, insecure=insecure)

    @classmethod
    def from_primes(cls, n: int, moduli: Sequence[int], special: int, scale: float, *,
                    insecure: bool = False) -> Parameters:
        """Parameters from explicit primes (validated: prime, 1 mod 2n, below 2^61, distinct,
        special prime at least as many bits as every ciphertext prime)."""
        _check_degree(n)
        moduli = tuple(int(q) for q in moduli)
        special = int(special)
        if not moduli:
            raise ConfigError("a CKKS chain needs at least one ciphertext prime")
        for q in moduli + (special,):
            if not 0 < q < 1 << 61 or q % (2 * n) != 1 or not is_prime(q):
                raise ConfigError(f"{q} is not a prime below 2^61 that is 1 mod 2N = {2 * n}")
        if len(set(moduli + (special,))) != len(moduli) + 1:
            raise ConfigError("the primes of a CKKS chain must be distinct")
        if special.bit_length() < max(moduli).bit_length():
            raise ConfigError(f"the special prime ({special.bit_length()} bits) must have at least as many bits as every "
                              f"ciphertext prime (largest {max(moduli).bit_length()} bits)")
        if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale >= 2.0):
            raise ConfigError(f"scale must be a finite number >= 2, got {scale!r}")
        total = sum(math.log2(q) for q in moduli + (special,))
        _check_security(n, total, insecure)
        security = None if insecure and total > HE_STANDARD_128.get(n, 0) else 128
        return cls(n, moduli, special, float(scale), security)

    # -- derived ------------------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return self.n // 2

    @property
    def max_level(self) -> int:
        """L: the level of a fresh ciphertext (levels run L..0, one prime dropped per rescale)."""
        return len(self.moduli) - 1

    @property
    def primes(self) -> tuple[int, ...]:
        """All primes in kernel order: q_0..q_L, then p (index L + 1)."""
        return self.moduli + (self.special,)

    @property
    def special_index(self) -> int:
        return len(self.moduli)

    @property
    def log_pq(self) -> float:
        return sum(math.log2(q) for q in self.primes)

    def mods(self, level: int) -> list[int]:
        """Kernel row indices of a level-``level`` polynomial: [0..level]."""
        if not 0 <= level <= self.max_level:
            raise ConfigError(f"level {level} is outside 0..{self.max_level}")
        return list(range(level + 1))

    @property
    def context(self) -> Any:
        """The RNS kernel context for these primes (native where built, numpy reference else)."""
        if not self._context:
            from ...kernels.rns import rns_context
            self._context.append(rns_context(self.n, list(self.primes)))
        return self._context[0]

    # -- identity -----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Body of the serialised form (framing in :mod:`shaper.crypto.ckks.serial`)."""
        return (struct.pack("<IB", self.n, len(self.moduli)) + struct.pack(f"<{len(self.moduli)}Q", *self.moduli)
                + struct.pack("<QddB", self.special, self.scale, self.sigma, self.security or 0))

    @property
    def fingerprint(self) -> bytes:
        """16 bytes identifying the parameter set: carried by every key and ciphertext."""
        return hashlib.sha256(b"shaper-ckks-params" + self.to_bytes()).digest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Parameters) and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def __repr__(self) -> str:
        bits = "+".join(str(q.bit_length()) for q in self.moduli)
        sec = "128-bit" if self.security else "INSECURE test set"
        return (f"ckks.Parameters(N=2^{self.n.bit_length() - 1}, q bits {bits}, p {self.special.bit_length()} bits, "
                f"log2 PQ = {self.log_pq:.1f}, scale 2^{math.log2(self.scale):.1f}, {sec})")


def _check_degree(n: int) -> None:
    if not isinstance(n, int) or n < 16 or n > 1 << 17 or n & (n - 1):
        raise ConfigError(f"ring degree N must be a power of two in 2^4..2^17, got {n!r}")


def _check_security(n: int, log_pq: float, insecure: bool) -> None:
    bound = HE_STANDARD_128.get(n)
    if insecure:
        return
    if bound is None:
        raise ConfigError(f"the HE Standard table has no 128-bit bound for N = {n} (it covers "
                          f"{min(HE_STANDARD_128)}..{max(HE_STANDARD_128)}); pass insecure=True for a test set")
    if log_pq > bound + 1e-9:
        raise ConfigError(f"log2(PQ) = {log_pq:.1f} bits exceeds the HE Standard's {bound} bits for 128-bit security at "
                          f"N = {n}; use fewer or smaller primes, a larger N, or insecure=True for a test set")
