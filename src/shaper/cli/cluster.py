"""``shaper cluster check``: join the Ray cluster a party would use and measure it."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import command, key_bits_option


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser("cluster", help="check the Ray cluster a party runs its batches on",
                                  description="The Ray scale-out executor (docs/scale-out.md).")
    sub = group.add_subparsers(dest="action", required=True)
    p = command(sub, "check", run_check, "join a Ray cluster, list its actors and time them against this machine",
                "Join the Ray cluster at --address (or RAY_ADDRESS, or a private Ray instance here; a cluster on "
                "other machines only with Ray's TLS on, or --insecure), start the "
                "actors a party would use, show where they run and which kernel they use, and compare the "
                "encryption throughput of a batch on them with this machine's local executor (same "
                "ciphertexts required).")
    p.add_argument("--address", help="the cluster's address, e.g. 10.0.0.5:6379 or auto (default: RAY_ADDRESS, "
                                     "else a private Ray instance on this machine)")
    p.add_argument("--actors", type=int, help="actors to start (default: the cluster's CPUs / --cpus-per-actor)")
    p.add_argument("--cpus-per-actor", type=int, default=1, help="cores each actor reserves and its kernel uses")
    p.add_argument("--batch", type=int, default=4000, help="encryptions in the timed batch")
    p.add_argument("--insecure", action="store_true",
                   help="allow a cluster on other machines without Ray's TLS (RAY_USE_TLS=1 and its certificate "
                        "variables); only on a network the party owns (docs/scale-out.md)")
    key_bits_option(p, "Paillier key size of the timed batch")


def run_check(args: argparse.Namespace) -> int:
    from .. import kernels
    from ..crypto import paillier
    from ..crypto.prg import default_prg
    from ..kernels import ExecutorSettings

    if args.batch < 1:
        raise ValueError(f"--batch must be positive, got {args.batch}")
    settings = ExecutorSettings(kind="ray", address=args.address, actors=args.actors,
                                cpus_per_actor=args.cpus_per_actor, min_work_ms=0, insecure=args.insecure)
    pk, _ = paillier.keygen(args.key_bits)
    values = list(range(args.batch))
    exps = default_prg().exponent_bytes(args.batch, pk.exponent_bits)
    kernels.set_executor("local")
    local_kernel = kernels.get_kernel().name
    pk.raw_encrypt(values[:200], exps[:200])
    t = time.perf_counter()
    expected = pk.raw_encrypt(values, exps)
    local_s = time.perf_counter() - t
    print(f"joining {settings.describe()} ...", flush=True)
    t = time.perf_counter()
    kernels.set_executor(settings)
    try:
        kernel = kernels.get_kernel()
        joined = time.perf_counter() - t
        pool = kernel.pool_ray
        actors = pool.describe_actors()
        print(f"{len(actors)} actors ready in {joined:.1f} s:")
        hosts: dict[str, list[dict]] = {}
        for a in actors:
            hosts.setdefault(a["host"], []).append(a)
        for host, group in hosts.items():
            print(f"  {host}: {len(group)} actors ({group[0]['kernel']}), pids {', '.join(str(a['pid']) for a in group)}")
        t = time.perf_counter()
        for _ in range(20):
            pool.map(1, [("mulmod", ([3], [5], 7))])
        round_trip = (time.perf_counter() - t) / 20
        pk.raw_encrypt(values[: min(args.batch, 2000)], exps[: min(args.batch, 2000)])  # tables on every actor
        t = time.perf_counter()
        got = pk.raw_encrypt(values, exps)
        ray_s = time.perf_counter() - t
    finally:
        kernels.set_executor(None)
    same = got == expected
    print(f"per-task round trip  {round_trip * 1e3:.2f} ms")
    print(f"encryption, {args.key_bits}-bit, batch {args.batch:,}: local ({local_kernel}) {args.batch / local_s:,.0f}/s, "
          f"cluster {args.batch / ray_s:,.0f}/s ({local_s / ray_s:.2f}x); ciphertexts identical: {same}")
    if not same:
        raise RuntimeError("the cluster's ciphertexts differ from this machine's: the nodes run different shaper "
                           "versions or a broken kernel")
    return 0
