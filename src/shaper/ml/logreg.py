"""Vertical sparse logistic regression between two parties (CAESAR, SHAPER's workload).

Two organisations hold different features of the same rows (aligned ids); the **guest** also holds
the labels, the **host** does not. They train a logistic regression without revealing features,
labels, or intermediate values, and each learns only its own block of weights (or keeps the model
secret for secure prediction).

    def job(session, X, y=None):                  # the same program at both parties
        model = VerticalLogisticRegression(epochs=10, batch_size=64, learning_rate=0.5)
        model.fit(session, X, y)                   # y only at the guest
        return model.predict_proba(session, X_test)   # probabilities at the guest

Two protocol layouts (``layout=``):

* ``"encrypted"`` (default; SecretFlow HESS-LR's layout, ``research/caesar.md`` §2.6): each
  party's weights stay *encrypted under the peer's key at their owner*. Per iteration both
  parties compute X_t [W]_peer over the non-zeros, convert it to integer shares with a packed H2S
  with the truncation fused in (exact to one unit), form the error e = sigmoid(z) - y in shares,
  send their share of the scaled error encrypted under their own key, and update their encrypted
  weights with X_t^T [e]. Only 2m values cross per iteration (m = batch); no O(features) traffic.
  The learning rate and 1/m are folded into the weights' scale 2^S_w, with S_w = f + f_x + k + 8
  where 2^-k is eta/m rounded down to a power of two and the remaining factor is applied as an
  exact 8-bit integer. L2 is not available (it would need non-integer factors on ciphertexts).
* ``"caesar"`` (CAESAR as published, the baseline SHAPER measures): weights are secret-shared
  over Z_2^64; every iteration runs two secure sparse mat-vecs forward and two backward, so the
  party without the matrix re-encrypts its share of the weights (O(features)) each time.
  Truncation is local and probabilistic (see :mod:`shaper.protocols.ring`); L2 is supported.

The sigmoid is linear: ``"taylor1"`` 0.5 + z/4 or ``"minimax1"`` 0.5 + z/8 (no triples needed).

What is revealed: the row count, each party's feature count, the batch schedule and the number
of epochs; with monitoring, the guest learns the logits of the monitored rows after each epoch
(it computes loss and AUC from them) and tells the host the two scalars; at the end each party
learns its own weights (``open_weights``). Training is refused when a party has fewer rows than
features, where opened weights could reveal labels. Semi-honest, two parties, no third party.

Checkpoints (``checkpoint_dir``) are written after every epoch; ``resume=True`` continues from the
newest epoch both parties have and, because per-epoch masks and shuffles derive from seeds kept
in the checkpoint, finishes with exactly the model an uninterrupted run would have produced.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from ..arrays import ints_from_bytes, ints_to_bytes, object_array
from ..crypto import counters, encoding
from ..crypto.ahe import EncryptedArray, vecmat
from ..crypto.prg import Prg
from ..errors import ConfigError
from ..protocols import Hybrid2PC
from ..protocols.additive import IntegerShares, SharedArray
from ..protocols.hybrid.conversions import encrypt_share, h2s, share_values
from ..protocols.hybrid.sparse import sparse_matvec
from ..protocols.triples import StoreOnly
from .checkpoint import Checkpointer

LAYOUTS = ("encrypted", "caesar")
SIGMOIDS = {"taylor1": 2, "minimax1": 3}  # slope 2^-s
ETA_BITS = 8
OUT_BITS = 24


@dataclass(frozen=True)
class LRParams:
    epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 0.5
    l2: float = 0.0
    layout: str = "encrypted"
    sigmoid: str = "taylor1"
    frac_bits: int = 16
    feature_frac_bits: int | None = None
    weight_bits: int = 10
    key_bits: int = 2048
    scheme: str = "paillier"
    fit_intercept: bool = True
    monitor: str | None = "auto"
    early_stopping: int | None = None
    tol: float = 1e-4
    checkpoint_dir: str | None = None
    resume: bool = False
    open_weights: bool = True
    pack: bool = True
    seed: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.sigmoid not in SIGMOIDS:
            raise ConfigError(f"sigmoid must be one of {tuple(SIGMOIDS)}, got {self.sigmoid!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("epochs and batch_size must be positive")
        if not self.learning_rate > 0:
            raise ConfigError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.l2 < 0:
            raise ConfigError(f"l2 must be >= 0, got {self.l2}")
        if self.l2 and self.layout == "encrypted":
            raise ConfigError("L2 needs non-integer factors on encrypted weights: use layout='caesar' for l2 > 0")
        if self.monitor not in (None, "auto", "train", "validation"):
            raise ConfigError(f"monitor must be None, 'auto', 'train' or 'validation', got {self.monitor!r}")
        if self.early_stopping is not None and self.early_stopping < 1:
            raise ConfigError("early_stopping is a patience in epochs (>= 1)")
        if self.seed is not None and len(self.seed) != 32:
            raise ConfigError("seed must be 32 bytes")

    def digest(self) -> str:
        fields = asdict(self)
        for volatile in ("epochs", "checkpoint_dir", "resume", "seed", "early_stopping", "monitor", "tol"):
            fields.pop(volatile)
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def _derive(seed: bytes, label: str, epoch: int) -> Prg:
    return Prg(seed=hashlib.sha256(seed + label.encode() + epoch.to_bytes(8, "little")).digest())


def epoch_order(shuffle_seed: bytes, epoch: int, rows: int) -> np.ndarray:
    """The row order of an epoch (both parties derive it from their agreed shuffle seed)."""
    return np.argsort(_derive(shuffle_seed, "shuffle", epoch).uint64(rows), kind="stable")


def eta_factor(learning_rate: float, batch_size: int, batch: int) -> float:
    """The step eta/batch exactly as the protocols apply it (an integer at scale 2^(k + 8))."""
    k = math.floor(-math.log2(learning_rate / batch_size))
    return max(1, round(learning_rate / batch * 2 ** (k + ETA_BITS))) / 2 ** (k + ETA_BITS)


def reference_sgd(X_host: Any, X_guest: Any, y: Any, *, shuffle_seed: bytes, epochs: int = 10,
                  batch_size: int = 64, learning_rate: float = 0.5, l2: float = 0.0, sigmoid: str = "taylor1",
                  fit_intercept: bool = True, start: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The same mini-batch training in plain floating point: the oracle for the protocols.

    Same batch order, same linear sigmoid, same quantised step; returns (host weights, guest
    weights with the intercept last)."""
    Xh, Xg = _as_csr(X_host), _as_csr(X_guest)
    if fit_intercept:
        Xg = sp.hstack([Xg, sp.csr_matrix(np.ones((Xg.shape[0], 1)))], format="csr")
    y = np.asarray(y, dtype=np.float64)
    wh = np.zeros(Xh.shape[1]) if start is None else start[0].copy()
    wg = np.zeros(Xg.shape[1]) if start is None else start[1].copy()
    slope = 2.0 ** -SIGMOIDS[sigmoid]
    n = Xh.shape[0]
    for epoch in range(epochs):
        order = epoch_order(shuffle_seed, epoch, n)
        for i in range(0, n, batch_size):
            idx = np.sort(order[i:i + batch_size])
            z = Xh[idx] @ wh + Xg[idx] @ wg
            err = 0.5 + slope * z - y[idx]
            eta = eta_factor(learning_rate, batch_size, len(idx))
            decay = 1.0 - learning_rate * l2
            wh = decay * wh - eta * (Xh[idx].T @ err)
            wg = decay * wg - eta * (Xg[idx].T @ err)
    return wh, wg


