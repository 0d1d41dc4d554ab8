"""The byte-level pieces of shaper's versioned binary and JSON formats, shared by every type that
writes itself (keys, encrypted and packed arrays). No pickle, ever.

Binary layout (all integers little-endian)::

    magic "SHPR" | u16 format version (1) | u8 kind | u8 scheme | body

    kind 1 public key, 2 private key, 3 encrypted array, 4 packed array,
         5 parameters, 6 switching key, 7 ciphertext, 8 secret-key share (CKKS),
         9 public key bundle (BGV: public, relinearisation and Galois keys)
    scheme 1 Paillier, 2 OU, 3 CKKS, 4 BGV
    big integers: u32 byte width, then that many bytes (fixed width per key size)

Each type owns its body (``to_bytes``/``from_bytes`` on the type, body layouts in its module's
docstring); :mod:`shaper.crypto.serialization` only reads the header and dispatches. A
:class:`Reader` checks every length before it reads, so a truncated or padded input fails with
a :class:`~shaper.errors.SerializationError` naming the field.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from gmpy2 import mpz

from ..errors import KeyMismatchError, SerializationError

MAGIC = b"SHPR"
VERSION = 1
KIND_PUBLIC, KIND_PRIVATE, KIND_ARRAY, KIND_PACKED = 1, 2, 3, 4
KIND_PARAMS, KIND_SWITCH_KEY, KIND_CIPHERTEXT, KIND_KEY_SHARE = 5, 6, 7, 8
KIND_KEY_BUNDLE = 9
SCHEME_PAILLIER, SCHEME_OU, SCHEME_CKKS = 1, 2, 3
SCHEME_BGV = 4
SCHEMES = (SCHEME_PAILLIER, SCHEME_OU, SCHEME_CKKS, SCHEME_BGV)
KIND_NAMES = {KIND_PUBLIC: "a public key", KIND_PRIVATE: "a private key", KIND_ARRAY: "an encrypted array",
              KIND_PACKED: "a packed array", KIND_PARAMS: "parameters", KIND_SWITCH_KEY: "a switching key",
              KIND_CIPHERTEXT: "a ciphertext", KIND_KEY_SHARE: "a secret-key share",
              KIND_KEY_BUNDLE: "a public key bundle"}


class Reader:
    """A cursor over untrusted bytes: every read is bounds-checked and names what it reads."""

    def __init__(self, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SerializationError(f"expected bytes, got {type(data).__name__}")
        self.data = memoryview(bytes(data))
        self.pos = 0

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise SerializationError(
                f"truncated input: {what} needs {size} bytes at offset {self.pos}, "
                f"only {len(self.data) - self.pos} left"
            )
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def integer(self, what: str, max_bytes: int = 1 << 16) -> mpz:
        (width,) = self.unpack("I", what + " width")
        if width > max_bytes:
            raise SerializationError(f"{what} is {width} bytes long; at most {max_bytes} allowed")
        return mpz(int.from_bytes(self.take(width, what), "little"))

    def done(self) -> None:
        if self.pos != len(self.data):
            raise SerializationError(f"{len(self.data) - self.pos} unexpected trailing bytes")


def int_field(value: int, width: int | None = None) -> bytes:
    """A big integer as u32 width + little-endian bytes (minimal width unless given)."""
    value = int(value)
    if width is None:
        width = max(1, (value.bit_length() + 7) // 8)
    return struct.pack("<I", width) + value.to_bytes(width, "little")


def header(kind: int, scheme: int) -> bytes:
    return MAGIC + struct.pack("<HBB", VERSION, kind, scheme)


def read_header(r: Reader) -> tuple[int, int]:
    """(kind, scheme) after checking magic, version and scheme id."""
    magic = bytes(r.take(4, "magic"))
    if magic != MAGIC:
        raise SerializationError(f"not shaper data (magic {magic!r}, expected {MAGIC!r})")
    version, kind, scheme = r.unpack("HBB", "header")
    if version != VERSION:
        raise SerializationError(f"unsupported format version {version} (this shaper reads {VERSION})")
    if scheme not in SCHEMES:
        raise SerializationError(f"unknown scheme id {scheme}")
    return kind, scheme


def open_object(data: bytes, kind: int, scheme: int) -> Reader:
    """Reader positioned after the header of an object that must be of ``kind`` and ``scheme``."""
    r = Reader(data)
    found, found_scheme = read_header(r)
    if found != kind:
        raise SerializationError(f"expected {KIND_NAMES.get(kind, kind)}, found object kind {found}")
    if found_scheme != scheme:
        raise KeyMismatchError(f"data holds scheme id {found_scheme}, expected {scheme}")
    return r


# -- ciphertext blocks --------------------------------------------------------------------------
def ciphertext_width(public_key: Any) -> int:
    """Bytes per ciphertext under ``public_key`` (fixed, so sizes never reveal values)."""
    return (int(public_key.ciphertext_modulus).bit_length() + 7) // 8


def ciphertext_block(values: list, width: int) -> bytes:
    """u32 width, then each ciphertext in ``width`` little-endian bytes."""
    return struct.pack("<I", width) + b"".join(int(c).to_bytes(width, "little") for c in values)


def open_ciphertexts(data: bytes, public_key: Any, kind: int) -> Reader:
    """Reader positioned after the header and key fingerprint of a ciphertext object, having
    checked kind, scheme and that the fingerprint is ``public_key``'s."""
    r = open_object(data, kind, public_key.scheme_id)
    fp = bytes(r.take(32, "key fingerprint"))
    if fp != public_key.fingerprint:
        raise KeyMismatchError(
            f"ciphertexts were serialised under key {fp.hex()[:16]}, not the given key "
            f"{public_key.fingerprint.hex()[:16]}"
        )
    return r


def read_ciphertexts(r: Reader, count: int, public_key: Any) -> list:
    """``count`` ciphertexts of a block written by :func:`ciphertext_block`, each validated
    against ``public_key`` (in [1, N), coprime to n) before it is returned."""
    (width,) = r.unpack("I", "ciphertext width")
    expected = ciphertext_width(public_key)
    if width != expected:
        raise SerializationError(f"ciphertext width {width} bytes does not match the key ({expected} bytes)")
    raw = bytes(r.take(count * width, f"{count} ciphertexts"))
    values = [mpz(int.from_bytes(raw[i * width:(i + 1) * width], "little")) for i in range(count)]
    public_key.validate_ciphertexts(values)
    return values


# -- JSON (JWK-style) ----------------------------------------------------------------------------
def b64(value: int) -> str:
    """A non-negative integer as unpadded base64url of its big-endian bytes (JWK style)."""
    value = int(value)
    raw = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unb64(text: Any, what: str) -> mpz:
    if not isinstance(text, str):
        raise SerializationError(f"JSON field {what!r} must be a base64url string")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise SerializationError(f"JSON field {what!r} is not valid base64url") from exc
    return mpz(int.from_bytes(raw, "big"))


def json_int(doc: dict, name: str, what: str) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SerializationError(f"{what} needs an integer {name!r}")
    return value
