"""A channel to one peer: typed, tagged messages over two one-way links.

Each pair of parties holds two connections: on one this party only writes, on the other only a
background reader thread reads. (An OpenSSL connection must not be read and written by two
threads at once, and a single-threaded design could deadlock when both sides send large arrays
at the same time.) The reader parses and validates every frame as it arrives, assembles large
arrays directly into their numpy buffers, and files complete messages under their tag; ``recv``
takes the oldest message of the requested tag, so independent streams never mix.

Failures are sticky and named: if the peer dies, closes, aborts or sends a bad frame, every
pending and later ``recv`` on this channel raises at once (after handing out what had already
arrived); a ``recv`` that waits longer than the timeout raises :class:`PeerTimeout`.

Memory follows the data, never the peer's word: a message may announce at most ``max_message``
bytes, and its buffer grows as its chunks arrive (by steps of at most 8x, so a peer that
announces a large message and stalls holds at most 16 MiB or 8 times what it has sent; the
data is copied about once in 8 on the way). Everything a peer has here that no ``recv`` has
taken yet (queued messages, each counted as its data plus 256 bytes, and the buffer of the
message still arriving) may not pass ``max_buffered``: a flood under a tag nobody reads fails
the channel with a :class:`FrameError` naming the peer and the tag. A receive that says what it
expects (:class:`~shaper.net.frames.Expect`: kind, dtype, shape, size) refuses a message
announced otherwise as soon as the announcement is seen, before its data.

Closing a session is graceful: this party sends CLOSE, stops writing, and keeps reading (and
dropping) what the peer still sends until the peer closes too, or ``CLOSE_GRACE`` seconds pass,
so a peer that is still sending its last messages when this party finishes does not see a
broken link; a peer whose send fails after this party's CLOSE is told that the party has ended
the session, not that the link broke.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from ..errors import FrameError, NetError, PeerError, PeerTimeout
from . import frames as F
from .config import NetConfig
from .shaping import Pacer
from .stats import Stats

_READ_AHEAD = 64 << 10
_FIRST_BUFFER = 16 << 20  # a message buffer starts at most this large ...
_GROWTH = 8  # ... and grows by at most this factor once it is full
_MESSAGE_OVERHEAD = 256  # bytes a queued message counts beyond its data (the queue's own objects)
CLOSE_GRACE = 5.0  # seconds a closing session keeps reading while a peer may still be sending


def _capacities(total: int) -> list[int]:
    """The sizes a message buffer of ``total`` bytes takes as its data arrives: growing by at
    most ``_GROWTH``, ending at ``total`` exactly (so the final one needs no trimming copy)."""
    caps = [total]
    while caps[-1] > _FIRST_BUFFER:
        caps.append(-(-caps[-1] // _GROWTH))
    return caps[::-1]


class _EndOfStream(Exception):
    pass


class _Stopped(Exception):
    """The channel failed while a message was arriving (the failure is already recorded)."""


class Channel:
    """Messages to and from one peer (use through :class:`shaper.net.Session`)."""

    def __init__(self, me: str, peer: str, out_sock: socket.socket, in_sock: socket.socket,
                 config: NetConfig, stats: Stats) -> None:
        self.me = me
        self.peer = peer
        self.config = config
        self._out = out_sock
        self._in = in_sock
        self._stats = stats
        self._pacer = Pacer(config.bandwidth)
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._queues: dict[str, deque] = {}
        self._failure: Exception | None = None
        self._peer_closed = False
        self._closing = False
        self._draining = False  # closed by this party: what still arrives is dropped
        self._buffered = 0  # bytes the peer has here that no recv has taken (see the module notes)
        self._expect: dict[str, F.Expect] = {}  # what waiting receives expect, by tag
        self._incoming: tuple | None = None  # (tag, kind, dtype, shape, nbytes) of the message arriving
        self._send_broken: Exception | None = None
        self._rbuf = bytearray(_READ_AHEAD)  # read-ahead buffer: bytes [_rstart, _rend) are unread
        self._rstart = self._rend = 0
        self._out.settimeout(config.timeout)
        self._in.settimeout(None)
        self._reader = threading.Thread(target=self._read_loop, name=f"shaper-recv-{peer}", daemon=True)
        self._reader.start()

    # -- sending -------------------------------------------------------------------------------
    def send(self, value: Any, tag: str = "") -> int:
        """Send an array, bytes, or a JSON-able value; returns the bytes put on the wire."""
        raw_tag = F.encode_tag(tag)
        if isinstance(value, np.ndarray):
            arr, desc = F.array_descriptor(value)
            data = memoryview(arr).cast("B") if arr.size else memoryview(b"")
            head = F.header(F.ARRAY, raw_tag, len(desc)) + desc
            return self._send_message(head, raw_tag, data)
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = memoryview(value).cast("B")
            if data.nbytes > self.config.max_message:
                raise ValueError(f"message of {data.nbytes} bytes exceeds max_message ({self.config.max_message})")
            head = F.header(F.BYTES, raw_tag, 8) + struct.pack("<Q", data.nbytes)
            return self._send_message(head, raw_tag, data)
        payload = F.json_payload(value, self.config.max_meta)
        return self._send_message(F.header(F.META, raw_tag, len(payload)) + payload, raw_tag, None)

    def _send_message(self, head: bytes, raw_tag: bytes, data: memoryview | None) -> int:
        total = 0
        with self._send_lock:
            self._check_sendable()
            try:
                self._write(head)
                total += len(head)
                if data is not None:
                    step = self.config.max_frame
                    for offset in range(0, data.nbytes, step):
                        chunk = data[offset:offset + step]
                        chunk_head = F.header(F.CHUNK, raw_tag, chunk.nbytes)
                        self._write(chunk_head, chunk)
                        total += len(chunk_head) + chunk.nbytes
            except BaseException as exc:
                # A message cut short leaves the link mid-frame: nothing more may be written on it.
                self._send_broken = exc if isinstance(exc, Exception) else NetError("send interrupted")
                raise
        self._stats.add_sent(self.peer, total, message=True)
        return total

    def _write(self, head: bytes, body: memoryview | None = None) -> None:
        self._pacer.pace(len(head) + (body.nbytes if body is not None else 0))
        try:
            self._out.sendall(head)
            if body is not None:
                self._out.sendall(body)
        except socket.timeout as exc:
            raise PeerTimeout(
                f"sending to party {self.peer!r} stalled for {self.config.timeout:.0f}s: the peer is not reading"
            ) from exc
        except OSError as exc:
            # The peer may have aborted and closed: its reason is (or is about to be) with the
            # reader, and it explains more than a broken pipe does.
            with self._cond:
                self._cond.wait_for(lambda: self._failure is not None or self._peer_closed, timeout=1.0)
            failure = self._failure_copy()
            if failure is None and self._peer_closed:
                failure = PeerError(f"party {self.peer!r} has ended the session and no longer reads what this "
                                    "party sends")
            raise failure or PeerError(f"connection to party {self.peer!r} is broken: {exc}") from exc

    def _check_sendable(self) -> None:
        if self._send_broken is not None:
            raise NetError(
                f"the link to party {self.peer!r} broke during an earlier send "
                f"({type(self._send_broken).__name__}: {self._send_broken}); it cannot be used again"
            )
        failure = self._failure_copy()
        if failure is not None and not isinstance(failure, FrameError):
            raise failure
        if self._closing:
            raise NetError(f"the channel to party {self.peer!r} is closed")

    # -- receiving -------------------------------------------------------------------------------
    def recv(self, tag: str = "", timeout: float | None = None,
             expect: F.Expect | None = None) -> tuple[Any, int]:
        """The oldest message with ``tag`` as (value, frame kind); waits at most ``timeout``. With
        ``expect``, a message that is not what it describes raises :class:`FrameError` (and fails
        the channel) as soon as its announcement is known, before its data has arrived."""
        F.encode_tag(tag)
        limit = self.config.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self._cond:
            try:
                while True:
                    now = time.monotonic()
                    queue = self._queues.get(tag)
                    wake = deadline
                    if queue:
                        ready_at, value, kind, charge = queue[0]
                        if expect is not None:
                            self._check_expected(expect, tag, lambda: expect.check_value(self.peer, tag, kind, value))
                        if ready_at <= now:
                            queue.popleft()
                            if not queue:
                                del self._queues[tag]  # per-round tags must not pile up
                            self._buffered -= charge
                            return value, kind
                        wake = min(deadline, ready_at)  # shaping latency still running
                    else:
                        failure = self._failure_copy()
                        if failure is not None:
                            raise failure
                        if self._peer_closed:
                            raise PeerError(f"party {self.peer!r} has ended the session; no message tagged {tag!r} "
                                            "will come")
                        if self._closing:
                            raise NetError(f"the channel to party {self.peer!r} is closed")
                        if expect is not None:
                            incoming = self._incoming
                            if incoming is not None and incoming[0] == tag:
                                self._check_expected(expect, tag, lambda: expect.check(self.peer, *incoming))
                            self._expect[tag] = expect
                    if now >= deadline:
                        raise PeerTimeout(
                            f"no message tagged {tag!r} from party {self.peer!r} within {limit:.1f}s "
                            "(the peer is stalled, slow, or waiting for a different message)"
                        )
                    self._cond.wait(wake - now)
            finally:
                if expect is not None and self._expect.get(tag) is expect:
                    del self._expect[tag]

    def _check_expected(self, expect: F.Expect, tag: str, check: Any) -> None:
        """Run ``check``; a mismatch fails the channel (the peer no longer runs the same protocol
        step: what follows on the link cannot be trusted) and is raised here."""
        try:
            check()
        except FrameError as exc:
            if self._failure is None:
                self._failure = exc
            self._cond.notify_all()
            raise

    def _failure_copy(self) -> Exception | None:
        f = self._failure
        return None if f is None else type(f)(*f.args)

    # -- the reader thread -----------------------------------------------------------------------
    def _read_loop(self) -> None:
        if self._read_messages():
            self._discard_rest()

    def _discard_rest(self) -> None:
        """After a failure: read and drop what still arrives until the stream ends (the peer
        closes or aborts), so that a peer still sending never blocks on this party or meets a
        closed socket; a closing session waits for this (its linger)."""
        scratch = memoryview(bytearray(_READ_AHEAD))
        try:
            while not self._closing and self._in.recv_into(scratch, len(scratch)):
                pass
        except Exception:  # the link is gone, or no longer authentic: nothing more to read
            pass

    def _read_messages(self) -> bool:
        """Read, check and file messages until the peer closes (False) or the channel fails (the
        failure recorded; True)."""
        try:
            while True:
                if self._failure is not None:  # a receive refused what this peer sent
                    raise _Stopped()
                head = self._read_exact(F.HEADER_SIZE, start=True)
                kind, tag_len, length = F.parse_header(head, self.peer)
                raw_tag = self._read_exact(tag_len)
                try:
                    tag = raw_tag.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise FrameError(f"malformed frame from {self.peer!r}: tag is not UTF-8") from exc
                size = F.HEADER_SIZE + tag_len + length
                if kind == F.META:
                    self._limit(length, self.config.max_meta, f"metadata under tag {tag!r}")
                    self._announce(tag, F.META, None, None, length)
                    value = F.parse_json(self._read_exact(length), self.peer)
                    nbytes = length
                elif kind == F.BYTES:
                    if length != 8:
                        raise FrameError(f"malformed bytes header from {self.peer!r}")
                    (nbytes,) = struct.unpack("<Q", self._read_exact(8))
                    self._limit(nbytes, self.config.max_message, f"message under tag {tag!r}")
                    self._announce(tag, F.BYTES, None, None, nbytes)
                    buf, wire = self._receive_data(tag, raw_tag, nbytes)
                    size += wire
                    value = buf.tobytes()  # one copy into bytes; the buffer goes
                    del buf
                elif kind == F.ARRAY:
                    self._limit(length, 512, "array header")
                    dtype, shape, nbytes = F.parse_array_descriptor(self._read_exact(length), self.peer,
                                                                    self.config.max_message)
                    self._announce(tag, F.ARRAY, dtype, shape, nbytes)
                    if nbytes:
                        buf, wire = self._receive_data(tag, raw_tag, nbytes)
                        size += wire
                        value = buf.view(dtype).reshape(shape)  # no copy: the buffer is the array's
                        del buf
                    else:
                        value = np.empty(shape, dtype=dtype)
                elif kind == F.CLOSE:
                    self._read_exact(length) if length <= self.config.max_meta else None
                    with self._cond:
                        self._peer_closed = True
                        self._cond.notify_all()
                    return False
                elif kind == F.ABORT:
                    self._limit(length, self.config.max_meta, "abort notice")
                    notice = F.parse_json(self._read_exact(length), self.peer)
                    raise PeerError(f"party {self.peer!r} aborted: {F.describe_abort(notice)}")
                else:
                    raise FrameError(f"unexpected {F.KIND_NAMES[kind]} frame from {self.peer!r}")
                self._stats.add_received(self.peer, size, message=True)
                self._deliver(tag, value, kind, nbytes + _MESSAGE_OVERHEAD)
        except _EndOfStream as exc:
            self._fail(PeerError(
                f"party {self.peer!r} dropped the connection {exc.args[0]} (the process died, was killed, "
                "or its network went away)"))
        except (FrameError, PeerError) as exc:
            self._fail(exc)
        except _Stopped:
            pass
        except (OSError, ValueError) as exc:  # ValueError: an SSL socket closed under the reader
            self._fail(PeerError(f"connection to party {self.peer!r} failed: {exc}"))
        except MemoryError:
            self._fail(PeerError(f"out of memory receiving a message from party {self.peer!r}"))
        except BaseException as exc:  # never let the reader die silently: recv would only time out
            self._fail(PeerError(f"receiving from party {self.peer!r} failed: {type(exc).__name__}: {exc}"))
        return True

    def _announce(self, tag: str, kind: int, dtype: np.dtype | None, shape: tuple | None, nbytes: int) -> None:
        """A message's head has arrived: check it against what a waiting receive expects (only if
        it is the next message of its tag), and note it as the one arriving."""
        with self._cond:
            expect = None if self._queues.get(tag) else self._expect.get(tag)
            self._incoming = (tag, kind, dtype, shape, nbytes)  # (no wake-up: a waiting receive
            # that expects something is checked here, by the reader)
        if expect is not None:
            expect.check(self.peer, tag, kind, dtype, shape, nbytes)

    def _deliver(self, tag: str, value: Any, kind: int, charge: int) -> None:
        """File a complete message under its tag (dropped once this party has closed)."""
        ready_at = time.monotonic() + self.config.latency
        with self._cond:
            self._incoming = None
            if self._draining:
                return
            self._charge(tag, charge)
            self._queues.setdefault(tag, deque()).append((ready_at, value, kind, charge))
            self._cond.notify_all()

    def _charge(self, tag: str, nbytes: int) -> None:
        """Count ``nbytes`` more held for the peer (call with the lock held); past ``max_buffered``
        the channel fails, naming the tag of the message and the tag holding the most."""
        self._buffered += nbytes
        if self._buffered > self.config.max_buffered:
            held = {t: sum(entry[3] for entry in q) for t, q in self._queues.items()}
            biggest = max(held, key=held.__getitem__) if held else tag
            raise FrameError(
                f"party {self.peer!r} has sent {self._buffered} bytes that no receive has taken (message under tag "
                f"{tag!r}; most under tag {biggest!r}); the limit (max_buffered) is {self.config.max_buffered}")

    def _limit(self, value: int, limit: int, what: str) -> None:
        if value > limit:
            raise FrameError(f"{what} from {self.peer!r} is {value} bytes; the limit is {limit}")

    def _receive_data(self, tag: str, raw_tag: bytes, total: int) -> tuple[np.ndarray, int]:
        """The ``total`` bytes of a message's CHUNK frames in a uint8 array, and their wire size.
        The buffer grows as chunks arrive (see the module notes), counted against max_buffered
        until the message is complete."""
        caps = _capacities(total)
        step = 0
        with self._cond:
            self._charge(tag, caps[0])
        held = caps[0]
        try:
            buf = np.empty(caps[0], dtype=np.uint8)
            got, wire = 0, 0
            while got < total:
                kind, tag_len, length = F.parse_header(self._read_exact(F.HEADER_SIZE), self.peer)
                if kind != F.CHUNK:
                    raise FrameError(f"{F.KIND_NAMES[kind]} frame from {self.peer!r} in the middle of a message")
                if self._read_exact(tag_len) != raw_tag:
                    raise FrameError(f"chunk from {self.peer!r} carries a different tag than its message")
                if length == 0 or length > self.config.max_frame or length > total - got:
                    raise FrameError(
                        f"chunk of {length} bytes from {self.peer!r} is oversized (max_frame {self.config.max_frame}, "
                        f"{total - got} bytes still expected)"
                    )
                if got + length > buf.size:
                    while caps[step] < got + length:
                        step += 1
                    with self._cond:
                        self._charge(tag, caps[step] - held)
                    held = caps[step]
                    grown = np.empty(caps[step], dtype=np.uint8)
                    grown[:got] = buf[:got]
                    buf = grown
                self._read_into(memoryview(buf)[got:got + length])
                got += length
                wire += F.HEADER_SIZE + tag_len + length
                if self._failure is not None:  # a receive refused this message: stop here
                    raise _Stopped()
            return buf, wire
        finally:
            with self._cond:
                self._buffered -= held

    def _read_exact(self, size: int, start: bool = False) -> bytes:
        """``size`` bytes, from the read-ahead buffer (a small frame costs one socket read)."""
        if self._rend - self._rstart < size:
            avail = self._rend - self._rstart
            if self._rstart:
                self._rbuf[:avail] = self._rbuf[self._rstart:self._rend]
                self._rstart, self._rend = 0, avail
            if len(self._rbuf) < size:
                self._rbuf.extend(bytes(size - len(self._rbuf)))
            with memoryview(self._rbuf) as mv:
                while self._rend < size:
                    self._rend += self._recv(mv[self._rend:], len(self._rbuf) - self._rend,
                                             start and self._rend == 0)
        out = bytes(self._rbuf[self._rstart:self._rstart + size])
        self._rstart += size
        return out

    def _read_into(self, view: memoryview) -> None:
        """Fill ``view``: buffered bytes first, then straight from the socket (no extra copy)."""
        got, total = 0, view.nbytes
        buffered = self._rend - self._rstart
        if buffered:
            got = min(buffered, total)
            view[:got] = self._rbuf[self._rstart:self._rstart + got]
            self._rstart += got
        while got < total:
            got += self._recv(view[got:], min(total - got, 1 << 20), False)

    def _recv(self, view: memoryview, size: int, between_messages: bool) -> int:
        n = self._in.recv_into(view, size)
        if n == 0:
            if self._closing:
                raise OSError("closed locally")
            raise _EndOfStream("between messages" if between_messages else "in the middle of a message")
        return n

    def _fail(self, exc: Exception) -> None:
        with self._cond:
            if self._closing and not isinstance(exc, FrameError):
                exc = NetError(f"the channel to party {self.peer!r} is closed")
            if self._failure is None:
                self._failure = exc
            self._cond.notify_all()

    # -- ending ---------------------------------------------------------------------------------
    def close(self, abort: dict | None = None, *, linger: float = 0.0) -> None:
        """End the channel. Cleanly (``abort`` None): send CLOSE and, with ``linger``, stop
        writing and keep reading for up to ``linger`` seconds until the peer has closed too,
        dropping what it still sends, so that its last sends never meet a closed socket
        (:meth:`Session.close` lingers). With ``abort`` (a notice from
        :func:`~shaper.net.frames.abort_notice`): send ABORT with it and drop the links at once."""
        if self._closing:
            return
        told = False
        # Tell the peer, unless a send is stuck holding the link (then just drop it: waiting
        # here would let a slow or shaped transfer hold up an abort).
        if self._send_lock.acquire(timeout=1.0):
            try:
                if self._send_broken is None and (self._failure is None or isinstance(self._failure, FrameError)):
                    kind = F.CLOSE if abort is None else F.ABORT
                    payload = F.json_payload({} if abort is None else abort, self.config.max_meta)
                    self._out.settimeout(5.0)
                    self._out.sendall(F.header(kind, b"", len(payload)) + payload)
                    told = True
            except (OSError, ValueError):
                pass
            finally:
                self._send_lock.release()
        if abort is None and told and linger > 0 and threading.current_thread() is not self._reader:
            try:
                self._out.shutdown(socket.SHUT_WR)  # the peer reads the end of the stream after CLOSE
            except OSError:
                pass
            with self._cond:
                self._draining = True
                self._buffered -= sum(entry[3] for q in self._queues.values() for entry in q)
                self._queues.clear()
            self._reader.join(timeout=linger)  # it ends at the peer's CLOSE, or the end of its stream
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for sock in (self._out, self._in):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5.0)
