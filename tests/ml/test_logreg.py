"""Vertical logistic regression: agreement with the plaintext oracle and scikit-learn, refusals,
checkpoint/resume, monitoring and prediction."""

import json
import re

import numpy as np
import pytest
import scipy.sparse as sp

from shaper.errors import ConfigError, PartyError
from shaper.jobs.progress import jsonl_writer
from shaper.jobs.report import html_report
from shaper.ml.logreg import LRParams, reference_sgd
from shaper.ml.logreg.features import ColumnScaler
from shaper.net import launch, run_in_memory

from . import jobs as J

SMALL = {"epochs": 2, "batch_size": 40, "key_bits": 768}  # learning_rate "auto", the default


@pytest.fixture(autouse=True)
def _small_keys(monkeypatch):
    """768-bit keys: the explicit switch for keys below 2048 bits."""
    monkeypatch.setenv("SHAPER_INSECURE_KEY_BITS", "1")


def _seeded_job(session, X, y):
    from shaper.ml import VerticalLogisticRegression

    Xm, ym = J.split(session, X, y)
    model = VerticalLogisticRegression(**SMALL, seed=bytes([session.index + 1]) * 32)
    model.fit(session, Xm, ym)
    return model._state.mask_seed, model.shuffle_seed_, model.predict_proba(session, Xm)


def test_a_fixed_seed_fixes_the_batch_order_never_the_masks():
    X, y = J.data()
    first, second = run_in_memory(2, _seeded_job, X, y), run_in_memory(2, _seeded_job, X, y)
    for party in (0, 1):
        masks = {first[party][0], second[party][0], bytes([party + 1]) * 32}
        assert len(masks) == 3  # fresh mask seeds each run, unrelated to the fixed seed
        assert first[party][1] == second[party][1]  # the same (public) batch order
    # the same model within the truncation error the fresh masks leave
    np.testing.assert_allclose(first[1][2], second[1][2], atol=2e-3)


@pytest.mark.parametrize("layout, tolerance", [("encrypted", 2e-4), ("caesar", 5e-3)])
def test_weights_match_the_plaintext_oracle(layout, tolerance):
    """Raw columns in: each party standardises its own, trains, and opens weights in its original
    units; the same SGD in floating point on the standardised columns gives the same model."""
    X, y = J.data(raw=True)
    host, guest = run_in_memory(2, J.train_job, X, y, {**SMALL, "layout": layout})
    scalers = [ColumnScaler.fit(X[:, :J.HOST_COLS]), ColumnScaler.fit(X[:, J.HOST_COLS:])]
    Xh, Xg = scalers[0].transform(X[:, :J.HOST_COLS]), scalers[1].transform(X[:, J.HOST_COLS:])
    assert host["lr"] == guest["lr"] > 0  # the automatic rate in force, the same at both parties
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
        # a fixed seed makes the run reproducible (the batch order varies the last digits of the AUC)
        model = VerticalLogisticRegression(key_bits=768, layout=layout, seed=bytes([session.index + 1]) * 32)
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


def test_one_settings_digest_for_every_training_job():
    """LRParams, HeteroParams and FedAvgParams share one base (shaper.ml.settings.Settings): one
    digest, which leaves out each job's LOCAL fields. The values are those the jobs computed before
    they shared it, so checkpoints written then still resume."""
    from shaper.ml.fl import FedAvgParams, HeteroParams
    from shaper.ml.settings import Settings

    assert LRParams().digest() == "5a7e7f84c75e457c"
    assert LRParams(epochs=3, layout="caesar", l2=0.1, seed=b"x" * 32).digest() == "6a78e13f47775a3f"
    assert HeteroParams().digest() == "e5b271018ac30537" and FedAvgParams().digest() == "c4676b58e2c9ca63"
    for params in (LRParams(), HeteroParams(), FedAvgParams()):
        assert isinstance(params, Settings)
        assert params.digest() == type(params)(checkpoint_dir="/elsewhere", resume=True).digest()
    assert LRParams(epochs=3, tol=0.1, monitor=None).digest() == LRParams().digest()
    assert HeteroParams(learning_rate="auto").digest() != HeteroParams().digest()
    for bad in ({"learning_rate": "fast"}, {"learning_rate": 0}, {"model": "mlp"}, {"backend": "x"}):
        with pytest.raises(ConfigError):
            HeteroParams(**bad)
    with pytest.raises(ConfigError, match="learning_rate must be a positive number"):
        FedAvgParams(learning_rate="auto")


