"""Network shaping accuracy and the pipelining helper.

Exact figures (a transfer takes its serialisation time plus one latency, a request/response two
latencies, an unshaped link none) are checked in virtual time (``virtual_time`` in conftest.py),
so they hold on any machine however fast or loaded. Runs on the real clock, over both
transports, assert only what shaping guarantees on every machine: lower bounds. Overlap in the
pipeline is proven with events (a stage waits for the other), not with a stopwatch.
"""

import socket
import threading
import time

import numpy as np
import pytest

from shaper.errors import PeerTimeout
from shaper.net import NetConfig, pipeline
from shaper.net.pipeline import PipelineReport
from shaper.net.shaping import Pacer

from . import parties as P

EPS = 1e-9  # float rounding of sums of seconds, not a timing tolerance
PATIENCE = 120  # seconds before an event that must come is declared missing (a hang guard only)


# -- the token bucket -----------------------------------------------------------------------------
def test_pacer_delays_are_the_serialisation_times(virtual_time):
    clock = virtual_time
    pacer = Pacer(8e6)  # 1 MB/s
    t0 = clock.now
    pacer.pace(1_000_000)
    assert clock.sleeps == [pytest.approx(1.0, abs=EPS)] and clock.now == pytest.approx(t0 + 1.0, abs=EPS)
    pacer.pace(250_000)  # back to back with the previous message
    assert clock.sleeps[-1] == pytest.approx(0.25, abs=EPS) and clock.now == pytest.approx(t0 + 1.25, abs=EPS)
    clock.advance(10.0)  # an idle link banks no credit: the next message still takes its own time
    pacer.pace(1000)
    assert clock.sleeps[-1] == pytest.approx(0.001, abs=EPS)
    assert clock.now == pytest.approx(t0 + 11.251, abs=EPS)


def test_unshaped_pacer_never_waits(virtual_time):
    pacer = Pacer(None)
    for size in (0, 1, 10**9):
        pacer.pace(size)
    assert virtual_time.sleeps == []


# -- latency and bandwidth through a channel, in virtual time ------------------------------------
def _not_before(channel, tag, clock, when):
    """The message tagged ``tag`` is held back until exactly ``when``: refused a microsecond
    before, handed out at ``when``."""
    clock.set(when - 1e-6)
    with pytest.raises(PeerTimeout):
        channel.recv(tag, timeout=0)
    clock.set(when)
    return channel.recv(tag, timeout=0)[0]


def test_round_trip_is_two_latencies(virtual_time, link):
    clock, latency = virtual_time, 0.02
    ln = link(NetConfig(latency=latency))
    t0 = clock.now
    ln.a.send(7, tag="ping")
    ln.wait_arrived(ln.b, "ping")
    assert ln.ready_at(ln.b, "ping") == t0 + latency  # stamped on arrival: one latency per direction
    assert _not_before(ln.b, "ping", clock, t0 + latency) == 7
    ln.b.send(8, tag="pong")  # the answer leaves when the request is handed out
    ln.wait_arrived(ln.a, "pong")
    assert _not_before(ln.a, "pong", clock, t0 + latency + latency) == 8
    assert clock.sleeps == []  # latency never holds up a sender


def test_latency_overlaps_for_streamed_messages(virtual_time, link):
    """Messages sent back to back each arrive one latency after they were sent, not one
    latency after the previous one was handed out."""
    clock, latency = virtual_time, 0.05
    ln = link(NetConfig(latency=latency))
    t0 = clock.now
    for i in range(3):
        clock.set(t0 + i * 0.01)
        ln.a.send(i, tag="s")
        ln.wait_arrived(ln.b, "s", count=i + 1)
    for i in range(3):
        assert _not_before(ln.b, "s", clock, t0 + i * 0.01 + latency) == i


def test_bandwidth_shapes_a_transfer(virtual_time, link):
    clock, bandwidth, latency, nbytes = virtual_time, 80e6, 0.01, 2_000_000
    ln = link(NetConfig(bandwidth=bandwidth, latency=latency, max_frame=1 << 18))
    t0 = clock.now
    wire = ln.a.send(np.zeros(nbytes, dtype=np.uint8), tag="data")
    assert nbytes < wire < nbytes + 1000  # the array and its frame headers
    sent = clock.now
    assert sent == pytest.approx(t0 + wire * 8 / bandwidth, abs=EPS)  # every byte serialised
    assert len(clock.sleeps) > 1  # frame by frame, not in one block
    ln.wait_arrived(ln.b, "data")
    got = _not_before(ln.b, "data", clock, sent + latency)  # then one latency
    assert got.nbytes == nbytes


