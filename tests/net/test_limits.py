"""What a peer can make a party hold: memory follows the data that arrived (never an announced
size), a byte cap per channel ends a flood under a tag nobody reads, and announcements that are
not what a receive expects, or that no receive could take (a shape of (0, 2^63), dtype 'O'), are
refused by name before any data is received.

Frames are written raw on one end of a :class:`~tests.net.conftest.Link` (in-memory socket
pairs, the channel code TLS runs too), as a deviating peer would. What ends each wait is checked
by the error's type and message, never by time: the receive timeouts are hang guards only.
"""

import json
import struct
import threading
import time
import tracemalloc

import numpy as np
import pytest

from shaper.errors import FrameError, PartyError, PeerError
from shaper.net import NetConfig, Session
from shaper.net import channel as channel_module
from shaper.net import frames as F
from shaper.net.stats import Stats

from . import parties as P

GUARD = 60  # seconds: a hang guard, never what ends a test that passes
MiB = 1 << 20


def _raw(link_end, *frames):
    """Write frames straight onto ``link_end``'s socket (as a peer that deviates would)."""
    link_end._out.sendall(b"".join(frames))


def _bytes_head(tag, total):
    raw = tag.encode()
    return F.header(F.BYTES, raw, 8) + struct.pack("<Q", total)


def _array_head(tag, code, shape):
    raw = tag.encode()
    desc = struct.pack("<B", len(code)) + code.encode() + struct.pack("<B", len(shape))
    desc += struct.pack(f"<{len(shape)}Q", *shape)
    return F.header(F.ARRAY, raw, len(desc)) + desc


def _chunk(tag, data):
    return F.header(F.CHUNK, tag.encode(), len(data)) + data


def _session(end, name, peer, config):
    """A session around one channel end (``name`` talks to ``peer`` only)."""
    return Session(name, [peer, name], {peer: end}, config, Stats())


# -- allocation follows the data ------------------------------------------------------------------
def test_an_announced_gigabyte_that_stalls_is_not_allocated(link):
    """A peer announces a 1 GiB message (max_message), sends one 4 MiB chunk and stalls: the
    receiver holds a buffer for what came (at most 16 MiB), not the 1 GiB announced."""
    ln = link(NetConfig(timeout=GUARD))
    wire = _bytes_head("big", 1 << 30) + _chunk("big", bytes(4 * MiB))  # made before tracing starts
    tracemalloc.start()
    try:
        ln.a._out.sendall(wire)
        deadline = time.monotonic() + GUARD
        while tracemalloc.get_traced_memory()[1] < 4 * MiB and time.monotonic() < deadline:
            time.sleep(0.01)  # until the reader has a buffer for the chunk
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 4 * MiB <= peak < 64 * MiB, f"{peak} bytes traced for 4 MiB received"


@pytest.mark.parametrize("head", [
    _bytes_head("big", 16 << 30),
    _array_head("big", "<u8", (2 << 30,)),
], ids=["bytes", "array"])
def test_an_announcement_above_max_message_is_refused_by_name(link, head):
    ln = link(NetConfig(timeout=GUARD))
    _raw(ln.a, head)
    with pytest.raises(FrameError, match=r"from 'a' is 17179869184 bytes; the limit is 1073741824|"
                                         r"array from 'a' would be 17179869184 bytes; the limit is 1073741824"):
        ln.b.recv("big")


@pytest.mark.parametrize("total", [3, 2 * MiB + 5, 9 * MiB + 1])
def test_a_message_arrives_whole_through_every_growth_step(link, monkeypatch, total):
    """With the first buffer at 64 KiB, these sizes grow it once, twice and three times (by 8x
    at most, ending at the exact size): the bytes and the array come out as sent."""
    monkeypatch.setattr(channel_module, "_FIRST_BUFFER", 64 << 10)
    ln = link(NetConfig(timeout=GUARD, max_frame=64 << 10))
    data = np.random.default_rng(total).bytes(total)
    threading.Thread(target=ln.a.send, args=(data, "b"), daemon=True).start()
    assert ln.b.recv("b")[0] == data
    words = np.frombuffer(data[: total - total % 8], dtype="<u8").reshape(-1, 1)
    threading.Thread(target=ln.a.send, args=(words, "w"), daemon=True).start()
    got = ln.b.recv("w")[0]
    assert got.dtype == np.dtype("<u8") and got.shape == words.shape and np.array_equal(got, words)
    assert got.flags.writeable and got.flags.c_contiguous
    assert ln.b._buffered == 0  # everything taken: nothing counted any more


