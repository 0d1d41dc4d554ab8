"""Network shaping accuracy and the pipelining helper."""

import time

import pytest

from shaper.net import NetConfig, pipeline

from . import parties as P


def test_round_trip_is_two_latencies(runner):
    cfg = NetConfig(latency=0.02)
    rtt = runner(2, P.ping_pong, 10, config=cfg)[0]
    assert rtt == pytest.approx(0.04, rel=0.10)


def test_bandwidth_shapes_a_transfer(runner):
    cfg = NetConfig(bandwidth=80e6, latency=0.01)
    nbytes = 2_000_000
    elapsed = runner(2, P.timed_transfer, nbytes, config=cfg)[1]
    expected = nbytes * 8 / 80e6 + 0.01  # serialisation + one-way latency
    assert elapsed == pytest.approx(expected, rel=0.10)


def test_unshaped_round_trips_are_fast(runner):
    rtt = runner(2, P.ping_pong, 200)[0]
    assert rtt < 0.005


def test_pipeline_overlaps_production_and_sending():
    def produce(i):
        time.sleep(0.05)
        return i

    sent = []

    def consume(x):
        time.sleep(0.05)
        sent.append(x)

    report = pipeline(produce, range(10), consume)
    assert sent == list(range(10))
    assert report.seconds < 0.75  # serial would take 1.0 s
    assert report.overlap_fraction > 0.75
    assert report.as_dict()["items"] == 10


def test_pipeline_propagates_consumer_errors():
    def consume(x):
        if x == 3:
            raise RuntimeError("send failed")

    with pytest.raises(RuntimeError, match="send failed"):
        pipeline(lambda i: i, range(10), consume)
    with pytest.raises(ValueError):
        pipeline(lambda i: i, [], lambda x: x, depth=0)


def test_session_send_pipelined_hides_production_behind_shaped_sends(runner):
    # 100 kB per item at 16 Mbit/s = 50 ms on the wire; production also 50 ms.
    cfg = NetConfig(bandwidth=16e6)
    report, received = runner(2, P.pipelined, 8, 0.05, config=cfg)
    assert received == list(range(8))
    assert report["overlap_fraction"] > 0.6
    assert report["seconds"] < 0.85 * (report["produce_seconds"] + report["consume_seconds"])
