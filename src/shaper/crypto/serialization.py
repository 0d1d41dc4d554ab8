"""Versioned binary and JSON formats for keys and ciphertext arrays. No pickle, ever.

Binary layout (all integers little-endian)::

    magic "SHPR" | u16 format version (1) | u8 kind | u8 scheme | body

    kind 1 public key, 2 private key, 3 encrypted array, 4 packed array
    scheme 1 Paillier, 2 OU

    big integers: u32 byte width, then that many bytes (fixed width per key size)
    Paillier public  : n, h_s, u32 exponent_bits, u8 djn
    Paillier private : public body, p, q
    OU public        : n, G, H, u32 prime_bits, u32 exponent_bits
    OU private       : public body, p, q, t
    encrypted array  : 32-byte key fingerprint, i32 frac_bits, u8 ndim, u64 × ndim shape,
                       u32 width, count × width bytes (each ciphertext, little-endian)
    packed array     : fingerprint, i32 frac_bits, u64 count, u32 value_bits, u32 headroom_bits,
                       u8 signed, u32 width, ciphertexts

Parsing checks the magic, version, kind, scheme, every length, and validates keys (primality,
consistency) and every ciphertext (in [1, N), coprime to n) before returning. Private keys are
written with mode 0600.

JSON: Paillier keys use python-paillier's JWK form (``kty`` "DAJ", ``alg`` "PAI-GN1", base64url
integers) extended with ``hs`` and ``exponent_bits``, so ``pheutil`` reads our public keys; OU keys
use the same style with ``kty`` "OU".
"""

from __future__ import annotations

import base64
import json
import os
import stat
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from gmpy2 import mpz

from ..errors import KeyMismatchError, SerializationError
from ..files import write_private
from .ahe import AHEPrivateKey, AHEPublicKey, EncryptedArray, _object_array

MAGIC = b"SHPR"
VERSION = 1
KIND_PUBLIC, KIND_PRIVATE, KIND_ARRAY, KIND_PACKED = 1, 2, 3, 4
SCHEME_PAILLIER, SCHEME_OU = 1, 2
_MAX_DIMS = 32


def _scheme_id(key: AHEPublicKey) -> int:
    return {"paillier": SCHEME_PAILLIER, "ou": SCHEME_OU}[key.scheme]


class _Reader:
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


