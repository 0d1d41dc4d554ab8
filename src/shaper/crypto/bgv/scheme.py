"""BGV with plaintext modulus 2 over Z[X]/Φ_m (Brakerski–Gentry–Vaikuntanathan as Gentry,
Halevi and Smart use it for AES; local math, no I/O).

A ciphertext (c_0, c_1) at level ℓ decrypts as [c_0 + c_1·s]_{Q_ℓ} mod 2, Q_ℓ = q_0···q_ℓ: the
phase carries the plaintext in its low bit and an even error 2e. Operations:

* :func:`encrypt` (public key: c = (b·u + 2e_0 + μ, a·u + 2e_1), u uniform ternary) and
  :func:`decrypt` (switch to q_0, centre, reduce mod 2, decode the slots; the decryptor checks
  the phase's magnitude: a ciphertext whose error wrapped is refused, not decoded);
* :class:`Evaluator`: add, add/multiply by a plaintext, multiply (tensor, then relinearise by key
  switching s² → s), modulus switching (HElib's rule: operands are switched down just before a
  product, while their error exceeds the prime's size times the rounding floor), key switching
  with digits and special primes (Gentry–Halevi–Smart's "hybrid": the chain's primes split
  into ``params.digits`` groups, keys over Q·P, division by P), Frobenius maps and every
  automorphism X ↦ X^u of the Galois group (a key per u);
* a **noise estimate** every ciphertext carries: the root mean square of its phase's canonical
  embedding (HElib's method: the variances of a fresh encryption's independent terms add;
  sums add their estimates (terms of one circuit are correlated), products multiply, constant
  products multiply by the constant's RMS, switching divides and adds the rounding floor); its bound is ``TAIL`` = 32 times that. The evaluator
  refuses an operation whose result could not be decrypted any more
  (:class:`NoiseBudgetExceeded`), and :func:`decrypt` checks the phase itself. It is an
  estimate for choosing levels, not a proof: decryption's own check is what refuses a wrong
  result.

Slots: a plaintext is a polynomial over GF(2) mod Φ_m; its slots are its values at ζ^t in
GF(2^d) (:mod:`.algebra`). ``Evaluator.encode`` turns slot values into a :class:`Plaintext`.

Security: IND-CPA under RLWE with the parameters' estimate (:mod:`.params`); a decryption
reveals the plaintext only (the noise is not returned). Nothing here is constant time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...kernels.cyclo import units
from ..ckks.keys import sample_gaussian, sample_ternary
from ..prg import Prg, default_prg
from . import multiparty
from .algebra import Algebra, algebra
from .params import Parameters
from .ring import Ring

__all__ = ["Ciphertext", "Evaluator", "KeySet", "NoiseBudgetExceeded", "Plaintext", "PublicKey", "SecretKey",
           "SwitchingKey", "decrypt", "encrypt", "keygen"]

TAIL = 32.0  # a high-probability bound over φ points, in RMS units (products of Gaussians have heavy tails)
SETTLE = 0.75  # switch an operand down before a product while its error >= q^SETTLE · floor (measured best)
SQUARE = math.sqrt(2)  # E|xy|^2 <= 2 E|x|^2 E|y|^2 for complex Gaussians, x = y included


class NoiseBudgetExceeded(ValueError):
    """An operation whose result could no longer be decrypted correctly."""


# -- keys -----------------------------------------------------------------------------------------

@dataclass(eq=False)
class SecretKey:
    params: Parameters
    coeffs: np.ndarray                 # int8 (φ,), entries in {-1, 0, 1}
    _eval: np.ndarray | None = field(default=None, repr=False)

    def evaluation(self, ring: Ring) -> np.ndarray:
        """s in evaluation form over every prime of the basis."""
        if self._eval is None:
            self._eval = ring.encode_signed(self.coeffs.astype(np.int64), list(range(len(ring.basis))))
        return self._eval

    def variance(self) -> float:
        return float(np.mean(self.coeffs.astype(np.float64) ** 2))


@dataclass(eq=False)
class PublicKey:
    params: Parameters
    b: np.ndarray                      # (L + 1, φ) evaluation form over the chain
    a: np.ndarray


@dataclass(eq=False)
class SwitchingKey:
    """Switches a ciphertext component under s' to s: per digit group G, (b_G, a_G) over the
    chain and the special primes with b_G = −a_G·s + 2e_G + P·Q̂_G·[Q̂_G^{-1}]_{Q_G}·s'."""

    params: Parameters
    b: np.ndarray                      # (digits, L + 1 + k, φ)
    a: np.ndarray


