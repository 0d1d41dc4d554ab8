"""Beaver triples: storage for the offline phase.

A triple is a shared (a, b, c) over Z_2^64 with c = a * b (element-wise) or C = A @ B (matrix).
Each party holds its shares; a triple must be used once and only once. :class:`TripleStore` hands
triples out in order (both parties must request the same counts in the same order, as SPMD
programs do), can be filled ahead of time by :func:`shaper.protocols.hybrid.trigen`, and saved to
/ loaded from ``.npz`` files (numpy arrays only; loading never unpickles).

Use once, across restarts: a store loaded from ``PATH`` records what it hands out in
``PATH.consumed`` (JSON, replaced atomically and fsynced) *before* the triples leave the store,
so loading the file again (after a normal exit, an error or a ``kill -9``) never hands out a
triple twice. Element-wise triples are reserved in blocks of ``reserve`` (one fsync per block,
not per multiplication); a crash wastes at most the rest of a block, never reuses one. Because a
crash can waste a different number of triples at each party, the two parties of a reloaded store
call :meth:`TripleStore.align` before they use it: both then skip to the later of their two
positions and stay paired. The record names the file it belongs to by a random id saved in the
``.npz``; a new file written at the same path starts with nothing consumed. A file is used by one
store at a time (an exclusive lock, released by :meth:`TripleStore.close`, when the store is
collected, or when its process dies). :meth:`TripleStore.save`
writes atomically (mode 0600) and marks every triple it copies out of a loaded file as consumed
there, so the same triples never live unused in two files.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, SerializationError, ShaperError
from ...files import atomic_file, check_private_file, remove_stale, write_atomic

CONSUMED_SUFFIX = ".consumed"
CONSUMED_FORMAT = "shaper-triples-consumed/1"
#: element-wise triples reserved (recorded as consumed) at a time by a store loaded from a file
RESERVE = 1 << 16
_MATRIX_KEY = re.compile(r"^m(\d+)_(\d+)_a$")


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
        # the file this store was loaded from, and what of it is recorded as consumed there
        self._file: Path | None = None
        self._file_id = ""
        self._file_len = 0  # element-wise triples in the file
        self._base = 0  # the file index of in-memory element-wise triple 0
        self._consumed = 0  # element-wise triples of the file recorded as consumed (reserved)
        self._file_matrix: dict[tuple[int, int, int], int] = {}  # matrix triples of each shape in the file
        self._matrix_taken: dict[tuple[int, int, int], int] = {}  # taken since load, per shape
        self._matrix_consumed: dict[tuple[int, int, int], int] = {}  # recorded as consumed, per shape
        self._matrix_start: dict[tuple[int, int, int], int] = {}  # file index of the first one loaded
        self._consumed_at_load = 0
        self.reserve = RESERVE

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
        self._base += self._pos
        self._pos = 0

    def take(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if count > self.available:
            raise TriplesExhausted(
                f"{count} triples needed, {self.available} left; generate more (trigen) before the online phase"
            )
        if self._file is not None:
            end = min(self._file_len, self._base + self._pos + count)
            if end > self._consumed:  # record first: a crash after this may waste, never reuse
                self._record(consumed=min(self._file_len, max(end, self._base + self._pos + self.reserve)))
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
        shape = (m, k, n)
        queue = self._matrix.get(shape)
        if not queue:
            raise TriplesExhausted(f"no matrix triple of shape ({m}x{k}) @ ({k}x{n}) left")
        taken = self._matrix_taken.get(shape, 0)
        index = self._matrix_start.get(shape, 0) + taken  # its index among the file's triples of this shape
        if self._file is not None and index < self._file_matrix.get(shape, 0) \
                and index + 1 > self._matrix_consumed.get(shape, 0):
            self._record(matrix={**self._matrix_consumed, shape: index + 1})  # before it leaves the store
        self._matrix_taken[shape] = taken + 1
        return queue.pop(0)

    # -- the record of what is consumed -----------------------------------------------------------
    @property
    def consumed_path(self) -> Path | None:
        """Where this store records what it has handed out (None: not loaded from a file)."""
        return None if self._file is None else _consumed_path(self._file)

    def _record(self, *, consumed: int | None = None,
                matrix: dict[tuple[int, int, int], int] | None = None) -> None:
        """Durably records ``consumed`` / ``matrix`` before anything is handed out; the store's
        counters change only once the record is on disk."""
        consumed = self._consumed if consumed is None else consumed
        matrix = self._matrix_consumed if matrix is None else matrix
        assert self._file is not None
        record = {"format": CONSUMED_FORMAT, "store": self._file_id, "party": self.party,
                  "elementwise": int(consumed),
                  "matrix": {f"{m},{k},{n}": int(v) for (m, k, n), v in sorted(matrix.items())}}
        write_atomic(_consumed_path(self._file), json.dumps(record, sort_keys=True).encode())
        self._consumed = int(consumed)
        self._matrix_consumed = dict(matrix)

    def align(self, session: Any, peer: Any, tag: str = "triples-align") -> int:
        """Both parties of a reloaded store call this before using it: each skips to the later of
        the two parties' recorded positions (a crash may have wasted more triples at one party),
        so their triples stay paired. Returns how many element-wise triples this party skipped."""
        mine = {"elementwise": self._consumed if self._file is not None else 0,
                "matrix": {f"{m},{k},{n}": v for (m, k, n), v in sorted(self._matrix_consumed.items())}}
        theirs = session.exchange(peer, mine, tag)
        if not isinstance(theirs, dict) or not isinstance(theirs.get("elementwise"), int) \
                or not isinstance(theirs.get("matrix"), dict):
            raise SerializationError("the peer sent a malformed triple-store position")
        if self._file is None:
            return 0
        if self._pos or self._base != self._consumed_at_load or any(self._matrix_taken.values()):
            raise ConfigError("align a reloaded triple store before it hands out any triple")
        # the peer's file index of its next triple; ours is self._consumed (= self._base)
        skip = min(max(int(theirs["elementwise"]) - self._base, 0), len(self._a))
        if skip:
            self._record(consumed=self._base + skip)
            self._pos = skip
        for key, value in theirs["matrix"].items():
            shape = _shape_key(key)
            queue = self._matrix.get(shape, [])
            start = self._matrix_start.get(shape, 0)
            extra = min(max(int(value) - start, 0), len(queue), self._file_matrix.get(shape, 0) - start)
            if extra > 0:
                self._record(matrix={**self._matrix_consumed, shape: start + extra})
                del queue[:extra]
                self._matrix_start[shape] = start + extra
        return skip

    # -- storage --------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the unused triples (mode 0600: shares are secret), atomically, as a new store
        (nothing consumed). Triples copied out of the file this store was loaded from are then
        recorded as consumed there, so that file never hands them out again."""
        path = Path(path)
        arrays = {"party": np.array([self.party]), "store": np.frombuffer(os.urandom(16), dtype=np.uint8),
                  "a": self._a[self._pos:], "b": self._b[self._pos:], "c": self._c[self._pos:]}
        for i, ((m, k, n), items) in enumerate(sorted(self._matrix.items())):
            for j, (a, b, c) in enumerate(items):
                arrays[f"m{i}_{j}_a"], arrays[f"m{i}_{j}_b"], arrays[f"m{i}_{j}_c"] = a, b, c
        if self._file is not None and self._file.resolve() != path.resolve():
            # the copies in the new file are this store's now: the old file must not hand them out
            self._record(consumed=self._file_len,
                         matrix={**self._matrix_consumed, **self._file_matrix})
        with atomic_file(path) as fh:
            np.savez(fh, **arrays)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, party: int, *, reserve: int = RESERVE) -> "TripleStore":
        """The triples of ``path`` not yet handed out by an earlier load (its ``.consumed``
        record). ``reserve``: element-wise triples recorded as consumed at a time."""
        path = Path(path)
        if not (isinstance(reserve, int) and reserve >= 1):
            raise ValueError(f"reserve must be a positive integer, got {reserve!r}")
        remove_stale(path.parent, path.name)
        remove_stale(path.parent, path.name + CONSUMED_SUFFIX)
        check_private_file(path, "triple store (this party's triple shares)")
        lock = os.open(path, os.O_RDONLY)
        try:  # one live store per file: two would each think the same triples unused
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise ConfigError(f"{path} is in use by another triple store (close it first: one store per file "
                              "at a time, or the two would hand out the same triples)") from None
        except BaseException:
            os.close(lock)
            raise
        try:
            store = cls._read(path, party, reserve)
        except BaseException:
            os.close(lock)
            raise
        store._lock = weakref.finalize(store, os.close, lock)  # released with the store (or the process)
        return store

    def close(self) -> None:
        """Releases the file this store was loaded from (another load may then continue it)."""
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock()

    @classmethod
    def _read(cls, path: Path, party: int, reserve: int) -> "TripleStore":
        with np.load(path, allow_pickle=False) as data:
            stored = int(data["party"][0])
            if stored != party:
                raise ValueError(f"{path} holds party {stored}'s triple shares, not party {party}'s")
            if "store" in data.files:
                store_id = bytes(np.asarray(data["store"], dtype=np.uint8)).hex()
            else:  # written before store ids: the file's own digest names it
                store_id = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
            done = _read_consumed(path, store_id, party)
            store = cls(party)
            store.reserve = reserve
            a, b, c = data["a"], data["b"], data["c"]
            n = len(a)
            start = min(done["elementwise"], n)
            store.add(a[start:], b[start:], c[start:])
            store._file, store._file_id, store._file_len = path, store_id, n
            store._base, store._consumed = start, start
            store._consumed_at_load = start
            matrix: dict[tuple[int, int, int], list[str]] = {}
            keys = sorted(((int(g[1]), int(g[2]), k[:-2]) for k in data.files if (g := _MATRIX_KEY.match(k))))
            for _, _, base in keys:
                shape = tuple(data[base + "_a"].shape) + (data[base + "_b"].shape[1],)
                matrix.setdefault(shape, []).append(base)  # type: ignore[arg-type]
            for shape, bases in matrix.items():
                skip = min(done["matrix"].get(shape, 0), len(bases))
                store._file_matrix[shape] = len(bases)
                store._matrix_consumed[shape] = skip
                store._matrix_start[shape] = skip
                for base in bases[skip:]:
                    store.add_matrix(data[base + "_a"], data[base + "_b"], data[base + "_c"])
        return store


