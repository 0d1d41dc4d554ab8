"""The n-party additive engine beyond the conformance suite: eight parties, a dying party,
sources without truncation pairs, and what a party sends when it shares."""

import os
import warnings

import numpy as np
import pytest

from shaper.errors import PartyError
from shaper.net import launch, run_in_memory
from shaper.protocols import InsecureDealer
from shaper.protocols.api import UnsupportedConversion
from shaper.protocols.additive import AdditiveEngine
from shaper.protocols.triples import StoreOnly

rng = np.random.default_rng(5)  # test data only
X = rng.integers(-(1 << 20), 1 << 20, 64)
Y = rng.integers(-(1 << 20), 1 << 20, 64)


def _mul_job(session, x, y):
    warnings.simplefilter("ignore")
    e = AdditiveEngine(session, triple_source=InsecureDealer(), frac_bits=0)
    a = e.share(x, owner=0)
    b = e.share(y, owner=session.n - 1)
    return e.reveal(e.mul(a, b)), e.reveal(e.matmul(a.reshape(8, 8), b.reshape(8, 8)), to=3)


def test_eight_parties_multiply_exactly():
    res = run_in_memory(8, _mul_job, X, Y, timeout=120)
    for i, (prod, mm) in enumerate(res):
        np.testing.assert_array_equal(prod, X * Y)
        if i == 3:
            np.testing.assert_array_equal(mm, X.reshape(8, 8) @ Y.reshape(8, 8))
        else:
            assert mm is None


def test_shares_sent_are_uniform_looking_and_sum_to_the_value():
    def job(session):
        e = AdditiveEngine(session, triple_source=InsecureDealer(), frac_bits=0)
        return e.share(np.zeros(4096, dtype=np.int64), owner=0).share

    shares = run_in_memory(3, job)
    assert not np.any(sum(shares))  # x = 0
    for s in shares[1:]:  # what the owner sent: about half of all bits set, not zeros
        bits = np.unpackbits(s.view(np.uint8))
        assert abs(bits.mean() - 0.5) < 0.01


def test_a_source_without_truncation_pairs_says_so():
    def job(session):
        e = AdditiveEngine(session, triple_source=StoreOnly(), frac_bits=16)
        x = e.share(np.ones(3), owner=0)
        e.truncate(x, 8)

    with pytest.raises(PartyError, match="the store triple source makes no truncation pairs"):
        run_in_memory(2, job)
    assert issubclass(UnsupportedConversion, TypeError)


def _dies(session):
    warnings.simplefilter("ignore")
    e = AdditiveEngine(session, triple_source=InsecureDealer())
    x = e.share(np.ones(3), owner=0)
    if session.index == 2:
        os._exit(4)
    return e.reveal(x * x)


def test_a_killed_party_ends_the_others_with_an_error_naming_it():
    with pytest.raises(PartyError) as info:
        launch(4, _dies, timeout=120)
    assert "party 'party2' failed" in str(info.value)  # the root cause, not the others' disconnects


def test_dealer_power_tuples_are_powers_and_store_only_has_none():
    def job(session):
        warnings.simplefilter("ignore")
        e = AdditiveEngine(session, triple_source=InsecureDealer(), frac_bits=0)
        return [p.reveal() for p in e.powers(50, (1 << 61) - 1, 3)]

    a, a2, a3 = (v[:, 0].astype(object) for v in run_in_memory(3, job)[0])
    q = (1 << 61) - 1
    assert list(a2) == [x * x % q for x in a] and list(a3) == [x * x * x % q for x in a]

    def store(session):
        AdditiveEngine(session, triple_source=StoreOnly(), frac_bits=0).square_pairs(3, 17)

    with pytest.raises(PartyError, match="the store triple source makes no power tuples"):
        run_in_memory(2, store)
