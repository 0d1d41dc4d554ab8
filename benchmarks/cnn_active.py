"""The encrypted CNN under a passive key (logits, flooded) and under a key made on the active
engine (labels: the argmax computed inside the MPC), side by side in one run: 2 parties as
processes over loopback TLS (``shaper.net.launch``, one kernel worker each), the CNN's keys
(N = 2^14, 28 rotation keys, ``method="local"``), then ``shaper.jobs.cnn.infer_job`` on the first
--images bundled MNIST test images, image and model encrypted, party 0 the client, party 1 the
model owner.

    python benchmarks/cnn_active.py --images 100 --json benchmarks/results/cnn_active.json

Reported per setting: key generation (wall seconds of the slower party, bytes sent by the
busier), the job's phases at the client (seconds, bytes it sent), the whole job's wall seconds,
the job per image, and how many predictions equal the plaintext model's. Ratios are active /
passive. The passive side runs first; nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from meta import write_json  # noqa: E402
from shaper.jobs.cnn import infer_job  # noqa: E402
from shaper.jobs.fhe import engine_for  # noqa: E402
from shaper.ml import cnn  # noqa: E402
from shaper.ml.cnn import plan as P  # noqa: E402
from shaper.ml.cnn.params import cnn_parameters  # noqa: E402
from shaper.net import launch  # noqa: E402
from shaper.protocols import threshold_ckks as tc  # noqa: E402


def _party(session: Any, security: str, count: int, output: str) -> dict:
    params = cnn_parameters()
    engine = engine_for(session, security)
    t, sent = time.perf_counter(), session.stats.bytes_sent
    keys = tc.keygen(engine, params, rotations=P.rotation_steps(params), method="local", check=False,
                     budget=max(128, count + 2))
    keygen = {"seconds": time.perf_counter() - t, "bytes_sent": session.stats.bytes_sent - sent}
    images = cnn.mnist.sample()[0][:count] / 255.0 if session.index == 0 else None
    model = cnn.bundled() if session.index == 1 else None
    t, sent = time.perf_counter(), session.stats.bytes_sent
    report = infer_job(session, keys, images=images, model=model, output=output)
    job = {"seconds": time.perf_counter() - t, "bytes_sent": session.stats.bytes_sent - sent}
    out = {"keygen": keygen, "job": job, "phases": report["phases"]}
    if "predicted" in report:
        out["predicted"] = np.asarray(report["predicted"]).tolist()
    return out


def run(security: str, count: int, output: str) -> dict:
    parties = launch(2, _party, security, count, output, timeout=None)
    client = parties[0]
    plain = cnn.bundled().forward(cnn.mnist.sample()[0][:count] / 255.0).argmax(1)
    return {"security": security, "output": output,
            "keygen_seconds": max(p["keygen"]["seconds"] for p in parties),
            "keygen_bytes": max(p["keygen"]["bytes_sent"] for p in parties),
            "job_seconds": max(p["job"]["seconds"] for p in parties),
            "job_bytes": max(p["job"]["bytes_sent"] for p in parties),
            "per_image_seconds": max(p["job"]["seconds"] for p in parties) / count,
            "phases": client["phases"],
            "same_as_plaintext": int(np.sum(np.asarray(client["predicted"]) == plain))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = [run("passive", args.images, "logits"), run("active", args.images, "label")]
    passive, active = rows
    ratios = {k: active[k] / passive[k] for k in ("keygen_seconds", "keygen_bytes", "job_seconds", "job_bytes")}
    for r in rows:
        print(f"{r['security']:>8s} ({r['output']}): keys {r['keygen_seconds']:.1f} s {r['keygen_bytes'] / 1e6:.0f} MB; "
              f"job {r['job_seconds']:.1f} s {r['job_bytes'] / 1e6:.0f} MB ({r['per_image_seconds']:.3f} s per image); "
              f"{r['same_as_plaintext']}/{args.images} as the plaintext model")
        for p in r["phases"]:
            print(f"    {p['name']:<28s} {p['seconds']:8.2f} s {p['bytes_sent'] / 1e6:9.1f} MB")
    print("active / passive: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    if args.json:
        write_json(args.json, {"images": args.images, "rows": rows, "ratios": ratios})


if __name__ == "__main__":
    main()
