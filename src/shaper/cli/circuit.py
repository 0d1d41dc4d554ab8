"""``shaper circuit run``: a Bristol Fashion circuit in three-party replicated sharing."""

from __future__ import annotations

import argparse
from typing import Any

from .common import HelpFormatter, command


def add_parser(subparsers: Any) -> None:
    circuit = subparsers.add_parser("circuit", help="Bristol Fashion circuits in three-party replicated sharing",
                                    formatter_class=HelpFormatter,
                                    description="Bristol Fashion circuits in three-party replicated sharing "
                                                "(docs/replicated.md).")
    circuit.set_defaults(prog=circuit.prog)
    circuit_sub = circuit.add_subparsers(dest="circuit_command", required=True, metavar="COMMAND")
    run = command(circuit_sub, "run", run_circuit, "evaluate a Bristol Fashion circuit on hex inputs",
                  "Evaluate a circuit file, or a circuit bundled with shaper by name (aes_128.txt), with three "
                  "local parties over TLS; prints one big-endian hex value per circuit output.")
    run.add_argument("file", help="Bristol Fashion circuit file, or the name of a bundled one (aes_128.txt)")
    run.add_argument("--inputs", nargs="+", required=True, metavar="HEX",
                     help="one big-endian hex value per circuit input (wires LSB first); AES: key, plaintext")
    run.add_argument("--local", type=int, default=3, metavar="N",
                     help="local parties (replicated sharing needs exactly 3)")
    run.add_argument("--plain", action="store_true", help="evaluate in the clear instead (no parties)")


def run_circuit(args: argparse.Namespace) -> int:
    from ..jobs import circuit as circuits

    for value in circuits.run_circuit(args.file, args.inputs, plain=args.plain, parties=args.local):
        print(value)
    return 0
