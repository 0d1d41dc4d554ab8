"""This tree beside an earlier release, side by side: the same workloads through public APIs that
both have, run alternately in two interpreters (each with its own install), medians and ratios.

    git worktree add /tmp/prev <rev> && (cd /tmp/prev && python3 -m venv .venv && .venv/bin/pip install .)
    python benchmarks/release_compare.py --old /tmp/prev/.venv/bin/python --json benchmarks/results/release_compare.json

Workloads (each a few seconds): the party runtime (``net.py``: a 100 MB array over loopback TLS
between two processes, and small-message round trips), AHE (2048-bit DJN Paillier encryption, decryption, ciphertext
additions and plaintext products), hybrid 2PC (Beaver products, H2S/S2H over two in-memory
parties), replicated AES-128 (the Bristol circuit in 3PC), n-party MPC (OT triples and ternary
sampling, 3 parties), CKKS (N = 2^14 multiply + relinearise + rescale, rotations) and vertical
logistic regression (the SHAPER-shaped 100k-row sparse workload of ``lr_shaper.py``, 2 parties over
loopback TLS without shaping, one epoch). A ratio
is new / old time: 1.00 is the same speed, below 1 faster. Machines are noisy: runs alternate
and the median of ``--repeats`` is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from meta import machine, write_json

WORKLOADS = {
    "ahe": """
        import numpy as np
        from shaper.crypto import paillier
        pk, sk = paillier.keygen(2048)
        x = np.arange(1000) - 500
        sk.decrypt(pk.encrypt(x[:50]))  # workers started and key tables built outside the timing
        t = time.perf_counter(); enc = pk.encrypt(x); t_enc = time.perf_counter() - t
        t = time.perf_counter(); y = enc + enc; z = enc * 3; t_ops = time.perf_counter() - t
        t = time.perf_counter(); out = sk.decrypt(z); t_dec = time.perf_counter() - t
        assert (out == 3 * x).all()
        result = {"encrypt 1000": t_enc, "add + mul 1000": t_ops, "decrypt 1000": t_dec}
    """,
    "net": """
        out = subprocess.run([sys.executable, "benchmarks/net.py", "--size-mb", "100", "--repeats", "5", "--pings", "3000",
                              "--shaped-mb", "1", "--json", str(Path(tmp) / "net.json")], capture_output=True,
                             text=True, timeout=1200)
        assert out.returncode == 0, out.stderr[-2000:]
        data = json.loads((Path(tmp) / "net.json").read_text())
        row = data["results"]
        # times (lower is better) so the ratio reads like the others: seconds per 100 MB, per round trip
        result = {"TLS 100 MB array": 100 / row["tls_throughput_mb_s"], "round trip": row["round_trip_us"] * 1e-6}
    """,
    "hybrid": """
        import warnings
        import numpy as np
        from shaper.net import run_in_memory
        from shaper.protocols import Hybrid2PC, InsecureDealer
        def job(session):
            warnings.simplefilter("ignore")
            e = Hybrid2PC.setup(session, key_bits=2048, triple_source=InsecureDealer())
            x = e.share(np.linspace(-1, 1, 200_000), owner=0); y = e.share(np.linspace(1, 2, 200_000), owner=1)
            t = time.perf_counter(); z = (x * y).reveal(); beaver = time.perf_counter() - t
            v = e.share(np.linspace(-1, 1, 2000), owner=1)
            t = time.perf_counter()
            enc = e.s2h(v, key_owner=0)  # Enc under party 0's key, at party 1 (the sum of two ring shares: < 2^65)
            e.h2s(enc, holder=1, value_bits=66 if session.index == 1 else None)
            conv = time.perf_counter() - t
            return beaver, conv
        res = run_in_memory(2, job, timeout=600)
        result = {"Beaver 2e5": max(r[0] for r in res), "S2H + H2S 2000": max(r[1] for r in res)}
    """,
    "replicated-aes": """
        import numpy as np
        from shaper.circuits import bristol
        from shaper.net import run_in_memory
        from shaper.protocols import evaluate
        circuit = bristol.load("aes_128.txt")
        blocks = 4096
        rng = np.random.default_rng(1)
        key, pt = int(rng.integers(0, 2**62)), [int(v) for v in rng.integers(0, 2**62, blocks)]
        def job(session):
            inputs = [[key] * blocks if session.index == 0 else blocks, pt if session.index == 1 else blocks]
            t = time.perf_counter(); evaluate(session, circuit, inputs); return time.perf_counter() - t
        result = {"AES-128 4096 blocks": max(run_in_memory(3, job, timeout=600))}
    """,
    "mpc": """
        import warnings
        try:  # releases before the one additive engine
            from shaper.protocols.nparty import AdditiveNPC as Engine
        except ImportError:
            from shaper.protocols.additive import AdditiveEngine as Engine
        from shaper.net import run_in_memory
        from shaper.protocols import OtTriples
        P = (1 << 61) - 1
        def job(session):
            e = Engine(session, triple_source=OtTriples(), frac_bits=0)
            e.triple_source.elementwise(e, 1000)  # links set up outside the timing
            t = time.perf_counter(); e.triple_source.elementwise(e, 100_000); tri = time.perf_counter() - t
            t = time.perf_counter(); e.ternary(100_000, (P,)); ter = time.perf_counter() - t
            t = time.perf_counter(); e.gaussian(20_000, (P,)); gau = time.perf_counter() - t
            return tri, ter, gau
        res = run_in_memory(3, job, timeout=600)
        result = {"Z_2^64 triples 1e5": max(r[0] for r in res), "ternary 1e5": max(r[1] for r in res),
                  "gaussian 2e4": max(r[2] for r in res)}
    """,
    "ckks": """
        import numpy as np
        from shaper.crypto import ckks
        params = ckks.Parameters.from_literal(2**14, [60] + [53] * 6, 60, 53)
        keys = ckks.KeySet(params, rotations=[1, 2, 4, 8])
        enc = ckks.Encoder(params)
        ev = ckks.Evaluator(params, keys.relin, keys.galois)
        v = np.linspace(-1, 1, params.slots)
        ct = ckks.encrypt(keys.public, enc.encode(v))
        t = time.perf_counter()
        for _ in range(5):
            ev.mul_rescale(ct, ct)
        mul = (time.perf_counter() - t) / 5
        t = time.perf_counter()
        for r in (1, 2, 4, 8):
            ev.rotate(ct, r)
        rot = (time.perf_counter() - t) / 4
        result = {"mul+relin+rescale": mul, "rotation": rot}
    """,
    "lr": """
        script = Path("benchmarks/lr_shaper.py")
        out = subprocess.run([sys.executable, str(script), "--rows", "100000", "--epochs", "1", "--no-shaping",
                              "--no-sklearn", "--json", str(Path(tmp) / "lr.json")], capture_output=True, text=True,
                             timeout=3600)
        assert out.returncode == 0, out.stderr[-2000:]
        data = json.loads((Path(tmp) / "lr.json").read_text())
        rows = data["rows"] if isinstance(data, dict) and "rows" in data else data
        row = rows[0] if isinstance(rows, list) else rows
        result = {"LR 100k rows: epoch": row["seconds_per_epoch"][0], "LR 100k rows: whole job": row["wall_seconds"]}
    """,
}
PRELUDE = "import json, subprocess, sys, tempfile, time\nfrom pathlib import Path\ntmp = tempfile.mkdtemp()\n"


def run_one(python: str, tree: Path, name: str) -> dict:
    return run_code(python, tree, name, PRELUDE + textwrap.dedent(WORKLOADS[name]))


def run_code(python: str, tree: Path, name: str, code: str) -> dict:
    """Runs workload ``code`` (which sets ``result``) under ``python`` in ``tree``: its result."""
    code += "\nprint('RESULT ' + json.dumps(result))\n"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PYTHONPATH", None)
    out = subprocess.run([python, "-c", code], cwd=tree, capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed under {python}:\n{out.stderr[-3000:]}")
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def comparison_options(ap: argparse.ArgumentParser, workloads: dict) -> None:
    """The options every side-by-side comparison takes: the old interpreter and tree, the
    workloads, the repeats."""
    ap.add_argument("--old", required=True, metavar="PYTHON", help="the earlier release's interpreter (its own install)")
    ap.add_argument("--old-tree", metavar="DIR", help="its source tree (default: the interpreter's ../..)")
    ap.add_argument("--workloads", nargs="+", default=list(workloads), choices=list(workloads))
    ap.add_argument("--repeats", type=int, default=3)


def comparison_sides(args: argparse.Namespace) -> dict[str, tuple[str, Path]]:
    """{"old": (interpreter, tree), "new": (this interpreter, this tree)}. Not resolve(): a venv's
    python is a link to the base interpreter, whose ../.. is not the tree."""
    new_tree = Path(__file__).resolve().parent.parent
    old_tree = Path(args.old_tree) if args.old_tree else Path(os.path.abspath(args.old)).parent.parent.parent
    return {"old": (args.old, old_tree), "new": (sys.executable, new_tree)}


def alternate(repeats: int, run: Any) -> dict[str, dict[str, list[float]]]:
    """``run(side)`` (a metric -> value dict) ``repeats`` times per side, the sides alternating
    which goes first: every metric's samples per side."""
    samples: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for rep in range(repeats):
        for side in (("old", "new") if rep % 2 == 0 else ("new", "old")):
            for metric, value in run(side).items():
                samples[side].setdefault(metric, []).append(value)
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    comparison_options(ap, WORKLOADS)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    sides = comparison_sides(args)
    old_tree = sides["old"][1]
    rows = []
    for name in args.workloads:
        samples = alternate(args.repeats, lambda side, name=name: run_one(*sides[side], name))
        for metric in samples["new"]:
            old, new = statistics.median(samples["old"][metric]), statistics.median(samples["new"][metric])
            rows.append({"workload": name, "metric": metric, "old_s": old, "new_s": new, "ratio": new / old,
                         "old_samples": samples["old"][metric], "new_samples": samples["new"][metric]})
            print(f"{name:15s} {metric:32s} old {old:9.4f} s  new {new:9.4f} s  new/old {new / old:5.2f}", flush=True)
    if args.json:
        write_json(args.json, {"benchmark": "release_compare", "old": str(old_tree), "repeats": args.repeats,
                               "rows": rows})
    print(json.dumps({"machine": machine()}, default=str)[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
