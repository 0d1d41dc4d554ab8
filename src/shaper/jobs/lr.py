"""``shaper demo``, ``shaper lr train`` and ``shaper lr predict``: vertical logistic regression
between two organisations (the protocol is :mod:`shaper.ml.logreg`).

``shaper demo`` (:func:`run`): two organisations train a logistic regression on vertically split
data.

scikit-learn's breast-cancer data is split by columns: the *host* holds 15 features, the *guest*
the other 15 and the diagnosis labels. Like two real organisations, they do not hold the same
customers: each has about 90 % of the training patients, in its own order. Two local processes
connect over loopback TLS (mutual certificates made for the run), first find the patients they
share by private set intersection (:func:`shaper.ml.alignment.align` with its default protocol, the
OT-based okvs; ECDH where the native core lacks it) and line up those rows, then
train on them with the encrypted-weight protocol (Paillier, packed H2S with exact truncation). The guest shows progress; at the end the demo compares AUC and
accuracy with scikit-learn's plaintext LogisticRegression on the same split, splits the time into
computation and communication, counts bytes and cryptographic operations, and writes an HTML
report with the loss and AUC curves.

``shaper lr train`` (:func:`check_train_inputs`, :func:`train_party`, :func:`train_local`): one
party of a training job on real hosts, with its own data file, or both parties here with
``--local 2`` (the columns of one file split between a host and the guest, which holds the
labels). Each party writes its own part of the model (:class:`shaper.ml.scoring.LinearPart`).

``shaper lr predict`` (:func:`predict_party`, :func:`predict_local`): the scores of new rows from
the parts (:mod:`shaper.ml.scoring`: each party's part of the linear score, every constant
counted once), at the guest; the same for ``shaper fl predict``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table as RichTable

from ..errors import ConfigError
from ..ml import VerticalLogisticRegression
from ..ml.scoring import LinearPart, joint_scores, load_part, local_scores, save_part
from ..net import launch
from .progress import TrainingProgress, epoch_line, event_line, jsonl_writer
from .report import html_report, write_json, write_scores

HOST_FEATURES = 15


def dataset(seed: int = 0) -> dict[str, Any]:
    """The split data: ``rows[party]`` are the training rows that party holds (about 90 % each,
    in its own order), ``shared`` the rows both hold; the test rows are common."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)  # the values as published; the job standardises them
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
    rng = np.random.default_rng(seed)
    rows = [rng.permutation(len(y_tr))[: round(0.9 * len(y_tr))] for _ in range(2)]
    ids = np.array([f"patient-{i:04d}" for i in range(len(y_tr))])
    return {"X_train": X_tr, "X_test": X_te, "y_train": y_tr, "y_test": y_te, "ids": ids, "rows": rows,
            "shared": np.intersect1d(rows[0], rows[1])}


def psi_available() -> bool:
    """PSI's native kernels are here (the extension is built): OT-based okvs's, or ECDH's curve
    arithmetic."""
    from ..kernels import ecc, okvs

    return okvs.available() or ecc.available()


#: how the demo names the protocol that lined up the patients
PSI_NAMES = {"okvs": "OT-based: OKVS over SoftSpoken VOLE", "ecdh": "ECDH, Ristretto255"}


def psi_protocol() -> str | None:
    """The protocol the demo's alignment runs (``align``'s default, "auto"), or None without the
    native extension (the demo then skips PSI)."""
    from ..protocols.psi import resolve

    return resolve("auto") if psi_available() else None


def _party(session: Any, data: dict, params: dict, events: str | None) -> dict:
    from ..ml.alignment import align
    from ..ml.data import Table

    guest = session.index == 1
    cols = slice(HOST_FEATURES, None) if guest else slice(0, HOST_FEATURES)
    mine = data["rows"][session.index] if psi_available() else data["shared"]
    table = Table(data["ids"][mine], data["X_train"][mine][:, cols], data["y_train"][mine] if guest else None)
    t_psi = time.perf_counter()
    if psi_available():
        table = align(session, table)
    psi_seconds = time.perf_counter() - t_psi
    X_tr, X_te = table.X, data["X_test"][:, cols]
    y_tr, y_te = (table.y, data["y_test"]) if guest else (None, None)
    model = VerticalLogisticRegression(**params)
    callbacks = [jsonl_writer(events)] if (events and guest) else []
    with TrainingProgress() if guest else contextlib.nullcontext() as display:
        if display is not None:
            callbacks.append(display)
        model.fit(session, X_tr, y_tr, validation=(X_te, y_te),
                  progress=lambda event: [cb(event) for cb in callbacks])
        proba = model.predict_proba(session, X_te)
    return {"party": session.name, "history": model.history_, "stats": model.stats_, "proba": proba,
            "coef": model.coef_, "traffic": session.stats.as_dict(), "learning_rate": model.learning_rate_,
            "held": len(mine), "aligned": table.rows, "psi_seconds": psi_seconds, "psi_protocol": psi_protocol()}


