"""What both parties and the plaintext oracle must agree on exactly: the row order of each epoch,
the quantised step eta/m, and the per-epoch random streams.

Everything here is derived from seeds the parties share (or keep in a checkpoint), so a resumed
run replays the same batches and masks as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from ...crypto.prg import Prg

ETA_BITS = 12  # the step eta/m is applied as 2^-k times an integer of at most ETA_BITS bits


def epoch_prg(seed: bytes, label: str, epoch: int) -> Prg:
    """The stream for one purpose (``label``) in one epoch, from a 32-byte seed."""
    return Prg(seed=hashlib.sha256(seed + label.encode() + epoch.to_bytes(8, "little")).digest())


def epoch_order(shuffle_seed: bytes, epoch: int, rows: int) -> np.ndarray:
    """The row order of an epoch (both parties derive it from their agreed shuffle seed)."""
    return np.argsort(epoch_prg(shuffle_seed, "shuffle", epoch).uint64(rows), kind="stable")


def eta_factor(learning_rate: float, batch_size: int, batch: int, step: int = 0, slope_bits: int = 0) -> float:
    """The step eta_t/batch of SGD step ``step`` (counted from 0 over the whole run, across
    epochs) exactly as the protocols apply it: an integer at scale 2^(k + ETA_BITS), k fixed by
    the base rate. The rate decays as eta_t = eta / (1 + eta s t) with s = 2^-slope_bits the
    sigmoid's slope (:mod:`.stability`): the features are preconditioned to unit curvature, so
    this is Robbins-Monro's 1 / (s (t + t0)) schedule started at the safe step; after t steps a
    weight is roughly the average of its last t gradients, which damps the noise of columns that
    appear in few rows per batch."""
    k = math.floor(-math.log2(learning_rate / batch_size))
    rate = learning_rate / (1.0 + learning_rate * 2.0 ** -slope_bits * step)
    return max(1, round(rate / batch * 2 ** (k + ETA_BITS))) / 2 ** (k + ETA_BITS)
