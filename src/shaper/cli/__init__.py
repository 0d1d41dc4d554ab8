"""The ``shaper`` command line.

    shaper demo      two parties train a logistic regression on split data (the flagship job)
    shaper demo-he   a tour of the additive-HE engine (sparse X @ Enc(w), packing), checked
    shaper lr train  one party of a vertical logistic regression on real hosts
    shaper fl train  one party of a federated job (vertical with an arbiter, or horizontal FedAvg)
    shaper fl demo   vertical logistic/linear regression and FedAvg, all roles locally
    shaper mpc run   n-party MPC: OT triples, secure sampling, share conversions (--local N)
    shaper fhe       threshold CKKS: keys generated in MPC, joint decryption (keygen, encrypt, decrypt, demo)
    shaper cnn       encrypted MNIST CNN inference, single key or joint key (demo, infer, plan, train)
    shaper psi       one party of a private set intersection (aligns rows with a peer)
    shaper keygen    write a Paillier/OU key pair (private key mode 0600)
    shaper identity  this party's own TLS key and certificate, and the fingerprint peers pin
    shaper certs     a CA and every party's TLS key (+ a parties file), for --local runs and tests
    shaper circuit run FILE --local 3 --inputs HEX...   a Bristol Fashion circuit in 3PC
    shaper cluster check   join the Ray cluster a party would scale out on, and time it
    shaper info      version, kernel, executor, worker count, CPU features

Each command group is a module here with an ``add_parser(subparsers)`` function. Every command
ends a failure the same way: one line ``shaper <command>: error: <the problem>`` on stderr and
exit status 2 (``SHAPER_DEBUG=1`` also prints the traceback); Ctrl-C exits with 130, and a closed
output pipe (``| head``) with 141, silently.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from . import circuit, cluster, cnn, demo, fhe, fl, identity, info, keys, lr, mpc, psi
from .common import error_line

GROUPS = (demo, lr, fl, psi, mpc, fhe, cnn, keys, identity, circuit, cluster, info)  # in the order `shaper --help` lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shaper", description="Privacy-preserving ML between organisations.")
    parser.add_argument("--version", action="version", version=f"shaper {__version__}",
                        help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit status (0 success, 2 failure, 130 interrupted)."""
    args = build_parser().parse_args(argv)
    try:
        refuse_unheld_security(args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{args.prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if _stdout_gone():
            return 141  # the reader of the output went away (`shaper info | head -1`): as SIGPIPE would
        print(error_line(args.prog, exc), file=sys.stderr)
        return 2
    except Exception as exc:
        print(error_line(args.prog, exc), file=sys.stderr)
        return 2


def refuse_unheld_security(args: argparse.Namespace) -> None:
    """A parties file that asks for ``security = "active"`` runs only commands that hold the
    active engine (``shaper mpc run``); every other command refuses it by name rather than run its
    protocol passively in its place. (A file that does not load is left to the command, which
    names what is wrong with it.)"""
    path = getattr(args, "parties", None)
    if not path or getattr(args, "active_engine", False):
        return
    from ..errors import ConfigError
    from ..net.config import load_parties

    try:
        security = load_parties(path).security
    except ConfigError:
        return
    if security == "active":
        raise ConfigError(f"the parties file asks for security = \"active\", which {args.prog} does not run yet (its "
                          "protocols run on the passive engine; docs/mpc.md, 'Active security'): set security = "
                          "\"passive\" in the parties file to run it knowingly")


def _stdout_gone() -> bool:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return True
    return False


if __name__ == "__main__":
    sys.exit(main())
