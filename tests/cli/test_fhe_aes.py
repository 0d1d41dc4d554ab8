"""``shaper fhe aes --single-key``: AES-128 evaluated under BGV from the command line, checked
against a clear AES (FIPS-197 C.1 in block 0), with its options' refusals."""

from __future__ import annotations

import json

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
