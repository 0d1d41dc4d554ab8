"""The elliptic-curve family: Ristretto255 blinding keys and SHA-256 item digests, the batched
kernels behind ECDH private set intersection (:mod:`shaper.protocols.psi`).

* :func:`blinding_key`: a secret scalar k of Ristretto255 (64 bytes of ``os.urandom`` reduced
  mod the group order, or a saved one) whose ``hash_blind(data, offsets, order=None)`` hashes
  packed items into the group and returns ``k * H(x)`` (32 bytes each: SHA-512 of a domain tag
  and the item, then the two-Elligator map of RFC 9496) and whose ``blind(points)`` returns
  ``k * P`` for 32-byte encodings (``ValueError`` names the first invalid one). The native core
  (``native/src/psi.rs``, curve25519-dalek) only: there is no Python curve arithmetic, so
  without the extension it raises :class:`~shaper.errors.KernelError` saying how to build it.
* :func:`item_digests`: the first ``width`` bytes of SHA-256(prefix || item) for every packed
  item (the native core when built, else ``hashlib``; the two give the same bytes).
* :func:`item_sort`: the order that sorts packed items byte-wise (the native core; None without
  it, and the caller sorts with Arrow).

Items are packed as one uint8 array ``data`` and ``offsets`` (n + 1 uint64 positions): item i is
``data[offsets[i]:offsets[i + 1]]``, so millions of them are hashed without a Python object
each. Both run whatever ``SHAPER_NATIVE`` says: that setting picks the modular-arithmetic engine.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np

from ..errors import KernelError

try:  # the extension is optional: the digests have a hashlib path, the curve has none
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["available", "blinding_key", "item_digests", "item_sort"]


def available() -> bool:
    """True when the curve arithmetic (the native extension) is here."""
    return _native is not None


def blinding_key(saved: bytes | None = None) -> Any:
    """A fresh secret Ristretto255 blinding key, or the one ``saved`` holds (``key.to_bytes()``
    of an earlier key). Raises :class:`KernelError` where the native extension is not built."""
    if _native is None:
        raise KernelError("ECDH PSI needs shaper's native extension, which is not built here (pip install . "
                          "builds it with Rust and maturin)")
    return _native.RistrettoKey(os.urandom(64)) if saved is None else _native.RistrettoKey.from_bytes(saved)


def item_sort(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """The permutation of ``rows`` that sorts their packed items byte-wise (a shorter prefix
    first), from the native core; None where it is not built (the caller sorts another way)."""
    if _native is None or not hasattr(_native, "item_sort"):
        return None
    return _native.item_sort(data, offsets, np.ascontiguousarray(rows, dtype=np.int64))


def item_digests(prefix: bytes, data: np.ndarray, offsets: np.ndarray, width: int) -> bytes:
    """``width`` (<= 32) bytes of SHA-256(``prefix`` || item) per packed item, concatenated."""
    n = len(offsets) - 1
    if _native is None:
        return b"".join(hashlib.sha256(prefix + data[int(offsets[i]):int(offsets[i + 1])].tobytes()).digest()[:width]
                        for i in range(n))
    return _native.item_digests(prefix, data, offsets, width) if n else b""
