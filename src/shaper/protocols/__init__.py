"""Multi-party protocols: where cryptography (``crypto``) and communication (``net``) meet.

Two-party hybrid (additive sharing over Z_2^64 + Paillier/OU, SHAPER): :class:`Hybrid2PC`
(share, reveal, Beaver multiplication, H2S/S2H, TriGen, secure sparse mat-vec), with the
plaintext oracle :class:`Reference2PC`. Security: semi-honest, two parties, no third party.
"""

from .hybrid import Hybrid2PC
from .reference import Reference2PC
from .shares import IntegerShares, SharedArray
from .triples import TripleStore, TriplesExhausted

__all__ = ["Hybrid2PC", "IntegerShares", "Reference2PC", "SharedArray", "TripleStore", "TriplesExhausted"]
