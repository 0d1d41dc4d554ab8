"""ECDH private set intersection on Ristretto255 (Meadows 1986; Huberman, Franklin and Hogg 1999).

**Protocol.** Each party draws a secret scalar (``os.urandom``), hashes its ids into the group
and blinds them (``k * H(x)``, the native core behind :func:`shaper.kernels.ecc.blinding_key`).
Call R the party that learns the result (for ``to="both"``, the party with the lower index) and
S the other.

1. Both send their singly blinded items, in chunks of 2^16: R in its own order, S in a secret
   random order.
2. S blinds R's points again and returns the first 16 bytes of each, ``k_S k_R H(x)``, in R's
   order (shuffled as a whole for ``cardinality_only``); R blinds S's points again,
   ``k_R k_S H(y)``.
3. R intersects the two lists of doubly blinded values. The result is ordered by the doubly
   blinded value, an order neither party chose. For ``to="both"`` R sends S the positions of the
   matches in S's shuffled order, in that same order, and S maps them back to its own rows: both
   hold their rows of the intersection in one common order.

Steps 1 and 2 are interleaved chunk by chunk: each party sends its next singly blinded chunk and
then blinds the peer's next chunk again, producing while the previous chunk is on the wire. The
two parties' scalar multiplications run at the same time, and no receive queue holds more than a
few chunks, so memory is bounded at any set size (the learner keeps 16 bytes per id of each
set; the shuffling party hashes its ids in the shuffled order, a chunk at a time).

**Security** (semi-honest, two parties, DDH in Ristretto255, H a random oracle). R learns the
intersection (its own rows) and S's set size; S learns R's set size, and, with ``to="both"``,
its own rows of the intersection. With ``cardinality_only`` the party told learns only the
size of the intersection: R cannot link the shuffled doubly blinded values to its rows, and S's
points arrive in a random order. Neither party learns anything about ids outside the
intersection; a 16-byte doubly blinded value collides between two different ids with
probability n_R n_S / 2^128. Malicious parties are out of scope (a party could, for example,
blind a guessed id and see whether it matches).

**Traffic** per item: R sends 32 bytes (plus 8 per match with ``to="both"``), S sends 48.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import numpy as np

from ...errors import FrameError
from ...kernels.ecc import blinding_key
from ...net.phases import Meter
from ...net.pipeline import pipeline
from .checkpoint import PsiCheckpoint, open_run, start_run
from .common import PsiResult, permutation, recv_rows, recv_size
from .common import learner as learner_of
from .items import PackedItems

VERSION = "shaper-psi/ecdh-ristretto255/1"
CHUNK = 1 << 16  # items per message
POINT, MATCH = 32, 16  # bytes of a blinded point, of a doubly blinded value kept for matching


def intersect(session: Any, peer: Any, items: PackedItems, *, to: Any = "both", cardinality_only: bool = False,
              progress: Callable[[dict], None] | None = None, settings: str = "",
              checkpoint_dir: str | None = None, resume: bool = False) -> PsiResult:
    """Run ECDH PSI with ``peer`` on this party's packed ids (distinct; see :mod:`.items`).

    ``to``: "both", or the name or index of the one party that learns the result.
    ``settings``: a description of the id normalisation, which must equal the peer's.
    ``checkpoint_dir``: keep the run's state there, chunk by chunk; with ``resume`` a run both
    parties had started continues where it stopped (:mod:`.checkpoint`)."""
    meter = Meter(session)  # the run's time and traffic
    me, other = session.index, session.parties.index(session.peer_name(peer))
    learner = learner_of(session, to)
    hello = {"version": VERSION, "to": "both" if learner is None else session.parties[learner],
             "cardinality_only": bool(cardinality_only), "n": len(items), "chunk": CHUNK, "settings": settings}
    theirs, ckpt, state = open_run(session, other, hello, items, checkpoint_dir, resume, "ecdh")
    n_peer = int(theirs["n"])
    receiver = min(me, other) if learner is None else learner
    report = progress or (lambda event: None)
    is_r = me == receiver
    n_r, n_s = (len(items), n_peer) if is_r else (n_peer, len(items))
    resuming = state is not None
    if resuming:
        key, seed = blinding_key(ckpt.secret(state, "key")), ckpt.secret(state, "seed")
    else:
        key, seed = blinding_key(), None if is_r else os.urandom(32)
        start_run(session, other, ckpt, {"key": key.to_bytes(), "seed": seed}, ("own.bin", "peer.bin"))

    # where the learner stands: complete chunks of its doubly blinded values and of the peer's
    own_done = peer_done = 0
    own_doubled = peer_doubled = None
    if is_r:
        own_doubled, peer_doubled = np.empty((n_r, MATCH), np.uint8), np.empty((n_s, MATCH), np.uint8)
        if resuming:
            peer_done = ckpt.read_chunks("peer.bin", peer_doubled, CHUNK)
            if not cardinality_only:  # (cardinality: S shuffles all of them at the end; redone)
                own_done = ckpt.read_chunks("own.bin", own_doubled, CHUNK)
        session.send(other, {"own": own_done, "peer": peer_done}, "psi-progress")
    else:
        where = session.recv_meta(other, "psi-progress")
        own_done, peer_done = (where.get("own"), where.get("peer")) if isinstance(where, dict) else (None, None)
        if not (isinstance(own_done, int) and isinstance(peer_done, int) and 0 <= own_done <= _chunks(n_r)
                and 0 <= peer_done <= _chunks(n_s)) or (peer_done or own_done) and not resuming:
            raise FrameError(f"the peer announced an impossible resume point {where!r}")
    if resuming:
        report({"event": "resume", "own_chunks": own_done, "peer_chunks": peer_done})

    # 1-2. chunk by chunk, interleaved: send this party's next singly blinded chunk (S: in a secret
    # random order), then blind the peer's next chunk again (S returns it, R keeps it). The peer
    # does the same, so no receive queue holds more than a few chunks: memory stays bounded at any
    # set size. Producing overlaps sending (net.pipeline).
    order = np.arange(len(items)) if is_r else permutation(len(items), seed)
    mine = _Blinded(key, items, None if is_r else order)
    sends = range(own_done if is_r else peer_done, _chunks(len(items)))
    blinds = range(peer_done if is_r else own_done, _chunks(n_peer))
    returned = _Returned(session, other, own_doubled, own_done, None if cardinality_only else ckpt) if is_r else None
    collected = np.empty((n_r, MATCH), np.uint8) if not is_r and cardinality_only else None
    sent = [-1]  # the last chunk of this party's that is queued for sending

    def schedule() -> Iterator[tuple[str, int]]:
        for k in range(max(len(sends), len(blinds))):
            if k < len(sends):
                yield "mine", sends[k]
            if k < len(blinds):
                yield "theirs", blinds[k]

    def produce(step: tuple[str, int]) -> list[tuple[str, bytes]]:
        kind, c = step
        if kind == "mine":
            sent[0] = c
            return [("psi-a", mine.chunk(c))]
        points = session.recv_bytes(other, "psi-a")
        _check_length(points, _chunk_len(n_peer, c) * POINT, "blinded points")
        part = _truncate(_reblind(key, points))
        if is_r:
            _put(peer_doubled, c, part)
            if ckpt is not None:
                ckpt.append("peer.bin", part)
        report({"event": "psi", "stage": "blind", "done": min((c + 1) * CHUNK, n_peer), "total": n_peer})
        if not is_r:
            if collected is None:
                return [("psi-d", part)]
            _put(collected, c, part)  # cardinality only: returned all at once, shuffled
            return []
        if not cardinality_only:  # take back what S has returned, one chunk behind what was sent
            returned.take(sent[0] - 1)
        return []

    def consume(messages: list[tuple[str, bytes]]) -> None:
        for tag, payload in messages:
            session.send(other, payload, tag)

    pipeline(produce, schedule(), consume)
    if not is_r:
        if collected is not None:
            shuffled = collected[permutation(n_r)]
            session.send_pipelined(other, range(_chunks(n_r)),
                                   lambda c: shuffled[c * CHUNK:(c + 1) * CHUNK].tobytes(), tag="psi-d")
        result = _finish_s(session, other, learner, order, cardinality_only, n_peer, meter)
        if ckpt is not None:
            ckpt.clear()
        return result
    returned.take(_chunks(n_r) - 1)
    # 3. match, ordered by the doubly blinded value
    mine_at, theirs_at = match(own_doubled, peer_doubled)
    own_doubled = peer_doubled = returned = None  # 32 bytes per id, freed before the rows are ordered and written
    size = int(len(mine_at))
    if learner is None:
        if cardinality_only:
            session.send(other, {"size": size}, "psi-size")
        else:
            session.send(other, theirs_at, "psi-rows")
    indices = None if cardinality_only else mine_at
    if ckpt is not None:
        ckpt.clear()
    return PsiResult(indices, size, n_peer, meter.figures())


def match(own: np.ndarray, peer: np.ndarray, block: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """(positions in ``own``, positions in ``peer``) of the rows the two (n, 16) byte arrays share
    (rows within each array are distinct), ordered by the shared value's first 8 bytes (rare ties
    in any order). Sorts the peer's rows by their first 8 bytes as a big-endian
    word, compares the other 8 for rows whose first 8 are equal, and looks up ``own`` block by
    block: the extra memory is about 16 bytes per peer row."""
    if not len(own) or not len(peer):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    words = peer.view(">u8")  # (n, 2): a row's bytes in order
    hi = words[:, 0].astype(np.uint64)
    by_value = np.argsort(hi)  # in place: no buffer beside the index
    hi.sort()  # = hi[by_value], without a third array
    mine, theirs = [], []
    for start in range(0, len(own), block):
        part = own[start:start + block].view(">u8")
        a_hi, a_lo = part[:, 0].astype(np.uint64), part[:, 1].astype(np.uint64)
        left, right = np.searchsorted(hi, a_hi, "left"), np.searchsorted(hi, a_hi, "right")
        one = np.nonzero(right - left == 1)[0]  # the first 8 bytes occur once at the peer: compare the rest
        hit = one[words[by_value[left[one]], 1] == a_lo[one]]
        found = [hit + start], [left[hit]]
        for i in np.nonzero(right - left > 1)[0]:  # equal first 8 bytes at the peer (rare): scan them
            at = left[i] + np.nonzero(words[by_value[left[i]:right[i]], 1] == a_lo[i])[0]
            found[0].append(np.full(len(at), start + i))
            found[1].append(at)
        mine.append(np.concatenate(found[0]))
        theirs.append(np.concatenate(found[1]))
    del hi
    mine_at, sorted_at = np.concatenate(mine).astype(np.int64), np.concatenate(theirs)
    theirs_at = by_value[sorted_at].astype(np.int64)
    del by_value
    ranked = np.argsort(sorted_at)  # by value: the peer's sorted position (distinct)
    return mine_at[ranked], theirs_at[ranked]


def _finish_s(session: Any, other: int, learner: int | None, order: np.ndarray, cardinality_only: bool,
              n_peer: int, meter: Meter) -> PsiResult:
    if learner is not None:  # R alone learns
        return PsiResult(None, None, n_peer, meter.figures())
    limit = min(n_peer, len(order))
    if cardinality_only:
        return PsiResult(None, recv_size(session, other, limit), n_peer, meter.figures())
    rows = recv_rows(session, other, order, limit)
    return PsiResult(rows, len(rows), n_peer, meter.figures())


def _put(rows: np.ndarray, c: int, part: bytes) -> None:
    """Chunk ``c`` of 16-byte values into ``rows``."""
    rows[c * CHUNK:c * CHUNK + len(part) // MATCH] = np.frombuffer(part, np.uint8).reshape(-1, MATCH)


class _Returned:
    """R's own chunks coming back doubly blinded from S ("psi-d"), taken in order into ``own``
    (and the checkpoint)."""

    def __init__(self, session: Any, other: int, own: np.ndarray, first: int, ckpt: PsiCheckpoint | None) -> None:
        self.session, self.other, self.own, self.next, self.ckpt = session, other, own, first, ckpt

    def take(self, upto: int) -> None:
        """Receive every chunk up to ``upto`` (inclusive) not yet received."""
        while self.next <= min(upto, _chunks(len(self.own)) - 1):
            part = self.session.recv_bytes(self.other, "psi-d")
            _check_length(part, _chunk_len(len(self.own), self.next) * MATCH, "doubly blinded values")
            _put(self.own, self.next, part)
            if self.ckpt is not None:
                self.ckpt.append("own.bin", part)
            self.next += 1


class _Blinded:
    """Chunk c of ``k * H(item)`` for the items in ``order`` (None: as given), computed when asked."""

    def __init__(self, key: Any, items: PackedItems, order: np.ndarray | None) -> None:
        self.key, self.items, self.order = key, items, order

    def chunk(self, c: int) -> bytes:
        start, stop = c * CHUNK, min((c + 1) * CHUNK, len(self.items))
        if self.order is not None:
            return self.key.hash_blind(self.items.data, self.items.offsets, self.order[start:stop])
        data, offsets = self.items.chunk(start, stop)
        return self.key.hash_blind(data, offsets)


def _reblind(key: Any, points: bytes) -> bytes:
    try:
        return key.blind(points)
    except ValueError as exc:
        raise FrameError(f"the peer sent an invalid point: {exc}") from None


def _truncate(points: bytes) -> bytes:
    return np.frombuffer(points, dtype=np.uint8).reshape(-1, POINT)[:, :MATCH].tobytes()


def _chunks(n: int) -> int:
    return -(-n // CHUNK)


def _chunk_len(n: int, c: int) -> int:
    return min(CHUNK, n - c * CHUNK)


def _check_length(data: bytes, expected: int, what: str) -> None:
    if len(data) != expected:
        raise FrameError(f"the peer sent {len(data)} bytes of {what}, expected {expected}")

