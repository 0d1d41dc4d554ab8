"""Federated learning with Paillier: coordinated vertical models against scikit-learn and a plain
float implementation of the same algorithm, secure aggregation against numpy, slot edges, the
dropout policy, killed parties, checkpoint and resume, and the python-paillier backend."""

from __future__ import annotations

import os

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from shaper.errors import ConfigError, PartyError
from shaper.ml.fl.fedavg import FederatedAveraging, plaintext_fedavg
from shaper.ml.fl.hetero import HeteroLinearModel
from shaper.ml.shuffle import epoch_order
from shaper.net import launch, run_in_memory
from shaper.protocols.fl.aggregate import AggregationParams, Federation
from shaper.protocols.fl.backend import make_backend

BITS = 512


def _split(kind: str):
    if kind == "logistic":
        X, y = load_breast_cancer(return_X_y=True)
    else:
        X, y = load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


COLS = {"guest": slice(0, 4), "host-a": slice(4, 7), "host-b": slice(7, None)}
VERTICAL = ["guest", "host-a", "host-b", "arbiter"]


def _vertical_party(session, kind, opts, fail_after_epoch=None):
    Xtr, Xte, ytr, yte = _split(kind)
    m = HeteroLinearModel(kind, **opts)
    if session.name == "arbiter":
        m.fit(session, None, role="arbiter")
        assert m.decision_function(session) is None  # the arbiter decrypts the guest's blinded scores
        return {"iterations": m.iterations_, "history": m.history_}
    c = COLS[session.name]
    guest = session.name == "guest"

    def progress(event):
        if fail_after_epoch is not None and guest and event["event"] == "epoch" and event["epoch"] == fail_after_epoch:
            os._exit(3)  # the guest's process dies after writing this epoch's checkpoint

    m.fit(session, Xtr[:, c], ytr if guest else None, role="guest" if guest else "host",
          validation=(Xte[:, c], yte if guest else None), progress=progress)
    z = m.decision_function(session, Xte[:, c])
    return {"coef": m.coef_, "intercept": m.intercept_, "history": m.history_, "z": z,
            "resumed": m.resumed_from_, "stats": m.stats_, "learning_rate": m.learning_rate_}


def _plain_reference(kind, opts):
    """The same algorithm in float64: Taylor (or squared) loss gradient descent over the
    guest-and-hosts columns, batches in the job's public order, guest intercept last."""
    Xtr, _, ytr, _ = _split(kind)
    X = np.hstack([Xtr[:, COLS["guest"]], np.ones((len(ytr), 1)), Xtr[:, COLS["host-a"]], Xtr[:, COLS["host-b"]]])
    w = np.zeros(X.shape[1])
    reg = np.ones(X.shape[1])
    reg[4] = 0.0  # no penalty on the intercept
    lr, l2, size = opts["learning_rate"], opts.get("l2", 0.0), opts["batch_size"]
    losses = []
    for epoch in range(opts["max_iter"]):
        order = epoch_order(opts["shuffle_seed"], epoch, len(ytr))  # the job's AES-CTR order
        starts = list(range(0, len(ytr) - len(ytr) % size, size))  # the short remainder joins the last batch
        for i in starts:
            b = order[i:i + size] if i != starts[-1] else order[i:]
            z = X[b] @ w
            if kind == "logistic":
                ys = 2 * ytr[b] - 1
                resid = 0.25 * z - 0.5 * ys
                losses.append(np.mean(np.log(2) - 0.5 * ys * z + z * z / 8) + l2 / 2 * np.sum(reg * w * w))
            else:
                resid = z - ytr[b]
                losses.append(0.5 * np.mean(resid ** 2) + l2 / 2 * np.sum(reg * w * w))
            w = w - lr * (X[b].T @ resid / len(b) + l2 * reg * w)
    return w, losses


OPTS = {"max_iter": 3, "batch_size": 100, "learning_rate": 0.2, "l2": 0.01, "tol": 0.0, "key_bits": BITS,
        "standardize": False, "shuffle_seed": 7}


