"""One sigma (issue 34): both key-generation methods take the error width from ``params.sigma``. At a
width other than 3.2 the exact method's MPC sampler widens its support to ceil(7.2 sigma), the keys
pass the joint check decryption, and the opened errors (b + a s with s the sum of the shares) have
the requested width; the sampler's own law is checked at two other widths."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from shaper.crypto import ckks
from shaper.errors import ConfigError, PartyError
from shaper.net import run_in_memory
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.additive.sampling import MAX_TAIL, SIGMA, TAIL, gaussian_law, gaussian_tail, gaussian_thresholds

from .dealer_engine import engine_for_tests

BASE = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
ROWS = list(range(len(BASE.primes)))
P61 = (1 << 61) - 1


def _with_sigma(sigma):
    return dataclasses.replace(BASE, sigma=sigma)


def _centred(rows, primes):
    return np.array([[int(v) if v <= q // 2 else int(v) - q for v in row] for row, q in zip(rows, primes)])


def _coefficients(params, ntt_rows):
    x = np.ascontiguousarray(ntt_rows).copy()
    params.context.intt(x, ROWS)
    c = _centred(x, params.primes)
    assert all(np.array_equal(c[r], c[0]) for r in ROWS), "limbs disagree: not a small integer polynomial"
    return c[0]


def _keygen_job(session, sigma, method):
    params = _with_sigma(sigma)
    keys = tc.keygen(engine_for_tests(session), params, rotations=[1, 2], method=method)  # check=True
    return {"pk": keys.public.data, "rlk": keys.relin.data, "galois": {g: k.data for g, k in keys.galois.items()},
            "share": keys.share.ntt}


def _opened_errors(params, res):
    """Every opened error polynomial's coefficients, under s = the sum of the parties' shares."""
    ctx = params.context
    s = res[0]["share"]
    for r in res[1:]:
        s = ctx.add(s, r["share"], ROWS)
    pk = res[0]["pk"]
    out = [_coefficients(params, ctx.add(pk[0], ctx.mul(pk[1], s, ROWS), ROWS))]
    targets = {0: ctx.mul(s, s, ROWS)} | {g: ctx.automorph(s, g) for g in res[0]["galois"]}
    for g, key in ({0: res[0]["rlk"]} | res[0]["galois"]).items():
        for j, q in enumerate(params.moduli):
            got = ctx.add(key[j, 0], ctx.mul(key[j, 1], s, ROWS), ROWS)
            special = np.array([params.special % q], np.uint64)
            gadget = ctx.mul_scalar(np.ascontiguousarray(targets[g][j:j + 1]), special, [j])
            got[j:j + 1] = ctx.sub(np.ascontiguousarray(got[j:j + 1]), gadget, [j])
            out.append(_coefficients(params, got))
    return np.concatenate(out)


def test_the_exact_method_opens_errors_of_the_parameters_sigma():
    """sigma = 6: keys that pass the check decryption (keygen raises otherwise), opened errors of
    standard deviation 6 within 15 % (4.5 standard errors at these 640 coefficients), inside the
    support +-44, and following the sampler's law (chi-square); the public key's error alone is as
    wide."""
    sigma = 6.0
    params = _with_sigma(sigma)
    res = run_in_memory(2, _keygen_job, sigma, "exact", timeout=300)
    errors = _opened_errors(params, res)
    pk_errors = errors[:params.n]
    assert errors.size == params.n * (1 + 3 * len(params.moduli))
    assert abs(errors.std() / sigma - 1) < 0.15 and abs(errors.mean()) < 1.0
    assert 0.6 * sigma < pk_errors.std() < 1.4 * sigma  # 64 coefficients: +-40 % is 4.5 standard errors
    tail = gaussian_tail(sigma)
    assert tail == 44 and np.abs(errors).max() <= tail
    law = gaussian_law(sigma, tail)
    edges = 16  # |x| bins, the tail beyond merged
    expected = np.concatenate([law[:edges], [law[edges:].sum()]]) * errors.size
    observed = np.bincount(np.minimum(np.abs(errors), edges), minlength=edges + 1)
    assert chisquare(observed, expected).pvalue > 1e-4
    assert errors.std() > 1.4 * SIGMA  # not the sampler's old constant width


def test_the_local_method_takes_the_same_sigma():
    """method="local" at sigma 6 and 3 parties: the opened errors are sums of 3 party errors of
    width 6 (variance 3 x 36), and the keys pass the check decryption."""
    sigma = 6.0
    res = run_in_memory(3, _keygen_job, sigma, "local", timeout=300)
    var = float(np.var(_opened_errors(_with_sigma(sigma), res)))
    assert 0.7 * 3 * sigma ** 2 < var < 1.3 * 3 * sigma ** 2


def test_the_default_width_is_unchanged():
    assert gaussian_tail() == gaussian_tail(3.2) == TAIL == 23
    assert len(gaussian_thresholds()) == 23
    assert gaussian_tail(6.0) == math.ceil(7.2 * 6.0) and gaussian_tail(1.0) == 8 and gaussian_tail(3.3) == 24
    for bad in (0.0, -1.0, float("nan"), float("inf"), 36.0):
        with pytest.raises(ConfigError, match="sigma"):
            gaussian_tail(bad)
    assert gaussian_tail(MAX_TAIL / 7.2) == MAX_TAIL


def test_the_dropped_tail_is_below_the_documented_mass_at_every_width():
    """The module's statistical-distance argument: at tail = ceil(7.2 sigma) the dropped mass of
    the discrete Gaussian is below 2^-40.6 for every supported sigma (and 2^-42.4 at the default)."""
    def dropped(sigma, tail):
        rho = [math.exp(-i * i / (2 * sigma * sigma)) for i in range(int(14 * sigma) + 60)]
        return 2 * sum(rho[tail + 1:]) / (rho[0] + 2 * sum(rho[1:]))

    assert math.log2(dropped(3.2, 23)) < -42.4
    for sigma in np.arange(0.5, 35.4, 0.1):
        tail = gaussian_tail(float(sigma))
        assert dropped(float(sigma), tail) < 2 ** -40.6
        assert (tail + 1) * 2.0 ** -41 + 2 ** -40.6 <= 2 ** -32.9


def _refused_job(session):
    tc.keygen(engine_for_tests(session), _with_sigma(50.0))


def test_a_width_the_sampler_cannot_build_is_refused_before_any_message():
    with pytest.raises(PartyError, match="supports sigma up to 35.4"):
        run_in_memory(2, _refused_job, timeout=30)


def _sample_job(session, sigma, count):
    return engine_for_tests(session).gaussian(count, (P61, 17), sigma=sigma).reveal(to=0)


@pytest.mark.parametrize("sigma", [1.0, 6.0])
def test_the_sampler_follows_its_law_at_other_widths(sigma):
    """2^14 revealed samples against the exact law (chi-square on |x|, the rare tail merged):
    sigma 1 (support +-8, 4 bits of |x|) and sigma 6 (support +-44, 6 bits), every limb the same
    integer."""
    count = 1 << 14
    vals = run_in_memory(2, _sample_job, sigma, count, timeout=300)[0]
    x = np.where(vals[:, 0] > P61 // 2, vals[:, 0].astype(np.int64) - P61, vals[:, 0].astype(np.int64))
    assert np.array_equal((x % 17).astype(np.uint64), vals[:, 1])
    tail = gaussian_tail(sigma)
    assert np.abs(x).max() <= tail
    law = gaussian_law(sigma, tail)
    expected = law * count
    edges = int(np.sum(expected >= 5)) - 1  # the law falls off from |x| = 1: a prefix of bins, the rest merged
    observed = np.bincount(np.abs(x), minlength=tail + 1)
    obs = np.concatenate([observed[:edges], [observed[edges:].sum()]])
    exp = np.concatenate([expected[:edges], [expected[edges:].sum()]])
    assert chisquare(obs, exp * obs.sum() / exp.sum()).pvalue > 1e-5
    assert abs(x.std() / sigma - 1) < 0.05
    assert abs(np.mean(x > 0) - np.mean(x < 0)) < 0.05  # the sign is uniform
