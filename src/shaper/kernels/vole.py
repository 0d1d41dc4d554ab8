"""The silent VOLE's local kernels (``native/src/vole.rs``): GGM trees, their leaves' field
values, the LPN encoder and weighted sums for checks, all sans I/O (the protocol is
:mod:`shaper.protocols.active.vole`). There is no Python fallback: without the native build
:func:`available` is false and the active engine authenticates every batch by COPE.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError

try:  # optional: without the build, the active engine uses COPE only
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["available", "ggm_expand", "ggm_punctured", "leaf_values", "lpn", "weighted_sums"]


def available() -> bool:
    """True when the extension is built with the silent-VOLE kernels."""
    return _native is not None and hasattr(_native, "vole_lpn")


def _native_or_raise() -> Any:
    if not available():
        raise KernelError("silent VOLE needs shaper's native extension, which is not built here "
                          "(pip install . builds it with Rust and maturin)")
    return _native


def ggm_expand(roots: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """(leaves (t 2^depth, 16), level sums (t depth 2, 16)) of the trees grown from ``roots`` (t, 16)."""
    return _native_or_raise().vole_ggm_expand(roots, depth)


def ggm_punctured(chosen: np.ndarray, points: np.ndarray, depth: int) -> np.ndarray:
    """Every leaf but ``points[g]`` of tree g (zero there), from the level sums of the side
    away from the point, ``chosen`` (t depth, 16)."""
    return _native_or_raise().vole_ggm_punctured(chosen, points, depth)


def leaf_values(leaves: np.ndarray, q: int, keys: int, tree: int, skip: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(values (keys, m), tree sums (keys, t)) mod q of leaves in trees of ``tree``; the leaves
    at ``skip`` count as zero."""
    return _native_or_raise().vole_leaf_values(leaves, q, keys, tree, skip)


def lpn(base: np.ndarray, noise: np.ndarray, q: int, seed: bytes, check: bytes | None = None) -> Any:
    """``noise + A base`` per row mod q, A the public 10-sparse code of ``seed``; with ``check``
    the pair (it, each row's :func:`weighted_sums` under ``check``), computed in one pass."""
    return _native_or_raise().vole_lpn(base, noise, q, seed, check)


def weighted_sums(rows: np.ndarray, q: int, seed: bytes) -> np.ndarray:
    """Each row's sum weighted by the coins of ``seed`` (AES-CTR words), mod q."""
    return _native_or_raise().vole_weighted_sums(rows, q, seed)
