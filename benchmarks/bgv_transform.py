#!/usr/bin/env python
"""The double-CRT transform of Z_q[X]/Phi_m for odd m (``shaper.kernels.cyclo``, the NTT of the
GHS-style BGV engine) beside the power-of-two negacyclic NTT of the CKKS kernels
(``shaper.kernels.rns``) in the same run, and beside GMPFHE's figure for the same ring.

Rows (ms per call unless stated; Python call included; inputs uniform residues):
  cyclo_forward / _inverse     m (default 53261 = 13 * 17 * 241, phi = 46080: the seed's leveled AES
                               ring), native, one prime and a chain of --chain primes (``limbs`` =
                               all), 1 thread and the whole pool
  pow2_ntt_forward / _inverse  N = 2^15 and 2^16 (``RnsContext.ntt``/``intt`` in place), the same
                               prime counts and threads
  cyclo_*_reference            the numpy reference (``native=False``), one prime, one thread: the
                               fallback where the extension is not built
  cyclo_context_build          ``context(m, primes)`` for the chain, native (uncached), and the RSS
                               growth it caused (MiB): the per-prime tables
  cyclo_mul / _add / _sub      the batched element-wise kernels over the chain (``limbs`` = all), a
  / _mul_acc / _mul_scalar     (chain, phi) operand with a (chain, phi) one; beside them numpy_copy
                               (``a.copy()``) and numpy_add_wrapping (``a + b``): what memory alone
                               costs for an array of that size
  cyclo_mul_batch2             (2, chain, phi) times (chain, phi) (a ciphertext times a plaintext)
  cyclo_extend_S_to_D          the centred fast basis extension from the first S = --extend-src
                               primes to the other chain - S (and from one prime, S = 1)
  cyclo_divide_round           a (2, chain, phi) ciphertext divided by its last prime (BGV's modulus
                               switch: one inverse, one extension, chain - 1 forward transforms)
  cyclo_digits                 key-switching digits of a (chain, phi) element in groups of
                               --extend-src primes over the chain (forward transforms of every
                               group to every other prime)

Ratios printed and written (``ratios``): GMPFHE's 849 ms per NTT over Phi_53261 ([GMP] §6.1.4,
as read in shared/research/ghs.md §2) over ours per prime (forward, 1 thread); ours over the
power-of-two NTT of N = 2^15 and 2^16 per prime (how many power-of-two NTTs one transform costs);
the chain per prime over one prime; the pool's speedup over one thread.

Timing: each row is set up once, warmed up once, then timed ``--reps`` samples; a sample is the
mean over an inner loop of at least 100 ms; the table shows the median sample, the JSON also the
minimum and every sample. 1-thread rows run pinned to one CPU with ``shaper._native.set_threads(1)``;
pool rows on every CPU of the process with as many threads. Before timing the script waits
(``--wait-quiet``) for compilers and test runs to finish, as benchmarks/ckks.py does, and records
whether the machine was quiet.

Usage:

  python benchmarks/bgv_transform.py                    # m = 53261, 20 primes, table
  python benchmarks/bgv_transform.py --json benchmarks/results/bgv_transform.json
  python benchmarks/bgv_transform.py --quick            # few short samples, a smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
from meta import cpu_model, load_sibling, write_json

#: GMPFHE's per-NTT times over Phi_m ([GMP] §6.1.4, via shared/research/ghs.md §2), and its 2^14 NTT
PAPER = {"forward_ms": {53261: 849.0, 28679: 430.0}, "pow2_14_ms": 5.81,
         "source": "GMPFHE (Zhu, Ding, Huang) §6.1.4: one NTT over Phi_53261 / Phi_28679 / 2^14"}
MIN_SAMPLE_S = 0.1
SEED = 2025




def rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def time_call(fn: Callable[[], Any], reps: int, min_sample_s: float) -> list[float]:
    """``reps`` samples (ms per call), each the mean over an inner loop of >= min_sample_s."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    inner = max(1, int(min_sample_s / once + 0.999))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e3)
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=53261, help="odd cyclotomic index m")
    ap.add_argument("--bits", type=int, default=60, help="prime size (bits) of both transforms' primes")
    ap.add_argument("--chain", type=int, default=20, help="primes of the whole-chain rows")
    ap.add_argument("--logn", type=int, nargs="+", default=[15, 16], help="log2 N of the power-of-two NTT rows")
    ap.add_argument("--reps", type=int, default=7, help="timing samples per row (median shown)")
    ap.add_argument("--extend-src", type=int, default=4, help="source primes of the extend and digits rows")
    ap.add_argument("--no-reference", action="store_true", help="skip the numpy reference rows")
    ap.add_argument("--wait-quiet", type=float, default=300,
                    help="seconds to wait for compilers/test runs to finish before timing (0: do not wait)")
    ap.add_argument("--quick", action="store_true", help="2 short samples per row, a 4-prime chain, no waiting")
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = ap.parse_args()
    min_sample_s = MIN_SAMPLE_S
    if args.quick:
        args.reps, args.wait_quiet, args.chain, min_sample_s = min(args.reps, 2), 0, min(args.chain, 4), 0.02

    from shaper.kernels import cyclo, rns

    if not (cyclo.native_available() and rns.native_available()):
        print("the native extension (CycloContext, RnsContext) is not built", file=sys.stderr)
        return 1
    import shaper._native as nat

    bench = load_sibling("ckks")
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    threads_before = nat.threads()
    m, rng = args.m, np.random.default_rng(SEED)
    qs = cyclo.primes(m, args.bits, args.chain)
    phi = len(cyclo.units(m))
    print(f"bgv transform: m = {m} (phi = {phi}, N = {cyclo.ntt_size(m)}), {args.chain} primes of {args.bits} bits, "
          f"power-of-two N = {['2^%d' % k for k in args.logn]}, {args.reps} reps", file=sys.stderr, flush=True)

    nat.set_threads(len(cpus))
    rss0 = rss_mib()
    t0 = time.perf_counter()
    ctx = cyclo.context(m, qs, native=True)
    build_s = time.perf_counter() - t0
    rss1 = rss_mib()
    coeffs = np.stack([rng.integers(0, q, phi, dtype=np.uint64) for q in qs])
    values = ctx.forward(coeffs)
    assert np.array_equal(ctx.inverse(values), coeffs), "round trip failed"
    pow2 = {}
    for logn in args.logn:
        n = 1 << logn
        pq = rns.ntt_primes(n, args.bits, args.chain)
        pow2[logn] = (rns.rns_context(n, pq, native=True),
                      np.stack([rng.integers(0, q, n, dtype=np.uint64) for q in pq]))

    def cases(count: int) -> dict[str, Callable[[], Any]]:
        limbs = list(range(count))
        a, v = np.ascontiguousarray(coeffs[:count]), np.ascontiguousarray(values[:count])
        out = {"cyclo_forward": lambda: ctx.forward(a, limbs), "cyclo_inverse": lambda: ctx.inverse(v, limbs)}
        for logn, (rc, rows) in pow2.items():
            x = np.ascontiguousarray(rows[:count])
            out[f"pow2_2^{logn}_ntt_forward"] = lambda rc=rc, x=x: rc.ntt(x, limbs)
            out[f"pow2_2^{logn}_ntt_inverse"] = lambda rc=rc, x=x: rc.intt(x, limbs)
        if count < args.chain:
            return out
        # the batched arithmetic of the BGV ring layer, over the whole chain
        b = np.ascontiguousarray(values[::-1][:count]) if count > 1 else values[:1].copy()
        b = np.stack([row % np.uint64(q) for row, q in zip(b, qs)])  # reduced mod its own row's prime
        acc = a.copy()
        scalars = [int(q) // 3 for q in qs[:count]]
        pair = np.stack([v, b])
        out.update({
            "numpy_copy": lambda: v.copy(),
            "numpy_add_wrapping": lambda: v + b,
            "cyclo_add": lambda: ctx.add(v, b, limbs),
            "cyclo_sub": lambda: ctx.sub(v, b, limbs),
            "cyclo_mul": lambda: ctx.mul(v, b, limbs),
            "cyclo_mul_batch2": lambda: ctx.mul(pair, b, limbs),
            "cyclo_mul_acc": lambda: ctx.mul_acc(acc, v, b, limbs),
            "cyclo_mul_scalar": lambda: ctx.mul_scalar(v, scalars, limbs),
        })
        src_n = min(args.extend_src, count - 1)
        if src_n >= 1:
            src, dst = limbs[:src_n], limbs[src_n:]
            res = np.ascontiguousarray(a[:src_n])
            out[f"cyclo_extend_{src_n}_to_{len(dst)}"] = lambda: ctx.extend(res, src, dst)
            out[f"cyclo_extend_1_to_{count - 1}"] = lambda: ctx.extend(res[:1], src[:1], limbs[1:])
            groups = [limbs[i:i + src_n] for i in range(0, count, src_n)]
            out["cyclo_digits"] = lambda: ctx.digits(v, limbs, groups, limbs)
        out["cyclo_divide_round"] = lambda: ctx.divide_round(pair, limbs, limbs[-1:])
        return out

    still_busy = bench.wait_quiet(args.wait_quiet)
    busy_seen: set[str] = set(still_busy)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    rows: list[dict] = []
    t_start = time.time()
    for threads in dict.fromkeys([1, len(cpus)]):
        bench._pin(set(cpus[:threads]))
        nat.set_threads(threads)
        for count in dict.fromkeys([1, args.chain]):
            if count == 1 and threads > 1:
                continue  # one prime is one task: the pool adds nothing
            for op, fn in cases(count).items():
                before = bench.cpu_ticks()
                t_op = time.monotonic()
                samples = time_call(fn, args.reps, min_sample_s)
                busy_seen.update(bench.cpu_hogs(before, bench.cpu_ticks(), time.monotonic() - t_op, 0.3))
                rows.append({"operation": op, "primes": count, "threads": threads,
                             "value": round(statistics.median(samples), 4), "unit": "ms",
                             "per_prime": round(statistics.median(samples) / count, 4),
                             "min": round(min(samples), 4), "samples": [round(s, 4) for s in samples]})
                print(f"  {op:28s} {count:3d} primes {threads} thr: {rows[-1]['value']:9.3f} ms", file=sys.stderr,
                      flush=True)
    bench._pin({cpus[0]})
    nat.set_threads(1)
    if not args.no_reference:
        ref = cyclo.context(m, qs[:1], native=False)
        a, v = coeffs[:1].copy(), values[:1].copy()
        for op, fn in (("cyclo_forward_reference", lambda: ref.forward(a)),
                       ("cyclo_inverse_reference", lambda: ref.inverse(v))):
            samples = time_call(fn, max(1, min(args.reps, 3)), 0.0)
            rows.append({"operation": op, "primes": 1, "threads": 1, "value": round(statistics.median(samples), 2),
                         "unit": "ms", "per_prime": round(statistics.median(samples), 2),
                         "min": round(min(samples), 2), "samples": [round(s, 2) for s in samples]})
        assert np.array_equal(ref.forward(a), values[:1]), "reference and native differ"
    rows.append({"operation": "cyclo_context_build", "primes": args.chain, "threads": len(cpus),
                 "value": round(build_s * 1e3, 1), "unit": "ms",
                 "rss_growth_mib": None if rss0 is None or rss1 is None else round(rss1 - rss0, 1)})
    bench._pin(set(cpus))
    nat.set_threads(threads_before)
    busy_seen.update(bench.busy_processes())
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None

    def value(op: str, count: int, threads: int) -> float | None:
        hit = [r["value"] for r in rows if r["operation"] == op and r["primes"] == count and r["threads"] == threads]
        return hit[0] if hit else None

    def ratio(x: float | None, y: float | None) -> float | None:
        return None if x is None or y is None or y == 0 else round(x / y, 2)

    fwd1, inv1 = value("cyclo_forward", 1, 1), value("cyclo_inverse", 1, 1)
    ratios: dict[str, Any] = {"paper_over_ours_forward_per_prime": ratio(PAPER["forward_ms"].get(m), fwd1)}
    for logn in args.logn:
        for d in ("forward", "inverse"):
            ratios[f"cyclo_{d}_over_pow2_2^{logn}_per_prime"] = ratio(value(f"cyclo_{d}", 1, 1),
                                                                      value(f"pow2_2^{logn}_ntt_{d}", 1, 1))
    for d in ("forward", "inverse"):
        chain1 = value(f"cyclo_{d}", args.chain, 1)
        ratios[f"cyclo_{d}_chain_per_prime_over_one_prime"] = ratio(None if chain1 is None else chain1 / args.chain,
                                                                    value(f"cyclo_{d}", 1, 1))
        ratios[f"cyclo_{d}_pool_speedup"] = ratio(chain1, value(f"cyclo_{d}", args.chain, len(cpus)))
        ratios[f"cyclo_{d}_reference_over_native"] = ratio(value(f"cyclo_{d}_reference", 1, 1),
                                                           value(f"cyclo_{d}", 1, 1))
    chain_ops = ["cyclo_add", "cyclo_mul", "cyclo_mul_acc", "cyclo_divide_round", "cyclo_digits"]
    chain_ops += sorted({r["operation"] for r in rows if r["operation"].startswith("cyclo_extend_")})
    for op in chain_ops:
        ratios[f"{op}_pool_speedup"] = ratio(value(op, args.chain, 1), value(op, args.chain, len(cpus)))
    for op in ("cyclo_add", "cyclo_mul"):  # how far from memory speed (one thread)
        ratios[f"{op}_over_numpy_add_wrapping"] = ratio(value(op, args.chain, 1),
                                                        value("numpy_add_wrapping", args.chain, 1))
    quiet = not busy_seen
    print(f"\nm = {m} (phi = {phi}), {args.bits}-bit primes; {cpu_model()}, {len(cpus)} CPUs; median ms per call")
    print(f"{'operation':30s} {'primes':>6s} {'threads':>7s} {'ms':>10s} {'ms/prime':>10s}")
    for r in rows:
        if r["unit"] == "ms" and "per_prime" in r:
            print(f"{r['operation']:30s} {r['primes']:6d} {r['threads']:7d} {r['value']:10.3f} "
                  f"{r['per_prime']:10.3f}")
    build = rows[-1]
    print(f"context build ({args.chain} primes, pool): {build['value']} ms, RSS +{build['rss_growth_mib']} MiB")
    for k, v in ratios.items():
        print(f"  {k}: {v}")
    if fwd1 is not None and m in PAPER["forward_ms"]:
        print(f"  GMPFHE: {PAPER['forward_ms'][m]} ms per NTT over Phi_{m}; ours forward {fwd1} ms, inverse {inv1} ms")
    if not quiet:
        names = sorted({e.split()[1] for e in busy_seen if len(e.split()) > 1})
        print(f"  machine NOT quiet during the run ({len(busy_seen)} observations): {', '.join(names)}")

    if args.json:
        meta = {"m": m, "phi": phi, "bluestein_ntt_size": cyclo.ntt_size(m), "prime_bits": args.bits,
                "chain": args.chain, "pow2_logn": args.logn, "reps": args.reps, "quick": args.quick,
                "min_sample_ms": min_sample_s * 1e3, "primes": qs,
                "statistic": "value = median over reps of the mean over an inner loop of >= min_sample_ms "
                             "(reference rows: single calls); per_prime = value / primes",
                "threads": "1: pinned to one CPU, set_threads(1); more: every CPU of the process, as many threads",
                "method": "Bluestein over length m on the negacyclic NTT of length N (native/src/cyclo.rs); "
                          "inverse reduces mod Phi_m via Psi_m = (X^m - 1) / Phi_m (two shorter NTT products)",
                "paper": PAPER,
                "quiet": {"quiet": quiet, "waited_up_to_s": args.wait_quiet, "busy_processes_seen": sorted(busy_seen),
                          "loadavg_before": load_before, "loadavg_after": load_after,
                          "timing_seconds": round(time.time() - t_start, 1)}}
        write_json(args.json, {"meta": meta, "rows": rows, "ratios": ratios})
    return 0


if __name__ == "__main__":
    sys.exit(main())
