"""Threshold CKKS on the active engine: key generation from authenticated shares (each party's
MAC shares of s kept with its share for later jobs), joint inputs and joint decryptions, every
opening MAC-checked and every contributed term range-checked.

Deviations (the harness of ``deviating.py``), at 2 and 3 parties, each asserted *caught*: every
honest party raises :class:`~shaper.errors.DeviationError` (or, for a dropped message, a
timeout) and no key is returned; nothing here is "harmless", because every message of key
generation feeds a key.

=================================  ============================================================
deviation                          what stops it
=================================  ============================================================
an offset on any opening           the MAC check of that opening (the key's b, d = s - alpha,
(first, middle, last, every one)   Beaver's and the samplers' openings)
an offset on an input broadcast    the view comparison at the next check (equivocation) or the
                                   range proof / MAC check of what depends on it
an offset on a range proof         the verifier's polynomial check, naming the owner
a local error beyond 6 sigma       the range proof of the owner's error input, naming the owner
a wrong MAC share in a check       the MAC check
a MAC share file tampered with     the next job's MAC-checked opening of s
an input owner beyond its bound    the range proof of the owner's coefficients, naming it (one
(one unit, 2^20 units, below)      unit above is refused, the bound itself accepted)
a term added to a share of c_0     the MAC check of c_0's opening
a shifted or equivocated input     the view comparison / MAC check
a decryption share shifted         the MAC check (to all, or to one recipient before it unmasks)
a flood one above its reach        the range proof of that party's flood, naming it
=================================  ============================================================
"""

from __future__ import annotations

import importlib
import importlib.util
import threading

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.ckks.bounds import NoiseModel
from shaper.errors import ConfigError, KeyValidationError
from shaper.net import run_in_memory
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.active import ActiveEngine
from shaper.protocols.ot import InsecureLinks
from shaper.protocols.threshold_ckks.polys import SharedRows

from .deviating import Deviation, adding_to_open_sum, run

keygen_module = importlib.import_module("shaper.protocols.threshold_ckks.keygen")
NATIVE = importlib.util.find_spec("shaper._native") is not None
PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
ROWS = list(range(len(PARAMS.primes)))


def _engine(session):
    return ActiveEngine(session, links=None if NATIVE else InsecureLinks(session))


