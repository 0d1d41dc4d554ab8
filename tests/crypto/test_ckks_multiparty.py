"""Threshold CKKS's local steps (``shaper.crypto.ckks.multiparty``) without any MPC, as Lattigo's
``multiparty_test.go`` checks them against ``skIdeal``: a single-key secret split into additive
shares, each party's step computed on its share alone, and the sum over the parties compared
with what the single-key engine gives under the whole secret."""

from __future__ import annotations

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.ckks import multiparty as mp
from shaper.crypto.ckks.keys import small_to_rns
from shaper.crypto.prg import Prg
from shaper.errors import ConfigError

PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
ROWS = list(range(len(PARAMS.primes)))
CTX = PARAMS.context
PARTIES = 3


def _uniform(prg, count=None):
    shape = (len(ROWS), PARAMS.n) if count is None else (count, len(ROWS), PARAMS.n)
    out = np.empty(shape, np.uint64)
    for r, q in enumerate(PARAMS.primes):
        out[..., r, :] = prg.below(q, shape[:-2] + (PARAMS.n,))
    return out


def _split(x, prg):
    """Additive shares of NTT rows x (every row mod its prime)."""
    shares = [_uniform(prg, None if x.ndim == 2 else x.shape[0]) for _ in range(PARTIES - 1)]
    last = x.copy()
    for s in shares:
        last = CTX.sub(last, s, ROWS)
    return shares + [last]


def _ntt(coefficients):
    """Small integer coefficients -> NTT rows."""
    return small_to_rns(PARAMS, np.asarray(coefficients), ROWS)


def _sum(parts):
    total = parts[0]
    for p in parts[1:]:
        total = CTX.add(total, p, ROWS)
    return total


@pytest.fixture(scope="module")
def setting():
    prg = Prg(bytes(range(32)))
    sk = ckks.SecretKey.generate(PARAMS, prg)
    return prg, sk, _split(sk.ntt, prg)


def test_public_key_shares_sum_to_the_single_key_public_key(setting):
    prg, sk, shares = setting
    a = _uniform(prg)
    errors = [ckks.sample_gaussian(PARAMS.n, PARAMS.sigma, prg) for _ in range(PARTIES)]
    b = _sum([mp.public_key_share(PARAMS, s, a, _ntt(e)) for s, e in zip(shares, errors)])
    want = ckks.public_key(sk, a=a, e=np.sum(errors, axis=0))
    assert np.array_equal(b, want.data[0])


def test_square_and_switching_key_shares_sum_to_the_relinearisation_key(setting):
    prg, sk, shares = setting
    alpha = _uniform(prg)
    alpha2 = CTX.mul(alpha, alpha, ROWS)
    alpha_shares, alpha2_shares = _split(alpha, prg), _split(alpha2, prg)
    d = _sum([CTX.sub(s, al, ROWS) for s, al in zip(shares, alpha_shares)])  # the opened s - alpha
    s2 = [mp.square_share(PARAMS, d, al, al2, k == 0)
          for k, (al, al2) in enumerate(zip(alpha_shares, alpha2_shares))]
    assert np.array_equal(_sum(s2), CTX.mul(sk.ntt, sk.ntt, ROWS))
    digits = len(PARAMS.moduli)
    a = _uniform(prg, digits)
    errors = [ckks.sample_gaussian((digits, PARAMS.n), PARAMS.sigma, prg) for _ in range(PARTIES)]
    b = _sum([mp.switching_key_share(PARAMS, s, t, a, _ntt(e)) for s, t, e in zip(shares, s2, errors)])
    want = ckks.relin_key(sk, a=a, e=np.sum(errors, axis=0))
    assert np.array_equal(b, want.data[:, 0])


def _joint_input(secret, shares, a, level, message):
    """The joint input of ``message`` (every party's share summed, party k's randomness from the
    seed k) and the error of its phase under ``secret``: centred coefficients, asserted to be the
    same small integers on every limb."""
    rows = PARAMS.mods(level)
    states = [ckks.SecretKeyShare(PARAMS, s, k, PARTIES) for k, s in enumerate(shares)]
    parts = [mp.joint_input_share(st, a, level, message if k == 0 else None, Prg(bytes([k]) * 32))
             for k, st in enumerate(states)]
    c0 = parts[0]
    for part in parts[1:]:
        c0 = CTX.add(c0, part, rows)
    s = np.ascontiguousarray(np.broadcast_to(secret.ntt[:level + 1], a.shape))
    error = CTX.sub(CTX.add(c0, CTX.mul(a, s, rows), rows), message, rows)  # phase - Delta m
    CTX.intt(error, rows)
    centred = np.where(error > np.array(PARAMS.moduli[:level + 1], np.uint64)[:, None] // 2,
                       error.astype(np.int64) - np.array(PARAMS.moduli[:level + 1], np.int64)[:, None],
                       error.astype(np.int64))
    assert all(np.array_equal(centred[:, r], centred[:, 0]) for r in rows), "not a small integer error"
    return c0, centred[:, 0]


