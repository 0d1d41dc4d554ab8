"""The training parameters of vertical logistic regression, validated once at construction.

Both parties must train with the same parameters; :meth:`LRParams.digest` is what they compare
(and what a checkpoint records), leaving out the settings that may differ between runs or parties.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from ...errors import ConfigError

LAYOUTS = ("encrypted", "caesar")
SIGMOIDS = {"taylor1": 2, "minimax1": 3}  # slope 2^-s


@dataclass(frozen=True)
class LRParams:
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

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.sigmoid not in SIGMOIDS:
            raise ConfigError(f"sigmoid must be one of {tuple(SIGMOIDS)}, got {self.sigmoid!r}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError("epochs and batch_size must be positive")
        if self.learning_rate != "auto" and (isinstance(self.learning_rate, (str, bool))
                                             or not self.learning_rate > 0):
            raise ConfigError(f"learning_rate must be 'auto' or a positive number, got {self.learning_rate!r}")
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

    def digest(self) -> str:
        """A short hash of the parameters that fix the trained model (not epochs, paths or seeds)."""
        fields = asdict(self)
        for volatile in ("epochs", "checkpoint_dir", "resume", "seed", "early_stopping", "monitor", "tol"):
            fields.pop(volatile)
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
