"""Threshold CKKS against the parties who receive results: each attack of the security review
carried out for real through the public API, and what stops it.

* amplification by homomorphic scaling (x 2^30 and x X^(N/2) of an encryption of zero) —
  refused: only one party computed it, so no other party can account for it;
* a chosen-c_1 ciphertext — refused, for the same reason;
* an input encrypted with a chosen large error (alone, with ``ckks.encrypt``'s structure) —
  refused as a decryption and as an input of an agreed evaluation; and inside the joint
  encryption a deviating owner moves c_0 only by a term it knows that does not depend on s
  (c_1 stays the joint seed's), which is what makes the flooding argument hold;
* more decryptions than the key's budget — refused at every party, the count persisted;
* a short or empty ``--digest`` — refused before any party starts;
* a party that asks for another flood, or holds another circuit's output — refused;
* a party that skips its own flood (to help the recipient) leaves the honest party's, which alone
  has the width the argument needs;
* what *is* decrypted is flooded as documented: the spread of repeated decryptions of one
  accounted ciphertext matches sqrt(n) sigma_f (so the error e, far below sigma_f, is hidden).

The rushing party in key generation is in ``test_threshold_ckks_commit.py`` (commitments).
"""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.ckks.keys import uniform_poly
from shaper.crypto.prg import Prg
from shaper.errors import ConfigError, DecryptionRefused
from shaper.jobs.fhe import check_digest
from shaper.net import run_in_memory
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.threshold_ckks import inputs as joint_inputs

from .dealer_engine import engine_for_tests

# the module (the package's ``decrypt`` is the function of the same name)
decrypt_module = importlib.import_module("shaper.protocols.threshold_ckks.decrypt")

PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
X = np.linspace(-1, 1, PARAMS.slots)


def _keys(session, **kw):
    e = engine_for_tests(session)
    return e, tc.keygen(e, PARAMS, rotations=[1], **kw)


def _refused(fn):
    """Runs ``fn``; the DecryptionRefused message, or None when it did not raise."""
    try:
        fn()
    except DecryptionRefused as exc:
        return str(exc)
    return None


def _share_ct(session, ct, tag):
    """Party 0's ciphertext at every party (the attacker hands its crafted ciphertext around)."""
    if session.index == 0:
        session.broadcast(ckks.to_bytes(ct), tag)
        return ct
    return ckks.from_bytes(session.recv_bytes(0, tag), PARAMS)


def _monomial(level, power):
    coeffs = np.zeros(PARAMS.n)
    coeffs[power] = 1
    return ckks.Plaintext(PARAMS, ckks.Encoder(PARAMS).coefficients_to_rns(coeffs, level), 1.0)


