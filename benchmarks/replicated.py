"""Three-party replicated sharing benchmark (Araki et al.): AES-128 blocks/s and Z_2^64 products/s.

Three parties run as separate processes on this machine over loopback TLS 1.3 (``shaper.net``),
exactly what ``shaper bench aes`` and ``shaper bench ring`` do; this script runs both, adds the
same AES run over plain TCP (``insecure``, to show what TLS costs on a shared 2-core box) and puts
the published figures next to ours. Every AES batch is checked against the ``cryptography``
library on sampled blocks; every product against numpy.

    python benchmarks/replicated.py --json replicated.json
    python benchmarks/replicated.py --quick           # small batches, smoke test

Published (Araki et al., CCS 2016; ``../shared/research/araki.md``): 1.32 M AES/s on three
20-core servers with a 10 Gbit/s LAN, about 100 k AES/s per core, 5440 ANDs per AES (no key
schedule); the Bristol circuit used here has 6400 ANDs (key schedule included).
"""

from __future__ import annotations

import argparse
import json
import os
import platform

from shaper.demos import circuits
from shaper.net import NetConfig, launch


def _aes_plain_tcp(instances: int, batches: int) -> float:
    res = launch(3, circuits._aes_job, instances, batches, 0, timeout=1800, config=NetConfig(insecure=True))
    best = min(max(r["times"][b] for r in res) for b in range(batches))
    return instances / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=circuits.AES_INSTANCES)
    ap.add_argument("--products", type=int, default=4_000_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    blocks = 4096 if args.quick else args.blocks
    products = 100_000 if args.quick else args.products
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; 3 parties as processes, loopback")
    aes = circuits.bench_aes(instances=blocks, batches=args.batches)
    ring = circuits.bench_ring(n=products, batches=args.batches)
    plain = _aes_plain_tcp(blocks, args.batches)
    print(f"AES-128 over plain TCP (no TLS, reference only): {plain:,.0f} blocks/s")
    per_core = aes["aes_per_s"] / (os.cpu_count() or 1)
    print(f"per core: {per_core:,.0f} AES/s (6400 ANDs) vs Araki et al. ~100,000 AES/s (5440 ANDs) "
          f"and 1.32 M / 60 cores = 22,000 per core on their cluster")
    if args.json:
        out = {"aes_tls": aes, "ring_tls": ring, "aes_plain_tcp_per_s": round(plain),
               "published": {"araki_ccs16_aes_per_s": 1_320_000, "araki_cores": 60, "araki_and_per_aes": 5440}}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