def test_unshaped_link_adds_no_delay(virtual_time, link):
    clock = virtual_time
    ln = link(NetConfig())
    t0 = clock.now
    for i in range(5):
        ln.a.send(np.full(100_000, i, dtype=np.uint8), tag="x")
    ln.wait_arrived(ln.b, "x", count=5)
    assert clock.sleeps == [] and clock.now == t0  # no pacing
    assert [int(ln.b.recv("x", timeout=0)[0][0]) for _ in range(5)] == list(range(5))  # at once


def test_waiting_receiver_is_woken_by_the_arrival(virtual_time, link):
    """A recv that is already waiting when the message arrives returns with it: the virtual
    clock stands still, so no timeout or latency expiry can be what wakes it."""
    ln = link(NetConfig())
    got = []
    waiter = threading.Thread(target=lambda: got.append(ln.b.recv("late", timeout=30)[0]), daemon=True)
    reads = virtual_time.reads
    waiter.start()
    # recv reads the clock for its deadline, then again holding the channel's lock, which it
    # keeps until it waits: after the second read the reader cannot queue the message before
    # recv is waiting
    deadline = time.monotonic() + PATIENCE
    while virtual_time.reads < reads + 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    ln.a.send("here", tag="late")
    waiter.join(PATIENCE)
    assert got == ["here"]


# -- on the real clock: only what shaping guarantees ---------------------------------------------
def test_round_trip_is_at_least_two_latencies(runner):
    latency = 0.02
    rtt = runner(2, P.ping_pong, 10, config=NetConfig(latency=latency))[0]
    assert rtt >= 2 * latency - EPS  # exactly two: test_round_trip_is_two_latencies


def timed_send_until_ack(session, nbytes):
    """Party 0: seconds from just before sending nbytes until the receiver's acknowledgement,
    and the bytes the message took on the wire."""
    session.barrier("start")
    if session.index == 1:
        session.recv_array(0, "data")
        session.send(0, None, tag="got")
        return None
    t0 = time.perf_counter()
    wire = session.send(1, np.zeros(nbytes, dtype=np.uint8), tag="data")
    session.recv(1, "got")
    return time.perf_counter() - t0, wire


def test_shaped_transfer_is_never_faster_than_the_link(runner):
    bandwidth, latency = 80e6, 0.01
    config = NetConfig(bandwidth=bandwidth, latency=latency)
    elapsed, wire = runner(2, timed_send_until_ack, 2_000_000, config=config)[0]
    # every byte serialised, then the data's latency and the acknowledgement's
    assert elapsed >= wire * 8 / bandwidth + 2 * latency - EPS  # exactly: test_bandwidth_shapes_a_transfer


def echo_and_nodelay(session, count):
    """Party 0 sends ``count`` pings that party 1 echoes; each party reports TCP_NODELAY of its
    TCP links (with Nagle's algorithm on, a small message waits for the acknowledgement of the
    previous one: tens of milliseconds per round trip on an unshaped link)."""
    if session.index == 0:
        echoed = []
        for i in range(count):
            session.send(1, i, tag="ping")
            echoed.append(session.recv(1, "pong"))
    else:
        for _ in range(count):
            session.send(0, session.recv(0, "ping"), tag="pong")
        echoed = None
    flags = []
    for ch in session._channels.values():
        sock = getattr(ch._out, "_raw", ch._out)  # a sealed link's TCP socket is underneath
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            flags.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    return echoed, flags


def test_unshaped_round_trips_do_not_wait(runner):
    (echoed, flags0), (_, flags1) = runner(2, echo_and_nodelay, 200)
    assert echoed == list(range(200))
    if runner.transport == "tls":
        assert flags0 and flags1 and all(flags0 + flags1)  # Nagle off on every TCP link
    else:
        assert flags0 == flags1 == []  # socket pairs: no Nagle to turn off
    # no delay added by the channel itself: test_unshaped_link_adds_no_delay