# -- shapes and dtypes no receive could take ----------------------------------------------------
@pytest.mark.parametrize("code, shape, pattern", [
    ("|u1", (0, 1 << 63), r"has shape \(0, 9223372036854775808\)"),
    ("|u1", (0, (1 << 63) - 1), "a dimension this large"),
    ("<u8", (1 << 62, 0), "a dimension this large"),
    ("|u1", ((1 << 64) - 1,), "would be 18446744073709551615 bytes"),
    ("|O", (1,), "disallowed dtype '|O'"),
    ("<U4", (1,), "disallowed dtype '<U4'"),
    ("|V8", (1,), "disallowed dtype '|V8'"),
    ("<m8", (1,), "disallowed dtype '<m8'"),
    ("|S0", (1,), "disallowed dtype '|S0'"),
    ("(2,)<i4", (1,), "disallowed dtype"),
    (">u4", (1,), "disallowed dtype '>u4'"),
    ("i3", (1,), "malformed array header from 'a'"),
])
def test_an_array_no_receive_could_take_is_refused_naming_the_peer(link, code, shape, pattern):
    ln = link(NetConfig(timeout=GUARD))
    _raw(ln.a, _array_head("x", code, shape))
    with pytest.raises(FrameError, match=pattern) as info:
        ln.b.recv("x")
    assert "'a'" in str(info.value)


# -- what the caller expects ---------------------------------------------------------------------
@pytest.mark.parametrize("head, call, pattern", [
    (_array_head("x", "<u8", (1 << 20,)), dict(dtype=np.uint64, shape=(10,)),
     r"party 'a' sent shape \(1048576,\) under tag 'x'; expected \(10,\)"),
    (_array_head("x", "<u8", (4, 1 << 18)), dict(shape=(None, 3)),
     r"sent shape \(4, 262144\) under tag 'x'; expected \(any, 3\)"),
    (_array_head("x", "<f8", (10,)), dict(dtype=np.uint64),
     r"party 'a' sent dtype float64 under tag 'x'; expected uint64"),
    (_bytes_head("x", 1 << 20), dict(),
     r"expected array from party 'a' under tag 'x', received bytes"),
], ids=["shape", "shape-wildcard", "dtype", "kind"])
@pytest.mark.parametrize("order", ["receive first", "announcement first"])
def test_an_announcement_that_is_not_what_the_receive_expects_fails_before_its_data(link, head, call, pattern,
                                                                                   order):
    """Only the head is sent, never the data: the receive can end only on the announcement."""
    config = NetConfig(timeout=GUARD)
    ln = link(config)
    session = _session(ln.b, "b", "a", config)
    if order == "announcement first":
        _raw(ln.a, head)
        deadline = time.monotonic() + GUARD
        while ln.b._incoming is None and time.monotonic() < deadline:
            time.sleep(0.005)  # until the reader has seen the announcement
    else:
        threading.Timer(0.05, _raw, args=(ln.a, head)).start()  # (either way, the check is the same)
    with pytest.raises(FrameError, match=pattern):
        session.recv_array("a", "x", **call)
    with pytest.raises(FrameError, match=pattern):
        session.recv("a", "anything")  # the channel has failed: what follows cannot be trusted


def test_bytes_of_another_size_than_expected_fail_before_their_data(link):
    config = NetConfig(timeout=GUARD)
    ln = link(config)
    _raw(ln.a, _bytes_head("seed", 1 << 29))
    with pytest.raises(FrameError, match=r"party 'a' sent 536870912 bytes under tag 'seed'; expected 32"):
        _session(ln.b, "b", "a", config).recv_bytes("a", "seed", size=32)


