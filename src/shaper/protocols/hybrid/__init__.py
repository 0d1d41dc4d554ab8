"""Two-party hybrid protocols (SHAPER): additive sharing over Z_2^64 mixed with Paillier/OU.
:class:`Hybrid2PC` (the engine), the HE boundary (:mod:`.conversions`: H2S, S2H) and the secure
sparse matrix-vector product (:mod:`.sparse`). Security: semi-honest, two parties."""

from .conversions import h2s, s2h
from .engine import Hybrid2PC
from .sparse import sparse_matvec, sparse_matvec_encrypted

__all__ = ["Hybrid2PC", "h2s", "s2h", "sparse_matvec", "sparse_matvec_encrypted"]
