"""Horizontal federated averaging with encrypted aggregation: k clients hold rows of the same
columns, a coordinator averages their model updates without being able to read them.

    fl = FederatedAveraging("mlp", rounds=5, local_epochs=1, hidden=64, n_classes=10)
    fl.fit(session, X, y, role="client")        # each client: its own rows
    fl.fit(session, None, role="coordinator")   # the coordinator: no data, no key

Each round every client trains the current global model on its rows for ``local_epochs``
(:mod:`shaper.ml.fl.local_models`: logistic, linear or a one-hidden-layer MLP), and the update
(new minus old parameters) is averaged, weighted by the clients' row counts, through the packed
Paillier aggregation of :mod:`shaper.protocols.fl.aggregate` (which states what each party learns
and the dropout policy: ``quorum`` clients must deliver by ``round_timeout``, or the job stops
with an error naming the missing ones). Every client ends with the same global model.

:func:`plaintext_fedavg` runs the same algorithm with a plain average: the secure run matches
it to the fixed-point precision of the aggregation (2^-frac_bits per value and round).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ...crypto import counters
from ...errors import ConfigError
from ...protocols.fl.aggregate import AggregationParams, Federation
from ...net.phases import Meter, Phases
from ...protocols.fl.backend import BACKENDS, CATEGORIES, make_backend, mean_split
from ..checkpoint import Checkpointer
from ..settings import Settings
from .local_models import MODELS, make_model

ROLES = ("client", "coordinator")


@dataclass(frozen=True)
class FedAvgParams(Settings):
    model: str = "logistic"
    rounds: int = 10
    local_epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 0.1
    l2: float = 0.0
    hidden: int = 64
    n_classes: int = 2
    frac_bits: int = 16
    int_bits: int = 4
    quorum: int | None = None
    round_timeout: float = 600.0
    key_bits: int = 2048
    backend: str = "shaper"
    seed: int = 0                    # model initialisation and local shuffles (public)
    checkpoint_dir: str | None = None
    resume: bool = False

    def validate(self) -> None:
        self.require_choice("model", MODELS)
        self.require_choice("backend", BACKENDS)
        if self.rounds < 1 or self.local_epochs < 1 or self.batch_size < 1:
            raise ConfigError("rounds, local_epochs and batch_size must be positive")
        self.require_learning_rate(auto=False)
        self.aggregation()  # validates frac_bits, int_bits, quorum, round_timeout

    def aggregation(self) -> AggregationParams:
        return AggregationParams(frac_bits=self.frac_bits, int_bits=self.int_bits, quorum=self.quorum,
                                 round_timeout=self.round_timeout)


class FederatedAveraging:
    """One party's side of a horizontal FedAvg job (see the module docstring)."""

    def __init__(self, model: str = "logistic", **params: Any) -> None:
        self.params = FedAvgParams(model=model, **params)
        self.params_: np.ndarray | None = None   # the global model (clients)
        self.history_: list[dict] = []
        self.rounds_: list[dict] = []            # per round: included clients and the time split
        self.stats_: dict = {}
        self.resumed_from_: int | None = None
        self.model_: Any = None
        self.measures_ = measures(self.params)  # what history_'s losses measure

    def set_params(self, **params: Any) -> "FederatedAveraging":
        self.params = replace(self.params, **params)
        return self

    def fit(self, session: Any, X: Any = None, y: Any = None, *, role: str, validation: tuple | None = None,
            progress: Callable[[dict], None] | None = None) -> "FederatedAveraging":
        if role not in ROLES:
            raise ConfigError(f"role must be one of {ROLES}, got {role!r}")
        progress = progress or (lambda event: None)
        params = self.params
        self.measures_ = measures(params)
        meter = Meter(session)
        ops0 = counters.snapshot()
        if role == "client":
            X, y = _data(X, y, "X")
            if validation is not None:
                validation = _data(*validation, "validation X")
        elif X is not None or y is not None:
            raise ConfigError("the coordinator holds no data: pass X=None")
        features = None if X is None else int(X.shape[1])
        session.broadcast({"role": role, "shared": params.shared(), "features": features}, "fedavg-hello")
        hellos = {session.name: {"role": role, "shared": params.shared(), "features": features},
                  **session.gather("fedavg-hello")}
        coordinator, clients = _roles(hellos)
        phases = Phases(session)
        backend = make_backend(params.backend, phases)
        fed = Federation(session, backend, role, coordinator, clients, params.aggregation(), key_bits=params.key_bits)
        fed.setup(None if X is None else int(X.shape[0]))
        feats = {hellos[c]["features"] for c in clients}
        if len(feats) != 1:
            raise ConfigError(f"the clients hold different numbers of columns: {sorted(feats)}")
        self.model_ = make_model(params.model, feats.pop(), n_classes=params.n_classes, hidden=params.hidden,
                                 l2=params.l2)
        glob = self.model_.init_params(params.seed)
        ckpt = Checkpointer(params.checkpoint_dir, session.name) if params.checkpoint_dir else None
        start = self._resume(session, ckpt, role)
        if start:
            if role == "client":  # the coordinator keeps no model; it just runs the remaining rounds
                state = ckpt.load(start)[0]
                self.history_ = list(state["history"])
                glob = np.asarray(state["params"], dtype=float)
            self.resumed_from_ = start
            progress({"event": "resume", "epoch": start, "epochs": params.rounds})
        index = clients.index(session.name) if role == "client" else -1
        phases.lap()
        for rnd in range(start, params.rounds):
            t0 = time.perf_counter()
            record: dict = {"epoch": rnd + 1}
            if role == "coordinator":
                info = fed.coordinator_round(rnd)
            else:
                local = self.model_.fit_local(glob, X, y, epochs=params.local_epochs, batch_size=params.batch_size,
                                              learning_rate=params.learning_rate,
                                              seed=params.seed * 1_000_003 + rnd * 1009 + index)
                mean_update = fed.client_round(local - glob, rnd)
                glob = glob + mean_update
                info = dict(fed.last)
                record["train_loss"] = float(self.model_.loss(glob, X, y))
                if validation is not None:
                    record.update(_metrics(self.model_, glob, *validation))
            lap = phases.lap(CATEGORIES)
            record["seconds"] = time.perf_counter() - t0
            self.rounds_.append({"round": rnd + 1, "included": info.get("included"), **lap,
                                 **({"dropped": info["dropped"]} if info.get("dropped") else {})})
            self.history_.append(record)
            if ckpt is not None:
                ckpt.save(rnd + 1, {"digest": params.digest(), "history": self.history_,
                                    "params": glob.tolist() if role == "client" else None}, {}, None, None)
            progress({"event": "iteration", "epoch": rnd + 1, "epochs": params.rounds, "iteration": 1,
                      "iterations": 1, "times": lap})
            progress({"event": "epoch", "epochs": params.rounds, **record, "measures": self.measures_,
                      "included": len(info.get("included") or [])})
        self.params_ = glob if role == "client" else None
        traffic = meter.read()
        self.stats_ = {"seconds": traffic.seconds, "rounds_run": len(self.history_),
                       "per_round": mean_split([{k: r[k] for k in ("seconds", *CATEGORIES, "wait", "other")}
                                                for r in self.rounds_]),
                       "bytes_sent": traffic.bytes_sent, "bytes_received": traffic.bytes_received,
                       "crypto": counters.diff(ops0), "clients": clients, "coordinator": coordinator,
                       "packing": {k: fed.last.get(k) for k in ("ciphertexts", "slots", "slot_bits")}}
        return self

    def _resume(self, session: Any, ckpt: Checkpointer | None, role: str) -> int:
        """The newest round every client has checkpointed with these settings (0: start afresh)."""
        mine = ckpt.epochs() if (ckpt is not None and self.params.resume) else []
        if mine and ckpt.load(mine[-1])[0].get("digest") != self.params.digest():
            raise ConfigError(f"the checkpoints in {ckpt.dir} were written with other settings")
        session.broadcast({"role": role, "rounds": mine}, "fedavg-resume")
        theirs = session.gather("fedavg-resume")
        common = set(mine) if role == "client" else None
        for msg in theirs.values():
            if msg["role"] == "client":
                got = {int(r) for r in msg["rounds"]}
                common = got if common is None else common & got
        if not common:
            if ckpt is not None:
                ckpt.discard()
            return 0
        return max(common)

    def predict(self, X: Any) -> np.ndarray:
        """The global model's predictions (any client, locally)."""
        if self.params_ is None:
            raise ConfigError("only a client that finished fit() holds the model")
        return self.model_.predict(self.params_, np.asarray(X, dtype=float))