def test_epoch_lines_name_what_each_loss_measures():
    """The training loss (squared error of the linear sigmoid on sampled rows, what SGD minimises
    and the divergence rule watches) and the monitored log-loss are different measures: every
    epoch event says which is which, and the line `lr train` prints names them."""
    from shaper.jobs.progress import epoch_line

    X, y = J.data(rows=120)
    host, guest = run_in_memory(2, J.events_job, X, y, SMALL, (X, y))
    for party in (host, guest):
        assert party["measures"] == {"train_loss": "squared error of the linear sigmoid, sampled rows",
                                     "loss": "validation log-loss"}
        assert all(e["measures"] == party["measures"] for e in party["events"]) and len(party["events"]) == 2
    line = epoch_line(guest["events"][-1])
    assert re.fullmatch(r"train loss \d\.\d{4} \(squared error of the linear sigmoid, sampled rows\)  "
                        r"validation log-loss \d\.\d{4}  AUC \d\.\d{4}", line), line
    assert "val loss" not in epoch_line(guest["history"][-1], guest["measures"])


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
    # The resumed run replays its own checkpointed masks; the clean run drew other masks (a fixed
    # seed never fixes masks), so the two differ only by a few ulps of truncation error.
    for a, b in zip(clean, resumed):
        np.testing.assert_allclose(a["coef"], b["coef"], rtol=0, atol=1e-5)
        assert a["intercept"] == pytest.approx(b["intercept"], abs=1e-5)
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


# -- training that cannot fail silently ---------------------------------------------------------------
def _duplicated(X):
    """The host's six columns again at the guest: each block alone looks half as curved as the whole."""
    return np.hstack([X[:, :J.HOST_COLS], X[:, :J.HOST_COLS]])


def _auc(y, p):
    from sklearn.metrics import roc_auc_score

    return roc_auc_score(y, p)


def test_a_rate_that_diverges_for_certain_is_refused_before_training():
    X, y = J.data()
    with pytest.raises(PartyError, match=r"learning_rate=5 makes training diverge.*learning_rate='auto' \("):
        run_in_memory(2, J.divergence_job, X, y, {**SMALL, "learning_rate": 5.0})


@pytest.mark.parametrize("layout", ["encrypted", "caesar"])
def test_a_run_that_diverges_stops_with_the_cause_and_auto_converges(layout):
    """Dense standardised data where 1.95 / (s max(lambda_h, lambda_g)) passes the up-front check
    but diverges (the blocks are the same columns); the same data trains under 'auto'."""
    from shaper.ml.logreg import stability

    X, y = J.data()
    Xd = _duplicated(X)
    lam = stability.curvature(sp.csr_matrix(Xd[:, J.HOST_COLS:]), np.ones(J.HOST_COLS))
    rate = 1.95 / (0.25 * lam)  # passes the up-front check (< 2), diverges: the blocks double lambda_max
    # a fixed seed: with fresh seeds the first epoch's loss ranges over 0.33-3.1 (25 runs), and a
    # rare shuffle kept it under the 1.1 x 0.25 threshold (one CI failure); this one reaches 0.348
    seeded = {**SMALL, "learning_rate": rate, "layout": layout, "seed": b"\x05" * 32}
    with pytest.raises(PartyError, match=r"training diverged in epoch 1.*learning_rate='auto'"):
        run_in_memory(2, J.divergence_job, Xd, y, seeded)
    host, guest = run_in_memory(2, J.divergence_job, Xd, y, {**SMALL, "layout": layout})
    assert guest["lr"] < rate / 2 and not guest["backoffs"] and guest["lr"] == host["lr"]
    assert guest["history"][-1]["train_loss"] < 0.25 and _auc(y, guest["proba"]) > 0.9


