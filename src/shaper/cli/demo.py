"""``shaper demo`` (two parties train a logistic regression) and ``shaper demo-he`` (a tour of
the additive-HE engine)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import command, json_option, key_bits_option, learning_rate


def add_parser(subparsers: Any) -> None:
    demo = command(subparsers, "demo", run_demo,
                   "two parties train a logistic regression on split data (TLS, Paillier)",
                   "The breast-cancer data split between a host (15 features) and a guest (15 features and "
                   "the labels), trained in two local processes over TLS and compared with scikit-learn.")
    demo.add_argument("--epochs", type=int, default=10, help="passes over the training rows")
    demo.add_argument("--batch-size", type=int, default=64, help="rows per mini-batch")
    demo.add_argument("--learning-rate", type=learning_rate, default="auto",
                      help="SGD step size, or 'auto' (from the data's curvature, docs/logreg.md)")
    key_bits_option(demo, "each party's key size")
    demo.add_argument("--scheme", choices=["paillier", "ou"], default="paillier", help="additively homomorphic scheme")
    demo.add_argument("--layout", choices=["encrypted", "caesar"], default="encrypted",
                      help="encrypted weights, or CAESAR's secret-shared weights (docs/logreg.md)")
    demo.add_argument("--report", default="shaper-demo-report.html", metavar="PATH",
                      help="HTML report with the loss and AUC curves ('' to skip)")
    demo.add_argument("--events", metavar="PATH", help="also write progress events as JSON lines")
    json_option(demo, "also write the final figures as JSON ('-': standard output)")

    he = command(subparsers, "demo-he", run_demo_he,
                 "additive-HE tour: encrypted sparse mat-vec, packing, checked",
                 "Party B encrypts a vector; party A multiplies its sparse matrix with it without the key and "
                 "packs the results; every value is checked against numpy.")
    key_bits_option(he, "key size", old="--bits")
    he.add_argument("--scheme", choices=["paillier", "ou"], default="paillier", help="additively homomorphic scheme")
    he.add_argument("--rows", type=int, default=2000, help="rows of A's sparse matrix")
    he.add_argument("--cols", type=int, default=300, help="columns (length of B's vector)")
    he.add_argument("--density", type=float, default=0.01, help="fraction of non-zero entries in A's matrix")
    json_option(he)


def run_demo(args: argparse.Namespace) -> int:
    """Exit status 1 when the secure model's AUC is more than 0.01 from scikit-learn's."""
    from ..jobs import lr

    summary = lr.run(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
                     key_bits=args.key_bits, scheme=args.scheme, layout=args.layout, json_path=args.json,
                     report_path=args.report, events_path=args.events)
    return 0 if abs(summary["auc"] - summary["sklearn_auc"]) <= 0.01 else 1


def run_demo_he(args: argparse.Namespace) -> int:
    from ..jobs import he

    he.run(key_bits=args.key_bits, scheme=args.scheme, rows=args.rows, cols=args.cols, density=args.density,
           json_path=args.json)
    return 0
