"""Additively homomorphic encryption: the interface shared by Paillier and OU, and the
encrypted-array type every protocol computes with.

An :class:`EncryptedArray` is a numpy-shaped array of ciphertexts under one public key, with a
fixed-point scale (``frac_bits``: the plaintexts are ``round(x * 2^frac_bits)``). Operators work
on whole arrays, broadcast like numpy, and run through the active kernel
(:func:`shaper.kernels.get_kernel`), which spreads expensive batches over all cores:

* ``a + b``, ``a - b``, ``-a``: ciphertext/ciphertext (CCAdd) or ciphertext/plaintext (PCAdd);
  scales are aligned to the larger one.
* ``a * k``: ciphertext times plaintext (PCMult), signed integers or fixed-point floats (floats
  are encoded at the array's own scale, so the result's scale is the sum of both).
* ``X @ a`` and ``a @ X`` with a plaintext matrix (scipy sparse or dense): cost proportional to
  the non-zeros; 0/1 matrices use ciphertext products only (SHAPER Fig. 2).
* ``a.sum(axis)``, slicing, ``reshape``, :func:`concatenate`, ``a.rerandomize()``.

Multiplying two ciphertexts is not possible with an additive scheme (it needs an interactive
protocol) and raises ``TypeError``.

Security: semantic security of the scheme (DCR for Paillier, p-subgroup for OU). A ciphertext
produced by homomorphic evaluation is *not* freshly random; re-randomise (``rerandomize()``)
before sending it to the key owner, or the key owner may learn how it was computed.
"""

from __future__ import annotations

import math
import struct
from abc import ABC, abstractmethod
from typing import Any, Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

from ..arrays import is_sparse, object_array
from ..errors import InvalidCiphertextError, KeyMismatchError, SerializationError
from ..kernels import FixedBaseSpec, get_kernel
from ..kernels.native import MontRows
from . import counters, encoding, wire
from .prg import default_prg

__all__ = [
    "AHEPublicKey",
    "AHEPrivateKey",
    "EncryptedArray",
    "concatenate",
    "matvec",
    "vecmat",
]

_MAX_DIMS = 32  # rank limit of a serialised array
_MAX_EXTENT = 1 << 48  # no axis, and no product of the non-zero axes, of a serialised array exceeds this



