"""An insecure triple dealer for tests and online-phase benchmarks.

Every party derives every triple from a seed they all share (``session.shared_prg``), so *each
party knows every triple in full*: a trusted dealer without the trust. It exists so that tests
and benchmarks of the online phase need no Paillier work; never use it on real data (it warns).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ...crypto.prg import Prg
from ...kernels.modq import matmul_mod, mul_mod, sub_mod
from ..ot import InsecureLinks
from .source import Triple, TripleSource

__all__ = ["InsecureDealer", "dealer_matrix_triple_insecure", "dealer_triples_insecure",
           "dealer_truncation_pairs_insecure"]


def _split_insecure(shared: Prg, party: int, parties: int, values: list[np.ndarray]) -> list[np.ndarray]:
    """This party's additive shares of ``values`` (INSECURE: every party can compute all of
    them): parties 0..n-2 take PRG draws (party by party, value by value), the last the rest."""
    shares = [[shared.uint64(v.shape) for v in values] for _ in range(parties - 1)]
    if party < parties - 1:
        return shares[party]
    rest = [v.copy() for v in values]
    for mine in shares:
        for r, s in zip(rest, mine):
            r -= s
    return rest


def dealer_triples_insecure(shared: Prg, party: int, count: int, parties: int = 2
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element-wise triple shares from a PRG every party holds (INSECURE: all know all)."""
    warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
    a, b = shared.uint64(count), shared.uint64(count)
    return tuple(_split_insecure(shared, party, parties, [a, b, a * b]))  # type: ignore[return-value]


def dealer_matrix_triple_insecure(shared: Prg, party: int, m: int, k: int, n: int, parties: int = 2
                                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A matrix triple from a shared PRG (INSECURE: for tests only)."""
    warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
    a, b = shared.uint64((m, k)), shared.uint64((k, n))
    return tuple(_split_insecure(shared, party, parties, [a, b, np.matmul(a, b)]))  # type: ignore[return-value]


def dealer_truncation_pairs_insecure(shared: Prg, party: int, count: int, bits: int, parties: int = 2
                                     ) -> tuple[np.ndarray, np.ndarray]:
    """Shares of r uniform in Z_2^64 and of r' = r >> bits read as signed (arithmetic shift):
    the pairs of probabilistic truncation (INSECURE: for tests only)."""
    warnings.warn("dealer truncation pairs: every party knows every pair; use for tests only", stacklevel=2)
    r = shared.uint64(count)
    r_shift = (r.view(np.int64) >> np.int64(bits)).view(np.uint64)
    return tuple(_split_insecure(shared, party, parties, [r, r_shift]))  # type: ignore[return-value]


class InsecureDealer(TripleSource):
    """Triples from a seed all parties share (INSECURE: every party knows every triple)."""

    name = "dealer"

    def __init__(self) -> None:
        self._prg: Prg | None = None
        self._links: InsecureLinks | None = None

    def links(self, engine: Any) -> InsecureLinks:
        """Correlated OTs computed in the clear (INSECURE, like the triples: for tests, and so that
        conversions and samplers run without the native extension)."""
        if self._links is None:
            warnings.warn("dealer OTs: receivers show their choices to senders; use for tests only", stacklevel=2)
            self._links = InsecureLinks(engine.session)
        return self._links

    def _shared(self, engine: Any) -> Prg:
        if self._prg is None:
            self._prg = engine.session.shared_prg(list(range(engine.parties)), tag="dealer-seed")
        return self._prg

    def elementwise(self, engine: Any, count: int) -> Triple:
        return dealer_triples_insecure(self._shared(engine), engine.me, count, engine.parties)

    def matrix(self, engine: Any, m: int, k: int, n: int) -> Triple:
        return dealer_matrix_triple_insecure(self._shared(engine), engine.me, m, k, n, engine.parties)

    def truncation_pairs(self, engine: Any, count: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
        return dealer_truncation_pairs_insecure(self._shared(engine), engine.me, count, bits, engine.parties)

    def mod_triples(self, engine: Any, count: int, moduli: tuple[int, ...]) -> Triple:
        warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
        shared, qs = self._shared(engine), np.asarray(moduli, dtype=np.uint64)
        a, b = (np.stack([shared.below(q, count) for q in moduli], axis=-1) for _ in range(2))
        values = [a, b, mul_mod(a, b, moduli)]
        shares = [[np.stack([shared.below(q, count) for q in moduli], axis=-1) for _ in values]
                  for _ in range(engine.parties - 1)]
        if engine.me < engine.parties - 1:
            return tuple(shares[engine.me])  # type: ignore[return-value]
        for mine in shares:
            values = [sub_mod(v, s, qs) for v, s in zip(values, mine)]
        return tuple(values)  # type: ignore[return-value]

    def powers(self, engine: Any, count: int, moduli: tuple[int, ...], degree: int) -> np.ndarray:
        warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
        shared, qs = self._shared(engine), np.asarray(moduli, dtype=np.uint64)
        a = np.stack([shared.below(q, count) for q in moduli], axis=-1)
        values = [a]
        for _ in range(degree - 1):
            values.append(mul_mod(values[-1], a, moduli))
        shares = [np.stack([np.stack([shared.below(q, count) for q in moduli], axis=-1) for _ in values])
                  for _ in range(engine.parties - 1)]
        if engine.me < engine.parties - 1:
            return shares[engine.me]
        out = np.stack(values)
        for mine in shares:
            out = sub_mod(out, mine, qs)
        return out

    def mod_matrix(self, engine: Any, m: int, k: int, n: int, modulus: int) -> Triple:
        warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
        shared, q = self._shared(engine), int(modulus)
        a, b = shared.below(q, (m, k)), shared.below(q, (k, n))
        values = [a, b, matmul_mod(a, b, q)]
        shares = [[shared.below(q, v.shape) for v in values] for _ in range(engine.parties - 1)]
        if engine.me < engine.parties - 1:
            return tuple(shares[engine.me])  # type: ignore[return-value]
        for mine in shares:
            values = [sub_mod(v, s, np.uint64(q)) for v, s in zip(values, mine)]
        return tuple(values)  # type: ignore[return-value]

    def bit_triples(self, engine: Any, words: int) -> Triple:
        warnings.warn("dealer triples: every party knows every triple; use for tests only", stacklevel=2)
        shared = self._shared(engine)
        a, b = shared.uint64(words), shared.uint64(words)
        values = [a, b, a & b]
        shares = [[shared.uint64(words) for _ in values] for _ in range(engine.parties - 1)]
        if engine.me < engine.parties - 1:
            return tuple(shares[engine.me])  # type: ignore[return-value]
        for mine in shares:
            values = [v ^ s for v, s in zip(values, mine)]
        return tuple(values)  # type: ignore[return-value]
