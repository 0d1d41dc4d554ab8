import socket
import threading

import pytest

from shaper.net import launch, run_in_memory


@pytest.fixture(params=["memory", "tls"])
def runner(request):
    """Run a job over the in-memory transport (threads) or as processes over loopback TLS."""
    if request.param == "memory":
        def run(n, fn, *args, **kwargs):
            return run_in_memory(n, fn, *args, **kwargs)
    else:
        def run(n, fn, *args, **kwargs):
            return launch(n, fn, *args, timeout=kwargs.pop("timeout", 120), **kwargs)
    run.transport = request.param
    return run


# -- virtual time ---------------------------------------------------------------------------------
# Shaping and timeouts are checked against a clock the test owns: the token bucket
# (shaper.net.shaping) and the channel's latency stamps and receive deadlines (shaper.net.channel)
# read this clock instead of the wall clock, a pacing sleep advances it at once, and nothing in a
# test's verdict depends on how fast the machine is. (Real-time runs keep only lower bounds,
# which shaping guarantees: a shaped link is never faster than its bandwidth and latency allow.)

class VirtualClock:
    """Stands in for the ``time`` module of shaper.net.shaping and shaper.net.channel:
    ``monotonic()`` reads virtual seconds, ``sleep(s)`` records ``s`` and advances the clock by
    it at once, ``advance``/``set`` move it from the test. Any other ``time`` function those
    modules might start to use is missing here, so such a change fails these tests loudly."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []
        self.reads = 0

    def monotonic(self) -> float:
        with self._lock:
            self.reads += 1
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self._now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now

    @property
    def now(self) -> float:
        with self._lock:
            return self._now


class VirtualCondition(threading.Condition):
    """A channel's condition whose timed waits pass in virtual time: ``wait(t)`` records ``t``,
    advances the clock by ``t`` and returns as a timed-out wait would, without sleeping. (Only
    for tests where nothing arrives while the receiver waits; untimed waits are real.)"""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout=None):
        if timeout is None:
            return super().wait()
        self.waits.append(timeout)
        self.clock.advance(max(0.0, timeout))
        return False


@pytest.fixture
def virtual_time(monkeypatch):
    """A :class:`VirtualClock` that shaper.net's shaping and channel code read instead of the
    wall clock, for this test."""
    from shaper.net import channel, shaping

    clock = VirtualClock()
    monkeypatch.setattr(shaping, "time", clock)
    monkeypatch.setattr(channel, "time", clock)
    return clock


class Link:
    """Two :class:`~shaper.net.channel.Channel` ends, ``a`` and ``b``, over in-memory socket
    pairs (the channel code that TLS runs too), driven directly by the test."""

    def __init__(self, config) -> None:
        from shaper.net.channel import Channel
        from shaper.net.stats import Stats

        ab, ba = socket.socketpair(), socket.socketpair()  # a writes ab[0], b reads ab[1]
        self.stats = {"a": Stats(), "b": Stats()}
        self.a = Channel("a", "b", ab[0], ba[1], config, self.stats["a"])
        self.b = Channel("b", "a", ba[0], ab[1], config, self.stats["b"])

    @staticmethod
    def wait_arrived(channel, tag: str, count: int = 1) -> None:
        """Block until ``count`` messages tagged ``tag`` have fully arrived at ``channel`` (its
        reader has stamped and queued them). Reads no shaper clock; the limit only turns a
        broken reader into a failure instead of a hang."""
        with channel._cond:
            ok = channel._cond.wait_for(
                lambda: len(channel._queues.get(tag, ())) >= count or channel._failure is not None, timeout=120)
        assert ok and channel._failure is None, f"message {tag!r} did not arrive: {channel._failure!r}"

    @staticmethod
    def ready_at(channel, tag: str) -> float:
        """When the oldest queued message tagged ``tag`` may be handed out (its arrival stamp
        plus the link's latency)."""
        with channel._cond:
            return channel._queues[tag][0][0]

    def close(self) -> None:
        self.a.close()
        self.b.close()


@pytest.fixture
def link():
    """``link(config)``: a :class:`Link` with that configuration, closed after the test."""
    made = []

    def make(config):
        made.append(Link(config))
        return made[-1]

    yield make
    for each in made:
        each.close()


@pytest.fixture
def connect_clock(monkeypatch):
    """A :class:`VirtualClock` that shaper.net.connect reads instead of the wall clock (its
    connect deadlines; its retry back-off sleeps advance it at once). Its ``handlers`` lists the
    threads that set up a link (a listener's handler of an incoming connection, a dialer),
    recorded as each starts (``_tune`` is its first step)."""
    from shaper.net import connect

    clock = VirtualClock()
    clock.handlers = []
    real_tune = connect._tune

    def tune(sock):
        clock.handlers.append(threading.current_thread())
        return real_tune(sock)

    monkeypatch.setattr(connect, "time", clock)
    monkeypatch.setattr(connect, "_tune", tune)
    return clock
