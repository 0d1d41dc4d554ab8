"""Cryptographically secure randomness for keys, masks, shares and encryption exponents.

Every random value shaper uses for security comes from here: an AES-CTR keystream keyed from
``os.urandom`` (re-keyed automatically in a forked child so parent and child never share a
stream). Long-term key material (primes, pairwise PRF keys) is drawn from the OS generator
directly (:func:`fresh_key`, :func:`system_randbelow`). numpy's and ``random``'s generators are
never used for anything secret.

Two kinds of stream, one class (:class:`Prg`):

* *own* streams, keyed from ``os.urandom`` (:func:`default_prg`, ``session.prg``): masks,
  shares, encryption exponents;
* *keyed* streams, ``Prg(seed)``: every holder of the seed draws the same words in lockstep.
  That is how parties get correlated randomness without talking: ``session.shared_prg`` (a seed
  agreed by a group), and the pairwise AES-128 keys of replicated sharing
  (:func:`pairwise_stream`, which runs on the VAES kernel where the CPU has it and gives
  byte-for-byte the same stream as ``Prg`` with that 16-byte key).

All functions are batched: they return numpy arrays (or lists of Python ints) of the requested
length in one call.
"""

from __future__ import annotations

import os
import secrets
import threading

from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ..kernels.bits import native_keystream

_ZEROS = bytes(1 << 20)


