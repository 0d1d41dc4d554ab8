"""Authenticated shares over odd prime moduli (SPDZ's representation, MASCOT's field case).

Every party i holds, for each modulus q of a basis, K secret MAC keys alpha_i^(1..K), each
uniform in [0, B_q) with B_q = min(q, 2^KEY_BITS); the global keys are alpha^(k) = sum_i
alpha_i^(k) mod q, known to no coalition short of all parties.
An authenticated value [x] is, at party i, a share x_i and K MAC shares m_i^(k) with

    sum_i x_i = x   and   sum_i m_i^(k) = alpha^(k) x   (mod q, for every k).

Linear operations act on shares and MAC shares alike; a public constant c is added to party
0's share and alpha_i^(k) c to every party's MAC shares. A party that opens a wrong share must
also shift the MAC sum by alpha^(k) times its error for every k without knowing alpha: the
batched check (:mod:`.check`) catches it except with probability (2/B_q)^K per modulus.

**How many keys, how wide.** One key gives a check that passes a deviation with probability at
most 1/B_q (the adversary must hit the honest party's key: the global key is uniform over B_q
values whatever the others chose) + 1/q (the random combination cancels its error) <= 2/B_q. The
engine takes K = ceil(SOUNDNESS / (log2 B_q - 1)) independent keys per modulus, with their own
random combinations, so every check is sound except with probability at most 2^-SOUNDNESS: 2
keys of 40 bits for the 50..61-bit primes of RNS-CKKS (2^-78), 3 for 31..33-bit moduli. Keys of
KEY_BITS = 40 bits rather than the full field cost 40 correlated OTs per authenticated value and
key instead of bitlen(q) (MASCOT's COPE runs one OT per key bit), a third less at 61 bits, for
the same soundness target; a range proof's degree-16 check under such a key keeps 2^-35.9 per
key (:mod:`.ranges`). Moduli below 2^30 (Z_3 among them) are refused: their MACs would need too
many keys.

:class:`AuthShares` subclasses :class:`~shaper.protocols.api.ModShares`, so every program
written against the engine interface's prime-field domain runs on it unchanged.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import ConfigError
from ...kernels.modq import add_mod, lift_public, moduli_array, mul_mod, neg_mod
from ..api import ModShares

__all__ = ["KEY_BITS", "MIN_MODULUS_BITS", "SOUNDNESS", "AuthShares", "check_soundness", "key_range", "keys_for",
           "soundness_bits"]

#: every MAC check passes a deviation with probability at most 2^-SOUNDNESS
SOUNDNESS = 64
#: the smallest modulus the engine authenticates (bits)
MIN_MODULUS_BITS = 31
#: a MAC key is uniform below min(q, 2^KEY_BITS)
KEY_BITS = 40


def key_range(q: int) -> int:
    """B_q: every party's MAC keys mod q are uniform in [0, B_q)."""
    return min(int(q), 1 << KEY_BITS)


def _per_key(q: int) -> float:
    """-log2 of the chance 2/B_q that one key's check passes a deviation."""
    return math.log2(key_range(q)) - 1


def keys_for(q: int, soundness: int = SOUNDNESS) -> int:
    """MAC keys per modulus q for a check sound except with probability 2^-soundness."""
    bits = int(q).bit_length()
    if bits < MIN_MODULUS_BITS:
        raise ConfigError(f"the active engine authenticates moduli of at least {MIN_MODULUS_BITS} bits; {q} has "
                          f"{bits} (for Z_3 or Z_2 use the conversions into a large prime)")
    return math.ceil(soundness / _per_key(q))


def soundness_bits(moduli: Sequence[int], keys: int) -> float:
    """-log2 of the probability that one check passes a deviation: the weakest modulus, K keys."""
    return min(keys * _per_key(q) for q in moduli)


def check_soundness(moduli: Sequence[int], soundness: int = SOUNDNESS) -> int:
    """The key count of a basis: the most any of its moduli needs."""
    return max(keys_for(q, soundness) for q in moduli)


