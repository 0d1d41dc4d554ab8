"""Per-epoch checkpoints of a two-party training, so an interrupted job resumes where it stopped.

Each party writes its own directory ``<root>/<party>/epoch-NNNNNN/`` after every completed epoch:
``state.json`` (epoch, configuration digest, history, and the party's secret seeds), its private
key, the peer's public key and its model state (encrypted weights or weight shares). Everything
is written with mode 0600 into a temporary directory that is renamed into place, so a crash never
leaves a half-written checkpoint. The two most recent epochs are kept, because the parties may be
one epoch apart when one of them dies; they resume from the newest epoch both have.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..crypto.serialization import key_from_bytes, key_to_bytes
from ..errors import ConfigError
from ..files import atomic_directory, write_private

KEEP = 2


class Checkpointer:
    def __init__(self, root: str | os.PathLike, party: str) -> None:
        self.dir = Path(root) / party
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)

    def epochs(self) -> list[int]:
        out = []
        for child in self.dir.glob("epoch-*"):
            if (child / "state.json").is_file():
                try:
                    out.append(int(child.name.split("-", 1)[1]))
                except ValueError:
                    continue
        return sorted(out)

    def save(self, epoch: int, state: dict, blobs: dict[str, bytes], private_key: Any, peer_key: Any) -> Path:
        final = self.dir / f"epoch-{epoch:06d}"
        with atomic_directory(final, replace=True) as tmp:  # an existing epoch goes only once this one is whole
            if private_key is not None:  # jobs whose keys live in their blobs (or nowhere) pass None
                write_private(tmp / "key.bin", key_to_bytes(private_key))
            if peer_key is not None:
                write_private(tmp / "peer.bin", key_to_bytes(peer_key))
            for name, data in blobs.items():
                write_private(tmp / f"{name}.bin", data)
            write_private(tmp / "state.json", json.dumps({**state, "epoch": epoch}, sort_keys=True).encode())
        for old in self.epochs()[:-KEEP]:
            shutil.rmtree(self.dir / f"epoch-{old:06d}", ignore_errors=True)
        return final

    def discard(self) -> None:
        """Remove every checkpoint of this party (training restarted from scratch)."""
        for epoch in self.epochs():
            shutil.rmtree(self.dir / f"epoch-{epoch:06d}", ignore_errors=True)

    def load(self, epoch: int) -> tuple[dict, dict[str, bytes], Any, Any]:
        path = self.dir / f"epoch-{epoch:06d}"
        if not (path / "state.json").is_file():
            raise ConfigError(f"no checkpoint for epoch {epoch} in {self.dir}")
        state = json.loads((path / "state.json").read_text())
        blobs = {p.stem: p.read_bytes() for p in path.glob("*.bin") if p.stem not in ("key", "peer")}
        keys = [key_from_bytes((path / f"{name}.bin").read_bytes()) if (path / f"{name}.bin").is_file() else None
                for name in ("key", "peer")]
        return state, blobs, keys[0], keys[1]
