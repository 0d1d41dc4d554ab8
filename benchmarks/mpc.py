"""n-party MPC with OT preprocessing (GMPFHE's engine): OTs, triples, sampling and conversions.

Parties run as processes over loopback TLS 1.3 (``shaper.net.launch``), each pinned to one core
(4 parties share this machine's 2 cores: two per core), with the job of ``shaper mpc run``
(``shaper.jobs.mpc.mpc_job``): random OT extension, 61-bit and Z_2^64 Beaver triples, Z_2
triples, discrete-Gaussian and ternary samples over all nine limbs of a degree-2^14 CKKS key
basis, and the conversions Z_2 -> Z_q (into one 61-bit prime, and into all nine limbs), Z_3 -> Z_q (nine
limbs) and Z_q -> Z_2 (one 60-bit limb).
Revealed Gaussian and ternary samples are checked against their support. A shaped row runs two
parties at 40 Mbit/s and 40 ms.

The OT extension's consistency check (KOS / SoftSpoken, on by default) is measured on its own,
side by side in one run (``--ot-check both``, the default): two parties hold a checked and an
unchecked link set on one session and run random OTs on them alternately, ``--repeat`` times
each; the rows ``ot-checked`` and ``ot-unchecked`` give the median rates and the check's cost.

Passive against active security, side by side in one run (``--security both``; ``--only-security``
runs nothing else): two parties make 61-bit Beaver triples on the passive engine and on the active
one (MAC'd triples checked by sacrifice) alternately, ``--repeat`` times each, and report per engine
the median rate, the bytes and bits sent per triple per party, the party process's CPU seconds per
triple (``time.process_time``, every thread of it) and the active/passive ratios; then the active
engine's range-checked inputs (``range-40``: 2^14 entries in [-2^40, 2^40]) and its multiplications
of authenticated inputs, opened after the MAC check (``mul-61``).

    python benchmarks/mpc.py --json benchmarks/results/mpc.json --docs docs/mpc.md
    python benchmarks/mpc.py --quick
    python benchmarks/mpc.py --only-security --repeat 3 --json benchmarks/results/mpc_active.json

Published, next to ours: GMPFHE (Zhu, Ding, Huang), Table 2 (Gaussian sample: 1.62 ms for 2
parties, 2.45 ms for 4, LAN 2 Gbit/s, one 2.7 GHz core per party) and Table 4 (per 64-bit
modulus: Z_2 -> Z_q 222 / 574 us, Z_q -> bits 549 / 1067 us, Z_3 -> Z_q 123 / 351 us for 2 / 4
parties); IKNP extension: libOTe 2^24 OTs in 0.6 s (~28 M/s, one thread), emp-ot ~73 M/s;
MP-SPDZ triple rates are not published: users report MASCOT ~7.7 k/s (issue #857) and "around
20 k/s" for semi-honest (issue #652); both unverified, listed for scale only.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from typing import Any

# one BLAS thread: OpenBLAS's idle worker spins on the other core, where the other party runs,
# and its spinning counts in this process's CPU time (set before numpy starts it)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from meta import write_json

from shaper.jobs.mpc import CKKS_14, OPS, mpc_job
from shaper.net import NetConfig, launch, parse_duration, parse_rate

L = len(CKKS_14)
PAPER = {  # items/s from the paper's per-item times (LAN); its Table 4 is per 64-bit modulus, so L limbs cost L times
    2: {"gaussian": 1e3 / 1.62, "b2a-61": 1e6 / 222, "b2a": 1e6 / (222 * L), "a2b": 1e6 / 549,
        "t2a": 1e6 / (123 * L)},
    4: {"gaussian": 1e3 / 2.45, "b2a-61": 1e6 / 574, "b2a": 1e6 / (574 * L), "a2b": 1e6 / 1067,
        "t2a": 1e6 / (351 * L)},
}
TARGET = {"ot": 30e6, "triples-61": 200e3, "bit-triples": 15e6, "gaussian": 50e3, "b2a-61": 5e6}


def pinned_job(session: Any, ops: list[str], count: int, repeat: int) -> dict:
    """mpc_job on one core: party i on CPU i mod (CPUs of this process)."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[session.index % len(cpus)]})
    return mpc_job(session, ops, count, CKKS_14, repeat=repeat)