class Prg:
    """AES-CTR keystream generator (zero IV, 128-bit big-endian block counter).

    ``seed`` makes the stream reproducible, for tests and for PRF-style correlated randomness
    between parties: 32 bytes select AES-256, 16 bytes AES-128 (the pairwise keys of replicated
    sharing). Without it the key (AES-256) comes from ``os.urandom``, and a generator created
    without a seed re-keys itself from ``os.urandom`` when used in a forked child.
    """

    def __init__(self, seed: bytes | None = None) -> None:
        if seed is not None and len(seed) not in (16, 32):
            raise ValueError(f"Prg seed must be 32 bytes (or 16 for AES-128), got {len(seed)}")
        self._fixed_seed = seed
        self._lock = threading.Lock()
        self._word_zeros = b""
        self._word_buf = bytearray()
        self._rekey()

    def _rekey(self) -> None:
        key = self._fixed_seed if self._fixed_seed is not None else os.urandom(32)
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
        self._pid = os.getpid()

    def random_bytes(self, count: int) -> bytes:
        """``count`` keystream bytes."""
        if count < 0:
            raise ValueError(f"byte count must be non-negative, got {count}")
        with self._lock:
            if self._fixed_seed is None and self._pid != os.getpid():
                self._rekey()
            if count <= len(_ZEROS):
                return self._encryptor.update(_ZEROS[:count])
            parts = []
            left = count
            while left:
                take = min(left, len(_ZEROS))
                parts.append(self._encryptor.update(_ZEROS[:take]))
                left -= take
            return b"".join(parts)

    def words(self, count: int) -> np.ndarray:
        """The next ``count`` keystream words (uint64), as a view of a buffer this generator
        reuses: valid until its next ``words`` call (copy to keep). For hot loops that consume
        the stream at once (zero sharings, masks)."""
        nbytes = 8 * int(count)
        with self._lock:
            if self._fixed_seed is None and self._pid != os.getpid():
                self._rekey()
            if len(self._word_zeros) < nbytes:
                self._word_zeros = bytes(nbytes)
                self._word_buf = bytearray(nbytes + 16)  # update_into needs block-size slack
            if self._encryptor.update_into(memoryview(self._word_zeros)[:nbytes], self._word_buf) != nbytes:
                raise RuntimeError("short keystream")
        return np.frombuffer(self._word_buf, dtype="<u8", count=int(count))

    def uint64(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """Uniform uint64 array (e.g. ring elements of Z_2^64)."""
        count = int(np.prod(shape))
        return np.frombuffer(self.random_bytes(8 * count), dtype="<u8").reshape(shape).copy()

    def below(self, bound: int, shape: int | tuple[int, ...]) -> np.ndarray:
        """Uniform uint64 array in [0, bound) for 2 <= bound <= 2^64, by rejection (no modulo
        bias): words masked to bound's bit length, those >= bound drawn again."""
        if not 2 <= bound <= 1 << 64:
            raise ValueError(f"bound must be in 2..2^64, got {bound}")
        count = int(np.prod(shape))
        if bound == 1 << 64:
            return self.uint64(shape)
        mask = np.uint64((1 << (bound - 1).bit_length()) - 1)
        out = np.empty(count, dtype=np.uint64)
        filled = 0
        while filled < count:
            need = count - filled
            draw = self.uint64(need + need // 2 + 16) & mask  # acceptance >= 1/2
            keep = draw[draw < np.uint64(bound)][:need]
            out[filled:filled + len(keep)] = keep
            filled += len(keep)
        return out.reshape(shape)

    def exponent_bytes(self, count: int, bits: int) -> np.ndarray:
        """``count`` uniform integers in [0, 2^bits) as a (count, ceil(bits/8)) uint8 array of
        little-endian bytes: the form the kernels take exponents in."""
        if bits <= 0:
            raise ValueError(f"exponent bit length must be positive, got {bits}")
        width = (bits + 7) // 8
        out = np.frombuffer(self.random_bytes(count * width), dtype=np.uint8).reshape(count, width).copy()
        spare = 8 * width - bits
        if spare:
            out[:, -1] &= np.uint8(0xFF >> spare)
        return out

    def randbelow(self, bound: int, count: int) -> list[int]:
        """``count`` uniform integers in [0, bound) (rejection sampling, no modulo bias)."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        bits = bound.bit_length()
        width = (bits + 7) // 8
        spare = 8 * width - bits
        out: list[int] = []
        while len(out) < count:
            need = count - len(out)
            # Acceptance probability is at least 1/2; draw a little extra.
            draw = need + need // 2 + 8
            raw = self.random_bytes(draw * width)
            for i in range(draw):
                v = int.from_bytes(raw[i * width:(i + 1) * width], "little") >> spare
                if v < bound:
                    out.append(v)
                    if len(out) == count:
                        break
        return out

    def randbits(self, bits: int, count: int) -> list[int]:
        """``count`` uniform integers in [0, 2^bits)."""
        return self.randbelow(1 << bits, count)


_default = Prg()


def default_prg() -> Prg:
    """The process-wide generator (keyed from ``os.urandom``)."""
    return _default


def random_bytes(count: int) -> bytes:
    return _default.random_bytes(count)


def exponent_bytes(count: int, bits: int) -> np.ndarray:
    return _default.exponent_bytes(count, bits)


def randbelow(bound: int, count: int) -> list[int]:
    return _default.randbelow(bound, count)


def fresh_key(nbytes: int) -> bytes:
    """A new secret key of ``nbytes`` straight from the OS generator (PRF and PRG keys)."""
    return secrets.token_bytes(nbytes)


def pairwise_stream(key: bytes, *, native: bool | None = None) -> Any:
    """The AES-128-CTR stream under a 16-byte ``key`` two parties share: both draw the same
    words in lockstep (``words(count)``). The VAES kernel where available (``native=False``
    forces :class:`Prg`, whose stream is byte-for-byte the same)."""
    if len(key) != 16:
        raise ValueError(f"a pairwise stream key must be 16 bytes, got {len(key)}")
    fast = native_keystream(key) if native is not False else None
    return fast if fast is not None else Prg(key)


def system_randbits(bits: int) -> int:
    """One integer in [0, 2^bits) straight from the OS generator (used for key material)."""
    return secrets.randbits(bits)


def system_randbelow(bound: int) -> int:
    """One integer in [0, bound) straight from the OS generator (used for key material)."""
    return secrets.randbelow(bound)
