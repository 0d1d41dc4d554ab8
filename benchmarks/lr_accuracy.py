"""Accuracy of the secure vertical logistic regression against scikit-learn on real data sets.

Each data set is used as published (no scaling by the user: the job standardises each party's
columns), split by columns between a host and a guest (the guest holds the labels), trained with
every option at its default (learning_rate="auto", 10 epochs, batch 64) in two in-process parties,
and scored on a held-out 20 % against scikit-learn's LogisticRegression (StandardScaler first).

  python benchmarks/lr_accuracy.py [--key-bits 2048] [--layouts encrypted caesar] [--json out.json]

Data sets: breast cancer (569 x 30, the SHAPER/FATE demo data) and the UCI optical digits
(1,797 x 64, 8x8 images; task: digit >= 5). The key size does not change the arithmetic (the
fixed-point values are the same), only the time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from meta import write_json


def datasets() -> dict:
    from sklearn.datasets import load_breast_cancer, load_digits

    X, y = load_breast_cancer(return_X_y=True)
    out = {"breast_cancer": (X, y)}
    X, y = load_digits(return_X_y=True)
    out["digits_ge5"] = (X, (y >= 5).astype(np.int64))
    return out


def job(session, Xtr, ytr, Xte, split, params):
    from shaper.ml import VerticalLogisticRegression

    cols = slice(0, split) if session.index == 0 else slice(split, None)
    model = VerticalLogisticRegression(**params)
    model.fit(session, Xtr[:, cols], None if session.index == 0 else ytr)
    return model.predict_proba(session, Xte[:, cols]), model.learning_rate_, model.history_


def main() -> int:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from shaper.net import run_in_memory

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--layouts", nargs="+", default=["encrypted", "caesar"], choices=["encrypted", "caesar"])
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    rows = []
    for name, (X, y) in datasets().items():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
        sk = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(Xtr, ytr)
        sk_auc = float(roc_auc_score(yte, sk.decision_function(Xte)))
        for layout in args.layouts:
            t0 = time.perf_counter()
            _, (proba, rate, history) = run_in_memory(2, job, Xtr, ytr, Xte, X.shape[1] // 2,
                                                      {"key_bits": args.key_bits, "layout": layout})
            auc = float(roc_auc_score(yte, proba))
            rows.append({"data": name, "rows": int(X.shape[0]), "features": int(X.shape[1]), "layout": layout,
                         "auc": round(auc, 4), "sklearn_auc": round(sk_auc, 4), "gap": round(sk_auc - auc, 4),
                         "learning_rate": round(rate, 4), "train_loss": [round(h["train_loss"], 4) for h in history],
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(f"{name:14s} {layout:9s} AUC {auc:.4f}  scikit-learn {sk_auc:.4f}  gap {sk_auc - auc:+.4f}  "
                  f"rate {rate:.3g}  {rows[-1]['seconds']:.0f} s", flush=True)
    if args.json:
        meta = {"key_bits": args.key_bits, "epochs": 10, "batch_size": 64}
        write_json(args.json, {"meta": meta, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