@dataclass(eq=False)
class KeySet:
    secret: SecretKey
    public: PublicKey
    relin: SwitchingKey
    galois: dict[int, SwitchingKey]


def sample_secret(params: Parameters, prg: Prg | None = None) -> np.ndarray:
    """The secret's coefficients (int8): uniform ternary, or exactly ``hamming_weight`` entries
    ±1 at uniform distinct positions (Fisher–Yates on CSPRNG draws)."""
    prg = prg or default_prg()
    if params.hamming_weight is None:
        return sample_ternary(params.phi, prg).astype(np.int8)
    n, h = params.phi, params.hamming_weight
    order = np.arange(n)
    for i in range(h):  # partial Fisher–Yates: h swaps
        j = i + int(prg.below(n - i, 1)[0]) if n - i > 1 else i
        order[i], order[j] = order[j], order[i]
    out = np.zeros(n, dtype=np.int8)
    out[order[:h]] = (prg.below(2, h).astype(np.int8) * 2 - 1)
    return out


def keygen(params: Parameters, galois: Iterable[int] = (), *, prg: Prg | None = None,
           secret: np.ndarray | None = None) -> KeySet:
    """Secret, public, relinearisation and Galois keys (one per automorphism exponent u): the
    local steps of :mod:`.multiparty` with one party holding the whole secret and every error."""
    prg = prg or default_prg()
    ring = _ring(params)
    coeffs = sample_secret(params, prg) if secret is None else np.asarray(secret, dtype=np.int8)
    if coeffs.shape != (params.phi,) or np.any(np.abs(coeffs.astype(np.int64)) > 1):
        raise ValueError(f"a BGV secret is φ = {params.phi} coefficients in {{-1, 0, 1}}")
    sk = SecretKey(params, coeffs)
    s = sk.evaluation(ring)
    chain = ring.chain(params.max_level)
    a = _uniform(ring, chain, prg)
    pk = PublicKey(params, multiparty.public_key_share(ring, s[chain], a, _errors(ring, chain, prg)), a)
    s2 = ring.mul(s, s, list(range(len(ring.basis))))
    keys = {}
    for u in sorted({int(u) % params.m for u in galois}):
        if math.gcd(u, params.m) != 1 or u == 1:
            raise ValueError(f"automorphism exponent {u} is not a unit other than 1 mod m = {params.m}")
        keys[u] = switching_key(ring, s, ring.automorphism(s, u), prg)
    return KeySet(sk, pk, switching_key(ring, s, s2, prg), keys)


def switching_key(ring: Ring, s: np.ndarray, s_from: np.ndarray, prg: Prg) -> SwitchingKey:
    """A key that switches from ``s_from`` to ``s`` (both evaluation form over the whole basis)."""
    full = list(range(len(ring.basis)))
    digits = ring.params.digits
    a = np.stack([_uniform(ring, full, prg) for _ in range(digits)])
    e2 = np.stack([_errors(ring, full, prg) for _ in range(digits)])
    return SwitchingKey(ring.params, multiparty.switching_key_share(ring, s, s_from, a, e2), a)


def _errors(ring: Ring, limbs: Sequence[int], prg: Prg) -> np.ndarray:
    """2e for a fresh Gaussian e of width σ, in evaluation form on ``limbs``."""
    return ring.encode_signed(2 * sample_gaussian(ring.phi, ring.params.sigma, prg), limbs)


def _uniform(ring: Ring, limbs: Sequence[int], prg: Prg) -> np.ndarray:
    return np.stack([prg.below(int(ring.basis[i]), ring.phi) for i in limbs])


# -- plaintexts and ciphertexts -----------------------------------------------------------------

@dataclass(eq=False)
class Plaintext:
    """A polynomial over GF(2) mod Φ_m (its slots are what :meth:`Evaluator.encode` was given),
    with the root mean square of its canonical embedding (what a product by it multiplies an
    error estimate by: the error and the constant are independent)."""

    bits: np.ndarray                   # uint8 (φ,)
    norm: float                        # RMS of the canonical embedding
    _eval: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def evaluation(self, ring: Ring, level: int) -> np.ndarray:
        if level not in self._eval:
            self._eval[level] = ring.encode_signed(self.bits.astype(np.int64), ring.chain(level))
        return self._eval[level]