@pytest.mark.parametrize("kind", ["linear", "logistic"])
def test_vertical_matches_the_plaintext_algorithm_with_two_hosts(kind):
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, kind, OPTS)))
    w_ref, losses = _plain_reference(kind, OPTS)
    guest = res["guest"]
    got = np.concatenate([guest["coef"], [guest["intercept"]], res["host-a"]["coef"], res["host-b"]["coef"]])
    assert res["host-a"]["intercept"] == 0.0  # standardize=False: no constant at a host
    losses_secure = [it["loss"] for it in res["arbiter"]["iterations"]]
    assert len(losses_secure) == len(losses) == 3 * (len(_split(kind)[2]) // 100)
    np.testing.assert_allclose(got, w_ref, atol=1e-6, rtol=0)  # fixed point 2^-20: far inside 1e-6
    np.testing.assert_allclose(losses_secure, losses, atol=1e-6, rtol=0)
    Xtr, Xte, ytr, yte = _split(kind)
    z_ref = np.hstack([Xte[:, COLS["guest"]], np.ones((len(yte), 1)), Xte[:, COLS["host-a"]], Xte[:, COLS["host-b"]]]) @ w_ref
    np.testing.assert_allclose(guest["z"], z_ref, atol=1e-4)
    if kind == "logistic":
        assert abs(roc_auc_score(yte, guest["z"]) - roc_auc_score(yte, z_ref)) <= 0.005
    for name in ("host-a", "host-b", "arbiter"):  # only the guest learns scores and validation metrics
        assert res[name].get("z") is None
        assert all("auc" not in h and "r2" not in h for h in res[name]["history"])


def test_vertical_logistic_is_within_001_auc_of_scikit_learn_on_breast_cancer():
    opts = {**OPTS, "max_iter": 8, "batch_size": 64, "learning_rate": 0.3, "l2": 0.0, "tol": 1e-5}
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "logistic", opts)))
    Xtr, Xte, ytr, yte = _split("logistic")
    sk = LogisticRegression(max_iter=1000).fit(Xtr, ytr)
    auc_sk = roc_auc_score(yte, sk.decision_function(Xte))
    auc = roc_auc_score(yte, res["guest"]["z"])
    assert abs(auc - auc_sk) <= 0.01, (auc, auc_sk)
    assert res["guest"]["history"][-1]["auc"] == pytest.approx(auc)
    split = res["guest"]["stats"]["per_iteration"]
    assert split["seconds"] > 0 and split["encrypt"] >= 0 and split["wait"] >= 0
    assert split["encrypt"] + split["decrypt"] + split["homomorphic"] + split["wait"] <= split["seconds"] * 1.001


def test_vertical_auto_learning_rate_is_the_logistic_regression_rule():
    """learning_rate="auto": every data party sends the curvature of its own (standardised)
    columns, and all take 1 / (s * their sum), s = 1/4 for the Taylor log-loss, as
    shaper.ml.logreg does for its two parties; the model it trains is as good as scikit-learn's."""
    import scipy.sparse as sp

    from shaper.ml.logreg import stability
    from shaper.ml.logreg.features import ColumnScaler

    opts = {**OPTS, "max_iter": 8, "batch_size": 64, "learning_rate": "auto", "l2": 0.0, "standardize": True}
    res = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "logistic", opts)))
    Xtr, Xte, ytr, yte = _split("logistic")
    total = 0.0
    for name in ("guest", "host-a", "host-b"):
        X = ColumnScaler.fit(Xtr[:, COLS[name]]).transform(Xtr[:, COLS[name]]).toarray()
        if name == "guest":
            X = np.hstack([X, np.ones((len(ytr), 1))])
        total += stability.curvature(sp.csr_matrix(X), np.ones(X.shape[1]))
    rate = stability.auto_rate(2, total, 0.0)
    for name in ("guest", "host-a", "host-b"):
        assert res[name]["learning_rate"] == pytest.approx(rate, rel=1e-9)
    assert [h["learning_rate"] for h in res["guest"]["history"]] == [pytest.approx(rate, rel=1e-9)] * 8
    sk = LogisticRegression(max_iter=1000).fit(Xtr, ytr)
    assert abs(roc_auc_score(yte, res["guest"]["z"]) - roc_auc_score(yte, sk.decision_function(Xte))) <= 0.01


