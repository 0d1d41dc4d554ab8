"""Threshold GHS (GMPFHE's GHS half): n parties generate the BGV keys AES-128 needs inside the
n-party MPC, encrypt the key owner's 11 round keys and the data owner's blocks jointly, every
party evaluates AES itself, and the output is decrypted jointly to bits for the data owner — the
job of ``shaper fhe aes --local N`` (:func:`shaper.jobs.bgv.aes_party`), beside GMPFHE's Table 8.

Parties run as processes over loopback TLS 1.3 (``shaper.net.launch``), one kernel thread each,
party i pinned to core i mod (this machine's cores): with 2 cores and 4 parties two share each
core, so their wall times include waiting for the CPU. The engine is the one the command uses
(``shaper.jobs.fhe.engine_for``: OT-extension triples made on demand, so every figure below
includes its preprocessing; GMPFHE reports its tuple generation apart). Shaped rows emulate
--bandwidth / --latency (40 Mbit/s, 40 ms one way) inside every channel.

Per row: key generation (wall seconds, the slowest party; bytes sent per party, max; its phases
at party 0), the joint encryptions, the evaluation (every party, in parallel), the joint
decryption of all blocks (to bits inside the MPC, or flooded and opened with
``--security active:flood``; wall seconds and bytes, preprocessing included; it starts after a
barrier, so it does not include waiting for the slowest evaluator, which is reported apart), the whole
job, each party's CPU seconds and peak RSS, and the check of every block against
``cryptography``'s AES-128 (block 0 is FIPS-197 C.1).

Published (GMPFHE, Zhu, Ding, Huang, App. C.1, Table 8: two parties, 2-vCPU VMs, leveled AES,
120 blocks; LAN / WAN / communication): KeyGen 45,573 s / 78,879 s / 909 GB; decryption
tuple generation 462 s / 530 s / 2.59 GB and CircuitEval 11 s / 258 s / 0.23 GB; Enc 13.7 s;
Eval 224 s. "n parties cost about (n - 1)x this."

    python benchmarks/threshold_bgv.py --json benchmarks/results/threshold_bgv.json
    python benchmarks/threshold_bgv.py --parties 2,4 --shaped 2
    python benchmarks/threshold_bgv.py --quick          (the 257 ring, insecure, seconds)

Exits 1 if a row failed or a block was wrong.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from meta import cores as available_cores  # noqa: E402
from meta import write_json  # noqa: E402

from shaper.errors import PartyError  # noqa: E402
from shaper.jobs.bgv import FIPS_197_KEY, aes_party, clear_aes, default_data, resolve_params  # noqa: E402
from shaper.net import NetConfig, launch, parse_duration, parse_rate  # noqa: E402

PAPER = {"source": "GMPFHE (Zhu, Ding, Huang), App. C.1, Table 8: 2 parties, 2-vCPU VMs, leveled, 120 blocks",
         "keygen_s": {"LAN": 45573, "WAN": 78879}, "keygen_GB": 909,
         "decrypt_tuples_s": {"LAN": 462, "WAN": 530}, "decrypt_tuples_GB": 2.59,
         "decrypt_online_s": {"LAN": 11, "WAN": 258}, "decrypt_online_GB": 0.23, "encrypt_s": 13.7, "eval_s": 224}
TARGETS = {"keygen_s_2_parties": 3600, "keygen_GB_per_party_2_parties": 100, "decrypt_s_2_parties": 11}


def _pin(index: int) -> None:
    try:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[index % len(cores)]})
    except (AttributeError, OSError):  # pragma: no cover
        pass


def party_job(session: Any, params: str, data: np.ndarray, insecure: bool, security: str = "passive",
              decrypt: str = "bits") -> dict:
    """One party on one core: the whole threshold AES job, with CPU seconds and peak RSS."""
    from shaper.jobs.fhe import engine_for

    _pin(session.index)
    me, last = session.index, session.n - 1
    cpu0 = time.process_time()
    r = aes_party(session, params, aes_key=FIPS_197_KEY if me == 0 else None, data=data if me == last else None,
                  insecure=insecure, engine=engine_for(session, security), decrypt=decrypt)
    r["cpu_seconds"] = time.process_time() - cpu0
    r["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return r


def run_row(parties: int, params: str, data: np.ndarray, config: NetConfig, insecure: bool,
            security: str = "passive") -> dict:
    """One row; ``security`` names the engine and, after a colon, the decryption method
    ("active:flood"; default bits)."""
    security, _, decrypt = security.partition(":")
    decrypt = decrypt or "bits"
    shaped = bool(config.bandwidth)
    print(f"-- {parties} parties, {params}{', shaped' if shaped else ''}, {security} engine, decryption: {decrypt} ...",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        res = launch(parties, party_job, params, data, insecure, security, decrypt, config=config, workers_per_party=1,
                     timeout=None)
    except (PartyError, OSError, MemoryError) as exc:  # a failed row is reported, the others still run
        print(f"   FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return {"parties": parties, "params": params, "shaped": shaped, "engine": security, "decrypt_method": decrypt,
                "error": f"{type(exc).__name__}: {exc}"}
    launch_s = time.perf_counter() - t0

    def phase(name: str) -> dict:
        rows = [next(p for p in r["phases"] if p["name"].startswith(name)) for r in res]
        return {"wall_s": max(p["seconds"] for p in rows), "bytes_sent_max": max(p["bytes_sent"] for p in rows),
                "bytes_sent_total": sum(p["bytes_sent"] for p in rows)}

    got = next(r["output"] for r in res if r["output"] is not None)
    want = clear_aes(data, FIPS_197_KEY)
    wrong = int(np.count_nonzero(np.any(got != want, axis=1)))
    row = {"parties": parties, "params": params, "shaped": shaped, "engine": security, "decrypt_method": decrypt,
           "bandwidth_bit_s": config.bandwidth,
           "latency_s": config.latency, "m": res[0]["m"], "phi": res[0]["phi"], "security": res[0]["security"],
           "secret": res[0]["secret"], "blocks": len(data),
           "keygen": phase("key generation"), "encrypt_blocks": phase("joint encryption of the blocks"),
           "encrypt_round_keys": phase("joint encryption of the round keys"),
           "evaluate": phase("evaluate"), "wait": phase("wait for every party"), "decrypt": phase("joint decryption"),
           "job_wall_s": max(r["seconds"] for r in res), "launch_s": launch_s,
           "bytes_sent_max": max(r["bytes_sent"] for r in res), "cpu_s": [round(r["cpu_seconds"], 1) for r in res],
           "peak_rss_mb": [round(r["peak_rss_mb"]) for r in res], "keygen_phases_party0": res[0]["keygen_phases"],
           "sizes": res[0]["sizes"], "plan": res[0]["plan"], "levels_used": res[0]["levels_used"],
           "capacity_bits": res[0]["capacity_bits"], "wrong_blocks": wrong,
           "fips_197_c1": bytes(got[0]).hex() == "69c4e0d86a7b0430d8cdb78070b4c55a"}
    if wrong:
        row["error"] = f"{wrong} of {len(data)} blocks wrong"
    print(f"   keygen {row['keygen']['wall_s']:.1f} s, {row['keygen']['bytes_sent_max'] / 1e9:.2f} GB/party; eval "
          f"{row['evaluate']['wall_s']:.1f} s; decrypt {row['decrypt']['wall_s']:.2f} s, "
          f"{row['decrypt']['bytes_sent_max'] / 1e6:.1f} MB/party; {len(data) - wrong}/{len(data)} blocks right; "
          f"peak RSS {max(row['peak_rss_mb'])} MB", file=sys.stderr, flush=True)
    return row


def print_report(rows: list[dict]) -> None:
    def label(r: dict) -> str:
        m = r.get("decrypt_method", "bits")
        return r.get("engine", "passive") + ("" if m == "bits" else f":{m}")

    print(f"{'n':>2s} {'engine':>13s} {'shaped':>6s} {'keygen s':>9s} {'GB/party':>8s} {'enc s':>6s} {'eval s':>7s} {'dec s':>6s} "
          f"{'dec MB':>7s} {'job s':>7s} {'RSS MB':>7s} {'blocks':>7s}")
    for r in rows:
        if "keygen" not in r:
            print(f"{r['parties']:2d} {label(r):>13s} {'yes' if r['shaped'] else 'no':>6s} FAILED: "
                  f"{r['error']}")
            continue
        enc = r["encrypt_blocks"]["wall_s"] + r["encrypt_round_keys"]["wall_s"]
        print(f"{r['parties']:2d} {label(r):>13s} {'yes' if r['shaped'] else 'no':>6s} "
              f"{r['keygen']['wall_s']:9.1f} "
              f"{r['keygen']['bytes_sent_max'] / 1e9:8.2f} {enc:6.2f} {r['evaluate']['wall_s']:7.1f} "
              f"{r['decrypt']['wall_s']:6.2f} {r['decrypt']['bytes_sent_max'] / 1e6:7.1f} {r['job_wall_s']:7.1f} "
              f"{max(r['peak_rss_mb']):7d} {r['blocks'] - r['wrong_blocks']:3d}/{r['blocks']:<3d}")
    print(f"GMPFHE Table 8 (2 parties, LAN / WAN): keygen {PAPER['keygen_s']['LAN']} / {PAPER['keygen_s']['WAN']} s, "
          f"{PAPER['keygen_GB']} GB; decryption {PAPER['decrypt_online_s']['LAN']} / {PAPER['decrypt_online_s']['WAN']} "
          f"s online + {PAPER['decrypt_tuples_s']['LAN']} / {PAPER['decrypt_tuples_s']['WAN']} s of tuples; eval "
          f"{PAPER['eval_s']} s")
    done = [r for r in rows if "keygen" in r]
    for act in (r for r in done if r["engine"] == "active"):
        base = next((r for r in done if r["engine"] == "passive" and r["parties"] == act["parties"]
                     and r["shaped"] == act["shaped"]), None)
        if base is not None:
            print(f"{act['parties']} parties{' shaped' if act['shaped'] else ''}, {label(act)} / {label(base)}: keygen "
                  f"{act['keygen']['wall_s'] / base['keygen']['wall_s']:.2f}x time, "
                  f"{act['keygen']['bytes_sent_max'] / base['keygen']['bytes_sent_max']:.2f}x bytes; decryption "
                  f"{act['decrypt']['wall_s'] / base['decrypt']['wall_s']:.2f}x time, "
                  f"{act['decrypt']['bytes_sent_max'] / base['decrypt']['bytes_sent_max']:.2f}x bytes")
    two = next((r for r in rows if r.get("parties") == 2 and not r["shaped"] and "keygen" in r), None)
    if two:
        print(f"2 parties, LAN: keygen {PAPER['keygen_s']['LAN'] / two['keygen']['wall_s']:.0f}x faster, "
              f"{PAPER['keygen_GB'] * 1e9 / two['keygen']['bytes_sent_max']:.0f}x fewer bytes per party; decryption "
              f"(preprocessing included) {PAPER['decrypt_online_s']['LAN'] / two['decrypt']['wall_s']:.1f}x under the "
              "paper's online time alone")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="aes-53261", help="BGV parameter set (default: aes-53261, 120 blocks)")
    ap.add_argument("--parties", default="2,4", help="party counts, unshaped")
    ap.add_argument("--shaped", default="2", help="party counts with shaping ('' for none)")
    ap.add_argument("--bandwidth", default="40mbit")
    ap.add_argument("--latency", default="40ms")
    ap.add_argument("--quick", action="store_true", help="the 257 ring (insecure, 1 block), 2 parties, no shaping")
    ap.add_argument("--insecure", action="store_true", help="allow a test parameter set")
    ap.add_argument("--security", default="passive", help="engines, e.g. 'passive,active' (every row on each; the "
                    "active engine: MACs, range-checked errors and inputs, checked conversions), each with the "
                    "decryption method after a colon: 'passive,active:flood' (default bits)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if args.quick:
        args.params, args.parties, args.shaped, args.insecure = "test-257", "2", "", True
    counts = [int(x) for x in args.parties.split(",") if x.strip()]
    shaped_counts = [int(x) for x in args.shaped.split(",") if x.strip()]
    from shaper.crypto.bgv import aes, scheme

    p = resolve_params(args.params, args.insecure)
    data = default_data(aes.aes_layout(scheme.algebra(p.m)).nblocks)
    started = time.time()
    engines = [x.strip() for x in args.security.split(",") if x.strip()]
    rows = [run_row(n, args.params, data, NetConfig(timeout=7200), args.insecure, sec) for n in counts for sec in engines]
    shaped = NetConfig(bandwidth=parse_rate(args.bandwidth), latency=parse_duration(args.latency), timeout=7200)
    rows += [run_row(n, args.params, data, shaped, args.insecure, sec) for n in shaped_counts for sec in engines]
    print_report(rows)
    failed = [f"{r['parties']} parties{' shaped' if r['shaped'] else ''} ({r['engine']}): {r['error']}"
              for r in rows if "error" in r]
    if args.json:
        cores = available_cores()
        settings = {"params": args.params, "parties": counts, "shaped_parties": shaped_counts,
                    "bandwidth": args.bandwidth if shaped_counts else None,
                    "latency": args.latency if shaped_counts else None, "cores": cores, "cores_per_party": 1,
                    "pinning": f"party i on core i mod {cores}", "transport": "loopback TLS 1.3 (shaper.net.launch)",
                    "engine": "shaper.jobs.fhe.engine_for(session, security): passive, the AdditiveEngine with "
                              "OT-extension triples on demand; active, the ActiveEngine",
                    "security": engines,
                    "roles": "party0 the AES key, the last party the blocks and the result; every party evaluates",
                    "quick": args.quick, "duration_s": round(time.time() - started, 1)}
        write_json(args.json, {"meta": {"settings": settings, "paper": PAPER, "targets": TARGETS}, "rows": rows,
                               "failures": failed})
        print(f"written to {args.json}", file=sys.stderr)
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