def test_expected_messages_that_arrived_before_the_receive_are_checked_too(link):
    config = NetConfig(timeout=GUARD)
    ln = link(config)
    ln.a.send(np.arange(6, dtype=np.int32).reshape(2, 3), "ok")
    ln.a.send(np.arange(6, dtype=np.int32), "bad")
    ln.wait_arrived(ln.b, "bad")
    session = _session(ln.b, "b", "a", config)
    assert session.recv_array("a", "ok", dtype=np.int32, shape=(None, 3)).shape == (2, 3)
    with pytest.raises(FrameError, match=r"sent shape \(6,\) under tag 'bad'; expected \(2, 3\)"):
        session.recv_array("a", "bad", shape=(2, 3))


# -- a byte cap per channel ------------------------------------------------------------------------
SMALL = dict(max_frame=64 << 10, max_message=1 * MiB, max_buffered=1 * MiB)


def _flood(end, count, value, tag="junk"):
    def run():
        try:
            for _ in range(count):
                end.send(value, tag)
        except Exception:  # the receiver failed the link: the flood is over
            pass

    threading.Thread(target=run, daemon=True).start()


@pytest.mark.parametrize("value, count", [(bytes(64 << 10), 100), (None, 20_000), (np.zeros(1000, np.uint8), 5000)],
                         ids=["bytes", "tiny-metadata", "arrays"])
def test_a_flood_under_a_tag_nobody_reads_ends_in_a_named_error(link, value, count):
    """6 MiB, 20 000 tiny messages or 5 MB in arrays under 'junk', 1 MiB allowed: the receive
    for another tag ends with the cap's error, naming the peer and the tag, not a timeout."""
    ln = link(NetConfig(timeout=GUARD, **SMALL))
    _flood(ln.a, count, value)
    with pytest.raises(FrameError, match=r"party 'a' has sent \d+ bytes that no receive has taken \(message under "
                                         r"tag 'junk'; most under tag 'junk'\); the limit \(max_buffered\) is 1048576"):
        ln.b.recv("wanted")
    with ln.b._cond:
        held = sum(len(q) for q in ln.b._queues.values())
    assert held * 256 <= 1 * MiB + 256  # (what the queue holds stayed under the cap)


def test_a_message_still_arriving_counts_against_the_cap(link):
    """Unread messages plus the buffer of one still arriving: 768 KiB queued, then a 1 MiB
    message starts (its buffer is its whole size: 1 MiB is below the first buffer)."""
    ln = link(NetConfig(timeout=GUARD, **SMALL))
    for _ in range(12):
        ln.a.send(bytes(64 << 10), "unread")
    ln.wait_arrived(ln.b, "unread", 12)
    _raw(ln.a, _bytes_head("next", 1 * MiB))
    with pytest.raises(FrameError, match=r"\(message under tag 'next'; most under tag 'unread'\)"):
        ln.b.recv("wanted")


def test_what_is_read_in_time_never_counts_up(link):
    """Batches of 768 KiB, each read before the next is sent: 4.5 MiB in all through a 1 MiB cap."""
    ln = link(NetConfig(timeout=GUARD, **SMALL))
    for _ in range(6):
        for _ in range(12):
            ln.a.send(bytes(64 << 10), "batch")
        for _ in range(12):
            assert len(ln.b.recv("batch")[0]) == 64 << 10
    assert ln.b._buffered == 0 and ln.b._failure is None


def flood_unread(session, count):
    """Party 1 floods party 0 under a tag party 0 never reads; party 0 waits for another."""
    if session.index == 1:
        try:
            for _ in range(count):
                session.send(0, bytes(64 << 10), tag="junk")
            session.recv(0, "never", timeout=GUARD)
        except PeerError as exc:
            return type(exc).__name__
        return None
    try:
        session.recv(1, "wanted", timeout=GUARD)
    except FrameError as exc:
        return str(exc)
    return "no error"


def test_a_flood_between_parties_ends_in_the_cap_error(runner):
    """The same flood between parties (threads, and processes over TLS): party 0 fails with the
    cap's error; party 1 learns that party 0 stopped (its abort, or its closed link)."""
    config = NetConfig(timeout=GUARD, **SMALL)
    got, flooder = runner(2, flood_unread, 200, config=config)
    assert got.startswith("party 'party1' has sent") and "tag 'junk'" in got and "max_buffered" in got
    assert flooder == "PeerError"


