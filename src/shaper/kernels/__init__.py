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

Where the big batches run is the *executor*: ``local`` (the default: this machine's cores, as
above) or ``ray`` (a Ray cluster the party owns, :mod:`shaper.kernels.cluster`), chosen with
:func:`set_executor`, a parties file's ``[party.executor]`` table or ``SHAPER_EXECUTOR``.
"""

from __future__ import annotations

import os

from .base import FixedBaseSpec, Kernel, exponent_digits, int_to_exponent_bytes
from . import native
from .gmp import GmpKernel, local_kernel
from .native import NativeKernel
from .parallel import ParallelKernel, shutdown_pool
from .cluster import ExecutorSettings

__all__ = [
    "FixedBaseSpec",
    "Kernel",
    "GmpKernel",
    "NativeKernel",
    "ParallelKernel",
    "ExecutorSettings",
    "executor",
    "set_executor",
    "get_kernel",
    "set_workers",
    "workers",
    "shutdown_pool",
    "exponent_digits",
    "int_to_exponent_bytes",
]

_workers: int | None = None
_executor: ExecutorSettings | None = None
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
    restores the default (``SHAPER_WORKERS`` or all available cores). numpy's BLAS (the matrix
    products some protocols use, e.g. the active engine's subset sums) gets the same count:
    a BLAS pool wider than the party's share of the cores spins against the other parties (13×
    slower measured with two pinned parties on two cores)."""
    global _workers
    if count is not None and (not isinstance(count, int) or count < 1):
        raise ValueError(f"workers must be a positive integer, got {count!r}")
    _workers = count
    _limit_blas(count if count is not None else workers())
    _release()


def _limit_blas(count: int) -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=count, user_api="blas")


def executor() -> ExecutorSettings:
    """Where big batches run: :func:`set_executor`'s setting, else ``SHAPER_EXECUTOR``."""
    return _executor if _executor is not None else ExecutorSettings.from_env()


def set_executor(settings: ExecutorSettings | str | None, **options) -> None:
    """Run big batches on ``settings``: an :class:`ExecutorSettings`, ``"local"``, ``"ray"``
    (with ``address=``, ``actors=``, ``cpus_per_actor=``, ... as keyword options) or ``None`` to
    go back to ``SHAPER_EXECUTOR``. The previous Ray executor's actors are released."""
    global _executor
    if isinstance(settings, str):
        settings = ExecutorSettings(kind=settings, **options)
    elif options:
        raise TypeError("executor options go with a kind name, e.g. set_executor('ray', address=...)")
    if settings is not None and not isinstance(settings, ExecutorSettings):
        raise TypeError(f"expected ExecutorSettings, a kind name or None; got {type(settings).__name__}")
    _release()
    _executor = settings


def _release() -> None:
    global _kernel, _kernel_key
    close = getattr(_kernel, "close", None)
    if close is not None:
        close()
    _kernel, _kernel_key = None, None


def _local(engine: str | None, n: int) -> Kernel:
    if engine is not None:
        return NativeKernel(engine, threads=n)
    return local_kernel() if n == 1 else ParallelKernel(n)


def get_kernel() -> Kernel:
    """The active kernel (rebuilt when ``SHAPER_NATIVE``, the worker count or the executor
    changes)."""
    global _kernel, _kernel_key
    engine = native.chosen_engine()
    settings = executor()
    key = (engine, workers(), settings)
    if _kernel is None or key != _kernel_key:
        _release()
        if settings.kind == "ray":
            from .cluster import RayKernel

            # Small batches stay on this machine, on the kernel the local executor would use.
            _kernel = RayKernel(settings, _local(engine, key[1]))
        else:
            _kernel = _local(engine, key[1])
        _kernel_key = key
    return _kernel
