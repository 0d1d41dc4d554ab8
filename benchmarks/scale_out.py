#!/usr/bin/env python
"""The Ray executor against the local one on this machine: per-task overhead, encryption
throughput for batches of 10^3 to 10^6, and the SHAPER-shaped vertical LR with the host on Ray.

  python benchmarks/scale_out.py --json benchmarks/results/scale_out.json           # 10^3..10^5
  python benchmarks/scale_out.py --sizes 1000 10000 100000 1000000 --lr --json ...   # everything

Both executors use every core of this machine: the local one its worker processes (or, on a CPU
with AVX-512 IFMA, the native kernel's threads: that kernel has no task pool, so its per-task
overhead is not applicable and is reported as null), the Ray one a private Ray instance
(``ray.init(num_cpus=cores)``) with one actor per core. Runs alternate
local / Ray (these VMs drift by 15 % within minutes) and the table gives medians and their
ratio. Ciphertexts are compared bit for bit (same randomness drawn by the party). The 16-node
figures are a PROJECTION from the measured per-core rate, per-task overhead and the party's own
serial cost, not a measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time

import numpy as np

from meta import cores as available_cores, write_json
from shaper import kernels
from shaper.crypto import paillier
from shaper.crypto.prg import default_prg
from shaper.kernels import ExecutorSettings, wire

HERE = os.path.dirname(os.path.abspath(__file__))


def digest(cts: list) -> str:
    h = hashlib.sha256()
    for c in cts:
        h.update(int(c).to_bytes(520, "little"))
    return h.hexdigest()[:16]


def timed_encrypt(pk, values: list, exps: np.ndarray) -> tuple[float, list]:
    t = time.perf_counter()
    cts = pk.raw_encrypt(values, exps)
    return time.perf_counter() - t, cts


def pool_overhead(kernel, reps: int) -> dict:
    """Per-task cost of ``kernel``'s task pool on a trivial call (one 64-bit product): the round
    trip of one task alone, and the time per task when many are in flight. A kernel without a
    task pool (the native kernel, whose threads share each call; a single-worker gmpy2 kernel)
    has no such cost: its figures are None and ``task_pool`` False."""
    pool = getattr(kernel, "pool", None)  # the local process pool or the Ray pool
    if pool is None:
        return {"kernel": kernel.name, "task_pool": False, "round_trip_ms": None, "per_task_in_batch_ms": None,
                "workers": getattr(kernel, "threads", None)}
    task = ("mulmod", ([3], [5], 7))
    pool.map(kernel.workers, [task] * 4)  # warm
    t = time.perf_counter()
    for _ in range(reps):
        pool.map(kernel.workers, [task])
    single = (time.perf_counter() - t) / reps
    many = 20 * kernel.workers * 4
    t = time.perf_counter()
    pool.map(kernel.workers, [task] * many)
    per_task = (time.perf_counter() - t) / many
    return {"kernel": kernel.name, "task_pool": True, "round_trip_ms": round(single * 1e3, 3),
            "per_task_in_batch_ms": round(per_task * 1e3, 3), "workers": kernel.workers}


def overhead(settings: ExecutorSettings, reps: int) -> dict:
    """``pool_overhead`` of the local executor's kernel and of the Ray executor's (always both
    keys; the local one has no task pool where the native kernel runs)."""
    out = {}
    for name in ("local", "ray"):
        kernels.set_executor("local" if name == "local" else settings)
        out[name] = pool_overhead(kernels.get_kernel(), reps)
    return out


def describe_overhead(row: dict) -> str:
    if not row["task_pool"]:
        return f"n/a ({row['kernel']}: no task pool)"
    return f"round trip {row['round_trip_ms']}, in a batch {row['per_task_in_batch_ms']}"


def party_serial_seconds(pk, count: int) -> float:
    """What the party's own process does per encryption whichever executor runs the chunks:
    the g^m multipliers, encoding the chunk arguments and decoding the replies."""
    values = list(range(count))
    exps = default_prg().exponent_bytes(count, pk.exponent_bits)
    t = time.perf_counter()
    mult = [(v % pk.n) * pk.n + 1 for v in values]
    frame = wire.encode(("fixed_base_powmod", ([], [exps], mult, pk.n_squared)))
    wire.decode(frame)
    reply = wire.encode(("ok", mult))  # ciphertexts have the multipliers' width
    wire.decode(reply)
    return (time.perf_counter() - t) / count


def encryption(pk, sizes: list[int], settings: ExecutorSettings, reps_small: int) -> list[dict]:
    rows = []
    for size in sizes:
        values = list(range(size))
        exps = default_prg().exponent_bytes(size, pk.exponent_bits)
        reps = reps_small if size <= 10_000 else (2 if size <= 100_000 else 1)
        times: dict[str, list[float]] = {"local": [], "ray": []}
        digests: dict[str, str] = {}
        chunks = None
        for _ in range(reps):
            for name in ("local", "ray"):
                kernels.set_executor("local" if name == "local" else settings)
                kernel = kernels.get_kernel()
                timed_encrypt(pk, values[:2000], exps[:2000])  # every worker has the key's table
                if name == "ray":
                    before = kernel.pool_ray.stats["chunks"]
                seconds, cts = timed_encrypt(pk, values, exps)
                if name == "ray":
                    chunks = kernel.pool_ray.stats["chunks"] - before
                times[name].append(seconds)
                digests.setdefault(name, digest(cts))
                print(f"  {size:>9,} encryptions  {name:5s} {size / seconds:8.0f} /s", file=sys.stderr, flush=True)
        local, ray_t = statistics.median(times["local"]), statistics.median(times["ray"])
        rows.append({"batch": size, "reps": reps, "local_per_s": round(size / local), "ray_per_s": round(size / ray_t),
                     "ray_over_local": round(local / ray_t, 3), "ray_chunks": chunks,
                     "local_seconds": [round(t, 3) for t in times["local"]],
                     "ray_seconds": [round(t, 3) for t in times["ray"]],
                     "bit_identical": digests["local"] == digests["ray"]})
    return rows


def projection(rate_per_core: float, overhead_ms: float, serial_s: float, nodes: int, cores_per_node: int,
               batch: int, link_gbit: float) -> dict:
    """Throughput a ``nodes`` x ``cores_per_node`` cluster would give one party for ``batch``
    encryptions: parallel work, one round of per-task overhead per chunk wave, the party's own
    serial share, and the party's network link (about 1.2 kB moved per 2048-bit encryption)."""
    actors = nodes * cores_per_node
    parts = min(batch, actors * 4)
    compute = batch / (rate_per_core * actors) + (parts / actors) * overhead_ms / 1e3
    serial = batch * serial_s
    link = batch * 1200 * 8 / (link_gbit * 1e9)
    seconds = max(compute, link) + serial
    return {"nodes": nodes, "cores_per_node": cores_per_node, "batch": batch, "link_gbit": link_gbit,
            "projected_per_s": round(batch / seconds), "bound": "link" if link > compute else "compute",
            "party_serial_share": round(serial / seconds, 3)}


