"""Layout P2, encrypted weights (the default; SecretFlow HESS-LR's layout, ``docs/logreg.md``).

Each party's weights W_mine stay encrypted under the peer's key at their owner. A step computes
X_t [W] over the batch's non-zeros, converts it to integer shares with a packed H2S that fuses
the truncation (exact to one unit), forms the error of the linear sigmoid in shares, and each
party sends its share of -(eta/m) e encrypted under its own key; the owner adds X_t^T [-(eta/m) e]
to its encrypted weights. Only 2m values cross per step; nothing of size O(features).

Weights live at scale 2^S with S = f + fx + k + ETA_BITS + PRECOND_BITS, which folds in the
learning rate and 1/m as 2^-k times an exact ETA_BITS-bit integer, and the owner's per-column
preconditioner D_j (:mod:`.stability`) as an integer at scale 2^PRECOND_BITS. What the peer sees:
masked H2S values and ciphertexts under the sender's key.

Monitored loss: the guest multiplies the host's encrypted scaled error by twice its own error
share on the sampled rows and adds its squared share (Enc_h(-eta(2 e_g e_h + e_g^2)), summed per
step size); at the end of the epoch the host decrypts that sum, adds its own squared share and
learns sum (e_g + e_h)^2, the epoch's squared error, which it tells the guest. Nothing else is
revealed: the host's own share completes the sum, so the decrypted value says no more than it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...arrays import ints_from_bytes, ints_to_bytes, object_array
from ...crypto.ahe import EncryptedArray, vecmat
from ...errors import ConfigError
from ...protocols.additive import IntegerShares
from ...protocols.hybrid.conversions import encrypt_share, h2s, share_values
from .features import Features
from .layout import Layout
from .schedule import ETA_BITS
from .stability import PRECOND_BITS

OUT_BITS = 24  # fraction bits of the opened weights (fewer when the weights' scale has fewer)


class EncryptedWeights(Layout):
    """Layout P2: [W_mine] under the peer's key, integer shares at the HE boundary."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.S = {self.me: self.f + self.fx + self.k + ETA_BITS + PRECOND_BITS,
                  self.peer_index: self.f + self.peer_info["fx"] + self.k + ETA_BITS + PRECOND_BITS}
        self.fxs = {self.me: self.fx, self.peer_index: self.peer_info["fx"]}
        l1 = {self.me: self.job.features.row_l1, self.peer_index: self.peer_info["row_l1"]}
        self.beta = {i: max(1, l1[i]).bit_length() + self.S[i] + self.p.weight_bits + 1 for i in (0, 1)}
        self.W: EncryptedArray | None = None
        self._loss_cts: dict[int, Any] = {}  # guest: eta_int -> Enc_h(-eta_int (2 e_g e_h + e_g^2)) summed
        self._loss_own = 0  # host: sum of its squared error shares
        self._loss_etas: set[int] = set()  # host: the step factors used this epoch

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

    def step(self, idx: np.ndarray, sample: np.ndarray, t: int) -> None:
        ctx = self.ctx
        rows = self.job.features.rows(idx)
        shift = {i: self.fxs[i] + self.S[i] - self.f + self.slope for i in (0, 1)}
        q = self._forward(rows, shift, "z")  # shares of z / 2^slope at scale 2^f
        err = q + 0.5  # shares of the linear sigmoid
        if self.is_guest:
            err = IntegerShares(ctx, _minus_labels(err.values, self.job.y[idx], self.f), self.f)
        eta = self.eta_int(len(idx), t)
        scaled = -(err * eta)  # -(eta/m) e, exact integers
        # Each party sends its share encrypted under its own key, then receives the peer's.
        encrypt_share(ctx, scaled, key_owner=self.me, tag=f"e{self.me}")
        received = encrypt_share(ctx, scaled, key_owner=self.peer_index, tag=f"e{self.peer_index}")
        self._meter(err, received, sample, eta)
        pk = ctx.peer_key
        delta = EncryptedArray(pk, object_array(pk.raw_add_plain(received._c.tolist(), share_values(scaled))))
        self._update(rows, delta)

    def _update(self, rows: sp.csr_matrix, delta: EncryptedArray) -> None:
        """W_j += D_j (X_t^T [delta])_j over the touched columns. A value of D shared by more
        columns than the batch has rows scales the m errors once (m exponentiations) instead of
        each of those columns; the other columns are scaled one by one."""
        pk = self.ctx.peer_key
        cols = np.unique(rows.indices)
        if not cols.size:
            return
        d = self.d_int[cols]
        values, counts = np.unique(d, return_counts=True)
        groups = [(cols[d == v], int(v)) for v in values[counts > rows.shape[0]]]
        rest = cols[~np.isin(d, values[counts > rows.shape[0]])]
        for sub, v in groups:
            scaled = EncryptedArray(pk, object_array(pk.raw_mul_plain(delta._c.tolist(), [v] * delta.size)))
            grad = vecmat(scaled, rows[:, sub])  # X_t^T [D delta] on the columns of this D
            self.W._c[sub] = object_array(pk.raw_add(self.W._c[sub].tolist(), grad._c.tolist()))
        if rest.size:
            grad = vecmat(delta, rows[:, rest])  # X_t^T [-(eta/m) e] over the remaining touched columns
            grad_d = pk.raw_mul_plain(grad._c.tolist(), self.d_int[rest].tolist())  # times D_j
            self.W._c[rest] = object_array(pk.raw_add(self.W._c[rest].tolist(), grad_d))

    def _meter(self, err: IntegerShares, received: EncryptedArray, sample: np.ndarray, eta: int) -> None:
        """Add the sampled rows' squared errors to the epoch's monitored loss (see the module)."""
        mine = [int(v) for v in err.values[sample].tolist()]
        self.loss_rows += len(mine)
        if not self.is_guest:
            self._loss_own += sum(v * v for v in mine)
            self._loss_etas.add(eta)
            return
        pk = self.ctx.peer_key
        cross = EncryptedArray(pk, object_array(pk.raw_mul_plain(received._c[sample].tolist(),
                                                                 [2 * v for v in mine]))).sum()
        term = pk.raw_add_plain(cross._c.ravel().tolist(), [-eta * sum(v * v for v in mine)])
        if eta in self._loss_cts:
            term = pk.raw_add([self._loss_cts[eta]], term)
        self._loss_cts[eta] = term[0]

    def epoch_loss(self) -> float:
        ctx, rows = self.ctx, max(self.loss_rows, 1)
        if self.is_guest:
            flat = [v for eta, ct in sorted(self._loss_cts.items()) for v in (eta, int(ct))]
            ctx.session.send(ctx.peer, ints_to_bytes(flat), "lr-loss-terms")
            loss = float(ctx.session.recv_meta(ctx.peer, "lr-loss")["loss"])
        else:
            flat = ints_from_bytes(ctx.session.recv_bytes(ctx.peer, "lr-loss-terms"))
            etas, cts = flat[0::2], flat[1::2]
            if len(flat) % 2 or set(etas) != self._loss_etas:
                raise ValueError("the guest's loss terms do not match this epoch's steps")
            values = ctx.private_key.decrypt(EncryptedArray(ctx.public_key, object_array(cts))).tolist()
            total = self._loss_own
            for eta, v in zip(etas, values):
                if int(v) % eta:
                    raise ValueError("the guest's loss terms are not multiples of their step factor")
                total -= int(v) // eta
            loss = total / 2.0 ** (2 * self.f) / rows
            ctx.session.send(ctx.peer, {"loss": loss}, "lr-loss")
        self._loss_cts, self._loss_own, self._loss_etas, self.loss_rows = {}, 0, set(), 0
        return loss

    def logits(self, session: Any, feats: Features, to: str) -> np.ndarray | None:
        sh = {self.me: feats.fx + self.S[self.me] - self.f,
              self.peer_index: self.fxs[self.peer_index] + self.S[self.peer_index] - self.f}
        if feats.fx != self.fx:
            raise ConfigError("prediction features must use the training feature scale")
        parts = []
        for start in range(0, feats.X.shape[0], 4096):
            rows = feats.X[start:start + 4096]
            parts.append(self._forward(rows, sh, "p"))
        values = np.concatenate([p.values for p in parts]) if parts else np.zeros(0, dtype=object)
        return self.reveal(IntegerShares(self.ctx, values, self.f), to)

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
        peer_part = ints_from_bytes(ctx.session.recv_bytes(ctx.peer, "open-share"))
        total = [int(a) + int(b) for a, b in zip(mine.values.tolist(), peer_part)]
        return np.array(total, dtype=np.float64) / (1 << out_bits[self.me])


def _minus_labels(values: Any, y: np.ndarray, scale_bits: int) -> Any:
    """The guest's share minus its labels at scale 2^scale_bits (integers, exact)."""
    return values - np.asarray(y, dtype=object) * (1 << scale_bits)


def _ints_bytes(values: Any) -> bytes:
    return ints_to_bytes([int(v) for v in np.asarray(values, dtype=object).ravel().tolist()])