def _int_field(value: int, width: int | None = None) -> bytes:
    value = int(value)
    if width is None:
        width = max(1, (value.bit_length() + 7) // 8)
    return struct.pack("<I", width) + value.to_bytes(width, "little")


def _header(kind: int, scheme: int) -> bytes:
    return MAGIC + struct.pack("<HBB", VERSION, kind, scheme)


def _read_header(r: _Reader) -> tuple[int, int]:
    magic = bytes(r.take(4, "magic"))
    if magic != MAGIC:
        raise SerializationError(f"not shaper data (magic {magic!r}, expected {MAGIC!r})")
    version, kind, scheme = r.unpack("HBB", "header")
    if version != VERSION:
        raise SerializationError(f"unsupported format version {version} (this shaper reads {VERSION})")
    if scheme not in (SCHEME_PAILLIER, SCHEME_OU):
        raise SerializationError(f"unknown scheme id {scheme}")
    return kind, scheme


# -- keys -----------------------------------------------------------------------------------
def _public_body(pk: AHEPublicKey) -> bytes:
    width = (pk.bits + 7) // 8
    if pk.scheme == "paillier":
        return (_int_field(pk.n, width) + _int_field(pk.hs, 2 * width)  # type: ignore[attr-defined]
                + struct.pack("<IB", pk.exponent_bits, int(pk.djn)))  # type: ignore[attr-defined]
    return (_int_field(pk.n, width) + _int_field(pk.G, width) + _int_field(pk.H, width)  # type: ignore[attr-defined]
            + struct.pack("<II", pk.prime_bits, pk.exponent_bits))  # type: ignore[attr-defined]


def _read_public(r: _Reader, scheme: int) -> AHEPublicKey:
    if scheme == SCHEME_PAILLIER:
        from .paillier import PaillierPublicKey

        n = r.integer("n")
        hs = r.integer("h_s")
        exponent_bits, djn = r.unpack("IB", "exponent bits and DJN flag")
        return PaillierPublicKey(n, hs, exponent_bits=exponent_bits, djn=bool(djn))
    from .ou import OUPublicKey

    n = r.integer("n")
    G = r.integer("G")
    H = r.integer("H")
    prime_bits, exponent_bits = r.unpack("II", "prime and exponent bits")
    return OUPublicKey(n, G, H, prime_bits, exponent_bits=exponent_bits)


def key_to_bytes(key: AHEPublicKey | AHEPrivateKey) -> bytes:
    """Serialise a public or private key."""
    if isinstance(key, AHEPublicKey):
        return _header(KIND_PUBLIC, _scheme_id(key)) + _public_body(key)
    if isinstance(key, AHEPrivateKey):
        pk = key.public_key
        body = _public_body(pk)
        half = (pk.bits + 15) // 16 + 1
        if pk.scheme == "paillier":
            body += _int_field(key.p, half) + _int_field(key.q, half)  # type: ignore[attr-defined]
        else:
            width = (pk.prime_bits + 7) // 8 + 1  # type: ignore[attr-defined]
            body += _int_field(key.p, width) + _int_field(key.q, width) + _int_field(key.t, width)  # type: ignore[attr-defined]
        return _header(KIND_PRIVATE, _scheme_id(pk)) + body
    raise TypeError(f"not a key: {type(key).__name__}")


def key_from_bytes(data: bytes) -> AHEPublicKey | AHEPrivateKey:
    """Parse and validate a key written by :func:`key_to_bytes`."""
    r = _Reader(data)
    kind, scheme = _read_header(r)
    if kind not in (KIND_PUBLIC, KIND_PRIVATE):
        raise SerializationError(f"expected a key, found object kind {kind}")
    pk = _read_public(r, scheme)
    if kind == KIND_PUBLIC:
        r.done()
        return pk
    if scheme == SCHEME_PAILLIER:
        from .paillier import PaillierPrivateKey

        p, q = r.integer("p"), r.integer("q")
        r.done()
        return PaillierPrivateKey(pk, p, q)  # type: ignore[arg-type]
    from .ou import OUPrivateKey

    p, q, t = r.integer("p"), r.integer("q"), r.integer("t")
    r.done()
    return OUPrivateKey(pk, p, q, t)  # type: ignore[arg-type]


def _b64(value: int) -> str:
    value = int(value)
    raw = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: Any, what: str) -> mpz:
    if not isinstance(text, str):
        raise SerializationError(f"JSON field {what!r} must be a base64url string")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise SerializationError(f"JSON field {what!r} is not valid base64url") from exc
    return mpz(int.from_bytes(raw, "big"))


def _public_jwk(pk: AHEPublicKey) -> dict:
    if pk.scheme == "paillier":
        return {"kty": "DAJ", "alg": "PAI-GN1", "key_ops": ["encrypt"], "n": _b64(pk.n),  # type: ignore[attr-defined]
                "hs": _b64(pk.hs), "exponent_bits": pk.exponent_bits, "djn": pk.djn,  # type: ignore[attr-defined]
                "kid": f"shaper paillier {pk.bits} {pk.fingerprint.hex()[:16]}"}
    return {"kty": "OU", "key_ops": ["encrypt"], "n": _b64(pk.n), "G": _b64(pk.G), "H": _b64(pk.H),  # type: ignore[attr-defined]
            "prime_bits": pk.prime_bits, "exponent_bits": pk.exponent_bits,  # type: ignore[attr-defined]
            "kid": f"shaper ou {pk.bits} {pk.fingerprint.hex()[:16]}"}


def key_to_json(key: AHEPublicKey | AHEPrivateKey) -> str:
    """JWK-style JSON (python-paillier compatible for Paillier)."""
    if isinstance(key, AHEPublicKey):
        return json.dumps(_public_jwk(key))
    if isinstance(key, AHEPrivateKey):
        pk = key.public_key
        if pk.scheme == "paillier":
            doc = {"kty": "DAJ", "key_ops": ["decrypt"], "p": _b64(key.p), "q": _b64(key.q),  # type: ignore[attr-defined]
                   "pub": _public_jwk(pk), "kid": _public_jwk(pk)["kid"]}
        else:
            doc = {"kty": "OU", "key_ops": ["decrypt"], "p": _b64(key.p), "q": _b64(key.q),  # type: ignore[attr-defined]
                   "t": _b64(key.t), "pub": _public_jwk(pk), "kid": _public_jwk(pk)["kid"]}  # type: ignore[attr-defined]
        return json.dumps(doc)
    raise TypeError(f"not a key: {type(key).__name__}")