class AHEPublicKey(ABC):
    """Public key of an additively homomorphic scheme (Paillier or OU).

    Each scheme writes its own binary body (:meth:`body`, :meth:`read_body`) and JSON form
    (:meth:`to_jwk`, :meth:`from_jwk`); framing is shared (:mod:`shaper.crypto.wire`)."""

    scheme: str
    #: scheme id in the binary header (:data:`shaper.crypto.wire.SCHEME_PAILLIER`, ...)
    scheme_id: int
    #: modulus of the ciphertext group (n^2 for Paillier, n for OU)
    ciphertext_modulus: mpz
    #: largest |value| an encoding may take; results beyond it are detected on decryption
    max_int: int
    #: bits of non-negative plaintext usable for packing (packed values < 2^capacity)
    packing_capacity_bits: int
    #: bits of a security-relevant random exponent
    exponent_bits: int
    #: fixed-base spec of the randomiser (h_s mod n^2 for Paillier, H mod n for OU)
    _randomizer_spec: FixedBaseSpec

    # -- identity ----------------------------------------------------------------------------
    @property
    @abstractmethod
    def fingerprint(self) -> bytes:
        """32-byte digest identifying the key (travels with serialised ciphertexts)."""

    @property
    def bits(self) -> int:
        return int(self.n).bit_length()  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AHEPublicKey) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    # -- serialisation ------------------------------------------------------------------------
    @abstractmethod
    def body(self) -> bytes:
        """The key's fields in the binary format (after the header)."""

    @classmethod
    @abstractmethod
    def read_body(cls, r: wire.Reader) -> "AHEPublicKey":
        """Parse and validate the fields written by :meth:`body`."""

    @abstractmethod
    def to_jwk(self) -> dict:
        """JWK-style JSON object (python-paillier's form for Paillier)."""

    @classmethod
    @abstractmethod
    def from_jwk(cls, doc: dict) -> "AHEPublicKey":
        """Parse and validate the object written by :meth:`to_jwk`."""

    def to_bytes(self) -> bytes:
        """Versioned binary form (read back with :meth:`from_bytes` or
        :func:`shaper.crypto.serialization.key_from_bytes`)."""
        return wire.header(wire.KIND_PUBLIC, self.scheme_id) + self.body()

    @classmethod
    def from_bytes(cls, data: bytes) -> "AHEPublicKey":
        """Parse and validate a public key of this scheme written by :meth:`to_bytes`."""
        r = wire.open_object(data, wire.KIND_PUBLIC, cls.scheme_id)
        key = cls.read_body(r)
        r.done()
        return key

    # -- high level ------------------------------------------------------------------------
    def encrypt(self, values: Any, *, frac_bits: int = 0, constant_time: bool = True) -> "EncryptedArray":
        """Encrypt a numpy array (or list) of integers or floats, any shape.

        Floats need ``frac_bits > 0`` (fixed point, scale 2^frac_bits); values whose encoding
        leaves ``±max_int`` raise :class:`~shaper.errors.PlaintextOverflowError`.

        ``constant_time=False`` (native kernel) reads a wide-window table by index, as HEU does:
        about 40 % faster, but the randomness — which reveals the plaintext — then shapes the
        memory access pattern. Use it only where no untrusted code shares the machine.
        """
        encoded = encoding.encode(values, frac_bits, self.max_int)
        kernel = get_kernel()
        if getattr(kernel, "montgomery", False):  # keep ciphertexts in the kernel's form
            rows = self.raw_encrypt(encoded.ravel(), mont_out=True, constant_time=constant_time)
            return EncryptedArray._from_mont(self, rows, encoded.shape, frac_bits)
        cts = self.raw_encrypt(encoded.ravel(), constant_time=constant_time)
        return EncryptedArray(self, object_array(cts, encoded.shape), frac_bits)

    def encrypt_zero(self, count: int) -> "EncryptedArray":
        """``count`` fresh encryptions of 0: precomputed re-randomisers (add one to any
        ciphertext to re-randomise it) for an offline phase."""
        return self.encrypt(np.zeros(int(count), dtype=np.int64))

    def ciphertext_array(self, ciphertexts: Any, *, frac_bits: int = 0) -> "EncryptedArray":
        """Wrap raw ciphertext integers (e.g. received from elsewhere) after validating each."""
        arr = np.asarray(ciphertexts, dtype=object)
        flat = [mpz(int(c)) for c in arr.ravel().tolist()]
        self.validate_ciphertexts(flat)
        return EncryptedArray(self, object_array(flat, arr.shape), frac_bits)

    # -- hazmat: raw batched operations on flat lists of ciphertext integers -------------------
    @abstractmethod
    def raw_encrypt(self, signed_values: Sequence[int], exponent_bytes: np.ndarray | None = None, *,
                    mont_out: bool = False, constant_time: bool = True) -> Any:
        """Encrypt already-encoded signed integers (|v| <= max_int, unchecked).
        ``exponent_bytes`` injects the randomness (tests, known-answer vectors); ``mont_out``
        (native kernel only) returns :class:`~shaper.kernels.native.MontRows` instead of ints;
        ``constant_time``: see :meth:`encrypt`."""

    @abstractmethod
    def raw_add_plain(self, ciphertexts: Sequence, signed_values: Sequence[int]) -> list:
        """Enc(m) -> Enc(m + v)."""

    def raw_rerandomize(self, ciphertexts: Sequence, exponent_bytes: np.ndarray | None = None) -> list:
        """Multiply by a fresh encryption of zero (the randomiser base to a fresh exponent)."""
        cts = list(ciphertexts)
        counters.add("rerandomizations", len(cts))
        if exponent_bytes is None:
            exponent_bytes = default_prg().exponent_bytes(len(cts), self.exponent_bits)
        return get_kernel().fixed_base_powmod([self._randomizer_spec], [exponent_bytes], cts,
                                              self.ciphertext_modulus)

    def validate_ciphertexts(self, ciphertexts: Sequence) -> None:
        """Raise :class:`~shaper.errors.InvalidCiphertextError` unless every value lies in
        [1, ciphertext_modulus) and is coprime to n."""
        self._check_units(ciphertexts, self.n)  # type: ignore[attr-defined]

    def _symbol_is_fixed(self) -> bool:
        """Whether every ciphertext this key's encryption and homomorphic operations make has
        Jacobi symbol (c mod n | n) = +1 (true for shaper's Paillier and OU keys)."""
        return False

    def validate_received(self, ciphertexts: Sequence) -> None:
        """:meth:`validate_ciphertexts`, and, for keys whose ciphertexts all have Jacobi symbol
        (c mod n | n) = +1, refuse one with symbol -1. The symbol is public and multiplicative and
        re-randomisation leaves it alone, so a key owner who sent c with symbol -1 to a party that
        computes c^k, re-randomises and sends the result back would read the parity of k in it.
        For ciphertexts that arrive from another party (:meth:`EncryptedArray.from_bytes`)."""
        cts = list(ciphertexts)
        self.validate_ciphertexts(cts)
        self._check_symbols(cts)

    def _check_symbols(self, cts: list) -> None:
        if not cts or not self._symbol_is_fixed():
            return
        n = self.n  # type: ignore[attr-defined]
        for i, c in enumerate(cts):
            if gmpy2.jacobi(c % n, n) != 1:
                raise InvalidCiphertextError(
                    f"ciphertext at index {i} has Jacobi symbol -1: no {self.scheme} encryption under "
                    "this key makes one (it could carry the parity of a multiplier back to the key owner)")

    def raw_add(self, a: Sequence, b: Sequence) -> list:
        """Enc(x), Enc(y) -> Enc(x + y)."""
        counters.add("ciphertext_additions", len(a))
        return get_kernel().mulmod(a, b, self.ciphertext_modulus)

    def raw_negate(self, ciphertexts: Sequence) -> list:
        """Enc(x) -> Enc(-x)."""
        return get_kernel().invert(ciphertexts, self.ciphertext_modulus)

    def raw_mul_plain(self, ciphertexts: Sequence, scalars: Sequence[int]) -> list:
        """Enc(x_i) -> Enc(k_i * x_i) for signed integer scalars."""
        kernel = get_kernel()
        modulus = self.ciphertext_modulus
        ks = [int(k) for k in scalars]
        cts = list(ciphertexts)
        counters.add("ciphertext_products", len(ks))
        if not ks:
            return []
        first = ks[0]
        if all(k == first for k in ks):
            return self._mul_same_scalar(cts, first)
        k_arr = object_array(ks)
        magnitude = np.abs(k_arr)
        out = object_array(cts)
        out[k_arr == 0] = mpz(1)
        general = np.flatnonzero(magnitude > 1)
        if general.size:
            out[general] = kernel.powmod(out[general].tolist(), magnitude[general].tolist(), modulus)
        negative = np.flatnonzero(k_arr < 0)
        if negative.size:
            out[negative] = kernel.invert(out[negative].tolist(), modulus)
        return out.tolist()

    def _mul_same_scalar(self, cts: list, k: int) -> list:
        kernel = get_kernel()
        modulus = self.ciphertext_modulus
        if k == 0:
            return [mpz(1)] * len(cts)
        res = cts if abs(k) == 1 else kernel.powmod_same_exponent(cts, abs(k), modulus)
        return kernel.invert(res, modulus) if k < 0 else list(res)

    def _check_units(self, ciphertexts: Sequence, modulus_n: int) -> None:
        """Range check against the ciphertext modulus, then one batched coprimality check:
        gcd(prod c_i mod n, n) == 1 iff every c_i is coprime to n."""
        vals = list(ciphertexts)
        if not vals:
            return
        bound = self.ciphertext_modulus
        if min(vals) < 1 or max(vals) >= bound:
            i = next(k for k, c in enumerate(vals) if not 1 <= c < bound)
            raise InvalidCiphertextError(
                f"ciphertext at index {i} is outside [1, N) for this {self.scheme} key "
                f"(N has {int(bound).bit_length()} bits)"
            )
        chunk = 1024
        starts = np.arange(0, len(vals) + chunk, chunk)
        starts[-1] = len(vals)
        starts = np.unique(starts)
        partial = get_kernel().prod_rows(vals, np.arange(len(vals)), starts, modulus_n)
        acc = mpz(1)
        for x in partial:
            acc = acc * x % modulus_n
        if gmpy2.gcd(acc, modulus_n) != 1:
            i = next(k for k, c in enumerate(vals) if gmpy2.gcd(c, modulus_n) != 1)
            raise InvalidCiphertextError(
                f"ciphertext at index {i} shares a factor with the modulus; it is not a valid "
                f"{self.scheme} ciphertext (and decrypting it could leak the key)"
            )


