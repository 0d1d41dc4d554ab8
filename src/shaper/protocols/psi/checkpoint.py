"""Resumable PSI: what a party keeps on disk so that a killed run continues where it stopped
instead of starting over.

``<dir>/<party>/psi-<protocol>/`` holds ``state.json`` (the run's id, a digest of this party's ids
and options, and the run's secrets: for ECDH the blinding key and, at the party that shuffles,
the seed of its permutation; for FNP the client's private key and the server's copy of the
client's public key) and append-only files of what the run has computed so far:

* ECDH, at the party that learns: ``own.bin`` and ``peer.bin``, the doubly blinded values,
  chunk by chunk;
* FNP, at the server: ``results.bin``, its encrypted evaluations, block of bins by block.

Every file is created 0600 (the secrets would let anyone holding the peer's messages test ids
or decrypt). ``state.json`` is replaced atomically (temporary file, fsync, rename, fsync of the
directory); a chunk or block only counts once it is completely on disk (fsynced), an append that
fails (a full disk) is cut off again, and a torn last one (a kill) is cut off on resume. A
``state.json`` that is unreadable all the same (garbled by a disk fault) is not resumed: a
:class:`PsiStateWarning` says so and the run starts afresh. What a killed save left behind (a
temporary holding the secrets) is removed when the state is next opened. The directory is removed
when the run completes.

A run resumes only when both parties hold a state of the same run (the run id both derived at
its start, :func:`open_run`) for the same ids and options; otherwise both start afresh and
overwrite their state.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ...files import (
    append_durable,
    check_private_file,
    fsync_directory,
    remove_stale,
    remove_tree,
    write_atomic,
)

STATE_VERSION = 1


class PsiStateWarning(UserWarning):
    """A saved PSI state is unreadable and was not resumed (the run starts afresh)."""


class PsiCheckpoint:
    """One party's resumable state (see the module)."""

    def __init__(self, root: str | os.PathLike, party: str, digest: str, protocol: str = "ecdh") -> None:
        self.dir = Path(root) / party / f"psi-{protocol}"
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
        remove_stale(self.dir)  # temporaries of a save that was killed (they hold the secrets)
        try:
            check_private_file(self.dir / "state.json", "PSI state (it holds the run's secrets)")
            raw = (self.dir / "state.json").read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            warnings.warn(f"{self.dir / 'state.json'} is unreadable ({exc}); starting the run afresh",
                          PsiStateWarning, stacklevel=2)
            return None
        try:
            state = json.loads(raw)
            if not isinstance(state, dict) or not isinstance(state.get("run"), str):
                raise ValueError("not a PSI state")
        except (ValueError, UnicodeDecodeError):
            warnings.warn(f"{self.dir / 'state.json'} is truncated or garbled; starting the run afresh",
                          PsiStateWarning, stacklevel=2)
            return None
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or state.get("digest") != self.digest:
            return None
        return state

    def start(self, run: str, secrets: dict[str, bytes | None], files: tuple[str, ...]) -> None:
        """A fresh state for run ``run`` holding ``secrets`` (hex in state.json), with ``files``
        emptied."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        remove_stale(self.dir)
        # the old run's state goes first: a crash below leaves no state, never a state that
        # would read another run's files
        if (self.dir / "state.json").exists():
            os.unlink(self.dir / "state.json")
            fsync_directory(self.dir)
        for name in files:
            write_atomic(self.dir / name, b"")
        state: dict[str, Any] = {"version": STATE_VERSION, "digest": self.digest, "run": run,
                                 **{k: None if v is None else v.hex() for k, v in secrets.items()}}
        write_atomic(self.dir / "state.json", json.dumps(state).encode())

    def secret(self, state: dict, name: str) -> bytes | None:
        value = state.get(name)
        return None if value is None else bytes.fromhex(value)

    def read_blocks(self, name: str, sizes: list[int]) -> tuple[int, bytes]:
        """(complete blocks of ``name``, their bytes) given each block's byte size; a torn block
        after them is cut off."""
        path = self.dir / name
        data = path.read_bytes() if path.exists() else b""
        done, used = 0, 0
        while done < len(sizes) and used + sizes[done] <= len(data):
            used += sizes[done]
            done += 1
        if used != len(data):
            with open(path, "r+b") as fh:
                fh.truncate(used)
        return done, data[:used]

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
        """Appends a chunk or block, durable when this returns; a failed append is cut off."""
        append_durable(self.dir / name, data)

    def clear(self) -> None:
        remove_tree(self.dir)


def open_run(session: Any, other: int, hello: dict, items: Any, checkpoint_dir: str | None, resume: bool,
             protocol: str, extra: str = "") -> tuple[dict, PsiCheckpoint | None, dict | None]:
    """Exchange the hellos, with the id of the run this party could resume. Returns (the peer's
    hello, the checkpoint or None, the saved state when both parties resume the same run, else
    None: then call :func:`start_run`). ``extra``: more of this party's inputs the saved work
    depends on (a digest of FNP's payloads)."""
    from .common import check_hello

    ckpt = state = None
    if checkpoint_dir is not None:
        digest = PsiCheckpoint.digest_of(items.data, items.offsets, json.dumps(hello, sort_keys=True) + extra)
        ckpt = PsiCheckpoint(checkpoint_dir, session.name, digest, protocol)
        state = ckpt.load() if resume else None
    theirs = session.exchange(other, {**hello, "run": None if state is None else state["run"]}, "psi-hello")
    check_hello(hello, theirs)
    resuming = state is not None and theirs.get("run") == state["run"]
    return theirs, ckpt, state if resuming else None


def start_run(session: Any, other: int, ckpt: PsiCheckpoint | None, secrets: dict[str, bytes | None],
              files: tuple[str, ...]) -> None:
    """A new run: both parties' random tokens make its id (a resume needs the same run at both),
    and the checkpoint, if any, starts afresh with this party's ``secrets``."""
    token = os.urandom(16).hex()
    peer_token = session.exchange(other, token, "psi-run")
    if ckpt is not None:
        ckpt.start(hashlib.sha256("".join(sorted([token, str(peer_token)])).encode()).hexdigest(), secrets, files)
