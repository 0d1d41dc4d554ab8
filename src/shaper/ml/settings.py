"""The settings of a training job, one frozen dataclass per job on one base: vertical logistic
regression (:class:`~shaper.ml.logreg.LRParams`), coordinated vertical linear models
(:class:`~shaper.ml.fl.HeteroParams`) and federated averaging (:class:`~shaper.ml.fl.FedAvgParams`).

A settings object is validated once, when it is made (:meth:`Settings.validate` raises
:class:`~shaper.errors.ConfigError` naming the field), and is immutable afterwards. Every party
of a job must train with the same settings: :meth:`Settings.digest` is what they compare and what
each checkpoint records, a short SHA-256 of every field except :attr:`Settings.LOCAL`, the ones
that may differ between the parties or between runs that train the same model (where a party
keeps its checkpoints, whether it resumes; a job may add its seeds, its epoch count ...).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Iterable

from ..errors import ConfigError

__all__ = ["Settings"]


@dataclass(frozen=True)
class Settings:
    """Base of a job's settings dataclass (see the module notes). Subclasses declare their fields,
    override :meth:`validate` and, where more fields are the party's own, :attr:`LOCAL`."""

    #: the fields that stay out of the digest: this party's own, or free to change between runs
    LOCAL: ClassVar[tuple[str, ...]] = ("checkpoint_dir", "resume")

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first field with a bad value."""

    # -- what the parties compare ------------------------------------------------------------------
    def shared(self) -> dict[str, Any]:
        """Every field the parties must agree on, by name."""
        out = asdict(self)
        for name in self.LOCAL:
            out.pop(name, None)
        return out

    def digest(self) -> str:
        """A short hash of :meth:`shared`: equal digests, equal settings."""
        return hashlib.sha256(json.dumps(self.shared(), sort_keys=True).encode()).hexdigest()[:16]

    # -- checks the subclasses share ---------------------------------------------------------------
    def require_choice(self, name: str, choices: Iterable[Any]) -> None:
        """The field ``name`` must be one of ``choices``."""
        choices = tuple(choices)
        if getattr(self, name) not in choices:
            raise ConfigError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")

    def require_learning_rate(self, *, auto: bool = True) -> None:
        """``learning_rate`` must be a positive number (or ``"auto"`` where ``auto``)."""
        rate = self.learning_rate  # type: ignore[attr-defined]
        if auto and rate == "auto":
            return
        if isinstance(rate, (str, bool)) or not rate > 0:
            expected = "'auto' or a positive number" if auto else "a positive number"
            raise ConfigError(f"learning_rate must be {expected}, got {rate!r}")

