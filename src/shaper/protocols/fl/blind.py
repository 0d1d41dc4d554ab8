"""Blind decryption: the key holder decrypts a party's ciphertexts without learning the values.

The party holding Enc(v) (|v| < 2^beta, under the key holder's key) draws masks
s = r + 2^beta with r uniform in [0, 2^(beta+σ)) from its CSPRNG, **packs** k values per
ciphertext by Horner's rule (slot width W = beta + σ + 2, ``k = floor(capacity / W)``), adds the
packed masks as one fresh encryption (which also re-randomises the result) and sends it. The key
holder decrypts, cuts the W-bit slots, checks each against 2^(beta+σ+1) and sends the masked
values u = v + s back; the party takes v = u - s exactly and checks |v| < 2^beta.

This is Hardy et al.'s masked-gradient step (and FATE's arbiter decrypting the gradients),
with statistical masking: the key holder sees u, within statistical distance 2^-σ of uniform
given v when the bound holds; a value that broke its bound is caught by the party (it then
raises instead of using it, because its mask no longer hid it). The party sees only its own
values. Unlike H2S (:mod:`shaper.protocols.hybrid.conversions`), the masked values go back to
the party, and it runs on any :mod:`.backend` (including python-paillier), between any two
parties of a multi-party session.

Cost: k-1 ciphertext products by 2^W per packed ciphertext, one encryption and one decryption
per k values, 2 messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...arrays import ints_from_bytes, ints_to_bytes
from ...crypto.encoding import SIGMA
from ...crypto.packing import PackingLayout, split_slots
from ...errors import PackingError, PlaintextOverflowError
from .backend import Backend


def slot_layout(backend: Backend, pk: Any, value_bits: int, sigma: int = SIGMA) -> PackingLayout:
    width = value_bits + sigma + 2
    slots = backend.capacity_bits(pk) // width
    if slots < 1:
        raise PackingError(f"a {width}-bit masked slot does not fit the plaintext of a "
                           f"{backend.modulus(pk).bit_length()}-bit key")
    return PackingLayout(value_bits, sigma, width, slots, False)


def pack_ciphertexts(backend: Backend, pk: Any, ct: Any, lay: PackingLayout) -> Any:
    """Horner's rule over slot columns: group g holds values g*k .. g*k+k-1, value g*k+j at
    bit offset W*j. Missing values in the last group are trivial encryptions of 0."""
    count = backend.size(ct)
    k = min(lay.slots, count)
    groups = -(-count // k)
    pad = groups * k - count
    if pad:
        ct = backend.concat([ct, backend.trivial_zeros(pk, pad)])
    columns = [ct[np.arange(j, groups * k, k)] for j in range(k)]
    acc = columns[k - 1]
    shift = [1 << lay.slot_bits] * groups
    for j in range(k - 2, -1, -1):
        acc = backend.add(backend.mul_plain(acc, shift), columns[j])
    return acc, k


def send_blinded(session: Any, backend: Backend, pk: Any, ct: Any, value_bits: int, to: str, tag: str,
                 sigma: int = SIGMA) -> list[int]:
    """The holder's first half: send Enc(v + s), packed; returns the masks s."""
    count = backend.size(ct)
    lay = slot_layout(backend, pk, value_bits, sigma)
    s = [r + (1 << value_bits) for r in session.prg.randbits(value_bits + sigma, count)]
    packed, k = pack_ciphertexts(backend, pk, ct, lay)
    w = lay.slot_bits
    packed_masks = [sum(m << (w * j) for j, m in enumerate(s[g * k:(g + 1) * k])) for g in range(backend.size(packed))]
    blinded = backend.add(packed, backend.encrypt(pk, packed_masks))  # fresh randomness too
    session.send(to, {"count": count, "value_bits": value_bits, "slots": k}, tag)
    session.send(to, backend.dumps(blinded), tag)
    return s


def receive_unblinded(session: Any, masks: list[int], value_bits: int, frm: str, tag: str) -> np.ndarray:
    """The holder's second half: the values v = u - s (object array of ints)."""
    u = ints_from_bytes(session.recv_bytes(frm, tag))
    if len(u) != len(masks):
        raise PlaintextOverflowError(f"party {frm!r} returned {len(u)} values for {len(masks)} sent")
    v = [a - b for a, b in zip(u, masks)]
    bound = 1 << value_bits
    bad = next((i for i, x in enumerate(v) if not -bound < x < bound), None)
    if bad is not None:
        raise PlaintextOverflowError(
            f"value {bad} ({v[bad].bit_length()} bits) broke its declared bound of {value_bits} bits, so its mask "
            "did not hide it: the training left its fixed-point range (lower the learning rate or standardise "
            "the features)")
    return np.array(v, dtype=object)


def decrypt_blinded(session: Any, backend: Backend, sk: Any, frm: str, tag: str, sigma: int = SIGMA) -> int:
    """The key holder's side for one holder: decrypt, check, return the masked values. Returns
    the count of values."""
    head = session.recv_meta(frm, tag)
    count, value_bits, k = int(head["count"]), int(head["value_bits"]), int(head["slots"])
    pk = backend.public_of(sk)
    lay = slot_layout(backend, pk, value_bits, sigma)
    if not 1 <= k <= lay.slots or count < 0:
        raise PackingError(f"party {frm!r} declared {k} slots of {lay.slot_bits} bits; this key holds {lay.slots}")
    ct = backend.loads(pk, session.recv_bytes(frm, tag))
    if backend.size(ct) != -(-count // k):
        raise PackingError(f"party {frm!r} sent {backend.size(ct)} ciphertexts for {count} values in {k} slots")
    residues = backend.decrypt(sk, ct)
    lay_k = PackingLayout(value_bits, sigma, lay.slot_bits, k, False)
    u = split_slots(residues, lay_k)[:count].tolist()
    limit = 1 << (value_bits + sigma + 1)
    if u and max(u) >= limit:
        raise PlaintextOverflowError(f"a value from party {frm!r} exceeds its declared {value_bits}-bit bound")
    session.send(frm, ints_to_bytes(u), tag)
    return count
