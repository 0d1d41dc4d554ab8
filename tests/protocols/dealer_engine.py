"""An n-party engine for tests without the native extension: dealer triples
(:class:`~shaper.protocols.triples.InsecureDealer`) and dealer *sampling* (INSECURE: every party
knows every value).

The engine's own sampling (ternary, discrete Gaussian) and its Z_2 -> Z_q conversions (edaBits)
run on correlated OT, which exists only in the native extension, whatever the triple source; so
does nothing here replace a test of the MPC sampler (``tests/protocols/test_nparty_sampling.py``,
native only). What it lets run everywhere is the protocol *above* the sampler: threshold CKKS
key generation and decryption draw their secret, errors and smudging from these methods, with
the same laws as the MPC sampler (uniform ternary; the exact discrete Gaussian of
``gaussian_law``; r uniform below 2^bits), and everything else (square pairs, openings, consent)
runs as in production.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import numpy as np

from shaper.protocols.nparty import AdditiveNPC, ModShares, XorShares
from shaper.protocols.additive.sampling import gaussian_law
from shaper.protocols.triples import InsecureDealer

NATIVE = importlib.util.find_spec("shaper._native") is not None


class DealerSampling(AdditiveNPC):
    """:class:`AdditiveNPC` with dealer triples whose ``ternary``, ``gaussian`` and ``edabits``
    are dealt from a stream all parties share (tests only)."""

    def __init__(self, session: Any) -> None:
        super().__init__(session, triple_source=InsecureDealer(), frac_bits=0)
        self._dealer = None

    def _stream(self) -> Any:
        if self._dealer is None:
            warnings.warn("dealer sampling: every party knows every sample; use for tests only", stacklevel=3)
            self._dealer = self.session.shared_prg(list(range(self.parties)), tag="dealer-sampling")
        return self._dealer

    def _deal_mod(self, values: np.ndarray, moduli: tuple[int, ...]) -> ModShares:
        """This party's additive shares of signed integers ``values`` (shape S) in every modulus:
        parties 0..n-2 draw uniform shares, the last takes the rest. (S + (L,))"""
        prg, qs = self._stream(), np.array(moduli, dtype=np.uint64)
        v = np.asarray(values, dtype=np.int64)
        residues = np.stack([np.mod(v, np.int64(q)).astype(np.uint64) for q in moduli], axis=-1)
        shares = [np.stack([prg.below(q, v.shape) for q in moduli], axis=-1) for _ in range(self.parties - 1)]
        if self.me < self.parties - 1:
            mine = shares[self.me]
        else:
            mine = residues
            for s in shares:
                mine = (mine + (qs - s)) % qs
        return ModShares(self, np.ascontiguousarray(mine), moduli)

    def ternary(self, shape: Any, moduli: Any) -> ModShares:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        values = self._stream().below(3, shape).astype(np.int64) - 1
        return self._deal_mod(values, tuple(int(q) for q in moduli))

    def gaussian(self, count: int, moduli: Any, **kw: Any) -> ModShares:
        prg = self._stream()
        law = gaussian_law(**kw)  # P(|X| = k), k = 0 .. tail
        cdf = np.cumsum(law) / law.sum()
        u = prg.below(1 << 53, count).astype(np.float64) / float(1 << 53)
        magnitude = np.minimum(np.searchsorted(cdf, u, side="right"), len(law) - 1).astype(np.int64)
        sign = prg.below(2, count).astype(np.int64) * 2 - 1
        return self._deal_mod(magnitude * sign, tuple(int(q) for q in moduli))

    def edabits(self, count: int, bits: int, moduli: Any) -> tuple[XorShares, ModShares]:
        prg = self._stream()
        r = prg.below(1 << bits, count).astype(np.uint64)
        words = (count + 63) // 64
        planes = np.zeros((bits, words * 64), dtype=np.uint8)
        planes[:, :count] = ((r[None, :] >> np.arange(bits, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(np.uint8)
        packed = np.packbits(planes, axis=1, bitorder="little").view("<u8").astype(np.uint64)
        masks = [prg.uint64((bits, words)) for _ in range(self.parties - 1)]
        if self.me < self.parties - 1:
            xor = masks[self.me]
        else:
            xor = packed
            for m in masks:
                xor = xor ^ m
        return XorShares(self, xor, count), self._deal_mod(r.astype(np.int64), tuple(int(q) for q in moduli))


def engine_for_tests(session: Any) -> Any:
    """The production engine (OT-extension triples and MPC sampling) where the extension is
    built; :class:`DealerSampling` where it is not."""
    if NATIVE:
        from shaper.jobs.fhe import engine_for

        return engine_for(session)
    return DealerSampling(session)
