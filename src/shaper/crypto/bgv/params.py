"""BGV parameters over Z[X]/Φ_m(X) for odd m, plaintext modulus 2 (GHS's setting), and their
security estimate.

A parameter set names the ring (m; φ(m) is the lattice dimension), the ciphertext chain
q_0 .. q_L (q_0 is kept to the end, modulus switching drops q_L first), the special primes
P = p_0 .. p_{k-1} of key switching, how many digits a key switch splits the chain into, and the
secret's distribution: dense uniform ternary (``hamming_weight=None``) or exactly h nonzero ±1
coefficients (GHS and the seed: h = 64). Every prime is ≡ 1 mod the transform's modulus
(:func:`shaper.kernels.cyclo.primes`).

Security. The HE Standard's tables (Albrecht et al., 2018) rate uniform ternary and Gaussian
secrets for power-of-two dimensions up to 2^15; a dimension between is rated by interpolating
log Q / n linearly (the tables are themselves straight lines in n to within a few bits), which
we state as an estimate, not a table entry. Sparse secrets (weight h) are not covered by the
tables and are rated by nothing here: current estimators (the lattice estimator's hybrid
attacks; HElib's ``lweEstimateSecurity`` refuses weights below 120) put weight-64 secrets at
φ = 46080 below 128 bits, so the seed's set is kept under its own name for comparison only,
with its rating stated as "not rated". The HElib-2014 formula 7.2·φ/log2 Q − 110 that the seed
quotes is reported beside it (``helib_2014_bits``) for comparison, not as a rating.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..ckks.params import HE_STANDARD_128

__all__ = ["Parameters", "estimate_security", "named", "NAMES"]

# HE Standard (2018) ternary-secret tables, classical: max log2(Q·P) per dimension.
HE_STANDARD = {
    128: HE_STANDARD_128,
    192: {1024: 19, 2048: 37, 4096: 75, 8192: 152, 16384: 305, 32768: 611},
    256: {1024: 14, 2048: 29, 4096: 58, 8192: 118, 16384: 237, 32768: 476},
}


def _max_log_q(level: int, n: int) -> float:
    """The HE Standard's max log2 Q at ``level`` bits for dimension n (interpolated linearly in n
    between the table's dimensions, and beyond 2^15 along its last slope)."""
    table = sorted(HE_STANDARD[level].items())
    for (n0, q0), (n1, q1) in zip(table, table[1:], strict=False):
        if n <= n1:
            return q0 + (q1 - q0) * (n - n0) / (n1 - n0)
    (n0, q0), (n1, q1) = table[-2], table[-1]
    return q1 + (q1 - q0) * (n - n1) / (n1 - n0)


def estimate_security(phi: int, log_q: float, hamming_weight: int | None = None) -> int:
    """Classical security in bits of RLWE in dimension ``phi`` with modulus 2^log_q (the key-switching
    modulus Q·P) and a uniform ternary secret, from the HE Standard's tables (interpolated in n;
    between 128, 192 and 256 bits interpolated in log Q; below the 128-bit line extrapolated along the
    128–192 one, at most 127). Sparse secrets
    (``hamming_weight`` set) return 0: the tables do not cover them (see the module docstring)."""
    if hamming_weight is not None or phi < 1024:
        return 0
    bounds = {lvl: _max_log_q(lvl, phi) for lvl in (128, 192, 256)}
    if log_q > bounds[128]:  # below the table: along the 128–192 line, an extrapolation (0 at worst)
        return min(127, max(0, int(128 - 64 * (log_q - bounds[128]) / (bounds[128] - bounds[192]))))
    if log_q <= bounds[256]:
        return 256
    lo, hi = (128, 192) if log_q > bounds[192] else (192, 256)
    frac = (bounds[lo] - log_q) / (bounds[lo] - bounds[hi])
    return int(lo + frac * (hi - lo))


