"""Per-epoch checkpoints of a two-party training, so an interrupted job resumes where it stopped.

Each party writes its own directory ``<root>/<party>/epoch-NNNNNN/`` after every completed epoch:
``state.json`` (epoch, configuration digest, history, and the party's secret seeds), its private
key, the peer's public key and its model state (encrypted weights or weight shares). Everything
is written with mode 0600 into a temporary directory whose files are fsynced before it is
renamed into place (and the parent directory fsynced), so a crash or a full disk never leaves a
half-written checkpoint; ``state.json`` lists the SHA-256 of every other file. The two most recent
epochs are kept, because the parties may be one epoch apart when one of them dies; they resume
from the newest epoch both have. An older epoch is removed only once the new one is in place.

A checkpoint that is corrupt all the same (a garbled or truncated ``state.json``, a missing or
altered file: a disk fault, a hand edit) is skipped with a :class:`CheckpointWarning`, so the
parties fall back to the newest complete one; :class:`~shaper.errors.SerializationError` is
raised only when checkpoints exist and none of them is usable. What a killed save left behind
(temporaries holding keys and seeds) is removed when the checkpointer opens the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

from ..crypto.serialization import key_from_bytes, key_to_bytes
from ..errors import ConfigError, SerializationError
from ..files import (
    atomic_directory,
    check_private_file,
    remove_stale,
    remove_tree,
    write_private,
)

KEEP = 2
STATE_FILE = "state.json"
MANIFEST = "__files__"  # state.json key: {file name: sha256 hex} of the epoch's other files


class CheckpointWarning(UserWarning):
    """A checkpoint is corrupt and was skipped (the previous complete one is used instead)."""


class Checkpointer:
    def __init__(self, root: str | os.PathLike, party: str) -> None:
        self.dir = Path(root) / party
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        remove_stale(self.dir)  # temporaries of a save that was killed (they may hold keys)
        self._warned: set[str] = set()

    def _epoch_dirs(self) -> list[tuple[int, Path]]:
        out = []
        for child in self.dir.glob("epoch-*"):
            try:
                out.append((int(child.name.split("-", 1)[1]), child))
            except ValueError:
                continue
        return sorted(out)

    def epochs(self) -> list[int]:
        """The epochs with a complete, intact checkpoint, oldest first. A corrupt one is left out
        with a :class:`CheckpointWarning`; :class:`~shaper.errors.SerializationError` when there
        are checkpoints and none is usable."""
        found = self._epoch_dirs()
        good, bad = [], []
        for epoch, path in found:
            problem = _check(path)
            if problem is None:
                good.append(epoch)
                continue
            bad.append(f"epoch {epoch}: {problem}")
            if path.name not in self._warned:
                self._warned.add(path.name)
                warnings.warn(f"checkpoint {path} is unusable ({problem}); falling back to an earlier one",
                              CheckpointWarning, stacklevel=2)
        if found and not good:
            raise SerializationError(f"no usable checkpoint in {self.dir}: " + "; ".join(bad)
                                     + " (remove the directory to start afresh)")
        return good

    def save(self, epoch: int, state: dict, blobs: dict[str, bytes], private_key: Any, peer_key: Any) -> Path:
        final = self.dir / f"epoch-{epoch:06d}"
        files: dict[str, bytes] = {}
        if private_key is not None:  # jobs whose keys live in their blobs (or nowhere) pass None
            files["key.bin"] = key_to_bytes(private_key)
        if peer_key is not None:
            files["peer.bin"] = key_to_bytes(peer_key)
        for name, data in blobs.items():
            files[f"{name}.bin"] = data
        manifest = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
        body = json.dumps({**state, "epoch": epoch, MANIFEST: manifest}, sort_keys=True).encode()
        # an existing epoch (a re-run after a resume) is moved aside only once this one is whole
        with atomic_directory(final, replace=True) as tmp:
            for name, data in files.items():
                write_private(tmp / name, data)
            write_private(tmp / STATE_FILE, body)
        # the older epochs go only now that this one is durable in place; corrupt ones as well
        keep = {final.name}
        for e, path in reversed(self._epoch_dirs()):
            if len(keep) >= KEEP:
                break
            if path.name not in keep and _check(path) is None:
                keep.add(path.name)
        for _, path in self._epoch_dirs():
            if path.name not in keep:
                remove_tree(path)  # gone in one step: never a half epoch under its name
        return final

    def discard(self) -> None:
        """Remove every checkpoint of this party (training restarted from scratch)."""
        for _, path in self._epoch_dirs():
            remove_tree(path)

    def load(self, epoch: int) -> tuple[dict, dict[str, bytes], Any, Any]:
        path = self.dir / f"epoch-{epoch:06d}"
        if not path.is_dir():
            raise ConfigError(f"no checkpoint for epoch {epoch} in {self.dir}")
        problem = _check(path)
        if problem is not None:
            raise SerializationError(f"checkpoint {path} is unusable: {problem}")
        for secret in [path / STATE_FILE, *sorted(path.glob("*.bin"))]:  # keys, mask seeds, shares: 0600
            check_private_file(secret, "checkpoint file")
        state = json.loads((path / STATE_FILE).read_bytes())
        state.pop(MANIFEST, None)
        blobs = {p.stem: p.read_bytes() for p in path.glob("*.bin") if p.stem not in ("key", "peer")}
        keys = [key_from_bytes((path / f"{name}.bin").read_bytes()) if (path / f"{name}.bin").is_file() else None
                for name in ("key", "peer")]
        return state, blobs, keys[0], keys[1]


def _read(path: Path, name: str) -> bytes | str:
    """The bytes of ``path / name``, or what is wrong with it (missing, unreadable)."""
    try:
        return (path / name).read_bytes()
    except FileNotFoundError:
        return f"{name} is missing"
    except OSError as exc:
        return f"{name} unreadable ({exc.strerror or exc})"


def _check(path: Path) -> str | None:
    """None when the checkpoint in ``path`` is complete and intact, else what is wrong."""
    raw = _read(path, STATE_FILE)
    if isinstance(raw, str):
        return raw
    try:
        state = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return f"{STATE_FILE} is truncated or garbled"
    if not isinstance(state, dict) or not isinstance(state.get("epoch"), int):
        return f"{STATE_FILE} is not a checkpoint state"
    manifest = state.get(MANIFEST)
    if manifest is None:  # written before manifests: the state alone is checked
        return None
    if not isinstance(manifest, dict):
        return f"{STATE_FILE} has a malformed file list"
    for name, digest in sorted(manifest.items()):
        if "/" in name or name.startswith("."):
            return f"{STATE_FILE} lists a file outside the checkpoint ({name[:40]!r})"
        data = _read(path, name)
        if isinstance(data, str):
            return data
        if hashlib.sha256(data).hexdigest() != digest:
            return f"{name} does not match its checksum (truncated or altered)"
    return None