def test_phe_backend_runs_the_same_protocol():
    opts = {**OPTS, "max_iter": 1, "batch_size": 200, "key_bits": 1024}
    ours = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "linear", opts)))
    phe = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "linear", {**opts, "backend": "phe"})))
    for name in ("guest", "host-a", "host-b"):
        np.testing.assert_array_equal(ours[name]["coef"], phe[name]["coef"])  # integer arithmetic: identical
    assert phe["guest"]["stats"]["backend"] == "phe"


def test_vertical_checkpoint_and_resume_after_the_guest_dies(tmp_path):
    opts = {**OPTS, "max_iter": 4, "checkpoint_dir": str(tmp_path)}
    with pytest.raises(PartyError):
        launch(VERTICAL, _vertical_party, "linear", opts, 2)
    for party in VERTICAL:
        assert (tmp_path / party / "epoch-000002" / "state.json").is_file()
        assert oct((tmp_path / party / "epoch-000002" / "state.json").stat().st_mode & 0o777) == "0o600"
    resumed = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "linear", {**opts, "resume": True})))
    fresh = dict(zip(VERTICAL, launch(VERTICAL, _vertical_party, "linear", {**OPTS, "max_iter": 4})))
    assert resumed["guest"]["resumed"] == 2
    assert [h["epoch"] for h in resumed["guest"]["history"]] == [1, 2, 3, 4]
    for name in ("guest", "host-a", "host-b"):
        np.testing.assert_array_equal(resumed[name]["coef"], fresh[name]["coef"])


def _host_dies(session):
    if session.name == "host-a":
        os._exit(5)
    return _vertical_party(session, "linear", OPTS)


def test_a_killed_host_ends_the_vertical_job_with_an_error_naming_it():
    with pytest.raises(PartyError) as info:
        launch(VERTICAL, _host_dies, timeout=120)
    assert "host-a" in str(info.value)


def test_batches_too_small_for_a_partys_columns_are_refused():
    """X_p^T E over a batch with no more rows than p's columns would give p the residuals."""
    with pytest.raises(PartyError, match="host-b: batches of 15 rows and 23 columns"):
        launch(VERTICAL, _vertical_party, "logistic", {**OPTS, "batch_size": 15, "max_iter": 1})


def test_vertical_roles_and_settings_are_checked():
    def party(session):
        role = {"a": "guest", "b": "guest", "c": "arbiter"}[session.name]
        X = np.ones((5, 2))
        HeteroLinearModel("linear", key_bits=BITS).fit(session, None if role == "arbiter" else X,
                                                        np.ones(5) if role == "guest" else None, role=role)

    with pytest.raises(PartyError, match="exactly one guest, one arbiter and at least one host"):
        run_in_memory(["a", "b", "c"], party)
    with pytest.raises(ConfigError, match="labels"):
        HeteroLinearModel("logistic").fit(None, np.ones((3, 2)), np.array([0, 1, 2]), role="guest")


def _scores_party(session, parts, X, ids):
    from shaper.ml.scoring import joint_scores

    part = parts.get(session.name)
    c = None if part is None else part.columns
    return joint_scores(session, part, None if part is None else X[:, c], None if part is None else ids)


def test_joint_scores_add_every_part_once_at_the_guest():
    """Scoring on real hosts: the guest gets sum_p (x_p . coef_p + intercept_p), each constant
    once; with two hosts their parts reach it masked, so only their sum is learnt; the others
    (hosts, an arbiter in the parties file) get nothing."""
    from shaper.ml.scoring import LinearPart, local_scores

    rng = np.random.default_rng(4)  # test data
    X, ids = rng.normal(size=(50, 7)), np.array([f"r{i}" for i in range(50)])
    cols = {"guest": np.arange(0, 3), "host-a": np.arange(3, 5), "host-b": np.arange(5, 7)}
    parts = {name: LinearPart(rng.normal(size=c.size), float(rng.normal()), "guest" if name == "guest" else "host",
                              columns=c) for name, c in cols.items()}
    res = dict(zip(VERTICAL, run_in_memory(VERTICAL, _scores_party, parts, X, ids)))
    want = sum(X[:, c] @ parts[n].coef + parts[n].intercept for n, c in cols.items())
    np.testing.assert_allclose(res["guest"], want, atol=1e-6)
    np.testing.assert_allclose(local_scores(list(parts.values()), X), want, atol=1e-12)
    assert res["host-a"] is None and res["host-b"] is None and res["arbiter"] is None

    def shuffled(session):
        rows = slice(None, None, -1) if session.name == "host-b" else slice(None)
        return _scores_party(session, parts, X[rows], ids[rows])

    with pytest.raises(PartyError, match="different row set or order"):
        run_in_memory(VERTICAL, shuffled)


