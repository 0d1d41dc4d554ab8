"""CKKS keys in RNS form, generated locally or **from given polynomials**.

Everything is held in NTT form over the kernel basis [q_0..q_L, p] (row i mod prime i). The
layouts below are what a multiparty key generation (GMPFHE) must produce; each constructor
takes the polynomials as arguments so an MPC can supply them, and samples them (CSPRNG) when
they are not given.

* Secret key s: a polynomial with small integer coefficients (uniform ternary when sampled).
* Public key (b, a) over Q p: b = -a s + e, a uniform (expanded from a 32-byte seed when the key
  is generated here, so it serialises in half the space).
* Switching key from t to s (``SwitchingKey``), one digit per ciphertext prime q_j:
  a_j uniform mod Q p, e_j error, and b_j = -a_j s + e_j + [row = j] (p mod q_j) t. On row j the
  gadget constant p q_hat_j [q_hat_j^-1]_{q_j} is p, and 0 on every other row, so "p t on the
  diagonal" is all of it. Array shape (L + 1, 2, L + 2, N): digit, component (b, a), row.
  The relinearisation key has t = s^2; the Galois key of element g has t = s(X^g).
  s(X^g) is a signed permutation of the coefficients of s, so rotation keys need no secure
  multiplication in an MPC, only shared errors; s^2 needs one product per NTT point and row.

Errors are rounded Gaussians of standard deviation 3.2 clipped at 6 sigma (SEAL's clipped normal),
sampled from the CSPRNG by inverting the cumulative table.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ConfigError, KeyMismatchError
from ..prg import Prg, default_prg
from .params import Parameters

SEED_BYTES = 32


# -- sampling -----------------------------------------------------------------------------------

def sample_ternary(n: int, prg: Prg | None = None) -> np.ndarray:
    """n uniform coefficients in {-1, 0, 1} (int64)."""
    return (prg or default_prg()).below(3, n).astype(np.int64) - 1


@functools.lru_cache(maxsize=8)
def _gaussian_table(sigma: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Cumulative thresholds (uint64, out of 2^64) of the rounded Gaussian clipped at 6 sigma,
    and a 2^16-entry shortcut: the value for each top-16-bit prefix of the uniform word that no
    threshold splits (-1 - bound where one does)."""
    bound = gaussian_bound(sigma)
    ks = range(-bound, bound + 1)
    mass = [0.5 * (math.erf((k + 0.5) / (sigma * math.sqrt(2))) - math.erf((k - 0.5) / (sigma * math.sqrt(2))))
            for k in ks]
    total, acc, cuts = sum(mass), 0.0, []
    for m in mass[:-1]:
        acc += m
        cuts.append(min((1 << 64) - 1, int(acc / total * 2.0 ** 64)))
    cuts_arr = np.array(cuts, dtype=np.uint64)
    starts = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
    lo = np.searchsorted(cuts_arr, starts, side="right")
    hi = np.searchsorted(cuts_arr, starts | np.uint64((1 << 48) - 1), side="right")
    shortcut = np.where(lo == hi, lo.astype(np.int64) - bound, -1 - bound)
    return cuts_arr, shortcut, bound


def gaussian_bound(sigma: float) -> int:
    """The largest |value| :func:`sample_gaussian` gives at ``sigma``: floor(6 sigma)."""
    return int(6 * float(sigma))


def sample_gaussian(shape: int | tuple[int, ...], sigma: float, prg: Prg | None = None) -> np.ndarray:
    """Rounded Gaussian integers of standard deviation ``sigma``, clipped at 6 sigma (int64):
    SEAL's clipped normal, sampled by inversion of its cumulative table with one 64-bit CSPRNG
    word per sample (table error below 2^-52 per value; a 16-bit prefix table settles all but
    about one word in two thousand without a search)."""
    prg = prg or default_prg()
    cuts, shortcut, bound = _gaussian_table(float(sigma))
    u = prg.uint64(int(np.prod(shape)))
    out = shortcut[u >> np.uint64(48)]
    split = np.flatnonzero(out == -1 - bound)
    if split.size:
        out[split] = np.searchsorted(cuts, u[split], side="right").astype(np.int64) - bound
    return out.reshape(shape)


def uniform_poly(params: Parameters, rows: Iterable[int], prg: Prg) -> np.ndarray:
    """A uniform polynomial on the given kernel rows (its NTT form is uniform too)."""
    rows = list(rows)
    out = np.empty((len(rows), params.n), dtype=np.uint64)
    for k, r in enumerate(rows):
        out[k] = prg.below(params.primes[r], params.n)
    return out


def small_to_rns(params: Parameters, coeffs: np.ndarray, rows: Iterable[int], *, ntt: bool = True) -> np.ndarray:
    """Signed integer coefficients (..., N), |x| < 2^62, reduced on each kernel row -> (..., rows, N),
    NTT form unless ``ntt=False``."""
    coeffs = np.ascontiguousarray(coeffs, dtype=np.int64)
    rows = list(rows)
    out = params.context.from_signed(coeffs, rows)
    if ntt:
        params.context.ntt(out, rows)
    return out


