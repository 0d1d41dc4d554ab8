#!/usr/bin/env python
"""Federated learning with Paillier: the seed's experiment (Yang et al.) with python-paillier, the
software FATE runs, and with shaper, side by side in one run.

Vertical: 10 iterations (full batch, as FATE's batch_size=-1) of coordinated logistic regression
on breast cancer (569 rows: the guest holds the labels and 10 features, one host 20, as in
FATE's breast_hetero example) and of linear regression on scikit-learn's diabetes data (442 rows:
guest 4 features, host 6), with 1024- and 2048-bit keys. Three processes (guest, host, arbiter)
over loopback TLS on this machine, one kernel worker each. Reported per iteration: wall time, and
encryption time summed over the parties (the paper's "encryption time per iteration"), plus the
split into decryption, homomorphic work and waiting; then the ratios phe / shaper.

Horizontal: one aggregation round of a P-parameter update from 5 clients (6 processes: 5 clients
and the coordinator, 2048-bit key, packed), its CPU time per client, its wall time, and the
largest difference from the numpy weighted mean. python-paillier runs the same round on a slice
of ``--phe-slice`` parameters and is scaled linearly (its cost is per ciphertext).

  python benchmarks/fl.py --json benchmarks/results/fl.json
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from meta import machine, write_json


def _vertical_party(session, kind: str, backend: str, bits: int, iterations: int) -> dict:
    from sklearn.datasets import load_breast_cancer, load_diabetes

    from shaper.ml.fl.hetero import HeteroLinearModel

    if kind == "logistic":
        X, y = load_breast_cancer(return_X_y=True)
        guest_cols = 10
    else:
        X, y = load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
        guest_cols = 4
    model = HeteroLinearModel(kind, max_iter=iterations, batch_size=None, learning_rate=0.15, tol=0.0,
                              key_bits=bits, backend=backend)
    if session.name == "arbiter":
        model.fit(session, None, role="arbiter")
    elif session.name == "guest":
        model.fit(session, X[:, :guest_cols], y, role="guest")
    else:
        model.fit(session, X[:, guest_cols:], role="host")
    laps = model.iterations_
    return {"per_iteration": model.stats_["per_iteration"], "loss": [it["loss"] for it in laps],
            "seconds": model.stats_["seconds"]}


def vertical(kind: str, backend: str, bits: int, iterations: int) -> dict:
    from shaper.net import launch

    names = ["guest", "host", "arbiter"]
    t0 = time.perf_counter()
    res = dict(zip(names, launch(names, _vertical_party, kind, backend, bits, iterations, workers_per_party=1)))
    wall = time.perf_counter() - t0
    per = {n: r["per_iteration"] for n, r in res.items()}
    out = {"kind": kind, "backend": backend, "key_bits": bits, "iterations": iterations, "job_seconds": wall,
           "iteration_seconds": max(p["seconds"] for p in per.values()),
           "encrypt_seconds": sum(p["encrypt"] for p in per.values()),
           "decrypt_seconds": sum(p["decrypt"] for p in per.values()),
           "homomorphic_seconds": sum(p["homomorphic"] for p in per.values()),
           "per_role": per, "final_loss": res["arbiter"]["loss"][-1]}
    print(f"  vertical {kind:8s} {bits} bits {backend:6s}: {out['iteration_seconds']:.3f} s/iteration, "
          f"encryption {out['encrypt_seconds']:.3f} s/iteration, decryption {out['decrypt_seconds']:.3f}, "
          f"homomorphic {out['homomorphic_seconds']:.3f}; final loss {out['final_loss']:.5f}", flush=True)
    return out


def _agg_party(session, count: int, backend: str, bits: int) -> dict:
    from shaper.protocols.fl.aggregate import AggregationParams, Federation
    from shaper.net.phases import Phases
    from shaper.protocols.fl.backend import CATEGORIES, make_backend

    clients = [n for n in session.parties if n != "coordinator"]
    role = "coordinator" if session.name == "coordinator" else "client"
    b = make_backend(backend, Phases(session))
    fed = Federation(session, b, role, "coordinator", clients, AggregationParams(), key_bits=bits)
    i = clients.index(session.name) if role == "client" else None
    fed.setup(1000 * (i + 1) if role == "client" else None)
    update = np.random.default_rng(i).uniform(-1, 1, count) if role == "client" else None
    c0, t0 = time.process_time(), time.perf_counter()
    if role == "coordinator":
        fed.coordinator_round(0)
        return {"cpu": time.process_time() - c0, "wall": time.perf_counter() - t0}
    mean = fed.client_round(update, 0)
    return {"cpu": time.process_time() - c0, "wall": time.perf_counter() - t0, "mean": mean,
            "times": {k: b.phases.seconds(k) for k in CATEGORIES}, **fed.last}


def horizontal(count: int, backend: str, bits: int, clients: int = 5) -> dict:
    from shaper.net import launch

    names = ["coordinator", *[f"client-{i}" for i in range(clients)]]
    t0 = time.perf_counter()
    res = launch(names, _agg_party, count, backend, bits, workers_per_party=1)
    wall = time.perf_counter() - t0
    updates = [np.random.default_rng(i).uniform(-1, 1, count) for i in range(clients)]
    rows = np.array([1000 * (i + 1) for i in range(clients)], dtype=float)
    exact = sum(r * u for r, u in zip(rows, updates)) / rows.sum()
    err = max(float(np.abs(r["mean"] - exact).max()) for r in res[1:])
    cpu = [r["cpu"] for r in res[1:]]
    out = {"parameters": count, "backend": backend, "key_bits": bits, "clients": clients,
           "round_wall_seconds": max(r["wall"] for r in res), "job_seconds": wall,
           "client_cpu_seconds_max": max(cpu), "client_cpu_seconds_mean": sum(cpu) / len(cpu),
           "coordinator_cpu_seconds": res[0]["cpu"], "ciphertexts_per_client": res[1]["ciphertexts"],
           "slots": res[1]["slots"], "slot_bits": res[1]["slot_bits"], "max_error_vs_numpy": err,
           "client_times": res[1]["times"]}
    print(f"  horizontal {count:>9,} params {bits} bits {backend:6s}: round {out['round_wall_seconds']:.2f} s wall, "
          f"client CPU {out['client_cpu_seconds_max']:.2f} s (max), {out['ciphertexts_per_client']:,} ciphertexts of "
          f"{out['slots']} slots, max error {err:.2e}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--bits", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--models", nargs="+", default=["logistic", "linear"])
    ap.add_argument("--params", type=int, nargs="+", default=[100_000, 1_000_000], help="horizontal update sizes")
    ap.add_argument("--phe-slice", type=int, default=20_000, help="parameters python-paillier aggregates (scaled)")
    ap.add_argument("--skip-phe", action="store_true")
    ap.add_argument("--skip-vertical", action="store_true")
    ap.add_argument("--skip-horizontal", action="store_true")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()

    backends = ["shaper"] + ([] if args.skip_phe else ["phe"])
    report: dict = {"network": "loopback TLS 1.3, no shaping", "vertical": [], "horizontal": []}
    here = machine()
    print(f"fl benchmark on {here['cores']} cores, kernel {here['kernel']}", flush=True)
    if not args.skip_vertical:
        for bits in args.bits:
            for kind in args.models:
                runs = {b: vertical(kind, b, bits, args.iterations) for b in backends}
                row = {"kind": kind, "key_bits": bits, "runs": runs}
                if "phe" in runs:
                    row["iteration_ratio"] = runs["phe"]["iteration_seconds"] / runs["shaper"]["iteration_seconds"]
                    row["encryption_ratio"] = runs["phe"]["encrypt_seconds"] / runs["shaper"]["encrypt_seconds"]
                    print(f"    -> phe/shaper: iteration {row['iteration_ratio']:.1f}x, encryption "
                          f"{row['encryption_ratio']:.1f}x", flush=True)
                report["vertical"].append(row)
    if not args.skip_horizontal:
        for count in args.params:
            row = {"parameters": count, "shaper": horizontal(count, "shaper", 2048)}
            if not args.skip_phe:
                part = horizontal(min(args.phe_slice, count), "phe", 2048)
                factor = count / part["parameters"]
                row["phe_slice"] = part
                row["phe_scaled"] = {"client_cpu_seconds": part["client_cpu_seconds_max"] * factor,
                                     "round_wall_seconds": part["round_wall_seconds"] * factor}
                row["client_cpu_ratio"] = row["phe_scaled"]["client_cpu_seconds"] / row["shaper"]["client_cpu_seconds_max"]
                print(f"    -> phe scaled to {count:,}: client CPU {row['phe_scaled']['client_cpu_seconds']:.0f} s, "
                      f"round {row['phe_scaled']['round_wall_seconds']:.0f} s ({row['client_cpu_ratio']:.1f}x)", flush=True)
            report["horizontal"].append(row)
    if args.json:
        write_json(args.json, report, default=float)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
