"""``shaper fl train``, ``shaper fl predict`` and ``shaper fl demo``: federated learning with
Paillier (the models are :mod:`shaper.ml.fl`, the messages :mod:`shaper.protocols.fl`).

``shaper fl train`` (:func:`check_train`, :func:`check_train_inputs`, :func:`train_party`,
:func:`train_local`): one party of a job on real hosts, or every role here with ``--local N``
from one file (its columns split among a guest and N-1 hosts, or its rows among N clients).
Each data party of a vertical job writes its own part of the model
(:class:`shaper.ml.scoring.LinearPart`); every client of a horizontal job holds the whole model.

``shaper fl predict`` (:func:`predict`): a vertical model's scores of new rows at the guest, from
every data party's part (:mod:`shaper.ml.scoring`: each party's part of the linear score, every
constant counted once), on real hosts or from the parts of a ``--local N`` run; a horizontal
model's predictions here, from the model file.

``shaper fl demo`` (:func:`run`):

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
homomorphic work, waiting and the rest (:func:`split_line`: the parts add up to the whole), states
each comparison with its gap, and writes an HTML report with one section per job.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table as RichTable

from ..errors import ConfigError
from ..ml.fl.fedavg import FederatedAveraging, plaintext_fedavg
from ..ml.fl.hetero import HeteroLinearModel
from ..ml.fl.local_models import make_model
from ..ml.scoring import save_part
from ..net import launch
from ..protocols.fl.backend import CATEGORIES
from .lr import model_part, party_file, predict_local, predict_party, read_rows
from .progress import event_line, jsonl_writer
from .report import Report, line_chart, write_json

VERTICAL = ["guest", "host", "arbiter"]
CLIENTS = [f"client-{i}" for i in range(1, 6)]
VERTICAL_ROLES, HORIZONTAL_ROLES = ("guest", "host", "arbiter"), ("client", "coordinator")
#: the parts of a step's time, in the order they are printed
PARTS = (*CATEGORIES, "wait", "other")
PART_NAMES = {"encrypt": "encryption", "decrypt": "decryption", "homomorphic": "homomorphic", "wait": "waiting",
              "other": "other"}


# -- the time split ----------------------------------------------------------------------------------
def split_parts(per: dict[str, float], unit: float = 1e-3) -> tuple[float, dict[str, float]]:
    """The total and its parts (encryption, decryption, homomorphic, waiting, other) rounded to
    ``unit`` so that the rounded parts add up to the rounded total exactly (largest remainders)."""
    total = round(per.get("seconds", 0.0) / unit)
    raw = [max(0.0, per.get(k, 0.0)) / unit for k in PARTS]
    ints = [int(np.floor(v)) for v in raw]
    left = total - sum(ints)
    if left > 0:
        for i in sorted(range(len(raw)), key=lambda i: raw[i] - ints[i], reverse=True)[:left]:
            ints[i] += 1
        ints[-1] += total - sum(ints)  # what no part claims is "other"
    while left < 0:  # parts recorded beyond the wall time (a clamp): trim the largest
        i = max(range(len(ints)), key=lambda i: ints[i])
        ints[i] -= 1
        left += 1
    return total * unit, {k: n * unit for k, n in zip(PARTS, ints)}


def split_line(per: dict[str, float]) -> str:
    """'0.214 s = encryption 0.032 + decryption 0.016 + homomorphic 0.000 + waiting 0.067 + other
    0.099 s': every part of a step's mean time, the rest ("other": encoding, local gradients,
    serialisation, packing) included, so the parts add up to the total as printed."""
    total, parts = split_parts(per)
    return f"{total:.3f} s = " + " + ".join(f"{PART_NAMES[k]} {v:.3f}" for k, v in parts.items()) + " s"


def _per_step(stats: dict) -> dict:
    return stats.get("per_iteration") or stats.get("per_round") or {}


# -- shaper fl train ---------------------------------------------------------------------------------
def estimator(opts: argparse.Namespace, classes: int | None = None) -> Any:
    """The model ``opts`` (the options of ``shaper fl train``) describe."""
    if opts.mode == "vertical":
        if opts.model == "mlp":
            raise ConfigError("the vertical mode trains logistic or linear models; mlp is horizontal only")
        return HeteroLinearModel(opts.model, max_iter=opts.epochs, batch_size=opts.batch_size,
                                 learning_rate=opts.learning_rate or 0.15, decay=opts.decay, l2=opts.l2, tol=opts.tol,
                                 key_bits=opts.key_bits, backend=opts.backend, checkpoint_dir=opts.checkpoint_dir,
                                 resume=opts.resume)
    if opts.learning_rate == "auto":
        raise ConfigError("--learning-rate auto is for the vertical mode; give horizontal clients a number")
    return FederatedAveraging(opts.model, rounds=opts.epochs, local_epochs=opts.local_epochs,
                              batch_size=opts.batch_size or 32, learning_rate=opts.learning_rate or 0.1, l2=opts.l2,
                              hidden=opts.hidden, n_classes=classes or opts.classes or 2, quorum=opts.quorum,
                              round_timeout=opts.round_timeout, key_bits=opts.key_bits, backend=opts.backend,
                              checkpoint_dir=opts.checkpoint_dir, resume=opts.resume)


def _read(opts: argparse.Namespace, path: str, labels: bool) -> Any:
    from ..ml.data import read_table

    kind = "binary" if opts.model == "logistic" else "real"
    table = read_table(path, id_column=opts.id_column, label_column=opts.label_column if labels else None,
                       labels=kind)
    if opts.model == "mlp" and table.y is not None and not np.all(table.y == np.round(table.y)):
        raise ConfigError(f"{path}: mlp labels must be class numbers 0, 1, 2, ...")
    return table


def check_train(opts: argparse.Namespace) -> None:
    """The options fit together (roles, files, labels) before anything is read."""
    roles = VERTICAL_ROLES if opts.mode == "vertical" else HORIZONTAL_ROLES
    if opts.local is not None:
        if not 2 <= opts.local <= 16:
            raise ConfigError(f"--local takes 2..16 data parties (a guest and at least one host, or at least two "
                              f"clients), got {opts.local}")
        if not opts.data or not opts.label_column:
            raise ConfigError("--local needs --data and --label-column")
        return
    if opts.role not in roles:
        raise ConfigError(f"--mode {opts.mode} takes --role {' | '.join(roles)}" + ("" if opts.role else
                          " (or --local N)"))
    if not opts.parties or not opts.me:
        raise ConfigError("pass --parties FILE and --me NAME (or --local N)")
    keyless = opts.role in ("arbiter", "coordinator")
    if keyless and opts.data:
        raise ConfigError(f"the {opts.role} holds no data: drop --data")
    if not keyless and not opts.data:
        raise ConfigError(f"the {opts.role} needs --data")
    labelled = opts.role == "client" or opts.role == "guest"
    if labelled and not opts.label_column:
        raise ConfigError(f"the {opts.role} holds labels: pass --label-column")
    if opts.role == "host" and opts.label_column:
        raise ConfigError("a host has no labels: drop --label-column")


def check_train_inputs(opts: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """This party's inputs, read and checked before the job starts: (table or None, validation
    or None, model, progress-event writer or None)."""
    labelled = opts.role in ("guest", "client")
    table = _read(opts, opts.data, labelled) if opts.data else None
    validation = _read(opts, opts.validation, labelled) if opts.validation else None
    model = estimator(opts, None if table is None or opts.model != "mlp" else int(table.y.max()) + 1)
    events = jsonl_writer(opts.events) if opts.events else None
    return table, validation, model, events


def train_party(opts: argparse.Namespace, table: Any, validation: Any, model: Any, events: Any) -> int:
    """This party's side of the job on real hosts; writes its weights (not the arbiter's or the
    coordinator's: they hold no model)."""
    from ..net import Session

    with Session.from_config(opts.parties, me=opts.me, key=opts.key) as session:
        X = None if table is None else table.X
        y = None if table is None else table.y
        val = None if validation is None else (validation.X, validation.y)
        model.fit(session, X, y, role=opts.role, validation=val, progress=_progress(opts.me, events))
        for line in summary_lines(opts.me, opts.role, model):
            print(line)
        print(session.stats.table(f"traffic of {opts.me}"))
    path = save_model(opts.out, model_file(model, opts.role))
    if path is not None:
        print(f"{opts.me} ({opts.role}): {'its part of the model' if opts.mode == 'vertical' else 'the model'} "
              f"written to {path}")
    return 0


