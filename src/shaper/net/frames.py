"""Typed frames: the only thing that crosses a link between parties.

Every frame starts with a 16-byte header, then a tag (the message stream it belongs to) and a
payload::

    "SF" | u8 version | u8 kind | u8 flags (0) | u8 tag length | u16 reserved (0) | u64 payload length
    tag (UTF-8, <= 255 bytes) | payload

Kinds: HELLO (handshake, JSON), META (small JSON value), BYTES and ARRAY (a head frame describing
the message, then CHUNK frames of at most ``max_frame`` bytes each until the announced size is
reached), CLOSE (the peer is done), ABORT (the peer failed; JSON carries only the kind of its
error, the phase and the last message tag, see :func:`abort_notice`: never the error's text,
which can hold the party's data).

Arrays carry a numpy dtype from an allow-list (bool, signed/unsigned integers, floats, complex;
little-endian) and a shape; nothing is ever unpickled or evaluated. A receiver checks the magic,
version, kind, every length against its limits, the dtype and shape (each dimension too, so a
shape such as (0, 2^63) is refused although it holds no data), and that chunks add up; where the
caller says what it expects (:class:`Expect`), an announcement that differs is refused before
its data is received.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
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
    """(dtype, shape, bytes of data) of an array head; raises :class:`FrameError` naming the peer
    for anything but an allowed dtype and a shape whose every dimension fits ``max_message``."""
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
    except FrameError:
        raise
    except Exception as exc:  # struct.error, UnicodeDecodeError, TypeError (numpy's dtype parser)
        raise FrameError(f"malformed array header from {peer!r}: {type(exc).__name__}") from exc
    if dtype.kind not in _ALLOWED_KINDS or dtype.byteorder == ">" or dtype.str != code or dtype.itemsize < 1:
        raise FrameError(f"array from {peer!r} has a disallowed dtype {code[:40]!r} (only bool, integer, float "
                         "and complex numbers travel as arrays)")
    total, extent = dtype.itemsize, dtype.itemsize
    for dim in shape:
        total *= dim
        extent *= max(dim, 1)  # an empty array's other dimensions must still be sane
    if total > max_message:
        raise FrameError(f"array from {peer!r} would be {total} bytes; the limit is {max_message}")
    if extent > max_message:
        raise FrameError(f"array from {peer!r} has shape {tuple(shape)}: a dimension this large is refused "
                         f"(the limit is {max_message} bytes)")
    return dtype, tuple(shape), total


# -- what a receiver expects -------------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    """What a receive expects under its tag: the frame ``kind``, and for arrays the ``dtype`` and
    ``shape`` (``None`` in a shape: any length), for bytes the exact ``size``. The channel checks a
    message's announcement against it as soon as both are known, before the data arrives."""

    kind: int
    dtype: np.dtype | None = None
    shape: tuple[int | None, ...] | None = None
    size: int | None = None

    def check(self, peer: str, tag: str, kind: int, dtype: np.dtype | None = None,
              shape: tuple[int, ...] | None = None, nbytes: int | None = None) -> None:
        """Raise :class:`FrameError` naming the peer and the tag if an announced message (its
        kind, dtype, shape, byte size) is not what is expected."""
        if kind != self.kind:
            raise FrameError(f"expected {KIND_NAMES[self.kind]} from party {peer!r} under tag {tag!r}, "
                             f"received {KIND_NAMES[kind]}")
        if self.dtype is not None and dtype is not None and dtype != self.dtype:
            raise FrameError(f"party {peer!r} sent dtype {dtype} under tag {tag!r}; expected {self.dtype}")
        if self.shape is not None and shape is not None and not _shape_matches(shape, self.shape):
            raise FrameError(f"party {peer!r} sent shape {tuple(shape)} under tag {tag!r}; expected "
                             f"{_shape_text(self.shape)}")
        if self.size is not None and nbytes is not None and nbytes != self.size:
            raise FrameError(f"party {peer!r} sent {nbytes} bytes under tag {tag!r}; expected {self.size}")

    def check_value(self, peer: str, tag: str, kind: int, value: Any) -> None:
        """:meth:`check` for a message that has already arrived."""
        if kind == ARRAY:
            self.check(peer, tag, kind, value.dtype, value.shape, value.nbytes)
        elif kind == BYTES:
            self.check(peer, tag, kind, nbytes=len(value))
        else:
            self.check(peer, tag, kind)


def expect(kind: int, *, dtype: Any = None, shape: Any = None, size: int | None = None) -> Expect:
    """An :class:`Expect` from what a caller passes (any numpy dtype spelling; a shape as a sequence
    of ints or ``None``)."""
    dt = None if dtype is None else np.dtype(dtype)
    if shape is not None:
        shape = tuple(None if d is None else int(d) for d in shape)
        if any(d is not None and d < 0 for d in shape):
            raise ValueError(f"an expected shape has no negative dimensions, got {shape}")
    if size is not None and size < 0:
        raise ValueError(f"an expected size is not negative, got {size}")
    return Expect(kind, dt, shape, size)


def _shape_matches(shape: tuple[int, ...], want: tuple[int | None, ...]) -> bool:
    return len(shape) == len(want) and all(w is None or w == d for d, w in zip(shape, want))


def _shape_text(shape: tuple[int | None, ...]) -> str:
    if all(d is not None for d in shape):
        return str(tuple(shape))
    return "(" + ", ".join("any" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


# -- telling peers that this party failed --------------------------------------------------------
_KIND_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}")
_MAX_STAGE = 200


def abort_notice(error: BaseException | str, phase: str | None = None, tag: str | None = None) -> dict:
    """What an ABORT tells the peers: the *kind* of error (its class name), the phase this party was
    in and the tag of its last message, if known. Never the error's text: that can hold the
    party's data (an id, a cell value, a path, column names) and stays in its own output."""
    kind = error if isinstance(error, str) else type(error).__name__
    notice: dict[str, Any] = {"kind": kind if _KIND_NAME.fullmatch(kind) else "Error"}
    if phase:
        notice["phase"] = str(phase)[:_MAX_STAGE]
    if tag:
        notice["tag"] = str(tag)[:_MAX_STAGE]
    # ``error`` (the summary only) for readers that show that field
    notice["error"] = describe_abort(notice)
    return notice


def describe_abort(notice: Any) -> str:
    """The summary of a peer's ABORT notice: ``ValueError (phase 'fit', last message 'grad/3');
    the details are in that party's own output``. Every field is checked and quoted: a peer
    cannot put arbitrary text in front of the user (a notice without a valid kind reads "an
    error")."""
    info = notice if isinstance(notice, dict) else {}
    kind = info.get("kind")
    text = kind if isinstance(kind, str) and _KIND_NAME.fullmatch(kind) else "an error"
    where = [f"{label} {value[:_MAX_STAGE]!r}" for label, value in
             (("phase", info.get("phase")), ("last message", info.get("tag"))) if isinstance(value, str) and value]
    if where:
        text += f" ({', '.join(where)})"
    return text + "; the details are in that party's own output"
