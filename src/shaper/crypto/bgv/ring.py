"""Double-CRT arithmetic in R_Q = Z_Q[X]/Φ_m(X) for odd m (local math, no I/O).

An element is a ``uint64`` array of shape ``(..., L, φ)``: row l holds the values of the
polynomial mod the prime ``basis[limbs[l]]`` at the primitive m-th roots of unity ζ^u, u over the
units of Z_m in increasing order (the evaluation form of :mod:`shaper.kernels.cyclo`). Sums and
products are pointwise; the automorphism X ↦ X^t permutes the points. ``limbs`` are indices into
:attr:`Parameters.basis` (the chain q_0..q_L, then the special primes); a ciphertext at level ℓ
uses limbs 0..ℓ.

The coefficient form (the power basis, degree < φ) is reached by the kernel's inverse transform;
it is needed where BGV rounds: modulus switching, key-switching digits and decryption.

Rounding that keeps the plaintext (p = 2). Dividing x by an odd modulus D (a dropped chain prime,
or P after key switching) uses δ = 2·[x·2^{-1}]_D: δ ≡ x (mod D) and δ ≡ 0 (mod 2), so
(x − δ)/D is exact and carries the plaintext times D^{-1} ≡ 1 (mod 2). The lift of
[x·2^{-1}]_D to the other primes may be off by a small multiple of D (fast basis extension);
2·u·D is still ≡ 0 mod 2 and ≡ 0 mod D, so only a small error u is added, never a wrong bit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ...kernels import cyclo
from ...kernels.modq import matmul_mod, mul_mod
from .params import Parameters

__all__ = ["Ring"]


class Ring:
    """The ring of one parameter set: transforms, pointwise arithmetic, rounding and digits."""

    def __init__(self, params: Parameters) -> None:
        self.params = params
        self.m, self.phi = params.m, params.phi
        self.basis = params.basis
        self.ctx = cyclo.context(params.m, params.basis)
        self._q = np.asarray(self.basis, dtype=np.uint64)

    # -- limbs -------------------------------------------------------------------------------------
    def chain(self, level: int) -> list[int]:
        """Limbs of a ciphertext at ``level``: q_0..q_level."""
        return list(range(level + 1))

    @property
    def special(self) -> list[int]:
        n = len(self.params.primes)
        return list(range(n, n + len(self.params.special)))

    def qs(self, limbs: Sequence[int]) -> np.ndarray:
        """The primes of ``limbs`` as a (L, 1) column (broadcasts against (..., L, φ))."""
        return self._q[list(limbs)][:, None]

    # -- conversions -------------------------------------------------------------------------------
    def from_signed(self, coeffs: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """Small signed coefficients (int64, (..., φ)) as residues (..., L, φ) in coefficient form."""
        c = np.asarray(coeffs, dtype=np.int64)
        q = self._q[list(limbs)].astype(np.int64)[:, None]
        return (c[..., None, :] % q).astype(np.uint64)

    def forward(self, residues: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """Coefficient form → evaluation form (any leading axes)."""
        return self._each(residues, limbs, self.ctx.forward)

    def inverse(self, values: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """Evaluation form → coefficient form (the canonical representative, degree < φ)."""
        return self._each(values, limbs, self.ctx.inverse)

    def _each(self, a: np.ndarray, limbs: Sequence[int], fn) -> np.ndarray:
        a = np.ascontiguousarray(a, dtype=np.uint64)
        lead = a.shape[:-2]
        flat = a.reshape((-1,) + a.shape[-2:])
        out = np.stack([fn(np.ascontiguousarray(x), list(limbs)) for x in flat]) if flat.shape[0] else flat.copy()
        return out.reshape(lead + a.shape[-2:])

    def encode_signed(self, coeffs: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """Small signed coefficients straight to evaluation form."""
        return self.forward(self.from_signed(coeffs, limbs), limbs)

    # -- pointwise ---------------------------------------------------------------------------------
    def add(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        s = a + b  # both < q < 2^62
        return np.minimum(s, s - self.qs(limbs))

    def sub(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        d = a - b
        return np.minimum(d, d + self.qs(limbs))

    def neg(self, a: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        return np.where(a == 0, a, self.qs(limbs) - a)

    def mul(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """Pointwise product mod each limb's prime (broadcasting leading axes)."""
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
        out = np.empty(shape, dtype=np.uint64)
        for li, limb in enumerate(limbs):
            x = np.ascontiguousarray(a[..., li, :]).reshape(-1, 1)
            y = np.ascontiguousarray(b[..., li, :]).reshape(-1, 1)
            out[..., li, :] = mul_mod(x, y, [int(self.basis[limb])]).reshape(shape[:-2] + (shape[-1],))
        return out

    def mul_scalar(self, a: np.ndarray, scalars: Sequence[int], limbs: Sequence[int]) -> np.ndarray:
        """a times one integer per limb (reduced here)."""
        col = np.asarray([int(s) % self.basis[limb] for s, limb in zip(scalars, limbs, strict=True)],
                         dtype=np.uint64)
        return self.mul(a, np.broadcast_to(col[:, None], a.shape[-2:]), limbs)

    def automorphism(self, a: np.ndarray, t: int) -> np.ndarray:
        """a(X) ↦ a(X^t) in evaluation form (t a unit mod m)."""
        return a[..., self.ctx.automorphism_index(int(t) % self.m)]

    # -- rounding and digits -----------------------------------------------------------------------
    def extend(self, residues: np.ndarray, src: Sequence[int], dst: Sequence[int]) -> np.ndarray:
        """Fast basis extension in coefficient form, centred: x given by its residues mod the primes
        of ``src`` (shape (len(src), φ)) → x' mod each prime of ``dst``, where x' ≡ x (mod D = ∏ src)
        and |x'| <= D/2 up to a float rounding near ±D/2 (then |x'| <= D/2 + D): Halevi–Polyakov–
        Shoup's extension with the quotient estimated in floating point."""
        src, dst = list(src), list(dst)
        if len(src) == 1:  # one prime: the centred lift is exact
            q = int(self.basis[src[0]])
            x = residues[0].astype(np.int64)
            return self.from_signed(np.where(x > q // 2, x - q, x), dst)
        primes = tuple(int(self.basis[i]) for i in src)
        inv, hats, d = _extension_weights(primes)
        ys = np.empty_like(residues)
        for i, q in enumerate(primes):  # y_i = [x_i · (D/q_i)^{-1}]_{q_i}
            ys[i] = mul_mod(residues[i].reshape(-1, 1), np.full((self.phi, 1), inv[i], dtype=np.uint64), [q])[:, 0]
        frac = sum(ys[i].astype(np.float64) / q for i, q in enumerate(primes))
        u = np.floor(frac + 0.5).astype(np.uint64)  # x = Σ y_i·D/q_i − u·D
        out = np.empty((len(dst), self.phi), dtype=np.uint64)
        for k, limb in enumerate(dst):
            p = int(self.basis[limb])
            w = np.asarray([[h % p for h in hats]], dtype=np.uint64)
            acc = matmul_mod(w, ys % np.uint64(p), p)[0]
            ud = mul_mod((u % np.uint64(p)).reshape(-1, 1), np.full((self.phi, 1), d % p, dtype=np.uint64), [p])[:, 0]
            out[k] = np.minimum(acc - ud, acc - ud + np.uint64(p))
        return out

    def divide_round(self, a: np.ndarray, limbs: Sequence[int], drop: Sequence[int]) -> np.ndarray:
        """(a − δ)/D on ``limbs`` minus ``drop`` (a in evaluation form over ``limbs``; D = ∏ drop),
        with δ ≡ a (mod D), δ ≡ 0 (mod 2): the plaintext survives, the error shrinks by D."""
        limbs, drop = list(limbs), list(drop)
        keep = [x for x in limbs if x not in drop]
        lead = a.shape[:-2]
        flat = a.reshape((-1,) + a.shape[-2:])
        pos_drop = [limbs.index(x) for x in drop]
        pos_keep = [limbs.index(x) for x in keep]
        out = np.empty((flat.shape[0], len(keep), self.phi), dtype=np.uint64)
        half = [pow(2, -1, int(self.basis[x])) for x in drop]
        d_inv = []
        for x in keep:
            prod = 1
            for z in drop:
                prod = prod * int(self.basis[z]) % int(self.basis[x])
            d_inv.append(pow(prod, -1, int(self.basis[x])))
        for i, x in enumerate(flat):
            top = self.inverse(x[pos_drop], drop)                       # a mod D, coefficients
            y = self.mul_scalar(top, half, drop)                        # [a / 2]_D
            delta = self.extend(y, drop, keep)                          # ≈ [a / 2]_D on the kept primes
            delta = self.forward(self.add(delta, delta, keep), keep)    # δ = 2·[a / 2]_D
            out[i] = self.mul_scalar(self.sub(x[pos_keep], delta, keep), d_inv, keep)
        return out.reshape(lead + (len(keep), self.phi))

    def digits(self, a: np.ndarray, level: int) -> list[tuple[list[int], np.ndarray]]:
        """Key-switching digits of a (evaluation form, limbs 0..level): for each digit group G of
        the chain (restricted to the level), [a]_{∏G} lifted to limbs 0..level and the special
        primes, in evaluation form. Σ_G digit_G · Q̂_G·[Q̂_G^{-1}]_{Q_G} ≡ a (mod Q_level)."""
        chain = self.chain(level)
        target = chain + self.special
        coeffs = self.inverse(a, chain)
        out = []
        for group in self.params.digit_groups():
            g = [i for i in group if i <= level]
            if not g:
                break
            others = [t for t in target if t not in g]
            full = np.empty((len(target), self.phi), dtype=np.uint64)
            full[[target.index(t) for t in g]] = a[g]  # the group's own rows: a itself, already in evaluation form
            full[[target.index(t) for t in others]] = self.forward(self.extend(coeffs[g], g, others), others)
            out.append((g, full))
        return out


@functools.lru_cache(maxsize=64)
def _extension_weights(primes: tuple[int, ...]) -> tuple[list[int], list[int], int]:
    """(D/q_i)^{-1} mod q_i per source prime, D/q_i, and D (Python ints)."""
    d = 1
    for q in primes:
        d *= q
    hats = [d // q for q in primes]
    return [pow(h % q, -1, q) for h, q in zip(hats, primes, strict=True)], hats, d
