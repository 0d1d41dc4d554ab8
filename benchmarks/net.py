#!/usr/bin/env python
"""Party-runtime benchmark: loopback TLS throughput, small-message round trips, shaping accuracy.

Two parties run as separate processes over loopback TLS 1.3 with mutual authentication
(``shaper.net.launch``), exactly as a job would, on this machine's cores.

  throughput      100 MB uint8 arrays, streamed in max_frame chunks; MB/s at the receiver
                  (from a barrier to the whole array in memory, allocation included)
  round trips     small messages (a JSON integer) bounced back and forth; round trips per second
  shaping         with --bandwidth/--latency (default the SHAPER WAN: 40 Mbit/s, 40 ms): time for
                  a 50 MB transfer and for a small round trip, next to the configured values

Usage:
  python benchmarks/net.py                      # all three, default sizes
  python benchmarks/net.py --json net.json --quick
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from meta import cores as available_cores, write_json
from shaper.net import NetConfig, launch, parse_duration, parse_rate

MB = 10**6


def throughput(session, nbytes: int, repeats: int):
    if session.index == 0:
        data = np.frombuffer(session.prg.random_bytes(nbytes), dtype=np.uint8)
        for _ in range(repeats):
            session.barrier("go")
            session.send(1, data, tag="data")
            session.recv(1, "got")
        return None
    rates = []
    for _ in range(repeats):
        session.barrier("go")
        t0 = time.perf_counter()
        arr = session.recv_array(0, "data", dtype=np.uint8)
        rates.append(arr.nbytes / MB / (time.perf_counter() - t0))
        session.send(0, None, tag="got")
    return rates


def round_trips(session, count: int, repeats: int):
    session.exchange(1 - session.index, 0, "warm")
    if session.index == 0:
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in range(count):
                session.send(1, i, tag="ping")
                session.recv(1, "pong")
            rates.append(count / (time.perf_counter() - t0))
        return rates
    for _ in range(count * repeats):
        session.send(0, session.recv(0, "ping"), tag="pong")
    return None


def shaped(session, nbytes: int, pings: int):
    session.barrier("start")
    if session.index == 0:
        t0 = time.perf_counter()
        for i in range(pings):
            session.send(1, i, tag="ping")
            session.recv(1, "pong")
        rtt = (time.perf_counter() - t0) / pings
        session.send(1, np.zeros(nbytes, dtype=np.uint8), tag="bulk")
        session.recv(1, "got")
        return rtt
    for _ in range(pings):
        session.send(0, session.recv(0, "ping"), tag="pong")
    t0 = time.perf_counter()
    session.recv_array(0, "bulk")
    elapsed = time.perf_counter() - t0
    session.send(0, None, tag="got")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=100, help="array size for the throughput test (MB)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pings", type=int, default=5000, help="round trips per repeat")
    ap.add_argument("--bandwidth", default="40mbit")
    ap.add_argument("--latency", default="40ms")
    ap.add_argument("--shaped-mb", type=float, default=50, help="transfer size under shaping (MB)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if args.quick:
        args.size_mb, args.repeats, args.pings, args.shaped_mb = 20, 2, 500, 2
    bandwidth, latency = parse_rate(args.bandwidth), parse_duration(args.latency)
    nbytes = int(args.size_mb * MB)
    cores = available_cores()

    print(f"2 parties, separate processes, loopback TLS 1.3 (mutual auth); {cores} cores", file=sys.stderr)
    tp = launch(2, throughput, nbytes, args.repeats, config=NetConfig(max_frame=4 << 20))[1]
    rt = launch(2, round_trips, args.pings, args.repeats)[0]
    shaped_bytes = int(args.shaped_mb * MB)
    cfg = NetConfig(bandwidth=bandwidth, latency=latency, timeout=max(300.0, shaped_bytes * 8 / bandwidth * 3))
    rtt, transfer = launch(2, shaped, shaped_bytes, 10, config=cfg)
    expected_transfer = shaped_bytes * 8 / bandwidth + latency

    rows = {
        "tls_throughput_mb_s": round(statistics.median(tp), 1),
        "tls_throughput_best_mb_s": round(max(tp), 1),
        "array_mb": args.size_mb,
        "round_trips_per_s": round(statistics.median(rt), 0),
        "round_trip_us": round(1e6 / statistics.median(rt), 1),
        "shaping": {
            "bandwidth_bit_s": bandwidth, "latency_s": latency,
            "transfer_mb": args.shaped_mb, "transfer_s": round(transfer, 3),
            "transfer_expected_s": round(expected_transfer, 3),
            "transfer_error": round(transfer / expected_transfer - 1, 4),
            "rtt_s": round(rtt, 4), "rtt_expected_s": 2 * latency, "rtt_error": round(rtt / (2 * latency) - 1, 4),
        },
    }
    print(f"TLS throughput ({args.size_mb:.0f} MB arrays): {rows['tls_throughput_mb_s']} MB/s median, "
          f"{rows['tls_throughput_best_mb_s']} best of {args.repeats}")
    print(f"small-message round trips: {rows['round_trips_per_s']:.0f}/s ({rows['round_trip_us']} µs each)")
    s = rows["shaping"]
    print(f"shaping {args.bandwidth}, {args.latency}: {args.shaped_mb:.0f} MB in {s['transfer_s']} s "
          f"(expected {s['transfer_expected_s']} s, {100 * s['transfer_error']:+.1f}%); "
          f"round trip {1000 * s['rtt_s']:.1f} ms (expected {1000 * s['rtt_expected_s']:.0f} ms, "
          f"{100 * s['rtt_error']:+.1f}%)")
    if args.json:
        write_json(args.json, {"meta": {"transport": "loopback TLS 1.3, 2 processes"}, "results": rows})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
