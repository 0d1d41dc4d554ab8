"""Layout P1, CAESAR as published (the baseline SHAPER measures): weights shared over Z_2^64.

Every step runs two secure sparse mat-vecs forward (one per feature block) and two backward, so
the party without the matrix re-encrypts its share of the weights, O(features) traffic, each
time. Truncation is local and probabilistic (see :mod:`shaper.protocols.additive.shares`); L2 is
supported. Each owner folds its preconditioner D_j (:mod:`.stability`, scale 2^PRECOND_BITS)
into its own matrix for the backward mat-vec, so the peer never learns it. The monitored loss is
sum e^2 = e_0^T e + e_1^T e, two more mat-vecs (each party's error share as a 1 x rows matrix)
on the sampled rows at 2^-8 precision, summed over the epoch and opened to both. What the peer
sees: ring shares and ciphertexts under the sender's key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...crypto import encoding
from ...protocols.additive import SharedArray
from ...protocols.hybrid.sparse import sparse_matvec
from .features import Features
from .layout import Layout
from .schedule import ETA_BITS
from .stability import PRECOND_BITS

LOSS_FRAC = 8  # fraction bits of the errors that enter the monitored loss (room for |e| < 2^19)


class SharedWeights(Layout):
    """Layout P1 (CAESAR as published): weights shared over Z_2^64, two mat-vecs each way."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        d_me, d_peer = self.job.features.X.shape[1], self.peer_info["features"]
        self.d = {self.me: d_me, self.peer_index: d_peer}
        self.fxs = {self.me: self.fx, self.peer_index: self.peer_info["fx"]}
        self.w: dict[int, SharedArray] = {}
        self._loss = np.zeros(1, dtype=np.uint64)  # ring share of the epoch's sum of e^2 at 2^(2 LOSS_FRAC)

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

    def step(self, idx: np.ndarray, sample: np.ndarray, t: int) -> None:
        ctx = self.ctx
        rows = self.job.features.rows(idx)
        m = len(idx)
        q = self._forward(rows, "z", self.slope)  # shares of z / 2^slope
        err = q + 0.5
        if self.is_guest:
            err = SharedArray(ctx, err.share - encoding.ring_encode(self.job.y[idx].astype(np.int64), self.f), self.f)
        self._meter(err, sample)
        eta = np.uint64(self.eta_int(m, t))  # eta_t / m at scale 2^(k + ETA_BITS)
        for owner in (0, 1):
            matrix = (sp.diags(self.d_int, dtype=np.int64) @ rows.T).tocsr() if owner == self.me else None  # D X^T
            grad = sparse_matvec(ctx, matrix, err, owner=owner, pack=self.p.pack, tag=f"g{owner}")
            w = self.w[owner]
            if self.p.l2:
                w = w.mul_public(1.0 - self.learning_rate * self.p.l2)
            scale = self.fxs[owner] + PRECOND_BITS  # D X^T e has scale 2^(f + scale)
            g = ctx.truncate(SharedArray(ctx, grad.share, self.f + scale), scale)
            step = ctx.truncate(SharedArray(ctx, g.share * eta, self.f + self.k + ETA_BITS), self.k + ETA_BITS)
            self.w[owner] = w - step

    def _meter(self, err: SharedArray, sample: np.ndarray) -> None:
        """Add sum e^2 over the sampled rows to this party's share of the epoch's loss."""
        ctx = self.ctx
        e = ctx.truncate(SharedArray(ctx, err.share[sample], self.f), self.f - LOSS_FRAC)
        mine = sp.csr_matrix(encoding.to_signed(e.share).reshape(1, -1))
        for owner in (0, 1):
            part = sparse_matvec(ctx, mine if owner == self.me else None, e, owner=owner, pack=self.p.pack,
                                 tag=f"l{owner}")
            self._loss = self._loss + part.share
        self.loss_rows += len(sample)

    def epoch_loss(self) -> float:
        total = self.ctx.reveal_ring(SharedArray(self.ctx, self._loss, 0), None)  # to both parties
        value = int(encoding.to_signed(np.asarray(total, dtype=np.uint64))[0])
        loss = value / 2.0 ** (2 * LOSS_FRAC) / max(self.loss_rows, 1) if value >= 0 else float("inf")
        self._loss, self.loss_rows = np.zeros(1, dtype=np.uint64), 0
        return loss

    def logits(self, session: Any, feats: Features, to: str) -> np.ndarray | None:
        parts = []
        for start in range(0, feats.X.shape[0], 4096):
            parts.append(self._forward(feats.X[start:start + 4096], "p").share)
        z = SharedArray(self.ctx, np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64), self.f)
        return self.reveal(z, to)

    def open_weights(self) -> np.ndarray:
        mine = None
        for owner in (0, 1):
            value = self.w[owner].reveal(to=owner)
            if owner == self.me:
                mine = value
        return np.asarray(mine, dtype=np.float64)
