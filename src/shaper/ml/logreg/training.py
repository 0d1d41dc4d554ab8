"""The estimator and its two-party training job: set-up, epochs, monitoring, checkpoint/resume,
progress events, opening the weights, and the prediction driver.

Both parties run the same code in lockstep; the layout (:mod:`.encrypted` or :mod:`.caesar`)
does the secure arithmetic of each step. Messages this module adds: the ``lr-hello`` check of
labels, row counts and parameters; ``lr-resume`` (checkpointed epochs); the shuffle-seed
agreement; ``lr-curvature`` (one scalar per party, :mod:`.stability`); and, with monitoring,
``lr-monitor`` (loss, AUC and stop flag, from the guest).

Every epoch ends with the monitored training loss opened to both parties; a run whose loss
diverges restarts with half the step under ``learning_rate="auto"`` or stops with
:class:`~shaper.errors.DivergenceError` (:mod:`.stability` has the rules).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
import warnings
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ...crypto import counters
from ...errors import ConfigError, DivergenceError, PackingError, PlaintextOverflowError
from ...net.phases import Meter
from ...protocols import Hybrid2PC
from ...protocols.triples import StoreOnly
from ..checkpoint import Checkpointer
from ..shuffle import epoch_order, epoch_prg
from . import stability
from .caesar import SharedWeights
from .encrypted import EncryptedWeights
from .features import ColumnScaler, Features, features_csr
from .layout import Layout
from .params import SIGMOIDS, LRParams


class VerticalLogisticRegression:
    """Two-party vertical logistic regression (see :mod:`shaper.ml.logreg` for the protocol)."""

    def __init__(self, **params: Any) -> None:
        self.params = LRParams(**params)
        self.history_: list[dict] = []
        self.coef_: np.ndarray | None = None
        self.intercept_: float | None = None
        self.stats_: dict = {}
        self.learning_rate_: float | None = None  # the step in force at the end of training
        self.precond_: np.ndarray | None = None  # this party's preconditioner D (stability)
        self.scaler_: ColumnScaler | None = None  # this party's standardisation, if any
        self.resumed_from_: int | None = None  # the checkpointed epoch the last fit resumed from
        self.measures_: dict[str, str] = measures(False)  # what "train_loss" and "loss" of history_ measure
        self._state: Layout | None = None

    def set_params(self, **params: Any) -> "VerticalLogisticRegression":
        self.params = replace(self.params, **params)
        return self

    # -- training -------------------------------------------------------------------------------
    def fit(self, session: Any, X: Any, y: Any = None, *, validation: tuple | None = None,
            progress: Callable[[dict], None] | None = None) -> "VerticalLogisticRegression":
        """Train. ``X``: this party's features (rows aligned with the peer's); ``y``: labels (0/1)
        at the guest, ``None`` at the host. ``validation``: (X_val, y_val or None) for
        monitoring. ``progress``: called with an event dict per iteration and per epoch."""
        job = _Training(self, session, X, y, validation, progress)
        job.run()
        return self

    # -- prediction -------------------------------------------------------------------------------
    def decision_function(self, session: Any, X: Any, *, to: str = "guest") -> np.ndarray | None:
        """Logits for new aligned rows, revealed to ``to`` ("guest", "host" or "both")."""
        if self._state is None:
            raise ConfigError("the model is not fitted")
        self._state.ctx.session = session  # predictions may run in a later session with the same peer
        if self.scaler_ is not None:
            X = self.scaler_.transform(X)
        return self._state.logits(session, Features(X, self._state.fx, self.params.fit_intercept and
                                                    self._state.is_guest), to)

    def predict_proba(self, session: Any, X: Any, *, to: str = "guest") -> np.ndarray | None:
        """Probabilities of class 1 for new aligned rows (at ``to``; ``None`` elsewhere)."""
        z = self.decision_function(session, X, to=to)
        return None if z is None else 1.0 / (1.0 + np.exp(-z))

    def predict(self, session: Any, X: Any, *, to: str = "guest", threshold: float = 0.5) -> np.ndarray | None:
        p = self.predict_proba(session, X, to=to)
        return None if p is None else (p >= threshold).astype(np.int64)

    def score(self, session: Any, X: Any, y: Any = None) -> float | None:
        """Accuracy at the guest (which holds ``y``); ``None`` at the host."""
        pred = self.predict(session, X)
        return None if pred is None else float(np.mean(pred == np.asarray(y)))


def fit(session: Any, X: Any, y: Any = None, **params: Any) -> VerticalLogisticRegression:
    """Functional form: ``shaper.ml.logreg.fit(session, X_local, y_or_None, epochs=3)``."""
    validation = params.pop("validation", None)
    progress = params.pop("progress", None)
    return VerticalLogisticRegression(**params).fit(session, X, y, validation=validation, progress=progress)


class _Training:
    """One call of :meth:`VerticalLogisticRegression.fit`; fills in the model's fitted attributes."""

    def __init__(self, model: VerticalLogisticRegression, session: Any, X: Any, y: Any,
                 validation: tuple | None, progress: Callable[[dict], None] | None) -> None:
        self.model, self.p, self.session = model, model.params, session
        self.progress = progress or (lambda event: None)
        if session.n != 2:
            raise ConfigError(f"vertical logistic regression runs between exactly two parties, not {session.n}")
        self.me, self.peer = session.index, session.peers[0]
        y_arr = None if y is None else np.asarray(y).astype(np.int64).ravel()
        csr = features_csr(X)
        _check_labels(y_arr, csr.shape[0])
        info = {"labels": y_arr is not None, "rows": int(csr.shape[0]), "features": int(csr.shape[1]),
                "digest": self.p.digest()}
        self._check_peer(info, session.exchange(self.peer, info, "lr-hello"))
        self.is_guest = y_arr is not None
        self.guest = self.me if self.is_guest else 1 - self.me
        self.host = 1 - self.guest
        self.y = y_arr
        self.n = info["rows"]
        self.scaler = ColumnScaler.fit(X) if self.p.standardize else None
        if self.scaler is not None and not self.scaler.mean.any() and np.all(self.scaler.scale == 1.0):
            self.scaler = None  # only 0/1 columns: nothing to scale
        self.features = Features(X if self.scaler is None else self.scaler.transform(X), self.p.feature_frac_bits,
                                 self.p.fit_intercept and self.is_guest, training=True)
        self.validation = validation
        self.precond, self.auto_rate = self._step_size()
        self.learning_rate = self.auto_rate if self.p.learning_rate == "auto" else float(self.p.learning_rate)
        model.stats_ = {}
        model.scaler_, model.precond_ = self.scaler, self.precond

    def _step_size(self) -> tuple[np.ndarray, float]:
        """This party's preconditioner and the automatic learning rate; refuses a given rate that
        diverges for certain (both parties reach the same verdict from the same two scalars)."""
        real = self.features.X.astype(np.float64) / 2.0 ** self.features.fx
        if self.p.precondition:
            precond = stability.preconditioner(real, self.p.batch_size)
        else:
            precond = np.ones(real.shape[1])
        mine = stability.curvature(real, precond)
        theirs = float(self.session.exchange(self.peer, {"curvature": mine}, "lr-curvature")["curvature"])
        slope = SIGMOIDS[self.p.sigmoid]
        auto = stability.auto_rate(slope, mine, theirs)
        if self.p.learning_rate != "auto":
            stability.check_rate(float(self.p.learning_rate), slope, mine, theirs, auto)
        return precond, auto

    def _check_peer(self, info: dict, other: dict) -> None:
        """Refuse to train unless the two parties' hello messages fit together."""
        if info["labels"] == other["labels"]:
            raise ConfigError("exactly one party (the guest) must hold the labels; "
                              f"{'both' if info['labels'] else 'neither'} do")
        if info["rows"] != other["rows"]:
            raise ConfigError(f"row counts differ: {info['rows']} here, {other['rows']} at {self.peer!r}")
        if info["digest"] != other["digest"]:
            raise ConfigError("the two parties use different training parameters")
        for who, d in (("this party", info), (self.peer, other)):
            if d["rows"] < d["features"]:
                raise ConfigError(
                    f"refusing to train: {who} has {d['features']} features for {d['rows']} rows; with fewer "
                    "rows than features the opened weights can reveal the labels")

    def run(self) -> None:
        meter = Meter(self.session)
        started = meter.started
        ops0 = counters.snapshot()
        rounds0 = self.session.stats.rounds
        ckpt = Checkpointer(self.p.checkpoint_dir, self.session.name) if self.p.checkpoint_dir else None
        start_epoch, loaded = self._resume_point(ckpt)
        self.ctx, self.state, self.history = self._start() if loaded is None else self._restore(*loaded)
        self.model.shuffle_seed_ = self.state.shuffle
        self.model.resumed_from_ = start_epoch if loaded is not None else None
        if loaded is not None:
            self.progress({"event": "resume", "epoch": start_epoch, "epochs": self.p.epochs,
                           "learning_rate": self.learning_rate})
        while True:
            self.model._state, self.model.history_ = self.state, self.history
            self.model.learning_rate_ = self.learning_rate
            try:
                stopped_early = self._epochs(start_epoch, ckpt, started)
                break
            except _BackOff:
                self.learning_rate /= 2
                # fresh masks for the new attempt (a mask must never hide two different values)
                masks = hashlib.sha256(self.state.mask_seed + b"backoff").digest()
                self.state = _new_layout(self, self.ctx, masks, self.state.shuffle)
                self.state.init_weights()
                self.history, start_epoch = [], 0
                if ckpt is not None:
                    ckpt.discard()  # the diverged attempt's epochs must not be resumed
        self._check_progress()
        if self.p.open_weights:
            self._open_weights()
        self.model.stats_ = self._stats(meter, ops0, rounds0, stopped_early)
        self.progress({"event": "done", **self.model.stats_})

    # -- set-up -------------------------------------------------------------------------------------
    def _start(self) -> tuple[Hybrid2PC, Layout, list[dict]]:
        """Fresh keys, mask and shuffle seeds, and zero weights. The mask seed always comes from
        the operating system's CSPRNG: a fixed ``seed`` only fixes public things (the batch
        order), never a mask, so a reproducible run does not make the masks predictable."""
        ctx = Hybrid2PC.setup(self.session, key_bits=self.p.key_bits, scheme=self.p.scheme,
                              frac_bits=self.p.frac_bits, triple_source=StoreOnly())
        mask_seed = os.urandom(32)
        if self.p.seed is None:
            shuffle = self.session.shared_prg([0, 1], tag="lr-shuffle").random_bytes(32)
        else:
            shuffle = self._agree(self.p.seed)
        state = _new_layout(self, ctx, mask_seed, shuffle)
        state.init_weights()
        return ctx, state, []

    def _restore(self, state_json: dict, blobs: dict[str, bytes], private_key: Any, peer_key: Any
                 ) -> tuple[Hybrid2PC, Layout, list[dict]]:
        """Keys, seeds, weights and history from a checkpoint."""
        ctx = Hybrid2PC(self.session, private_key, peer_key, frac_bits=self.p.frac_bits, triple_source=StoreOnly())
        self.learning_rate = float(state_json["learning_rate"])
        state = _new_layout(self, ctx, bytes.fromhex(state_json["mask_seed"]), bytes.fromhex(state_json["shuffle"]))
        state.restore(blobs)
        return ctx, state, state_json["history"]

    def _agree(self, seed: bytes) -> bytes:
        """Shuffle seed from both parties' fixed seeds (reproducible runs)."""
        theirs = self.session.exchange(self.peer, hashlib.sha256(seed + b"shuffle").digest(), "lr-shuffle-seed")
        mine = hashlib.sha256(seed + b"shuffle").digest()
        return bytes(a ^ b for a, b in zip(mine, theirs))

    def _resume_point(self, ckpt: Checkpointer | None) -> tuple[int, Any]:
        if ckpt is None or not self.p.resume:
            return 0, None
        mine = ckpt.epochs()
        theirs = self.session.exchange(self.peer, mine, "lr-resume")
        common = sorted(set(mine) & set(theirs))
        if not mine and not theirs:
            return 0, None
        if not common:
            raise ConfigError(f"cannot resume: checkpoints here are for epochs {mine}, at {self.peer!r} for {theirs}")
        epoch = common[-1]
        loaded = ckpt.load(epoch)
        if loaded[0]["digest"] != self.p.digest() or loaded[0]["layout"] != self.p.layout:
            raise ConfigError("the checkpoint was written with different training parameters")
        return epoch, loaded

    # -- epochs -------------------------------------------------------------------------------------
    def _epochs(self, start_epoch: int, ckpt: Checkpointer | None, started: float) -> bool:
        """Train, monitor and checkpoint the remaining epochs; True when early stopping ended them."""
        monitor_set = self._monitor_set()
        self.model.measures_ = measures(monitor_set is not None and monitor_set[0] is not self.features)
        patience_left = self.p.early_stopping
        best = min((h["loss"] for h in self.history if h.get("loss") is not None), default=math.inf)
        for epoch in range(start_epoch, self.p.epochs):
            t_epoch = time.perf_counter()
            self._train_epoch(epoch, started)
            train_loss = self.state.epoch_loss()
            self._check_divergence(epoch, train_loss)
            record = {"epoch": epoch + 1, "seconds": round(time.perf_counter() - t_epoch, 3),
                      "train_loss": train_loss, "learning_rate": self.learning_rate}
            stop = False
            if monitor_set is not None:
                self.ctx.prg = epoch_prg(self.state.mask_seed, "monitor", epoch)
                loss, auc, stop = self._monitor(monitor_set, best, patience_left)
                record.update(loss=loss, auc=auc)
                if loss is not None and loss < best - self.p.tol:
                    best, patience_left = loss, self.p.early_stopping
                elif self.p.early_stopping is not None:
                    patience_left = (patience_left or 0) - 1
            self.history.append(record)
            self.progress({"event": "epoch", **record, "epochs": self.p.epochs, "measures": self.model.measures_})
            if ckpt is not None:
                self._save(ckpt, epoch + 1)
            if stop:
                return True
        return False

    def _check_divergence(self, epoch: int, loss: float) -> None:
        """Back off (learning_rate="auto") or stop when the epoch's training loss diverged."""
        earlier = [h["train_loss"] for h in self.history if h.get("train_loss") is not None]
        reason = stability.divergence(loss, earlier)
        if reason is None:
            return
        backoffs = round(math.log2(self.auto_rate / self.learning_rate)) if self.p.learning_rate == "auto" else None
        if backoffs is not None and backoffs < stability.BACKOFFS:
            self.progress({"event": "backoff", "epoch": epoch + 1, "reason": reason,
                           "learning_rate": self.learning_rate / 2})
            raise _BackOff()
        if backoffs is not None:
            raise DivergenceError(f"training diverged in epoch {epoch + 1} even after halving the automatic step "
                                  f"{stability.BACKOFFS} times (now {self.learning_rate:.3g}): {reason}")
        raise DivergenceError(f"training diverged in epoch {epoch + 1}: {reason}; "
                              + stability.suggestion(self.learning_rate, self.auto_rate))

    def _check_progress(self) -> None:
        """Warn (both parties know the loss) when training ended no better than all-zero weights."""
        last = self.history[-1].get("train_loss") if self.history else None
        if last is not None and last >= stability.NO_PROGRESS_LOSS:
            message = (f"training made no progress: the last epoch's training loss {last:.4f} is not below the "
                       f"{stability.ZERO_MODEL_LOSS} of all-zero weights (learning rate {self.learning_rate:.3g}; "
                       f"'auto' gives {self.auto_rate:.3g} here; with standardize=False, badly scaled columns slow "
                       "training down)")
            warnings.warn(message, RuntimeWarning, stacklevel=4)
            self.progress({"event": "warning", "message": message})

    def _train_epoch(self, epoch: int, started: float) -> None:
        """One pass over the rows in the epoch's agreed order, a progress event per batch."""
        self.ctx.prg = epoch_prg(self.state.mask_seed, "masks", epoch)
        order = epoch_order(self.state.shuffle, epoch, self.n)
        batches = [order[i:i + self.p.batch_size] for i in range(0, self.n, self.p.batch_size)]
        for it, idx in enumerate(batches):
            rows = np.sort(idx)
            sample = np.searchsorted(rows, np.sort(idx[:stability.LOSS_ROWS]))
            try:
                self.state.step(rows, sample, epoch * len(batches) + it)
            except (PackingError, PlaintextOverflowError) as exc:
                raise DivergenceError(
                    f"training diverged in epoch {epoch + 1}, iteration {it + 1}: a value left its fixed-point "
                    f"range ({exc}); the weights outgrew 2^{self.p.weight_bits}. "
                    + stability.suggestion(self.learning_rate, self.auto_rate)) from exc
            self.progress({"event": "iteration", "epoch": epoch + 1, "epochs": self.p.epochs,
                           "iteration": it + 1, "iterations": len(batches),
                           "seconds": round(time.perf_counter() - started, 3),
                           "bytes_sent": self.session.stats.bytes_sent})

    def _save(self, ckpt: Checkpointer, epochs_done: int) -> None:
        state = self.state
        ckpt.save(epochs_done, {"digest": self.p.digest(), "history": self.history,
                                "mask_seed": state.mask_seed.hex(), "shuffle": state.shuffle.hex(),
                                "layout": self.p.layout, "learning_rate": self.learning_rate}, state.blobs(), self.ctx.private_key, self.ctx.peer_key)

    # -- monitoring -----------------------------------------------------------------------------------
    def _monitor_set(self) -> tuple | None:
        mode = self.p.monitor
        if mode == "auto":
            mode = "validation" if self.validation is not None else None
        if mode is None:
            if self.p.early_stopping is not None:
                raise ConfigError("early stopping needs monitoring (pass validation=..., or monitor='train')")
            return None
        if mode == "validation":
            if self.validation is None:
                raise ConfigError("monitor='validation' needs validation=(X_val, y_val)")
            Xv, yv = self.validation
            if self.scaler is not None:
                Xv = self.scaler.transform(Xv)
            feats = Features(Xv, self.features.fx, self.p.fit_intercept and self.is_guest)
            return feats, (None if yv is None else np.asarray(yv).astype(np.int64).ravel())
        return self.features, self.y

    def _monitor(self, monitor_set: tuple, best: float, patience: int | None
                 ) -> tuple[float | None, float | None, bool]:
        """Loss and AUC of the monitored rows, computed at the guest and sent to the host."""
        feats, labels = monitor_set
        z = self.state.logits(self.session, feats, "guest")
        if self.is_guest:
            from sklearn.metrics import roc_auc_score

            prob = np.clip(1.0 / (1.0 + np.exp(-z)), 1e-12, 1 - 1e-12)
            loss = float(-np.mean(labels * np.log(prob) + (1 - labels) * np.log(1 - prob)))
            auc = float(roc_auc_score(labels, z)) if len(set(labels.tolist())) == 2 else None
            improved = loss < best - self.p.tol
            stop = self.p.early_stopping is not None and not improved and (patience or 0) <= 1
            self.session.send(self.peer, {"loss": loss, "auc": auc, "stop": stop}, "lr-monitor")
        else:
            msg = self.session.recv_meta(self.peer, "lr-monitor")
            loss, auc, stop = msg["loss"], msg["auc"], bool(msg["stop"])
        return loss, auc, stop

    # -- results --------------------------------------------------------------------------------------
    def _open_weights(self) -> None:
        self.ctx.prg = epoch_prg(self.state.mask_seed, "open", 0)
        coef = self.state.open_weights()
        if self.is_guest and self.p.fit_intercept:
            coef, intercept = coef[:-1], float(coef[-1])
        else:
            intercept = None
        if self.scaler is not None:  # back to this party's original units
            coef, constant = self.scaler.to_original(coef)
            intercept = constant + (intercept or 0.0)
        self.model.coef_, self.model.intercept_ = coef, intercept

    def _stats(self, meter: Meter, ops0: dict, rounds0: int, stopped_early: bool) -> dict:
        """Time (split into computation and waiting for the peer), traffic and crypto counts of the run."""
        run = meter.read()
        return {
            "seconds": round(run.seconds, 3), "communication_seconds": round(run.wait_seconds, 3),
            "compute_seconds": round(run.seconds - run.wait_seconds, 3),
            "bytes_sent": run.bytes_sent, "bytes_received": run.bytes_received,
            "rounds": self.session.stats.rounds - rounds0, "crypto": counters.diff(ops0),
            "epochs_run": len(self.history), "stopped_early": stopped_early,
        }


def measures(validation: bool) -> dict[str, str]:
    """What the losses of an epoch record measure: ``train_loss`` is the quantity SGD minimises
    and the divergence rules watch (:mod:`.stability`), the mean squared error of the linear
    sigmoid on a sample of the epoch's rows; ``loss`` the exact log-loss of the monitored rows."""
    return {"train_loss": "squared error of the linear sigmoid, sampled rows",
            "loss": "validation log-loss" if validation else "training log-loss"}


class _BackOff(Exception):
    """The automatic step diverged: restart from zero weights with half of it."""


def _check_labels(y: np.ndarray | None, rows: int) -> None:
    if y is not None:
        if set(np.unique(y).tolist()) - {0, 1}:
            raise ConfigError("labels must be 0/1")
        if len(y) != rows:
            raise ConfigError(f"{len(y)} labels for {rows} rows")


def _new_layout(job: _Training, ctx: Hybrid2PC, mask_seed: bytes, shuffle: bytes) -> Layout:
    cls = EncryptedWeights if job.p.layout == "encrypted" else SharedWeights
    return cls(job, ctx, mask_seed, shuffle)
