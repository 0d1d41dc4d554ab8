"""Vertical logistic regression: agreement with the plaintext oracle and scikit-learn, refusals,
checkpoint/resume, monitoring and prediction."""

import json

import numpy as np
import pytest

from shaper.errors import ConfigError, PartyError
from shaper.ml.logreg import LRParams, reference_sgd
from shaper.ml.logreg.features import ColumnScaler
from shaper.ml.report import html_report, jsonl_writer
from shaper.net import launch, run_in_memory

from . import jobs as J

SMALL = {"epochs": 2, "batch_size": 40, "learning_rate": 0.1, "key_bits": 768}


@pytest.mark.parametrize("layout, tolerance", [("encrypted", 2e-4), ("caesar", 5e-3)])
def test_weights_match_the_plaintext_oracle(layout, tolerance):
    """Raw columns in: each party standardises its own, trains, and opens weights in its original
    units; the same SGD in floating point on the standardised columns gives the same model."""
    X, y = J.data(raw=True)
    host, guest = run_in_memory(2, J.train_job, X, y, {**SMALL, "layout": layout})
    scalers = [ColumnScaler.fit(X[:, :J.HOST_COLS]), ColumnScaler.fit(X[:, J.HOST_COLS:])]
    Xh, Xg = scalers[0].transform(X[:, :J.HOST_COLS]), scalers[1].transform(X[:, J.HOST_COLS:])
    assert host["lr"] == guest["lr"] and host["lr"] != SMALL["learning_rate"] * 0  # the rate in force
    wh, wg = reference_sgd(Xh, Xg, y, shuffle_seed=host["seed"], epochs=2, batch_size=40,
                           learning_rate=host["lr"], precond=(host["precond"], guest["precond"]))
    np.testing.assert_allclose(host["coef"] * scalers[0].scale, wh, atol=tolerance)
    np.testing.assert_allclose(guest["coef"] * scalers[1].scale, wg[:-1], atol=tolerance)
    # the constants the centring adds: -sum(w mean / scale) per block, the model intercept at the guest
    assert host["intercept"] == pytest.approx(-np.dot(wh, scalers[0].mean / scalers[0].scale), abs=tolerance * 50)
    assert guest["intercept"] == pytest.approx(wg[-1] - np.dot(wg[:-1], scalers[1].mean / scalers[1].scale),
                                               abs=tolerance * 50)
    assert np.max(np.abs(wh)) > 20 * tolerance  # the weights moved: the comparison means something


