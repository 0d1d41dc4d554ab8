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
from ..kernels import modq
from ..kernels.modq import add_mod, basis, lift_public, moduli_array, pack_bits, unpack_bits
from .additive.shares import AdditiveSharing, IntegerShares, SharedArray
from .api import ModShares, Shared, XorShares, public_mask, public_matmul


class Reference(AdditiveSharing):
    """Plaintext stand-in for an engine of ``parties`` parties (it plays party 0)."""

    me = 0
    conversions: ClassVar[frozenset[str]] = frozenset({"h2s", "s2h"})
    domains: ClassVar[frozenset[str]] = frozenset({"ring", "mod", "bits"})

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

    # -- odd moduli and bits, in the clear (the oracle of every engine's other domains) -----------
    def share_mod(self, values: Any, *, owner: int, moduli: Any) -> ModShares:
        mods = basis(moduli)
        return ModShares(self, lift_public(values, mods), mods)

    def reveal_mod(self, x: ModShares, to: int | None = None) -> np.ndarray:
        return x.share.copy()

    def add_public_mod(self, x: ModShares, values: Any) -> ModShares:
        return ModShares(self, add_mod(x.share, lift_public(values, x.moduli), moduli_array(x.moduli)), x.moduli)

    def mul_mod(self, x: ModShares, y: ModShares) -> ModShares:
        x._same(y)
        return ModShares(self, modq.mul_mod(x.share, y.share, x.moduli), x.moduli)

    def matmul_mod(self, x: ModShares, y: ModShares) -> ModShares:
        x._same(y)
        if len(x.moduli) != 1 or len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[0]:
            raise ValueError(f"matmul_mod needs (m, k) @ (k, n) over one modulus, got {x.shape} @ {y.shape} "
                             f"over {len(x.moduli)} moduli")
        return ModShares(self, modq.matmul_mod(x.share[..., 0], y.share[..., 0], x.moduli[0])[..., None], x.moduli)

    def share_bits(self, bits: Any, *, owner: int) -> XorShares:
        arr = np.asarray(bits)
        return XorShares(self, pack_bits(arr), arr.shape[-1])

    def reveal_bits(self, x: XorShares, to: int | None = None) -> np.ndarray:
        return unpack_bits(x.words, x.bits)

    def xor_public_bits(self, x: XorShares, value: Any) -> XorShares:
        return XorShares(self, x.words ^ public_mask(value), x.bits)

    def and_bits(self, x: XorShares, y: XorShares) -> XorShares:
        return XorShares(self, x.words & y.words, max(x.bits, y.bits))

    # -- the HE boundary --------------------------------------------------------------------------
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