# -- horizontal ------------------------------------------------------------------------------------------
CLIENTS = [f"client-{i}" for i in range(5)]


def _updates(count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, count) for _ in CLIENTS], [50 * (i + 1) for i in range(len(CLIENTS))]


def _agg_party(session, updates, rows, params, drop=()):
    b = make_backend("shaper")
    clients = [n for n in session.parties if n != "coordinator"]
    role = "coordinator" if session.name == "coordinator" else "client"
    fed = Federation(session, b, role, "coordinator", clients, params, key_bits=BITS)
    i = clients.index(session.name) if role == "client" else None
    fed.setup(rows[i] if role == "client" else None)
    if session.name in drop:
        return "dropped"  # leaves after set-up: its session closes
    if role == "coordinator":
        return fed.coordinator_round(0)
    return fed.client_round(updates[i], 0), fed.last


def _expected(updates, rows, params, included):
    """The aggregation's own arithmetic in numpy: per-client rounding at 2^-frac_bits of the
    weighted update, integer sums, divided by the included clients' weights."""
    scale = 2.0 ** params.frac_bits
    total = sum(rows)
    num = sum(np.rint(updates[i] * (rows[i] / total) * scale).astype(np.int64) for i in included)
    return num / scale / sum(rows[i] / total for i in included)


