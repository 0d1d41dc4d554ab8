"""The launcher, the three-party example (local and with a parties file) and ``shaper certs``."""

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shaper.cli import main as cli_main
from shaper.errors import ConfigError, PartyError
from shaper.net import NetConfig, launch, load_parties, run_in_memory

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "three_party_sum.py"
PATIENCE = 300  # seconds: a hang guard only, never what ends a test that passes


def _sleepy(session, seconds):
    time.sleep(seconds)
    return session.name


def _held(session, folder):
    """A party that cannot finish until the test lets it (creates ``folder/release``); released,
    it leaves ``NAME.finished`` there. (The limit is a hang guard, for a launcher that never
    stops it.)"""
    gate, deadline = Path(folder) / "release", time.monotonic() + PATIENCE
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    (Path(folder) / f"{session.name}.finished").touch()
    return session.name


def test_job_timeout_names_a_party(tmp_path):
    # the parties can only end by being stopped: the job's timeout is what ended it, and the
    # launcher stopped them rather than waiting for them to finish (which would leave the markers)
    with pytest.raises(PartyError, match="did not finish within 1s") as info:
        launch(2, _held, str(tmp_path), timeout=1)
    assert info.value.party in ("party0", "party1")
    assert list(tmp_path.glob("*.finished")) == []
    release = threading.Event()  # threads cannot be stopped: released once the timeout has fired
    try:
        with pytest.raises(PartyError, match="did not finish within 0.5s") as info:
            run_in_memory(2, lambda session: release.wait(PATIENCE), timeout=0.5)
    finally:
        release.set()
    assert info.value.party in ("party0", "party1")


def test_names_and_arguments():
    assert launch(["bank", "shop"], _sleepy, 0) == ["bank", "shop"]
    with pytest.raises(ConfigError):
        launch(1, _sleepy, 0)
    with pytest.raises(ConfigError):
        launch(["a", "a"], _sleepy, 0)


def test_example_runs_locally():
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--local", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "agree with the plaintext sum: yes" in proc.stdout


def _free_ports(count):
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_example_runs_from_a_parties_file(tmp_path):
    base = _free_ports(1)[0]
    code = cli_main(["certs", "--names", "alice", "bob", "carol", "--out", str(tmp_path / "certs"),
                     "--write-parties", str(tmp_path / "parties.toml"), "--base-port", str(base)])
    assert code == 0
    pf = load_parties(tmp_path / "parties.toml")
    assert [p.port for p in pf.parties] == [base, base + 1, base + 2]
    procs = [subprocess.Popen([sys.executable, str(EXAMPLE), "--parties", str(tmp_path / "parties.toml"),
                               "--me", name, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("carol", "alice", "bob")]  # any start order works: dialers retry
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert "matches the plaintext sum: yes" in out
        result = json.loads(out.strip().splitlines()[-1])
        assert result["traffic"]["rounds"] >= 1


def test_certs_refuses_to_overwrite(tmp_path, capsys):
    assert cli_main(["certs", "--names", "a", "b", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli_main(["certs", "--names", "a", "b", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("shaper certs: error: refusing to overwrite")
    assert cli_main(["certs", "--names", "a", "b", "--out", str(tmp_path / "x"), "--hosts", "a:1"]) == 2
    assert "NAME=HOST" in capsys.readouterr().err


def _peer_kind(session):
    return type(session._channels[session.peers[0]]._out).__name__


def test_insecure_launch_uses_plain_tcp():
    peer_kind = _peer_kind
    assert launch(2, peer_kind, config=NetConfig(insecure=True)) == ["socket", "socket"]
    assert launch(2, peer_kind) == ["SealedSocket", "SealedSocket"]  # TLS 1.3 handshake, then sealed frames


def test_unpicklable_function_under_spawn_is_explained():
    def local(session):
        return 1

    with pytest.raises(TypeError, match="module level"):
        launch(2, local, start_method="spawn")
