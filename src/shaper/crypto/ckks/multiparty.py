"""Threshold CKKS's local steps: what one party computes on its own share of the secret between
two exchanges, with no I/O (Lattigo's ``multiparty/``, OpenFHE's ``ckksrns-multiparty``).

The protocol that runs these steps over the n-party MPC engine, opens their results and decides
who learns what is :mod:`shaper.protocols.threshold_ckks` (GMPFHE's key generation, joint
decryption with consent); its docstring and ``docs/threshold-ckks.md`` state the security model.
Everything here is linear in the party's share: the sum over the parties of each step's output
is the single-key value under s = s_0 + ... + s_(n-1).

All polynomials are kernel rows in NTT form, (..., rows, N) uint64 over the basis
[q_0..q_L, p] of :class:`~shaper.crypto.ckks.Parameters` (``params.context`` computes on them).

* key generation: :func:`public_key_share` (b_i = e_i - a s_i), :func:`switching_key_share`
  (b_i = e_i - a s_i + [row = j] (p mod q_j) t_i), :func:`square_share` (s^2 from an opened
  d = s - alpha and a square pair (alpha, alpha^2)), :func:`local_errors` (a party's own errors,
  the ``method="local"`` variant), :func:`seed_from_opened` (a seed from jointly opened values);
* the key check: :func:`check_vectors` (what the joint test decryption must give) and
  :func:`check_bound`;
* joint inputs: :func:`joint_input_share` (b_i = e_i - a s_i, plus the encoded message at the
  owner, under a jointly seeded ``a``: the input's error never depends on s);
* decryption: :func:`validate_ciphertexts`, :func:`flood_sigma` (the width of each party's
  flood from the ciphertext's worst-case error bound, the key's budget and lambda, with the
  argument), :func:`sample_flood`, :func:`decryption_share` (c_1 s_i + f_i on limb q_0, plus c_0
  at party 0), :func:`decode_opened`, :func:`ciphertext_digest`, :func:`decryption_precision`
  (the bits the flood leaves) and :func:`check_flood_fits`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, KeyMismatchError
from ..prg import Prg, default_prg
from .encoder import Encoder, Plaintext
from .keys import PublicKey, SecretKeyShare, sample_gaussian, small_to_rns
from .params import Parameters
from .scheme import Ciphertext, Evaluator, encrypt
from .serial import to_bytes

__all__ = ["DEFAULT_BUDGET", "FLOOD_MODES", "KAPPA", "SECURITY_LAMBDA", "WORK_BITS", "check_bound", "check_flood_fits",
           "check_vectors", "ciphertext_digest", "decode_opened", "decryption_precision", "decryption_share",
           "flood_sigma", "joint_input_share", "local_errors", "local_errors_coefficients", "public_key_share",
           "renyi_order", "sample_flood", "seed_from_opened", "square_share", "switching_key_share", "validate_ciphertexts"]



# -- key generation ------------------------------------------------------------------------------

def public_key_share(params: Parameters, s: np.ndarray, a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """b_i = e_i - a s_i over every row: this party's share of the public key's b (a is common)."""
    rows = list(range(len(params.primes)))
    ctx = params.context
    return ctx.sub(e, ctx.mul(a, s, rows), rows)


def switching_key_share(params: Parameters, s: np.ndarray, target: np.ndarray, a: np.ndarray,
                        e: np.ndarray) -> np.ndarray:
    """This party's share of a switching key's b from t to s, one digit per ciphertext prime q_j:
    b_j = e_j - a_j s_i + [row = j] (p mod q_j) t_i, shape (L + 1, rows, N) for ``a`` and ``e``
    of that shape (t: s_i^2's share for the relinearisation key, s_i(X^g) for a rotation key)."""
    rows = list(range(len(params.primes)))
    ctx = params.context
    b = ctx.sub(e, ctx.mul(a, np.ascontiguousarray(np.broadcast_to(s, a.shape)), rows), rows)
    for j, q in enumerate(params.moduli):  # + [row = j] (p mod q_j) t on the shares
        term = ctx.mul_scalar(np.ascontiguousarray(target[j:j + 1]), np.array([params.special % q], dtype=np.uint64), [j])
        b[j, j:j + 1] = ctx.add(np.ascontiguousarray(b[j, j:j + 1]), term, [j])
    return b


def square_share(params: Parameters, d: np.ndarray, alpha: np.ndarray, alpha2: np.ndarray, first: bool) -> np.ndarray:
    """This party's share of s^2 from the opened d = s - alpha and its shares of a square pair
    (alpha, alpha^2): s^2 = d^2 + 2 d alpha + alpha^2, the public d^2 added by the ``first`` party."""
    rows = list(range(len(params.primes)))
    ctx = params.context
    s2 = ctx.add(ctx.mul(ctx.add(d, d, rows), alpha, rows), alpha2, rows)
    return ctx.add(s2, ctx.mul(d, d, rows), rows) if first else s2


def local_errors(params: Parameters, count: int) -> np.ndarray:
    """``count`` error polynomials this party samples on its own (sigma of the parameters), NTT
    rows (count, rows, N): the ``method="local"`` key generation adds them to its shares."""
    rows = list(range(len(params.primes)))
    return small_to_rns(params, local_errors_coefficients(params, count), rows)


def local_errors_coefficients(params: Parameters, count: int) -> np.ndarray:
    """The same errors as integer coefficients (count, N), int64, |e| <= floor(6 sigma): what
    a party inputs, range-checked, on the active engine."""
    return sample_gaussian((count, params.n), params.sigma)


def seed_from_opened(what: str, opened: np.ndarray) -> bytes:
    """A 32-byte seed from values every party opened together (no party chose them alone),
    separated by ``what`` so that no two uses share a seed."""
    data = b"shaper-threshold-ckks/" + what.encode() + np.asarray(opened, dtype="<u8").tobytes()
    return hashlib.sha256(data).digest()


# -- the key check -------------------------------------------------------------------------------

def check_vectors(params: Parameters, public: PublicKey, evaluator: Evaluator, prg: Prg, rotations: Sequence[int],
                  conjugation: bool) -> list[tuple[str, Ciphertext, np.ndarray]]:
    """What a key generation is checked with: a test vector drawn from ``prg`` (a jointly chosen
    seed) encrypted under ``public``, squared (the relinearisation key) and the sum of its
    rotations (every rotation key and the conjugation): (what, ciphertext, expected slots)."""
    x = (prg.below(1 << 20, params.slots).astype(np.float64) / (1 << 19)) - 1.0
    enc, ev = Encoder(params), evaluator
    ct = encrypt(public, enc.encode(x), prg)
    tests = [("relinearisation key", ev.mul_rescale(ct, ct), x * x)] if params.max_level >= 1 else []
    if evaluator.galois_keys:
        acc, want = None, np.zeros(params.slots, dtype=np.complex128)
        for r in dict.fromkeys(rotations):
            acc = ev.rotate(ct, r) if acc is None else ev.add(acc, ev.rotate(ct, r))
            want = want + np.roll(x, -r)
        if conjugation:
            acc = ev.conjugate(ct) if acc is None else ev.add(acc, ev.conjugate(ct))
            want = want + x
        tests.append(("rotation keys", acc, want))
    return tests


def check_bound(precision_bits: float, terms: int) -> float:
    """The largest slot error a working key leaves in a check of ``terms`` summed rotations,
    decrypted with a flood that leaves ``precision_bits`` (:func:`decryption_precision`)."""
    return (1e-3 + 4 * 2.0 ** -precision_bits) * max(1, terms)


# -- decryption ----------------------------------------------------------------------------------

#: statistical security parameter lambda of the flooding (bits): a coalition recovers the key (or
#: any value it could not guess with probability above 2^-kappa without the decryptions) with
#: probability at most 2^-lambda (``key-recovery``), or its view is 2^-lambda close to one that
#: shows only the results (``statistical``)
SECURITY_LAMBDA = 40
#: decryptions (ciphertexts) a key serves by default before its parties refuse: Q of the argument
DEFAULT_BUDGET = 1024
#: how the flooding width follows from the error bound E (docs/threshold-ckks.md)
FLOOD_MODES = ("key-recovery", "statistical")
#: computational security kappa of the parameters' RLWE instance the key-recovery mode relies on
KAPPA = 128
#: the attacker's work (log2 of its operations) the key-recovery argument allows for: with 2^w
#: work RLWE is broken with probability at most 2^(w - kappa), and the flood is sized for that
WORK_BITS = 64


def renyi_order(lam: int, kappa: int = KAPPA, work: int = WORK_BITS) -> float:
    """The Renyi order a > 1 that makes the key-recovery flood narrowest for ``lam``, ``kappa``
    and the attacker's ``work`` bits (the minimum of a (a - 1) / ((kappa - work)(a - 1) - lam a):
    a = 1 + (lam + sqrt(lam (kappa - work))) / (kappa - work - lam); about 2.27 for no work,
    4.78 for 2^64 at kappa = 128, lambda = 40)."""
    margin = kappa - work
    if margin <= lam:
        raise ConfigError(f"key-recovery flooding needs kappa - work > lambda (kappa {kappa}, work 2^{work}, "
                          f"lambda {lam})")
    return 1.0 + (lam + math.sqrt(lam * margin)) / (margin - lam)


def flood_sigma(error_bound: float, budget: int, *, mode: str = "key-recovery", lam: int = SECURITY_LAMBDA,
                kappa: int = KAPPA, work: int = WORK_BITS) -> float:
    """The width sigma_f of the Gaussian flood *each* party adds to its decryption share, from
    the worst-case error bound E of the ciphertext (||e||_2 <= E), the key's decryption budget Q,
    the security parameter lambda and the attacker's work 2^w.

    ``key-recovery`` (default): sigma_f = E sqrt(Q a (a - 1) / (2 ln 2 ((kappa - w)(a - 1) -
    lambda a))), a = :func:`renyi_order`. Over Q decryptions the Renyi divergence of order a
    between the real view (e + f) and the ideal one (f alone) is R_a = exp(a Q E^2 / (2
    sigma_f^2)); by probability preservation (Bai et al., ASIACRYPT 2015) an event of probability
    p in the ideal view has probability at most (R_a p)^((a - 1) / a) in the real one. An
    attacker with 2^w work recovers s from the ideal view (the results alone) with probability
    at most 2^(w - kappa) (RLWE), so from the real one with at most 2^-lambda. For w = 64,
    kappa = 128, lambda = 40: sigma_f = 0.508 E sqrt(Q) (1.55 bits wider than the same argument
    for a constant-work attacker, w = 0: 0.174 E sqrt(Q)).

    ``statistical``: sigma_f = sqrt(24 Q) 2^(lambda/2) E, Li-Micciancio-Schultz-Sorrell's bound
    (CRYPTO 2022; OpenFHE's NOISE_FLOODING_DECRYPT, whose sqrt(N) B_inf is our E >= ||e||_2): the
    view is statistically close to one that reveals only the results, so the error hides also
    what it carries of other parties' inputs, whatever the attacker's work. It costs about
    lambda/2 + 2 more bits of precision.

    Only the honest party's own flood counts in either argument (a coalition knows its own), so
    each party floods with the full sigma_f."""
    if mode not in FLOOD_MODES:
        raise ConfigError(f"flood mode must be one of {', '.join(FLOOD_MODES)}, got {mode!r}")
    if not lam >= 40:
        raise ConfigError(f"the statistical security parameter lambda must be at least 40, got {lam}")
    if not (isinstance(work, int) and work >= 0):
        raise ConfigError(f"the attacker's work is a number of bits >= 0, got {work!r}")
    if budget < 1:
        raise ConfigError(f"a decryption budget is at least 1, got {budget}")
    if not (math.isfinite(error_bound) and error_bound > 0):
        raise ConfigError(f"the error bound must be positive and finite, got {error_bound!r}")
    if mode == "statistical":
        return float(math.sqrt(24.0 * budget) * 2.0 ** (lam / 2) * error_bound)
    a = renyi_order(lam, kappa, work)
    factor = a * (a - 1) / (2 * math.log(2.0) * ((kappa - work) * (a - 1) - lam * a))
    return float(error_bound * math.sqrt(budget * factor))


def sample_flood(shape: int | tuple[int, ...], sigma: float, prg: Prg | None = None) -> np.ndarray:
    """This party's flooding noise: rounded Gaussian integers of standard deviation ``sigma``
    (int64), from the CSPRNG (Box-Muller on 53-bit uniforms; |f| <= 8.6 sigma, the largest value
    53-bit uniforms can give). Far wider than the key errors, so the rounding's distance from
    a discrete Gaussian is negligible next to the flooding argument."""
    prg = prg or default_prg()
    count = int(np.prod(shape))
    half = (count + 1) // 2
    u = (prg.uint64((2, half)) >> np.uint64(11)).astype(np.float64)
    u1 = (u[0] + 1.0) * 2.0 ** -53  # (0, 1]
    u2 = u[1] * 2.0 ** -53
    r = np.sqrt(-2.0 * np.log(u1)) * float(sigma)
    z = np.concatenate([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)])[:count]
    return np.rint(z).astype(np.int64).reshape(shape)


