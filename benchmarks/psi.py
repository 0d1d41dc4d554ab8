#!/usr/bin/env python
"""Private set intersection, shaper's ECDH (Ristretto255) against openmined-psi, side by side.

Each set size n: two CSV files of n ids each (50 % shared, each file in its own random order,
one payload column). shaper runs both roles as separate processes over loopback TLS 1.3: each
reads its CSV, runs PSI with output to both parties and writes its aligned rows to a CSV; the
time is end to end (process start, TLS handshake, reading, protocol, writing). openmined-psi
(PyPI ``openmined-psi``, P-256, GCS filter at false-positive rate 1e-9, output to the client)
runs both roles in one process, single-threaded, as its Python API does; its time covers the
protocol only (setup, request, response, intersection) on ids already in memory. Peak RSS is
per party (per process for openmined-psi, measured in a fresh subprocess).

  python benchmarks/psi.py --sizes 12 16 20 --fnp-sizes 12 --json benchmarks/results/psi.json

FNP with Paillier and OU (the client learns; the cost split: client encryption of the bin
polynomials, server evaluation, client decryption) runs at the sizes given by ``--fnp-sizes``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from meta import write_json


def make_files(n: int, folder: Path, seed: int = 0) -> set[str]:
    """Two CSVs of n ids with n/2 in common; returns the shared ids."""
    rng = np.random.default_rng(seed)
    pool = rng.permutation(2 * n)[: n + n // 2]
    a_ids, b_ids = pool[:n], np.concatenate([pool[: n // 2], pool[n:]])
    for name, ids in (("a", a_ids), ("b", b_ids)):
        order = rng.permutation(len(ids))
        with open(folder / f"{name}.csv", "w") as fh:
            fh.write("customer,value\n")
            fh.writelines(f"cust-{i:09d},{v}\n" for i, v in zip(ids[order], rng.integers(0, 1000, len(ids))))
    return {f"cust-{i:09d}" for i in pool[: n // 2]}


def _shaper_party(session, folder: str, protocol: str = "ecdh", key_bits: int = 2048, scheme: str = "paillier") -> dict:
    from shaper.jobs.psi import RowFile
    from shaper.protocols import psi

    t0 = time.perf_counter()
    me = "a" if session.index == 0 else "b"
    table = RowFile.read(Path(folder) / f"{me}.csv")
    t_read = time.perf_counter() - t0
    options = {"protocol": "fnp", "to": 0, "key_bits": key_bits, "scheme": scheme} if protocol == "fnp" else {}
    result = psi.intersect(session, table.ids(["customer"]), order="id", **options)
    t1 = time.perf_counter()
    if result.indices is not None:
        table.write(Path(folder) / f"{me}.out.csv", result.indices)
    t_write = time.perf_counter() - t1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    split = {k: v for k, v in result.stats.items() if k.endswith("_seconds") or k in ("bins", "degree", "hash_bits")}
    return {"read_s": round(t_read, 3), "protocol_s": result.stats["seconds"], "write_s": round(t_write, 3),
            "bytes_sent": result.stats["bytes_sent"], "size": result.size,
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), **split}


def run_shaper(n: int, folder: Path, shared: set[str], protocol: str = "ecdh", key_bits: int = 2048,
               scheme: str = "paillier") -> dict:
    from shaper.net import launch

    t0 = time.perf_counter()
    a, b = launch(2, _shaper_party, str(folder), protocol, key_bits, scheme, timeout=7200)
    seconds = time.perf_counter() - t0
    out = [(folder / f"{m}.out.csv").read_text().splitlines()[1:] for m in (("a", "b") if protocol == "ecdh" else "a")]
    ids = [[line.split(",")[0] for line in o] for o in out]
    assert ids[0] == ids[-1] and set(ids[0]) == shared, "shaper's intersection is wrong"
    extra = {}
    if protocol == "fnp":
        extra = {"client_encrypt_seconds": a["encrypt_seconds"], "server_evaluate_seconds": b["evaluate_seconds"],
                 "client_decrypt_seconds": a["decrypt_seconds"], "bins": a["bins"], "degree": a["degree"],
                 "hash_bits": a["hash_bits"], "key_bits": key_bits, "scheme": scheme}
    return {**extra, "seconds": round(seconds, 2),
            "bytes_per_item_per_party": [round(p["bytes_sent"] / n, 1) for p in (a, b)],
            "peak_rss_mib": [a["peak_rss_mib"], b["peak_rss_mib"]],
            "protocol_seconds": [a["protocol_s"], b["protocol_s"]], "read_seconds": [a["read_s"], b["read_s"]],
            "write_seconds": [a["write_s"], b["write_s"]], "intersection": a["size"]}


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


def run_openmined(n: int, folder: Path, shared: set[str]) -> dict | None:
    try:
        import private_set_intersection.python  # noqa: F401
    except ImportError:
        return None
    proc = subprocess.run([sys.executable, "-c", OPENMINED, str(n), str(folder)], capture_output=True, text=True,
                          timeout=7200)
    if proc.returncode:
        raise RuntimeError(proc.stderr)
    out = json.loads(proc.stdout)
    assert abs(out["size"] - len(shared)) <= max(1, n * 1e-6), "openmined-psi's intersection is wrong"
    b = out["bytes"]
    out["bytes_per_item"] = {"client (request)": round(b["request"] / n, 1),
                             "server (setup + response)": round((b["setup"] + b["response"]) / n, 1)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 16], help="log2 of the set sizes")
    ap.add_argument("--no-openmined", action="store_true")
    ap.add_argument("--openmined-max", type=int, default=20, help="largest log2 size to run openmined-psi at")
    ap.add_argument("--fnp-sizes", type=int, nargs="*", default=[], help="log2 sizes to run FNP-Paillier at")
    ap.add_argument("--key-bits", type=int, default=2048, help="FNP's key size")
    ap.add_argument("--fnp-schemes", nargs="+", default=["paillier", "ou"], choices=["paillier", "ou"])
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    rows = []
    for log_n in args.sizes:
        n = 1 << log_n
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            shared = make_files(n, folder)
            row = {"items": f"2^{log_n}", "n": n, "overlap": 0.5, "shaper_ecdh": run_shaper(n, folder, shared)}
            if log_n in args.fnp_sizes:
                for scheme in args.fnp_schemes:
                    row[f"shaper_fnp_{scheme}"] = run_shaper(n, folder, shared, "fnp", args.key_bits, scheme)
            if not args.no_openmined and log_n <= args.openmined_max:
                row["openmined_psi"] = run_openmined(n, folder, shared)
            om = row.get("openmined_psi")
            if om:
                row["speedup"] = round(om["seconds"] / row["shaper_ecdh"]["seconds"], 2)
        rows.append(row)
        s = row["shaper_ecdh"]
        print(f"2^{log_n}: shaper {s['seconds']:.2f} s end to end, {s['bytes_per_item_per_party']} B/item, "
              f"RSS {s['peak_rss_mib']} MiB" + (f" | openmined-psi {om['seconds']:.2f} s (protocol only), "
                                               f"x{row['speedup']}" if om else ""), flush=True)
        for scheme in ("paillier", "ou"):
            if f"shaper_fnp_{scheme}" not in row:
                continue
            f = row[f"shaper_fnp_{scheme}"]
            print(f"  FNP-{scheme}-{args.key_bits}: {f['seconds']:.1f} s (client encrypt {f['client_encrypt_seconds']} s, "
                  f"server evaluate {f['server_evaluate_seconds']} s, client decrypt {f['client_decrypt_seconds']} s), "
                  f"{f['bytes_per_item_per_party']} B/item", flush=True)
    meta = {"transport": "shaper: loopback TLS 1.3, 2 processes",
            "openmined": "openmined-psi (PyPI), both roles in one process, P-256, GCS fpr 1e-9"}
    if args.json:
        write_json(args.json, {"meta": meta, "rows": rows})
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
