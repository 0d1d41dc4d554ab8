"""Threshold CKKS beside an earlier release (issue 34's acceptance), side by side: the same workload
code run alternately in two interpreters (each with its own install), medians and ratios. The
sibling of ``release_compare.py`` (same method, metrics in their own units, not only seconds).

    git worktree add /tmp/prev 0400b94 && python3 -m venv /tmp/prev/.venv && /tmp/prev/.venv/bin/pip install -e /tmp/prev
    python benchmarks/threshold_compare.py --old /tmp/prev/.venv/bin/python --json benchmarks/results/threshold_compare.json

Every workload runs 2 parties as processes over loopback TLS (``shaper.net.launch``, forked, one
kernel worker each) at the CNN's parameters (``cnn_parameters()``: N = 2^14, q = 60 + 6 x 53 bits,
p = 60 bits, scale 2^53). The code branches on ``hasattr(tc, "encrypt_jointly")`` where the APIs
differ (the earlier release: ``decrypt_many(engine, keys.share, cts)`` with jointly sampled
edaBits smudging; this one: ``decrypt_many(engine, keys, cts)`` of accounted ciphertexts, each
party flooding by the worst case).

Workloads:

  tckks-decrypt  joint decryption of a batch of --batch ciphertexts (20), each party's CPU
                 (``time.process_time`` in the party's process) and bytes sent
                 (``session.stats.bytes_sent``) per ciphertext, the larger of the two parties; after
                 an untimed one-ciphertext warm-up, also one single decryption. Ciphertexts:
                 "fresh" (level 6) and "level 0" (the CNN's output level). Earlier release: encrypted
                 under the joint public key (a shared seed, so both parties hold the same ones),
                 level 0 by six squarings (``rescale(square(x))``, as ``chain`` does). This one: ``encrypt_jointly`` (values
                 |x| <= 1 from party 0), level 0 by the agreed evaluation ``chain(["square"] * 6)``
                 (``evaluate``), and also "level 0 input" (``encrypt_jointly(..., level=0)``, the
                 smallest error bound). Also the precision -log2 max|error| of the batch.
  tckks-keygen   ``shaper.jobs.fhe.keygen_job`` (pk + relinearisation key, no rotations, method
                 "exact", check on): wall seconds (the slower party), CPU seconds and bytes sent
                 per party (the larger), and party 0's phases.
  tckks-keygen-ot-unchecked
                 the same, with the OT extension's consistency check (a later hardening release's,
                 on by default) switched off on the new side: threshold CKKS's own cost.
  cnn-2party     ``shaper.jobs.cnn.demo_local(2, --images, "local", ("image", "model"), False)``:
                 wall seconds of the whole job, per image with and without key generation, key
                 generation, both parties' CPU seconds together (the reaped party processes'
                 ``RUSAGE_CHILDREN``, key generation included: on a machine with fewer free cores
                 than parties the wall times carry the wait for a CPU), and party 0's phases.

A ratio is new / old: 1.00 the same, below 1 cheaper. Machines are noisy: runs alternate (old,
new; new, old; ...) and the median of ``--repeats`` is kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

from meta import machine, write_json
from release_compare import alternate, comparison_options, comparison_sides, run_code

COMMON = """
    import numpy as np
    from shaper.crypto import ckks
    from shaper.crypto.prg import Prg
    from shaper.jobs.fhe import engine_for
    from shaper.ml.cnn.params import CNN_CHAIN, cnn_parameters
    from shaper.net import launch
    from shaper.protocols import threshold_ckks as tc
    NEW = hasattr(tc, "encrypt_jointly")
