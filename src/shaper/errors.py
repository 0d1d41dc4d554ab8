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


class ScaleError(ShaperError, ValueError):
    """CKKS operands do not fit an operation: levels or scales differ, or no level is left."""


class PackingError(ShaperError, ValueError):
    """Packing parameters are impossible, or an unpacked slot violates its declared bound."""


class KeyValidationError(ShaperError, ValueError):
    """A key is malformed, inconsistent, too small, or fails a structural check on load."""


class SerializationError(ShaperError, ValueError):
    """Bytes or JSON could not be parsed as the expected shaper object."""


class KernelError(ShaperError, RuntimeError):
    """A compute kernel or its worker pool failed."""


class ConfigError(ShaperError, ValueError):
    """A configuration value or parties file is invalid (names the field and the value)."""


class NetError(ShaperError, ConnectionError):
    """Base class of errors between parties."""


class PeerError(NetError):
    """A peer died, closed the session, or aborted with an error of its own."""


class PeerTimeout(NetError, TimeoutError):
    """Nothing arrived from a peer (or a send did not drain) within the configured timeout."""


class QuorumError(NetError):
    """A federated round lost more clients than its quorum allows (names them), or a client
    needed to finish the round left it."""


class FrameError(NetError):
    """A peer sent a malformed, oversized or unexpected frame."""


class HandshakeError(NetError):
    """A connection could not be set up: unreachable peer, refused certificate, mismatched
    protocol version or session id."""


class DeviationError(NetError):
    """The active engine caught a deviation: a MAC check, a sacrifice, a range check or a
    comparison of the parties' views failed. The message names the phase (and the party where
    one can be named), never a secret; every honest party stops, and nothing computed after the
    last passed check is output."""


class PartyError(ShaperError, RuntimeError):
    """A party run by the launcher failed; carries the party's name and traceback."""

    def __init__(self, party: str, message: str, remote_traceback: str = "") -> None:
        self.party = party
        self.remote_traceback = remote_traceback
        text = f"party {party!r} failed: {message}"
        if remote_traceback:
            text += f"\n\n--- traceback in party {party!r} ---\n{remote_traceback}"
        super().__init__(text)


class DecryptionRefused(ShaperError, PermissionError):
    """A joint decryption did not happen: a party refused it, or the parties did not hold the
    same ciphertext (its digest differed); nothing was opened."""


class DivergenceError(ShaperError, ArithmeticError):
    """Training diverged (its monitored loss rose, or a value left its fixed-point or packing
    range); the message names the cause and a learning rate that suits the data."""
