"""The OT-based PSI kernels' face: the OKVS encoder and the SoftSpoken subspace-VOLE extension
over it (``native/src/okvs.rs``), with the base OTs they start from, all sans I/O. The protocol
layer (:mod:`shaper.protocols.psi.okvs`) moves their bytes.

There is no Python fallback (OT extension in Python would be far slower than ECDH): without the
native build :func:`engine` raises :class:`~shaper.errors.KernelError` naming it, and PSI's
automatic protocol choice takes ECDH instead (:func:`available`).
"""

from __future__ import annotations

from typing import Any

from ..errors import KernelError

try:  # optional: without the build, PSI runs ECDH
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

__all__ = ["available", "engine"]


def available() -> bool:
    """True when the extension is built with the OKVS kernels."""
    return _native is not None and hasattr(_native, "OkvsReceiver")


def engine() -> Any:
    """The native classes and functions: ``OkvsReceiver``, ``OkvsSender``, ``BaseOtSender``,
    ``BaseOtReceiver``, and for tests ``okvs_rows``, ``okvs_encode``, ``okvs_code``."""
    if not available():
        raise KernelError("OT-based PSI (protocol 'okvs') needs shaper's native extension, which is not built here "
                          "(pip install . builds it with Rust and maturin); protocol 'ecdh' runs without it")
    return _native
