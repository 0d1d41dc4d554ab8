#!/usr/bin/env python
"""The SHAPER workload: vertical sparse logistic regression between two parties.

Full scale (the paper's): 1M rows, host 30k features, guest 70k features + labels, 0.02 %
density (one-hot style: 6 + 14 active features per row), 2048-bit Paillier, 40 Mbit/s and 40 ms.
Each party runs as its own process with one core (2-core machine), over loopback TLS with the
shaping applied inside the channel, and generates its own part of the data from a shared seed.

  python benchmarks/lr_shaper.py --rows 1000000 --epochs 1 --json full.json        # full scale
  python benchmarks/lr_shaper.py --rows 100000 --host-features 3000 --guest-features 7000 \\
         --density 0.002 --layouts encrypted caesar --json reduced.json              # reduced

The reduced set keeps the full workload's rows per category (200) and non-zeros per row (20) by
scaling the feature counts with the rows. Reported per layout: time per epoch, bytes, crypto
operation counts, peak memory per party, test AUC of the secure model, of the same mini-batch
algorithm in plain floating point (same batches, same sigmoid), and of scikit-learn's
LogisticRegression, next to the paper's figures (CAESAR-Paillier 3101 min, CAESAR-OU 333 min,
SHAPER FPGA 33 min; SecureML 14729 min).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np
import scipy.sparse as sp

from meta import write_json
from shaper.ml import VerticalLogisticRegression
from shaper.ml.data import shaper_workload
from shaper.ml.logreg import reference_sgd
from shaper.net import NetConfig, launch, parse_duration, parse_rate

PAPER_MINUTES = {"CAESAR-Paillier (CPU)": 3101, "CAESAR-OU (CPU)": 333, "SHAPER FPGA 2048-bit": 33,
                 "SHAPER FPGA 3072-bit": 46, "SecureML": 14729}


def generate(rows: int, test_rows: int, shape: dict, party: int):
    """This party's training and test rows (the other party's columns are dropped as generated)."""
    train_parts, test_parts, y_tr, y_te = [], [], [], []
    done = 0
    for x_h, x_g, y in shaper_workload(rows + test_rows, chunk_rows=50_000, **shape):
        mine = x_h if party == 0 else x_g
        n = mine.shape[0]
        cut = max(0, min(n, rows - done))
        if cut:
            train_parts.append(mine[:cut])
            y_tr.append(y[:cut])
        if cut < n:
            test_parts.append(mine[cut:])
            y_te.append(y[cut:])
        done += n
    X_tr = sp.vstack(train_parts, format="csr")
    X_te = sp.vstack(test_parts, format="csr")
    return X_tr, X_te, np.concatenate(y_tr), np.concatenate(y_te)


def party(session, rows, test_rows, shape, params):
    t0 = time.perf_counter()
    X_tr, X_te, y_tr, y_te = generate(rows, test_rows, shape, session.index)
    gen_seconds = time.perf_counter() - t0
    guest = session.index == 1
    last = [time.perf_counter()]

    def progress(event):
        if guest and event["event"] == "iteration" and (event["iteration"] % 10 == 0 or
                                                          event["iteration"] == event["iterations"]):
            print(f"  [{params['layout']}] epoch {event['epoch']}/{event['epochs']} iteration "
                  f"{event['iteration']}/{event['iterations']}  {event['seconds']:.0f} s  "
                  f"{event['bytes_sent'] / 1e6:.0f} MB sent", file=sys.stderr, flush=True)

    model = VerticalLogisticRegression(**params)
    model.fit(session, X_tr, y_tr if guest else None, progress=progress)
    t_pred = time.perf_counter()
    z = model.decision_function(session, X_te)
    pred_seconds = time.perf_counter() - t_pred
    auc = None
    if guest:
        from sklearn.metrics import roc_auc_score

        auc = float(roc_auc_score(y_te, z))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"party": session.name, "auc": auc, "stats": model.stats_, "history": model.history_,
            "shuffle_seed": model.shuffle_seed_.hex(), "learning_rate": model.learning_rate_,
            "precond": model.precond_.tolist(), "generate_seconds": round(gen_seconds, 2),
            "predict_seconds": round(pred_seconds, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1), "last": last[0]}


def plaintext_auc(rows, test_rows, shape, params, shuffle_seed: bytes, sklearn: bool, rate: float,
                  precond: tuple) -> dict:
    from sklearn.metrics import roc_auc_score

    X_h, Xh_te, _, _ = generate(rows, test_rows, shape, 0)
    X_g, Xg_te, y_tr, y_te = generate(rows, test_rows, shape, 1)
    wh, wg = reference_sgd(X_h, X_g, y_tr, shuffle_seed=shuffle_seed, epochs=params["epochs"],
                           batch_size=params["batch_size"], learning_rate=rate, precond=precond)
    z = Xh_te @ wh + Xg_te @ wg[:-1] + wg[-1]
    out = {"plaintext_sgd_auc": float(roc_auc_score(y_te, z))}
    if sklearn:
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(max_iter=300).fit(sp.hstack([X_h, X_g], format="csr"), y_tr)
        out["sklearn_auc"] = float(roc_auc_score(y_te, model.decision_function(sp.hstack([Xh_te, Xg_te],
                                                                                           format="csr"))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--test-rows", type=int, default=None, help="held-out rows (default 10 %%, at most 50k)")
    ap.add_argument("--host-features", type=int, default=30_000)
    ap.add_argument("--guest-features", type=int, default=70_000)
    ap.add_argument("--density", type=float, default=0.0002)
    ap.add_argument("--layouts", nargs="+", default=["encrypted"], choices=["encrypted", "caesar"])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--learning-rate", default="auto", type=lambda t: t if t == "auto" else float(t))
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--scheme", default="paillier", choices=["paillier", "ou"])
    ap.add_argument("--bandwidth", default="40mbit")
    ap.add_argument("--latency", default="40ms")
    ap.add_argument("--no-shaping", action="store_true")
    ap.add_argument("--no-sklearn", action="store_true", help="skip scikit-learn's fit (slow at full scale)")
    ap.add_argument("--seed", type=int, default=1, help="data seed")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    test_rows = args.test_rows or min(50_000, max(1000, args.rows // 10))
    shape = {"host_features": args.host_features, "guest_features": args.guest_features, "density": args.density,
             "seed": args.seed}
    config = NetConfig(timeout=3600.0) if args.no_shaping else NetConfig(
        bandwidth=parse_rate(args.bandwidth), latency=parse_duration(args.latency), timeout=3600.0)
    network = "none" if args.no_shaping else f"{args.bandwidth}, {args.latency}"
    rows_out = []
    for layout in args.layouts:
        params = {"epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": args.learning_rate,
                  "key_bits": args.key_bits, "scheme": args.scheme, "layout": layout, "monitor": None}
        print(f"== {layout} layout: {args.rows:,} rows ({test_rows:,} test), host {args.host_features:,} / guest "
              f"{args.guest_features:,} features, density {args.density:g}, {args.key_bits}-bit {args.scheme}, "
              f"network {network}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        host, guest = launch(["host", "guest"], party, args.rows, test_rows, shape, params, config=config,
                             workers_per_party=1, timeout=24 * 3600)
        wall = time.perf_counter() - started
        print("   plaintext reference ...", file=sys.stderr, flush=True)
        plain = plaintext_auc(args.rows, test_rows, shape, params, bytes.fromhex(host["shuffle_seed"]),
                              not args.no_sklearn, guest["learning_rate"],
                              (np.array(host["precond"]), np.array(guest["precond"])))
        epoch_seconds = [h["seconds"] for h in guest["history"]]
        ops = {k: host["stats"]["crypto"][k] + guest["stats"]["crypto"][k] for k in host["stats"]["crypto"]}
        rows_out.append({
            "layout": layout, "rows": args.rows, "test_rows": test_rows, **shape, "epochs": args.epochs,
            "batch_size": args.batch_size, "learning_rate": args.learning_rate,
            "learning_rate_in_force": guest["learning_rate"], "train_loss": [h["train_loss"] for h in guest["history"]],
            "key_bits": args.key_bits,
            "scheme": args.scheme, "network": network,
            "seconds_per_epoch": epoch_seconds, "minutes_per_epoch": [round(s / 60, 2) for s in epoch_seconds],
            "wall_seconds": round(wall, 1),
            "bytes": host["stats"]["bytes_sent"] + guest["stats"]["bytes_sent"],
            "crypto_operations": ops,
            "peak_rss_mib": {"host": host["peak_rss_mib"], "guest": guest["peak_rss_mib"]},
            "cpu_seconds": {"host": host["cpu_seconds"], "guest": guest["cpu_seconds"]},
            "communication_seconds": {"host": host["stats"]["communication_seconds"],
                                      "guest": guest["stats"]["communication_seconds"]},
            "auc": guest["auc"], **plain,
        })
    print()
    for r in rows_out:
        print(f"{r['layout']} layout, {r['rows']:,} rows, network {r['network']}:")
        print(f"  time per epoch      {', '.join(f'{m:.1f} min' for m in r['minutes_per_epoch'])} "
              f"(wall incl. set-up and prediction {r['wall_seconds'] / 60:.1f} min)")
        print(f"  bytes on the wire   {r['bytes'] / 1e9:.2f} GB")
        print(f"  crypto operations   {json.dumps(r['crypto_operations'])}")
        print(f"  peak memory         host {r['peak_rss_mib']['host']:.0f} MiB, guest {r['peak_rss_mib']['guest']:.0f} MiB")
        print(f"  test AUC            secure {r['auc']:.4f} | plaintext same algorithm {r['plaintext_sgd_auc']:.4f}"
              + (f" | scikit-learn {r['sklearn_auc']:.4f}" if "sklearn_auc" in r else ""))
    print("paper (total training time, 1M rows, 40 Mbps / 40 ms): "
          + ", ".join(f"{k} {v} min" for k, v in PAPER_MINUTES.items()))
    if args.json:
        write_json(args.json, {"meta": {"paper_minutes": PAPER_MINUTES}, "rows": rows_out})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
