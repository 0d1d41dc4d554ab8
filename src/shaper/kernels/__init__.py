"""Batch modular arithmetic behind one interface (see :mod:`shaper.kernels.base`).

``get_kernel()`` returns the kernel the crypto layer uses:

* the native kernel (:mod:`shaper.kernels.native`, Rust with AVX-512 IFMA) where the extension
  is built and the CPU has IFMA — its own threads use every core;
* otherwise the gmpy2 kernel, spread over worker processes when more than one worker is
  configured.

``SHAPER_NATIVE`` picks the native engine: ``auto`` (default: IFMA where present, else gmpy2),
``ifma``, ``portable`` (64-bit limbs, any CPU) or ``off`` (gmpy2 only). Both kernels give
bit-identical results. The number of workers (processes for gmpy2, threads for native)
defaults to the CPU cores this process may run on; override it with ``SHAPER_WORKERS`` or
:func:`set_workers`.
"""

from __future__ import annotations

import os

from .base import FixedBaseSpec, Kernel, exponent_digits, int_to_exponent_bytes
from . import native
from .gmp import GmpKernel, local_kernel
from .native import NativeKernel
from .parallel import ParallelKernel, shutdown_pool

__all__ = [
    "FixedBaseSpec",
    "Kernel",
    "GmpKernel",
    "NativeKernel",
    "ParallelKernel",
    "get_kernel",
    "set_workers",
    "workers",
    "shutdown_pool",
    "exponent_digits",
    "int_to_exponent_bytes",
]

_workers: int | None = None
_kernel: Kernel | None = None
_kernel_key: tuple | None = None


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def workers() -> int:
    """Number of processes batch operations are spread over."""
    global _workers
    if _workers is None:
        raw = os.environ.get("SHAPER_WORKERS")
        if raw is None:
            _workers = _available_cores()
        else:
            try:
                _workers = int(raw)
            except ValueError as exc:
                raise ValueError(f"SHAPER_WORKERS must be a positive integer, got {raw!r}") from exc
            if _workers < 1:
                raise ValueError(f"SHAPER_WORKERS must be a positive integer, got {raw!r}")
    return _workers


def set_workers(count: int | None) -> None:
    """Use ``count`` workers (1 = compute in the calling thread/process only); ``None``
    restores the default (``SHAPER_WORKERS`` or all available cores)."""
    global _workers, _kernel
    if count is not None and (not isinstance(count, int) or count < 1):
        raise ValueError(f"workers must be a positive integer, got {count!r}")
    _workers = count
    _kernel = None


def get_kernel() -> Kernel:
    """The active kernel (rebuilt when ``SHAPER_NATIVE`` or the worker count changes)."""
    global _kernel, _kernel_key
    engine = native.chosen_engine()
    key = (engine, workers())
    if _kernel is None or key != _kernel_key:
        n = key[1]
        if engine is not None:
            _kernel = NativeKernel(engine, threads=n)
        else:
            _kernel = local_kernel() if n == 1 else ParallelKernel(n)
        _kernel_key = key
    return _kernel
