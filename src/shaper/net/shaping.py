"""Network shaping inside the channel: reproduce a WAN (e.g. SHAPER's 40 Mbit/s, 40 ms) on any
machine, so benchmarks mean the same thing everywhere.

* Bandwidth: the sender paces its frames with a token bucket: a message of S bytes occupies the
  link for S * 8 / bandwidth seconds, back to back with the previous one, as on a real link.
* Latency: the receiver stamps each message when its last byte arrives and hands it out no
  earlier than ``latency`` later (one way), so a request/response costs two latencies while
  streamed messages overlap their latencies, as on a real link.
"""

from __future__ import annotations

import threading
import time


class Pacer:
    """Sender-side token bucket for one direction of one link."""

    def __init__(self, bandwidth_bits: float | None) -> None:
        self.bandwidth = bandwidth_bits
        self._free_at = 0.0
        self._lock = threading.Lock()

    def pace(self, nbytes: int) -> None:
        """Block until ``nbytes`` may go on the wire."""
        if not self.bandwidth:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._free_at)
            self._free_at = start + nbytes * 8.0 / self.bandwidth
            finish = self._free_at
        delay = finish - time.monotonic()
        if delay > 0:
            time.sleep(delay)
