"""This party's replicated shares: a pair (x_i, a_i) per element, for boolean wires (bit-sliced,
:class:`BitShares`) and for arrays over Z_2^64 (:class:`RingShares`, a
:class:`~shaper.protocols.api.Shared` whose operators forward to its
:class:`~shaper.protocols.replicated.Replicated3PC`). See the engine's module for the scheme."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api import Shared


@dataclass
class BitShares:
    """This party's share of ``width`` bit-sliced wires over ``instances`` circuit instances:
    ``x``, ``a`` of shape (width, words)."""

    x: np.ndarray
    a: np.ndarray
    instances: int

    @property
    def width(self) -> int:
        return int(self.x.shape[0])

    def __xor__(self, other: "BitShares") -> "BitShares":
        return BitShares(self.x ^ other.x, self.a ^ other.a, self.instances)

    def __invert__(self) -> "BitShares":
        return BitShares(self.x.copy(), ~self.a, self.instances)


class RingShares(Shared):
    """This party's share (x, a) of an array over Z_2^64 (two uint64 arrays of one shape) at
    scale 2^frac_bits."""

    __slots__ = ("x", "a")

    def __init__(self, engine: Any, x: np.ndarray, a: np.ndarray, frac_bits: int = 0) -> None:
        self.engine = engine
        self.x = np.asarray(x, dtype=np.uint64)
        self.a = np.asarray(a, dtype=np.uint64)
        self.frac_bits = int(frac_bits)

    @property
    def components(self) -> tuple[np.ndarray, ...]:
        return (self.x, self.a)

    def with_components(self, components: tuple[np.ndarray, ...], frac_bits: int | None = None) -> "RingShares":
        x, a = components
        return RingShares(self.engine, x, a, self.frac_bits if frac_bits is None else frac_bits)
