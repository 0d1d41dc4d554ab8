"""Counts of cryptographic operations in this process (the cost model behind the time).

Incremented by the batched raw operations of the schemes: encryptions (public and key-owner),
decryptions, ciphertext-plaintext products (scalar multiplications and the non-zeros of
plaintext-matrix products), ciphertext additions, re-randomisations and packed values.
``snapshot()`` returns a copy; ``diff(before)`` the change since a snapshot.
"""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_counts: Counter = Counter()

NAMES = ("encryptions", "decryptions", "ciphertext_products", "ciphertext_additions", "rerandomizations",
         "packed_values")


def add(name: str, count: int = 1) -> None:
    if count:
        with _lock:
            _counts[name] += int(count)


def snapshot() -> dict[str, int]:
    with _lock:
        return {name: _counts.get(name, 0) for name in NAMES}


def diff(before: dict[str, int]) -> dict[str, int]:
    now = snapshot()
    return {name: now[name] - before.get(name, 0) for name in NAMES}


def reset() -> None:
    with _lock:
        _counts.clear()
