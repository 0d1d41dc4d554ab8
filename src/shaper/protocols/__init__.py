"""Multi-party protocols: where cryptography (``crypto``) and communication (``net``) meet.

One engine interface (:mod:`shaper.protocols.api`: share, reveal, add, mul, matmul, truncate,
conversions, over the domains Z_2^64, Z_q and Z_2) with shared arrays that forward their
operators to it, implemented by:

* :class:`Reference` — the plaintext oracle and debug mode (no security);
* :class:`AdditiveEngine` — additive sharing among any n >= 2 parties over Z_2^64, odd moduli
  and bits, Beaver products with pluggable triple sources (:mod:`.triples`: OT extension,
  :mod:`.ot`), conversions and secure sampling (:mod:`.additive`; GMPFHE's MPC). Semi-honest,
  dishonest majority;
* :class:`Hybrid2PC` — that engine for two parties plus Paillier/OU (SHAPER): TriGen, H2S/S2H,
  secure sparse mat-vec (:mod:`.hybrid`). Semi-honest, two parties, no third party;
* :class:`Replicated3PC` — Araki et al. three-party replicated sharing, Z_2^64 fixed point and
  bit-sliced Bristol circuits (:mod:`.replicated`, :func:`evaluate`). Semi-honest, honest majority.

Protocols built on them: private set intersection (:mod:`.psi`), federated aggregation
(:mod:`.fl`) and threshold CKKS (:mod:`.threshold_ckks`).
"""

from .additive import AdditiveEngine, IntegerShares, ModShares, SharedArray, XorShares
from .api import Engine, Shared, UnsupportedConversion
from .hybrid import Hybrid2PC, TriGen
from .reference import Reference
from .replicated import BitShares, Replicated3PC, RingShares, evaluate
from .triples import InsecureDealer, OtTriples, StoreOnly, TripleSource, TripleStore, TriplesExhausted

__all__ = ["AdditiveEngine", "BitShares", "Engine", "Hybrid2PC", "InsecureDealer", "IntegerShares", "ModShares",
           "OtTriples", "Reference", "Replicated3PC", "RingShares", "Shared", "SharedArray", "StoreOnly", "TriGen",
           "TripleSource", "TripleStore", "TriplesExhausted", "UnsupportedConversion", "XorShares", "evaluate"]