class AuthShares(ModShares):
    """This party's authenticated shares over a basis: ``share`` uint64 (..., L) as in
    :class:`~shaper.protocols.api.ModShares`, and ``mac`` uint64 (K, ..., L), the MAC shares
    under the engine's K keys of each modulus. Local operations keep both; products,
    openings and inputs go to the engine."""

    __slots__ = ("mac",)

    def __init__(self, engine: Any, share: np.ndarray, mac: np.ndarray, moduli: Sequence[int]) -> None:
        super().__init__(engine, share, moduli)
        self.mac = np.asarray(mac, dtype=np.uint64)
        if self.mac.shape[1:] != self.share.shape:
            raise ValueError(f"MAC shares of shape {self.mac.shape} do not cover shares of shape {self.share.shape}")

    @property
    def keys(self) -> int:
        return self.mac.shape[0]

    def _like(self, share: np.ndarray, mac: np.ndarray) -> "AuthShares":
        return AuthShares(self.engine, share, mac, self.moduli)

    def __getitem__(self, index: Any) -> "AuthShares":
        idx = index if isinstance(index, tuple) else (index,)
        sel = idx if any(i is Ellipsis for i in idx) else idx + (Ellipsis,)
        return self._like(self.share[sel], self.mac[(slice(None),) + sel])

    def reshape(self, *shape: Any) -> "AuthShares":
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        full = tuple(dims) + (len(self.moduli),)
        return self._like(self.share.reshape(full), self.mac.reshape((self.keys,) + full))

    @staticmethod
    def concat(parts: Sequence["AuthShares"]) -> "AuthShares":
        """Join along the first value axis (same basis and keys)."""
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        return AuthShares(first.engine, np.concatenate([p.share for p in parts]),
                          np.concatenate([p.mac for p in parts], axis=1), first.moduli)

    def limb(self, c: int) -> "AuthShares":
        return AuthShares(self.engine, self.share[..., c:c + 1], self.mac[..., c:c + 1], (self.moduli[c],))

    def _check_other(self, other: Any) -> "AuthShares":
        if not isinstance(other, AuthShares):
            raise TypeError(f"authenticated shares combine only with authenticated shares of the same engine, got "
                            f"{type(other).__name__}")
        self._same(other)
        if other.engine is not self.engine:
            raise ValueError("authenticated shares from different engines cannot be combined")
        return other

    def _aligned(self, other: "AuthShares") -> tuple["AuthShares", "AuthShares"]:
        """Both operands broadcast to one value shape (numpy's rules), with the keys they share."""
        keys = min(self.keys, other.keys)
        shape = np.broadcast_shapes(self.shape, other.shape)

        def fit(x: "AuthShares") -> "AuthShares":
            if x.shape == shape and x.keys == keys:
                return x
            full = tuple(shape) + (len(x.moduli),)
            lead = (1,) * (len(shape) - len(x.shape))       # the value axes numpy would prepend
            mac = x.mac[:keys].reshape((keys,) + lead + x.share.shape)
            return AuthShares(x.engine, np.broadcast_to(x.share, full), np.broadcast_to(mac, (keys,) + full), x.moduli)

        return fit(self), fit(other)

    def __add__(self, other: Any) -> "AuthShares":
        if isinstance(other, ModShares):
            a, b = self._aligned(self._check_other(other))
            qs = moduli_array(self.moduli)
            return AuthShares(self.engine, add_mod(a.share, b.share, qs), add_mod(a.mac, b.mac, qs), self.moduli)
        return self.engine.add_public_mod(self, other)

    __radd__ = __add__

    def __neg__(self) -> "AuthShares":
        qs = moduli_array(self.moduli)
        return self._like(neg_mod(self.share, qs), neg_mod(self.mac, qs))

    def __sub__(self, other: Any) -> "AuthShares":
        if isinstance(other, ModShares):
            return self + (-self._check_other(other))
        return self.engine.add_public_mod(self, _negate(other))

    def __rsub__(self, other: Any) -> "AuthShares":
        return (-self) + other

    def __mul__(self, other: Any) -> "AuthShares":
        if isinstance(other, ModShares):
            return self.engine.mul_mod(self, self._check_other(other))
        lifted = lift_public(other, self.moduli)
        return self._like(mul_mod(self.share, lifted, self.moduli), mul_mod(self.mac, lifted, self.moduli))

    __rmul__ = __mul__

    def sum(self, axis: int = 0) -> "AuthShares":
        """The sum along a value axis (not the basis axis), reduced mod every modulus."""
        if axis < 0:
            axis += len(self.shape)
        if not 0 <= axis < len(self.shape):
            raise ValueError(f"axis {axis} out of range for shares of shape {self.shape}")
        return self._like(_sum_mod(self.share, axis, self.moduli), _sum_mod(self.mac, axis + 1, self.moduli))

    def __repr__(self) -> str:
        return f"AuthShares(shape={self.shape}, moduli={self.moduli}, keys={self.keys})"


def _negate(value: Any) -> Any:
    if isinstance(value, (int, np.integer)):
        return -int(value)
    arr = np.asarray(value)
    return -arr.astype(object) if arr.dtype.kind == "u" else -arr


def _sum_mod(x: np.ndarray, axis: int, moduli: Sequence[int]) -> np.ndarray:
    """Sum of residues < 2^62 along ``axis`` mod each modulus (the last axis), exact: the high
    and low 32 bits are summed apart (no uint64 overflow below 2^32 terms)."""
    lo = (x & np.uint64(0xFFFFFFFF)).sum(axis=axis, dtype=np.uint64)
    hi = (x >> np.uint64(32)).sum(axis=axis, dtype=np.uint64)
    qs = moduli_array(moduli)
    hi_red = hi % qs
    shift = np.asarray([(1 << 32) % q for q in moduli], dtype=np.uint64)
    return add_mod(mul_mod(hi_red, np.broadcast_to(shift, hi_red.shape), moduli), lo % qs, qs)
