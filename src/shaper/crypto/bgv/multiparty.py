"""BGV's key material as local steps on one party's share of the secret (no I/O): what threshold
GHS (GMPFHE §5.2) has each party compute between two exchanges, and what single-key
:func:`~.scheme.keygen` computes with one "party" holding everything.

Everything here is linear in the party's shares: summed over the parties, each step's output is
the single-key value under s = s_0 + ... + s_(n-1) and e = e_0 + ... + e_(n-1). Shares are
evaluation-form rows over limbs of :attr:`Parameters.basis` (``ring.ctx`` computes on them); the
errors are shares of 2·e (plaintext modulus 2), already in evaluation form.

* :func:`public_key_share` — b_i = 2e_i − a·s_i over the chain;
* :func:`switching_key_share` — per digit group G, b_{G,i} = 2e_{G,i} − a_G·s_i + P·Q̂_G·[Q̂_G^{-1}]_{Q_G}·t_i
  over the chain and the special primes (t: the share of s² for relinearisation, of s(X^u) for an
  automorphism — a permutation of s_i's evaluation points, :meth:`.ring.Ring.automorphism`);
* :func:`square_share` — s² from an opened d = s − α and a square pair (α, α²): s² = d² + 2dα + α²,
  per evaluation point and limb (the public d² added by one party);
* :func:`digit_factors` — the constants P·Q̂_G·[Q̂_G^{-1}]_{Q_G} per limb;
* :func:`joint_input_share` — 2e_i − a·s_i (+ the owner's encoded message) on the chain: the
  parties' sum with c_1 = a is an encryption of phase μ + 2·Σe_i, whose error no party chose
  (:func:`joint_input_noise` is its estimate);
* :class:`SecretKeyShare` — one party's share s_i as it is stored (evaluation form, every limb);
* :func:`decryption_share` — c_1·s_i (+ c_0 at one party) on q_0 in coefficient form: the
  parties' sum is the phase μ + 2e mod q_0, whose centred value's parity is the plaintext. What
  may be decrypted and who learns it is the protocol's business: opening these shares would
  reveal the noise, so the protocol converts their sum to bits inside the MPC
  (:func:`shaper.protocols.threshold_bgv.decrypt_bits`).

What the protocol opens (the b's, d) and who learns what is the protocol's business; these steps
only say that the opened sums are the single-key keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError
from .params import Parameters
from .ring import Ring

__all__ = ["SecretKeyShare", "decryption_share", "digit_factors", "joint_input_noise", "joint_input_share",
           "public_key_share", "square_share", "switching_key_share"]


@dataclass(eq=False)
class SecretKeyShare:
    """One party's additive share s_i of a BGV secret held by ``parties`` parties jointly
    (s = s_0 + ... + s_(n-1) at every evaluation point of every limb): evaluation form, shape
    (limbs of the basis, φ). Uniform on its own; as secret as a key (files 0600)."""

    params: Parameters
    rows: np.ndarray = field(repr=False)
    index: int
    parties: int

    def __post_init__(self) -> None:
        shape = (len(self.params.basis), self.params.phi)
        if self.rows.shape != shape or self.rows.dtype != np.uint64:
            raise ConfigError(f"a BGV secret-key share is a uint64 array of shape {shape}, got {self.rows.shape} "
                              f"{self.rows.dtype}")
        if not 2 <= self.parties < 1 << 16 or not 0 <= self.index < self.parties:  # u16 on the wire
            raise ConfigError(f"party index {self.index} of {self.parties} parties is out of range")

    def __repr__(self) -> str:
        return f"bgv.SecretKeyShare(m={self.params.m}, party {self.index} of {self.parties})"


def public_key_share(ring: Ring, s: np.ndarray, a: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """This party's share of the public key's b: 2e_i − a·s_i on the chain's limbs (s, a, e2 on
    those limbs, evaluation form; e2 is the share of 2e)."""
    chain = ring.chain(ring.params.max_level)
    return ring.sub(e2, ring.mul(a, s, chain), chain)


def digit_factors(params: Parameters) -> list[list[int]]:
    """Per digit group G, the integer P·Q̂_G·[Q̂_G^{-1}]_{Q_G} reduced mod each prime of the basis
    (0 on the special primes, where P vanishes)."""
    chain = len(params.primes)
    p = math.prod(params.special)
    big_q = math.prod(params.primes)
    out = []
    for group in params.digit_groups():
        q_g = math.prod(params.primes[i] for i in group)
        hat = big_q // q_g
        factor = p * hat * pow(hat % q_g, -1, q_g)
        out.append([factor % q if i < chain else 0 for i, q in enumerate(params.basis)])
    return out


def switching_key_share(ring: Ring, s: np.ndarray, target: np.ndarray, a: np.ndarray,
                        e2: np.ndarray) -> np.ndarray:
    """This party's share of a switching key's b from t to s: for each digit group G,
    b_{G,i} = 2e_{G,i} − a_G·s_i + P·Q̂_G·[Q̂_G^{-1}]_{Q_G}·t_i over every limb of the basis.
    ``s``, ``target``: (limbs, φ); ``a``, ``e2``: (digits, limbs, φ); returns (digits, limbs, φ)."""
    full = list(range(len(ring.basis)))
    factors = digit_factors(ring.params)
    if a.shape[0] != len(factors) or e2.shape != a.shape:
        raise ValueError(f"a switching key has {len(factors)} digits: a and e2 must be ({len(factors)}, "
                         f"{len(full)}, {ring.phi}), got {a.shape} and {e2.shape}")
    out = np.empty_like(a)
    for g, factor in enumerate(factors):
        b = ring.sub(np.ascontiguousarray(e2[g]), ring.mul(np.ascontiguousarray(a[g]), s, full), full)
        out[g] = ring.add(b, ring.mul_scalar(target, factor, full), full)
    return out


def square_share(ring: Ring, d: np.ndarray, alpha: np.ndarray, alpha2: np.ndarray, first: bool) -> np.ndarray:
    """This party's share of s² from the opened d = s − α and its shares of a square pair
    (α, α²), per evaluation point and limb of the basis: 2dα_i + α²_i, plus d² at the ``first`` party."""
    full = list(range(len(ring.basis)))
    s2 = ring.add(ring.mul(ring.add(d, d, full), alpha, full), alpha2, full)
    return ring.add(s2, ring.mul(d, d, full), full) if first else s2


def joint_input_share(ring: Ring, s: np.ndarray, a: np.ndarray, e2: np.ndarray,
                      message: np.ndarray | None = None) -> np.ndarray:
    """This party's share of joint inputs' c_0 on the chain: 2e_i − a_k·s_i, plus the encoded
    message (evaluation rows) at the owner. ``s``: the chain's limbs (L + 1, φ); ``a``, ``e2``
    and ``message``: (count, L + 1, φ). Returns (count, L + 1, φ)."""
    chain = ring.chain(ring.params.max_level)
    out = np.empty_like(a)
    for k in range(a.shape[0]):
        b = ring.sub(np.ascontiguousarray(e2[k]), ring.mul(np.ascontiguousarray(a[k]), s, chain), chain)
        out[k] = b if message is None else ring.add(b, np.ascontiguousarray(message[k]), chain)
    return out


def joint_input_noise(params: Parameters, message_norm: float, parties: int) -> float:
    """The RMS estimate of a joint input's phase μ + 2·Σ_i e_i (n Gaussians of width σ, no
    u·e or e·s terms: c_1 is the uniform a itself), in the units of :func:`.scheme.fresh_noise`."""
    return message_norm + 2 * math.sqrt(parties * params.phi * params.sigma ** 2)


def decryption_share(ring: Ring, s_q0: np.ndarray, parts: np.ndarray, first: bool) -> np.ndarray:
    """This party's share of a level-0 ciphertext's phase, as coefficients mod q_0 (uint64 (φ,)):
    c_1·s_i (+ c_2·(s²)_i is not supported: relinearise first), plus c_0 at the ``first`` party.
    ``s_q0``: the party's secret share on limb 0 (evaluation form, (1, φ)); ``parts``: the
    ciphertext's (2, 1, φ) evaluation rows at level 0 (switch it down publicly first)."""
    parts = np.asarray(parts)
    if parts.shape != (2, 1, ring.phi):
        raise ValueError(f"a decryption share needs a relinearised ciphertext at level 0: (2, 1, {ring.phi}) "
                         f"rows, got {parts.shape}")
    v = ring.mul(np.ascontiguousarray(parts[1]), s_q0, [0])
    if first:
        v = ring.add(v, np.ascontiguousarray(parts[0]), [0])
    return ring.inverse(v, [0])[0]