def ciphertext_digest(ct: Ciphertext) -> str:
    """SHA-256 of the ciphertext's canonical serialisation (hex): what a decryption request names."""
    return hashlib.sha256(to_bytes(ct)).hexdigest()


def decryption_precision(params: Parameters, scale: float, sigma: float, parties: int, *,
                         reach: float | None = None) -> float:
    """Expected bits of precision (-log2 of the largest slot error over all slots) that the
    flooding leaves at ``scale``: n parties' Gaussians of width sigma add up to sqrt(n) sigma per
    coefficient, which spreads over the N/2 slots with std sqrt(n) sigma sqrt(N/2) / scale (real
    part); the largest of N/2 is about 4.5 std.

    With ``reach`` (the active engine: every flood a range-checked input within +-reach), the
    bits guaranteed whatever n - 1 deviating parties choose: one honest Gaussian as above plus
    n - 1 floods of any coefficients within the reach, at their worst case W reach each in the
    canonical norm (W = csc(pi / 2N))."""
    if reach is None:
        std = float(sigma) * math.sqrt(parties) * math.sqrt(params.n / 2.0) / float(scale)
        return float(-math.log2(4.5 * std))
    from .bounds import canonical_box_factor

    honest = 4.5 * float(sigma) * math.sqrt(params.n / 2.0)
    worst = honest + (parties - 1) * canonical_box_factor(params.n) * float(reach)
    return float(-math.log2(worst / float(scale)))


