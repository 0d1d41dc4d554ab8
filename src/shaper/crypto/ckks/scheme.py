"""CKKS ciphertexts: encryption, decryption and the evaluator.

Security model: CKKS is IND-CPA secure under RLWE with the parameters of
:mod:`~shaper.crypto.ckks.params`; whoever holds a ciphertext and the public/evaluation keys
learns nothing about the message. Decryption returns the message *plus noise*, and that noise
depends on the secret key: a decrypted result handed to someone else can leak the key
(Li–Micciancio, EUROCRYPT 2021). Only share decrypted values flooded by their worst-case error,
of ciphertexts whose error nobody chose (the threshold decryption of the multiparty layer does:
docs/threshold-ckks.md).

A ciphertext is ``data`` (k, level + 1, N) uint64 in NTT form (k = 2, or 3 after a product
before relinearisation) with a ``scale``. Levels count down from L to 0, one prime per rescale.
Operations check their operands: parameters (by fingerprint), levels and scales must match,
otherwise :class:`~shaper.errors.ScaleError` names both values; nothing is silently adjusted.

Encryption with the public key works over Q p and then divides by p with rounding (as SEAL
does): the encryption noise v e + e0 shrinks to rounding noise, about 4 bits of precision more
than encrypting mod Q directly.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError, KeyMismatchError, ScaleError
from ..prg import Prg
from .encoder import Encoder, Plaintext
from .keys import (
    SEED_BYTES,
    PublicKey,
    SecretKey,
    SwitchingKey,
    conjugation_element,
    galois_element,
    sample_gaussian,
    sample_ternary,
    small_to_rns,
    uniform_poly,
)
from .params import Parameters

#: relative difference below which two scales count as equal (identical multiplication histories
#: give identical floats; this only absorbs float reassociation)
SCALE_TOLERANCE = 2.0 ** -40


@dataclass(eq=False)
class Ciphertext:
    """``data`` (k, level + 1, N) NTT form at ``scale``; ``seed`` set on a fresh symmetric
    encryption whose second component is expanded from it (serialises in half the space)."""

    params: Parameters
    data: np.ndarray
    scale: float
    seed: bytes | None = None

    @property
    def level(self) -> int:
        return self.data.shape[1] - 1

    @property
    def size(self) -> int:
        """Number of components: 2, or 3 after a product before relinearisation."""
        return self.data.shape[0]

    def __repr__(self) -> str:
        return f"ckks.Ciphertext(level {self.level}, scale 2^{math.log2(self.scale):.2f}, {self.size} components)"


# -- encryption and decryption ------------------------------------------------------------------

def encrypt(key: PublicKey | SecretKey, plaintext: Plaintext, prg: Prg | None = None) -> Ciphertext:
    """Encrypts ``plaintext`` (at its level and scale) under a public key, or under a secret key
    (symmetric: c = (-a s + e + m, a), a expanded from a fresh seed)."""
    params = plaintext.params
    if key.params != params:
        raise KeyMismatchError("the key and the plaintext belong to different parameters")
    ctx = params.context
    level = plaintext.level
    mods = params.mods(level)
    if isinstance(key, SecretKey):
        seed = os.urandom(SEED_BYTES)
        a = uniform_poly(params, mods, Prg(seed))
        e = small_to_rns(params, sample_gaussian(params.n, params.sigma, prg), mods)
        b = ctx.sub(ctx.add(e, plaintext.data, mods), ctx.mul(a, np.ascontiguousarray(key.ntt[:level + 1]), mods), mods)
        return Ciphertext(params, np.stack([b, a]), plaintext.scale, seed)
    if not isinstance(key, PublicKey):
        raise TypeError(f"encrypt takes a PublicKey or SecretKey, got {type(key).__name__}")
    sp = params.special_index
    ext = mods + [sp]
    v = small_to_rns(params, sample_ternary(params.n, prg), ext)
    body, top_key = key.scaled()  # (b, a) p^-1 on the q rows, (b, a) on p's row
    # c = v (b, a) + (e0, e1) over Q p, divided by p with rounding. With t the centred lift of
    # c mod p, row i of the quotient is (c_i + NTT((e - t) mod q_i)) p^-1 -- the numbers of
    # divide_round_last(v pk + NTT(e)) without transforming e on every row
    e = sample_gaussian((2, params.n), params.sigma, prg)
    p = params.special
    top = ctx.mul(top_key, np.stack([v[-1:], v[-1:]]), [sp])
    ctx.intt(top, [sp])
    t = np.mod(top[:, 0].astype(np.int64) + e, np.int64(p))
    t = np.where(t > (p - 1) // 2, t - np.int64(p), t)
    fix = small_to_rns(params, e - t, mods)  # |e - t| < p / 2 + 6 sigma
    pinv = np.array([pow(p, -1, q) for q in params.moduli[:level + 1]], dtype=np.uint64)
    c = ctx.mul_scalar(fix, pinv, mods)
    vq = np.ascontiguousarray(v[:-1])
    for k in range(2):
        ctx.mul_acc(c[k], np.ascontiguousarray(body[k, :level + 1]), vq, mods)
    c[0] = ctx.add(c[0], plaintext.data, mods)
    return Ciphertext(params, c, plaintext.scale)


def decrypt(sk: SecretKey, ct: Ciphertext) -> Plaintext:
    """The plaintext m + e of ``ct`` on its two lowest limbs (exact for coefficients below
    q_0 q_1 / 2; at level 0, below q_0 / 2)."""
    params = ct.params
    if sk.params != params:
        raise KeyMismatchError("the secret key and the ciphertext belong to different parameters")
    ctx = params.context
    rows = min(ct.level + 1, 2)
    mods = list(range(rows))
    data = np.ascontiguousarray(ct.data[:, :rows])
    s = np.ascontiguousarray(sk.ntt[:rows])
    out = data[0].copy()
    power = s
    for k in range(1, ct.size):
        ctx.mul_acc(out, np.ascontiguousarray(data[k]), power, mods)
        if k + 1 < ct.size:
            power = ctx.mul(power, s, mods)
    return Plaintext(params, out, ct.scale)


# -- evaluation ---------------------------------------------------------------------------------

class Evaluator:
    """Homomorphic operations on ciphertexts of one parameter set.

    ``relin_key`` enables :meth:`mul` with relinearisation; ``galois_keys`` (a mapping from
    Galois element to key, or an iterable of keys) enable :meth:`rotate`, :meth:`rotate_many`,
    :meth:`conjugate` and :meth:`matvec`. Inputs are never modified."""

    def __init__(self, params: Parameters, relin_key: SwitchingKey | None = None,
                 galois_keys: Any = None) -> None:
        self.params = params
        self.ctx = params.context
        self.encoder = Encoder(params)
        if relin_key is not None:
            self._check_key(relin_key)
            if relin_key.galois != 0:
                raise ConfigError(f"relin_key is a Galois key (element {relin_key.galois}), not a relinearisation key")
        self.relin_key = relin_key
        keys = galois_keys.values() if isinstance(galois_keys, dict) else (galois_keys or ())
        self.galois_keys: dict[int, SwitchingKey] = {}
        for key in keys:
            self._check_key(key)
            if key.galois == 0:
                raise ConfigError("a relinearisation key was passed as a Galois key")
            self.galois_keys[key.galois] = key

    # -- checks -----------------------------------------------------------------------------

    def _check_key(self, key: SwitchingKey) -> None:
        if not isinstance(key, SwitchingKey):
            raise TypeError(f"expected a SwitchingKey, got {type(key).__name__}")
        if key.params != self.params:
            raise KeyMismatchError("a key belongs to different parameters than the evaluator")

    def _own(self, *items: Ciphertext | Plaintext) -> None:
        for x in items:
            if x.params != self.params:
                raise KeyMismatchError(f"{type(x).__name__} belongs to different parameters than the evaluator")

    @staticmethod
    def _same(a: Any, b: Any, what: str) -> None:
        if a.level != b.level:
            raise ScaleError(f"{what}: operands are at levels {a.level} and {b.level}; bring the higher one down with "
                             "drop_level (or rescale) first")
        if abs(a.scale - b.scale) > SCALE_TOLERANCE * max(a.scale, b.scale):
            raise ScaleError(f"{what}: operand scales differ (2^{math.log2(a.scale):.6f} and 2^{math.log2(b.scale):.6f}); "
                             "rescale or re-encode so they match")

    # -- linear -----------------------------------------------------------------------------

    def add(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        self._own(a, b)
        self._same(a, b, "add")
        return self._combine(a, b, self.ctx.add)

    def sub(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        self._own(a, b)
        self._same(a, b, "sub")
        return self._combine(a, b, self.ctx.sub)

    def _combine(self, a: Ciphertext, b: Ciphertext, op: Any) -> Ciphertext:
        mods = self.params.mods(a.level)
        k = min(a.size, b.size)
        head = op(np.ascontiguousarray(a.data[:k]), np.ascontiguousarray(b.data[:k]), mods)
        if a.size == b.size:
            return Ciphertext(self.params, head, a.scale)
        if a.size > b.size:
            tail = a.data[k:]
        else:
            tail = b.data[k:] if op == self.ctx.add else self.ctx.neg(np.ascontiguousarray(b.data[k:]), mods)
        return Ciphertext(self.params, np.concatenate([head, tail]), a.scale)

    def negate(self, a: Ciphertext) -> Ciphertext:
        self._own(a)
        return Ciphertext(self.params, self.ctx.neg(a.data, self.params.mods(a.level)), a.scale)

    def add_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext:
        return self._plain(a, p, self.ctx.add, "add_plain")

    def sub_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext:
        return self._plain(a, p, self.ctx.sub, "sub_plain")

    def _plain(self, a: Ciphertext, p: Plaintext, op: Any, what: str) -> Ciphertext:
        self._own(a, p)
        self._same(a, p, what)
        data = a.data.copy()
        data[0] = op(np.ascontiguousarray(a.data[0]), p.data, self.params.mods(a.level))
        return Ciphertext(self.params, data, a.scale)

    def mul_plain(self, a: Ciphertext, p: Plaintext) -> Ciphertext:
        """a * p (scale multiplies; rescale afterwards). ``p`` must be at ``a``'s level."""
        self._own(a, p)
        if p.level != a.level:
            raise ScaleError(f"mul_plain: plaintext at level {p.level}, ciphertext at level {a.level}; encode the "
                             "plaintext at the ciphertext's level")
        mods = self.params.mods(a.level)
        data = np.stack([self.ctx.mul(np.ascontiguousarray(c), p.data, mods) for c in a.data])
        return Ciphertext(self.params, data, a.scale * p.scale)

    def mul_const(self, a: Ciphertext, values: Any) -> Ciphertext:
        """a times a plaintext vector (or scalar broadcast to every slot), encoded at the scale of
        the prime the next rescale drops, so that the result's scale after :meth:`rescale` equals
        ``a``'s. Consumes one level after the rescale."""
        if a.level == 0:
            raise ScaleError("mul_const needs a ciphertext above level 0 (the product must be rescaled)")
        vals = np.broadcast_to(np.asarray(values), (self.params.slots,)) if np.ndim(values) == 0 else values
        pt = self.encoder.encode(vals, level=a.level, scale=float(self.params.moduli[a.level]))
        return self.mul_plain(a, pt)

    # -- products ---------------------------------------------------------------------------

    def mul(self, a: Ciphertext, b: Ciphertext, *, relinearize: bool = True) -> Ciphertext:
        """a * b (scales multiply; rescale afterwards). Relinearised unless
        ``relinearize=False`` (3 components: sums of products can be relinearised once)."""
        self._own(a, b)
        if a.size != 2 or b.size != 2:
            raise ScaleError("mul takes relinearised (2-component) ciphertexts")
        if a.level != b.level:
            raise ScaleError(f"mul: operands are at levels {a.level} and {b.level}; bring the higher one down with "
                             "drop_level first")
        mods = self.params.mods(a.level)
        d = self.ctx.tensor(a.data, b.data, mods)
        out = Ciphertext(self.params, d, a.scale * b.scale)
        return self.relinearize(out) if relinearize else out

    def square(self, a: Ciphertext, *, relinearize: bool = True) -> Ciphertext:
        return self.mul(a, a, relinearize=relinearize)

    def relinearize(self, a: Ciphertext) -> Ciphertext:
        self._own(a)
        if a.size == 2:
            return a
        if self.relin_key is None:
            raise ConfigError("relinearisation needs a relinearisation key (Evaluator(relin_key=...))")
        mods = self.params.mods(a.level)
        u = self._switch(np.ascontiguousarray(a.data[2]), self.relin_key, a.level)
        return Ciphertext(self.params, self.ctx.add(np.ascontiguousarray(a.data[:2]), u, mods), a.scale)

    def _switch(self, poly: np.ndarray, key: SwitchingKey, level: int, g: int = 1,
                digits: np.ndarray | None = None) -> np.ndarray:
        mods = self.params.mods(level)
        sp = self.params.special_index
        if digits is None:
            digits = self.ctx.decompose(poly, mods, sp)
        return self.ctx.key_switch(digits, key.data, mods, sp, g)

    def rescale(self, a: Ciphertext) -> Ciphertext:
        """Divides by the last prime q_level (rounding) and drops it: scale / q_level."""
        self._own(a)
        if a.level == 0:
            raise ScaleError("rescale: the ciphertext is at level 0, no prime left to drop")
        mods = self.params.mods(a.level)
        return Ciphertext(self.params, self.ctx.divide_round_last(a.data, mods),
                          a.scale / self.params.moduli[a.level])

    def mul_rescale(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """Multiply, relinearise and rescale."""
        return self.rescale(self.mul(a, b))

    def drop_level(self, a: Ciphertext, level: int) -> Ciphertext:
        """The same message at a lower ``level`` (limbs dropped; scale unchanged)."""
        self._own(a)
        if not 0 <= level <= a.level:
            raise ScaleError(f"drop_level: cannot go from level {a.level} to {level}")
        return Ciphertext(self.params, np.ascontiguousarray(a.data[:, :level + 1]), a.scale)

    # -- automorphisms ------------------------------------------------------------------------

    def _galois(self, g: int) -> SwitchingKey:
        key = self.galois_keys.get(g)
        if key is None:
            raise ConfigError(f"no Galois key for element {g}; generate it (KeySet(rotations=...), galois_key)")
        return key

    def apply_galois(self, a: Ciphertext, g: int) -> Ciphertext:
        self._own(a)
        if a.size != 2:
            raise ScaleError("automorphisms take relinearised (2-component) ciphertexts")
        key = self._galois(g)
        mods = self.params.mods(a.level)
        u = self._switch(np.ascontiguousarray(a.data[1]), key, a.level, g)
        c0 = self.ctx.automorph(np.ascontiguousarray(a.data[0]), g)
        u[0] = self.ctx.add(np.ascontiguousarray(u[0]), c0, mods)
        return Ciphertext(self.params, u, a.scale)

    def rotate(self, a: Ciphertext, steps: int) -> Ciphertext:
        """Slots rotated left by ``steps`` (negative: right)."""
        if int(steps) % self.params.slots == 0:
            return Ciphertext(self.params, a.data.copy(), a.scale)
        return self.apply_galois(a, galois_element(self.params, steps))

    def conjugate(self, a: Ciphertext) -> Ciphertext:
        return self.apply_galois(a, conjugation_element(self.params))

    def rotate_many(self, a: Ciphertext, steps: Iterable[int]) -> dict[int, Ciphertext]:
        """Several rotations of one ciphertext sharing one decomposition (hoisting,
        Halevi–Shoup 2018): ``{step: rotated}``."""
        self._own(a)
        if a.size != 2:
            raise ScaleError("automorphisms take relinearised (2-component) ciphertexts")
        steps = list(dict.fromkeys(int(s) for s in steps))
        keys = {s: self._galois(galois_element(self.params, s)) for s in steps if s % self.params.slots}
        mods = self.params.mods(a.level)
        digits = self.ctx.decompose(np.ascontiguousarray(a.data[1]), mods, self.params.special_index)
        c0 = np.ascontiguousarray(a.data[0])
        out = {}
        for s in steps:
            if s % self.params.slots == 0:
                out[s] = Ciphertext(self.params, a.data.copy(), a.scale)
                continue
            g = keys[s].galois
            u = self._switch(c0, keys[s], a.level, g, digits)
            u[0] = self.ctx.add(np.ascontiguousarray(u[0]), self.ctx.automorph(c0, g), mods)
            out[s] = Ciphertext(self.params, u, a.scale)
        return out

    # -- matrix-vector ---------------------------------------------------------------------

    @staticmethod
    def matvec_steps(dim: int) -> list[int]:
        """Rotation steps :meth:`matvec` needs for a ``dim`` x ``dim`` matrix."""
        baby, giant = _bsgs_split(dim)
        return sorted(set(range(1, baby)) | {baby * j for j in range(1, giant)})

    def matvec(self, matrix: Any, a: Ciphertext) -> Ciphertext:
        """M x for a d x d matrix M (d dividing N/2) and a ciphertext whose slots hold x repeated
        with period d (encode ``np.tile(x, N/2 // d)``). Diagonal method with baby-step
        giant-step (Halevi–Shoup): sqrt(d) hoisted baby rotations plus sqrt(d) giant ones.
        Diagonals are encoded at the scale of the prime the next rescale drops, so the result
        (already rescaled, one level down) has ``a``'s scale and holds M x with period d."""
        m = np.asarray(matrix)
        slots = self.params.slots
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"matvec takes a square matrix, got shape {m.shape}")
        d = m.shape[0]
        if slots % d:
            raise ValueError(f"matrix size {d} must divide the {slots} slots")
        if a.level == 0:
            raise ScaleError("matvec needs a ciphertext above level 0 (its product is rescaled)")
        baby, giant = _bsgs_split(d)
        rot = self.rotate_many(a, range(baby))
        rows = np.arange(d)
        level = a.level
        scale = float(self.params.moduli[level])
        total: Ciphertext | None = None
        for j in range(giant):
            inner: Ciphertext | None = None
            for i in range(baby):
                k = j * baby + i
                if k >= d:
                    break
                diag = m[rows, (rows + k) % d]  # diag_k[r] = M[r, r + k]
                if not np.any(diag):
                    continue
                # rot(diag_k, -j baby) so that the giant rotation by j baby lines it up
                shifted = np.roll(np.tile(diag, slots // d), j * baby)
                term = self.mul_plain(rot[i], self.encoder.encode(shifted, level=level, scale=scale))
                inner = term if inner is None else self.add(inner, term)
            if inner is None:
                continue
            inner = self.rotate(inner, j * baby) if j else inner
            total = inner if total is None else self.add(total, inner)
        if total is None:
            raise ValueError("matvec of an all-zero matrix")
        return self.rescale(total)


def _bsgs_split(d: int) -> tuple[int, int]:
    baby = 1 << max(0, (d.bit_length() - 1 + 1) // 2) if d & (d - 1) == 0 else max(1, math.isqrt(d))
    giant = -(-d // baby)
    return baby, giant
