"""``shaper bench aes|ring``: three-party replicated sharing throughput on this machine.

Three parties run as local processes over loopback TLS 1.3 (:func:`shaper.net.launch`) and
evaluate AES-128 (the bundled Bristol Fashion circuit, key schedule included) on bit-sliced
batches of blocks, or multiply Z_2^64 vectors; the best of ``batches`` timed batches is reported
after one warm-up batch. Every AES batch is checked against the ``cryptography`` library on
sampled blocks (party 2, which holds no input, learns the ciphertexts; parties 0 and 1 reveal
their inputs to it for the check only, outside the timing); every product against numpy.

The reproducible benchmark with published figures next to ours is ``benchmarks/replicated.py``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..circuits import bristol
from ..protocols import replicated

AES_INSTANCES = 524288  # 2^19 blocks per batch: 8192 words per wire


def _aes_job(session: Any, instances: int, batches: int, check: int) -> dict:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    circuit = bristol.load("aes_128.txt")  # bundled with shaper
    circuit.schedule()
    eng = replicated.Replicated3PC(session)
    words = bristol.words_for(instances)
    key = pt = None
    if session.index == 0:
        key = np.frombuffer(os.urandom(128 * words * 8), dtype=np.uint64).reshape(128, words)
    if session.index == 1:
        pt = np.frombuffer(os.urandom(128 * words * 8), dtype=np.uint64).reshape(128, words)
    # batch 0 warms up (allocations, page faults); every batch's ciphertexts are checked
    opened = None
    checked = 0
    nxt = eng.names[eng.next]
    times, sent = [], []
    for b in range(batches + 1):
        session.barrier(tag="aes-batch")
        before = session.stats.peer(nxt).bytes_sent
        rounds0, ands0 = eng.rounds, eng.and_gates
        t0 = time.perf_counter()
        k = eng.share_bits(key, 128, instances, owner=0)
        p = eng.share_bits(pt, 128, instances, owner=1)
        sent_in = session.stats.peer(nxt).bytes_sent - before
        out = eng.evaluate(circuit, [k, p])[0]
        sent_and = session.stats.peer(nxt).bytes_sent - before - sent_in
        rounds = eng.rounds - rounds0
        opened = eng.reveal_bits(out, to=2)  # party 2 held no input
        elapsed = time.perf_counter() - t0
        if b:
            times.append(elapsed)
            sent.append(sent_and)
        ands = eng.and_gates - ands0
        # party 2 learns the ciphertexts; parties 0 and 1 reveal their inputs to it for the
        # check only (outside the timing)
        if check:
            if session.index in (0, 1):
                session.send(2, key if session.index == 0 else pt, tag="aes-check")
            else:
                kk = session.recv_array(0, tag="aes-check", dtype=np.uint64, shape=(128, words))
                pp = session.recv_array(1, tag="aes-check", dtype=np.uint64, shape=(128, words))
                pick = np.random.default_rng().choice(instances, size=min(check, instances), replace=False)
                ks, ps, cs = (bristol.pick_bitsliced(r, pick) for r in (kk, pp, opened))
                for i, k_, p_, c_ in zip(pick.tolist(), ks, ps, cs):
                    enc = Cipher(algorithms.AES(bristol.int_to_block(k_)), modes.ECB()).encryptor()
                    want = enc.update(bristol.int_to_block(p_)) + enc.finalize()
                    if bristol.int_to_block(c_) != want:
                        raise AssertionError(f"batch {b}: block {i} encrypted wrongly in 3PC")
                checked += len(pick)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"times": times, "rounds": rounds, "ands": ands, "sent_and_bytes": min(sent),
            "checked": checked, "peak_rss_mib": round(peak, 1)}


def bench_aes(instances: int = AES_INSTANCES, batches: int = 3, check: int = 2048,
              json_path: str | None = None, echo: Any = print) -> dict:
    """Three local parties over loopback TLS evaluate AES-128 (Bristol, key schedule included)
    on ``instances`` blocks per batch; reports the best batch."""
    from ..net import launch

    res = launch(3, _aes_job, instances, batches, check, timeout=1800)
    # a batch ends when the slowest party is done; the best such batch
    best = min(max(r["times"][b] for r in res) for b in range(batches))
    ands_per_block = res[0]["ands"]
    aes_per_s = instances / best
    bits_per_and = [8 * r["sent_and_bytes"] / (ands_per_block * instances) for r in res]
    out = {
        "circuit": "aes_128.txt (Bristol Fashion, key schedule included)",
        "and_per_block": ands_per_block,
        "instances_per_batch": instances,
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
        "parties": "3 processes on this machine, loopback TLS 1.3",
        "cores": os.cpu_count(),
    }
    echo(f"AES-128 in 3PC: {out['aes_per_s']:,} blocks/s ({instances:,} blocks per batch, best of {batches})")
    echo(f"  AND gates/s       {out['and_per_s']:,} ({ands_per_block} per block)")
    echo(f"  bits per AND      {out['bits_per_and']} per party (framing included)")
    echo(f"  rounds            {out['rounds']} (AND depth)")
    echo(f"  Gbit/s per party  {out['gbps']}")
    echo(f"  blocks checked    {out['blocks_checked']:,} against the cryptography library's AES, all correct")
    echo(f"  peak memory       {' / '.join(f'{m:.0f}' for m in out['peak_rss_mib_per_party'])} MiB per party")
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=1) + "\n")
    return out


def _ring_job(session: Any, n: int, batches: int) -> dict:
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


def bench_ring(n: int = 4_000_000, batches: int = 3, json_path: str | None = None, echo: Any = print) -> dict:
    from ..net import launch

    res = launch(3, _ring_job, n, batches, timeout=1800)
    best = min(max(r["times"][b] for r in res) for b in range(batches))
    out = {"multiplications_per_batch": n, "seconds_per_batch": round(best, 4), "mul_per_s": round(n / best),
           "bytes_per_mul_per_party": 8, "rounds_per_batch": 1, "checked": "all, against numpy"}
    echo(f"Z_2^64 multiplications in 3PC: {out['mul_per_s']:,}/s ({n:,} per batch, best of {batches}; "
         "one element per party each, all checked against numpy)")
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=1) + "\n")
    return out