def run(*, epochs: int = 10, batch_size: int = 64, learning_rate: float | str = "auto", key_bits: int = 2048,
        scheme: str = "paillier", layout: str = "encrypted", json_path: str | None = None,
        report_path: str | None = "shaper-demo-report.html", events_path: str | None = None,
        console: Console | None = None) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from .. import __version__

    console = console or Console()
    data = dataset()
    console.print(f"[bold]shaper {__version__}[/bold]: vertical logistic regression, breast-cancer data "
                  f"({len(data['y_train'])} training patients, {len(data['y_test'])} test rows)")
    console.print(f"  host: {HOST_FEATURES} features | guest: {data['X_train'].shape[1] - HOST_FEATURES} features "
                  f"+ labels | {layout} layout, {scheme} {key_bits}-bit, two processes over loopback TLS 1.3")
    t_sk = time.perf_counter()
    shared = data["shared"]  # scikit-learn sees the same training rows as the secure job
    sk = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(data["X_train"][shared],
                                                                                data["y_train"][shared])
    sk_seconds = time.perf_counter() - t_sk
    sk_auc = float(roc_auc_score(data["y_test"], sk.decision_function(data["X_test"])))
    sk_acc = float(accuracy_score(data["y_test"], sk.predict(data["X_test"])))

    params = {"epochs": epochs, "batch_size": batch_size, "learning_rate": learning_rate, "key_bits": key_bits,
              "scheme": scheme, "layout": layout}
    started = time.perf_counter()
    host, guest = launch(["host", "guest"], _party, data, params, events_path)
    seconds = time.perf_counter() - started
    protocol = guest["psi_protocol"]
    if protocol is not None:
        console.print(f"private set intersection ({PSI_NAMES.get(protocol, protocol)}): host {host['held']} "
                      f"patients, guest {guest['held']}, {guest['aligned']} in common, lined up in "
                      f"{guest['psi_seconds']:.2f} s; "
                      "neither learned the other's other patients")
    else:
        console.print("[yellow]the native extension is not built: PSI skipped, both parties start from the "
                      f"{len(shared)} shared patients[/yellow]")
    proba = guest["proba"]
    auc = float(roc_auc_score(data["y_test"], proba))
    acc = float(accuracy_score(data["y_test"], (proba >= 0.5).astype(int)))
    bytes_total = host["traffic"]["bytes_sent"] + guest["traffic"]["bytes_sent"]
    ops = {k: host["stats"]["crypto"][k] + guest["stats"]["crypto"][k] for k in host["stats"]["crypto"]}

    table = RichTable(title="secure training vs scikit-learn (plaintext, all features in one place)")
    table.add_column("measure")
    table.add_column("shaper (secure, 2 parties)", justify="right")
    table.add_column("scikit-learn (plaintext)", justify="right")
    rows = [
        ("test AUC", f"{auc:.4f}", f"{sk_auc:.4f}"),
        ("test accuracy", f"{acc:.4f}", f"{sk_acc:.4f}"),
        ("wall time", f"{seconds:.1f} s", f"{sk_seconds:.3f} s"),
        ("  computation (guest / host)", f"{guest['stats']['compute_seconds']:.1f} / {host['stats']['compute_seconds']:.1f} s", ""),
        ("  waiting for the peer (guest / host)",
         f"{guest['stats']['communication_seconds']:.1f} / {host['stats']['communication_seconds']:.1f} s", ""),
        ("bytes on the wire (both directions)", f"{bytes_total / 1e6:.2f} MB", "0"),
        ("encryptions / decryptions", f"{ops['encryptions']:,} / {ops['decryptions']:,}", ""),
        ("ciphertext products / packed values", f"{ops['ciphertext_products']:,} / {ops['packed_values']:,}", ""),
    ]
    for r in rows:
        table.add_row(*r)
    console.print(table)
    console.print(f"learning rate: {guest['learning_rate']:.3g}"
                  + (" (chosen from the data's curvature)" if learning_rate == "auto" else ""))
    gap = abs(auc - sk_auc)
    console.print(f"AUC difference to scikit-learn: {gap:.4f} ({'within' if gap <= 0.01 else 'OUTSIDE'} 0.01)")
    summary = {"auc": auc, "sklearn_auc": sk_auc, "accuracy": acc, "sklearn_accuracy": sk_acc,
               "seconds": round(seconds, 2), "bytes": bytes_total, "crypto_operations": ops,
               "compute_seconds": {"host": host["stats"]["compute_seconds"], "guest": guest["stats"]["compute_seconds"]},
               "communication_seconds": {"host": host["stats"]["communication_seconds"],
                                         "guest": guest["stats"]["communication_seconds"]},
               "params": params, "learning_rate": guest["learning_rate"], "history": guest["history"],
               "rows_held": {"host": host["held"], "guest": guest["held"]}, "rows_aligned": guest["aligned"],
               "psi_seconds": round(guest["psi_seconds"], 3), "psi_protocol": protocol}
    if report_path:
        path = html_report(report_path, title="shaper demo: vertical logistic regression", history=guest["history"],
                           summary=summary, reference={"scikit-learn (plaintext)": sk_auc}, table=rows,
                           columns=("shaper (secure, 2 parties)", "scikit-learn (plaintext)"))
        console.print(f"report with loss and AUC curves: {path}")
    if json_path:
        where = write_json(json_path, summary)
        console.print(f"wrote the figures to {where}")
    return summary


