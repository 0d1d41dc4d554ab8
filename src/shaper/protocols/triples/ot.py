"""Beaver triples from oblivious transfer, for any number of parties (SecureML / MP-SPDZ's Semi
style, passive): no dealer, no third party, no Paillier.

Every party draws its own shares a_i, b_i; c = a b = sum_i a_i b_i + sum_{i != j} a_i b_j, and
each cross term a_i b_j is one OLE between i (sender, offsets a_i) and j (receiver, choice bits
= the bits of b_j): Gilboa's product, one correlated OT per bit of b_j
(:meth:`~shaper.protocols.ot.OtLinks.cot`). All ordered pairs run at once: two messages
per pair, whatever n.

==========================  ===================================  ==================================
triple                      OTs per triple per ordered pair      bytes sent per pair and direction
==========================  ===================================  ==================================
Z_2^64 (``elementwise``)    64                                   64 x (4 + 8)
mod q (``mod_triples``)     bitlen(q) per limb                   bitlen(q) x (4 + 8) per limb
matrix (m, k) @ (k, n)      64 k n (mod q: bitlen(q) k n), with  k n 64 (4 + 8 m)
                            m offsets per choice bit
bits (``bit_triples``)      1 random OT per AND                  4 bytes + 1 bit per AND
powers a..a^d (``powers``)  (d-1) bitlen(q) per unordered pair    (d-1) bitlen(q) x (4 + 8 (d-1))
                            and limb                             per unordered pair and limb
truncation pair             64 bit conversions (see below)       64 x (4 + 8) per pair of parties
==========================  ===================================  ==================================

(4 bytes: SoftSpoken k = 4's extension message per OT, see :mod:`~shaper.protocols.ot`.)

Truncation pairs (r, r >> d) come from 64 random shared bits converted to Z_2^64 (the B2A
chain of :mod:`~shaper.protocols.additive.convert`): r = sum 2^j r_j and r >> d =
sum_{j >= d} 2^(j - d) r_j - 2^(63 - d) r_63 (the arithmetic shift).

Security: semi-honest, any n - 1 parties colluding (each OLE hides b_j from the sender by OT
and a_i from the receiver by the pads). Triples are single-use.
"""

from __future__ import annotations

from math import comb
from typing import Any

import numpy as np

from ...kernels.modq import Ring, add_mod, matmul_mod, mul_mod
from ..additive.convert import bits_to_ring
from .source import Triple, TripleSource

__all__ = ["OtTriples"]

MAX_OFFSETS = 256  # offsets per choice bit in one call (the hash tweak's column byte)


def _links(engine: Any) -> Any:
    return engine.ot_links()


def _cross(engine: Any, offsets: np.ndarray, values: np.ndarray, moduli: list[int], bits: int) -> np.ndarray:
    """This party's share of sum over ordered pairs (s != r) of offsets_s * values_r, per modulus:
    offsets (e, k) as sender to every peer, values (e,) as receiver from every peer."""
    peers = [p for p in range(engine.parties) if p != engine.me]
    recv, sent = _links(engine).cot({p: values for p in peers}, {p: offsets for p in peers}, moduli, bits)
    ring, total = Ring(moduli), np.zeros(offsets.shape, dtype=np.uint64)
    for part in list(recv.values()) + list(sent.values()):
        total = ring.add(total, part)
    return total


def _by_power(part: np.ndarray, d: int, count: int, qs: np.ndarray) -> np.ndarray:
    """Correlated-OT outputs ((d-1) count, d-1): block t (choice a^t), column c - 1 (offset of
    y^c) -> per power e = t + c the sum of its terms mod q, (d, count) (power 1 gets none)."""
    blocks = part.reshape(d - 1, count, d - 1)
    out = np.zeros((d, count), dtype=np.uint64)
    for t in range(1, d):
        for c in range(1, d - t + 1):
            out[t + c - 1] = add_mod(out[t + c - 1], blocks[t - 1, :, c - 1], qs)
    return out