def _consumed_path(path: Path) -> Path:
    return path.with_name(path.name + CONSUMED_SUFFIX)


def _shape_key(key: str) -> tuple[int, int, int]:
    try:
        m, k, n = (int(v) for v in key.split(","))
    except ValueError:
        raise SerializationError(f"malformed matrix shape {key[:40]!r} in a triple-store record") from None
    return m, k, n


def _read_consumed(path: Path, store_id: str, party: int) -> dict[str, Any]:
    """What of the store ``store_id`` at ``path`` earlier loads handed out (nothing when the
    record is absent or belongs to an earlier file at that path)."""
    record_path = _consumed_path(path)
    try:
        raw = record_path.read_bytes()
    except FileNotFoundError:
        return {"elementwise": 0, "matrix": {}}
    try:
        record = json.loads(raw)
        if not isinstance(record, dict) or record.get("format") != CONSUMED_FORMAT:
            raise ValueError("unknown format")
        if record.get("store") != store_id:
            return {"elementwise": 0, "matrix": {}}  # the record of an earlier file at this path
        consumed = record["elementwise"]
        if not isinstance(consumed, int) or consumed < 0 or record.get("party") != party:
            raise ValueError("bad counts")
        matrix = {_shape_key(k): int(v) for k, v in record["matrix"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise SerializationError(f"{record_path} is not a readable record of consumed triples ({exc}); refusing "
                                 "to load the store: it cannot tell which triples were used already") from None
    return {"elementwise": consumed, "matrix": matrix}
