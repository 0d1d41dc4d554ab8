"""``shaper lr train``: one party's side of a vertical logistic regression between two hosts.

Each host runs ``shaper lr train --role guest|host`` with the job's parties file (``shaper
certs``, ``docs/net.md``); the guest holds the labels. A party first checks its own inputs
(arguments, data file, output files). If they fail, it prints the problem at once and still joins
the job, only to abort it with that reason: its peer stops with "party X aborted: <reason>"
instead of waiting for a connection that would never come.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigError
from .common import EXPECTED_ERRORS, HelpFormatter, abort_job, command, learning_rate

# The estimator's own defaults (LRParams; a test keeps them equal), written out so that building
# the parser does not import the ML stack.
EPOCHS, BATCH_SIZE, LEARNING_RATE = 10, 64, "auto"


def add_parser(subparsers: Any) -> None:
    lr = subparsers.add_parser("lr", help="vertical logistic regression on real hosts", formatter_class=HelpFormatter,
                               description="Vertical logistic regression between two hosts (docs/logreg.md).")
    lr.set_defaults(prog=lr.prog)
    lr_sub = lr.add_subparsers(dest="lr_command", required=True, metavar="COMMAND")
    train = command(lr_sub, "train", run_train, "run this party's side of a training job",
                    "Run one party of a two-party training job; start the other party on its own host with "
                    "the same parties file.")
    train.add_argument("--role", choices=["guest", "host"], required=True, help="guest = the party with the labels")
    train.add_argument("--parties", required=True, metavar="FILE", help="parties file (TOML), see docs/net.md")
    train.add_argument("--me", required=True, metavar="NAME", help="this party's name in the parties file")
    train.add_argument("--key", metavar="FILE", help="TLS private key (overrides the parties file)")
    train.add_argument("--data", required=True, metavar="FILE",
                       help="CSV, Parquet or LibSVM file with an id column; rows aligned with the peer's "
                            "unless --align")
    train.add_argument("--align", choices=["ecdh", "fnp"], metavar="PROTOCOL",
                       help="first find the ids both parties hold by private set intersection (ecdh, or fnp: "
                            "Freedman-Nissim-Pinkas with Paillier, far slower) and train on those rows only, in a "
                            "common order (docs/psi.md)")
    train.add_argument("--id-column", default="id", metavar="NAME", help="column holding the row ids")
    train.add_argument("--label-column", metavar="NAME", help="column holding the 0/1 labels (guest only)")
    train.add_argument("--validation", metavar="FILE",
                       help="held-out rows (same columns, ids aligned with the peer's): loss and AUC per epoch")
    train.add_argument("--epochs", type=int, default=EPOCHS, help="passes over the training rows")
    train.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="rows per mini-batch")
    train.add_argument("--learning-rate", type=learning_rate, default=LEARNING_RATE,
                       help="SGD step size, or 'auto' (from the data's curvature, docs/logreg.md)")
    train.add_argument("--key-bits", type=int, default=2048, help="each party's homomorphic key size")
    train.add_argument("--scheme", choices=["paillier", "ou"], default="paillier",
                       help="additively homomorphic scheme")
    train.add_argument("--layout", choices=["encrypted", "caesar"], default="encrypted",
                       help="encrypted weights, or CAESAR's secret-shared weights (docs/logreg.md)")
    train.add_argument("--checkpoint-dir", metavar="DIR", help="write a checkpoint after every epoch here")
    train.add_argument("--resume", action="store_true", help="continue from the newest checkpoint both parties have")
    train.add_argument("--events", metavar="PATH", help="append progress events as JSON lines")
    train.add_argument("--out", default="weights.npz", metavar="PATH", help="where to write this party's own weights")
    # 64 hex digits: reproducible masks and shuffles, for tests only (it makes the masks predictable)
    train.add_argument("--seed", type=bytes.fromhex, help=argparse.SUPPRESS)


def run_train(args: argparse.Namespace) -> int:
    from ..ml.data import check_aligned
    from ..net import Session

    try:
        table, validation, model, events = _check_inputs(args)
    except EXPECTED_ERRORS as exc:
        abort_job(args, exc)
        return 2
    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        if args.align:
            table, validation = _align(args, session, table, validation)
        check_aligned(session, table.ids)
        if validation is not None:
            check_aligned(session, validation.ids)
        _train(args, session, model, table, validation, events)
        _save_weights(args.out, model)
        _report(args, model)
        print(session.stats.table(f"traffic of {args.me}"))
    return 0


def _align(args: argparse.Namespace, session: Any, table: Any, validation: Any) -> tuple[Any, Any]:
    """The rows of the training (and validation) ids both parties hold, in a common order."""
    from ..protocols import psi

    out = []
    for name, t in (("training", table), ("validation", validation)):
        if t is None:
            continue
        aligned = psi.align(session, t, protocol=args.align)
        print(f"{args.me} ({args.role}): {name} rows aligned by PSI ({args.align}): {aligned.rows:,} of "
              f"{t.rows:,} ids are shared with the peer", flush=True)
        if aligned.rows == 0:
            raise ConfigError(f"the parties share no {name} ids: nothing to train on")
        out.append(aligned)
    return out[0], (out[1] if validation is not None else None)


def _train(args: argparse.Namespace, session: Any, model: Any, table: Any, validation: Any, events: Any) -> None:
    """Fit, with the live display at the guest and epoch lines at the host."""
    from ..jobs.progress import TrainingProgress, event_line

    val = None if validation is None else (validation.X, validation.y)
    callbacks = [events] if events is not None else []
    if args.role == "guest" and sys.stdout.isatty():
        with TrainingProgress() as display:
            model.fit(session, table.X, table.y, validation=val,
                      progress=lambda event: [cb(event) for cb in (*callbacks, display)])
        return

    def lines(event: dict) -> None:
        for cb in callbacks:
            cb(event)
        line = event_line(event)
        if line is not None:
            print(line, flush=True)

    model.fit(session, table.X, table.y, validation=val, progress=lines)


def _report(args: argparse.Namespace, model: Any) -> None:
    """What this party may know at the end: epochs, time, bytes, the learning rate and the
    monitored losses (both parties learn them); validation AUC at the guest."""
    from ..jobs.progress import epoch_line

    stats, last = model.stats_, model.history_[-1]
    if model.resumed_from_ is not None:
        print(f"{args.me} ({args.role}): resumed from the checkpoint of epoch {model.resumed_from_}")
    print(f"{args.me} ({args.role}): trained {stats['epochs_run']} epochs in {stats['seconds']:.1f} s "
          f"({stats['compute_seconds']:.1f} s computing, {stats['communication_seconds']:.1f} s waiting for the peer), "
          f"{stats['bytes_sent'] / 1e6:.1f} MB sent, {stats['bytes_received'] / 1e6:.1f} MB received; "
          f"learning rate {model.learning_rate_:.3g}")
    print(f"{args.me} ({args.role}): final {epoch_line(last)}; own weights written to {args.out}")


def _check_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """This party's own inputs, checked before the job starts: (table, validation table or None,
    model, progress-event writer or None)."""
    from ..ml import VerticalLogisticRegression
    from ..ml.data import read_table
    from ..ml.report import jsonl_writer

    if args.role == "guest" and not args.label_column:
        raise ConfigError("the guest holds the labels: pass --label-column")
    if args.role == "host" and args.label_column:
        raise ConfigError("the host has no labels: drop --label-column")
    model = VerticalLogisticRegression(epochs=args.epochs, batch_size=args.batch_size,
                                       learning_rate=args.learning_rate, key_bits=args.key_bits, scheme=args.scheme,
                                       layout=args.layout, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
                                       seed=args.seed)
    table = read_table(args.data, id_column=args.id_column, label_column=args.label_column)
    validation = None
    if args.validation:
        validation = read_table(args.validation, id_column=args.id_column, label_column=args.label_column)
        if validation.X.shape[1] != table.X.shape[1]:
            raise ConfigError(f"{args.validation} has {validation.X.shape[1]} feature columns, "
                              f"{args.data} has {table.X.shape[1]}")
    events = jsonl_writer(args.events) if args.events else None
    return table, validation, model, events


def _save_weights(path: str, model: Any) -> None:
    import numpy as np

    out = {"coef": model.coef_}
    if model.intercept_ is not None:
        out["intercept"] = np.array([model.intercept_])
    np.savez(path, **out)
