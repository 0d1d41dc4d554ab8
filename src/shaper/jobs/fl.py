"""``shaper fl demo``: federated learning with Paillier, every role as a local process over TLS.

1. Vertical logistic regression (Hardy et al.; FATE's HeteroLR with an arbiter) on the
   breast-cancer data: the guest holds the diagnosis and 10 features, the host the other 20,
   the arbiter the Paillier key. Compared with scikit-learn's LogisticRegression on all columns.
2. Vertical linear regression on scikit-learn's diabetes data (guest 4 features and the target,
   host 6). Compared with scikit-learn's LinearRegression (R^2).
3. Horizontal FedAvg of a one-hidden-layer MLP on scikit-learn's digits (8x8 images, 10 classes)
   split among 5 clients; a coordinator sums their packed, encrypted updates without the key.
   Compared with the same algorithm averaged in plaintext and with scikit-learn's MLPClassifier
   on the pooled rows.

Prints a table with each party's time per iteration split into encryption, decryption,
homomorphic work and waiting, and writes an HTML report.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table as RichTable

from ..ml.fl.fedavg import FederatedAveraging, plaintext_fedavg
from ..ml.fl.hetero import HeteroLinearModel
from ..ml.report import html_report
from ..net import launch

VERTICAL = ["guest", "host", "arbiter"]
CLIENTS = [f"client-{i}" for i in range(1, 6)]


def _vertical_data(kind: str) -> dict:
    from sklearn.datasets import load_breast_cancer, load_diabetes
    from sklearn.model_selection import train_test_split

    if kind == "logistic":
        X, y = load_breast_cancer(return_X_y=True)
        guest_cols = 10
    else:
        X, y = load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
        guest_cols = 4
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
    return {"Xtr": Xtr, "Xte": Xte, "ytr": ytr, "yte": yte, "guest_cols": guest_cols}


def _vertical_party(session: Any, kind: str, data: dict, opts: dict) -> dict:
    model = HeteroLinearModel(kind, **opts)
    g = data["guest_cols"]
    if session.name == "arbiter":
        model.fit(session, None, role="arbiter")
        model.decision_function(session)
    else:
        cols = slice(0, g) if session.name == "guest" else slice(g, None)
        guest = session.name == "guest"
        model.fit(session, data["Xtr"][:, cols], data["ytr"] if guest else None, role=session.name,
                  validation=(data["Xte"][:, cols], data["yte"] if guest else None))
        z = model.decision_function(session, data["Xte"][:, cols])
        if guest:
            return {"history": model.history_, "stats": model.stats_, "z": z}
    return {"stats": model.stats_}


def _fedavg_party(session: Any, parts: list, test: tuple, opts: dict) -> dict:
    model = FederatedAveraging("mlp", **opts)
    if session.name == "coordinator":
        model.fit(session, None, role="coordinator")
        return {"stats": model.stats_, "rounds": model.rounds_}
    i = CLIENTS.index(session.name)
    model.fit(session, *parts[i], role="client", validation=test)
    return {"stats": model.stats_, "history": model.history_, "params": model.params_}


def _split_line(stats: dict) -> str:
    per = stats.get("per_iteration") or stats.get("per_round") or {}
    return (f"{per.get('seconds', 0):.3f} s = enc {per.get('encrypt', 0):.3f} + dec {per.get('decrypt', 0):.3f} + "
            f"HE {per.get('homomorphic', 0):.3f} + wait {per.get('wait', 0):.3f}")


def run(*, key_bits: int = 2048, backend: str = "shaper", report_path: str | None = "shaper-fl-report.html",
        json_path: str | None = None, console: Console | None = None) -> dict:
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    from .. import __version__

    console = console or Console()
    console.print(f"[bold]shaper {__version__}[/bold]: federated learning with Paillier ({backend} backend, "
                  f"{key_bits}-bit key), every role a local process over TLS 1.3")
    started = time.perf_counter()
    rows: list[tuple[str, str, str]] = []
    summary: dict = {"key_bits": key_bits, "backend": backend}
    ok = True

    # 1. vertical logistic regression, breast cancer
    data = _vertical_data("logistic")
    opts = {"max_iter": 5, "batch_size": 64, "learning_rate": 0.15, "key_bits": key_bits, "backend": backend}
    console.print("1/3 vertical logistic regression, breast cancer: guest 10 features + labels, host 20, arbiter key")
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "logistic", data, opts)))
    sc = StandardScaler().fit(data["Xtr"])
    sk = LogisticRegression(max_iter=1000).fit(sc.transform(data["Xtr"]), data["ytr"])
    sk_auc = float(roc_auc_score(data["yte"], sk.decision_function(sc.transform(data["Xte"]))))
    auc = float(roc_auc_score(data["yte"], res["guest"]["z"]))
    ok &= abs(auc - sk_auc) <= 0.01
    rows += [("vertical logistic: test AUC", f"{auc:.4f}", f"{sk_auc:.4f}"),
             ("  per iteration, guest", _split_line(res["guest"]["stats"]), ""),
             ("  per iteration, host", _split_line(res["host"]["stats"]), ""),
             ("  per iteration, arbiter", _split_line(res["arbiter"]["stats"]), "")]
    summary["vertical_logistic"] = {"auc": auc, "sklearn_auc": sk_auc, "history": res["guest"]["history"],
                                    "per_iteration": {n: r["stats"]["per_iteration"] for n, r in res.items()}}
    logistic_history = res["guest"]["history"]

    # 2. vertical linear regression, diabetes
    data = _vertical_data("linear")
    opts = {"max_iter": 10, "batch_size": 64, "learning_rate": 0.1, "key_bits": key_bits, "backend": backend}
    console.print("2/3 vertical linear regression, diabetes: guest 4 features + target, host 6, arbiter key")
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "linear", data, opts)))
    sk_lin = LinearRegression().fit(data["Xtr"], data["ytr"])
    sk_r2 = float(r2_score(data["yte"], sk_lin.predict(data["Xte"])))
    r2 = float(r2_score(data["yte"], res["guest"]["z"]))
    ok &= r2 >= sk_r2 - 0.05
    rows += [("vertical linear: test R²", f"{r2:.4f}", f"{sk_r2:.4f}"),
             ("  per iteration, host", _split_line(res["host"]["stats"]), "")]
    summary["vertical_linear"] = {"r2": r2, "sklearn_r2": sk_r2, "history": res["guest"]["history"]}

    # 3. horizontal FedAvg, MLP on digits
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    parts = [(Xtr[i::5], ytr[i::5]) for i in range(5)]
    fopts = {"rounds": 5, "local_epochs": 2, "batch_size": 16, "learning_rate": 0.1, "hidden": 32, "n_classes": 10,
             "key_bits": key_bits, "backend": backend}
    console.print("3/3 horizontal FedAvg, MLP (64-32-10) on digits: 5 clients, a coordinator without the key")
    fres = launch(["coordinator", *CLIENTS], _fedavg_party, parts, (Xte, yte), fopts)
    ref = plaintext_fedavg("mlp", parts, **fopts)
    secure = fres[1]["params"]
    gap = float(np.abs(secure - ref).max())
    from ..ml.fl.local_models import make_model

    mlp = make_model("mlp", X.shape[1], n_classes=10, hidden=32)
    acc = float(accuracy_score(yte, mlp.predict(secure, Xte).argmax(axis=1)))
    acc_plain = float(accuracy_score(yte, mlp.predict(ref, Xte).argmax(axis=1)))
    sk_mlp = MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=0).fit(Xtr, ytr)
    sk_acc = float(accuracy_score(yte, sk_mlp.predict(Xte)))
    ok &= gap < 1e-3 and acc >= sk_acc - 0.1
    packing = fres[1]["stats"]["packing"]
    rows += [("horizontal MLP: test accuracy", f"{acc:.4f}", f"{sk_acc:.4f} (pooled MLP)"),
             ("  same algorithm in plaintext", f"{acc_plain:.4f}", f"largest weight gap {gap:.1e}"),
             ("  per round, a client", _split_line(fres[1]["stats"]), ""),
             ("  update packing", f"{mlp.n_params:,} values in {packing['ciphertexts']} ciphertexts",
              f"{packing['slots']} slots of {packing['slot_bits']} bits")]
    summary["horizontal_mlp"] = {"accuracy": acc, "plaintext_accuracy": acc_plain, "sklearn_accuracy": sk_acc,
                                 "max_weight_gap": gap, "packing": packing,
                                 "per_round": fres[1]["stats"]["per_round"], "history": fres[1]["history"]}
    seconds = time.perf_counter() - started
    summary["seconds"] = round(seconds, 1)
    summary["ok"] = bool(ok)

    table = RichTable(title="secure federated training vs scikit-learn")
    table.add_column("measure")
    table.add_column("shaper (secure)", justify="right")
    table.add_column("reference", justify="right")
    for r in rows:
        table.add_row(*r)
    console.print(table)
    console.print(f"finished in {seconds:.1f} s; {'all within' if ok else 'NOT within'} the stated margins "
                  "(AUC 0.01, R² 0.05, accuracy 0.1 of scikit-learn)")
    if report_path:
        path = html_report(report_path, title="shaper fl demo: federated learning with Paillier",
                           history=logistic_history, summary=summary, reference={"scikit-learn": sk_auc},
                           table=rows, columns=("shaper (secure)", "reference"))
        console.print(f"report: {path}")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(summary, fh, indent=1, default=float)
    return summary
