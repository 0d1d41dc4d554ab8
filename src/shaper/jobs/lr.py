"""``shaper demo``: two organisations train a logistic regression on vertically split data.

scikit-learn's breast-cancer data is split by columns: the *host* holds 15 features, the *guest*
the other 15 and the diagnosis labels. Like two real organisations, they do not hold the same
customers: each has about 90 % of the training patients, in its own order. Two local processes
connect over loopback TLS (mutual certificates made for the run), first find the patients they
share by private set intersection (ECDH, ``shaper.protocols.psi``) and line up those rows, then
train on them with the encrypted-weight protocol (Paillier, packed H2S with exact truncation). The guest shows progress; at the end the demo compares AUC and
accuracy with scikit-learn's plaintext LogisticRegression on the same split, splits the time into
computation and communication, counts bytes and cryptographic operations, and writes an HTML
report with the loss and AUC curves.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from ..net import launch
from ..ml import VerticalLogisticRegression
from ..ml.report import html_report, jsonl_writer
from .progress import TrainingProgress

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
    import importlib.util

    return importlib.util.find_spec("shaper._native") is not None


def _party(session: Any, data: dict, params: dict, events: str | None) -> dict:
    from ..ml.data import Table
    from ..protocols import psi

    guest = session.index == 1
    cols = slice(HOST_FEATURES, None) if guest else slice(0, HOST_FEATURES)
    mine = data["rows"][session.index] if psi_available() else data["shared"]
    table = Table(data["ids"][mine], data["X_train"][mine][:, cols], data["y_train"][mine] if guest else None)
    t_psi = time.perf_counter()
    if psi_available():
        table = psi.align(session, table)
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
            "held": len(mine), "aligned": table.rows, "psi_seconds": psi_seconds}


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
    if psi_available():
        console.print(f"private set intersection (ECDH, Ristretto255): host {host['held']} patients, guest "
                      f"{guest['held']}, {guest['aligned']} in common, lined up in {guest['psi_seconds']:.2f} s; "
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
               "psi_seconds": round(guest["psi_seconds"], 3)}
    if report_path:
        path = html_report(report_path, title="shaper demo: vertical logistic regression", history=guest["history"],
                           summary=summary, reference={"scikit-learn (plaintext)": sk_auc}, table=rows,
                           columns=("shaper (secure, 2 parties)", "scikit-learn (plaintext)"))
        console.print(f"report with loss and AUC curves: {path}")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(summary, fh, indent=1, default=float)
        console.print(f"wrote {json_path}")
    return summary