def _random_ots(session: Any, links: Any, count: int) -> int:
    """Random OTs on ``links`` around the ring, ``count`` in each role, as ``shaper mpc run``'s
    ``ot`` operation runs them (fused extension + hash into reused buffers, one chunk at a time).
    Returns the bytes this party sent."""
    from shaper.protocols.ot import CHUNK_OTS

    me, n = session.index, session.n
    nxt, prev = (me + 1) % n, (me - 1) % n
    tx, rx = links._links[nxt], links._links[prev]
    keys = np.empty((CHUNK_OTS, 16), np.uint8)
    pair = (np.empty((CHUNK_OTS, 16), np.uint8), np.empty((CHUNK_OTS, 16), np.uint8))
    done = sent = 0
    while done < count:
        m = min(CHUNK_OTS, count - done)
        choices = np.frombuffer(os.urandom((m + 7) // 8), np.uint8)
        u, _ = rx.rx.extend_hash(choices, m, rx.domain_rx, out=keys[:m])
        sent += len(u)
        session.send(prev, u, f"{links.label}-bench")
        tx.tx.extend_hash(session.recv_bytes(nxt, f"{links.label}-bench"), m, tx.domain_tx,
                          out=(pair[0][:m], pair[1][:m]))
        done += m
    return sent


def ot_check_job(session: Any, count: int, repeat: int, variants: tuple[bool, ...]) -> dict:
    """Random-OT rates (both roles, per party) with the consistency check on and off, on one
    core, the variants alternating run by run so that both see the same machine."""
    from shaper.protocols.ot import OtLinks

    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[session.index % len(cpus)]})
    peers = [p for p in range(session.n) if p != session.index]
    links = {check: OtLinks(session, check=check, label="ot-checked" if check else "ot-unchecked")
             for check in variants}
    for lk in links.values():
        lk.ensure(peers)  # base OTs outside the timings
        _random_ots(session, lk, 1 << 16)  # warm-up: buffers, page faults
    runs: dict[bool, list[float]] = {check: [] for check in variants}
    sent: dict[bool, int] = {}
    for _ in range(repeat):
        for check, lk in links.items():
            session.barrier(f"ot-check-{check}")
            t0 = time.perf_counter()
            sent[check] = _random_ots(session, lk, count)
            session.barrier(f"ot-check-{check}-end")
            runs[check].append(2 * count / (time.perf_counter() - t0))
    return {("ot-checked" if check else "ot-unchecked"): {"runs": rates, "bytes_per_item": sent[check] / (2 * count)}
            for check, rates in runs.items()}


def run_ot_check(count: int, repeat: int, variants: tuple[bool, ...]) -> dict:
    """Two parties over loopback TLS: the median rate of each variant and every run's."""
    results = launch(2, ot_check_job, count, repeat, variants, config=NetConfig(timeout=3600), workers_per_party=1,
                     timeout=7200)
    out = {}
    for op in results[0]:
        runs = [min(r[op]["runs"][i] for r in results) for i in range(repeat)]  # the slower party's rate per run
        out[op] = {"items": 2 * count, "rate": round(float(np.median(runs)), 1), "runs": [round(r, 1) for r in runs],
                   "bytes_per_item_per_party": round(float(np.mean([r[op]["bytes_per_item"] for r in results])), 3)}
    if len(out) == 2:
        on, off = out["ot-checked"]["rate"], out["ot-unchecked"]["rate"]
        out["ot-checked"]["cost_vs_unchecked"] = round(1 - on / off, 4)
    return out


def _pin(session: Any) -> None:
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[session.index % len(cpus)]})


def _cpu_timed(session: Any, op: str, count: int, security: str, check: bool) -> dict:
    """One operation of mpc_job on one engine, with the CPU seconds of this party's process
    (every thread of it: the native OT code's too) spent in the call."""
    c0 = time.process_time()
    row = mpc_job(session, [op], count, CKKS_14, check=check, security=security)[op]
    row["cpu_seconds"] = time.process_time() - c0
    return row


