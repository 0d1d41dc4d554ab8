"""Applications: vertical logistic regression (the SHAPER/CAESAR job) and its data helpers.

``ml`` only calls ``protocols`` and ``crypto`` public functions.
"""

from . import data, logreg
from .logreg import VerticalLogisticRegression, fit

__all__ = ["data", "logreg", "VerticalLogisticRegression", "fit"]
