"""Plaintext packing: many short values in one ciphertext (SHAPER §3.3, CAESAR's H2S packing).

k ciphertexts of values bounded by 2^value_bits are combined by Horner's rule,
``P = (...((c_{k-1})^(2^W) * c_{k-2})^(2^W) ...) * c_0``, so slot j of the packed plaintext holds
value j at bit offset W*j. The slot width is ``W = value_bits + headroom_bits + 2`` with
``headroom_bits = σ = 40`` by default: room for a σ-bit statistical mask to be added slot-wise
(as H2S does) plus one bit for the sign offset and one carry bit. A key with C bits of packing
capacity (|n| - 1 for Paillier) holds ``k = floor(C / W)`` slots.

Signed values are shifted by +2^value_bits into [0, 2^(value_bits+1)) before packing and shifted
back after unpacking. Unpacking checks every slot against the declared bound: a value outside
it spills into the headroom (or a neighbour) and raises :class:`~shaper.errors.PackingError`
rather than returning a wrong number.

Cost: packing is one exponentiation by 2^W per value (W squarings) plus one product; decryption
is one per k values.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
from gmpy2 import mpz

from ..arrays import object_array
from ..errors import KeyMismatchError, PackingError, SerializationError
from ..kernels import get_kernel
from . import counters, encoding, wire
from .ahe import AHEPrivateKey, AHEPublicKey, EncryptedArray
from .encoding import SIGMA


@dataclass(frozen=True)
class PackingLayout:
    """Where values sit inside a packed plaintext."""

    value_bits: int
    headroom_bits: int
    slot_bits: int
    slots: int
    signed: bool

    @property
    def offset(self) -> int:
        return (1 << self.value_bits) if self.signed else 0

    @property
    def slot_limit(self) -> int:
        """Exclusive upper bound of a slot's content before any mask is added."""
        return 1 << (self.value_bits + 1 if self.signed else self.value_bits)


def layout(public_key: AHEPublicKey, value_bits: int, *, signed: bool = True,
           headroom_bits: int = SIGMA) -> PackingLayout:
    """The packing layout for values of ``value_bits`` bits (|v| < 2^value_bits if signed,
    0 <= v < 2^value_bits otherwise) under ``public_key``."""
    if value_bits < 1:
        raise PackingError(f"value_bits must be >= 1, got {value_bits}")
    if headroom_bits < 0:
        raise PackingError(f"headroom_bits must be >= 0, got {headroom_bits}")
    slot_bits = value_bits + headroom_bits + 2
    slots = public_key.packing_capacity_bits // slot_bits
    if slots < 1:
        raise PackingError(
            f"a {slot_bits}-bit slot ({value_bits} value bits + {headroom_bits} headroom + 2) does not "
            f"fit the {public_key.packing_capacity_bits}-bit plaintext of this {public_key.bits}-bit "
            f"{public_key.scheme} key"
        )
    return PackingLayout(value_bits, headroom_bits, slot_bits, slots, signed)