class OtTriples(TripleSource):
    """Triples, bit triples and truncation pairs made by the parties themselves with OT
    extension (any n >= 2; the two-party case serves :class:`~shaper.protocols.hybrid.Hybrid2PC`)."""

    name = "ot"

    def elementwise(self, engine: Any, count: int) -> Triple:
        a, b = engine.prg.uint64(count), engine.prg.uint64(count)
        c = a * b + _cross(engine, a[:, None], b, [0], 64)[:, 0]
        return a, b, c

    def matrix(self, engine: Any, m: int, k: int, n: int) -> Triple:
        a, b = engine.prg.uint64((m, k)), engine.prg.uint64((k, n))
        c = np.matmul(a, b) + self._matrix_cross(engine, a, b, 0)
        return a, b, c

    def _matrix_cross(self, engine: Any, a: np.ndarray, b: np.ndarray, q: int) -> np.ndarray:
        """Share of sum over pairs of A_s @ B_r: choice values B_r[t, j] (k n of them), each
        carrying the column A_s[:, t] as m offsets (in chunks of MAX_OFFSETS rows)."""
        (m, k), n = a.shape, b.shape[1]
        bits = 64 if q == 0 else q.bit_length()
        values = np.ascontiguousarray(b).ravel()  # index t n + j
        out = np.zeros((m, n), dtype=np.uint64)
        for lo in range(0, m, MAX_OFFSETS):
            rows = a[lo:lo + MAX_OFFSETS]  # (r, k)
            offsets = np.ascontiguousarray(np.repeat(rows.T, n, axis=0))  # row t n + j = A[:, t]
            cross = _cross(engine, offsets, values, [q] * len(rows), bits).reshape(k, n, len(rows))
            ring, acc = Ring([q] * len(rows)), np.zeros((n, len(rows)), dtype=np.uint64)
            for t in range(k):
                acc = ring.add(acc, cross[t])
            out[lo:lo + len(rows)] = acc.T
        return out

    def truncation_pairs(self, engine: Any, count: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
        r_bits = engine.random_bits((64,), count)
        ring = bits_to_ring(engine, r_bits, 0)[..., 0]  # (64, count) over Z_2^64
        weights = np.array([1 << j for j in range(64)], dtype=np.uint64)[:, None]
        r = (weights * ring).sum(axis=0, dtype=np.uint64)
        shifted = np.array([(1 << (j - bits)) if j >= bits else 0 for j in range(63)]
                           + [(-(1 << (63 - bits))) % (1 << 64)], dtype=np.uint64)[:, None]
        return r, (shifted * ring).sum(axis=0, dtype=np.uint64)

    def mod_triples(self, engine: Any, count: int, moduli: tuple[int, ...]) -> Triple:
        cols = []
        for q in moduli:
            a, b = engine.prg.below(q, count), engine.prg.below(q, count)
            cross = _cross(engine, a[:, None], b, [q], q.bit_length())
            c = add_mod(mul_mod(a[:, None], b[:, None], (q,)), cross, np.asarray([q], np.uint64))
            cols.append((a, b, c[:, 0]))
        return tuple(np.stack([col[i] for col in cols], axis=-1) for i in range(3))  # type: ignore[return-value]

    def powers(self, engine: Any, count: int, moduli: tuple[int, ...], degree: int) -> np.ndarray:
        """Power tuples (a, a^2, ..., a^d) per modulus, by the chain y_k = y_{k-1} + a_k over the
        parties' private a_k: (y + a_k)^e = y^e + a_k^e + sum_{t=1}^{e-1} C(e, t) a_k^t y^(e-t).
        Party k's choice values are a_k, ..., a_k^(d-1) (bitlen(q) OTs each); every party m < k
        holding shares of y, ..., y^(d-1) sends, per choice value a_k^t, the d - 1 offsets
        C(t + c, t) y_m^c (zero where t + c > d). So n(n-1)/2 (d-1) bitlen(q) OTs per tuple and
        limb and n - 1 rounds: a square pair costs half a triple, a 4-tuple 1.5 triples (with
        Beaver products it would be a square pair, a triple and a square pair, and 2 more rounds)."""
        if not 2 <= degree <= 64:
            raise ValueError(f"power tuples need a degree of 2..64, got {degree}")
        d, links, out = degree, _links(engine), []
        for q in moduli:
            qs, bits = np.asarray([q], dtype=np.uint64), q.bit_length()
            a = engine.prg.below(q, count)
            mine = [a]
            for _ in range(d - 1):
                mine.append(mul_mod(mine[-1], a, (q,)))
            own = np.stack(mine)  # (d, count): a_me^e
            share = own.copy() if engine.me == 0 else np.zeros((d, count), dtype=np.uint64)
            for k in range(1, engine.parties):
                if engine.me == k:
                    recv, _ = links.cot({m: own[:d - 1].ravel() for m in range(k)}, {}, [q] * (d - 1), bits)
                    share = own.copy()  # party k held nothing before its step
                    for part in recv.values():
                        share = add_mod(share, _by_power(part, d, count, qs), qs)
                elif engine.me < k:
                    offsets = np.zeros((d - 1, count, d - 1), dtype=np.uint64)
                    for t in range(1, d):
                        for c in range(1, d - t + 1):
                            offsets[t - 1, :, c - 1] = mul_mod(share[c - 1], np.uint64(comb(t + c, t) % q), (q,))
                    _, sent = links.cot({}, {k: offsets.reshape(-1, d - 1)}, [q] * (d - 1), bits)
                    share = add_mod(share, _by_power(sent[k], d, count, qs), qs)
            out.append(share)
        return np.stack(out, axis=-1)

    def mod_matrix(self, engine: Any, m: int, k: int, n: int, modulus: int) -> Triple:
        q = int(modulus)
        a, b = engine.prg.below(q, (m, k)), engine.prg.below(q, (k, n))
        c = add_mod(matmul_mod(a, b, q), self._matrix_cross(engine, a, b, q), np.uint64(q))
        return a, b, c

    def bit_triples(self, engine: Any, words: int) -> Triple:
        a, b = engine.prg.uint64(words), engine.prg.uint64(words)
        return a, b, (a & b) ^ _links(engine).bit_cross(a, b)
