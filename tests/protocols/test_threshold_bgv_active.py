"""Threshold GHS (BGV) on the active engine: keys from authenticated shares, joint inputs whose
plaintext bits are range-checked, decryption to bits through the engine's checked Z_q → Z_2
conversion, against the single-key slot simulator; and deviating parties, at 2 and 3 parties:

=====================================  ========================================================
deviation                              what stops it
=====================================  ========================================================
an offset on any opening of key        the MAC check of that opening (d = s − α, the
generation                             samplers' openings): no key is returned
a term added to a share of a key's b   b − (−a[s] + ...) is checked to be, in every limb, the
in any limb, or an error other than    errors every party committed (and proved in range) in
the committed one in every limb        one anchor prime: no key is returned
an input owner whose plaintext         its range proof (coefficients within [0, 1]), naming it
coefficient is 2 (or q − 1)
a term added to a share of c_0         the same check of c_0 against the committed 2e + m
an offset on any opening of the        the MAC checks of the conversion to bits: nothing is
decryption                             decrypted
a key made on the passive engine       refused on the active engine (it has no MAC shares)
a flood one past its reach (flooded    the range proof of that party's flood, naming it, before
decryption)                            anything is opened
an offset on a flooded decryption      the MAC check of the opening (to one recipient: checked
share                                  there before it unmasks)
=====================================  ========================================================
"""

from __future__ import annotations

import importlib.util
import os
import stat
import threading

import numpy as np
import pytest

from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.bgv.slots import SlotEvaluator
from shaper.net import run_in_memory
from shaper.protocols import threshold_bgv as tb
from shaper.protocols.active import ActiveEngine
from shaper.protocols.ot import InsecureLinks

from .deviating import Deviation, adding_to_open_sum, run
from .test_active import assert_all_stopped

NATIVE = importlib.util.find_spec("shaper._native") is not None
#: the deviations and the 3-party runs need the native kernels to stay quick; without them (or with
#: SHAPER_NATIVE=off) the 2-party run of the whole protocol still runs on the pure-Python paths
FAST = pytest.mark.skipif(not NATIVE or os.environ.get("SHAPER_NATIVE", "").lower() in ("off", "0", "no", "false"),
                          reason="the deviating-party runs need the native kernels to stay quick")
PARAMS = P.named("test-257")
ALG = S.algebra(PARAMS.m)
X = (np.arange(ALG.nslots) * 7 % (1 << ALG.d)).astype(np.uint64)
U = 3  # the automorphism key made and used
SQUARE_ROT = tb.Circuit("square, then X -> X^3", 1, lambda ev, xs: [ev.automorphism(ev.mul(xs[0], xs[0]), U)])


def _engine(session):
    return ActiveEngine(session, links=None if NATIVE else InsecureLinks(session))


def _want(x):
    sim = SlotEvaluator(ALG)
    return sim.automorphism(sim.mul(x, x), U)


def _full_job(session, out=None):
    engine = _engine(session)
    # the key check decrypts to bits on this engine too (at 2 parties; at 3 it would add half a minute)
    keys = tb.keygen(engine, PARAMS, (U,), check=session.n == 2)
    ring = S._ring(PARAMS)
    s = keys.secret(engine).open("test: s")  # test only: s, MAC-checked, to check its law and the pk
    coeffs = ring.inverse(np.ascontiguousarray(s), list(range(len(PARAMS.basis))))
    (ct,) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None)
    (y,) = tb.evaluate(keys, SQUARE_ROT, [ct])
    everyone = tb.decrypt_many(engine, keys, [ct, y])
    to0 = tb.decrypt_many(engine, keys, [y], to=0)
    if out is not None:
        keys.save(os.path.join(out, session.name))
    return {"s": coeffs, "everyone": everyone, "to0": to0, "method": keys.ledger.key_method}


