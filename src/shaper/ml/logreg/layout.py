"""What the two weight layouts share: their interface, the scale exchange and revealing logits.

A layout holds one party's half of the model (encrypted weights in :mod:`.encrypted`, weight
shares in :mod:`.caesar`) and runs one SGD step, the logits for prediction and the final opening
of the weights. At set-up each party tells the peer its feature scale 2^fx, its largest row L1
norm and its feature count, which the peer needs to size conversions and truncations.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Protocol

import numpy as np

from ...errors import ConfigError
from ...protocols import Hybrid2PC
from ...protocols.additive import IntegerShares
from .features import Features
from .params import SIGMOIDS, LRParams
from .schedule import ETA_BITS, eta_factor
from .stability import PRECOND_BITS


class TrainingJob(Protocol):
    """What a layout reads from the training job: the parameters, this party's data and roles,
    the learning rate in force and this party's preconditioner (:mod:`.stability`)."""

    p: LRParams
    features: Features
    learning_rate: float
    precond: np.ndarray  # D_j per column of this party's block, a multiple of 2^-PRECOND_BITS
    y: np.ndarray | None  # labels, at the guest only
    is_guest: bool
    guest: int  # the guest's party index


class Layout(ABC):
    """One party's view of the model during and after training (see the subclasses)."""

    def __init__(self, job: TrainingJob, ctx: Hybrid2PC, mask_seed: bytes, shuffle: bytes) -> None:
        self.job, self.ctx, self.p = job, ctx, job.p
        self.mask_seed, self.shuffle = mask_seed, shuffle
        self.me, self.peer_index = ctx.me, 1 - ctx.me
        self.is_guest = job.is_guest
        self.fx = job.features.fx
        self.f = self.p.frac_bits
        self.slope = SIGMOIDS[self.p.sigmoid]
        m = self.p.batch_size
        self.learning_rate = job.learning_rate
        self.k = math.floor(-math.log2(self.learning_rate / m))
        self.d_int = np.rint(job.precond * 2 ** PRECOND_BITS).astype(np.int64)  # D_j at scale 2^PRECOND_BITS
        self.loss_rows = 0  # rows in this epoch's monitored loss so far
        mine = {"fx": self.fx, "row_l1": job.features.row_l1, "features": job.features.X.shape[1]}
        self.peer_info = ctx.session.exchange(ctx.peer, mine, "lr-scales")

    def eta_int(self, batch: int, t: int) -> int:
        """The learning-rate factor eta_t/batch of SGD step ``t`` as an exact integer at scale 2^(k + ETA_BITS)."""
        return round(eta_factor(self.learning_rate, self.p.batch_size, batch, t, self.slope) * 2 ** (self.k + ETA_BITS))

    def reveal(self, shares: Any, to: str) -> np.ndarray | None:
        """Open logits (IntegerShares or ring shares) to ``to``: "guest", "host" or "both"."""
        guest = self.job.guest
        target = {"guest": guest, "host": 1 - guest, "both": None}.get(to, "bad")
        if target == "bad":
            raise ConfigError(f"to must be 'guest', 'host' or 'both', got {to!r}")
        if isinstance(shares, IntegerShares):
            out = self.ctx.reveal_integer(shares, target)
            return None if out is None else np.asarray(out, dtype=np.float64)
        out = self.ctx.reveal(shares, target)
        return None if out is None else np.asarray(out, dtype=np.float64)

    @abstractmethod
    def init_weights(self) -> None:
        """Start from zero weights."""

    @abstractmethod
    def blobs(self) -> dict[str, bytes]:
        """This party's model state for a checkpoint."""

    @abstractmethod
    def restore(self, blobs: dict[str, bytes]) -> None:
        """Load the state :meth:`blobs` wrote."""

    @abstractmethod
    def step(self, idx: np.ndarray, sample: np.ndarray, t: int) -> None:
        """SGD step ``t`` (counted over the whole run) on the (sorted) batch rows ``idx``; both parties call it together. The
        errors of the rows at positions ``sample`` of ``idx`` enter the epoch's monitored loss."""

    @abstractmethod
    def epoch_loss(self) -> float:
        """Open the mean squared error of the linear sigmoid over the sampled rows of the epoch
        (to both parties; +inf when it overflowed) and start a new epoch's sum."""

    @abstractmethod
    def logits(self, session: Any, feats: Features, to: str) -> np.ndarray | None:
        """Logits of the rows ``feats`` (this party's block), revealed to ``to``."""

    @abstractmethod
    def open_weights(self) -> np.ndarray:
        """This party's own weights in floating point; the peer learns nothing."""
