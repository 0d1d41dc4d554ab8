#!/usr/bin/env python3
"""One Python parser harness under atheris (coverage-guided, libFuzzer flags and output):

    python fuzz/python_fuzz.py <target> [corpus dirs] [-max_total_time=S -timeout=S ...]

<target> is a name from tests/fuzz/targets.py (`fuzz/run --list` shows them as py_<name>). The
process's address space is capped (RLIMIT_AS, 4 GiB by default, SHAPER_FUZZ_AS_GIB): an input that
makes a parser allocate more fails with MemoryError, a finding like any other unexpected
exception. Without atheris (or with -mutate_only=1) it mutates the seeds at random for
-max_total_time seconds instead and prints the same summary lines (no coverage).
"""

from __future__ import annotations

import os
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")


def cap_memory() -> None:
    gib = float(os.environ.get("SHAPER_FUZZ_AS_GIB", "4"))
    limit = int(gib * (1 << 30))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    buf = bytearray(rng.choice(seeds)) if seeds and rng.random() < 0.9 else bytearray(rng.randbytes(rng.randrange(64)))
    for _ in range(rng.randrange(1, 8)):
        op, pos = rng.randrange(6), rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[pos % len(buf)] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[pos % len(buf)] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:
            buf[pos:pos] = rng.randbytes(rng.randrange(1, 9))
        elif op == 3:
            del buf[pos:pos + rng.randrange(1, 17)]
        elif op == 4:
            del buf[pos:]
        else:
            v = rng.choice([0, 1, 2**15, 2**16 - 1, 2**30, 2**31 - 1, 2**32 - 1, 2**63, 2**64 - 1])
            buf[pos:pos + 8] = v.to_bytes(8, "little")
    return bytes(buf)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    name, rest = sys.argv[1], sys.argv[2:]
    flags = dict(a[1:].split("=", 1) for a in rest if a.startswith("-") and "=" in a)
    try:
        import atheris
    except ImportError:
        atheris = None
    if atheris is None or flags.get("mutate_only") == "1":
        from tests.fuzz.known import known
        from tests.fuzz.targets import TARGETS

        target = TARGETS[name]
        seeds = target.seeds()
        cap_memory()
        rng = random.Random(int(flags.get("seed", "1")))
        budget = float(flags.get("max_total_time", "60"))
        start, n = time.monotonic(), 0
        while time.monotonic() - start < budget:
            try:
                target.check(mutate(rng, seeds))  # an unexpected exception ends the run with its traceback
            except Exception as exc:
                if not known(name, exc):  # an open finding (tests/fuzz/known.py) is not reported again
                    raise
            n += 1
        took = time.monotonic() - start
        print(f"#{n}\tDONE   cov: 0 ft: 0 corp: {len(seeds)}/0b exec/s: {n / took:.0f}")
        print(f"stat::number_of_executed_units: {n}")
        return

    with atheris.instrument_imports(include=["shaper"]):
        from tests.fuzz.known import known
        from tests.fuzz.targets import TARGETS

        target = TARGETS[name]
        for s in target.seeds():  # imports every module the parser uses, instrumented
            target.check(s)
    cap_memory()

    def one_input(data: bytes) -> None:
        try:
            target.check(data)
        except Exception as exc:
            if not known(name, exc):  # an open finding (tests/fuzz/known.py) is not reported again
                raise

    atheris.Setup([sys.argv[0]] + rest, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