def check_flood_fits(params: Parameters, sigma: float, parties: int, *, reach: float | None = None) -> None:
    """Raises :class:`~shaper.errors.ConfigError` unless the flood (9 sigma sqrt(n) per
    coefficient, beyond any Box-Muller value; with ``reach``, n floods at their checked reach)
    takes at most an eighth of q_0 (the decryption's one limb), leaving the rest to the message,
    as any CKKS decryption at level 0 needs."""
    reach = 9.0 * float(sigma) * math.sqrt(parties) if reach is None else float(parties) * float(reach)
    if not reach <= params.moduli[0] / 8:
        raise ConfigError(f"the flood (sigma 2^{math.log2(sigma):.1f}, reaching 2^{math.log2(reach):.1f}) would take "
                          f"more than an eighth of q_0 = 2^{math.log2(params.moduli[0]):.1f}: this ciphertext's error "
                          "bound is too large to decrypt safely at this budget")


def validate_ciphertexts(params: Parameters, cts: Sequence[Any]) -> list[Ciphertext]:
    """The ciphertexts of a joint decryption, checked: CKKS ciphertexts of ``params``,
    relinearised, at least one."""
    cts = list(cts)
    if not cts:
        raise ValueError("decrypt_many needs at least one ciphertext")
    for k, ct in enumerate(cts):
        if not isinstance(ct, Ciphertext):
            raise TypeError(f"ciphertext {k} is a {type(ct).__name__}, not a ckks.Ciphertext")
        if ct.params != params:
            raise KeyMismatchError(f"ciphertext {k} belongs to other parameters than the key share")
        if ct.size != 2:
            raise ValueError(f"ciphertext {k}: threshold decryption takes relinearised (2-component) ciphertexts")
    return cts


