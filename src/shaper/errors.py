"""Exception types raised by shaper.

Every error names the problem in its message (which value, which bound, which key), so a
user can act on it without reading the source. The classes subclass the built-in exception a
Python user would expect (``ValueError``, ``OverflowError``, ...) so generic handlers still work.
"""

from __future__ import annotations


class ShaperError(Exception):
    """Base class of all shaper errors."""


class KeyMismatchError(ShaperError, ValueError):
    """Two operands (or a ciphertext and a key) belong to different keys."""


class InvalidCiphertextError(ShaperError, ValueError):
    """A ciphertext is outside the ciphertext space: not in [1, N) or not coprime to n."""


class PlaintextOverflowError(ShaperError, OverflowError):
    """A value does not fit the plaintext range (after fixed-point scaling) or a decrypted
    value fell in the overflow band, meaning a homomorphic result wrapped around."""


class PackingError(ShaperError, ValueError):
    """Packing parameters are impossible, or an unpacked slot violates its declared bound."""


class KeyValidationError(ShaperError, ValueError):
    """A key is malformed, inconsistent, too small, or fails a structural check on load."""


class SerializationError(ShaperError, ValueError):
    """Bytes or JSON could not be parsed as the expected shaper object."""


class KernelError(ShaperError, RuntimeError):
    """A compute kernel or its worker pool failed."""
