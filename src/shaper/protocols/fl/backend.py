"""The Paillier implementation a federated-learning job runs on: shaper's engine or python-paillier.

FATE computes with python-paillier's algorithm (its ``fate_paillier`` module is a copy of phe with
a fixed-point wrapper); the seed paper (Yang et al.) accelerates exactly that. So that the
comparison is the *same protocol* on two engines, every cryptographic step of
:mod:`shaper.protocols.fl` goes through a :class:`Backend`:

* ``ShaperBackend`` — DJN keys, fixed-base encryption, CRT decryption, batched kernels
  (:mod:`shaper.crypto.paillier`, :class:`~shaper.crypto.ahe.EncryptedArray`, ``matvec``);
* ``PheBackend`` — ``phe.PaillierPublicKey.raw_encrypt`` (r^n mod n^2 with a full-size r, as
  ``phe.encrypt`` does), ``EncryptedNumber`` arithmetic element by element, ``raw_decrypt``
  (CRT), the way a FATE job uses it.

Both work on plaintexts that are integers mod n (signed values are taken mod n; the fixed-point
scales are the protocol's business) and put ciphertexts on the wire as the same validated fixed-width blocks
(:mod:`shaper.crypto.wire`), so the messages, their sizes and the work per step are
identical; only the engine differs (phe's ciphertexts travel without shaper's key fingerprint,
which needs shaper's h_s). Each call is recorded as a step of the backend's
:class:`~shaper.net.phases.Phases` under its category (:data:`CATEGORIES`), so ``lap()`` splits
an iteration into encryption, decryption, homomorphic work, waiting for peers and the rest
(plaintext work: encoding, local gradients, (de)serialisation, packing).

A ciphertext vector (``Ct``) is an :class:`EncryptedArray` (shaper) or a numpy object array of
``phe.EncryptedNumber`` (phe); protocols only pass it back to the same backend.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np
from gmpy2 import mpz
from ...arrays import object_array
from ...crypto import paillier, wire
from ...crypto.ahe import EncryptedArray, concatenate, matvec
from ...crypto.serialization import key_from_bytes, key_to_bytes
from ...errors import ConfigError, KeyValidationError, PlaintextOverflowError
from ...net.phases import Phases

BACKENDS = ("shaper", "phe")
#: the step names a backend records (the seed paper, Yang et al., reports encryption separately)
CATEGORIES = ("encrypt", "decrypt", "homomorphic")


def make_backend(name: str, phases: Phases | None = None) -> "Backend":
    """The backend called ``name`` ("shaper" or "phe"), recording its calls into ``phases``."""
    if name == "shaper":
        return ShaperBackend(phases)
    if name == "phe":
        return PheBackend(phases)
    raise ConfigError(f"unknown backend {name!r}; choose one of {BACKENDS}")


def centered(residues: Sequence[int], n: int) -> list[int]:
    """Residues mod n lifted to (-n/2, n/2]: the signed integers they encode."""
    half = n // 2
    return [int(r) - n if r > half else int(r) for r in residues]


class Backend(ABC):
    """Batched Paillier operations on integer plaintexts mod n (see the module docstring)."""

    name = ""

    def __init__(self, phases: Phases | None = None) -> None:
        self.phases = phases or Phases()

    # keys -----------------------------------------------------------------------------------
    @abstractmethod
    def keygen(self, bits: int) -> tuple[Any, Any]:
        """A fresh (public, private) key pair with a ``bits``-bit modulus."""

    @abstractmethod
    def modulus(self, pk: Any) -> int:
        """n."""

    def capacity_bits(self, pk: Any) -> int:
        """Bits of plaintext a packed value may use: values below 2^capacity stay below n/3."""
        return int(self.modulus(pk)).bit_length() - 3

    @abstractmethod
    def public_to_bytes(self, pk: Any) -> bytes:
        """The public key for the wire."""

    @abstractmethod
    def public_from_bytes(self, data: bytes) -> Any:
        """A public key received from a peer, validated."""

    @abstractmethod
    def private_to_bytes(self, sk: Any) -> bytes:
        """The private key (for the other clients of a horizontal job, and checkpoints)."""

    @abstractmethod
    def private_from_bytes(self, data: bytes) -> Any:
        """A private key from :meth:`private_to_bytes`, validated."""

    @abstractmethod
    def public_of(self, sk: Any) -> Any:
        """The public key of a private key."""

    # operations -----------------------------------------------------------------------------
    @abstractmethod
    def encrypt(self, pk: Any, values: Sequence[int]) -> Any:
        """Fresh encryptions of signed integers (|v| <= n/3)."""

    def encrypt_owner(self, sk: Any, values: Sequence[int]) -> Any:
        """Encryption by a holder of the private key (the same ciphertexts; shaper uses CRT,
        about a third of the public-key cost; python-paillier has no such path)."""
        return self.encrypt(self.public_of(sk), values)

    @abstractmethod
    def decrypt(self, sk: Any, ct: Any) -> list[int]:
        """Residues in [0, n) (:func:`centered` gives the signed values)."""

    def decrypt_signed(self, sk: Any, ct: Any) -> list[int]:
        return centered(self.decrypt(sk, ct), self.modulus(self.public_of(sk)))

    @abstractmethod
    def add(self, a: Any, b: Any) -> Any:
        """Enc(x), Enc(y) -> Enc(x + y), element by element."""

    @abstractmethod
    def add_plain(self, a: Any, values: Sequence[int]) -> Any:
        """Enc(x) -> Enc(x + v)."""

    @abstractmethod
    def mul_plain(self, a: Any, values: Sequence[int]) -> Any:
        """Enc(x) -> Enc(k x) for signed integers k."""

    @abstractmethod
    def dot(self, matrix: np.ndarray, ct: Any) -> Any:
        """``matrix @ ct`` for an integer (r, c) matrix and c ciphertexts."""

    @abstractmethod
    def total(self, ct: Any) -> Any:
        """The sum of the vector, as a vector of one ciphertext."""

    @abstractmethod
    def concat(self, parts: Sequence[Any]) -> Any:
        """One vector of the ciphertexts of ``parts``, in order."""

    @abstractmethod
    def trivial_zeros(self, pk: Any, count: int) -> Any:
        """``count`` ciphertexts 1 = Enc(0; r=1): padding, to be re-randomised before it leaves."""

    def size(self, ct: Any) -> int:
        return len(ct)

    # wire -----------------------------------------------------------------------------------
    @abstractmethod
    def dumps(self, ct: Any) -> bytes:
        """Ciphertexts as validated fixed-width bytes (:mod:`shaper.crypto.wire`)."""

    @abstractmethod
    def loads(self, pk: Any, data: bytes) -> Any:
        """Parse and validate ciphertexts received from a peer (each in [1, n^2), a unit)."""


class ShaperBackend(Backend):
    name = "shaper"

    def keygen(self, bits: int) -> tuple[Any, Any]:
        pk, sk = paillier.keygen(bits)
        return pk, sk

    def modulus(self, pk: Any) -> int:
        return int(pk.n)

    def public_to_bytes(self, pk: Any) -> bytes:
        return pk.to_bytes()

    def public_from_bytes(self, data: bytes) -> Any:
        pk = key_from_bytes(data)
        if not isinstance(pk, paillier.PaillierPublicKey):
            raise KeyValidationError(f"expected a Paillier public key, got {type(pk).__name__}")
        return pk

    def private_to_bytes(self, sk: Any) -> bytes:
        return key_to_bytes(sk)

    def private_from_bytes(self, data: bytes) -> Any:
        sk = key_from_bytes(data)
        if not isinstance(sk, paillier.PaillierPrivateKey):
            raise KeyValidationError(f"expected a Paillier private key, got {type(sk).__name__}")
        return sk

    def public_of(self, sk: Any) -> Any:
        return sk.public_key

    def encrypt(self, pk: Any, values: Sequence[int]) -> EncryptedArray:
        vals = [int(v) for v in values]
        _check_plain(vals, pk.max_int)
        with self.phases.phase("encrypt"):
            return EncryptedArray(pk, object_array(pk.raw_encrypt(vals)), 0)

    def encrypt_owner(self, sk: Any, values: Sequence[int]) -> EncryptedArray:
        vals = [int(v) for v in values]
        _check_plain(vals, sk.public_key.max_int)
        with self.phases.phase("encrypt"):
            return EncryptedArray(sk.public_key, object_array(sk.raw_encrypt(vals)), 0)

    def decrypt(self, sk: Any, ct: EncryptedArray) -> list[int]:
        with self.phases.phase("decrypt"):
            return [int(v) for v in sk.raw_decrypt(ct._c.ravel().tolist())]

    def add(self, a: EncryptedArray, b: EncryptedArray) -> EncryptedArray:
        with self.phases.phase("homomorphic"):
            return a + b

    def add_plain(self, a: EncryptedArray, values: Sequence[int]) -> EncryptedArray:
        pk = a.public_key
        with self.phases.phase("homomorphic"):
            return EncryptedArray(pk, object_array(pk.raw_add_plain(a._c.ravel().tolist(), [int(v) for v in values])), 0)

    def mul_plain(self, a: EncryptedArray, values: Sequence[int]) -> EncryptedArray:
        pk = a.public_key
        with self.phases.phase("homomorphic"):
            return EncryptedArray(pk, object_array(pk.raw_mul_plain(a._c.ravel().tolist(), [int(v) for v in values])), 0)

    def dot(self, matrix: np.ndarray, ct: EncryptedArray) -> EncryptedArray:
        with self.phases.phase("homomorphic"):
            return matvec(matrix, ct)

    def total(self, ct: EncryptedArray) -> EncryptedArray:
        with self.phases.phase("homomorphic"):
            return ct.sum().reshape(1)

    def concat(self, parts: Sequence[EncryptedArray]) -> EncryptedArray:
        return concatenate(list(parts)) if len(parts) > 1 else parts[0]

    def trivial_zeros(self, pk: Any, count: int) -> EncryptedArray:
        return EncryptedArray(pk, object_array([mpz(1)] * count), 0)

    def dumps(self, ct: EncryptedArray) -> bytes:
        return ct.to_bytes()

    def loads(self, pk: Any, data: bytes) -> EncryptedArray:
        return EncryptedArray.from_bytes(data, pk).ravel()


class PheBackend(Backend):
    """python-paillier, used as FATE's Paillier uses it (see the module docstring)."""

    name = "phe"

    def __init__(self, phases: Phases | None = None) -> None:
        super().__init__(phases)
        try:
            import phe
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError("--backend phe needs python-paillier: pip install 'shaper-ppml[interop]'") from exc
        self.phe = phe
        self._shadow: dict[int, Any] = {}

    def keygen(self, bits: int) -> tuple[Any, Any]:
        return self.phe.generate_paillier_keypair(n_length=bits)

    def modulus(self, pk: Any) -> int:
        return int(pk.n)

    def _wire_key(self, pk: Any) -> Any:
        """shaper's view of the same modulus: its ciphertext format and validation."""
        key = self._shadow.get(int(pk.n))
        if key is None:
            key = self._shadow[int(pk.n)] = paillier.from_phe(pk)
        return key

    def public_to_bytes(self, pk: Any) -> bytes:
        return int(pk.n).to_bytes((int(pk.n).bit_length() + 7) // 8, "little")

    def public_from_bytes(self, data: bytes) -> Any:
        n = int.from_bytes(data, "little")
        if n.bit_length() < paillier.MIN_KEY_BITS or n % 2 == 0:
            raise KeyValidationError(f"a {n.bit_length()}-bit even or short modulus is not a Paillier key")
        return self.phe.PaillierPublicKey(n)

    def private_to_bytes(self, sk: Any) -> bytes:
        return key_to_bytes(paillier.from_phe(sk))

    def private_from_bytes(self, data: bytes) -> Any:
        sk = key_from_bytes(data)
        if not isinstance(sk, paillier.PaillierPrivateKey):
            raise KeyValidationError(f"expected a Paillier private key, got {type(sk).__name__}")
        return paillier.to_phe(sk)

    def public_of(self, sk: Any) -> Any:
        return sk.public_key

    def _wrap(self, pk: Any, cts: Sequence[int]) -> np.ndarray:
        return object_array([self.phe.EncryptedNumber(pk, int(c), 0) for c in cts])

    def encrypt(self, pk: Any, values: Sequence[int]) -> np.ndarray:
        vals = [int(v) for v in values]
        _check_plain(vals, pk.max_int)
        n = pk.n
        with self.phases.phase("encrypt"):
            return self._wrap(pk, [pk.raw_encrypt(v % n) for v in vals])

    def decrypt(self, sk: Any, ct: np.ndarray) -> list[int]:
        with self.phases.phase("decrypt"):
            return [sk.raw_decrypt(x.ciphertext(be_secure=False)) for x in ct.tolist()]

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with self.phases.phase("homomorphic"):
            return a + b

    def add_plain(self, a: np.ndarray, values: Sequence[int]) -> np.ndarray:
        with self.phases.phase("homomorphic"):
            return object_array([x + int(v) for x, v in zip(a.tolist(), values)])

    def mul_plain(self, a: np.ndarray, values: Sequence[int]) -> np.ndarray:
        with self.phases.phase("homomorphic"):
            return object_array([x * int(v) for x, v in zip(a.tolist(), values)])

    def dot(self, matrix: np.ndarray, ct: np.ndarray) -> np.ndarray:
        rows = np.asarray(matrix)
        numbers = ct.tolist()
        with self.phases.phase("homomorphic"):
            out = []
            for row in rows.tolist():
                acc = None
                for x, k in zip(numbers, row):
                    if k:
                        term = x * int(k)
                        acc = term if acc is None else acc + term
                out.append(acc if acc is not None else numbers[0] * 0)
            return object_array(out)

    def total(self, ct: np.ndarray) -> np.ndarray:
        with self.phases.phase("homomorphic"):
            numbers = ct.tolist()
            acc = numbers[0]
            for x in numbers[1:]:
                acc = acc + x
            return object_array([acc])

    def concat(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate(list(parts)) if len(parts) > 1 else parts[0]

    def trivial_zeros(self, pk: Any, count: int) -> np.ndarray:
        return self._wrap(pk, [1] * count)

    def dumps(self, ct: np.ndarray) -> bytes:
        """u64 count, then a ciphertext block (:mod:`shaper.crypto.wire`)."""
        numbers = ct.tolist()
        if not numbers:
            raise ValueError("cannot serialise an empty ciphertext vector")
        width = wire.ciphertext_width(self._wire_key(numbers[0].public_key))
        cts = [x.ciphertext(be_secure=False) for x in numbers]
        return struct.pack("<Q", len(cts)) + wire.ciphertext_block(cts, width)

    def loads(self, pk: Any, data: bytes) -> np.ndarray:
        r = wire.Reader(data)
        (count,) = r.unpack("Q", "ciphertext count")
        cts = wire.read_ciphertexts(r, count, self._wire_key(pk))
        r.done()
        return self._wrap(pk, cts)


def _check_plain(values: list[int], max_int: int) -> None:
    if values and (max(values) > max_int or min(values) < -max_int):
        i = next(k for k, v in enumerate(values) if abs(v) > max_int)
        raise PlaintextOverflowError(
            f"plaintext {i} has {abs(values[i]).bit_length()} bits, more than the {max_int.bit_length()} bits "
            "this key encrypts without wrapping around")


def mean_split(laps: list[dict[str, float]]) -> dict[str, float]:
    """The mean per iteration of each entry of :meth:`Phases.lap <shaper.net.phases.Phases.lap>`
    splits ``laps`` (means keep the parts adding up to ``seconds``); ``{}`` for no laps."""
    if not laps:
        return {}
    keys = laps[0].keys()
    return {k: sum(lap[k] for lap in laps) / len(laps) for k in keys}
