"""Versioned binary serialisation of CKKS parameters, keys and ciphertexts. No pickle, ever.

Framing (:mod:`shaper.crypto.wire`): ``"SHPR" | u16 version | u8 kind | u8 scheme = 3 (CKKS)``,
then a body, little-endian throughout. Every body but the parameters' starts with the 16-byte
fingerprint of the parameter set it belongs to, so loading it against other parameters fails
by name. Polynomials are rows of u64 in NTT form, one row per prime of the basis.

=============== ===================================================================================
kind            body
=============== ===================================================================================
5 parameters    u32 N, u8 L + 1, (L + 1) x u64 q_i, u64 p, f64 scale, f64 sigma, u8 security (0: test)
2 secret key    fingerprint, N x i32 coefficients
1 public key    fingerprint, u8 seeded, (32-byte seed | a: (L + 2) rows), b: (L + 2) rows
6 switching key fingerprint, u32 Galois element (0: relinearisation), u8 seeded,
                (seed | a: (L + 1) x (L + 2) rows), b: (L + 1) x (L + 2) rows
7 ciphertext    fingerprint, u8 components, u8 level, f64 scale, u8 seeded,
                c_0 (level + 1 rows), then (seed | the other components)
8 key share     fingerprint, u16 party index, u16 parties, s_i: (L + 2) rows (NTT form)
=============== ===================================================================================

Seeded forms store a uniform polynomial as the 32-byte seed it is expanded from (AES-256-CTR),
halving keys and fresh symmetric ciphertexts. Loading checks every length, that every residue is
below its prime, the Galois element, level and scale, and re-validates the parameters (primes,
security) before anything is returned. A parameter set whose security byte says "test set" (0)
loads only with ``insecure=True``, so a swapped file cannot turn a deployment's parameters into
insecure ones unnoticed. Scales must be sane: a parameter scale in [2, 2^61] (no prime is
larger), a ciphertext scale in [1, 2^(log2 PQ + 64)]; anything else (5e-324, inf, NaN, a negative
number, 1e300) is refused as :class:`~shaper.errors.SerializationError`.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import SerializationError
from ...files import check_private_file, write_atomic
from .. import wire
from ..prg import Prg
from .keys import (
    SEED_BYTES,
    PublicKey,
    SecretKey,
    SecretKeyShare,
    SwitchingKey,
    expand_seed,
    uniform_poly,
)
from .params import Parameters
from .scheme import Ciphertext

__all__ = ["from_bytes", "load", "save", "to_bytes"]


def _rows(arr: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr, dtype="<u8").tobytes()


def _read_rows(r: wire.Reader, params: Parameters, rows: list[int], lead: tuple[int, ...], what: str) -> np.ndarray:
    count = int(np.prod(lead, dtype=np.int64)) * len(rows) * params.n
    arr = np.frombuffer(r.take(8 * count, what), dtype="<u8").astype(np.uint64).reshape(lead + (len(rows), params.n))
    primes = np.array([params.primes[i] for i in rows], dtype=np.uint64)
    if np.any(arr >= primes[:, None]):
        raise SerializationError(f"{what}: a residue is not below its prime")
    return arr


def to_bytes(obj: Any) -> bytes:
    """Serialise :class:`Parameters`, a key or a :class:`Ciphertext`."""
    if isinstance(obj, Parameters):
        return wire.header(wire.KIND_PARAMS, wire.SCHEME_CKKS) + obj.to_bytes()
    params = obj.params
    fp = params.fingerprint
    if isinstance(obj, SecretKey):
        return wire.header(wire.KIND_PRIVATE, wire.SCHEME_CKKS) + fp + obj.coefficients.astype("<i4").tobytes()
    if isinstance(obj, SecretKeyShare):
        return wire.header(wire.KIND_KEY_SHARE, wire.SCHEME_CKKS) + fp + struct.pack("<HH", obj.index, obj.parties) + _rows(obj.ntt)
    if isinstance(obj, PublicKey):
        body = b"\x01" + obj.seed if obj.seed is not None else b"\x00" + _rows(obj.data[1])
        return wire.header(wire.KIND_PUBLIC, wire.SCHEME_CKKS) + fp + body + _rows(obj.data[0])
    if isinstance(obj, SwitchingKey):
        head = fp + struct.pack("<I", obj.galois)
        body = b"\x01" + obj.seed if obj.seed is not None else b"\x00" + _rows(obj.data[:, 1])
        return wire.header(wire.KIND_SWITCH_KEY, wire.SCHEME_CKKS) + head + body + _rows(obj.data[:, 0])
    if isinstance(obj, Ciphertext):
        seeded = obj.seed is not None and obj.size == 2
        head = fp + struct.pack("<BBdB", obj.size, obj.level, obj.scale, int(seeded))
        rest = obj.seed if seeded else _rows(obj.data[1:])
        return wire.header(wire.KIND_CIPHERTEXT, wire.SCHEME_CKKS) + head + _rows(obj.data[0]) + rest
    raise TypeError(f"cannot serialise {type(obj).__name__} as CKKS data")


def from_bytes(data: bytes, params: Parameters | None = None, *, insecure: bool = False) -> Any:
    """Parse and validate CKKS data. Keys and ciphertexts need the ``params`` they belong to.
    A test parameter set (security byte 0) loads only with ``insecure=True``."""
    r = wire.Reader(data)
    kind, scheme = wire.read_header(r)
    if scheme != wire.SCHEME_CKKS:
        raise SerializationError(f"not CKKS data (scheme id {scheme})")
    if kind == wire.KIND_PARAMS:
        out = _read_params(r, insecure)
        r.done()
        return out
    if params is None:
        raise SerializationError("loading a CKKS key or ciphertext needs its Parameters (from_bytes(data, params))")
    fp = bytes(r.take(16, "parameter fingerprint"))
    if fp != params.fingerprint:
        raise SerializationError("the data belongs to a different CKKS parameter set (fingerprint mismatch)")
    all_rows = list(range(len(params.primes)))
    if kind == wire.KIND_PRIVATE:
        coeffs = np.frombuffer(r.take(4 * params.n, "secret key"), dtype="<i4").astype(np.int64)
        if np.any(np.abs(coeffs) >= 1 << 31):
            raise SerializationError("secret key coefficients must be small (|s_i| < 2^31)")
        out: Any = SecretKey.from_coefficients(params, coeffs)
    elif kind == wire.KIND_KEY_SHARE:
        index, parties = r.unpack("HH", "key share header")
        if not 2 <= parties or index >= parties:
            raise SerializationError(f"key share of party {index} among {parties} parties")
        out = SecretKeyShare(params, _read_rows(r, params, all_rows, (), "key share"), index, parties)
    elif kind == wire.KIND_PUBLIC:
        seeded = _flag(r, "public key seed flag")
        if seeded:
            seed = bytes(r.take(SEED_BYTES, "public key seed"))
            a = expand_seed(params, seed, all_rows, 1)[0]
        else:
            seed, a = None, _read_rows(r, params, all_rows, (), "public key a")
        b = _read_rows(r, params, all_rows, (), "public key b")
        out = PublicKey(params, np.stack([b, a]), seed)
    elif kind == wire.KIND_SWITCH_KEY:
        (galois,) = r.unpack("I", "Galois element")
        if galois != 0 and (galois % 2 == 0 or galois >= 2 * params.n):
            raise SerializationError(f"Galois element {galois} is not odd and below 2N = {2 * params.n}")
        digits = len(params.moduli)
        seeded = _flag(r, "switching key seed flag")
        if seeded:
            seed = bytes(r.take(SEED_BYTES, "switching key seed"))
            a = expand_seed(params, seed, all_rows, digits)
        else:
            seed, a = None, _read_rows(r, params, all_rows, (digits,), "switching key a")
        b = _read_rows(r, params, all_rows, (digits,), "switching key b")
        out = SwitchingKey(params, np.ascontiguousarray(np.stack([b, a], axis=1)), galois, seed)
    elif kind == wire.KIND_CIPHERTEXT:
        size, level, scale, seeded = r.unpack("BBdB", "ciphertext header")
        if size not in (2, 3) or level > params.max_level:
            raise SerializationError(f"ciphertext with {size} components at level {level} (parameters allow 2-3 "
                                     f"components, levels 0..{params.max_level})")
        if not (math.isfinite(scale) and 1.0 <= scale and math.log2(scale) <= params.log_pq + _SCALE_SLACK_BITS):
            raise SerializationError(f"ciphertext scale {scale!r} is outside [1, 2^{params.log_pq + _SCALE_SLACK_BITS:.0f}] "
                                     "(a finite number no ciphertext of these parameters goes beyond)")
        if seeded not in (0, 1) or (seeded and size != 2):
            raise SerializationError("bad ciphertext seed flag")
        mods = params.mods(level)
        c0 = _read_rows(r, params, mods, (1,), "ciphertext c0")
        if seeded:
            seed = bytes(r.take(SEED_BYTES, "ciphertext seed"))
            rest = uniform_poly(params, mods, Prg(seed))[None]
        else:
            seed, rest = None, _read_rows(r, params, mods, (size - 1,), "ciphertext components")
        out = Ciphertext(params, np.concatenate([c0, rest]), scale, seed)
    else:
        raise SerializationError(f"unknown CKKS object kind {kind}")
    r.done()
    return out


def _flag(r: wire.Reader, what: str) -> bool:
    (flag,) = r.unpack("B", what)
    if flag not in (0, 1):
        raise SerializationError(f"{what} must be 0 or 1, got {flag}")
    return bool(flag)


_SCALE_SLACK_BITS = 64  # a ciphertext scale may pass log2(PQ) by this much (a product before its rescale)
_MAX_PARAMS_SCALE = 2.0 ** 61  # every prime is below 2^61


def _read_params(r: wire.Reader, insecure: bool = False) -> Parameters:
    n, count = r.unpack("IB", "parameter header")
    moduli = r.unpack(f"{count}Q", "ciphertext primes")
    special, scale, sigma, security = r.unpack("QddB", "parameter tail")
    if security not in (0, 128):
        raise SerializationError(f"unknown security level {security}")
    if security == 0 and not insecure:
        raise SerializationError("these CKKS parameters are marked as an insecure test set; load them with "
                                 "insecure=True only if that is what you meant to use")
    if sigma != 3.2:
        raise SerializationError(f"error width {sigma} is not the supported 3.2")
    if not (math.isfinite(scale) and 2.0 <= scale <= _MAX_PARAMS_SCALE):
        raise SerializationError(f"parameter scale {scale!r} is outside [2, 2^61]")
    try:
        return Parameters.from_primes(n, moduli, special, scale, insecure=security == 0)
    except ValueError as exc:
        raise SerializationError(f"invalid CKKS parameters: {exc}") from exc


def save(obj: Any, path: str | os.PathLike) -> Path:
    """Writes ``obj`` to ``path`` in one step (temporary sibling, fsync, rename); secret keys and
    key shares get mode 0600 before the first byte."""
    path = Path(path)
    write_atomic(path, to_bytes(obj), private=isinstance(obj, (SecretKey, SecretKeyShare)))
    return path


def load(path: str | os.PathLike, params: Parameters | None = None, *, insecure: bool = False) -> Any:
    """:func:`from_bytes` of a file (``insecure``: accept a test parameter set). A secret key or
    key share in a file that the group or other users may read (mode wider than 0600) is
    refused (:func:`shaper.files.check_private_file`)."""
    out = from_bytes(Path(path).read_bytes(), params, insecure=insecure)
    if isinstance(out, (SecretKey, SecretKeyShare)):
        check_private_file(path, "CKKS secret-key file" if isinstance(out, SecretKey) else "CKKS key-share file")
    return out
