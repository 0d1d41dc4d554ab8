"""Two-party ``shaper lr train`` jobs on this machine: certificates, a parties file, CSV files."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shaper.net import make_certificates

HOST_CSV = "id,h0,h1\n" + "".join(f"c{i},{i % 3},{(i * 7) % 5 - 2}\n" for i in range(40))
GUEST_CSV = "id,g0,label\n" + "".join(f"c{i},{(i * 3) % 4 - 1.5},{i % 2}\n" for i in range(40))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Job:
    """A bank (host, listens) and a shop (guest, dials) with certificates and a parties file."""

    def __init__(self, root: Path, connect_timeout: str = "60s") -> None:
        self.root = root
        make_certificates(["bank", "shop"], root / "certs")
        ports = [_free_port(), _free_port()]
        lines = ['session_id = "test-job"', "[network]", f'connect_timeout = "{connect_timeout}"', "[tls]",
                 'ca = "certs/ca.pem"']
        for name, port in zip(["bank", "shop"], ports):
            lines += ["[[party]]", f'name = "{name}"', 'host = "127.0.0.1"', f"port = {port}",
                      f'cert = "certs/{name}.pem"', f'key = "certs/{name}.key"']
        self.parties = root / "parties.toml"
        self.parties.write_text("\n".join(lines) + "\n")

    def csv(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def args(self, role: str, data: Path, *extra: str) -> list[str]:
        me = "bank" if role == "host" else "shop"
        label = ["--label-column", "label"] if role == "guest" else []
        return ["lr", "train", "--role", role, "--me", me, "--parties", str(self.parties), "--data", str(data),
                "--key-bits", "512", "--epochs", "1", "--out", str(self.root / f"{me}.npz"), *label, *extra]

    def start(self, role: str, data: Path, *extra: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "shaper", *self.args(role, data, *extra)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def job(tmp_path):
    return Job(tmp_path)