def _amplified_job(session):
    e, keys = _keys(session)
    ev = keys.evaluator()
    zero = None
    if session.index == 0:  # the would-be recipient: an encryption of zero, x 2^30, x X^(N/2)
        zero = ckks.encrypt(keys.public, ckks.Encoder(PARAMS).encode(np.zeros(PARAMS.slots)))
        for _ in range(30):
            zero = ev.add(zero, zero)
        zero = ev.mul_plain(zero, _monomial(zero.level, PARAMS.n // 2))
    zero = _share_ct(session, zero, "attack")
    spent = keys.ledger.spent
    # and the same on a *joint* input: scaling it is still a computation only party 0 ran
    joint = tc.encrypt_jointly(e, keys, X if session.index == 0 else None, value_bound=1.0)[0]
    scaled = joint
    if session.index == 0:
        for _ in range(30):
            scaled = ev.add(scaled, scaled)
    scaled = _share_ct(session, scaled, "attack-joint")
    return {"pk": _refused(lambda: tc.decrypt(e, keys, zero, to=0)),
            "joint": _refused(lambda: tc.decrypt(e, keys, scaled, to=0)),
            "spent": (spent, keys.ledger.spent)}


def test_amplification_by_homomorphic_scaling_is_refused_at_every_party():
    for r in run_in_memory(3, _amplified_job, timeout=300):
        for what in ("pk", "joint"):
            assert r[what] is not None and "unknown provenance" in r[what], r
        assert r["spent"][0] == r["spent"][1]  # nothing charged, nothing opened


def _chosen_c1_job(session):
    e, keys = _keys(session)
    ct = None
    if session.index == 0:  # c_1 = 2^30 X^5 (a "ciphertext" whose decryption is c_0 + 2^30 X^5 s)
        enc = ckks.Encoder(PARAMS)
        coeffs = np.zeros(PARAMS.n)
        coeffs[5] = 2.0 ** 30
        c1 = enc.coefficients_to_rns(coeffs, PARAMS.max_level)
        c0 = enc.encode(np.zeros(PARAMS.slots)).data
        ct = ckks.Ciphertext(PARAMS, np.stack([c0, c1]), PARAMS.scale)
    ct = _share_ct(session, ct, "attack")
    return _refused(lambda: tc.decrypt(e, keys, ct, to=0))


def test_a_chosen_c1_ciphertext_is_refused():
    for msg in run_in_memory(2, _chosen_c1_job, timeout=300):
        assert msg is not None and "unknown provenance" in msg


def _crafted_input_job(session):
    e, keys = _keys(session)
    crafted = None
    if session.index == 0:  # its own input, encrypted alone with e_1 = 2^30 X^3: e_1 s rides in every result
        good = ckks.encrypt(keys.public, ckks.Encoder(PARAMS).encode(X))
        coeffs = np.zeros(PARAMS.n)
        coeffs[3] = 2.0 ** 30
        e1 = ckks.Encoder(PARAMS).coefficients_to_rns(coeffs, good.level)
        crafted = ckks.Ciphertext(PARAMS, np.stack([good.data[0], PARAMS.context.add(good.data[1], e1, PARAMS.mods(good.level))]),
                                  good.scale)
    crafted = _share_ct(session, crafted, "attack")
    as_input = None
    if session.index != 0:  # an honest party refuses to evaluate on it
        try:
            tc.evaluate(keys, tc.chain(["square"]), [crafted])
        except DecryptionRefused as exc:
            as_input = str(exc)
    return {"decrypt": _refused(lambda: tc.decrypt(e, keys, crafted, to=0)), "evaluate": as_input}


def test_an_input_encrypted_alone_with_a_chosen_error_is_refused():
    res = run_in_memory(2, _crafted_input_job, timeout=300)
    assert all(r["decrypt"] and "unknown provenance" in r["decrypt"] for r in res)
    assert "as an input of 'square'" in res[1]["evaluate"]


_HONEST_SHARE = joint_inputs.joint_input_share


def _delta():
    coeffs = np.zeros(PARAMS.n)
    coeffs[3] = 2.0 ** 30
    return ckks.Encoder(PARAMS).coefficients_to_rns(coeffs, PARAMS.max_level)


def _deviating_share(share, a, level, message=None, prg=None):
    """Party 0's share with 2^30 X^3 added (in-memory parties share the module: only the owner,
    party 0, deviates)."""
    out = _HONEST_SHARE(share, a, level, message, prg)
    if share.index != 0:
        return out
    return PARAMS.context.add(out, np.broadcast_to(_delta(), a.shape).copy(), PARAMS.mods(level))


def _deviating_owner_job(session):
    """The owner adds 2^30 X^3 to its share inside the joint encryption: c_1 is still the joint
    seed's and c_0 moves by exactly that term (known to the owner, independent of s)."""
    e, keys = _keys(session)
    ct = tc.encrypt_jointly(e, keys, X if session.index == 0 else None, value_bound=1.0, tag="deviating")[0]
    s = _secret(e, keys)  # test only: the joint secret, to look at the phase
    ctx = PARAMS.context
    rows = PARAMS.mods(ct.level)
    phase = ctx.add(ct.data[0], ctx.mul(ct.data[1], np.ascontiguousarray(s[:len(rows)]), rows), rows)
    ctx.intt(phase, rows)
    return {"phase": phase[0], "c1": ct.data[1], "seed": ct.seed}


def _secret(e, keys):
    from shaper.protocols.api import ModShares

    return np.ascontiguousarray(ModShares(e, np.ascontiguousarray(keys.share.ntt.T), PARAMS.primes).reveal().T)


def test_a_deviating_owner_moves_c0_only_by_a_term_independent_of_s(monkeypatch):
    monkeypatch.setattr(joint_inputs, "joint_input_share", _deviating_share)  # restored after the test
    res = run_in_memory(2, _deviating_owner_job, timeout=300)
    q0 = PARAMS.moduli[0]
    phase = np.array([int(v) if v <= q0 // 2 else int(v) - q0 for v in res[0]["phase"]])
    encoded = np.rint(ckks.Encoder(PARAMS).slots_to_coefficients(X) * PARAMS.scale)
    err = phase - encoded
    err[3] -= 2 ** 30  # exactly the owner's term, nowhere an s-dependent one
    assert np.max(np.abs(err)) <= 2 * 6 * PARAMS.sigma  # two parties' Gaussians
    # c_1 is the uniform polynomial of the joint seed, whatever the owner did
    a = uniform_poly(PARAMS, PARAMS.mods(PARAMS.max_level), Prg(res[0]["seed"]))
    assert np.array_equal(res[0]["c1"], a)


def _budget_job(session, root):
    e = engine_for_tests(session)
    keys = tc.keygen(e, PARAMS, rotations=[1], budget=5)
    spent_by_check = keys.ledger.spent
    keys.save(f"{root}/{session.name}")
    cts = tc.encrypt_jointly(e, keys, np.stack([X, -X, X / 2, X / 3]) if session.index == 0 else None, value_bound=1.0)
    out = {"check": spent_by_check}
    left = keys.ledger.remaining
    got = tc.decrypt_many(e, keys, cts[:left], to=0)
    out["got"] = None if got is None else got.shape
    out["after"] = _refused(lambda: tc.decrypt(e, keys, cts[-1], to=0))
    out["persisted"] = tc.JointKeys.load(f"{root}/{session.name}", insecure=True).ledger.spent
    return out


def test_more_decryptions_than_the_budget_are_refused_and_the_count_persists(tmp_path):
    res = run_in_memory(2, _budget_job, str(tmp_path), timeout=300)
    for r in res:
        assert r["after"] is not None and "budget is spent" in r["after"]
        assert r["persisted"] == 5
    assert res[0]["got"] == (5 - res[0]["check"], PARAMS.slots)


def test_a_short_or_empty_digest_is_refused():
    for bad in ("", "00ff", "g" * 64, "0" * 63):
        with pytest.raises(ConfigError, match="64-hex"):
            check_digest(bad)
    assert check_digest("AB" * 32) == "ab" * 32


def _mismatch_job(session):
    e, keys = _keys(session)
    ct = tc.encrypt_jointly(e, keys, X if session.index == 0 else None, value_bound=1.0)[0]
    # party 1 ran another circuit: its output is not party 0's
    circuit = tc.chain(["square"]) if session.index == 0 else tc.chain(["square", "rotate:1"])
    y = tc.evaluate(keys, circuit, [ct])[0]
    other_circuit = _refused(lambda: tc.decrypt(e, keys, y))
    other_flood = _refused(lambda: tc.decrypt(e, keys, ct, policy=tc.FloodPolicy(
        mode="statistical" if session.index == 1 else "key-recovery")))
    return other_circuit, other_flood


def test_parties_holding_other_outputs_or_asking_other_floods_decrypt_nothing():
    for other_circuit, other_flood in run_in_memory(2, _mismatch_job, timeout=300):
        assert other_circuit is not None and "different decryption request" in other_circuit
        assert other_flood is not None and "different decryption request" in other_flood


def _spread_job(session, repeats):
    e, keys = _keys(session)
    ct = tc.encrypt_jointly(e, keys, X if session.index == 0 else None, value_bound=1.0)[0]
    flood = tc.plan_flood(keys, [ct])
    got = tc.decrypt_many(e, keys, [ct] * repeats)
    return got, flood


def test_what_is_decrypted_is_flooded_with_the_documented_width():
    repeats = 40
    res = run_in_memory(2, _spread_job, repeats, timeout=300)
    got, flood = res[0]
    # the real parts of the slots spread with sqrt(n) sigma_f sqrt(N / 2) / scale
    predicted = math.sqrt(2) * flood.sigma * math.sqrt(PARAMS.n / 2) / PARAMS.scale
    measured = float(np.std(got.real - X))
    assert 0.8 < measured / predicted < 1.2, (measured, predicted)
    # and the flood is far above the worst-case error it hides
    assert flood.sigma == tc.flood_sigma(flood.error_bound, flood.budget) > 4 * flood.error_bound


_HONEST_DECRYPTION_SHARE = decrypt_module.decryption_share


def _unflooded_share(share, cts, flood):
    """Party 0 colludes with the recipient: it adds no flood at all (in-memory parties share the
    module: only party 0 deviates)."""
    return _HONEST_DECRYPTION_SHARE(share, cts, np.zeros_like(flood) if share.index == 0 else flood)


def test_a_party_that_skips_its_flood_leaves_the_honest_partys_flood_alone(monkeypatch):
    """The argument counts only the honest party's flood: a party that adds none (to help the
    recipient) leaves exactly one party's width, sigma_f sqrt(N / 2) / scale per slot, which alone
    is sized to hide the error."""
    monkeypatch.setattr(decrypt_module, "decryption_share", _unflooded_share)
    repeats = 40
    got, flood = run_in_memory(2, _spread_job, repeats, timeout=300)[0]
    one = flood.sigma * math.sqrt(PARAMS.n / 2) / PARAMS.scale
    measured = float(np.std(got.real - X))
    assert 0.8 < measured / one < 1.2, (measured, one)


def test_decrypt_raises_party_error_not_hangs_when_one_party_lacks_the_ciphertext():
    def job(session):
        e, keys = _keys(session)
        ct = tc.encrypt_jointly(e, keys, X if session.index == 0 else None, value_bound=1.0)[0]
        if session.index == 1:
            keys.ledger.entries.clear()  # a party that never saw the input
        return _refused(lambda: tc.decrypt(e, keys, ct))

    res = run_in_memory(2, job, timeout=300)
    assert all(r is not None and "party1" in r for r in res)


def test_flood_policy_rejects_weak_parameters():
    with pytest.raises(ConfigError, match="at least 40"):
        tc.FloodPolicy(lam=30)
    with pytest.raises(ConfigError, match="mode"):
        tc.FloodPolicy(mode="fixed")

