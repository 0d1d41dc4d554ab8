"""``shaper mpc run``: the n-party MPC engine's preprocessing, sampling and conversions, with
every party its own process (``--local N``, 2..16 on this machine) or one party of a job over a
parties file; prints each operation's rate and bytes per item (docs/mpc.md)."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from .common import command, group, party_options, security_of, security_option


def add_parser(subparsers: Any) -> None:
    from ..jobs.mpc import ACTIVE_OPS, OPS

    sub = group(subparsers, "mpc", "n-party MPC with OT preprocessing: triples, sampling, conversions",
                "n-party additive secret sharing with OT-based preprocessing (docs/mpc.md).")
    run = command(sub, "run", run_mpc, "make triples, sample and convert; report rates",
                  "Every party makes Beaver triples with OT extension, samples ternary and discrete-Gaussian "
                  "values over an RNS key basis and converts between share domains; prints items per second "
                  "and bytes sent per item for each operation.")
    party_options(run)
    security_option(run, "passive")
    run.set_defaults(active_engine=True)
    run.add_argument("--ops", help=f"comma-separated operations among: {', '.join(OPS)} (default: all; with "
                                   f"--security active: {', '.join(ACTIVE_OPS)})")
    run.add_argument("--count", type=int, default=100_000,
                     help="items per operation (triples and conversions to Z_2: a quarter of it; OT: 16 times in each role)")
    run.add_argument("--moduli", metavar="Q,...",
                     help="basis of odd moduli < 2^62 (default: nine primes of a degree-2^14 CKKS key, 435 bits)")


def _args(args: argparse.Namespace, security: str) -> tuple[list[str], tuple[int, ...]]:
    from ..kernels.modq import basis
    from ..jobs.mpc import ACTIVE_OPS, CKKS_14, OPS

    known = ACTIVE_OPS if security == "active" else OPS
    ops = [o.strip() for o in (args.ops or ",".join(known)).split(",") if o.strip()]
    bad = [o for o in ops if o not in known]
    if bad or not ops:
        raise ConfigError(f"unknown operation(s) {', '.join(bad) or '(none given)'} for the {security} engine; choose "
                          f"from {', '.join(known)}")
    if security == "active" and args.moduli:
        raise ConfigError("--moduli sets the passive engine's key basis (samplers and conversions); the active "
                          f"operations ({', '.join(ACTIVE_OPS)}) run mod 2^61 - 1: drop --moduli or use --security passive")
    if args.count < 64:
        raise ConfigError(f"--count must be at least 64, got {args.count}")
    try:
        mods = basis([int(q) for q in args.moduli.split(",")]) if args.moduli else CKKS_14
    except ValueError as exc:
        raise ConfigError(f"--moduli: {exc}") from None
    return ops, mods


def _print(name: str, results: dict) -> None:
    for op, r in results.items():
        extra = f", sample std {r['std']:.3f}" if "std" in r else ""
        print(f"{name}: {op:12s} {r['rate']:14,.0f} /s  {r['bytes_per_item']:10.1f} B sent per item  "
              f"({r['items']:,} in {r['seconds']:.2f} s{extra})", flush=True)


def run_mpc(args: argparse.Namespace) -> int:
    from ..jobs.mpc import mpc_job

    security = security_of(args, "passive")
    ops, mods = _args(args, security)
    if args.local is not None:
        from ..net import launch

        if not 2 <= args.local <= 16:
            raise ConfigError(f"--local takes 2..16 parties, got {args.local}")
        print(f"{args.local} parties as local processes over TLS, {security} engine; basis of {len(mods)} moduli "
              f"({sum(q.bit_length() for q in mods)} bits)", flush=True)
        results = launch(args.local, mpc_job, ops, args.count, mods, security=security)
        _print("party0", results[0])
        return 0
    if not args.parties or not args.me:
        raise ConfigError("pass --parties FILE and --me NAME (or --local N)")
    from ..net import Session

    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        _print(args.me, mpc_job(session, ops, args.count, mods, security=security))
        print(session.stats.table(f"traffic of {args.me}"))
    return 0
