"""Scoring new rows with a trained vertical linear model (``shaper lr predict``, ``shaper fl
predict``): each data party's part of the linear score, and the parts summed at the party that
holds the labels.

A vertical model is split among the data parties: party p holds the weights of its own columns,
``coef_p``, and a constant ``intercept_p`` in its own units. The guest's constant is the model's
intercept plus what its standardisation adds; a host's is what its standardisation adds (its
columns were centred in training). The score of a row is

    z = sum over the data parties p of (x_p . coef_p + intercept_p)

with every party's constant counted exactly once (leaving a host's out shifts every score by it;
counting the guest's twice does the same). :class:`LinearPart` is one party's share of the model as
written by a training job (:func:`save_part`, :func:`load_part`); :func:`local_scores` sums the
parts of a model whose weight files are all at hand; :func:`joint_scores` is the job on real
hosts, each party with its own weights and its own columns of the same rows.

What :func:`joint_scores` reveals, and to whom (semi-honest, no collusion): the guest learns the
scores; with one host that is all it learns, since a host's part is the score minus the guest's own
part. With several hosts each adds pairwise masks it shares with the other hosts
(:meth:`Session.shared_prg <shaper.net.session.Session.shared_prg>`, over Z_2^64 at the fixed-point
scale 2^-SCORE_FRAC_BITS), which cancel in the sum, so the guest learns the sum of the hosts' parts
and not each one, as in the training job's own prediction. The hosts learn nothing; every party
learns the row count and whether the parties hold the same ids in the same order (a digest). A
party that is in the parties file but holds no model (an arbiter) only takes part in the hello.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError
from ..files import write_atomic
from .data import ids_digest

__all__ = ["LinearPart", "SCORE_FRAC_BITS", "joint_scores", "load_part", "local_scores", "save_part"]

SCORE_FRAC_BITS = 24   # a host's part crosses as an integer at scale 2^24 (precision 6e-8)
_SCORE_LIMIT = 2.0 ** 38  # |part| below 2^38 keeps the sum of 16 parts inside the signed 64-bit ring
MODELS = ("logistic", "linear")


@dataclass(frozen=True)
class LinearPart:
    """One data party's share of a vertical linear model (see the module notes). ``columns``:
    which columns of a shared data file are this party's (runs with ``--local N``), else None."""

    coef: np.ndarray
    intercept: float
    role: str
    model: str = "logistic"
    columns: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.role not in ("guest", "host"):
            raise ConfigError(f"a model part belongs to the guest or a host, not {self.role!r}")
        if self.model not in MODELS:
            raise ConfigError(f"model must be one of {MODELS}, got {self.model!r}")
        if np.ndim(self.coef) != 1 or not np.all(np.isfinite(self.coef)) or not np.isfinite(self.intercept):
            raise ConfigError("a model part's weights must be a finite vector and its intercept a finite number")

    def scores(self, X: Any) -> np.ndarray:
        """``X @ coef + intercept`` for this party's columns ``X`` (rows, features), dense or sparse."""
        if X.shape[1] != self.coef.size:
            raise ConfigError(f"the {self.role}'s weights are for {self.coef.size} columns, its rows have {X.shape[1]}")
        return np.asarray(X @ self.coef, dtype=np.float64).ravel() + self.intercept


def save_part(path: str | Path, part: LinearPart) -> Path:
    """Write a part as ``.npz`` (``coef``, ``intercept``, ``role``, ``model`` and, for a
    ``--local`` run, ``columns``), atomically."""
    arrays = {"coef": np.asarray(part.coef, dtype=np.float64), "intercept": np.array([part.intercept]),
              "role": np.array(part.role), "model": np.array(part.model)}
    if part.columns is not None:
        arrays["columns"] = np.asarray(part.columns, dtype=np.int64)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path = Path(path)
    write_atomic(path, buf.getvalue(), private=False)
    return path