def decryption_share(share: SecretKeyShare, cts: Sequence[Ciphertext], flood: np.ndarray) -> np.ndarray:
    """This party's decryption shares on limb q_0, (len(cts), 1, N) NTT rows: c_1 s_i + f_i, plus
    c_0 at party 0. ``flood`` (len(cts), N) int64 coefficients is this party's own flood."""
    params = share.params
    ctx = params.context
    f = ctx.from_signed(np.ascontiguousarray(flood, dtype=np.int64).reshape(len(cts), params.n), [0])
    ctx.ntt(f, [0])
    c1 = np.ascontiguousarray(np.stack([ct.data[1, :1] for ct in cts]))
    s0 = np.ascontiguousarray(np.broadcast_to(share.ntt[:1], c1.shape))
    part = ctx.add(ctx.mul(c1, s0, [0]), f, [0])
    if share.index == 0:
        part = ctx.add(part, np.ascontiguousarray(np.stack([ct.data[0, :1] for ct in cts])), [0])
    return part


def decode_opened(params: Parameters, total: np.ndarray, cts: Sequence[Ciphertext]) -> np.ndarray:
    """The decoded slots (len(cts), slots) of the opened sums of every party's decryption shares."""
    encoder = Encoder(params)
    return np.stack([encoder.decode(Plaintext(params, np.ascontiguousarray(total[k]), ct.scale))
                     for k, ct in enumerate(cts)])


# -- joint input encryption ------------------------------------------------------------------------

def joint_input_share(share: SecretKeyShare, a: np.ndarray, level: int, message: np.ndarray | None = None,
                      prg: Prg | None = None) -> np.ndarray:
    """This party's share of jointly encrypted inputs: b_i = e_i - a s_i (+ the encoded message
    at the owner) on the rows 0..level, for ``a`` (count, level + 1, N) NTT form expanded from a
    joint seed; e_i this party's own Gaussian (sigma of the parameters). The opened sum
    c_0 = sum_i b_i makes (c_0, a) a ciphertext of phase m + sum_i e_i: its error does not
    depend on s, and a party that adds anything else to its share adds only a term it knows and
    that does not depend on s either."""
    params = share.params
    ctx = params.context
    rows = list(range(level + 1))
    count = a.shape[0]
    e = small_to_rns(params, sample_gaussian((count, params.n), params.sigma, prg), rows)
    s = np.ascontiguousarray(np.broadcast_to(share.ntt[:level + 1], a.shape))
    b = ctx.sub(e, ctx.mul(np.ascontiguousarray(a), s, rows), rows)
    if message is not None:
        b = ctx.add(b, np.ascontiguousarray(message, dtype=np.uint64), rows)
    return b
