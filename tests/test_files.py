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
