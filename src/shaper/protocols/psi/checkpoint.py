"""Resumable ECDH PSI: what a party keeps on disk so that a killed run continues where it
stopped instead of starting over.

``<dir>/<party>/psi-ecdh/`` holds ``state.json`` (the run's id, a digest of this party's ids and
options, its secret blinding key and, at the party that shuffles, the seed of its permutation)
and, at the party that learns, ``own.bin`` and ``peer.bin``: the doubly blinded values received
or computed so far, appended chunk by chunk. Every file is created 0600 (the key is a secret:
anyone holding it and the peer's messages could test ids). A chunk only counts once it is
completely on disk; a torn last chunk is cut off on resume. The directory is removed when the
run completes.

A run resumes only when both parties hold a state of the same run (the run id both derived at
its start) for the same ids and options; otherwise both start afresh and overwrite their state.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ...files import write_private

STATE_VERSION = 1


class PsiCheckpoint:
    """One party's resumable state (see the module)."""

    def __init__(self, root: str | os.PathLike, party: str, digest: str) -> None:
        self.dir = Path(root) / party / "psi-ecdh"
        self.digest = digest

    @staticmethod
    def digest_of(data: bytes, offsets: Any, options: str) -> str:
        h = hashlib.sha256()
        for part in (options.encode(), offsets, data):
            h.update(memoryview(part).nbytes.to_bytes(8, "little"))
            h.update(part)
        return h.hexdigest()

    def load(self) -> dict | None:
        """The saved state, or None when there is none for these ids and options."""
        try:
            state = json.loads((self.dir / "state.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or state.get("digest") != self.digest:
            return None
        return state

    def start(self, run: str, key: bytes, seed: bytes | None) -> None:
        """A fresh state for run ``run`` (its files emptied)."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name in ("own.bin", "peer.bin"):
            write_private(self.dir / name, b"")
        state: dict[str, Any] = {"version": STATE_VERSION, "digest": self.digest, "run": run, "key": key.hex(),
                                 "seed": None if seed is None else seed.hex()}
        write_private(self.dir / "state.json.tmp", json.dumps(state).encode())
        os.replace(self.dir / "state.json.tmp", self.dir / "state.json")

    def read_chunks(self, name: str, out: np.ndarray, chunk: int) -> int:
        """Reads the complete chunks of ``name`` (``chunk`` rows of ``out`` each; the last may be
        shorter) into ``out``, cuts off a torn chunk after them, and returns how many there are."""
        path = self.dir / name
        have = path.stat().st_size if path.exists() else 0
        row = out.shape[1] * out.itemsize
        rows = min(have // row, len(out))
        rows = rows if rows == len(out) else rows - rows % chunk
        if rows:
            with open(path, "rb") as fh:
                if fh.readinto(memoryview(out[:rows]).cast("B")) != rows * row:
                    raise OSError(f"{path} shrank while it was read")
        if have != rows * row:
            with open(path, "r+b") as fh:
                fh.truncate(rows * row)
        return -(-rows // chunk)

    def append(self, name: str, data: bytes) -> None:
        with open(self.dir / name, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
