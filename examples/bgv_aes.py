"""AES-128 under BGV in GHS's packed style: one key, the blocks and the expanded AES key
encrypted, the 10 rounds evaluated homomorphically, the result checked against a clear AES.
Run: ``python examples/bgv_aes.py`` (a few seconds: the small test ring m = 4369, 16 blocks, not
secure) or ``python examples/bgv_aes.py --params aes-53261`` (120 blocks under the 141-bit set,
about a minute and a half on one core).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from shaper.crypto.bgv import aes, params, scheme, serial
from shaper.crypto.bgv.slots import SlotEvaluator
from shaper.jobs.bgv import clear_aes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="test-4369", choices=params.NAMES)
    args = ap.parse_args()
    p = params.named(args.params)
    print(p)
    alg = scheme.algebra(p.m)                          # the slots: GF(2^d) values on a hypercube
    plan = aes.AesCircuit(SlotEvaluator(alg)).plan()   # the circuit run on plaintext slots: its keys
    print(f"{plan['blocks']} blocks per ciphertext, {plan['multiplications']} products (depth {plan['depth']}), "
          f"{plan['key_switches']} key switches, {plan['key_switching_keys']} key-switching keys")

    keys = scheme.keygen(p, plan["automorphisms"])
    ev = scheme.Evaluator(p, keys.relin, keys.galois)
    blocks = np.frombuffer(os.urandom(16 * plan["blocks"]), dtype=np.uint8).reshape(-1, 16)
    key = os.urandom(16)
    state = scheme.encrypt(keys.public, ev.encode(aes.pack_blocks(blocks, alg)))
    round_keys = [scheme.encrypt(keys.public, ev.encode(v)) for v in aes.pack_round_keys(key, alg)]
    print(f"a ciphertext is {len(serial.to_bytes(state)) / 1e6:.1f} MB at the top level")

    t = time.perf_counter()
    out = aes.encrypt_blocks(ev, state, round_keys)
    print(f"AES-128 evaluated in {time.perf_counter() - t:.1f} s; {p.max_level - out.level} levels used, "
          f"{out.capacity():.0f} bits of noise room left")
    got = aes.unpack_blocks(scheme.decrypt(keys.secret, out), alg, len(blocks))
    assert np.array_equal(got, clear_aes(blocks, key)), "a block differs from AES-128"
    print(f"all {len(blocks)} blocks equal AES-128 of the plaintext under the key")


if __name__ == "__main__":
    main()
