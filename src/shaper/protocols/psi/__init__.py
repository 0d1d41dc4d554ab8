"""Private set intersection between two parties, and the alignment of their rows that every
vertical job needs first.

    result = intersect(session, ids)                   # ECDH on Ristretto255 (the default)
    rows = result.indices                              # my rows of the intersection, common order
    frame = align(session, frame, id_columns=["id"])   # my rows of the intersection, sorted by id

Protocols: ``"ecdh"`` (:mod:`.ecdh`, the native core; semi-honest, DDH): output to both
parties (in one common order), to one named party, or the intersection's size only; ``"fnp"``
(:mod:`.fnp`, Freedman–Nissim–Pinkas with Paillier or OU, the seed paper's protocol): output to one
party or to both, its size only, or labelled (the other party's payload for each match). Ids are
normalised and checked for duplicates as :mod:`.items` describes; what each party learns is in
:mod:`.ecdh` and ``docs/psi.md``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from ...errors import ConfigError
from . import ecdh, fnp
from .common import PsiResult
from .items import Normalise, PackedItems, unique_rows

PROTOCOLS = ("ecdh", "fnp")


def intersect(session: Any, ids: Sequence[Any], *, peer: Any = None, protocol: str = "ecdh", to: Any = "both",
              cardinality_only: bool = False, strip: bool = False, casefold: bool = False, duplicates: str = "error",
              columns: int = 1, order: str = "protocol", payloads: Sequence[bytes] | None = None,
              payload_bytes: int = 0, key_bits: int = 2048, scheme: str = "paillier", checkpoint_dir: str | None = None,
              resume: bool = False, progress: Callable[[dict], None] | None = None) -> PsiResult:
    """The intersection of this party's ``ids`` with the peer's.

    ``ids``: values (text or integers), or tuples of ``columns`` values for a multi-column key,
    or an Arrow string column (ASCII text without strip/casefold is then hashed in place).
    ``to``: "both" (both parties learn their rows, in one common order), or the name or index of
    the one party that learns. ``cardinality_only``: the party (or parties) told learn only the
    size. ``strip``/``casefold``: id normalisation (both parties must choose the same).
    ``duplicates``: "error" (refuse a repeated id, naming it) or "first" (use its first row).
    ``order`` of the rows: "protocol" (by doubly blinded value, an order neither party chose) or
    "id" (by normalised id: both parties know the shared ids, so this reveals nothing, and a
    rerun gives the same order).
    ``protocol="fnp"`` (Freedman–Nissim–Pinkas with ``scheme`` "paillier" or "ou" of ``key_bits``): ``to`` names the
    client, the one party that learns (with "both", the party of lower index is the client and then
    tells the other its rows); with ``payload_bytes`` > 0 it is labelled PSI: the other
    party passes ``payloads`` (bytes per id, at most ``payload_bytes`` each) and the client finds
    the payloads of its matched rows in ``result.stats["payloads"]``, in the rows' order.
    ``checkpoint_dir`` / ``resume``: keep the run's state on disk chunk by chunk (ECDH) or block by
    block (FNP), and continue a killed run where it stopped (both parties pass them).
    Returns a :class:`PsiResult` whose ``indices`` are positions in ``ids``."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown PSI protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    if order not in ("protocol", "id"):
        raise ConfigError(f"order must be 'protocol' or 'id', got {order!r}")
    peer = _peer(session, peer)
    norm = Normalise(strip=strip, casefold=casefold)
    packed = PackedItems.encode(ids, norm, columns=columns)
    keep = unique_rows(packed, duplicates, label=lambda i: _plain(ids[i]))
    if keep is not None:
        packed = packed.take(keep)
    settings = f"{norm.describe()}, columns={columns}"
    if protocol == "ecdh":
        if payload_bytes or payloads is not None:
            raise ConfigError("payloads (labelled PSI) need protocol='fnp'")
        result = ecdh.intersect(session, peer, packed, to=to, cardinality_only=cardinality_only,
                                progress=progress, settings=settings, checkpoint_dir=checkpoint_dir, resume=resume)
    else:
        both = to == "both"
        if both and payload_bytes:
            raise ConfigError("labelled FNP gives the payloads to one party: pass to=<the party that learns>")
        mode = "cardinality" if cardinality_only else "labelled" if payload_bytes else "intersection"
        if payloads is not None and keep is not None:
            payloads = [payloads[i] for i in keep]
        client = min(session.index, session.parties.index(session.peer_name(peer))) if both else to
        result = fnp.intersect(session, peer, packed, client=client, both=both, mode=mode,
                               payloads=None if payloads is None else list(payloads), payload_bytes=payload_bytes,
                               key_bits=key_bits, scheme=scheme, progress=progress, settings=settings,
                               checkpoint_dir=checkpoint_dir, resume=resume)
    if result.indices is not None:
        at = result.indices
        if order == "id":
            by_id = packed.sort_order(at)
            at = at[by_id]
            if "payloads" in result.stats:
                result.stats["payloads"] = [result.stats["payloads"][k] for k in by_id]
        result.indices = at if keep is None else keep[at]
    return result


def align(session: Any, data: Any, id_columns: Sequence[str] | str | None = None, *, peer: Any = None,
          protocol: str = "ecdh", strip: bool = False, casefold: bool = False, duplicates: str = "error",
          progress: Callable[[dict], None] | None = None) -> Any:
    """This party's rows of ``data`` whose ids the peer also holds, sorted by id (an order both
    share).

    ``data``: a pandas DataFrame or a dict of equal-length columns (``id_columns`` names the key
    columns), a :class:`shaper.ml.data.Table` (its ids), or a sequence of ids (then the result
    is the row positions). Both parties call it together with the same options."""
    options = {"peer": peer, "protocol": protocol, "strip": strip, "casefold": casefold, "duplicates": duplicates,
               "progress": progress, "order": "id"}
    if dataclasses.is_dataclass(data) and hasattr(data, "ids") and hasattr(data, "X"):  # a shaper.ml.data.Table
        rows = intersect(session, np.asarray(data.ids).tolist(), **options).indices
        y = getattr(data, "y", None)
        return dataclasses.replace(data, ids=data.ids[rows], X=data.X[rows], y=None if y is None else y[rows])
    if id_columns is None:
        return intersect(session, data, **options).indices
    names = [id_columns] if isinstance(id_columns, str) else list(id_columns)
    if not names:
        raise ConfigError("id_columns names no column")
    columns = _columns(data, names)
    ids = columns[0] if len(names) == 1 else list(zip(*columns))
    rows = intersect(session, ids, columns=len(names), **options).indices
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


def _plain(value: Any) -> Any:
    """A value as Python shows it (an Arrow scalar as its Python value)."""
    return value.as_py() if hasattr(value, "as_py") else value


def _peer(session: Any, peer: Any) -> Any:
    if peer is not None:
        return peer
    if len(session.parties) != 2:
        raise ConfigError(f"the session has {len(session.parties)} parties: name the peer (peer=...)")
    return 1 - session.index


__all__ = ["PROTOCOLS", "Normalise", "PsiResult", "align", "intersect"]
