import os
import stat

from shaper.files import open_private, write_private


def test_private_files_are_0600_even_when_they_existed(tmp_path):
    path = tmp_path / "secret.bin"
    path.write_bytes(b"old, world-readable")
    os.chmod(path, 0o644)
    write_private(path, b"x" * 100_000)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_bytes() == b"x" * 100_000
    other = tmp_path / "other.npz"
    with open_private(other) as fh:
        fh.write(b"abc")
    assert stat.S_IMODE(os.stat(other).st_mode) == 0o600 and other.read_bytes() == b"abc"


def test_atomic_writes_replace_whole_files_and_leave_no_temporaries(tmp_path, monkeypatch):
    import pytest

    from shaper.files import write_atomic

    path = tmp_path / "state.json"
    write_atomic(path, b"one")
    write_atomic(path, b"two")
    assert path.read_bytes() == b"two" and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    write_atomic(tmp_path / "public.txt", b"p", private=False)
    assert stat.S_IMODE(os.stat(tmp_path / "public.txt").st_mode) == 0o644

    def crash(*_):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, b"three")
    monkeypatch.undo()
    assert path.read_bytes() == b"two"  # the old state survives a failed write
    assert sorted(p.name for p in tmp_path.iterdir()) == ["public.txt", "state.json"]


def test_atomic_directories_appear_complete_or_not_at_all(tmp_path):
    import pytest

    from shaper.files import atomic_directory

    target = tmp_path / "keys"
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as d:
            (d / "a").write_bytes(b"1")
            raise RuntimeError("failed half way")
    assert list(tmp_path.iterdir()) == []  # nothing left behind
    with atomic_directory(target) as d:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
        (d / "a").write_bytes(b"1")
    assert (target / "a").read_bytes() == b"1"
    with pytest.raises(FileExistsError, match="never overwritten"):
        with atomic_directory(target):
            pass
    with atomic_directory(target, replace=True) as d:
        (d / "b").write_bytes(b"2")
    assert sorted(p.name for p in target.iterdir()) == ["b"] and sorted(p.name for p in tmp_path.iterdir()) == ["keys"]


def test_writes_are_fsynced_and_so_is_the_directory(tmp_path, monkeypatch):
    from shaper.files import atomic_directory, write_atomic

    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_atomic(tmp_path / "state.json", b"x")
    assert synced[-1] == str(tmp_path)  # the rename made durable
    assert any(str(s).startswith(str(tmp_path / ".state.json.tmp-")) for s in synced)  # the data before it
    synced.clear()
    with atomic_directory(tmp_path / "keys") as d:
        (d / "share").write_bytes(b"s")
    assert any(str(s).endswith("/share") for s in synced) and synced[-1] == str(tmp_path)


def test_temporaries_go_on_any_error_even_an_interrupt(tmp_path, monkeypatch):
    import pytest

    from shaper.files import atomic_directory, write_atomic

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "seed.bin", b"mask seed")
    with pytest.raises(KeyboardInterrupt):
        with atomic_directory(tmp_path / "keys") as d:
            (d / "key").write_bytes(b"k")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_replaced_directory_goes_only_after_the_new_one_is_in_place(tmp_path, monkeypatch):
    import pytest

    from shaper.files import atomic_directory

    target = tmp_path / "epoch"
    with atomic_directory(target) as d:
        (d / "v").write_bytes(b"1")
    real, failed = os.rename, []

    def failing_rename(src, dst):  # the new directory cannot be put in place (once)
        if str(dst) == str(target) and not failed:
            failed.append(src)
            raise OSError("rename failed")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="rename failed"):
        with atomic_directory(target, replace=True) as d:
            (d / "v").write_bytes(b"2")
    monkeypatch.undo()
    assert (target / "v").read_bytes() == b"1" and [p.name for p in tmp_path.iterdir()] == ["epoch"]


def test_remove_stale_undoes_what_a_killed_writer_left(tmp_path):
    import subprocess
    import sys

    from shaper.files import remove_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f".state.json.tmp-{dead}-abc").write_bytes(b"key")  # a torn temporary
    (tmp_path / f".keys.partial-{dead}-x1").mkdir()  # a directory being written
    old = tmp_path / f".epoch.old-{dead}-y2"  # killed between the two renames of a replacement
    old.mkdir()
    (old / "v").write_bytes(b"1")
    alive = tmp_path / f".other.tmp-{os.getppid()}-zz"  # a live process's temporary: left alone
    alive.write_bytes(b"")
    assert sorted(remove_stale(tmp_path)) == sorted([old.name, f".keys.partial-{dead}-x1",
                                                     f".state.json.tmp-{dead}-abc"])
    assert (tmp_path / "epoch" / "v").read_bytes() == b"1"  # the previous directory is back
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, "epoch"])