def expand_seed(params: Parameters, seed: bytes, shape_rows: list[int], count: int) -> np.ndarray:
    """``count`` uniform polynomials over ``shape_rows`` from ``seed`` (AES-256-CTR)."""
    if len(seed) != SEED_BYTES:
        raise ConfigError(f"a polynomial seed is {SEED_BYTES} bytes, got {len(seed)}")
    prg = Prg(seed)
    return np.stack([uniform_poly(params, shape_rows, prg) for _ in range(count)])


# -- keys ---------------------------------------------------------------------------------------

@dataclass(eq=False)
class SecretKey:
    """The secret polynomial s: ``coefficients`` (N,) int64 and its NTT form over every row."""

    params: Parameters
    coefficients: np.ndarray
    ntt: np.ndarray = field(repr=False)

    @classmethod
    def generate(cls, params: Parameters, prg: Prg | None = None) -> SecretKey:
        """A uniform ternary secret (CSPRNG)."""
        return cls.from_coefficients(params, sample_ternary(params.n, prg))

    @classmethod
    def from_coefficients(cls, params: Parameters, coefficients: Any) -> SecretKey:
        """The secret with the given small integer coefficients (N,); |s_i| < 2^31."""
        s = np.asarray(coefficients)
        if s.shape != (params.n,) or not np.issubdtype(s.dtype, np.integer):
            raise ConfigError(f"a secret key needs {params.n} integer coefficients, got shape {s.shape}, dtype {s.dtype}")
        s = s.astype(np.int64)
        if s.size and int(np.max(np.abs(s))) >= 1 << 31:
            raise ConfigError("secret key coefficients must be small (|s_i| < 2^31)")
        return cls(params, s, small_to_rns(params, s, range(len(params.primes))))

    def __repr__(self) -> str:
        return f"ckks.SecretKey(N={self.params.n})"


@dataclass(eq=False)
class SecretKeyShare:
    """One party's additive share s_i of a secret key held by ``parties`` parties jointly
    (s = s_0 + ... + s_(n-1) on every row): NTT form (L + 2, N) over every row. The share alone is
    uniform; it is as secret as a key (files 0600)."""

    params: Parameters
    ntt: np.ndarray = field(repr=False)
    index: int
    parties: int

    def __post_init__(self) -> None:
        shape = (len(self.params.primes), self.params.n)
        if self.ntt.shape != shape or self.ntt.dtype != np.uint64:
            raise ConfigError(f"a secret-key share is a uint64 array of shape {shape}, got {self.ntt.shape} {self.ntt.dtype}")
        if not 2 <= self.parties < 1 << 16 or not 0 <= self.index < self.parties:  # u16 on the wire
            raise ConfigError(f"party index {self.index} of {self.parties} parties is out of range")

    def __repr__(self) -> str:
        return f"ckks.SecretKeyShare(N={self.params.n}, party {self.index} of {self.parties})"


@dataclass(eq=False)
class PublicKey:
    """(b, a) over Q p in NTT form, shape (2, L + 2, N); ``seed`` set when a is seed-expanded."""

    params: Parameters
    data: np.ndarray
    seed: bytes | None = None
    _scaled: list = field(default_factory=list, repr=False)

    def scaled(self) -> tuple[np.ndarray, np.ndarray]:
        """(b, a) on the ciphertext rows times p^-1 mod q_i, shape (2, L + 1, N), and (b, a) on
        the special prime's row, shape (2, 1, N): what encryption multiplies by (cached)."""
        if not self._scaled:
            params = self.params
            mods = list(range(len(params.moduli)))
            pinv = np.array([pow(params.special, -1, q) for q in params.moduli], dtype=np.uint64)
            body = params.context.mul_scalar(np.ascontiguousarray(self.data[:, :-1]), pinv, mods)
            self._scaled.extend([body, np.ascontiguousarray(self.data[:, -1:])])
        return self._scaled[0], self._scaled[1]


@dataclass(eq=False)
class SwitchingKey:
    """Key switching from t to s: ``data`` (L + 1, 2, L + 2, N) NTT form; ``galois`` the
    automorphism element for rotation/conjugation keys, 0 for the relinearisation key;
    ``seed`` set when every a_j is expanded from it."""

    params: Parameters
    data: np.ndarray
    galois: int
    seed: bytes | None = None


