"""Commit before open: every party's payload opened to every party so that none can choose what
it opens after seeing the others' (a party that sends last, "rushing", reads every honest share
first). Each party draws a fresh 32-byte nonce from ``os.urandom`` and broadcasts
c_i = SHA-256(domain, tag, i, nonce, payload); only once it holds every commitment does it
broadcast (nonce, payload); every opening is checked against its commitment before any is
returned. Binding by SHA-256's collision resistance, hiding by the 256-bit nonce (SHA-256 as a
random oracle); the tag and the committer's index are inside the hash, so a commitment can be
neither copied from another party nor replayed from another opening. What a party can still
do: abort after seeing the openings, as it can at any step.

Used by the threshold protocols' key openings and joint seeds
(:mod:`shaper.protocols.threshold_ckks.commit`) and by the active engine's MAC check
(:mod:`shaper.protocols.active`).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ..errors import FrameError, KeyValidationError

__all__ = ["DOMAIN", "NONCE_BYTES", "commitment", "open_committed"]

#: the commitment's domain separator
DOMAIN = b"shaper/threshold-ckks/commit-open/v1"
#: bytes of the fresh nonce each commitment hides its payload with
NONCE_BYTES = 32


def commitment(tag: str, index: int, nonce: bytes, payload: bytes | memoryview) -> bytes:
    """SHA-256 over the domain separator, the tag, the committing party's index, the nonce and the
    payload (the tag and the payload length-prefixed, so that no two inputs share an encoding)."""
    h = hashlib.sha256(DOMAIN)
    t = tag.encode()
    h.update(len(t).to_bytes(8, "little"))
    h.update(t)
    h.update(int(index).to_bytes(8, "little"))
    h.update(nonce)
    h.update(len(payload).to_bytes(8, "little"))
    h.update(payload)
    return h.digest()


def open_committed(session: Any, payload: bytes, tag: str, *,
                   error: type[Exception] = KeyValidationError) -> list[bytes]:
    """Every party's ``payload``, in party order, opened with commit-before-open (module notes):
    broadcast the commitment, gather every commitment, broadcast (nonce, payload), gather every
    opening, check them all. Raises ``error`` (default :class:`~shaper.errors.KeyValidationError`)
    naming every party whose opening does not match its commitment under ``tag``, before anything
    opened is returned; :class:`~shaper.errors.FrameError` for a malformed commitment. Every
    party calls this with the same tag, in the same order relative to its other messages."""
    payload = bytes(payload)
    nonce = os.urandom(NONCE_BYTES)
    session.broadcast(commitment(tag, session.index, nonce, payload), tag + "/commit")
    # every message of a round is read before any is judged: when the first honest party raises,
    # every other has sent all it will send (none fails on a closed connection instead)
    commitments = {peer: session.recv_bytes(peer, tag + "/commit") for peer in session.peers}
    for peer, c in commitments.items():
        if len(c) != hashlib.sha256().digest_size:
            raise FrameError(f"party {peer!r} sent a {len(c)}-byte commitment under tag {tag!r}")
    session.broadcast(nonce + payload, tag + "/open")
    openings = {peer: session.recv_bytes(peer, tag + "/open") for peer in session.peers}
    bad = []
    for peer, got in openings.items():
        view = memoryview(got)
        if len(got) < NONCE_BYTES or commitment(tag, session.parties.index(peer), bytes(view[:NONCE_BYTES]),
                                                view[NONCE_BYTES:]) != commitments[peer]:
            bad.append(peer)
    if bad:
        who = ", ".join(repr(p) for p in bad)
        raise error(f"party {who} opened a value under tag {tag!r} that does not match its commitment (a share "
                    "chosen after the others were seen?); nothing opened was used")
    return [payload if p == session.name else openings[p][NONCE_BYTES:] for p in session.parties]