def security_job(session: Any, count: int, repeat: int, engines: tuple[str, ...], range_count: int,
                 mul_count: int, conversion_count: int = 0, triple_count: int | None = None) -> dict:
    """Passive against active triples on one core, the engines alternating run by run so that
    both see the same machine; then the active engine's range-checked inputs and products."""
    _pin(session)
    for security in engines:  # warm-up, checked: base OTs, imports, buffers; outside the timings
        mpc_job(session, ["triples-61"], 1 << 14, CKKS_14, check=True, security=security)
    both = ("triples-61", "triples-64", "bit-triples", "cmp-20")
    out: dict[str, Any] = {f"{op}/{security}": [] for op in both for security in engines}
    for _ in range(repeat):
        for op in both:
            for security in engines:
                n = triple_count if op == "triples-61" and triple_count else count // 4 if op == "triples-64" else count
                out[f"{op}/{security}"].append(_cpu_timed(session, op, n, security, check=False))
    if "active" in engines:
        out["range-40/active"] = [_cpu_timed(session, "range-40", range_count, "active", check=True)]
        out["mul-61/active"] = [_cpu_timed(session, "mul-61", mul_count, "active", check=True)]
    if conversion_count:  # once each (the active runs take minutes), the engines alternating
        for op in ("gaussian", "a2b"):
            for security in engines:
                out[f"{op}/{security}"] = [_cpu_timed(session, op, conversion_count, security, check=False)]
    return out


def run_security(parties: int, count: int, repeat: int, engines: tuple[str, ...], range_entries: int,
                 mul_products: int, conversions: int = 0, triples: int | None = None) -> dict:
    """Loopback TLS, one core per party: per engine and operation the median over runs of the
    slowest party's time, bytes sent per item per party (mean over parties) and CPU seconds per
    item per party (each party's median, then the mean over parties)."""
    results = launch(parties, security_job, 4 * count, repeat, engines, 8 * range_entries, 4 * mul_products,
                     4 * conversions, 4 * (triples or count), config=NetConfig(timeout=3600), workers_per_party=1,
                     timeout=7200)
    out: dict[str, Any] = {}
    for key in results[0]:
        runs = [r[key] for r in results]  # [party][run]
        items = runs[0][0]["items"]
        seconds = [max(p[i]["seconds"] for p in runs) for i in range(len(runs[0]))]
        wall = float(np.median(seconds))
        bpi = float(np.mean([p[i]["bytes_per_item"] for p in runs for i in range(len(p))]))
        cpu = [float(np.median([run["cpu_seconds"] for run in p])) / items for p in runs]
        out[key] = {"items": items, "seconds": round(wall, 4), "rate": round(items / wall, 1),
                    "runs": [round(items / x, 1) for x in seconds],
                    "bytes_per_item_per_party": round(bpi, 1), "bits_per_item_per_party": round(8 * bpi, 1),
                    "cpu_us_per_item_per_party": round(1e6 * float(np.mean(cpu)), 3),
                    "cpu_us_per_item_by_party": [round(1e6 * c, 3) for c in cpu],
                    # one-sided operations (a range-checked input: the owner sends the commitments
                    # and proofs) load one party more than the mean says
                    "bytes_per_item_by_party": [round(float(np.mean([r["bytes_per_item"] for r in party])), 1)
                                                for party in runs]}
    if len(engines) == 2:
        for op, key in (("triples-61", "active_over_passive"), ("triples-64", "active_over_passive_z2k"),
                        ("bit-triples", "active_over_passive_bits"),
                        ("cmp-20", "active_over_passive_cmp"), ("gaussian", "active_over_passive_gaussian"),
                        ("a2b", "active_over_passive_a2b")):
            if f"{op}/active" not in out:
                continue
            p, a = out[f"{op}/passive"], out[f"{op}/active"]
            out[key] = {
                "time": round(p["rate"] / a["rate"], 2),
                "bytes": round(a["bytes_per_item_per_party"] / p["bytes_per_item_per_party"], 2),
                "cpu": round(a["cpu_us_per_item_per_party"] / p["cpu_us_per_item_per_party"], 2)}
    return out


