"""Declared costs of the n-party engine's operations: rounds and bytes sent per item, as
functions of the number of parties n, the limbs L of the basis and the modulus bit length w.

These are the figures ``docs/mpc.md`` prints (``python -m shaper.protocols.additive.costs``
writes its table) and the traffic tests check against what a run actually sends. Bytes are
payload per item summed over all parties, divided by n (the average party), message framing
excluded; rounds count sequential message flights on the critical path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ot import K

__all__ = ["COSTS", "Cost", "markdown"]

OT = 16 / K   # bytes of extension matrix per extended OT (receiver -> sender): 128/K bits
WORD = 8      # bytes per residue / ring element


@dataclass(frozen=True)
class Cost:
    what: str
    rounds: Callable[[int, int, int], int]
    bytes: Callable[[int, int, float], float]  # average bytes sent per party per item
    note: str = ""


def _b2a_total(n: int, L: int) -> float:
    return n * (n - 1) / 2 * (OT + WORD * L)


def _powers_total(n: int, L: int, w: float, d: int) -> float:
    return n * (n - 1) / 2 * L * (d - 1) * w * (OT + WORD * (d - 1))


COSTS: dict[str, Cost] = {
    "ring-triple": Cost("Z_2^64 Beaver triple (Gilboa, 64 OTs per ordered pair)",
                        lambda n, L, w: 2, lambda n, L, w: (n - 1) * 64 * (OT + WORD)),
    "mod-triple": Cost("triple mod q (w OTs per ordered pair and limb)",
                       lambda n, L, w: 2, lambda n, L, w: (n - 1) * L * w * (OT + WORD)),
    "square": Cost("square pair (a, a^2) mod q (the power chain: w OTs per unordered pair and limb)",
                   lambda n, L, w: 2 * (n - 1), lambda n, L, w: _powers_total(n, L, w, 2) / n),
    "power-4": Cost("power tuple (a, a^2, a^3, a^4) mod q (3w OTs per unordered pair and limb, 3 offsets)",
                    lambda n, L, w: 2 * (n - 1), lambda n, L, w: _powers_total(n, L, w, 4) / n),
    "bit-triple": Cost("Z_2 triple (one random OT per ordered pair, one correction bit)",
                       lambda n, L, w: 2, lambda n, L, w: (n - 1) * (OT + 1 / 8)),
    "mul-ring": Cost("Z_2^64 multiplication (open x - a, y - b)", lambda n, L, w: 1,
                     lambda n, L, w: (n - 1) * 2 * WORD),
    "mul-mod": Cost("multiplication mod the basis", lambda n, L, w: 1, lambda n, L, w: (n - 1) * 2 * WORD * L),
    "and": Cost("AND of shared bits", lambda n, L, w: 1, lambda n, L, w: (n - 1) * 2 / 8),
    "reveal": Cost("reveal to all, per residue", lambda n, L, w: 1, lambda n, L, w: (n - 1) * WORD * L),
    "b2a": Cost("Z_2 -> Z_q, every limb (n(n-1)/2 correlated OTs with L offsets)",
                lambda n, L, w: 2 * (n - 1), lambda n, L, w: _b2a_total(n, L) / n),
    "t2a": Cost("Z_3 -> Z_q, every limb (n(n-1) correlated OTs with 3L offsets)",
                lambda n, L, w: 4 * (n - 1), lambda n, L, w: n * (n - 1) * (OT + 3 * WORD * L) / n),
    "a2b": Cost("Z_q -> Z_2 (n-1 modular adders, <= 3w+1 ANDs each), bit triples excluded",
                lambda n, L, w: (n - 1) * (3 * w + 2), lambda n, L, w: (n - 1) * (3 * w + 1) * (n - 1) * 2 / 8),
    "gaussian": Cost("discrete Gaussian (225 ANDs + 6 conversions to L limbs), bit triples excluded",
                     lambda n, L, w: 5 * 41 + 3 + 5 + 2 * (n - 1),
                     lambda n, L, w: 225 * (n - 1) * 2 / 8 + 6 * _b2a_total(n, L) / n),
    "ternary": Cost("uniform ternary (a Z_3 share each, then Z_3 -> Z_q)",
                    lambda n, L, w: 4 * (n - 1), lambda n, L, w: n * (n - 1) * (OT + 3 * WORD * L) / n),
    "uniform": Cost("uniform mod q (each party's share uniform)", lambda n, L, w: 0, lambda n, L, w: 0.0),
}


def markdown(parties: tuple[int, ...] = (2, 4, 8), limbs: int = 9, bits: int = 61) -> str:
    """The docs table: rounds and average bytes sent per party per item."""
    head = "| operation | rounds | " + " | ".join(f"bytes, n = {n}" for n in parties) + " |"
    rule = "|---|---|" + "---|" * len(parties)
    rows = [head, rule]
    for key, c in COSTS.items():
        rounds = ", ".join(str(c.rounds(n, limbs, bits)) for n in parties)
        cells = " | ".join(f"{c.bytes(n, limbs, bits):,.1f}" for n in parties)
        rows.append(f"| `{key}`: {c.what} | {rounds} | {cells} |")
    return "\n".join(rows) + f"\n\n(L = {limbs} limbs, w = {bits} bits; rounds listed for n = {', '.join(map(str, parties))}.)"


if __name__ == "__main__":
    print(markdown())
