"""Beaver triples: storage for the offline phase.

A triple is a shared (a, b, c) over Z_2^64 with c = a * b (element-wise) or C = A @ B (matrix).
Each party holds its shares; a triple must be used once and only once. :class:`TripleStore` hands
triples out in order (both parties must request the same counts in the same order, as SPMD
programs do), can be filled ahead of time by :func:`shaper.protocols.hybrid.trigen`, and saved to
/ loaded from ``.npz`` files (numpy arrays only; loading never unpickles).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...errors import ShaperError
from ...files import open_private


class TriplesExhausted(ShaperError, RuntimeError):
    """A multiplication needs more triples than the store holds (and none may be generated)."""


class TripleStore:
    """This party's shares of element-wise and matrix triples, used in order, each once."""

    def __init__(self, party: int) -> None:
        self.party = party
        self._a = np.zeros(0, dtype=np.uint64)
        self._b = np.zeros(0, dtype=np.uint64)
        self._c = np.zeros(0, dtype=np.uint64)
        self._pos = 0
        self._matrix: dict[tuple[int, int, int], list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    # -- element-wise ---------------------------------------------------------------------------
    @property
    def available(self) -> int:
        return len(self._a) - self._pos

    def add(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        if not (a.shape == b.shape == c.shape) or a.ndim != 1:
            raise ValueError("triple shares must be three 1-D arrays of the same length")
        keep = slice(self._pos, None)
        self._a = np.concatenate([self._a[keep], a.astype(np.uint64)])
        self._b = np.concatenate([self._b[keep], b.astype(np.uint64)])
        self._c = np.concatenate([self._c[keep], c.astype(np.uint64)])
        self._pos = 0

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if count > self.available:
            raise TriplesExhausted(
                f"{count} triples needed, {self.available} left; generate more (trigen) before the online phase"
            )
        s = slice(self._pos, self._pos + count)
        self._pos += count
        return self._a[s], self._b[s], self._c[s]

    # -- matrix ---------------------------------------------------------------------------------
    def add_matrix(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        m, k = a.shape
        k2, n = b.shape
        if k != k2 or c.shape != (m, n):
            raise ValueError(f"matrix triple shapes do not match: {a.shape} @ {b.shape} -> {c.shape}")
        self._matrix.setdefault((m, k, n), []).append((a, b, c))

    def available_matrix(self, m: int, k: int, n: int) -> int:
        return len(self._matrix.get((m, k, n), []))

    def take_matrix(self, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        queue = self._matrix.get((m, k, n))
        if not queue:
            raise TriplesExhausted(f"no matrix triple of shape ({m}x{k}) @ ({k}x{n}) left")
        return queue.pop(0)

    # -- storage --------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the unused triples (mode 0600: shares are secret)."""
        path = Path(path)
        arrays = {"party": np.array([self.party]), "a": self._a[self._pos:], "b": self._b[self._pos:],
                  "c": self._c[self._pos:]}
        for i, ((m, k, n), items) in enumerate(sorted(self._matrix.items())):
            for j, (a, b, c) in enumerate(items):
                arrays[f"m{i}_{j}_a"], arrays[f"m{i}_{j}_b"], arrays[f"m{i}_{j}_c"] = a, b, c
        with open_private(path) as fh:
            np.savez(fh, **arrays)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, party: int) -> "TripleStore":
        with np.load(path, allow_pickle=False) as data:
            stored = int(data["party"][0])
            if stored != party:
                raise ValueError(f"{path} holds party {stored}'s triple shares, not party {party}'s")
            store = cls(party)
            store.add(data["a"], data["b"], data["c"])
            keys = sorted(k for k in data.files if k.startswith("m") and k.endswith("_a"))
            for key in keys:
                base = key[:-2]
                store.add_matrix(data[base + "_a"], data[base + "_b"], data[base + "_c"])
        return store
