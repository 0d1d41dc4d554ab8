"""Party programs used by the network tests. Module-level so a spawned process can import them."""

import json
import os
import signal
import time

import numpy as np

from shaper.errors import FrameError, PeerError, PeerTimeout
from shaper.net.frames import HEADER, MAGIC, META, VERSION

ARRAYS = [
    np.array(True),
    np.arange(12, dtype=np.int8).reshape(3, 4),
    np.arange(5, dtype=">u2"),  # big-endian input travels as little-endian
    np.zeros((0, 3), dtype=np.int32),
    (np.arange(24, dtype=np.uint64) * np.uint64(2**61)).reshape(2, 3, 4),
    np.linspace(-1, 1, 7, dtype=np.float32),
    np.arange(20, dtype=np.float64)[::3],  # non-contiguous
    np.array([1 + 2j, -3.5j], dtype=np.complex128),
]
METAS = [{"k": [1, 2, "x"], "nested": {"a": None}}, [], "text", 42, 3.5, None, True]
BLOBS = [b"", b"\x00\x01binary\xff", bytes(range(256)) * 100]


def _crash(session, peer):
    """Simulate a killed peer: processes die for real; in-memory parties drop their sockets."""
    if _is_child():
        os.kill(os.getpid(), signal.SIGKILL)
    for ch in session._channels.values():
        ch._closing = True
        ch._out.close()
        ch._in.close()


def _is_child():
    import multiprocessing

    return multiprocessing.parent_process() is not None


def roundtrip(session):
    if session.index == 0:
        for i, a in enumerate(ARRAYS):
            session.send(1, a, tag=f"a{i}")
        for i, m in enumerate(METAS):
            session.send(1, m, tag=f"m{i}")
        for i, b in enumerate(BLOBS):
            session.send(1, b, tag=f"b{i}")
        return session.recv(1, "done")
    arrays = [session.recv_array(0, f"a{i}") for i in range(len(ARRAYS))]
    metas = [session.recv_meta(0, f"m{i}") for i in range(len(METAS))]
    blobs = [session.recv_bytes(0, f"b{i}") for i in range(len(BLOBS))]
    session.send(0, "ok", tag="done")
    return arrays, metas, blobs


def interleave(session):
    if session.index == 0:
        session.send(1, np.array([1]), tag="b")
        session.send(1, "first-a", tag="a")
        session.send(1, np.array([2]), tag="b")
        session.send(1, b"later", tag="c")
        return None
    c = session.recv_bytes(0, "c")
    a = session.recv(0, "a")
    b = [int(session.recv_array(0, "b")[0]) for _ in range(2)]
    return a, b, c


def large(session, nbytes):
    if session.index == 0:
        arr = np.frombuffer(session.prg.random_bytes(nbytes), dtype=np.uint8)
        checksum = int(arr.view(np.uint64).sum(dtype=np.uint64))
        session.send(1, arr, tag="big")
        session.recv(1, "ack")
        return checksum, session.stats.as_dict()
    t0 = time.perf_counter()
    arr = session.recv_array(0, "big", dtype=np.uint8, shape=(nbytes,))
    seconds = time.perf_counter() - t0
    session.send(0, "ack", tag="ack")
    return int(arr.view(np.uint64).sum(dtype=np.uint64)), seconds


def killed_peer(session, report_path):
    if session.index == 1:
        session.recv(0, "go")
        _crash(session, 0)
        return "crashed"
    session.send(1, "go", tag="go")
    try:
        session.recv(1, "never", timeout=30)
        outcome = ("no error", "")
    except (PeerError, PeerTimeout) as exc:
        outcome = (type(exc).__name__, str(exc))
    with open(report_path, "w") as fh:
        json.dump({"error": outcome[0], "message": outcome[1]}, fh)
    return outcome