@pytest.mark.parametrize("layout", ["encrypted", "caesar"])
def test_auc_within_0005_of_sklearn_on_breast_cancer_as_published(layout):
    """The values as published (no scaling by the user), every training option at its default."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    sk = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(Xtr, ytr)
    sk_auc = roc_auc_score(yte, sk.decision_function(Xte))

    def job(session):
        from shaper.ml import VerticalLogisticRegression

        cols = slice(0, 15) if session.index == 0 else slice(15, None)
        model = VerticalLogisticRegression(key_bits=768, layout=layout)
        model.fit(session, Xtr[:, cols], None if session.index == 0 else ytr,
                  validation=(Xte[:, cols], None if session.index == 0 else yte))
        return model.predict_proba(session, Xte[:, cols]), model.history_

    (_, history), (proba, _) = run_in_memory(2, job)
    auc = roc_auc_score(yte, proba)
    assert abs(auc - sk_auc) <= 0.005, (auc, sk_auc)
    assert history[-1]["auc"] == pytest.approx(auc, abs=1e-9)  # the monitored curve is the test AUC
    losses = [h["train_loss"] for h in history]
    assert losses[-1] < losses[0] < 0.25  # the monitored training loss fell below the zero model's


def test_prediction_agrees_with_opened_weights():
    X, y = J.data()
    host, guest = run_in_memory(2, J.train_job, X, y, SMALL)
    z = X[:, :J.HOST_COLS] @ host["coef"] + host["intercept"] + X[:, J.HOST_COLS:] @ guest["coef"] + guest["intercept"]
    np.testing.assert_allclose(guest["proba"], 1 / (1 + np.exp(-z)), atol=2e-3)
    assert host["proba"] is None
    np.testing.assert_allclose(host["proba_both"], guest["proba_both"])


@pytest.mark.parametrize("what, message", [
    ("labels-both", "exactly one party"), ("labels-none", "exactly one party"),
    ("rows", "row counts differ"), ("params", "different training parameters"),
    ("wide", "fewer rows than features"),
])
def test_refusals(what, message):
    X, y = J.data(rows=120)
    with pytest.raises(PartyError, match=message):
        run_in_memory(2, J.mismatch_job, X, y, what)


def test_parameter_validation():
    for bad in ({"layout": "x"}, {"sigmoid": "tanh"}, {"l2": 0.1}, {"epochs": 0}, {"learning_rate": 0},
                {"learning_rate": "fast"}, {"learning_rate": -1.0}, {"standardize": "yes"},
                {"early_stopping": 0}, {"seed": b"short"}):
        with pytest.raises(ConfigError):
            LRParams(**bad)
    LRParams(l2=0.1, layout="caesar")


def test_kill_mid_epoch_then_resume_gives_the_uninterrupted_model(tmp_path):
    X, y = J.data(rows=160)
    params = {"epochs": 3, "batch_size": 40, "learning_rate": 0.1, "key_bits": 768}
    clean = launch(2, J.killable_job, X, y, {**params, "checkpoint_dir": str(tmp_path / "clean")}, None,
                   timeout=600)
    ck = {**params, "checkpoint_dir": str(tmp_path / "ck")}
    report = tmp_path / "guest-error.txt"
    with pytest.raises(PartyError) as info:
        launch(2, J.killable_job, X, y, ck, (2, 3), str(report), timeout=600)
    assert "party0" in str(info.value) and "killed by signal 9" in str(info.value)
    seen = report.read_text()  # the guest stopped with a clear error naming the host
    assert seen.startswith("PeerError") and "party0" in seen
    resumed = launch(2, J.killable_job, X, y, {**ck, "resume": True}, None, timeout=600)
    for a, b in zip(clean, resumed):
        np.testing.assert_array_equal(a["coef"], b["coef"])
        assert a["intercept"] == b["intercept"]
    assert [h["epoch"] for h in resumed[0]["history"]] == [1, 2, 3]


def test_early_stopping_and_history():
    X, y = J.data(rows=120)
    params = {**SMALL, "epochs": 5, "early_stopping": 1, "tol": 10.0}  # nothing improves by 10
    host, guest = run_in_memory(2, J.train_job, X, y, params, (X, y))
    assert host["stats"]["epochs_run"] == guest["stats"]["epochs_run"] == 2
    assert host["stats"]["stopped_early"] and len(guest["history"]) == 2
    strip = lambda hist: [(h["epoch"], h["loss"], h["auc"]) for h in hist]  # noqa: E731
    assert strip(host["history"]) == strip(guest["history"])  # the host learns the same two scalars
    with pytest.raises(PartyError, match="needs monitoring"):
        run_in_memory(2, J.train_job, X, y, {**SMALL, "early_stopping": 2})


def test_progress_events_and_report(tmp_path):
    events = tmp_path / "events.jsonl"
    writer = jsonl_writer(events)
    writer({"event": "iteration", "epoch": 1})
    writer({"event": "epoch", "epoch": 1, "loss": 0.5, "auc": 0.9})
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["event"] for e in lines] == ["iteration", "epoch"] and "time" in lines[0]
    page = html_report(tmp_path / "r.html", title="t", history=[{"epoch": 1, "loss": 0.5, "auc": 0.9},
                                                                 {"epoch": 2, "loss": 0.4, "auc": 0.95}],
                       summary={"auc": 0.95}, reference={"scikit-learn AUC": 0.96}, table=[("AUC", "0.95", "0.96")])
    text = page.read_text()
    assert text.count("<polyline") == 2 and "scikit-learn AUC" in text
