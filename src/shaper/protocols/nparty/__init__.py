"""n-party additive secret sharing (dishonest majority, passive): the engine of GMPFHE's MPC.

This release holds the online engine over Z_2^64 (:class:`AdditiveNPC`) with its preprocessing
from a pluggable triple source; the OT-based source, other moduli, sampling and conversions
(issue 16) are not built yet.
"""

from .engine import AdditiveNPC

__all__ = ["AdditiveNPC"]
