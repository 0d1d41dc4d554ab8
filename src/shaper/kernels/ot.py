"""The oblivious-transfer family's face: base OT (X25519, Masny–Rindal style), IKNP/SoftSpoken
correlated-OT extension and the bit packing its messages use, all in the Rust core, sans I/O
(``native/src/ot``). The protocol layer (:mod:`shaper.protocols.ot`) moves their bytes between
parties and keeps the per-pair state; nothing above the kernels imports the extension.

There is no Python fallback: OT extension in Python would be orders of magnitude too slow to be
useful, so :func:`engine` raises :class:`~shaper.errors.KernelError` naming the missing build,
and callers that can do without OT (tests, benchmarks of the online phase) take triples from the
insecure dealer instead.
"""

from __future__ import annotations

from typing import Any

from ..errors import KernelError

try:  # optional: without the build, OT-based preprocessing is unavailable (dealer triples still work)
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["available", "engine"]


def available() -> bool:
    """True when the extension is built (its OT classes are always there when it is)."""
    return _native is not None and hasattr(_native, "SoftSender")


def engine() -> Any:
    """The native OT classes and functions: ``BaseOtSender``, ``BaseOtReceiver``, ``SoftSender``,
    ``SoftReceiver``, ``cot_finish``, ``pack_choice_bits``."""
    if not available():
        raise KernelError("OT-based MPC needs shaper's native extension, which is not built here (pip install . "
                          "builds it with Rust and maturin)")
    return _native