def lr_party(session, rows, test_rows, shape, params):
    sys.path.insert(0, HERE)
    from lr_shaper import generate

    from shaper.ml import VerticalLogisticRegression

    X_tr, X_te, y_tr, y_te = generate(rows, test_rows, shape, session.index)
    guest = session.index == 1
    model = VerticalLogisticRegression(**params)
    started = time.perf_counter()
    model.fit(session, X_tr, y_tr if guest else None)
    seconds = time.perf_counter() - started
    auc = None
    z = model.decision_function(session, X_te)
    if guest:
        from sklearn.metrics import roc_auc_score

        auc = float(roc_auc_score(y_te, z))
    kernel = kernels.get_kernel()
    pool = getattr(kernel, "pool_ray", None)
    return {"coef": model.coef_, "intercept": model.intercept_, "auc": auc, "fit_seconds": round(seconds, 1),
            "kernel": kernel.name, "ray_chunks": None if pool is None else pool.stats["chunks"],
            "crypto": model.stats_["crypto"]}


def lr(settings: ExecutorSettings, rows: int) -> dict:
    from shaper.net import NetConfig, launch

    shape = {"host_features": rows * 3 // 100, "guest_features": rows * 7 // 100, "density": 20 / (rows // 10),
             "seed": 1}
    params = {"epochs": 1, "batch_size": 4096, "learning_rate": "auto", "key_bits": 2048, "layout": "encrypted",
              "monitor": None, "seed": bytes(range(32))}
    config = NetConfig(bandwidth=40e6, latency=0.04, timeout=3600.0)
    test_rows = rows // 10
    out = {"rows": rows, "test_rows": test_rows, **shape, **{k: v for k, v in params.items() if k != "seed"},
           "network": "40mbit, 40ms"}
    runs = {}
    for name, executors in (("all_local", None), ("host_on_ray", {"host": settings})):
        print(f"  LR {rows:,} rows: {name} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        host, guest = launch(["host", "guest"], lr_party, rows, test_rows, shape, params, config=config,
                             workers_per_party=1, timeout=3 * 3600, executors=executors)
        runs[name] = {"wall_seconds": round(time.perf_counter() - t, 1), "host": host, "guest": guest}
    a, b = runs["all_local"], runs["host_on_ray"]
    same = all(np.array_equal(a[p]["coef"], b[p]["coef"]) and a[p]["intercept"] == b[p]["intercept"]
               for p in ("host", "guest"))
    for name, r in runs.items():
        out[name] = {"wall_seconds": r["wall_seconds"], "fit_seconds": r["guest"]["fit_seconds"],
                     "auc": r["guest"]["auc"], "host_kernel": r["host"]["kernel"], "guest_kernel": r["guest"]["kernel"],
                     "host_ray_chunks": r["host"]["ray_chunks"], "host_encryptions": r["host"]["crypto"]["encryptions"]}
    out["same_model"] = bool(same)
    out["max_abs_coef_difference"] = float(max(np.max(np.abs(a[p]["coef"] - b[p]["coef"])) for p in ("host", "guest")))
    return out