def test_aggregation_equals_the_numpy_weighted_sum_with_five_clients():
    params = AggregationParams()
    updates, rows = _updates(3000)
    res = run_in_memory(["coordinator", *CLIENTS], _agg_party, updates, rows, params)
    expected = _expected(updates, rows, params, range(5))
    exact = sum(r * u for r, u in zip(rows, updates)) / sum(rows)
    for mean, info in res[1:]:
        np.testing.assert_array_equal(mean, expected)
        assert np.abs(mean - exact).max() < 5 * 2.0 ** -params.frac_bits
        assert info["slots"] > 1 and info["ciphertexts"] == -(-3001 // info["slots"])  # packed
    assert res[0]["included"] == CLIENTS


def test_packed_slots_hold_values_at_their_edges():
    params = AggregationParams(frac_bits=12, int_bits=2)
    top = 4 - 2.0 ** -12
    updates = [np.array([top, -top, 0.0, top] * 40) for _ in CLIENTS]
    rows = [10] * 5  # equal weights: the mean of equal extremes is the extreme
    res = run_in_memory(["coordinator", *CLIENTS], _agg_party, updates, rows, params)
    for mean, _ in res[1:]:
        np.testing.assert_allclose(mean, updates[0], atol=2.0 ** -11)
    over = [u.copy() for u in updates]
    over[3][5] = 4.0
    with pytest.raises(PartyError, match="client-3.*outside ±2\\^2"):
        run_in_memory(["coordinator", *CLIENTS], _agg_party, over, rows, params)


def test_a_dropped_client_is_left_out_when_the_quorum_holds():
    params = AggregationParams(quorum=3)
    updates, rows = _updates(500, seed=2)
    res = run_in_memory(["coordinator", *CLIENTS], _agg_party, updates, rows, params, drop=("client-2",))
    assert res[0]["included"] == ["client-0", "client-1", "client-3", "client-4"]
    assert "client-2" in res[0]["dropped"]
    expected = _expected(updates, rows, params, [0, 1, 3, 4])
    for name, r in zip(["coordinator", *CLIENTS], res):
        if name.startswith("client") and name != "client-2":
            np.testing.assert_array_equal(r[0], expected)  # re-weighted over the four that delivered


def test_a_round_below_quorum_fails_naming_the_missing_clients():
    params = AggregationParams()  # quorum = every client
    updates, rows = _updates(100)
    with pytest.raises(PartyError) as info:
        run_in_memory(["coordinator", *CLIENTS], _agg_party, updates, rows, params, drop=("client-4",))
    assert "QuorumError" in str(info.value) and "client-4" in str(info.value)


def _coordinator_dies(session, updates, rows):
    if session.name == "coordinator":
        params = AggregationParams()
        fed = Federation(session, make_backend("shaper"), "coordinator", "coordinator", CLIENTS, params, key_bits=BITS)
        fed.setup()
        os._exit(7)
    return _agg_party(session, updates, rows, AggregationParams())


def test_a_killed_coordinator_ends_the_clients_with_a_clear_error():
    updates, rows = _updates(100)
    with pytest.raises(PartyError) as info:
        launch(["coordinator", *CLIENTS], _coordinator_dies, updates, rows, timeout=120)
    assert "coordinator" in str(info.value)


# -- FedAvg end to end -------------------------------------------------------------------------------------
FED = {"rounds": 3, "local_epochs": 1, "batch_size": 16, "learning_rate": 0.1, "key_bits": BITS}


def _fedavg_party(session, kind, parts, test, opts):
    if session.name == "coordinator":
        m = FederatedAveraging(kind, **opts).fit(session, None, role="coordinator")
        return m.rounds_
    i = CLIENTS.index(session.name)
    m = FederatedAveraging(kind, **opts).fit(session, *parts[i], role="client", validation=test)
    return m.params_, m.history_, m.resumed_from_


@pytest.mark.parametrize("kind", ["logistic", "linear"])
def test_fedavg_matches_the_plaintext_algorithm(kind):
    Xtr, Xte, ytr, yte = _split(kind)
    parts = [(Xtr[i::5], ytr[i::5]) for i in range(5)]
    res = launch(["coordinator", *CLIENTS], _fedavg_party, kind, parts, (Xte, yte), FED)
    ref = plaintext_fedavg(kind, parts, **FED)
    for params, history, _ in res[1:]:
        np.testing.assert_allclose(params, ref, atol=FED["rounds"] * 2.0 ** -14)
        np.testing.assert_array_equal(params, res[1][0])  # every client holds the same model
    if kind == "logistic":
        auc_ref = roc_auc_score(yte, Xte @ ref[:-1] + ref[-1])
        assert abs(res[1][1][-1]["auc"] - auc_ref) <= 0.005
    assert all(r["included"] == CLIENTS for r in res[0])


def test_fedavg_mlp_on_mnist_and_resume(tmp_path):
    import gzip

    from tests.ml.test_local_models import MNIST_5K

    with gzip.open(MNIST_5K, "rt") as fh:
        data = np.loadtxt(fh, delimiter=",", max_rows=5000)
    order = np.random.default_rng(0).permutation(len(data))
    X, y = data[order, :-1] / 255.0, data[order, -1].astype(int)
    parts = [(X[i * 300:(i + 1) * 300], y[i * 300:(i + 1) * 300]) for i in range(5)]
    test = (X[4000:4500], y[4000:4500])
    opts = {**FED, "rounds": 2, "hidden": 16, "n_classes": 10, "checkpoint_dir": str(tmp_path)}
    first = launch(["coordinator", *CLIENTS], _fedavg_party, "mlp", parts, test, opts)
    again = launch(["coordinator", *CLIENTS], _fedavg_party, "mlp", parts, test, {**opts, "resume": True})
    assert again[1][2] == 2  # nothing left to run: resumed from round 2
    np.testing.assert_array_equal(again[1][0], first[1][0])
    ref = plaintext_fedavg("mlp", parts, **{k: v for k, v in opts.items() if k != "checkpoint_dir"})
    np.testing.assert_allclose(first[1][0], ref, atol=2 * 2.0 ** -14)
    assert first[1][1][-1]["accuracy"] > 0.6
