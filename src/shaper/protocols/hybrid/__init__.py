"""Two-party hybrid protocols (SHAPER): the additive engine over Z_2^64 for two parties plus the
Paillier/OU boundary. :class:`Hybrid2PC` (the engine), the HE boundary (:mod:`.conversions`:
H2S, S2H), Beaver triples from Paillier (:mod:`.trigen`: :class:`TriGen`) and the secure sparse
matrix-vector product (:mod:`.sparse`). Security: semi-honest, two parties."""

from .conversions import h2s, s2h
from .engine import Hybrid2PC
from .sparse import sparse_matvec, sparse_matvec_encrypted
from .trigen import TriGen, trigen, trigen_matrix

__all__ = ["Hybrid2PC", "TriGen", "h2s", "s2h", "sparse_matvec", "sparse_matvec_encrypted", "trigen", "trigen_matrix"]