def _public_from_jwk(doc: dict) -> AHEPublicKey:
    kty = doc.get("kty")
    if kty == "DAJ":
        from .paillier import PaillierPublicKey, _foreign_public_key

        n = _unb64(doc.get("n"), "n")
        if "hs" not in doc:  # a plain python-paillier key
            return _foreign_public_key(n)
        djn = doc.get("djn", True)
        exponent_bits = doc.get("exponent_bits")
        if not isinstance(djn, bool) or not (exponent_bits is None or isinstance(exponent_bits, int)):
            raise SerializationError("JSON fields 'djn' (bool) / 'exponent_bits' (int) have the wrong type")
        return PaillierPublicKey(n, _unb64(doc["hs"], "hs"), exponent_bits=exponent_bits, djn=djn)
    if kty == "OU":
        from .ou import OUPublicKey

        prime_bits, exponent_bits = doc.get("prime_bits"), doc.get("exponent_bits")
        if not isinstance(prime_bits, int) or not isinstance(exponent_bits, int):
            raise SerializationError("OU JSON key needs integer 'prime_bits' and 'exponent_bits'")
        return OUPublicKey(_unb64(doc.get("n"), "n"), _unb64(doc.get("G"), "G"), _unb64(doc.get("H"), "H"),
                           prime_bits, exponent_bits=exponent_bits)
    raise SerializationError(f"unknown key type {kty!r} (expected 'DAJ' for Paillier or 'OU')")


def key_from_json(text: str | bytes | dict) -> AHEPublicKey | AHEPrivateKey:
    """Parse a key from :func:`key_to_json` output (or a python-paillier JWK)."""
    if isinstance(text, dict):
        doc = text
    else:
        try:
            doc = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise SerializationError(f"key JSON does not parse: {exc}") from exc
    if not isinstance(doc, dict):
        raise SerializationError("key JSON must be an object")
    ops = doc.get("key_ops", [])
    if "decrypt" not in ops:
        return _public_from_jwk(doc)
    pub_doc = doc.get("pub")
    if not isinstance(pub_doc, dict):
        raise SerializationError("private key JSON lacks its 'pub' object")
    if doc.get("kty") == "DAJ":
        from .paillier import PaillierPrivateKey, PaillierPublicKey, _KNOWN_KEYS, _make_hs, is_djn_form

        p, q = _unb64(doc.get("p"), "p"), _unb64(doc.get("q"), "q")
        if "hs" in pub_doc:
            pk = _public_from_jwk(pub_doc)
        else:  # python-paillier private key: derive h_s here
            n = _unb64(pub_doc.get("n"), "n")
            pk = _KNOWN_KEYS.get(int(n)) or PaillierPublicKey(n, _make_hs(n, n * n), djn=is_djn_form(p, q))
        return PaillierPrivateKey(pk, p, q)  # type: ignore[arg-type]
    from .ou import OUPrivateKey

    pk = _public_from_jwk(pub_doc)
    return OUPrivateKey(pk, _unb64(doc.get("p"), "p"), _unb64(doc.get("q"), "q"), _unb64(doc.get("t"), "t"))  # type: ignore[arg-type]


# -- files ----------------------------------------------------------------------------------
def save_key(key: AHEPublicKey | AHEPrivateKey, path: str | os.PathLike, *, format: str = "binary") -> Path:
    """Write a key to ``path`` (``format`` "binary" or "json"). Private keys get mode 0600,
    set before any byte is written."""
    if format not in ("binary", "json"):
        raise ValueError(f"format must be 'binary' or 'json', got {format!r}")
    data = key_to_bytes(key) if format == "binary" else key_to_json(key).encode()
    path = Path(path)
    if isinstance(key, AHEPrivateKey):
        write_private(path, data)
    else:
        path.write_bytes(data)
    return path


def load_key(path: str | os.PathLike) -> AHEPublicKey | AHEPrivateKey:
    """Read a key written by :func:`save_key` (either format); warns if a private key file is
    readable by other users."""
    path = Path(path)
    data = path.read_bytes()
    key = key_from_bytes(data) if data[:4] == MAGIC else key_from_json(data.decode("utf-8"))
    if isinstance(key, AHEPrivateKey) and os.name == "posix":
        if path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            warnings.warn(f"private key file {path} is accessible by other users; chmod 600 it",
                          stacklevel=2)
    return key


