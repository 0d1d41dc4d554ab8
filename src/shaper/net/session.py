"""The session every protocol receives first: who I am, channels to every peer, randomness,
configuration and traffic statistics.

    with Session.from_config("parties.toml", me="bank") as s:
        s.send("merchant", np.arange(10), tag="x")
        y = s.recv_array("merchant", tag="y", dtype=np.uint64)

Peers are addressed by name or index. ``send`` takes a numpy array (any numeric dtype and
shape), bytes, or a small JSON-able value; ``recv`` returns whatever arrived under the tag, and
``recv_array`` / ``recv_bytes`` / ``recv_meta`` also check that it is what the protocol expects
(the kind, and an array's dtype and shape or the bytes' size when given), on the message's
announcement, before its data is received.

A party that fails tells its peers only *that* it failed: ``abort(error)`` (and leaving a
``with`` block on an exception) sends the kind of error (its class name), the phase the party
was in (:class:`~shaper.net.phases.Phases` sets it) and the tag of its last message. The
error's text stays in this party's own output: it can hold the data (an id, a cell value, a
file path, column names).
Each session has its own CSPRNG (``session.prg``, AES-CTR keyed from ``os.urandom``) and can
agree shared generators (``shared_prg``) for correlated randomness: every member commits to its
random contribution before any is opened, so a member that sends last can no longer choose the
seed after reading the others' contributions (it could before); it can only abort.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..crypto.prg import Prg
from ..errors import ConfigError, FrameError, NetError
from . import frames as F
from .channel import CLOSE_GRACE, Channel
from .config import NetConfig, Party, load_parties
from .connect import connect
from .pipeline import PipelineReport, pipeline
from .stats import Stats
from .tls import TLSFiles, tls_files_for

PeerRef = str | int

#: the domain separator of :meth:`Session.shared_prg`'s commitments
SHARED_PRG_DOMAIN = b"shaper/net/shared-prg-commit/v1"


def _seed_commitment(tag: str, name: str, contribution: bytes) -> bytes:
    """SHA-256 over the domain, the tag, the member's name and its 32-byte contribution (the tag
    and name length-prefixed)."""
    h = hashlib.sha256(SHARED_PRG_DOMAIN)
    for part in (tag.encode(), name.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    h.update(contribution)
    return h.digest()


class Session:
    """One party's view of a job. Create with :meth:`from_config`, :func:`shaper.net.launch` or
    :func:`shaper.net.run_in_memory`."""

    def __init__(self, name: str, parties: Sequence[str], channels: dict[str, Channel], config: NetConfig,
                 stats: Stats) -> None:
        self.name = name
        self.parties = list(parties)
        self.index = self.parties.index(name)
        self.config = config
        self.stats = stats
        self.prg = Prg()
        #: the step this party is in, told to the peers if it aborts (set by ``Phases``)
        self.phase: str | None = None
        self._channels = channels
        self._closed = False
        self._last_tag: str | None = None

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def connect(cls, me: str, parties: Sequence[Party], config: NetConfig | None = None, *,
                tls: TLSFiles | None = None, listener: Any = None) -> "Session":
        """Connect to every other party (TLS unless ``config.insecure``)."""
        config = config or NetConfig()
        names = [p.name for p in parties]
        if me not in names:
            raise ConfigError(f"party {me!r} is not one of {names}")
        stats = Stats()
        links = connect(names.index(me), list(parties), config, tls, listener)
        channels = {peer: Channel(me, peer, out, inp, config, stats) for peer, (out, inp) in links.items()}
        return cls(me, names, channels, config, stats)

    @classmethod
    def from_config(cls, path: str | Path, me: str, *, key: str | Path | None = None,
                    config: NetConfig | None = None) -> "Session":
        """Join the job described by a parties file as party ``me``; ``key`` overrides the
        private-key path from the file. The party's ``[party.executor]`` table, if any, selects
        where this process runs its big kernel batches (:func:`shaper.kernels.set_executor`)."""
        pf = load_parties(path, config)
        me_party = pf.parties[pf.index(me)]
        if me_party.executor is not None:
            from .. import kernels

            kernels.set_executor(me_party.executor)
            kernels.get_kernel()  # join the cluster now: a bad address fails before the peers wait
        tls = None if pf.config.insecure else tls_files_for(pf, me, key)
        return cls.connect(me, pf.parties, pf.config, tls=tls)

    # -- peers --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.parties)

    @property
    def peers(self) -> list[str]:
        return [p for p in self.parties if p != self.name]

    def peer_name(self, peer: PeerRef) -> str:
        if isinstance(peer, int) and not isinstance(peer, bool):
            if not 0 <= peer < self.n:
                raise ValueError(f"party index {peer} is out of range (0..{self.n - 1})")
            peer = self.parties[peer]
        if peer == self.name:
            raise ValueError(f"party {peer!r} cannot send to or receive from itself")
        if peer not in self._channels:
            raise ValueError(f"unknown party {peer!r}; parties are {self.parties}")
        return peer  # type: ignore[return-value]

    def _channel(self, peer: PeerRef) -> Channel:
        if self._closed:
            raise NetError("the session is closed")
        return self._channels[self.peer_name(peer)]

    # -- messages -----------------------------------------------------------------------------
    def send(self, peer: PeerRef, value: Any, tag: str = "") -> int:
        """Send a numpy array, bytes, or a JSON-able value; returns bytes on the wire."""
        channel = self._channel(peer)
        self._last_tag = tag
        return channel.send(value, tag)

    def recv(self, peer: PeerRef, tag: str = "", *, timeout: float | None = None) -> Any:
        """The next message from ``peer`` under ``tag`` (waits up to the session timeout)."""
        return self._recv_timed(self._channel(peer), tag, timeout, None)[0]

    def _recv_timed(self, channel: Any, tag: str, timeout: float | None,
                    expect: F.Expect | None) -> tuple[Any, int]:
        """(value, frame kind) of the next message, the wait counted in the statistics."""
        self._last_tag = tag
        start = time.monotonic()
        try:
            return channel.recv(tag, timeout, expect)
        finally:
            self.stats.add_wait(channel.peer, time.monotonic() - start)

    def recv_array(self, peer: PeerRef, tag: str = "", *, dtype: Any = None, shape: Sequence[int | None] | None = None,
                   timeout: float | None = None) -> np.ndarray:
        """Receive an array; with ``dtype`` and ``shape`` (``None`` in a shape: any length), a
        message announced otherwise raises :class:`~shaper.errors.FrameError` before its data
        is received."""
        expect = F.expect(F.ARRAY, dtype=dtype, shape=shape)
        return self._recv_timed(self._channel(peer), tag, timeout, expect)[0]

    def recv_bytes(self, peer: PeerRef, tag: str = "", *, size: int | None = None,
                   timeout: float | None = None) -> bytes:
        """Receive bytes; with ``size``, a message announced with another length raises
        :class:`~shaper.errors.FrameError` before its data is received."""
        return self._recv_timed(self._channel(peer), tag, timeout, F.expect(F.BYTES, size=size))[0]

    def recv_meta(self, peer: PeerRef, tag: str = "", *, timeout: float | None = None) -> Any:
        """Receive a small JSON value (at most ``max_meta`` bytes)."""
        return self._recv_timed(self._channel(peer), tag, timeout, F.expect(F.META))[0]

    def broadcast(self, value: Any, tag: str = "") -> None:
        """Send the same value to every peer."""
        for peer in self.peers:
            self.send(peer, value, tag)

    def gather(self, tag: str = "", *, timeout: float | None = None) -> dict[str, Any]:
        """One message under ``tag`` from every peer."""
        return {peer: self.recv(peer, tag, timeout=timeout) for peer in self.peers}

    def exchange(self, peer: PeerRef, value: Any, tag: str = "", *, timeout: float | None = None) -> Any:
        """Send ``value`` and receive the peer's message under the same tag."""
        self.send(peer, value, tag)
        return self.recv(peer, tag, timeout=timeout)

    def barrier(self, tag: str = "barrier") -> None:
        """Wait until every party has reached this point."""
        self.broadcast(None, tag)
        self.gather(tag)

    # -- randomness -----------------------------------------------------------------------------
    def shared_prg(self, group: Iterable[PeerRef], tag: str = "shared-prg") -> Prg:
        """A generator whose stream this party shares with the parties in ``group`` (this party
        is always included) and no one else: every member contributes 32 random bytes from
        ``os.urandom``, the seed is their XOR. All members must call this with the same group and
        tag, in the same order relative to other messages.

        The contributions are committed before they are opened: every member first sends
        SHA-256(domain, tag, its name, its 32 bytes), receives every member's commitment, and
        only then sends its 32 bytes, which every member checks against the commitment (a
        mismatch raises :class:`~shaper.errors.FrameError` naming the member). Without that a
        member that sends last (rushing) could read the others' contributions and choose the
        seed; now its contribution is fixed before it has seen any other, so the seed is uniform
        as long as one member's bytes are (the 32 random bytes also hide the commitment). A
        member can still abort after the openings, as it can at any step."""
        named = {self.parties[p] if isinstance(p, int) and not isinstance(p, bool) else p for p in group}
        members = sorted({self.peer_name(p) for p in named if p != self.name} | {self.name},
                         key=self.parties.index)
        others = [p for p in members if p != self.name]
        mine = os.urandom(32)
        for p in others:
            self.send(p, _seed_commitment(tag, self.name, mine), tag + "/commit")
        # every message is read before any is judged, so that every honest member has sent all
        # it will send when the first one raises (none of them fails on a closed connection)
        commitments = {p: self.recv_bytes(p, tag + "/commit") for p in others}
        for p, c in commitments.items():
            if len(c) != 32:
                raise FrameError(f"party {p!r} sent a {len(c)}-byte seed commitment under tag {tag!r}")
        for p in others:
            self.send(p, mine, tag)
        opened = {p: self.recv_bytes(p, tag) for p in others}
        seed = bytearray(mine)
        for p, other in opened.items():
            if len(other) != 32:
                raise FrameError(f"party {p!r} sent a {len(other)}-byte seed contribution")
            if _seed_commitment(tag, p, other) != commitments[p]:
                raise FrameError(f"party {p!r} opened a seed contribution under tag {tag!r} that does not match its "
                                 "commitment")
            seed = bytearray(a ^ b for a, b in zip(seed, other))
        return Prg(seed=bytes(seed))

    # -- pipelining -------------------------------------------------------------------------------
    def send_pipelined(self, peer: PeerRef, items: Iterable[Any], produce: Callable[[Any], Any],
                       tag: str = "") -> PipelineReport:
        """Send ``produce(item)`` for each item, producing item i+1 while item i is on the wire
        (SHAPER §3.2.3 latency hiding). The receiver calls ``recv`` once per item."""
        channel = self._channel(peer)
        return pipeline(produce, items, lambda value: channel.send(value, tag))

    # -- ending -------------------------------------------------------------------------------
    def close(self) -> None:
        """End the session cleanly: peers see CLOSE, not a crash. Waits (a few seconds at most)
        until every peer has closed too, reading and dropping what they still send, so that a
        peer still sending its last messages never meets a closed link."""
        if self._closed:
            return
        self._closed = True
        linger = min(CLOSE_GRACE, self.config.timeout)
        threads = [threading.Thread(target=c.close, kwargs={"linger": linger}) for c in self._channels.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def abort(self, error: BaseException, *, phase: str | None = None) -> None:
        """End the session telling every peer that this party failed: their next ``recv`` from
        it raises ``PeerError("party '<this party>' aborted: <kind> (phase ..., last message
        ...); ...")``. Only the kind of ``error`` (its class name), the phase (``phase``, else
        :attr:`phase`) and the tag of this party's last message go to the peers, never the
        error's text: report that locally (it can hold this party's data)."""
        if not isinstance(error, BaseException):
            raise TypeError(f"abort() takes the exception that stops this party (its kind is what the peers "
                            f"learn), got {type(error).__name__}")
        if self._closed:
            return
        self._closed = True
        notice = F.abort_notice(error, phase or self.phase, self._last_tag)
        threads = [threading.Thread(target=c.close, kwargs={"abort": notice})
                   for c in self._channels.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None:
            self.abort(exc)
        else:
            self.close()

    def __repr__(self) -> str:
        return f"Session(name={self.name!r}, index={self.index}, parties={self.parties})"
