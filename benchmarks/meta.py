#!/usr/bin/env python
"""The machine block every benchmark writes into its JSON, with the same keys everywhere.

Each script in benchmarks/ writes its results with ``write_json(path, payload)``, which puts
``machine()`` under the top-level key ``"machine"`` next to the script's own keys (its run
settings stay in the script's ``"meta"``), so results from different machines and scripts
compare field by field. Run this file to see the block for this machine:

  python benchmarks/meta.py [--json PATH]

Keys (a value is None where this machine cannot tell):

  cpu          CPU model name (/proc/cpuinfo, else platform)
  cores        CPUs this process may run on (its affinity mask)
  cpu_count    CPUs the operating system reports
  memory_gib   physical memory
  avx512_ifma  the CPU has AVX-512 IFMA (the native Paillier/OU kernel's fast engine)
  vaes         the CPU has VAES (the native AES keystream of the 3-party engine)
  kernel       the kernel this process's settings select (shaper.kernels.get_kernel().name,
               e.g. native-ifma, gmpy2-parallel; with the Ray executor, its local kernel)
  native_mode  SHAPER_NATIVE (auto, ifma, portable, off)
  workers      kernel workers (SHAPER_WORKERS, else cores)
  executor     where big batches run (local, or the Ray cluster)
  python, numpy, shaper   versions
  git_commit   the checkout's commit (None outside a git checkout)
  git_dirty    tracked files under src/, native/ or benchmarks/ differ from that commit
  platform     platform.platform()
  date         when the block was taken, ISO 8601 in UTC

A benchmark may run its parties with other settings than its own process (ahe.py's children,
launched parties pinned to one worker): those record what they ran in the script's own keys.
Nothing here raises: a value that cannot be read is recorded as ``"unavailable: <why>"``, so a
long run is never lost to its metadata.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]

KEYS = ("cpu", "cores", "cpu_count", "memory_gib", "avx512_ifma", "vaes", "kernel", "native_mode", "workers",
        "executor", "python", "numpy", "shaper", "git_commit", "git_dirty", "platform", "date")


def cores() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} elsewhere)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    info = _cpuinfo()
    return info.get("model name") or info.get("Model") or platform.processor() or platform.machine()


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags (Linux: /proc/cpuinfo; macOS: sysctl), None where unknown."""
    info = _cpuinfo()
    if "flags" in info:
        return set(info["flags"].split())
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"],
                                 capture_output=True, text=True, timeout=10).stdout
            return {f.lower().replace(".", "_") for f in out.split()} or None
        except (OSError, subprocess.SubprocessError):
            return None
    return None


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _kernel() -> dict[str, Any]:
    from shaper.kernels import executor, get_kernel, native, workers

    settings = executor()
    if settings.kind == "local":
        name = get_kernel().name
    else:  # naming the Ray executor's local kernel must not join the cluster
        engine = native.chosen_engine()
        name = f"native-{engine}" if engine else ("gmpy2" if workers() == 1 else "gmpy2-parallel")
    return {"kernel": name, "native_mode": native.mode(), "workers": workers(), "executor": settings.describe()}


def _git() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "src", "native", "benchmarks")
    return {"git_commit": commit, "git_dirty": bool(changed)}


def _safely(fn: Callable[[], Any], *keys: str) -> dict[str, Any]:
    try:
        value = fn()
    except Exception as exc:  # metadata must never cost a benchmark its results
        why = f"unavailable: {type(exc).__name__}: {exc}"
        return {k: why for k in keys}
    return value if isinstance(value, dict) else {keys[0]: value}


def machine() -> dict[str, Any]:
    """This machine and checkout, under the fixed keys of :data:`KEYS`."""
    import numpy
    import shaper

    flags = cpu_flags()
    out: dict[str, Any] = {
        **_safely(cpu_model, "cpu"),
        "cores": cores(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "avx512_ifma": None if flags is None else "avx512ifma" in flags,
        "vaes": None if flags is None else "vaes" in flags,
        **_safely(_kernel, "kernel", "native_mode", "workers", "executor"),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "shaper": getattr(shaper, "__version__", None),
        **_safely(_git, "git_commit", "git_dirty"),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    return {k: out[k] for k in KEYS}


def write_json(path: str | os.PathLike, payload: dict, *, default: Callable[[Any], Any] | None = None) -> dict:
    """Write ``{"machine": machine(), **payload}`` to ``path`` (indented, whole or not at all:
    through a temporary file renamed into place); returns what was written."""
    if "machine" in payload:
        raise ValueError("the payload has its own 'machine' key; it belongs to benchmarks/meta.py")
    out = {"machine": machine(), **payload}
    text = json.dumps(out, indent=1, default=default) + "\n"
    target = Path(path)
    if target.parent != Path(""):
        target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, target)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="PATH", help="also write it as a benchmark JSON with no results")
    args = ap.parse_args()
    print(json.dumps(machine(), indent=1))
    if args.json:
        write_json(args.json, {})
    return 0


if __name__ == "__main__":
    sys.exit(main())


def load_sibling(name: str, as_name: str | None = None) -> Any:
    """Another benchmark script of this directory as a module, loaded by path (``ckks.py`` would
    otherwise read as shaper's CKKS): e.g. ``load_sibling("ckks")`` for its pinning and
    quiet-machine helpers."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(as_name or f"benchmarks_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
