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
* decryption: :func:`decryption_request` and :func:`validate_ciphertexts` (what the parties
  agree on before anything is opened), :func:`decryption_share` (c_1 s_i + r_i on limb q_0,
  plus c_0 at party 0, the smudging centred there), :func:`decode_opened`,
  :func:`ciphertext_digest` and :func:`decryption_precision` (the bits smudging leaves).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, KeyMismatchError
from ..prg import Prg
from .encoder import Encoder, Plaintext
from .keys import PublicKey, SecretKeyShare, sample_gaussian, small_to_rns
from .params import Parameters
from .scheme import Ciphertext, Evaluator, encrypt
from .serial import to_bytes

__all__ = ["SMUDGE_BITS", "check_bound", "check_vectors", "ciphertext_digest", "decode_opened", "decryption_precision",
           "decryption_request", "decryption_share", "local_errors", "public_key_share", "seed_from_opened",
           "square_share", "switching_key_share", "validate_ciphertexts"]

#: smudging bits for threshold decryption: r uniform in [-2^(k-1), 2^(k-1)) per coefficient.
#: 25 keeps 20 bits of slot precision at the CNN's scale 2^53 with N = 2^14 (docs/threshold-ckks.md)
SMUDGE_BITS = 25


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
    return small_to_rns(params, sample_gaussian((count, params.n), params.sigma), rows)


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


def check_bound(params: Parameters, scale: float, terms: int) -> float:
    """The largest slot error a working key leaves in a check of ``terms`` summed rotations."""
    return (1e-3 + 2.0 ** -decryption_precision(params, scale)) * max(1, terms)


# -- decryption ----------------------------------------------------------------------------------

def ciphertext_digest(ct: Ciphertext) -> str:
    """SHA-256 of the ciphertext's canonical serialisation (hex): what a decryption request names."""
    return hashlib.sha256(to_bytes(ct)).hexdigest()


def decryption_precision(params: Parameters, scale: float, smudge_bits: int = SMUDGE_BITS) -> float:
    """Expected bits of precision (-log2 of the largest slot error over all slots) that smudging
    leaves at ``scale``: the coefficient noise (std 2^k / sqrt 12) spreads over N/2 complex slots
    with std 2^k sqrt(N / 24) / scale; the largest of N/2 is about 4.5 std."""
    std = 2.0 ** smudge_bits * np.sqrt(params.n / 24.0) / float(scale)
    return float(-np.log2(4.5 * std))


def validate_ciphertexts(params: Parameters, cts: Sequence[Any], smudge_bits: int) -> list[Ciphertext]:
    """The ciphertexts of a joint decryption, checked: CKKS ciphertexts of ``params``,
    relinearised, at least one; and a smudging width of 8..58 bits."""
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
    if not 8 <= smudge_bits <= 58:
        raise ConfigError(f"smudge_bits must be 8..58, got {smudge_bits}")
    return cts


def decryption_request(cts: Sequence[Ciphertext], to: int | None, smudge_bits: int) -> dict:
    """What every party of a joint decryption must agree on before anything is opened: the
    ciphertexts' digests (one string for one ciphertext), the recipient and the smudging width."""
    digests = [ciphertext_digest(ct) for ct in cts]
    return {"digest": digests[0] if len(cts) == 1 else digests, "to": to, "smudge_bits": int(smudge_bits)}


def decryption_share(share: SecretKeyShare, cts: Sequence[Ciphertext], smudge: np.ndarray,
                     smudge_bits: int) -> np.ndarray:
    """This party's decryption shares on limb q_0, (len(cts), 1, N) NTT rows: c_1 s_i + r_i, plus
    c_0 at party 0. ``smudge`` (len(cts), 1, N), coefficient form, is this party's share of
    r in [0, 2^k); party 0 subtracts 2^(k-1) so that r is centred."""
    params = share.params
    ctx = params.context
    n = params.n
    if share.index == 0:
        offset = ctx.from_signed(np.full(n, -(1 << (smudge_bits - 1)), dtype=np.int64), [0])
        smudge = ctx.add(smudge, np.broadcast_to(offset, smudge.shape).copy(), [0])
    ctx.ntt(smudge, [0])
    c1 = np.ascontiguousarray(np.stack([ct.data[1, :1] for ct in cts]))
    s0 = np.ascontiguousarray(np.broadcast_to(share.ntt[:1], c1.shape))
    part = ctx.add(ctx.mul(c1, s0, [0]), smudge, [0])
    if share.index == 0:
        part = ctx.add(part, np.ascontiguousarray(np.stack([ct.data[0, :1] for ct in cts])), [0])
    return part


def decode_opened(params: Parameters, total: np.ndarray, cts: Sequence[Ciphertext]) -> np.ndarray:
    """The decoded slots (len(cts), slots) of the opened sums of every party's decryption shares."""
    encoder = Encoder(params)
    return np.stack([encoder.decode(Plaintext(params, np.ascontiguousarray(total[k]), ct.scale))
                     for k, ct in enumerate(cts)])
