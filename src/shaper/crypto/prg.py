"""Cryptographically secure randomness for keys, masks, shares and encryption exponents.

Every random value shaper uses for security comes from here: an AES-256-CTR keystream keyed
from ``os.urandom`` (re-keyed automatically in a forked child so parent and child never share a
stream). Long-term key material (primes) is drawn from ``secrets`` (the OS generator) directly.
numpy's and ``random``'s generators are never used for anything secret.

All functions are batched: they return numpy arrays (or lists of Python ints) of the requested
length in one call.
"""

from __future__ import annotations

import os
import secrets
import threading

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

_ZEROS = bytes(1 << 20)


class Prg:
    """AES-256-CTR keystream generator.

    ``seed`` (32 bytes) makes the stream reproducible, for tests and for PRF-style correlated
    randomness between parties; without it the key comes from ``os.urandom``. A generator
    created without a seed re-keys itself from ``os.urandom`` when used in a forked child.
    """

    def __init__(self, seed: bytes | None = None) -> None:
        if seed is not None and len(seed) != 32:
            raise ValueError(f"Prg seed must be 32 bytes, got {len(seed)}")
        self._fixed_seed = seed
        self._lock = threading.Lock()
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

    def uint64(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """Uniform uint64 array (e.g. ring elements of Z_2^64)."""
        count = int(np.prod(shape))
        return np.frombuffer(self.random_bytes(8 * count), dtype="<u8").reshape(shape).copy()

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


def system_randbits(bits: int) -> int:
    """One integer in [0, 2^bits) straight from the OS generator (used for key material)."""
    return secrets.randbits(bits)


def system_randbelow(bound: int) -> int:
    """One integer in [0, bound) straight from the OS generator (used for key material)."""
    return secrets.randbelow(bound)