def test_auto_backs_off_when_its_step_diverges(monkeypatch):
    """If the automatic step ever diverged, training restarts from zero with half the step."""
    from shaper.ml.logreg import stability

    real = stability.auto_rate
    monkeypatch.setattr(stability, "auto_rate", lambda *a: 6 * real(*a))  # 3 x the largest stable step
    X, y = J.data()
    host, guest = run_in_memory(2, J.divergence_job, X, y, {**SMALL, "epochs": 2})
    assert [e["learning_rate"] for e in guest["backoffs"]] == [e["learning_rate"] for e in host["backoffs"]]
    assert guest["backoffs"] and guest["lr"] == host["lr"] == guest["backoffs"][-1]["learning_rate"]
    assert [h["epoch"] for h in guest["history"]] == [1, 2]  # the kept run is the last attempt, from epoch 1
    assert guest["history"][-1]["train_loss"] < 0.25 and _auc(y, guest["proba"]) > 0.9


def test_sparse_one_hot_data_converges_under_the_defaults():
    """SHAPER-shaped 0/1 data (one-hot fields at both parties), every option at its default."""
    import scipy.sparse as sparse
    from sklearn.linear_model import LogisticRegression

    from shaper.ml.data import shaper_workload

    (xh, xg, y), = shaper_workload(3000, host_features=120, guest_features=280, density=0.025, seed=4)
    X = sparse.hstack([xh, xg], format="csr").astype(np.float64)
    tr, te = slice(0, 2500), slice(2500, None)
    sk = _auc(y[te], LogisticRegression(max_iter=1000).fit(X[tr], y[tr]).decision_function(X[te]))

    def job(session):
        from shaper.ml import VerticalLogisticRegression

        cols = slice(0, 120) if session.index == 0 else slice(120, None)
        model = VerticalLogisticRegression(key_bits=768, epochs=4, seed=bytes([session.index + 7]) * 32)
        model.fit(session, X[tr][:, cols], None if session.index == 0 else y[tr])
        return model.predict_proba(session, X[te][:, cols]), model.history_

    _, (proba, history) = run_in_memory(2, job)
    losses = [h["train_loss"] for h in history]
    assert losses[-1] < losses[0] < 0.25  # (sampled per epoch, so not strictly monotone)
    assert abs(_auc(y[te], proba) - sk) <= 0.03, (_auc(y[te], proba), sk)  # 2,500 rows, 4 epochs


def test_categories_rarer_than_one_per_batch_learn_under_the_decaying_step():
    """The full SHAPER workload's regime scaled down: each category appears about 0.5 times per
    batch. At the automatic rate a constant step is noise (one epoch scores a loss above all-zero
    weights); the decay eta / (1 + eta s t) the protocols apply reaches scikit-learn's AUC."""
    from sklearn.linear_model import LogisticRegression

    from shaper.ml.data import make_shaper_workload
    from shaper.ml.logreg import stability
    from shaper.ml.logreg.features import with_intercept_column
    from shaper.ml.logreg.schedule import eta_factor

    xh, xg, y = make_shaper_workload(25_000, host_features=1500, guest_features=3500, density=0.004, seed=1)
    xh, xg = xh.astype(np.float64), xg.astype(np.float64)
    tr, te, batch = slice(0, 20_000), slice(20_000, None), 128
    dh = stability.preconditioner(xh[tr], batch)
    dg = stability.preconditioner(with_intercept_column(xg[tr]), batch)
    assert dh.max() == batch  # the cap: these columns appear in fewer rows than one per batch
    rate = stability.auto_rate(2, stability.curvature(xh[tr], dh), stability.curvature(with_intercept_column(xg[tr]), dg))
    assert eta_factor(rate, batch, batch, 1000, 2) < eta_factor(rate, batch, batch, 0, 2) / 10  # it decays
    wh, wg = reference_sgd(xh[tr], xg[tr], y[tr], shuffle_seed=b"r" * 32, epochs=2, batch_size=batch,
                           learning_rate=rate, precond=(dh, dg))
    z = xh[te] @ wh + xg[te] @ wg[:-1] + wg[-1]
    X = sp.hstack([xh, xg], format="csr")
    sk = _auc(y[te], LogisticRegression(max_iter=300).fit(X[tr], y[tr]).decision_function(X[te]))
    assert _auc(y[te], z) > sk - 0.02, (_auc(y[te], z), sk)
    train_z = xh[tr] @ wh + xg[tr] @ wg[:-1] + wg[-1]
    assert np.mean((0.5 + train_z / 4 - y[tr]) ** 2) < 0.8 * stability.ZERO_MODEL_LOSS


