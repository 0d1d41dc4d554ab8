"""Homomorphic AES-128 under BGV (GHS's packed style), single key, beside the seed's figures.

    python benchmarks/bgv.py --params ghs-53261 --threads 1 --json results/bgv.json
    python benchmarks/bgv.py --params test-4369 --quick

Runs :func:`shaper.jobs.bgv.aes_single_key` (key generation with the circuit's key-switching keys,
the encoded constants, encryption of the blocks and the 11 round keys, the 10 rounds, decryption,
the check against ``cryptography``'s AES) with the native pool at ``--threads`` threads, pinned to
as many CPUs (``--threads 1``: one core, the seed's setting). Reports each phase, the evaluation
per block, the levels the circuit used and the noise room left, the ring, chain and security
estimate, the CPU and the machine. The seed (GMPFHE, Appendix C.1, Table 8: m = 53261, 120
blocks, leveled) reports Eval 224 s on its machine, whose key generation was two-party.

Nothing here is compared across machines: the seed's figure is printed beside ours for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

SEED = {"source": "GMPFHE (Zhu, Ding, Huang), Appendix C.1, Table 8: two parties, LAN, m = 53261, 120 blocks, "
                  "leveled", "eval_s": 224.0, "keygen_s": 45573.0, "dec_s": 11.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="ghs-53261", help="BGV parameter set name (shaper.crypto.bgv.params.NAMES)")
    ap.add_argument("--blocks", type=int, default=None, help="blocks (default: all the slots hold)")
    ap.add_argument("--threads", type=int, default=1, help="native threads, pinned to as many CPUs (default 1)")
    ap.add_argument("--quick", action="store_true", help="the smallest test ring (test-257, one block), a smoke run")
    ap.add_argument("--json", metavar="PATH", help="write the figures here (merged by parameter set)")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from meta import write_json

    import shaper._native as nat
    from shaper.crypto.bgv import params as bgv_params
    from shaper.jobs.bgv import aes_single_key

    name = "test-257" if args.quick else args.params
    cpus = sorted(os.sched_getaffinity(0))[:max(1, args.threads)]
    os.sched_setaffinity(0, cpus)
    nat.set_threads(len(cpus))
    insecure = bgv_params.named(name).insecure
    print(f"AES-128 under BGV, {name}, {len(cpus)} thread(s) on CPU {cpus}", flush=True)
    t0 = time.perf_counter()
    report = aes_single_key(args.blocks, name, None, None, insecure,
                            progress=lambda phase, s: print(f"  {phase:44s} {s:9.2f} s", flush=True))
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {k: v for k, v in report.items() if k not in ("output", "expected")}
    evaluate = next(p["seconds"] for p in report["phases"] if p["name"].startswith("evaluate"))
    figures.update({"threads": len(cpus), "wall_s": round(wall, 2), "peak_rss_mib": round(peak),
                    "eval_s": evaluate, "eval_ms_per_block": round(evaluate / report["blocks"] * 1e3, 1),
                    "eval_vs_seed": round(evaluate / SEED["eval_s"], 3)})
    print(f"{report['blocks']} blocks, {'all right' if report['correct'] else 'WRONG'}; evaluation {evaluate:.1f} s "
          f"({figures['eval_ms_per_block']:.0f} ms per block; the seed: {SEED['eval_s']:.0f} s), "
          f"{report['levels_used']} levels, {report['capacity_bits']:.0f} bits left, peak RSS {peak:.0f} MiB; "
          f"security {report['security'] or 'not rated'}")
    if args.json:
        path = Path(args.json)
        runs = json.loads(path.read_text()).get("runs", {}) if path.is_file() else {}
        runs[f"{name}/{len(cpus)}T"] = figures  # the other sets' runs are kept
        meta = {"seed_paper": SEED, "statistic": "one run per parameter set and thread count",
                "phases": "shaper.jobs.bgv.aes_single_key (single key; AES checked against cryptography's AES)"}
        write_json(path, {"benchmark": "bgv", "meta": meta, "runs": runs}, default=str)
    return 0 if report["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
