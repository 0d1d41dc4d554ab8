"""One vocabulary for every command: a flag means the same thing in every subcommand, the
retired spellings are hidden aliases that still work (with a deprecation line), and the README
and docs use only the current spellings."""

import argparse
import re
from pathlib import Path

import pytest

from shaper.cli import build_parser
from shaper.cli.common import RETIRED, VOCABULARY

from .test_help import COMMANDS

ROOT = Path(__file__).resolve().parents[2]


def _visible(parser):
    for action in parser._actions:
        if action.option_strings and action.help != argparse.SUPPRESS:
            yield action


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_flag_means_the_same_everywhere(name):
    problems = []
    for action in _visible(COMMANDS[name]):
        for flag in action.option_strings:
            if flag in RETIRED:
                problems.append(f"{flag} is a retired spelling and must be hidden")
            if flag in VOCABULARY:
                kind, metavar = VOCABULARY[flag]
                if isinstance(action, (argparse._StoreTrueAction, argparse._StoreConstAction)):
                    problems.append(f"{flag} is a switch; the vocabulary gives it a value ({metavar})")
                elif action.type is not kind or action.metavar != metavar or action.nargs is not None:
                    problems.append(f"{flag}: type {getattr(action.type, '__name__', action.type)}, metavar "
                                    f"{action.metavar}, nargs {action.nargs}; the vocabulary says "
                                    f"{getattr(kind, '__name__', kind)} {metavar}")
            if flag == "--out" and (action.nargs is not None or isinstance(action, argparse._StoreTrueAction)):
                problems.append("--out must take one path")
    assert problems == [], f"{name}: " + "; ".join(problems)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_party_options_come_as_one_block(name):
    flags = {f for a in _visible(COMMANDS[name]) for f in a.option_strings}
    if "--parties" in flags:
        assert {"--me", "--key"} <= flags, f"{name}: --parties without --me/--key"


def test_the_walk_covers_every_multi_party_command():
    multi = {n for n, p in COMMANDS.items() if any("--parties" in a.option_strings or "--local" in a.option_strings
                                                   for a in _visible(p))}
    assert {"shaper lr train", "shaper fl train", "shaper psi", "shaper mpc run", "shaper fhe keygen",
            "shaper fhe decrypt", "shaper cnn infer"} <= multi


def test_retired_spelling_still_works_with_a_deprecation_line(capsys):
    args = build_parser().parse_args(["keygen", "--bits", "512", "--out", "k"])
    assert args.key_bits == 512
    assert "--bits is deprecated" in capsys.readouterr().err


def test_a_count_given_as_parties_file_is_taken_as_local(capsys):
    from shaper.cli.common import where

    args = argparse.Namespace(prog="shaper x", parties="3", me=None, local=None)
    assert where(args) == 3 and args.local == 3 and args.parties is None
    assert "use --local 3" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--local N .* or --parties FILE --me NAME"):
        where(argparse.Namespace(prog="shaper x", parties=None, me=None, local=None))
    with pytest.raises(ValueError, match="between 2 and 16"):
        where(argparse.Namespace(prog="shaper x", parties=None, me=None, local=40))


def _shell_lines():
    """Every `shaper ...` command line written in the README and the docs."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"shaper [a-z-]+[^`\n|]*", line):
                yield f"{path.name}:{n}", m.group(0)


def test_readme_and_docs_use_only_current_spellings():
    if not (ROOT / "README.md").exists():
        pytest.skip("an installed copy without the repository around it")
    bad = []
    for where_, text in _shell_lines():
        for old in RETIRED:
            if re.search(re.escape(old) + r"(?![\w-])", text):
                bad.append(f"{where_}: {text.strip()}")
        if re.search(r"--parties \d", text):
            bad.append(f"{where_}: {text.strip()} (a count: --local N)")
    assert bad == []
