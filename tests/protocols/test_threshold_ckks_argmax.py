"""Joint decryption to a label (:func:`shaper.protocols.threshold_ckks.decrypt_argmax`): the
argmax of a ciphertext's first slots computed inside the MPC, opened to one party.

Oracles: numpy's argmax of the encrypted values; the fixed-point plan against exact integer
arithmetic on worst-case coefficients and against the encoder's own decoding. Deviations on the
active engine: an offset on any opening inside the conversions, a wrong MAC difference, a
deviating recipient — every honest party aborts before the label is opened.
"""

from __future__ import annotations

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.errors import ConfigError, DecryptionRefused
from shaper.net import run_in_memory
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.active import ActiveEngine
from shaper.protocols.ot import InsecureLinks
from shaper.protocols.threshold_ckks.argmax import argmax_plan

from .dealer_engine import NATIVE, engine_for_tests
from .deviating import Deviation, run

PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
CLASSES, PERIOD = 5, 8


def _values(count: int, seed: int, period: int | None = PERIOD) -> np.ndarray:
    """``count`` slot vectors whose first CLASSES slots are well apart, and so are their squares
    (magnitudes 0.3 .. 0.95 with random signs), repeated every ``period`` slots (None: every
    other slot its own random value)."""
    rng = np.random.default_rng(seed)
    out = []

    def head() -> np.ndarray:
        return rng.permutation(np.linspace(0.3, 0.95, CLASSES)) * rng.choice([-1.0, 1.0], CLASSES)

    for _ in range(count):
        if period is None:
            v = rng.uniform(-1, 1, PARAMS.slots)
            v[:CLASSES] = head()
        else:
            block = np.zeros(period)
            block[:CLASSES] = head()
            v = np.tile(block, PARAMS.slots // period)
        out.append(v)
    return np.array(out)


def _engine(session, security):
    if security == "passive":
        return engine_for_tests(session)
    return ActiveEngine(session, links=None if NATIVE else InsecureLinks(session))


def _job(session, security, values, period, to, evaluate=True):
    engine = _engine(session, security)
    keys = tc.keygen(engine, PARAMS, rotations=[], method="local", check=False)
    cts = tc.encrypt_jointly(engine, keys, values if session.index == 0 else None, value_bound=1.0, owner=0)
    if evaluate:  # an agreed circuit's outputs (a level lower, another scale), as the CNN's
        cts = tc.evaluate(keys, tc.parse("square"), cts)
    left = keys.ledger.remaining
    labels = tc.decrypt_argmax(engine, keys, cts, classes=CLASSES, period=period, to=to)
    return {"labels": labels, "spent": left - keys.ledger.remaining}


@pytest.mark.parametrize("security,parties", [("passive", 2), ("active", 2), ("active", 3)])
def test_labels_are_the_argmax_of_the_slots_and_reach_only_the_recipient(security, parties):
    values = _values(3, parties)
    res = run_in_memory(parties, _job, security, values, PERIOD, parties - 1, timeout=900)
    expect = np.argmax((values * values)[:, :CLASSES], axis=1)
    assert np.array_equal(res[-1]["labels"], expect)
    assert all(r["labels"] is None for r in res[:-1])
    assert all(r["spent"] == 3 for r in res)  # every party charged its budget


def test_without_a_period_every_coefficient_is_decoded():
    values = _values(2, 7, period=None)
    res = run_in_memory(2, _job, "active", values, None, 0, False, timeout=900)
    assert np.array_equal(res[0]["labels"], np.argmax(values[:, :CLASSES], axis=1))


def _exact_d(plan, c: np.ndarray, q0: int) -> np.ndarray:
    """The protocol's differences L_a - L_b (pairs a < b) for centred coefficients c (count,
    terms), in Python integers: L = floor((c + h) / 2^shift) M^T - C."""
    h = (q0 - 1) // 2
    big = (c.astype(object) + h) // (1 << plan.shift)
    values = big @ plan.decode.T.astype(object) - plan.centres[None, :]
    return values[:, plan.pairs[:, 0]] - values[:, plan.pairs[:, 1]]


@pytest.mark.parametrize("period", [8, None])
def test_the_fixed_point_never_wraps_and_resolves_to_its_stated_resolution(period):
    q0 = int(PARAMS.moduli[0])
    h = (q0 - 1) // 2
    plan = argmax_plan(PARAMS, PARAMS.scale, CLASSES, period)
    rng = np.random.default_rng(1)
    # worst cases: every coefficient at +-h, and random ones anywhere in (-q0/2, q0/2)
    extreme = np.where(rng.random((200, plan.terms)) < 0.5, -h, h)
    anywhere = rng.integers(-h, h, size=(200, plan.terms), dtype=np.int64)
    for c in (extreme, anywhere, -extreme):
        d = _exact_d(plan, c, q0)
        assert np.max(np.abs(d.astype(float))) < q0 / 4
    # realistic phases: the encoded values times the scale; the sign of D follows the slots
    encoder = ckks.Encoder(PARAMS)
    values = _values(50, 3, period)
    coeffs = np.rint(np.stack([encoder.slots_to_coefficients(v) for v in values]) * PARAMS.scale).astype(np.int64)
    kept = coeffs[:, ::plan.stride][:, :plan.terms]
    d = _exact_d(plan, kept, q0).astype(float)
    slots = np.stack([encoder.coefficients_to_slots(c / PARAMS.scale).real for c in coeffs])[:, :CLASSES]
    diff = slots[:, plan.pairs[:, 0]] - slots[:, plan.pairs[:, 1]]
    assert np.all(np.sign(d) == np.sign(diff))
    # D / (2^frac scale / 2^shift) estimates the difference within the resolution
    est = d * (1 << plan.shift) / ((1 << plan.frac) * PARAMS.scale)
    assert np.max(np.abs(est - diff)) <= plan.resolution
    assert plan.resolution < 0.1


def test_bad_requests_are_refused():
    with pytest.raises(ConfigError, match="2..64 slots"):
        argmax_plan(PARAMS, PARAMS.scale, 1, 8)
    with pytest.raises(ConfigError, match="period"):
        argmax_plan(PARAMS, PARAMS.scale, 5, 3)
    with pytest.raises(ConfigError, match="period"):
        argmax_plan(PARAMS, PARAMS.scale, 9, 8)


def _unaccounted_job(session):
    engine = _engine(session, "active")
    keys = tc.keygen(engine, PARAMS, rotations=[], method="local", check=False)
    alone = ckks.encrypt(keys.public, ckks.Encoder(PARAMS).encode(_values(1, 0)[0]))  # encrypted by one party
    left = keys.ledger.remaining
    try:
        tc.decrypt_argmax(engine, keys, [alone], classes=CLASSES, period=PERIOD, to=0)
    except DecryptionRefused as exc:
        return str(exc), left == keys.ledger.remaining
    return "decrypted", False


def test_a_ciphertext_nobody_accounts_for_is_refused_before_anything_is_spent():
    res = run_in_memory(2, _unaccounted_job, timeout=600)
    assert all("refused" in msg and kept for msg, kept in res), res


def _keys_job(session, out, values):
    engine = _engine(session, "active")
    keys = tc.keygen(engine, PARAMS, rotations=[], method="local", check=False)
    keys.save(f"{out}/{session.name}")
    keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
    cts = tc.encrypt_jointly(engine, keys, values if session.index == 0 else None, value_bound=1.0, owner=0)
    return [ckks.to_bytes(ct) for ct in cts]


@pytest.fixture(scope="module", params=[2, 3])
def saved(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"argmax-keys-{request.param}")
    values = _values(2, 11)
    blobs = run_in_memory(request.param, _keys_job, str(out), values, timeout=600)[0]
    return request.param, str(out), blobs, values


def _decrypt_job(session, out, blobs, to):
    engine = _engine(session, "active")
    keys = tc.JointKeys.load(f"{out}/{session.name}", insecure=True)
    cts = [ckks.from_bytes(b, PARAMS, insecure=True) for b in blobs]
    return tc.decrypt_argmax(engine, keys, cts, classes=CLASSES, period=PERIOD, to=to)


def test_saved_keys_and_ledgers_serve_a_later_label_job(saved):
    parties, out, blobs, values = saved
    res = run_in_memory(parties, _decrypt_job, out, blobs, 1, timeout=600)
    assert np.array_equal(res[1], np.argmax(values[:, :CLASSES], axis=1)) and res[0] is None


def _assert_caught(outcome, deviant):
    honest = [o for i, o in enumerate(outcome) if i != deviant]
    assert all(o[0] == "error" for o in honest), outcome
    assert any(o[1] == "DeviationError" for o in honest), outcome


@pytest.mark.parametrize("dev,deviant", [
    (Deviation(r"act-open-\d+", "offset", nth=0, delta=1, index=2), "other"),     # the phase's masked opening
    (Deviation(r"act-open-\d+", "offset", nth=None, delta=1, index=0), "other"),  # every opening
    (Deviation(r"act-bopen-\d+", "offset", nth=None, delta=1, index=0), "other"),  # every bit opening (ANDs)
    (Deviation(r"act-bopen-\d+", "offset", nth=40, delta=1, index=0), "other"),    # one AND's opening, late
    (Deviation(r"act-check-.*/open", "offset", nth=0, delta=1), "other"),           # a wrong MAC difference
    (Deviation(r"act-open-\d+", "offset", nth=None, delta=1, index=1), "recipient"),
    (Deviation(r"act-bopen-\d+", "offset", nth=None, delta=1, index=1), "recipient"),
], ids=["first-opening", "every-opening", "bit-openings", "late-bit-opening", "mac-check", "recipient",
        "recipient-bits"])
@pytest.mark.once  # the conversions' checks are the engine's, kernel-independent: CI's first run covers them
def test_a_deviation_in_the_label_decryption_is_caught(saved, dev, deviant):
    parties, out, blobs, _ = saved
    to = 0
    who = parties - 1 if deviant == "other" else to
    dev = Deviation(dev.tag, dev.action, nth=dev.nth, delta=dev.delta, index=dev.index)
    outcome = run(parties, _decrypt_job, out, blobs, to, deviant=who, deviations=[dev], timeout=30)
    _assert_caught(outcome, who)
    assert dev.fired
    assert outcome[to][0] == "error"  # the recipient never took a label: it aborted too, or it was the deviant


# -- packed joint inputs: small integers range-checked, the coefficients a public map of them ------------------

def _packing():
    # 6 inputs, each in 4 or 5 slots (as the CNN repeats each pixel), the rest of the 32 slots zero
    sources = np.repeat(np.arange(6), 5)[:28]
    targets = np.random.default_rng(5).permutation(PARAMS.slots)[:28]
    return tc.Packing("test layout", sources, targets, 6, 1 / 255)


def _packed_job(session, security, values, deviate=False):
    from shaper.protocols.threshold_ckks import inputs

    engine = _engine(session, security)
    keys = tc.keygen(engine, PARAMS, rotations=[], method="local", check=False)
    mine = values if session.index == 0 else None
    if deviate and session.index == 0:  # a deviating owner skips its own checks and sends 256/255
        from shaper.protocols.active import ranges

        ranges.refuse_outside = lambda *a: None
        inputs._check_values = lambda v, slots, bound: np.atleast_2d(np.asarray(v, np.float64))
    cts = tc.encrypt_jointly(engine, keys, mine, value_bound=1.0, owner=0, packing=_packing())
    entry = keys.ledger.find(cts[0])
    return {"slots": tc.decrypt(engine, keys, cts[0]), "message": entry.message, "scale": cts[0].scale}


@pytest.mark.parametrize("security,parties", [("passive", 2), ("active", 2), ("active", 3)])
def test_a_packed_joint_input_encrypts_its_layout(security, parties):
    rng = np.random.default_rng(parties)
    values = rng.integers(0, 256, size=(1, 6)) / 255
    res = run_in_memory(parties, _packed_job, security, values, timeout=900)
    want = _packing().slots(values, PARAMS.slots)[0]
    for r in res:
        assert np.max(np.abs(r["slots"] - want)) < 0.05
    if security == "active":  # the enforced bound is the layout's (1 + step), not W times it
        assert res[0]["message"] == pytest.approx(res[0]["scale"] * 1.0, rel=0.01)


def test_a_packed_input_beyond_its_range_is_refused_naming_its_owner(monkeypatch):
    from shaper.protocols.active import ranges
    from shaper.protocols.threshold_ckks import inputs

    monkeypatch.setattr(ranges, "refuse_outside", ranges.refuse_outside)  # restored after the owner's override
    monkeypatch.setattr(inputs, "_check_values", inputs._check_values)
    values = np.array([[1.0, 0.5, 0.0, 256 / 255, 0.2, 0.3]])
    outcome = run(2, _packed_job, "active", values, True, timeout=60)
    assert outcome[1][0] == "error" and outcome[1][1] == "DeviationError" and "party0" in outcome[1][2], outcome


def test_a_packings_encoding_is_the_encoders_within_its_rounding():
    packing = _packing()
    enc = packing.encoding(PARAMS, PARAMS.scale)
    v = np.random.default_rng(2).integers(0, 256, size=(4, 6))
    encoder = ckks.Encoder(PARAMS)
    want = np.stack([encoder.slots_to_coefficients(z) for z in packing.slots(v * packing.step, PARAMS.slots)])
    got = (v.astype(object) @ enc.astype(object)).astype(np.float64)
    assert np.max(np.abs(got - want * PARAMS.scale)) <= 0.5 * 6 * 255
    from shaper.protocols.threshold_ckks.polys import _encode_plain

    assert np.array_equal(_encode_plain(v, enc), (v.astype(object) @ enc.astype(object)).astype(np.int64))


@pytest.mark.parametrize("sources,targets,inputs,step,match", [
    ([0, 1], [0], 2, 0.1, "two equal 1-D arrays"),
    ([0, 2], [0, 1], 2, 0.1, "inputs 0..inputs-1"),
    ([0, 1], [3, 3], 2, 0.1, "distinct slots"),
    ([0, 1], [0, 1], 2, 0.0, "step must be positive"),
])
def test_a_malformed_packing_is_refused(sources, targets, inputs, step, match):
    with pytest.raises(ConfigError, match=match):
        tc.Packing("bad", np.array(sources), np.array(targets), inputs, step)


@pytest.mark.parametrize("parties", [2, 3])
def test_a_term_added_to_a_share_of_a_packed_inputs_c0_is_caught(parties):
    """The owner (its view agreeing) adds 1 to one residue of its share of c_0: c_0 - (-a[s]) is
    then off the committed errors plus v @ encoding in that limb."""
    from .deviating import adding_to_open_sum

    values = np.random.default_rng(9).integers(0, 256, size=(1, 6)) / 255
    outcome = adding_to_open_sum(parties, _packed_job, "active", values, prefix="input-", index=7, deviant=0,
                                 timeout=30)
    honest = outcome[1:]
    assert all(o[0] == "error" and o[1] == "DeviationError" for o in honest), outcome