class AHEPrivateKey(ABC):
    """Private key of an additively homomorphic scheme."""

    public_key: AHEPublicKey
    #: the scheme's public-key class (parses the public half of a private key's bytes)
    public_class: type[AHEPublicKey]

    # -- serialisation ------------------------------------------------------------------------
    @abstractmethod
    def body(self) -> bytes:
        """The secret fields in the binary format (after the public key's body)."""

    @classmethod
    @abstractmethod
    def read_body(cls, r: wire.Reader, public_key: AHEPublicKey) -> "AHEPrivateKey":
        """Parse and validate the fields written by :meth:`body`."""

    @abstractmethod
    def to_jwk(self) -> dict:
        """JWK-style JSON object holding the secret fields and the public key under ``pub``."""

    @classmethod
    @abstractmethod
    def from_jwk(cls, doc: dict) -> "AHEPrivateKey":
        """Parse and validate the object written by :meth:`to_jwk`."""

    def to_bytes(self) -> bytes:
        """Versioned binary form. Secret: write it with
        :func:`shaper.crypto.serialization.save_key` (mode 0600)."""
        pk = self.public_key
        return wire.header(wire.KIND_PRIVATE, pk.scheme_id) + pk.body() + self.body()

    @classmethod
    def from_bytes(cls, data: bytes) -> "AHEPrivateKey":
        """Parse and validate a private key of this scheme written by :meth:`to_bytes`."""
        r = wire.open_object(data, wire.KIND_PRIVATE, cls.public_class.scheme_id)
        key = cls.read_body(r, cls.public_class.read_body(r))
        r.done()
        return key

    def raw_decrypt(self, ciphertexts: Sequence) -> list:
        """Residues of the plaintexts (Python ints in [0, plaintext modulus)); inputs are
        validated first."""
        cts = list(ciphertexts)
        self.public_key.validate_ciphertexts(cts)
        if not cts:
            return []
        counters.add("decryptions", len(cts))
        return self.decrypt_validated(cts)

    @abstractmethod
    def decrypt_validated(self, cts: list) -> list:
        """:meth:`raw_decrypt` on ciphertexts already checked (non-empty)."""

    def __repr__(self) -> str:
        pk = self.public_key
        return f"{type(self).__name__}(bits={pk.bits}, fingerprint={pk.fingerprint.hex()[:16]})"

    @abstractmethod
    def _plaintext_modulus(self) -> int:
        """n for Paillier, p for OU (secret)."""

    def decrypt(self, encrypted: "EncryptedArray | Any") -> np.ndarray:
        """Decrypt to a numpy array of the same shape: int64 (object dtype when values exceed
        64 bits) for ``frac_bits == 0``, float64 otherwise. Packed arrays are unpacked."""
        if not isinstance(encrypted, EncryptedArray):
            # other ciphertext containers (PackedArray) know how to open themselves
            decrypt_with = getattr(encrypted, "decrypt_with", None)
            if decrypt_with is None:
                raise TypeError(f"decrypt expects an EncryptedArray or PackedArray, got {type(encrypted).__name__}")
            return decrypt_with(self)
        self._check_key(encrypted.public_key)
        flat = encrypted._c.ravel().tolist()
        residues = self.raw_decrypt(flat)
        signed = encoding.from_residues(residues, self._plaintext_modulus(), self.public_key.max_int)
        return encoding.decode(signed.reshape(encrypted.shape), encrypted.frac_bits)

    def encrypt(self, values: Any, *, frac_bits: int = 0) -> "EncryptedArray":
        """Key-owner encryption (uses the secret factorisation where that is faster)."""
        return self.public_key.encrypt(values, frac_bits=frac_bits)

    def _check_key(self, public_key: AHEPublicKey) -> None:
        if public_key != self.public_key:
            raise KeyMismatchError(
                "ciphertexts were made under a different public key than this private key's "
                f"(fingerprints {public_key.fingerprint.hex()[:16]} vs "
                f"{self.public_key.fingerprint.hex()[:16]})"
            )


