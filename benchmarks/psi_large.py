#!/usr/bin/env python
"""ECDH PSI at scale with a kill and a resume: two ``shaper psi`` processes (the real CLI) over
loopback TLS on CSV files of 2^k ids each (50 % shared, each file in its own random order).

The learner of the run (``a``: with ``--to both`` the party of lower index) is killed with
SIGKILL once it has blinded ``--kill-at`` of the peer's points (rounded up to whole chunks, so
that the resumed run has at least one complete chunk to keep); its peer then stops with an
error. Both are started again with ``--resume`` on the same checkpoint directory and finish. The
script reports each run's wall time and each process's peak RSS (``wait4``), checks both output
files against the intersection computed with numpy, and checks that the resumed run did not
start over (the learner's chunks on disk at the kill are not recomputed).

The kill is aimed at a moment in a running process, so it can come too late: at small sizes (a
few chunks of 2^16 ids or fewer, on a fast machine) the learner may finish before the watcher
sees its checkpoint reach the mark, or between that and the signal. Then there is nothing to resume:
the script says so, checks the first run's outputs instead, and reports ``"killed": null`` and
``"resumed_run": null``; no size can guarantee that the kill lands, only make it likely.

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
from shaper.protocols.psi.ecdh import CHUNK, MATCH  # points per message; bytes per value in peer.bin

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
           "--data", str(folder / f"{me}.csv"), "--id-column", "customer", "--out", str(folder / f"{me}.out.csv"),
           "--checkpoint-dir", str(folder / "ckpt")] + (["--resume"] if resume else [])
    return subprocess.Popen(cmd, stdout=open(folder / f"{me}.{'resume' if resume else 'first'}.log", "w"),
                            stderr=subprocess.STDOUT)


def reap(proc: subprocess.Popen, block: bool = True) -> dict | None:
    """The process's exit status, peak RSS and CPU time once it has exited (``wait4``, which also
    reaps it: never ``Popen.poll``/``wait`` on these processes, which would reap it without the
    usage); None if ``block`` is false and it is still running."""
    pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": proc.returncode, "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}


def kill_mark(n: int, kill_at: float) -> int:
    """Bytes of the learner's peer.bin at which it is killed: ``kill_at`` of the peer's n points,
    rounded up to whole chunks (a chunk still being written when the learner dies is cut off on
    resume; a kill inside the first chunk would leave nothing to resume)."""
    points = -(-max(1, int(kill_at * n)) // CHUNK) * CHUNK
    return min(points, n) * MATCH


def run(folder: Path, n: int, kill_at: float | None) -> dict:
    """Both parties, to the end; with ``kill_at``, the learner is killed on the way (if it has not
    finished by then: ``killed`` is None when the kill came too late)."""
    t0 = time.perf_counter()
    procs = {me: start(folder, me, kill_at is None) for me in ("a", "b")}
    out: dict[str, dict] = {}
    killed = None
    if kill_at is not None:  # watch the learner's peer.bin grow to the mark
        mark = kill_mark(n, kill_at)
        peer_bin = folder / "ckpt" / "a" / "psi-ecdh" / "peer.bin"
        while "a" not in out:
            if peer_bin.exists() and peer_bin.stat().st_size >= mark:
                os.kill(procs["a"].pid, signal.SIGKILL)  # not reaped yet: the pid is still a's
                done_s, points = time.perf_counter() - t0, peer_bin.stat().st_size // MATCH
                out["a"] = reap(procs["a"])
                if out["a"]["exit"] == -signal.SIGKILL:  # otherwise it had exited before the signal
                    killed = {"after_s": round(done_s, 1), "peer_points_done": points}
                break
            status = reap(procs["a"], block=False)
            if status is not None:
                out["a"] = status
                break
            time.sleep(0.05)
    for me, p in procs.items():
        if me not in out:
            out[me] = reap(p)
    return {"seconds": round(time.perf_counter() - t0, 1), "killed": killed, "parties": out}


def check_outputs(folder: Path, shared: np.ndarray) -> None:
    import pyarrow.csv as pacsv

    for me in ("a", "b"):
        got = pacsv.read_csv(folder / f"{me}.out.csv").column("customer").to_pylist()
        numbers = np.array([int(s[5:]) for s in got])
        assert np.array_equal(numbers, shared), f"{me}'s aligned rows are wrong"
    print("both outputs equal the intersection (numpy), in the same order", flush=True)


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
        assert shaper(["certs", "--names", "a", "b", "--out", str(folder / "certs"), "--write-parties",
                       str(folder / "parties.toml"), "--base-port", str(base)]) == 0
        first = run(folder, n, args.kill_at)
        resumed, log = None, None
        if first["killed"] is None:
            logs = "\n".join((folder / f"{me}.first.log").read_text() for me in ("a", "b"))
            assert all(p["exit"] == 0 for p in first["parties"].values()), logs
            print(f"first run: the learner finished before the kill landed (2^{args.log_n} ids are too few to "
                  f"stop it at {args.kill_at:.0%}), so there is no killed run to resume: resume check skipped; "
                  f"{first['parties']}", flush=True)
            check_outputs(folder, shared)
        else:
            print(f"first run: killed after {first['killed']}, {first['parties']}", flush=True)
            assert first["parties"]["b"]["exit"] != 0  # the peer stops with an error
            resumed = run(folder, n, None)
            print(f"resumed run: {resumed}", flush=True)
            log = (folder / "a.resume.log").read_text()
            assert all(p["exit"] == 0 for p in resumed["parties"].values()), log
            said = [line for line in log.splitlines() if line.startswith("resuming the killed run")]
            assert said and " 0 of the peer's were done" not in said[0], f"the run started over: {log}"
            check_outputs(folder, shared)
    runs = [r for r in (first, resumed) if r is not None]
    result = {"meta": {"transport": "loopback TLS 1.3, two `shaper psi` processes", "n": n, "overlap": 0.5},
              "first_run": first, "resumed_run": resumed,
              "resume_log": log.strip().splitlines()[-3:] if log is not None else None,
              "total_seconds": round(sum(r["seconds"] for r in runs), 1),
              "peak_rss_mib": max(p["peak_rss_mib"] for r in runs for p in r["parties"].values())}
    print(json.dumps(result, indent=1))
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
