"""Bit-sliced boolean gates for three-party replicated sharing, and the AES-128-CTR keystreams
behind its zero sharings: the Rust extension where it is built, numpy otherwise.

A party's state is two uint64 arrays ``X``, ``A`` of (slots, words): row s holds the party's two
share components of the wire in register s, bit k of word j being circuit instance 64 j + k.
Gates come from the layered schedule (:class:`shaper.circuits.bristol.Schedule`): local gates as
int32 rows [op, a, b, c, out] (codes below), AND gates as rows [a, b, out]. Both back ends apply
local gates in row order (a gate may read a register an earlier gate of the layer wrote) and
give bit-identical results; the numpy path is the oracle the native one is tested against and
the fallback where the extension is absent or ``SHAPER_NATIVE=off``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from . import native as _native_kernel

try:  # the extension is optional: every layer has a pure-Python path
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["XOR", "AND", "INV", "EQW", "EQ0", "EQ1", "XOR3", "and_finish", "and_masked", "and_prf", "local",
           "native_gates", "native_keystream"]

# gate codes, the one definition (native/src/rss.rs uses the same numbers); AND is never a local
# gate and XOR3 (a ^ b ^ c) exists only in schedules
XOR, AND, INV, EQW, EQ0, EQ1, XOR3 = 0, 1, 2, 3, 4, 5, 6
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def native_gates() -> bool:
    """True when the native gates run (extension built, ``SHAPER_NATIVE`` not ``off``)."""
    return _native is not None and _native_kernel.mode() != "off"


@functools.cache
def _vaes() -> bool:
    return _native is not None and bool(_native.KeyStream.available())


def native_keystream(key: bytes) -> Any | None:
    """A VAES AES-128-CTR keystream for ``key`` (the object has ``words(count)``), or ``None``
    where the CPU lacks VAES (with AVX2), the extension is absent or ``SHAPER_NATIVE=off``."""
    return _native.KeyStream(key) if native_gates() and _vaes() else None


def _check_state(X: np.ndarray, A: np.ndarray) -> None:
    if X.shape != A.shape or X.dtype != np.uint64 or A.dtype != np.uint64 or X.ndim != 2:
        raise ValueError(f"share arrays must be two uint64 arrays of one 2-D shape, got {X.shape} and {A.shape}")


def _check_slots(rows: np.ndarray, columns: slice, slots: int) -> None:
    used = rows[:, columns]
    if used.size and (used.max() >= slots or used.min() < -1):
        raise ValueError(f"gate rows name a slot outside 0..{slots}")


def local(X: np.ndarray, A: np.ndarray, gates: np.ndarray) -> None:
    """Local gates (rows [op, a, b, c, out]) on the share arrays, in place, in row order."""
    if native_gates():
        _native.rss_local(X, A, gates)
        return
    _check_state(X, A)
    _check_slots(gates, slice(1, 5), X.shape[0])
    for op, a, b, c, out in gates.tolist():
        if op == XOR:
            X[out] = X[a] ^ X[b]
            A[out] = A[a] ^ A[b]
        elif op == XOR3:
            X[out] = X[a] ^ X[b] ^ X[c]
            A[out] = A[a] ^ A[b] ^ A[c]
        elif op == INV:
            X[out] = X[a]
            A[out] = ~A[a]
        elif op == EQW:
            X[out] = X[a]
            A[out] = A[a]
        elif op in (EQ0, EQ1):
            X[out] = 0
            A[out] = _ALL_ONES if op == EQ1 else 0
        else:
            raise ValueError(f"unknown gate code {op}")


def and_masked(X: np.ndarray, A: np.ndarray, ands: np.ndarray, out: np.ndarray, m1: np.ndarray,
               m2: np.ndarray) -> None:
    """First half of an AND layer: ``out[g] = m1[g] ^ m2[g] ^ (X[a] & X[b]) ^ (A[a] & A[b])``
    for rows [a, b, out] (this party's message, the zero sharing given as two keystreams)."""
    if native_gates():
        _native.rss_and_masked(X, A, ands, out, m1, m2)
        return
    _check_state(X, A)
    _check_slots(ands, slice(0, 3), X.shape[0])
    a, b = ands[:, 0], ands[:, 1]
    np.bitwise_xor(m1, m2, out=out)
    out ^= X[a] & X[b]
    out ^= A[a] & A[b]


def and_prf(X: np.ndarray, A: np.ndarray, ands: np.ndarray, out: np.ndarray, own: Any, prev: Any) -> None:
    """:func:`and_masked` with the masks drawn row by row from two native keystreams inside the
    kernel (native only: call it with streams from :func:`native_keystream`)."""
    _native.rss_and_prf(X, A, ands, out, own, prev)


def and_finish(X: np.ndarray, A: np.ndarray, ands: np.ndarray, r: np.ndarray, r_prev: np.ndarray) -> None:
    """Second half: with r (ours) and r_prev (received from the previous party) the new share of
    gate g's output register is (r_prev ^ r, r)."""
    if native_gates():
        _native.rss_and_finish(X, A, ands, r, r_prev)
        return
    _check_state(X, A)
    _check_slots(ands, slice(0, 3), X.shape[0])
    o = ands[:, 2]
    X[o] = r_prev ^ r
    A[o] = r
