"""Files holding secrets (private keys, checkpoints, triples): created with mode 0600 before any
byte is written, so no other user can ever read them, whatever the umask; and the one way state is
written atomically (a file or a whole directory appears complete or not at all).

* :func:`write_private` / :func:`open_private` — a secret file, 0600.
* :func:`write_atomic` — a file replaced in one step (temporary sibling, fsync, rename).
* :func:`atomic_directory` — a directory built in a temporary sibling (mode 0700) and renamed
  into place only when the ``with`` block completes; a failure leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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


def write_atomic(path: str | os.PathLike, data: bytes, *, private: bool = True) -> None:
    """Replaces ``path`` with ``data`` in one step: readers see the old file or the new one,
    never a torn one, even if the process dies mid-write. Mode 0600 unless ``private`` is off."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if not private:
                os.fchmod(fh.fileno(), 0o644)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with _ignored():
            os.unlink(tmp)
        raise


@contextmanager
def atomic_directory(path: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Yields a temporary sibling of ``path`` (mode 0700) to fill; on success it is renamed to
    ``path``, on failure removed. An existing ``path`` is an error unless ``replace``, when the
    old directory is removed only after the new one is complete."""
    target = Path(path)
    if target.exists() and not replace:
        raise FileExistsError(f"{target} exists already; it is never overwritten")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def _ignored() -> Iterator[None]:
    try:
        yield
    except OSError:
        pass


__all__ = ["atomic_directory", "open_private", "write_atomic", "write_private"]
