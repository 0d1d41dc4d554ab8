"""The jobs of ``shaper fhe aes``: AES-128 evaluated homomorphically under BGV (GHS's packed
layout, docs/bgv.md), single key: one process generates the keys, encrypts the blocks and the
expanded key, evaluates the circuit, decrypts and checks every block against the clear AES
(``cryptography``'s AES-128-ECB, an implementation independent of ours).

:func:`aes_single_key` returns a report: per phase seconds, the parameter set and its security
estimate, the circuit's counts, the output's level and noise, and the check.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["FIPS_197_KEY", "FIPS_197_PLAINTEXT", "aes_command", "aes_single_key", "clear_aes"]

# FIPS-197 Appendix C.1: the first block of a run without --key is this vector
FIPS_197_KEY = bytes(range(16))
FIPS_197_PLAINTEXT = bytes.fromhex("00112233445566778899aabbccddeeff")
FIPS_197_CIPHERTEXT = bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")


def clear_aes(blocks: np.ndarray, key: bytes) -> np.ndarray:
    """AES-128-ECB of (n, 16) uint8 blocks by ``cryptography`` (the check's oracle)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    out = enc.update(np.ascontiguousarray(blocks, dtype=np.uint8).tobytes()) + enc.finalize()
    return np.frombuffer(out, dtype=np.uint8).reshape(-1, 16)


def aes_single_key(blocks: int | None = None, params: str = "aes-53261", key: bytes | None = None,
                   data: np.ndarray | None = None, insecure: bool = False,
                   progress: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    """AES-128 of ``blocks`` blocks under one BGV key. ``data``: (n, 16) uint8 blocks (default:
    FIPS-197 C.1's plaintext first, then random blocks); ``key``: 16 bytes (default: FIPS-197's
    key when ``data`` is not given, else random). ``progress(phase, seconds)`` is called after
    each phase. Raises ConfigError naming the problem for a bad block count, key or data."""
    from ..crypto.bgv import aes, scheme
    from ..crypto.bgv import params as bgv_params
    from ..crypto.bgv.slots import SlotEvaluator

    try:
        p = bgv_params.named(params)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if p.insecure and not insecure:
        raise ConfigError(f"parameter set {params!r} is an insecure test or comparison set "
                          f"({p.security or 'not rated'}); pass --insecure to run it")
    alg = scheme.algebra(p.m)
    layout = aes.aes_layout(alg)
    capacity = layout.nblocks
    if data is not None:
        data = np.asarray(data, dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 16 or not 1 <= len(data) <= capacity:
            raise ConfigError(f"the data must be 1..{capacity} blocks of 16 bytes, got shape {data.shape}")
        blocks = len(data)
    if blocks is None:
        blocks = capacity
    if not 1 <= int(blocks) <= capacity:
        raise ConfigError(f"--blocks takes 1..{capacity} for parameter set {params!r} (m = {p.m}: "
                          f"{alg.nslots} slots of GF(2^{alg.d}), 16 bytes per block)")
    blocks = int(blocks)
    if key is None:
        key = FIPS_197_KEY if data is None else os.urandom(16)
    if len(key) != 16:
        raise ConfigError(f"an AES-128 key is 16 bytes, got {len(key)}")
    if data is None:
        rng = np.frombuffer(os.urandom(16 * blocks), dtype=np.uint8).reshape(blocks, 16).copy()
        rng[0] = np.frombuffer(FIPS_197_PLAINTEXT, dtype=np.uint8)
        data = rng

    phases: list[dict[str, Any]] = []

    def lap(name: str, t0: float) -> float:
        seconds = time.perf_counter() - t0
        phases.append({"name": name, "seconds": round(seconds, 3)})
        if progress:
            progress(name, seconds)
        return time.perf_counter()

    t = time.perf_counter()
    plan = aes.AesCircuit(SlotEvaluator(alg)).plan()
    keys = scheme.keygen(p, plan["automorphisms"])
    t = lap(f"key generation ({plan['key_switching_keys']} key-switching keys)", t)
    ev = scheme.Evaluator(p, keys.relin, keys.galois)
    circuit = aes.AesCircuit(ev)
    t = lap("circuit constants (encoded once)", t)
    state = scheme.encrypt(keys.public, ev.encode(aes.pack_blocks(data, alg)))
    round_keys = [scheme.encrypt(keys.public, ev.encode(v)) for v in aes.pack_round_keys(key, alg)]
    t = lap("encrypt blocks and the 11 round keys", t)
    out = circuit.encrypt(state, round_keys)
    t = lap("evaluate AES-128", t)
    got = aes.unpack_blocks(scheme.decrypt(keys.secret, out), alg, blocks)
    lap("decrypt", t)
    want = clear_aes(data, key)
    wrong = int(np.count_nonzero(np.any(got != want, axis=1)))
    fips = bool(data is not None and key == FIPS_197_KEY and bytes(data[0]) == FIPS_197_PLAINTEXT
                and bytes(got[0]) == FIPS_197_CIPHERTEXT)
    return {
        "params": params, "m": p.m, "phi": p.phi, "slots": alg.nslots, "d": alg.d, "blocks": blocks,
        "security": p.security, "log_qp": round(p.log_qp, 1), "chain_primes": len(p.primes),
        "special_primes": len(p.special), "digits": p.digits,
        "secret": "ternary" if p.hamming_weight is None else f"weight {p.hamming_weight}",
        "plan": {k: plan[k] for k in ("multiplications", "constant_multiplications", "key_switches", "depth",
                                      "key_switching_keys")},
        "levels_used": p.max_level - out.level, "level_left": out.level, "capacity_bits": round(out.capacity(), 1),
        "phases": phases, "wrong_blocks": wrong, "correct": wrong == 0, "fips_197_c1": fips,
        "output": got, "expected": want,
    }


def aes_command(args: Any) -> int:
    """``shaper fhe aes``: parse the options, run :func:`aes_single_key`, print the phases and the
    check; exit 0 when every block is right, 1 when one is not."""
    from pathlib import Path

    from .report import write_json

    if not args.single_key:
        raise ConfigError("shaper fhe aes runs under a single BGV key for now: pass --single-key (joint BGV keys "
                          "made in MPC are the next step, docs/bgv.md)")
    key = None
    if args.aes_key is not None:
        try:
            key = bytes.fromhex(args.aes_key)
        except ValueError:
            raise ConfigError(f"--aes-key {args.aes_key!r}: expected 32 hex digits") from None
    data = None
    if args.input is not None:
        raw = Path(args.input).read_bytes() if Path(args.input).is_file() else None
        if raw is None:
            raise ConfigError(f"--input {args.input}: no such file")
        if not raw or len(raw) % 16:
            raise ConfigError(f"--input {args.input}: {len(raw)} bytes is not a positive multiple of 16 (AES blocks)")
        data = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 16)
    print(f"AES-128 under BGV, parameter set {args.params}", flush=True)
    report = aes_single_key(args.blocks, args.params, key, data, args.insecure,
                            progress=lambda name, s: print(f"  {name:44s} {s:9.2f} s", flush=True))
    sec = f"{report['security']}-bit estimate" if report["security"] else "not rated (comparison or test set)"
    print(f"ring m = {report['m']}, phi = {report['phi']}, {report['slots']} slots of GF(2^{report['d']}); "
          f"{report['chain_primes']} chain primes + {report['special_primes']} special, log2 QP = "
          f"{report['log_qp']:.0f}, {report['secret']} secret, {sec}")
    print(f"circuit: {report['plan']['multiplications']} products (depth {report['plan']['depth']}), "
          f"{report['plan']['constant_multiplications']} constant products, {report['plan']['key_switches']} key "
          f"switches; {report['levels_used']} levels used, {report['capacity_bits']:.0f} bits of noise room left")
    evaluate = next(ph["seconds"] for ph in report["phases"] if ph["name"].startswith("evaluate"))
    print(f"evaluation: {evaluate:.1f} s for {report['blocks']} blocks ({evaluate / report['blocks'] * 1e3:.0f} ms "
          f"per block)")
    ok = report["blocks"] - report["wrong_blocks"]
    print(f"check against a clear AES-128: {ok}/{report['blocks']} blocks right"
          + ("; block 0 is FIPS-197 C.1's ciphertext 69c4e0d8 6a7b0430 d8cdb780 70b4c55a" if report["fips_197_c1"]
             else ""))
    if args.out:
        from ..files import write_atomic

        write_atomic(args.out, report["output"].tobytes(), private=False)
        print(f"decrypted blocks written to {args.out}")
    if args.json:
        figures = {k: v for k, v in report.items() if k not in ("output", "expected")}
        print(f"figures written to {write_json(args.json, figures)}")
    return 0 if report["correct"] else 1
