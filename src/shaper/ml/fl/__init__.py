"""Federated learning with Paillier (Yang et al.; the workflows of FATE): coordinated vertical
logistic and linear regression with an arbiter (:mod:`.hetero`), and horizontal federated
averaging with encrypted aggregation (:mod:`.fedavg`) of the plaintext models each client trains
on its own rows (:mod:`.local_models`). The messages and what each role learns are in
:mod:`shaper.protocols.fl`; ``docs/fl.md`` has the guide.
"""

from .fedavg import FedAvgParams, FederatedAveraging, plaintext_fedavg
from .hetero import HeteroLinearModel, HeteroParams
from .local_models import MODELS, make_model

__all__ = ["FedAvgParams", "FederatedAveraging", "HeteroLinearModel", "HeteroParams", "MODELS", "make_model",
           "plaintext_fedavg"]
