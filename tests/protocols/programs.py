"""Two-party programs run by the protocol tests (module level so spawned processes import them).

Each ``*_job(session, ...)`` sets up a Hybrid2PC context with small keys and returns what the
test compares; ``prog_*(ctx, ...)`` functions run unchanged on Hybrid2PC and Reference.
"""

import struct
import warnings

import numpy as np
import scipy.sparse as sp

from shaper.crypto import paillier, wire
from shaper.crypto.ahe import EncryptedArray
from shaper.protocols import Hybrid2PC, InsecureDealer, StoreOnly, TriGen
from shaper.protocols.hybrid import h2s, s2h, trigen, trigen_matrix

from .conformance import prog_linear, prog_matmul, prog_mul  # engine-generic programs

SOURCES = {"dealer": InsecureDealer, "store": StoreOnly, "trigen": TriGen}

KEY_BITS = 640


def context(session, **options):
    warnings.simplefilter("ignore")  # dealer triples warn on purpose
    options["triple_source"] = SOURCES[options.get("triple_source", "dealer")]()
    return Hybrid2PC.setup(session, key_bits=options.pop("key_bits", KEY_BITS), **options)


def key_size_job(session, sizes):
    """Party i brings a key of sizes[i] bits (its agreed size)."""
    keys = paillier.keygen(sizes[session.index])
    Hybrid2PC.setup(session, keys=keys, triple_source=InsecureDealer())


def crafted_hs_job(session):
    """Party 1 sends its public key with h_s = n^2 - 1; party 0 reports the h_s it uses."""
    pk, sk = paillier.keygen(KEY_BITS)
    if session.index == 1:
        width = (pk.bits + 7) // 8
        body = (wire.int_field(pk.n, width) + wire.int_field(pk.n_squared - 1, 2 * width)
                + struct.pack("<IB", pk.exponent_bits, 1))
        session.exchange(session.peers[0], wire.header(wire.KIND_PUBLIC, wire.SCHEME_PAILLIER) + body, "hybrid-key")
        return None
    ctx = Hybrid2PC.setup(session, keys=(pk, sk), triple_source=InsecureDealer())
    peer = ctx.peer_key
    return int(peer.n_squared), int(paillier.derive_hs(peer.n)), int(peer.hs)


def prog_sparse(ctx, matrix, yv):
    y = ctx.share(yv, owner=1, frac_bits=0)
    z = ctx.sparse_matvec(matrix if ctx.me == 0 else None, y, owner=0)
    return ctx.reveal_ring(z)


def linear_job(session, xv, yv):
    return prog_linear(context(session), xv, yv)


def mul_job(session, xv, yv, source="dealer"):
    return prog_mul(context(session, triple_source=source), xv, yv)


def matmul_job(session, xv, yv, source="dealer"):
    return prog_matmul(context(session, triple_source=source), xv, yv)


def sparse_job(session, matrix, yv, pack=True):
    ctx = context(session)
    y = ctx.share(yv, owner=1, frac_bits=0)
    z = ctx.sparse_matvec(matrix if ctx.me == 0 else None, y, owner=0, pack=pack)
    return ctx.reveal_ring(z), ctx.last_pipeline.as_dict() if ctx.last_pipeline else None


def share_roundtrip_job(session, values, frac_bits):
    ctx = context(session)
    x = ctx.share(values, owner=0, frac_bits=frac_bits)
    only_one = x.reveal(to=1)
    return x.reveal(), only_one, x.share


