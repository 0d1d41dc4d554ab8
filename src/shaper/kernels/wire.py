"""Typed binary encoding of kernel calls between the parent and its worker processes.

Only the types kernel calls use can be encoded: non-negative integers, lists of them, numpy
uint8/int64 arrays, :class:`FixedBaseSpec`, ``None``, strings and tuples of these. Nothing is
pickled, so a worker never executes code it is sent.

Frame: u64 little-endian payload length, then the payload. A call is
``(method: str, args: tuple)``; a reply is ``("ok", result)`` or
``("error", exception type name, message)``.
"""

from __future__ import annotations

import struct
import traceback
from typing import Any, BinaryIO

import numpy as np
from gmpy2 import mpz

from .base import FixedBaseSpec

_ALLOWED_DTYPES = {"|u1": np.uint8, "<i8": np.int64}
_MPZ = type(mpz(0))
MAX_FRAME = 1 << 40


class WireError(RuntimeError):
    pass


def _int_bytes(value: int) -> bytes:
    value = int(value)
    if value < 0:
        raise WireError("kernel wire format carries non-negative integers only")
    width = (value.bit_length() + 7) // 8
    return struct.pack("<I", width) + value.to_bytes(width, "little")


def encode(obj: Any) -> bytes:
    parts: list[bytes] = []
    _encode(obj, parts)
    return b"".join(parts)


def _encode(obj: Any, out: list[bytes]) -> None:
    if obj is None:
        out.append(b"N")
    elif isinstance(obj, str):
        raw = obj.encode("utf-8")
        out.append(b"S" + struct.pack("<I", len(raw)) + raw)
    elif isinstance(obj, FixedBaseSpec):
        out.append(b"F" + _int_bytes(obj.base) + _int_bytes(obj.modulus)
                   + struct.pack("<IB", obj.exponent_bits, 1 if obj.constant_time else 0))
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        code = arr.dtype.str
        if code not in _ALLOWED_DTYPES:
            raise WireError(f"cannot send arrays of dtype {arr.dtype}")
        head = code.encode() + struct.pack("<B", arr.ndim) + struct.pack(f"<{arr.ndim}Q", *arr.shape)
        out.append(b"A" + head + arr.tobytes())
    elif isinstance(obj, (int, np.integer)) or type(obj) is _MPZ:
        out.append(b"I" + _int_bytes(obj))
    elif isinstance(obj, tuple):
        out.append(b"T" + struct.pack("<I", len(obj)))
        for item in obj:
            _encode(item, out)
    elif isinstance(obj, list):
        if all(isinstance(v, (int, np.integer)) or type(v) is _MPZ for v in obj):
            ints = [int(v) for v in obj]
            if any(v < 0 for v in ints):
                raise WireError("kernel wire format carries non-negative integers only")
            width = max(((v.bit_length() + 7) // 8 for v in ints), default=0)
            out.append(b"L" + struct.pack("<II", len(ints), width))
            out.append(b"".join(v.to_bytes(width, "little") for v in ints))
        else:
            out.append(b"T" + struct.pack("<I", len(obj)))
            for item in obj:
                _encode(item, out)
    else:
        raise WireError(f"cannot send {type(obj).__name__} to a kernel worker")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, size: int) -> memoryview:
        if self.pos + size > len(self.data):
            raise WireError("truncated kernel message")
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def integer(self) -> mpz:
        (width,) = self.unpack("I")
        return mpz(int.from_bytes(self.take(width), "little"))


def decode(data: bytes) -> Any:
    r = _Reader(data)
    obj = _decode(r)
    if r.pos != len(r.data):
        raise WireError("trailing bytes in kernel message")
    return obj


def _decode(r: _Reader) -> Any:
    tag = bytes(r.take(1))
    if tag == b"N":
        return None
    if tag == b"S":
        (size,) = r.unpack("I")
        return bytes(r.take(size)).decode("utf-8")
    if tag == b"I":
        return r.integer()
    if tag == b"F":
        base, modulus = r.integer(), r.integer()
        bits, flags = r.unpack("IB")
        if flags not in (0, 1):
            raise WireError(f"bad fixed-base spec flags {flags}")
        return FixedBaseSpec(int(base), int(modulus), bits, constant_time=bool(flags))
    if tag == b"A":
        code = bytes(r.take(3)).decode()
        if code not in _ALLOWED_DTYPES:
            raise WireError(f"unexpected array dtype {code!r}")
        (ndim,) = r.unpack("B")
        shape = r.unpack(f"{ndim}Q") if ndim else ()
        dtype = np.dtype(_ALLOWED_DTYPES[code])
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return np.frombuffer(bytes(r.take(size)), dtype=dtype).reshape(shape)
    if tag == b"L":
        count, width = r.unpack("II")
        raw = bytes(r.take(count * width))
        from_bytes = mpz.from_bytes if hasattr(mpz, "from_bytes") else None
        if from_bytes is not None:
            return [from_bytes(raw[i * width:(i + 1) * width], "little") for i in range(count)]
        return [mpz(int.from_bytes(raw[i * width:(i + 1) * width], "little")) for i in range(count)]
    if tag == b"T":
        (count,) = r.unpack("I")
        return tuple(_decode(r) for _ in range(count))
    raise WireError(f"unknown tag {tag!r} in kernel message")


#: the kernel methods a worker runs (anything else is refused)
METHODS = frozenset({"powmod", "powmod_same_exponent", "fixed_base_powmod", "mulmod", "invert", "prod_rows", "horner",
                     "horner_multiexp"})

_EXCEPTIONS = {"ZeroDivisionError": ZeroDivisionError, "ValueError": ValueError, "TypeError": TypeError}


def serve(kernel: Any, frame: bytes) -> bytes:
    """Worker side: run one encoded call on ``kernel``; the encoded reply. Used by the worker
    processes (:mod:`shaper.kernels._worker`) and the Ray actors (:mod:`shaper.kernels.cluster`)."""
    try:
        method, args = decode(frame)
        if method not in METHODS:
            raise WireError(f"unknown kernel method {method!r}")
        return encode(("ok", getattr(kernel, method)(*args)))
    except Exception as exc:  # reported to the caller, which raises it
        return encode(("error", type(exc).__name__, f"{exc}\n{traceback.format_exc()}"))


def unwrap(reply: Any, error: type[Exception]) -> Any:
    """Caller side: the result of a decoded reply, or its exception raised here (a type the
    caller knows, else ``error``)."""
    if reply[0] == "ok":
        return reply[1]
    _, name, message = reply
    raise _EXCEPTIONS.get(name, error)(f"in kernel worker: {message}")


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(struct.pack("<Q", len(payload)))
    stream.write(payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> bytes | None:
    head = _read_exact(stream, 8)
    if head is None:
        return None
    (size,) = struct.unpack("<Q", head)
    if size > MAX_FRAME:
        raise WireError(f"kernel frame of {size} bytes exceeds the limit")
    body = _read_exact(stream, size)
    if body is None:
        raise WireError("kernel stream closed mid-frame")
    return body


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks = []
    left = size
    while left:
        chunk = stream.read(left)
        if not chunk:
            if left == size:
                return None
            raise WireError("kernel stream closed mid-frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
