"""Files holding secrets (private keys, checkpoints, triples): created with mode 0600 before any
byte is written, so no other user can ever read them, whatever the umask; and the one way state is
written so that it survives a crash (a file or a whole directory appears complete or not at all).

* :func:`write_private` / :func:`open_private` — a secret file, 0600, written in place (not
  crash-safe on its own: use it inside :func:`atomic_directory`, or use :func:`write_atomic`).
* :func:`write_atomic` / :func:`atomic_file` — a file replaced in one step: the bytes go to a
  temporary sibling, are flushed and fsynced, the temporary is renamed over the target and the
  directory is fsynced, so after a crash or power loss the file is the old one or the new one.
* :func:`atomic_directory` — a directory built in a temporary sibling (mode 0700); when the
  ``with`` block completes every file in it is fsynced, it is renamed into place and the parent
  directory fsynced. A replaced directory is removed only after the new one is in place.
* :func:`append_durable` — bytes appended to a file and fsynced (append-only logs); a failed
  append is cut off again.
* :func:`remove_tree` — a directory removed in one step (renamed aside, then deleted).
* :func:`remove_stale` — what a killed process left behind: its temporaries (which may hold keys
  and mask seeds) are removed, and a directory caught between the two renames of a replacement
  is put back. Every loader of state calls it.

On any error (``BaseException`` included: ``KeyboardInterrupt``, ``SystemExit``) a temporary is
removed before the error propagates, so a failed write (a full disk, an interrupted save) leaves
the previous state and no copy of the secrets. Only a process killed outright (``kill -9``,
power loss) can leave one; its name carries the process id (``.<name>.tmp-<pid>-…``,
``.<name>.partial-<pid>-…``, ``.<name>.old-<pid>-…``), and :func:`remove_stale` removes those of
processes that are gone (``.<name>.trash-…``: a directory being removed). All writes go through
``os.write``.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import KeyValidationError

__all__ = ["append_durable", "atomic_directory", "atomic_file", "fsync_directory", "open_private",
           "remove_stale", "remove_tree", "write_atomic", "write_private"]

# Temporaries this process is writing now (a stale-file sweep must leave them alone even though
# their process id is alive: it is ours).
_active: set[str] = set()
_active_lock = threading.Lock()
_STALE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|partial|old|trash)-(?P<pid>\d+)-[A-Za-z0-9_]+$")


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Raw(io.RawIOBase):
    """A file descriptor as a seekable raw stream whose writes go through ``os.write``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        return os.write(self.fd, data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self.fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self.fd, 0, os.SEEK_CUR)

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self.fd)
            finally:
                super().close()