def _progress(name: str, events: Any) -> Any:
    def show(event: dict) -> None:
        if events is not None:
            events(event)
        line = event_line(event)
        if line is not None:
            print(f"{name}: {line}", flush=True)

    return show


def summary_lines(name: str, role: str, model: Any) -> list[str]:
    """The time split of a party's steps (every part, so they add up) and whether it resumed."""
    stats, lines = model.stats_, []
    per = _per_step(stats)
    if per:
        lines.append(f"{name} ({role}): per {'iteration' if 'per_iteration' in stats else 'round'} {split_line(per)} "
                     f"({stats.get('backend', model.params.backend)} backend, {model.params.key_bits}-bit key)")
    if getattr(model, "learning_rate_", None) is not None and model.params.learning_rate == "auto":
        lines.append(f"{name} ({role}): learning rate {model.learning_rate_:.3g} (auto: from the columns' curvature)")
    if getattr(model, "resumed_from_", None):
        lines.append(f"{name} ({role}): resumed from the checkpoint of epoch {model.resumed_from_}")
    return lines


def model_file(model: Any, role: str, columns: Any = None) -> Any:
    """What a party writes of a fitted model: its part of a vertical model
    (:class:`~shaper.ml.scoring.LinearPart`), the arrays of a horizontal one (every client holds
    all of it), or None for a party that holds no model (the arbiter, the coordinator)."""
    if isinstance(model, HeteroLinearModel):
        return None if model.coef_ is None else model_part(model, role, model.params.model, columns)
    if model.params_ is None:
        return None
    p = model.params
    return {"params": model.params_, "model": np.array(p.model), "hidden": np.array(p.hidden),
            "n_classes": np.array(p.n_classes), "n_features": np.array(model.model_.n_features)}