@pytest.mark.parametrize("parties", [2, pytest.param(3, marks=FAST)])
def test_keys_inputs_and_decryption_on_the_active_engine_are_right(parties, tmp_path):
    res = run_in_memory(parties, _full_job, str(tmp_path), timeout=600)
    q0 = PARAMS.primes[0]
    s0 = res[0]["s"][0].astype(np.int64)
    s0 = np.where(s0 > q0 // 2, s0 - q0, s0)
    assert set(np.unique(s0).tolist()) <= {-1, 0, 1} and np.count_nonzero(s0) > PARAMS.phi // 4
    for r in res:
        assert r["method"] == "contributed"
        assert np.array_equal(ALG.decode(r["everyone"][0]), X)
        assert np.array_equal(ALG.decode(r["everyone"][1]), _want(X))
    assert np.array_equal(ALG.decode(res[0]["to0"][0]), _want(X))
    assert all(r["to0"] is None for r in res[1:])  # a private output: the others learn nothing
    macs = tmp_path / "party0" / "secret-macs.npz"
    assert stat.S_IMODE(macs.stat().st_mode) == 0o600


def _later_job(session, out):
    engine = _engine(session)
    keys = tb.JointKeys.load(os.path.join(out, session.name), insecure=True)
    (ct,) = tb.encrypt_jointly(engine, keys, X if session.index == 1 else None)
    return tb.decrypt_many(engine, keys, [ct], to=1)


@pytest.fixture(scope="module", params=[2, 3])
def saved(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"bgv-active-{request.param}")

    def job(session):
        keys = tb.keygen(_engine(session), PARAMS, (), check=False)
        keys.save(os.path.join(str(out), session.name))
        return True

    run_in_memory(request.param, job, timeout=600)
    return request.param, str(out)


@FAST
def test_a_later_job_uses_the_kept_share_under_the_kept_mac_keys(saved):
    parties, out = saved
    res = run_in_memory(parties, _later_job, out, timeout=600)
    assert np.array_equal(ALG.decode(res[1][0]), X) and res[0] is None


@FAST
def test_a_passive_key_is_refused_on_the_active_engine(tmp_path):
    from tests.protocols.dealer_engine import engine_for_tests

    def make(session):
        tb.keygen(engine_for_tests(session), PARAMS, (), check=False).save(os.path.join(str(tmp_path), session.name))
        return True

    run_in_memory(2, make, timeout=600)
    with pytest.raises(Exception, match="made on the passive engine"):
        run_in_memory(2, _later_job, str(tmp_path), timeout=60)


def _keygen_job(session):
    tb.keygen(_engine(session), PARAMS, (U,), check=False)
    return "ok"


@FAST
@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("nth", [0, 5, None], ids=["first", "sixth", "every"])
def test_an_offset_on_any_opening_of_key_generation_is_caught(parties, nth):
    dev = Deviation(r"act-open-\d+", "offset", nth=nth, delta=1, index=0)
    res = run(parties, _keygen_job, deviant=parties - 1, deviations=[dev], timeout=30)
    assert dev.fired
    assert_all_stopped(res, parties - 1, kinds=("DeviationError",))


@FAST
@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("nth, index", [(0, 0), (2, 28 * 250 + 5), (None, 11)], ids=["pk", "a-key-limb", "every-key"])
def test_a_term_added_to_a_share_of_a_key_in_any_limb_is_caught(parties, nth, index):
    """A key's b opens as every party's share plus its own error, the error proven in one anchor
    prime only: a term added to a share in any limb (the public key's first coefficient, limb 5
    of the automorphism key, every key), the deviating party's own view agreeing with what it
    sent, moves b off the committed errors there."""
    res = adding_to_open_sum(parties, _keygen_job, index=index, nth=nth)
    assert_all_stopped(res, parties - 1, kinds=("DeviationError",))


@FAST
def test_a_deviation_caught_in_a_carried_opening_stops_the_engine():
    """After the check of a carried opening fails, the honest party's engine refuses every later
    step (a retry must not run on past a deviation)."""
    from shaper.errors import DeviationError

    def job(session):
        engine = _engine(session)
        try:
            tb.keygen(engine, PARAMS, (U,), check=False)
        except DeviationError:
            pass
        with pytest.raises(DeviationError, match="stopped"):
            engine.random_mod((1,), (PARAMS.basis[0],))
        return "stopped"

    res = adding_to_open_sum(2, job, index=3, nth=0)
    assert res[0] == ("ok", "stopped")


@FAST
@pytest.mark.parametrize("where", ["lift", "carried-check"])
def test_masks_of_another_shape_are_refused_naming_the_party(where):
    """A party that announces its random values or masks as a column (the same count) would
    broadcast a sum into a square; it is refused by name instead: in a lift's inputs (the first
    to come), and in the check of a carried opening (after the first key's opening)."""
    import unittest.mock

    from shaper.protocols.active import lift

    real, real_sum = lift.uniform_bits, ActiveEngine.open_sum

    def column(prg, bits, count):
        out = real(prg, bits, count)
        on = getattr(_DEVIANT, "on", False) and (where == "lift" or getattr(_DEVIANT, "opened", False))
        return out.reshape(-1, 1) if on else out

    def opened(self, *a, **kw):
        _DEVIANT.opened = True
        return real_sum(self, *a, **kw)

    def job(session):
        _DEVIANT.on, _DEVIANT.opened = session.index == 1, False
        return _keygen_job(session)

    with unittest.mock.patch.object(lift, "uniform_bits", column), \
            unittest.mock.patch.object(ActiveEngine, "open_sum", opened):
        res = run(2, job, timeout=30)
    assert_all_stopped(res, 1, kinds=("DeviationError",), words="party1")
    said = "a lift's values or masks" if where == "lift" else "input masks of shape"
    assert any(said in r[2] for r in res[:1]), res


@FAST
@pytest.mark.parametrize("parties", [2, 3])
def test_an_error_other_than_the_committed_one_in_every_limb_is_caught(parties):
    """The deviating party commits (and proves in range) one error in the anchor prime and adds
    another, itself in range and the same integer in every limb of the basis, to its shares of
    the keys: the check compares every limb with the anchor and stops every honest party."""
    from shaper.protocols.active import ranges

    real = ranges.input_in_range

    def committed_other(engine, values, **kw):
        if values is not None and getattr(_DEVIANT, "on", False) and kw["q"] > 1 << 61:
            values = np.where(values > kw["lo"], values - 1, values + 1)
        return real(engine, values, **kw)

    def job(session):
        _DEVIANT.on = session.index == parties - 1
        return _keygen_job(session)

    import unittest.mock

    with unittest.mock.patch.object(ranges, "input_in_range", committed_other):
        res = run(parties, job, timeout=60)
    assert_all_stopped(res, parties - 1, kinds=("DeviationError",))


_DEVIANT = threading.local()


def _encrypt_job(session, out):
    engine = _engine(session)
    keys = tb.JointKeys.load(os.path.join(out, session.name), insecure=True)
    (ct,) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None)
    return S.Ciphertext(ct.parts, ct.level, ct.noise, ct.params).parts.shape


