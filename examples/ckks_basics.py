"""CKKS in a few lines: keys, encryption, products, rotations, a matrix-vector product, and
ciphertexts as bytes. Run: ``python examples/ckks_basics.py`` (about a second with the native
kernels; ``--small`` uses N = 2^11, an insecure test set, which also runs on the numpy reference).
"""

from __future__ import annotations

import argparse

import numpy as np

from shaper.crypto import ckks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="N = 2^11 test parameters (not secure)")
    args = ap.parse_args()
    if args.small:
        params = ckks.Parameters.from_literal(2 ** 11, [50, 40, 40], 50, 40, insecure=True)
    else:
        params = ckks.Parameters.from_literal(2 ** 14, [60] + [53] * 6, 60, 53)  # 128-bit secure
    print(params)

    d = 64  # a 64 x 64 matrix acts on vectors repeated with period 64 across the slots
    keys = ckks.KeySet(params, rotations=[1] + ckks.Evaluator.matvec_steps(d))
    enc = ckks.Encoder(params)
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    rng = np.random.default_rng(0)

    x = rng.uniform(-1, 1, params.slots)
    y = rng.uniform(-1, 1, params.slots)
    cx = ckks.encrypt(keys.public, enc.encode(x))
    cy = ckks.encrypt(keys.public, enc.encode(y))

    def show(name: str, ct: ckks.Ciphertext, want: np.ndarray) -> None:
        got = ckks.Encoder(params).decode(ckks.decrypt(keys.secret, ct))
        print(f"{name:28s} level {ct.level}  max error {np.max(np.abs(got - want)):.1e}")

    show("x + y", ev.add(cx, cy), x + y)
    show("x * y (relinearised, rescaled)", ev.mul_rescale(cx, cy), x * y)
    show("x rotated left by 1", ev.rotate(cx, 1), np.roll(x, -1))

    m, v = rng.uniform(-1, 1, (d, d)), rng.uniform(-1, 1, d)
    cv = ckks.encrypt(keys.public, enc.encode(np.tile(v, params.slots // d)))
    show("M v (baby-step giant-step)", ev.matvec(m, cv), np.tile(m @ v, params.slots // d))

    blob = ckks.to_bytes(cx)
    back = ckks.from_bytes(blob, params)
    show(f"x after {len(blob) / 2 ** 20:.1f} MiB of bytes", back, x)


if __name__ == "__main__":
    main()
