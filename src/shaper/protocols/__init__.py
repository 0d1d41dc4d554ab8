"""Multi-party protocols: where cryptography (``crypto``) and communication (``net``) meet.

Two-party hybrid (additive sharing over Z_2^64 + Paillier/OU, SHAPER): :class:`Hybrid2PC`
(share, reveal, Beaver multiplication, H2S/S2H, TriGen, secure sparse mat-vec), with the
plaintext oracle :class:`Reference2PC`. Security: semi-honest, two parties, no third party.

Three-party replicated sharing (Araki et al.): :class:`Replicated3PC` (boolean bit-sliced and
Z_2^64 arithmetic), Bristol Fashion circuits in :mod:`shaper.protocols.bristol`, and
:func:`evaluate` for any circuit on shared inputs. Security: semi-honest, honest majority.
"""

from .hybrid import Hybrid2PC
from .reference import Reference2PC
from .shares import IntegerShares, SharedArray
from .replicated import BitShares, Replicated3PC, RingShares, evaluate
from .triples import TripleStore, TriplesExhausted

__all__ = ["BitShares", "Hybrid2PC", "IntegerShares", "Reference2PC", "Replicated3PC", "RingShares", "SharedArray",
           "TripleStore", "TriplesExhausted", "evaluate"]