@FAST
@pytest.mark.parametrize("value", [2, -1], ids=["two", "q-1"])
def test_an_input_owner_with_a_coefficient_outside_gf2_is_refused_naming_it(saved, monkeypatch, value):
    parties, out = saved
    from shaper.protocols.active import ranges

    real = S.Evaluator.encode

    def encode(self, slots):
        pt = real(self, slots)
        if getattr(_DEVIANT, "on", False):
            bits = pt.bits.astype(np.int64)
            bits[3] = value
            return S.Plaintext(bits, pt.norm)
        return pt

    def job(session):
        _DEVIANT.on = session.index == 0
        return _encrypt_job(session, out)

    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)  # the owner skips its own refusal
    monkeypatch.setattr(S.Evaluator, "encode", encode)
    res = run(parties, job, timeout=30)
    assert_all_stopped(res, 0, words="party0")


@FAST
@pytest.mark.parametrize("index", [5, 256 * 25 - 1], ids=["limb-5", "last-limb"])
def test_a_term_added_to_a_share_of_c0_is_caught(saved, index):
    """The deviating party adds 1 to one residue of its share of c_0 (its own view agreeing):
    c_0 - (-a [s]) is then off the committed 2e + m in that limb."""
    parties, out = saved
    res = adding_to_open_sum(parties, _encrypt_job, out, prefix="bgv-input", index=index)
    assert_all_stopped(res, parties - 1, kinds=("DeviationError",))


_CTS: dict[int, S.Ciphertext] = {}


def _input_job(session, out):
    """A joint input each party keeps (its ledger, on disk, accounts for it in a later job)."""
    engine = _engine(session)
    keys = tb.JointKeys.load(os.path.join(out, session.name), insecure=True)
    (_CTS[session.index],) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None)
    return True


