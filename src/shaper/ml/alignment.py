"""Aligning two parties' rows before a vertical job: each keeps its rows whose ids the peer also
holds, sorted by id, so row i at one party is the same customer as row i at the other.

    frame = align(session, frame, id_columns=["email"])   # a DataFrame or a dict of columns
    table = align(session, table)                          # a shaper.ml.data.Table (its ids)
    rows = align(session, ids)                             # a sequence of ids: the row positions

The ids go through private set intersection (:func:`shaper.protocols.psi.intersect`) with output
to both parties in id order: both know the shared ids, so that order reveals nothing more, and a
rerun gives the same rows. ``protocol="auto"`` (the default) runs the OT-based ``"okvs"`` (an
RR22-style OKVS over SoftSpoken's subspace VOLE, in the native core), or ECDH on Ristretto255
where the native core lacks it; ``"okvs"``, ``"ecdh"`` or ``"fnp"`` (Freedman–Nissim–Pinkas,
far slower) name one. What each party learns is PSI's (semi-honest, whichever protocol runs;
``docs/psi.md``): its rows of the intersection and the peer's set size, nothing about the other
ids.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ConfigError
from ..protocols import psi
from .data import Table

__all__ = ["align"]


def align(session: Any, data: Any, id_columns: Sequence[str] | str | None = None, *, peer: Any = None,
          protocol: str = "auto", strip: bool = False, casefold: bool = False, duplicates: str = "error",
          progress: Callable[[dict], None] | None = None) -> Any:
    """This party's rows of ``data`` whose ids the peer also holds, sorted by id (an order both
    share).

    ``data``: a pandas DataFrame or a dict of equal-length columns (``id_columns`` names the key
    columns), a :class:`~shaper.ml.data.Table` (its ids), or a sequence of ids (then the result
    is the row positions). Both parties call it together with the same options; ``peer`` names
    the other party when the session has more than two. ``protocol``: "auto" (OT-based okvs where
    the native core has it, else ECDH; :func:`shaper.protocols.psi.resolve`), "okvs", "ecdh" or
    "fnp"."""
    options = {"peer": peer, "protocol": protocol, "strip": strip, "casefold": casefold, "duplicates": duplicates,
               "progress": progress, "order": "id"}
    if isinstance(data, Table):
        rows = psi.intersect(session, np.asarray(data.ids).tolist(), **options).indices
        y = data.y
        return dataclasses.replace(data, ids=data.ids[rows], X=data.X[rows], y=None if y is None else y[rows])
    if id_columns is None:
        return psi.intersect(session, data, **options).indices
    names = [id_columns] if isinstance(id_columns, str) else list(id_columns)
    if not names:
        raise ConfigError("id_columns names no column")
    columns = _columns(data, names)
    ids = columns[0] if len(names) == 1 else list(zip(*columns))
    rows = psi.intersect(session, ids, columns=len(names), **options).indices
    if hasattr(data, "iloc"):
        return data.iloc[rows]
    return {name: np.asarray(values)[rows] for name, values in data.items()}


def _columns(data: Any, names: list[str]) -> list[list[Any]]:
    have = list(data.columns) if hasattr(data, "columns") else list(data.keys()) if isinstance(data, dict) else None
    if have is None:
        raise ConfigError(f"align() takes a DataFrame, a dict of columns, a Table or a sequence of ids, "
                          f"got {type(data).__name__}")
    missing = [n for n in names if n not in have]
    if missing:
        raise ConfigError(f"no id column {missing[0]!r}; columns are {have}")
    lengths = {len(data[n]) for n in have}
    if len(lengths) > 1:
        raise ConfigError("the columns have different lengths")
    return [list(data[n]) for n in names]
