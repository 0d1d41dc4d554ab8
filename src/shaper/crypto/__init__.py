"""Local cryptography with no I/O: additively homomorphic encryption (Paillier, OU), encodings,
packing, serialisation and the CSPRNG.

Entry points: :func:`shaper.crypto.paillier.keygen`, :func:`shaper.crypto.ou.keygen`,
:class:`shaper.crypto.ahe.EncryptedArray`, :func:`shaper.crypto.packing.pack`.
"""

from . import ahe, encoding, ou, packing, paillier, prg, serialization
from .ahe import EncryptedArray, concatenate, matvec, vecmat
from .packing import PackedArray, pack, unpack

__all__ = [
    "ahe",
    "encoding",
    "ou",
    "packing",
    "paillier",
    "prg",
    "serialization",
    "EncryptedArray",
    "PackedArray",
    "concatenate",
    "matvec",
    "vecmat",
    "pack",
    "unpack",
]
