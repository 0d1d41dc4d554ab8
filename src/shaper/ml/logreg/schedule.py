"""What both parties and the plaintext oracle must agree on exactly besides the row order of each
epoch and the per-epoch random streams (:mod:`shaper.ml.shuffle`, shared with the coordinated
vertical job): the quantised step eta/m.

Everything here is derived from seeds the parties share (or keep in a checkpoint), so a resumed
run replays the same batches and masks as an uninterrupted one.
"""

from __future__ import annotations

import math

__all__ = ["ETA_BITS", "eta_factor"]

ETA_BITS = 12  # the step eta/m is applied as 2^-k times an integer of at most ETA_BITS bits


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