@dataclass(eq=False)
class Ciphertext:
    parts: np.ndarray                  # (2 or 3, level + 1, φ) evaluation form
    level: int
    noise: float                       # RMS estimate of the phase's canonical embedding
    params: Parameters

    @property
    def log_noise(self) -> float:
        return math.log2(max(self.noise, 1.0))

    def capacity(self) -> float:
        """Bits left: log2(q_0 / 4) − log2 of the error bound after switching down to q_0 (the
        margin :func:`decrypt_bits` asks for)."""
        ring = _ring(self.params)
        return math.log2(self.params.primes[0] / 4) - math.log2(TAIL * _switched(ring, self.noise, self.level, 0))


def canonical_embedding(coeffs: np.ndarray, m: int) -> np.ndarray:
    """|a(ω^u)| over the primitive m-th roots ω^u (complex), for a polynomial of degree < m."""
    c = np.zeros(m)
    c[:len(coeffs)] = coeffs
    vals = np.fft.fft(c)
    return np.abs(vals[units(m)])


def canonical_norm(coeffs: np.ndarray, m: int) -> float:
    """max_u |a(ω^u)| (the canonical norm)."""
    return float(np.max(canonical_embedding(coeffs, m)))


def canonical_rms(coeffs: np.ndarray, m: int) -> float:
    """The root mean square of a's canonical embedding."""
    return float(np.sqrt(np.mean(canonical_embedding(coeffs, m) ** 2)))


# -- the ring of each parameter set, and its noise floor ---------------------------------------

_RINGS: dict[bytes, Ring] = {}


def _ring(params: Parameters) -> Ring:
    key = params.to_bytes()
    if key not in _RINGS:
        _RINGS[key] = Ring(params)
    return _RINGS[key]


def _secret_variance(params: Parameters) -> float:
    return 2 / 3 if params.hamming_weight is None else params.hamming_weight / params.phi


def rounding_floor(params: Parameters) -> float:
    """RMS of τ_0 + τ_1·s for τ's coefficients uniform in (−1, 1): what every division adds."""
    phi = params.phi
    return math.sqrt(phi / 3 + phi * phi / 3 * _secret_variance(params))


def fresh_noise(params: Parameters, message_norm: float) -> float:
    phi, sig = params.phi, params.sigma
    var = phi * phi * sig * sig * (2 / 3) + phi * phi * sig * sig * _secret_variance(params) + phi * sig * sig
    return message_norm + 2 * math.sqrt(var)


def key_switch_noise(params: Parameters, level: int) -> float:
    phi, sig = params.phi, params.sigma
    log_p = sum(math.log2(p) for p in params.special)
    var = 0.0  # in units of P^2
    for group in params.digit_groups():
        g = [i for i in group if i <= level]
        if g:
            log_d = sum(math.log2(params.primes[i]) for i in g)
            var += phi * phi * sig * sig / 12 * 2.0 ** (2 * (log_d - log_p))
    return 2 * math.sqrt(var) + rounding_floor(params)


def _switched(ring: Ring, noise: float, level: int, to: int) -> float:
    for lvl in range(level, to, -1):
        noise = noise / ring.params.primes[lvl] + rounding_floor(ring.params)
    return noise


# -- encryption and decryption -------------------------------------------------------------------

def encrypt(pk: PublicKey, plaintext: Plaintext, *, prg: Prg | None = None) -> Ciphertext:
    """A fresh encryption at the top level."""
    prg = prg or default_prg()
    params = pk.params
    ring = _ring(params)
    chain = ring.chain(params.max_level)
    u = ring.encode_signed(sample_ternary(params.phi, prg), chain)
    e0 = 2 * sample_gaussian(params.phi, params.sigma, prg) + plaintext.bits.astype(np.int64)
    e1 = 2 * sample_gaussian(params.phi, params.sigma, prg)
    c0 = ring.add(ring.mul(pk.b, u, chain), ring.encode_signed(e0, chain), chain)
    c1 = ring.add(ring.mul(pk.a, u, chain), ring.encode_signed(e1, chain), chain)
    return Ciphertext(np.stack([c0, c1]), params.max_level, fresh_noise(params, plaintext.norm), params)