def _one_hot(rows=600, seed=5):
    import scipy.sparse as sparse

    from shaper.ml.data import shaper_workload

    (xh, xg, y), = shaper_workload(rows, host_features=60, guest_features=90, density=0.05, seed=seed)
    return sparse.hstack([xh, xg], format="csr").astype(np.float64), y


def test_sparse_one_hot_data_with_a_diverging_rate_fails_and_auto_does_not():
    """0/1 data: a rate beyond the certain bound is refused; the same blocks at both parties make a
    rate that passes that bound diverge at run time, and stop with the cause."""
    from shaper.ml.logreg import stability

    X, y = _one_hot()
    with pytest.raises(PartyError, match="makes training diverge"):
        run_in_memory(2, J.divergence_job, X.toarray(), y, {**SMALL, "learning_rate": 500.0, "standardize": False})
    block = X[:, :60]
    guest_block = sp.hstack([block, np.ones((block.shape[0], 1))], format="csr")  # with the intercept
    lam = max(stability.curvature(b, stability.preconditioner(b, SMALL["batch_size"])) for b in (block, guest_block))

    def job(session, rate):
        from shaper.ml import VerticalLogisticRegression

        mine = block  # both parties hold the same one-hot block
        seed = bytes([session.index + 1]) * 32  # a fixed shuffle: some orders reach epoch 2 before diverging
        model = VerticalLogisticRegression(**{**SMALL, "learning_rate": rate}, seed=seed)
        model.fit(session, mine, None if session.index == 0 else y)
        return model.history_

    with pytest.raises(PartyError, match=r"training diverged in epoch 1"):
        run_in_memory(2, job, 1.6 / (0.25 * lam))
    history = run_in_memory(2, job, "auto")[1]
    assert history[-1]["train_loss"] < 0.25


def test_scale_choices_never_diverge_and_lost_columns_are_refused():
    """Columns a million times too large, kept unscaled: 'auto' still trains (slowly, the columns'
    preconditioner and the curvature agree); columns so small they vanish in fixed point are refused."""
    import warnings

    X, y = J.data(raw=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        host, guest = run_in_memory(2, J.divergence_job, X * 1e6, y, {**SMALL, "standardize": False})
    losses = [h["train_loss"] for h in guest["history"]]
    assert max(losses) < 1.1 * 0.25  # not diverged; and a run that ends no better than zero weights says so:
    assert losses[-1] < 0.25 or any("training made no progress" in str(w.message) for w in seen)
    with pytest.raises(PartyError, match=r"vanish at the fixed-point scale 2\^-10; keep standardize='auto'"):
        run_in_memory(2, J.divergence_job, X * 1e-6, y, {**SMALL, "standardize": False})
    host, guest = run_in_memory(2, J.divergence_job, X * 1e-6, y, SMALL)  # the default standardises them
    assert guest["history"][-1]["train_loss"] < 0.25 and _auc(y, guest["proba"]) > 0.9


def test_a_run_that_learns_nothing_says_so():
    X, y = J.data()
    with pytest.warns(RuntimeWarning, match="training made no progress"):
        run_in_memory(2, J.divergence_job, X, y, {**SMALL, "learning_rate": 1e-7})


def test_one_hot_weights_match_the_plaintext_oracle():
    """0/1 columns: the preconditioned step (a D shared by many touched columns scales the batch's
    errors once) gives the oracle's weights."""
    X, y = _one_hot(rows=400)
    Xd = X.toarray()

    def job(session):
        from shaper.ml import VerticalLogisticRegression

        cols = slice(0, 60) if session.index == 0 else slice(60, None)
        model = VerticalLogisticRegression(**SMALL)
        model.fit(session, sp.csr_matrix(Xd[:, cols]), None if session.index == 0 else y)
        return model.coef_, model.intercept_, model.learning_rate_, model.precond_, model.shuffle_seed_

    (ch, _, rate, dh, seed), (cg, ig, _, dg, _) = run_in_memory(2, job)
    assert len(set(dh.tolist())) < 4 and dh.max() > 1  # few distinct powers of two, steps above 1
    wh, wg = reference_sgd(Xd[:, :60], Xd[:, 60:], y, shuffle_seed=seed, epochs=2, batch_size=40,
                           learning_rate=rate, precond=(dh, dg))
    np.testing.assert_allclose(ch, wh, atol=2e-4)
    np.testing.assert_allclose(np.append(cg, ig), wg, atol=2e-4)
    assert np.abs(wh).max() > 0.05
