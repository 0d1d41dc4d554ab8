"""What both PSI protocols share: the result type, the hello check, the size and rows that the
learner reports, and the secret shuffle (time and traffic come from :class:`shaper.net.phases.Meter`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...crypto.prg import Prg
from ...errors import ConfigError, FrameError


@dataclass
class PsiResult:
    """One party's output. ``indices``: its rows of the intersection (positions in its input) in
    the order both parties share, or None when it learns no rows. ``size``: the intersection's
    size, or None when this party is told nothing. ``peer_size``: the other party's set size."""

    indices: np.ndarray | None
    size: int | None
    peer_size: int
    stats: dict = field(default_factory=dict)


def learner(session: Any, to: Any) -> int | None:
    """The index of the one party ``to`` names ("both": None), or a ConfigError naming it."""
    if to == "both":
        return None
    if isinstance(to, int) and not isinstance(to, bool) and 0 <= to < len(session.parties):
        return to
    if isinstance(to, str) and to in session.parties:
        return session.parties.index(to)
    raise ConfigError(f"to must be 'both' or a party of the session ({session.parties}), got {to!r}")


def check_hello(mine: dict, theirs: Any) -> None:
    """Refuse to run unless the peer runs the same protocol version with the same options."""
    if not isinstance(theirs, dict) or theirs.get("version") != mine["version"]:
        got = theirs.get("version") if isinstance(theirs, dict) else theirs
        raise ConfigError(f"the peer runs PSI protocol {got!r}, this party {mine['version']!r}")
    for name in ("to", "cardinality_only", "chunk", "settings"):
        if theirs.get(name) != mine[name]:
            raise ConfigError(f"the parties disagree on {name}: this party {mine[name]!r}, the peer {theirs.get(name)!r}")
    if not isinstance(theirs.get("n"), int) or isinstance(theirs["n"], bool) or theirs["n"] < 0:
        raise FrameError(f"the peer announced an invalid set size {theirs.get('n')!r}")


def recv_size(session: Any, other: int, limit: int) -> int:
    """The intersection's size as the party that learned it reports it ("psi-size")."""
    msg = session.recv_meta(other, "psi-size")
    size = msg.get("size") if isinstance(msg, dict) else None
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= limit:
        raise FrameError(f"the peer reported an impossible intersection size {msg!r}")
    return size


def recv_rows(session: Any, other: int, order: np.ndarray, limit: int) -> np.ndarray:
    """This party's rows of the intersection: the peer sends the matches' positions in the
    shuffled ``order`` this party sent its items in ("psi-rows"), in the common order."""
    at = session.recv_array(other, "psi-rows", dtype=np.int64)
    if at.ndim != 1 or len(at) > limit or (len(at) and (at.min() < 0 or at.max() >= len(order))):
        raise FrameError("the peer's intersection rows are out of range or repeated")
    seen = np.zeros(len(order), dtype=bool)
    seen[at] = True
    if int(np.count_nonzero(seen)) != len(at):
        raise FrameError("the peer's intersection rows are out of range or repeated")
    return order[at].astype(np.int64)


def permutation(n: int, seed: bytes | None = None) -> np.ndarray:
    """A uniformly random permutation from the operating system's CSPRNG (or, reproducibly for a
    resumed run, from the AES-CTR stream of a saved secret seed)."""
    if not n:
        return np.zeros(0, np.int64)
    words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64) if seed is None else Prg(seed=seed).uint64(n)
    return np.argsort(words, kind="stable")
