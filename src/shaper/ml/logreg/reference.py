"""The plaintext oracle: the protocols' mini-batch training in floating point.

It uses the same batch order, the same linear sigmoid, the same quantised step and the same
preconditioners as the secure layouts, so their weights must match it to within the fixed-point error (the tests and
``benchmarks/lr_shaper.py`` compare against it). No party runs it in a real deployment: it needs
both feature blocks and the labels in one place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .features import features_csr, with_intercept_column
from .params import SIGMOIDS
from ..shuffle import epoch_order
from .schedule import eta_factor


def reference_sgd(X_host: Any, X_guest: Any, y: Any, *, shuffle_seed: bytes, epochs: int = 10,
                  batch_size: int = 64, learning_rate: float = 0.5, l2: float = 0.0, sigmoid: str = "taylor1",
                  fit_intercept: bool = True, start: tuple | None = None, precond: tuple | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The same mini-batch training in plain floating point: the oracle for the protocols.

    Same batch order, same linear sigmoid, same quantised step; ``learning_rate`` is the rate in
    force (a trained model's ``learning_rate_``) and ``precond`` its ``(D_host, D_guest)``
    (``precond_`` of each party; None: no preconditioning). The features are used as given
    (standardise them as the job did). Returns (host weights, guest weights with the intercept
    last)."""
    Xh, Xg = features_csr(X_host), features_csr(X_guest)
    if fit_intercept:
        Xg = with_intercept_column(Xg)
    y = np.asarray(y, dtype=np.float64)
    wh = np.zeros(Xh.shape[1]) if start is None else start[0].copy()
    wg = np.zeros(Xg.shape[1]) if start is None else start[1].copy()
    slope = 2.0 ** -SIGMOIDS[sigmoid]
    n = Xh.shape[0]
    dh, dg = (np.ones(Xh.shape[1]), np.ones(Xg.shape[1])) if precond is None else precond
    steps = -(-n // batch_size)  # SGD steps per epoch
    for epoch in range(epochs):
        order = epoch_order(shuffle_seed, epoch, n)
        for it, i in enumerate(range(0, n, batch_size)):
            idx = np.sort(order[i:i + batch_size])
            z = Xh[idx] @ wh + Xg[idx] @ wg
            err = 0.5 + slope * z - y[idx]
            eta = eta_factor(learning_rate, batch_size, len(idx), epoch * steps + it, SIGMOIDS[sigmoid])
            decay = 1.0 - learning_rate * l2
            wh = decay * wh - eta * dh * (Xh[idx].T @ err)
            wg = decay * wg - eta * dg * (Xg[idx].T @ err)
    return wh, wg
