"""The order of the rows in each epoch, and the other per-epoch streams, derived from a seed the
parties agreed on: AES-CTR (:class:`shaper.crypto.prg.Prg`) keyed by SHA-256 of the seed, the
purpose and the epoch, never numpy's generator. Both vertical jobs (:mod:`shaper.ml.logreg`,
:mod:`shaper.ml.fl.hetero`) and their plaintext oracles shuffle with :func:`epoch_order`, and a
resumed run replays the batches of an uninterrupted one because the seed is kept in its
checkpoint.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..crypto.prg import Prg

__all__ = ["epoch_order", "epoch_prg"]


def _seed_bytes(seed: bytes | int) -> bytes:
    return seed if isinstance(seed, bytes) else str(int(seed)).encode()


def epoch_prg(seed: bytes | int, label: str, epoch: int) -> Prg:
    """The stream for one purpose (``label``) in one epoch, from a seed (bytes, or an integer)."""
    return Prg(seed=hashlib.sha256(_seed_bytes(seed) + label.encode() + epoch.to_bytes(8, "little")).digest())


def epoch_order(seed: bytes | int, epoch: int, rows: int) -> np.ndarray:
    """The row order of an epoch: a permutation of ``range(rows)`` every party derives from the
    agreed ``seed``."""
    return np.argsort(epoch_prg(seed, "shuffle", epoch).uint64(rows), kind="stable")