def public_key(sk: SecretKey, *, a: np.ndarray | None = None, e: np.ndarray | None = None,
               seed: bytes | None = None, prg: Prg | None = None) -> PublicKey:
    """pk = (-a s + e, a). ``a`` (L + 2, N) NTT form uniform, or expanded from ``seed`` (fresh
    seed if neither is given); ``e`` the error's N integer coefficients (sampled if None)."""
    params = sk.params
    ctx = params.context
    rows = list(range(len(params.primes)))
    if a is None:
        seed = seed if seed is not None else os.urandom(SEED_BYTES)
        a = expand_seed(params, seed, rows, 1)[0]
    else:
        a = _checked_poly(params, a, (len(rows), params.n), "public key a")
        seed = None
    e = sample_gaussian(params.n, params.sigma, prg) if e is None else e
    b = ctx.sub(small_to_rns(params, e, rows), ctx.mul(a, sk.ntt, rows), rows)
    return PublicKey(params, np.stack([b, a]), seed)


def switching_key(sk: SecretKey, target: np.ndarray, *, galois: int = 0, a: np.ndarray | None = None,
                  e: np.ndarray | None = None, seed: bytes | None = None, prg: Prg | None = None) -> SwitchingKey:
    """A key switching ``target`` (NTT form over every row, (L + 2, N)) to ``sk``.

    ``a`` (L + 1, L + 2, N) NTT uniform or expanded from ``seed``; ``e`` (L + 1, N) integer error
    coefficients, one polynomial per digit (sampled if None)."""
    params = sk.params
    ctx = params.context
    digits, rows = len(params.moduli), list(range(len(params.primes)))
    if a is None:
        seed = seed if seed is not None else os.urandom(SEED_BYTES)
        a = expand_seed(params, seed, rows, digits)
    else:
        a = _checked_poly(params, a, (digits, len(rows), params.n), "switching key a")
        seed = None
    e = sample_gaussian((digits, params.n), params.sigma, prg) if e is None else np.asarray(e)
    if e.shape != (digits, params.n):
        raise ConfigError(f"switching key errors need shape {(digits, params.n)}, got {e.shape}")
    b = ctx.sub(small_to_rns(params, e, rows), ctx.mul(a, np.broadcast_to(sk.ntt, a.shape).copy(), rows), rows)
    p = params.special
    for j, q in enumerate(params.moduli):
        gadget = np.array([p % q], dtype=np.uint64)
        term = ctx.mul_scalar(np.ascontiguousarray(target[j:j + 1]), gadget, [j])
        b[j, j:j + 1] = ctx.add(np.ascontiguousarray(b[j, j:j + 1]), term, [j])
    return SwitchingKey(params, np.ascontiguousarray(np.stack([b, a], axis=1)), galois, seed)


def relin_key(sk: SecretKey, **kw: Any) -> SwitchingKey:
    """The relinearisation key: switches s^2 to s."""
    rows = list(range(len(sk.params.primes)))
    return switching_key(sk, sk.params.context.mul(sk.ntt, sk.ntt, rows), galois=0, **kw)


def galois_element(params: Parameters, steps: int) -> int:
    """The automorphism X -> X^g that rotates the slots left by ``steps`` (5^steps mod 2N)."""
    two_n = 2 * params.n
    return pow(5, int(steps) % params.slots, two_n)


def conjugation_element(params: Parameters) -> int:
    return 2 * params.n - 1


def galois_key(sk: SecretKey, galois: int, **kw: Any) -> SwitchingKey:
    """The key for the automorphism X -> X^galois: switches s(X^g) to s."""
    params = sk.params
    target = params.context.automorph(sk.ntt, int(galois))
    return switching_key(sk, target, galois=int(galois), **kw)


def _checked_poly(params: Parameters, a: Any, shape: tuple, what: str) -> np.ndarray:
    a = np.asarray(a)
    if a.shape != shape or a.dtype != np.uint64:
        raise ConfigError(f"{what} must be a uint64 array of shape {shape}, got {a.dtype} {a.shape}")
    primes = np.array(params.primes, dtype=np.uint64)
    if np.any(a >= primes[:, None] if a.ndim == 2 else a >= primes[None, :, None]):
        raise ConfigError(f"{what} has entries not reduced modulo their row's prime")
    return np.ascontiguousarray(a)


class KeySet:
    """Everything a party generates for itself: secret, public, relinearisation and Galois keys.

    ``rotations`` lists the slot rotation steps to make keys for; ``conjugation`` adds the
    conjugation key."""

    def __init__(self, params: Parameters, *, rotations: Iterable[int] = (), conjugation: bool = False,
                 relinearization: bool = True, secret: SecretKey | None = None) -> None:
        if secret is not None and secret.params != params:
            raise KeyMismatchError("the secret key belongs to other parameters")
        self.params = params
        self.secret = secret or SecretKey.generate(params)
        self.public = public_key(self.secret)
        self.relin = relin_key(self.secret) if relinearization else None
        self.galois: dict[int, SwitchingKey] = {}
        for step in rotations:
            g = galois_element(params, step)
            if g not in self.galois:
                self.galois[g] = galois_key(self.secret, g)
        if conjugation:
            g = conjugation_element(params)
            self.galois[g] = galois_key(self.secret, g)