@dataclass(frozen=True, eq=False)
class Parameters:
    """One BGV parameter set (p = 2). Build with :func:`named` or :meth:`create`."""

    m: int
    primes: tuple[int, ...]            # q_0 .. q_L
    special: tuple[int, ...]           # P's primes
    digits: int                        # key-switching digits (groups of chain primes)
    hamming_weight: int | None         # None: dense uniform ternary
    sigma: float
    name: str
    insecure: bool = False
    _fp: bytes = field(default=b"", repr=False)

    @classmethod
    def create(cls, m: int, q0_bits: int, level_bits: Sequence[int], special_bits: Sequence[int], *,
               digits: int | None = None,
               hamming_weight: int | None = None, sigma: float = 3.2, name: str = "custom",
               insecure: bool = False) -> Parameters:
        """Primes of the given sizes for ring m: q_0 of ``q0_bits``, one prime per entry of
        ``level_bits``, the special primes of ``special_bits`` (largest first within a size). Raises
        ValueError naming the problem (a ring the transform cannot take, too few primes, a set
        below 128 bits without ``insecure=True``)."""

        if m < 3 or m % 2 == 0:
            raise ValueError(f"m must be odd and at least 3, got {m}")
        sizes = [q0_bits, *level_bits, *special_bits]
        by_size: dict[int, list[int]] = {}
        taken: list[int] = []
        for bits in sorted(set(sizes), reverse=True):
            by_size[bits] = _near(m, bits, sizes.count(bits), taken)
            taken += by_size[bits]
        chain = tuple(by_size[b].pop(0) for b in [q0_bits, *level_bits])
        special = tuple(by_size[b].pop(0) for b in special_bits)
        return cls.from_primes(m, chain, special, digits=digits, hamming_weight=hamming_weight, sigma=sigma,
                               name=name, insecure=insecure)

    @classmethod
    def from_primes(cls, m: int, primes: Sequence[int], special: Sequence[int], *, digits: int | None = None,
                    hamming_weight: int | None = None, sigma: float = 3.2, name: str = "custom",
                    insecure: bool = False) -> Parameters:
        """Parameters from explicit primes (checked: distinct, prime, the transform's congruence)."""
        from ...kernels.modq import is_prime

        primes, special = tuple(int(q) for q in primes), tuple(int(p) for p in special)
        if not primes or not special:
            raise ValueError("a BGV chain needs at least one ciphertext prime and one special prime")
        every = primes + special
        if len(set(every)) != len(every):
            raise ValueError("the chain's primes must be distinct")
        for q in every:
            if q >= 1 << 62 or not is_prime(q) or (q - 1) % m:
                raise ValueError(f"{q} is not a prime below 2^62 that is 1 mod m = {m}")
        if digits is None:
            digits = digits_for([q.bit_length() for q in primes], sum(math.log2(p) for p in special))
        if not 1 <= digits <= len(primes):
            raise ValueError(f"digits must be in 1..{len(primes)}, got {digits}")
        if hamming_weight is not None and not 1 <= hamming_weight <= _phi(m):
            raise ValueError(f"hamming_weight must be in 1..phi(m) = {_phi(m)}, got {hamming_weight}")
        if not sigma > 0:
            raise ValueError(f"sigma must be positive, got {sigma}")
        params = cls(m, primes, special, int(digits), hamming_weight, float(sigma), name, bool(insecure))
        if not insecure and params.security < 128:
            raise ValueError(f"parameter set {name!r} is rated {params.security} bits "
                             f"(phi = {params.phi}, log2 QP = {params.log_qp:.0f}"
                             f"{', sparse secret' if hamming_weight else ''}); pass insecure=True for a test or "
                             "comparison set")
        return params

    # -- derived ---------------------------------------------------------------------------------
    @property
    def phi(self) -> int:
        return _phi(self.m)

    @property
    def max_level(self) -> int:
        """The top level L (a fresh ciphertext has primes q_0..q_L)."""
        return len(self.primes) - 1

    @property
    def log_q(self) -> float:
        return sum(math.log2(q) for q in self.primes)

    @property
    def log_qp(self) -> float:
        return self.log_q + sum(math.log2(p) for p in self.special)

    @property
    def security(self) -> int:
        """Estimated classical bits (:func:`estimate_security`; 0: not rated, a sparse secret)."""
        return estimate_security(self.phi, self.log_qp, self.hamming_weight)

    @property
    def helib_2014_bits(self) -> float:
        """HElib-2014's formula 7.2·φ/log2 Q − 110 (the seed's rating method; for comparison only)."""
        return 7.2 * self.phi / self.log_qp - 110

    @property
    def basis(self) -> tuple[int, ...]:
        """Every prime: the chain, then the special primes (row indices of a full polynomial)."""
        return self.primes + self.special

    def digit_groups(self) -> list[list[int]]:
        """The chain's prime indices in ``digits`` consecutive groups of near-equal bit size (a
        key switch adds about (∏ group)/P times a fresh error per group, so no group should
        outgrow P)."""
        return _groups([q.bit_length() for q in self.primes], self.digits)

    def to_bytes(self) -> bytes:
        """Canonical encoding (what a key or ciphertext names its parameters by)."""
        head = struct.pack("<IIIIid", self.m, len(self.primes), len(self.special), self.digits,
                           -1 if self.hamming_weight is None else self.hamming_weight, self.sigma)
        return head + struct.pack(f"<{len(self.basis)}Q", *self.basis)

    def fingerprint(self) -> bytes:
        return hashlib.sha256(b"shaper-bgv-params\0" + self.to_bytes()).digest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Parameters) and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def __repr__(self) -> str:
        secret = "ternary" if self.hamming_weight is None else f"weight {self.hamming_weight}"
        rating = (f"{self.security}-bit estimate" if self.hamming_weight is None else "not rated (sparse secret)")
        return (f"bgv.Parameters({self.name!r}: m = {self.m}, phi = {self.phi}, {len(self.primes)} chain primes, "
                f"{len(self.special)} special, log2 QP = {self.log_qp:.0f}, {secret} secret, {rating})")


