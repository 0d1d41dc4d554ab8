"""The one phase recorder: wall time, bytes sent and received, and time blocked on receives, per
named step of a job (SPU's per-kernel ``latency()``/``comm()`` idea, measured instead of declared).

    phases = Phases(session, progress=print_event)
    with phases.phase("public key", items=n):
        ...                                     # the step's work
    phases.done                                 # [Phase(name, seconds, bytes_sent, ...)], in order
    phases.totals()                             # seconds and bytes per name, summed over repeats

Repeated names accumulate (:meth:`totals`, :meth:`seconds`), so the same recorder splits an
iteration's time by category (``encrypt``, ``decrypt``, ``homomorphic`` ...) and :meth:`lap`
gives that split since the previous lap, with ``wait`` (blocked on peers) and ``other`` (the rest
of the wall time) so that the parts add up to the whole. :class:`Meter` is the bare form: time and
bytes since it was made.

Nothing here reads what the bytes carry: it counts :class:`~shaper.net.stats.TrafficStats` only.
When the source is a session (or an engine holding one), the recorder also sets the session's
``phase`` while a step runs, and leaves it on the step that raised: a party that then aborts
tells its peers in which step it failed (the step's name, never the error's text).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Meter", "Phase", "Phases"]

#: a progress callback: one dict per event (``{"event": "phase", "phase": name, "status": ...}``)
Progress = Callable[[dict], None]


def _session(source: Any) -> Any:
    """The session of ``source`` (a session, or an engine holding one), or ``None``."""
    session = getattr(source, "session", source)
    return session if hasattr(session, "phase") and hasattr(session, "abort") else None


def _stats(source: Any) -> Any:
    """The traffic statistics of a session (or of an engine holding one), or ``None``."""
    if source is None:
        return None
    if hasattr(source, "bytes_sent"):
        return source
    session = getattr(source, "session", source)
    return getattr(session, "stats", None)


@dataclass(frozen=True)
class Phase:
    """One step: seconds of wall time, this party's bytes sent and received, seconds blocked on
    receives, and the items it processed (0 when it does not count any)."""

    name: str
    seconds: float
    bytes_sent: int = 0
    bytes_received: int = 0
    wait_seconds: float = 0.0
    items: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Meter:
    """Time and traffic since it was made (or since :meth:`restart`)."""

    def __init__(self, source: Any = None) -> None:
        self.stats = _stats(source)
        self.restart()

    def _counters(self) -> tuple[int, int, float]:
        s = self.stats
        return (0, 0, 0.0) if s is None else (s.bytes_sent, s.bytes_received, s.recv_wait_seconds)

    def restart(self) -> None:
        self.started = time.perf_counter()
        self.sent0, self.received0, self.wait0 = self._counters()

    def read(self, name: str = "", items: int = 0) -> Phase:
        sent, received, wait = self._counters()
        return Phase(name, time.perf_counter() - self.started, sent - self.sent0, received - self.received0,
                     wait - self.wait0, items)

    def figures(self) -> dict[str, Any]:
        """``seconds``, ``bytes_sent``, ``bytes_received`` (rounded seconds) as a plain dict."""
        p = self.read()
        return {"seconds": round(p.seconds, 3), "bytes_sent": p.bytes_sent, "bytes_received": p.bytes_received}


class Phases:
    """Records named steps in order (see the module notes); ``progress`` gets a start and a done
    event per step."""

    def __init__(self, source: Any = None, progress: Progress | None = None) -> None:
        self.stats = _stats(source)
        self.session = _session(source)
        self.progress = progress
        self.done: list[Phase] = []
        self._lap = Meter(self.stats)
        self._lap_index = 0

    @contextmanager
    def phase(self, name: str, items: int = 0) -> Iterator[None]:
        if self.progress:
            self.progress({"event": "phase", "phase": name, "status": "start"})
        meter = Meter(self.stats)
        outer = self.session.phase if self.session is not None else None
        if self.session is not None:
            self.session.phase = name
        try:
            yield
        finally:
            step = meter.read(name, items)
            self.done.append(step)
        if self.session is not None:
            self.session.phase = outer  # only on success: a failed step stays the session's phase
        if self.progress:
            self.progress({"event": "phase", "phase": name, "status": "done", "seconds": step.seconds,
                           "bytes": step.bytes_sent, "items": items})

    def run(self, name: str, fn: Callable[[], Any], items: int = 0) -> Any:
        """``fn()`` recorded as the step ``name``; returns what it returns."""
        with self.phase(name, items):
            return fn()

    def seconds(self, name: str) -> float:
        """Seconds of every step called ``name``, summed."""
        return sum(p.seconds for p in self.done if p.name == name)

    def totals(self, steps: list[Phase] | None = None) -> dict[str, dict[str, float]]:
        """Per name (in first-seen order): seconds, bytes sent and received, items, summed."""
        out: dict[str, dict[str, float]] = {}
        for p in self.done if steps is None else steps:
            t = out.setdefault(p.name, {"seconds": 0.0, "bytes_sent": 0, "bytes_received": 0, "items": 0})
            t["seconds"] += p.seconds
            t["bytes_sent"] += p.bytes_sent
            t["bytes_received"] += p.bytes_received
            t["items"] += p.items
        return out

    def lap(self, categories: tuple[str, ...] = ()) -> dict[str, float]:
        """The split since the previous lap: ``seconds`` (wall), seconds per category (every
        name recorded since, and each of ``categories`` even if unused), ``wait`` (blocked on
        receives outside the recorded steps) and ``other`` (the rest), so that the categories,
        ``wait`` and ``other`` add up to ``seconds``."""
        whole = self._lap.read()
        steps = self.done[self._lap_index:]
        out: dict[str, float] = {"seconds": whole.seconds}
        for name in categories:
            out[name] = 0.0
        for p in steps:
            out[p.name] = out.get(p.name, 0.0) + p.seconds
        inner_wait = sum(p.wait_seconds for p in steps)
        recorded = sum(p.seconds for p in steps)
        out["wait"] = max(0.0, whole.wait_seconds - inner_wait)
        out["other"] = max(0.0, whole.seconds - recorded - out["wait"])
        self._lap.restart()
        self._lap_index = len(self.done)
        return out

    def as_dicts(self) -> list[dict[str, Any]]:
        return [p.as_dict() for p in self.done]
