"""``shaper fl``: federated learning with Paillier (docs/fl.md).

    shaper fl train --mode vertical --model logistic --role guest --parties parties.toml --me bank \\
        --data bank.csv --label-column label
    shaper fl train --mode horizontal --model mlp --role client --parties parties.toml --me clinic-3 \\
        --data clinic3.csv --label-column digit
    shaper fl train --mode vertical --model linear --local 3 --data all.csv --label-column y
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

import numpy as np

from ..errors import ConfigError
from .common import EXPECTED_ERRORS, HelpFormatter, abort_job, command

VERTICAL_ROLES, HORIZONTAL_ROLES = ("guest", "host", "arbiter"), ("client", "coordinator")


def add_parser(subparsers: Any) -> None:
    fl = subparsers.add_parser("fl", help="federated learning with Paillier (vertical and horizontal)",
                               formatter_class=HelpFormatter,
                               description="Federated learning with Paillier: coordinated vertical linear models with "
                                           "an arbiter, and horizontal FedAvg with encrypted aggregation (docs/fl.md).")
    fl.set_defaults(prog=fl.prog)
    sub = fl.add_subparsers(dest="fl_command", required=True, metavar="COMMAND")
    train = command(sub, "train", run_train, "run this party's side of a job (or all roles with --local N)")
    train.add_argument("--mode", choices=["vertical", "horizontal"], required=True,
                       help="vertical: parties hold different columns of the same rows; horizontal: different rows")
    train.add_argument("--model", choices=["logistic", "linear", "mlp"], default="logistic",
                       help="mlp: one hidden ReLU layer, softmax (horizontal only)")
    train.add_argument("--role", choices=[*VERTICAL_ROLES, *HORIZONTAL_ROLES], help="this party's role")
    train.add_argument("--parties", metavar="FILE", help="parties file (TOML), see docs/net.md")
    train.add_argument("--me", metavar="NAME", help="this party's name in the parties file")
    train.add_argument("--key", metavar="FILE", help="TLS private key (overrides the parties file)")
    train.add_argument("--local", type=int, metavar="N",
                       help="run every role here: N data parties (guest + N-1 hosts, or N clients) from --data")
    train.add_argument("--data", metavar="FILE", help="CSV, Parquet or LibSVM file with an id column (not at the "
                       "arbiter or coordinator)")
    train.add_argument("--id-column", default="id", metavar="NAME", help="column holding the row ids")
    train.add_argument("--label-column", metavar="NAME", help="column holding the labels (guest; every client)")
    train.add_argument("--validation", metavar="FILE", help="held-out rows with the same columns, scored every epoch")
    train.add_argument("--backend", choices=["shaper", "phe"], default="shaper",
                       help="Paillier engine: shaper's, or python-paillier (the software FATE uses) for comparison")
    train.add_argument("--key-bits", type=int, default=2048, help="Paillier key size")
    train.add_argument("--epochs", type=int, default=10, help="vertical: passes over the rows (FATE's max_iter); "
                       "horizontal: rounds")
    train.add_argument("--batch-size", type=int, help="rows per mini-batch (vertical default: all rows; horizontal: 32)")
    train.add_argument("--learning-rate", type=float, help="step size (vertical default 0.15, horizontal 0.1)")
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
    train.add_argument("--out", default="fl-model.npz", metavar="PATH", help="where to write this party's weights")

    demo = command(sub, "demo", run_demo, "all roles locally: vertical logistic and linear, horizontal FedAvg",
                   "Vertical logistic regression on breast cancer and linear regression on diabetes (guest, host, "
                   "arbiter), and FedAvg of an MLP on the digits data (5 clients and a coordinator), each compared "
                   "with scikit-learn; writes an HTML report.")
    demo.add_argument("--key-bits", type=int, default=2048, help="Paillier key size")
    demo.add_argument("--backend", choices=["shaper", "phe"], default="shaper", help="Paillier engine")
    demo.add_argument("--report", default="shaper-fl-report.html", metavar="PATH", help="HTML report ('' to skip)")
    demo.add_argument("--json", metavar="PATH", help="also write the figures as JSON")


# -- train ---------------------------------------------------------------------------------------------
def _estimator(args: argparse.Namespace, classes: int | None = None) -> Any:
    if args.mode == "vertical":
        from ..ml.fl.hetero import HeteroLinearModel

        if args.model == "mlp":
            raise ConfigError("the vertical mode trains logistic or linear models; mlp is horizontal only")
        return HeteroLinearModel(args.model, max_iter=args.epochs, batch_size=args.batch_size,
                                 learning_rate=args.learning_rate or 0.15, decay=args.decay, l2=args.l2, tol=args.tol,
                                 key_bits=args.key_bits, backend=args.backend, checkpoint_dir=args.checkpoint_dir,
                                 resume=args.resume)
    from ..ml.fl.fedavg import FederatedAveraging

    return FederatedAveraging(args.model, rounds=args.epochs, local_epochs=args.local_epochs,
                              batch_size=args.batch_size or 32, learning_rate=args.learning_rate or 0.1, l2=args.l2,
                              hidden=args.hidden, n_classes=classes or args.classes or 2, quorum=args.quorum,
                              round_timeout=args.round_timeout, key_bits=args.key_bits, backend=args.backend,
                              checkpoint_dir=args.checkpoint_dir, resume=args.resume)


def _read(args: argparse.Namespace, path: str, labels: bool) -> Any:
    from ..ml.data import read_table

    kind = "binary" if args.model == "logistic" else "real"
    table = read_table(path, id_column=args.id_column, label_column=args.label_column if labels else None,
                       labels=kind)
    if args.model == "mlp" and table.y is not None and not np.all(table.y == np.round(table.y)):
        raise ConfigError(f"{path}: mlp labels must be class numbers 0, 1, 2, ...")
    return table


def _check(args: argparse.Namespace) -> None:
    roles = VERTICAL_ROLES if args.mode == "vertical" else HORIZONTAL_ROLES
    if args.local is not None:
        if not 2 <= args.local <= 16:
            raise ConfigError(f"--local takes 2..16 data parties (a guest and at least one host, or at least two "
                              f"clients), got {args.local}")
        if not args.data or not args.label_column:
            raise ConfigError("--local needs --data and --label-column")
        return
    if args.role not in roles:
        raise ConfigError(f"--mode {args.mode} takes --role {' | '.join(roles)}" + ("" if args.role else
                          " (or --local N)"))
    if not args.parties or not args.me:
        raise ConfigError("pass --parties FILE and --me NAME (or --local N)")
    keyless = args.role in ("arbiter", "coordinator")
    if keyless and args.data:
        raise ConfigError(f"the {args.role} holds no data: drop --data")
    if not keyless and not args.data:
        raise ConfigError(f"the {args.role} needs --data")
    labelled = args.role == "client" or args.role == "guest"
    if labelled and not args.label_column:
        raise ConfigError(f"the {args.role} holds labels: pass --label-column")
    if args.role == "host" and args.label_column:
        raise ConfigError("a host has no labels: drop --label-column")


def run_train(args: argparse.Namespace) -> int:
    _check(args)
    if args.local is not None:
        return _run_local(args)
    try:
        table = _read(args, args.data, args.role in ("guest", "client")) if args.data else None
        validation = _read(args, args.validation, args.role in ("guest", "client")) if args.validation else None
        model = _estimator(args, None if table is None or args.model != "mlp" else int(table.y.max()) + 1)
    except EXPECTED_ERRORS as exc:
        abort_job(args, exc)
        return 2
    from ..ml.report import jsonl_writer
    from ..net import Session

    events = jsonl_writer(args.events) if args.events else None
    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        progress = _progress(args.me, events)
        X = None if table is None else table.X
        y = None if table is None else table.y
        val = None if validation is None else (validation.X, validation.y)
        model.fit(session, X, y, role=args.role, validation=val, progress=progress)
        _summary(args.me, args.role, model)
        print(session.stats.table(f"traffic of {args.me}"))
    _save(args.out, model)
    return 0


def _progress(name: str, events: Any) -> Any:
    from ..jobs.progress import event_line

    def show(event: dict) -> None:
        if events is not None:
            events(event)
        line = event_line(event)
        if line is not None:
            print(f"{name}: {line}", flush=True)

    return show


def _summary(name: str, role: str, model: Any) -> None:
    stats = model.stats_
    per = stats.get("per_iteration") or stats.get("per_round") or {}
    if per:
        print(f"{name} ({role}): per {'iteration' if 'per_iteration' in stats else 'round'} "
              f"{per['seconds']:.3f} s = encryption {per['encrypt']:.3f} + decryption {per['decrypt']:.3f} + "
              f"homomorphic {per['homomorphic']:.3f} + waiting {per['wait']:.3f} + other {per['other']:.3f} s "
              f"({stats.get('backend', model.params.backend)} backend, {model.params.key_bits}-bit key)")
    if getattr(model, "resumed_from_", None):
        print(f"{name} ({role}): resumed from the checkpoint of epoch {model.resumed_from_}")


def _save(path: str, model: Any) -> None:
    out = {}
    if getattr(model, "coef_", None) is not None:
        out["coef"] = model.coef_
        if model.intercept_ is not None:
            out["intercept"] = np.array([model.intercept_])
    if getattr(model, "params_", None) is not None:
        out["params"] = model.params_
    if out:
        np.savez(path, **out)
        print(f"weights written to {path}")


# -- --local N -------------------------------------------------------------------------------------------
def _run_local(args: argparse.Namespace) -> int:
    from ..net import launch

    table = _read(args, args.data, True)
    validation = _read(args, args.validation, True) if args.validation else None
    X = table.X.toarray() if hasattr(table.X, "toarray") else np.asarray(table.X)
    Xv = None if validation is None else (validation.X.toarray() if hasattr(validation.X, "toarray")
                                          else np.asarray(validation.X))
    n = args.local
    classes = int(table.y.max()) + 1 if args.model == "mlp" else None
    if args.mode == "vertical":
        if n > X.shape[1]:
            raise ConfigError(f"{X.shape[1]} columns cannot be split among {n} data parties")
        names = ["guest", *[f"host-{i}" for i in range(1, n)], "arbiter"]
        cols = np.array_split(np.arange(X.shape[1]), n)
        parts = {name: cols[i] for i, name in enumerate(names[:-1])}
    else:
        names = ["coordinator", *[f"client-{i}" for i in range(1, n + 1)]]
        rows = np.array_split(np.arange(X.shape[0]), n)
        parts = {name: rows[i] for i, name in enumerate(names[1:])}
    print(f"{args.mode} {args.model}: {' '.join(names)} as local processes over TLS ({args.backend} backend, "
          f"{args.key_bits}-bit key)", flush=True)
    results = launch(names, _local_party, args, X, table.y, Xv, None if validation is None else validation.y,
                     parts, classes)
    for name, res in zip(names, results):
        if res:
            print(f"{name}: {res}")
    return 0


def _local_party(session: Any, args: argparse.Namespace, X: Any, y: Any, Xv: Any, yv: Any, parts: dict,
                 classes: int | None) -> str:
    name = session.name
    model = _estimator(args, classes)
    show = _progress(name, None) if name in ("guest", "client-1") else None
    if args.mode == "vertical":
        role = "guest" if name == "guest" else ("arbiter" if name == "arbiter" else "host")
        if role == "arbiter":
            model.fit(session, None, role=role)
            return ""
        c = parts[name]
        val = None if Xv is None else (Xv[:, c], yv if role == "guest" else None)
        model.fit(session, X[:, c], y if role == "guest" else None, role=role, validation=val, progress=show)
    else:
        role = "coordinator" if name == "coordinator" else "client"
        if role == "coordinator":
            model.fit(session, None, role=role)
            return ""
        r = parts[name]
        model.fit(session, X[r], y[r], role=role, validation=None if Xv is None else (Xv, yv), progress=show)
    per = model.stats_.get("per_iteration") or model.stats_.get("per_round") or {}
    last = model.history_[-1] if model.history_ else {}
    shown = {k: round(v, 4) for k, v in last.items() if isinstance(v, float) and k != "seconds"}
    return (f"{shown}; per step {per.get('seconds', 0):.3f} s (encryption {per.get('encrypt', 0):.3f}, decryption "
            f"{per.get('decrypt', 0):.3f}, homomorphic {per.get('homomorphic', 0):.3f}, waiting {per.get('wait', 0):.3f})")


# -- demo -------------------------------------------------------------------------------------------------
def run_demo(args: argparse.Namespace) -> int:
    """Exit status 1 when a secure model falls short of scikit-learn by more than the stated margins."""
    from ..jobs import fl

    summary = fl.run(key_bits=args.key_bits, backend=args.backend, report_path=args.report, json_path=args.json)
    return 0 if summary["ok"] else 1

