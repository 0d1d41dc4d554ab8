"""Secure sparse matrix-vector product (SHAPER Fig. 2, CAESAR's core).

Party H owns a plaintext sparse matrix X (scipy CSR, integer entries: 0/1 one-hot features are
the usual case); the vector y is shared (or encrypted under the other party K's key). Result:
shares of X @ y mod 2^64.

1. K sends Enc_K(y_K) (len(y) encryptions, key-owner CRT, pipelined);
2. H computes X @ Enc_K(y_K) over the non-zeros only (0/1 entries are ciphertext products),
   and X @ y_H in the clear;
3. H2S (ring mode, packed) turns the encrypted product into shares; H adds X @ y_H to its share.

Cost: len(y) encryptions and ciphertexts K -> H; nnz(X) ciphertext operations at H; rows(X)/k
packed ciphertexts H -> K and as many decryptions at K. Reveals: K sees only masked dense
results, never the sparsity pattern (only the number of rows); H sees only ciphertexts.
Semi-honest, two parties.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...crypto import encoding
from ...crypto.ahe import EncryptedArray
from ..additive.shares import SharedArray
from ..api import public_matmul
from .conversions import encrypt_share, h2s


def _row_bound_bits(csr: Any, value_bits: int) -> int:
    """Bits of |X v| when |v| < 2^value_bits: value_bits + log2(max row L1 norm)."""
    if csr.nnz == 0:
        return value_bits
    row_l1 = np.add.reduceat(np.abs(csr.data.astype(np.float64)), csr.indptr[:-1][np.diff(csr.indptr) > 0])
    return value_bits + int(np.ceil(np.log2(max(float(row_l1.max()), 1.0) + 1)))


def sparse_matvec(ctx: Any, matrix: Any, y: SharedArray, *, owner: int, pack: bool = True,
                  tag: str = "smv") -> SharedArray:
    """Shares of ``matrix @ y`` where ``matrix`` is known to party ``owner`` only (the other party
    passes ``None``) and ``y`` is shared. Returns this party's share (scale of ``y``)."""
    if ctx.me != owner:
        encrypt_share(ctx, y, key_owner=ctx.me, tag=tag + "-enc")
        return h2s(ctx, None, holder=owner, pack=pack, tag=tag + "-h2s")
    if matrix is None:
        raise ValueError("the matrix owner must pass the matrix")
    csr = encoding.as_csr(matrix)
    if csr.dtype.kind == "f" and not np.all(csr.data == np.round(csr.data)):
        raise TypeError("sparse_matvec needs integer matrix entries (encode reals with a scale first)")
    if csr.shape[1] != y.shape[0] or y.ndim != 1:
        raise ValueError(f"shape mismatch: matrix {csr.shape} @ shared vector {y.shape}")
    enc = encrypt_share(ctx, y, key_owner=1 - owner, tag=tag + "-enc")
    assert enc is not None
    product = csr.astype(np.int64) @ enc  # over the non-zeros only
    bits = _row_bound_bits(csr, 64)  # the peer's share is an unsigned 64-bit integer
    converted = h2s(ctx, product, holder=owner, value_bits=bits, pack=pack, tag=tag + "-h2s")
    local = public_matmul(csr, y.share)
    return SharedArray(ctx, converted.share + local, y.frac_bits)


def sparse_matvec_encrypted(ctx: Any, matrix: Any, enc: EncryptedArray | None, *, owner: int,
                            value_bits: int | None = None, pack: bool = True, tag: str = "smv-enc") -> SharedArray:
    """Shares of ``matrix @ v`` where party ``owner`` holds both ``matrix`` and Enc_K(v) under the
    other party's key (|v| < 2^value_bits); the key owner passes ``None`` for both."""
    if ctx.me != owner:
        return h2s(ctx, None, holder=owner, pack=pack, tag=tag)
    if value_bits is None or enc is None:
        raise ValueError("the matrix owner passes the encrypted vector and its value_bits")
    csr = encoding.as_csr(matrix)
    product = csr.astype(np.int64) @ enc
    return h2s(ctx, product, holder=owner, value_bits=_row_bound_bits(csr, value_bits), pack=pack, tag=tag)
