"""One party's feature matrix: checked as float64 CSR, then encoded as fixed-point integers.

Unlike :func:`shaper.crypto.encoding.as_csr`, which keeps exact integers for HE plaintext
matrices, :func:`features_csr` takes user data of any numeric type and refuses NaN and infinity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...errors import ConfigError


def features_csr(X: Any) -> sp.csr_matrix:
    """Features (2-D array or sparse matrix) as a float64 CSR matrix; ConfigError on NaN/infinity."""
    if sp.issparse(X):
        out = sp.csr_matrix(X, dtype=np.float64)
    else:
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim != 2:
            raise ConfigError(f"features must be a 2-D array or sparse matrix, got shape {arr.shape}")
        out = sp.csr_matrix(arr)
    if out.nnz and not np.isfinite(out.data).all():
        raise ConfigError("features contain NaN or infinity")
    return out


def with_intercept_column(csr: sp.csr_matrix) -> sp.csr_matrix:
    """The matrix with a column of ones appended (the intercept's feature, at the guest)."""
    return sp.hstack([csr, sp.csr_matrix(np.ones((csr.shape[0], 1)))], format="csr")


class ColumnScaler:
    """One party's own standardisation of its columns (``standardize="auto"``).

    Columns that hold only 0 and 1 are kept as they are (the preconditioner of :mod:`.stability`
    scales their steps). In a dense matrix every other column is centred and divided by its
    standard deviation over the training rows; a constant column becomes zero (its weight stays
    0). A sparse matrix is never centred (that would make it dense): its other columns are
    divided by their root mean square. The statistics stay with the party; the weights it opens
    are mapped back to its original units.
    """

    def __init__(self, mean: np.ndarray, scale: np.ndarray) -> None:
        self.mean, self.scale = mean, scale

    @classmethod
    def fit(cls, X: Any) -> "ColumnScaler":
        csr = features_csr(X)
        rows, cols = csr.shape
        nonbinary = np.zeros(cols, dtype=bool)
        nonbinary[np.unique(csr.indices[csr.data != 1])] = True
        if sp.issparse(X):
            mean_square = np.asarray(csr.multiply(csr).sum(axis=0)).ravel() / max(rows, 1)
            spread, mean = np.sqrt(mean_square), np.zeros(cols)
        else:
            arr = csr.toarray()
            mean = arr.mean(axis=0) if rows else np.zeros(cols)
            spread = arr.std(axis=0) if rows else np.ones(cols)
        mean = np.where(nonbinary, mean, 0.0)
        scale = np.where(nonbinary, np.where(spread > 0, spread, np.inf), 1.0)
        return cls(mean, scale)

    def transform(self, X: Any) -> sp.csr_matrix:
        csr = features_csr(X)
        if csr.shape[1] != self.mean.size:
            raise ConfigError(f"expected {self.mean.size} feature columns (as in training), got {csr.shape[1]}")
        if not self.mean.any():  # scaling only: sparse stays sparse
            return (csr @ sp.diags(1.0 / self.scale)).tocsr()
        return sp.csr_matrix((csr.toarray() - self.mean) / self.scale)

    def to_original(self, coef: np.ndarray) -> tuple[np.ndarray, float]:
        """(weights in the original units, the constant they add): w.x_scaled = w'.x + c."""
        original = coef / self.scale
        return original, float(-np.dot(original, self.mean))


class Features:
    """One party's features as integers X_int = round(X * 2^fx), with its scales.

    ``fx`` None picks 0 for integer-valued data and 10 otherwise; ``row_l1`` is the largest row
    L1 norm of X_int, which bounds |X W| for the HE-to-shares conversion. With ``training``, a
    column whose every value rounds to 0 at that scale is refused (its data would be lost)."""

    def __init__(self, X: Any, fx: int | None, intercept: bool, *, training: bool = False) -> None:
        csr = features_csr(X)
        if intercept:
            csr = with_intercept_column(csr)
        if fx is None:
            fx = 0 if (csr.nnz == 0 or np.all(csr.data == np.round(csr.data))) else 10
        self.fx = fx
        scaled = np.rint(csr.data * (1 << fx))
        if scaled.size and np.abs(scaled).max() >= 2**62:
            raise ConfigError(f"features too large for 2^{fx} scaling")
        vanished = np.setdiff1d(np.unique(csr.indices[csr.data != 0]), np.unique(csr.indices[scaled != 0]))
        if training and vanished.size:
            j = int(vanished[0])
            top = float(np.abs(csr.data[csr.indices == j]).max())
            raise ConfigError(
                f"feature column {j}: values up to {top:.3g} vanish at the fixed-point scale 2^-{fx}; keep "
                "standardize='auto' (the default) or raise feature_frac_bits")
        self.X = sp.csr_matrix((scaled.astype(np.int64), csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)
        self.X.eliminate_zeros()
        abs_rows = np.abs(self.X).sum(axis=1)
        self.row_l1 = int(abs_rows.max()) if self.X.shape[0] else 0

    def rows(self, idx: np.ndarray) -> sp.csr_matrix:
        return self.X[idx]