def open_private(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for binary writing (created or truncated) with mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode on O_CREAT: force it
        return io.BufferedWriter(_Raw(fd))  # type: ignore[return-value]
    except BaseException:
        os.close(fd)
        raise


def check_private_file(path: str | os.PathLike, what: str = "secret file") -> None:
    """Refuse a file holding a secret (a private key, a key share, mask seeds, triple shares)
    that its owner's group or other users may read or write: on POSIX its mode must grant
    nothing beyond the owner (0600 or narrower). Raises
    :class:`~shaper.errors.KeyValidationError` saying how to fix it."""
    if os.name != "posix":
        return
    mode = stat.S_IMODE(Path(path).stat().st_mode)
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyValidationError(
            f"{what} {path} has mode {mode:04o}: other users may read it, so it is refused; "
            f"restrict it with 'chmod 600 {path}' (and check who may have copied it)")


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` with mode 0600 (all of it: short writes are retried). In place:
    a crash can leave a torn file, so state goes through :func:`write_atomic` or
    :func:`atomic_directory` (which fsyncs what was written inside it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        _write_all(fd, data)
    finally:
        os.close(fd)


def fsync_directory(path: str | os.PathLike) -> None:
    """Makes the entries of directory ``path`` (creations, renames, removals) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_parents(directory: Path) -> None:
    """``directory`` and its missing ancestors, each new entry made durable."""
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    directory.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        fsync_directory(created.parent)


def _unlink_quietly(path: str | os.PathLike) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextmanager
def _registered(path: str | os.PathLike) -> Iterator[None]:
    with _active_lock:
        _active.add(os.fspath(path))
    try:
        yield
    finally:
        with _active_lock:
            _active.discard(os.fspath(path))


@contextmanager
def atomic_file(path: str | os.PathLike, *, private: bool = True) -> Iterator[BinaryIO]:
    """A binary file (seekable, writes through ``os.write``) that replaces ``path`` in one step
    when the ``with`` block completes: temporary sibling, flush, fsync, rename, fsync of the
    directory. On any error the temporary is removed and ``path`` is untouched. Mode 0600
    unless ``private`` is off (then 0644)."""
    target = Path(path)
    _make_parents(target.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.tmp-{os.getpid()}-", suffix="", dir=target.parent)
    with _registered(tmp):
        fh: io.BufferedWriter | None = None
        try:
            if not private:
                os.fchmod(fd, 0o644)
            fh = io.BufferedWriter(_Raw(fd))
            yield fh  # type: ignore[misc]
            fh.flush()
            os.fsync(fd)
            fh.close()
            os.replace(tmp, target)
            fsync_directory(target.parent)
        except BaseException:
            try:
                if fh is not None:
                    fh.raw.close()  # not fh.close(): a flush of a full buffer would raise again
                else:
                    os.close(fd)
            except OSError:
                pass
            _unlink_quietly(tmp)
            raise


def write_atomic(path: str | os.PathLike, data: bytes, *, private: bool = True) -> None:
    """Replaces ``path`` with ``data`` in one step: readers see the old file or the new one,
    never a torn one, even if the process dies mid-write or the machine loses power after the
    call returns. Mode 0600 unless ``private`` is off."""
    with atomic_file(path, private=private) as fh:
        fh.write(data)


def append_durable(path: str | os.PathLike, data: bytes) -> None:
    """Appends ``data`` to ``path`` (created 0600 if absent) and fsyncs it. A failed append (a
    full disk) is cut off again, so the file keeps only whole appends."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (deepest first), then ``root``."""
    for here, dirs, files in os.walk(root, topdown=False):
        for name in files:
            p = os.path.join(here, name)
            if os.path.islink(p):
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_directory(here)


@contextmanager
def atomic_directory(path: str | os.PathLike, *, replace: bool = False) -> Iterator[Path]:
    """Yields a temporary sibling of ``path`` (mode 0700) to fill; on success every file in it
    is fsynced and it is renamed to ``path`` (the parent fsynced), on failure removed. An
    existing ``path`` is an error unless ``replace``: then the old directory is moved aside,
    the new one renamed into place, and only then the old one removed (a crash between the two
    renames is undone by :func:`remove_stale`)."""
    target = Path(path)
    if target.exists() and not replace:
        raise FileExistsError(f"{target} exists already; it is never overwritten")
    _make_parents(target.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-{os.getpid()}-", dir=target.parent))
    old: Path | None = None
    placed = False
    with _registered(tmp):
        try:
            yield tmp
            _fsync_tree(tmp)
            if target.exists():
                if not replace:
                    raise FileExistsError(f"{target} appeared while it was written; it is never overwritten")
                old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-{os.getpid()}-", dir=target.parent))
                with _registered(old):
                    os.replace(target, old)  # onto the empty placeholder
                    os.rename(tmp, target)
                    placed = True
                    fsync_directory(target.parent)
                    shutil.rmtree(old, ignore_errors=True)
                    fsync_directory(target.parent)
            else:
                os.rename(tmp, target)
                placed = True
                fsync_directory(target.parent)
        except BaseException:
            if not placed:
                shutil.rmtree(tmp, ignore_errors=True)
                if old is not None and old.exists() and not target.exists():
                    try:
                        os.rename(old, target)  # put the previous state back
                    except OSError:
                        pass
            if old is not None and old.exists() and target.exists():
                shutil.rmtree(old, ignore_errors=True)
            raise


def remove_tree(path: str | os.PathLike) -> None:
    """Removes directory ``path`` so that it disappears in one step: it is renamed to a hidden
    sibling first (the parent fsynced), then deleted; a crash half way through the deletion
    leaves no half directory under the old name (:func:`remove_stale` finishes the job)."""
    target = Path(path)
    if not target.exists():
        return
    trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.trash-{os.getpid()}-", dir=target.parent))
    with _registered(trash):
        try:
            os.replace(target, trash)
            fsync_directory(target.parent)
        finally:
            shutil.rmtree(trash, ignore_errors=True)  # whatever happened above: it must not stay


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(directory: str | os.PathLike, name: str | None = None) -> list[str]:
    """Cleans what killed writers left in ``directory`` (for the target ``name`` only, if given):
    removes their temporary files and partial directories, and for a directory replacement
    interrupted between its two renames puts the previous directory back (or removes it, when the
    new one is in place). Temporaries of live processes (this one's in progress included) are
    left alone. Returns the names acted on."""
    d = Path(directory)
    done: list[str] = []
    try:
        entries = sorted(os.listdir(d))
    except FileNotFoundError:
        return done
    with _active_lock:
        active = set(_active)
    for entry in entries:
        m = _STALE.match(entry)
        if m is None or (name is not None and m["name"] != name):
            continue
        path = d / entry
        pid = int(m["pid"])
        if os.fspath(path) in active or (pid != os.getpid() and _pid_alive(pid)):
            continue
        target = d / m["name"]
        if m["kind"] == "old" and not target.exists() and path.is_dir() and any(path.iterdir()):
            os.rename(path, target)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            _unlink_quietly(path)
        done.append(entry)
    if done:
        fsync_directory(d)
    return done