def save_model(path: str | Path, what: Any) -> Path | None:
    """Write :func:`model_file`'s result at ``path`` (atomically); None when there is nothing."""
    if what is None:
        return None
    if not isinstance(what, dict):
        return save_part(path, what)
    import io

    from ..files import write_atomic

    buf = io.BytesIO()
    np.savez(buf, **what)
    write_atomic(path, buf.getvalue(), private=False)
    return Path(path)


def local_names(mode: str, n: int) -> tuple[list[str], list[str]]:
    """(every party, the data parties) of a ``--local n`` run."""
    if mode == "vertical":
        data = ["guest", *[f"host-{i}" for i in range(1, n)]]
        return [*data, "arbiter"], data
    data = [f"client-{i}" for i in range(1, n + 1)]
    return ["coordinator", *data], data


def train_local(opts: argparse.Namespace) -> int:
    """``--local N``: every role here, from one file; writes each data party's part of a vertical
    model next to ``--out`` (``model.guest.npz``, ``model.host-1.npz`` ...), or the horizontal
    model (every client holds the same one) at ``--out``."""
    table = _read(opts, opts.data, True)
    validation = _read(opts, opts.validation, True) if opts.validation else None
    X = table.X.toarray() if hasattr(table.X, "toarray") else np.asarray(table.X)
    Xv = None if validation is None else (validation.X.toarray() if hasattr(validation.X, "toarray")
                                          else np.asarray(validation.X))
    n = opts.local
    classes = int(table.y.max()) + 1 if opts.model == "mlp" else None
    estimator(opts, classes)  # the settings are checked before any process starts
    names, data = local_names(opts.mode, n)
    if opts.mode == "vertical":
        if n > X.shape[1]:
            raise ConfigError(f"{X.shape[1]} columns cannot be split among {n} data parties")
        parts = dict(zip(data, np.array_split(np.arange(X.shape[1]), n)))
    else:
        parts = dict(zip(data, np.array_split(np.arange(X.shape[0]), n)))
    print(f"{opts.mode} {opts.model}: {' '.join(names)} as local processes over TLS ({opts.backend} backend, "
          f"{opts.key_bits}-bit key)", flush=True)
    results = launch(names, _local_party, opts, X, table.y, Xv, None if validation is None else validation.y,
                     parts, classes)
    written = []
    for name, res in zip(names, results):
        if res is None:
            continue
        print(f"{name}: {res['line']}")
        if opts.mode == "vertical":
            written.append(save_model(party_file(opts.out, name), res["model"]))
        elif not written:  # every client holds the same model
            written.append(save_model(opts.out, res["model"]))
    if opts.mode == "vertical":
        print(f"the model's parts written to {', '.join(map(str, written))} (score rows with "
              f"shaper fl predict --local {n} --weights {opts.out})")
    else:
        print(f"the model written to {written[0]}")
    return 0