# -- shaper lr train ---------------------------------------------------------------------------------
#: ``--local 2``: party 0 (the host) holds the first half of the file's columns, party 1 (the guest)
#: the rest and the labels
LOCAL_NAMES = ("host", "guest")


def party_file(out: str | Path, name: str) -> Path:
    """Where party ``name``'s part of a model goes in a run with ``--local N``: next to ``out``,
    named for the party (``model.npz`` -> ``model.guest.npz``)."""
    path = Path(out)
    stem, suffix = (path.stem, path.suffix) if path.suffix else (path.name, ".npz")
    return path.with_name(f"{stem}.{name}{suffix}")


def model_part(model: Any, role: str, kind: str = "logistic", columns: Any = None) -> LinearPart:
    """A trained vertical model's part at this party: its weights and its constant (0 where it has
    none)."""
    return LinearPart(np.asarray(model.coef_, dtype=np.float64), float(model.intercept_ or 0.0), role, kind,
                      None if columns is None else np.asarray(columns))


def _estimator(opts: argparse.Namespace) -> VerticalLogisticRegression:
    return VerticalLogisticRegression(epochs=opts.epochs, batch_size=opts.batch_size, learning_rate=opts.learning_rate,
                                      key_bits=opts.key_bits, scheme=opts.scheme, layout=opts.layout,
                                      checkpoint_dir=opts.checkpoint_dir, resume=opts.resume, seed=opts.seed)


@dataclass
class TrainInputs:
    """One party's inputs, checked before its job starts."""

    table: Any
    validation: Any
    model: VerticalLogisticRegression
    events: Any


def check_train_inputs(opts: argparse.Namespace) -> TrainInputs:
    """This party's own inputs (``opts``: the options of ``shaper lr train``), checked before the
    job starts; a :class:`ConfigError` (or an unreadable file) names the problem."""
    from ..ml.data import read_table

    if opts.role not in ("guest", "host"):
        raise ConfigError("pass --role guest (the party with the labels) or --role host (or --local 2)")
    if opts.role == "guest" and not opts.label_column:
        raise ConfigError("the guest holds the labels: pass --label-column")
    if opts.role == "host" and opts.label_column:
        raise ConfigError("the host has no labels: drop --label-column")
    model = _estimator(opts)
    table = read_table(opts.data, id_column=opts.id_column, label_column=opts.label_column)
    validation = None
    if opts.validation:
        validation = read_table(opts.validation, id_column=opts.id_column, label_column=opts.label_column)
        if validation.X.shape[1] != table.X.shape[1]:
            raise ConfigError(f"{opts.validation} has {validation.X.shape[1]} feature columns, "
                              f"{opts.data} has {table.X.shape[1]}")
    events = jsonl_writer(opts.events) if opts.events else None
    return TrainInputs(table, validation, model, events)