def _as_csr(X: Any) -> sp.csr_matrix:
    if sp.issparse(X):
        out = sp.csr_matrix(X, dtype=np.float64)
    else:
        arr = np.asarray(X, dtype=np.float64)
        if arr.ndim != 2:
            raise ConfigError(f"features must be a 2-D array or sparse matrix, got shape {arr.shape}")
        out = sp.csr_matrix(arr)
    if out.nnz and not np.isfinite(out.data).all():
        raise ConfigError("features contain NaN or infinity")
    return out


class _Features:
    """One party's features as integers X_int = round(X * 2^fx), with its scales."""

    def __init__(self, X: Any, fx: int | None, intercept: bool) -> None:
        csr = _as_csr(X)
        if intercept:
            csr = sp.hstack([csr, sp.csr_matrix(np.ones((csr.shape[0], 1)))], format="csr")
        if fx is None:
            fx = 0 if (csr.nnz == 0 or np.all(csr.data == np.round(csr.data))) else 10
        self.fx = fx
        scaled = np.rint(csr.data * (1 << fx))
        if scaled.size and np.abs(scaled).max() >= 2**62:
            raise ConfigError(f"features too large for 2^{fx} scaling")
        self.X = sp.csr_matrix((scaled.astype(np.int64), csr.indices, csr.indptr), shape=csr.shape)
        self.X.eliminate_zeros()
        abs_rows = np.abs(self.X).sum(axis=1)
        self.row_l1 = int(abs_rows.max()) if self.X.shape[0] else 0

    def rows(self, idx: np.ndarray) -> sp.csr_matrix:
        return self.X[idx]


