"""A step size that is safe by construction, and the rule that stops a diverging run.

**Curvature.** With the linear sigmoid 0.5 + s z (s = 2^-slope) the training objective is a
quadratic whose Hessian is s X^T X / n, so gradient descent converges exactly when
eta * s * lambda_max(X^T X / n) < 2 and diverges when it is larger. Each party computes, on its
own columns only, the largest eigenvalue lambda_i of its preconditioned Gram matrix
D^1/2 X_i^T X_i D^1/2 / n and sends that one number to the peer. The two blocks bound the whole:
max(lambda_h, lambda_g) <= lambda_max <= lambda_h + lambda_g (the diagonal blocks of a Gram
matrix are its principal submatrices; the upper bound is Cauchy-Schwarz). So

* ``learning_rate="auto"`` takes eta = 1 / (s (lambda_h + lambda_g)): at most half the largest
  stable step, which leaves room for the noise of mini-batches;
* a given learning rate with eta * s * max(lambda_h, lambda_g) >= 2 diverges for certain and is
  refused before training, with the automatic value in the message.

What a party learns from the other's lambda: the largest variance of one linear combination of
the peer's (scaled) columns, a single scale statistic. It says nothing about any row, label or
weight.

**Preconditioner.** Each party scales the step of its column j by D_j = 1 / max(q_j, 1/batch),
where q_j is the column's mean square (computed locally, never sent; rounded to a power of two,
at least 2^-8). This is
gradient descent on columns scaled to unit mean square, without touching the data: sparse 0/1
features stay 0/1 (ciphertext products, no exponentiations) while rare one-hot columns learn as
fast as frequent ones. For standardised dense data D = 1. The cap 1/batch keeps a column that
appears in less than one row per batch from taking a step larger than a frequent column's.

**Divergence.** Each epoch the two parties open one number: the mean squared error of the linear
sigmoid on a sample of the epoch's training rows (up to 256 per batch), the quantity SGD is
minimising. The zero model scores exactly 0.25. The run has diverged when an epoch scores above
1.1 x 0.25 (worse than all-zero weights by a margin sampling noise does not reach), or more than twice the best earlier epoch. Under ``learning_rate="auto"`` training
then restarts from zero weights with half the step (at most three times); with a learning rate
the user chose it stops with :class:`DivergenceError` naming a rate that suits the data. A value
that leaves its fixed-point or packing range during a step (weights beyond 2^weight_bits)
raises the same error. No model of a diverged run is ever returned. A run whose last epoch
scores within 0.1 % of the zero model (a learning rate far too small, or unscaled columns with
``standardize=False``) finishes with a RuntimeWarning and a ``warning`` progress event.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...errors import DivergenceError

PRECOND_BITS = 8  # D_j is applied as an integer at scale 2^PRECOND_BITS
LOSS_ROWS = 256  # rows per batch whose error enters the epoch's monitored loss
ZERO_MODEL_LOSS = 0.25  # mean of (0.5 - y)^2: the loss of the all-zero weights
DIVERGED_LOSS = 1.1 * ZERO_MODEL_LOSS
NO_PROGRESS_LOSS = 0.999 * ZERO_MODEL_LOSS  # a last epoch above this learned (almost) nothing: warn
RISE_FACTOR = 2.0
BACKOFFS = 3


def preconditioner(X: sp.csr_matrix, batch_size: int) -> np.ndarray:
    """D_j = 1 / max(mean square of column j, 1 / batch_size), rounded to a power of two (within
    a factor sqrt 2) and at least 2^-PRECOND_BITS (0 for an all-zero column). Few distinct values
    let a step scale the batch's m errors once per value instead of every touched column. ``X`` in real units. (A column so large
    that D_j rounds up to one quantum gets a larger step than it should; the curvature, computed
    with the same D, lowers the learning rate to match, so training stays stable.)"""
    n = max(X.shape[0], 1)
    q = np.asarray(X.multiply(X).sum(axis=0)).ravel() / n
    ideal = 2.0 ** PRECOND_BITS / np.maximum(q, 1.0 / batch_size)
    d = np.exp2(np.maximum(0.0, np.rint(np.log2(ideal))))  # a power of two, at least one quantum
    d[q == 0] = 0
    return d / 2.0 ** PRECOND_BITS


def curvature(X: sp.csr_matrix, d: np.ndarray) -> float:
    """lambda_max(D^1/2 X^T X D^1/2 / n), slightly rounded up (``X`` in real units)."""
    n, cols = X.shape
    if n == 0 or cols == 0 or X.nnz == 0:
        return 0.0
    scaled = (X @ sp.diags(np.sqrt(d))).tocsr()
    if cols <= 1000:
        gram = (scaled.T @ scaled).toarray() / n
        return float(np.linalg.eigvalsh(gram)[-1]) * 1.001
    from scipy.sparse.linalg import LinearOperator, eigsh

    op = LinearOperator((cols, cols), matvec=lambda v: scaled.T @ (scaled @ v) / n, dtype=np.float64)
    return float(eigsh(op, k=1, which="LA", tol=1e-4, v0=np.ones(cols))[0][0]) * 1.01


def auto_rate(slope_bits: int, lam_mine: float, lam_peer: float) -> float:
    """The automatic step: 1 / (s (lambda_h + lambda_g))."""
    total = lam_mine + lam_peer
    if total <= 0:
        raise DivergenceError("the training features are all zero: there is nothing to learn")
    return 2.0 ** slope_bits / total


def check_rate(learning_rate: float, slope_bits: int, lam_mine: float, lam_peer: float, auto: float) -> None:
    """Refuse a learning rate that diverges for certain on this data."""
    limit = 2.0 * 2.0 ** slope_bits / max(lam_mine, lam_peer)
    if learning_rate >= limit:
        raise DivergenceError(
            f"learning_rate={learning_rate:g} makes training diverge on this data: steps must stay below "
            f"{limit:.3g} (2 / (sigmoid slope x largest curvature of one party's features)); use "
            f"learning_rate='auto' ({auto:.3g} here) or a value at most {auto:.3g}")


def divergence(loss: float, earlier: list[float]) -> str | None:
    """Why an epoch with monitored loss ``loss`` means the run diverged, or None."""
    if not np.isfinite(loss) or loss > DIVERGED_LOSS:
        return (f"the training loss of the linear sigmoid rose to {loss:.4g}, above 1.1 x {ZERO_MODEL_LOSS} "
                "(the loss of all-zero weights)")
    best = min(earlier, default=None)
    if best is not None and loss > RISE_FACTOR * best:
        return f"the training loss rose to {loss:.4g}, more than {RISE_FACTOR:g} x its best so far ({best:.4g})"
    return None


def suggestion(learning_rate: float, auto: float) -> str:
    return (f"learning_rate={learning_rate:g} is too large for this data; use learning_rate='auto' "
            f"({auto:.3g} here) or a smaller value")
