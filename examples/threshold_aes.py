"""Threshold GHS: two parties generate one BGV key inside the MPC (the secret stays shared),
a bank's AES key and a shop's blocks are encrypted jointly, each party evaluates AES-128 itself,
and only the shop learns the result, by a joint decryption that opens plaintext bits only.
Run: ``python examples/threshold_aes.py`` (the small test ring m = 257, one block, not secure:
about a quarter of a minute), or ``--params aes-53261`` for 120 blocks under the 141-bit set
(minutes and a few GB per party).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from shaper.crypto.bgv import aes, params, scheme
from shaper.crypto.bgv.slots import SlotEvaluator
from shaper.errors import DecryptionRefused
from shaper.jobs.bgv import clear_aes
from shaper.jobs.fhe import engine_for
from shaper.net import launch
from shaper.protocols import threshold_bgv as tb

BANK, SHOP = 0, 1


def party(session, name, key, blocks):
    engine = engine_for(session)                       # the n-party MPC (OT-extension triples)
    p = params.named(name)
    alg = scheme.algebra(p.m)
    plan = aes.AesCircuit(SlotEvaluator(alg)).plan()   # which automorphism keys AES needs
    keys = tb.keygen(engine, p, plan["automorphisms"])  # the same opened keys everywhere, a share each
    # joint inputs: c1 from a seed no party chose, each party's own error; only the owner's values
    state = tb.encrypt_jointly(engine, keys, aes.pack_blocks(blocks, alg) if session.index == SHOP else None,
                               owner=SHOP, tag="blocks")
    rks = tb.encrypt_jointly(engine, keys, np.stack(aes.pack_round_keys(key, alg)) if session.index == BANK
                             else None, owner=BANK, tag="round keys")
    (out,) = tb.evaluate(keys, tb.aes128(), state + rks)  # every party computes the output itself
    # a ciphertext one party made alone is refused by every party before anything is opened
    alone = scheme.encrypt(keys.public, keys.evaluator().encode(np.zeros(alg.nslots, np.uint64)))
    try:
        tb.decrypt_many(engine, keys, [alone], to=SHOP)
    except DecryptionRefused as exc:
        refused = str(exc)
    bits = tb.decrypt_many(engine, keys, [out], to=SHOP)  # only the shop learns the bits
    got = None if bits is None else aes.unpack_blocks(alg.decode(bits[0]), alg, len(blocks))
    return {"got": got, "refused": refused, "left": keys.ledger.remaining}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="test-257", choices=params.NAMES)
    args = ap.parse_args()
    p = params.named(args.params)
    n = aes.aes_layout(scheme.algebra(p.m)).nblocks
    key = os.urandom(16)                                                   # the bank's
    blocks = np.frombuffer(os.urandom(16 * n), np.uint8).reshape(n, 16)   # the shop's
    bank, shop = launch(["bank", "shop"], party, args.params, key, blocks)  # processes over loopback TLS
    print(f"refused: {bank['refused'][:100]}...")
    assert bank["got"] is None, "the bank learns nothing"
    assert np.array_equal(shop["got"], clear_aes(blocks, key)), "a block differs from AES-128"
    print(f"the shop holds AES-128 of its {n} blocks under the bank's key; {shop['left']} decryptions left on the key")


if __name__ == "__main__":
    main()
