"""``shaper mpc run``: a --local job as processes over TLS, a killed party, and input errors
named before a job starts."""

from __future__ import annotations

import importlib.util
import os
import re

import pytest

from shaper.cli import main
from shaper.errors import PartyError
from shaper.net import launch

pytestmark = pytest.mark.once  # end to end through the command line: kernel-independent, CI runs it in its first run only

NEEDS_NATIVE = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None,
                                  reason="OT extension runs in the native extension only")


@NEEDS_NATIVE
def test_local_run_prints_every_operation(capsys):
    code = main(["mpc", "run", "--local", "3", "--count", "2000", "--moduli", "2305843009213693951,17"])
    out = capsys.readouterr().out
    assert code == 0
    for op in ("ot", "triples-61", "bit-triples", "gaussian", "ternary", "b2a-61", "b2a", "t2a", "a2b"):
        assert re.search(rf"party0: {op}\s+[0-9,]+ /s", out), op
    assert "sample std" in out


def _dies(session):
    from shaper.protocols import OtTriples
    from shaper.protocols.additive import AdditiveEngine

    e = AdditiveEngine(session, triple_source=OtTriples(), frac_bits=0)
    if session.index == 2:
        os._exit(3)  # killed mid-job
    return e.gaussian(1000, 17).reveal()


@NEEDS_NATIVE
def test_a_killed_party_fails_the_others_fast():
    with pytest.raises(PartyError, match="party2"):
        launch(4, _dies, timeout=120)


def test_input_errors_are_named(capsys):
    assert main(["mpc", "run", "--local", "17"]) == 2
    assert "--local takes 2..16 parties" in capsys.readouterr().err
    assert main(["mpc", "run", "--local", "2", "--ops", "ot,teleport"]) == 2
    assert "unknown operation(s) teleport" in capsys.readouterr().err
    assert main(["mpc", "run", "--local", "2", "--moduli", "12"]) == 2
    assert "modulus 12 must be odd" in capsys.readouterr().err
    assert main(["mpc", "run"]) == 2
    assert "--parties FILE and --me NAME" in capsys.readouterr().err


@NEEDS_NATIVE
def test_local_run_on_the_active_engine(capsys):
    code = main(["mpc", "run", "--local", "2", "--security", "active", "--count", "1024"])
    out = capsys.readouterr().out
    assert code == 0 and "active engine" in out
    for op in ("triples-61", "mul-61", "range-40", "bit-triples", "cmp-20"):
        assert re.search(rf"party0: {op}\s+[0-9,]+ /s", out), op


def _mpc(session, security):
    from shaper.jobs.mpc import mpc_job

    return mpc_job(session, ["triples-61"], 256, security=security[session.index])


def test_parties_that_choose_different_engines_stop_before_any_preprocessing():
    with pytest.raises(PartyError, match=r"runs the '(active|passive)' engine, this party the '(passive|active)' one"):
        launch(2, _mpc, ["passive", "active"], timeout=60)


def test_security_comes_from_the_flag_or_the_parties_file(tmp_path, capsys):
    parties = tmp_path / "parties.toml"
    pins = ["sha256:" + "ab" * 32, "sha256:" + "cd" * 32]
    body = ('session_id = "s"\nsecurity = "{}"\n[[party]]\nname = "a"\nhost = "127.0.0.1"\nport = 7000\n'
            f'fingerprint = "{pins[0]}"\n[[party]]\nname = "b"\nhost = "127.0.0.1"\nport = 7001\n'
            f'fingerprint = "{pins[1]}"\n')
    parties.write_text(body.format("active"))
    assert main(["mpc", "run", "--parties", str(parties), "--me", "a", "--security", "passive"]) == 2
    assert "contradicts the parties file's security = 'active'" in capsys.readouterr().err
    assert main(["mpc", "run", "--parties", str(parties), "--me", "a", "--ops", "ot"]) == 2
    assert "unknown operation(s) ot for the active engine" in capsys.readouterr().err
    assert main(["mpc", "run", "--parties", str(parties), "--me", "a", "--moduli", "17"]) == 2
    assert "--moduli sets the passive engine's key basis" in capsys.readouterr().err
    parties.write_text(body.format("paranoid"))
    assert main(["mpc", "run", "--parties", str(parties), "--me", "a"]) == 2
    assert "security must be one of 'active', 'passive'" in capsys.readouterr().err


@NEEDS_NATIVE
def test_two_hosts_run_the_active_engine_from_the_parties_file(tmp_path):
    """Two processes over a parties file that says security = "active": both run the active
    engine (no flag needed) and print its operations."""
    import socket
    import subprocess
    import sys

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = sock.getsockname()[1]
    sock.close()
    parties = tmp_path / "parties.toml"
    assert main(["certs", "--parties", "bank", "shop", "--out", str(tmp_path / "certs"), "--write-parties",
                 str(parties), "--base-port", str(base)]) == 0
    parties.write_text('security = "active"\n' + parties.read_text())
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "mpc", "run", "--parties", str(parties), "--me", me,
                               "--count", "512"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in ("bank", "shop")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        for op in ("triples-61", "mul-61", "range-40", "bit-triples", "cmp-20"):
            assert re.search(rf": {op}\s+[0-9,]+ /s", out), (op, out)


def test_a_command_without_the_active_engine_refuses_a_file_that_asks_for_it(tmp_path, capsys):
    """No silent downgrade: `security = "active"` in a parties file stops every command that
    would run its protocol passively, by name, before it connects."""
    pins = ["sha256:" + "ab" * 32, "sha256:" + "cd" * 32]
    parties = tmp_path / "parties.toml"
    parties.write_text('session_id = "s"\nsecurity = "active"\n'
                       f'[[party]]\nname = "a"\nhost = "127.0.0.1"\nport = 7000\nfingerprint = "{pins[0]}"\n'
                       f'[[party]]\nname = "b"\nhost = "127.0.0.1"\nport = 7001\nfingerprint = "{pins[1]}"\n')
    for argv in (["psi", "--data", str(tmp_path / "x.csv"), "--id-column", "id", "--out", str(tmp_path / "o")],):
        assert main([*argv, "--parties", str(parties), "--me", "a"]) == 2
        err = capsys.readouterr().err
        assert 'asks for security = "active"' in err and "does not run yet" in err, err
    # threshold AES and CKKS do run on it (fhe aes takes the file's engine, tests/cli/test_fhe_aes.py):
    # key generation takes the file's engine, and a decryption
    # with a key made on the passive engine is refused by name, before it connects
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "params.shpr").write_bytes(b"")
    assert main(["fhe", "decrypt", "--keys", str(tmp_path / "k"), "--ciphertext", str(tmp_path / "c"),
                 "--parties", str(parties), "--me", "a"]) == 2
    assert "made on the passive engine" in capsys.readouterr().err
    # the CNN inference follows its key too: a passive key under an active file is refused, before it connects
    assert main(["cnn", "infer", "--keys", str(tmp_path / "k"), "--mnist-sample", "1", "--parties", str(parties),
                 "--me", "a"]) == 2
    assert "made on the passive engine" in capsys.readouterr().err
