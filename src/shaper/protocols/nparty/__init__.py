"""n-party additive secret sharing (dishonest majority, passive): the engine of GMPFHE's MPC.

:class:`AdditiveNPC` holds shares over Z_2^64 (the shared engine interface), odd prime moduli
and RNS bases (:class:`ModShares`) and Z_2 bit-sliced (:class:`XorShares`); it multiplies with
Beaver triples from a pluggable source (:class:`~shaper.protocols.triples.OtTriples`: OT
extension in the Rust core), converts between the domains and samples uniform, ternary and
discrete-Gaussian values. See ``docs/mpc.md``.
"""

from .domains import ModShares, XorShares
from .engine import AdditiveNPC

__all__ = ["AdditiveNPC", "ModShares", "XorShares"]
