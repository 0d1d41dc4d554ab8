"""Threshold CKKS on the passive and on the active engine, side by side in one run: key
generation, one joint encryption and one joint decryption of a fresh ciphertext, 2 parties as
processes over loopback TLS (``shaper.net.launch``, one kernel worker each), at the CNN's
parameters by default (N = 2^14, q = 60 + 6 x 53 bits, p = 60 bits, scale 2^53).

    python benchmarks/threshold_active.py --json benchmarks/results/threshold_active.json

Engines:

  passive   today's default: ``engine_for(session)`` (OT-extension triples), keys by
            ``method`` (--passive-method, default "exact": errors sampled in the MPC);
  active    ``engine_for(session, "active")``: MACs, checked openings; keys with
            ``method="local"`` (every party's error a range-checked input; "exact" samples them
            with the active MPC Gaussian, about 30x slower still: --active-method exact).

Per engine, the larger of the two parties: wall seconds (the slower party), CPU seconds
(``time.process_time`` in the party's process) and bytes sent (``session.stats.bytes_sent``) for

  keygen    public and relinearisation keys (--rotations adds rotation keys), no check decryption;
  encrypt   one joint input of --values values (|x| <= 1), owner party 0;
  decrypt   the joint decryption of that fresh input to every party, and its precision;
  floods ahead    (active only) ``prepare_floods`` for --ahead decryptions in one batch, per
            decryption: every party's range-checked flood made before the ciphertext exists;
  decrypt online  the same decryption taking a flood made ahead (median of --ahead): on the
            active engine only the MAC-checked opening of c_0 + c_1 [s] + [f] is left.

Runs alternate (passive, active; active, passive; ...) and the median of --repeats is kept.
A ratio is active / passive.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from meta import write_json  # noqa: E402
from shaper.jobs.fhe import engine_for, parameters  # noqa: E402
from shaper.ml.cnn.params import CNN_CHAIN, CNN_ROTATIONS  # noqa: E402
from shaper.net import launch  # noqa: E402
from shaper.protocols import threshold_ckks as tc  # noqa: E402
from shaper.protocols.ot import links_for  # noqa: E402


def _step(session: Any, fn: Any) -> tuple[Any, dict]:
    session.barrier("bench-step")
    wall, cpu, sent = time.perf_counter(), time.process_time(), session.stats.bytes_sent
    out = fn()
    return out, {"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                 "bytes": session.stats.bytes_sent - sent}


def _party(session: Any, chain: tuple, security: str, method: str, rotations: list[int], values: int,
           insecure: bool, batch: int) -> dict:
    params = parameters(chain, insecure)
    engine = engine_for(session, security)
    links_for(session).ensure([p for p in range(session.n) if p != session.index])  # base OTs outside timings
    keys, kg = _step(session, lambda: tc.keygen(engine, params, rotations=rotations, method=method, check=False))
    values = min(values, params.slots)
    x = np.linspace(-1, 1, values)
    (ct,), enc = _step(session, lambda: tc.encrypt_jointly(engine, keys, x if session.index == 0 else None,
                                                            value_bound=1.0))
    got, dec = _step(session, lambda: tc.decrypt(engine, keys, ct))
    flood = tc.plan_flood(keys, [ct])
    dec["precision_bits_guaranteed"] = flood.precision_bits
    dec["precision_bits_measured"] = float(-np.log2(np.max(np.abs(got[:values] - x))))
    # the same decryption with its floods made ahead (a no-op on the passive engine): the
    # offline step per decryption (a batch of --ahead) and the online decryption
    _, ahead = _step(session, lambda: tc.prepare_floods(engine, keys, batch, [ct]))
    ahead = {k: v / batch for k, v in ahead.items()}
    online = []
    for _ in range(batch):
        got, o = _step(session, lambda: tc.decrypt(engine, keys, ct))
        online.append(o)
    on = {k: statistics.median(o[k] for o in online) for k in online[0]}
    on["precision_bits_measured"] = float(-np.log2(np.max(np.abs(got[:values] - x))))
    return {"keygen": kg, "encrypt": enc, "decrypt": dec, "floods ahead": ahead, "decrypt online": on}


STEPS = ("keygen", "encrypt", "decrypt", "floods ahead", "decrypt online")


def run(chain: tuple, security: str, method: str, rotations: list[int], values: int, insecure: bool,
        batch: int) -> dict:
    res = launch(2, _party, chain, security, method, rotations, values, insecure, batch, workers_per_party=1,
                 timeout=7200)
    out: dict[str, dict] = {}
    for step in STEPS:
        rows = [r[step] for r in res]
        out[step] = {"seconds": max(r["seconds"] for r in rows), "cpu": max(r["cpu"] for r in rows),
                     "bytes": max(r["bytes"] for r in rows)}
        for k in ("precision_bits_guaranteed", "precision_bits_measured"):
            if k in rows[0]:
                out[step][k] = min(r[k] for r in rows)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logn", type=int, default=None, help="ring degree 2^LOGN with a small test chain "
                                                         "(50, 40, 40 : 50 : 40; insecure) instead of the CNN's")
    ap.add_argument("--rotations", default="", metavar="R,...", help="rotation keys to include in key generation "
                    "('cnn': the CNN's plan's steps)")
    ap.add_argument("--values", type=int, default=1000, help="values in the joint input (default 1000)")
    ap.add_argument("--passive-method", default="exact", choices=("exact", "local"))
    ap.add_argument("--active-method", default="local", choices=("exact", "local"))
    ap.add_argument("--ahead", type=int, default=8, help="floods made ahead in one batch, then as many online "
                    "decryptions (default 8)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    insecure = args.logn is not None
    chain = CNN_CHAIN if args.logn is None else (1 << args.logn, (50, 40, 40), 50, 40)
    rotations = (list(CNN_ROTATIONS) if args.rotations == "cnn" else
                 [int(r) for r in args.rotations.split(",") if r.strip()])
    runs: dict[str, list[dict]] = {"passive": [], "active": []}
    for k in range(args.repeats):
        order = ("passive", "active") if k % 2 == 0 else ("active", "passive")
        for security in order:
            method = args.passive_method if security == "passive" else args.active_method
            print(f"-- {security} ({method} keys), run {k + 1} of {args.repeats} ...", file=sys.stderr, flush=True)
            runs[security].append(run(chain, security, method, rotations, args.values, insecure, args.ahead))
    result: dict[str, Any] = {}
    for security, rs in runs.items():
        result[security] = {step: {m: statistics.median(r[step][m] for r in rs) for m in rs[0][step]}
                            for step in rs[0]}
    ratios = {step: {m: result["active"][step][m] / result["passive"][step][m] for m in ("seconds", "cpu", "bytes")}
              for step in result["passive"] if step != "floods ahead"}
    print(f"\nthreshold CKKS, 2 parties, N = {chain[0]}, {len(rotations)} rotation keys; active / passive")
    print(f"{'step':14s} {'passive s':>10s} {'active s':>10s} {'x time':>7s} {'x CPU':>7s} {'passive MB':>11s} "
          f"{'active MB':>10s} {'x bytes':>8s}")
    for step, r in ratios.items():
        p, a = result["passive"][step], result["active"][step]
        print(f"{step:14s} {p['seconds']:10.3f} {a['seconds']:10.3f} {r['seconds']:7.1f} {r['cpu']:7.1f} "
              f"{p['bytes'] / 1e6:11.2f} {a['bytes'] / 1e6:10.2f} {r['bytes']:8.1f}")
    f = result["active"]["floods ahead"]
    print(f"floods made ahead (active, per decryption, batches of {args.ahead}): {f['seconds']:.3f} s, "
          f"{f['cpu']:.3f} s CPU, {f['bytes'] / 1e6:.2f} MB; 'decrypt online' is the decryption that takes one")
    d = result["active"]["decrypt"]
    print(f"decryption precision: passive {result['passive']['decrypt']['precision_bits_guaranteed']:.1f} bits "
          f"expected ({result['passive']['decrypt']['precision_bits_measured']:.1f} measured); active "
          f"{d['precision_bits_guaranteed']:.1f} guaranteed against deviating floods ({d['precision_bits_measured']:.1f} "
          "measured)")
    if args.json:
        write_json(args.json, {"meta": {"parties": 2, "transport": "loopback TLS 1.3", "cores_per_party": 1,
                                        "chain": [chain[0], list(chain[1]), chain[2], chain[3]],
                                        "rotations": rotations, "values": args.values, "repeats": args.repeats,
                                        "ahead": args.ahead,
                                        "passive_method": args.passive_method, "active_method": args.active_method},
                               "results": result, "active_over_passive": ratios})
        print(f"written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