def _local_party(session: Any, opts: argparse.Namespace, X: Any, y: Any, Xv: Any, yv: Any, parts: dict,
                 classes: int | None) -> dict | None:
    name = session.name
    model = estimator(opts, classes)
    show = _progress(name, None) if name in ("guest", "client-1") else None
    if opts.mode == "vertical":
        role = "guest" if name == "guest" else ("arbiter" if name == "arbiter" else "host")
        if role == "arbiter":
            model.fit(session, None, role=role)
            return None
        c = parts[name]
        val = None if Xv is None else (Xv[:, c], yv if role == "guest" else None)
        model.fit(session, X[:, c], y if role == "guest" else None, role=role, validation=val, progress=show)
    else:
        role = "coordinator" if name == "coordinator" else "client"
        if role == "coordinator":
            model.fit(session, None, role=role)
            return None
        r = parts[name]
        model.fit(session, X[r], y[r], role=role, validation=None if Xv is None else (Xv, yv), progress=show)
    per = _per_step(model.stats_)
    last = model.history_[-1] if model.history_ else {}
    shown = {k: round(v, 4) for k, v in last.items() if isinstance(v, float) and k != "seconds"}
    line = f"{shown}; per step {split_line(per)}"
    if opts.mode == "vertical" and opts.learning_rate == "auto":
        line += f"; learning rate {model.learning_rate_:.3g} (auto: from the columns' curvature)"
    return {"line": line, "model": model_file(model, role, parts[name])}


# -- shaper fl predict -------------------------------------------------------------------------------
def predict(opts: argparse.Namespace) -> int:
    """``shaper fl predict`` (see the module notes)."""
    if opts.local is not None:
        names = local_names("vertical", opts.local)[1]
        return predict_local(opts, names)
    if opts.parties or opts.me:
        if opts.role not in ("guest", "host", "arbiter"):
            raise ConfigError("pass --role guest, host or arbiter (the role this party trained in)")
        if opts.role == "arbiter" and (opts.weights or opts.data):
            raise ConfigError("the arbiter holds no model and no rows: drop --weights and --data")
        if opts.role != "arbiter" and not (opts.weights and opts.data):
            raise ConfigError(f"the {opts.role} scores with its own part: pass --weights and --data")
        return predict_party(opts, tag="fl-scores")
    return _predict_horizontal(opts)


def _predict_horizontal(opts: argparse.Namespace) -> int:
    """A horizontal model's predictions of the rows of ``--data``, here (every client holds the
    whole model)."""
    from .report import write_scores

    if not opts.weights or not opts.data:
        raise ConfigError("pass --weights and --data (and --parties FILE --me NAME, or --local N, for a vertical "
                          "model)")
    with np.load(opts.weights, allow_pickle=False) as f:
        if "params" not in f.files:
            raise ConfigError(f"{opts.weights} is a part of a vertical model: score with every party "
                              "(--parties FILE --me NAME, or --local N)")
        kind, params = str(f["model"]), f["params"]
        model = make_model(kind, int(f["n_features"]), n_classes=int(f["n_classes"]), hidden=int(f["hidden"]))
    rows = read_rows(opts.data, opts.id_column, opts.label_column, "linear" if kind != "logistic" else "logistic")
    X = rows.X.toarray() if hasattr(rows.X, "toarray") else np.asarray(rows.X, dtype=float)
    if kind == "mlp":  # the most probable class
        z, kind = model.predict(params, X).argmax(axis=1).astype(float), "linear"
    else:
        model.predict(params, X)  # checks the columns
        z = X @ params[:-1] + params[-1]  # the affine models' params are [w, b]
    where = write_scores(opts.out, rows.ids, z, kind, id_column=opts.id_column)
    print(f"predictions of {len(z):,} rows written to {where}")
    return 0


