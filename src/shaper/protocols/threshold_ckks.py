"""Threshold CKKS by MPC key generation (GMPFHE, first part): n parties generate the keys of
ordinary single-key RNS-CKKS inside the n-party MPC engine, then decrypt jointly.

Status: key generation by the paper's method (shared ternary secret, shared discrete-Gaussian
errors, s^2 from square pairs, rotation keys local on shares) and threshold decryption with
jointly sampled smudging noise. Not yet: the cheaper local-noise variant, decryption consent by
digest, key files, the ``shaper fhe`` commands, the benchmark (issue 18).

Security model: passive (semi-honest) parties, dishonest majority, as the engine
(:class:`~shaper.protocols.nparty.AdditiveNPC`). What is opened: the public key and every
switching key (exactly the single-key distribution, since s and every error are sampled inside
the MPC); the masked values of the square-pair multiplication (uniform); a decryption's sum
m + e + smudge to its recipient. The secret key stays additively shared: party i holds s_i
with s = sum_i s_i on every limb, in NTT form; no party or coalition short of all learns s.

Decryption: party i sends c_1 s_i (+ c_0 for party 0) + r_i on limb q_0, where r = sum r_i is
uniform in [-2^(k-1), 2^(k-1)) per coefficient, sampled *jointly* (edaBits): independent
per-party smudging would not be simulation-secure. The smudging hides the decryption error e
(which depends on s) statistically when 2^k exceeds |e| by 2^lambda; it costs about k - log2 Δ
bits of precision relative to the slots' scale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..crypto import ckks
from ..errors import KeyMismatchError
from ..crypto.ckks.keys import expand_seed

#: smudging bits for threshold decryption (2^SMUDGE_BITS wide uniform noise per coefficient)
SMUDGE_BITS = 30


@dataclass(eq=False)
class KeyShare:
    """This party's additive share of the secret key: NTT form over every kernel row."""

    params: ckks.Parameters
    ntt: np.ndarray
    index: int


@dataclass(eq=False)
class JointKeys:
    """What key generation leaves with every party: the opened keys and its own share."""

    public: ckks.PublicKey
    relin: ckks.SwitchingKey
    galois: dict[int, ckks.SwitchingKey]
    share: KeyShare


def _rows(x: Any) -> np.ndarray:
    """ModShares (N, R) -> this party's share as kernel rows (R, N)."""
    return np.ascontiguousarray(x.share.T)


def _open(engine: Any, rows: np.ndarray, primes: tuple[int, ...]) -> np.ndarray:
    """Opens shares held as kernel rows (..., R, N) to every party."""
    from .nparty import ModShares

    moved = np.moveaxis(rows, -2, -1)  # limbs last, as the engine holds them
    out = ModShares(engine, np.ascontiguousarray(moved), primes).reveal()
    return np.ascontiguousarray(np.moveaxis(out, -1, -2))


def _joint_seed(engine: Any, what: str) -> bytes:
    """A 32-byte seed no party chose alone: opened uniform shares, hashed."""
    r = engine.random_mod((4,), ((1 << 61) - 1,)).reveal()
    return hashlib.sha256(b"shaper-threshold-ckks/" + what.encode() + np.asarray(r, dtype="<u8").tobytes()).digest()


