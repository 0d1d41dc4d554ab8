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

from collections.abc import Sequence

import numpy as np

from ...kernels import cyclo
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

    # -- pointwise (the kernel's batched ops: native where built) --------------------------------
    def add(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        return self.ctx.add(_c(a), _c(b), list(limbs))

    def sub(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        return self.ctx.sub(_c(a), _c(b), list(limbs))

    def neg(self, a: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        return np.where(a == 0, a, self.qs(limbs) - a)

    def mul(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """Pointwise product mod each limb's prime (b may be (L, φ) against a's leading axes)."""
        return self.ctx.mul(_c(a), _c(b), list(limbs))

    def mul_acc(self, acc: np.ndarray, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> None:
        """acc += a·b in place."""
        self.ctx.mul_acc(acc, _c(a), _c(b), list(limbs))

    def mul_scalar(self, a: np.ndarray, scalars: Sequence[int], limbs: Sequence[int]) -> np.ndarray:
        """a times one integer per limb (reduced here)."""
        reduced = [int(x) % int(self.basis[limb]) for x, limb in zip(scalars, limbs, strict=True)]
        return self.ctx.mul_scalar(_c(a), reduced, list(limbs))

    def automorphism(self, a: np.ndarray, t: int) -> np.ndarray:
        """a(X) ↦ a(X^t) in evaluation form (t a unit mod m)."""
        return a[..., self.ctx.automorphism_index(int(t) % self.m)]

    # -- rounding and digits -----------------------------------------------------------------------
    def extend(self, residues: np.ndarray, src: Sequence[int], dst: Sequence[int]) -> np.ndarray:
        """Fast basis extension in coefficient form, centred: x given by its residues mod the primes
        of ``src`` (shape (len(src), φ)) → x' mod each prime of ``dst``, where x' ≡ x (mod D = ∏ src)
        and |x'| <= D/2 up to a float rounding near ±D/2 (then |x'| <= D/2 + D): Halevi–Polyakov–
        Shoup's extension with the quotient estimated in floating point (the kernel's ``extend``)."""
        return self.ctx.extend(_c(residues), list(src), list(dst))

    def divide_round(self, a: np.ndarray, limbs: Sequence[int], drop: Sequence[int]) -> np.ndarray:
        """(a − δ)/D on ``limbs`` minus ``drop`` (a in evaluation form over ``limbs``; D = ∏ drop),
        with δ = 2·[a/2]_D: δ ≡ a (mod D), δ ≡ 0 (mod 2), so the plaintext survives and the error
        shrinks by D (the kernel's fused ``divide_round``: inverse of the dropped rows, extension,
        forward, subtraction and D^{-1})."""
        return self.ctx.divide_round(_c(a), list(limbs), list(drop))

    def digits(self, a: np.ndarray, level: int) -> list[tuple[list[int], np.ndarray]]:
        """Key-switching digits of a (evaluation form, limbs 0..level): for each digit group G of
        the chain (restricted to the level), [a]_{∏G} lifted to limbs 0..level and the special
        primes, in evaluation form. Σ_G digit_G · Q̂_G·[Q̂_G^{-1}]_{Q_G} ≡ a (mod Q_level)."""
        chain = self.chain(level)
        groups = []
        for group in self.params.digit_groups():
            g = [i for i in group if i <= level]
            if not g:
                break
            groups.append(g)
        full = self.ctx.digits(_c(a), chain, groups, chain + self.special)
        return list(zip(groups, full, strict=True))


def _c(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous and a.dtype == np.uint64 else np.ascontiguousarray(a, dtype=np.uint64)