# -- shaper fl demo ----------------------------------------------------------------------------------
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
            return {"history": model.history_, "stats": model.stats_, "z": z, "measures": model.measures_}
    return {"stats": model.stats_}


def _fedavg_party(session: Any, parts: list, test: tuple, opts: dict) -> dict:
    model = FederatedAveraging("mlp", **opts)
    if session.name == "coordinator":
        model.fit(session, None, role="coordinator")
        return {"stats": model.stats_, "rounds": model.rounds_}
    i = CLIENTS.index(session.name)
    model.fit(session, *parts[i], role="client", validation=test)
    return {"stats": model.stats_, "history": model.history_, "params": model.params_, "measures": model.measures_}


def _fit_reference(estimator: Any, X: Any, y: Any) -> tuple[Any, str | None]:
    """A scikit-learn reference fitted with its warnings kept out of the output: a convergence
    warning comes back as a note for the table (what it means, not where in site-packages)."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        estimator.fit(X, y)
    note = None
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):
        note = (f"scikit-learn's {type(estimator).__name__} stopped at its iteration limit "
                f"({getattr(estimator, 'max_iter', '?')}) before converging")
    return estimator, note


def _margin(name: str, value: float, reference: float, margin: float, higher_is_better: bool = True) -> tuple[bool, str]:
    """Whether ``value`` is within ``margin`` of scikit-learn's ``reference`` (no worse by more
    than it), and the sentence that says so with the gap, or the gap and the margin it misses."""
    gap = reference - value if higher_is_better else value - reference
    if gap <= margin:
        if gap <= 0:
            return True, f"{name} {value:.4f}: as good as scikit-learn's {reference:.4f} or better (margin {margin})"
        return True, f"{name} {value:.4f}: {gap:.4f} below scikit-learn's {reference:.4f}, within the margin {margin}"
    return False, f"{name} {value:.4f}: {gap:.4f} below scikit-learn's {reference:.4f}, MORE than the margin {margin}"


def _split_rows(results: dict[str, dict]) -> list[list[Any]]:
    rows = []
    for name, res in results.items():
        per = _per_step(res["stats"])
        if per:
            total, parts = split_parts(per)
            rows.append([name, f"{total:.3f}", *(f"{parts[k]:.3f}" for k in PARTS)])
    return rows


SPLIT_HEADER = ("party", "seconds", *(PART_NAMES[k] for k in PARTS))


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
    checks: list[tuple[bool, str]] = []
    notes: list[str] = []
    jobs: list[dict] = []

    # 1. vertical logistic regression, breast cancer
    data = _vertical_data("logistic")
    opts = {"max_iter": 5, "batch_size": 64, "learning_rate": 0.15, "key_bits": key_bits, "backend": backend}
    console.print("1/3 vertical logistic regression, breast cancer: guest 10 features + labels, host 20, arbiter key")
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "logistic", data, opts)))
    sc = StandardScaler().fit(data["Xtr"])
    sk, note = _fit_reference(LogisticRegression(max_iter=1000), sc.transform(data["Xtr"]), data["ytr"])
    notes += [note] if note else []
    sk_auc = float(roc_auc_score(data["yte"], sk.decision_function(sc.transform(data["Xte"]))))
    auc = float(roc_auc_score(data["yte"], res["guest"]["z"]))
    checks.append(_margin("vertical logistic regression: test AUC", auc, sk_auc, 0.01))
    rows += [("vertical logistic: test AUC", f"{auc:.4f}", f"{sk_auc:.4f}")]
    summary["vertical_logistic"] = {"auc": auc, "sklearn_auc": sk_auc, "history": res["guest"]["history"],
                                    "per_iteration": {n: _per_step(r["stats"]) for n, r in res.items()}}
    jobs.append({"title": "Vertical logistic regression (breast cancer; guest, host, arbiter)",
                 "short": "vertical logistic regression", "history": res["guest"]["history"],
                 "measures": res["guest"]["measures"], "metric": ("auc", "validation AUC"),
                 "reference": {"scikit-learn": sk_auc}, "split": _split_rows(res),
                 "step": "iteration"})

    # 2. vertical linear regression, diabetes
    data = _vertical_data("linear")
    opts = {"max_iter": 10, "batch_size": 64, "learning_rate": 0.1, "key_bits": key_bits, "backend": backend}
    console.print("2/3 vertical linear regression, diabetes: guest 4 features + target, host 6, arbiter key")
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "linear", data, opts)))
    sk_lin, note = _fit_reference(LinearRegression(), data["Xtr"], data["ytr"])
    notes += [note] if note else []
    sk_r2 = float(r2_score(data["yte"], sk_lin.predict(data["Xte"])))
    r2 = float(r2_score(data["yte"], res["guest"]["z"]))
    checks.append(_margin("vertical linear regression: test R²", r2, sk_r2, 0.05))
    rows += [("vertical linear: test R²", f"{r2:.4f}", f"{sk_r2:.4f}")]
    summary["vertical_linear"] = {"r2": r2, "sklearn_r2": sk_r2, "history": res["guest"]["history"],
                                  "per_iteration": {n: _per_step(r["stats"]) for n, r in res.items()}}
    jobs.append({"title": "Vertical linear regression (diabetes; guest, host, arbiter)",
                 "short": "vertical linear regression", "history": res["guest"]["history"],
                 "measures": res["guest"]["measures"], "metric": ("r2", "validation R²"),
                 "reference": {"scikit-learn": sk_r2}, "split": _split_rows(res), "step": "iteration"})

    # 3. horizontal FedAvg, MLP on digits
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    parts = [(Xtr[i::5], ytr[i::5]) for i in range(5)]
    fopts = {"rounds": 5, "local_epochs": 2, "batch_size": 16, "learning_rate": 0.1, "hidden": 32, "n_classes": 10,
             "key_bits": key_bits, "backend": backend}
    console.print("3/3 horizontal FedAvg, MLP (64-32-10) on digits: 5 clients, a coordinator without the key")
    names = ["coordinator", *CLIENTS]
    fres = dict(zip(names, launch(names, _fedavg_party, parts, (Xte, yte), fopts)))
    ref = plaintext_fedavg("mlp", parts, **fopts)
    secure = fres[CLIENTS[0]]["params"]
    gap = float(np.abs(secure - ref).max())
    mlp = make_model("mlp", X.shape[1], n_classes=10, hidden=32)
    acc = float(accuracy_score(yte, mlp.predict(secure, Xte).argmax(axis=1)))
    acc_plain = float(accuracy_score(yte, mlp.predict(ref, Xte).argmax(axis=1)))
    sk_mlp, note = _fit_reference(MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=0), Xtr, ytr)
    notes += [note] if note else []
    sk_acc = float(accuracy_score(yte, sk_mlp.predict(Xte)))
    same = gap < 1e-3
    checks.append((same, f"horizontal MLP: the secure FedAvg model equals FedAvg in plaintext to {gap:.1e} "
                         f"(test accuracy {acc:.4f} and {acc_plain:.4f})" if same else
                         f"horizontal MLP: the secure FedAvg model is {gap:.1e} from FedAvg in plaintext, MORE "
                         "than the fixed-point rounding explains (1e-3)"))
    checks.append(_margin("horizontal MLP: test accuracy (5 rounds of 2 local epochs; scikit-learn: 300 epochs "
                          "on the pooled rows)", acc, sk_acc, 0.1))
    packing = fres[CLIENTS[0]]["stats"]["packing"]
    rows += [("horizontal MLP: test accuracy", f"{acc:.4f}", f"{sk_acc:.4f} (pooled MLP)"),
             ("  same algorithm in plaintext", f"{acc_plain:.4f}", f"largest weight gap {gap:.1e}"),
             ("  update packing", f"{mlp.n_params:,} values in {packing['ciphertexts']} ciphertexts",
              f"{packing['slots']} slots of {packing['slot_bits']} bits")]
    summary["horizontal_mlp"] = {"accuracy": acc, "plaintext_accuracy": acc_plain, "sklearn_accuracy": sk_acc,
                                 "max_weight_gap": gap, "packing": packing,
                                 "per_round": _per_step(fres[CLIENTS[0]]["stats"]),
                                 "history": fres[CLIENTS[0]]["history"]}
    jobs.append({"title": "Horizontal FedAvg of an MLP (digits; 5 clients, a coordinator)",
                 "short": "horizontal FedAvg MLP", "history": fres[CLIENTS[0]]["history"],
                 "measures": fres[CLIENTS[0]]["measures"], "metric": ("accuracy", "validation accuracy"),
                 "reference": {"scikit-learn (pooled)": sk_acc},
                 "split": _split_rows({n: fres[n] for n in ("coordinator", CLIENTS[0])}), "step": "round"})
    seconds = time.perf_counter() - started
    ok = all(held for held, _ in checks)
    summary["seconds"] = round(seconds, 1)
    summary["ok"] = bool(ok)
    summary["checks"] = [text for _, text in checks]
    summary["notes"] = notes

    table = RichTable(title="secure federated training vs scikit-learn")
    table.add_column("measure")
    table.add_column("shaper (secure)", justify="right")
    table.add_column("reference", justify="right")
    for r in rows:
        table.add_row(*r)
    console.print(table)
    split = RichTable(title="time per step, seconds (the parts add up; other = encoding, local gradients, "
                            "serialisation, packing)")
    for k, heading in enumerate(("job, party", *SPLIT_HEADER[1:])):
        split.add_column(heading, justify="left" if k == 0 else "right")
    for job in jobs:
        for name, *cells in job["split"]:
            split.add_row(f"{job['short']}, {name} (per {job['step']})", *cells)
    console.print(split)
    for held, text in checks:
        console.print(f"{'ok' if held else 'FAILED'}: {text}", markup=False)
    for note in notes:
        console.print(f"note: {note}", markup=False)
    console.print(f"finished in {seconds:.1f} s; " + ("every comparison holds" if ok else
                  f"{sum(not held for held, _ in checks)} comparison(s) failed"))
    if report_path:
        path = fl_report(report_path, summary=summary, rows=rows, jobs=jobs, checks=checks, notes=notes)
        console.print(f"report: {path}")
    if json_path:
        console.print(f"wrote the figures to {write_json(json_path, summary)}")
    return summary


def fl_report(path: str | Path, *, summary: dict, rows: list, jobs: list[dict], checks: list, notes: list) -> Path:
    """The demo's report: the results, then one section per job with its curves (titled by the
    job), the time split of each party's steps and the per-epoch values, then the run."""
    page = Report("shaper fl demo: federated learning with Paillier")
    page.paragraph(f"{summary['backend']} backend, {summary['key_bits']}-bit Paillier key; every role a local "
                   f"process over TLS 1.3; {summary['seconds']:.1f} s in all.")
    page.heading("Results").table([tuple(r) for r in rows], ("measure", "shaper (secure)", "reference"))
    page.table([("ok" if held else "FAILED", text) for held, text in checks] + [("note", n) for n in notes],
               ("", "comparison with the reference"))
    for k, job in enumerate(jobs, 1):
        history, measures = job["history"], job["measures"]
        key, metric = job["metric"]
        loss = [(h["epoch"], h["loss"]) for h in history if h.get("loss") is not None]
        train = [(h["epoch"], h["train_loss"]) for h in history if h.get("train_loss") is not None]
        score = [(h["epoch"], h[key]) for h in history if h.get(key) is not None]
        page.heading(f"{k}. {job['title']}")
        page.charts(line_chart(f"{job['short']}: losses", {"train": train, "validation": loss}, y_label="loss"),
                    line_chart(f"{job['short']}: {metric}", {"secure training": score}, job["reference"],
                               y_label=metric))
        page.paragraph(f"The two losses are different measures: train = {measures['train_loss']}; "
                       f"validation = {measures['loss']}.")
        page.heading(f"Time per {job['step']}, by party (seconds; the parts add up)", 3).table(job["split"],
                                                                                                 SPLIT_HEADER)
        page.record({"history": history}, epoch_labels={
            "loss": measures["loss"], "train_loss": f"train loss ({measures['train_loss']})", "auc": "validation AUC",
            "r2": "validation R²", "accuracy": "validation accuracy", "seconds": "seconds",
            "learning_rate": "learning rate"})
    run_record = {k: v for k, v in summary.items() if k in ("key_bits", "backend", "seconds")}
    run_record["packing"] = summary["horizontal_mlp"]["packing"]
    page.heading("Run").record(run_record)
    return page.write(path)
