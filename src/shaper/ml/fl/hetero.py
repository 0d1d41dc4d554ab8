"""Coordinated vertical logistic and linear regression: guest, hosts and an arbiter (Hardy et al.
2017; the workflow of FATE's HeteroLR / HeteroLinR with an arbiter).

    model = HeteroLinearModel("logistic", max_iter=10, batch_size=None, learning_rate=0.15)
    model.fit(session, X, y, role="guest")     # the guest: its features and the labels
    model.fit(session, X, role="host")         # each host: its features of the same rows
    model.fit(session, None, role="arbiter")   # the arbiter: the Paillier key, no data

The messages of a step and what each role learns are in :mod:`shaper.protocols.fl.hetero`; this
module runs the job: parameters and their agreement (:class:`shaper.ml.settings.Settings`), the
arbiter's key, mini-batches in an order drawn from the guest's seed (:func:`shaper.ml.shuffle.epoch_order`,
AES-CTR), the learning-rate schedule (``lr / (1 + decay t)`` or ``lr / sqrt(1 + decay t)``), with
``learning_rate="auto"`` the base step of :mod:`shaper.ml.logreg.stability` (each data party sends
one curvature scalar of its own columns in its hello; the step is 1 / (s * their sum)), L2,
convergence (the arbiter compares the epoch losses, ``tol``), divergence (non-finite or exploding
loss: every party stops with :class:`~shaper.errors.DivergenceError`), per-epoch validation
(the guest learns the scores of the validation rows, nobody else does), checkpoints after every
epoch and resume, progress events and the time of every step split into encryption, decryption,
homomorphic work, waiting and the rest (:class:`shaper.net.phases.Phases`).

Logistic regression trains on the second-order Taylor expansion of the log-loss at 0 (as Hardy et
al. and FATE do): gradient ``(z/4 - y/2) x`` with y in {-1, +1}. Linear regression trains on
``(z - y)^2 / 2``. Both are exact apart from fixed-point rounding (scale 2^frac_bits), so the
secure run follows the plaintext run of the same algorithm to about 2^-frac_bits.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ...arrays import chunk_slices
from ...crypto import counters
from ...errors import ConfigError, DivergenceError
from ...protocols.fl import hetero as proto
from ...net.phases import Meter, Phases
from ...protocols.fl.backend import BACKENDS, CATEGORIES, make_backend, mean_split
from ..checkpoint import Checkpointer
from ..logreg import stability
from ..logreg.features import ColumnScaler
from ..settings import Settings
from ..shuffle import epoch_order

MODELS = proto.MODELS
#: the gradient's slope in the score is 2^-bits: 1/4 (the Taylor log-loss), 1 (squared error)
SLOPE_BITS = {"logistic": 2, "linear": 0}


@dataclass(frozen=True)
class HeteroParams(Settings):
    model: str = "logistic"
    max_iter: int = 10            # epochs (passes over the rows)
    batch_size: int | None = None  # None: the whole data set in one batch (FATE's batch_size=-1)
    learning_rate: float | str = 0.15  # or "auto": from the columns' curvature, as in shaper.ml.logreg
    decay: float = 0.0
    decay_sqrt: bool = False
    l2: float = 0.0
    tol: float = 1e-4
    fit_intercept: bool = True
    standardize: bool = True
    frac_bits: int = 20
    key_bits: int = 2048
    backend: str = "shaper"
    checkpoint_dir: str | None = None
    resume: bool = False
    shuffle_seed: int | None = None  # reproducible batch order (tests); otherwise drawn by the guest

    def validate(self) -> None:
        self.require_choice("model", MODELS)
        self.require_choice("backend", BACKENDS)
        self.require_learning_rate(auto=True)
        if self.max_iter < 1:
            raise ConfigError(f"max_iter must be at least 1, got {self.max_iter}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be positive (or None for the whole data set), got {self.batch_size}")
        if self.decay < 0 or self.l2 < 0 or self.tol < 0:
            raise ConfigError("decay, l2 and tol must be non-negative")
        if not 8 <= self.frac_bits <= 30:
            raise ConfigError(f"frac_bits must be in [8, 30], got {self.frac_bits}")
        if self.key_bits < 1024 and self.backend == "phe":
            raise ConfigError("python-paillier keys below 1024 bits are not supported here")


class HeteroLinearModel:
    """One party's side of a coordinated vertical linear model (see the module docstring)."""

    def __init__(self, model: str = "logistic", **params: Any) -> None:
        self.params = HeteroParams(model=model, **params)
        self.coef_: np.ndarray | None = None        # this party's weights, in its original units
        self.intercept_: float | None = None        # its constant: z = sum over parties of x_p.coef_p + intercept_p
        self.history_: list[dict] = []              # one record per epoch
        self.iterations_: list[dict] = []           # one record per step: loss and the time split
        self.stats_: dict = {}
        self.role_: str | None = None
        self.resumed_from_: int | None = None
        self.learning_rate_: float | None = None    # the base step in force (learning_rate="auto": the one chosen)
        self.measures_ = measures(self.params.model, self.params.l2)  # what history_'s losses measure
        self._job: _Job | None = None

    def set_params(self, **params: Any) -> "HeteroLinearModel":
        self.params = replace(self.params, **params)
        return self

    def fit(self, session: Any, X: Any, y: Any = None, *, role: str, validation: tuple | None = None,
            progress: Callable[[dict], None] | None = None) -> "HeteroLinearModel":
        """Train. ``X``: this party's features (None at the arbiter); ``y``: the labels (guest
        only: 0/1 for logistic, real for linear); ``validation``: (X_val, y_val) at the guest,
        (X_val, None) at the hosts, monitored every epoch."""
        self._job = _Job(self, session, role, X, y, validation, progress)
        self._job.train()
        return self

    def decision_function(self, session: Any, X: Any = None) -> np.ndarray | None:
        """Scores z = x.w of new rows (all parties take part; the guest gets them, others None)."""
        if self._job is None:
            raise ConfigError("the model is not fitted")
        self._job.p.session = session
        return self._job.scores(X, tag="fl-predict")

    def predict(self, session: Any, X: Any = None) -> np.ndarray | None:
        """Probabilities (logistic) or predictions (linear) at the guest; None elsewhere."""
        z = self.decision_function(session, X)
        if z is None:
            return None
        return 1.0 / (1.0 + np.exp(-z)) if self.params.model == "logistic" else z


