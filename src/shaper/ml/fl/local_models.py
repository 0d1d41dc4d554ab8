"""Plaintext models that each client of horizontal federated averaging trains on its own rows.

In horizontal (sample-partitioned) federated learning every client holds complete rows, trains
the shared model locally for a few epochs, and sends its parameters to be averaged (encrypted or
secret-shared by the caller; nothing here is secret). To make that aggregation one vector
operation, every model keeps *all* its parameters in one flat ``float64`` vector, and every
method takes that vector explicitly: a model object holds only the architecture (sizes,
regularisation), never the weights, so the same object serves every client and every round.

Models (:data:`MODELS`), built with :func:`make_model`:

* ``"logistic"``: binary logistic regression, labels in {0, 1}, params ``[w (d), b]``, mean
  log-loss computed with ``np.logaddexp`` so large margins do not overflow.
* ``"linear"``: least squares, params ``[w (d), b]``, loss ``0.5 * mean((X w + b - y)^2)``.
* ``"mlp"``: one ReLU hidden layer and a softmax output over ``n_classes``, integer labels
  ``0 .. n_classes-1``; params are ``W1 (d*hidden), b1 (hidden), W2 (hidden*n_classes),
  b2 (n_classes)`` flattened in that order (row-major), He-initialised, stable softmax
  cross-entropy via log-sum-exp.

Every loss is the mean over rows plus ``0.5 * l2 * ||weights||^2``; biases are not penalised.
Forward and backward passes are vectorised over the batch; :meth:`LocalModel.fit_local` is plain
mini-batch SGD (its only Python loop is over batches) and raises
:class:`~shaper.errors.DivergenceError` when the loss or the parameters stop being finite.
Inputs are validated at the public methods and a :class:`ValueError` names the problem.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from scipy.special import expit, logsumexp

from ...errors import DivergenceError

MODELS = ("logistic", "linear", "mlp")

__all__ = ["MODELS", "LinearModel", "LocalModel", "LogisticModel", "MLPModel", "make_model"]


class LocalModel(ABC):
    """A model architecture whose parameters live in one flat ``float64`` vector.

    Subclasses implement :meth:`init_params`, :meth:`predict`, :meth:`score` and the private
    ``_loss_and_gradient``; validation and SGD are shared here. Build instances with
    :func:`make_model`, which checks the sizes."""

    kind: str
    n_params: int

    def __init__(self, n_features: int, l2: float) -> None:
        self.n_features = n_features
        self.l2 = l2

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_features={self.n_features}, l2={self.l2}, n_params={self.n_params})"

    # -- public API ---------------------------------------------------------------------------

    @abstractmethod
    def init_params(self, seed: int) -> np.ndarray:
        """Initial parameters, a fresh ``float64`` vector of length :attr:`n_params`,
        deterministic in ``seed`` (model initialisation is public, so numpy's generator is fine)."""

    def loss(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """Mean loss over the rows of ``X`` (n, d) with labels ``y`` (n,), plus
        ``0.5 * l2 * ||weights||^2`` (biases excluded)."""
        params = self._check_params(params)
        X, y = self._check_data(X, y)
        return self._loss(params, X, y)

    def gradient(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`loss` with respect to the flat ``params``; shape ``(n_params,)``."""
        params = self._check_params(params)
        X, y = self._check_data(X, y)
        return self._loss_and_gradient(params, X, y)[1]

    @abstractmethod
    def predict(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Model output for the rows of ``X`` (see the subclass for its meaning and shape)."""

    @abstractmethod
    def score(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """Evaluation metrics on ``(X, y)`` as a dict of floats (keys depend on the kind)."""

    def fit_local(self, params: np.ndarray, X: np.ndarray, y: np.ndarray, *, epochs: int,
                  batch_size: int, learning_rate: float, seed: int) -> np.ndarray:
        """Plain mini-batch SGD from ``params`` on this client's rows; returns new parameters.

        Each epoch shuffles the rows with ``np.random.default_rng(seed)`` (one generator for the
        whole call, so the result is deterministic in ``seed``) and takes one step
        ``params -= learning_rate * gradient`` per batch of ``batch_size`` rows (the last batch
        may be smaller). The input vector is not modified.

        Raises :class:`ValueError` for a bad setting or bad data, and
        :class:`~shaper.errors.DivergenceError` naming the epoch and batch when a batch loss or
        the parameters become non-finite (the step size is too large for the data)."""
        params = self._check_params(params).copy()
        X, y = self._check_data(X, y)
        epochs = _check_int("epochs", epochs, minimum=0)
        batch_size = _check_int("batch_size", batch_size, minimum=1)
        if not (isinstance(learning_rate, (int, float, np.floating, np.integer))
                and np.isfinite(learning_rate) and learning_rate > 0):
            raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}")
        learning_rate = float(learning_rate)
        rng = np.random.default_rng(seed)
        n = X.shape[0]
        # Overflow is detected explicitly below and reported as DivergenceError, so numpy's
        # overflow/invalid warnings would only be noise on the way there.
        with np.errstate(over="ignore", invalid="ignore"):
            for epoch in range(1, epochs + 1):
                order = rng.permutation(n)
                for batch, start in enumerate(range(0, n, batch_size), start=1):
                    rows = order[start:start + batch_size]
                    batch_loss, grad = self._loss_and_gradient(params, X[rows], y[rows])
                    params -= learning_rate * grad
                    if not (np.isfinite(batch_loss) and np.isfinite(params).all()):
                        what = "loss" if not np.isfinite(batch_loss) else "parameters"
                        raise DivergenceError(
                            f"{self.kind} local training diverged: the {what} became non-finite "
                            f"in epoch {epoch} of {epochs} (batch {batch}) with learning_rate="
                            f"{learning_rate:g}; {self._learning_rate_hint(X, learning_rate)}")
        return params

    # -- subclass hooks -----------------------------------------------------------------------

    def _loss(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        return self._loss_and_gradient(params, X, y)[0]

    @abstractmethod
    def _loss_and_gradient(self, params: np.ndarray, X: np.ndarray,
                           y: np.ndarray) -> tuple[float, np.ndarray]:
        """Loss and its gradient on already-validated data (one shared forward pass)."""

    @abstractmethod
    def _check_labels(self, y: np.ndarray) -> np.ndarray:
        """Validate labels for this kind; returns them in the dtype the maths uses."""

    def _learning_rate_hint(self, X: np.ndarray, learning_rate: float) -> str:
        return f"try a learning rate of {learning_rate / 10:g} or less"

    # -- validation ---------------------------------------------------------------------------

    def _check_params(self, params: np.ndarray) -> np.ndarray:
        params = np.asarray(params)
        if params.ndim != 1 or params.shape[0] != self.n_params:
            raise ValueError(f"params must be a 1-D vector of length {self.n_params} for this "
                             f"{self.kind} model, got shape {params.shape}")
        if not np.issubdtype(params.dtype, np.floating):
            raise ValueError(f"params must be floating point, got dtype {params.dtype}")
        return params.astype(np.float64, copy=False)

    def _check_X(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array (rows, features), got {X.ndim}-D shape {X.shape}")
        if not np.issubdtype(X.dtype, np.floating):
            raise ValueError(f"X must be a floating-point array, got dtype {X.dtype} "
                             f"(convert with X.astype(float))")
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} feature columns but the model expects "
                             f"n_features={self.n_features}")
        if X.shape[0] == 0:
            raise ValueError("X has no rows")
        if not np.isfinite(X).all():
            raise ValueError("X contains NaN or infinite values")
        return X.astype(np.float64, copy=False)

    def _check_data(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = self._check_X(X)
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D array of labels, got shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} labels but X has {X.shape[0]} rows")
        if not (np.issubdtype(y.dtype, np.number) or y.dtype == np.bool_):
            raise ValueError(f"y must be numeric, got dtype {y.dtype}")
        return X, self._check_labels(y)


class _AffineModel(LocalModel):
    """Shared layout of the two affine models: params ``[w (d), b]``, prediction ``X w + b``."""

    def __init__(self, n_features: int, l2: float) -> None:
        super().__init__(n_features, l2)
        self.n_params = n_features + 1

    def init_params(self, seed: int) -> np.ndarray:
        """Zeros for every seed: the loss is convex, so the start does not change the optimum,
        and identical starts keep clients' first averaging round meaningful."""
        return np.zeros(self.n_params, dtype=np.float64)

    def _margin(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        return X @ params[:-1] + params[-1]

    def _with_l2(self, params: np.ndarray, data_loss: float,
                 d_margin: np.ndarray, X: np.ndarray) -> tuple[float, np.ndarray]:
        """Add the weight penalty and assemble ``[dL/dw, dL/db]`` from ``dL/dmargin`` (n,)."""
        w = params[:-1]
        grad = np.empty(self.n_params, dtype=np.float64)
        grad[:-1] = X.T @ d_margin + self.l2 * w
        grad[-1] = d_margin.sum()
        return data_loss + 0.5 * self.l2 * float(w @ w), grad

    def _smoothness(self, X: np.ndarray) -> float:
        """Largest eigenvalue of the Hessian of the mean squared-margin term on ``X``:
        ``||[X 1]||_2^2 / n``, the curvature scale that bounds a stable step size."""
        Xa = np.hstack([X, np.ones((X.shape[0], 1))])
        return float(np.linalg.norm(Xa, 2) ** 2 / X.shape[0])


class LogisticModel(_AffineModel):
    """Binary logistic regression: ``P(y=1 | x) = sigmoid(x . w + b)``, labels in {0, 1}."""

    kind = "logistic"

    def _check_labels(self, y: np.ndarray) -> np.ndarray:
        if not np.isin(y, (0, 1)).all():
            bad = np.unique(y[~np.isin(y, (0, 1))])[:5]
            raise ValueError(f"logistic labels must be 0 or 1, got other values such as {bad.tolist()}")
        return y.astype(np.float64)

    def _loss_and_gradient(self, params, X, y):
        z = self._margin(params, X)
        n = X.shape[0]
        # log(1 + e^z) - y z is the log-loss of sigmoid(z); logaddexp keeps it finite for any z.
        data_loss = float(np.mean(np.logaddexp(0.0, z) - y * z))
        return self._with_l2(params, data_loss, (expit(z) - y) / n, X)

    def predict(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``P(y=1)`` for each row, shape ``(n,)``."""
        params = self._check_params(params)
        return expit(self._margin(params, self._check_X(X)))

    def score(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """``{"loss", "auc", "accuracy"}``; accuracy thresholds ``P(y=1)`` at 0.5, and ``auc`` is
        NaN when ``y`` holds a single class (ROC AUC is undefined then)."""
        from sklearn.metrics import roc_auc_score

        params = self._check_params(params)
        X, y = self._check_data(X, y)
        p = expit(self._margin(params, X))
        auc = float(roc_auc_score(y, p)) if np.unique(y).size == 2 else float("nan")
        return {"loss": self._loss(params, X, y), "auc": auc,
                "accuracy": float(np.mean((p >= 0.5) == (y == 1)))}

    def _learning_rate_hint(self, X, learning_rate):
        # The logistic Hessian is at most (1/4)·[X 1]^T[X 1]/n + l2·I, so 1/L is a safe full-batch step.
        smoothness = self._smoothness(X) / 4 + self.l2
        return f"a learning rate of about {1 / smoothness:.3g} (1/smoothness of the local data) suits it"


class LinearModel(_AffineModel):
    """Least-squares linear regression: ``y_hat = x . w + b``."""

    kind = "linear"

    def _check_labels(self, y: np.ndarray) -> np.ndarray:
        y = y.astype(np.float64)
        if not np.isfinite(y).all():
            raise ValueError("linear regression targets y contain NaN or infinite values")
        return y

    def _loss_and_gradient(self, params, X, y):
        residual = self._margin(params, X) - y
        n = X.shape[0]
        data_loss = 0.5 * float(residual @ residual) / n
        return self._with_l2(params, data_loss, residual / n, X)

    def predict(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Predicted targets ``X w + b``, shape ``(n,)``."""
        params = self._check_params(params)
        return self._margin(params, self._check_X(X))

    def score(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """``{"loss", "mse", "r2"}`` (``r2`` from scikit-learn's ``r2_score``)."""
        from sklearn.metrics import r2_score

        params = self._check_params(params)
        X, y = self._check_data(X, y)
        y_hat = self._margin(params, X)
        return {"loss": self._loss(params, X, y), "mse": float(np.mean((y_hat - y) ** 2)),
                "r2": float(r2_score(y, y_hat))}

    def _learning_rate_hint(self, X, learning_rate):
        smoothness = self._smoothness(X) + self.l2
        return f"a learning rate of about {1 / smoothness:.3g} (1/smoothness of the local data) suits it"


class MLPModel(LocalModel):
    """One-hidden-layer perceptron: ``softmax(relu(X W1 + b1) W2 + b2)`` over ``n_classes``."""

    kind = "mlp"

    def __init__(self, n_features: int, n_classes: int, hidden: int, l2: float) -> None:
        super().__init__(n_features, l2)
        self.n_classes = n_classes
        self.hidden = hidden
        self.n_params = n_features * hidden + hidden + hidden * n_classes + n_classes

    def __repr__(self) -> str:
        return (f"MLPModel(n_features={self.n_features}, hidden={self.hidden}, "
                f"n_classes={self.n_classes}, l2={self.l2}, n_params={self.n_params})")

    def unflatten(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views ``(W1 (d, hidden), b1 (hidden,), W2 (hidden, classes), b2 (classes,))`` into
        ``params``; writing to them writes to ``params``."""
        d, h, c = self.n_features, self.hidden, self.n_classes
        ends = np.cumsum([d * h, h, h * c])
        return (params[:ends[0]].reshape(d, h), params[ends[0]:ends[1]],
                params[ends[1]:ends[2]].reshape(h, c), params[ends[2]:])

    def init_params(self, seed: int) -> np.ndarray:
        """He initialisation (weights ~ N(0, 2 / fan_in), suited to ReLU), zero biases."""
        rng = np.random.default_rng(seed)
        params = np.zeros(self.n_params, dtype=np.float64)
        W1, _, W2, _ = self.unflatten(params)
        W1[...] = rng.normal(0.0, np.sqrt(2.0 / self.n_features), size=W1.shape)
        W2[...] = rng.normal(0.0, np.sqrt(2.0 / self.hidden), size=W2.shape)
        return params

    def _check_labels(self, y: np.ndarray) -> np.ndarray:
        if y.dtype == np.bool_:
            raise ValueError("mlp labels must be integer class indices, got booleans")
        # Whole-valued floats (as np.loadtxt returns labels) are accepted; 0.5 or NaN are not.
        if not np.all(np.mod(y, 1) == 0):
            raise ValueError(f"mlp labels must be integer class indices, got non-integer values "
                             f"(dtype {y.dtype})")
        out_of_range = (y < 0) | (y >= self.n_classes)
        if out_of_range.any():
            bad = np.unique(y[out_of_range])[:5]
            raise ValueError(f"mlp labels must lie in 0..{self.n_classes - 1} (n_classes="
                             f"{self.n_classes}), got {bad.tolist()}")
        return y.astype(np.intp)

    def _forward(self, params: np.ndarray, X: np.ndarray):
        W1, b1, W2, b2 = self.unflatten(params)
        pre = X @ W1 + b1
        hidden = np.maximum(pre, 0.0)
        logits = hidden @ W2 + b2
        log_probs = logits - logsumexp(logits, axis=1, keepdims=True)
        return pre, hidden, log_probs

    def _penalty(self, params: np.ndarray) -> float:
        W1, _, W2, _ = self.unflatten(params)
        return 0.5 * self.l2 * (float(np.vdot(W1, W1)) + float(np.vdot(W2, W2)))

    def _loss(self, params, X, y):
        log_probs = self._forward(params, X)[2]
        return -float(np.mean(log_probs[np.arange(X.shape[0]), y])) + self._penalty(params)

    def _loss_and_gradient(self, params, X, y):
        W1, _, W2, _ = self.unflatten(params)
        n = X.shape[0]
        rows = np.arange(n)
        pre, hidden, log_probs = self._forward(params, X)
        loss = -float(np.mean(log_probs[rows, y])) + self._penalty(params)
        # d(mean cross-entropy)/d(logits) = (softmax - onehot) / n.
        d_logits = np.exp(log_probs)
        d_logits[rows, y] -= 1.0
        d_logits /= n
        grad = np.empty(self.n_params, dtype=np.float64)
        gW1, gb1, gW2, gb2 = self.unflatten(grad)
        gW2[...] = hidden.T @ d_logits + self.l2 * W2
        gb2[...] = d_logits.sum(axis=0)
        d_pre = d_logits @ W2.T
        d_pre[pre <= 0.0] = 0.0
        gW1[...] = X.T @ d_pre + self.l2 * W1
        gb1[...] = d_pre.sum(axis=0)
        return loss, grad

    def predict(self, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Class probabilities, shape ``(n, n_classes)``, rows summing to 1."""
        params = self._check_params(params)
        return np.exp(self._forward(params, self._check_X(X))[2])

    def score(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
        """``{"loss", "accuracy"}``; accuracy compares the most probable class with ``y``."""
        params = self._check_params(params)
        X, y = self._check_data(X, y)
        log_probs = self._forward(params, X)[2]
        loss = -float(np.mean(log_probs[np.arange(X.shape[0]), y])) + self._penalty(params)
        return {"loss": loss, "accuracy": float(np.mean(log_probs.argmax(axis=1) == y))}


def make_model(kind: str, n_features: int, *, n_classes: int = 2, hidden: int = 64,
               l2: float = 0.0) -> LocalModel:
    """Build a local model of ``kind`` (one of :data:`MODELS`) for ``n_features`` inputs.

    ``n_classes`` and ``hidden`` apply to ``"mlp"`` only; ``l2`` (>= 0) is the weight penalty
    for every kind. Raises :class:`ValueError` naming an unknown kind or a bad size."""
    if kind not in MODELS:
        raise ValueError(f"unknown model kind {kind!r}; choose one of {', '.join(MODELS)}")
    n_features = _check_int("n_features", n_features, minimum=1)
    if not (isinstance(l2, (int, float, np.floating, np.integer)) and np.isfinite(l2) and l2 >= 0):
        raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
    l2 = float(l2)
    if kind == "logistic":
        return LogisticModel(n_features, l2)
    if kind == "linear":
        return LinearModel(n_features, l2)
    n_classes = _check_int("n_classes", n_classes, minimum=2)
    hidden = _check_int("hidden", hidden, minimum=1)
    return MLPModel(n_features, n_classes, hidden, l2)


def _check_int(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)
