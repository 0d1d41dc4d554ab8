"""Bits of precision after each CKKS operation (the precision table of docs/ckks.md).

Precision is -log2 of the mean absolute slot error (and of the worst slot) against numpy, over
random inputs in [-1, 1], for shaper's engine at N = 2^14, [60, 53 x 6] + 60, scale 2^53 by
default. Run: ``python benchmarks/ckks_precision.py [--json PATH]``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from meta import write_json


def bits(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    err = np.abs(np.asarray(got) - np.asarray(want))
    return -math.log2(float(err.mean())), -math.log2(float(err.max()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logn", type=int, default=14)
    ap.add_argument("--bits", type=int, nargs="+", default=[60, 53, 53, 53, 53, 53, 53, 60],
                    help="prime sizes: ciphertext primes, then the special prime")
    ap.add_argument("--scale-bits", type=int, default=53)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()

    from shaper.crypto import ckks

    n = 2 ** args.logn
    params = ckks.Parameters.from_literal(n, args.bits[:-1], args.bits[-1], args.scale_bits,
                                          insecure=args.logn < 14)
    d = 64
    keys = ckks.KeySet(params, rotations=[1, 5] + ckks.Evaluator.matvec_steps(d), conjugation=True)
    enc, ev = ckks.Encoder(params), ckks.Evaluator(params, keys.relin, keys.galois)
    rng = np.random.default_rng(args.seed)
    slots = params.slots
    x, y = rng.uniform(-1, 1, slots), rng.uniform(-1, 1, slots)

    def dec(ct, complex=False):
        return enc.decode(ckks.decrypt(keys.secret, ct), complex=complex)

    rows: list[tuple[str, int, float, float]] = []

    def row(name, ct, want, complex=False):
        mean, worst = bits(dec(ct, complex), want)
        rows.append((name, ct.level, mean, worst))

    start = time.perf_counter()
    rows.append(("encode + decode (no encryption)", params.max_level, *bits(enc.decode(enc.encode(x)), x)))
    cx, cy = ckks.encrypt(keys.public, enc.encode(x)), ckks.encrypt(keys.public, enc.encode(y))
    row("fresh, public key", cx, x)
    row("fresh, secret key", ckks.encrypt(keys.secret, enc.encode(x)), x)
    row("add", ev.add(cx, cy), x + y)
    row("plaintext multiply + rescale", ev.rescale(ev.mul_const(cx, y)), x * y)
    prod = ev.mul_rescale(cx, cy)
    row("multiply + relinearise + rescale", prod, x * y)
    row("rotate by 1 (top level)", ev.rotate(cx, 1), np.roll(x, -1))
    row("rotate by 5 after a product", ev.rotate(prod, 5), np.roll(x * y, -5))
    z = x + 1j * y
    row("conjugate (complex slots)", ev.conjugate(ckks.encrypt(keys.public, enc.encode(z))), np.conj(z), complex=True)
    m, v = rng.uniform(-1, 1, (d, d)) / 8, rng.uniform(-1, 1, d)
    cv = ckks.encrypt(keys.public, enc.encode(np.tile(v, slots // d)))
    row(f"{d}x{d} matrix-vector (BSGS)", ev.matvec(m, cv), np.tile(m @ v, slots // d))
    acc, want = cx, x
    for k in range(params.max_level):
        w = rng.uniform(0.9, 1.1, slots) * rng.choice([-1.0, 1.0], slots)
        cw = ckks.encrypt(keys.public, enc.encode(w, level=acc.level))
        acc, want = ev.mul_rescale(acc, cw), want * w
        row(f"after {k + 1} sequential products", acc, want)
    elapsed = time.perf_counter() - start

    print(f"{params}; {elapsed:.1f} s")
    print("| operation | level | precision, mean (bits) | worst slot (bits) |")
    print("| --- | ---: | ---: | ---: |")
    for name, level, mean, worst in rows:
        print(f"| {name} | {level} | {mean:.1f} | {worst:.1f} |")
    if args.json:
        write_json(args.json, {"meta": {"params": repr(params), "seed": args.seed},
                               "rows": [{"operation": r[0], "level": r[1], "mean_bits": round(r[2], 2),
                                         "worst_bits": round(r[3], 2)} for r in rows]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
