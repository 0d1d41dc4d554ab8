"""Threshold GHS's trust rules (shaper.protocols.threshold_bgv): joint inputs, agreed evaluations,
the accounting and consent in front of the joint decryption to bits, the in-MPC range check, the
budget, the key directory, a rushing party in key generation, and a party that fails mid-keygen.

The attacks are real: (0, 1) is a valid encryption of s mod 2 (the support of the secret) that
anyone can form, and a phase put at the wrap point shows the sign of every coefficient; both are
refused before anything is opened, and the range check stops the second even when the accounting
is bypassed."""

from __future__ import annotations

import os
import stat
import time

import numpy as np
import pytest

from shaper.crypto.bgv import params as P
from shaper.crypto.bgv import scheme as S
from shaper.crypto.bgv import serial
from shaper.crypto.bgv.multiparty import SecretKeyShare
from shaper.crypto.bgv.slots import SlotEvaluator
from shaper.crypto.prg import Prg
from shaper.errors import (
    ConfigError,
    DecryptionRefused,
    KeyValidationError,
    PartyError,
    SerializationError,
)
from shaper.net import NetConfig, launch, run_in_memory
from shaper.protocols import threshold_bgv as tb
from shaper.protocols.threshold_ckks import commit
from shaper.protocols.threshold_ckks.ledger import Entry

from .dealer_engine import engine_for_tests

PARAMS = P.named("test-257")
ALG = S.algebra(PARAMS.m)
ROT = [u for u, _ in ALG.rotation(0, 1)]
X = np.random.default_rng(3).integers(0, 2 ** ALG.d, ALG.nslots, dtype=np.uint64)


def _square_then(u):
    return tb.Circuit(f"square,automorphism:{u}", 1, lambda ev, xs: [ev.automorphism(ev.square(xs[0]), u)])


def _sent(session, fn):
    before = session.stats.bytes_sent
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return f"{type(exc).__name__}: {exc}", session.stats.bytes_sent - before
    return None, session.stats.bytes_sent - before


def _flow_job(session, out_dir):
    engine = engine_for_tests(session)
    keys = tb.keygen(engine, PARAMS, ROT + [2], budget=3)
    keys.save(os.path.join(out_dir, session.name))
    keys = tb.JointKeys.load(os.path.join(out_dir, session.name), insecure=True)  # share and ledger back from disk
    (x,) = tb.encrypt_jointly(engine, keys, X if session.index == 1 else None, tag="x")
    (y,) = tb.evaluate(keys, _square_then(ROT[0]), [x])  # every party computes y itself
    got = tb.decrypt_many(engine, keys, [x, y], to=0)
    return {"got": got, "digest_x": serial.ciphertext_digest(x), "digest_y": serial.ciphertext_digest(y),
            "spent": keys.ledger.spent, "room": tb.plan(keys, [y])["room_bits"][0]}


def test_joint_inputs_agreed_evaluation_and_joint_decryption(tmp_path):
    res = run_in_memory(3, _flow_job, str(tmp_path), timeout=300)
    sim = SlotEvaluator(ALG)
    want = sim.automorphism(sim.mul(X, X), ROT[0])
    got = res[0]["got"]
    assert np.array_equal(ALG.decode(got[0]), X)  # the owner's joint input
    assert np.array_equal(ALG.decode(got[1]), want)  # the agreed evaluation, decrypted to bits
    assert res[1]["got"] is None and res[2]["got"] is None  # to=0: the others learn nothing
    assert len({r["digest_y"] for r in res}) == 1 and len({r["digest_x"] for r in res}) == 1  # byte-identical
    assert all(r["spent"] == 2 for r in res) and res[0]["room"] > 0
    for party in ("party0", "party1", "party2"):
        for name in ("secret-share.shpr", "ledger.json"):
            assert stat.S_IMODE((tmp_path / party / name).stat().st_mode) == 0o600


# -- what a recipient could ask for, and what every party answers ------------------------------------

def _support_ciphertext(params):
    """(0, 1) at level 0: a valid ciphertext of phase s, i.e. of the plaintext s mod 2."""
    ring = S._ring(params)
    one = ring.encode_signed(np.eye(1, params.phi, dtype=np.int64)[0], [0])
    return S.Ciphertext(np.stack([np.zeros_like(one), one]), 0, 1.0, params)


