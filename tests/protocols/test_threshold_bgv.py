"""Joint BGV decryption to bits (shaper.protocols.threshold_bgv): n parties holding additive
shares of the secret open exactly the plaintext bits a single-key decryption gives, including
phases right at ±q_0/2 (the parity of the centred value), and nothing else is opened."""

from __future__ import annotations

import numpy as np
import pytest

from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.prg import Prg
from shaper.kernels import cyclo
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


def _keygen_job(session, params, galois):
    from shaper.protocols.threshold_bgv import keygen

    engine = engine_for_tests(session)
    keys = keygen(engine, params, galois)
    # test only: open the joint secret's coefficients to check its distribution
    ring = S._ring(params)
    coeffs = ring.inverse(keys.share.rows, list(range(len(params.basis))))[:1]
    total = engine.reveal_mod(S_mod(engine, coeffs, params.basis[:1]))
    return {"keys": keys, "s": total}


def S_mod(engine, rows, primes):
    from shaper.protocols.api import ModShares

    return ModShares(engine, np.ascontiguousarray(rows.T), primes)


@pytest.mark.parametrize("n, weight", [(2, None), (3, 17)])
def test_keys_made_in_the_mpc_work_and_the_secret_has_its_distribution(n, weight):
    params = PARAMS if weight is None else P.Parameters.from_primes(257, PARAMS.primes, PARAMS.special,
                                                                   hamming_weight=weight, name="w", insecure=True)
    alg = S.algebra(params.m)
    galois = [u for u, _ in alg.rotation(0, 1)] + [2]
    res = run_in_memory(n, _keygen_job, params, galois, timeout=600)
    keys = [r["keys"] for r in res]
    for k in keys[1:]:  # every party holds the same opened keys
        assert np.array_equal(k.public.b, keys[0].public.b) and np.array_equal(k.relin.b, keys[0].relin.b)
    q0 = params.primes[0]
    s = np.asarray([int(v) - q0 if v > q0 // 2 else int(v) for v in res[0]["s"].ravel()])
    assert set(np.unique(s)) <= {-1, 0, 1}
    if weight is not None:
        assert int(np.count_nonzero(s)) == weight
    else:
        assert 0.5 < np.count_nonzero(s) / len(s) < 0.85  # uniform ternary: 2/3 nonzero
    sk = S.SecretKey(params, s.astype(np.int8))
    ev = keys[0].evaluator()
    x = np.random.default_rng(5).integers(0, 2**alg.d, alg.nslots, dtype=np.uint64)
    ct = S.encrypt(keys[0].public, ev.encode(x))
    assert np.array_equal(S.decrypt(sk, ct), x)  # the opened public key is a key under the joint secret
    assert [r["keys"].phases[-1].name for r in res][0].startswith("check")


def _aes_job(session):
    from shaper.crypto.bgv import aes
    from shaper.crypto.bgv.slots import SlotEvaluator
    from shaper.protocols.threshold_bgv import keygen

    engine = engine_for_tests(session)
    alg = S.algebra(PARAMS.m)
    keys = keygen(engine, PARAMS, aes.AesCircuit(SlotEvaluator(alg)).plan()["automorphisms"])
    ev = keys.evaluator()
    # the same public encryptions at every party (a shared seed stands in for the input parties)
    prg = Prg(b"\x09" * 32)
    block = np.frombuffer(bytes.fromhex("00112233445566778899aabbccddeeff"), dtype=np.uint8).reshape(1, 16)
    state = S.encrypt(keys.public, ev.encode(aes.pack_blocks(block, alg)), prg=prg)
    round_keys = [S.encrypt(keys.public, ev.encode(v), prg=prg) for v in aes.pack_round_keys(bytes(range(16)), alg)]
    out = aes.encrypt_blocks(ev, state, round_keys)  # every party evaluates: byte-identical outputs
    bits = decrypt_bits(engine, keys.share, out, to=0)
    return None if bits is None else aes.unpack_blocks(alg.decode(bits), alg, 1)


@pytest.mark.skipif(not cyclo.native_selected(), reason="AES on the reference transform takes minutes; the "
                    "composition is the same on every kernel (each piece is tested on each)")
def test_aes_under_keys_made_in_the_mpc_decrypts_jointly_to_fips_197():
    res = run_in_memory(2, _aes_job, timeout=600)
    assert bytes(res[0][0]).hex() == "69c4e0d86a7b0430d8cdb78070b4c55a" and res[1] is None
