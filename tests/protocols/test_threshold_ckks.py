"""Threshold CKKS by MPC key generation (first part of issue 18): the opened keys are valid
single-key CKKS keys under s_ideal = sum of the shares, which is ternary; joint decryption with
jointly sampled smudging gives the right slots, also after products and rotations with the
joint keys."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.prg import Prg
from shaper.net import run_in_memory
from shaper.protocols import OtTriples
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.nparty import AdditiveNPC, ModShares

pytestmark = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None,
                                reason="the MPC engine's OT extension runs in the native extension only")

PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
X = np.linspace(-1, 1, PARAMS.slots)
Y = np.cos(np.arange(PARAMS.slots))


def _job(session):
    e = AdditiveNPC(session, triple_source=OtTriples(), frac_bits=0)
    keys = tc.keygen(e, PARAMS, rotations=[1])
    enc = ckks.Encoder(PARAMS)
    ev = ckks.Evaluator(PARAMS, keys.relin, keys.galois)
    # every party must decrypt the same ciphertext: the same encryption randomness here
    cx = ckks.encrypt(keys.public, enc.encode(X), Prg(bytes(32)))
    cy = ckks.encrypt(keys.public, enc.encode(Y), Prg(bytes(range(32))))
    out = {"fresh": tc.decrypt(e, keys.share, cx),
           "product": tc.decrypt(e, keys.share, ev.rotate(ev.mul_rescale(cx, cy), 1), to=0),
           "pk": keys.public.data, "rlk": keys.relin.data, "gk": keys.galois[ckks.galois_element(PARAMS, 1)].data}
    # test only: open the secret to check the keys against it
    out["s"] = ModShares(e, np.ascontiguousarray(keys.share.ntt.T), PARAMS.primes).reveal()
    return out


def _centred(rows, primes):
    return np.array([[int(v) if v <= q // 2 else int(v) - q for v in row] for row, q in zip(rows, primes)])


@pytest.mark.parametrize("n", [2, 3])
def test_joint_keys_are_single_key_ckks_keys_and_decrypt_jointly(n):
    res = run_in_memory(n, _job, timeout=300)
    ctx, primes = PARAMS.context, PARAMS.primes
    rows = list(range(len(primes)))
    for r in res[1:]:  # everyone holds the same opened keys
        assert np.array_equal(r["pk"], res[0]["pk"]) and np.array_equal(r["rlk"], res[0]["rlk"])
    s_ntt = np.ascontiguousarray(res[0]["s"].T)
    s = s_ntt.copy()
    ctx.intt(s, rows)
    s = _centred(s, primes)
    assert set(np.unique(s).tolist()) <= {-1, 0, 1} and all(np.array_equal(s[r], s[0]) for r in rows)
    # pk: b + a s is a small error on every limb (the same integers on each)
    pk = res[0]["pk"]
    err = ctx.add(pk[0], ctx.mul(pk[1], s_ntt, rows), rows)
    ctx.intt(err, rows)
    err = _centred(err, primes)
    assert np.max(np.abs(err)) <= 31 and all(np.array_equal(err[r], err[0]) for r in rows)
    # relinearisation key: b_j + a_j s = e_j + [row = j] p s^2
    rlk = res[0]["rlk"]
    s2 = ctx.mul(s_ntt, s_ntt, rows)
    for j, q in enumerate(PARAMS.moduli):
        got = ctx.add(rlk[j, 0], ctx.mul(rlk[j, 1], s_ntt, rows), rows)
        gadget = ctx.mul_scalar(np.ascontiguousarray(s2[j:j + 1]), np.array([PARAMS.special % q], dtype=np.uint64), [j])
        got[j:j + 1] = ctx.sub(np.ascontiguousarray(got[j:j + 1]), gadget, [j])
        ctx.intt(got, rows)
        assert np.max(np.abs(_centred(got, primes))) <= 31
    # joint decryption (smudging 2^30 at scale 2^40: about 2^-8 per slot here)
    for r in res:
        assert np.max(np.abs(r["fresh"] - X)) < 0.02
    assert np.max(np.abs(res[0]["product"] - np.roll(X * Y, -1))) < 0.02
    assert all(r["product"] is None for r in res[1:])