def _centred(row: np.ndarray, q: int) -> np.ndarray:
    v = row.astype(np.int64)
    return np.where(v > q // 2, v - q, v)


def _key_error(pk: np.ndarray, s: np.ndarray) -> np.ndarray:
    """b + a s in coefficient form on limb q_0: the public key's error."""
    ctx = PARAMS.context
    e = ctx.add(pk[0], ctx.mul(pk[1], s, ROWS), ROWS)
    ctx.intt(e, ROWS)
    return _centred(e[0], PARAMS.primes[0])


def _keygen_job(session, method, rotations=(1,), check=True, out=None):
    engine = _engine(session)
    keys = tc.keygen(engine, PARAMS, rotations=list(rotations), method=method, check=check)
    s = SharedRows(engine, keys.share.ntt, keys.macs.mac, PARAMS.primes).open("test: s")  # MAC-checked
    if out is not None:
        keys.save(f"{out}/{session.name}")
    return {"pk": keys.public.data, "s": s, "method": keys.ledger.key_method, "keys": keys.macs.mac.shape[0],
            "relin": keys.relin.data, "fingerprint": keys.fingerprint()}


@pytest.mark.parametrize("parties,method", [(2, "exact"), (2, "local"), (3, "local")])
def test_keys_from_authenticated_shares_work_and_s_opens_checked(parties, method):
    res = run_in_memory(parties, _keygen_job, method, timeout=600)
    first = res[0]
    for r in res[1:]:
        assert np.array_equal(r["pk"], first["pk"]) and np.array_equal(r["s"], first["s"])
        assert r["fingerprint"] == first["fingerprint"]
    assert first["method"] == ("exact" if method == "exact" else "contributed")
    # s is ternary, and b + a s is an error within what the method allows
    s = first["s"].copy()
    PARAMS.context.intt(s, ROWS)
    assert set(np.unique(_centred(s[0], PARAMS.primes[0]))) <= {-1, 0, 1}
    err = _key_error(first["pk"], first["s"])
    bound = 23 if method == "exact" else parties * ckks.keys.gaussian_bound(PARAMS.sigma)
    assert 0 < np.abs(err).max() <= bound
    # (check=True ran the joint test decryption of the relinearisation and rotation keys)


def _persisted_job(session, out, tamper):
    engine = _engine(session)
    keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
    keys.macs.install(engine, PARAMS)
    share = keys.share.ntt.copy()
    if tamper and session.index == 1:
        share[0, 0] = (int(share[0, 0]) + 1) % PARAMS.primes[0]
    return SharedRows(engine, share, keys.macs.mac, PARAMS.primes).open("test: s again")


def test_a_later_job_opens_the_kept_share_under_the_kept_mac_keys(tmp_path):
    res = run_in_memory(2, _keygen_job, "local", (), False, str(tmp_path), timeout=600)
    d = tmp_path / "party0"
    assert (d / tc.keystore.MACS_FILE).stat().st_mode & 0o777 == 0o600
    later = run_in_memory(2, _persisted_job, str(tmp_path), False, timeout=600)
    assert all(np.array_equal(s, res[0]["s"]) for s in later)
    # a share changed on disk (one coefficient) no longer matches its MACs: the opening aborts
    outcome = run(2, _persisted_job, str(tmp_path), True, timeout=30)
    assert all(o[0] == "error" and o[1] == "DeviationError" for o in outcome), outcome


def test_kept_mac_keys_are_validated(tmp_path):
    run_in_memory(2, _keygen_job, "local", (), False, str(tmp_path), timeout=600)
    d = tmp_path / "party0"
    keys = tc.JointKeys.load(d, insecure=True)
    with pytest.raises(KeyValidationError, match="do not fit"):
        tc.keystore.AuthenticatedShare(keys.macs.mac_keys, keys.macs.mac[:, :2]).validate(PARAMS)
    bad = keys.macs.mac.copy()
    bad[0, 0, 0] = PARAMS.primes[0]
    with pytest.raises(KeyValidationError, match="not below"):
        tc.keystore.AuthenticatedShare(keys.macs.mac_keys, bad).validate(PARAMS)
    (d / tc.keystore.MACS_FILE).write_bytes(b"not a zip")
    with pytest.raises(KeyValidationError, match="not a readable MAC share"):
        tc.JointKeys.load(d, insecure=True)
    (d / tc.keystore.MACS_FILE).chmod(0o644)
    with pytest.raises(KeyValidationError, match="mode 0644"):
        tc.JointKeys.load(d, insecure=True)


def test_installing_mac_keys_after_use_is_refused():
    def job(session):
        engine = _engine(session)
        kept = engine.mac_keys(PARAMS.primes)
        engine.random_mod((4,), PARAMS.primes)  # the engine's own keys in use
        other = kept.copy()
        other[0, 0] ^= np.uint64(1)
        with pytest.raises(ConfigError, match="already authenticates"):
            engine.install_mac_keys(PARAMS.primes, other)
        engine.install_mac_keys(PARAMS.primes, kept)  # the same keys: fine
        with pytest.raises(ConfigError, match="uint64"):
            engine.install_mac_keys(PARAMS.primes, kept[:, :1])
        return True

    assert run_in_memory(2, job, timeout=120) == [True, True]


# -- deviations --------------------------------------------------------------------------------------

def _deviating_keygen(session, method):
    return _keygen_job(session, method, (1,), True)["pk"]


def _assert_caught(outcome, deviant):
    honest = [o for i, o in enumerate(outcome) if i != deviant]
    assert all(o[0] == "error" for o in honest), outcome
    assert all(o[1] in ("DeviationError", "KeyValidationError", "PartyError", "TimeoutError", "ChannelClosed",
                        "SessionAborted") for o in honest), outcome
    assert any(o[1] == "DeviationError" for o in honest), outcome


OPENINGS = [Deviation(r"act-open-\d+", "offset", nth=k, delta=3) for k in (0, 7, 20, 40)] + \
    [Deviation(r"act-open-\d+", "offset", nth=None, delta=1, index=5)]


@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("k", range(len(OPENINGS)))
def test_an_offset_on_any_opening_of_key_generation_is_caught(parties, k):
    d = OPENINGS[k]
    dev = Deviation(d.tag, d.action, nth=d.nth, delta=d.delta, index=d.index)
    _assert_caught(run(parties, _deviating_keygen, "local", deviant=parties - 1, deviations=[dev], timeout=20),
                   parties - 1)
    assert dev.fired


@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("dev", [
    Deviation(r"act-input-\d+", "offset", nth=3, delta=2),                      # a shifted input broadcast
    Deviation(r"act-input-\d+", "equivocate", nth=5, delta=2),                  # different inputs to different peers
    Deviation(r"act-range-\d+/proof", "offset", nth=0, delta=1, index=1),       # a forged range proof
    Deviation(r"act-check-output-\d+/open", "offset", nth=0, delta=1),          # a wrong opened MAC difference
], ids=["input", "equivocate", "range-proof", "mac-check"])
def test_a_deviation_in_inputs_proofs_or_checks_is_caught(parties, dev):
    dev = Deviation(dev.tag, dev.action, nth=dev.nth, delta=dev.delta, index=dev.index)
    _assert_caught(run(parties, _deviating_keygen, "local", deviant=0, deviations=[dev], timeout=20), 0)
    assert dev.fired


@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("nth, index", [(0, 0), (1, 4 * 40 + 3), (None, 6)], ids=["pk", "rlk-last-limb", "every-key"])
def test_a_term_added_to_a_key_share_in_any_limb_is_caught(parties, nth, index):
    """A key's b opens as every party's share plus its own error (proven in one anchor prime):
    the deviating party adds 1 to one residue of its share, its own view agreeing, in the public
    key, in the last limb of the relinearisation key, or in every key."""
    _assert_caught(adding_to_open_sum(parties, _deviating_keygen, "local", index=index, nth=nth, timeout=20),
                   parties - 1)


@pytest.mark.parametrize("parties", [2, 3])
def test_a_key_error_other_than_the_committed_one_is_caught(parties):
    """The deviating party proves one error in the anchor prime and adds another, in range and
    the same integer in every limb, to its key shares: every honest party stops."""
    import unittest.mock

    from shaper.protocols.active import ranges

    real = ranges.input_in_range

    def committed_other(engine, values, **kw):
        if values is not None and getattr(_DEVIANT, "on", False) and kw["q"] > 1 << 61:
            values = np.where(values > kw["lo"], values - 1, values + 1)
        return real(engine, values, **kw)

    with unittest.mock.patch.object(ranges, "input_in_range", committed_other):
        _assert_caught(run(parties, _out_of_range_job, parties - 1, timeout=20), parties - 1)


_DEVIANT = threading.local()


def _wide_errors(params, count):
    e = _honest_errors(params, count)
    if getattr(_DEVIANT, "on", False):
        e[0, 0] = ckks.keys.gaussian_bound(params.sigma) + 1  # one coefficient one above the bound
    return e


_honest_errors = keygen_module.local_errors_coefficients


def _out_of_range_job(session, deviant):
    _DEVIANT.on = session.index == deviant
    return _keygen_job(session, "local", (), False)["pk"]


@pytest.mark.parametrize("parties", [2, 3])
def test_a_local_error_one_above_its_bound_is_refused_naming_its_owner(parties, monkeypatch):
    from shaper.protocols.active import ranges

    monkeypatch.setattr(keygen_module, "local_errors_coefficients", _wide_errors)
    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)  # a deviating owner skips its own refusal
    outcome = run(parties, _out_of_range_job, parties - 1, timeout=20)
    honest = outcome[:parties - 1]
    assert all(o[0] == "error" and o[1] == "DeviationError" for o in honest), outcome
    assert any(f"party{parties - 1}" in o[2] for o in honest), outcome


