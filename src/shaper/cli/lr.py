"""``shaper lr train`` and ``shaper lr predict``: vertical logistic regression between two hosts
(the job glue is :mod:`shaper.jobs.lr`).

Each host runs ``shaper lr train --role guest|host`` with the job's parties file (``shaper
identity new`` on each host, ``docs/net.md``); the guest holds the labels; ``--local 2`` runs both here from one file.
A party first checks its own inputs (arguments, data file, output files). If they fail, it prints
the problem at once and still joins the job, only to abort it with that reason: its peer stops
with "party X aborted: <kind of error> (phase 'start-up')" instead of waiting for a connection that would never come.

``shaper lr predict`` scores new rows with the parts the parties wrote: each party its own part
(its weights and its constant) on its own columns, the scores at the guest; ``--local 2`` from
the parts of a ``--local 2`` run.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    EXPECTED_ERRORS,
    abort_job,
    command,
    group,
    key_bits_option,
    learning_rate,
    out_option,
    party_options,
    where,
)

# The estimator's own defaults (LRParams; a test keeps them equal), written out so that building
# the parser does not import the ML stack.
EPOCHS, BATCH_SIZE, LEARNING_RATE = 10, 64, "auto"


def add_parser(subparsers: Any) -> None:
    lr_sub = group(subparsers, "lr", "vertical logistic regression on real hosts",
                   "Vertical logistic regression between two hosts (docs/logreg.md).")
    train = command(lr_sub, "train", run_train, "run this party's side of a training job (or both with --local 2)",
                    "Run one party of a two-party training job; start the other party on its own host with "
                    "the same parties file. --local 2 runs both here, the columns of --data split between a "
                    "host and the guest.")
    train.add_argument("--role", choices=["guest", "host"], help="guest = the party with the labels (not with --local)")
    party_options(train, local_help="run both parties here, as processes over loopback TLS: the host takes the first "
                                    "half of the columns of --data, the guest the rest and the labels (2)")
    train.add_argument("--data", required=True, metavar="FILE",
                       help="CSV, Parquet or LibSVM file with an id column; rows aligned with the peer's "
                            "unless --align")
    train.add_argument("--align", choices=["auto", "okvs", "ecdh", "fnp"], metavar="PROTOCOL", nargs="?",
                       const="auto",
                       help="first find the ids both parties hold by private set intersection and train on those "
                            "rows only, in a common order (docs/psi.md): auto (the default when --align is given "
                            "alone: the OT-based okvs, or ecdh where the native core lacks it), okvs, ecdh, or fnp "
                            "(Freedman-Nissim-Pinkas with Paillier, far slower)")
    train.add_argument("--id-column", default="id", metavar="NAME", help="column holding the row ids")
    train.add_argument("--label-column", metavar="NAME", help="column holding the 0/1 labels (guest only)")
    train.add_argument("--validation", metavar="FILE",
                       help="held-out rows (same columns, ids aligned with the peer's): loss and AUC per epoch")
    train.add_argument("--epochs", type=int, default=EPOCHS, help="passes over the training rows")
    train.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="rows per mini-batch")
    train.add_argument("--learning-rate", type=learning_rate, default=LEARNING_RATE,
                       help="SGD step size, or 'auto' (from the data's curvature, docs/logreg.md)")
    key_bits_option(train, "each party's homomorphic key size")
    train.add_argument("--scheme", choices=["paillier", "ou"], default="paillier",
                       help="additively homomorphic scheme")
    train.add_argument("--layout", choices=["encrypted", "caesar"], default="encrypted",
                       help="encrypted weights, or CAESAR's secret-shared weights (docs/logreg.md)")
    train.add_argument("--checkpoint-dir", metavar="DIR", help="write a checkpoint after every epoch here")
    train.add_argument("--resume", action="store_true", help="continue from the newest checkpoint both parties have")
    train.add_argument("--events", metavar="PATH", help="append progress events as JSON lines")
    out_option(train, "where to write this party's part of the model (its weights and constant); with --local 2, "
                      "one file per party next to it (model.npz: model.host.npz, model.guest.npz)",
               default="weights.npz")
    # 64 hex digits: a reproducible batch order (tests); masks always come from the CSPRNG
    train.add_argument("--seed", type=bytes.fromhex, help=argparse.SUPPRESS)

    predict = command(lr_sub, "predict", run_predict, "score new rows with a trained model (scores at the guest)",
                      "Score new rows: each party applies its own part of the model (its weights and its constant, "
                      "as lr train wrote it) to its own columns of the same rows, and the guest adds the parts; "
                      "--local 2 does it here from the parts of an lr train --local 2 run.")
    predict.add_argument("--role", choices=["guest", "host"], help="this party's role in training (not with --local)")
    party_options(predict, local_help="the parts of a --local 2 run, all here: --data holds every column (2)")
    predict.add_argument("--weights", required=True, metavar="PATH",
                         help="this party's part as lr train wrote it (with --local 2: the --out of that run)")
    predict.add_argument("--data", required=True, metavar="FILE",
                         help="the rows to score: CSV, Parquet or LibSVM with an id column, this party's columns "
                              "as in training (aligned with the peer's)")
    predict.add_argument("--id-column", default="id", metavar="NAME", help="column holding the row ids")
    predict.add_argument("--label-column", metavar="NAME",
                         help="a 0/1 label column to leave out of the features and score against (guest only)")
    out_option(predict, "the scores as CSV at the guest: id, score (the logit) and probability ('-': standard "
                        "output)", default="scores.csv")


def run_train(args: argparse.Namespace) -> int:
    from ..jobs import lr

    if _local(args):
        if args.role:
            raise ValueError("--local 2 plays both roles: drop --role")
        return lr.train_local(args)
    try:
        inputs = lr.check_train_inputs(args)
    except EXPECTED_ERRORS as exc:
        abort_job(args, exc)
        return 2
    return lr.train_party(args, inputs)


def run_predict(args: argparse.Namespace) -> int:
    from ..jobs import lr

    if _local(args):
        if args.role:
            raise ValueError("--local 2 scores with both parts: drop --role")
        return lr.predict_local(args, list(lr.LOCAL_NAMES))
    if not args.role:
        raise ValueError("pass --role guest or --role host (the role this party trained in)")
    return lr.predict_party(args, tag="lr-scores")



def _local(args: argparse.Namespace) -> bool:
    """Whether this is a ``--local 2`` run (two parties: a host and the guest); else the real-host
    pair ``--parties FILE --me NAME`` must be there."""
    if args.local is not None and args.local != 2:
        raise ValueError(f"--local takes 2 here (a host and the guest), got {args.local}")
    return where(args) is not None
