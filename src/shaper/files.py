"""Files holding secrets (private keys, checkpoints, triples): created with mode 0600 before any
byte is written, so no other user can ever read them, whatever the umask."""

from __future__ import annotations

import os
from typing import BinaryIO


def open_private(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for binary writing (created or truncated) with mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode on O_CREAT: force it
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` with mode 0600 (all of it: short writes are retried)."""
    with open_private(path) as fh:
        fh.write(data)


__all__ = ["open_private", "write_private"]
