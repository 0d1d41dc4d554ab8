#!/usr/bin/env python
"""ECDH PSI at scale with a kill and a resume: two ``shaper psi`` processes (the real CLI) over
loopback TLS on CSV files of 2^k ids each (50 % shared, each file in its own random order).

The learner of the run (``a``: with ``--to both`` the party of lower index) is killed with
SIGKILL once it has blinded ``--kill-at`` of the peer's points; its peer then stops with an
error. Both are started again with ``--resume`` on the same checkpoint directory and finish. The
script reports each run's wall time and each process's peak RSS (``wait4``), checks both output
files against the intersection computed with numpy, and checks that the resumed run did not
start over (the learner's chunks on disk at the kill are not recomputed).

  python benchmarks/psi_large.py --log-n 24 --json benchmarks/results/psi_2e24.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from meta import write_json

ROOT = Path(__file__).resolve().parent.parent


def make_files(n: int, folder: Path, seed: int = 0) -> np.ndarray:
    """Two CSVs ``a.csv``/``b.csv`` of n ids (``cust-<9 digits>``) with n/2 in common; returns
    the shared numbers, sorted."""
    rng = np.random.default_rng(seed)
    pool = rng.permutation(4 * n)[: n + n // 2]
    sets = {"a": pool[:n], "b": np.concatenate([pool[: n // 2], pool[n:]])}
    for name, ids in sets.items():
        ids = ids[rng.permutation(len(ids))]
        with open(folder / f"{name}.csv", "w") as fh:
            fh.write("customer\n")
            for start in range(0, len(ids), 1 << 20):
                fh.write("".join(f"cust-{i:09d}\n" for i in ids[start:start + (1 << 20)].tolist()))
    return np.sort(pool[: n // 2])


def start(folder: Path, me: str, resume: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "shaper", "psi", "--parties", str(folder / "parties.toml"), "--me", me,
           "--input", str(folder / f"{me}.csv"), "--id-column", "customer", "--output", str(folder / f"{me}.out.csv"),
           "--checkpoint-dir", str(folder / "ckpt")] + (["--resume"] if resume else [])
    return subprocess.Popen(cmd, stdout=open(folder / f"{me}.{'resume' if resume else 'first'}.log", "w"),
                            stderr=subprocess.STDOUT)


def wait(proc: subprocess.Popen) -> dict:
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": proc.returncode, "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}


def run(folder: Path, n: int, kill_at: float | None) -> dict:
    t0 = time.perf_counter()
    procs = {me: start(folder, me, kill_at is None) for me in ("a", "b")}
    killed = None
    if kill_at is not None:  # watch the learner's peer.bin grow to kill_at of the peer's points
        target = int(kill_at * n) * 16
        peer_bin = folder / "ckpt" / "a" / "psi-ecdh" / "peer.bin"
        while procs["a"].poll() is None:
            if peer_bin.exists() and peer_bin.stat().st_size >= target:
                os.kill(procs["a"].pid, signal.SIGKILL)
                killed = {"after_s": round(time.perf_counter() - t0, 1), "peer_points_done": peer_bin.stat().st_size // 16}
                break
            time.sleep(0.5)
    out = {me: wait(p) for me, p in procs.items()}
    return {"seconds": round(time.perf_counter() - t0, 1), "killed": killed, "parties": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log-n", type=int, default=24)
    ap.add_argument("--kill-at", type=float, default=0.5, help="fraction of the peer's points blinded at the kill")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    n = 1 << args.log_n
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        shared = make_files(n, folder)
        print(f"2^{args.log_n} ids per party written in {time.perf_counter() - t0:.0f} s", flush=True)
        import socket

        from shaper.cli import main as shaper

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        base = sock.getsockname()[1]
        sock.close()
        assert shaper(["certs", "--parties", "a", "b", "--out", str(folder / "certs"), "--write-parties",
                       str(folder / "parties.toml"), "--base-port", str(base)]) == 0
        first = run(folder, n, args.kill_at)
        print(f"first run: killed after {first['killed']}, {first['parties']}", flush=True)
        assert first["killed"] and first["parties"]["a"]["exit"] == -signal.SIGKILL
        assert first["parties"]["b"]["exit"] != 0  # the peer stops with an error
        resumed = run(folder, n, None)
        print(f"resumed run: {resumed}", flush=True)
        log = (folder / "a.resume.log").read_text()
        assert all(p["exit"] == 0 for p in resumed["parties"].values()), log
        said = [line for line in log.splitlines() if line.startswith("resuming the killed run")]
        assert said and " 0 of the peer's were done" not in said[0], f"the run started over: {log}"
        for me in ("a", "b"):
            import pyarrow.csv as pacsv

            got = pacsv.read_csv(folder / f"{me}.out.csv").column("customer").to_pylist()
            numbers = np.array([int(s[5:]) for s in got])
            assert np.array_equal(numbers, shared), f"{me}'s aligned rows are wrong"
        print("both outputs equal the intersection (numpy), in the same order", flush=True)
    result = {"meta": {"transport": "loopback TLS 1.3, two `shaper psi` processes", "n": n, "overlap": 0.5},
              "first_run": first, "resumed_run": resumed, "resume_log": log.strip().splitlines()[-3:],
              "total_seconds": round(first["seconds"] + resumed["seconds"], 1),
              "peak_rss_mib": max(p["peak_rss_mib"] for r in (first, resumed) for p in r["parties"].values())}
    print(json.dumps(result, indent=1))
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
