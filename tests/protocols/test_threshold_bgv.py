"""Joint BGV decryption to bits (shaper.protocols.threshold_bgv): n parties holding additive
shares of the secret open exactly the plaintext bits a single-key decryption gives, including
phases right at ±q_0/2 (the parity of the centred value), and nothing else is opened."""

from __future__ import annotations

import numpy as np
import pytest

from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.prg import Prg
from shaper.net import run_in_memory
from shaper.protocols.threshold_bgv import decrypt_bits
from tests.protocols.dealer_engine import engine_for_tests

PARAMS = P.named("test-257")


def _setting(n):
    """The same secret, shares, keys and ciphertexts at every party (deterministic)."""
    ring = S._ring(PARAMS)
    keys = S.keygen(PARAMS, (), prg=Prg(b"\x05" * 32))
    s = keys.secret.evaluation(ring)
    full = list(range(len(ring.basis)))
    rng = np.random.default_rng(11)
    qs = np.asarray(ring.basis, dtype=np.uint64)[:, None]
    shares = [rng.integers(0, 2**62, s.shape, dtype=np.uint64) % qs for _ in range(n - 1)]
    last = s
    for sh in shares:
        last = ring.sub(last, sh, full)
    ev = S.Evaluator(PARAMS, keys.relin, keys.galois)
    slots = rng.integers(0, 2**ev.algebra.d, ev.algebra.nslots, dtype=np.uint64)
    ct = S.encrypt(keys.public, ev.encode(slots), prg=Prg(b"\x06" * 32))
    # a level-0 ciphertext whose phase is chosen: coefficients at and around (q0 - 1)/2 and q0 - 1
    q0 = PARAMS.primes[0]
    v = rng.integers(0, q0, PARAMS.phi, dtype=np.uint64)
    edges = [(q0 - 1) // 2 - 1, (q0 - 1) // 2, (q0 + 1) // 2, (q0 + 1) // 2 + 1, 0, 1, q0 - 1, q0 - 2]
    v[:len(edges)] = edges
    c1 = ring.forward(rng.integers(0, q0, (1, PARAMS.phi), dtype=np.uint64), [0])
    c0 = ring.sub(ring.forward(v[None, :], [0]), ring.mul(c1, s[:1], [0]), [0])
    crafted = S.Ciphertext(np.stack([c0, c1]), 0, 1.0, PARAMS)
    return keys, shares + [last], slots, ct, crafted, v


def _job(session, n):
    keys, shares, _, ct, crafted, _ = _setting(n)
    engine = engine_for_tests(session)
    mine = shares[session.index]
    return {"fresh": decrypt_bits(engine, mine, ct, to=0), "crafted": decrypt_bits(engine, mine, crafted)}


@pytest.mark.parametrize("n", [2, 3])
def test_joint_decryption_opens_exactly_the_plaintext_bits(n):
    keys, _, slots, ct, _, v = _setting(n)
    res = run_in_memory(n, _job, n, timeout=300)
    assert np.array_equal(res[0]["fresh"], S.decrypt_bits(keys.secret, ct))
    assert np.array_equal(S.algebra(PARAMS.m).decode(res[0]["fresh"]), slots)
    assert all(r["fresh"] is None for r in res[1:])  # to=0: the others learn nothing
    q0 = PARAMS.primes[0]
    centred = np.where(v > (q0 - 1) // 2, v.astype(object) - q0, v.astype(object))
    want = np.asarray([int(c) & 1 for c in centred], dtype=np.uint8)
    for r in res:  # to=None: every party, the parity of the centred phase, edges included
        assert np.array_equal(r["crafted"], want)
