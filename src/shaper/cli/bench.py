"""``shaper bench aes|ring``: three-party replicated sharing throughput on this machine. The
benchmark behind the README's figures, with published numbers next to ours, is
``python benchmarks/replicated.py``."""

from __future__ import annotations

import argparse
from typing import Any

from .common import HelpFormatter, command

AES_BLOCKS = 524288  # = shaper.demos.bench.AES_INSTANCES (not imported here: keeps `shaper --help` fast)


def add_parser(subparsers: Any) -> None:
    bench = subparsers.add_parser("bench", help="3PC throughput: AES-128 blocks/s or Z_2^64 products/s",
                                  formatter_class=HelpFormatter,
                                  description="Three-party replicated sharing throughput, three local processes "
                                              "over loopback TLS (full benchmark: python benchmarks/replicated.py).")
    bench.set_defaults(prog=bench.prog)
    what = bench.add_subparsers(dest="bench_command", required=True, metavar="WHAT")
    aes = command(what, "aes", run_aes, "AES-128 blocks per second (Bristol circuit, key schedule included)",
                  "Three local parties evaluate AES-128 on batches of random blocks (one warm-up batch, then "
                  "the timed ones; the best is reported); sampled blocks of every batch are checked against "
                  "the cryptography library.")
    aes.add_argument("--blocks", type=int, default=AES_BLOCKS, help="AES blocks per batch")
    aes.add_argument("--batches", type=int, default=3, help="timed batches after the warm-up (best reported)")
    aes.add_argument("--check", type=int, default=2048, metavar="N",
                     help="blocks per batch checked against the cryptography library (0: none)")
    aes.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    ring = command(what, "ring", run_ring, "Z_2^64 multiplications per second",
                   "Three local parties multiply two shared vectors of 64-bit integers element-wise (one "
                   "warm-up, then the timed batches; the best is reported); every product is checked against "
                   "numpy.")
    ring.add_argument("--count", type=int, default=4_000_000, help="products per batch")
    ring.add_argument("--batches", type=int, default=3, help="timed batches after the warm-up (best reported)")
    ring.add_argument("--json", metavar="PATH", help="also write the figures as JSON")


def run_aes(args: argparse.Namespace) -> int:
    from ..demos import bench

    bench.bench_aes(instances=args.blocks, batches=args.batches, check=args.check, json_path=args.json)
    return 0


def run_ring(args: argparse.Namespace) -> int:
    from ..demos import bench

    bench.bench_ring(n=args.count, batches=args.batches, json_path=args.json)
    return 0
