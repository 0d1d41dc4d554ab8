"""Data for vertical (feature-partitioned) learning: reading, aligning, splitting, generating.

* :func:`read_table`: CSV (the standard library's ``csv`` module, or pandas' faster parser when
  pandas is installed; both give the same table), Parquet (needs pandas and pyarrow:
  ``pip install 'shaper-ppml[data]'``) or LibSVM (via scikit-learn; the id is the ``qid:`` field
  when present, the line number otherwise), with an id column and an optional label column.
  Columns are typed as pandas types them (integers, then floats, then text); every feature
  column must be numeric. Features come back as scipy CSR when sparse.
* :func:`check_aligned`: both parties confirm they hold the same ids in the same order by
  exchanging a SHA-256 digest of their id lists (no id is revealed); otherwise line them up by
  PSI first (:func:`shaper.ml.alignment.align`, ``--align auto``, ``shaper psi``).
* :func:`vertical_split`: split one table's columns between two parties (demos, tests).
* :func:`shaper_workload` / :func:`make_shaper_workload`: the SHAPER benchmark's data shape:
  one-hot style 0/1 features (each party's features grouped into fields, one active category per
  field and row, so density = fields / features), a planted logistic model, labels at the guest.
  Rows are generated in chunks so memory stays bounded by the CSR arrays themselves. Synthetic
  data uses numpy's seeded generator (public, reproducible data; never for secrets).
"""

from __future__ import annotations

import csv
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
               format: str | None = None, sparse: bool | None = None, labels: str = "binary") -> Table:
    """Read a party's data. ``format`` is guessed from the suffix (.csv, .parquet, .svm/.libsvm).

    Raises :class:`ConfigError` naming the file and the problem: no such file, no id or label
    column, labels other than 0/1 (``labels="real"`` accepts any finite number), a non-numeric feature column, missing or infinite feature
    values; :class:`ImportError` for Parquet without pandas and pyarrow."""
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt in ("svm", "libsvm", "svmlight"):
        return _read_libsvm(path, label_column is not None, labels)
    if fmt not in ("csv", "parquet", "pq"):
        raise ConfigError(f"cannot read {path}: unknown format {fmt!r} (use csv, parquet or libsvm)")
    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist")
    columns = _csv_columns(path) if fmt == "csv" else _parquet_columns(path)
    return _table(path, columns, id_column, label_column, sparse, labels)


# Cells pandas reads as missing (its default ``na_values``); the standard-library reader agrees.
_MISSING = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                      "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_BOOLS = {"True": True, "TRUE": True, "true": True, "False": False, "FALSE": False, "false": False}


def _csv_columns(path: Path) -> dict[str, np.ndarray]:
    """``{column name: values}`` of a CSV file with a header row, through pandas if installed
    (fast), through the ``csv`` module otherwise; the two give the same arrays."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"cannot read {path} as CSV: {exc}") from exc
    if not header:
        raise ConfigError(f"{path} is empty: a CSV file needs a header row naming its columns")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise ConfigError(f"{path}: column names appear more than once: {repeated}")
    try:
        import pandas as pd
    except ImportError:
        return _csv_columns_stdlib(path, header)
    try:
        frame = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise ConfigError(f"cannot read {path} as CSV: {exc}") from exc
    return _frame_columns(frame)


def _csv_columns_stdlib(path: Path, header: list[str]) -> dict[str, np.ndarray]:
    cells: list[list[str]] = [[] for _ in header]
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            next(reader)
            for row in reader:
                if not row:
                    continue  # blank lines carry no row (pandas skips them too)
                if len(row) != len(header):
                    raise ConfigError(f"{path}, line {reader.line_num}: {len(row)} fields, but the header names "
                                      f"{len(header)} columns")
                for column, value in zip(cells, row):
                    column.append(value)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"cannot read {path} as CSV: {exc}") from exc
    return {name: _typed_column(values) for name, values in zip(header, cells)}


def _typed_column(values: list[str]) -> np.ndarray:
    """Text cells typed as pandas types a CSV column: int64 when every cell is an integer, float64
    when every present cell is a number (missing cells become NaN), bool for True/False words,
    otherwise text (an object array, missing cells NaN)."""
    missing = [v in _MISSING for v in values]
    present = [v for v, m in zip(values, missing) if not m]
    if not any("_" in v for v in present):  # Python's int()/float() accept 1_000; pandas does not
        try:
            ints = [int(v) for v in present]
            if not any(missing):
                return np.array(ints, dtype=np.int64)
        except (ValueError, OverflowError):
            pass
        try:
            floats = iter([float(v) for v in present])
            return np.array([np.nan if m else next(floats) for m in missing], dtype=np.float64)
        except ValueError:
            pass
    if values and not any(missing) and all(v in _BOOLS for v in values):
        return np.array([_BOOLS[v] for v in values], dtype=bool)
    return np.array([np.nan if m else v for v, m in zip(values, missing)], dtype=object)


def _parquet_columns(path: Path) -> dict[str, np.ndarray]:
    needs = "reading Parquet needs pandas and pyarrow: pip install 'shaper-ppml[data]' (CSV and LibSVM need neither)"
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(needs) from exc
    try:
        frame = pd.read_parquet(path)
    except ImportError as exc:
        raise ImportError(needs) from exc
    except (OSError, ValueError) as exc:  # not a Parquet file, or an unreadable one
        raise ConfigError(f"cannot read {path} as Parquet: {exc}") from exc
    return _frame_columns(frame)


def _frame_columns(frame: Any) -> dict[str, np.ndarray]:
    """A pandas frame's columns as numpy arrays: numpy dtypes as they are, pandas' numeric
    extension types (nullable Int64, boolean, ...) as their numpy type (float64 with NaN where a
    value is missing), anything else (text) as an object array."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    out: dict[str, np.ndarray] = {}
    for name in frame.columns:
        column = frame[name]
        dtype = column.dtype
        if isinstance(dtype, np.dtype):
            out[str(name)] = column.to_numpy()
        elif is_numeric_dtype(dtype) or is_bool_dtype(dtype):
            if column.isna().any():
                out[str(name)] = column.to_numpy(dtype=np.float64, na_value=np.nan)
            else:
                out[str(name)] = column.to_numpy(dtype=getattr(dtype, "numpy_dtype", np.float64))
        else:
            out[str(name)] = column.to_numpy(dtype=object)
    return out


