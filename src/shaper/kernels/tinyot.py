"""The local steps of the active engine's AND triples (``native/src/bucket.rs``), with numpy as
the fallback: the leaky triples' rows assembled from the OT extension's rows, and WRK17's
bucketing, each bucket's rows gathered once and combined (the protocol is
:mod:`shaper.protocols.active.bits`).

``leaky`` (L, 3, W) uint64: x, y and z rows of each leaky triple, a row being the party's bit,
its MACs and its keys. ``idx`` (N, B): the joint permutation, one bucket per row.
"""

from __future__ import annotations

import numpy as np

try:  # optional: numpy does the same where the extension is not built
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["close", "open_", "rows_into"]


def _native_ok() -> bool:
    return _native is not None and hasattr(_native, "bucket_open")


def open_(leaky: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(d (N (B - 1), W) = y^1 XOR y^k, a (N, W) = XOR of the x^k, b (N, W) = y^1)."""
    n, b = idx.shape
    w = leaky.shape[-1]
    if _native_ok():
        d, a, y1 = _native.bucket_open(np.ascontiguousarray(leaky, np.uint64).reshape(-1),
                                       np.ascontiguousarray(idx, np.uint64).reshape(-1), b, w)
        return d.reshape(n * (b - 1), w), a.reshape(n, w), y1.reshape(n, w)
    grouped = np.take(leaky, idx, axis=0)
    x, y = grouped[:, :, 0], grouped[:, :, 1]
    d = (y[:, :1] ^ y[:, 1:]).reshape(n * (b - 1), w)
    return d, np.bitwise_xor.reduce(x, axis=1), np.ascontiguousarray(y[:, 0])


def close(leaky: np.ndarray, idx: np.ndarray, dbits: np.ndarray) -> np.ndarray:
    """c (N, W) = z^1 XOR the z^k XOR d_k x^k (k >= 2), from the opened bits d (N, B - 1)."""
    n, b = idx.shape
    w = leaky.shape[-1]
    if _native_ok():
        c = _native.bucket_close(np.ascontiguousarray(leaky, np.uint64).reshape(-1),
                                 np.ascontiguousarray(idx, np.uint64).reshape(-1),
                                 np.ascontiguousarray(dbits, np.uint8).reshape(-1), b, w)
        return c.reshape(n, w)
    grouped = np.take(leaky, idx, axis=0)
    x, z = grouped[:, :, 0], grouped[:, :, 2]
    mask = (-(np.asarray(dbits).reshape(n, b - 1).astype(np.uint64)))[:, :, None]
    return z[:, 0] ^ np.bitwise_xor.reduce(z[:, 1:] ^ (x[:, 1:] & mask), axis=1)


def rows_into(out: np.ndarray, part: int, bits: np.ndarray, macs: list[np.ndarray], keys: list[np.ndarray],
              lo: int, delta: np.uint64) -> np.ndarray:
    """Write part ``part`` (0, 1, 2: x, y, z) of ``out`` (n, 3, W): [bit, the low 64 bits of each
    peer's MAC row, of each peer's key row] from rows ``lo`` on; return each row's share of
    bit Delta over those 64 bits (bit Delta XOR every MAC XOR every key)."""
    n = len(bits)
    if _native_ok() and out.flags.c_contiguous:
        return _native.abit_rows_into(out.reshape(-1), part, np.ascontiguousarray(bits, np.uint8),
                                      [np.ascontiguousarray(m) for m in macs], [np.ascontiguousarray(k) for k in keys],
                                      lo, int(delta))
    peers = len(macs)
    b = np.asarray(bits, dtype=np.uint64)
    out[:, part, 0] = b
    acc = (-b) & np.uint64(delta)
    for k in range(peers):
        m = np.ascontiguousarray(macs[k][lo:lo + n]).view(np.uint64)[:, 0]
        key = np.ascontiguousarray(keys[k][lo:lo + n]).view(np.uint64)[:, 0]
        out[:, part, 1 + k] = m
        out[:, part, 1 + peers + k] = key
        acc = acc ^ m ^ key
    return acc