def _near(m: int, bits: int, count: int, exclude: list[int]) -> list[int]:
    """``count`` primes for ring m of ``bits`` bits, or of the nearest sizes when too few exist
    (bits, bits - 1, bits + 1, bits - 2, ...; the transform's congruence makes them sparse)."""
    from ...kernels import cyclo

    out: list[int] = []
    for delta in (0, -1, 1, -2, 2, -3, 3, -4, 4):
        size = bits + delta
        if size < 3 or size > 61:
            continue
        try:
            got = cyclo.primes(m, size, count - len(out), exclude=[*exclude, *out])
        except ValueError as exc:  # fewer than asked: take them all
            got = _all_primes(m, size, [*exclude, *out]) if "were asked for" in str(exc) else []
        out += got[:count - len(out)]
        if len(out) == count:
            return out
    raise ValueError(f"ring m = {m} has only {len(out)} primes of {bits - 4}..{bits + 4} bits for its transform; "
                     f"{count} were asked for")


def _all_primes(m: int, bits: int, exclude: list[int]) -> list[int]:
    from ...kernels import cyclo

    lo, hi = 0, 1 << 12
    while lo < hi:  # the largest count cyclo.primes can serve
        mid = (lo + hi + 1) // 2
        try:
            cyclo.primes(m, bits, mid, exclude=exclude)
            lo = mid
        except ValueError:
            hi = mid - 1
    return cyclo.primes(m, bits, lo, exclude=exclude) if lo else []


def _groups(bits: list[int], k: int) -> list[list[int]]:
    """Split indices 0..len(bits)-1 into k consecutive non-empty groups minimising the largest
    group's total bits (a linear scan over the answer: the sizes are small)."""
    def fits(limit: int) -> bool:
        count, acc = 1, 0
        for b in bits:
            if b > limit:
                return False
            if acc + b > limit:
                count, acc = count + 1, 0
            acc += b
        return count <= k
    limit = max(bits)
    while not fits(limit):
        limit += 1
    groups: list[list[int]] = [[]]
    acc = 0
    for i, b in enumerate(bits):
        left_groups = k - len(groups)
        if groups[-1] and (acc + b > limit or len(bits) - i <= left_groups):
            groups.append([])
            acc = 0
        groups[-1].append(i)
        acc += b
    return groups


def digits_for(bits: Sequence[int], special_bits: float) -> int:
    """The fewest digits whose groups each fit in P's bits (at least one)."""
    for k in range(1, len(bits) + 1):
        if max(sum(bits[i] for i in g) for g in _groups(list(bits), k)) <= special_bits:
            return k
    return len(bits)


def _phi(m: int) -> int:
    n, out, p = m, m, 2
    while p * p <= n:
        if n % p == 0:
            while n % p == 0:
                n //= p
            out -= out // p
        p += 1
    if n > 1:
        out -= out // n
    return out


NAMES = ("test-257", "test-4369", "ghs-53261", "aes-53261")


def named(name: str) -> Parameters:
    """A named set:

    * ``test-257`` / ``test-4369``: small rings for tests (1 and 16 AES blocks), insecure;
    * ``ghs-53261``: the seed's ring and weight-64 secret (the paper's log2 Q ≈ 1275; here
      log2 QP ≈ 1458, the chain AES needs with 46-bit primes), kept for comparison, "not rated";
    * ``aes-53261``: the default for AES: the same ring with a dense ternary secret and a chain
      that meets the 128-bit line (see :func:`estimate_security`).
    """
    if name not in _SETS:
        raise ValueError(f"unknown BGV parameter set {name!r}; known: {', '.join(NAMES)}")
    return _SETS[name]()


def _test_257() -> Parameters:
    return Parameters.create(257, 40, [36] * 24, [60, 60, 60], name="test-257", insecure=True)


def _test_4369() -> Parameters:
    return Parameters.create(4369, 40, [36] * 28, [60, 60, 60], name="test-4369", insecure=True)


def _ghs_53261() -> Parameters:
    # The seed's leveled set: weight-64 secret (its q_0 of 22 bits is 40 here: the
    # transform needs q = 1 mod 2^18·m), 6 special primes of 60 bits (4 digits); AES-128 uses 21 of
    # its 23 levels here (measured), against 20 under the dense secret (see docs/bgv.md).
    return Parameters.create(53261, 40, [46] * 23, [60] * 6, hamming_weight=64, name="ghs-53261", insecure=True)


def _aes_53261() -> Parameters:
    # Dense ternary secret on the seed's ring: AES-128 uses 20 primes of 45 bits here (measured:
    # benchmarks/results/bgv.json), so 21 level primes leave one to spare; log2 QP ≈ 1165, under
    # the 128-bit line of ≈ 1242 at φ = 46080 (docs/bgv.md).
    return Parameters.create(53261, 40, [45] * 21, [60] * 3, name="aes-53261")


_SETS = {"test-257": _test_257, "test-4369": _test_4369, "ghs-53261": _ghs_53261, "aes-53261": _aes_53261}