def load_part(path: str | Path, *, role: str | None = None, model: str | None = None) -> LinearPart:
    """A part written by :func:`save_part` (or by an older ``shaper lr train``, which wrote
    ``coef`` and, where it had one, ``intercept``: ``role`` and ``model`` then say what it is).
    ``role``/``model`` given for a file that names its own must agree with it."""
    try:
        with np.load(path, allow_pickle=False) as data:
            found = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such weights file") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not a weights file written by shaper ({exc})") from None
    if "coef" not in found:
        raise ConfigError(f"{path} holds no 'coef' (a horizontal model's file holds 'params')")
    own = {k: str(found[k]) for k in ("role", "model") if k in found}
    for key, wanted in (("role", role), ("model", model)):
        if wanted is not None and own.get(key, wanted) != wanted:
            raise ConfigError(f"{path} is the {key} {own[key]!r}'s part, not {wanted!r}'s")
    if "role" not in own and role is None:
        raise ConfigError(f"{path} does not say whose part it is: pass --role")
    intercept = found.get("intercept", np.zeros(1))
    if intercept.size != 1:
        raise ConfigError(f"{path}: the intercept must be one number, got {intercept.size}")
    return LinearPart(np.asarray(found["coef"], dtype=np.float64).ravel(), float(intercept.ravel()[0]),
                      own.get("role", role or ""), own.get("model", model or "logistic"),
                      found["columns"].astype(np.int64) if "columns" in found else None)


def local_scores(parts: Sequence[LinearPart], X: Any) -> np.ndarray:
    """The model's scores of the rows of ``X`` (all columns of a ``--local`` file), each part
    applied to its own ``columns`` and its constant counted once."""
    if sum(p.role == "guest" for p in parts) != 1:
        raise ConfigError("a vertical model has exactly one guest part")
    total = np.zeros(X.shape[0])
    for part in parts:
        if part.columns is None:
            raise ConfigError(f"the {part.role}'s part does not say which columns are its own (written by a run "
                              "on real hosts: score with each party's own rows)")
        if part.columns.size and part.columns.max() >= X.shape[1]:
            raise ConfigError(f"the {part.role}'s part uses column {int(part.columns.max())}, the rows have "
                              f"{X.shape[1]} columns")
        total += part.scores(X[:, part.columns])
    return total


def joint_scores(session: Any, part: LinearPart | None, X: Any = None, ids: np.ndarray | None = None,
                 tag: str = "scores") -> np.ndarray | None:
    """Every party of ``session`` calls this: a data party with its ``part``, its columns ``X``
    of the rows and their ``ids`` (the same ids in the same order at every data party), a party
    without a model with ``part=None``. Returns the scores at the guest, None elsewhere (the
    module notes say what each party learns)."""
    if part is None:
        hello: dict = {"role": None}
    else:
        if X is None or ids is None or len(ids) != X.shape[0]:
            raise ConfigError("a data party scores its own columns of the rows: pass X and one id per row")
        hello = {"role": part.role, "model": part.model, "rows": int(X.shape[0]), "ids": ids_digest(np.asarray(ids))}
    session.broadcast(hello, tag + "-hello")
    hellos = {session.name: hello, **session.gather(tag + "-hello")}
    guests = [n for n in session.parties if isinstance(hellos[n], dict) and hellos[n].get("role") == "guest"]
    hosts = [n for n in session.parties if isinstance(hellos[n], dict) and hellos[n].get("role") == "host"]
    if len(guests) != 1 or not hosts:
        raise ConfigError(f"scoring needs the guest's part and at least one host's; got guest {guests or 'none'}, "
                          f"hosts {hosts or 'none'}")
    data = [guests[0], *hosts]
    for name in data:
        for key in ("model", "rows", "ids"):
            if hellos[name].get(key) != hellos[guests[0]].get(key):
                raise ConfigError(f"party {name!r} holds a different {'row set or order' if key != 'model' else key} "
                                  f"({hellos[name].get(key)} there, {hellos[guests[0]].get(key)} at the guest "
                                  f"{guests[0]!r}): score the same rows, aligned, with one model's parts")
    if part is None:
        return None
    mine = part.scores(X)
    guest = guests[0]
    if part.role == "host":
        if np.abs(mine).max(initial=0.0) >= _SCORE_LIMIT:
            raise ConfigError(f"a score part of {np.abs(mine).max():.3g} is too large to send (limit 2^38)")
        ring = np.rint(mine * 2.0 ** SCORE_FRAC_BITS).astype(np.int64).view(np.uint64)
        me = hosts.index(session.name)
        for other in hosts:  # pairwise masks that cancel in the guest's sum (none with one host)
            if other == session.name:
                continue
            first, second = sorted((session.name, other), key=hosts.index)
            mask = session.shared_prg([first, second], tag=f"{tag}-mask-{first}-{second}").uint64(mine.size)
            ring = ring + mask if me == hosts.index(first) else ring - mask
        session.send(guest, ring, tag + "-part")
        return None
    total = np.zeros(mine.size, dtype=np.uint64)
    for host in hosts:
        got = session.recv_array(host, tag + "-part", dtype=np.uint64, shape=(mine.size,))
        total = total + got
    return mine + total.view(np.int64).astype(np.float64) / 2.0 ** SCORE_FRAC_BITS
