"""Secure samplers of the additive engine against their exact laws: chi-square on 2^20 revealed
samples (two parties; 2^18 under SHAPER_NATIVE=off, 2^16 where the extension is absent and the
dealer stands in for OT), support checks, and the same samplers at three parties on fewer."""

import importlib.util
import math
import os
import warnings
from itertools import combinations

import numpy as np
from scipy import stats

from shaper.net import run_in_memory
from shaper.protocols import InsecureDealer, OtTriples
from shaper.protocols.additive import AdditiveEngine
from shaper.protocols.additive.sampling import TAIL, gaussian_law, gaussian_thresholds, hamming_weight

# OT extension where the native extension is built; the insecure dealer (triples and correlated
# OTs in the clear) without it, so that the samplers' laws are checked on every CI run
NATIVE = importlib.util.find_spec("shaper._native") is not None


def _source():
    if NATIVE:
        return OtTriples()
    warnings.simplefilter("ignore")  # the dealer warns on purpose
    return InsecureDealer()

P61 = (1 << 61) - 1
MILLION = 1 << 20
# samples per law: 2^20 on OT with the native gates; 2^18 on OT with numpy's gates
# (SHAPER_NATIVE=off: the same protocol, the laws already checked at 2^20 in CI's first run);
# 2^16 on the dealer, whose Python-integer arithmetic (no extension) is far slower. The
# chi-square tests hold at any size; the std bound widens with 1/sqrt(size).
GATES_OFF = os.environ.get("SHAPER_NATIVE", "").lower() in ("off", "0", "no", "false")
SAMPLES = (MILLION >> 2 if GATES_OFF else MILLION) if NATIVE else MILLION >> 4
STD_TOLERANCE = 0.01 * math.sqrt(MILLION / SAMPLES)  # 4.5 standard errors of the sample std at 2^20
P_FLOOR = 1e-6  # a correct sampler fails this once in a million runs


def _centered(values, q):
    v = values.astype(np.int64)
    return np.where(v > q // 2, v - q, v)


def _chi2(counts, expected):
    """p-value of counts against expected counts, bins with expectation < 5 merged."""
    counts, expected = np.asarray(counts, float), np.asarray(expected, float)
    order = np.argsort(expected)
    c, e = counts[order], expected[order]
    small = np.cumsum(e) < 5 * 3  # merge the rarest bins into one
    merged_c = np.concatenate([[c[small].sum()], c[~small]]) if small.any() else c
    merged_e = np.concatenate([[e[small].sum()], e[~small]]) if small.any() else e
    return stats.chisquare(merged_c, merged_e * merged_c.sum() / merged_e.sum()).pvalue


def _sample_job(session, what, count, moduli):
    e = AdditiveEngine(session, triple_source=_source(), frac_bits=0)
    if what == "gaussian":
        x = e.gaussian(count, moduli)
    elif what == "ternary":
        x = e.ternary(count, moduli)
    else:
        x = e.uniform(count, moduli)
    return x.reveal(to=0)


def test_gaussian_table_is_the_folded_law_to_40_bits():
    t = gaussian_thresholds()
    law = gaussian_law()
    assert len(t) == TAIL and all(a < b for a, b in zip(t, t[1:])) and t[-1] < 1 << 40
    probs = np.diff([0, *t, 1 << 40]) / float(1 << 40)
    assert np.abs(probs - law).max() < 2 ** -40
    assert abs(law.sum() - 1) < 1e-12


def test_gaussian_samples_follow_the_discrete_gaussian():
    vals = run_in_memory(2, _sample_job, "gaussian", SAMPLES, (P61, 17), timeout=900)[0]
    x = _centered(vals[:, 0], P61)
    assert np.abs(x).max() <= TAIL  # never outside the documented support
    np.testing.assert_array_equal(_centered(vals[:, 1], 17), _centered(x % 17, 17))
    law = gaussian_law()
    # the signed law: P(0) = law[0], P(+-i) = law[i] / 2
    support = np.arange(-TAIL, TAIL + 1)
    expected = np.array([law[abs(i)] / (1 if i == 0 else 2) for i in support]) * len(x)
    counts = np.array([(x == i).sum() for i in support])
    assert _chi2(counts, expected) > P_FLOOR
    assert abs(x.std() - 3.2) < STD_TOLERANCE


def test_ternary_and_uniform_samples_are_uniform():
    vals = run_in_memory(2, _sample_job, "ternary", SAMPLES, (P61, 17), timeout=600)[0]
    x = _centered(vals[:, 0], P61)
    assert set(np.unique(x)) <= {-1, 0, 1}
    np.testing.assert_array_equal(_centered(vals[:, 1], 17), x)
    assert _chi2([(x == v).sum() for v in (-1, 0, 1)], [len(x) / 3] * 3) > P_FLOOR
    q = 1009  # small prime: every residue is a bin
    u = run_in_memory(2, _sample_job, "uniform", SAMPLES, q, timeout=600)[0][:, 0]
    assert _chi2(np.bincount(u.astype(np.int64), minlength=q), [len(u) / q] * q) > P_FLOOR


def _hw_job(session, count, length, weight):
    e = AdditiveEngine(session, triple_source=_source(), frac_bits=0)
    return hamming_weight(e, count, length, weight, P61).reveal(to=0)


def test_fixed_hamming_weight_vectors_are_uniform():
    length, weight = 8, 3
    count = SAMPLES // length  # 2^17 vectors, 2^20 coefficients (2^15 with numpy's gates, 2^13 on the dealer)
    vals = run_in_memory(2, _hw_job, count, length, weight, timeout=900)[0]
    x = _centered(vals[..., 0], P61)
    assert set(np.unique(x)) <= {-1, 0, 1}
    assert ((x != 0).sum(axis=1) == weight).all()
    # every (positions, signs) pattern equally likely: C(8, 3) 2^3 = 448 of them
    patterns = {}
    for pos in combinations(range(length), weight):
        for signs in range(1 << weight):
            patterns[(pos, signs)] = len(patterns)
    nz = np.sort(np.argsort(x == 0, axis=1, kind="stable")[:, :weight], axis=1)
    sign_bits = (np.take_along_axis(x, nz, axis=1) < 0).astype(np.int64) @ (1 << np.arange(weight))
    keys = np.array([patterns[(tuple(p), s)] for p, s in zip(nz.tolist(), sign_bits.tolist())])
    total = math.comb(length, weight) << weight
    assert _chi2(np.bincount(keys, minlength=total), [count / total] * total) > P_FLOOR


def _three_job(session):
    e = AdditiveEngine(session, triple_source=_source(), frac_bits=0)
    return (e.gaussian(5000, P61).reveal(), e.ternary(5000, P61).reveal(),
            hamming_weight(e, 200, 16, 4, P61).reveal())


def test_samplers_at_three_parties_stay_in_support():
    for g, t, h in run_in_memory(3, _three_job, timeout=600):
        g, t, h = (_centered(v[..., 0], P61) for v in (g, t, h))
        assert np.abs(g).max() <= TAIL and abs(g.std() - 3.2) < 0.2
        assert set(np.unique(t)) == {-1, 0, 1}
        assert ((h != 0).sum(axis=1) == 4).all() and np.abs(h).max() == 1
