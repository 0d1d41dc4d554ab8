"""Every ``shaper`` command the README shows is a real command, and every one that can run on one
machine runs here exactly as written, at its defaults (placeholders such as ``KEY_HEX`` or ``N``
filled with real values). The ``shaper fhe`` and ``shaper cnn`` lines are run by
``tests/cli/test_readme_fhe_cnn.py``.

``shaper demo`` and ``shaper fl demo`` take about a minute each at their defaults (2048-bit keys)
on a 2-core machine, so they carry the ``readme`` mark: ``pytest`` leaves them out and CI runs
them once, in their own step (``.ci/run``: ``python -m pytest -q -m readme``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from shaper.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
pytestmark = [pytest.mark.skipif(not README.exists(), reason="an installed copy without the repository around it"),
              pytest.mark.once]  # the README as written: CI runs it in its first run only
NATIVE = importlib.util.find_spec("shaper._native") is not None
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]*\b|\[|\]|\\?\|")
#: FIPS-197 appendix C.1 (AES-128) for the circuit line's KEY_HEX and PLAINTEXT_HEX
FILLED = {"KEY_HEX": "000102030405060708090a0b0c0d0e0f", "PLAINTEXT_HEX": "00112233445566778899aabbccddeeff",
          "NAME": "bank", "FILE": "parties.toml", "DIR": "keys/bank", "N": "2", "K": "5"}
EXPECTED = {"shaper circuit run": "69c4e0d86a7b0430d8cdb78070b4c55a"}
HEAVY = {"shaper demo", "shaper fl demo"}
#: commands the README tells a user to run bare; any other bare span (``shaper lr train``) names a command
BARE = {"shaper demo", "shaper demo-he", "shaper fl demo", "shaper info"}


def readme_commands() -> list[str]:
    """The ``shaper ...`` code spans and command lines of the README, in order."""
    text = README.read_text()
    spans = [m.group(1).strip() for m in re.finditer(r"`(shaper [^`]+)`", text)]
    lines = [m.group(1).strip() for m in re.finditer(r"&& (shaper [^\n`]+)", text)]
    return spans + lines


def _words(line: str) -> list[str]:
    return [FILLED.get(w, w) for w in shlex.split(line.replace("\\|", " "))][1:]


def _command(words: list[str]):
    """(the command path, its parser) of the longest command the words start with."""
    parser, path = build_parser(), ["shaper"]
    for w in words:
        sub = next((a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)), None)
        if sub is None or w not in sub.choices:
            break
        parser, path = sub.choices[w], path + [w]
    return " ".join(path), parser


def _command_path(words: list[str]) -> str:
    return _command(words)[0]


def _parses(words: list[str]) -> bool:
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args(words)
    except SystemExit:
        return False
    return True


def runnable() -> list[str]:
    """The README lines that run on one machine as written (placeholders filled), fhe/cnn aside."""
    out = []
    for line in readme_commands():
        words = _words(line)
        path = _command_path(words)
        if path.startswith(("shaper fhe", "shaper cnn")) or "--parties" in words or "/" in line:
            continue
        bare = len(words) == len(path.split()) - 1
        if (not bare or path in BARE) and _parses(words):
            out.append(line)
    return list(dict.fromkeys(out))


def test_every_command_and_option_the_readme_names_exists():
    bad = []
    for line in readme_commands():
        first = line.split()[1:3]
        if any("/" in w for w in first):  # "shaper fhe keygen/encrypt/decrypt": a list of subcommands
            continue
        words = _words(line)
        path, parser = _command(words)
        if path == "shaper":
            bad.append(f"no such command: {line!r}")
            continue
        options = {flag for action in parser._actions for flag in action.option_strings
                   if action.help != "==SUPPRESS=="}
        bad += [f"{line!r}: {path} has no option {w}" for w in words if w.startswith("--") and w not in options]
    assert bad == []


def test_the_runnable_lines_are_the_ones_expected():
    paths = {_command_path(_words(line)) for line in runnable()}
    assert {"shaper demo", "shaper fl demo", "shaper demo-he", "shaper circuit run", "shaper info",
            "shaper keygen"} <= paths, paths


def _run(line: str, cwd: Path, timeout: float) -> str:
    env = dict(os.environ, SHAPER_DEBUG="1")
    out = subprocess.run([sys.executable, "-m", "shaper", *_words(line)], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, f"{line!r} failed:\n{out.stderr[-3000:]}"
    return out.stdout


def _lines(heavy: bool) -> list[str]:
    return [line for line in runnable() if (_command_path(_words(line)) in HEAVY) == heavy]


@pytest.mark.parametrize("line", _lines(heavy=False) if README.exists() else [])
def test_readme_line_runs_as_written(line, tmp_path):
    path = _command_path(_words(line))
    if path == "shaper mpc run" and not NATIVE:
        pytest.skip("OT extension runs in the native extension only")
    stdout = _run(line, tmp_path, timeout=600)
    if path in EXPECTED:
        assert EXPECTED[path] in stdout


@pytest.mark.readme
@pytest.mark.parametrize("line", _lines(heavy=True) if README.exists() else [])
def test_heavy_readme_line_runs_as_written(line, tmp_path):
    _run(line, tmp_path, timeout=1800)
