"""Three-party replicated sharing benchmark (Araki et al.): AES-128 blocks/s and Z_2^64 products/s.

Three parties run as separate processes on this machine over loopback TLS 1.3 (``shaper.net``),
the set-up ``shaper bench aes`` and ``shaper bench ring`` use; this script runs both, adds the
same AES run over plain TCP (``insecure``, to show what TLS costs on a shared 2-core box) and puts
the published figures next to ours. Every AES batch is checked against the ``cryptography``
library on sampled blocks; every product against numpy.

    python benchmarks/replicated.py --json replicated.json
    python benchmarks/replicated.py --quick           # small batches, smoke test

Published (Araki, Furukawa, Lindell, Nof, Ohara, "High-Throughput Semi-Honest Secure Three-Party
Computation with an Honest Majority", CCS 2016): 1.32 M AES/s on three 20-core servers with a
10 Gbit/s LAN, about 100 k AES/s per core, 5440 ANDs per AES (no key schedule); the Bristol
circuit used here has 6400 ANDs (key schedule included).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from meta import write_json
from shaper.circuits import bristol
from shaper.net import NetConfig, launch
from shaper.protocols import replicated

AES_BLOCKS = 524288  # 2^19 blocks per batch: 8192 words per wire


def _random_rows(session: Any, words: int) -> np.ndarray:
    return np.frombuffer(session.prg.random_bytes(128 * words * 8), dtype=np.uint64).reshape(128, words)


def aes_job(session: Any, blocks: int, batches: int, check: int) -> dict:
    """One party: party 0 shares random keys, party 1 random plaintexts; one warm-up batch, then
    ``batches`` timed ones (share, evaluate, open to party 2). Party 2 checks ``check`` sampled
    blocks of every batch against the cryptography library (inputs revealed to it outside the
    timing)."""
    circuit = bristol.load("aes_128.txt")  # bundled with shaper
    circuit.schedule()
    eng = replicated.Replicated3PC(session)
    words = bristol.words_for(blocks)
    key = _random_rows(session, words) if session.index == 0 else None
    pt = _random_rows(session, words) if session.index == 1 else None
    nxt = eng.names[eng.next]
    times, sent, checked = [], [], 0
    rounds = ands = 0
    for b in range(batches + 1):
        session.barrier(tag="aes-batch")
        before = session.stats.peer(nxt).bytes_sent
        rounds0, ands0 = eng.rounds, eng.and_gates
        t0 = time.perf_counter()
        k = eng.share_wires(key, 128, blocks, owner=0)
        p = eng.share_wires(pt, 128, blocks, owner=1)
        sent_inputs = session.stats.peer(nxt).bytes_sent - before
        out = eng.evaluate(circuit, [k, p])[0]
        sent_and = session.stats.peer(nxt).bytes_sent - before - sent_inputs
        rounds, ands = eng.rounds - rounds0, eng.and_gates - ands0
        opened = eng.reveal_wires(out, to=2)
        elapsed = time.perf_counter() - t0
        if b:  # batch 0 warms up (allocations, page faults)
            times.append(elapsed)
            sent.append(sent_and)
        if not check:
            continue
        if session.index in (0, 1):
            session.send(2, key if session.index == 0 else pt, tag="aes-check")
            continue
        kk = session.recv_array(0, tag="aes-check", dtype=np.uint64, shape=(128, words))
        pp = session.recv_array(1, tag="aes-check", dtype=np.uint64, shape=(128, words))
        pick = np.random.default_rng().choice(blocks, size=min(check, blocks), replace=False)
        for i, k_, p_, c_ in zip(pick.tolist(), *(bristol.pick_bitsliced(r, pick) for r in (kk, pp, opened))):
            enc = Cipher(algorithms.AES(bristol.int_to_block(k_)), modes.ECB()).encryptor()
            if bristol.int_to_block(c_) != enc.update(bristol.int_to_block(p_)) + enc.finalize():
                raise AssertionError(f"batch {b}: block {i} encrypted wrongly in 3PC")
        checked += len(pick)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"times": times, "rounds": rounds, "ands": ands, "sent_and_bytes": min(sent), "checked": checked,
            "peak_rss_mib": round(peak, 1)}


def measure_aes(blocks: int, batches: int, check: int = 2048, config: NetConfig | None = None) -> dict:
    """Best batch over three local parties (a batch ends when its slowest party is done)."""
    res = launch(3, aes_job, blocks, batches, check, timeout=1800, config=config)
    best = min(max(r["times"][b] for r in res) for b in range(batches))
    ands_per_block = res[0]["ands"]
    aes_per_s = blocks / best
    bits_per_and = [8 * r["sent_and_bytes"] / (ands_per_block * blocks) for r in res]
    return {
        "circuit": "aes_128.txt (Bristol Fashion, key schedule included)",
        "and_per_block": ands_per_block,
        "instances_per_batch": blocks,
        "batches": batches,
        "seconds_per_batch": round(best, 4),
        "aes_per_s": round(aes_per_s),
        "and_per_s": round(aes_per_s * ands_per_block),
        "bits_per_and": round(max(bits_per_and), 5),
        "bits_per_and_per_party": [round(b, 5) for b in bits_per_and],
        "rounds": res[0]["rounds"],
        "gbps": round(max(r["sent_and_bytes"] for r in res) * 8 / best / 1e9, 3),
        "blocks_checked": res[2]["checked"],
        "peak_rss_mib_per_party": [r["peak_rss_mib"] for r in res],
        "parties": "3 processes on this machine, " + ("plain TCP" if config and config.insecure else
                                                      "loopback TLS 1.3"),
    }


def ring_job(session: Any, n: int, batches: int) -> dict:
    """One party: Z_2^64 products of two shared vectors (one warm-up, ``batches`` timed), all
    checked against numpy at party 2."""
    eng = replicated.Replicated3PC(session, frac_bits=0)  # plain ring integers, no truncation
    rng = np.random.default_rng()
    u = rng.integers(0, 2**63, n, dtype=np.int64) if session.index == 0 else None
    w = rng.integers(0, 2**63, n, dtype=np.int64) if session.index == 1 else None
    su = eng.share(u, owner=0, shape=(n,))
    sw = eng.share(w, owner=1, shape=(n,))
    times = []
    prod = None
    for _ in range(batches + 1):
        session.barrier(tag="ring-batch")
        t0 = time.perf_counter()
        prod = eng.mul(su, sw)
        times.append(time.perf_counter() - t0)
    opened = eng.reveal_ring(prod, to=2)
    if session.index in (0, 1):
        session.send(2, u if session.index == 0 else w, tag="ring-check")
    else:
        uu = session.recv_array(0, tag="ring-check", dtype=np.int64)
        ww = session.recv_array(1, tag="ring-check", dtype=np.int64)
        if not np.array_equal(opened, uu.view(np.uint64) * ww.view(np.uint64)):
            raise AssertionError("3PC products differ from numpy's")
    return {"times": times[1:]}


def measure_ring(n: int, batches: int) -> dict:
    res = launch(3, ring_job, n, batches, timeout=1800)
    best = min(max(r["times"][b] for r in res) for b in range(batches))
    return {"multiplications_per_batch": n, "seconds_per_batch": round(best, 4), "mul_per_s": round(n / best),
            "bytes_per_mul_per_party": 8, "rounds_per_batch": 1, "checked": "all, against numpy"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=AES_BLOCKS, help="AES blocks per batch (default %(default)s)")
    ap.add_argument("--products", type=int, default=4_000_000, help="Z_2^64 products per batch (default %(default)s)")
    ap.add_argument("--batches", type=int, default=3, help="timed batches, best reported (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="4096 blocks and 100,000 products: a smoke test")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    blocks = 4096 if args.quick else args.blocks
    products = 100_000 if args.quick else args.products
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; 3 parties as processes, loopback")
    aes = measure_aes(blocks, args.batches)
    print(f"AES-128 in 3PC over TLS: {aes['aes_per_s']:,} blocks/s ({blocks:,} blocks per batch, best of "
          f"{args.batches}); {aes['and_per_s']:,} AND gates/s, {aes['bits_per_and']} bits per AND per party, "
          f"{aes['rounds']} rounds, {aes['blocks_checked']:,} blocks checked, peak memory "
          f"{' / '.join(f'{m:.0f}' for m in aes['peak_rss_mib_per_party'])} MiB per party")
    ring = measure_ring(products, args.batches)
    print(f"Z_2^64 products in 3PC over TLS: {ring['mul_per_s']:,}/s ({products:,} per batch, all checked)")
    plain = measure_aes(blocks, args.batches, check=0, config=NetConfig(insecure=True))["aes_per_s"]
    print(f"AES-128 over plain TCP (no TLS, reference only): {plain:,} blocks/s")
    per_core = aes["aes_per_s"] / (os.cpu_count() or 1)
    print(f"per core: {per_core:,.0f} AES/s (6400 ANDs) vs Araki et al. ~100,000 AES/s (5440 ANDs) "
          f"and 1.32 M / 60 cores = 22,000 per core on their cluster")
    if args.json:
        out = {"aes_tls": aes, "ring_tls": ring, "aes_plain_tcp_per_s": plain,
               "published": {"araki_ccs16_aes_per_s": 1_320_000, "araki_cores": 60, "araki_and_per_aes": 5440}}
        write_json(args.json, out)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
