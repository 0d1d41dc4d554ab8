"""Latency hiding (SHAPER §3.2.3): produce chunk i+1 while chunk i is being sent.

``pipeline(produce, items, consume)`` runs ``produce`` (e.g. encrypting a chunk) in the calling
thread and ``consume`` (e.g. sending it) in a background thread, with at most ``depth`` produced
chunks waiting. Sending releases the GIL (socket writes, shaping sleeps) and the crypto kernels
run in worker processes, so the two really overlap. The report says how much time was hidden.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

_DONE = object()


@dataclass(frozen=True)
class PipelineReport:
    items: int
    seconds: float  # wall time of the whole pipeline
    produce_seconds: float  # time spent producing
    consume_seconds: float  # time spent consuming (e.g. sending)

    @property
    def overlapped_seconds(self) -> float:
        """Time during which producing and consuming ran at once."""
        return max(0.0, self.produce_seconds + self.consume_seconds - self.seconds)

    @property
    def overlap_fraction(self) -> float:
        """Share of the shorter stage hidden behind the longer one (1.0 = fully hidden)."""
        shorter = min(self.produce_seconds, self.consume_seconds)
        return min(1.0, self.overlapped_seconds / shorter) if shorter > 0 else 0.0

    def as_dict(self) -> dict:
        return {"items": self.items, "seconds": round(self.seconds, 6),
                "produce_seconds": round(self.produce_seconds, 6),
                "consume_seconds": round(self.consume_seconds, 6),
                "overlapped_seconds": round(self.overlapped_seconds, 6),
                "overlap_fraction": round(self.overlap_fraction, 4)}


def pipeline(produce: Callable[[Any], Any], items: Iterable[Any], consume: Callable[[Any], Any],
             *, depth: int = 2) -> PipelineReport:
    """Run ``consume(produce(item))`` for every item, overlapping the two stages."""
    if depth < 1:
        raise ValueError(f"pipeline depth must be >= 1, got {depth}")
    q: queue.Queue = queue.Queue(maxsize=depth)
    failure: list[BaseException] = []
    consume_time = [0.0]

    def consumer() -> None:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if failure:
                continue  # drain after a failure so the producer never blocks
            t0 = time.perf_counter()
            try:
                consume(item)
            except BaseException as exc:  # re-raised in the caller
                failure.append(exc)
            consume_time[0] += time.perf_counter() - t0

    start = time.perf_counter()
    worker = threading.Thread(target=consumer, name="shaper-pipeline", daemon=True)
    worker.start()
    produce_time = 0.0
    count = 0
    try:
        for item in items:
            if failure:
                break
            t0 = time.perf_counter()
            value = produce(item)
            produce_time += time.perf_counter() - t0
            q.put(value)
            count += 1
    finally:
        q.put(_DONE)
        worker.join()
    if failure:
        raise failure[0]
    return PipelineReport(count, time.perf_counter() - start, produce_time, consume_time[0])
