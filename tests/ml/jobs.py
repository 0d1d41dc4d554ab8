"""Party programs for the ML tests (module level: spawned processes import them)."""

import os
import signal

import numpy as np

from shaper.ml import VerticalLogisticRegression

HOST_COLS = 6


def data(rows=200, seed=3, raw=False):
    """A subset of the breast-cancer rows and 12 columns, standardised unless ``raw``."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(seed)  # test data subset
    idx = np.sort(rng.choice(len(y), rows, replace=False))
    X = X[idx][:, :12]
    return (X if raw else StandardScaler().fit_transform(X)), y[idx]


def split(session, X, y):
    host = session.index == 0
    return (X[:, :HOST_COLS], None) if host else (X[:, HOST_COLS:], y)


def train_job(session, X, y, params, validation=None):
    Xm, ym = split(session, X, y)
    model = VerticalLogisticRegression(**params)
    val = None
    if validation is not None:
        Xv, yv = validation
        val = split(session, Xv, yv)
    model.fit(session, Xm, ym, validation=val)
    return {"coef": model.coef_, "intercept": model.intercept_, "seed": model.shuffle_seed_,
            "history": model.history_, "stats": model.stats_, "lr": model.learning_rate_, "precond": model.precond_,
            "proba": model.predict_proba(session, Xm), "proba_both": model.predict_proba(session, Xm, to="both")}


def killable_job(session, X, y, params, kill_at, report=None):
    """The host dies (SIGKILL) at (epoch, iteration) = kill_at, unless kill_at is None; the guest
    writes the error it sees to ``report``."""
    Xm, ym = split(session, X, y)
    seed = bytes([session.index + 1]) * 32

    def progress(event):
        if (kill_at is not None and session.index == 0 and event["event"] == "iteration"
                and (event["epoch"], event["iteration"]) == tuple(kill_at)):
            os.kill(os.getpid(), signal.SIGKILL)

    model = VerticalLogisticRegression(seed=seed, **params)
    try:
        model.fit(session, Xm, ym, progress=progress)
    except Exception as exc:
        if report is not None and session.index == 1:
            with open(report, "w") as fh:
                fh.write(f"{type(exc).__name__}: {exc}")
        raise
    return {"coef": model.coef_, "intercept": model.intercept_, "history": model.history_}


def mismatch_job(session, X, y, what):
    Xm, ym = split(session, X, y)
    params = {"epochs": 1, "key_bits": 512}
    if what == "labels-both":
        ym = y
    elif what == "labels-none":
        ym = None
    elif what == "rows":
        Xm = Xm[:-1] if session.index == 0 else Xm
        ym = ym if ym is None else ym
    elif what == "params":
        params["batch_size"] = 32 if session.index == 0 else 64
    elif what == "wide":
        Xm = np.hstack([Xm] * 50) if session.index == 0 else Xm
    VerticalLogisticRegression(**params).fit(session, Xm, ym)
    return "trained"


def divergence_job(session, X, y, params):
    """Train; return what the guest and host know, or the error as text."""
    Xm, ym = split(session, X, y)
    events = []
    model = VerticalLogisticRegression(**params)
    model.fit(session, Xm, ym, progress=lambda e: events.append(e) if e["event"] == "backoff" else None)
    return {"lr": model.learning_rate_, "history": model.history_, "backoffs": events,
            "proba": model.predict_proba(session, Xm)}


def executor_job(session, X, y, params):
    """``train_job``, plus where this party's kernel ran its batches (Ray chunks, if any)."""
    from shaper import kernels

    out = train_job(session, X, y, params)
    kernel = kernels.get_kernel()
    pool = getattr(kernel, "pool_ray", None)
    out["kernel"] = kernel.name
    out["ray_chunks"] = None if pool is None else pool.stats["chunks"]
    return out


def events_job(session, X, y, params, validation=None):
    """``train_job`` that also returns the epoch events it saw (and the measures they name)."""
    Xm, ym = split(session, X, y)
    val = None if validation is None else split(session, *validation)
    events = []
    model = VerticalLogisticRegression(**params)
    model.fit(session, Xm, ym, validation=val, progress=lambda e: events.append(e) if e["event"] == "epoch" else None)
    return {"events": events, "measures": model.measures_, "history": model.history_}


def scores_job(session, X, y, columns, params):
    """Both parties of a job trained on ``columns`` (host, guest) of X: the in-job scores of the
    training rows (logits at the guest, None at the host) and each party's weights and constant."""
    guest = session.index == 1
    c = columns[session.index]
    model = VerticalLogisticRegression(**params)
    model.fit(session, X[:, c], y if guest else None)
    return {"z": model.decision_function(session, X[:, c]), "coef": model.coef_, "intercept": model.intercept_}
