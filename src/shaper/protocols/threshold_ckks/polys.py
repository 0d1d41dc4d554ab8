"""Polynomials shared on the n-party engine, as threshold CKKS moves them: an engine sharing
(one value per coefficient and limb) as this party's kernel rows, opening kernel rows to every
party or to one, and seeds no party chose alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...crypto.ckks.multiparty import seed_from_opened
from ..api import ModShares

__all__ = ["joint_seed", "open_rows", "share_rows"]


def share_rows(x: Any) -> np.ndarray:
    """An engine sharing (N, R) -> this party's share as kernel rows (R, N)."""
    return np.ascontiguousarray(x.share.T)


def open_rows(engine: Any, rows: np.ndarray, primes: tuple[int, ...], to: int | None = None) -> np.ndarray | None:
    """Opens shares held as kernel rows (..., R, N) to every party (or to ``to``; None elsewhere)."""
    moved = np.moveaxis(rows, -2, -1)  # limbs last, as the engine holds them
    out = ModShares(engine, np.ascontiguousarray(moved), primes).reveal(to)
    return None if out is None else np.ascontiguousarray(np.moveaxis(out, -1, -2))


def joint_seed(engine: Any, what: str) -> bytes:
    """A 32-byte seed no party chose alone: opened uniform shares, hashed."""
    r = engine.random_mod((4,), ((1 << 61) - 1,)).reveal()
    return seed_from_opened(what, r)