def test_joint_input_shares_sum_to_an_encryption_whose_error_is_the_parties_own(setting):
    """b_i = e_i - a s_i (+ Delta m at the owner) under a common a: (sum b_i, a) decrypts under
    the whole secret to Delta m + sum e_i, an error of the parties' Gaussians alone: with the
    same randomness under another secret it is the same error (s appears nowhere in it)."""
    prg, sk, shares = setting
    x = np.linspace(-1, 1, PARAMS.slots)
    level = PARAMS.max_level
    a = np.ascontiguousarray(_uniform(prg, 2)[:, :level + 1])
    message = np.stack([ckks.Encoder(PARAMS).encode(v, level=level).data for v in (x, x[::-1])])
    c0, error = _joint_input(sk, shares, a, level, message)
    other = ckks.SecretKey.generate(PARAMS, Prg(bytes([7]) * 32))
    _, other_error = _joint_input(other, _split(other.ntt, prg), a, level, message)
    assert np.array_equal(error, other_error) and np.any(error != 0)
    # the sum of PARTIES Gaussians of width sigma: its spread, and far from any s-sized term
    assert 0.7 < np.std(error) / (PARAMS.sigma * np.sqrt(PARTIES)) < 1.3
    assert np.max(np.abs(error)) <= PARTIES * 6 * PARAMS.sigma
    for k, v in enumerate((x, x[::-1])):
        ct = ckks.Ciphertext(PARAMS, np.stack([c0[k], a[k]]), PARAMS.scale)
        assert np.max(np.abs(ckks.Encoder(PARAMS).decode(ckks.decrypt(sk, ct)) - v)) < 1e-6
    # a level-0 input: one limb, the same construction
    low = np.stack([ckks.Encoder(PARAMS).encode(x, level=0).data])
    _, low_error = _joint_input(sk, shares, np.ascontiguousarray(a[:1, :1]), 0, low)
    assert np.max(np.abs(low_error)) <= PARTIES * 6 * PARAMS.sigma


def test_decryption_shares_open_to_the_phase_plus_every_partys_flood(setting):
    """sum_i (c_1 s_i + f_i) + c_0 on limb q_0 is exactly the single-key phase c_0 + c_1 s plus
    the parties' floods; decoded, the slots are within the flood's predicted precision."""
    prg, sk, shares = setting
    x = np.linspace(-1, 1, PARAMS.slots)
    cts = [ckks.encrypt(ckks.public_key(sk), ckks.Encoder(PARAMS).encode(v), prg) for v in (x, x[::-1])]
    sigma = mp.flood_sigma(2.0 ** 10, mp.DEFAULT_BUDGET)
    mp.check_flood_fits(PARAMS, sigma, PARTIES)
    floods = [mp.sample_flood((len(cts), PARAMS.n), sigma, Prg(bytes([k + 1]) * 32)) for k in range(PARTIES)]
    states = [ckks.SecretKeyShare(PARAMS, s, k, PARTIES) for k, s in enumerate(shares)]
    opened = None
    for share, flood in zip(states, floods):
        part = mp.decryption_share(share, cts, flood)
        assert part.shape == (len(cts), 1, PARAMS.n)
        opened = part if opened is None else CTX.add(opened, part, [0])
    total = CTX.from_signed(np.sum(floods, axis=0), [0])
    CTX.ntt(total, [0])
    for k, ct in enumerate(cts):  # exactly: the phase under s_ideal plus the floods
        phase = np.ascontiguousarray(ckks.decrypt(sk, ct).data[:1])
        assert np.array_equal(opened[k], CTX.add(phase, np.ascontiguousarray(total[k]), [0]))
    got = mp.decode_opened(PARAMS, opened, cts)
    bits = mp.decryption_precision(PARAMS, PARAMS.scale, sigma, PARTIES)
    assert np.max(np.abs(got[0] - x)) <= 4 * 2.0 ** -bits and np.max(np.abs(got[1] - x[::-1])) <= 4 * 2.0 ** -bits
    # without floods the opening is the single-key decryption itself
    zero = np.zeros((len(cts), PARAMS.n), np.int64)
    bare = _sum_rows([mp.decryption_share(st, cts, zero) for st in states])
    assert np.array_equal(bare[0], np.ascontiguousarray(ckks.decrypt(sk, cts[0]).data[:1]))
    digests = [mp.ciphertext_digest(c) for c in cts]
    assert len(set(digests)) == 2 and all(len(d) == 64 for d in digests)
    assert digests[0] == mp.ciphertext_digest(ckks.from_bytes(ckks.to_bytes(cts[0]), PARAMS))


def _sum_rows(parts):
    total = parts[0]
    for p in parts[1:]:
        total = CTX.add(total, p, [0])
    return total


def _real_success_bits(sigma, e, q, a, work, kappa=mp.KAPPA):
    """log2 of the real-view success bound (R_a p)^((a - 1) / a): R_a = exp(a Q E^2 / (2 sigma^2))
    over Q decryptions, p = 2^(work - kappa) (RLWE against 2^work operations)."""
    log2_r = a * q * e ** 2 / (2 * sigma ** 2) / np.log(2)
    return (log2_r + work - kappa) * (a - 1) / a


