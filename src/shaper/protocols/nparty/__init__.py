"""Moved: the n-party engine is the additive engine, :mod:`shaper.protocols.additive`
(``AdditiveEngine``; ``ModShares`` and ``XorShares`` are in :mod:`shaper.protocols.api`).
This name stays for one release."""

from ..additive import AdditiveEngine, ModShares, XorShares

AdditiveNPC = AdditiveEngine

__all__ = ["AdditiveNPC", "ModShares", "XorShares"]