def keygen(engine: Any, params: ckks.Parameters, *, rotations: Iterable[int] = (), conjugation: bool = False) -> JointKeys:
    """Generates single-key CKKS keys inside the MPC (every party calls this with its engine).

    The secret s is a shared uniform ternary polynomial, the errors shared discrete Gaussians
    (sigma 3.2), s^2 is computed per NTT point and limb with square pairs, s(X^g) locally;
    the uniform ``a`` polynomials come from jointly drawn seeds. The public, relinearisation
    and Galois keys are opened; the party keeps its share of s."""
    ctx = params.context
    primes = params.primes
    rows = list(range(len(primes)))
    n = params.n
    me = engine.session.index
    s = _rows(engine.ternary((n,), primes))
    ctx.ntt(s, rows)

    def errors(count: int) -> np.ndarray:
        e = engine.gaussian(count * n, primes).share.reshape(count, n, len(primes))
        out = np.ascontiguousarray(np.swapaxes(e, 1, 2))  # (count, R, N)
        ctx.ntt(out, rows)
        return out

    # public key: b = -a s + e
    pk_seed = _joint_seed(engine, "pk")
    a = expand_seed(params, pk_seed, rows, 1)[0]
    b = ctx.sub(errors(1)[0], ctx.mul(a, s, rows), rows)
    public = ckks.PublicKey(params, np.stack([_open(engine, b, primes), a]), pk_seed)

    # s^2 per NTT point and limb: open d = s - alpha, then s^2 = d^2 + 2 d alpha + alpha^2
    alpha, alpha2 = engine.square_pairs(n, primes)
    alpha, alpha2 = _rows(alpha), _rows(alpha2)
    d = _open(engine, ctx.sub(s, alpha, rows), primes)
    s2 = ctx.add(ctx.mul(ctx.add(d, d, rows), alpha, rows), alpha2, rows)
    if me == 0:
        s2 = ctx.add(s2, ctx.mul(d, d, rows), rows)

    def switching(target: np.ndarray, galois: int, what: str) -> ckks.SwitchingKey:
        digits = len(params.moduli)
        seed = _joint_seed(engine, what)
        a = expand_seed(params, seed, rows, digits)
        b = ctx.sub(errors(digits), ctx.mul(a, np.ascontiguousarray(np.broadcast_to(s, a.shape)), rows), rows)
        for j, q in enumerate(params.moduli):  # + [row = j] (p mod q_j) t on the shares
            term = ctx.mul_scalar(np.ascontiguousarray(target[j:j + 1]), np.array([params.special % q], dtype=np.uint64), [j])
            b[j, j:j + 1] = ctx.add(np.ascontiguousarray(b[j, j:j + 1]), term, [j])
        opened = _open(engine, b, primes)
        return ckks.SwitchingKey(params, np.ascontiguousarray(np.stack([opened, a], axis=1)), galois, seed)

    relin = switching(s2, 0, "rlk")
    galois: dict[int, ckks.SwitchingKey] = {}
    elements = [ckks.galois_element(params, r) for r in rotations]
    if conjugation:
        elements.append(ckks.conjugation_element(params))
    for g in dict.fromkeys(elements):
        galois[g] = switching(ctx.automorph(s, g), g, f"galois-{g}")
    return JointKeys(public, relin, galois, KeyShare(params, s, me))


def decrypt(engine: Any, share: KeyShare, ct: ckks.Ciphertext, *, to: int | None = None,
            smudge_bits: int = SMUDGE_BITS) -> np.ndarray | None:
    """Joint decryption of ``ct`` to party ``to`` (every party when None): the decoded slots
    there, None elsewhere. Every party calls it with the same ciphertext."""
    params = share.params
    if ct.params != params:
        raise KeyMismatchError("the ciphertext belongs to other parameters than the key share")
    if ct.size != 2:
        raise ValueError("threshold decryption takes relinearised (2-component) ciphertexts")
    ctx = params.context
    q0 = params.moduli[0]
    n = params.n
    # jointly sampled smudging r in [-2^(k-1), 2^(k-1)), shared mod q0, to NTT form
    _, r = engine.edabits(n, smudge_bits, (q0,))
    smudge = np.ascontiguousarray(r.share.T)  # (1, N)
    if share.index == 0:
        offset = ctx.from_signed(np.full(n, -(1 << (smudge_bits - 1)), dtype=np.int64), [0])
        smudge = ctx.add(smudge, offset, [0])
    ctx.ntt(smudge, [0])
    part = ctx.mul(np.ascontiguousarray(ct.data[1, :1]), np.ascontiguousarray(share.ntt[:1]), [0])
    part = ctx.add(part, smudge, [0])
    if share.index == 0:
        part = ctx.add(part, np.ascontiguousarray(ct.data[0, :1]), [0])
    from .nparty import ModShares

    total = ModShares(engine, np.ascontiguousarray(part.T), (q0,)).reveal(to)
    if total is None:
        return None
    pt = ckks.Plaintext(params, np.ascontiguousarray(total.T), ct.scale)
    return ckks.Encoder(params).decode(pt)