def trigen_job(session, count, pack=True):
    ctx = context(session, triple_source="store")
    return trigen(ctx, count, chunk_size=max(1, count // 3), pack=pack)


def trigen_matrix_job(session, m, k, n):
    ctx = context(session, triple_source="store")
    return trigen_matrix(ctx, m, k, n)


def h2s_job(session, values, value_bits, mode="ring", truncate_bits=0, pack=True, frac_bits=0, chunk_size=None):
    """Party 1 holds Enc_0(values) (encrypted under party 0's key) and converts to shares."""
    ctx = context(session)
    if ctx.me == 1:
        enc = ctx.peer_key.encrypt(values, frac_bits=frac_bits)
        out = h2s(ctx, enc, holder=1, value_bits=value_bits, mode=mode, truncate_bits=truncate_bits, pack=pack,
                  chunk_size=chunk_size)
    else:
        out = h2s(ctx, None, holder=1, mode=mode, truncate_bits=truncate_bits, pack=pack)
    shares = out.share if mode == "ring" else out.values
    return shares, out.reveal(), out.frac_bits


def s2h_job(session, values, mode="ring", frac_bits=0):
    """Shares -> Enc_0(x) at party 1, which sends it back so party 0 can check it."""
    ctx = context(session)
    if mode == "integer":
        import random

        from shaper.protocols import IntegerShares

        # exact integer shares x = r + (x - r): both parties know the test's values and derive
        # the same 100-bit masks r (reading ring shares as signed ints would not sum to x
        # whenever the two shares wrap around 2^64)
        rng = random.Random(7)
        r = [rng.getrandbits(100) - (1 << 99) for _ in range(len(values))]
        mine = r if ctx.me == 0 else [int(v) - ri for v, ri in zip(values.tolist(), r)]
        x = IntegerShares(ctx, np.array(mine, dtype=object), frac_bits)
    else:
        x = ctx.share(values, owner=1, frac_bits=frac_bits)
    enc = s2h(ctx, x, key_owner=0)
    if ctx.me == 1:
        session.send(0, enc.to_bytes(), "check")
        return ctx.last_pipeline
    back = EncryptedArray.from_bytes(session.recv_bytes(1, "check"), ctx.public_key)
    return [int(v) for v in ctx.private_key.decrypt(back).tolist()]


def overflow_job(session, value, declared_bits, pack=True):
    ctx = context(session)
    if ctx.me == 1:
        enc = ctx.peer_key.encrypt([1, 2, value])
        return h2s(ctx, enc, holder=1, value_bits=declared_bits, pack=pack).share
    return h2s(ctx, None, holder=1, pack=pack).share


def mask_job(session, count, value, bits):
    """H2S of a constant: returns (key owner's view u, holder's mask s) for a distribution test."""
    ctx = context(session)
    if ctx.me == 1:
        enc = ctx.peer_key.encrypt(np.full(count, value))
        out = h2s(ctx, enc, holder=1, value_bits=bits, mode="integer")
    else:
        out = h2s(ctx, None, holder=1, mode="integer")
    return [int(v) for v in out.values.tolist()]


def store_job(session, path, count):
    ctx = context(session, triple_source="store")
    ctx.generate_triples(count)
    ctx.triples.save(f"{path}.{ctx.me}.npz")
    return ctx.triples.available


def from_store_job(session, path, xv, yv):
    from shaper.protocols import TripleStore

    ctx = context(session, triple_source="store")
    ctx.triples = TripleStore.load(f"{path}.{ctx.me}.npz", ctx.me)
    first = prog_mul(ctx, xv, yv)
    try:
        prog_mul(ctx, xv, yv)
        second = "no error"
    except Exception as exc:  # noqa: BLE001 - reported to the test
        second = f"{type(exc).__name__}: {exc}"
    return first, second


def wasted_store_job(session, path, xv, yv):
    """Party 0's store lost triples in a crash (reserved, recorded as consumed, never used); both
    reload and multiply: the engine lines the stores up, so the product is right."""
    from shaper.protocols import TripleStore

    ctx = context(session, triple_source="store")
    if ctx.me == 0:
        crashed = TripleStore.load(f"{path}.0.npz", 0, reserve=4)
        crashed.take(1)
        crashed.close()
    ctx.triples = TripleStore.load(f"{path}.{ctx.me}.npz", ctx.me)
    return prog_mul(ctx, xv, yv)


def everything_job(session):
    """One of each protocol, for the TLS-process run."""
    ctx = context(session, triple_source="trigen")
    xv = np.array([1.25, -2.5, 3.0, 0.0])
    yv = np.array([0.5, 4.0, -1.5, 7.0])
    products = prog_mul(ctx, xv, yv)[1]
    matrix = sp.csr_matrix(np.array([[1, 0, 1, 0], [0, 1, 1, 1], [1, 0, 0, 0]]))
    sparse = prog_sparse(ctx, matrix, np.array([5, -6, 7, 8]))
    return products, sparse