# -- a dead peer, a clean finish ------------------------------------------------------------------
def killed_while_sent_to(session, report_path):
    """Party 1 dies while party 0 sends it more than the links can buffer."""
    if session.index == 1:
        session.recv(0, "go")
        P._crash(session, 0)
        return "crashed"
    session.send(1, "go", tag="go")
    try:
        for _ in range(64):
            session.send(1, np.zeros(MiB, dtype=np.uint8), tag="unread")
        session.recv(1, "never", timeout=GUARD)
        outcome = ("no error", "")
    except Exception as exc:
        outcome = (type(exc).__name__, str(exc))
    with open(report_path, "w") as fh:
        json.dump(outcome, fh)
    return outcome


def test_a_peer_killed_while_being_sent_to_is_a_peer_error(runner, tmp_path):
    """The send (or the wait after it) ends on the dead link, as a PeerError naming the peer,
    not on the 60 s timeout (which would be a PeerTimeout)."""
    report = tmp_path / "report.json"
    if runner.transport == "tls":
        with pytest.raises(PartyError, match="party1.*killed by signal 9"):
            runner(2, killed_while_sent_to, str(report))
    else:
        runner(2, killed_while_sent_to, str(report))
    kind, message = json.loads(report.read_text())
    assert kind == "PeerError" and "'party1'" in message, message


def last_words(session, nbytes):
    """Party 1 sends its last messages after party 0 has finished and closed (it has seen party
    0's CLOSE): a clean finish of party 0 must not break party 1's sends."""
    if session.index == 0:
        session.recv(1, "hello")
        return "done"
    session.send(0, None, tag="hello")
    channel = session._channels["party0"]
    with channel._cond:
        assert channel._cond.wait_for(lambda: channel._peer_closed, timeout=GUARD)
    session.send(0, np.zeros(nbytes, dtype=np.uint8), tag="last")
    return "sent"


def test_a_clean_finish_never_breaks_a_peer_still_sending(runner):
    """32 MiB, more than the socket buffers hold, sent after party 0's CLOSE: party 0 keeps
    reading (and dropping) until party 1 closes, so nobody fails."""
    assert runner(2, last_words, 32 * MiB) == ["done", "sent"]


def test_a_send_after_the_peer_has_gone_says_so(link):
    """After the peer's CLOSE and its linger, a send that finds the link closed is told that the
    peer ended the session, not that the link broke."""
    ln = link(NetConfig(timeout=GUARD))
    ln.a.close(linger=0.01)  # b never closes: a stops waiting at once
    with ln.b._cond:
        assert ln.b._cond.wait_for(lambda: ln.b._peer_closed, timeout=GUARD)
    with pytest.raises(PeerError, match="party 'a' has ended the session and no longer reads"):
        for _ in range(64):
            ln.b.send(np.zeros(MiB, dtype=np.uint8), "late")


def refused_midway(session, nbytes):
    """Party 0 refuses party 1's array on its announcement (the wrong shape), then finishes
    cleanly while party 1 is still sending the array's data."""
    if session.index == 0:
        try:
            session.recv_array(1, "x", shape=(10,), timeout=GUARD)
        except FrameError as exc:
            return str(exc)
        return "no error"
    session.send(0, np.zeros(nbytes, dtype=np.uint8), tag="x")
    try:
        session.recv(0, "never", timeout=GUARD)
    except PeerError as exc:
        return str(exc)
    return "no error"


def test_a_refused_message_still_being_sent_does_not_break_the_sender(runner):
    """The refusal fails party 0's channel, but its reader keeps reading (and dropping) until
    party 1 closes: party 1's 32 MiB send completes, and party 1 learns that party 0 ended the
    session, not that the link broke."""
    refused, sender = runner(2, refused_midway, 32 * MiB)
    assert refused == "party 'party1' sent shape (33554432,) under tag 'x'; expected (10,)"
    assert sender == "party 'party0' has ended the session; no message tagged 'never' will come"
