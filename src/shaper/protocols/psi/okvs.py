"""OT-based private set intersection: RR22's VOLE-PSI structure (Raghuraman–Rindal, CCS 2022)
with a clustered 3-hash OKVS, over SoftSpoken's subspace VOLE with a binary BCH code, on
shaper's own OT extension (the native core, ``native/src/okvs.rs``).

**Protocol.** Call R the party that learns (for ``to="both"``, the party with the smaller set, on
a tie the lower index) and S the other. Both hash each id to a 16-byte digest.

1. R draws a fresh 16-byte seed after its ids are fixed and sends it with the OKVS parameters
   (clusters, capacity, positions), which S checks against R's set size. From the seed both map
   each digest to a row: a cluster, 3 of its sparse positions, a mask of its dense positions and
   a 64-bit value H(x).
2. Six SoftSpoken extensions of 128 base OTs each (k = 4; R is the extension receiver, S holds Δ,
   768 bits): base OTs, then R's setup messages.
3. Batch by batch (16 clusters, about 2^18 of R's ids): R encodes the OKVS P of its clusters
   (Decode(P, x) = H(x)), extends with choice bits C(P_j), a [192, 64, ≥ 37] BCH codeword per
   position, one bit per SoftSpoken group, and sends the extension's message (24 bytes per
   position). S decodes its rows Q ⊕ C(H(y)) ∗ Δ at each of its ids and hashes them to masks;
   R hashes its own T at each of its ids.
4. S sends its masks sorted by value (an order the masks themselves fix: R sees the masks
   anyway, and their order says nothing of S's ids or of S's row order), which spares a
   shuffle and lets R match by one merge against its own masks, sorted while it waited. For
   ``to="both"`` R sends S the positions of the matches in S's list, in the order of the mask
   value (an order neither party chose), and S maps them back to its rows.

**Security** (semi-honest; SoftSpoken's PRG and base OTs, SHA-256 as a random oracle): R learns
the intersection (its rows) and S's set size; S learns R's set size and, with ``to="both"``, its
rows of the intersection. S sees only the extension messages, which SoftSpoken masks under PRG
streams S cannot compute. For an id y of S outside R's set, S's value differs from anything R
can compute by C(e) ∗ Δ with e = Decode(P, y) ⊕ H(y) ≠ 0 (except with probability 2^-64 per id,
so n_S / 2^64 ≤ 2^-40 for sets up to 2^24), a codeword of weight ≥ 37 whose 4 · 37 = 148 bits
of Δ R does not know: its mask looks random. Masks are 40 + log2(n_R) + log2(n_S) bits (a false
match ≤ 2^-40). R's clusters overflow, or an OKVS cluster fails to encode, with probability
below 2^-40 (parameters in ``docs/psi.md``); either raises, neither drops an id. *Not* covered:
a deviating party (R could encode a guessed id, or a malformed OKVS; S could send arbitrary
masks, making R's output wrong). The malicious variant (RR22 §5: a VOLE consistency check and
the OKVS seed from a coin toss after R commits) is not built. It cannot give only the
intersection's size (R learns which of its rows matched): use ECDH for that.

**Labelled** (``payload_bytes`` > 0, output to R): S sends, after its masks and in their order,
each id's payload (2 bytes of length, then the bytes, zero-padded) XORed with a pad hashed from
the same 96-byte VOLE value under another tag. R's value equals S's only for a shared id, so R
opens exactly the payloads of the ids it holds; every other pad hides the same 148 bits of Δ as
the mask beside it.

**Traffic** for n ids each: R sends about 1.35 · 24 bytes per id of its own, plus 24 KiB of
setup; S sends its masks (10 bytes per id at 2^20, 11 at 2^24) and 24 KiB of base OTs.
**Memory**: per party the digests and rows of its ids (about 56 bytes per id) and one batch's
OKVS rows (about 34 MiB); R keeps 16 bytes per id of each side's masks for matching.
There is no checkpoint: a run of 2^24 ids each takes under a minute, so a killed run is redone.
"""

from __future__ import annotations

import hashlib
import math
import os
from typing import Any, Callable

import numpy as np

from ...errors import ConfigError, FrameError
from ...kernels import okvs as kernel
from ...net.phases import Meter
from .common import PsiResult, check_hello, recv_rows
from .common import learner as learner_of
from .items import PackedItems

