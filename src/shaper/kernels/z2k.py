"""Arithmetic mod 2^(64 L) (``native/src/z2k.rs``): the shares and MACs of the active engine's
SPDZ2k domain (:mod:`shaper.protocols.active.spdz2k`) as uint64 arrays (..., L), least
significant word first, and the wide correlated OT that authenticates them. There is no Python
fallback: without the native build :func:`available` is false and the active engine has no ring
domain.

One word (L = 1, the values of the ring Z_2^64 itself) is numpy's own uint64; the kernels take
L = 2, 3 or 4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError

try:  # optional: without the build, the active engine leaves the ring domain out
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["add", "available", "combine", "cot_recv", "cot_send", "csr_matmul", "dot", "lift", "matmul",
           "max_columns", "mul", "mul_word", "neg", "shift_words", "sub", "subset_sums", "sum_axis"]


def available() -> bool:
    """True when the extension is built with the ring kernels."""
    return _native is not None and hasattr(_native, "z2k_cot_send")


def _nat() -> Any:
    if not available():
        raise KernelError("the SPDZ2k ring needs shaper's native extension, which is not built here "
                          "(pip install . builds it with Rust and maturin)")
    return _native


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint64).reshape(-1)


def _binary(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    words = shape[-1]
    if words == 1:
        with np.errstate(over="ignore"):
            return {"add": np.add, "sub": np.subtract, "mul": np.multiply}[name](a, b, dtype=np.uint64).reshape(shape)
    fa, fb = _flat(np.broadcast_to(a, shape)), _flat(np.broadcast_to(b, shape))
    return getattr(_nat(), f"z2k_{name}")(fa, fb, words).reshape(shape)


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b mod 2^(64 L) (broadcasting over the leading axes; the last is the words)."""
    return _binary("add", a, b)


def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b mod 2^(64 L)."""
    return _binary("sub", a, b)


def neg(a: np.ndarray) -> np.ndarray:
    """-a mod 2^(64 L)."""
    return _binary("sub", np.zeros_like(a, dtype=np.uint64), a)


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a b mod 2^(64 L), element by element."""
    return _binary("mul", a, b)


def mul_word(a: np.ndarray, w: Any) -> np.ndarray:
    """a times one word per element (``w`` broadcast to a's leading shape)."""
    a = np.asarray(a, dtype=np.uint64)
    words = a.shape[-1]
    wb = np.broadcast_to(np.asarray(w, dtype=np.uint64), a.shape[:-1])
    if words == 1:
        with np.errstate(over="ignore"):
            return a * wb[..., None]
    return _nat().z2k_mul_word(_flat(a), _flat(wb), words).reshape(a.shape)


def dot(w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """sum_n w_n a_n (L words) for words ``w`` (N,) and elements ``a`` (N, L)."""
    a = np.asarray(a, dtype=np.uint64)
    words = a.shape[-1]
    if words == 1:
        with np.errstate(over="ignore"):
            return np.asarray([(np.asarray(w, np.uint64) * a[:, 0]).sum(dtype=np.uint64)], np.uint64)
    return _nat().z2k_dot(_flat(w), _flat(a), words)


def sum_axis(a: np.ndarray, axis: int | None) -> np.ndarray:
    """Sum over one leading axis (or all of them) mod 2^(64 L)."""
    a = np.asarray(a, dtype=np.uint64)
    words = a.shape[-1]
    if axis is None:
        moved = a.reshape(-1, 1, words)
    else:
        axis = axis % (a.ndim - 1)
        moved = np.moveaxis(a, axis, 0)
    rest = moved.shape[1:-1]
    cols = int(np.prod(rest, dtype=np.int64))
    if words == 1:
        with np.errstate(over="ignore"):
            out = moved.reshape(moved.shape[0], cols).sum(axis=0, dtype=np.uint64)
        return out.reshape(rest + (1,))
    if moved.shape[0] == 0 or cols == 0:
        return np.zeros(rest + (words,), np.uint64)
    return _nat().z2k_sum_rows(_flat(moved), cols, words).reshape(rest + (words,))


def matmul(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A public word matrix (r, k) times elements (k, n, L): (r, n, L)."""
    m = np.ascontiguousarray(m, dtype=np.uint64)
    k, n, words = x.shape
    return _nat().z2k_matmul(_flat(m), m.shape[0], m.shape[1], _flat(x), n, words).reshape(m.shape[0], n, words)


def csr_matmul(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A public CSR word matrix times elements (k, n, L)."""
    k, n, words = x.shape
    rows = len(indptr) - 1
    return _nat().z2k_csr_matmul(_flat(indptr), _flat(indices), _flat(data), k, _flat(x), n, words).reshape(rows, n, words)


def combine(coef: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per row n, sum_t coef_t c_{n,t}: coef (T, L), c (N, T, L) -> (N, L)."""
    n, t, words = c.shape
    return _nat().z2k_combine(_flat(coef), _flat(c), t, words).reshape(n, words)


def subset_sums(bits: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """Per row n, sum_t bit_{n,t} coef_t: bits (N, T) uint8 (0/1), coef (T, L) -> (N, L)."""
    n, t = bits.shape
    words = coef.shape[-1]
    return _nat().z2k_subset_sums(np.ascontiguousarray(bits, dtype=np.uint8).reshape(-1), _flat(coef), t,
                                  words).reshape(n, words)


def lift(a: np.ndarray, words: int) -> np.ndarray:
    """The same residues with ``words`` words: zero-extended, or reduced (truncated)."""
    a = np.asarray(a, dtype=np.uint64)
    have = a.shape[-1]
    if have >= words:
        return np.ascontiguousarray(a[..., :words])
    out = np.zeros(a.shape[:-1] + (words,), np.uint64)
    out[..., :have] = a
    return out


def shift_words(a: np.ndarray, by: int, words: int) -> np.ndarray:
    """a 2^(64 by) mod 2^(64 words)."""
    a = np.asarray(a, dtype=np.uint64)
    out = np.zeros(a.shape[:-1] + (words,), np.uint64)
    keep = max(0, min(a.shape[-1], words - by))
    out[..., by:by + keep] = a[..., :keep]
    return out


def max_columns(words: int) -> int:
    """Elements one OT row carries in the wide COT."""
    return 256 // ((words + 1) // 2)


def cot_send(q: np.ndarray, delta: bytes, tweak: tuple[int, int], offsets: np.ndarray, bits: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Sender of the wide COT over IKNP rows ``q`` (E bits, 16) with ``tweak`` (domain, start):
    offsets (E, K, L) -> (corrections (E bits, K, L), this party's shares (E, K, L))."""
    e, k, words = offsets.shape
    corr, share = _nat().z2k_cot_send(q, delta, tweak[0], tweak[1], _flat(offsets), k, bits, words)
    return corr.reshape(e * bits, k, words), share.reshape(e, k, words)


def cot_recv(t: np.ndarray, tweak: tuple[int, int], choices: np.ndarray, corrections: np.ndarray, bits: int
             ) -> np.ndarray:
    """Receiver: its shares (E, K, L) from rows ``t``, its values ``choices`` (E,) and the
    sender's corrections (E bits, K, L)."""
    rows, k, words = corrections.shape
    return _nat().z2k_cot_recv(t, tweak[0], tweak[1], _flat(choices), _flat(corrections), k, bits,
                               words).reshape(len(choices), k, words)
