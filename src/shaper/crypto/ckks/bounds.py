"""Worst-case error bounds for CKKS evaluations: what sizes the flooding noise of threshold
decryption (``docs/threshold-ckks.md``).

**Norms.** For a polynomial x of R = Z[X]/(X^N + 1) (or its real extension) the canonical norm
is ||x||_can = max_k |x(zeta_k)| over the N primitive 2N-th roots of unity zeta_k. The N/2
slots of :class:`~shaper.crypto.ckks.Encoder` are the values at zeta^(5^j); the other N/2 are
their complex conjugates, so ||x||_can is the largest slot magnitude of x. The rules used:

* ||x + y||_can <= ||x||_can + ||y||_can and ||x y||_can <= ||x||_can ||y||_can (products are
  slot-wise in the embedding; even |slot_k(x y)| = |slot_k(x)| |slot_k(y)|);
* automorphisms (rotations, conjugation) permute the embeddings: ||sigma_g(x)||_can = ||x||_can;
* ||x||_inf <= ||x||_can (x_i = (1/N) sum_k x(zeta_k) zeta_k^-i) and ||x||_2 <= ||x||_can
  (Parseval for this transform: sum_k |x(zeta_k)|^2 = N ||x||_2^2). So the error bound E of a
  :class:`Bound` bounds every coefficient of the error and its l2 norm: what flooding needs
  (the key-recovery and statistical flood widths of the design take E >= ||e||_2).

**What is bounded.** A ciphertext at level l and scale Delta has phase c_0 + c_1 s (+ c_2 s^2)
= M + e (mod Q_l), where M = Delta sigma^-1(z) is the *ideal* message of the exact slot values
z (real coefficients, not rounded) and e is everything else: encoding rounding and the float
error of encoding, encryption noise, key-switching and rescaling noise, and the cross terms of
products. ``message`` bounds ||M||_can = Delta max_j |z_j|; ``error`` bounds ||e||_can. So
``error / scale`` (:meth:`NoiseModel.slot_error`) bounds |decoded slot - exact slot value| in
every slot, and ``message + error`` (:meth:`NoiseModel.coefficient_bound`) every coefficient of
the decrypted phase (decryption is correct while that stays below q_0 / 2 at level 0). (The
encoding rounding is counted in ``error``, not in ``message``, so that the slot error is against
the exact values.)

Message bounds are worst case over every message within the declared bounds (|z_j| <= the value
bound in every slot, or slot by slot for a :class:`SlotBound`). Error bounds are worst case over
those messages and hold with high probability over the *honest* randomness only:

* **tail bounds** (each failing with probability <= 2^-tail_bits, union bound per circuit over
  the distinct random polynomials it uses): the secret s, every key error, every encryption or
  input error and the public-key encryption's ternary v. These are independent of anything an
  evaluator chooses, so a tail bound on their canonical norm holds simultaneously for every
  circuit and every message;
* **deterministic worst case**: rounding polynomials (encoding, rescale, key-switching mod-down,
  public-key encryption's division by p) and the key-switching digits. These depend on the
  ciphertext, which depends on s, the keys and the messages (c_1 after a product contains c_0),
  so they are not independent of the random polynomials they multiply; a heuristic (random-
  rounding, independent digits) bound would not be a proof. For a polynomial with coefficients
  |x_i| <= B, ||x||_can <= B W(N) with W(N) = csc(pi / 2N) ~ 2N / pi (exact: the maximum of
  |sum_i x_i zeta^i| over the box is max_theta sum_i |cos(arg zeta^i - theta)|, and the N
  angles arg zeta^i are one of each antipodal pair of 2N-th roots, whose sum of |cos| peaks at
  csc(pi / 2N)). This is sharper than the N B of the l1 norm by 2/pi, and attained.

**The "tail" rounding rule (a heuristic, opt-in).** ``NoiseModel(..., rounding="tail")``
models every rounding residue (encoding, rescale, mod-down, the public-key division by p) as a
polynomial of independent coefficients uniform on [-1/2, 1/2] and every key-switching digit as
independent uniform on the centred residues of its prime, and bounds them by the same
subgaussian tail (failing with probability <= 2^-tail_bits each) as the random polynomials:
||r||_can <= C sqrt(N / 12) instead of W / 2 (2^8.1 against 2^12.4 at N = 2^14), digits
C sqrt(N / 12) (q - 1) instead of W (q - 1) / 2. This is the standard CKKS noise heuristic
(Costache, Curtis, Hales, Murphy, Ogilvie, Player, "On the precision loss in approximate
homomorphic encryption", SAC 2023) and holds only insofar as the ciphertexts behave as
pseudo-random: it is **not** a deterministic worst case (an evaluator who chooses the
ciphertexts can make residues and digits correlate with s). Products, sums and the treatment of
the random polynomials are unchanged. About 4.2 bits less per rounding or key-switching term;
on the CNN it lowers the output bound by about 4 bits. "worst" stays the default.

**Failure of the declaration.** A message beyond its declared bound, or randomness that is not
honest (an input owner adding a large error to its share), is not covered: the design's
documented residual. A malicious owner's extra error does not depend on s.

The constants of :class:`NoiseModel` carry their derivations; :func:`demo_bound` is the circuit
of ``shaper fhe demo`` and :func:`shaper.ml.cnn.plan.output_bound` the CNN's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError, ScaleError
from .params import Parameters
from .keys import gaussian_bound

__all__ = ["DISCRETE_TABLE_ERROR", "ENCODE_FLOAT_STAGE", "KEY_METHODS", "ROUNDING_RULES", "TAIL_BITS", "AnyBound", "Bound", "NoiseModel",
           "SlotBound", "canonical_box_factor", "demo_bound", "discrete_gaussian_law", "encoding_float_error",
           "rounded_gaussian_law", "rounded_table_bits", "rounded_table_error", "subgaussian_parameter", "tail_factor",
           "ternary_law"]

#: default statistical failure probability of each tail bound: 2^-64
TAIL_BITS = 64
#: key generation methods (:mod:`shaper.protocols.threshold_ckks.keygen`)
KEY_METHODS = ("exact", "local", "contributed")
#: rules for rounding residues and key-switching digits (:class:`NoiseModel`): "worst" is the
#: deterministic worst case (a proof), "tail" the independent-uniform heuristic
ROUNDING_RULES = ("worst", "tail")
#: subgaussian parameter of the uniform law on [-1, 1] (strictly subgaussian: E exp(tX) =
#: sinh(t) / t <= exp(t^2 / 6), v = 1/sqrt(3)); [-1/2, 1/2] has half of it, 1/sqrt(12)
UNIFORM_PARAMETER = 1.0 / math.sqrt(3.0)
#: a centred digit of an odd prime q is uniform on the q integers of [-(q-1)/2, (q-1)/2]: its
#: variance is (q^2 - 1)/12 and it is strictly subgaussian (symmetric discrete uniform laws are:
#: v^2 = (q^2 - 1)/12); counted as (q - 1) times the continuous [-1/2, 1/2] parameter, this factor
#: covers sqrt((q + 1)/(q - 1)) <= 1 + 2^-30 for every prime q >= 2^30
DIGIT_SLACK = 1.0 + 2.0 ** -30
#: unit roundoff of float64
UNIT_ROUNDOFF = 2.0 ** -53
#: per-stage relative error of a radix-2 FFT in units of the roundoff: Higham (Accuracy and
#: Stability of Numerical Algorithms, 2nd ed., Thm 24.2) bounds the relative l2 error of a
#: Cooley-Tukey FFT of length 2^t by t eta / (1 - t eta) with eta = mu + gamma_4 (sqrt 2 + mu),
#: mu the twiddle error (~u): eta ~ 6.66 u, rounded up to 7 u
ENCODE_FLOAT_STAGE = 7.0
#: scale bound tolerance (relative) for operands that must share a scale (as the evaluator's)
SCALE_TOLERANCE = 2.0 ** -40

Value = float | np.ndarray


# -- constants ---------------------------------------------------------------------------------

def canonical_box_factor(n: int) -> float:
    """W(N) = max { ||x||_can : x real, |x_i| <= 1 } = csc(pi / 2N) (~ 2N / pi).

    For a root zeta of order 2N, |sum_i x_i zeta^i| = max_theta sum_i x_i cos(arg zeta^i -
    theta), maximised over the box by x_i = sign(cos(...)): max_theta sum_i |cos(arg zeta^i -
    theta)|. The N angles arg zeta^i (i < N) are one representative of each antipodal pair of
    the 2N-th roots, and |cos| is pi-periodic, so the sum is sum_{j<N} |cos(theta - pi j / N)|,
    whose maximum over theta is csc(pi / 2N) (its minimum cot(pi / 2N)). Deterministic: used
    for rounding polynomials (|r_i| <= 1/2: ||r||_can <= W / 2) and key-switching digits."""
    return 1.0 / math.sin(math.pi / (2 * int(n)))


def tail_factor(n: int, tail_bits: float = TAIL_BITS) -> float:
    """C such that ||a||_can <= C v sqrt(N) except with probability 2^-tail_bits, for a
    polynomial a with independent coefficients, each subgaussian of parameter v
    (E exp(t a_i) <= exp(v^2 t^2 / 2)).

    Derivation. For an embedding zeta_k and a direction theta, Re(e^(-i theta) a(zeta_k)) =
    sum_i a_i cos(phi_i - theta) is subgaussian with parameter v sqrt(sum_i cos^2(phi_i -
    theta)) = v sqrt(N / 2) exactly (sum_i cos(2 phi_i - 2 theta) = 0: zeta_k^2 is a
    non-trivial N-th root of unity), so P(|projection| > t) <= 2 exp(-t^2 / (v^2 N)). Take M
    lines through the origin at angles pi m / M: every complex w has |w| cos(pi / 2M) <= max_m
    |Re(e^(-i pi m / M) w)|. The union over the N/2 embeddings (the other N/2 are conjugates,
    of equal modulus) and the M lines fails with probability <= N M exp(-t^2 / (v^2 N)) =
    2^-tail_bits at t = v sqrt(N) sqrt(tail_bits ln 2 + ln(N M)). Hence
    C = min_M sqrt(tail_bits ln 2 + ln(N M)) / cos(pi / 2M). M = 2 (real and imaginary parts)
    gives sqrt(2 (tail_bits ln 2 + ln 2N)) (10.47 at N = 2^14, 64 bits); the best M (about 16)
    gives 7.58: 0.47 bits less on every tail-bounded term, at the same failure probability."""
    n = int(n)
    base = float(tail_bits) * math.log(2.0)
    return min(math.sqrt(base + math.log(n * m)) / math.cos(math.pi / (2 * m)) for m in range(2, 257))


def subgaussian_parameter(values: Any, probs: Any, slack: float = 0.0) -> float:
    """The smallest v with E exp(t X) <= exp(v^2 t^2 / 2) for every real t, for the finite
    symmetric law P(X = values[i]) = probs[i] (normalised here), computed numerically; with
    ``slack`` = delta, for every *symmetric* law on the same support whose probability of each
    |X| = i is within delta of this one's (a sampler's rounded table with an exact random sign):
    such a law's E cosh(t X) exceeds this one's by at most delta sum_i (cosh(t i) - 1), added.

    f(t) = 2 ln E exp(t X) / t^2 tends to Var X (+ the slack's) as t -> 0 and is at most
    2 (T + 1) / t once t >= 1 (T = max |X|), so beyond t_end = 4 (T + 1) / Var it is below
    Var / 2: v^2 = sup f is attained on (0, t_end], searched on a 20,000-point geometric grid
    from 10^-4 (f is smooth and varies by far less than 10^-4 relative between neighbours)
    together with the limit at 0; the result is rounded up by 10^-4 relative. Uniform ternary
    gives sqrt(2/3) (it is strictly subgaussian), the samplers' Gaussians of sigma 3.2 give
    3.2004 (the MPC's discrete Gaussian with its table's slack) and 3.2133 (the rounded
    continuous Gaussian, variance sigma^2 + 1/12)."""
    x = np.asarray(values, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    p = p / p.sum()
    if abs(float(np.sum(p * x))) > 1e-12 * max(1.0, float(np.max(np.abs(x)))):
        raise ValueError("subgaussian_parameter takes a centred law")
    top = float(np.max(np.abs(x)))
    folded = np.unique(np.abs(x))
    var = float(np.sum(p * x * x)) + slack * float(np.sum(folded * folded))
    if var == 0.0:
        return 0.0
    ts = np.geomspace(1e-4, max(4.0 * (top + 1.0) / var, 1.0), 20000)[:, None]
    # ln (E exp(t X) + slack sum_i (cosh(t i) - 1)), stably with the factor exp(t T) taken out
    body = np.sum(p[None, :] * np.exp(ts * (x[None, :] - top)), axis=1)
    extra = slack * np.sum(0.5 * (np.exp(ts * (folded[None, :] - top)) + np.exp(-ts * (folded[None, :] + top)))
                           - np.exp(-ts * top), axis=1)
    t = ts[:, 0]
    logm = np.log(body + extra) + t * top
    sup = max(var, float(np.max(2.0 * logm / t ** 2)))
    return math.sqrt(sup) * (1.0 + 1e-4)


def ternary_law() -> tuple[np.ndarray, np.ndarray]:
    """The secret's law: uniform on {-1, 0, 1} (:func:`~shaper.crypto.ckks.sample_ternary`, and
    the MPC's ternary sampler of both key-generation methods)."""
    return np.array([-1.0, 0.0, 1.0]), np.full(3, 1.0 / 3.0)


def rounded_table_error(sigma: float) -> float:
    """A bound on how far each probability of :func:`~shaper.crypto.ckks.sample_gaussian`'s
    table is from :func:`rounded_gaussian_law`: the table sums k = 2 floor(6 sigma) + 1 float64
    masses (each within 2^-52 absolute: erf near 1), divides by their total and cuts at 2^-64,
    so each threshold is within k 2^-51 and each probability within k 2^-50; taken as k 2^-49."""
    return (2 * int(6 * float(sigma)) + 1) * 2.0 ** -49


#: per-|X| error of the MPC sampler's 40-bit table (each threshold within 2^-41)
DISCRETE_TABLE_ERROR = 2.0 ** -40


def rounded_gaussian_law(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """The ideal law of :func:`~shaper.crypto.ckks.sample_gaussian` (encryption errors, a
    party's own errors: local key generation, joint inputs; single-key keys): the rounded
    Gaussian of standard deviation sigma clipped at 6 sigma, P(k) proportional to
    Phi((k + 1/2) / sigma) - Phi((k - 1/2) / sigma) for |k| <= floor(6 sigma). The sampled
    law's probabilities are within :func:`rounded_table_error` of these, i.e. at most (1 + eps)
    times them with eps = rounded_table_error / min P (2^-15.5 at sigma 3.2); so every moment
    generating function, and every Chernoff tail of a polynomial of N such coefficients, is at
    most (1 + eps)^N <= exp(N eps) times the ideal law's (:class:`NoiseModel` raises its tail
    bits by that factor's log2, :func:`rounded_table_bits`: 1.0 bit for 2 x 2^14
    coefficients, which moves C by 0.5 %)."""
    sigma = float(sigma)
    bound = int(6 * sigma)
    ks = np.arange(-bound, bound + 1, dtype=np.float64)
    r = sigma * math.sqrt(2.0)
    mass = np.array([0.5 * (math.erf((k + 0.5) / r) - math.erf((k - 0.5) / r)) for k in ks])
    return ks, mass / mass.sum()


def discrete_gaussian_law(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """The ideal law of the MPC's discrete Gaussian (``method="exact"`` key errors,
    :mod:`shaper.protocols.additive.sampling`): P(x) proportional to exp(-x^2 / 2 sigma^2) on
    [-tail, tail] (tail 23 at sigma 3.2, ceil(7.2 sigma) otherwise, the sampler's rule). The
    sampler draws |X| from a 40-bit table (each probability within
    :data:`DISCRETE_TABLE_ERROR`) and an exact random sign, so its law is symmetric and
    within that slack of this one (:func:`subgaussian_parameter`'s ``slack``). A wider tail
    than the sampler's would not lower the parameter: cutting a symmetric law's tails only
    lowers E cosh(t X), and the untruncated discrete Gaussian is sigma-subgaussian
    (Micciancio-Peikert 2012, Lemma 2.8)."""
    sigma = float(sigma)
    tail = 23 if sigma == 3.2 else max(1, math.ceil(7.2 * sigma))
    xs = np.arange(-tail, tail + 1, dtype=np.float64)
    rho = np.exp(-xs * xs / (2.0 * sigma * sigma))
    return xs, rho / rho.sum()


@functools.lru_cache(maxsize=16)
def _parameter(law: str, sigma: float) -> float:
    if law == "ternary":
        return subgaussian_parameter(*ternary_law())
    if law == "rounded":
        return subgaussian_parameter(*rounded_gaussian_law(sigma))
    return subgaussian_parameter(*discrete_gaussian_law(sigma), slack=DISCRETE_TABLE_ERROR)


def rounded_table_bits(sigma: float, count: int) -> float:
    """log2 of the factor exp(count eps) by which the rounded Gaussian's table can raise the
    failure probability of a tail bound on ``count`` coefficients (:func:`rounded_gaussian_law`)."""
    _, probs = rounded_gaussian_law(sigma)
    return int(count) * rounded_table_error(sigma) / float(np.min(probs)) * math.log2(math.e)


def encoding_float_error(n: int) -> float:
    """eta(N): a bound on the relative l2 error ||fl(Delta m) - Delta m||_2 / ||Delta m||_2 of
    the float64 coefficients :meth:`~shaper.crypto.ckks.Encoder.encode` rounds (inverse FFT of
    length N, the untwisting product, the product by the scale): log2(N) FFT stages at
    :data:`ENCODE_FLOAT_STAGE` u each, plus 4 u for the untwist table, its product and the
    scale. Measured on numpy's FFT against a long-double reference: about 2 u (the test suite
    checks the margin), against (7 log2 N + 4) u = 102 u at N = 2^14.

    In the canonical norm the float error adds ||d||_can <= ||d||_1 <= sqrt(N) ||d||_2 <=
    sqrt(N) eta Delta ||z||_inf, using ||m||_2 = (sum_k |m(zeta_k)|^2 / N)^(1/2) <= max |z_j|."""
    return (ENCODE_FLOAT_STAGE * math.log2(int(n)) + 4.0) * UNIT_ROUNDOFF


# -- bounds ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    """Worst-case bounds for one ciphertext: at ``level`` and ``scale``, ``message`` >=
    ||M||_can = scale max |z_j| (the ideal message of the exact slot values z) and ``error`` >=
    ||e||_can of the rest of its phase (so also >= ||e||_inf and >= ||e||_2 of the error's
    coefficients: module notes). ``size`` is 3 for a product not yet relinearised."""

    level: int
    scale: float
    message: float
    error: float
    size: int = 2

    def bound(self) -> Bound:
        return self

    @property
    def log2_slot_error(self) -> float:
        """log2(error / scale): the bound on every decoded slot's error, in bits."""
        return math.log2(self.error / self.scale) if self.error > 0 else -math.inf


@dataclass(frozen=True, eq=False)
class SlotBound:
    """The same bounds slot by slot: ``message[j]`` >= scale |z_j| and ``error[j]`` >= |e(zeta_j)|
    for each of the N/2 slots (the conjugate embeddings mirror them). Products are slot-wise in
    the embedding and rotations permute the slots, so tracking per slot is as sound as the
    scalar rule and keeps masks (zeros of a plaintext) from spreading worst cases everywhere;
    terms known only through a canonical norm (rounding, key switching) are added to every
    slot. :meth:`bound` is the :class:`Bound` (the maxima)."""

    level: int
    scale: float
    message: np.ndarray
    error: np.ndarray
    size: int = 2

    def bound(self) -> Bound:
        return Bound(self.level, self.scale, float(np.max(self.message)), float(np.max(self.error)), self.size)


AnyBound = Bound | SlotBound


def _is_slotwise(*xs: Any) -> bool:
    return any(isinstance(x, (SlotBound, np.ndarray)) and np.ndim(x.message if isinstance(x, SlotBound) else x) > 0
               for x in xs)


def _make(level: int, scale: float, message: Value, error: Value, size: int, slots: int, slotwise: bool) -> AnyBound:
    if slotwise:
        m = np.broadcast_to(np.asarray(message, dtype=np.float64), (slots,)).copy()
        e = np.broadcast_to(np.asarray(error, dtype=np.float64), (slots,)).copy()
        m.flags.writeable = e.flags.writeable = False
        return SlotBound(int(level), float(scale), m, e, int(size))
    return Bound(int(level), float(scale), float(message), float(error), int(size))


def _peak(value: Value) -> float:
    return float(np.max(np.abs(value))) if np.ndim(value) else abs(float(value))


def _values(value_bound: Value, slots: int) -> Value:
    if np.ndim(value_bound) == 0:
        v = float(value_bound)
        if not (math.isfinite(v) and v >= 0):
            raise ConfigError(f"a value bound must be finite and >= 0, got {value_bound!r}")
        return v
    v = np.abs(np.asarray(value_bound, dtype=np.float64))
    if v.shape != (slots,) or not np.all(np.isfinite(v)):
        raise ConfigError(f"a per-slot value bound has {slots} finite entries, got shape {v.shape}")
    return v


def _roll(x: Value, step: int) -> Value:
    """Slot j of the result is slot j + step of x (rotation left by ``step``)."""
    return np.roll(x, -int(step)) if np.ndim(x) else x


# -- the noise model ---------------------------------------------------------------------------

class NoiseModel:
    """The worst-case error bounds of CKKS operations under ``params`` (``shaper.crypto.ckks``
    as implemented: hybrid key switching with one special prime p and one digit per ciphertext
    prime), for keys made by ``parties`` parties with ``key_method`` "exact" (every error one
    MPC discrete Gaussian of width ``params.sigma``), "local" (every key error the sum of the
    parties' own rounded Gaussians, clipped at 6 sigma) or "contributed" (the same, each party's
    range-checked on the active engine: up to parties - 1 of them any coefficients within
    +-floor(6 sigma), taken at their worst case, floor(6 sigma) W each); the single-key
    :class:`~shaper.crypto.ckks.KeySet` is ``key_method="local"`` with ``parties=1``. Tail bounds
    fail with probability <= 2^-``tail_bits`` each. ``rounding`` is "worst" (default:
    rounding residues and key-switching digits at their deterministic worst case, a proof) or
    "tail" (both as independent uniform polynomials under the same tail: the SAC 2023 heuristic
    of the module notes, not a worst case); it sets ``round_can`` and ``digit_can``.

    Constants (all canonical norms, attributes of the instance):

    * ``W`` = csc(pi / 2N): deterministic factor of a polynomial with coefficients in [-1, 1]
      (:func:`canonical_box_factor`); ``round_can`` = W / 2 bounds a rounding polynomial and
      ``digit_can`` (q - 1) = W (q - 1) / 2 a centred digit of q (with ``rounding="tail"``:
      C sqrt(N / 12) and C sqrt(N / 12) (1 + 2^-30) (q - 1));
    * ``C``: the tail factor (:func:`tail_factor`), a polynomial with independent
      v-subgaussian coefficients has ||a||_can <= C v sqrt(N); ``C_gauss`` the same for sums of
      the rounded Gaussian sampler's polynomials, with its table's factor on the failure
      probability (:func:`rounded_table_bits`);
    * ``secret`` = C v_s sqrt(N), v_s = sqrt(2/3) the subgaussian parameter of uniform ternary
      (computed, :func:`subgaussian_parameter`; the secret is ternary for both methods);
    * ``key_error`` = C v_k sqrt(N): exact, v_k the MPC discrete Gaussian's parameter (sigma,
      within 10^-4); local, v_k = sqrt(parties) v_g with v_g the rounded Gaussian's;
    * ``input_error`` = C sqrt(parties) v_g sqrt(N): the joint input's sum of the parties' own
      Gaussians (:func:`~shaper.crypto.ckks.multiparty.joint_input_share`);
    * ``encryption_error`` = C v_g sqrt(N) (e_0, e_1 of public-key encryption) and
      ``ephemeral`` = C v_s sqrt(N) (its ternary v);
    * ``rescale_rounding(size)`` = (W/2)(1 + S + S^2 ...): dividing c_0 + c_1 s (+ c_2 s^2) by q
      with rounding leaves r_0 + r_1 s (+ r_2 s^2), |r_i coefficients| <= 1/2 taken at their
      deterministic worst case W / 2 (not the heuristic sqrt(N / 12)), times S = ``secret``;
    * ``key_switch(level)``: switching c (any polynomial at ``level``) with a key
      b_j = -a_j s + e_j + p g_j t over Q p, digits D_j = [c]_(q_j) centred
      (|coefficients| <= (q_j - 1)/2, deterministic: ||D_j||_can <= (q_j - 1) W / 2), gives
      sum_j D_j (b_j, a_j) of phase p c t + sum_j D_j e_j; the mod-down divides by p with
      rounding: error sum_{j<=level} (q_j - 1) W / 2 key_error / p + (W/2)(1 + S).

    Operations take and return :class:`Bound` (or :class:`SlotBound` when any operand or value
    bound is per slot), never modify their inputs, and check levels and scales as the evaluator
    does (:class:`~shaper.errors.ScaleError`)."""

    def __init__(self, params: Parameters, parties: int = 1, key_method: str = "exact",
                 tail_bits: float = TAIL_BITS, *, rounding: str = "worst") -> None:
        if rounding not in ROUNDING_RULES:
            raise ConfigError(f"unknown rounding rule {rounding!r}; choose from {', '.join(ROUNDING_RULES)}")
        if key_method not in KEY_METHODS:
            raise ConfigError(f"unknown key-generation method {key_method!r}; choose from {', '.join(KEY_METHODS)}")
        if int(parties) != parties or parties < 1:
            raise ConfigError(f"parties must be a positive integer, got {parties!r}")
        if not (math.isfinite(tail_bits) and tail_bits > 0):
            raise ConfigError(f"tail_bits must be positive, got {tail_bits!r}")
        self.params = params
        self.parties = int(parties)
        self.key_method = key_method
        self.tail_bits = float(tail_bits)
        n = params.n
        self.n, self.slots = n, params.slots
        self.rounding = rounding
        self.W = canonical_box_factor(n)
        self.C = tail_factor(n, tail_bits)
        root = math.sqrt(n)
        if rounding == "worst":
            self.round_can = self.W / 2.0
            #: ||D||_can / (q - 1) for a centred digit D of a prime q
            self.digit_can = self.W / 2.0
        else:
            # heuristic: residues uniform on [-1/2, 1/2] (strictly subgaussian, v = 1/sqrt(12)),
            # digits uniform on the centred residues of q (v <= q / sqrt(12)), independent
            self.round_can = self.C * UNIFORM_PARAMETER * 0.5 * root
            self.digit_can = self.C * UNIFORM_PARAMETER * 0.5 * root * DIGIT_SLACK
        sigma = float(params.sigma)
        # sums of `parties` rounded Gaussians: the table's factor on the failure probability
        self.C_gauss = tail_factor(n, tail_bits + rounded_table_bits(sigma, self.parties * n))
        self.v_secret = _parameter("ternary", 0.0)
        self.v_gauss = _parameter("rounded", sigma)
        if key_method == "exact":
            self.v_key = _parameter("discrete", sigma)
            self.key_error = self.C * self.v_key * root
        else:
            self.v_key = math.sqrt(self.parties) * self.v_gauss
            self.key_error = self.C_gauss * self.v_key * root
            if key_method == "contributed":  # up to parties - 1 of the errors any values within the range check
                self.key_error += (self.parties - 1) * gaussian_bound(sigma) * self.W
        self.secret = self.C * self.v_secret * root
        self.input_error = self.C_gauss * math.sqrt(self.parties) * self.v_gauss * root
        if key_method == "contributed":  # the active engine's joint inputs: range-checked errors, as the keys'
            self.input_error += (self.parties - 1) * gaussian_bound(sigma) * self.W
        self.encryption_error = self.C_gauss * self.v_gauss * root
        self.ephemeral = self.C * self.v_secret * root
        self.eta = encoding_float_error(n)

    def __repr__(self) -> str:
        return (f"NoiseModel(N=2^{self.n.bit_length() - 1}, {self.parties} parties, {self.key_method} keys, "
                f"{self.rounding} rounding, "
                f"tail 2^-{self.tail_bits:g}: C = {self.C:.3f}, ||s|| <= 2^{math.log2(self.secret):.2f}, "
                f"||e_key|| <= 2^{math.log2(self.key_error):.2f})")

    # -- constants ------------------------------------------------------------------------

    def encoding(self, scale: float, value_bound: Value) -> float:
        """||round(fl(scale sigma^-1(z))) - scale sigma^-1(z)||_can for |z_j| <= value_bound:
        rounding (W / 2, deterministic) plus the float error of encoding
        (sqrt(N) eta scale max |z|, :func:`encoding_float_error`)."""
        return self.round_can + math.sqrt(self.n) * self.eta * float(scale) * _peak(value_bound)

    def rescale_rounding(self, size: int = 2) -> float:
        """(W / 2) (1 + S + ... + S^(size - 1)): the rounding of a division by a prime
        (rescale, and the key-switching mod-down with size 2)."""
        return self.round_can * sum(self.secret ** k for k in range(size))

    def key_switch(self, level: int) -> float:
        """The error one key switch adds at ``level`` (class notes): digits at their
        deterministic worst case, key errors by the tail bound, divided by p, plus the mod-down
        rounding."""
        self.params.mods(level)
        p = float(self.params.special)
        digits = sum((q - 1) * self.digit_can for q in self.params.moduli[:level + 1])
        return digits * self.key_error / p + self.rescale_rounding(2)

    # -- fresh ciphertexts ----------------------------------------------------------------

    def joint_input(self, level: int, scale: float, value_bound: Value) -> AnyBound:
        """The joint symmetric encryption of the design: c_1 = a uniform (joint seed), c_0 =
        sum_i (-a s_i + e_i) + round(scale sigma^-1(z)) (the owner's encoding): phase = M +
        encoding error + sum of the ``parties`` Gaussians (``input_error``), independent of s.
        Also the single-key symmetric :func:`~shaper.crypto.ckks.encrypt` with ``parties=1``."""
        self.params.mods(level)
        vb = _values(value_bound, self.slots)
        return _make(level, scale, float(scale) * vb, self.encoding(scale, vb) + self.input_error, 2, self.slots,
                     _is_slotwise(vb))

    def public_encryption(self, level: int, scale: float, value_bound: Value) -> AnyBound:
        """:func:`~shaper.crypto.ckks.encrypt` under a public key (b, a) = (-a s + e, a) over
        Q p: c = round((v (b, a) + (e_0, e_1)) / p) + (round(scale sigma^-1(z)), 0), v ternary,
        e_0, e_1 rounded Gaussians. Phase = M + encoding error + (v e + e_0 + e_1 s) / p +
        r_0 + r_1 s, the last two the division's rounding (deterministic, W / 2 each)."""
        self.params.mods(level)
        vb = _values(value_bound, self.slots)
        noise = (self.ephemeral * self.key_error + self.encryption_error * (1.0 + self.secret)) / float(self.params.special)
        error = self.encoding(scale, vb) + noise + self.rescale_rounding(2)
        return _make(level, scale, float(scale) * vb, error, 2, self.slots, _is_slotwise(vb))

    def fresh(self, level: int, scale: float, value_bound: Value, encryption: str = "joint") -> AnyBound:
        """A fresh ciphertext: :meth:`joint_input` (``encryption="joint"``) or
        :meth:`public_encryption` (``"public"``)."""
        if encryption == "joint":
            return self.joint_input(level, scale, value_bound)
        if encryption == "public":
            return self.public_encryption(level, scale, value_bound)
        raise ConfigError(f"encryption is 'joint' or 'public', got {encryption!r}")

    # -- linear ---------------------------------------------------------------------------

    @staticmethod
    def _same(a: AnyBound, b: AnyBound, what: str) -> None:
        if a.level != b.level:
            raise ScaleError(f"{what}: operands are at levels {a.level} and {b.level}")
        if abs(a.scale - b.scale) > SCALE_TOLERANCE * max(a.scale, b.scale):
            raise ScaleError(f"{what}: operand scales differ (2^{math.log2(a.scale):.6f} and 2^{math.log2(b.scale):.6f})")

    def add(self, a: AnyBound, b: AnyBound) -> AnyBound:
        """a + b: messages and errors add."""
        self._same(a, b, "add")
        return _make(a.level, a.scale, a.message + b.message, a.error + b.error, max(a.size, b.size), self.slots,
                     _is_slotwise(a, b))

    def sub(self, a: AnyBound, b: AnyBound) -> AnyBound:
        """a - b: bounded as a + b."""
        self._same(a, b, "sub")
        return self.add(a, b)

    def negate(self, a: AnyBound) -> AnyBound:
        return a

    def add_plain(self, a: AnyBound, value_bound: Value, scale: float | None = None) -> AnyBound:
        """a + a plaintext of values within ``value_bound`` encoded at ``scale`` (default and
        required: a's): the plaintext's encoding error adds to the error."""
        scale = a.scale if scale is None else float(scale)
        if abs(a.scale - scale) > SCALE_TOLERANCE * max(a.scale, scale):
            raise ScaleError(f"add_plain: plaintext scale 2^{math.log2(scale):.6f}, ciphertext 2^{math.log2(a.scale):.6f}")
        vb = _values(value_bound, self.slots)
        return _make(a.level, a.scale, a.message + a.scale * vb, a.error + self.encoding(scale, vb), a.size,
                     self.slots, _is_slotwise(a, vb))

    def mul_plain(self, a: AnyBound, value_bound: Value, pt_scale: float) -> AnyBound:
        """a times a plaintext P + r of values within ``value_bound`` encoded at ``pt_scale``
        (r its encoding error, ||r||_can <= R): (M + e)(P + r) = M P + (M r + e P + e r), so the
        error is m R + e (pt_scale value_bound + R) and the message m pt_scale value_bound, at
        scale a.scale pt_scale (slot by slot where bounds are per slot)."""
        vb = _values(value_bound, self.slots)
        r = self.encoding(pt_scale, vb)
        p = float(pt_scale) * vb
        return _make(a.level, a.scale * float(pt_scale), a.message * p, a.message * r + a.error * (p + r), a.size,
                     self.slots, _is_slotwise(a, vb))

    # -- products -------------------------------------------------------------------------

    def mul(self, a: AnyBound, b: AnyBound, *, relinearize: bool = False) -> AnyBound:
        """a * b, not relinearised (3 components; :meth:`relinearize` adds the key switch of the
        degree-2 part): (M_1 + e_1)(M_2 + e_2) = M_1 M_2 + (M_1 e_2 + M_2 e_1 + e_1 e_2)."""
        if a.size != 2 or b.size != 2:
            raise ScaleError("mul takes relinearised (2-component) ciphertexts")
        if a.level != b.level:
            raise ScaleError(f"mul: operands are at levels {a.level} and {b.level}")
        out = _make(a.level, a.scale * b.scale, a.message * b.message,
                    a.message * b.error + b.message * a.error + a.error * b.error, 3, self.slots, _is_slotwise(a, b))
        return self.relinearize(out) if relinearize else out

    def square(self, a: AnyBound, *, relinearize: bool = False) -> AnyBound:
        """a * a, not relinearised (as :meth:`mul`)."""
        return self.mul(a, a, relinearize=relinearize)

    def relinearize(self, a: AnyBound) -> AnyBound:
        """(d_0, d_1) + key switch of d_2 from s^2 to s: adds :meth:`key_switch` at a's level
        (nothing for a 2-component ciphertext)."""
        if a.size == 2:
            return a
        return _make(a.level, a.scale, a.message, a.error + self.key_switch(a.level), 2, self.slots, _is_slotwise(a))

    def rescale(self, a: AnyBound) -> AnyBound:
        """Division by q_level with rounding: message / q, error / q + the rounding
        (:meth:`rescale_rounding`, with s^2 for a 3-component ciphertext)."""
        if a.level == 0:
            raise ScaleError("rescale: the ciphertext is at level 0, no prime left to drop")
        q = float(self.params.moduli[a.level])
        return _make(a.level - 1, a.scale / q, a.message / q, a.error / q + self.rescale_rounding(a.size), a.size,
                     self.slots, _is_slotwise(a))

    def drop_level(self, a: AnyBound, level: int) -> AnyBound:
        """The same phase at a lower level (limbs dropped): bounds unchanged."""
        if not 0 <= level <= a.level:
            raise ScaleError(f"drop_level: cannot go from level {a.level} to {level}")
        return _make(level, a.scale, a.message, a.error, a.size, self.slots, _is_slotwise(a))

    # -- automorphisms --------------------------------------------------------------------

    def _automorphism(self, a: AnyBound, step: int) -> AnyBound:
        if a.size != 2:
            raise ScaleError("automorphisms take relinearised (2-component) ciphertexts")
        return _make(a.level, a.scale, _roll(a.message, step), _roll(a.error, step) + self.key_switch(a.level), 2,
                     self.slots, _is_slotwise(a))

    def rotate(self, a: AnyBound, steps: int | None = None) -> AnyBound:
        """Slots rotated left by ``steps``: the automorphism preserves canonical norms, the key
        switch of c_1 adds :meth:`key_switch`. A rotation by a multiple of N/2 is the identity
        (no key switch). ``steps`` may be omitted for a scalar :class:`Bound` (any rotation)."""
        if steps is None:
            if isinstance(a, SlotBound):
                raise ConfigError("rotating a per-slot bound needs the step")
            return self._automorphism(a, 0)
        if int(steps) % self.slots == 0:
            return a
        return self._automorphism(a, int(steps))

    def rotate_many(self, a: AnyBound, steps: Iterable[int]) -> dict[int, AnyBound]:
        """Hoisted rotations (one decomposition, a key switch per step): each as :meth:`rotate`
        (the shared digits have the same deterministic bound)."""
        return {int(s): self.rotate(a, int(s)) for s in dict.fromkeys(int(s) for s in steps)}

    def conjugate(self, a: AnyBound) -> AnyBound:
        """Slot-wise complex conjugation: |slots| unchanged, plus one key switch."""
        return self._automorphism(a, 0)

    # -- reading --------------------------------------------------------------------------

    @staticmethod
    def slot_error(bound: AnyBound) -> float:
        """error / scale: a bound on |decoded slot - exact value| in every slot."""
        b = bound.bound()
        return b.error / b.scale

    @staticmethod
    def coefficient_bound(bound: AnyBound) -> float:
        """message + error: a bound on every coefficient of the decrypted phase M + e
        (||x||_inf <= ||x||_can); decryption at level 0 is exact while it is below q_0 / 2. The
        error's own coefficients are bounded by ``bound.error``."""
        b = bound.bound()
        return b.message + b.error


def demo_bound(model: NoiseModel, steps: int = 1, *, value_bound: float = 1.0, level: int | None = None,
               scale: float | None = None, encryption: str = "joint") -> Bound:
    """The bound of ``shaper fhe demo``'s circuit y = rotate(rescale(relinearize(x * x)), steps)
    on one input of values within ``value_bound`` encrypted at ``level`` (default the top) and
    ``scale`` (default the parameters'), jointly (``encryption="joint"``) or under the public
    key (``"public"``)."""
    params = model.params
    level = params.max_level if level is None else int(level)
    scale = params.scale if scale is None else float(scale)
    x = model.fresh(level, scale, value_bound, encryption)
    return model.rotate(model.rescale(model.relinearize(model.square(x))), steps).bound()
