"""A plaintext slot simulator for GHS-style BGV: the evaluator's operations on bare slot vectors
(ghs.md §7 steps 1 and 3: the oracle the encrypted evaluator and the AES circuit are checked against).

:class:`SlotEvaluator` has the same method names as the ciphertext evaluator
(:class:`shaper.crypto.bgv.scheme.Evaluator`) — ``encode``, ``add``, ``add_plain``, ``mul``,
``mul_plain``, ``square``, ``frobenius``, ``automorphism`` and the ``algebra`` attribute — but a
"ciphertext" is just a uint64 numpy vector of the ``nslots`` slot values in GF(2^d) and a
"plaintext" is the same. A circuit written against these names (such as :func:`rotate`, or the AES
round) runs unchanged on either, so the simulator's output is ground truth for the encrypted run.

:func:`rotate` turns :meth:`.algebra.Algebra.rotation` into evaluator calls: Σ κ_u(x · mask), the
0/1 masks multiplied in before the automorphism, κ_1 skipped. It treats its ciphertext argument as
opaque. Nothing here is secret; the simulator reveals everything by design.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .algebra import Algebra

__all__ = ["SlotEvaluator", "rotate", "EvaluatorLike"]


class EvaluatorLike(Protocol):
    """What :func:`rotate` needs of an evaluator (the slot simulator or the encrypted one)."""

    algebra: Algebra

    def encode(self, slots: np.ndarray) -> Any: ...

    def add(self, x: Any, y: Any) -> Any: ...

    def mul_plain(self, x: Any, p: Any) -> Any: ...

    def automorphism(self, x: Any, u: int) -> Any: ...


class SlotEvaluator:
    """Slot-wise GF(2^d) arithmetic with the encrypted evaluator's method names.

    Inputs are uint64 arrays of shape (nslots,) with values < 2^d (checked); outputs are fresh
    uint64 arrays.
    """

    def __init__(self, algebra: Algebra) -> None:
        self.algebra = algebra
        self.field = algebra.field

    def _slots(self, x: np.ndarray) -> np.ndarray:
        arr = np.asarray(x)
        if arr.shape != (self.algebra.nslots,):
            raise ValueError(f"slot vector must have shape ({self.algebra.nslots},), got {arr.shape}")
        return self.field.check(arr, "slot vector")

    def encode(self, slots: np.ndarray) -> np.ndarray:
        """The "plaintext" for these slot values: a checked copy of them."""
        return self._slots(slots).copy()

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._slots(x) ^ self._slots(y)

    def add_plain(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        return self._slots(x) ^ self._slots(p)

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.field.mul(self._slots(x), self._slots(y))

    def mul_plain(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        return self.field.mul(self._slots(x), self._slots(p))

    def square(self, x: np.ndarray) -> np.ndarray:
        return self.field.square(self._slots(x))

    def frobenius(self, x: np.ndarray, j: int) -> np.ndarray:
        """Every slot raised to 2^j (the automorphism X ↦ X^(2^j))."""
        return self.algebra.frobenius(x, j)

    def automorphism(self, x: np.ndarray, u: int) -> np.ndarray:
        """The slot effect of X ↦ X^u (u a unit mod m), see :meth:`.Algebra.automorphism_on_slots`."""
        return self.algebra.automorphism_on_slots(u, x)


def rotate(ev: EvaluatorLike, x: Any, dim: int, k: int) -> Any:
    """Rotate x along hypercube dimension ``dim`` by ``k``: the value at coordinate e_dim moves to
    e_dim + k mod ord_dim, other coordinates and the values themselves unchanged.

    Built from ``ev.automorphism``, ``ev.mul_plain``, ``ev.add``, ``ev.encode`` and
    ``ev.algebra.rotation``: one automorphism on a good dimension, two automorphisms and two
    plaintext products on a bad one, nothing for k ≡ 0. The masks are encoded on every call; an
    evaluator whose ``encode`` is costly may cache it.
    """
    terms = ev.algebra.rotation(dim, k)
    out = None
    for u, mask in terms:
        y = x if mask is None else ev.mul_plain(x, ev.encode(mask))
        if u % ev.algebra.m != 1:
            y = ev.automorphism(y, u)
        out = y if out is None else ev.add(out, y)
    return out