VERSION = "shaper-psi/okvs-softspoken-bch192/1"
LAMBDA = 40            # statistical security (bits)
TARGET = 1 << 14       # expected ids of R per cluster
BATCH_CLUSTERS = 16    # clusters per extension message
LANES, BASE = 6, 128   # SoftSpoken extensions, base OTs per extension
SETUP_BYTES = 4096     # one extension's SoftSpoken setup message
EXPANSION = (123, 100)  # sparse positions per id of capacity, before the finite-size margin (peeling: > 1.222)
MASK_CHUNK = 1 << 16   # masks (and sealed payloads) per message
MAX_PAYLOAD = 1 << 15  # bytes of one labelled payload
MAX_ITEMS = 1 << 32
DIGEST_PREFIX = b"shaper/psi/okvs/item/v1\0"


def clusters_for(n: int) -> int:
    """R's clusters for n ids: 2^14 expected ids each."""
    return max(1, -(-n // TARGET))


def capacity_for(n: int, clusters: int, lam: int = LAMBDA) -> int:
    """The least c with clusters · P[Binomial(n, 1/clusters) > c] ≤ 2^-lam: no cluster of R's
    overflows except with probability 2^-lam (an exact binomial tail, not a table)."""
    if clusters == 1 or n == 0:
        return max(n, 1)
    p = 1.0 / clusters
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n1 = math.lgamma(n + 1)
    limit = -lam * math.log(2) - math.log(clusters)

    def log_tail(c: int) -> float:  # log P[X > c]
        terms, k = [], c + 1
        while k <= n:
            t = log_n1 - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
            terms.append(t)
            if len(terms) > 1 and t < terms[0] - 50:
                break
            k += 1
        if not terms:
            return -math.inf
        top = max(terms)
        return top + math.log(sum(math.exp(t - top) for t in terms))

    lo, hi = -(-n // clusters), n  # log_tail(hi) = -inf
    while lo < hi:
        mid = (lo + hi) // 2
        if log_tail(mid) <= limit:
            hi = mid
        else:
            lo = mid + 1
    return lo


def sparse_for(capacity: int) -> int:
    """Sparse positions of a cluster for ``capacity`` ids: 1.23·c + 8·sqrt(c) (+1), in integers.
    Peeling a random 3-uniform hypergraph leaves no large 2-core below 0.818 rows per position
    (1.222 positions per row), but at finite size the transition has a width of order
    1/sqrt(c): measured at 1.27·c, 300 ids failed a third of the time and 1,000 ids 5 %, which
    fits P[fail] ≈ Φ(−(e − 1.222)·sqrt(c)/0.92). The 8·sqrt(c) margin puts every size at
    z ≥ 8.7 of that fit (beyond 2^-50), while costing 2 % at 2^14 ids per cluster."""
    return max(3, (EXPANSION[0] * capacity + EXPANSION[1] - 1) // EXPANSION[1] + math.isqrt(64 * capacity) + 1)


def dense_for(capacity: int, clusters: int, lam: int = LAMBDA) -> int:
    """Dense positions: g + lam + log2(clusters), g the 2-core size the dense part must solve
    (RR22 §6: a core larger than g has probability about (e·n)^-(g+1) for weight 3), at most
    the cluster's capacity."""
    bits = lam + (clusters - 1).bit_length()
    g = min(capacity, math.ceil(bits / math.log2(sparse_for(capacity))))
    return min(64, g + bits)


def params_for(n: int) -> tuple[int, int, int, int]:
    """(clusters, capacity, sparse, dense) for R's n ids."""
    clusters = clusters_for(n)
    capacity = capacity_for(n, clusters)
    return clusters, capacity, sparse_for(capacity), dense_for(capacity, clusters)


def mask_bytes(n_r: int, n_s: int) -> int:
    """Bytes of a mask: 40 + ceil(log2 n_R) + ceil(log2 n_S) bits (a false match ≤ 2^-40)."""
    bits = LAMBDA + (max(n_r, 1) - 1).bit_length() + (max(n_s, 1) - 1).bit_length()
    return min(16, -(-bits // 8))


def _check_params(got: Any, n_r: int) -> tuple[int, int, int, int]:
    """R's announced parameters, as S accepts them: the cluster count and the positions follow
    from n_R and the capacity, which lies between the mean load and n_R."""
    if not (isinstance(got, list) and len(got) == 4 and all(isinstance(v, int) and not isinstance(v, bool)
                                                             for v in got)):
        raise FrameError(f"the peer's OKVS parameters are malformed: {got!r}")
    clusters, capacity, sparse, dense = got
    if clusters != clusters_for(n_r) or not -(-n_r // clusters) <= capacity <= max(n_r, 1) \
            or sparse != sparse_for(capacity) or dense != dense_for(capacity, clusters):
        raise FrameError(f"the peer's OKVS parameters {got!r} do not fit its {n_r} ids")
    return clusters, capacity, sparse, dense


def parse_setup(setup: Any, n_r: int) -> tuple[bytes, tuple[int, int, int, int]]:
    """R's "psi-okvs-setup" message as S accepts it: (the 16-byte seed, the parameters);
    :class:`FrameError` naming what is wrong otherwise."""
    raw_seed = setup.get("seed") if isinstance(setup, dict) else None
    try:
        seed = bytes.fromhex(raw_seed) if isinstance(raw_seed, str) else b""
    except ValueError:
        seed = b""
    if len(seed) != 16:
        raise FrameError(f"the peer's OKVS seed is not 16 bytes of hex: {raw_seed!r}")
    return seed, _check_params(setup.get("params"), n_r)


def intersect(session: Any, peer: Any, items: PackedItems, *, to: Any = "both",
              progress: Callable[[dict], None] | None = None, settings: str = "",
              digests: np.ndarray | list | None = None, payloads: list[bytes] | None = None,
              payload_bytes: int = 0) -> PsiResult:
    """Run OT-based PSI with ``peer`` on this party's packed ids (distinct; see :mod:`.items`).
    ``to``: "both", or the name or index of the one party that learns. ``digests``: the ids'
    (n, 16) digests under :data:`DIGEST_PREFIX` if the caller has them (or a list holding them,
    which is emptied: the array is then freed once the native core has read it).
    ``payload_bytes`` > 0: labelled PSI, to the one party ``to`` names: the other party passes
    ``payloads`` (one bytes value per id, at most ``payload_bytes`` each) and the learner finds
    the payloads of its matched rows in ``stats["payloads"]``, in the rows' order. Each payload
    travels with S's mask, XORed with a pad hashed from the same VOLE value under another tag:
    the learner can remove the pad only where its own value is S's, i.e. for a shared id."""
    native = kernel.engine()
    meter = Meter(session)
    me, other = session.index, session.parties.index(session.peer_name(peer))
    learner = learner_of(session, to)
    if len(items) > MAX_ITEMS:
        raise ConfigError(f"OT-based PSI takes at most 2^32 ids per party, got {len(items)}")
    if not isinstance(payload_bytes, int) or not 0 <= payload_bytes <= MAX_PAYLOAD:
        raise ConfigError(f"payload_bytes must be 0 to {MAX_PAYLOAD}, got {payload_bytes!r}")
    if payload_bytes and learner is None:
        raise ConfigError("labelled PSI gives the payloads to one party: pass to=<the party that learns>")
    hello = {"version": VERSION, "to": "both" if learner is None else session.parties[learner],
             "cardinality_only": False, "n": len(items), "chunk": BATCH_CLUSTERS,
             "settings": f"{settings}, payload_bytes={payload_bytes}"}
    theirs = session.exchange(other, hello, "psi-hello")
    check_hello(hello, theirs)
    n_peer = int(theirs["n"])
    if n_peer > MAX_ITEMS:
        raise FrameError(f"the peer announced {n_peer} ids, more than OT-based PSI takes (2^32)")
    if learner is None:  # the smaller set encodes (R's traffic is per own id); ties: the lower index
        receiver = me if (len(items), me) < (n_peer, other) else other
    else:
        receiver = learner
    is_r = me == receiver
    n_r, n_s = (len(items), n_peer) if is_r else (n_peer, len(items))
    plain = None if is_r or not payload_bytes else _pack_payloads(payloads, len(items), payload_bytes)
    report = progress or (lambda event: None)
    if n_r == 0 or n_s == 0:  # nothing in common: no OT at all
        empty = np.zeros(0, np.int64)
        told = is_r or learner is None
        stats = {**meter.figures(), **({"payloads": []} if is_r and payload_bytes else {})}
        return PsiResult(empty if told else None, 0 if told else None, n_peer, stats)
    width = mask_bytes(n_r, n_s)
    held = [_digests(items, digests)]  # handed down, so that the native core's copy is the only one left
    del digests
    if is_r:
        return _receiver(session, other, native, held, n_s, width, learner is None, report, meter, payload_bytes)
    return _sender(session, other, native, held, n_r, width, learner is None, report, meter, plain)


def _pack_payloads(payloads: list[bytes] | None, n: int, payload_bytes: int) -> np.ndarray:
    """(n, 2 + payload_bytes) uint8: each payload's length (2 bytes, little-endian), then its
    bytes, zero-padded; built without a loop over the rows."""
    if payloads is None or len(payloads) != n:
        raise ConfigError(f"labelled PSI: the party that does not learn passes one payload per id ({n}), got "
                          f"{'none' if payloads is None else len(payloads)}")
    lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=n)
    if n and lengths.max() > payload_bytes:
        i = int(np.argmax(lengths))
        raise ConfigError(f"payload {i} has {int(lengths[i])} bytes, more than payload_bytes={payload_bytes}")
    plain = np.zeros((n, 2 + payload_bytes), np.uint8)
    plain[:, 0], plain[:, 1] = lengths & 0xFF, lengths >> 8
    data = np.frombuffer(b"".join(payloads), np.uint8)
    if len(data):
        rows = np.repeat(np.arange(n), lengths)
        plain[rows, 2 + np.arange(len(data)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = data
    return plain


def _digests(items: PackedItems, digests: np.ndarray | list | None) -> np.ndarray:
    """The ids' (n, 16) digests: given (an array, or a one-element list the caller lets go of),
    or computed."""
    if isinstance(digests, list):
        digests = digests.pop()
    if digests is None:
        return items.digests(DIGEST_PREFIX, 16)
    if digests.shape != (len(items), 16):
        raise ConfigError(f"digests of shape {digests.shape} for {len(items)} ids")
    return np.ascontiguousarray(digests)


def _room(rows: int, width: int, what: str) -> np.ndarray:
    """An uncommitted (rows, width) array for what the peer will send: pages are only used as its
    messages arrive, so memory follows the data received, not the size the peer announced; a
    size this machine cannot even map is refused by name."""
    try:
        return np.empty((rows, width), np.uint8)
    except MemoryError:
        raise ConfigError(f"the peer's {rows:,} ids need {rows * width / 2**30:.1f} GiB of {what} here, more "
                          "than this machine can map") from None


def _session_ids(seed: bytes) -> list[bytes]:
    return [hashlib.sha256(b"shaper/psi/okvs/base-ot/v1\0" + seed + bytes([lane])).digest()[:16]
            for lane in range(LANES)]


def _receiver(session: Any, other: int, native: Any, held: list, n_s: int, width: int, both: bool,
              report: Callable[[dict], None], meter: Meter, payload_bytes: int) -> PsiResult:
    n_r = len(held[0])
    params = params_for(n_r)
    seed = os.urandom(16)
    senders = [native.BaseOtSender(BASE, os.urandom(64), sid) for sid in _session_ids(seed)]
    session.send(other, {"seed": seed.hex(), "params": list(params)}, "psi-okvs-setup")
    session.send(other, b"".join(s.message() for s in senders), "psi-okvs-a")
    pad = 2 + payload_bytes if payload_bytes else 0
    items = native.OkvsItems(params, seed, held.pop(), BATCH_CLUSTERS, width, pad)  # while S answers
    replies = session.recv_bytes(other, "psi-okvs-b", size=LANES * BASE * 32)
    k0s, k1s = [], []
    for lane, s in enumerate(senders):
        try:
            k0, k1 = s.keys(replies[lane * BASE * 32:(lane + 1) * BASE * 32])
        except ValueError as exc:
            raise FrameError(f"the peer's base-OT reply is invalid: {exc}") from None
        k0s.append(k0)
        k1s.append(k1)
    try:
        r = native.OkvsReceiver(items, b"".join(k0s), b"".join(k1s), os.urandom(16 * LANES))
    except ValueError as exc:  # a cluster over its capacity (below 2^-40)
        raise ConfigError(f"OT-based PSI cannot place this party's ids: {exc}; run it again") from None
    session.send(other, r.setup_message, "psi-okvs-soft")
    own = np.empty((n_r, width), np.uint8)  # masks in sorted order
    own_pads = np.empty((n_r, pad), np.uint8)
    for b in range(r.batches):
        u, masks, pads = r.batch(b)
        session.send(other, u, "psi-okvs-u")
        start, stop = r.items(b)
        own[start:stop] = masks
        own_pads[start:stop] = pads
        report({"event": "psi", "stage": "okvs", "done": b + 1, "total": r.batches})
    order = r.order()
    del r  # its rows (32 bytes per id)
    by_mask = native.okvs_sort(own)  # while S finishes: the merge below needs both sides sorted
    peer = _room(n_s, width, "masks")
    for c in range(0, n_s, MASK_CHUNK):
        rows = min(MASK_CHUNK, n_s - c)
        part = session.recv_bytes(other, "psi-okvs-m", size=rows * width)
        peer[c:c + rows] = np.frombuffer(part, np.uint8).reshape(rows, width)
    try:  # ordered by the mask: an order neither party chose
        mine_at, theirs_at = native.okvs_match(own, by_mask, peer)
    except ValueError as exc:
        raise FrameError(f"the peer's masks are malformed: {exc}") from None
    del own, peer
    stats = {}
    if pad:  # the payloads, in S's mask order, each XORed with its pad
        sealed = _room(n_s, pad, "sealed payloads")
        for c in range(0, n_s, MASK_CHUNK):
            rows = min(MASK_CHUNK, n_s - c)
            sealed[c:c + rows] = np.frombuffer(session.recv_bytes(other, "psi-okvs-p", size=rows * pad),
                                               np.uint8).reshape(rows, pad)
        opened = sealed[theirs_at] ^ own_pads[mine_at]
        lengths = opened[:, 0].astype(np.int64) | opened[:, 1].astype(np.int64) << 8
        if len(lengths) and lengths.max() > payload_bytes:
            raise FrameError(f"the peer's payload for a shared id opens to {int(lengths.max())} bytes, more than "
                             f"payload_bytes={payload_bytes}")
        stats["payloads"] = [row[2:2 + n].tobytes() for row, n in zip(opened, lengths.tolist())]
    if both:
        session.send(other, theirs_at, "psi-rows")
    indices = order[mine_at].astype(np.int64)
    return PsiResult(indices, len(indices), n_s, {**meter.figures(), **stats})


def _sender(session: Any, other: int, native: Any, held: list, n_r: int, width: int, both: bool,
            report: Callable[[dict], None], meter: Meter, plain: np.ndarray | None) -> PsiResult:
    n_s = len(held[0])
    seed, params = parse_setup(session.recv_meta(other, "psi-okvs-setup"), n_r)
    first = session.recv_bytes(other, "psi-okvs-a", size=LANES * 32)
    deltas = os.urandom(16 * LANES)
    receivers = [native.BaseOtReceiver(deltas[16 * lane:16 * lane + 16], BASE, os.urandom(64 * BASE), sid)
                 for lane, sid in enumerate(_session_ids(seed))]
    try:
        reply = b"".join(rcv.reply(first[32 * lane:32 * lane + 32]) for lane, rcv in enumerate(receivers))
    except ValueError as exc:
        raise FrameError(f"the peer's base-OT message is invalid: {exc}") from None
    session.send(other, reply, "psi-okvs-b")
    pad = 0 if plain is None else plain.shape[1]
    items = native.OkvsItems(params, seed, held.pop(), BATCH_CLUSTERS, width, pad)  # while R makes its setup
    soft = session.recv_bytes(other, "psi-okvs-soft", size=LANES * SETUP_BYTES)
    s = native.OkvsSender(items, b"".join(rcv.keys() for rcv in receivers), deltas, soft)
    masks = np.zeros((n_s, width), np.uint8)  # in sorted order
    pads = np.zeros((n_s, pad), np.uint8)
    for b in range(s.batches):
        u = session.recv_bytes(other, "psi-okvs-u", size=s.message_len(b))
        start, stop = s.items(b)
        masks[start:stop], pads[start:stop] = s.batch(b, u)
        report({"event": "psi", "stage": "okvs", "done": b + 1, "total": s.batches})
    sorted_items = s.order()
    del s  # its digests (16 bytes per id)
    by_mask, ordered = native.okvs_sort(masks, gather=True)  # sent sorted by value: an order the masks alone fix
    order = sorted_items[by_mask.astype(np.intp)]
    del masks
    session.send_pipelined(other, range(0, n_s, MASK_CHUNK), lambda c: ordered[c:c + MASK_CHUNK].tobytes(),
                           tag="psi-okvs-m")
    if pad:  # each payload XORed with its pad, in the masks' order
        sealed = plain[order] ^ pads[by_mask.astype(np.intp)]
        del pads
        session.send_pipelined(other, range(0, n_s, MASK_CHUNK), lambda c: sealed[c:c + MASK_CHUNK].tobytes(),
                               tag="psi-okvs-p")
    if not both:
        return PsiResult(None, None, n_r, meter.figures())
    rows = recv_rows(session, other, order, min(n_r, n_s))
    return PsiResult(rows, len(rows), n_r, meter.figures())

