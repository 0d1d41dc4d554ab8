"""What every ``shaper`` command shares: help that shows defaults, and the one-line error."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Any, Callable

from ..errors import ShaperError

# Failures a user can act on from the message alone: bad input or configuration, a missing or
# unreadable file, a missing optional dependency, a peer that failed or cannot be reached.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ShaperError, ValueError, OSError, ImportError)

DEBUG_VARIABLE = "SHAPER_DEBUG"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: ...)" to an option's help, except where there is no default to show
    (None, or an on/off flag that is off unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def command(subparsers: Any, name: str, func: Callable[[argparse.Namespace], int] | None, help: str,
            description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand parser with the shared formatter; ``func(args)`` runs it, and ``args.prog``
    (e.g. ``"shaper lr train"``) names it in error messages."""
    parser = subparsers.add_parser(name, help=help, description=description or help[:1].upper() + help[1:] + ".",
                                   formatter_class=HelpFormatter)
    parser.set_defaults(func=func, prog=parser.prog)
    return parser


def debugging() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def error_line(prog: str, exc: BaseException) -> str:
    """``"<prog>: error: <the problem>"`` in one line. Expected failures show their message;
    anything else is a bug in shaper and says so. The full traceback goes to stderr first when
    ``SHAPER_DEBUG=1``; otherwise the line points there whenever it had to leave detail out."""
    debug = debugging()
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    expected = isinstance(exc, EXPECTED_ERRORS)
    text = str(exc).strip() or type(exc).__name__
    if not expected:
        text = f"internal error ({type(exc).__name__}: {text}); please report it"
    lines = text.splitlines()
    hint = "" if debug or (expected and len(lines) == 1) else f" (rerun with {DEBUG_VARIABLE}=1 for the traceback)"
    return f"{prog}: error: {lines[0]}{hint}"


def learning_rate(text: str) -> float | str:
    """``--learning-rate``: 'auto' or a positive number."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"the learning rate must be positive, got {text}")
    return value


def abort_job(args: argparse.Namespace, problem: BaseException) -> None:
    """Print ``problem`` now, then join the job only to abort it, so the peers learn the reason
    at once. Peers that cannot be reached within the connect timeout (or a parties file that
    cannot be used) are not told; they stop at their own connect timeout."""
    from ..net import Session, load_parties

    line = error_line(args.prog, problem)
    try:
        wait = load_parties(args.parties).config.connect_timeout
    except EXPECTED_ERRORS:
        print(line, file=sys.stderr)
        return
    print(f"{line} [telling the other parties; waiting up to {wait:.0f} s for them, Ctrl-C to skip]",
          file=sys.stderr, flush=True)
    try:
        session = Session.from_config(args.parties, me=args.me, key=args.key)
    except (KeyboardInterrupt, *EXPECTED_ERRORS):
        return
    session.abort(str(problem).splitlines()[0] if str(problem) else type(problem).__name__)