class PackedArray:
    """Packed ciphertexts holding ``count`` values (decrypt with ``private_key.decrypt``)."""

    __slots__ = ("public_key", "_c", "count", "layout", "frac_bits")

    def __init__(self, public_key: AHEPublicKey, ciphertexts: np.ndarray, count: int,
                 layout: PackingLayout, frac_bits: int = 0) -> None:
        expected = -(-count // layout.slots) if count else 0
        if ciphertexts.shape != (expected,):
            raise PackingError(
                f"{count} values in {layout.slots}-slot ciphertexts need {expected} ciphertexts, "
                f"got {ciphertexts.shape}"
            )
        self.public_key = public_key
        self._c = ciphertexts
        self.count = int(count)
        self.layout = layout
        self.frac_bits = int(frac_bits)

    def __len__(self) -> int:
        return self.count

    @property
    def ciphertext_count(self) -> int:
        return int(self._c.shape[0])

    def rerandomize(self) -> "PackedArray":
        flat = self.public_key.raw_rerandomize(self._c.tolist())
        return PackedArray(self.public_key, object_array(flat), self.count, self.layout, self.frac_bits)

    def __repr__(self) -> str:
        return (f"PackedArray(values={self.count}, ciphertexts={self.ciphertext_count}, "
                f"slots={self.layout.slots}, slot_bits={self.layout.slot_bits})")

    def decrypt_with(self, private_key: AHEPrivateKey) -> np.ndarray:
        """``private_key.decrypt(packed)`` lands here: decrypt and unpack."""
        return unpack(private_key, self)

    def to_bytes(self) -> bytes:
        """Header, key fingerprint, i32 frac_bits, u64 count, u32 value_bits, u32 headroom_bits,
        u8 signed, then the ciphertext block (:mod:`shaper.crypto.wire`)."""
        pk = self.public_key
        lay = self.layout
        head = wire.header(wire.KIND_PACKED, pk.scheme_id) + pk.fingerprint
        head += struct.pack("<iQIIB", self.frac_bits, self.count, lay.value_bits, lay.headroom_bits, int(lay.signed))
        return head + wire.ciphertext_block(self._c.tolist(), wire.ciphertext_width(pk))

    @classmethod
    def from_bytes(cls, data: bytes, public_key: AHEPublicKey) -> "PackedArray":
        """Parse and validate bytes made by :meth:`to_bytes` under ``public_key``."""
        r = wire.open_ciphertexts(data, public_key, wire.KIND_PACKED)
        frac_bits, count, value_bits, headroom_bits, signed = r.unpack("iQIIB", "packing header")
        if frac_bits < 0:
            raise SerializationError(f"invalid scale {frac_bits}")
        lay = layout(public_key, value_bits, signed=bool(signed), headroom_bits=headroom_bits)
        groups = -(-count // lay.slots) if count else 0
        values = wire.read_ciphertexts(r, groups, public_key)
        r.done()
        return cls(public_key, object_array(values), count, lay, frac_bits)


def pack(encrypted: EncryptedArray, value_bits: int, *, signed: bool = True,
         headroom_bits: int = SIGMA) -> PackedArray:
    """Pack the (flattened) encrypted values, each declared to satisfy |v| < 2^value_bits
    (``signed``) or 0 <= v < 2^value_bits. The bound is checked when unpacking."""
    if not isinstance(encrypted, EncryptedArray):
        raise TypeError(f"pack expects an EncryptedArray, got {type(encrypted).__name__}")
    pk = encrypted.public_key
    lay = layout(pk, value_bits, signed=signed, headroom_bits=headroom_bits)
    flat = encrypted._c.ravel().tolist()
    count = len(flat)
    if count == 0:
        return PackedArray(pk, object_array([]), 0, lay, encrypted.frac_bits)
    if signed:
        flat = pk.raw_add_plain(flat, [lay.offset] * count)
    counters.add("packed_values", count)
    k = lay.slots
    groups = -(-count // k)
    padded = flat + [mpz(1)] * (groups * k - count)  # 1 encrypts 0: empty slots add nothing
    columns = [padded[j::k] for j in range(k)]  # column j = slot j of every group
    acc = get_kernel().horner(columns, lay.slot_bits, pk.ciphertext_modulus)
    return PackedArray(pk, object_array(acc), count, lay, encrypted.frac_bits)


def pack_plain(values: np.ndarray, slot_bits: int, slots: int) -> list[int]:
    """Pack non-negative integers below 2^slot_bits into plaintexts of ``slots`` slots (value
    ``g * slots + j`` at bit offset ``slot_bits * j`` of plaintext g): the inverse of
    :func:`split_slots`, done on bit arrays so a million values take milliseconds. Packing the
    plaintexts *before* encrypting (one encryption per ``slots`` values) is the cheap way for the
    owner of the values; :func:`pack` packs ciphertexts somebody else encrypted."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise PackingError(f"pack_plain takes a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
    if not 1 <= slot_bits <= 63 or slots < 1:
        raise PackingError(f"slot_bits must be in [1, 63] and slots >= 1, got {slot_bits} and {slots}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >> slot_bits):
        i = int(np.flatnonzero((arr < 0) | (arr >= (1 << slot_bits)))[0])
        raise PackingError(f"value {i} ({int(arr[i])}) does not fit a {slot_bits}-bit slot")
    groups = -(-arr.size // slots)
    padded = np.zeros(groups * slots, dtype=np.uint64)
    padded[:arr.size] = arr
    bits = np.unpackbits(padded.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")[:, :slot_bits]
    raw = np.packbits(bits.reshape(groups, slots * slot_bits), axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in raw]


def split_slots(residues: list, lay: PackingLayout) -> np.ndarray:
    """Packed plaintexts (non-negative ints) to their slot contents, in value order.

    Returns an object array of Python ints of length ``len(residues) * slots``; raises
    :class:`PackingError` if a plaintext has bits above the last slot.
    """
    k, w = lay.slots, lay.slot_bits
    total_bits = k * w
    limit = 1 << total_bits
    for i, r in enumerate(residues):
        if r >= limit:
            raise PackingError(
                f"packed plaintext {i} exceeds {k} slots of {w} bits: a packed value broke its "
                "declared bound"
            )
    if not residues:
        return object_array([])
    nbytes = (total_bits + 7) // 8
    raw = b"".join(int(r).to_bytes(nbytes, "little") for r in residues)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(len(residues), nbytes),
                         axis=1, bitorder="little")[:, :total_bits]
    bits = bits.reshape(len(residues) * k, w)
    low_w = min(w, 62)
    low = bits[:, :low_w].astype(np.int64) @ (1 << np.arange(low_w, dtype=np.int64))
    values = object_array(low.tolist())
    if w > low_w:
        high_bits = bits[:, low_w:]
        chunks = [high_bits[:, s:s + 62] for s in range(0, high_bits.shape[1], 62)]
        shift = low_w
        for chunk in chunks:
            part = chunk.astype(np.int64) @ (1 << np.arange(chunk.shape[1], dtype=np.int64))
            values = values + (object_array(part.tolist()) * (1 << shift))
            shift += chunk.shape[1]
    return values


def unpack(private_key: AHEPrivateKey, packed: PackedArray) -> np.ndarray:
    """Decrypt and unpack to a 1-D numpy array of ``packed.count`` values (int64/object for
    ``frac_bits == 0``, float64 otherwise)."""
    if packed.public_key != private_key.public_key:
        raise KeyMismatchError("packed ciphertexts were made under a different public key")
    lay = packed.layout
    residues = private_key.raw_decrypt(packed._c.tolist())
    slots = split_slots([int(r) for r in residues], lay)[:packed.count]
    limit = lay.slot_limit
    over = np.flatnonzero(slots >= limit)
    if over.size:
        i = int(over[0])
        shown = f"±2^{lay.value_bits}" if lay.signed else f"[0, 2^{lay.value_bits})"
        raise PackingError(
            f"packed value at index {i} is outside its declared bound {shown}: the slot spilled "
            "into its headroom, so it (and possibly its neighbour) cannot be recovered"
        )
    signed = slots - lay.offset if lay.signed else slots
    return encoding.decode(signed, packed.frac_bits)
