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


class Features:
    """One party's features as integers X_int = round(X * 2^fx), with its scales.

    ``fx`` None picks 0 for integer-valued data and 10 otherwise; ``row_l1`` is the largest row
    L1 norm of X_int, which bounds |X W| for the HE-to-shares conversion."""

    def __init__(self, X: Any, fx: int | None, intercept: bool) -> None:
        csr = features_csr(X)
        if intercept:
            csr = with_intercept_column(csr)
        if fx is None:
            fx = 0 if (csr.nnz == 0 or np.all(csr.data == np.round(csr.data))) else 10
        self.fx = fx
        scaled = np.rint(csr.data * (1 << fx))
        if scaled.size and np.abs(scaled).max() >= 2**62:
            raise ConfigError(f"features too large for 2^{fx} scaling")
        self.X = sp.csr_matrix((scaled.astype(np.int64), csr.indices, csr.indptr), shape=csr.shape)
        self.X.eliminate_zeros()
        abs_rows = np.abs(self.X).sum(axis=1)
        self.row_l1 = int(abs_rows.max()) if self.X.shape[0] else 0

    def rows(self, idx: np.ndarray) -> sp.csr_matrix:
        return self.X[idx]
