"""``shaper fl``: federated learning with Paillier (docs/fl.md; the job glue is :mod:`shaper.jobs.fl`).

    shaper fl train --mode vertical --model logistic --role guest --parties parties.toml --me bank \\
        --data bank.csv --label-column label
    shaper fl train --mode horizontal --model mlp --role client --parties parties.toml --me clinic-3 \\
        --data clinic3.csv --label-column digit
    shaper fl train --mode vertical --model linear --local 3 --data all.csv --label-column y --out model.npz
    shaper fl predict --local 3 --weights model.npz --data new.csv --out scores.csv
    shaper fl demo

Vertical roles: guest (labels and features), host (features of the same rows), arbiter (the key,
no data). Horizontal roles: client (rows of the shared columns), coordinator (no data, no key).
``--local N`` runs every role on this machine from one file: its columns split among a guest
and N-1 hosts (vertical), or its rows among N clients (horizontal). A party whose own inputs
are wrong prints the problem and aborts the job, so the others stop at once with the reason.
Vertical rows must be aligned beforehand (``shaper psi`` between the guest and each host); the
job checks that every data party holds the same number of rows.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import (group, EXPECTED_ERRORS, abort_job, command, json_option, key_bits_option, learning_rate,
                     out_option, party_options)

VERTICAL_ROLES, HORIZONTAL_ROLES = ("guest", "host", "arbiter"), ("client", "coordinator")


def add_parser(subparsers: Any) -> None:
    sub = group(subparsers, "fl", "federated learning with Paillier (vertical and horizontal)",
                "Federated learning with Paillier: coordinated vertical linear models with "
                "an arbiter, and horizontal FedAvg with encrypted aggregation (docs/fl.md).")
    train = command(sub, "train", run_train, "run this party's side of a job (or all roles with --local N)")
    train.add_argument("--mode", choices=["vertical", "horizontal"], required=True,
                       help="vertical: parties hold different columns of the same rows; horizontal: different rows")
    train.add_argument("--model", choices=["logistic", "linear", "mlp"], default="logistic",
                       help="mlp: one hidden ReLU layer, softmax (horizontal only)")
    train.add_argument("--role", choices=[*VERTICAL_ROLES, *HORIZONTAL_ROLES], help="this party's role")
    party_options(train, local_help="run every role here: N data parties (guest + N-1 hosts, or N clients) from --data")
    train.add_argument("--data", metavar="FILE", help="CSV, Parquet or LibSVM file with an id column (not at the "
                       "arbiter or coordinator)")
    train.add_argument("--id-column", default="id", metavar="NAME", help="column holding the row ids")
    train.add_argument("--label-column", metavar="NAME", help="column holding the labels (guest; every client)")
    train.add_argument("--validation", metavar="FILE", help="held-out rows with the same columns, scored every epoch")
    train.add_argument("--backend", choices=["shaper", "phe"], default="shaper",
                       help="Paillier engine: shaper's, or python-paillier (the software FATE uses) for comparison")
    key_bits_option(train, "Paillier key size")
    train.add_argument("--epochs", type=int, default=10, help="vertical: passes over the rows (FATE's max_iter); "
                       "horizontal: rounds")
    train.add_argument("--batch-size", type=int, help="rows per mini-batch (vertical default: all rows; horizontal: 32)")
    train.add_argument("--learning-rate", type=learning_rate,
                       help="step size (vertical default 0.15, horizontal 0.1); vertical also 'auto': from the "
                            "columns' curvature, as lr train chooses it (docs/logreg.md)")
    train.add_argument("--decay", type=float, default=0.0, help="vertical: learning rate / (1 + decay * step)")
    train.add_argument("--l2", type=float, default=0.0, help="L2 penalty (biases are not penalised)")
    train.add_argument("--tol", type=float, default=1e-4, help="vertical: stop when the epoch loss changes less")
    train.add_argument("--local-epochs", type=int, default=1, help="horizontal: epochs each client trains per round")
    train.add_argument("--hidden", type=int, default=64, help="horizontal mlp: hidden units")
    train.add_argument("--classes", type=int, help="horizontal mlp: number of classes (default: from the labels)")
    train.add_argument("--quorum", type=int, help="horizontal: clients that must deliver for a round to count "
                       "(default: all; fewer ends the job with an error naming the missing ones)")
    train.add_argument("--round-timeout", type=float, default=600.0, help="horizontal: seconds to wait for updates")
    train.add_argument("--checkpoint-dir", metavar="DIR", help="write a checkpoint after every epoch or round here")
    train.add_argument("--resume", action="store_true", help="continue from the newest checkpoint every party has")
    train.add_argument("--events", metavar="PATH", help="append progress events as JSON lines")
    out_option(train, "where this party writes its weights (vertical: its part of the model); with --local N, "
                      "vertical: one file per data party next to it (model.npz: model.guest.npz, model.host-1.npz, "
                      "...), horizontal: the model", default="fl-model.npz")

    predict = command(sub, "predict", run_predict, "score new rows with a trained model (vertical: scores at the guest)",
                      "Score new rows. Vertical: each data party applies its own part of the model (its weights and "
                      "its constant, as fl train wrote it) to its own columns of the same rows, and the guest adds "
                      "the parts (--parties FILE --me NAME on every host; the arbiter only joins), or --local N does "
                      "it here from the parts of an fl train --local N run. Horizontal: a client's model file and "
                      "its rows, here.")
    predict.add_argument("--role", choices=list(VERTICAL_ROLES), help="this party's role in training (real hosts)")
    party_options(predict, local_help="the parts of an fl train --local N run, all here: --data holds every column")
    predict.add_argument("--weights", metavar="PATH",
                         help="this party's weights as fl train wrote them (with --local N: the --out of that run)")
    predict.add_argument("--data", metavar="FILE", help="the rows to score: CSV, Parquet or LibSVM with an id column, "
                         "this party's columns as in training (aligned with the others')")
    predict.add_argument("--id-column", default="id", metavar="NAME", help="column holding the row ids")
    predict.add_argument("--label-column", metavar="NAME",
                         help="a label column to leave out of the features and score against (guest)")
    out_option(predict, "the scores as CSV (at the guest): id, score and, for logistic models, probability "
                        "('-': standard output)", default="scores.csv")

    demo = command(sub, "demo", run_demo, "all roles locally: vertical logistic and linear, horizontal FedAvg",
                   "Vertical logistic regression on breast cancer and linear regression on diabetes (guest, host, "
                   "arbiter), and FedAvg of an MLP on the digits data (5 clients and a coordinator), each compared "
                   "with scikit-learn; writes an HTML report.")
    key_bits_option(demo, "Paillier key size")
    demo.add_argument("--backend", choices=["shaper", "phe"], default="shaper", help="Paillier engine")
    demo.add_argument("--report", default="shaper-fl-report.html", metavar="PATH", help="HTML report ('' to skip)")
    json_option(demo)


def run_train(args: argparse.Namespace) -> int:
    from ..jobs import fl

    fl.check_train(args)
    if args.local is not None:
        return fl.train_local(args)
    try:
        inputs = fl.check_train_inputs(args)
    except EXPECTED_ERRORS as exc:
        abort_job(args, exc)
        return 2
    return fl.train_party(args, *inputs)


def run_predict(args: argparse.Namespace) -> int:
    from ..jobs import fl

    if args.local is not None:
        if not 2 <= args.local <= 16:
            raise ValueError(f"--local takes 2..16 data parties (a guest and at least one host), got {args.local}")
        if args.parties or args.me or args.role:
            raise ValueError("give either --local N or --parties FILE --me NAME --role ROLE, not both")
        if not args.weights or not args.data:
            raise ValueError("--local needs --weights (the --out of the fl train --local run) and --data")
    return fl.predict(args)


def run_demo(args: argparse.Namespace) -> int:
    """Exit status 1 when a secure model falls short of a comparison the demo states (it prints
    each with its gap)."""
    from ..jobs import fl

    summary = fl.run(key_bits=args.key_bits, backend=args.backend, report_path=args.report, json_path=args.json)
    return 0 if summary["ok"] else 1
