"""Data for vertical (feature-partitioned) learning: reading, aligning, splitting, generating.

* :func:`read_table`: CSV or Parquet (via pandas; ``pip install 'shaper-ppml[data]'``) or LibSVM
  (via scikit-learn; the id is the ``qid:`` field when present, the line number otherwise), with
  an id column and an optional label column. Features come back as scipy CSR when sparse.
* :func:`check_aligned`: both parties confirm they hold the same ids in the same order by
  exchanging a SHA-256 digest of their id lists (no id is revealed); run PSI first otherwise.
* :func:`vertical_split`: split one table's columns between two parties (demos, tests).
* :func:`shaper_workload` / :func:`make_shaper_workload`: the SHAPER benchmark's data shape:
  one-hot style 0/1 features (each party's features grouped into fields, one active category per
  field and row, so density = fields / features), a planted logistic model, labels at the guest.
  Rows are generated in chunks so memory stays bounded by the CSR arrays themselves. Synthetic
  data uses numpy's seeded generator (public, reproducible data; never for secrets).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError


@dataclass
class Table:
    """One party's rows: ids, features (CSR or dense), optional labels, feature names."""

    ids: np.ndarray
    X: Any
    y: np.ndarray | None = None
    feature_names: list[str] | None = None

    @property
    def rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def features(self) -> int:
        return int(self.X.shape[1])


def read_table(path: str | Path, *, id_column: str = "id", label_column: str | None = None,
               format: str | None = None, sparse: bool | None = None) -> Table:
    """Read a party's data. ``format`` is guessed from the suffix (.csv, .parquet, .svm/.libsvm)."""
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt in ("svm", "libsvm", "svmlight"):
        return _read_libsvm(path, label_column is not None)
    if fmt not in ("csv", "parquet", "pq"):
        raise ConfigError(f"cannot read {path}: unknown format {fmt!r} (use csv, parquet or libsvm)")
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError("reading CSV/Parquet needs pandas: pip install 'shaper-ppml[data]'") from exc
    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist")
    frame = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    if id_column not in frame.columns:
        raise ConfigError(f"{path} has no id column {id_column!r} (columns: {list(frame.columns)[:10]})")
    ids = frame.pop(id_column).to_numpy()
    y = None
    if label_column is not None:
        if label_column not in frame.columns:
            raise ConfigError(f"{path} has no label column {label_column!r}")
        y = frame.pop(label_column).to_numpy()
        _check_labels(y, path)
    bad = [c for c in frame.columns if not np.issubdtype(frame[c].dtype, np.number)]
    if bad:
        raise ConfigError(f"{path}: non-numeric feature columns {bad[:5]} (encode them first)")
    values = frame.to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        raise ConfigError(f"{path}: missing values in the features (impute them first)")
    density = np.count_nonzero(values) / max(values.size, 1)
    X = sp.csr_matrix(values) if (sparse if sparse is not None else density < 0.1) else values
    return Table(ids, X, y, list(frame.columns))


def _read_libsvm(path: Path, with_labels: bool) -> Table:
    from sklearn.datasets import load_svmlight_file

    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist")
    text = path.read_text()
    has_qid = "qid:" in text.split("\n", 1)[0]
    loaded = load_svmlight_file(str(path), query_id=has_qid)
    X, y = loaded[0], loaded[1]
    ids = loaded[2] if has_qid else np.arange(X.shape[0])
    if with_labels:
        _check_labels(y, path)
    return Table(np.asarray(ids), X.tocsr(), y if with_labels else None, None)


def _check_labels(y: np.ndarray, where: Any) -> None:
    values = set(np.unique(y).tolist())
    if not values <= {0, 1, 0.0, 1.0, True, False}:
        raise ConfigError(f"{where}: labels must be 0/1, found {sorted(values)[:5]}")


def ids_digest(ids: np.ndarray) -> str:
    h = hashlib.sha256()
    for v in np.asarray(ids).tolist():
        h.update(str(v).encode() + b"\n")
    return h.hexdigest()


def check_aligned(session: Any, ids: np.ndarray, tag: str = "align") -> None:
    """Raise unless the peer holds the same ids in the same order (compares SHA-256 digests)."""
    mine = {"rows": int(len(ids)), "digest": ids_digest(ids)}
    peers = session.gather(tag) if session.broadcast(mine, tag) is None else {}
    for peer, theirs in peers.items():
        if theirs != mine:
            raise ConfigError(
                f"the rows are not aligned with party {peer!r} ({theirs.get('rows')} rows there, {mine['rows']} "
                "here, or a different id order): intersect and sort the ids first (private set intersection)")


def vertical_split(X: Any, y: np.ndarray, host_features: int) -> tuple[Any, tuple[Any, np.ndarray]]:
    """Columns [0, host_features) to the host, the rest and the labels to the guest."""
    if not 0 < host_features < X.shape[1]:
        raise ValueError(f"host_features must be in (0, {X.shape[1]}), got {host_features}")
    if sp.issparse(X):
        X = X.tocsc()
        return X[:, :host_features].tocsr(), (X[:, host_features:].tocsr(), np.asarray(y))
    return X[:, :host_features], (X[:, host_features:], np.asarray(y))


def shaper_workload(rows: int, *, host_features: int = 30_000, guest_features: int = 70_000,
                    density: float = 0.0002, weight_scale: float = 0.6, seed: int = 0,
                    chunk_rows: int = 50_000) -> Iterator[tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]]:
    """Yield (host X chunk, guest X chunk, labels chunk) for the SHAPER workload shape."""
    rng = np.random.default_rng(seed)
    fields_h = max(1, round(host_features * density))
    fields_g = max(1, round(guest_features * density))
    w_h = rng.normal(0.0, weight_scale, host_features)
    w_g = rng.normal(0.0, weight_scale, guest_features)
    bias = -0.5
    done = 0
    while done < rows:
        m = min(chunk_rows, rows - done)
        x_h = _one_hot_chunk(rng, m, host_features, fields_h)
        x_g = _one_hot_chunk(rng, m, guest_features, fields_g)
        logit = x_h @ w_h + x_g @ w_g + bias
        y = (rng.random(m) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
        yield x_h, x_g, y
        done += m


def _one_hot_chunk(rng: np.random.Generator, m: int, features: int, fields: int) -> sp.csr_matrix:
    width = features // fields
    offsets = np.arange(fields) * width
    last = features - width * (fields - 1)  # the last field takes the remainder
    sizes = np.full(fields, width)
    sizes[-1] = last
    cols = (rng.random((m, fields)) * sizes).astype(np.int64) + offsets
    indptr = np.arange(0, m * fields + 1, fields, dtype=np.int64)
    data = np.ones(m * fields, dtype=np.int8)
    return sp.csr_matrix((data, cols.ravel(), indptr), shape=(m, features))


def make_shaper_workload(rows: int, **options: Any) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """The whole workload as (host X, guest X, y), built chunk by chunk."""
    parts = list(shaper_workload(rows, **options))
    return (sp.vstack([p[0] for p in parts], format="csr"), sp.vstack([p[1] for p in parts], format="csr"),
            np.concatenate([p[2] for p in parts]))