"""

WORKLOADS = {
    "tckks-decrypt": """
        def job(session, count):
            params = cnn_parameters()
            engine = engine_for(session)
            keys = tc.keygen(engine, params)
            xs = np.random.default_rng(7).uniform(-1.0, 1.0, (count, params.slots))
            depth = params.max_level
            sets = {}
            if NEW:
                mine = xs if session.index == 0 else None
                fresh = tc.encrypt_jointly(engine, keys, mine, value_bound=1.0, tag="bench fresh")
                sets["fresh"] = (fresh, xs)
                sets["level 0"] = (tc.evaluate(keys, tc.chain(["square"] * depth), fresh), xs ** (2 ** depth))
                sets["level 0 input"] = (tc.encrypt_jointly(engine, keys, mine, value_bound=1.0, level=0,
                                                            tag="bench level 0"), xs)
                share = keys
            else:
                enc, ev = ckks.Encoder(params), ckks.Evaluator(params, keys.relin)
                fresh = [ckks.encrypt(keys.public, enc.encode(x), Prg(bytes([k % 256]) * 32)) for k, x in enumerate(xs)]
                low = []
                for ct in fresh:
                    for _ in range(depth):
                        ct = ev.rescale(ev.square(ct))
                    low.append(ct)
                sets["fresh"] = (fresh, xs)
                sets["level 0"] = (low, xs ** (2 ** depth))
                share = keys.share
            tc.decrypt_many(engine, share, sets["fresh"][0][:1])  # warm-up, untimed
            stats = session.stats
            out = {}
            def measure(label, cts, want):
                t0, c0, b0 = time.perf_counter(), time.process_time(), stats.bytes_sent
                got = tc.decrypt_many(engine, share, cts)
                wall, cpu, sent = time.perf_counter() - t0, time.process_time() - c0, stats.bytes_sent - b0
                err = float(np.max(np.abs(np.asarray(got).real[:, :want.shape[1]] - want[:len(cts)])))
                out[label] = {"cpu": cpu / len(cts), "bytes": sent / len(cts), "wall": wall / len(cts),
                              "level": cts[0].level, "error": err}
            for label, (cts, want) in sets.items():
                measure(f"{label}, batch of {len(cts)}", cts, want)
            measure("fresh, single", sets["fresh"][0][1:2], sets["fresh"][1][1:2])
            return out
        res = launch(2, job, BATCH, start_method="fork", timeout=3600)
        result = {}
        for label in res[0]:
            result[f"{label}: CPU ms/ct (max party)"] = 1e3 * max(r[label]["cpu"] for r in res)
            result[f"{label}: CPU ms/ct party 0"] = 1e3 * res[0][label]["cpu"]
            result[f"{label}: CPU ms/ct party 1"] = 1e3 * res[1][label]["cpu"]
            result[f"{label}: MB sent/ct (max party)"] = max(r[label]["bytes"] for r in res) / 1e6
            result[f"{label}: wall ms/ct (max party)"] = 1e3 * max(r[label]["wall"] for r in res)
            result[f"{label}: precision bits"] = -float(np.log2(max(r[label]["error"] for r in res)))
    """,
    "tckks-keygen": """
        from shaper.jobs.fhe import keygen_job
        def job(session):
            c0 = time.process_time()
            r = keygen_job(session, CNN_CHAIN, method="exact", check=True)
            r["cpu"] = time.process_time() - c0
            return r
        res = launch(2, job, start_method="fork", timeout=3600)
        result = {"wall s (slower party)": max(r["seconds"] for r in res),
                  "CPU s (max party)": max(r["cpu"] for r in res),
                  "MB sent (max party)": max(r["bytes_sent"] for r in res) / 1e6,
                  "MB sent party 0": res[0]["bytes_sent"] / 1e6, "MB sent party 1": res[1]["bytes_sent"] / 1e6}
        for p in res[0]["phases"]:
            result[f"phase {p['name']}: s (party 0)"] = p["seconds"]
            result[f"phase {p['name']}: MB (party 0)"] = p["bytes_sent"] / 1e6
    """,
    "cnn-2party": """
        import resource
        from shaper.jobs.cnn import demo_local
        def children_cpu():
            u = resource.getrusage(resource.RUSAGE_CHILDREN)
            return u.ru_utime + u.ru_stime
        t, c = time.perf_counter(), children_cpu()
        res = demo_local(2, IMAGES, "local", ("image", "model"), False)
        wall, cpu = time.perf_counter() - t, children_cpu() - c
        r0 = res[0]
        keygen = r0["keygen"]["seconds"]
        result = {"whole job wall s": wall, "per image wall s (incl. keygen)": wall / IMAGES,
                  "per image wall s (excl. keygen)": (wall - keygen) / IMAGES, "keygen s": keygen,
                  "CPU s, both parties (incl. keygen)": cpu,
                  "MB sent party 0 (inference phases)": sum(p["bytes_sent"] for p in r0["phases"]) / 1e6}
        for p in r0["phases"]:
            result[f"phase {p['name']}: s"] = p["seconds"]
        if "accuracy" in r0:
            result["accuracy"] = r0["accuracy"]
    """,
}
# The same key generation with the OT extension's consistency check off on the new side: the check
# came with a later hardening release (about 18 % of OT throughput, benchmarks/results/ot_check.json),
# so this row isolates threshold CKKS's own change.
WORKLOADS["tckks-keygen-ot-unchecked"] = """
        import inspect
        import shaper.protocols.ot as ot_module
        if "check" in inspect.signature(ot_module.OtLinks.__init__).parameters:
            checked_init = ot_module.OtLinks.__init__
            def unchecked_init(self, session, k=ot_module.K, check=True, label="ot"):
                checked_init(self, session, k, False, label)
            ot_module.OtLinks.__init__ = unchecked_init
