"""Typed frames: the only thing that crosses a link between parties.

Every frame starts with a 16-byte header, then a tag (the message stream it belongs to) and a
payload::

    "SF" | u8 version | u8 kind | u8 flags (0) | u8 tag length | u16 reserved (0) | u64 payload length
    tag (UTF-8, <= 255 bytes) | payload

Kinds: HELLO (handshake, JSON), META (small JSON value), BYTES and ARRAY (a head frame describing
the message, then CHUNK frames of at most ``max_frame`` bytes each until the announced size is
reached), CLOSE (the peer is done), ABORT (the peer failed; JSON carries its error).

Arrays carry a numpy dtype from an allow-list (bool, signed/unsigned integers, floats, complex;
little-endian) and a shape; nothing is ever unpickled or evaluated. A receiver checks the magic,
version, kind, every length against its limits, the dtype and shape, and that chunks add up.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from ..errors import FrameError

MAGIC = b"SF"
VERSION = 1
HEADER = struct.Struct("<2sBBBBHQ")
HEADER_SIZE = HEADER.size  # 16

HELLO, META, BYTES, ARRAY, CHUNK, CLOSE, ABORT = 1, 2, 3, 4, 5, 6, 7
KIND_NAMES = {HELLO: "hello", META: "metadata", BYTES: "bytes", ARRAY: "array", CHUNK: "chunk",
              CLOSE: "close", ABORT: "abort"}
MAX_NDIM = 32

_ALLOWED_KINDS = set("biufc")


def header(kind: int, tag: bytes, payload_len: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, kind, 0, len(tag), 0, payload_len) + tag


def encode_tag(tag: str) -> bytes:
    if not isinstance(tag, str):
        raise TypeError(f"message tags are strings, got {type(tag).__name__}")
    raw = tag.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"message tag {tag[:40]!r}... is longer than 255 bytes")
    return raw


def parse_header(data: bytes, peer: str) -> tuple[int, int, int]:
    """(kind, tag length, payload length); raises :class:`FrameError` naming the peer."""
    magic, version, kind, flags, tag_len, reserved, length = HEADER.unpack(data)
    if magic != MAGIC:
        raise FrameError(f"malformed frame from {peer!r}: bad magic {magic!r} (not a shaper peer, or a corrupted stream)")
    if version != VERSION:
        raise FrameError(f"frame from {peer!r} uses protocol version {version}; this shaper speaks {VERSION}")
    if kind not in KIND_NAMES:
        raise FrameError(f"malformed frame from {peer!r}: unknown frame kind {kind}")
    if flags or reserved:
        raise FrameError(f"malformed frame from {peer!r}: reserved header bits set")
    return kind, tag_len, length


def json_payload(value: Any, limit: int) -> bytes:
    try:
        raw = json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"metadata must be JSON-serialisable (dict, list, str, int, float, bool, None): {exc}") from exc
    if len(raw) > limit:
        raise ValueError(f"metadata is {len(raw)} bytes; the limit is {limit} (send large data as an array or bytes)")
    return raw


def parse_json(raw: bytes, peer: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"malformed metadata from {peer!r}: {exc}") from exc


def array_descriptor(arr: np.ndarray) -> tuple[np.ndarray, bytes]:
    """A little-endian contiguous view of ``arr`` and its descriptor bytes."""
    if arr.dtype.kind not in _ALLOWED_KINDS:
        raise TypeError(
            f"cannot send arrays of dtype {arr.dtype}: only bool, integer, float and complex arrays "
            "travel as arrays (serialise other objects to bytes)"
        )
    if arr.ndim > MAX_NDIM:
        raise ValueError(f"arrays of more than {MAX_NDIM} dimensions cannot be sent")
    little = arr.astype(arr.dtype.newbyteorder("<"), copy=False) if arr.dtype.byteorder == ">" else arr
    if not little.flags.c_contiguous:
        little = little.copy(order="C")  # (np.ascontiguousarray would turn 0-d into 1-d)
    code = little.dtype.str.encode("ascii")
    desc = struct.pack("<B", len(code)) + code + struct.pack("<B", little.ndim)
    desc += struct.pack(f"<{little.ndim}Q", *little.shape)
    return little, desc


def parse_array_descriptor(raw: bytes, peer: str, max_message: int) -> tuple[np.dtype, tuple[int, ...], int]:
    try:
        (code_len,) = struct.unpack_from("<B", raw, 0)
        code = raw[1:1 + code_len].decode("ascii")
        (ndim,) = struct.unpack_from("<B", raw, 1 + code_len)
        if ndim > MAX_NDIM:
            raise FrameError(f"array from {peer!r} claims {ndim} dimensions (limit {MAX_NDIM})")
        shape = struct.unpack_from(f"<{ndim}Q", raw, 2 + code_len)
        if 2 + code_len + 8 * ndim != len(raw):
            raise FrameError(f"malformed array header from {peer!r}: wrong length")
        dtype = np.dtype(code)
    except (struct.error, UnicodeDecodeError, TypeError) as exc:
        raise FrameError(f"malformed array header from {peer!r}: {exc}") from exc
    if dtype.kind not in _ALLOWED_KINDS or dtype.byteorder == ">" or dtype.str != code:
        raise FrameError(f"array from {peer!r} has a disallowed dtype {code!r}")
    total = dtype.itemsize
    for dim in shape:
        total *= dim
    if total > max_message:
        raise FrameError(f"array from {peer!r} would be {total} bytes; the limit is {max_message}")
    return dtype, tuple(shape), total