def _wrap_ciphertext(params):
    """c_0 = (q0 - 1)/2 in every coefficient, c_1 = 1: phase (q0 - 1)/2 + s, at the wrap point."""
    ring = S._ring(params)
    q0 = params.primes[0]
    half = ring.forward(np.full((1, params.phi), (q0 - 1) // 2, np.uint64), [0])
    one = ring.encode_signed(np.eye(1, params.phi, dtype=np.int64)[0], [0])
    return S.Ciphertext(np.stack([half, one]), 0, 1.0, params)


def test_the_crafted_ciphertexts_are_real_attacks_under_a_single_key():
    keys = S.keygen(PARAMS, (), prg=Prg(b"\x07" * 32))
    s = keys.secret.coeffs.astype(np.int64)
    assert np.array_equal(S.decrypt_bits(keys.secret, _support_ciphertext(PARAMS)), (s & 1).astype(np.uint8))
    with pytest.raises(S.NoiseBudgetExceeded):  # the single-key decryption refuses the wrap point too
        S.decrypt_bits(keys.secret, _wrap_ciphertext(PARAMS))


def _consent_job(session):
    engine = engine_for_tests(session)
    keys = tb.keygen(engine, PARAMS, (), budget=3)
    (x,) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None, tag="x")
    (z,) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None, tag="z")
    alone = S.encrypt(keys.public, keys.evaluator().encode(X), prg=Prg(b"\x08" * 32))  # party 0 alone, same at all
    out = {}
    out["alone"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [alone]))
    out["support"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [_support_ciphertext(PARAMS)]))
    mine = x if session.index == 0 else z
    out["mismatch"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [mine]))
    out["refused"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [x], approve=lambda r: session.index != 2))
    out["to_mismatch"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [x], to=session.index))
    out["spent_before"] = keys.ledger.spent
    # a crafted phase at the wrap point, forced into every ledger (the accounting bypassed)
    wrap = _wrap_ciphertext(PARAMS)
    keys.ledger.record_entries([Entry(serial.ciphertext_digest(wrap), "input", "forced by the test", 1.0, 1.0, 0, 1.0)])
    out["wrapped"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [wrap], to=0))
    out["after"] = tb.decrypt_many(engine, keys, [x], to=0)
    out["spent"] = keys.ledger.spent
    out["over"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [x, z], to=0))  # 2 more than the budget left
    return out


def test_requests_that_not_every_party_accounts_for_open_nothing():
    res = run_in_memory(3, _consent_job, timeout=300)
    for r in res:
        assert "unknown provenance" in r["alone"][0]
        assert "unknown provenance" in r["support"][0]
        assert "different decryption request" in r["mismatch"][0]
        assert "refused by party2 (not approved)" in r["refused"][0]
        assert "different decryption request" in r["to_mismatch"][0]
        for key in ("alone", "support", "mismatch", "refused", "to_mismatch"):  # consent messages only
            assert r[key][0].startswith("DecryptionRefused") and r[key][1] < 2000, (key, r[key])
        assert r["spent_before"] == 0  # refusals charge nothing
        assert r["wrapped"][0].startswith("NoiseBudgetExceeded") and "only that one bit" in r["wrapped"][0]
        assert r["spent"] == 2  # the wrapped one was charged (its check bit was opened), then x
        assert "budget is spent" in r["over"][0] and r["over"][1] < 2000
    assert np.array_equal(ALG.decode(res[0]["after"][0]), X)


def test_plan_refuses_what_the_party_cannot_account_for_or_decrypt_reliably():
    sk = S.keygen(PARAMS, (), prg=Prg(b"\x09" * 32))
    share = SecretKeyShare(PARAMS, np.zeros((len(PARAMS.basis), PARAMS.phi), np.uint64), 0, 2)
    keys = tb.JointKeys(PARAMS, sk.public, sk.relin, {}, share)
    ct = S.encrypt(sk.public, S.Evaluator(PARAMS).encode(X))
    with pytest.raises(DecryptionRefused, match="unknown provenance"):
        tb.plan(keys, [ct])
    low = S.switch_to(ct, 0)  # the file says its noise is small; the party's own entry says it is not
    keys.ledger.record_entries([Entry(serial.ciphertext_digest(low), "input", "t", PARAMS.primes[0] / 8, 1.0, 0, 1.0)])
    assert low.capacity() > 0
    with pytest.raises(DecryptionRefused, match="could reach q_0/4"):
        tb.plan(keys, [low])
    with pytest.raises(ConfigError, match="relinearise"):
        tb.decrypt_many(None, keys, [S.Ciphertext(np.concatenate([ct.parts, ct.parts[:1]]), ct.level, ct.noise,
                                                  PARAMS)])
    with pytest.raises(ConfigError, match="1..4096 ciphertexts"):
        tb.decrypt_many(None, keys, [])