""" + WORKLOADS["tckks-keygen"]
PRELUDE = "import json, subprocess, sys, tempfile, time\nfrom pathlib import Path\ntmp = tempfile.mkdtemp()\n"


def run_one(python: str, tree: Path, name: str, settings: dict) -> dict:
    """One run of workload ``name`` under ``python`` in ``tree``: its metrics."""
    return run_code(python, tree, name, PRELUDE + "".join(f"{k} = {v!r}\n" for k, v in settings.items())
                    + textwrap.dedent(COMMON) + textwrap.dedent(WORKLOADS[name]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    comparison_options(ap, WORKLOADS)
    ap.add_argument("--batch", type=int, default=20, help="ciphertexts per joint decryption (tckks-decrypt)")
    ap.add_argument("--images", type=int, default=20, help="images of cnn-2party")
    ap.add_argument("--json", metavar="PATH", help="write the rows here (merged with the workloads already there)")
    args = ap.parse_args()
    sides = comparison_sides(args)
    old_tree, new_tree = sides["old"][1], sides["new"][1]
    settings = {"BATCH": args.batch, "IMAGES": args.images}
    rows, errors = [], {}
    for name in args.workloads:
        try:
            samples = alternate(args.repeats, lambda side, name=name: run_one(*sides[side], name, settings))
        except (RuntimeError, subprocess.TimeoutExpired) as exc:  # a failed workload is reported, the rest still run
            errors[name] = str(exc)[-3000:]
            print(f"{name}: FAILED\n{errors[name]}", file=sys.stderr, flush=True)
            continue
        new_commit = _commit(new_tree)
        metrics = list(samples["old"]) + [m for m in samples["new"] if m not in samples["old"]]
        for metric in metrics:
            o, n = samples["old"].get(metric), samples["new"].get(metric)
            old = statistics.median(o) if o else None
            new = statistics.median(n) if n else None
            ratio = new / old if old and new is not None else None
            rows.append({"workload": name, "metric": metric, "old": old, "new": new, "ratio": ratio,
                         "old_samples": o, "new_samples": n, "new_commit": new_commit})
            print(f"{name:14s} {metric:52s} old {_show(old)}  new {_show(new)}  new/old "
                  f"{'-' if ratio is None else f'{ratio:5.2f}'}", flush=True)
    if args.json:
        path = Path(args.json)
        kept = []
        if path.is_file():  # a rerun of some workloads keeps the others' rows
            kept = [r for r in json.loads(path.read_text()).get("rows", []) if r["workload"] not in args.workloads]
        write_json(path, {"benchmark": "threshold_compare", "old": str(old_tree),
                          "old_commit": _commit(old_tree), "repeats": args.repeats, "settings": settings,
                          "rows": kept + rows, "errors": errors})
    print(json.dumps({"machine": machine()}, default=str)[:300])
    return 1 if errors else 0


def _show(value: float | None) -> str:
    return "-" if value is None else f"{value:10.4g}"


def _commit(tree: Path) -> str | None:
    """The tree's commit, "+dirty" when tracked files under src/ or native/ differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tree, capture_output=True, text=True, timeout=20,
                              check=False).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "native")
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) or None


if __name__ == "__main__":
    sys.exit(main())
