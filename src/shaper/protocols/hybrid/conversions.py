"""Conversions between additively homomorphic ciphertexts and shares (SHAPER Appendix C,
``docs/hybrid.md``).

**H2S** (ciphertext -> shares). The holder H has Enc_K(v) under the key owner K's key, with a
public bound |v| < 2^beta. H draws r uniform in [0, 2^(beta+σ)) from its CSPRNG, sets
s = r + 2^beta, computes Enc(v + s), **re-randomises** it and sends it; K decrypts
u = v + s in [0, 2^(beta+σ+1)).
  * ring mode: K's share u mod 2^64, H's share -s mod 2^64 (sum = v mod 2^64);
  * integer mode with fused truncation by t bits: K's share floor(u / 2^t), H's share
    -floor(s / 2^t); their sum is floor(v / 2^t) or one more, exactly, never a wrap-around.
  * packing: H packs k = floor(capacity / W) values per ciphertext with slot width
    W = beta + σ + 2 (Horner on the ciphertexts), adds all k masks as one packed plaintext,
    re-randomises once and sends one ciphertext; K decrypts once and slices W-bit slots.
Reveals: K sees u = v + s, statistically within 2^-σ of uniform given v *if the bound holds*;
H sees only ciphertexts. K checks each u against 2^(beta+σ+1) and raises if the holder's value
broke its declared bound.

**S2H** (shares -> ciphertext). K encrypts its share under its own key (key-owner CRT path) and
sends it; H adds its own share (plaintext addition). H ends with Enc_K(x0 + x1). With ring
shares the encrypted integer is x mod 2^64 plus possibly 2^64 (shares read as unsigned), so only
linear integer work followed by a ring-mode H2S is meaningful; integer shares give exactly x.
Reveals: H sees only ciphertexts.

Large conversions run in chunks through :meth:`Session.send_pipelined`: the next chunk is
encrypted or packed while the previous one is on the wire (SHAPER §3.2.3); the overlap of the
last call is in ``ctx.last_pipeline``.

Security model: semi-honest, two parties, no third party; statistical security 2^-σ (σ = 40).
"""

from __future__ import annotations

from typing import Any

from ...arrays import chunk_slices, object_array
from ...crypto import encoding
from ...crypto.ahe import EncryptedArray, concatenate
from ...crypto.packing import PackedArray, layout, pack, split_slots
from ...errors import KeyMismatchError, PlaintextOverflowError
from ..additive.shares import IntegerShares, SharedArray

MODES = ("ring", "integer")


def _random_ints(ctx: Any, count: int, bits: int) -> list[int]:
    """``count`` uniform integers in [0, 2^bits) from this party's CSPRNG."""
    if count == 0:
        return []
    raw = ctx.prg.exponent_bytes(count, bits)
    blob, width = raw.tobytes(), raw.shape[1]
    return [int.from_bytes(blob[i * width:(i + 1) * width], "little") for i in range(count)]


def _check_mode(mode: str, truncate_bits: int) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if truncate_bits < 0:
        raise ValueError(f"truncate_bits must be >= 0, got {truncate_bits}")
    if mode == "ring" and truncate_bits:
        raise ValueError("truncation fused into H2S is exact only in integer mode (mode='integer')")


# -- H2S ----------------------------------------------------------------------------------------
def h2s(ctx: Any, enc: EncryptedArray | None = None, *, holder: int, value_bits: int | None = None,
        mode: str = "ring", truncate_bits: int = 0, pack: bool = True, chunk_size: int | None = None,
        tag: str = "h2s") -> SharedArray | IntegerShares:
    """Turn ciphertexts held by party ``holder`` (under the other party's key) into shares.

    Both parties call this. The holder passes ``enc`` and ``value_bits`` (|v| < 2^value_bits);
    the key owner passes neither (or the same ``value_bits`` to check). Returns this party's
    :class:`SharedArray` (ring mode) or :class:`IntegerShares` (integer mode) at scale
    ``enc.frac_bits - truncate_bits``.
    """
    _check_mode(mode, truncate_bits)
    if ctx.me == holder:
        if not isinstance(enc, (EncryptedArray, PackedArray)):
            raise TypeError("the H2S holder must pass the EncryptedArray (or PackedArray) to convert")
        if value_bits is None:
            raise ValueError("the H2S holder must declare value_bits (|v| < 2^value_bits)")
        return _h2s_holder(ctx, enc, value_bits, mode, truncate_bits, pack, chunk_size, tag)
    return _h2s_owner(ctx, value_bits, mode, truncate_bits, pack, tag)