# -- the key directory -----------------------------------------------------------------------------

def test_key_directory_round_trip_and_refusals(tmp_path):
    sk = S.keygen(PARAMS, [2], prg=Prg(b"\x0a" * 32))
    rows = np.random.default_rng(1).integers(0, 2 ** 30, (len(PARAMS.basis), PARAMS.phi), dtype=np.uint64)
    keys = tb.JointKeys(PARAMS, sk.public, sk.relin, dict(sk.galois), SecretKeyShare(PARAMS, rows, 1, 3))
    keys.ledger.spend(1)
    d = keys.save(tmp_path / "k")
    back = tb.JointKeys.load(d, insecure=True)
    assert np.array_equal(back.share.rows, rows) and (back.share.index, back.share.parties) == (1, 3)
    assert np.array_equal(back.public.b, sk.public.b) and set(back.galois) == {2}
    assert back.ledger.spent == 1 and back.ledger.scheme == "bgv"
    with pytest.raises(ConfigError, match="never overwritten"):
        keys.save(d)
    with pytest.raises(SerializationError, match="insecure"):  # a test set loads only when asked for
        tb.JointKeys.load(d)
    os.rename(d / "galois-2.shpr", d / "galois-4.shpr")
    with pytest.raises(KeyValidationError, match="rotation key its name says"):
        tb.PublicKeys.load(d, insecure=True)
    os.rename(d / "galois-4.shpr", d / "galois-2.shpr")
    os.chmod(d / "secret-share.shpr", 0o644)
    with pytest.raises(Exception, match="0600|mode|permission"):
        tb.JointKeys.load(d, insecure=True)
    os.chmod(d / "secret-share.shpr", 0o600)
    # the ledger is bound to its key: another key's is refused, a missing one is not recreated
    other = tb.JointKeys(PARAMS, S.keygen(PARAMS, (), prg=Prg(b"\x0b" * 32)).public, sk.relin, {},
                         SecretKeyShare(PARAMS, rows, 1, 3))
    o = other.save(tmp_path / "other")
    (d / "ledger.json").write_bytes((o / "ledger.json").read_bytes())
    with pytest.raises(KeyValidationError, match="another key"):
        tb.JointKeys.load(d, insecure=True)
    (d / "ledger.json").unlink()
    with pytest.raises(ConfigError, match="holds no ledger"):
        tb.JointKeys.load(d, insecure=True)
    data = bytearray(serial.to_bytes(SecretKeyShare(PARAMS, rows, 1, 3)))
    data[24:26] = (3).to_bytes(2, "little")  # party index 3 of 3
    with pytest.raises(SerializationError, match="party 3 of 3"):
        serial.from_bytes(bytes(data), PARAMS)


# -- a rushing party, a party that fails ------------------------------------------------------------

def _target_b():
    prg = Prg(b"the attacker's BGV public key b".ljust(32, b"\0"))
    return np.stack([prg.below(int(q), PARAMS.phi) for q in PARAMS.primes])


def _rushing_job(session, attacker):
    out = {"party": session.name}
    if session.index == attacker:  # this process only
        real = commit.open_committed
        qs = np.asarray(PARAMS.primes, np.uint64)[:, None]

        def open_committed(sess, payload, tag, *, error=KeyValidationError):
            if "open-bgv-pk" not in tag:
                return real(sess, payload, tag, error=error)
            out["forged_tag"] = tag
            nonce = os.urandom(commit.NONCE_BYTES)
            sess.broadcast(commit.commitment(tag, sess.index, nonce, payload), tag + "/commit")
            for peer in sess.peers:
                sess.recv_bytes(peer, tag + "/commit")
            opened = {p: sess.recv_bytes(p, tag + "/open")[commit.NONCE_BYTES:] for p in sess.peers}
            theirs = np.zeros(qs.shape[:1] + (PARAMS.phi,), np.uint64)
            for got in opened.values():
                theirs = (theirs + np.frombuffer(got, "<u8").reshape(theirs.shape)) % qs
            mine = (_target_b() + qs - theirs) % qs
            sess.broadcast(nonce + mine.astype("<u8").tobytes(), tag + "/open")
            return [mine.tobytes() if p == sess.name else opened[p] for p in sess.parties]

        commit.open_committed = open_committed
    start = time.monotonic()
    try:
        keys = tb.keygen(engine_for_tests(session), PARAMS, ())
        out["pk"] = keys.public.b
    except Exception as exc:  # noqa: BLE001 - every party reports how it ended
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = time.monotonic() - start
    return out