SECURITY_LABELS = {"triples-61/passive": "triples mod 2^61-1, passive", "triples-61/active": "triples mod 2^61-1, active",
                   "triples-64/passive": "triples over Z_2^64, passive",
                   "triples-64/active": "triples over Z_2^64 (SPDZ2k), active",
                   "range-40/active": "range-checked inputs (40 bits), active",
                   "mul-61/active": "products of inputs, opened, active",
                   "bit-triples/passive": "AND triples, passive", "bit-triples/active": "AND triples, active",
                   "cmp-20/passive": "20-bit comparisons, passive", "cmp-20/active": "20-bit comparisons, active",
                   "gaussian/passive": "Gaussian samples (9 limbs), passive",
                   "gaussian/active": "Gaussian samples (9 limbs), active",
                   "a2b/passive": "Z_q -> Z_2 (60-bit q), passive", "a2b/active": "Z_q -> Z_2 (60-bit q), active"}


def print_security(n: int, res: dict) -> None:
    print(f"\npassive vs active security, {n} parties, one core per party, loopback TLS "
          "(rate: the slowest party, median of runs; bytes, bits and CPU: per item per party)")
    print(f"{'operation':40s} {'items':>8s} {'s':>8s} {'items/s':>10s} {'B/item':>10s} {'bit/item':>10s} "
          f"{'CPU us/item':>12s}  runs /s")
    for key, r in res.items():
        if key.startswith("active_over_passive"):
            continue
        print(f"{SECURITY_LABELS.get(key, key):40s} {r['items']:8,d} {r['seconds']:8.3f} {r['rate']:10,.0f} "
              f"{r['bytes_per_item_per_party']:10,.1f} {r['bits_per_item_per_party']:10,.0f} "
              f"{r['cpu_us_per_item_per_party']:12,.2f}  {', '.join(f'{x:,.0f}' for x in r['runs'])}  "
              f"B/item by party: {', '.join(f'{b:,.0f}' for b in r['bytes_per_item_by_party'])}")
    for key, what in (("active_over_passive", "triple mod 2^61-1"), ("active_over_passive_z2k", "triple over Z_2^64"),
                      ("active_over_passive_bits", "AND triple"),
                      ("active_over_passive_cmp", "20-bit comparison"), ("active_over_passive_gaussian", "Gaussian sample"),
                      ("active_over_passive_a2b", "Z_q -> Z_2")):
        if key in res:
            x = res[key]
            print(f"active / passive per {what}: time x{x['time']}, bytes x{x['bytes']}, CPU x{x['cpu']}")


def run(parties: int, ops: list[str], count: int, config: NetConfig, repeat: int = 1) -> dict:
    results = launch(parties, pinned_job, ops, count, repeat, config=config, workers_per_party=1, timeout=7200)
    out = {}
    for op in ops:
        rows = [r[op] for r in results]
        wall = max(r["seconds"] for r in rows)
        items = rows[0]["items"]
        out[op] = {"items": items, "seconds": round(wall, 3), "rate": round(items / wall, 1),
                   "bytes_per_item_per_party": round(sum(r["bytes_per_item"] for r in rows) / parties, 1)}
        if "runs" in rows[0]:  # the slowest party's rate in each run
            out[op]["runs"] = [round(min(r["runs"][i] for r in rows), 1) for i in range(len(rows[0]["runs"]))]
        if "std" in rows[0]:
            out[op]["sample_std"] = round(rows[0]["std"], 4)
    return out


LABELS = {"ot": "random OT per party, both roles (4 B per OT received)",
          "ot-checked": "random OT, consistency check on (alternating runs)",
          "ot-unchecked": "random OT, consistency check off (alternating runs)", "triples-61": "Beaver triples mod 2^61 − 1",
          "triples-64": "Beaver triples Z_2^64", "bit-triples": "Z_2 triples (ANDs)",
          "gaussian": "Gaussian samples, 9 limbs", "ternary": "ternary samples, 9 limbs",
          "b2a-61": "Z_2 → Z_q, one 61-bit q", "b2a": "Z_2 → Z_q, 9 limbs", "t2a": "Z_3 → Z_q, 9 limbs",
          "a2b": "Z_q → Z_2, 60-bit q", "cmp-20": "comparisons of private 20-bit integers"}