def _h2s_holder(ctx: Any, enc: EncryptedArray | PackedArray, beta: int, mode: str, t: int, packed: bool,
                chunk_size: int | None, tag: str) -> SharedArray | IntegerShares:
    pk = enc.public_key
    if pk != ctx.peer_key:
        raise KeyMismatchError("H2S converts ciphertexts under the key owner's (the peer's) public key")
    sigma = ctx.sigma
    if beta < 1:
        raise ValueError(f"value_bits must be >= 1, got {beta}")
    prepacked = isinstance(enc, PackedArray)
    if prepacked:
        lay = enc.layout
        if not packed or lay.value_bits != beta or lay.headroom_bits != sigma or lay.signed:
            raise ValueError(f"a pre-packed H2S input must use value_bits={beta}, headroom σ={sigma}, unsigned slots")
    elif packed:
        lay = layout(pk, beta, signed=False, headroom_bits=sigma)  # W = beta + σ + 2
    elif beta + sigma + 1 > pk.packing_capacity_bits:
        raise PlaintextOverflowError(
            f"H2S values of {beta} bits plus σ = {sigma} mask bits do not fit the "
            f"{pk.packing_capacity_bits}-bit plaintext of this key")
    if packed:
        chunk = chunk_size or lay.slots * 64
        chunk = max(chunk - chunk % lay.slots, lay.slots)  # whole packed ciphertexts per chunk
    else:
        chunk = chunk_size or 1024
    shape = (enc.count,) if prepacked else enc.shape
    flat = None if prepacked else enc.ravel()
    count = enc.count if prepacked else flat.size
    frac_in = enc.frac_bits
    s = [r + (1 << beta) for r in _random_ints(ctx, count, beta + sigma)]
    pieces = chunk_slices(count, chunk)
    ctx.session.send(ctx.peer, {"count": count, "shape": list(shape), "frac_bits": frac_in,
                                "chunks": len(pieces), "mode": mode, "truncate_bits": t, "pack": packed,
                                "value_bits": beta}, tag)

    def produce(sl: slice) -> bytes:
        if not packed:
            part = flat[sl]
            cts = pk.raw_add_plain(part._c.tolist(), s[sl])
            return EncryptedArray(pk, object_array(pk.raw_rerandomize(cts)), frac_in).to_bytes()
        if prepacked:
            k = lay.slots
            groups = enc._c[sl.start // k: -(-sl.stop // k)].tolist()
        else:
            groups = pack(flat[sl], beta, signed=False, headroom_bits=sigma)._c.tolist()
        k, w = lay.slots, lay.slot_bits
        masks = s[sl]
        packed_masks = []
        for g in range(len(groups)):
            value = 0
            for j, m in enumerate(masks[g * k:(g + 1) * k]):
                value |= m << (w * j)
            packed_masks.append(value)
        cts = pk.raw_add_plain(groups, packed_masks)
        out = PackedArray(pk, object_array(pk.raw_rerandomize(cts)), sl.stop - sl.start, lay, frac_in)
        return out.to_bytes()

    ctx.last_pipeline = ctx.session.send_pipelined(ctx.peer, pieces, produce, tag)
    frac = frac_in - t
    if mode == "ring":
        return SharedArray(ctx, encoding.ring_from_ints([-v for v in s]).reshape(shape), frac)
    return IntegerShares(ctx, object_array([-(v >> t) for v in s], shape), frac)


def _h2s_owner(ctx: Any, beta: int | None, mode: str, t: int, packed: bool, tag: str
               ) -> SharedArray | IntegerShares:
    head = ctx.session.recv_meta(ctx.peer, tag)
    expect = {"mode": mode, "truncate_bits": t, "pack": packed}
    if beta is not None:
        expect["value_bits"] = beta
    for key, want in expect.items():
        if head.get(key) != want:
            raise ValueError(f"H2S parameters differ between the parties: {key} is {head.get(key)!r} at "
                             f"{ctx.peer!r} and {want!r} here")
    count, shape, frac = int(head["count"]), tuple(head["shape"]), int(head["frac_bits"])
    beta = int(head["value_bits"])
    limit = 1 << (beta + ctx.sigma + 1)
    pk, sk = ctx.public_key, ctx.private_key
    u: list[int] = []
    for _ in range(int(head["chunks"])):
        data = ctx.session.recv_bytes(ctx.peer, tag)
        if packed:
            p = PackedArray.from_bytes(data, pk)
            if p.layout.value_bits != beta or p.layout.headroom_bits != ctx.sigma or p.layout.signed:
                raise ValueError("H2S packing layout differs from the declared parameters")
            residues = sk.raw_decrypt(p._c.tolist())
            slots = split_slots([int(r) for r in residues], p.layout)[:p.count].tolist()
        else:
            e = EncryptedArray.from_bytes(data, pk)
            slots = sk.raw_decrypt(e._c.ravel().tolist())
        u.extend(slots)
    if len(u) != count:
        raise ValueError(f"H2S announced {count} values and delivered {len(u)}")
    if u and max(u) >= limit:
        i = next(k for k, v in enumerate(u) if v >= limit)
        raise PlaintextOverflowError(
            f"H2S value {i} exceeds its declared bound of {beta} bits: the holder's value broke the "
            "bound, so its mask no longer hides it; raise value_bits")
    frac_out = frac - t
    if mode == "ring":
        return SharedArray(ctx, encoding.ring_from_ints(u).reshape(shape), frac_out)
    return IntegerShares(ctx, object_array([v >> t for v in u], shape), frac_out)


# -- S2H ----------------------------------------------------------------------------------------
def share_values(x: SharedArray | IntegerShares) -> list[int]:
    """This party's share as Python ints: unsigned [0, 2^64) for ring shares, signed for integer."""
    if isinstance(x, SharedArray):
        return encoding.ring_to_ints(x.share).ravel().tolist()
    if isinstance(x, IntegerShares):
        return [int(v) for v in x.values.ravel().tolist()]
    raise TypeError(f"expected shares, got {type(x).__name__}")


def encrypt_share(ctx: Any, x: SharedArray | IntegerShares, *, key_owner: int, chunk_size: int = 1024,
                  tag: str = "enc-share") -> EncryptedArray | None:
    """The key owner sends Enc_K(its share); the other party receives it (returns the
    EncryptedArray there, ``None`` at the key owner). Pipelined in chunks."""
    if ctx.me == key_owner:
        values = share_values(x)
        pieces = chunk_slices(len(values), chunk_size)
        ctx.session.send(ctx.peer, {"count": len(values), "shape": list(x.shape), "frac_bits": x.frac_bits,
                                    "chunks": len(pieces)}, tag)
        ctx.last_pipeline = ctx.session.send_pipelined(
            ctx.peer, pieces, lambda sl: ctx.private_key.encrypt(object_array(values[sl])).to_bytes(), tag)
        return None
    head = ctx.session.recv_meta(ctx.peer, tag)
    parts = [EncryptedArray.from_bytes(ctx.session.recv_bytes(ctx.peer, tag), ctx.peer_key)
             for _ in range(int(head["chunks"]))]
    joined = concatenate(parts) if len(parts) > 1 else parts[0]
    if joined.size != int(head["count"]):
        raise ValueError(f"share encryption announced {head['count']} values and delivered {joined.size}")
    return EncryptedArray(ctx.peer_key, joined._c.reshape(tuple(head["shape"])), int(head["frac_bits"]))


def s2h(ctx: Any, x: SharedArray | IntegerShares, *, key_owner: int, chunk_size: int = 1024,
        tag: str = "s2h") -> EncryptedArray | None:
    """Shares -> Enc_K(x) at the party that is not the key owner (``None`` at the key owner)."""
    received = encrypt_share(ctx, x, key_owner=key_owner, chunk_size=chunk_size, tag=tag)
    if ctx.me == key_owner:
        return None
    assert received is not None
    mine = share_values(x)
    if received.size != len(mine):
        raise ValueError(f"S2H shapes differ: the key owner sent {received.size} values, this party holds {len(mine)}")
    cts = received.public_key.raw_add_plain(received._c.ravel().tolist(), mine)
    return EncryptedArray(received.public_key, object_array(cts, x.shape), x.frac_bits)
