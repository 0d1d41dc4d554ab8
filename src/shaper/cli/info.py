"""``shaper info``: version, kernel, worker count and CPU features."""

from __future__ import annotations

import argparse
import platform
from typing import Any

from .. import __version__
from .common import command


def add_parser(subparsers: Any) -> None:
    command(subparsers, "info", run_info, "version, kernel and CPU features",
            "Show the versions, the arithmetic kernel in use, the worker count and whether this CPU has "
            "AVX-512 IFMA.")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def run_info(args: argparse.Namespace) -> int:
    import gmpy2
    import numpy

    from ..kernels import executor, get_kernel, native, workers

    flags = _cpu_flags()
    print(f"shaper       {__version__}")
    print(f"python       {platform.python_version()} ({platform.machine()})")
    print(f"numpy        {numpy.__version__}")
    print(f"gmpy2        {gmpy2.version()} ({gmpy2.mp_version()})")
    settings = executor()
    # Only name the executor: building a Ray kernel would join the cluster.
    print(f"kernel       {get_kernel().name if settings.kind == 'local' else native.chosen_engine() or 'gmpy2'}")
    print(f"executor     {settings.describe()}")
    print(f"workers      {workers()}")
    print(f"avx512-ifma  {'yes' if 'avx512ifma' in flags else 'no'}")
    built = "built" if native.available() else "not built (install with a Rust toolchain)"
    print(f"native       {built}; SHAPER_NATIVE={native.mode()}")
    from ..kernels.rns import native_selected
    print(f"ckks kernels {'native RNS (Rust)' if native_selected() else 'numpy reference (slow; small N only)'}")
    return 0
