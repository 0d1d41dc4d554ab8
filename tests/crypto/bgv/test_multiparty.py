"""BGV's local key steps on shares (shaper.crypto.bgv.multiparty): summed over n parties they are
keys under the joint secret, which encrypt, multiply, relinearise and rotate correctly (checked
against the slot simulator), and single-key keygen is the same steps with one party."""

from __future__ import annotations

import numpy as np
import pytest

from shaper.crypto.bgv import multiparty as M
from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.bgv.slots import SlotEvaluator, rotate
from shaper.crypto.prg import Prg


def _share(ring, value, limbs, n, rng):
    """n additive shares of ``value`` (evaluation form on ``limbs``), the first n - 1 uniform."""
    qs = np.asarray([ring.basis[i] for i in limbs], dtype=np.uint64)[:, None]
    shares = [(rng.integers(0, 2**62, value.shape, dtype=np.uint64) % qs) for _ in range(n - 1)]
    last = value
    for sh in shares:
        last = ring.sub(last, sh, limbs)
    return shares + [last]


def _total(ring, parts, limbs):
    out = parts[0]
    for p in parts[1:]:
        out = ring.add(out, p, limbs)
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_key_shares_sum_to_working_keys_under_the_joint_secret(n):
    params = P.named("test-257")
    ring = S._ring(params)
    rng = np.random.default_rng(n)
    prg = Prg(bytes([n]) * 32)
    full = list(range(len(ring.basis)))
    chain = ring.chain(params.max_level)
    sk = S.SecretKey(params, S.sample_secret(params, prg))
    s = sk.evaluation(ring)
    s_sh = _share(ring, s, full, n, rng)

    a = S._uniform(ring, chain, prg)
    e2_sh = _share(ring, S._errors(ring, chain, prg), chain, n, rng)
    b = _total(ring, [M.public_key_share(ring, s_sh[i][chain], a, e2_sh[i]) for i in range(n)], chain)
    pk = S.PublicKey(params, b, a)

    # s^2 from square pairs: alpha uniform, d = s - alpha opened
    alpha = np.stack([rng.integers(0, 2**62, s.shape[-1], dtype=np.uint64) % q for q in ring.basis])
    alpha_sh = _share(ring, alpha, full, n, rng)
    alpha2_sh = _share(ring, ring.mul(alpha, alpha, full), full, n, rng)
    d = _total(ring, [ring.sub(s_sh[i], alpha_sh[i], full) for i in range(n)], full)
    s2_sh = [M.square_share(ring, d, alpha_sh[i], alpha2_sh[i], i == 0) for i in range(n)]
    assert np.array_equal(_total(ring, s2_sh, full), ring.mul(s, s, full))

    def key(targets):
        digits = params.digits
        a_k = np.stack([S._uniform(ring, full, prg) for _ in range(digits)])
        e_k = [np.stack(x) for x in zip(*[_share(ring, S._errors(ring, full, prg), full, n, rng)
                                         for _ in range(digits)])]
        bk = _total(ring, [M.switching_key_share(ring, s_sh[i], targets[i], a_k, e_k[i]) for i in range(n)], full)
        return S.SwitchingKey(params, bk, a_k)

    alg = S.algebra(params.m)
    u_rot = [u for u, _ in alg.rotation(0, 1)]
    galois = {u: key([ring.automorphism(s_sh[i], u) for i in range(n)]) for u in {*u_rot, 2}}
    ev = S.Evaluator(params, key(s2_sh), galois)
    sim = SlotEvaluator(alg)
    x, y = (rng.integers(0, 2**alg.d, alg.nslots, dtype=np.uint64) for _ in range(2))
    cx, cy = (S.encrypt(pk, ev.encode(v)) for v in (x, y))
    assert np.array_equal(S.decrypt(sk, cx), x)
    assert np.array_equal(S.decrypt(sk, ev.mul(cx, cy)), sim.mul(x, y))
    assert np.array_equal(S.decrypt(sk, ev.frobenius(cx, 1)), sim.frobenius(x, 1))
    assert np.array_equal(S.decrypt(sk, rotate(ev, cx, 0, 1)), rotate(sim, x, 0, 1))


def test_a_switching_key_share_refuses_the_wrong_number_of_digits():
    params = P.named("test-257")
    ring = S._ring(params)
    full = list(range(len(ring.basis)))
    s = np.zeros((len(full), params.phi), dtype=np.uint64)
    a = np.zeros((params.digits + 1, len(full), params.phi), dtype=np.uint64)
    with pytest.raises(ValueError, match=f"{params.digits} digits"):
        M.switching_key_share(ring, s, s, a, a.copy())