def train_party(opts: argparse.Namespace, inputs: TrainInputs) -> int:
    """This party's side of the job on real hosts: align (``--align``), check the rows line up,
    train (a live display at the guest on a terminal, epoch lines otherwise), write its part."""
    from ..ml.alignment import align
    from ..ml.data import check_aligned
    from ..net import Session
    from ..protocols.psi import resolve

    protocol = resolve(opts.align) if opts.align else None  # what --align auto runs, to name it

    table, validation = inputs.table, inputs.validation
    with Session.from_config(opts.parties, me=opts.me, key=opts.key) as session:
        if opts.align:
            aligned = []
            for name, t in (("training", table), ("validation", validation)):
                if t is None:
                    continue
                rows = align(session, t, protocol=opts.align)
                print(f"{opts.me} ({opts.role}): {name} rows aligned by PSI ({protocol}): {rows.rows:,} of "
                      f"{t.rows:,} ids are shared with the peer", flush=True)
                if rows.rows == 0:
                    raise ConfigError(f"the parties share no {name} ids: nothing to train on")
                aligned.append(rows)
            table, validation = aligned[0], (aligned[1] if validation is not None else None)
        check_aligned(session, table.ids)
        if validation is not None:
            check_aligned(session, validation.ids)
        val = None if validation is None else (validation.X, validation.y)
        callbacks = [inputs.events] if inputs.events is not None else []
        model = inputs.model
        if opts.role == "guest" and sys.stdout.isatty():
            with TrainingProgress() as display:
                model.fit(session, table.X, table.y, validation=val,
                          progress=lambda event: [cb(event) for cb in (*callbacks, display)])
        else:
            model.fit(session, table.X, table.y, validation=val, progress=_lines("", callbacks))
        save_part(opts.out, model_part(model, opts.role))
        for line in report_lines(f"{opts.me} ({opts.role})", model):
            print(line)
        print(f"{opts.me} ({opts.role}): its part of the model (weights and constant) written to {opts.out}")
        print(session.stats.table(f"traffic of {opts.me}"))
    return 0


def _lines(prefix: str, callbacks: list) -> Any:
    """A progress callback: the events to ``callbacks``, one line per event that deserves one."""
    def show(event: dict) -> None:
        for cb in callbacks:
            cb(event)
        line = event_line(event)
        if line is not None:
            print(f"{prefix}{line}", flush=True)

    return show


def report_lines(who: str, model: VerticalLogisticRegression) -> list[str]:
    """What a party may know at the end: epochs, time, bytes, the learning rate and the monitored
    losses (both parties learn them); validation AUC at the guest."""
    stats, last = model.stats_, model.history_[-1]
    lines = []
    if model.resumed_from_ is not None:
        lines.append(f"{who}: resumed from the checkpoint of epoch {model.resumed_from_}")
    lines.append(f"{who}: trained {stats['epochs_run']} epochs in {stats['seconds']:.1f} s "
                 f"({stats['compute_seconds']:.1f} s computing, {stats['communication_seconds']:.1f} s waiting for "
                 f"the peer), {stats['bytes_sent'] / 1e6:.1f} MB sent, {stats['bytes_received'] / 1e6:.1f} MB "
                 f"received; learning rate {model.learning_rate_:.3g}")
    lines.append(f"{who}: final {epoch_line(last, model.measures_)}")
    return lines


