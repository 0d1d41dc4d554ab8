"""The one phase recorder: steps in order with time and traffic, totals per name, and laps whose
parts add up to the whole (checked on a fake clock and fake traffic counters, not wall time)."""

from types import SimpleNamespace

import pytest

from shaper.net import phases as phases_module
from shaper.net.phases import Meter, Phases


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def world(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(phases_module.time, "perf_counter", clock)
    stats = SimpleNamespace(bytes_sent=0, bytes_received=0, recv_wait_seconds=0.0)
    return clock, stats


def test_steps_record_time_bytes_and_waiting_in_order(world):
    clock, stats = world
    events = []
    rec = Phases(SimpleNamespace(session=SimpleNamespace(stats=stats)), progress=events.append)  # an engine
    with rec.phase("keys", items=3):
        clock.now += 2.0
        stats.bytes_sent += 500
        stats.bytes_received += 70
        stats.recv_wait_seconds += 0.5
    assert rec.run("check", lambda: 42) == 42
    (keys, check) = rec.done
    assert (keys.name, keys.seconds, keys.bytes_sent, keys.bytes_received, keys.wait_seconds, keys.items) == \
        ("keys", 2.0, 500, 70, 0.5, 3)
    assert check.seconds == 0.0 and check.bytes_sent == 0
    assert [(e["phase"], e["status"]) for e in events] == [("keys", "start"), ("keys", "done"),
                                                            ("check", "start"), ("check", "done")]
    assert events[1]["bytes"] == 500 and events[1]["seconds"] == 2.0


def test_a_failed_step_is_still_recorded(world):
    clock, _ = world
    rec = Phases()
    with pytest.raises(ValueError):
        with rec.phase("bad"):
            clock.now += 1.0
            raise ValueError("boom")
    assert rec.done[0].name == "bad" and rec.done[0].seconds == 1.0


def test_laps_split_time_by_category_and_the_parts_add_up(world):
    clock, stats = world
    rec = Phases(stats)
    clock.now += 0.1  # untimed work before the first step: "other"
    for name, seconds in (("encrypt", 0.032), ("decrypt", 0.016), ("encrypt", 0.01)):
        with rec.phase(name):
            clock.now += seconds
    stats.recv_wait_seconds += 0.05  # blocked on a peer outside every step: "wait"
    clock.now += 0.05
    lap = rec.lap(("encrypt", "decrypt", "homomorphic"))
    assert lap["encrypt"] == pytest.approx(0.042) and lap["decrypt"] == pytest.approx(0.016)
    assert lap["homomorphic"] == 0.0 and lap["wait"] == pytest.approx(0.05) and lap["other"] == pytest.approx(0.1)
    parts = sum(v for k, v in lap.items() if k != "seconds")
    assert parts == pytest.approx(lap["seconds"])
    clock.now += 1.0
    second = rec.lap()
    assert second["seconds"] == pytest.approx(1.0) and second["other"] == pytest.approx(1.0)
    assert rec.totals()["encrypt"]["seconds"] == pytest.approx(0.042) and rec.seconds("decrypt") == pytest.approx(0.016)


def test_a_meter_reads_time_and_traffic_since_it_was_made(world):
    clock, stats = world
    meter = Meter(SimpleNamespace(stats=stats))  # a session
    clock.now += 1.5
    stats.bytes_sent, stats.bytes_received = 10, 20
    assert meter.figures() == {"seconds": 1.5, "bytes_sent": 10, "bytes_received": 20}
    assert Meter().read().bytes_sent == 0  # no session: time only


def test_the_session_knows_its_phase_and_keeps_the_one_that_failed(world):
    """A session's ``phase`` is the step running (nested steps restore the outer one); a step
    that raises stays the session's phase, so an abort after it tells the peers where it failed."""
    _, stats = world
    session = SimpleNamespace(stats=stats, phase=None, abort=lambda error: None)
    rec = Phases(SimpleNamespace(session=session))  # an engine holding the session
    with rec.phase("fit"):
        with rec.phase("gradient"):
            assert session.phase == "gradient"
        assert session.phase == "fit"
    assert session.phase is None
    with pytest.raises(ValueError):
        with rec.phase("fit"):
            with rec.phase("update"):
                raise ValueError("boom")
    assert session.phase == "update"
    assert Phases(stats).session is None  # counters only: no session to tell