def measures(params: FedAvgParams) -> dict[str, str]:
    """What the losses of a round's record measure: the model's own loss (with its L2 penalty) on
    the client's rows (``train_loss``) and on the validation rows (``loss``)."""
    kind = {"logistic": "log-loss", "linear": "half squared error", "mlp": "cross-entropy"}[params.model]
    penalty = " + L2 penalty" if params.l2 else ""
    return {"train_loss": f"{kind}{penalty}, this client's rows", "loss": f"validation {kind}{penalty}"}


def _roles(hellos: dict) -> tuple[str, list[str]]:
    coordinators = [n for n, h in hellos.items() if h.get("role") == "coordinator"]
    clients = sorted(n for n, h in hellos.items() if h.get("role") == "client")
    if len(coordinators) != 1 or len(clients) < 2:
        raise ConfigError(f"a horizontal job needs one coordinator and at least 2 clients; got coordinators "
                          f"{coordinators or 'none'}, clients {clients or 'none'}")
    shared = {json.dumps(h.get("shared"), sort_keys=True) for h in hellos.values()}
    if len(shared) != 1:
        raise ConfigError("the parties were started with different settings (model, rounds, learning rate, "
                          "key size, backend, ...): start them with the same options")
    return coordinators[0], clients


def _data(X: Any, y: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    if X is None or y is None:
        raise ConfigError(f"a client needs {what} and its labels")
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=float)
    y = np.asarray(y).ravel()
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ConfigError(f"{what} must be 2-D with one label per row; got {X.shape} and {y.shape[0]} labels")
    return X, y


def _metrics(model: Any, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict:
    scores = model.score(params, X, y)
    return {k: (None if v is None or v != v else float(v)) for k, v in scores.items()}


def plaintext_fedavg(kind: str, parts: list[tuple[np.ndarray, np.ndarray]], **params: Any) -> np.ndarray:
    """The same algorithm without encryption: the clients ``parts`` (in client-name order) train
    locally with the same seeds and their updates are averaged in float64, weighted by rows."""
    p = FedAvgParams(model=kind, **params)
    model = make_model(kind, parts[0][0].shape[1], n_classes=p.n_classes, hidden=p.hidden, l2=p.l2)
    glob = model.init_params(p.seed)
    weights = np.array([len(y) for _, y in parts], dtype=float)
    weights /= weights.sum()
    for rnd in range(p.rounds):
        updates = [model.fit_local(glob, X, y, epochs=p.local_epochs, batch_size=p.batch_size,
                                   learning_rate=p.learning_rate, seed=p.seed * 1_000_003 + rnd * 1009 + i) - glob
                   for i, (X, y) in enumerate(parts)]
        glob = glob + sum(w * u for w, u in zip(weights, updates))
    return glob