# -- joint inputs and decryption on the active engine ----------------------------------------------

X = np.linspace(-1, 1, PARAMS.slots)


def _full_job(session, to):
    engine = _engine(session)
    keys = tc.keygen(engine, PARAMS, rotations=[1], method="local", check=False)
    (cx,) = tc.encrypt_jointly(engine, keys, X if session.index == session.n - 1 else None, value_bound=1.0)
    (sq,) = tc.evaluate(keys, tc.parse("square,rotate:1"), [cx])
    floods = [tc.plan_flood(keys, [c]) for c in (cx, sq)]
    return {"fresh": tc.decrypt(engine, keys, cx), "square": tc.decrypt(engine, keys, sq, to=to), "floods": floods,
            "message": keys.ledger.find(cx).message}


@pytest.mark.parametrize("parties", [2, 3])
def test_joint_inputs_and_decryptions_on_the_active_engine_are_right(parties):
    res = run_in_memory(parties, _full_job, 0, timeout=600)
    fresh_flood, square_flood = res[0]["floods"]
    for r in res:
        assert np.max(np.abs(r["fresh"] - X)) <= 2.0 ** -fresh_flood.precision_bits
    assert np.max(np.abs(res[0]["square"] - np.roll(X * X, -1))) <= 2.0 ** -square_flood.precision_bits
    assert all(r["square"] is None for r in res[1:])  # a private output: the others learn nothing
    # the ledger holds the bound the range check enforces (W c / scale), not the declared one
    W = NoiseModel(PARAMS, parties).W
    assert res[0]["message"] == pytest.approx(PARAMS.scale * W * (int(PARAMS.scale) + 1) / PARAMS.scale)
    # the worst-case precision (n - 1 floods anywhere in their checked range) is below the honest one
    from shaper.crypto.ckks.multiparty import decryption_precision

    honest = decryption_precision(PARAMS, PARAMS.scale, fresh_flood.sigma, parties)
    assert fresh_flood.precision_bits < honest


