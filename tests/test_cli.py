"""The command line: demo, keygen, info, and the README/CI contract."""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from shaper.cli import main
from shaper.crypto.serialization import load_key

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_and_checks_its_result(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert main(["demo", "--bits", "512", "--rows", "60", "--cols", "20", "--density", "0.2", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["correct"] is True and summary["nnz"] > 0
    assert summary["packed_bytes"] < summary["unpacked_bytes"]
    assert "equals numpy" in capsys.readouterr().out


def test_demo_with_ou(tmp_path):
    assert main(["demo", "--scheme", "ou", "--bits", "768", "--rows", "30", "--cols", "10", "--density", "0.3"]) == 0


def test_keygen_writes_0600_private_key(tmp_path):
    prefix = tmp_path / "bank"
    assert main(["keygen", "--bits", "512", "--out", str(prefix)]) == 0
    key = tmp_path / "bank.key.bin"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    sk = load_key(key)
    pk = load_key(tmp_path / "bank.pub.bin")
    assert sk.public_key == pk


def test_info_and_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "shaper", "info"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "kernel" in proc.stdout


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^pip install \"\.\[test\]\".*$", ci, re.M).group(0)
    assert command in readme
    assert "shaper demo" in readme
