"""An insecure triple dealer for tests and online-phase benchmarks.

Both parties derive every triple from a seed they share (``session.shared_prg``), so *each
party knows every triple in full*: a trusted dealer without the trust. It exists so that tests
and benchmarks of the online phase need no Paillier work; never use it on real data (it warns).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ...crypto.prg import Prg
from .source import Triple, TripleSource

__all__ = ["InsecureDealer", "dealer_matrix_triple_insecure", "dealer_triples_insecure"]


def dealer_triples_insecure(shared: Prg, party: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element-wise triple shares from a PRG both parties hold (INSECURE: both know all)."""
    warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
    a, b, a0, b0, c0 = (shared.uint64(count) for _ in range(5))
    c = a * b
    if party == 0:
        return a0, b0, c0
    return a - a0, b - b0, c - c0


def dealer_matrix_triple_insecure(shared: Prg, party: int, m: int, k: int, n: int
                                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A matrix triple from a shared PRG (INSECURE: for tests only)."""
    warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
    a, a0 = shared.uint64((m, k)), shared.uint64((m, k))
    b, b0 = shared.uint64((k, n)), shared.uint64((k, n))
    c0 = shared.uint64((m, n))
    c = np.matmul(a, b)
    if party == 0:
        return a0, b0, c0
    return a - a0, b - b0, c - c0


class InsecureDealer(TripleSource):
    """Triples from a seed all parties share (INSECURE: every party knows every triple)."""

    name = "dealer"

    def __init__(self) -> None:
        self._prg: Prg | None = None

    def _shared(self, engine: Any) -> Prg:
        if self._prg is None:
            self._prg = engine.session.shared_prg(list(range(engine.parties)), tag="dealer-seed")
        return self._prg

    def elementwise(self, engine: Any, count: int) -> Triple:
        return dealer_triples_insecure(self._shared(engine), engine.me, count)

    def matrix(self, engine: Any, m: int, k: int, n: int) -> Triple:
        return dealer_matrix_triple_insecure(self._shared(engine), engine.me, m, k, n)
