"""The CKKS encoder: complex vectors <-> plaintext polynomials by the canonical embedding.

Slot j of a polynomial m holds m(zeta^(5^j mod 2N)) / Delta with zeta = exp(i pi / N), for
j = 0..N/2-1; the other N/2 evaluation points zeta^(-5^j) hold the complex conjugates, which
makes the coefficients real. So X -> X^(5^r) rotates the slots left by r and X -> X^(-1)
conjugates them (the Galois elements of :class:`~shaper.crypto.ckks.Evaluator`).

Evaluations at all odd powers zeta^(2k+1) are one length-N FFT of the twisted coefficients
m_i zeta^i, so encoding is: scatter the slots and their conjugates to their evaluation points,
inverse FFT, untwist, scale by Delta and round; decoding is the reverse. Both are O(N log N)
in numpy. Rounding Delta m to integers costs about 2^-1 / Delta per coefficient, and float64
carries 53 bits: at Delta = 2^53 the encoding error per slot is about sqrt(N) / Delta.

Range: a coefficient of Delta m must stay below Q_l / 2 at the plaintext's level (and below
q_0 / 2 by the time a ciphertext is decrypted at level 0). ``encode`` raises
:class:`~shaper.errors.PlaintextOverflowError` when it does not; coefficients are roughly
(2 Delta / N) sum_j |z_j|, so a few large slots among many small ones are fine.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import PlaintextOverflowError
from .params import Parameters


@functools.lru_cache(maxsize=8)
def _embedding_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per ring degree, built once: the evaluation indices k (points zeta^(2k+1)) of the slots
    (5^j) and of their conjugates (-5^j), and the twist zeta^i and its inverse."""
    two_n = 2 * n
    powers = np.ones(n // 2, dtype=np.int64)
    for j in range(1, n // 2):
        powers[j] = powers[j - 1] * 5 % two_n
    pos, neg = (powers - 1) // 2, ((two_n - powers) - 1) // 2
    twist = np.exp(1j * np.pi * np.arange(n) / n)
    for table in (pos, neg, twist):
        table.flags.writeable = False
    untwist = np.conj(twist)
    untwist.flags.writeable = False
    return pos, neg, twist, untwist


@dataclass(eq=False)
class Plaintext:
    """An encoded polynomial: ``data`` (level + 1, N) uint64 in NTT form, at ``scale``."""

    params: Parameters
    data: np.ndarray
    scale: float

    @property
    def level(self) -> int:
        return self.data.shape[-2] - 1


class Encoder:
    """Encodes up to N/2 complex (or real) values into a :class:`Plaintext` and back."""

    def __init__(self, params: Parameters) -> None:
        self.params = params
        self._pos, self._neg, self._twist, self._untwist = _embedding_tables(params.n)

    # -- slots <-> real coefficients ------------------------------------------------------------

    def slots_to_coefficients(self, values: Any) -> np.ndarray:
        """Real coefficient vector m (unscaled) whose slots are ``values`` (zero-padded)."""
        z = np.asarray(values)
        if z.ndim != 1:
            raise ValueError(f"encode takes a 1-D vector, got shape {z.shape}")
        slots = self.params.slots
        if z.size > slots:
            raise ValueError(f"{z.size} values do not fit {slots} slots")
        if not np.issubdtype(z.dtype, np.number):
            raise TypeError(f"encode takes numbers, got dtype {z.dtype}")
        z = z.astype(np.complex128)
        if not np.all(np.isfinite(z)):
            raise ValueError("encode got a NaN or infinite value")
        evals = np.zeros(self.params.n, dtype=np.complex128)
        evals[self._pos[:z.size]] = z
        evals[self._neg[:z.size]] = np.conj(z)
        twisted = np.fft.fft(evals) / self.params.n  # sum_k E_k omega^(-ki) / N = m_i zeta^i
        return (twisted * self._untwist).real

    def coefficients_to_slots(self, coeffs: np.ndarray) -> np.ndarray:
        """The N/2 slots of the real coefficient vector ``coeffs`` (unscaled)."""
        evals = np.fft.ifft(np.asarray(coeffs, dtype=np.float64) * self._twist) * self.params.n
        return evals[self._pos]

    # -- plaintexts -----------------------------------------------------------------------------

    def encode(self, values: Any, *, level: int | None = None, scale: float | None = None) -> Plaintext:
        """A :class:`Plaintext` of ``values`` at ``level`` (default: the top) and ``scale``
        (default: the parameters' Delta)."""
        params = self.params
        level = params.max_level if level is None else int(level)
        params.mods(level)  # validates the level
        scale = params.scale if scale is None else float(scale)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be positive and finite, got {scale!r}")
        coeffs = np.rint(self.slots_to_coefficients(values) * scale)
        return Plaintext(params, self.coefficients_to_rns(coeffs, level), scale)

    def coefficients_to_rns(self, coeffs: np.ndarray, level: int) -> np.ndarray:
        """Integer-valued float (or int) coefficients -> NTT-form residues at ``level``; raises
        when a coefficient reaches Q_level / 2."""
        params = self.params
        mods = params.mods(level)
        peak = float(np.max(np.abs(coeffs))) if coeffs.size else 0.0
        limit = math.prod(params.moduli[:level + 1]) / 2
        if peak >= limit:
            raise PlaintextOverflowError(
                f"encoded coefficient reaches 2^{math.log2(peak):.1f}, beyond the modulus range 2^{math.log2(limit):.1f} "
                f"at level {level}: scale down the values or the scale")
        out = np.empty((len(mods), params.n), dtype=np.uint64)
        if peak < 2.0 ** 62:
            ints = coeffs.astype(np.int64)
            for row, q in enumerate(params.moduli[:level + 1]):
                out[row] = np.mod(ints, np.int64(q)).astype(np.uint64)
        else:  # coefficients past 2^62: exact Python integers (slow path, rare)
            ints = [int(c) for c in coeffs]
            for row, q in enumerate(params.moduli[:level + 1]):
                out[row] = np.array([c % q for c in ints], dtype=np.uint64)
        params.context.ntt(out, mods)
        return out

    def decode(self, plaintext: Plaintext, *, complex: bool = False) -> np.ndarray:
        """The N/2 slots of ``plaintext`` (real parts unless ``complex``)."""
        coeffs = self.rns_to_coefficients(plaintext.data) / plaintext.scale
        z = self.coefficients_to_slots(coeffs)
        return z if complex else z.real

    def rns_to_coefficients(self, data: np.ndarray) -> np.ndarray:
        """Centred coefficients (float64) of an NTT-form polynomial, from its first two limbs
        (exact for magnitudes below q_0 q_1 / 2, i.e. about 2^112 for the usual chains)."""
        params = self.params
        rows = min(data.shape[0], 2)
        limbs = np.array(data[:rows], dtype=np.uint64)  # a copy: the inverse NTT runs in place
        params.context.intt(limbs, list(range(rows)))
        q0 = params.moduli[0]
        x0 = limbs[0].astype(np.int64)
        x0 = np.where(x0 > (q0 - 1) // 2, x0 - np.int64(q0), x0)  # centred digit
        if rows == 1:
            return x0.astype(np.float64)
        # balanced mixed radix: value = x0 + q0 y1 with y1 = (x1 - x0) q0^-1 mod q1, centred
        q1 = params.moduli[1]
        x1 = limbs[1].astype(np.int64)  # q1 < 2^61: int64 differences cannot overflow
        diff = (x1 - np.mod(x0, np.int64(q1))) % np.int64(q1)
        inv = pow(q0, -1, q1)
        y1 = np.ascontiguousarray(diff.astype(np.uint64)[None, :])
        y1 = params.context.mul_scalar(y1, np.array([inv], dtype=np.uint64), [1])[0].astype(np.int64)
        y1 = np.where(y1 > (q1 - 1) // 2, y1 - np.int64(q1), y1)
        return x0.astype(np.float64) + float(q0) * y1.astype(np.float64)