def phase(sk: SecretKey, ct: Ciphertext) -> np.ndarray:
    """The centred phase [c_0 + c_1·s (+ c_2·s²)]_{q_0} after switching to level 0 (int64 (φ,)):
    plaintext bit plus even error. For tests and :func:`decrypt`."""
    ring = _ring(ct.params)
    low = switch_to(ct, 0)
    s = sk.evaluation(ring)[[0]]
    acc = low.parts[0]
    power = s
    for part in low.parts[1:]:
        acc = ring.add(acc, ring.mul(part, power, [0]), [0])
        power = ring.mul(power, s, [0])
    coeffs = ring.inverse(acc, [0])[0].astype(np.int64)
    q0 = ct.params.primes[0]
    return np.where(coeffs > q0 // 2, coeffs - q0, coeffs)


def decrypt_bits(sk: SecretKey, ct: Ciphertext) -> np.ndarray:
    """The plaintext polynomial's coefficients (uint8 (φ,)); raises :class:`NoiseBudgetExceeded`
    when the phase is within a factor 4 of q_0/2 (an error that wrapped looks uniform, so its
    largest coefficient lands there with overwhelming probability)."""
    v = phase(sk, ct)
    q0 = ct.params.primes[0]
    if int(np.max(np.abs(v))) >= q0 // 4:
        raise NoiseBudgetExceeded(f"the ciphertext's error reached {math.log2(max(1, np.max(np.abs(v)))):.1f} "
                                  f"bits of q_0's {math.log2(q0):.1f}: it cannot be decrypted reliably")
    return (v & 1).astype(np.uint8)


def decrypt(sk: SecretKey, ct: Ciphertext) -> np.ndarray:
    """The slot values (uint64 (nslots,), elements of GF(2^d))."""
    return algebra(ct.params.m).decode(decrypt_bits(sk, ct))


def switch_to(ct: Ciphertext, level: int) -> Ciphertext:
    """Modulus switching down to ``level`` (drops q_{ℓ}..q_{level+1}, keeps the plaintext)."""
    if level > ct.level or level < 0:
        raise ValueError(f"cannot switch a level-{ct.level} ciphertext to level {level}")
    if level == ct.level:
        return ct
    ring = _ring(ct.params)
    limbs = ring.chain(ct.level)
    parts = ring.divide_round(ct.parts, limbs, list(range(level + 1, ct.level + 1)))
    return Ciphertext(parts, level, _switched(ring, ct.noise, ct.level, level), ct.params)


# -- evaluation --------------------------------------------------------------------------------

class Evaluator:
    """Homomorphic operations with the relinearisation and Galois keys of one key set. Method
    names match :class:`~.slots.SlotEvaluator` (the plaintext simulator), so a circuit written
    for one runs on the other."""

    def __init__(self, params: Parameters, relin: SwitchingKey | None = None,
                 galois: dict[int, SwitchingKey] | None = None) -> None:
        self.params = params
        self.ring = _ring(params)
        self.algebra: Algebra = algebra(params.m)
        self.relin = relin
        self.galois = dict(galois or {})
        self.floor = rounding_floor(params)
        self.counts: dict[str, int] = {}

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # plaintexts
    def encode(self, slots: np.ndarray) -> Plaintext:
        bits = self.algebra.encode(np.asarray(slots, dtype=np.uint64))
        return Plaintext(bits, canonical_rms(bits, self.params.m))

    # levels
    def _settle(self, x: Ciphertext) -> Ciphertext:
        """Switch down while the error exceeds the next prime times the rounding floor."""
        lvl, noise = x.level, x.noise
        while lvl > 0 and noise >= self.params.primes[lvl] ** SETTLE * self.floor:
            noise = noise / self.params.primes[lvl] + self.floor
            lvl -= 1
        return switch_to(x, lvl)

    def _align(self, x: Ciphertext, y: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        lvl = min(x.level, y.level)
        return switch_to(x, lvl), switch_to(y, lvl)

    def _check(self, ct: Ciphertext, what: str) -> Ciphertext:
        if ct.capacity() < 1:
            raise NoiseBudgetExceeded(f"{what} at level {ct.level} leaves an error of 2^{ct.log_noise:.1f} (RMS), "
                                      f"beyond what q_0 can decrypt: the circuit is too deep for these parameters")
        return ct

    # linear
    def add(self, x: Ciphertext, y: Ciphertext) -> Ciphertext:
        x, y = self._align(x, y)
        return Ciphertext(self._pairwise(x, y), x.level, x.noise + y.noise, self.params)

    def _pairwise(self, x: Ciphertext, y: Ciphertext) -> np.ndarray:
        limbs = self.ring.chain(x.level)
        k = max(len(x.parts), len(y.parts))
        out = np.zeros((k,) + x.parts.shape[1:], dtype=np.uint64)
        out[:len(x.parts)] = x.parts
        out[:len(y.parts)] = self.ring.add(out[:len(y.parts)], y.parts, limbs)
        return out

    def add_plain(self, x: Ciphertext, p: Plaintext) -> Ciphertext:
        limbs = self.ring.chain(x.level)
        parts = x.parts.copy()
        parts[0] = self.ring.add(parts[0], p.evaluation(self.ring, x.level), limbs)
        return Ciphertext(parts, x.level, x.noise + p.norm, self.params)

    def mul_plain(self, x: Ciphertext, p: Plaintext) -> Ciphertext:
        self._count("mul_plain")
        x = self._settle(x)
        limbs = self.ring.chain(x.level)
        parts = self.ring.mul(x.parts, p.evaluation(self.ring, x.level), limbs)
        return self._check(Ciphertext(parts, x.level, x.noise * max(p.norm, 1.0), self.params), "a plaintext product")

    # products
    def mul(self, x: Ciphertext, y: Ciphertext) -> Ciphertext:
        """x·y relinearised (slot-wise product)."""
        if self.relin is None:
            raise ValueError("this evaluator has no relinearisation key")
        self._count("mul")
        x, y = self._align(self._settle(x), self._settle(y))
        limbs = self.ring.chain(x.level)
        r = self.ring
        (a0, a1), (b0, b1) = x.parts[:2], y.parts[:2]
        if len(x.parts) != 2 or len(y.parts) != 2:
            raise ValueError("multiply relinearised ciphertexts only")
        c0 = r.mul(a0, b0, limbs)
        c1 = r.add(r.mul(a0, b1, limbs), r.mul(a1, b0, limbs), limbs)
        c2 = r.mul(a1, b1, limbs)
        k0, k1 = self._key_switch(c2, x.level, self.relin)
        parts = np.stack([r.add(c0, k0, limbs), r.add(c1, k1, limbs)])
        noise = SQUARE * x.noise * y.noise + key_switch_noise(self.params, x.level)
        return self._check(Ciphertext(parts, x.level, noise, self.params), "a product")

    def square(self, x: Ciphertext) -> Ciphertext:
        return self.mul(x, x)

    # automorphisms
    def automorphism(self, x: Ciphertext, u: int) -> Ciphertext:
        """X ↦ X^u (u a unit mod m): slot values move and twist as :mod:`.algebra` says."""
        return self.automorphisms(x, [u])[0]

    def automorphisms(self, x: Ciphertext, us: Sequence[int]) -> list[Ciphertext]:
        """κ_u(x) for every u, hoisted: x's key-switching digits are computed once and permuted
        for each u (κ_u commutes with the digits' congruences and keeps their canonical norms,
        so the error is that of a key switch per u)."""
        us = [int(u) % self.params.m for u in us]
        missing = [u for u in us if u != 1 and u not in self.galois]
        if missing:
            raise ValueError(f"no key-switching key for the automorphism X -> X^{missing[0]}")
        limbs = self.ring.chain(x.level)
        r = self.ring
        digits = r.digits(x.parts[1], x.level) if any(u != 1 for u in us) else []
        out = []
        for u in us:
            if u == 1:
                out.append(x)
                continue
            self._count("automorphism")
            idx = r.ctx.automorphism_index(u)
            k0, k1 = self._switch_digits([d[:, idx] for _, d in digits], x.level, self.galois[u])
            parts = np.stack([r.add(r.automorphism(x.parts[0], u), k0, limbs), k1])
            out.append(self._check(Ciphertext(parts, x.level, x.noise + key_switch_noise(self.params, x.level),
                                              self.params), "an automorphism"))
        return out

    def frobenius(self, x: Ciphertext, j: int) -> Ciphertext:
        """Every slot value raised to 2^j (the automorphism X ↦ X^(2^j))."""
        return self.automorphism(x, pow(2, j, self.params.m))

    def _key_switch(self, c: np.ndarray, level: int, key: SwitchingKey) -> tuple[np.ndarray, np.ndarray]:
        """(k_0, k_1) over the chain at ``level`` with k_0 + k_1·s ≈ c·s' (s' the key's source)."""
        return self._switch_digits([d for _, d in self.ring.digits(c, level)], level, key)

    def _switch_digits(self, digits: list[np.ndarray], level: int, key: SwitchingKey) -> tuple[np.ndarray, np.ndarray]:
        r = self.ring
        target = r.chain(level) + r.special
        rows = np.asarray(target)
        acc0 = np.zeros((len(target), r.phi), dtype=np.uint64)
        acc1 = np.zeros_like(acc0)
        for gi, digit in enumerate(digits):
            r.mul_acc(acc0, digit, key.b[gi][rows], target)
            r.mul_acc(acc1, digit, key.a[gi][rows], target)
        out = r.divide_round(np.stack([acc0, acc1]), target, r.special)
        return out[0], out[1]