def docs_table(rows: dict, count: int) -> str:
    """The table of docs/mpc.md (between its bench markers) from this run's rows."""
    shaped = next((k for k in rows if "mbit" in k), None)
    cols = [k for k in ("2 parties", "4 parties") if k in rows] + ([shaped] if shaped else [])
    out = ["| operation | " + " | ".join(f"{c} /s" for c in cols) + " | bytes per item per party ("
           + " / ".join(c.split()[0] for c in cols[:2]) + ") | GMPFHE 2 / 4 parties /s |",
           "|---|" + "---:|" * (len(cols) + 2)]
    for op in rows[cols[0]]:
        rates = " | ".join(f"{rows[c][op]['rate']:,.0f}" if op in rows[c] else "–" for c in cols)
        sizes = " / ".join(f"{rows[c][op]['bytes_per_item_per_party']:,.0f}" for c in cols[:2] if op in rows[c])
        paper = " / ".join(f"{PAPER[n][op]:,.0f}" for n in (2, 4) if op in PAPER[n]) or "–"
        out.append(f"| {LABELS.get(op, op)} | {rates} | {sizes} | {paper} |")
    cpu = platform.processor() or platform.machine()
    out.append(f"\nOne core per party (4 parties: two per core of this {os.cpu_count()}-CPU {cpu} machine); "
               "2 parties: the median of three runs (every run in benchmarks/results/mpc.json); "
               f"{count:,} items per operation (triples and Z_q → Z_2: {count // 4:,}; OT: {16 * count:,} per role); "
               "GMPFHE's Z_2 → Z_q and Z_3 → Z_q times are per 64-bit modulus, so its 9-limb rates are a ninth "
               "of them. Generated by `python benchmarks/mpc.py --docs docs/mpc.md`.")
    return "\n".join(out)


