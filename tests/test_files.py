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
