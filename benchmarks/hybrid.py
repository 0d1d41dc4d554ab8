#!/usr/bin/env python
"""Two-party hybrid protocols benchmark: SHAPER Table 5 rows, per value.

Two parties run as separate processes over loopback TLS (``shaper.net.launch``), each with one
kernel worker (its own core on a 2-core machine), so ``time.process_time()`` in each party counts
all of its CPU work. Rows:

  s2h               shares -> ciphertext (key owner encrypts with CRT, the other adds its share)
  h2s_packed        ciphertext -> shares, 64-bit values, σ = 40, packed (W = 106)
  h2s_unpacked      the same without packing
  trigen            Beaver triple generation with Paillier, per Z_2^64 triple (packed H2S)
  beaver            online multiplications per second with triples ready
  sparse_matvec     X (rows x cols, density) at one party times a shared vector, result shared

For each: CPU µs per value of both parties together and of each party, wall time, bytes on the
wire per value, and the pipelining overlap where a conversion is chunked. Every row runs without
shaping and with ``--bandwidth``/``--latency`` (default SHAPER's WAN, 40 Mbit/s and 40 ms).

  python benchmarks/hybrid.py --json hybrid.json
  python benchmarks/hybrid.py --quick            # small sizes, smoke test
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from meta import write_json
from shaper.net import NetConfig, launch, parse_duration, parse_rate
from shaper.protocols import Hybrid2PC, InsecureDealer, StoreOnly, TriGen
from shaper.protocols.hybrid import h2s, s2h
from shaper.protocols.hybrid import trigen

SOURCES = {"dealer": InsecureDealer, "store": StoreOnly, "trigen": TriGen}


def _start(session, key_bits, source="store"):
    warnings.simplefilter("ignore")
    ctx = Hybrid2PC.setup(session, key_bits=key_bits, triple_source=SOURCES[source]())
    ctx.public_key.encrypt([0])  # build fixed-base tables outside the timed part
    ctx.peer_key.encrypt([0])
    ctx.private_key.encrypt([0])
    session.barrier("start")
    return ctx


def _measure(session, ctx, fn):
    stats0 = session.stats.as_dict()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    extra = fn()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    session.barrier("end")
    stats1 = session.stats.as_dict()
    out = {"cpu": cpu, "wall": wall, "bytes_sent": stats1["bytes_sent"] - stats0["bytes_sent"]}
    if ctx.last_pipeline is not None:
        out["pipeline"] = ctx.last_pipeline.as_dict()
    if isinstance(extra, dict):
        out.update(extra)
    return out


def job_s2h(session, key_bits, count):
    ctx = _start(session, key_bits)
    x = ctx.share(np.arange(count, dtype=np.int64), owner=1, frac_bits=0)
    return _measure(session, ctx, lambda: s2h(ctx, x, key_owner=0))


def job_h2s(session, key_bits, count, pack):
    ctx = _start(session, key_bits)
    if ctx.me == 1:
        rng_vals = ctx.prg.uint64(count).view(np.int64)  # full 64-bit values
        enc = ctx.peer_key.encrypt(rng_vals)
        session.barrier("ready")
        return _measure(session, ctx, lambda: h2s(ctx, enc, holder=1, value_bits=64, pack=pack))
    session.barrier("ready")
    return _measure(session, ctx, lambda: h2s(ctx, None, holder=1, pack=pack))


def job_trigen(session, key_bits, count):
    ctx = _start(session, key_bits)
    return _measure(session, ctx, lambda: {"triples": len(trigen(ctx, count, chunk_size=512)[0])})


def job_beaver(session, key_bits, count, repeats):
    ctx = _start(session, key_bits, source="dealer")
    x = ctx.share(np.ones(count), owner=0)
    y = ctx.share(np.ones(count), owner=1)
    ctx.triples.add(*ctx.triple_source.elementwise(ctx, count * repeats))  # ready before timing (dealer, online phase only)

    def run():
        for _ in range(repeats):
            ctx.mul(x, y)

    return _measure(session, ctx, run)


def job_sparse(session, key_bits, rows, cols, density):
    ctx = _start(session, key_bits)
    nnz = int(rows * cols * density)
    matrix = None
    if ctx.me == 0:
        import scipy.sparse as sp

        r = (ctx.prg.uint64(nnz) % np.uint64(rows)).astype(np.int64)
        c = (ctx.prg.uint64(nnz) % np.uint64(cols)).astype(np.int64)
        matrix = sp.csr_matrix((np.ones(nnz, dtype=np.int64), (r, c)), shape=(rows, cols))
        matrix.data[:] = 1
    y = ctx.share(np.arange(cols) % 1000, owner=1, frac_bits=0)
    session.barrier("ready")
    out = _measure(session, ctx, lambda: ctx.sparse_matvec(matrix, y, owner=0))
    out["nnz"] = int(matrix.nnz) if matrix is not None else None
    return out


def summarise(name, results, count, unit="value"):
    p0, p1 = results
    cpu = p0["cpu"] + p1["cpu"]
    row = {
        "protocol": name, "count": count, "unit": unit,
        "cpu_us_per_value": round(cpu / count * 1e6, 2),
        "cpu_us_per_value_party0": round(p0["cpu"] / count * 1e6, 2),
        "cpu_us_per_value_party1": round(p1["cpu"] / count * 1e6, 2),
        "wall_s": round(max(p0["wall"], p1["wall"]), 3),
        "bytes_per_value": round((p0["bytes_sent"] + p1["bytes_sent"]) / count, 1),
    }
    pipe = p0.get("pipeline") or p1.get("pipeline")
    if pipe:
        row["pipeline_overlap_fraction"] = pipe["overlap_fraction"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--count", type=int, default=2000, help="values per conversion row")
    ap.add_argument("--triples", type=int, default=1000)
    ap.add_argument("--beaver", type=int, default=2_000_000, help="elements per Beaver call")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cols", type=int, default=30_000)
    ap.add_argument("--density", type=float, default=0.0002)
    ap.add_argument("--bandwidth", default="40mbit")
    ap.add_argument("--latency", default="40ms")
    ap.add_argument("--no-shaping", action="store_true", help="skip the shaped runs")
    ap.add_argument("--skip-sparse", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if args.quick:
        args.key_bits, args.count, args.triples, args.beaver = 1024, 200, 100, 200_000
        args.rows, args.cols = 2000, 600
    shaped = NetConfig(bandwidth=parse_rate(args.bandwidth), latency=parse_duration(args.latency), timeout=3600)
    configs = [("none", NetConfig(timeout=3600))] + ([] if args.no_shaping else [(f"{args.bandwidth}/{args.latency}", shaped)])
    rows = []
    ct_bytes = 2 * args.key_bits // 8
    for label, cfg in configs:
        run = lambda fn, *a: launch(2, fn, *a, config=cfg, workers_per_party=1, timeout=7200)  # noqa: E731
        print(f"-- network: {label}", file=sys.stderr, flush=True)
        todo = [
            ("s2h", lambda: summarise("s2h", run(job_s2h, args.key_bits, args.count), args.count)),
            ("h2s_packed", lambda: summarise("h2s_packed", run(job_h2s, args.key_bits, args.count, True), args.count)),
            ("h2s_unpacked", lambda: summarise("h2s_unpacked", run(job_h2s, args.key_bits, args.count, False), args.count)),
            ("trigen", lambda: summarise("trigen", run(job_trigen, args.key_bits, args.triples), args.triples, "triple")),
        ]
        for name, fn in todo:
            print(f"   {name} ...", file=sys.stderr, flush=True)
            row = fn()
            row["network"] = label
            rows.append(row)
        print("   beaver ...", file=sys.stderr, flush=True)
        res = run(job_beaver, args.key_bits, args.beaver, 3)
        row = summarise("beaver", res, 3 * args.beaver, "multiplication")
        row["mults_per_s"] = round(3 * args.beaver / row["wall_s"])
        row["network"] = label
        rows.append(row)
        if not args.skip_sparse:
            print(f"   sparse_matvec {args.rows}x{args.cols} ...", file=sys.stderr, flush=True)
            res = run(job_sparse, args.key_bits, args.rows, args.cols, args.density)
            row = summarise("sparse_matvec", res, args.rows, "output row")
            row.update({"rows": args.rows, "cols": args.cols, "nnz": res[0]["nnz"], "network": label})
            rows.append(row)

    print(f"\n{args.key_bits}-bit Paillier, 2 parties (1 core each), loopback TLS; CPU = both parties")
    print(f"{'protocol':15s} {'network':>14s} {'count':>9s} {'CPU µs/val':>11s} {'P0':>9s} {'P1':>9s} "
          f"{'wall s':>8s} {'B/value':>9s} {'overlap':>8s}")
    for r in rows:
        extra = f"{r.get('pipeline_overlap_fraction', float('nan')):8.2f}"
        print(f"{r['protocol']:15s} {r['network']:>14s} {r['count']:>9d} {r['cpu_us_per_value']:11.1f} "
              f"{r['cpu_us_per_value_party0']:9.1f} {r['cpu_us_per_value_party1']:9.1f} {r['wall_s']:8.2f} "
              f"{r['bytes_per_value']:9.1f} {extra}")
    for r in rows:
        if r["protocol"] == "beaver":
            print(f"Beaver ({r['network']}): {r['mults_per_s']:,} multiplications/s")
    packed = next((r for r in rows if r["protocol"] == "h2s_packed" and r["network"] == "none"), None)
    if packed:
        print(f"packed H2S: {packed['bytes_per_value']:.1f} B/value = 1/{ct_bytes / packed['bytes_per_value']:.1f} "
              f"of an unpacked {ct_bytes}-byte ciphertext")
    if args.json:
        meta = {"key_bits": args.key_bits, "transport": "loopback TLS 1.3, 2 processes, 1 kernel worker each"}
        write_json(args.json, {"meta": meta, "rows": rows})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
