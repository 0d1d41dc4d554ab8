"""Batch modular arithmetic behind one interface (see :mod:`shaper.kernels.base`).

``get_kernel()`` returns the kernel the crypto layer uses: the gmpy2 kernel, spread over worker
processes when more than one worker is configured. The number of workers defaults to the CPU
cores this process may run on; override it with ``SHAPER_WORKERS`` or :func:`set_workers`.
``SHAPER_KERNEL`` selects the implementation (only ``gmpy2`` exists today; the native and GPU
kernels plug in here).
"""

from __future__ import annotations

import os

from .base import FixedBaseSpec, Kernel, exponent_digits, int_to_exponent_bytes
from .gmp import GmpKernel, local_kernel
from .parallel import ParallelKernel, shutdown_pool

__all__ = [
    "FixedBaseSpec",
    "Kernel",
    "GmpKernel",
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
    """Use ``count`` worker processes (1 = compute in the calling process only);
    ``None`` restores the default (``SHAPER_WORKERS`` or all available cores)."""
    global _workers, _kernel
    if count is not None and (not isinstance(count, int) or count < 1):
        raise ValueError(f"workers must be a positive integer, got {count!r}")
    _workers = count
    _kernel = None


def get_kernel() -> Kernel:
    """The active kernel."""
    global _kernel
    choice = os.environ.get("SHAPER_KERNEL", "gmpy2").lower()
    if choice not in ("gmpy2", "gmp", "auto"):
        raise ValueError(f"SHAPER_KERNEL={choice!r} is not available here; known kernels: gmpy2")
    if _kernel is None:
        n = workers()
        _kernel = local_kernel() if n == 1 else ParallelKernel(n)
    return _kernel