def corrupt(session, mode):
    if session.index == 1:
        out = session._channels[session.parties[0]]._out
        if mode == "garbage":
            out.sendall(b"\x00garbage!" * 4)
        elif mode == "oversized":
            out.sendall(HEADER.pack(MAGIC, VERSION, META, 0, 0, 0, 1 << 40))
        elif mode == "wrong-type":
            session.send(0, b"not an array", tag="x")
        try:
            session.recv(0, "never", timeout=10)  # stay alive until party 0 has looked
        except PeerError:
            pass  # party 0 ends the session after it has seen the bad frame
        return None
    try:
        session.recv_array(1, "x", timeout=10)
        return ("no error", "")
    except (FrameError, PeerError) as exc:
        return (type(exc).__name__, str(exc))


def fails(session):
    if session.index == 2:
        raise ValueError("boom in party 2")
    return session.recv(2, "never")


def graceful_close(session):
    if session.index == 1:
        return "bye"
    t0 = time.monotonic()
    try:
        session.recv(1, "x", timeout=20)
    except PeerError as exc:
        return str(exc), time.monotonic() - t0
    return "no error", 0.0


def collectives(session):
    session.barrier()
    got = session.gather("hello") if session.broadcast(session.name, "hello") is None else None
    other = 1 - session.index if session.index < 2 else 0
    swapped = session.exchange(other, session.index, "swap") if session.index < 2 else None
    if session.index == 2:
        # party 0 also exchanged with party 1 only; party 2 receives nothing under "swap"
        swapped = None
    shared = session.shared_prg([0, 1]).random_bytes(16).hex() if session.index < 2 else None
    own = session.prg.random_bytes(16).hex()
    return got, swapped, shared, own


def counting(session):
    if session.index == 0:
        for k in range(3):
            session.send(1, np.zeros(1000, dtype=np.uint8), tag="z")
        session.recv(1, "done")
    else:
        for _ in range(3):
            session.recv(0, "z")
        session.send(0, None, tag="done")
    return session.stats.as_dict(), session.stats.table()


def ping_pong(session, count):
    if session.index == 0:
        session.exchange(1, 0, "warm")
        t0 = time.perf_counter()
        for i in range(count):
            session.send(1, i, tag="ping")
            session.recv(1, "pong")
        return (time.perf_counter() - t0) / count
    session.exchange(0, 0, "warm")
    for _ in range(count):
        session.send(0, session.recv(0, "ping"), tag="pong")
    return None


def reader_crash(session):
    """Party 0's reader hits an unexpected exception: recv must fail at once, not time out."""
    if session.index == 1:
        session.send(0, {"a": 1}, tag="x")
        try:
            session.recv(0, "never", timeout=10)
        except PeerError:
            pass
        return None
    import shaper.net.frames as F

    def broken(raw, peer):
        raise RuntimeError("injected")

    F.parse_json, saved = broken, F.parse_json
    try:
        t0 = time.monotonic()
        try:
            session.recv(1, "x", timeout=10)
            return ("no error", 0.0)
        except PeerError as exc:
            return (str(exc), time.monotonic() - t0)
    finally:
        F.parse_json = saved


def broken_send(session):
    if session.index == 1:
        try:
            session.recv(0, "never", timeout=10)
        except (PeerError, PeerTimeout):
            pass
        return None
    channel = session._channels[session.peers[0]]
    real = channel._write
    state = {"n": 0}

    def failing(head, body=None):
        state["n"] += 1
        if state["n"] == 2:
            raise OSError("link cut mid-message")
        return real(head, body)

    channel._write = failing
    errors = []
    for _ in range(2):
        try:
            session.send(1, np.zeros(10_000, dtype=np.uint8), tag="big")
        except Exception as exc:  # collected for the test
            errors.append(f"{type(exc).__name__}: {exc}")
    return errors


def slow_sender(session):
    if session.index == 0:
        session.send(1, np.zeros(10 << 20, dtype=np.uint8), tag="big")
    else:
        session.recv(0, "big")
    return None
