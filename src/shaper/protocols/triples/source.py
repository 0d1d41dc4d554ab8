"""Where Beaver triples come from: pluggable sources behind one interface (SPU's
``beaver_interface``, FATE's providers), so an engine never switches on a string.

A :class:`TripleSource` makes triple shares on demand for an engine whose store ran dry:
:class:`~shaper.protocols.hybrid.TriGen` (two-party, Paillier: SHAPER's TriGen, the
default of :class:`~shaper.protocols.hybrid.Hybrid2PC`),
:class:`~shaper.protocols.triples.dealer.InsecureDealer` (tests and online-phase benchmarks
only: every party knows every triple) and :class:`StoreOnly` (use what the store holds, e.g.
triples generated offline and loaded from disk, and fail when it runs out).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..api import UnsupportedConversion
from ..ot import links_for
from .store import TriplesExhausted

Triple = tuple[np.ndarray, np.ndarray, np.ndarray]

__all__ = ["StoreOnly", "Triple", "TripleSource"]


class TripleSource(ABC):
    """Makes this party's shares of fresh triples; every party calls it with the same arguments
    at the same point of the program (SPMD)."""

    #: a short name for logs and errors
    name: str = "triples"

    @abstractmethod
    def elementwise(self, engine: Any, count: int) -> Triple:
        """``count`` element-wise triples: this party's shares of a, b and c = a * b (uint64)."""

    @abstractmethod
    def matrix(self, engine: Any, m: int, k: int, n: int) -> Triple:
        """One matrix triple: shares of A (m, k), B (k, n) and C = A @ B mod 2^64."""

    def truncation_pairs(self, engine: Any, count: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
        """Shares of r (uniform in Z_2^64) and of r >> bits (arithmetic): what an engine of more
        than two parties truncates with. Sources that make none say so."""
        raise UnsupportedConversion(f"the {self.name} triple source makes no truncation pairs")

    def mod_triples(self, engine: Any, count: int, moduli: tuple[int, ...]) -> Triple:
        """``count`` triples over a basis of odd moduli: shares (count, L) of a, b and a * b
        mod each q_c (the n-party engine's prime-field and RNS products)."""
        raise UnsupportedConversion(f"the {self.name} triple source makes no prime-field triples")

    def mod_matrix(self, engine: Any, m: int, k: int, n: int, modulus: int) -> Triple:
        """One matrix triple mod an odd modulus: shares of A (m, k), B (k, n), C = A @ B mod q."""
        raise UnsupportedConversion(f"the {self.name} triple source makes no prime-field matrix triples")

    def links(self, engine: Any) -> Any:
        """The correlated-OT links the engine's conversions and samplers use (Z_2 -> Z_q,
        Z_3 -> Z_q, private rotations): OT extension among the parties
        (:class:`~shaper.protocols.ot.OtLinks`, one per session)."""
        return links_for(engine.session)

    def powers(self, engine: Any, count: int, moduli: tuple[int, ...], degree: int) -> np.ndarray:
        """``count`` power tuples over a basis of odd moduli: shares (degree, count, L) of a, a^2,
        ..., a^degree mod each q_c for a uniform a (degree 2: square pairs)."""
        raise UnsupportedConversion(f"the {self.name} triple source makes no power tuples")

    def bit_triples(self, engine: Any, words: int) -> Triple:
        """``64 * words`` bit triples, packed: XOR shares (words,) of a, b and a AND b."""
        raise UnsupportedConversion(f"the {self.name} triple source makes no bit triples")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class StoreOnly(TripleSource):
    """No generation on demand: what the engine's store holds is all there is."""

    name = "store"

    def elementwise(self, engine: Any, count: int) -> Triple:
        raise TriplesExhausted(f"{count} more triples needed, {engine.triples.available} in the store "
                               "(the triple source is StoreOnly: generate or load more first)")

    def matrix(self, engine: Any, m: int, k: int, n: int) -> Triple:
        raise TriplesExhausted(f"no ({m}x{k}) @ ({k}x{n}) matrix triple in the store "
                               "(the triple source is StoreOnly)")