@FAST
@pytest.mark.parametrize("method, to", [("bits", None), ("flood", 0)])
@pytest.mark.parametrize("nth", [0, None], ids=["first", "every"])
def test_an_offset_on_any_opening_of_a_decryption_is_caught(saved, nth, method, to):
    """To bits (every opening of the conversion) or flooded (the opening of the flooded phase, to
    party 0: checked there before it unmasks)."""
    parties, out = saved
    run_in_memory(parties, _input_job, out, timeout=600)

    def job(session):
        engine = _engine(session)
        keys = tb.JointKeys.load(os.path.join(out, session.name), insecure=True)
        return tb.decrypt_many(engine, keys, [_CTS[session.index]], to=to, method=method)

    dev = Deviation(r"act-open-\d+", "offset", nth=nth, delta=1, index=0 if method == "bits" else 3)
    res = run(parties, job, deviant=parties - 1, deviations=[dev], timeout=60)
    assert dev.fired
    assert_all_stopped(res, parties - 1, kinds=("DeviationError",))


@FAST
def test_a_fixed_weight_secret_on_the_active_engine_has_exactly_its_weight():
    """GHS's sparse secret (exactly h nonzero ±1, the engine's shuffle) under the active engine;
    the key check (a joint decryption to bits on this engine) passes."""
    params = P.Parameters.from_primes(257, PARAMS.primes, PARAMS.special, hamming_weight=17, name="w", insecure=True)

    def job(session):
        engine = _engine(session)
        keys = tb.keygen(engine, params, (U,), check=True)
        s = keys.secret(engine).open("test: s")
        q = params.basis[0]
        c = S._ring(params).inverse(np.ascontiguousarray(s), list(range(len(params.basis))))[0].astype(np.int64)
        return np.where(c > q // 2, c - q, c)

    c = run_in_memory(2, job, timeout=600)[0]
    assert np.count_nonzero(c) == 17 and set(np.unique(c).tolist()) <= {-1, 0, 1}


# -- the flooded decryption on the active engine -----------------------------------------------------

SQUARE = tb.Circuit("square", 1, lambda ev, xs: [ev.mul(xs[0], xs[0])])


def _flood_job(session, out, to=None):
    engine = _engine(session)
    keys = tb.JointKeys.load(os.path.join(out, session.name), insecure=True)
    (ct,) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None)
    (y,) = tb.evaluate(keys, SQUARE, [ct])
    return tb.decrypt_many(engine, keys, [ct, y], to=to, method="flood")


@FAST
@pytest.mark.parametrize("to", [None, 0], ids=["to-all", "to-0"])
def test_a_flooded_decryption_on_the_active_engine_is_right(saved, to):
    parties, out = saved
    res = run_in_memory(parties, _flood_job, out, to, timeout=600)
    sim = SlotEvaluator(ALG)
    for r in (res if to is None else res[:1]):
        assert np.array_equal(ALG.decode(r[0]), X) and np.array_equal(ALG.decode(r[1]), sim.mul(X, X))
    if to is not None:
        assert all(r is None for r in res[1:])


@FAST
def test_a_flood_beyond_its_reach_is_refused_naming_its_party(saved, monkeypatch):
    """The last party's flood has one entry one past its reach (it skips its own refusal): every
    other party stops with a DeviationError naming it, before anything is opened."""
    import importlib

    from shaper.protocols.active import ranges

    parties, out = saved
    decrypt = importlib.import_module("shaper.protocols.threshold_bgv.decrypt")
    real = decrypt.sample_flood
    deviant = parties - 1
    flag = threading.local()

    def flood(shape, sigma, prg=None):
        f = real(shape, sigma, prg)
        if getattr(flag, "on", False):
            f.reshape(-1)[7] = decrypt.flood_reach(sigma) + 1
        return f

    def job(session):
        flag.on = session.index == deviant
        return _flood_job(session, out, 0)

    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)
    monkeypatch.setattr(decrypt, "sample_flood", flood)
    outcome = run(parties, job, timeout=60)
    assert all(o[0] == "error" and o[1] == "DeviationError" and f"party{deviant}" in o[2] for o in outcome[:deviant])
