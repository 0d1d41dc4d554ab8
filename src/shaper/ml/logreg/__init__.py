"""Vertical sparse logistic regression between two parties (CAESAR, SHAPER's workload).

Two organisations hold different features of the same rows (aligned ids); the **guest** also holds
the labels, the **host** does not. They train a logistic regression without revealing features,
labels, or intermediate values, and each learns only its own block of weights (or keeps the model
secret for secure prediction).

    def job(session, X, y=None):                  # the same program at both parties
        model = VerticalLogisticRegression(epochs=10, batch_size=64)   # learning_rate="auto"
        model.fit(session, X, y)                   # y only at the guest
        return model.predict_proba(session, X_test)   # probabilities at the guest

Two protocol layouts (``layout=``):

* ``"encrypted"`` (default; SecretFlow HESS-LR's layout, ``docs/logreg.md``): each
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
  Truncation is local and probabilistic (see :mod:`shaper.protocols.additive.shares`); L2 is
  supported.

The sigmoid is linear: ``"taylor1"`` 0.5 + z/4 or ``"minimax1"`` 0.5 + z/8 (no triples needed).
Each party standardises its own dense columns, preconditions its column steps, and the learning
rate is chosen from one curvature scalar per party; the training loss opened after every epoch
stops (or, under ``learning_rate="auto"``, restarts with half the step) a diverging run
(:mod:`.stability`).

What is revealed: the row count, each party's feature count, feature scale 2^f_x, largest
row L1 norm and curvature (the peer sizes conversions and the step with them), the batch schedule
and the number of epochs; the training loss of each epoch (to both); with monitoring, the guest learns the logits of the monitored rows after each epoch
(it computes loss and AUC from them) and tells the host the two scalars; at the end each party
learns its own weights (``open_weights``). Training is refused when a party has fewer rows than
features, where opened weights could reveal labels. Semi-honest, two parties, no third party.

Checkpoints (``checkpoint_dir``) are written after every epoch; ``resume=True`` continues from the
newest epoch both parties have and, because per-epoch masks and shuffles derive from seeds kept
in the checkpoint, finishes with exactly the model an uninterrupted run would have produced.

Modules, in dependency order: :mod:`.params` (LRParams, validated), :mod:`.schedule` (batch
order, quantised step, per-epoch streams), :mod:`.features` (checks, standardisation and
fixed-point encoding), :mod:`.stability` (step size, preconditioner, divergence rules),
:mod:`.reference` (the plaintext oracle), :mod:`.layout` (what both layouts share),
:mod:`.encrypted` and :mod:`.caesar` (the two layouts), :mod:`.training` (the estimator, its
training job and prediction).
"""

from .encrypted import OUT_BITS
from .params import LAYOUTS, SIGMOIDS, LRParams
from . import stability
from .reference import reference_sgd
from ..shuffle import epoch_order
from .schedule import ETA_BITS, eta_factor
from .training import VerticalLogisticRegression, fit

__all__ = [
    "VerticalLogisticRegression", "fit", "LRParams", "reference_sgd", "stability",
    "LAYOUTS", "SIGMOIDS", "ETA_BITS", "OUT_BITS", "epoch_order", "eta_factor",
]
