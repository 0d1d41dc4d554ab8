"""Reading and writing keys: format dispatch and key files. No pickle, ever.

Every type writes itself — ``to_bytes``/``from_bytes`` on the keys (body layouts in
:mod:`shaper.crypto.paillier` and :mod:`shaper.crypto.ou`), on
:class:`~shaper.crypto.ahe.EncryptedArray` and :class:`~shaper.crypto.packing.PackedArray` — over
the framing in :mod:`shaper.crypto.wire`. This module only reads a header (or a JSON ``kty``)
to find the right type, and writes key files: private keys get mode 0600 before the first byte,
and a private key file that the group or other users may read is refused on load.

Parsing checks the magic, version, kind, scheme, every length, and validates keys (primality,
consistency) and every ciphertext (in [1, N), coprime to n) before returning.

JSON: Paillier keys use python-paillier's JWK form (``kty`` "DAJ", ``alg`` "PAI-GN1", base64url
integers) extended with ``hs`` and ``exponent_bits``, so ``pheutil`` reads our public keys; OU keys
use the same style with ``kty`` "OU".
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import SerializationError
from ..files import check_private_file, write_atomic
from . import wire
from .ahe import AHEPrivateKey, AHEPublicKey
from .ou import OUPrivateKey, OUPublicKey
from .paillier import PaillierPrivateKey, PaillierPublicKey

__all__ = ["check_private_file", "key_from_bytes", "key_from_json", "key_to_bytes", "key_to_json", "load_key", "save_key"]

#: scheme id -> (public key class, private key class)
_BY_SCHEME: dict[int, tuple[type[AHEPublicKey], type[AHEPrivateKey]]] = {
    wire.SCHEME_PAILLIER: (PaillierPublicKey, PaillierPrivateKey),
    wire.SCHEME_OU: (OUPublicKey, OUPrivateKey),
}
#: JWK ``kty`` -> (public key class, private key class)
_BY_KTY = {"DAJ": _BY_SCHEME[wire.SCHEME_PAILLIER], "OU": _BY_SCHEME[wire.SCHEME_OU]}


def key_to_bytes(key: AHEPublicKey | AHEPrivateKey) -> bytes:
    """Serialise a public or private key (``key.to_bytes()``)."""
    if not isinstance(key, (AHEPublicKey, AHEPrivateKey)):
        raise TypeError(f"not a key: {type(key).__name__}")
    return key.to_bytes()


def key_from_bytes(data: bytes) -> AHEPublicKey | AHEPrivateKey:
    """Parse and validate a key written by :func:`key_to_bytes`, whatever its scheme."""
    kind, scheme = wire.read_header(wire.Reader(data))
    if kind not in (wire.KIND_PUBLIC, wire.KIND_PRIVATE):
        raise SerializationError(f"expected a key, found object kind {kind}")
    if scheme not in _BY_SCHEME:
        raise SerializationError(f"scheme id {scheme} is not an additive scheme (CKKS keys: shaper.crypto.ckks.from_bytes)")
    public_class, private_class = _BY_SCHEME[scheme]
    return public_class.from_bytes(data) if kind == wire.KIND_PUBLIC else private_class.from_bytes(data)


def key_to_json(key: AHEPublicKey | AHEPrivateKey) -> str:
    """JWK-style JSON (python-paillier compatible for Paillier)."""
    if not isinstance(key, (AHEPublicKey, AHEPrivateKey)):
        raise TypeError(f"not a key: {type(key).__name__}")
    return json.dumps(key.to_jwk())


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
    kty = doc.get("kty")
    if not isinstance(kty, str) or kty not in _BY_KTY:
        raise SerializationError(f"unknown key type {kty!r} (expected 'DAJ' for Paillier or 'OU')")
    public_class, private_class = _BY_KTY[kty]
    ops = doc.get("key_ops", [])
    if not isinstance(ops, list):
        raise SerializationError("key JSON: 'key_ops' must be a list")
    if "decrypt" not in ops:
        return public_class.from_jwk(doc)
    if not isinstance(doc.get("pub"), dict):
        raise SerializationError("private key JSON lacks its 'pub' object")
    return private_class.from_jwk(doc)


# -- files ----------------------------------------------------------------------------------
def save_key(key: AHEPublicKey | AHEPrivateKey, path: str | os.PathLike, *, format: str = "binary") -> Path:
    """Write a key to ``path`` (``format`` "binary" or "json") in one step (a temporary sibling,
    fsynced, renamed: a crash leaves the old file or the new one). Private keys get mode 0600,
    set before any byte is written."""
    if format not in ("binary", "json"):
        raise ValueError(f"format must be 'binary' or 'json', got {format!r}")
    data = key_to_bytes(key) if format == "binary" else key_to_json(key).encode()
    path = Path(path)
    write_atomic(path, data, private=isinstance(key, AHEPrivateKey))
    return path


def load_key(path: str | os.PathLike) -> AHEPublicKey | AHEPrivateKey:
    """Read a key written by :func:`save_key` (either format). A private key file whose mode lets
    the group or other users in (anything wider than 0600) is refused
    (:func:`check_private_file`)."""
    path = Path(path)
    data = path.read_bytes()
    if data[:4] == wire.MAGIC:
        key = key_from_bytes(data)
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SerializationError(f"key file {path} is neither shaper's binary format nor UTF-8 JSON") from None
        key = key_from_json(text)
    if isinstance(key, AHEPrivateKey):
        check_private_file(path, "private key file")
    return key