class _Job:
    """The training loop of one party."""

    def __init__(self, model: HeteroLinearModel, session: Any, role: str, X: Any, y: Any, validation: Any,
                 progress: Callable[[dict], None] | None) -> None:
        self.model, self.params, self.progress = model, model.params, progress or (lambda event: None)
        model.measures_ = measures(self.params.model, self.params.l2)
        if role not in proto.ROLES:
            raise ConfigError(f"role must be one of {proto.ROLES}, got {role!r}")
        self.role = role
        self.phases = Phases(session)
        self.backend = make_backend(self.params.backend, self.phases)
        self._check_inputs(X, y, validation)
        self.p = proto.Party(session, self.backend, role, "", [], "", frac_bits=self.params.frac_bits)

    # -- inputs ---------------------------------------------------------------------------------------
    def _check_inputs(self, X: Any, y: Any, validation: Any) -> None:
        params = self.params
        self.X = self.y = self.scaler = None
        self.val = None
        if self.role == "arbiter":
            if X is not None or y is not None:
                raise ConfigError("the arbiter holds no data: pass X=None")
            return
        if self.role == "host" and y is not None:
            raise ConfigError("a host has no labels: pass y=None")
        if self.role == "guest" and y is None:
            raise ConfigError("the guest holds the labels: pass y")
        X = self._dense(X, "X")
        if params.standardize:
            self.scaler = ColumnScaler.fit(X)
            X = self._dense(self.scaler.transform(X), "X")
        if self.role == "guest":
            y = np.asarray(y, dtype=float).ravel()
            if y.shape[0] != X.shape[0]:
                raise ConfigError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
            if not np.all(np.isfinite(y)):
                raise ConfigError("y holds NaN or infinite values")
            if params.model == "logistic" and not np.all((y == 0) | (y == 1)):
                raise ConfigError("logistic regression needs 0/1 labels")
            if params.fit_intercept:
                X = np.hstack([X, np.ones((X.shape[0], 1))])
            self.y = y
        self.X = X
        # the features at scale S as int64 (|x| < 2^62 checked), encoded once for every step, in row chunks
        self.X_int = np.empty(X.shape, dtype=np.int64)
        for sl in chunk_slices(X.shape[0], 1 << 14):
            self.X_int[sl] = proto.encode(X[sl], params.frac_bits).astype(np.int64)
        if validation is not None:
            Xv, yv = validation
            Xv = self._dense(Xv, "validation X")
            if self.scaler is not None:
                Xv = self._dense(self.scaler.transform(Xv), "validation X")
            if self.role == "guest" and params.fit_intercept:
                Xv = np.hstack([Xv, np.ones((Xv.shape[0], 1))])
            if Xv.shape[1] != X.shape[1]:
                raise ConfigError(f"validation X has {Xv.shape[1]} columns, training X {X.shape[1]}")
            self.val = (Xv, None if yv is None else np.asarray(yv, dtype=float).ravel())

    @staticmethod
    def _dense(X: Any, what: str) -> np.ndarray:
        if hasattr(X, "toarray"):
            X = X.toarray()
        arr = np.asarray(X, dtype=float)
        if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ConfigError(f"{what} must be a non-empty 2-D array, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ConfigError(f"{what} holds NaN or infinite values")
        return arr

    # -- set-up ----------------------------------------------------------------------------------------
    def _hello(self) -> dict:
        rows = None
        if self.X is not None:
            rows = [int(self.X.shape[0]), None, None if self.val is None else int(self.val[0].shape[0])]
        hello = {"shared": self.params.shared(), "rows": rows}
        if self.X is not None and self.params.learning_rate == "auto":
            # one scale statistic of this party's columns (as in shaper.ml.logreg.stability)
            hello["curvature"] = stability.curvature(sp.csr_matrix(self.X), np.ones(self.X.shape[1]))
        return hello

    def _auto_rate(self, hellos: dict) -> float:
        """``learning_rate="auto"``: the rule of :mod:`shaper.ml.logreg.stability`, 1 / (s * sum of
        the data parties' curvatures) with s the slope of the gradient in the score (1/4 for the
        Taylor log-loss, 1 for squared error); the same value at every party."""
        total = 0.0
        for name in self.p.data_parties:
            c = hellos[name].get("curvature")
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
                raise ConfigError(f"party {name!r} sent no valid curvature for learning_rate='auto' ({c!r})")
            total += float(c)
        return stability.auto_rate(SLOPE_BITS[self.params.model], total, 0.0)

    def _setup(self) -> None:
        p, params, s = self.p, self.params, self.p.session
        p.guest, p.hosts, p.arbiter, hellos = proto.assign_roles(s, self.role, self._hello())
        self.base_rate = self._auto_rate(hellos) if params.learning_rate == "auto" else float(params.learning_rate)
        self.model.learning_rate_ = self.base_rate
        vrows = {hellos[name]["rows"][2] for name in p.data_parties}
        if len(vrows) != 1:
            raise ConfigError("the guest and every host must pass validation rows (the same number), or none of them")
        self.val_rows = vrows.pop()
        self.rows = hellos[p.guest]["rows"][0]
        if self.X is not None and min(batch_sizes(self.rows, params.batch_size)) <= self.X.shape[1]:
            raise ConfigError(
                f"{s.name}: batches of {min(batch_sizes(self.rows, params.batch_size))} rows and {self.X.shape[1]} "
                "columns here: a party learns X^T E of each batch, which determines the batch's residuals (and at "
                "the first step its labels) when a batch has no more rows than the party has columns; use "
                "batch_size > the largest column count of any party")
        self.ckpt = Checkpointer(params.checkpoint_dir, s.name) if params.checkpoint_dir else None
        start, state = self._resume_point()
        if self.role == "arbiter":
            if state is not None:
                p.private_key = self.backend.private_from_bytes(state[1]["paillier"])
            else:
                p.public_key, p.private_key = self.backend.keygen(params.key_bits)
            p.public_key = self.backend.public_of(p.private_key)
        proto.share_public_key(p)
        self.start_epoch, self.steps = start, 0
        self.weights = np.zeros(self.X.shape[1]) if self.X is not None else None
        if state is not None:
            st = state[0]
            self.steps = int(st["steps"])
            self.model.history_ = list(st["history"])
            if self.weights is not None:
                w = np.asarray(st["weights"], dtype=float)
                if w.shape != self.weights.shape:
                    raise ConfigError(f"the checkpoint holds {w.size} weights, this data has {self.weights.size} columns")
                self.weights = w
            self.model.resumed_from_ = start
        # the batch order: a seed from the guest (or the parameters), the same at every data party
        if self.role == "guest":
            seed = params.shuffle_seed if params.shuffle_seed is not None else int.from_bytes(s.prg.random_bytes(8), "little")
            if state is not None and state[0].get("seed") is not None:
                seed = int(state[0]["seed"])  # a resumed job keeps its batch order
            for h in p.hosts:
                s.send(h, {"seed": seed}, "fl-seed")
            self.seed = seed
        elif self.role == "host":
            self.seed = int(s.recv_meta(p.guest, "fl-seed")["seed"])

    def _resume_point(self) -> tuple[int, Any]:
        """(first epoch to run, (state, blobs) of the checkpoint resumed or None), agreed by all."""
        s = self.p.session
        mine = self.ckpt.epochs() if (self.ckpt is not None and self.params.resume) else []
        s.broadcast(mine, "fl-resume")
        theirs = s.gather("fl-resume")
        common = set(mine)
        for name, eps in theirs.items():
            common &= set(int(e) for e in (eps or []))
        if not common:
            if self.ckpt is not None:
                self.ckpt.discard()
            return 0, None
        epoch = max(common)
        state, blobs, _, _ = self.ckpt.load(epoch)
        if state.get("digest") != self.params.digest():
            raise ConfigError(f"the checkpoint of epoch {epoch} in {self.ckpt.dir} was written with other settings")
        self.progress({"event": "resume", "epoch": epoch, "epochs": self.params.max_iter})
        return epoch, (state, blobs)

    def _save(self, epoch: int) -> None:
        if self.ckpt is None:
            return
        state = {"digest": self.params.digest(), "steps": self.steps, "history": self.model.history_,
                 "seed": getattr(self, "seed", None),
                 "weights": None if self.weights is None else self.weights.tolist()}
        blobs = {"paillier": self.backend.private_to_bytes(self.p.private_key)} if self.role == "arbiter" else {}
        self.ckpt.save(epoch, state, blobs, None, None)

    # -- training ---------------------------------------------------------------------------------------
    def _batches(self, epoch: int) -> list[np.ndarray]:
        bounds = np.cumsum([0, *batch_sizes(self.rows, self.params.batch_size)])
        if len(bounds) == 2:
            return [np.arange(self.rows)]
        order = epoch_order(self.seed, epoch, self.rows)  # public order, from the guest's seed
        return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def _learning_rate(self) -> float:
        params, t = self.params, self.steps
        factor = math.sqrt(1 + params.decay * t) if params.decay_sqrt else 1 + params.decay * t
        return self.base_rate / factor

    def train(self) -> None:
        meter = Meter(self.p.session)
        ops0 = counters.snapshot()
        self._setup()
        params = self.params
        epochs = params.max_iter
        batches_per_epoch = len(batch_sizes(self.rows, params.batch_size))
        previous = self.model.history_[-1]["train_loss"] if self.model.history_ else None
        first = self.model.history_[0]["train_loss"] if self.model.history_ else None
        converged = False
        self.phases.lap()
        for epoch in range(self.start_epoch, epochs):
            t_epoch = time.perf_counter()
            order = self._batches(epoch) if self.role != "arbiter" else [None] * batches_per_epoch
            losses, sizes = [], []
            for i, rows in enumerate(order):
                tag = f"fl-{epoch}-{i}"
                status = self._step(rows, tag, first, previous, last=(i == len(order) - 1), losses=losses, sizes=sizes,
                                    epoch=epoch)
                lap = self.phases.lap(CATEGORIES)
                self.model.iterations_.append({"epoch": epoch + 1, "iteration": i + 1, "loss": status["loss"], **lap})
                self.progress({"event": "iteration", "epoch": epoch + 1, "epochs": epochs, "iteration": i + 1,
                               "iterations": len(order), "loss": status["loss"], "times": lap})
                if status.get("error"):
                    raise DivergenceError(status["error"])
            epoch_loss = status["epoch_loss"]
            first = epoch_loss if first is None else first
            previous = epoch_loss
            record = {"epoch": epoch + 1, "train_loss": epoch_loss, "seconds": time.perf_counter() - t_epoch,
                      "learning_rate": self._learning_rate()}
            if self.val_rows:
                record.update(self._validate(f"fl-val-{epoch}"))
            self.model.history_.append(record)
            self._save(epoch + 1)
            self.progress({"event": "epoch", "epochs": epochs, **record, "measures": self.model.measures_})
            if status.get("stop"):
                converged = True
                break
        self._finish(meter, ops0, converged)

    def _step(self, rows: Any, tag: str, first: float | None, previous: float | None, *, last: bool,
              losses: list, sizes: list, epoch: int) -> dict:
        p, params = self.p, self.params
        f = params.frac_bits
        if self.role == "arbiter":
            d, r = proto.arbiter_step(p, tag)
            size = self._batch_size(epoch, len(sizes))
            scale = float(1 << (2 * f))
            if params.model == "logistic":
                loss = math.log(2) - 0.5 + d / (8 * size * scale) + r / scale
            else:
                loss = d / (2 * size * scale) + r / scale
            losses.append(loss)
            sizes.append(size)
            status: dict = {"loss": loss}
            if last:
                epoch_loss = float(np.average(losses, weights=sizes))
                status["epoch_loss"] = epoch_loss
                if not math.isfinite(epoch_loss) or (first is not None and epoch_loss > 10 * max(first, 1e-3)):
                    status["error"] = (f"training diverged at epoch {epoch + 1}: the loss went from {first:.4g} to "
                                       f"{epoch_loss:.4g}; lower the learning rate (now {self._learning_rate():.3g})")
                elif previous is not None and abs(previous - epoch_loss) < params.tol:
                    status["stop"] = True
            proto.announce(p, status, tag)
            self.steps += 1
            return status
        Xb = self.X[rows]
        U = proto.encode(Xb @ self.weights, f)
        w_reg = self.weights[:-1] if (self.role == "guest" and params.fit_intercept) else self.weights
        reg = int(round(float(params.l2) / 2 * float(w_reg @ w_reg) * (1 << (2 * f))))
        if self.role == "guest":
            yb = self.y[rows]
            T = proto.encode(2 * (2 * yb - 1) if params.model == "logistic" else yb, f)
            enc_e = proto.guest_forward(p, U, T, reg, tag)
        else:
            enc_e = proto.host_forward(p, U, reg, tag)
        G = proto.gradient(p, self.X_int[rows], enc_e, tag)
        c = 0.25 if params.model == "logistic" else 1.0
        grad = c * np.array([float(v) for v in G.tolist()]) / (len(rows) * float(1 << (2 * f)))
        grad += params.l2 * (np.concatenate([w_reg, [0.0]]) if w_reg is not self.weights else self.weights)
        self.weights = self.weights - self._learning_rate() * grad
        self.steps += 1
        status = proto.receive_status(p, tag)
        if not np.all(np.isfinite(self.weights)):
            raise DivergenceError(f"{p.me}: the weights became non-finite at epoch {epoch + 1}")
        return status

    def _batch_size(self, epoch: int, index: int) -> int:
        return batch_sizes(self.rows, self.params.batch_size)[index]

    # -- validation and scores -------------------------------------------------------------------------
    def scores(self, X: Any, tag: str) -> np.ndarray | None:
        p, f = self.p, self.params.frac_bits
        if self.role == "arbiter":
            proto.predict_arbiter(p, tag)
            return None
        if X is None:
            raise ConfigError(f"the {self.role} scores its own columns of the new rows: pass X")
        if X is not self.X:
            X = self._dense(X, "X")
            if self.scaler is not None:
                X = self._dense(self.scaler.transform(X), "X")
            if self.role == "guest" and self.params.fit_intercept and X.shape[1] == self.weights.size - 1:
                X = np.hstack([X, np.ones((X.shape[0], 1))])
        U = proto.encode(X @ self.weights, f)
        if self.role == "host":
            proto.predict_host(p, U, tag)
            return None
        Z = proto.predict_guest(p, U, tag)
        return np.array([float(v) for v in Z.tolist()]) / float(1 << f)

    def _validate(self, tag: str) -> dict:
        p = self.p
        if self.role == "arbiter":
            proto.predict_arbiter(p, tag)
            return {}
        Xv, yv = self.val
        U = proto.encode(Xv @ self.weights, p.frac_bits)
        if self.role == "host":
            proto.predict_host(p, U, tag)
            return {}
        z = np.array([float(v) for v in proto.predict_guest(p, U, tag).tolist()]) / float(1 << p.frac_bits)
        return validation_metrics(self.params.model, z, yv)

    def _finish(self, meter: Meter, ops0: dict, converged: bool) -> None:
        m = self.model
        m.role_ = self.role
        if self.weights is not None:
            w = self.weights
            intercept = 0.0
            if self.role == "guest" and self.params.fit_intercept:
                w, intercept = w[:-1], float(w[-1])
            if self.scaler is not None:
                w, shift = self.scaler.to_original(w)
                intercept += shift
            m.coef_ = w
            m.intercept_ = intercept  # a host's: the constant its standardisation adds to x.w
        steps = [it for it in m.iterations_]
        traffic = meter.read()
        m.stats_ = {"seconds": traffic.seconds, "epochs_run": len(m.history_), "converged": converged,
                    "steps": len(steps), "per_iteration": mean_split(steps and [
                        {k: it[k] for k in ("seconds", *CATEGORIES, "wait", "other")} for it in steps]),
                    "bytes_sent": traffic.bytes_sent, "bytes_received": traffic.bytes_received,
                    "crypto": counters.diff(ops0), "backend": self.params.backend, "key_bits": self.params.key_bits}


def measures(model: str, l2: float = 0.0) -> dict[str, str]:
    """What the losses of an epoch record measure: ``train_loss`` is the loss the job trains on
    (the Taylor expansion of the log-loss, or half the squared error, plus the L2 penalty), ``loss``
    the exact loss of the validation rows."""
    penalty = " + L2 penalty" if l2 else ""
    if model == "logistic":
        return {"train_loss": f"second-order Taylor log-loss{penalty}", "loss": "validation log-loss"}
    return {"train_loss": f"half squared error{penalty}", "loss": "validation half squared error"}


def batch_sizes(rows: int, batch_size: int | None) -> list[int]:
    """The sizes of an epoch's batches: ``batch_size`` each, the remainder merged into the last
    batch (a short last batch would tell each party more about its rows' residuals)."""
    if batch_size is None or batch_size >= rows:
        return [rows]
    full, rest = divmod(rows, batch_size)
    sizes = [batch_size] * full
    sizes[-1] += rest
    return sizes


def validation_metrics(model: str, z: np.ndarray, y: np.ndarray | None) -> dict:
    """Validation loss (exact log-loss / half MSE) and AUC (logistic) or R^2 (linear)."""
    if y is None:
        return {}
    if model == "logistic":
        from sklearn.metrics import roc_auc_score

        loss = float(np.mean(np.logaddexp(0, z) - y * z))
        auc = float(roc_auc_score(y, z)) if 0 < y.sum() < y.size else None
        return {"loss": loss, "auc": auc}
    resid = z - y
    var = float(np.var(y))
    return {"loss": float(0.5 * np.mean(resid ** 2)), "r2": 1 - float(np.mean(resid ** 2)) / var if var > 0 else None}