# -- the pipeline ---------------------------------------------------------------------------------
def test_pipeline_overlaps_production_and_sending():
    """consume(i) returns only once produce(i+1) has returned, which a pipeline that ran the
    stages one after the other could never do (the first wait would give up and the check
    fail)."""
    items, step = 10, 0.01
    produced = [threading.Event() for _ in range(items)]
    overlapped, sent = [], []

    def produce(i):
        time.sleep(step)
        produced[i].set()
        return i

    def consume(x):
        if x + 1 < items:
            overlapped.append(produced[x + 1].wait(0 if False in overlapped else PATIENCE))
        time.sleep(step)
        sent.append(x)

    report = pipeline(produce, range(items), consume)
    assert sent == list(range(items))
    assert overlapped == [True] * (items - 1)
    assert report.as_dict()["items"] == items
    # what the report can be relied on for on any machine: each stage's time is at least its
    # sleeps, and the whole at least the longer stage
    assert report.produce_seconds >= items * step - EPS and report.consume_seconds >= items * step - EPS
    assert report.seconds >= max(report.produce_seconds, report.consume_seconds) - EPS


def test_pipeline_report_arithmetic():
    half = PipelineReport(items=10, seconds=0.6, produce_seconds=0.5, consume_seconds=0.5)
    assert half.overlapped_seconds == pytest.approx(0.4) and half.overlap_fraction == pytest.approx(0.8)
    serial = PipelineReport(items=10, seconds=1.0, produce_seconds=0.5, consume_seconds=0.5)
    assert serial.overlapped_seconds == 0 and serial.overlap_fraction == 0
    hidden = PipelineReport(items=10, seconds=0.5, produce_seconds=0.5, consume_seconds=0.2)
    assert hidden.overlapped_seconds == pytest.approx(0.2) and hidden.overlap_fraction == pytest.approx(1.0)
    assert PipelineReport(items=0, seconds=0.0, produce_seconds=0.0, consume_seconds=0.0).overlap_fraction == 0.0
    assert half.as_dict() == {"items": 10, "seconds": 0.6, "produce_seconds": 0.5, "consume_seconds": 0.5,
                              "overlapped_seconds": 0.4, "overlap_fraction": 0.8}


def test_pipeline_propagates_consumer_errors():
    def consume(x):
        if x == 3:
            raise RuntimeError("send failed")

    with pytest.raises(RuntimeError, match="send failed"):
        pipeline(lambda i: i, range(10), consume)
    with pytest.raises(ValueError):
        pipeline(lambda i: i, [], lambda x: x, depth=0)


def pipelined_with_proof(session, items, produce_seconds):
    """Party 0 sends ``items`` arrays with ``send_pipelined``; each shaped send of item k returns
    only once item k+1 has been produced, which only a pipelined sender can do. Party 1
    receives them."""
    if session.index == 1:
        return [int(session.recv_array(0, "p")[0]) for _ in range(items)]
    channel = session._channels[session.peers[0]]
    produced = [threading.Event() for _ in range(items)]
    overlapped = []

    def produce(i):
        time.sleep(produce_seconds)
        produced[i].set()
        return np.full(100_000, i, dtype=np.uint8)

    real_send = channel.send

    def send_then_wait_for_the_next(value, tag=""):
        wire = real_send(value, tag)
        k = int(value[0])
        if k + 1 < items:
            overlapped.append(produced[k + 1].wait(0 if False in overlapped else PATIENCE))
        return wire

    channel.send = send_then_wait_for_the_next
    try:
        report = session.send_pipelined(1, range(items), produce, tag="p")
    finally:
        del channel.send
    return report.as_dict(), overlapped


def test_session_send_pipelined_hides_production_behind_shaped_sends(runner):
    # 100 kB per item at 16 Mbit/s = 50 ms on the wire; production also 50 ms.
    items, produce_seconds, bandwidth = 8, 0.05, 16e6
    (report, overlapped), received = runner(2, pipelined_with_proof, items, produce_seconds,
                                            config=NetConfig(bandwidth=bandwidth))
    assert received == list(range(items))
    assert overlapped == [True] * (items - 1)  # item k+1 was produced while item k was being sent
    # the shaping applies to pipelined sends too: each send lasts at least its serialisation time
    assert report["consume_seconds"] >= items * 100_000 * 8 / bandwidth - 1e-3  # (as_dict rounds to 1 µs)
    assert report["produce_seconds"] >= items * produce_seconds - 1e-3
    assert report["seconds"] >= max(report["produce_seconds"], report["consume_seconds"]) - 1e-3
