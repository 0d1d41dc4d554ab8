"""Three-party replicated secret sharing (Araki et al.): :class:`Replicated3PC` (the engine:
Z_2^64 fixed point through the engine interface, boolean bit-sliced circuits), its shares
(:class:`RingShares`, :class:`BitShares`), :func:`evaluate` and :func:`deal_bits`.
Security: semi-honest, honest majority (one corruption)."""

from .engine import Replicated3PC, deal_bits, evaluate
from .shares import BitShares, RingShares

__all__ = ["BitShares", "Replicated3PC", "RingShares", "deal_bits", "evaluate"]