def write_docs(path: str, table: str) -> None:
    text = open(path).read()
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{path} has no {begin} ... {end} block")
    head, rest = text.split(begin, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + table + "\n" + end + rest.split(end, 1)[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=400_000, help="items per operation (see shaper mpc run --count)")
    ap.add_argument("--parties", default="2,4", help="party counts of the unshaped runs")
    ap.add_argument("--bandwidth", default="40mbit")
    ap.add_argument("--latency", default="40ms")
    ap.add_argument("--shaped-count", type=int, default=20_000)
    ap.add_argument("--no-shaping", action="store_true")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per operation for 2 parties (the median is reported, every run's rate in the JSON)")
    ap.add_argument("--ot-check", choices=("both", "on", "off", "skip"), default="both",
                    help="the OT consistency check's cost: random OTs with the check on and off side by side "
                         "(both), one of them, or neither")
    ap.add_argument("--ot-count", type=int, default=1 << 23, help="random OTs per role per run for --ot-check")
    ap.add_argument("--only-ot-check", action="store_true", help="measure the consistency check's cost only")
    ap.add_argument("--security", choices=("passive", "active", "both"), default=None,
                    help="passive (default): the passive engine's table only; both: also the passive-vs-active "
                         "comparison (triples on both engines alternately, then the active range-40 and mul-61); "
                         "active: also the active engine's rows of it alone (default with --only-security: both)")
    ap.add_argument("--only-security", action="store_true", help="run the passive-vs-active comparison only")
    ap.add_argument("--security-parties", default="2", help="party counts of the comparison (e.g. 2,4)")
    ap.add_argument("--security-triples", type=int, default=400_000,
                    help="field triples per run in the comparison (the active engine's silent-VOLE pool makes "
                         "its first run's base by COPE, about 80 ms a party, then takes it from its last run: "
                         "a long job's rate needs several runs of 619,669 values, five per triple)")
    ap.add_argument("--range-entries", type=int, default=1 << 14, help="range-checked inputs (range-40) per run")
    ap.add_argument("--conversions", type=int, default=1 << 16,
                    help="Gaussian samples and Z_q -> Z_2 conversions per engine in the comparison (0: skip)")
    ap.add_argument("--quick", action="store_true", help="small counts, a smoke test")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--docs", metavar="PATH", help="rewrite the bench table of this markdown file (docs/mpc.md)")
    args = ap.parse_args()
    if args.quick:
        args.count, args.shaped_count, args.repeat, args.ot_count = 20_000, 4_000, 1, 1 << 18
        args.range_entries, args.conversions, args.security_triples = 1 << 10, 1 << 9, 5_000
    if args.security is None:
        args.security = "both" if args.only_security else "passive"
    ops = list(OPS)
    rows: dict[str, Any] = {}
    check_rows: dict[str, Any] = {}
    security_rows: dict[str, Any] = {}
    if args.security != "passive":
        engines = ("passive", "active") if args.security == "both" else ("active",)
        for n in (int(p) for p in args.security_parties.split(",")):
            print(f"-- {n} parties, passive vs active security ...", file=sys.stderr, flush=True)
            security_rows[f"{n} parties"] = res = run_security(n, args.count // 4, args.repeat, engines,
                                                                args.range_entries, args.count // 4,
                                                                args.conversions if len(engines) == 2 else 0,
                                                                args.security_triples)
            print_security(n, res)
    if args.only_security:
        if args.json:
            write_json(args.json, {"meta": {"transport": "loopback TLS 1.3", "cores_per_party": 1,
                                            "triples_per_run": args.security_triples, "repeat": args.repeat,
                                            "range_entries": args.range_entries, "products": args.count // 4,
                                            "conversions": args.conversions,
                                            "cpu_measure": "time.process_time() of each party process around the operation"},
                                   "security": security_rows})
            print(f"written to {args.json}", file=sys.stderr)
        return 0
    if args.ot_check != "skip":
        variants = {"both": (True, False), "on": (True,), "off": (False,)}[args.ot_check]
        print("-- 2 parties, OT with and without the consistency check ...", file=sys.stderr, flush=True)
        check_rows = run_ot_check(args.ot_count, max(args.repeat, 3 if args.ot_check == "both" else 1), variants)
        for op, r in check_rows.items():
            print(f"{op:14s} {r['rate']:14,.0f} OT/s (runs: {', '.join(f'{x:,.0f}' for x in r['runs'])})")
        if "cost_vs_unchecked" in check_rows.get("ot-checked", {}):
            print(f"the consistency check costs {100 * check_rows['ot-checked']['cost_vs_unchecked']:.1f} % of the "
                  "random-OT rate (median of alternating runs)")
    if args.only_ot_check:
        if args.json:
            write_json(args.json, {"meta": {"transport": "loopback TLS 1.3", "ot_count": args.ot_count},
                                   "results": {"ot-check": check_rows}})
        return 0
    for n in (int(p) for p in args.parties.split(",")):
        print(f"-- {n} parties, loopback TLS ...", file=sys.stderr, flush=True)
        rows[f"{n} parties"] = run(n, ops, args.count, NetConfig(timeout=3600), args.repeat if n == 2 else 1)
    if not args.no_shaping:
        label = f"2 parties, {args.bandwidth}/{args.latency}"
        print(f"-- {label} ...", file=sys.stderr, flush=True)
        shaped = NetConfig(bandwidth=parse_rate(args.bandwidth), latency=parse_duration(args.latency), timeout=3600)
        rows[label] = run(2, ops, args.shaped_count, shaped)
    if check_rows:
        rows.setdefault("2 parties", {}).update(check_rows)

    print(f"\nn-party MPC, one core per party (this machine: {os.cpu_count()} CPUs), loopback TLS; "
          f"basis of {len(CKKS_14)} primes ({sum(q.bit_length() for q in CKKS_14)} bits)")
    print(f"{'operation':12s} {'setting':>28s} {'items/s':>14s} {'B/item/party':>13s} {'paper /s':>10s} "
          f"{'x paper':>8s} {'target':>10s}")
    for label, res in rows.items():
        n = int(label.split()[0])
        for op, r in res.items():
            paper = PAPER.get(n, {}).get(op) if "mbit" not in label else None
            target = TARGET.get(op) if label == "2 parties" else None
            print(f"{op:12s} {label:>28s} {r['rate']:14,.0f} {r['bytes_per_item_per_party']:13,.1f} "
                  f"{paper or float('nan'):10,.0f} {(r['rate'] / paper) if paper else float('nan'):8.0f} "
                  f"{target or float('nan'):10,.0f}")
    if args.json:
        meta = {"cores_per_party": 1, "transport": "loopback TLS 1.3", "count": args.count,
                "basis_bits": [q.bit_length() for q in CKKS_14], "paper": PAPER, "targets": TARGET}
        payload = {"meta": meta, "results": rows}
        if security_rows:
            payload["security"] = security_rows
        write_json(args.json, payload)
        print(f"written to {args.json}", file=sys.stderr)
    if args.docs:
        write_docs(args.docs, docs_table(rows, args.count))
        print(f"table written to {args.docs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
