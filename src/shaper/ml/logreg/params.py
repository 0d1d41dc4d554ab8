"""The training parameters of vertical logistic regression, validated once at construction.

Both parties must train with the same parameters; :meth:`LRParams.digest` (the one digest of
:class:`shaper.ml.settings.Settings`) is what they compare (and what a checkpoint records),
leaving out the settings that may differ between runs or parties (:attr:`LRParams.LOCAL`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ...errors import ConfigError
from ..settings import Settings

LAYOUTS = ("encrypted", "caesar")
SIGMOIDS = {"taylor1": 2, "minimax1": 3}  # slope 2^-s


@dataclass(frozen=True)
class LRParams(Settings):
    #: not in the digest: they do not change the model an epoch trains (or are this party's own)
    LOCAL: ClassVar[tuple[str, ...]] = ("epochs", "checkpoint_dir", "resume", "seed", "early_stopping", "monitor",
                                        "tol")

    epochs: int = 10
    batch_size: int = 64
    learning_rate: float | str = "auto"
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
    standardize: bool | str = "auto"
    precondition: bool = True
    seed: bytes | None = field(default=None, repr=False)

    def validate(self) -> None:
        self.require_choice("layout", LAYOUTS)
        self.require_choice("sigmoid", SIGMOIDS)
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("epochs and batch_size must be positive")
        self.require_learning_rate(auto=True)
        if self.standardize not in ("auto", True, False):
            raise ConfigError(f"standardize must be 'auto', True or False, got {self.standardize!r}")
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

