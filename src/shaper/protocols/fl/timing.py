"""Where an iteration's time goes: encryption, decryption, homomorphic work, waiting for peers.

The federated-learning protocols run every cryptographic call through a :class:`Timer` (the
backend does it, :mod:`.backend`), and read the time spent blocked on a receive from the session's
statistics. What is left of the wall time is plaintext work: encoding, local gradients,
(de)serialisation, packing. The seed paper (Yang et al.) reports the encryption time per
iteration separately, so it is a category of its own here.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

CATEGORIES = ("encrypt", "decrypt", "homomorphic")


class Timer:
    """Accumulated seconds per category, and a per-iteration split (:meth:`lap`)."""

    def __init__(self, session: Any = None) -> None:
        self.session = session
        self.seconds = dict.fromkeys(CATEGORIES, 0.0)
        self._lap_seconds = dict(self.seconds)
        self._lap_wait = self._wait()
        self._lap_start = time.perf_counter()

    def _wait(self) -> float:
        return self.session.stats.recv_wait_seconds if self.session is not None else 0.0

    @contextmanager
    def span(self, category: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[category] += time.perf_counter() - start

    def lap(self) -> dict[str, float]:
        """The split since the previous lap: ``seconds`` (wall), one entry per category,
        ``wait`` (blocked on receives) and ``other`` (the rest: plaintext work)."""
        now = time.perf_counter()
        wait = self._wait()
        out = {"seconds": now - self._lap_start}
        for k in CATEGORIES:
            out[k] = self.seconds[k] - self._lap_seconds[k]
        out["wait"] = wait - self._lap_wait
        out["other"] = max(0.0, out["seconds"] - sum(out[k] for k in CATEGORIES) - out["wait"])
        self._lap_seconds = dict(self.seconds)
        self._lap_wait = wait
        self._lap_start = now
        return out


def summarise(laps: list[dict[str, float]]) -> dict[str, float]:
    """Mean per iteration of each entry of :meth:`Timer.lap` over ``laps``."""
    if not laps:
        return {}
    keys = laps[0].keys()
    return {k: sum(lap[k] for lap in laps) / len(laps) for k in keys}
