#!/usr/bin/env python
"""Private set intersection: shaper's OT-based PSI (okvs) and ECDH (Ristretto255) against
openmined-psi, side by side in one run, with the speed-ups of okvs over each.

Each set size n: two CSV files of n ids each (50 % shared, each file in its own random order,
one payload column; header ``customer,value``, ids ``cust-%09d``). shaper runs both roles as
separate processes over loopback TLS 1.3 (``shaper.net.launch``, forked): each reads its CSV,
runs PSI with output to both parties (``order="id"``) and writes its aligned rows to a CSV; the
time is end to end (process start, TLS handshake, reading, protocol, writing). Both parties'
outputs are checked against the known shared ids (same rows, same order). Per party: protocol,
read and write seconds, bytes sent (per item, and bits per item: bytes_sent * 8 / n) and peak
RSS (``ru_maxrss``; a forked party starts with the launcher's resident pages, recorded as
``launcher_rss_mib``, which is why the launcher holds no ids while the parties run). okvs runs
at every size; ECDH up to ``--ecdh-max`` (2^24 ECDH takes tens of minutes: above it the row says
it was skipped and points to the older figure in benchmarks/results/psi_2e<k>.json, if any).

openmined-psi (PyPI ``openmined-psi``, P-256, GCS filter at false-positive rate 1e-9, output to
the client) runs both roles in one process, single-threaded, as its Python API does; its time
covers the protocol only (setup, request, response, intersection) on ids already in memory. Its
peak RSS is per process (a fresh subprocess). ``ratios`` per size, where both ran: okvs's
speed-up over ECDH (end to end against end to end, and protocol against protocol: the slower
party's seconds) and over openmined-psi (okvs end to end, and okvs protocol, against
openmined-psi's protocol-only time).

The JSON records the machine (benchmarks/meta.py, plus the CPU flags the native engines choose
by: AES/VAES/AVX2 for okvs's AES, AVX2/AVX-512 IFMA for the ECDH curve), the network (none:
loopback, no shaping) and okvs's parameters per size (``okvs.params_for(n)``: clusters,
capacity, sparse and dense positions; ``okvs.mask_bytes(n, n)``).

  python benchmarks/psi.py --sizes 16 20 24 [--ecdh-max 20] [--openmined-max 20] [--no-openmined] \\
      [--fnp-sizes 12] --json benchmarks/results/psi_okvs.json

FNP with Paillier and OU (the client learns; the cost split: client encryption of the bin
polynomials, server evaluation, client decryption) runs at the sizes given by ``--fnp-sizes``.

Not measured here: volepsi (Rindal's libOTe/VOLE-PSI) and SecretFlow's PSI. Both are C++ builds
that fetch their dependencies (libOTe, cryptoTools, coproto, boost; SecretFlow's Bazel tree)
from the network at build time, which this benchmark's machines do not have.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from meta import cores, cpu_flags, write_json

RESULTS = Path(__file__).resolve().parent / "results"
CSV_CHUNK = 1 << 20  # rows per vectorised block of make_files
LINE = 19  # widest line: "cust-" 9 digits "," 3 digits "\n"


def _lines(ids: np.ndarray, values: np.ndarray) -> bytes:
    """``f"cust-{i:09d},{v}\\n"`` for each (id, value), built in numpy (ids < 10^9, 0 <= values < 1000):
    a fixed-width byte matrix whose unused tail of each row is dropped by a mask."""
    m = len(ids)
    buf = np.empty((m, LINE), np.uint8)
    buf[:, :5] = np.frombuffer(b"cust-", np.uint8)
    x = ids.astype(np.int64)
    for k in range(13, 4, -1):  # the 9 digits, last first
        buf[:, k] = 48 + x % 10
        x //= 10
    buf[:, 14] = ord(",")
    v = values.astype(np.int64)
    width = 1 + (v >= 10) + (v >= 100)  # digits of the value
    for j in range(3):  # digit j from the left where j < width, the newline at j == width
        d = (v // 10 ** np.maximum(width - 1 - j, 0)) % 10
        buf[:, 15 + j] = np.where(j < width, 48 + d, 10)
    buf[:, 18] = 10
    return buf[np.arange(LINE) < (16 + width)[:, None]].tobytes()


def make_files(n: int, folder: Path, seed: int = 0) -> np.ndarray:
    """Two CSVs ``a.csv``/``b.csv`` of n ids with n/2 in common (the same bytes as formatting
    each line in Python, from the same random draws); returns the shared id numbers, sorted."""
    rng = np.random.default_rng(seed)
    pool = rng.permutation(2 * n)[: n + n // 2]
    if len(pool) and pool.max() >= 10**9:
        raise ValueError("ids have 9 digits: n must be below 5 * 10^8")
    a_ids, b_ids = pool[:n], np.concatenate([pool[: n // 2], pool[n:]])
    for name, ids in (("a", a_ids), ("b", b_ids)):
        order = rng.permutation(len(ids))
        ids, values = ids[order], rng.integers(0, 1000, len(ids))
        with open(folder / f"{name}.csv", "wb") as fh:
            fh.write(b"customer,value\n")
            for start in range(0, len(ids), CSV_CHUNK):
                fh.write(_lines(ids[start:start + CSV_CHUNK], values[start:start + CSV_CHUNK]))
    return np.sort(pool[: n // 2])


def read_out_numbers(path: Path) -> np.ndarray:
    """The id numbers of an output CSV's rows (``cust-<9 digits>,...``; lines end in CRLF or LF), in
    file order, parsed in numpy (no pyarrow in the launcher: its threads must not be forked into
    the next parties)."""
    data = np.fromfile(path, np.uint8)
    ends = np.flatnonzero(data == 10)
    assert data[:ends[0] + 1].tobytes().rstrip() == b"customer,value", f"{path}: unexpected header"
    starts = ends[:-1] + 1
    assert len(starts) == 0 or (all((data[starts + k] == c).all() for k, c in enumerate(b"cust-"))
                                and (data[starts + 14] == ord(",")).all()), f"{path}: unexpected id format"
    numbers = np.zeros(len(starts), np.int64)
    for k in range(5, 14):
        numbers = numbers * 10 + (data[starts + k].astype(np.int64) - 48)
    return numbers


def _rss_mib() -> float:
    """This process's resident memory now (/proc/self/statm; else its peak)."""
    try:
        with open("/proc/self/statm") as fh:
            return round(int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _shaper_party(session, folder: str, protocol: str = "ecdh", key_bits: int = 2048, scheme: str = "paillier") -> dict:
    from shaper.jobs.psi import RowFile
    from shaper.protocols import psi

    t0 = time.perf_counter()
    me = "a" if session.index == 0 else "b"
    table = RowFile.read(Path(folder) / f"{me}.csv")
    t_read = time.perf_counter() - t0
    options = {"to": 0, "key_bits": key_bits, "scheme": scheme} if protocol == "fnp" else {}
    result = psi.intersect(session, table.ids(["customer"]), protocol=protocol, order="id", **options)
    t1 = time.perf_counter()
    if result.indices is not None:
        table.write(Path(folder) / f"{me}.out.csv", result.indices)
    t_write = time.perf_counter() - t1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    split = {k: v for k, v in result.stats.items() if k.endswith("_seconds") or k in ("bins", "degree", "hash_bits")}
    return {"read_s": round(t_read, 3), "protocol_s": result.stats["seconds"], "write_s": round(t_write, 3),
            "bytes_sent": result.stats["bytes_sent"], "bytes_received": result.stats["bytes_received"],
            "protocol": result.stats.get("protocol", protocol), "size": result.size,
            "wrote": result.indices is not None, "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), **split}


def run_shaper(n: int, folder: Path, protocol: str = "ecdh", key_bits: int = 2048, scheme: str = "paillier") -> dict:
    """Both parties of ``protocol`` end to end; both outputs (FNP: the client's) checked against
    the shared ids in ``folder/shared.npy``."""
    from shaper.net import launch

    for m in ("a", "b"):
        (folder / f"{m}.out.csv").unlink(missing_ok=True)
    launcher = _rss_mib()  # what each forked party starts with, at most
    t0 = time.perf_counter()
    a, b = launch(2, _shaper_party, str(folder), protocol, key_bits, scheme, timeout=7200)
    seconds = time.perf_counter() - t0
    assert a["protocol"] == b["protocol"] == protocol, f"asked for {protocol}, ran {a['protocol']}/{b['protocol']}"
    learners = ("a", "b") if protocol != "fnp" else ("a",)
    assert [m for m, p in zip("ab", (a, b)) if p["wrote"]] == list(learners), "the wrong parties learnt the result"
    shared = np.load(folder / "shared.npy")
    for m in learners:  # order="id": ascending ids, the same rows at both parties
        got = read_out_numbers(folder / f"{m}.out.csv")
        assert np.array_equal(got, shared), f"shaper's {protocol} intersection is wrong at {m}"
    extra = {}
    if protocol == "fnp":
        extra = {"client_encrypt_seconds": a["encrypt_seconds"], "server_evaluate_seconds": b["evaluate_seconds"],
                 "client_decrypt_seconds": a["decrypt_seconds"], "bins": a["bins"], "degree": a["degree"],
                 "hash_bits": a["hash_bits"], "key_bits": key_bits, "scheme": scheme}
    parties = (a, b)
    return {**extra, "seconds": round(seconds, 2),
            "bytes_sent": [p["bytes_sent"] for p in parties],
            "bytes_received": [p["bytes_received"] for p in parties],
            "bytes_per_item_per_party": [round(p["bytes_sent"] / n, 1) for p in parties],
            "bits_per_item_per_party": [round(p["bytes_sent"] * 8 / n, 1) for p in parties],
            "peak_rss_mib": [p["peak_rss_mib"] for p in parties],
            "protocol_seconds": [p["protocol_s"] for p in parties], "read_seconds": [p["read_s"] for p in parties],
            "write_seconds": [p["write_s"] for p in parties], "intersection": a["size"], "launcher_rss_mib": launcher,
            "checked": f"{' and '.join(learners)}: rows equal the shared ids, in id order"}


OPENMINED = r"""
import json, resource, sys, time
import private_set_intersection.python as psi
n = int(sys.argv[1]); folder = sys.argv[2]
def ids(name):
    with open(f"{folder}/{name}.csv") as fh:
        next(fh)
        return [line.split(",", 1)[0] for line in fh]
client_items, server_items = ids("a"), ids("b")
t0 = time.perf_counter()
client = psi.client.CreateWithNewKey(True)
server = psi.server.CreateWithNewKey(True)
setup = server.CreateSetupMessage(1e-9, len(client_items), server_items, psi.DataStructure.GCS)
t1 = time.perf_counter()
request = client.CreateRequest(client_items)
t2 = time.perf_counter()
response = server.ProcessRequest(request)
t3 = time.perf_counter()
found = client.GetIntersection(setup, response)
t4 = time.perf_counter()
print(json.dumps({"seconds": round(t4 - t0, 2), "setup_s": round(t1 - t0, 2), "request_s": round(t2 - t1, 2),
                  "process_s": round(t3 - t2, 2), "intersect_s": round(t4 - t3, 2), "size": len(found),
                  "bytes": {"setup": setup.ByteSize(), "request": request.ByteSize(), "response": response.ByteSize()},
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def openmined_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("private_set_intersection") is not None
    except (ImportError, ValueError):
        return False


def run_openmined(n: int, folder: Path, shared: int) -> dict | None:
    """openmined-psi in a fresh subprocess; ``shared``: the size of the true intersection."""
    if not openmined_available():
        return None
    proc = subprocess.run([sys.executable, "-c", OPENMINED, str(n), str(folder)], capture_output=True, text=True,
                          timeout=7200)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    out = json.loads(proc.stdout)
    assert abs(out["size"] - shared) <= max(1, n * 1e-6), "openmined-psi's intersection is wrong"
    b = out["bytes"]
    out["bytes_per_item"] = {"client (request)": round(b["request"] / n, 1),
                             "server (setup + response)": round((b["setup"] + b["response"]) / n, 1)}
    return out


def older_ecdh(log_n: int) -> dict | None:
    """The older ECDH figure at 2^log_n (benchmarks/results/psi_2e<log_n>.json, from
    benchmarks/psi_large.py), summarised, or None."""
    path = RESULTS / f"psi_2e{log_n}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if data.get("meta", {}).get("n") != 1 << log_n:
        return None
    runs = {k: data.get(k) for k in ("first_run", "resumed_run")}
    return {"file": str(path.relative_to(RESULTS.parent.parent)),
            "how": "benchmarks/psi_large.py: two `shaper psi` processes, the learner killed half way and resumed",
            "runs_seconds": {k: r["seconds"] for k, r in runs.items() if r},
            "killed": (runs["first_run"] or {}).get("killed"), "total_seconds": data.get("total_seconds"),
            "peak_rss_mib": data.get("peak_rss_mib"), "its_meta": data.get("meta"), "its_machine": data.get("machine")}


def okvs_params(n: int) -> dict:
    from shaper.protocols.psi import okvs

    clusters, capacity, sparse, dense = okvs.params_for(n)
    return {"clusters": clusters, "capacity": capacity, "sparse": sparse, "dense": dense,
            "positions": clusters * (sparse + dense), "mask_bytes": okvs.mask_bytes(n, n)}


def engines() -> dict:
    """The CPU flags the native engines choose by, and what they choose here."""
    flags = cpu_flags()
    if flags is None:
        return {"cpu_flags": None}
    has = {f: f in flags for f in ("aes", "vaes", "avx2", "avx512f", "avx512vl", "avx512ifma", "sha_ni")}
    okvs_aes = ("VAES on 256-bit registers" if has["aes"] and has["vaes"] and has["avx2"]
                else "the aes crate (AES-NI where the CPU has it, else software)")
    curve = ("AVX-512 IFMA" if has["avx512ifma"] and has["avx512vl"] else "AVX2" if has["avx2"] else "portable")
    return {"cpu_flags": has, "okvs_aes": okvs_aes,
            "ecdh_curve": f"curve25519-dalek, {curve} backend (chosen at run time; IFMA where the build has it)"}


def ratio(slow: float | None, fast: float | None) -> float | None:
    return round(slow / fast, 2) if slow and fast else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 16], help="log2 of the set sizes")
    ap.add_argument("--ecdh-max", type=int, default=20, help="largest log2 size to run shaper's ECDH at")
    ap.add_argument("--no-openmined", action="store_true")
    ap.add_argument("--openmined-max", type=int, default=20, help="largest log2 size to run openmined-psi at")
    ap.add_argument("--fnp-sizes", type=int, nargs="*", default=[], help="log2 sizes to run FNP-Paillier at")
    ap.add_argument("--key-bits", type=int, default=2048, help="FNP's key size")
    ap.add_argument("--fnp-schemes", nargs="+", default=["paillier", "ou"], choices=["paillier", "ou"])
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    openmined = not args.no_openmined and openmined_available()
    if not args.no_openmined and not openmined:
        print("openmined-psi is not installed (pip install openmined-psi): skipped", flush=True)
    rows = []
    for log_n in args.sizes:
        n = 1 << log_n
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            t0 = time.perf_counter()
            shared = make_files(n, folder)
            np.save(folder / "shared.npy", shared)
            n_shared = len(shared)
            del shared  # the launcher stays small: forked parties start with its resident pages
            made = round(time.perf_counter() - t0, 2)
            row = {"items": f"2^{log_n}", "n": n, "overlap": 0.5, "make_files_seconds": made,
                   "okvs_params": okvs_params(n),
                   "shaper_okvs": run_shaper(n, folder, "okvs")}
            k = row["shaper_okvs"]
            k["peak_rss_within_2gib"] = max(k["peak_rss_mib"]) <= 2048
            if log_n <= args.ecdh_max:
                row["shaper_ecdh"] = run_shaper(n, folder, "ecdh")
            else:
                row["shaper_ecdh"] = {"skipped": f"2^{log_n} is above --ecdh-max 2^{args.ecdh_max}",
                                      "older_figure": older_ecdh(log_n)}
            if log_n in args.fnp_sizes:
                for scheme in args.fnp_schemes:
                    row[f"shaper_fnp_{scheme}"] = run_shaper(n, folder, "fnp", args.key_bits, scheme)
            if openmined and log_n <= args.openmined_max:
                row["openmined_psi"] = run_openmined(n, folder, n_shared)
        e, om = row["shaper_ecdh"], row.get("openmined_psi")
        row["ratios"] = {  # speed-ups: the other's seconds over okvs's; protocol: the slower party's
            "okvs_speedup_over_ecdh": ratio(e.get("seconds"), k["seconds"]),
            "okvs_speedup_over_ecdh_protocol": ratio(max(e.get("protocol_seconds") or [0]),
                                                     max(k["protocol_seconds"])),
            "okvs_speedup_over_openmined": ratio(om and om["seconds"], k["seconds"]),
            "okvs_speedup_over_openmined_protocol": ratio(om and om["seconds"], max(k["protocol_seconds"])),
            "ecdh_speedup_over_openmined": ratio(om and om["seconds"], e.get("seconds")),
        }
        rows.append(row)
        r = row["ratios"]
        print(f"2^{log_n}: okvs {k['seconds']:.2f} s end to end (protocol {k['protocol_seconds']} s), "
              f"{k['bytes_per_item_per_party']} B/item = {k['bits_per_item_per_party']} bits/item, "
              f"RSS {k['peak_rss_mib']} MiB (launcher {k['launcher_rss_mib']} MiB)", flush=True)
        if "skipped" in e:
            older = e["older_figure"]
            print(f"  ECDH: skipped ({e['skipped']})" + (f"; older figure in {older['file']}: "
                                                         f"{older['runs_seconds']} s" if older else ""), flush=True)
        else:
            print(f"  ECDH {e['seconds']:.2f} s end to end, {e['bytes_per_item_per_party']} B/item, "
                  f"RSS {e['peak_rss_mib']} MiB | okvs x{r['okvs_speedup_over_ecdh']} faster end to end, "
                  f"x{r['okvs_speedup_over_ecdh_protocol']} protocol to protocol", flush=True)
        if om:
            print(f"  openmined-psi {om['seconds']:.2f} s (protocol only), RSS {om['peak_rss_mib']} MiB | "
                  f"okvs x{r['okvs_speedup_over_openmined']} faster end to end, "
                  f"x{r['okvs_speedup_over_openmined_protocol']} protocol to protocol; "
                  f"ECDH x{r['ecdh_speedup_over_openmined']} end to end", flush=True)
        for scheme in ("paillier", "ou"):
            if f"shaper_fnp_{scheme}" not in row:
                continue
            f = row[f"shaper_fnp_{scheme}"]
            print(f"  FNP-{scheme}-{args.key_bits}: {f['seconds']:.1f} s "
                  f"(client encrypt {f['client_encrypt_seconds']} s, "
                  f"server evaluate {f['server_evaluate_seconds']} s, client decrypt {f['client_decrypt_seconds']} s), "
                  f"{f['bytes_per_item_per_party']} B/item", flush=True)
    meta = {"transport": "shaper: loopback TLS 1.3, 2 forked processes (shaper.net.launch)",
            "network": "none: loopback 127.0.0.1, no shaping (no added latency, no bandwidth limit)",
            "workers_per_party": max(1, cores() // 2),
            "okvs_roles": "equal set sizes: party a (index 0) is R (encodes the OKVS, sends the extension), "
                          "b is S (sends its masks); bytes and RSS lists are [a, b]",
            "ecdh_max": f"2^{args.ecdh_max}",
            "ratios": "speed-up = the other's seconds / okvs's (end to end, or protocol: the slower party's "
                      "protocol seconds); openmined-psi's seconds are its protocol only, in one process",
            "openmined": ("openmined-psi (PyPI), both roles in one process, P-256, GCS fpr 1e-9, protocol time only"
                          if openmined else "not run"),
            "not_built": "volepsi, SecretFlow: C++ builds fetching their dependencies from the network",
            "engines": engines()}
    if args.json:
        write_json(args.json, {"meta": meta, "rows": rows})
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