def _saved_keys_job(session, out):
    engine = _engine(session)
    keys = tc.keygen(engine, PARAMS, method="local", check=False)
    keys.save(f"{out}/{session.name}")
    return True


def _encrypt_job(session, out, values):
    engine = _engine(session)
    keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
    mine = values if session.index == 0 else None
    (cx,) = tc.encrypt_jointly(engine, keys, mine, value_bound=1.0, owner=0)
    return ckks.to_bytes(cx)


def _decrypt_job(session, out, blob, to):
    engine = _engine(session)
    keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
    return tc.decrypt(engine, keys, ckks.from_bytes(blob, PARAMS, insecure=True), to=to)


@pytest.fixture(scope="module", params=[2, 3])
def saved(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"active-keys-{request.param}")
    run_in_memory(request.param, _saved_keys_job, str(out), timeout=600)
    return request.param, str(out)


def test_an_input_owner_beyond_its_bound_is_refused_naming_it(saved, monkeypatch):
    parties, out = saved
    from shaper.protocols.active import ranges

    inputs = importlib.import_module("shaper.protocols.threshold_ckks.inputs")
    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)  # a deviating owner skips its own refusals
    monkeypatch.setattr(inputs, "_check_values", lambda v, slots, bound: np.atleast_2d(np.asarray(v, np.float64)))
    encode = inputs.ckks.Encoder.slots_to_coefficients
    limit = inputs.coefficient_bound(PARAMS.scale, 1.0)  # the constant 1 encodes as scale in coefficient 0

    def attempt(coefficient):
        def wide(self, values):
            m = encode(self, values)
            m[0] = coefficient / PARAMS.scale  # coefficient 0 rounds to ``coefficient``
            return m

        with monkeypatch.context() as m:
            m.setattr(inputs.ckks.Encoder, "slots_to_coefficients", wide)
            return run(parties, _encrypt_job, out, np.ones(PARAMS.slots), timeout=20)

    for coefficient in (limit + 1, limit + (1 << 20), -limit - 1):  # one unit above, far above, one below
        outcome = attempt(coefficient)
        assert all(o[0] == "error" and o[1] == "DeviationError" and "party0" in o[2] for o in outcome[1:]), outcome
    assert all(o[0] == "ok" for o in attempt(limit)) and all(o[0] == "ok" for o in attempt(-limit))  # the bound


@pytest.mark.parametrize("index", [3, 64 * 3 - 1], ids=["first-limb", "last-limb"])
def test_a_term_added_to_a_share_of_c0_in_any_limb_is_caught(saved, index):
    """The owner adds 1 to one residue of its share of c_0 (its view agreeing): c_0 − (−a[s] +
    [m]) is then off the committed errors in that limb."""
    parties, out = saved
    _assert_caught(adding_to_open_sum(parties, _encrypt_job, out, X, prefix="input-", index=index, deviant=0,
                                      timeout=20), 0)


@pytest.mark.parametrize("dev", [
    Deviation(r"act-open-\d+", "offset", nth=None, delta=1, index=7),   # any term added to a share of c_0 (and more)
    Deviation(r"act-input-\d+", "offset", nth=0, delta=5),              # a shifted input (its message or error)
    Deviation(r"act-input-\d+", "equivocate", nth=1, delta=5),          # different inputs to different peers
    Deviation(r"act-range-\d+/proof", "offset", nth=0, delta=1, index=3),
], ids=["c0-share", "input", "equivocate", "range-proof"])
def test_a_deviation_in_a_joint_encryption_is_caught(saved, dev):
    parties, out = saved
    dev = Deviation(dev.tag, dev.action, nth=dev.nth, delta=dev.delta, index=dev.index)
    _assert_caught(run(parties, _encrypt_job, out, X, deviant=0, deviations=[dev], timeout=20), 0)
    assert dev.fired


