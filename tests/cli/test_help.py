"""Every option of every ``shaper`` command explains itself and shows its default."""

import argparse

import pytest

from shaper.cli import build_parser
from shaper.cli.common import HelpFormatter

FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction, argparse._VersionAction)


def _commands(parser, name="shaper"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _commands(sub, f"{name} {sub_name}")


COMMANDS = dict(_commands(build_parser()))


def test_every_command_is_walked():
    assert {"shaper demo", "shaper demo-he", "shaper lr train", "shaper keygen", "shaper certs",
            "shaper circuit run", "shaper info"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_has_help_and_shows_its_default(name):
    parser = COMMANDS[name]
    formatter = HelpFormatter(prog=parser.prog)
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue  # hidden: a retired spelling kept as an alias
        label = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{name} {label} has no help"
        if action.default is not None and not isinstance(action, FLAGS):
            shown = formatter._expand_help(action)
            assert str(action.default) in shown, f"{name} {label}: help does not show default {action.default!r}"



def test_demo_help_shows_the_training_defaults(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--epochs EPOCHS passes over the training rows (default: 10)" in text
    assert ("--learning-rate LEARNING_RATE SGD step size, or 'auto' (from the data's curvature, docs/logreg.md) "
            "(default: auto)") in text


def test_the_command_line_trains_with_the_estimators_defaults():
    """One default per training option: `shaper lr train` and `shaper demo` take LRParams' own."""
    from shaper.cli import lr
    from shaper.ml.logreg import LRParams

    defaults = LRParams()
    assert (lr.EPOCHS, lr.BATCH_SIZE, lr.LEARNING_RATE) == (defaults.epochs, defaults.batch_size,
                                                            defaults.learning_rate)
    for command in (["lr", "train", "--role", "host", "--parties", "p", "--me", "m", "--data", "d"], ["demo"]):
        args = build_parser().parse_args(command)
        assert (args.epochs, args.batch_size, args.learning_rate) == (10, 64, "auto") == (
            defaults.epochs, defaults.batch_size, defaults.learning_rate)
