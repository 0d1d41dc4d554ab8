"""Versioned binary serialisation of BGV parameters, keys and ciphertexts. No pickle, ever.

Framing (:mod:`shaper.crypto.wire`): ``"SHPR" | u16 version | u8 kind | u8 scheme = 4 (BGV)``,
then a body, little-endian throughout. Every body but the parameters' starts with the 16-byte
parameter fingerprint (:meth:`Parameters.fingerprint`), so loading it against other parameters
fails by name. A *row* is φ(m) x u64 residues in evaluation form modulo one prime of the basis
(the chain q_0 .. q_L, then the special primes p_0 .. p_{k-1}); rows of a polynomial follow the
basis order. Every shape below is fixed by the parameters and the header fields before it.

================= =================================================================================
kind              body
================= =================================================================================
5 parameters      u32 m, u16 L + 1, u16 k, u16 digits, i32 Hamming weight (-1: dense ternary),
                  f64 sigma, u8 insecure (0/1), u8 name length, name (ASCII),
                  (L + 1) x u64 q_i, k x u64 p_j
2 secret key      fingerprint, φ x i8 coefficients in {-1, 0, 1}
1 public key      fingerprint, b: (L + 1) rows, a: (L + 1) rows (the chain)
6 switching key   fingerprint, u32 exponent u (0: relinearisation s² → s; else κ_u(s) → s),
                  b: digits x (L + 1 + k) rows, a: digits x (L + 1 + k) rows (chain and special)
7 ciphertext      fingerprint, u8 parts (2 or 3), u16 level ℓ, f64 noise estimate,
                  parts x (ℓ + 1) rows (the chain up to q_ℓ)
8 key share       fingerprint, u16 party index, u16 parties, (L + 1 + k) rows (the party's additive share
                  of s in evaluation form over the whole basis; written 0600)
9 key bundle      fingerprint, public key (b, a as in kind 1), u16 count,
                  count x (u32 exponent u, b, a as in kind 6); the exponents strictly increase and
                  the first is 0 (the relinearisation key), the others are the Galois keys
================= =================================================================================

A :class:`~.scheme.KeySet` is written as two objects: the secret key (kind 2, in a 0600 file) and
the :class:`KeyBundle` of everything an evaluator needs (kind 9). A lone switching key is a
:class:`SwitchingKeyFor` (the key and its exponent u: the scheme's :class:`~.scheme.SwitchingKey`
does not record it).

Loading checks, before anything is returned: every length exactly (truncated or padded input is
refused), every declared count against its bound and against the bytes actually present before
any array is made, every residue below its prime (the error names the row and the prime), secret
coefficients in {-1, 0, 1} (and exactly ``hamming_weight`` of them nonzero for a sparse set),
exponents (0 or a unit mod m other than 1), the level (0..L) and the noise estimate (finite, at
least 0, below Q_ℓ). Parameters are rebuilt with :meth:`Parameters.from_primes`, which checks the
primes again and rates the set: a set marked insecure, or one not rated at 128 bits or more, or
one with sigma below 3.2 (the HE Standard's tables assume 3.2), loads only with
``insecure=True``. Uniform polynomials ``a`` are stored in full: key generation draws them from
the CSPRNG directly, not from per-key seeds (a seeded form, as CKKS has, would halve keys).
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import SerializationError
from ...files import check_private_file, write_atomic
from .. import wire
from .multiparty import SecretKeyShare
from .params import Parameters
from .scheme import Ciphertext, Evaluator, KeySet, PublicKey, SecretKey, SwitchingKey

__all__ = ["KeyBundle", "SwitchingKeyFor", "ciphertext_digest", "from_bytes", "load", "save", "to_bytes"]

FINGERPRINT_BYTES = 16
MAX_M = 1 << 24            # odd m below this (φ(m) rows of u64 are what keys are made of)
MAX_CHAIN = 1024           # ciphertext primes q_0 .. q_L
MAX_SPECIAL = 64           # special primes
MAX_NAME = 64              # bytes of a parameter set's name
MAX_SIGMA = 1 << 20
MIN_SECURE_SIGMA = 3.2     # the HE Standard's tables assume this error width


@dataclass(frozen=True, eq=False)
class SwitchingKeyFor:
    """A switching key and the automorphism exponent it is for: 0 for relinearisation (s² → s),
    otherwise a unit u mod m other than 1 (κ_u(s) → s)."""

    exponent: int
    key: SwitchingKey


@dataclass(eq=False)
class KeyBundle:
    """What an evaluator and an encryptor need, without the secret: the public key, the
    relinearisation key and the Galois keys by exponent (``keys.galois``'s layout)."""

    params: Parameters
    public: PublicKey
    relin: SwitchingKey
    galois: dict[int, SwitchingKey]

    @classmethod
    def from_keyset(cls, keys: KeySet) -> KeyBundle:
        return cls(keys.public.params, keys.public, keys.relin, dict(keys.galois))

    def evaluator(self) -> Evaluator:
        return Evaluator(self.params, self.relin, self.galois)

    def with_secret(self, secret: SecretKey) -> KeySet:
        """The :class:`~.scheme.KeySet` of this bundle and ``secret`` (same parameters)."""
        if secret.params != self.params:
            raise ValueError("the secret key belongs to a different BGV parameter set than the key bundle")
        return KeySet(secret, self.public, self.relin, dict(self.galois))


# -- writing -------------------------------------------------------------------------------------

def _rows(arr: np.ndarray, shape: tuple[int, ...], what: str) -> bytes:
    arr = np.asarray(arr)
    if arr.shape != shape or arr.dtype != np.uint64:
        raise SerializationError(f"{what} has shape {arr.shape} and dtype {arr.dtype}; expected {shape} uint64")
    return np.ascontiguousarray(arr, dtype="<u8").tobytes()


def _key_rows(params: Parameters, key: SwitchingKey, what: str) -> bytes:
    shape = (params.digits, len(params.basis), params.phi)
    return _rows(key.b, shape, what + " b") + _rows(key.a, shape, what + " a")


def _check_exponent(params: Parameters, u: int, what: str) -> int:
    if isinstance(u, bool) or not isinstance(u, (int, np.integer)):
        raise SerializationError(f"{what}: exponent {u!r} is not an integer")
    u = int(u)
    if u != 0 and not (2 <= u < params.m and math.gcd(u, params.m) == 1):
        raise SerializationError(f"{what}: exponent {u} is neither 0 (relinearisation) nor a unit mod m = "
                                 f"{params.m} in 2..{params.m - 1}")
    return u


def _params_body(p: Parameters) -> bytes:
    name = bytes(c if 0x20 <= c < 0x7F else 0x3F for c in p.name.encode("ascii", "replace")[:MAX_NAME])
    head = struct.pack("<IHHHidBB", p.m, len(p.primes), len(p.special), p.digits,
                       -1 if p.hamming_weight is None else p.hamming_weight, p.sigma, int(bool(p.insecure)), len(name))
    return head + name + struct.pack(f"<{len(p.basis)}Q", *p.basis)


def to_bytes(obj: Any) -> bytes:
    """Serialise :class:`Parameters`, a :class:`SecretKey`, :class:`PublicKey`,
    :class:`SwitchingKeyFor`, :class:`KeyBundle` or :class:`Ciphertext` (see the module docstring)."""
    scheme = wire.SCHEME_BGV
    if isinstance(obj, Parameters):
        return wire.header(wire.KIND_PARAMS, scheme) + _params_body(obj)
    if isinstance(obj, KeySet):
        raise TypeError("a KeySet holds the secret key: serialise keys.secret and KeyBundle.from_keyset(keys) "
                        "separately")
    if isinstance(obj, SwitchingKey):
        raise TypeError("a bare SwitchingKey does not say which automorphism it is for: serialise "
                        "SwitchingKeyFor(u, key) (u = 0 for the relinearisation key)")
    if isinstance(obj, SwitchingKeyFor):
        params = obj.key.params
        u = _check_exponent(params, obj.exponent, "switching key")
        return (wire.header(wire.KIND_SWITCH_KEY, scheme) + params.fingerprint() + struct.pack("<I", u)
                + _key_rows(params, obj.key, "switching key"))
    if isinstance(obj, SecretKeyShare):
        params = obj.params
        return (wire.header(wire.KIND_KEY_SHARE, scheme) + params.fingerprint()
                + struct.pack("<HH", obj.index, obj.parties)
                + _rows(obj.rows, (len(params.basis), params.phi), "secret-key share"))
    if not isinstance(obj, (SecretKey, PublicKey, KeyBundle, Ciphertext)):
        raise TypeError(f"cannot serialise {type(obj).__name__} as BGV data")
    params = obj.params
    fp = params.fingerprint()
    chain = (len(params.primes), params.phi)
    if isinstance(obj, SecretKey):
        coeffs = np.asarray(obj.coeffs)
        if coeffs.shape != (params.phi,) or np.any(np.abs(coeffs.astype(np.int64)) > 1):
            raise SerializationError(f"a BGV secret key is φ = {params.phi} coefficients in {{-1, 0, 1}}")
        return wire.header(wire.KIND_PRIVATE, scheme) + fp + coeffs.astype("<i1").tobytes()
    if isinstance(obj, PublicKey):
        return wire.header(wire.KIND_PUBLIC, scheme) + fp + _rows(obj.b, chain, "public key b") + _rows(
            obj.a, chain, "public key a")
    if isinstance(obj, KeyBundle):
        for what, key in (("public key", obj.public), ("relinearisation key", obj.relin),
                          *((f"Galois key {u}", k) for u, k in obj.galois.items())):
            if key.params != params:
                raise SerializationError(f"the bundle's {what} belongs to a different parameter set")
        keys = [(0, obj.relin)] + sorted((_check_exponent(params, u, "Galois key"), k) for u, k in obj.galois.items())
        if len({u for u, _ in keys}) != len(keys):
            raise SerializationError("the bundle's Galois keys include exponent 0 or repeat an exponent")
        out = [wire.header(wire.KIND_KEY_BUNDLE, scheme), fp, _rows(obj.public.b, chain, "public key b"),
               _rows(obj.public.a, chain, "public key a"), struct.pack("<H", len(keys))]
        for u, key in keys:
            out += [struct.pack("<I", u), _key_rows(params, key, f"switching key {u}")]
        return b"".join(out)
    # Ciphertext
    parts = np.asarray(obj.parts)
    level = int(obj.level)
    if not 0 <= level <= params.max_level or len(parts) not in (2, 3):
        raise SerializationError(f"a ciphertext of {len(parts)} parts at level {level} (2-3 parts, levels "
                                 f"0..{params.max_level})")
    _check_noise(params, float(obj.noise), level)
    head = fp + struct.pack("<BHd", len(parts), level, float(obj.noise))
    return (wire.header(wire.KIND_CIPHERTEXT, scheme) + head
            + _rows(parts, (len(parts), level + 1, params.phi), "ciphertext parts"))


# -- reading -------------------------------------------------------------------------------------

def _read_rows(r: wire.Reader, params: Parameters, limbs: int, lead: tuple[int, ...], what: str) -> np.ndarray:
    """``lead`` x ``limbs`` rows (basis primes 0..limbs-1), every residue below its prime."""
    shape = lead + (limbs, params.phi)
    count = math.prod(shape)
    raw = r.take(8 * count, what)  # checks the bytes are there before numpy sees them
    arr = np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(shape)
    primes = np.asarray(params.basis[:limbs], dtype=np.uint64)
    bad = arr >= primes[:, None]
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        row = at[-2]
        prime = f"q_{row}" if row < len(params.primes) else f"p_{row - len(params.primes)}"
        where = "".join(f"[{i}]" for i in at[:-2])
        raise SerializationError(f"{what}{where}: row {row} (prime {prime} = {params.basis[row]}) has residue "
                                 f"{int(arr[at])} at coefficient {at[-1]}, not below its prime")
    return arr


def _check_noise(params: Parameters, noise: float, level: int) -> None:
    log_q = sum(math.log2(q) for q in params.primes[:level + 1])
    if not (math.isfinite(noise) and noise >= 0.0 and (noise == 0.0 or math.log2(noise) < log_q)):
        raise SerializationError(f"ciphertext noise estimate {noise!r} is not a finite number in [0, Q_{level} = "
                                 f"2^{log_q:.0f})")


def _read_switching_key(r: wire.Reader, params: Parameters, what: str) -> tuple[int, SwitchingKey]:
    (u,) = r.unpack("I", what + " exponent")
    u = _check_exponent(params, u, what)
    limbs = len(params.basis)
    b = _read_rows(r, params, limbs, (params.digits,), f"{what} b")
    a = _read_rows(r, params, limbs, (params.digits,), f"{what} a")
    return u, SwitchingKey(params, b, a)


def _read_public(r: wire.Reader, params: Parameters) -> PublicKey:
    limbs = len(params.primes)
    b = _read_rows(r, params, limbs, (), "public key b")
    a = _read_rows(r, params, limbs, (), "public key a")
    return PublicKey(params, b, a)


def from_bytes(data: bytes, params: Parameters | None = None, *, insecure: bool = False) -> Any:
    """Parse and validate BGV data: :class:`Parameters` (``insecure=True`` admits a set that is
    marked insecure, not rated at 128 bits or has sigma below 3.2), or a key, key bundle or
    ciphertext of ``params`` (a :class:`SecretKey`, :class:`PublicKey`, :class:`SwitchingKeyFor`,
    :class:`KeyBundle` or :class:`Ciphertext`). Raises :class:`~shaper.errors.SerializationError`
    naming what is wrong."""
    r = wire.Reader(data)
    kind, scheme = wire.read_header(r)
    if scheme != wire.SCHEME_BGV:
        raise SerializationError(f"not BGV data (scheme id {scheme}, BGV is {wire.SCHEME_BGV})")
    if kind == wire.KIND_PARAMS:
        out: Any = _read_params(r, insecure)
        r.done()
        return out
    if kind not in (wire.KIND_PRIVATE, wire.KIND_PUBLIC, wire.KIND_SWITCH_KEY, wire.KIND_CIPHERTEXT,
                    wire.KIND_KEY_BUNDLE, wire.KIND_KEY_SHARE):
        raise SerializationError(f"unknown BGV object kind {kind}")
    what = wire.KIND_NAMES[kind]
    if params is None:
        raise SerializationError(f"loading {what} needs its BGV Parameters (from_bytes(data, params))")
    if not isinstance(params, Parameters):
        raise TypeError(f"params must be BGV Parameters, got {type(params).__name__}")
    fp = bytes(r.take(FINGERPRINT_BYTES, "parameter fingerprint"))
    if fp != params.fingerprint():
        raise SerializationError(f"{what} belongs to a different BGV parameter set (fingerprint mismatch: "
                                 f"{fp.hex()}, not {params.fingerprint().hex()} of {params.name!r})")
    if kind == wire.KIND_PRIVATE:
        raw = r.take(params.phi, "secret key coefficients")
        coeffs = np.frombuffer(raw, dtype="i1").copy()
        bad = np.flatnonzero(np.abs(coeffs.astype(np.int16)) > 1)
        if bad.size:
            raise SerializationError(f"secret key coefficient {int(bad[0])} is {int(coeffs[bad[0]])}, "
                                     "not in {-1, 0, 1}")
        if params.hamming_weight is not None and int(np.count_nonzero(coeffs)) != params.hamming_weight:
            raise SerializationError(f"secret key has {int(np.count_nonzero(coeffs))} nonzero coefficients; the "
                                     f"parameters fix exactly {params.hamming_weight}")
        out = SecretKey(params, coeffs.astype(np.int8))
    elif kind == wire.KIND_KEY_SHARE:
        index, parties = r.unpack("HH", "secret-key share header")
        if not 2 <= parties or not index < parties:
            raise SerializationError(f"secret-key share of party {index} of {parties} (2 or more parties, index "
                                     "below their count)")
        out = SecretKeyShare(params, _read_rows(r, params, len(params.basis), (), "secret-key share"), index, parties)
    elif kind == wire.KIND_PUBLIC:
        out = _read_public(r, params)
    elif kind == wire.KIND_SWITCH_KEY:
        u, key = _read_switching_key(r, params, "switching key")
        out = SwitchingKeyFor(u, key)
    elif kind == wire.KIND_CIPHERTEXT:
        size, level, noise = r.unpack("BHd", "ciphertext header")
        if size not in (2, 3):
            raise SerializationError(f"a ciphertext of {size} parts (BGV ciphertexts have 2 or 3)")
        if level > params.max_level:
            raise SerializationError(f"ciphertext level {level} is outside 0..{params.max_level}")
        _check_noise(params, noise, level)
        parts = _read_rows(r, params, level + 1, (size,), "ciphertext parts")
        out = Ciphertext(parts, level, float(noise), params)
    else:  # key bundle
        public = _read_public(r, params)
        (count,) = r.unpack("H", "switching key count")
        key_bytes = 4 + 2 * 8 * params.digits * len(params.basis) * params.phi
        left = len(r.data) - r.pos
        if not 1 <= count <= params.phi or count * key_bytes > left:
            raise SerializationError(f"the key bundle declares {count} switching keys ({count * key_bytes} bytes); "
                                     f"1..{params.phi} allowed and {left} bytes follow")
        keys: list[tuple[int, SwitchingKey]] = []
        for i in range(count):
            u, key = _read_switching_key(r, params, f"bundle switching key {i}")
            if (i == 0) != (u == 0) or (keys and u <= keys[-1][0]):
                raise SerializationError(f"bundle switching key {i} has exponent {u}: the first must be 0 "
                                         "(relinearisation) and the exponents must strictly increase")
            keys.append((u, key))
        out = KeyBundle(params, public, keys[0][1], dict(keys[1:]))
    r.done()
    return out


def _read_params(r: wire.Reader, insecure: bool) -> Parameters:
    m, n_chain, n_special, digits, weight, sigma, flag, name_len = r.unpack("IHHHidBB", "parameter header")
    if m % 2 == 0 or not 3 <= m < MAX_M:
        raise SerializationError(f"m = {m} is not an odd number in 3..{MAX_M - 1}")
    if not 1 <= n_chain <= MAX_CHAIN or not 1 <= n_special <= MAX_SPECIAL:
        raise SerializationError(f"{n_chain} chain primes and {n_special} special primes (1..{MAX_CHAIN} and "
                                 f"1..{MAX_SPECIAL} allowed)")
    if flag not in (0, 1):
        raise SerializationError(f"insecure flag must be 0 or 1, got {flag}")
    if weight != -1 and weight < 1:
        raise SerializationError(f"Hamming weight {weight} (-1 for a dense ternary secret, else at least 1)")
    if not (math.isfinite(sigma) and 0.0 < sigma <= MAX_SIGMA):
        raise SerializationError(f"sigma {sigma!r} is not a finite number in (0, {MAX_SIGMA}]")
    if name_len > MAX_NAME:
        raise SerializationError(f"parameter set name of {name_len} bytes (at most {MAX_NAME})")
    raw_name = bytes(r.take(name_len, "parameter set name"))
    if not all(0x20 <= c < 0x7F for c in raw_name):
        raise SerializationError(f"parameter set name {raw_name!r} is not printable ASCII")
    chain = r.unpack(f"{n_chain}Q", "chain primes")
    special = r.unpack(f"{n_special}Q", "special primes")
    if flag and not insecure:
        raise SerializationError("these BGV parameters are marked insecure (a test or comparison set); load them "
                                 "with insecure=True only if that is what you meant to use")
    if sigma < MIN_SECURE_SIGMA and not insecure:
        raise SerializationError(f"sigma {sigma} is below {MIN_SECURE_SIGMA}, which the security rating assumes; "
                                 "load with insecure=True only if that is what you meant to use")
    hamming = None if weight == -1 else int(weight)
    name = raw_name.decode("ascii")
    def build(as_insecure: bool) -> Parameters:
        return Parameters.from_primes(m, chain, special, digits=digits, hamming_weight=hamming, sigma=sigma,
                                      name=name, insecure=as_insecure)

    try:
        try:
            return build(bool(flag))
        except ValueError:
            if flag or not insecure:
                raise
            return build(True)  # written as secure, no longer rated so: the caller accepts that
    except ValueError as exc:
        raise SerializationError(f"invalid BGV parameters: {exc}") from exc


# -- files ---------------------------------------------------------------------------------------

def save(obj: Any, path: str | os.PathLike) -> Path:
    """Writes ``obj`` to ``path`` in one step (temporary sibling, fsync, rename: a failed save
    leaves the previous file, or none); a secret key gets mode 0600 before its first byte."""
    path = Path(path)
    data = to_bytes(obj)
    write_atomic(path, data, private=isinstance(obj, (SecretKey, SecretKeyShare)))
    return path


def load(path: str | os.PathLike, params: Parameters | None = None, *, insecure: bool = False) -> Any:
    """:func:`from_bytes` of a file. A secret key in a file that the group or other users may
    access (mode wider than 0600) is refused (:func:`shaper.files.check_private_file`)."""
    out = from_bytes(Path(path).read_bytes(), params, insecure=insecure)
    if isinstance(out, (SecretKey, SecretKeyShare)):
        check_private_file(path, "BGV secret-key file")
    return out


def ciphertext_digest(ct: Ciphertext) -> str:
    """SHA-256 (hex) of what a ciphertext *is*: its parameters' fingerprint, level and parts, not
    its noise estimate (a float each party computes itself), so parties that ran the same
    evaluation name its output alike. What a joint decryption request names."""
    return hashlib.sha256(b"shaper-bgv-ciphertext/1" + to_bytes(Ciphertext(ct.parts, ct.level, 0.0, ct.params))
                          ).hexdigest()
