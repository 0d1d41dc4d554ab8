"""The plaintext reference engine (SecretFlow SPU's ``ref2k`` idea): the engine interface
(:mod:`shaper.protocols.api`) computed in the clear in one process.

A :class:`~shaper.protocols.additive.shares.SharedArray` made here holds the whole value as its
"share" (the reference plays party 0 and the absent parties hold zeros), so the same program runs
on every engine and the reference's output is the oracle: ring results must match bit for bit;
truncations, which the protocols perform probabilistically (local) or with a one-unit carry
(fused into H2S), match within one unit in the last place. Use it as a debug mode too: run a
computation on the reference to see whether a precision problem is the protocol's or the
fixed-point encoding's. It also stands in for :class:`~shaper.protocols.hybrid.Hybrid2PC`'s
conversions (``h2s`` takes the plaintext integers the ciphertexts would hold).

Security: none — everything is in the clear. For tests and debugging only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..crypto import encoding
from ..crypto.encoding import SIGMA
from ..errors import PlaintextOverflowError
from .additive.shares import AdditiveSharing, IntegerShares, SharedArray
from .api import Shared, public_matmul


class Reference(AdditiveSharing):
    """Plaintext stand-in for an engine of ``parties`` parties (it plays party 0)."""

    me = 0
    conversions: ClassVar[frozenset[str]] = frozenset({"h2s", "s2h"})

    def __init__(self, *, frac_bits: int = 16, sigma: int = SIGMA, parties: int = 2) -> None:
        self.frac_bits = frac_bits
        self.sigma = sigma
        self.parties = parties

    def share(self, values: Any, *, owner: int, frac_bits: int | None = None, tag: str = "share") -> SharedArray:
        f = self.frac_bits if frac_bits is None else frac_bits
        return SharedArray(self, encoding.ring_encode(values, f), f)

    def reveal_ring(self, x: Shared, to: int | None = None, tag: str = "reveal") -> np.ndarray:
        assert isinstance(x, SharedArray)
        return x.share.copy()

    def reveal_integer(self, x: IntegerShares, to: int | None = None, tag: str = "reveal") -> np.ndarray:
        if x.frac_bits:
            return np.array([v / (1 << x.frac_bits) for v in x.values.ravel().tolist()]).reshape(x.shape)
        return x.values.copy()

    def truncate(self, x: Shared, bits: int) -> SharedArray:
        """Exact: an arithmetic shift of the signed value (floor division)."""
        assert isinstance(x, SharedArray)
        shifted = (encoding.to_signed(x.share) >> np.int64(bits)).view(np.uint64)
        return SharedArray(self, shifted, x.frac_bits - bits)

    def mul(self, x: Shared, y: Shared, *, truncate: bool = True) -> SharedArray:
        assert isinstance(x, SharedArray) and isinstance(y, SharedArray)
        z = SharedArray(self, x.share * y.share, x.frac_bits + y.frac_bits)
        return z.truncate(y.frac_bits) if truncate and y.frac_bits else z

    def matmul(self, x: Shared, y: Shared, *, truncate: bool = True) -> SharedArray:
        assert isinstance(x, SharedArray) and isinstance(y, SharedArray)
        self.check_matmul(x, y)
        z = SharedArray(self, np.matmul(x.share, y.share), x.frac_bits + y.frac_bits)
        return z.truncate(y.frac_bits) if truncate and y.frac_bits else z

    def h2s(self, values: Any, *, holder: int, value_bits: int | None = None, mode: str = "ring",
            truncate_bits: int = 0, frac_bits: int = 0, **_: Any) -> SharedArray | IntegerShares:
        """``values``: the plaintext integers the ciphertexts would hold (at scale ``frac_bits``)."""
        ints = np.asarray(values, dtype=object)
        if value_bits is not None and ints.size and max(abs(int(v)) for v in ints.ravel().tolist()) >= 1 << value_bits:
            raise PlaintextOverflowError(f"H2S value exceeds its declared bound of {value_bits} bits")
        if mode == "ring":
            return SharedArray(self, encoding.ring_from_ints(ints), frac_bits)
        out = np.array([int(v) >> truncate_bits for v in ints.ravel().tolist()], dtype=object).reshape(ints.shape)
        return IntegerShares(self, out, frac_bits - truncate_bits)

    def s2h(self, x: SharedArray | IntegerShares, *, key_owner: int, **_: Any) -> np.ndarray:
        """The plaintext integers the ciphertext would hold (mod 2^64 for ring shares)."""
        if isinstance(x, SharedArray):
            return encoding.ring_to_ints(x.share)
        return x.values.copy()

    def sparse_matvec(self, matrix: Any, y: SharedArray, *, owner: int, **_: Any) -> SharedArray:
        return SharedArray(self, public_matmul(matrix, y.share), y.frac_bits)