def train_local(opts: argparse.Namespace) -> int:
    """``--local 2``: the host and the guest as two processes over loopback TLS, from one file
    (the host the first half of its columns, the guest the rest and the labels); each part of
    the model is written next to ``--out`` (:func:`party_file`)."""
    from ..ml.data import read_table

    if not opts.label_column:
        raise ConfigError("--local needs --label-column (the guest's labels)")
    if opts.align:
        raise ConfigError("--align lines up two parties' files; with --local the parties share one file")
    _estimator(opts)  # the settings are checked before any process starts
    table = read_table(opts.data, id_column=opts.id_column, label_column=opts.label_column)
    validation = None
    if opts.validation:
        validation = read_table(opts.validation, id_column=opts.id_column, label_column=opts.label_column)
    columns = np.array_split(np.arange(table.X.shape[1]), 2)
    if min(c.size for c in columns) == 0:
        raise ConfigError(f"{opts.data} has {table.X.shape[1]} feature column(s): two parties need one each")
    print(f"host (columns 1-{columns[0].size}) and guest (columns {columns[0].size + 1}-{table.X.shape[1]} and the "
          f"labels) as local processes over TLS ({opts.scheme} {opts.key_bits}-bit, {opts.layout} layout)", flush=True)
    results = launch(list(LOCAL_NAMES), _local_train_party, opts, table, validation, columns)
    for name, res in zip(LOCAL_NAMES, results):
        path = save_part(party_file(opts.out, name), res["part"])
        for line in res["lines"]:
            print(line)
        print(f"{name}: its part of the model written to {path}")
    return 0


def _local_train_party(session: Any, opts: argparse.Namespace, table: Any, validation: Any, columns: list) -> dict:
    guest = session.name == "guest"
    c = columns[session.index]
    model = _estimator(opts)
    events = [jsonl_writer(opts.events)] if (opts.events and guest) else []
    val = None if validation is None else (validation.X[:, c], validation.y if guest else None)
    model.fit(session, table.X[:, c], table.y if guest else None, validation=val,
              progress=_lines(f"{session.name}: ", events) if guest else None)
    return {"part": model_part(model, session.name, columns=c), "lines": report_lines(session.name, model)}


# -- shaper lr predict / shaper fl predict -------------------------------------------------------------
def read_rows(path: str, id_column: str, label_column: str | None, kind: str = "logistic") -> Any:
    """The rows to score (a label column, if named, is kept apart to report how good the scores are)."""
    from ..ml.data import read_table

    return read_table(path, id_column=id_column, label_column=label_column,
                      labels="binary" if kind == "logistic" else "real")


def predict_party(opts: argparse.Namespace, *, tag: str = "scores") -> int:
    """One party's side of scoring on real hosts (``opts``: the options of ``shaper lr predict``
    or ``shaper fl predict``): the guest and every host with its own weights file and its own
    columns of the same rows; the guest writes the scores to ``--out``. A party without a model
    (``--role arbiter``) only joins."""
    from ..net import Session

    part, rows = None, None
    if opts.role != "arbiter":
        part = load_part(opts.weights, role=opts.role)
        rows = read_rows(opts.data, opts.id_column, opts.label_column, part.model)
        if opts.role != "guest" and rows.y is not None:
            raise ConfigError("a host has no labels: drop --label-column")
    with Session.from_config(opts.parties, me=opts.me, key=opts.key) as session:
        z = joint_scores(session, part, None if rows is None else rows.X, None if rows is None else rows.ids, tag=tag)
    if z is None:
        print(f"{opts.me} ({opts.role}): sent its part of the scores to the guest; it learns nothing back")
        return 0
    _write_scores(opts, rows.ids, z, part.model, rows.y)
    return 0


def predict_local(opts: argparse.Namespace, names: list[str]) -> int:
    """Scoring from the parts of a ``--local N`` run (``names``: its data parties), all here: the
    rows of one file with every column, each part applied to its own, every constant once."""
    parts = [load_part(party_file(opts.weights, name), role="guest" if name == "guest" else "host") for name in names]
    rows = read_rows(opts.data, opts.id_column, opts.label_column, parts[0].model)
    z = local_scores(parts, rows.X)
    _write_scores(opts, rows.ids, z, parts[0].model, rows.y)
    return 0


def _write_scores(opts: argparse.Namespace, ids: Any, z: np.ndarray, kind: str, y: Any) -> None:
    where = write_scores(opts.out, ids, z, kind, id_column=opts.id_column)
    line = f"scores of {len(z):,} rows written to {where}"
    if y is not None and len(y):
        from sklearn.metrics import r2_score, roc_auc_score

        y = np.asarray(y, dtype=float)
        if kind == "logistic":
            auc = roc_auc_score(y, z) if 0 < y.sum() < y.size else float("nan")
            line += f"; against --label-column: AUC {auc:.4f}, accuracy {np.mean((z >= 0) == (y == 1)):.4f}"
        else:
            line += f"; against --label-column: R² {r2_score(y, z):.4f}"
    print(line)