def test_a_rushing_party_cannot_substitute_the_bgv_public_key():
    res = launch(3, _rushing_job, 1, config=NetConfig(timeout=60, insecure=True), timeout=180, workers_per_party=1)
    assert "open-bgv-pk" in res[1]["forged_tag"]  # the attack ran
    for r in (res[0], res[2]):
        assert r["error"].startswith("KeyValidationError") and "party 'party1'" in r["error"], r["error"]
        assert "does not match its commitment" in r["error"] and r["seconds"] < 60
    assert all("pk" not in r for r in res)


class _Stop(RuntimeError):
    pass


def _stopping_job(session, out_dir):
    from shaper.jobs.bgv import aes_party

    def progress(event):
        if session.index == 1 and event["phase"] == "relinearisation key" and event["status"] == "start":
            raise _Stop("party stops during key generation")
    return aes_party(session, "test-257", insecure=True, keys_dir=os.path.join(out_dir, session.name),
                     progress=progress, engine=engine_for_tests(session))


def test_a_party_that_fails_mid_keygen_fails_everyone_and_leaves_no_key_directory(tmp_path):
    start = time.monotonic()
    with pytest.raises(PartyError, match="party stops during key generation") as info:
        run_in_memory(2, _stopping_job, str(tmp_path), timeout=120)
    assert info.value.party == "party1"
    assert time.monotonic() - start < 60  # not the receive timeout
    assert list(tmp_path.iterdir()) == []


def _dying_job(session, out_dir):
    from shaper.jobs.bgv import aes_party

    def progress(event):
        if session.index == 1 and event["phase"] == "s^2 (square pairs)":
            os._exit(3)  # the process dies without a word to its peers
    return aes_party(session, "test-257", insecure=True, keys_dir=os.path.join(out_dir, session.name),
                     progress=progress, engine=engine_for_tests(session))


def test_a_killed_party_process_is_noticed_and_no_key_directory_is_left(tmp_path):
    start = time.monotonic()
    with pytest.raises(PartyError):
        launch(2, _dying_job, str(tmp_path), config=NetConfig(timeout=60), timeout=120, workers_per_party=1)
    assert time.monotonic() - start < 60
    assert list(tmp_path.iterdir()) == []


def _any_job(session, cases):
    from shaper.kernels.modq import pack_bits
    from shaper.protocols.api import XorShares
    from shaper.protocols.threshold_bgv.decrypt import _any

    engine = engine_for_tests(session)
    out = []
    for bits in cases:  # party 0 holds the bits, the others zeros: a sharing of them
        words = pack_bits(bits) if session.index == 0 else np.zeros_like(pack_bits(bits))
        junk = np.uint64(0xFFFF_0000_FFFF_0000) if len(bits) % 64 else np.uint64(0)
        words = words.copy()
        words[-1] ^= junk & ~np.uint64((1 << (len(bits) % 64)) - 1 if len(bits) % 64 else 0)  # garbage padding
        out.append(bool(engine.reveal_bits(_any(engine, XorShares(engine, words, len(bits))))[0]))
    return out


