"""Private set intersection between two parties, over arrays of ids.

    result = intersect(session, ids)                   # the fastest protocol for the options
    rows = result.indices                              # my rows of the intersection, common order

Protocols: ``"okvs"`` (:mod:`.okvs`, OT-based: an RR22-style OKVS over SoftSpoken's subspace
VOLE on shaper's own OT extension, the native core; semi-honest): output to both parties (in one
common order) or to one named party, or labelled (the other party's payload for each match);
``"ecdh"`` (:mod:`.ecdh`, the native core; semi-honest, DDH): output to both
parties (in one common order), to one named party, or the intersection's size only; ``"fnp"``
(:mod:`.fnp`, Freedman–Nissim–Pinkas with Paillier or OU, the seed paper's protocol): output to one
party or to both, its size only, or labelled (the other party's payload for each match).
``"auto"`` (the default, :func:`resolve`) takes ``"okvs"`` where it applies and the native core
is built, else ECDH (the intersection's size only, a checkpoint, no native core) or FNP
(payloads without the native core, or checkpointed): every choice is semi-honest, as ECDH, the
old default, is. Ids are
normalised and checked for duplicates as :mod:`.items` describes; what each party learns is in
:mod:`.ecdh` and ``docs/psi.md``. Lining up tables, DataFrames and columns by their ids is
:func:`shaper.ml.alignment.align`, built on :func:`intersect`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ...errors import ConfigError
from ...kernels import okvs as okvs_kernel
from . import ecdh, fnp, okvs
from .common import PsiResult
from .items import Normalise, PackedItems, unique_rows

PROTOCOLS = ("okvs", "ecdh", "fnp")


def resolve(protocol: str = "auto", *, cardinality_only: bool = False, labelled: bool = False,
            checkpoint: bool = False) -> str:
    """The protocol ``"auto"`` runs for these options (any other name is returned as it is):
    OT-based ``"okvs"`` where it applies (labelled PSI included) and the native core is built;
    else FNP for labelled PSI and ECDH otherwise (the intersection's size only, a checkpointed
    run, no native core). Both parties pass the same options, so they pick the same protocol (a party without the
    native core then meets a peer running OKVS, and the hello names both protocols)."""
    if protocol != "auto":
        return protocol
    okvs_applies = okvs_kernel.available() and not cardinality_only and not checkpoint
    if labelled:
        return "okvs" if okvs_applies else "fnp"
    return "okvs" if okvs_applies else "ecdh"


def intersect(session: Any, ids: Sequence[Any], *, peer: Any = None, protocol: str = "auto", to: Any = "both",
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
    ``payload_bytes`` > 0 with okvs (the default) or FNP is labelled PSI: ``to`` names the one
    party that learns, the other passes ``payloads`` (bytes per id, at most ``payload_bytes``
    each) and the learner finds the payloads of its matched rows in ``result.stats["payloads"]``.
    ``protocol="fnp"`` (Freedman–Nissim–Pinkas with ``scheme`` "paillier" or "ou" of ``key_bits``): ``to`` names the
    client, the one party that learns (with "both", the party of lower index is the client and then
    tells the other its rows); with ``payload_bytes`` > 0 it is labelled PSI: the other
    party passes ``payloads`` (bytes per id, at most ``payload_bytes`` each) and the client finds
    the payloads of its matched rows in ``result.stats["payloads"]``, in the rows' order.
    ``checkpoint_dir`` / ``resume``: keep the run's state on disk chunk by chunk (ECDH) or block by
    block (FNP), and continue a killed run where it stopped (both parties pass them).
    ``protocol``: "auto" (:func:`resolve`), "okvs", "ecdh" or "fnp"; ``result.stats["protocol"]``
    names the one that ran.
    Returns a :class:`PsiResult` whose ``indices`` are positions in ``ids``."""
    protocol = resolve(protocol, cardinality_only=cardinality_only, labelled=bool(payload_bytes or payloads),
                       checkpoint=checkpoint_dir is not None)
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown PSI protocol {protocol!r}; choose 'auto' or one of {', '.join(PROTOCOLS)}")
    if order not in ("protocol", "id"):
        raise ConfigError(f"order must be 'protocol' or 'id', got {order!r}")
    peer = _peer(session, peer)
    norm = Normalise(strip=strip, casefold=casefold)
    packed = PackedItems.encode(ids, norm, columns=columns)
    digests = packed.digests(okvs.DIGEST_PREFIX, 16) if protocol == "okvs" else None  # hashed once, used twice
    keep = unique_rows(packed, duplicates, label=lambda i: _plain(ids[i]), digests=digests)
    if keep is not None:
        packed = packed.take(keep)
        digests = None if digests is None else digests[keep]
    settings = f"{norm.describe()}, columns={columns}"
    if payloads is not None and keep is not None:
        payloads = [payloads[i] for i in keep]
    if protocol == "okvs":
        if cardinality_only:
            raise ConfigError("protocol 'okvs' cannot tell only the intersection's size (its learner sees which of "
                              "its rows matched): use protocol='ecdh' for cardinality_only")
        if checkpoint_dir is not None:
            raise ConfigError("protocol 'okvs' keeps no checkpoint (2^24 ids take under a minute; a killed run is "
                              "redone): drop checkpoint_dir, or use protocol='ecdh' to resume long runs")
        held, digests = [digests], None  # the protocol lets go of them once the native core has read them
        result = okvs.intersect(session, peer, packed, to=to, progress=progress, settings=settings, digests=held,
                                payloads=None if payloads is None else list(payloads), payload_bytes=payload_bytes)
    elif protocol == "ecdh":
        if payload_bytes or payloads is not None:
            raise ConfigError("payloads (labelled PSI) need protocol 'okvs' or 'fnp' (or 'auto')")
        result = ecdh.intersect(session, peer, packed, to=to, cardinality_only=cardinality_only,
                                progress=progress, settings=settings, checkpoint_dir=checkpoint_dir, resume=resume)
    else:
        both = to == "both"
        if both and payload_bytes:
            raise ConfigError("labelled FNP gives the payloads to one party: pass to=<the party that learns>")
        mode = "cardinality" if cardinality_only else "labelled" if payload_bytes else "intersection"
        client = min(session.index, session.parties.index(session.peer_name(peer))) if both else to
        result = fnp.intersect(session, peer, packed, client=client, both=both, mode=mode,
                               payloads=None if payloads is None else list(payloads), payload_bytes=payload_bytes,
                               key_bits=key_bits, scheme=scheme, progress=progress, settings=settings,
                               checkpoint_dir=checkpoint_dir, resume=resume)
    result.stats["protocol"] = protocol
    if result.indices is not None:
        at = result.indices
        if order == "id":
            by_id = packed.sort_order(at)
            at = at[by_id]
            if "payloads" in result.stats:
                result.stats["payloads"] = [result.stats["payloads"][k] for k in by_id]
        result.indices = at if keep is None else keep[at]
    return result


def _plain(value: Any) -> Any:
    """A value as Python shows it (an Arrow scalar as its Python value)."""
    return value.as_py() if hasattr(value, "as_py") else value


def _peer(session: Any, peer: Any) -> Any:
    if peer is not None:
        return peer
    if len(session.parties) != 2:
        raise ConfigError(f"the session has {len(session.parties)} parties: name the peer (peer=...)")
    return 1 - session.index


__all__ = ["PROTOCOLS", "Normalise", "PsiResult", "intersect", "resolve"]