class VerticalLogisticRegression:
    """Two-party vertical logistic regression (see the module docstring for the protocol)."""

    def __init__(self, **params: Any) -> None:
        self.params = LRParams(**params)
        self.history_: list[dict] = []
        self.coef_: np.ndarray | None = None
        self.intercept_: float | None = None
        self.stats_: dict = {}
        self._state: Any = None

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
        return self._state.logits(session, _Features(X, self._state.fx, self.params.fit_intercept and
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


class _Training:
    def __init__(self, model: VerticalLogisticRegression, session: Any, X: Any, y: Any,
                 validation: tuple | None, progress: Callable[[dict], None] | None) -> None:
        self.model, self.p, self.session = model, model.params, session
        self.progress = progress or (lambda event: None)
        if session.n != 2:
            raise ConfigError(f"vertical logistic regression runs between exactly two parties, not {session.n}")
        self.me, self.peer = session.index, session.peers[0]
        y_arr = None if y is None else np.asarray(y).astype(np.int64).ravel()
        csr = _as_csr(X)
        if y_arr is not None:
            if set(np.unique(y_arr).tolist()) - {0, 1}:
                raise ConfigError("labels must be 0/1")
            if len(y_arr) != csr.shape[0]:
                raise ConfigError(f"{len(y_arr)} labels for {csr.shape[0]} rows")
        info = {"labels": y_arr is not None, "rows": int(csr.shape[0]), "features": int(csr.shape[1]),
                "digest": self.p.digest()}
        other = session.exchange(self.peer, info, "lr-hello")
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
        self.is_guest = y_arr is not None
        self.guest = self.me if self.is_guest else 1 - self.me
        self.host = 1 - self.guest
        self.y = y_arr
        self.n = info["rows"]
        self.features = _Features(X, self.p.feature_frac_bits, self.p.fit_intercept and self.is_guest)
        self.validation = validation
        model.stats_ = {}

    # -- set-up -------------------------------------------------------------------------------------
    def run(self) -> None:
        started = time.perf_counter()
        ops0 = counters.snapshot()
        traffic0 = self.session.stats.as_dict()
        ckpt = Checkpointer(self.p.checkpoint_dir, self.session.name) if self.p.checkpoint_dir else None
        start_epoch, loaded = self._resume_point(ckpt)
        if loaded is None:
            ctx = Hybrid2PC.setup(self.session, key_bits=self.p.key_bits, scheme=self.p.scheme,
                                  frac_bits=self.p.frac_bits, triple_source=StoreOnly())
            mask_seed = self.p.seed or os.urandom(32)
            shuffle_seed = self.session.shared_prg(
                [0, 1], tag="lr-shuffle") if self.p.seed is None else None
            shuffle = shuffle_seed.random_bytes(32) if shuffle_seed is not None else self._agree(self.p.seed)
            state = _make_state(self, ctx, mask_seed, shuffle)
            state.init_weights()
            history: list[dict] = []
        else:
            state_json, blobs, private_key, peer_key = loaded
            ctx = Hybrid2PC(self.session, private_key, peer_key, frac_bits=self.p.frac_bits, triple_source=StoreOnly())
            state = _make_state(self, ctx, bytes.fromhex(state_json["mask_seed"]), bytes.fromhex(state_json["shuffle"]))
            state.restore(blobs)
            history = state_json["history"]
        self.model._state = state
        self.model.history_ = history
        self.model.shuffle_seed_ = state.shuffle
        monitor_set = self._monitor_set()
        patience_left = self.p.early_stopping
        best = min((h["loss"] for h in history if h.get("loss") is not None), default=math.inf)
        stopped_early = False
        for epoch in range(start_epoch, self.p.epochs):
            t_epoch = time.perf_counter()
            ctx.prg = _derive(state.mask_seed, "masks", epoch)
            order = epoch_order(state.shuffle, epoch, self.n)
            batches = [order[i:i + self.p.batch_size] for i in range(0, self.n, self.p.batch_size)]
            for it, idx in enumerate(batches):
                state.step(np.sort(idx))
                self.progress({"event": "iteration", "epoch": epoch + 1, "epochs": self.p.epochs,
                               "iteration": it + 1, "iterations": len(batches),
                               "seconds": round(time.perf_counter() - started, 3),
                               "bytes_sent": self.session.stats.bytes_sent})
            record = {"epoch": epoch + 1, "seconds": round(time.perf_counter() - t_epoch, 3)}
            stop = False
            if monitor_set is not None:
                ctx.prg = _derive(state.mask_seed, "monitor", epoch)
                loss, auc, stop_flag = self._monitor(state, monitor_set, best, patience_left)
                record.update(loss=loss, auc=auc)
                if loss is not None and loss < best - self.p.tol:
                    best, patience_left = loss, self.p.early_stopping
                elif self.p.early_stopping is not None:
                    patience_left = (patience_left or 0) - 1
                stop = stop_flag
            history.append(record)
            self.progress({"event": "epoch", **record, "epochs": self.p.epochs})
            if ckpt is not None:
                ckpt.save(epoch + 1, {"digest": self.p.digest(), "history": history,
                                      "mask_seed": state.mask_seed.hex(), "shuffle": state.shuffle.hex(),
                                      "layout": self.p.layout}, state.blobs(), ctx.private_key, ctx.peer_key)
            if stop:
                stopped_early = True
                break
        if self.p.open_weights:
            ctx.prg = _derive(state.mask_seed, "open", 0)
            coef = state.open_weights()
            if self.is_guest and self.p.fit_intercept:
                self.model.coef_, self.model.intercept_ = coef[:-1], float(coef[-1])
            else:
                self.model.coef_, self.model.intercept_ = coef, None
        traffic = self.session.stats.as_dict()
        wall = time.perf_counter() - started
        comm = traffic["recv_wait_seconds"] - traffic0["recv_wait_seconds"]
        self.model.stats_ = {
            "seconds": round(wall, 3), "communication_seconds": round(comm, 3),
            "compute_seconds": round(wall - comm, 3),
            "bytes_sent": traffic["bytes_sent"] - traffic0["bytes_sent"],
            "bytes_received": traffic["bytes_received"] - traffic0["bytes_received"],
            "rounds": traffic["rounds"] - traffic0["rounds"], "crypto": counters.diff(ops0),
            "epochs_run": len(history), "stopped_early": stopped_early,
        }
        self.progress({"event": "done", **self.model.stats_})

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
            feats = _Features(Xv, self.features.fx, self.p.fit_intercept and self.is_guest)
            return feats, (None if yv is None else np.asarray(yv).astype(np.int64).ravel())
        return self.features, self.y

    def _monitor(self, state: Any, monitor_set: tuple, best: float, patience: int | None
                 ) -> tuple[float | None, float | None, bool]:
        feats, labels = monitor_set
        z = state.logits(self.session, feats, "guest")
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


def _make_state(job: _Training, ctx: Hybrid2PC, mask_seed: bytes, shuffle: bytes) -> Any:
    cls = _EncryptedWeights if job.p.layout == "encrypted" else _SharedWeights
    return cls(job, ctx, mask_seed, shuffle)


class _LayoutBase:
    def __init__(self, job: _Training, ctx: Hybrid2PC, mask_seed: bytes, shuffle: bytes) -> None:
        self.job, self.ctx, self.p = job, ctx, job.p
        self.mask_seed, self.shuffle = mask_seed, shuffle
        self.me, self.peer_index = ctx.me, 1 - ctx.me
        self.is_guest = job.is_guest
        self.fx = job.features.fx
        self.f = self.p.frac_bits
        self.slope = SIGMOIDS[self.p.sigmoid]
        m = self.p.batch_size
        self.k = math.floor(-math.log2(self.p.learning_rate / m))
        mine = {"fx": self.fx, "row_l1": job.features.row_l1, "features": job.features.X.shape[1]}
        self.peer_info = ctx.session.exchange(ctx.peer, mine, "lr-scales")

    def eta_int(self, batch: int) -> int:
        """The learning-rate factor eta/batch as an exact integer at scale 2^(k + ETA_BITS)."""
        return round(eta_factor(self.p.learning_rate, self.p.batch_size, batch) * 2 ** (self.k + ETA_BITS))

    def _add_to_label_share(self, values: Any, y: np.ndarray, scale_bits: int) -> Any:
        return values - np.asarray(y, dtype=object) * (1 << scale_bits)


class _EncryptedWeights(_LayoutBase):
    """Layout P2: [W_mine] under the peer's key, integer shares at the HE boundary."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.S = {self.me: self.f + self.fx + self.k + ETA_BITS,
                  self.peer_index: self.f + self.peer_info["fx"] + self.k + ETA_BITS}
        self.fxs = {self.me: self.fx, self.peer_index: self.peer_info["fx"]}
        l1 = {self.me: self.job.features.row_l1, self.peer_index: self.peer_info["row_l1"]}
        self.beta = {i: max(1, l1[i]).bit_length() + self.S[i] + self.p.weight_bits + 1 for i in (0, 1)}
        self.W: EncryptedArray | None = None

    def init_weights(self) -> None:
        d = self.job.features.X.shape[1]
        self.W = self.ctx.peer_key.encrypt(np.zeros(d, dtype=np.int64))

    def blobs(self) -> dict[str, bytes]:
        return {"weights": self.W.to_bytes()}

    def restore(self, blobs: dict[str, bytes]) -> None:
        self.W = EncryptedArray.from_bytes(blobs["weights"], self.ctx.peer_key)

    def _forward(self, rows: sp.csr_matrix, shift: dict[int, int], tag: str) -> IntegerShares:
        """Integer shares of (X W) / 2^shift summed over both parties' feature blocks."""
        ctx = self.ctx
        enc = rows @ self.W
        mine = h2s(ctx, enc, holder=self.me, value_bits=self.beta[self.me], mode="integer",
                   truncate_bits=shift[self.me], pack=self.p.pack, tag=f"{tag}{self.me}")
        theirs = h2s(ctx, None, holder=self.peer_index, value_bits=self.beta[self.peer_index], mode="integer",
                     truncate_bits=shift[self.peer_index], pack=self.p.pack, tag=f"{tag}{self.peer_index}")
        return IntegerShares(ctx, mine.values + theirs.values, self.f)

    def step(self, idx: np.ndarray) -> None:
        ctx = self.ctx
        rows = self.job.features.rows(idx)
        shift = {i: self.fxs[i] + self.S[i] - self.f + self.slope for i in (0, 1)}
        q = self._forward(rows, shift, "z")  # shares of z / 2^slope at scale 2^f
        err = q + 0.5  # shares of the linear sigmoid
        if self.is_guest:
            err = IntegerShares(ctx, self._add_to_label_share(err.values, self.job.y[idx], self.f), self.f)
        scaled = -(err * self.eta_int(len(idx)))  # -(eta/m) e, exact integers
        # Each party sends its share encrypted under its own key, then receives the peer's.
        encrypt_share(ctx, scaled, key_owner=self.me, tag=f"e{self.me}")
        received = encrypt_share(ctx, scaled, key_owner=self.peer_index, tag=f"e{self.peer_index}")
        pk = ctx.peer_key
        delta = EncryptedArray(pk, object_array(pk.raw_add_plain(received._c.tolist(), share_values(scaled))))
        cols = np.unique(rows.indices)
        if cols.size:
            grad = vecmat(delta, rows[:, cols])  # X_t^T [-(eta/m) e] over the touched columns only
            self.W._c[cols] = object_array(pk.raw_add(self.W._c[cols].tolist(), grad._c.tolist()))

    def logits(self, session: Any, feats: _Features, to: str) -> np.ndarray | None:
        sh = {self.me: feats.fx + self.S[self.me] - self.f,
              self.peer_index: self.fxs[self.peer_index] + self.S[self.peer_index] - self.f}
        if feats.fx != self.fx:
            raise ConfigError("prediction features must use the training feature scale")
        parts = []
        for start in range(0, feats.X.shape[0], 4096):
            rows = feats.X[start:start + 4096]
            parts.append(self._forward(rows, sh, "p"))
        values = np.concatenate([p.values for p in parts]) if parts else np.zeros(0, dtype=object)
        return _reveal(self.ctx, IntegerShares(self.ctx, values, self.f), to, self.job.guest)

    def open_weights(self) -> np.ndarray:
        """Each party learns its own weights; the peer learns nothing (it sees masked values)."""
        ctx = self.ctx
        out_bits = {i: min(OUT_BITS, self.S[i]) for i in (0, 1)}
        value_bits = {i: self.S[i] + self.p.weight_bits + 1 for i in (0, 1)}
        mine = h2s(ctx, self.W, holder=self.me, value_bits=value_bits[self.me], mode="integer",
                   truncate_bits=self.S[self.me] - out_bits[self.me], pack=self.p.pack, tag=f"open{self.me}")
        theirs = h2s(ctx, None, holder=self.peer_index, value_bits=value_bits[self.peer_index], mode="integer",
                     truncate_bits=self.S[self.peer_index] - out_bits[self.peer_index], pack=self.p.pack,
                     tag=f"open{self.peer_index}")
        ctx.session.send(ctx.peer, _ints_bytes(theirs.values), "open-share")
        peer_part = _ints_from(ctx.session.recv_bytes(ctx.peer, "open-share"))
        total = [int(a) + int(b) for a, b in zip(mine.values.tolist(), peer_part)]
        return np.array(total, dtype=np.float64) / (1 << out_bits[self.me])


class _SharedWeights(_LayoutBase):
    """Layout P1 (CAESAR as published): weights shared over Z_2^64, two mat-vecs each way."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        d_me, d_peer = self.job.features.X.shape[1], self.peer_info["features"]
        self.d = {self.me: d_me, self.peer_index: d_peer}
        self.fxs = {self.me: self.fx, self.peer_index: self.peer_info["fx"]}
        self.w: dict[int, SharedArray] = {}

    def init_weights(self) -> None:
        for i in (0, 1):
            self.w[i] = SharedArray(self.ctx, np.zeros(self.d[i], dtype=np.uint64), self.f)

    def blobs(self) -> dict[str, bytes]:
        return {f"w{i}": self.w[i].share.tobytes() for i in (0, 1)}

    def restore(self, blobs: dict[str, bytes]) -> None:
        for i in (0, 1):
            self.w[i] = SharedArray(self.ctx, np.frombuffer(blobs[f"w{i}"], dtype=np.uint64).copy(), self.f)

    def _forward(self, rows: sp.csr_matrix | None, tag: str, extra: int = 0) -> SharedArray:
        """Ring shares of (X w) / 2^extra at scale 2^f, both blocks (local truncations)."""
        ctx = self.ctx
        total = None
        for owner in (0, 1):
            matrix = rows if owner == self.me else None
            z = sparse_matvec(ctx, matrix, self.w[owner], owner=owner, pack=self.p.pack, tag=f"{tag}{owner}")
            shift = self.fxs[owner] + extra  # X_int w has scale 2^(f + fx)
            part = ctx.truncate(SharedArray(ctx, z.share, self.f + shift), shift)
            total = part if total is None else total + part
        return total

    def step(self, idx: np.ndarray) -> None:
        ctx = self.ctx
        rows = self.job.features.rows(idx)
        m = len(idx)
        q = self._forward(rows, "z", self.slope)  # shares of z / 2^slope
        err = q + 0.5
        if self.is_guest:
            err = SharedArray(ctx, err.share - encoding.ring_encode(self.job.y[idx].astype(np.int64), self.f), self.f)
        eta = eta_factor(self.p.learning_rate, self.p.batch_size, m)
        for owner in (0, 1):
            matrix = rows.T.tocsr() if owner == self.me else None
            grad = sparse_matvec(ctx, matrix, err, owner=owner, pack=self.p.pack, tag=f"g{owner}")
            w = self.w[owner]
            if self.p.l2:
                w = w.mul_public(1.0 - self.p.learning_rate * self.p.l2)
            step_share = grad.share * encoding.ring_encode(np.array([eta]), self.f)[0]
            step = ctx.truncate(SharedArray(ctx, step_share, 2 * self.f + self.fxs[owner]), self.f + self.fxs[owner])
            self.w[owner] = w - step

    def logits(self, session: Any, feats: _Features, to: str) -> np.ndarray | None:
        parts = []
        for start in range(0, feats.X.shape[0], 4096):
            parts.append(self._forward(feats.X[start:start + 4096], "p").share)
        z = SharedArray(self.ctx, np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64), self.f)
        return _reveal(self.ctx, z, to, self.job.guest)

    def open_weights(self) -> np.ndarray:
        mine = None
        for owner in (0, 1):
            value = self.w[owner].reveal(to=owner)
            if owner == self.me:
                mine = value
        return np.asarray(mine, dtype=np.float64)


def _reveal(ctx: Hybrid2PC, shares: Any, to: str, guest: int) -> np.ndarray | None:
    target = {"guest": guest, "host": 1 - guest, "both": None}.get(to, "bad")
    if target == "bad":
        raise ConfigError(f"to must be 'guest', 'host' or 'both', got {to!r}")
    if isinstance(shares, IntegerShares):
        out = ctx.reveal_integer(shares, target)
        return None if out is None else np.asarray(out, dtype=np.float64)
    out = ctx.reveal(shares, target)
    return None if out is None else np.asarray(out, dtype=np.float64)


def _ints_bytes(values: Any) -> bytes:
    return ints_to_bytes([int(v) for v in np.asarray(values, dtype=object).ravel().tolist()])


def _ints_from(data: bytes) -> list[int]:
    return ints_from_bytes(data)


def fit(session: Any, X: Any, y: Any = None, **params: Any) -> VerticalLogisticRegression:
    """Functional form: ``shaper.ml.logreg.fit(session, X_local, y_or_None, epochs=3)``."""
    validation = params.pop("validation", None)
    progress = params.pop("progress", None)
    return VerticalLogisticRegression(**params).fit(session, X, y, validation=validation, progress=progress)