def test_the_range_checks_or_sees_every_lane_and_ignores_padding():
    cases, want = [], []
    for n in (1, 63, 64, 65, 64 * 5 + 3, 64 * 45):
        cases.append(np.zeros(n, bool))
        want.append(False)
        for at in {0, n // 2, n - 1}:
            b = np.zeros(n, bool)
            b[at] = True
            cases.append(b)
            want.append(True)
    res = run_in_memory(2, _any_job, cases, timeout=120)
    assert res[0] == res[1] == want


def _misplaced_job(session):
    from shaper.jobs.bgv import aes_party

    return aes_party(session, "test-257", insecure=True, aes_key=bytes(16) if session.index == 1 else None,
                     engine=engine_for_tests(session))


def test_only_the_owners_give_a_key_or_blocks():
    with pytest.raises(PartyError, match="the key owner's .party0. to give, not party1's"):
        run_in_memory(2, _misplaced_job, timeout=60)


def _deviating_owner_job(session):
    engine = engine_for_tests(session)
    keys = tb.keygen(engine, PARAMS, (), check=False)
    (x,) = tb.encrypt_jointly(engine, keys, X if session.index == 0 else None, tag="x")
    return tb.decrypt_many(engine, keys, [x], to=1)


def test_a_deviating_owner_moves_only_the_plaintext_by_a_term_it_chose(monkeypatch):
    """Party 0 owns X and opens b_0 + t instead of b_0 in the joint encryption (c_1 it cannot
    touch: the joint seed fixes it). The decryption is X's plaintext plus t: nothing of s."""
    from shaper.protocols.threshold_bgv import inputs

    t = np.random.default_rng(4).integers(0, 2, PARAMS.phi).astype(np.int64)  # the deviation (a public test value)
    real, ring = inputs.committed_open_rows, S._ring(PARAMS)
    chain = ring.chain(PARAMS.max_level)

    def deviating(engine, rows, primes, **kw):
        if engine.session.index == 0:  # the deviating party only
            rows = ring.add(rows[0], ring.encode_signed(t, chain), chain)[None]
        return real(engine, rows, primes, **kw)

    monkeypatch.setattr(inputs, "committed_open_rows", deviating)
    res = run_in_memory(2, _deviating_owner_job, timeout=120)
    want = S.Evaluator(PARAMS).encode(X).bits ^ t.astype(np.uint8)
    assert np.array_equal(res[1][0], want) and res[0] is None


def _setup_job(session, roles):
    from shaper.jobs.bgv import aes_party

    key_owner, data_owner = roles[session.index]
    return aes_party(session, "test-257", insecure=True, key_owner=key_owner, data_owner=data_owner,
                     engine=engine_for_tests(session))


def test_parties_that_disagree_on_the_job_stop_before_any_key_is_made():
    with pytest.raises(PartyError, match="runs a different AES job"):
        run_in_memory(2, _setup_job, [(0, 1), (1, 1)], timeout=60)


# -- the flooded decryption: the same bits, the same rules ------------------------------------------

def _flood_job(session):
    engine = engine_for_tests(session)
    keys = tb.keygen(engine, PARAMS, ROT, budget=4)
    (x,) = tb.encrypt_jointly(engine, keys, X if session.index == 1 else None, tag="x")
    (y,) = tb.evaluate(keys, _square_then(ROT[0]), [x])
    flood = tb.plan_flood(keys, [x, y])
    got = tb.decrypt_many(engine, keys, [x, y], to=0, method="flood")
    alone = S.encrypt(keys.public, keys.evaluator().encode(X), prg=Prg(b"\x08" * 32))
    out = {"got": got, "flood": flood, "bits": tb.decrypt_many(engine, keys, [y], method="bits")}
    out["alone"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [alone], method="flood"))
    low = S.switch_to(y, 0)  # y at level 0, accounted: a statistical flood does not fit under q_0
    keys.ledger.record_entries([Entry(serial.ciphertext_digest(low), "output", "test: y at level 0", low.noise, 1.0,
                                      0, 1.0)])
    policy = tb.decrypt.FloodPolicy(mode="statistical", lam=80, work=0)
    out["wide"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [low], method="flood", policy=policy))
    out["method"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [y], method="parity"))
    wrap = _wrap_ciphertext(PARAMS)  # the accounting bypassed: the recipient's bound check refuses it
    keys.ledger.record_entries([Entry(serial.ciphertext_digest(wrap), "input", "forced by the test", 1.0, 1.0, 0, 1.0)])
    out["wrapped"] = _sent(session, lambda: tb.decrypt_many(engine, keys, [wrap], method="flood"))
    out["spent"] = keys.ledger.spent
    return out


def test_the_flooded_decryption_gives_the_bits_under_the_same_rules():
    res = run_in_memory(3, _flood_job, timeout=300)
    sim = SlotEvaluator(ALG)
    want = sim.automorphism(sim.mul(X, X), ROT[0])
    got = res[0]["got"]
    assert np.array_equal(ALG.decode(got[0]), X) and np.array_equal(ALG.decode(got[1]), want)
    assert np.array_equal(got[1], res[0]["bits"][0])  # the same plaintext polynomial as the bits method
    assert res[1]["got"] is None and res[2]["got"] is None  # to=0: the others learn nothing
    flood = res[0]["flood"]
    assert flood.room_bits >= 0 and flood.sigma > flood.error_bound  # the flood is wider than the error it hides
    assert flood.opened_bound < PARAMS.primes[0] / 4 or flood.level > 0
    for r in res:
        assert r["alone"][0].startswith("DecryptionRefused") and "unknown provenance" in r["alone"][0]
        assert r["alone"][1] < 2000  # consent messages only
        assert r["wide"][0].startswith("DecryptionRefused") and "method='bits'" in r["wide"][0]
        assert r["method"][0].startswith("ConfigError") and "bits, flood" in r["method"][0] and r["method"][1] == 0
        assert r["wrapped"][0].startswith("NoiseBudgetExceeded") and "beyond its bound" in r["wrapped"][0]
        assert r["spent"] == 4  # x and y, y again by bits, the wrapped one; the refusals charged nothing