def _table(path: Path, columns: dict[str, np.ndarray], id_column: str, label_column: str | None,
           sparse: bool | None, labels: str = "binary") -> Table:
    """The checks every tabular reader shares, and the :class:`Table`."""
    names = list(columns)
    if id_column not in columns:
        raise ConfigError(f"{path} has no id column {id_column!r} (columns: {names[:10]}); name it with --id-column")
    ids = columns.pop(id_column)
    if not len(ids):
        raise ConfigError(f"{path} has a header but no rows")
    y = None
    if label_column is not None:
        if label_column not in columns:
            raise ConfigError(f"{path} has no label column {label_column!r} (columns: {names[:10]})")
        y = columns.pop(label_column)
        _check_labels(y, path, labels)
    text = {name: column for name, column in columns.items() if column.dtype.kind not in "biuf"}
    if text:
        examples = ", ".join(f"{name!r} (e.g. {_first_text(column)!r})" for name, column in list(text.items())[:5])
        raise ConfigError(f"{path}: feature column{'s' if len(text) > 1 else ''} {examples} "
                          f"{'are' if len(text) > 1 else 'is'} not numeric: encode categories as numbers and "
                          "write numbers without thousands separators")
    values = (np.column_stack([c.astype(np.float64) for c in columns.values()]) if columns
              else np.zeros((len(ids), 0)))
    if np.isnan(values).any():
        raise ConfigError(f"{path}: missing values in the features (impute them first)")
    if np.isinf(values).any():
        raise ConfigError(f"{path}: infinite values in the features")
    density = np.count_nonzero(values) / max(values.size, 1)
    X = sp.csr_matrix(values) if (sparse if sparse is not None else density < 0.1) else values
    return Table(ids, X, y, list(columns))


def _first_text(column: np.ndarray) -> Any:
    """The first cell of a non-numeric column that shows why it is not numeric."""
    cells = column.tolist()
    return next((v for v in cells if isinstance(v, str)), next((v for v in cells if v == v), cells[0] if cells else None))


def _read_libsvm(path: Path, with_labels: bool, labels: str = "binary") -> Table:
    from sklearn.datasets import load_svmlight_file

    if not path.is_file():
        raise ConfigError(f"data file {path} does not exist")
    text = path.read_text()
    has_qid = "qid:" in text.split("\n", 1)[0]
    loaded = load_svmlight_file(str(path), query_id=has_qid)
    X, y = loaded[0], loaded[1]
    ids = loaded[2] if has_qid else np.arange(X.shape[0])
    if with_labels:
        _check_labels(y, path, labels)
    return Table(np.asarray(ids), X.tocsr(), y if with_labels else None, None)


def _check_labels(y: np.ndarray, where: Any, kind: str = "binary") -> None:
    if kind == "real":
        arr = np.asarray(y)
        if arr.dtype.kind not in "biuf" or not np.all(np.isfinite(arr.astype(float))):
            raise ConfigError(f"{where}: labels must be finite numbers")
        return
    values = set(np.asarray(y).tolist())  # (not np.unique: text and NaN do not sort together)
    if not values <= {0, 1, 0.0, 1.0, True, False}:
        raise ConfigError(f"{where}: labels must be 0/1, found {sorted(values, key=str)[:5]}")


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
                "here, or a different id order): pass --align auto to line them up by private set intersection "
                "(or run shaper psi on both files first)")


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