@pytest.mark.parametrize("to", [None, 0])
@pytest.mark.parametrize("dev", [
    Deviation(r"act-open-\d+", "offset", nth=None, delta=1, index=3),   # an offset on the decryption share
    Deviation(r"act-range-\d+/proof", "offset", nth=0, delta=1, index=3),
    Deviation(r"act-check-(private )?output-\d+/open", "offset", nth=0, delta=1),  # a wrong MAC difference
], ids=["share", "range-proof", "mac-check"])
def test_a_deviation_in_a_joint_decryption_is_caught(saved, dev, to):
    parties, out = saved
    blob = run_in_memory(parties, _encrypt_job, out, X, timeout=600)[0]
    dev = Deviation(dev.tag, dev.action, nth=dev.nth, delta=dev.delta, index=dev.index)
    deviant = parties - 1  # never the recipient
    outcome = run(parties, _decrypt_job, out, blob, to, deviant=deviant, deviations=[dev], timeout=20)
    _assert_caught(outcome, deviant)
    assert dev.fired


def _flood_beyond_reach(saved, monkeypatch, job_of, index, sign):
    """The last party's flood has entry ``index`` one past its reach (``sign`` +1 above, -1
    below) and it skips its own refusal; ``job_of(out, blob)`` is every party's job. Every other
    party must stop with a DeviationError naming it."""
    parties, out = saved
    from shaper.protocols.active import ranges

    blob = run_in_memory(parties, _encrypt_job, out, X, timeout=600)[0]
    decrypt = importlib.import_module("shaper.protocols.threshold_ckks.decrypt")
    real = decrypt.sample_flood
    deviant = parties - 1

    def flood(shape, sigma, prg=None):
        f = real(shape, sigma, prg)
        if getattr(_DEVIANT, "on", False):
            f.reshape(-1)[index] = sign * (decrypt.flood_reach(sigma) + 1)
        return f

    def job(session):
        _DEVIANT.on = session.index == deviant
        return job_of(session, out, blob)

    monkeypatch.setattr(ranges, "refuse_outside", lambda *a: None)
    monkeypatch.setattr(decrypt, "sample_flood", flood)
    outcome = run(parties, job, timeout=20)
    assert all(o[0] == "error" and o[1] == "DeviationError" and f"party{deviant}" in o[2] for o in outcome[:deviant])


def test_a_flood_beyond_its_reach_is_refused_naming_its_party(saved, monkeypatch):
    _flood_beyond_reach(saved, monkeypatch, lambda session, out, blob: _decrypt_job(session, out, blob, 0), 5, 1)


# -- floods made ahead -------------------------------------------------------------------------------
def _prepared_job(session, out, blob, shift=None):
    engine = _engine(session)
    keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
    ct = ckks.from_bytes(blob, PARAMS, insecure=True)
    plan = tc.prepare_floods(engine, keys, 2, [ct])
    held = [tc.prepared_floods(engine, keys, plan.sigma)]
    if shift is not None and session.index == shift:  # a deviating party shifts its share of the next opening
        engine.reserved[next(iter(engine.reserved))][0].share[0, 0, 3] += np.uint64(1)
    got = [tc.decrypt(engine, keys, ct), tc.decrypt(engine, keys, ct, to=0)]
    held.append(tc.prepared_floods(engine, keys, plan.sigma))
    return got, held, plan.precision_bits


def test_floods_made_ahead_serve_later_decryptions_in_order(saved):
    parties, out = saved
    blob = run_in_memory(parties, _encrypt_job, out, X, timeout=600)[0]
    res = run_in_memory(parties, _prepared_job, out, blob, timeout=600)
    for i, (got, held, bits) in enumerate(res):
        assert held == [2, 0]  # both decryptions took theirs: no flood made, no range proof, at decryption
        assert np.max(np.abs(got[0] - X)) <= 2.0 ** -bits
        assert (got[1] is None) == (i != 0)
    assert np.max(np.abs(res[0][0][1] - X)) <= 2.0 ** -res[0][2]


def test_a_prepared_flood_changed_after_its_check_is_caught_at_the_opening(saved):
    parties, out = saved
    blob = run_in_memory(parties, _encrypt_job, out, X, timeout=600)[0]
    outcome = run(parties, _prepared_job, out, blob, parties - 1, timeout=20)
    _assert_caught(outcome, parties - 1)


def test_a_prepared_flood_beyond_its_reach_is_refused_naming_its_party(saved, monkeypatch):
    # the second decryption's flood, one below its reach
    _flood_beyond_reach(saved, monkeypatch, _prepared_job, -1, -1)


def test_floods_are_made_ahead_only_with_a_width_and_a_count(saved):
    parties, out = saved

    def job(session, count, sigma):
        engine = _engine(session)
        keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
        return tc.prepare_floods(engine, keys, count, sigma=sigma)

    for count, sigma, words in ((0, 2.0 ** 30, "positive count"), (1, None, "needs the flood's width")):
        with pytest.raises(Exception, match=words):
            run_in_memory(parties, job, count, sigma, timeout=60)
