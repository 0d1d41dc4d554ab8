"""What every ``shaper`` command shares: the one vocabulary of options, help that shows defaults,
and the one-line error.

The vocabulary (git's and MPyC's idea: a flag means the same thing in every subcommand). Every
command adds these options through the functions here, never by hand, and
``tests/cli/test_vocabulary.py`` walks every parser to hold it:

==================  ==========================================================================
``--parties FILE``  the parties file (TOML) of a job on real hosts (``docs/net.md``)
``--me NAME``       this party's name in that file
``--key FILE``      this party's TLS private key (overrides the parties file)
``--local N``       run N parties here, as processes over loopback TLS
``--keys DIR``      a key directory (with ``--local N``: the one holding ``party0`` ..)
``--out PATH``      what the command writes (a file or a directory, named in its help)
``--json PATH``     the figures as JSON (``-``: standard output)
``--key-bits BITS`` a homomorphic key's modulus size
``--data FILE``     a table of this party's rows (CSV, Parquet or LibSVM)
``--images FILE``   images in a file (a count of bundled images is ``--mnist-sample K``)
==================  ==========================================================================

Old spellings (``--output``, ``--bits``, ``--local-keys DIR``, ``--parties N`` for a count,
``--json`` as a switch, ``--images K`` as a count, ``--data DIR``) still work for one release as
hidden aliases that print a deprecation line to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError, ShaperError

# Failures a user can act on from the message alone: bad input or configuration, a missing or
# unreadable file, a missing optional dependency, a peer that failed or cannot be reached.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ShaperError, ValueError, OSError, ImportError)

DEBUG_VARIABLE = "SHAPER_DEBUG"

#: the phase a party reports to its peers when it fails before the job starts (reading its input)
START_UP = "start-up"


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


# -- the vocabulary ----------------------------------------------------------------------------------
#: flag -> (type, metavar) every visible use of the flag must have (``None``: a plain string)
VOCABULARY: dict[str, tuple[Any, str | None]] = {
    "--parties": (None, "FILE"), "--me": (None, "NAME"), "--key": (None, "FILE"), "--local": (int, "N"),
    "--keys": (None, "DIR"), "--json": (None, "PATH"), "--key-bits": (int, "BITS"), "--data": (None, "FILE"),
    "--images": (None, "FILE"),
}
#: spellings that must not appear in help any more (kept only as hidden aliases)
RETIRED = ("--output", "--bits", "--local-keys")
MAX_LOCAL = 16


def party_options(p: argparse.ArgumentParser, *, local: bool = True, required: bool = False,
                  local_default: int | None = None, local_help: str | None = None) -> None:
    """``--parties FILE --me NAME [--key FILE]`` for real hosts and, with ``local``, ``--local N``
    for N parties on this machine. With ``required`` the real-host pair is mandatory."""
    if local:
        p.add_argument("--local", type=int, default=local_default, metavar="N",
                       help=local_help or f"run N parties here as processes over loopback TLS (2..{MAX_LOCAL})")
    p.add_argument("--parties", required=required, metavar="FILE", help="parties file (TOML), see docs/net.md")
    p.add_argument("--me", required=required, metavar="NAME", help="this party's name in the parties file")
    p.add_argument("--key", metavar="FILE", help="TLS private key (overrides the parties file)")


def security_option(p: argparse.ArgumentParser, default: str) -> None:
    """``--security active|passive``: the MPC engine (overrides the parties file's ``security``)."""
    p.add_argument("--security", choices=("active", "passive"), default=None,
                   help=f"the MPC engine: active (MACs and checks; any deviation aborts) or passive (faster, safe only "
                        f"while every party follows the protocol); default: the parties file's, else {default}")


def security_of(args: argparse.Namespace, default: str) -> str:
    """The engine a command runs: --security, else the parties file's ``security``, else ``default``;
    a flag that contradicts the parties file is refused."""
    chosen = getattr(args, "security", None)
    from_file = None
    if getattr(args, "parties", None):
        from ..net.config import load_parties

        from_file = load_parties(args.parties).security
    if chosen and from_file and chosen != from_file:
        raise ConfigError(f"--security {chosen} contradicts the parties file's security = {from_file!r}; change one")
    return chosen or from_file or default


def out_option(p: argparse.ArgumentParser, help: str, *, metavar: str = "PATH", required: bool = False,
               default: str | None = None, old: str | None = None) -> None:
    """``--out PATH``: what the command writes. ``old`` names a retired spelling kept as an alias."""
    p.add_argument("--out", required=required, default=default, metavar=metavar, help=help)
    if old:
        deprecated_alias(p, old, "--out")


def json_option(p: argparse.ArgumentParser, help: str = "also write the figures as JSON ('-': standard output)") -> None:
    """``--json PATH``: machine-readable figures."""
    p.add_argument("--json", metavar="PATH", help=help)


def key_bits_option(p: argparse.ArgumentParser, help: str = "homomorphic key size in bits", *,
                    default: int = 2048, old: str | None = None) -> None:
    """``--key-bits BITS``."""
    p.add_argument("--key-bits", type=int, default=default, metavar="BITS", help=help)
    if old:
        deprecated_alias(p, old, "--key-bits", type=int)


def deprecation(prog: str, old: str, new: str) -> None:
    """The one line a retired spelling prints (stderr)."""
    print(f"{prog}: warning: {old} is deprecated and goes in the next release; use {new}", file=sys.stderr)


class _DeprecatedAlias(argparse.Action):
    def __init__(self, option_strings: Any, dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        deprecation(parser.prog, option_string or self.option_strings[0], self.new)
        setattr(namespace, self.dest, values)


def deprecated_alias(p: argparse.ArgumentParser, old: str, new: str, **kwargs: Any) -> None:
    """A hidden ``old`` option that sets ``new``'s value and prints a deprecation line."""
    dest = new.lstrip("-").replace("-", "_")
    p.add_argument(old, dest=dest, action=_DeprecatedAlias, new=new, help=argparse.SUPPRESS,
                   default=argparse.SUPPRESS, **kwargs)


def local_count(args: argparse.Namespace, *, low: int = 2, high: int = MAX_LOCAL) -> int | None:
    """``--local N`` checked against [low, high]; ``None`` when not given. A retired ``--parties N``
    (a count where a file is meant) is taken as ``--local N`` with a deprecation line."""
    n = getattr(args, "local", None)
    parties = getattr(args, "parties", None)
    if n is None and isinstance(parties, str) and parties.isdigit() and not os.path.exists(parties):
        deprecation(args.prog, f"--parties {parties} (a count)", f"--local {parties}")
        n, args.parties = int(parties), None
        args.local = n
    if n is not None and not low <= n <= high:
        raise ValueError(f"--local must be between {low} and {high}, got {n}")
    return n


def where(args: argparse.Namespace, *, low: int = 2, high: int = MAX_LOCAL) -> int | None:
    """The count of ``--local N``, or ``None`` on real hosts; exactly one of ``--local`` and
    ``--parties FILE --me NAME`` must be given (a one-line error names what is missing)."""
    n = local_count(args, low=low, high=high)
    if n is not None:
        if getattr(args, "parties", None) or getattr(args, "me", None):
            raise ValueError("give either --local N or --parties FILE --me NAME, not both")
        return n
    if not getattr(args, "parties", None) or not getattr(args, "me", None):
        raise ValueError("give --local N (parties on this machine) or --parties FILE --me NAME (real hosts)")
    return None


def group(subparsers: Any, name: str, help: str, description: str) -> Any:
    """A command group (``shaper fhe``, ``shaper lr`` ...): its parser, with the shared formatter,
    and the subparsers its commands are added to (one is required)."""
    parser = subparsers.add_parser(name, help=help, formatter_class=HelpFormatter, description=description)
    parser.set_defaults(prog=parser.prog)
    return parser.add_subparsers(dest=f"{name.replace('-', '_')}_command", required=True, metavar="COMMAND")


def local_from_keys(args: argparse.Namespace) -> int | None:
    """``--local N``, or, with neither --local nor a parties file, the count of party directories
    under ``--keys`` (what the retired ``--local-keys DIR`` meant); then as :func:`where`."""
    from ..jobs.fhe import local_key_dirs

    local = local_count(args)
    keys = getattr(args, "keys", None)
    if local is None and not args.parties and not args.me and keys and os.path.isdir(os.path.join(keys, "party0")):
        args.local = len(local_key_dirs(keys))
    return where(args)


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
    """Print ``problem`` now, then join the job only to abort it, so the peers learn at once that
    this party failed at start-up and the kind of error (its class name); the message itself,
    which can name this party's data (ids, values, paths, columns), stays here. Peers that cannot
    be reached within the connect timeout (or a parties file that cannot be used) are not told;
    they stop at their own connect timeout."""
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
    session.abort(problem, phase=START_UP)


def file_security(args: argparse.Namespace) -> None:
    """A parties file's ``security`` (``args.file_security``), which the key of a job whose
    engine follows its key (fhe encrypt/decrypt, cnn infer) must match: refused before connecting."""
    if getattr(args, "parties", None):
        from ..net.config import load_parties
        from ..protocols.threshold_ckks.keystore import MACS_FILE

        args.file_security = load_parties(args.parties).security
        made = "active" if args.keys and (Path(args.keys) / MACS_FILE).is_file() else "passive"
        if args.keys and args.file_security is not None and args.file_security != made:  # before connecting
            raise ConfigError(f"the parties file asks for security = {args.file_security!r}, but {args.keys} holds a key "
                              f"made on the {made} engine: a key runs on the engine it was made on (re-key with "
                              f"shaper fhe keygen --security {args.file_security})")
