"""Traffic statistics of a session: bytes and messages per peer, rounds, time blocked.

Bytes count everything written to or read from a link (frame headers and tags included), so
they match what a network would carry (before TLS record overhead). A *round* is counted each
time this party waits for a message after having sent something since its last receive: the
number of sequential communication steps it took part in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class PeerStats:
    bytes_sent: int = 0
    bytes_received: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    recv_wait_seconds: float = 0.0


@dataclass
class Stats:
    peers: dict[str, PeerStats] = field(default_factory=dict)
    rounds: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _sent_since_recv: bool = field(default=False, repr=False, compare=False)

    def peer(self, name: str) -> PeerStats:
        with self._lock:
            return self.peers.setdefault(name, PeerStats())

    def add_sent(self, name: str, nbytes: int, message: bool = False) -> None:
        with self._lock:
            p = self.peers.setdefault(name, PeerStats())
            p.bytes_sent += nbytes
            if message:
                p.messages_sent += 1
                self._sent_since_recv = True

    def add_received(self, name: str, nbytes: int, message: bool = False) -> None:
        with self._lock:
            p = self.peers.setdefault(name, PeerStats())
            p.bytes_received += nbytes
            if message:
                p.messages_received += 1

    def add_wait(self, name: str, seconds: float) -> None:
        with self._lock:
            p = self.peers.setdefault(name, PeerStats())
            p.recv_wait_seconds += seconds
            if self._sent_since_recv:
                self.rounds += 1
                self._sent_since_recv = False

    @property
    def bytes_sent(self) -> int:
        return sum(p.bytes_sent for p in self.peers.values())

    @property
    def bytes_received(self) -> int:
        return sum(p.bytes_received for p in self.peers.values())

    @property
    def recv_wait_seconds(self) -> float:
        return sum(p.recv_wait_seconds for p in self.peers.values())

    def as_dict(self) -> dict:
        with self._lock:
            return {
                "rounds": self.rounds,
                "bytes_sent": sum(p.bytes_sent for p in self.peers.values()),
                "bytes_received": sum(p.bytes_received for p in self.peers.values()),
                "recv_wait_seconds": round(sum(p.recv_wait_seconds for p in self.peers.values()), 6),
                "peers": {name: {"bytes_sent": p.bytes_sent, "bytes_received": p.bytes_received,
                                 "messages_sent": p.messages_sent, "messages_received": p.messages_received,
                                 "recv_wait_seconds": round(p.recv_wait_seconds, 6)}
                          for name, p in sorted(self.peers.items())},
            }

    def table(self, title: str = "traffic") -> str:
        """A plain-text table (one row per peer, plus totals)."""
        d = self.as_dict()
        head = f"{'peer':<16}{'sent':>14}{'received':>14}{'msgs out':>10}{'msgs in':>10}{'wait s':>10}"
        lines = [title, head, "-" * len(head)]
        for name, p in d["peers"].items():
            lines.append(f"{name:<16}{_human(p['bytes_sent']):>14}{_human(p['bytes_received']):>14}"
                         f"{p['messages_sent']:>10}{p['messages_received']:>10}{p['recv_wait_seconds']:>10.3f}")
        lines.append("-" * len(head))
        lines.append(f"{'total':<16}{_human(d['bytes_sent']):>14}{_human(d['bytes_received']):>14}"
                     f"{'':>10}{'':>10}{d['recv_wait_seconds']:>10.3f}")
        lines.append(f"rounds: {d['rounds']}")
        return "\n".join(lines)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
