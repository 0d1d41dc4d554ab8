"""Applications: vertical logistic regression, federated learning and CNN inference, and what they share.

Vertical logistic regression is the SHAPER/CAESAR job (:mod:`.logreg`), federated learning with
Paillier has coordinated vertical models and FedAvg (:mod:`.fl`), encrypted CNN inference is
:mod:`.cnn`. They share the settings base every party's digest comes from (:mod:`.settings`), the
epoch shuffle (:mod:`.shuffle`), checkpoints (:mod:`.checkpoint`), scoring new rows with a vertical
model's parts (:mod:`.scoring`), data files and alignment (:mod:`.data`, :mod:`.alignment`).

``ml`` only calls ``protocols`` and ``crypto`` public functions.
"""

from . import data, logreg
from .logreg import VerticalLogisticRegression, fit

__all__ = ["data", "logreg", "VerticalLogisticRegression", "fit"]
