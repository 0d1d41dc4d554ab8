"""Multi-party protocols: where cryptography (``crypto``) and communication (``net``) meet.

One engine interface (:mod:`shaper.protocols.api`: share, reveal, add, mul, matmul, truncate,
conversions) with shared arrays that forward their operators to it, implemented by:

* :class:`Reference` — the plaintext oracle and debug mode (no security);
* :class:`Hybrid2PC` — two-party additive sharing over Z_2^64 + Paillier/OU (SHAPER): Beaver
  multiplication with pluggable triple sources (:mod:`.triples`), H2S/S2H, secure sparse
  mat-vec (:mod:`.hybrid`). Semi-honest, two parties, no third party;
* :class:`Replicated3PC` — Araki et al. three-party replicated sharing, Z_2^64 fixed point and
  bit-sliced Bristol circuits (:mod:`.replicated`, :func:`evaluate`). Semi-honest, honest majority.
"""

from .additive import IntegerShares, SharedArray
from .api import Engine, Shared, UnsupportedConversion
from .hybrid import Hybrid2PC
from .reference import Reference
from .replicated import BitShares, Replicated3PC, RingShares, evaluate
from .triples import InsecureDealer, OtTriples, StoreOnly, TriGen, TripleSource, TripleStore, TriplesExhausted

__all__ = ["BitShares", "Engine", "Hybrid2PC", "InsecureDealer", "IntegerShares", "OtTriples", "Reference", "Replicated3PC",
           "RingShares", "Shared", "SharedArray", "StoreOnly", "TriGen", "TripleSource", "TripleStore",
           "TriplesExhausted", "UnsupportedConversion", "evaluate"]
