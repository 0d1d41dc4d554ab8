"""Beaver multiplication over Z_2^64 (Beaver, CRYPTO '91): the online phase.

Given shared x, y and a fresh triple (a, b, c = a*b), the parties open e = x - a and f = y - b
(one message each way, 16 bytes per element), then locally
z = c + e*b + f*a (+ e*f at party 0), so z = x*y mod 2^64. e and f are uniformly random to each
party because a and b are: nothing about x or y is revealed. Matrix products use a matrix
triple (A, B, C = A @ B): Z = C + E@B + A@F (+ E@F at party 0), opening m*k + k*n elements.

Security: semi-honest, two parties; triples must never be reused (a reused triple reveals
x - x' in the clear).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .shares import SharedArray


def beaver_mul(ctx: Any, x: SharedArray, y: SharedArray, triple: tuple[np.ndarray, np.ndarray, np.ndarray],
               tag: str = "beaver") -> SharedArray:
    """Element-wise product of two shared arrays of the same shape (scale = sum of scales)."""
    if x.shape != y.shape:
        xs, ys = np.broadcast_arrays(x.share, y.share)
        x, y = SharedArray(ctx, np.ascontiguousarray(xs), x.frac_bits), SharedArray(ctx, np.ascontiguousarray(ys), y.frac_bits)
    a, b, c = (t.reshape(x.shape) for t in triple)
    mine = np.stack([x.share - a, y.share - b])
    theirs = ctx.session.exchange(ctx.peer, mine, tag)
    if theirs.shape != mine.shape or theirs.dtype != np.uint64:
        raise ValueError(f"Beaver opening from {ctx.peer!r} has shape {theirs.shape}, expected {mine.shape}")
    opened = mine + theirs
    e, f = opened[0], opened[1]
    z = c + e * b + f * a
    if ctx.me == 0:
        z += e * f
    return SharedArray(ctx, z, x.frac_bits + y.frac_bits)


def beaver_matmul(ctx: Any, x: SharedArray, y: SharedArray, triple: tuple[np.ndarray, np.ndarray, np.ndarray],
                  tag: str = "beaver-mm") -> SharedArray:
    """Matrix product of shared (m, k) and (k, n) arrays (scale = sum of scales)."""
    a, b, c = triple
    e_mine, f_mine = x.share - a, y.share - b
    flat = np.concatenate([e_mine.ravel(), f_mine.ravel()])
    theirs = ctx.session.exchange(ctx.peer, flat, tag)
    if theirs.shape != flat.shape or theirs.dtype != np.uint64:
        raise ValueError(f"Beaver opening from {ctx.peer!r} has shape {theirs.shape}, expected {flat.shape}")
    opened = flat + theirs
    e = opened[: e_mine.size].reshape(e_mine.shape)
    f = opened[e_mine.size:].reshape(f_mine.shape)
    z = c + np.matmul(e, b) + np.matmul(a, f)
    if ctx.me == 0:
        z += np.matmul(e, f)
    return SharedArray(ctx, z, x.frac_bits + y.frac_bits)
