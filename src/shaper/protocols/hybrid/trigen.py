"""TriGen: two-party Beaver triple generation with Paillier, no dealer (SHAPER §2.2).

For element-wise triples over Z_2^64 each party draws its shares a_i, b_i uniformly. With
K the key owner and E the evaluator:

1. K sends Enc_K(a_K) and Enc_K(b_K) (key-owner CRT encryption, pipelined in chunks);
2. E computes Enc_K(a_K * b_E + b_K * a_E) homomorphically (two 64-bit plaintext
   multiplications and one addition per triple);
3. the cross terms go through H2S (ring mode, bound 2^129, σ-bit masks, packed 11 to a 2048-bit
   ciphertext), so K and E hold shares u_K, u_E of a_K b_E + b_K a_E mod 2^64;
4. c_K = a_K b_K + u_K and c_E = a_E b_E + u_E, so c_K + c_E = (a_K + a_E)(b_K + b_E) mod 2^64.

K learns only masked cross terms (statistically hidden, 2^-σ); E learns only ciphertexts. Matrix
triples (C = A @ B) work the same way with Enc(A_K) @ B_E + A_E @ Enc(B_K) (m*k*n plaintext
multiplications each way). Semi-honest, two parties.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gmpy2 import mpz

from ...arrays import chunk_slices, object_array
from ...crypto import counters, encoding
from ...crypto.ahe import EncryptedArray
from ...crypto.packing import PackedArray, layout
from ...kernels import get_kernel
from ..triples.source import Triple, TripleSource
from .conversions import h2s

CROSS_BITS = 129  # a_K * b_E + b_K * a_E < 2^129 for 64-bit unsigned shares


def _packed_cross_terms(pk: Any, cts: list, b_e: list, a_e: list, lay: Any) -> PackedArray:
    """Enc(a_K b_E + b_K a_E) for each triple, packed k per ciphertext in one pass: the two 64-bit
    exponentiations of a slot share the packing's squaring chain (kernel ``horner_multiexp``)."""
    n = len(b_e)
    k = lay.slots
    groups = -(-n // k)
    pad = groups * k - n
    one = mpz(1)
    enc_a, enc_b = cts[:n] + [one] * pad, cts[n:] + [one] * pad
    exp_b, exp_a = b_e + [0] * pad, a_e + [0] * pad
    bases = [[enc_a[j::k] for j in range(k)], [enc_b[j::k] for j in range(k)]]
    exponents = [[exp_b[j::k] for j in range(k)], [exp_a[j::k] for j in range(k)]]
    packed = get_kernel().horner_multiexp(bases, exponents, lay.slot_bits, pk.ciphertext_modulus)
    counters.add("ciphertext_products", 2 * n)
    counters.add("packed_values", n)
    return PackedArray(pk, object_array(packed), n, lay, 0)


def trigen(ctx: Any, count: int, *, key_owner: int = 0, chunk_size: int = 2048, pack: bool = True,
           tag: str = "trigen") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate ``count`` element-wise triples; returns this party's (a, b, c) shares (uint64).

    K encrypts chunk i+1 while E evaluates chunk i; E's H2S replies queue up at K, which
    decrypts them once all its encryptions are out."""
    a, b = ctx.prg.uint64(count), ctx.prg.uint64(count)
    pieces = chunk_slices(count, chunk_size) if count else []
    cross: list[np.ndarray] = []
    if ctx.me == key_owner:
        def produce(sl: slice) -> bytes:
            values = encoding.ring_to_ints(np.concatenate([a[sl], b[sl]]))
            return ctx.private_key.encrypt(values).to_bytes()

        ctx.last_pipeline = ctx.session.send_pipelined(ctx.peer, pieces, produce, tag + "-enc")
        for _ in pieces:
            cross.append(h2s(ctx, None, holder=1 - key_owner, value_bits=CROSS_BITS, pack=pack,
                             tag=tag + "-h2s").share)
    else:
        pk = ctx.peer_key
        lay = layout(pk, CROSS_BITS, signed=False, headroom_bits=ctx.sigma) if pack else None
        for sl in pieces:
            n = sl.stop - sl.start
            enc = EncryptedArray.from_bytes(ctx.session.recv_bytes(ctx.peer, tag + "-enc"), pk)
            if enc.shape != (2 * n,):
                raise ValueError(f"TriGen chunk from {ctx.peer!r} has shape {enc.shape}, expected {(2 * n,)}")
            b_e, a_e = encoding.ring_to_ints(b[sl]).tolist(), encoding.ring_to_ints(a[sl]).tolist()
            if lay is None:
                terms: Any = enc[:n] * np.array(b_e, dtype=object) + enc[n:] * np.array(a_e, dtype=object)
            else:
                terms = _packed_cross_terms(pk, enc._c.tolist(), b_e, a_e, lay)
            cross.append(h2s(ctx, terms, holder=ctx.me, value_bits=CROSS_BITS, pack=pack, tag=tag + "-h2s").share)
    u = np.concatenate(cross) if cross else np.zeros(0, dtype=np.uint64)
    return a, b, a * b + u


def trigen_matrix(ctx: Any, m: int, k: int, n: int, *, key_owner: int = 0, pack: bool = True,
                  tag: str = "trigen-mm") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One matrix triple (A: m x k, B: k x n, C = A @ B mod 2^64); returns this party's shares.

    Shares are used as signed 64-bit representatives so the homomorphic products stay small."""
    A, B = ctx.prg.uint64((m, k)), ctx.prg.uint64((k, n))
    bound = 2 * 63 + int(np.ceil(np.log2(max(k, 1)))) + 2  # |A_K B_E + A_E B_K| < 2^bound
    if ctx.me == key_owner:
        values = encoding.ring_to_ints(np.concatenate([A.ravel(), B.ravel()]), signed=True)
        ctx.session.send(ctx.peer, ctx.private_key.encrypt(values).to_bytes(), tag + "-enc")
        u = h2s(ctx, None, holder=1 - key_owner, value_bits=bound, pack=pack, tag=tag + "-h2s").share
    else:
        enc = EncryptedArray.from_bytes(ctx.session.recv_bytes(ctx.peer, tag + "-enc"), ctx.peer_key)
        if enc.shape != (m * k + k * n,):
            raise ValueError(f"matrix TriGen from {ctx.peer!r} has {enc.size} values, expected {m * k + k * n}")
        enc_a = enc[: m * k].reshape(m, k)
        enc_b = enc[m * k:].reshape(k, n)
        B_signed, A_signed = encoding.to_signed(B), encoding.to_signed(A)
        rows = [enc_a[i] @ B_signed for i in range(m)]  # Enc(A_K) @ B_E, row by row
        cols = [A_signed @ enc_b[:, j] for j in range(n)]  # A_E @ Enc(B_K), column by column
        left = np.stack([r._c for r in rows])  # (m, n)
        right = np.stack([c._c for c in cols], axis=1)  # (m, n)
        pk = ctx.peer_key
        summed = EncryptedArray(pk, object_array(pk.raw_add(left.ravel().tolist(), right.ravel().tolist()),
                                                  (m, n)))
        u = h2s(ctx, summed, holder=ctx.me, value_bits=bound, pack=pack, tag=tag + "-h2s").share
    return A, B, np.matmul(A, B) + u.reshape(m, n)


class TriGen(TripleSource):
    """SHAPER's TriGen (this module): triples from Paillier between the two parties of a
    :class:`~shaper.protocols.hybrid.Hybrid2PC`, no dealer. ``options`` go to :func:`trigen`
    (``key_owner``, ``chunk_size``, ``pack``)."""

    name = "trigen"

    def __init__(self, **options: Any) -> None:
        self.options = options

    def elementwise(self, engine: Any, count: int) -> Triple:
        return trigen(engine, count, **self.options)

    def matrix(self, engine: Any, m: int, k: int, n: int) -> Triple:
        return trigen_matrix(engine, m, k, n, **{k_: v for k_, v in self.options.items() if k_ != "chunk_size"})
