"""MASCOT's COPE (Keller, Orsini, Scholl, CCS 2016): pairwise VOLE from correlated OTs, the base of
the active engine's MACs (:mod:`.preprocessing`, :mod:`.vole`) and range proofs (:mod:`.ranges`).

**COPE.** To give shared values x = sum_j x_j MAC shares under alpha^(k) = sum_i alpha_i^(k), every ordered pair (i, j) runs a
correlated OT in which i is the *receiver* with its fixed key alpha_i^(k) as choice value and j
the *sender* with its shares x_j as offsets (one choice value carries up to 256 offsets, so a
batch costs s OTs per 256 values and key, and s x 8 bytes of corrections per value and key,
s = the key's bits: 40 for wide moduli, :mod:`.shares`): the outputs are additive shares of
alpha_i^(k) x_j; with the local products alpha_i^(k) x_i they sum to alpha^(k) x. A sender that
uses different x_j in different OTs shifts the MAC by terms in the bits of alpha_i: the batch
also authenticates one random value per modulus, and a random combination of the batch plus that
value is opened and goes to the MAC check, which then fails unless the sender guessed the bits
its deviation touches (each guess halves its chance of passing, MASCOT Lemma 4). A receiver that
varies its choice bits only corrupts its own MAC shares (the check fails).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...kernels.modq import add_mod
from .shares import key_range

__all__ = ["MAX_OFFSETS", "cope", "cope_checked", "cope_split", "cope_sum"]

MAX_OFFSETS = 256    # offsets per choice value in one correlated OT (the hash tweak's column byte)


def cope(engine: Any, values: np.ndarray, q: int, keys: int, senders: Sequence[int]) -> dict[int, np.ndarray]:
    """This party's shares, per peer, of alpha_i^(k) x_j for every ordered pair (i receiver,
    j sender in ``senders``) this party is in, for its residues ``values`` (N,) mod q: {peer:
    uint64 (keys, N)}. For a pair, the receiver's and the sender's outputs add up to
    alpha_receiver^(k) x_sender mod q (a pairwise VOLE with the receiver's key as Delta)."""
    as_receiver, as_sender, _, _ = _cope_rows(engine, values, q, keys, senders, check_column=False)
    return _merge(as_receiver, as_sender, q=q)


def cope_split(engine: Any, values: np.ndarray | None, q: int, keys: int, senders: Sequence[int]
               ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """:func:`cope` with the two roles apart: ({sender j: this party's share of alpha_me^(k)
    x_j}, {receiver i: this party's share of alpha_i^(k) x_me}), so that each sender's values
    keep MAC shares of their own (:mod:`.vole`'s per-owner base)."""
    as_receiver, as_sender, _, _ = _cope_rows(engine, values, q, keys, senders, check_column=False)
    return as_receiver, as_sender


def _merge(*parts: dict[int, np.ndarray], q: int) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for group in parts:
        for peer, part in group.items():
            out[peer] = add_mod(out[peer], part, np.uint64(q)) if peer in out else part
    return out


def cope_checked(engine: Any, values: np.ndarray | None, q: int, keys: int,
                 owner: int) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], np.ndarray]:
    """:func:`cope` with ``owner`` the only sender, and one more column in every row of 255
    values: a fresh uniform residue z_c of the owner's per chunk c. Returns (the values' parts,
    the z's parts {peer: (keys, chunks)}, the z's at the owner (zeros elsewhere)).

    Why: a receiver chooses its key (the choice value) row by row, so nothing in the OTs makes it
    one value across the chunks of a batch; two receivers can even shift theirs by +d and -d on
    one chunk so that the *global* key, and every MAC check, stays right. A pairwise proof over
    such a VOLE (:mod:`.ranges`) would leak. With a uniform z_c in every chunk, the pairwise check
    of :func:`~.ranges.input_in_range` (a random combination opened, every receiver's pairwise
    answer compared by the owner) fails for a receiver that varied its key, unless it predicts
    (Delta_c - alpha) z_c: probability 1/q."""
    as_receiver, as_sender, checks, z = _cope_rows(engine, values, q, keys, [owner], check_column=True)
    return _merge(as_receiver, as_sender, q=q), checks, z


def _cope_rows(engine: Any, values: np.ndarray | None, q: int, keys: int, senders: Sequence[int],
               check_column: bool) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], dict[int, np.ndarray], np.ndarray]:
    values = np.asarray(values, dtype=np.uint64)
    n = len(values)
    if n == 0:
        return {}, {}, {}, np.zeros(0, np.uint64)
    cols = min(MAX_OFFSETS - (1 if check_column else 0), n)
    width = cols + (1 if check_column else 0)
    chunks = -(-n // cols)
    bits = (key_range(q) - 1).bit_length()  # one OT per bit of the key (KEY_BITS, or bitlen(q) below that)
    alpha = engine.alpha(q)[:keys]
    me = engine.me
    z = np.zeros(chunks if check_column else 0, np.uint64)
    receive = {j: np.repeat(alpha, chunks) for j in senders if j != me}          # row (k, chunk)
    send = {}
    if me in senders:
        table = np.zeros((chunks, width), np.uint64)
        data = np.zeros(chunks * cols, np.uint64)
        data[:n] = values
        table[:, :cols] = data.reshape(chunks, cols)
        if check_column:
            z = engine.uniform_mod((chunks,), (q,))[:, 0]
            table[:, cols] = z
        rows = np.tile(table, (keys, 1))                                              # row (k, chunk)
        send = {i: rows for i in range(engine.parties) if i != me}
    if not receive and not send:
        return {}, {}, {}, z
    as_receiver, as_sender = engine.ot_links().cot(receive, send, [q] * width, bits)
    qs = np.uint64(q)
    out: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] = ({}, {})
    checks: dict[int, np.ndarray] = {}
    for role, parts in enumerate((as_receiver, as_sender)):
        for peer, part in parts.items():
            part = part.reshape(keys, chunks, width)
            out[role][peer] = part[:, :, :cols].reshape(keys, chunks * cols)[:, :n]
            if check_column:
                col = np.ascontiguousarray(part[:, :, cols])
                checks[peer] = add_mod(checks[peer], col, qs) if peer in checks else col
    return out[0], out[1], checks, z


def cope_sum(engine: Any, values: np.ndarray, q: int, keys: int, senders: Sequence[int]) -> np.ndarray:
    """The sum over this party's pairs of :func:`cope`: uint64 (keys, N)."""
    out = np.zeros((keys, len(values)), np.uint64)
    for part in cope(engine, values, q, keys, senders).values():
        out = add_mod(out, part, np.uint64(q))
    return out
