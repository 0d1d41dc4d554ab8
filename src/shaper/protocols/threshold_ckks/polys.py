"""Polynomials shared on the n-party engine, as threshold CKKS moves them: an engine sharing
(one value per coefficient and limb) as this party's kernel rows, opening kernel rows to every
party or to one, and seeds no party chose alone.

Openings to every party of key material (:func:`committed_open_rows`) and every joint seed
(:func:`joint_seed`) go through :mod:`~shaper.protocols.threshold_ckks.commit`: each party
commits (SHA-256 with a fresh nonce) to the share it is about to open and opens only after it
holds every commitment. Before, a party that waited for the others' shares (rushing) could
choose the opened key or seed; now it cannot. It can still make a key wrong by deviating inside
the passive engine (the key check catches keys that do not work), not choose it.
:func:`open_rows` is the plain opening (broadcast, then gather); keep it for openings to one
recipient, where only the recipient learns the total.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..api import ModShares
from .commit import committed_open_rows, committed_seed

__all__ = ["committed_open_rows", "joint_seed", "open_rows", "share_rows"]


def share_rows(x: Any) -> np.ndarray:
    """An engine sharing (N, R) -> this party's share as kernel rows (R, N)."""
    return np.ascontiguousarray(x.share.T)


def open_rows(engine: Any, rows: np.ndarray, primes: tuple[int, ...], to: int | None = None) -> np.ndarray | None:
    """Opens shares held as kernel rows (..., R, N) to ``to`` (None elsewhere), or, with ``to``
    None, to every party *without* a commitment: a party that sends last can then choose the
    total. Open key material and anything else whose value must not be chosen to every party
    with :func:`committed_open_rows`."""
    moved = np.moveaxis(rows, -2, -1)  # limbs last, as the engine holds them
    out = ModShares(engine, np.ascontiguousarray(moved), primes).reveal(to)
    return None if out is None else np.ascontiguousarray(np.moveaxis(out, -1, -2))


def joint_seed(engine: Any, what: str) -> bytes:
    """A 32-byte seed no party chose alone: uniform shares opened with commit-before-open
    (:func:`~shaper.protocols.threshold_ckks.commit.committed_seed`), hashed with ``what``."""
    return committed_seed(engine, what)
