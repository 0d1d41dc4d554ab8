"""``shaper fhe aes``: AES-128 evaluated under BGV from the command line, checked against a clear
AES (FIPS-197 C.1 in block 0), with one key (--single-key) or a joint key made in MPC (--local N,
--parties FILE --me NAME: joint inputs, every party evaluates, decryption to bits, or flooded,
for the recipient only), with its options' refusals."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import numpy as np
import pytest

from shaper.cli import main
from shaper.jobs.bgv import clear_aes
from shaper.kernels import cyclo

pytestmark = pytest.mark.once  # end to end through the command line: CI runs it in its first run only

NATIVE = pytest.mark.skipif(not cyclo.native_selected(), reason="AES under BGV needs the native cyclotomic transform")


@NATIVE
def test_fhe_aes_encrypts_fips_197_and_the_given_blocks(tmp_path, capsys):
    assert main(["fhe", "aes", "--single-key", "--params", "test-257", "--insecure", "--json",
                 str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert "evaluate AES-128" in out and "1/1 blocks right" in out and "FIPS-197 C.1" in out
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["correct"] and figures["blocks"] == 1 and figures["levels_used"] > 0
    data = np.arange(16, dtype=np.uint8).reshape(1, 16) * 7
    (tmp_path / "in.bin").write_bytes(data.tobytes())
    key = "2b7e151628aed2a6abf7158809cf4f3c"
    assert main(["fhe", "aes", "--single-key", "--params", "test-257", "--insecure", "--input",
                 str(tmp_path / "in.bin"), "--aes-key", key, "--out", str(tmp_path / "out.bin")]) == 0
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.uint8).reshape(1, 16)
    assert np.array_equal(got, clear_aes(data, bytes.fromhex(key)))


@pytest.mark.parametrize("extra, problem", [
    ([], "give --local N"),
    (["--local", "2", "--params", "test-257"], "pass --insecure"),
    (["--single-key", "--local", "2"], "--single-key runs one process"),
    (["--single-key", "--params", "test-257"], "pass --insecure"),
    (["--single-key", "--params", "nope"], "unknown BGV parameter set"),
    (["--single-key", "--params", "test-257", "--insecure", "--blocks", "2"], "--blocks takes 1..1"),
    (["--single-key", "--params", "test-257", "--insecure", "--aes-key", "zz"], "32 hex digits"),
    (["--single-key", "--params", "test-257", "--insecure", "--aes-key", "00" * 8], "16 bytes"),
])
def test_fhe_aes_refuses_bad_options_in_one_line(capsys, extra, problem):
    assert main(["fhe", "aes", *extra]) == 2
    assert problem in capsys.readouterr().err


def test_fhe_aes_refuses_input_that_is_not_whole_blocks(tmp_path, capsys):
    (tmp_path / "in.bin").write_bytes(b"x" * 17)
    assert main(["fhe", "aes", "--single-key", "--params", "test-257", "--insecure", "--input",
                 str(tmp_path / "in.bin")]) == 2
    assert "not a positive multiple of 16" in capsys.readouterr().err


@NATIVE
def test_the_bgv_example_runs_and_checks_its_blocks():
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "bgv_aes.py"
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "all 16 blocks equal AES-128" in out.stdout


@NATIVE
def test_threshold_aes_with_local_parties_writes_and_reuses_the_key_directories(tmp_path, capsys):
    data = np.arange(16, dtype=np.uint8).reshape(1, 16) * 5
    (tmp_path / "in.bin").write_bytes(data.tobytes())
    key = "2b7e151628aed2a6abf7158809cf4f3c"
    common = ["fhe", "aes", "--local", "2", "--params", "test-257", "--insecure", "--keys", str(tmp_path / "keys"),
              "--input", str(tmp_path / "in.bin"), "--aes-key", key]
    assert main([*common, "--out", str(tmp_path / "out.bin"), "--json", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert "key generation in MPC" in out and "joint decryption to bits" in out and "1/1 blocks right" in out
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.uint8).reshape(1, 16)
    assert np.array_equal(got, clear_aes(data, bytes.fromhex(key)))
    figures = json.loads((tmp_path / "f.json").read_text())
    assert figures["roles"] == {"key_owner": "party0", "data_owner": "party1", "recipient": "party1"}
    assert figures["budget_left"] == figures["budget"] - 1
    for party in ("party0", "party1"):
        for f in ("secret-share.shpr", "ledger.json"):
            assert stat.S_IMODE((tmp_path / "keys" / party / f).stat().st_mode) == 0o600
    assert main([*common, "--out", str(tmp_path / "again.bin")]) == 0  # the key directories, loaded
    out = capsys.readouterr().out
    assert "load the key directory" in out and "key generation in MPC" not in out and "1/1 blocks right" in out
    assert (tmp_path / "again.bin").read_bytes() == (tmp_path / "out.bin").read_bytes()
    assert json.loads((tmp_path / "keys" / "party0" / "ledger.json").read_text())["spent"] == 2


@NATIVE
def test_threshold_aes_on_the_active_engine_and_its_key_follows_the_engine(tmp_path, capsys):
    """`fhe aes --security active`: keys from authenticated shares, range-checked inputs and a
    checked decryption to bits give FIPS-197 C.1; the key directories then carry MAC shares, and
    reusing them on the passive engine is refused before anything runs."""
    common = ["fhe", "aes", "--local", "2", "--params", "test-257", "--insecure", "--keys", str(tmp_path / "keys")]
    assert main([*common, "--security", "active"]) == 0
    out = capsys.readouterr().out
    assert "key generation in MPC" in out and "1/1 blocks right" in out and "FIPS-197 C.1" in out
    assert stat.S_IMODE((tmp_path / "keys" / "party0" / "secret-macs.npz").stat().st_mode) == 0o600
    assert main([*common, "--security", "active", "--decrypt", "flood"]) == 0  # the kept keys, a flooded decryption
    out = capsys.readouterr().out
    assert "joint decryption, flooded" in out and "1/1 blocks right" in out and "FIPS-197 C.1" in out
    assert main(common) == 2
    assert "made on the active engine" in capsys.readouterr().err
    assert main(["fhe", "aes", "--single-key", "--security", "active", "--params", "test-257", "--insecure"]) == 2
    assert "runs no MPC" in capsys.readouterr().err


@NATIVE
def test_threshold_aes_on_two_hosts_only_the_recipient_learns_the_blocks(tmp_path):
    from tests.test_cli import _parties_file

    _parties_file(tmp_path, "bank", "shop")
    procs = [subprocess.Popen([sys.executable, "-m", "shaper", "fhe", "aes", "--parties", str(tmp_path / "parties.toml"),
                               "--me", me, "--params", "test-257", "--insecure", "--key-owner", "bank",
                               "--data-owner", "shop", "--to", "bank", "--out", str(tmp_path / f"{me}.bin")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in ("bank", "shop")]
    res = [(p.returncode, *p.communicate(timeout=600)) for p in procs]
    res = [(p.returncode, out, err) for p, (_, out, err) in zip(procs, res)]
    assert [r[0] for r in res] == [0, 0], res
    assert "is FIPS-197 C.1's ciphertext" in res[0][1]  # the owners used FIPS-197's key and plaintext
    assert "nothing learnt here" in res[1][1] and not (tmp_path / "shop.bin").exists()
    assert (tmp_path / "bank.bin").read_bytes()[:16].hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"


@pytest.mark.parametrize("extra, problem", [
    (["--local", "2", "--params", "test-257", "--insecure", "--to", "carol"], "the recipient 'carol' is not a party"),
    (["--local", "2", "--params", "test-257", "--insecure", "--budget", "0"], "--budget must be a positive"),
    (["--local", "2", "--parties", "p.toml"], "not both"),
])
def test_threshold_aes_refuses_bad_options_in_one_line(capsys, extra, problem):
    assert main(["fhe", "aes", *extra]) == 2
    assert problem in capsys.readouterr().err


def test_threshold_aes_refuses_an_unknown_decryption_method(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["fhe", "aes", "--local", "2", "--params", "test-257", "--insecure", "--decrypt", "parity"])
    assert stop.value.code == 2 and "invalid choice: 'parity'" in capsys.readouterr().err


@NATIVE
def test_the_threshold_aes_example_runs():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "threshold_aes.py"
    out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "unknown provenance" in out.stdout or "refused" in out.stdout
    assert "the shop holds AES-128 of its 1 blocks" in out.stdout
