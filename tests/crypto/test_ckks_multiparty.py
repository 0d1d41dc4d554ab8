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


def test_decryption_shares_open_to_the_message_with_centred_smudging(setting):
    prg, sk, shares = setting
    x = np.linspace(-1, 1, PARAMS.slots)
    cts = [ckks.encrypt(ckks.public_key(sk), ckks.Encoder(PARAMS).encode(v), prg) for v in (x, x[::-1])]
    bits = 12
    # r = sum of the parties' shares of a value in [0, 2^bits) per coefficient, limb q_0 only
    r = prg.below(1 << bits, (len(cts), PARAMS.n)).astype(np.int64)
    r_rows = CTX.from_signed(r, [0])  # (ciphertexts, 1, N)
    parts = [r_rows] + [np.zeros_like(r_rows) for _ in range(PARTIES - 1)]
    states = [ckks.SecretKeyShare(PARAMS, s, k, PARTIES) for k, s in enumerate(shares)]
    opened = None
    for share, smudge in zip(states, parts):
        part = mp.decryption_share(share, cts, smudge.copy(), bits)
        opened = part if opened is None else CTX.add(opened, part, [0])
    got = mp.decode_opened(PARAMS, opened, cts)
    assert np.max(np.abs(got[0] - x)) < 1e-3 and np.max(np.abs(got[1] - x[::-1])) < 1e-3
    assert mp.decryption_request(cts, 0, bits) == {"digest": [mp.ciphertext_digest(c) for c in cts], "to": 0,
                                                   "smudge_bits": bits}


def test_seeds_and_checks_are_separated_and_validated():
    opened = np.arange(4, dtype=np.uint64)
    assert mp.seed_from_opened("pk", opened) != mp.seed_from_opened("rlk", opened)
    assert len(mp.seed_from_opened("pk", opened)) == 32
    with pytest.raises(ValueError, match="at least one"):
        mp.validate_ciphertexts(PARAMS, [], 25)
    with pytest.raises(TypeError, match="not a ckks.Ciphertext"):
        mp.validate_ciphertexts(PARAMS, [np.zeros(3)], 25)