def test_flood_width_follows_the_renyi_and_statistical_arguments():
    """key-recovery: at the Renyi order the width is sized for, an attacker with 2^64 work (and
    one with none) succeeds in the real view with probability exactly 2^-lambda, and no other
    order gives a narrower flood the same guarantee (a grid search, independent of the closed
    form); statistical: sigma = sqrt(24 Q) 2^(lambda / 2) E; the flood's samples have that width."""
    e, q = 1000.0, 1024
    sigma = mp.flood_sigma(e, q)
    for work in (mp.WORK_BITS, 0):
        s = mp.flood_sigma(e, q, work=work)
        a = mp.renyi_order(mp.SECURITY_LAMBDA, work=work)
        assert _real_success_bits(s, e, q, a, work) == pytest.approx(-mp.SECURITY_LAMBDA)
        # the narrowest width any order a in (1, 64] allows for the same bound
        best = min(np.sqrt(b * q * e ** 2 / (2 * np.log(2) * (mp.KAPPA - work - mp.SECURITY_LAMBDA * b / (b - 1))))
                   for b in np.linspace(1.01, 64, 20000) if mp.KAPPA - work - mp.SECURITY_LAMBDA * b / (b - 1) > 0)
        assert s == pytest.approx(best, rel=1e-4)
    assert sigma == mp.flood_sigma(e, q, work=64)
    # the constant-work argument of order 2 (R_2 = 2^(kappa - 2 lambda)) is within 2 % of its optimum;
    # 2^64 work costs about 1.57 bits
    assert mp.flood_sigma(e, q, work=0) == pytest.approx(e * np.sqrt(q / (48 * np.log(2))), rel=0.02)
    assert np.log2(sigma / mp.flood_sigma(e, q, work=0)) == pytest.approx(1.574, abs=0.01)
    with pytest.raises(ConfigError, match="kappa - work > lambda"):
        mp.flood_sigma(e, q, work=90)
    assert mp.flood_sigma(e, q, mode="statistical") == pytest.approx(np.sqrt(24 * q) * 2 ** 20 * e)
    assert mp.flood_sigma(2 * e, 4 * q) == pytest.approx(4 * sigma)  # linear in E, sqrt in Q
    f = mp.sample_flood(1 << 16, sigma, Prg(bytes(32)))
    assert f.dtype == np.int64 and 0.98 < np.std(f) / sigma < 1.02 and abs(np.mean(f)) < 0.02 * sigma
    assert np.max(np.abs(f)) <= 8.6 * sigma + 1
    for bad in ({"mode": "fixed"}, {"lam": 30}):
        with pytest.raises(ConfigError):
            mp.flood_sigma(e, q, **bad)
    for bad_e, bad_q in ((0.0, q), (float("inf"), q), (e, 0)):
        with pytest.raises(ConfigError):
            mp.flood_sigma(bad_e, bad_q)
    # the flood must leave most of q_0 to the message; more parties, less room
    limit = PARAMS.moduli[0] / 8 / 9
    mp.check_flood_fits(PARAMS, limit / np.sqrt(PARTIES) * 0.99, PARTIES)
    with pytest.raises(ConfigError, match="eighth of q_0"):
        mp.check_flood_fits(PARAMS, limit / np.sqrt(PARTIES) * 1.01, PARTIES)
    # the key check's allowance grows with the flood and the number of summed rotations
    assert mp.check_bound(20, 3) == pytest.approx(3 * mp.check_bound(20, 1)) and mp.check_bound(10, 1) > mp.check_bound(20, 1)


def test_seeds_and_checks_are_separated_and_validated():
    opened = np.arange(4, dtype=np.uint64)
    assert mp.seed_from_opened("pk", opened) != mp.seed_from_opened("rlk", opened)
    assert len(mp.seed_from_opened("pk", opened)) == 32
    with pytest.raises(ValueError, match="at least one"):
        mp.validate_ciphertexts(PARAMS, [])
    with pytest.raises(TypeError, match="not a ckks.Ciphertext"):
        mp.validate_ciphertexts(PARAMS, [np.zeros(3)])
    sk = ckks.SecretKey.generate(PARAMS, Prg(bytes(32)))
    ct = ckks.encrypt(ckks.public_key(sk), ckks.Encoder(PARAMS).encode(np.ones(PARAMS.slots)))
    assert mp.validate_ciphertexts(PARAMS, (ct,)) == [ct]
    with pytest.raises(ValueError, match="relinearised"):
        mp.validate_ciphertexts(PARAMS, [ckks.Evaluator(PARAMS, ckks.relin_key(sk)).mul(ct, ct, relinearize=False)])
    other = ckks.Parameters.from_literal(64, [50, 40], 50, 40, insecure=True)
    with pytest.raises(ValueError, match="other parameters"):
        mp.validate_ciphertexts(other, [ct])