def print_report(key_bits: int, n_cores: int, over: dict, enc: list[dict], serial: float, proj: list[dict],
                 lr_row: dict | None) -> None:
    print()
    print(f"Encryption, {key_bits}-bit Paillier, {n_cores} cores (both executors), no network shaping:")
    print(f"{'batch':>10} {'local /s':>10} {'ray /s':>10} {'ray/local':>10} {'chunks':>7}  identical")
    for r in enc:
        print(f"{r['batch']:>10,} {r['local_per_s']:>10,} {r['ray_per_s']:>10,} {r['ray_over_local']:>10.2f} "
              f"{r['ray_chunks'] or 0:>7}  {r['bit_identical']}")
    print(f"per-task overhead (ms): local {describe_overhead(over['local'])}; ray {describe_overhead(over['ray'])}")
    print(f"party's serial share per encryption: {serial * 1e6:.1f} us")
    print("PROJECTION (not measured) for 16 nodes:")
    for p in proj:
        print(f"  {p['cores_per_node']:>2} cores/node, batch {p['batch']:.0e}, {p['link_gbit']:>2} Gbit/s link: "
              f"{p['projected_per_s']:>9,} enc/s ({p['bound']}-bound; party serial share {p['party_serial_share']:.0%})")
    if lr_row:
        print(f"LR {lr_row['rows']:,} rows (encrypted layout, 1 epoch, 40 Mbit/s 40 ms): same model "
              f"{lr_row['same_model']}; all local {lr_row['all_local']['fit_seconds']} s, host on Ray "
              f"{lr_row['host_on_ray']['fit_seconds']} s ({lr_row['host_on_ray']['host_ray_chunks']} chunks on Ray); "
              f"AUC {lr_row['all_local']['auc']:.6f} / {lr_row['host_on_ray']['auc']:.6f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3, help="alternating runs per executor for batches <= 10^4")
    ap.add_argument("--lr", action="store_true", help="also the 100k-row vertical LR, host on Ray vs all local")
    ap.add_argument("--lr-rows", type=int, default=100_000)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    try:
        import ray
    except ImportError:
        print('needs Ray: pip install "shaper-ppml[ray]"', file=sys.stderr)
        return 2

    n_cores = available_cores()
    ray.init(num_cpus=n_cores, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    settings = ExecutorSettings(kind="ray", address=ray.get_runtime_context().gcs_address, actors=n_cores)
    pk, _ = paillier.keygen(args.key_bits)
    print(f"== {args.key_bits}-bit Paillier (DJN), {n_cores} cores, Ray {ray.__version__} with {n_cores} actors",
          file=sys.stderr, flush=True)

    over = overhead(settings, 50)
    print(f"  per-task overhead (ms): local {describe_overhead(over['local'])}; ray {describe_overhead(over['ray'])}",
          file=sys.stderr, flush=True)
    enc = encryption(pk, args.sizes, settings, args.reps)
    serial = party_serial_seconds(pk, 20_000)
    biggest = enc[-1]
    per_core = biggest["ray_per_s"] / n_cores
    proj = [projection(per_core, over["ray"]["per_task_in_batch_ms"], serial, 16, c, b, g)
            for c in (2, 32) for b in (10**6, 10**8) for g in (1, 10)]
    kernels.set_executor("local")  # release this process's actors: the host party starts its own
    lr_row = lr(settings, args.lr_rows) if args.lr else None
    kernels.set_executor(None)
    ray.shutdown()

    print_report(args.key_bits, n_cores, over, enc, serial, proj, lr_row)
    if args.json:
        meta = {"ray": ray.__version__, "key_bits": args.key_bits, "network_shaping": "none",
                "executor_local": f"{over['local']['kernel']} on {n_cores} cores",
                "executor_ray": f"private Ray instance, {n_cores} actors"}
        write_json(args.json, {"meta": meta, "overhead": over, "encryption": enc, "party_serial_us_per_encryption":
                               round(serial * 1e6, 2), "projection_16_nodes": proj, "lr": lr_row})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
