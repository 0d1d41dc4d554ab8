"""``shaper circuit run``: the options of a Bristol Fashion circuit in three-party replicated
sharing, on this machine (``--local 3``) or on three hosts (``--parties FILE --me NAME``); the job
is :mod:`shaper.jobs.circuit`."""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXPECTED_ERRORS, abort_job, command, group, party_options


def add_parser(subparsers: Any) -> None:
    circuit_sub = group(subparsers, "circuit", "Bristol Fashion circuits in three-party replicated sharing",
                        "Bristol Fashion circuits in three-party replicated sharing (docs/replicated.md).")
    run = command(circuit_sub, "run", run_circuit, "evaluate a Bristol Fashion circuit on hex inputs",
                  "Evaluate a circuit file, or a circuit bundled with shaper by name (aes_128.txt), with three "
                  "parties over TLS: local processes (--local 3, the default), or one party of a job on three hosts "
                  "(--parties FILE --me NAME; run it on every host with the same circuit). Prints one big-endian "
                  "hex value per circuit output (every party gets them).")
    run.add_argument("file", help="Bristol Fashion circuit file, or the name of a bundled one (aes_128.txt)")
    run.add_argument("--inputs", nargs="+", default=[], metavar="HEX",
                     help="big-endian hex values (wires LSB first). --local 3 or --plain: one per circuit input "
                          "(AES: key, plaintext). --parties: only this party's: input value k (from 0) is given by "
                          "party k mod 3 of the parties file (AES: the first party the key, the second the "
                          "plaintext, the third none)")
    party_options(run, local_help="run the 3 parties here as processes over loopback TLS (replicated sharing "
                                  "needs exactly 3; the default without --parties)")
    run.add_argument("--plain", action="store_true", help="evaluate in the clear instead (no parties)")


def run_circuit(args: argparse.Namespace) -> int:
    from ..jobs import circuit as circuits

    if args.plain or not (args.parties or args.me):
        outputs = circuits.run_circuit(args.file, args.inputs, plain=args.plain,
                                       parties=circuits.PARTIES if args.local is None else args.local)
    elif args.local is not None:
        raise ValueError("give either --local 3 or --parties FILE --me NAME, not both")
    elif not (args.parties and args.me):
        raise ValueError("on real hosts give both --parties FILE and --me NAME")
    else:
        try:
            circuit, mine = circuits.prepare_party(args.file, args.inputs, args.parties, args.me)
        except EXPECTED_ERRORS as exc:
            abort_job(args, exc)
            return 2
        outputs = circuits.run_party(args.parties, args.me, circuit, mine, key=args.key)
    for value in outputs:
        print(value)
    return 0