# -- ciphertext arrays ----------------------------------------------------------------------
def _ciphertext_block(values: list, width: int) -> bytes:
    return b"".join(int(c).to_bytes(width, "little") for c in values)


def _read_ciphertexts(r: _Reader, count: int, pk: AHEPublicKey) -> list:
    (width,) = r.unpack("I", "ciphertext width")
    expected = (int(pk.ciphertext_modulus).bit_length() + 7) // 8
    if width != expected:
        raise SerializationError(f"ciphertext width {width} bytes does not match the key ({expected} bytes)")
    block = r.take(count * width, f"{count} ciphertexts")
    raw = bytes(block)
    values = [mpz(int.from_bytes(raw[i * width:(i + 1) * width], "little")) for i in range(count)]
    pk.validate_ciphertexts(values)
    return values


def _open_ciphertexts(data: bytes, pk: AHEPublicKey, kind: int, what: str) -> _Reader:
    """Reader positioned after the header, having checked kind, scheme and key fingerprint."""
    r = _Reader(data)
    found, scheme = _read_header(r)
    if found != kind:
        raise SerializationError(f"expected {what}, found object kind {found}")
    if scheme != _scheme_id(pk):
        raise KeyMismatchError(f"data holds scheme id {scheme}, the key is {pk.scheme}")
    fp = bytes(r.take(32, "key fingerprint"))
    if fp != pk.fingerprint:
        raise KeyMismatchError(
            f"ciphertexts were serialised under key {fp.hex()[:16]}, not the given key "
            f"{pk.fingerprint.hex()[:16]}"
        )
    return r


def encrypted_array_to_bytes(arr: EncryptedArray) -> bytes:
    pk = arr.public_key
    width = (int(pk.ciphertext_modulus).bit_length() + 7) // 8
    head = _header(KIND_ARRAY, _scheme_id(pk)) + pk.fingerprint
    head += struct.pack("<iB", arr.frac_bits, arr.ndim) + struct.pack(f"<{arr.ndim}Q", *arr.shape)
    return head + struct.pack("<I", width) + _ciphertext_block(arr._c.ravel().tolist(), width)


def encrypted_array_from_bytes(data: bytes, public_key: AHEPublicKey) -> EncryptedArray:
    r = _open_ciphertexts(data, public_key, KIND_ARRAY, "an encrypted array")
    frac_bits, ndim = r.unpack("iB", "scale and rank")
    if frac_bits < 0 or ndim > _MAX_DIMS:
        raise SerializationError(f"invalid scale {frac_bits} or rank {ndim}")
    shape = r.unpack(f"{ndim}Q", "shape") if ndim else ()
    count = int(np.prod(shape, dtype=object)) if ndim else 1
    values = _read_ciphertexts(r, count, public_key)
    r.done()
    return EncryptedArray(public_key, _object_array(values, tuple(shape)), frac_bits)


def packed_array_to_bytes(packed: Any) -> bytes:
    pk = packed.public_key
    lay = packed.layout
    width = (int(pk.ciphertext_modulus).bit_length() + 7) // 8
    head = _header(KIND_PACKED, _scheme_id(pk)) + pk.fingerprint
    head += struct.pack("<iQIIB", packed.frac_bits, packed.count, lay.value_bits, lay.headroom_bits, int(lay.signed))
    return head + struct.pack("<I", width) + _ciphertext_block(packed._c.tolist(), width)


def packed_array_from_bytes(data: bytes, public_key: AHEPublicKey) -> Any:
    from .packing import PackedArray, layout

    r = _open_ciphertexts(data, public_key, KIND_PACKED, "a packed array")
    frac_bits, count, value_bits, headroom_bits, signed = r.unpack("iQIIB", "packing header")
    if frac_bits < 0:
        raise SerializationError(f"invalid scale {frac_bits}")
    lay = layout(public_key, value_bits, signed=bool(signed), headroom_bits=headroom_bits)
    groups = -(-count // lay.slots) if count else 0
    values = _read_ciphertexts(r, groups, public_key)
    r.done()
    return PackedArray(public_key, _object_array(values), count, lay, frac_bits)