class EncryptedArray:
    """A numpy-shaped array of ciphertexts under one public key, with a fixed-point scale."""

    # Storage: either ``_obj``, a numpy object array of ciphertext integers, or ``_mont``, the
    # native kernel's Montgomery-form rows (flat, C order of ``_shape``), which operations keep
    # without per-element conversions. Reading ``_c`` (raw access, which may write in place)
    # materialises the integers and drops the Montgomery copy.
    __slots__ = ("public_key", "_obj", "_mont", "_shape", "frac_bits")
    __array_ufunc__ = None  # numpy defers to our reflected operators

    def __init__(self, public_key: AHEPublicKey, ciphertexts: np.ndarray, frac_bits: int = 0) -> None:
        # Trusted constructor: callers pass valid ciphertexts (use public_key.ciphertext_array
        # for untrusted input).
        self.public_key = public_key
        self._obj = ciphertexts
        self._mont = None
        self._shape = ciphertexts.shape
        self.frac_bits = int(frac_bits)

    @classmethod
    def _from_mont(cls, public_key: AHEPublicKey, rows: Any, shape: tuple[int, ...],
                   frac_bits: int) -> "EncryptedArray":
        """Trusted constructor from native Montgomery-form rows (``len(rows)`` = prod(shape))."""
        out = cls.__new__(cls)
        out.public_key = public_key
        out._obj = None
        out._mont = rows
        out._shape = tuple(int(d) for d in shape)
        out.frac_bits = int(frac_bits)
        return out

    @property
    def _c(self) -> np.ndarray:
        if self._obj is None:
            self._obj = object_array(self._mont.to_ints(), self._shape)
        self._mont = None
        return self._obj

    @_c.setter
    def _c(self, value: np.ndarray) -> None:
        self._obj = value
        self._mont = None
        self._shape = value.shape

    def _positions(self) -> np.ndarray:
        """Flat row numbers of a Montgomery-backed array, in its shape (for indexing)."""
        return np.arange(int(np.prod(self._shape, dtype=np.int64)), dtype=np.int64).reshape(self._shape)

    def _take(self, positions: np.ndarray) -> "EncryptedArray":
        pos = np.asarray(positions, dtype=np.int64)
        return EncryptedArray._from_mont(self.public_key, self._mont.take(pos.ravel()), pos.shape, self.frac_bits)

    # -- array protocol ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._obj.shape if self._obj is not None else self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._obj.size if self._obj is not None else int(np.prod(self._shape, dtype=np.int64))

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d encrypted array")
        return self.shape[0]

    def __getitem__(self, index: Any) -> "EncryptedArray":
        if self._mont is not None:
            return self._take(self._positions()[index])
        part = self._c[index]
        if not isinstance(part, np.ndarray):
            part = object_array([part], ()).reshape(())
        return EncryptedArray(self.public_key, part, self.frac_bits)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def reshape(self, *shape: Any) -> "EncryptedArray":
        if self._mont is not None:
            new = self._positions().reshape(*shape).shape
            return EncryptedArray._from_mont(self.public_key, self._mont, new, self.frac_bits)
        return EncryptedArray(self.public_key, self._c.reshape(*shape), self.frac_bits)

    def ravel(self) -> "EncryptedArray":
        if self._mont is not None:
            return EncryptedArray._from_mont(self.public_key, self._mont, (self.size,), self.frac_bits)
        return EncryptedArray(self.public_key, self._c.ravel(), self.frac_bits)

    @property
    def T(self) -> "EncryptedArray":
        if self._mont is not None:
            return self._take(self._positions().T)
        return EncryptedArray(self.public_key, self._c.T, self.frac_bits)

    def copy(self) -> "EncryptedArray":
        if self._mont is not None:  # the rows are never written: sharing them is a copy
            return EncryptedArray._from_mont(self.public_key, self._mont, self._shape, self.frac_bits)
        return EncryptedArray(self.public_key, self._c.copy(), self.frac_bits)

    @property
    def ciphertexts(self) -> np.ndarray:
        """The raw ciphertext integers (object array of Python ints; hazmat)."""
        values = self._mont.to_ints() if self._mont is not None else self._c.ravel().tolist()
        return object_array([int(c) for c in values], self.shape)

    def __bool__(self) -> bool:
        raise TypeError("the truth value of an encrypted array is unknown without the key")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Opaque to numpy: converting yields a 0-d object array holding this array, so numpy
        # and scipy never iterate ciphertexts as numbers and defer to our operators instead.
        holder = np.empty((), dtype=object)
        holder[()] = self
        return holder

    def __repr__(self) -> str:
        return (f"EncryptedArray(shape={self.shape}, scheme={self.public_key.scheme}, "
                f"key_bits={self.public_key.bits}, frac_bits={self.frac_bits})")

    # -- helpers ------------------------------------------------------------------------------
    def _with(self, flat: list, shape: tuple[int, ...], frac_bits: int) -> "EncryptedArray":
        return EncryptedArray(self.public_key, object_array(flat, shape), frac_bits)

    def _same_key(self, other: "EncryptedArray") -> None:
        if other.public_key != self.public_key:
            raise KeyMismatchError(
                "cannot combine ciphertexts under different public keys "
                f"({self.public_key.fingerprint.hex()[:16]} vs {other.public_key.fingerprint.hex()[:16]})"
            )

    def rescaled(self, frac_bits: int) -> "EncryptedArray":
        """The same values at a larger scale 2^frac_bits (multiplies by 2^(difference))."""
        if frac_bits < self.frac_bits:
            raise ValueError(
                f"cannot lower the scale from 2^{self.frac_bits} to 2^{frac_bits} homomorphically"
            )
        if frac_bits == self.frac_bits:
            return self
        factor = 1 << (frac_bits - self.frac_bits)
        kernel = get_kernel()
        if self._mont is not None and getattr(kernel, "montgomery", False):
            rows = kernel.mont_powmod_same(self._mont, factor)
            return EncryptedArray._from_mont(self.public_key, rows, self.shape, frac_bits)
        flat = self.public_key._mul_same_scalar(self._c.ravel().tolist(), factor)
        return self._with(flat, self.shape, frac_bits)

    def _encode_operand(self, other: Any, frac_bits: int) -> np.ndarray:
        return encoding.encode(other, frac_bits, self.public_key.max_int)

    # -- additive operators -----------------------------------------------------------------
    def __add__(self, other: Any) -> "EncryptedArray":
        if isinstance(other, EncryptedArray):
            self._same_key(other)
            frac = max(self.frac_bits, other.frac_bits)
            a, b = self.rescaled(frac), other.rescaled(frac)
            kernel = get_kernel()
            if a._mont is not None and b._mont is not None and getattr(kernel, "montgomery", False):
                counters.add("ciphertext_additions", max(a.size, b.size))
                pa, pb = np.broadcast_arrays(a._positions(), b._positions())
                ma = a._mont if pa.shape == a.shape else a._mont.take(pa.ravel())
                mb = b._mont if pb.shape == b.shape else b._mont.take(pb.ravel())
                return EncryptedArray._from_mont(self.public_key, kernel.mont_mul(ma, mb), pa.shape, frac)
            ca, cb = np.broadcast_arrays(a._c, b._c)
            flat = self.public_key.raw_add(ca.ravel().tolist(), cb.ravel().tolist())
            return self._with(flat, ca.shape, frac)
        if is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        plain = self._encode_operand(other, self.frac_bits)
        cc, pp = np.broadcast_arrays(self._c, plain)
        flat = self.public_key.raw_add_plain(cc.ravel().tolist(), pp.ravel().tolist())
        return self._with(flat, cc.shape, self.frac_bits)

    __radd__ = __add__

    def __neg__(self) -> "EncryptedArray":
        flat = self.public_key.raw_negate(self._c.ravel().tolist())
        return self._with(flat, self.shape, self.frac_bits)

    def __sub__(self, other: Any) -> "EncryptedArray":
        if isinstance(other, EncryptedArray):
            return self + (-other)
        if is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        plain = self._encode_operand(other, self.frac_bits)
        return self + (-plain)

    def __rsub__(self, other: Any) -> "EncryptedArray":
        return (-self) + other

    # -- multiplicative operators -------------------------------------------------------------
    def mul(self, other: Any, *, frac_bits: int | None = None) -> "EncryptedArray":
        """Multiply by plaintext integers or floats. Integers are used exactly; floats are
        encoded at ``frac_bits`` (default: this array's scale) and the result's scale is the sum."""
        if isinstance(other, EncryptedArray):
            raise TypeError(
                "cannot multiply two encrypted arrays: additive HE only supports ciphertext x "
                "plaintext; use a secret-sharing multiplication protocol"
            )
        arr = encoding.as_exact_array(other)
        if arr.dtype.kind not in "iubf" and arr.dtype != object:
            raise TypeError(f"cannot multiply an encrypted array by {type(other).__name__}")
        if encoding.has_floats(arr):
            k_frac = self.frac_bits if frac_bits is None else frac_bits
        else:
            k_frac = 0 if frac_bits is None else frac_bits
        scalars = encoding.encode(arr, k_frac, self.public_key.max_int)
        kernel = get_kernel()
        if self._mont is not None and getattr(kernel, "montgomery", False):
            pos, kk = np.broadcast_arrays(self._positions(), scalars)
            ks = kk.ravel().tolist()
            if ks and min(ks) >= 0:  # negative scalars need inversions: the integer path below
                counters.add("ciphertext_products", len(ks))
                rows = self._mont if pos.shape == self.shape else self._mont.take(pos.ravel())
                first = ks[0]
                if all(k == first for k in ks):
                    out = kernel.mont_powmod_same(rows, first)
                else:
                    out = kernel.mont_powmod(rows, ks)
                return EncryptedArray._from_mont(self.public_key, out, pos.shape, self.frac_bits + k_frac)
        cc, kk = np.broadcast_arrays(self._c, scalars)
        flat = self.public_key.raw_mul_plain(cc.ravel().tolist(), kk.ravel().tolist())
        return self._with(flat, cc.shape, self.frac_bits + k_frac)

    def __mul__(self, other: Any) -> "EncryptedArray":
        if is_sparse(other) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self.mul(other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> "EncryptedArray":
        raise TypeError(
            "encrypted values cannot be divided; multiply by a fixed-point reciprocal instead "
            "(e.g. enc * 0.25 with frac_bits > 0)"
        )

    def __matmul__(self, other: Any) -> "EncryptedArray":
        return vecmat(self, other)

    def __rmatmul__(self, other: Any) -> "EncryptedArray":
        return matvec(other, self)

    # -- reductions and randomness -----------------------------------------------------------
    def sum(self, axis: int | None = None) -> "EncryptedArray":
        """Homomorphic sum over ``axis`` (all elements when ``None``)."""
        modulus = self.public_key.ciphertext_modulus
        kernel = get_kernel()
        if self._mont is not None and getattr(kernel, "montgomery", False):
            pos = self._positions()
            if axis is None:
                shape_out: tuple[int, ...] = ()
                idx = pos.ravel()
                indptr = np.array([0, idx.size], dtype=np.int64)
            else:
                moved = np.moveaxis(pos, axis, -1)
                shape_out = moved.shape[:-1]
                idx = moved.reshape(-1)
                width = moved.shape[-1]
                indptr = np.arange(0, idx.size + 1, max(width, 1), dtype=np.int64) if width else \
                    np.zeros(int(np.prod(shape_out, dtype=np.int64)) + 1, dtype=np.int64)
            rows = kernel.mont_prod_rows(self._mont, idx, indptr)
            return EncryptedArray._from_mont(self.public_key, rows, shape_out, self.frac_bits)
        if axis is None:
            flat = self._c.ravel().tolist()
            total = _product(kernel, flat, modulus)
            return self._with([total], (), self.frac_bits)
        moved = np.moveaxis(self._c, axis, -1)
        rows = int(np.prod(moved.shape[:-1]))
        width = moved.shape[-1]
        flat = moved.reshape(rows, width).ravel().tolist()
        indptr = np.arange(0, rows * width + 1, max(width, 1)) if width else np.zeros(rows + 1, dtype=np.int64)
        out = kernel.prod_rows(flat, np.arange(rows * width), indptr, modulus)
        return self._with(out, moved.shape[:-1], self.frac_bits)

    def rerandomize(self) -> "EncryptedArray":
        """Fresh randomness, same plaintexts: mandatory before sending an evaluated ciphertext to
        the key owner."""
        kernel = get_kernel()
        if self._mont is not None and getattr(kernel, "montgomery", False):
            pk = self.public_key
            counters.add("rerandomizations", self.size)
            exps = default_prg().exponent_bytes(self.size, pk.exponent_bits)
            rows = kernel.mont_fixed_base([pk._randomizer_spec], [exps], self._mont, pk.ciphertext_modulus)
            return EncryptedArray._from_mont(pk, rows, self.shape, self.frac_bits)
        flat = self.public_key.raw_rerandomize(self._c.ravel().tolist())
        return self._with(flat, self.shape, self.frac_bits)

    # -- serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Versioned fixed-width bytes: header, key fingerprint, i32 frac_bits, u8 ndim,
        u64 x ndim shape, then the ciphertext block (:mod:`shaper.crypto.wire`)."""
        pk = self.public_key
        head = wire.header(wire.KIND_ARRAY, pk.scheme_id) + pk.fingerprint
        head += struct.pack("<iB", self.frac_bits, self.ndim) + struct.pack(f"<{self.ndim}Q", *self.shape)
        return head + wire.ciphertext_block(self._c.ravel().tolist(), wire.ciphertext_width(pk))

    @classmethod
    def from_bytes(cls, data: bytes, public_key: AHEPublicKey) -> "EncryptedArray":
        """Parse and validate bytes made by :meth:`to_bytes` under ``public_key`` (every
        ciphertext is checked before it is returned)."""
        r = wire.open_ciphertexts(data, public_key, wire.KIND_ARRAY)
        frac_bits, ndim = r.unpack("iB", "scale and rank")
        if frac_bits < 0 or ndim > _MAX_DIMS:
            raise SerializationError(f"invalid scale {frac_bits} or rank {ndim}")
        shape = r.unpack(f"{ndim}Q", "shape") if ndim else ()
        if any(d > _MAX_EXTENT for d in shape) or math.prod(d for d in shape if d) > _MAX_EXTENT:
            raise SerializationError(f"array shape {tuple(shape)} is impossibly large (at most {_MAX_EXTENT} "
                                     "elements along an axis or in all)")
        count = math.prod(shape)
        values = wire.read_ciphertexts(r, count, public_key)
        r.done()
        public_key._check_symbols(values)  # read_ciphertexts checked range and coprimality
        return cls(public_key, object_array(values, tuple(shape)), frac_bits)



def _product(kernel: Any, values: list, modulus: Any) -> Any:
    """Product of many ciphertexts, split in partial products so a pool can share the work."""
    count = len(values)
    if count == 0:
        return mpz(1)
    chunk = max(256, count // 64)
    indptr = np.unique(np.append(np.arange(0, count, chunk), count))
    partial = kernel.prod_rows(values, np.arange(count), indptr, modulus)
    while len(partial) > 1:
        partial = kernel.prod_rows(partial, np.arange(len(partial)), np.array([0, len(partial)]), modulus)
    return mpz(partial[0]) % modulus


def concatenate(arrays: Sequence[EncryptedArray], axis: int = 0) -> EncryptedArray:
    """Join encrypted arrays under the same key (scales aligned to the largest)."""
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    first = arrays[0]
    for a in arrays[1:]:
        first._same_key(a)
    frac = max(a.frac_bits for a in arrays)
    scaled = [a.rescaled(frac) for a in arrays]
    if all(a._mont is not None for a in scaled) and len({a._mont.ctx.engine for a in scaled}) == 1:
        # join the positions, then the rows of every part stacked in order
        offsets = np.cumsum([0] + [a.size for a in scaled[:-1]])
        pos = np.concatenate([a._positions() + off for a, off in zip(scaled, offsets)], axis=axis)
        rows = np.concatenate([a._mont.rows for a in scaled], axis=0)
        joined = MontRows(scaled[0]._mont.ctx, scaled[0]._mont.modulus, rows)
        return EncryptedArray._from_mont(first.public_key, joined, (rows.shape[0],), frac)._take(pos)
    parts = [a._c for a in scaled]
    return EncryptedArray(first.public_key, np.concatenate(parts, axis=axis), frac)



def matvec(matrix: Any, vector: EncryptedArray, *, frac_bits: int | None = None) -> EncryptedArray:
    """``matrix @ vector`` for a plaintext (m, d) matrix and an encrypted length-d vector.

    Work is proportional to the non-zeros of ``matrix``: a 0/1 matrix costs one ciphertext
    product per non-zero; other integer entries one short exponentiation each; negative entries
    are gathered per row and inverted once per row. Float entries are encoded at ``frac_bits``
    (default: the vector's own scale, as for ``vector * float``); integer entries exactly unless
    ``frac_bits`` is given. The result's scale is ``vector.frac_bits + frac_bits``. The matrix
    never leaves its owner.
    """
    if not isinstance(vector, EncryptedArray):
        raise TypeError(f"matvec needs an EncryptedArray vector, got {type(vector).__name__}")
    if vector.ndim != 1:
        raise ValueError(f"matvec needs a 1-D encrypted vector, got shape {vector.shape}")
    csr = encoding.as_csr(matrix)
    rows, cols = csr.shape
    if cols != vector.shape[0]:
        raise ValueError(f"shape mismatch: matrix is {rows}x{cols}, vector has length {vector.shape[0]}")
    pk = vector.public_key
    kernel = get_kernel()
    modulus = pk.ciphertext_modulus
    indptr = csr.indptr.astype(np.int64)
    indices = csr.indices.astype(np.int64)
    data = csr.data
    counters.add("ciphertext_products", int(data.size))
    binary = data.dtype.kind in "iub" and data.size > 0 and bool(np.all(data == 1))
    if (binary or data.size == 0) and vector._mont is not None and getattr(kernel, "montgomery", False):
        rows = kernel.mont_prod_rows(vector._mont, indices, indptr)
        return EncryptedArray._from_mont(pk, rows, (csr.shape[0],), vector.frac_bits)
    cts = vector._c.tolist()
    if binary or data.size == 0:
        out = kernel.prod_rows(cts, indices, indptr, modulus)
        return EncryptedArray(pk, object_array(out), vector.frac_bits)

    if frac_bits is not None:
        k_frac = frac_bits
    elif data.dtype.kind == "f" and not np.all(data == np.floor(data)):
        k_frac = vector.frac_bits
        if k_frac == 0:
            raise TypeError(
                "the matrix has non-integer entries and the vector is integer-encoded: call "
                "matvec(X, v, frac_bits=16) (or vecmat) to choose the matrix's fixed-point scale"
            )
    else:
        k_frac = 0
    scalars = encoding.encode(data, k_frac, pk.max_int).tolist()
    row_of = np.repeat(np.arange(rows), np.diff(indptr))
    if _shared_bases_pay(scalars, cols, csr.shape[1], pk):
        out = _multiexp_rows(kernel, cts, indices, indptr, row_of, np.array(scalars, dtype=np.int64), modulus)
        return EncryptedArray(pk, object_array(out), vector.frac_bits + k_frac)
    negative = np.fromiter((k < 0 for k in scalars), dtype=bool, count=len(scalars))

    def signed_part(mask: np.ndarray) -> list:
        sel = np.flatnonzero(mask)
        gathered = [cts[i] for i in indices[sel].tolist()]
        exps = [abs(scalars[i]) for i in sel.tolist()]
        powered = list(gathered)
        general = [j for j, e in enumerate(exps) if e != 1]
        if general:
            results = kernel.powmod([gathered[j] for j in general], [exps[j] for j in general], modulus)
            for j, v in zip(general, results):
                powered[j] = v
        counts = np.bincount(row_of[sel], minlength=rows)
        part_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return kernel.prod_rows(powered, np.arange(len(powered)), part_ptr, modulus)

    result = signed_part(~negative)
    if negative.any():
        neg_rows = np.unique(row_of[negative])
        neg = signed_part(negative)
        inv = kernel.invert([neg[r] for r in neg_rows.tolist()], modulus)
        sub = kernel.mulmod([result[r] for r in neg_rows.tolist()], inv, modulus)
        for r, v in zip(neg_rows.tolist(), sub):
            result[r] = v
    return EncryptedArray(pk, object_array(result), vector.frac_bits + k_frac)


_WINDOW = 4  # bits per digit of the shared-base multi-exponentiation (a table of 15 powers per base)
_TABLE_BYTES = 256 << 20  # memory the tables of one call may take


def _shared_bases_pay(scalars: list, nnz_cols: int, cols: int, pk: AHEPublicKey) -> bool:
    """Straus' shared-base method pays when every base is used by several rows with exponents
    of more than a few bits, and its tables fit in memory."""
    count = len(scalars)
    if count < 64 or cols == 0 or count < 4 * cols:
        return False
    lo, hi = min(scalars), max(scalars)
    if hi - min(lo, 0) >= 1 << 62:
        return False
    width = (int(pk.ciphertext_modulus).bit_length() + 7) // 8
    return max(abs(lo), abs(hi)).bit_length() >= 8 and 15 * cols * width <= _TABLE_BYTES


def _multiexp_rows(kernel: Any, cts: list, indices: np.ndarray, indptr: np.ndarray, row_of: np.ndarray,
                   scalars: np.ndarray, modulus: Any) -> list:
    """``out[r] = prod_k cts[indices[k]] ** scalars[k]`` over row r's entries, for many rows
    sharing their bases (Straus / the windowed multi-exponentiation): each base's powers 1..15
    are made once (14 products per base); then every 4-bit digit of every exponent costs one
    product, and each row 4 squarings per digit position, against about 1.5 products per bit of
    each exponent when every entry is exponentiated on its own. Negative exponents: all are
    shifted by ``off`` = -min, and each row is divided by (its product of bases)^off."""
    d = len(cts)
    m = len(indptr) - 1
    off = max(0, -int(scalars.min()))
    e = scalars + off
    bits = int(e.max()).bit_length()
    table = [cts]
    for _ in range(2, 1 << _WINDOW):
        table.append(kernel.mulmod(table[-1], cts, modulus))
    flat = [x for power in table for x in power]
    acc = None
    mask = (1 << _WINDOW) - 1
    for w in reversed(range(-(-bits // _WINDOW))):
        digits = (e >> (w * _WINDOW)) & mask
        nz = np.flatnonzero(digits)
        idx = (digits[nz] - 1) * d + indices[nz]
        ptr = np.concatenate([[0], np.cumsum(np.bincount(row_of[nz], minlength=m))]).astype(np.int64)
        part = kernel.prod_rows(flat, idx.astype(np.int64), ptr, modulus)
        acc = part if acc is None else kernel.mulmod(
            kernel.powmod_same_exponent(acc, 1 << _WINDOW, modulus), part, modulus)
    if off:
        support = kernel.prod_rows(cts, indices, indptr, modulus)
        acc = kernel.mulmod(acc, kernel.invert(kernel.powmod_same_exponent(support, off, modulus), modulus), modulus)
    return list(acc)


def vecmat(vector: EncryptedArray, matrix: Any, *, frac_bits: int | None = None) -> EncryptedArray:
    """``vector @ matrix`` for an encrypted length-m vector and a plaintext (m, d) matrix."""
    if is_sparse(matrix):
        transposed = matrix.T
    else:
        arr = np.asarray(matrix)
        if arr.ndim != 2:
            raise ValueError(f"plaintext matrix must be 2-D, got shape {arr.shape}")
        transposed = arr.T
    return matvec(transposed, vector, frac_bits=frac_bits)
