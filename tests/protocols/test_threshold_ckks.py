"""Threshold CKKS by MPC key generation (issues 18 and 34), checked against first principles:
summing the secret-key shares gives s_ideal, which is ternary, and under which the opened keys
are valid single-key CKKS keys whose errors follow the discrete Gaussian (chi-square); joint
inputs (``encrypt_jointly``) and the outputs of agreed evaluations (``evaluate``, every party
computing the same bytes) decrypt jointly, each party flooding its share by the worst case, to
the right slots at n = 2, 3, 5 within the flood's predicted precision; products and rotations
with the joint keys agree with the single-key engine under s_ideal; decryption needs every
party's consent on the request (digests, recipient, flood), and a refusal opens nothing and
charges nothing; a party that stops during key generation makes the others fail fast and leaves
no key directory behind; a key directory holds the public keys, the private share and the
ledger (both mode 0600); at the CNN's parameters the measured precision is the predicted one."""

from __future__ import annotations

import os
import stat
import time

import numpy as np
import pytest
from scipy.stats import chisquare

from shaper.crypto import ckks
from shaper.crypto.prg import Prg
from shaper.errors import ConfigError, DecryptionRefused, PartyError, SerializationError
from shaper.jobs.fhe import keygen_job
from shaper.kernels.rns import native_selected
from shaper.ml.cnn.params import cnn_parameters
from shaper.net import NetConfig, launch, run_in_memory
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.additive.sampling import gaussian_law
from shaper.protocols.api import ModShares

from .dealer_engine import NATIVE, engine_for_tests

# Every test runs with or without the native extension: with it, on the production engine (OT
# triples and the MPC sampler); without it, on the same engine and sampler over the insecure
# dealer (its triples, and its correlated OTs in the clear; see dealer_engine.py). Only the example
# is skipped without it: it runs the production engine, as a user would, and so needs OT. (The
# N = 2^14 test runs on the numpy reference kernels there, as it does under SHAPER_NATIVE=off:
# about a minute and a half on 2 cores.)
NEEDS_NATIVE = pytest.mark.skipif(not NATIVE, reason="the example runs the production engine: OT extension is "
                                                     "native only")

PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
CHAIN = (64, (50, 40, 40), 50, 40)
X = np.linspace(-1, 1, PARAMS.slots)
Y = np.cos(np.arange(PARAMS.slots))
ROWS = list(range(len(PARAMS.primes)))


def _reveal_secret(engine, keys):
    """Test only: opens the secret (NTT rows) to check the keys against it."""
    return np.ascontiguousarray(ModShares(engine, np.ascontiguousarray(keys.share.ntt.T), PARAMS.primes).reveal().T)


def _product():
    """The agreed circuit rot(x * y, 1) on two inputs (relinearised, rescaled), with its bound."""
    def run(ev, xs):
        x, y = xs
        return [ev.rotate(ev.mul_rescale(x, y), 1)]

    def bound(nm, bs):
        a, b = bs
        return [nm.rotate(nm.rescale(nm.relinearize(nm.mul(a, b))), 1)]

    return tc.Circuit("rotate:1(x*y)", run, bound)


def _job(session, method="exact"):
    e = engine_for_tests(session)
    keys = tc.keygen(e, PARAMS, rotations=[1, -3], conjugation=True, method=method)
    # party 0's two vectors, encrypted jointly: every party holds the same ciphertexts in its ledger
    cx, cy = tc.encrypt_jointly(e, keys, np.stack([X, Y]) if session.index == 0 else None, value_bound=1.0)
    # every party runs the agreed circuit itself (deterministic: the same bytes everywhere)
    product = tc.evaluate(keys, _product(), [cx, cy])[0]
    direct = keys.evaluator().rotate(keys.evaluator().mul_rescale(cx, cy), 1)
    floods = {"fresh": tc.plan_flood(keys, [cx]), "product": tc.plan_flood(keys, [product])}
    return {"fresh": tc.decrypt(e, keys, cx), "product": tc.decrypt(e, keys, product, to=0), "floods": floods,
            "product_digest": tc.ciphertext_digest(product), "as_direct": np.array_equal(product.data, direct.data),
            "cx": cx, "cy": cy, "pk": keys.public.data, "rlk": keys.relin.data,
            "galois": {g: k.data for g, k in keys.galois.items()}, "s": _reveal_secret(e, keys),
            "share": keys.share, "phases": keys.phases}


def _within_flood(res, i=0):
    """Party ``i``'s decryptions against the slots they encrypt, each within 4 x 2^-bits of the
    flood its parties planned (the product's own evaluation error is far below the flood)."""
    r = res[i]
    fresh = float(np.max(np.abs(r["fresh"] - X)))
    assert fresh <= 4 * 2.0 ** -r["floods"]["fresh"].precision_bits, (fresh, r["floods"]["fresh"])
    if r["product"] is not None:
        product = float(np.max(np.abs(r["product"] - np.roll(X * Y, -1))))
        assert product <= 4 * 2.0 ** -r["floods"]["product"].precision_bits, (product, r["floods"]["product"])


def _centred(rows, primes=PARAMS.primes):
    return np.array([[int(v) if v <= q // 2 else int(v) - q for v in row] for row, q in zip(rows, primes)])


def _coefficients(ntt_rows):
    """NTT rows over every prime -> the centred integer coefficients; asserts every row agrees
    (the value is a small integer, the same on each limb)."""
    x = np.ascontiguousarray(ntt_rows).copy()
    PARAMS.context.intt(x, ROWS)
    c = _centred(x)
    assert all(np.array_equal(c[r], c[0]) for r in ROWS), "limbs disagree: not a small integer polynomial"
    return c[0]


def _opened_errors(res):
    """Every opened error polynomial's coefficients: pk, and each digit of each switching key."""
    ctx = PARAMS.context
    s = res["s"]
    out = [_coefficients(ctx.add(res["pk"][0], ctx.mul(res["pk"][1], s, ROWS), ROWS))]
    targets = {0: ctx.mul(s, s, ROWS)} | {g: ctx.automorph(s, g) for g in res["galois"]}
    keys = {0: res["rlk"]} | res["galois"]
    for g, key in keys.items():
        for j, q in enumerate(PARAMS.moduli):
            got = ctx.add(key[j, 0], ctx.mul(key[j, 1], s, ROWS), ROWS)
            gadget = ctx.mul_scalar(np.ascontiguousarray(targets[g][j:j + 1]), np.array([PARAMS.special % q], np.uint64), [j])
            got[j:j + 1] = ctx.sub(np.ascontiguousarray(got[j:j + 1]), gadget, [j])
            out.append(_coefficients(got))
    return np.concatenate(out)


@pytest.fixture(scope="module")
def three_parties():
    return run_in_memory(3, _job, timeout=300)


@pytest.mark.parametrize("n", [2, 5])
def test_joint_keys_decrypt_jointly_at_n_parties(n):
    res = run_in_memory(n, _job, timeout=300)
    for r in res[1:]:  # everyone holds the same opened keys, inputs and (self-computed) product
        assert np.array_equal(r["pk"], res[0]["pk"]) and np.array_equal(r["rlk"], res[0]["rlk"])
        assert np.array_equal(r["cx"].data, res[0]["cx"].data) and r["product_digest"] == res[0]["product_digest"]
    for i, r in enumerate(res):
        assert r["as_direct"]  # evaluate ran exactly the circuit, with the opened keys
        _within_flood(res, i)
    assert res[0]["product"] is not None and all(r["product"] is None for r in res[1:])
    assert np.max(np.abs(_opened_errors(res[0]))) <= 23  # the sampler's tail


def test_s_ideal_is_ternary_and_the_keys_are_valid_under_it(three_parties):
    res = three_parties
    s = _coefficients(res[0]["s"])
    assert set(np.unique(s).tolist()) <= {-1, 0, 1}
    # the shares really are additive shares of s: their sum is s on every limb
    total = res[0]["share"].ntt
    for r in res[1:]:
        total = PARAMS.context.add(total, r["share"].ntt, ROWS)
    assert np.array_equal(total, res[0]["s"])
    assert [r["share"].index for r in res] == [0, 1, 2] and all(r["share"].parties == 3 for r in res)
    errors = _opened_errors(res[0])  # raises if any key is not (small error) + gadget under s
    for i in range(3):  # and the three decrypt jointly
        _within_flood(res, i)
    # the joint input is a ciphertext under s_ideal: decrypted with it alone, it gives x
    sk = ckks.SecretKey.from_coefficients(PARAMS, s)
    assert np.max(np.abs(ckks.Encoder(PARAMS).decode(ckks.decrypt(sk, res[0]["cx"])) - X)) < 1e-6
    assert errors.size == PARAMS.n * (1 + len(PARAMS.moduli) * 4) and np.max(np.abs(errors)) <= 23


def test_opened_errors_follow_the_discrete_gaussian(three_parties):
    """Chi-square of the opened error coefficients (pk and every switching-key digit) against
    the sampler's exact law (sigma 3.2); |x| bins with the tail beyond 8 merged."""
    errors = np.abs(_opened_errors(three_parties[0]))
    law = gaussian_law()
    edges = 9
    expected = np.concatenate([law[:edges], [law[edges:].sum()]]) * errors.size
    observed = np.concatenate([np.bincount(np.minimum(errors, edges), minlength=edges + 1)])
    assert chisquare(observed, expected).pvalue > 1e-4
    assert abs(np.mean(_opened_errors(three_parties[0]))) < 0.5


def test_joint_keys_compute_as_the_single_key_engine_under_s_ideal(three_parties):
    """Multiply + relinearise + rescale and every rotation with the joint keys decrypt (under
    s_ideal) to what the single-key engine's own keys for s_ideal give."""
    res = three_parties[0]
    sk = ckks.SecretKey.from_coefficients(PARAMS, _coefficients(res["s"]))
    single = ckks.KeySet(PARAMS, secret=sk, rotations=[1, -3], conjugation=True)
    joint = ckks.Evaluator(PARAMS, ckks.SwitchingKey(PARAMS, res["rlk"], 0),
                           {g: ckks.SwitchingKey(PARAMS, d, g) for g, d in res["galois"].items()})
    mine = ckks.Evaluator(PARAMS, single.relin, single.galois)
    enc = ckks.Encoder(PARAMS)
    for op in (lambda ev: ev.mul_rescale(res["cx"], res["cy"]), lambda ev: ev.rotate(res["cx"], 1),
               lambda ev: ev.rotate(res["cx"], -3), lambda ev: ev.conjugate(res["cy"])):
        a = enc.decode(ckks.decrypt(sk, op(joint)))
        b = enc.decode(ckks.decrypt(sk, op(mine)))
        assert np.max(np.abs(a - b)) < 1e-6


def test_local_noise_variant_opens_sums_of_party_errors():
    """method="local": the keys still work and decrypt jointly; the opened errors are sums of n
    party Gaussians (variance n sigma^2)."""
    res = run_in_memory(3, _job, "local", timeout=300)
    _within_flood(res)
    var = float(np.var(_opened_errors(res[0])))
    assert 0.75 * 3 * 3.2 ** 2 < var < 1.3 * 3 * 3.2 ** 2
    with pytest.raises(PartyError, match="unknown key-generation method"):
        run_in_memory(2, _job, "mine", timeout=60)


# -- decryption consent ---------------------------------------------------------------------------

def _consent_job(session, refuser):
    e = engine_for_tests(session)
    keys = tc.keygen(e, PARAMS, check=False)
    ct, other = tc.encrypt_jointly(e, keys, np.stack([X, Y]) if session.index == 0 else None, value_bound=1.0)
    # the same bytes at every party, but encrypted by one party alone: nobody can account for it
    alone = ckks.encrypt(keys.public, ckks.Encoder(PARAMS).encode(X), Prg(bytes(32)))
    out = {"spent": [keys.ledger.spent]}

    def attempt(key, ciphertext, **kw):
        sent = session.stats.bytes_sent
        try:
            tc.decrypt(e, keys, ciphertext, **kw)
        except DecryptionRefused as exc:
            out[key] = str(exc)
        out[f"{key}_bytes"] = session.stats.bytes_sent - sent

    attempt("refused", ct, approve=lambda req: session.index != refuser)
    attempt("alone", alone)
    attempt("mismatch", other if session.index == 1 else ct)  # party 1 asks for another (accounted) ciphertext
    out["spent"].append(keys.ledger.spent)
    seen = []
    flood = tc.plan_flood(keys, [ct])
    out["after"] = tc.decrypt(e, keys, ct, to=0, approve=lambda req: seen.append(req) or True)
    out["spent"].append(keys.ledger.spent)
    out["request"] = seen[0]
    out["expected"] = {"digests": [tc.ciphertext_digest(ct)], "to": 0, **flood.request()}
    out["flood"] = flood
    return out


def test_a_decryption_refused_by_one_party_opens_nothing():
    res = run_in_memory(3, _consent_job, 2, timeout=300)
    for r in res:
        assert "refused by party2 (not approved)" in r["refused"]
        assert "unknown provenance" in r["alone"]
        assert "different decryption request" in r["mismatch"]
        for key in ("refused", "alone", "mismatch"):  # the consent messages only: no share was sent
            assert r[f"{key}_bytes"] < 2000, (key, r[f"{key}_bytes"])
        assert r["spent"] == [0, 0, 1]  # refusals charge nothing; the decryption is charged once
        assert r["request"] == r["expected"] == res[0]["expected"]  # every party asked the same
    flood = res[0]["flood"]
    assert np.max(np.abs(res[0]["after"] - X)) <= 4 * 2.0 ** -flood.precision_bits and res[1]["after"] is None
    assert res[0]["request"]["mode"] == "key-recovery" and res[0]["request"]["lambda"] == tc.SECURITY_LAMBDA
    assert res[0]["request"]["budget"] == tc.DEFAULT_BUDGET
    assert flood.sigma == tc.flood_sigma(flood.error_bound, tc.DEFAULT_BUDGET)


def test_decrypt_rejects_bad_input():
    sk = ckks.SecretKey.generate(PARAMS)
    keys = tc.JointKeys(PARAMS, ckks.public_key(sk), ckks.relin_key(sk), {},
                        ckks.SecretKeyShare(PARAMS, np.zeros((len(ROWS), PARAMS.n), np.uint64), 0, 2))
    other = ckks.Parameters.from_literal(64, [50, 40], 50, 40, insecure=True)
    ct = ckks.encrypt(ckks.KeySet(other).public, ckks.Encoder(other).encode(X))
    with pytest.raises(ValueError, match="other parameters"):
        tc.decrypt(None, keys, ct)
    with pytest.raises(TypeError, match="ckks.Ciphertext"):
        tc.decrypt(None, keys, np.zeros(3))
    mine = ckks.encrypt(keys.public, ckks.Encoder(PARAMS).encode(X))
    with pytest.raises(ValueError, match="relinearised"):
        tc.decrypt(None, keys, keys.evaluator().mul(mine, mine, relinearize=False))
    with pytest.raises(DecryptionRefused, match="unknown provenance"):  # before any engine is needed
        tc.plan_flood(keys, [mine])
    with pytest.raises(ConfigError, match="party index"):
        ckks.SecretKeyShare(PARAMS, keys.share.ntt, 2, 2)


# -- failures and key files -------------------------------------------------------------------------

class _Stop(RuntimeError):
    pass


def _stopping_job(session, victim, out_dir):
    def progress(event):
        if session.index == victim and event["phase"] == "relinearisation key" and event["status"] == "start":
            raise _Stop("party stops during key generation")
    return keygen_job(session, CHAIN, insecure=True, out=os.path.join(out_dir, session.name), progress=progress,
                      engine=engine_for_tests(session))


def test_a_party_that_stops_during_keygen_makes_every_other_fail_fast(tmp_path):
    start = time.monotonic()
    with pytest.raises(PartyError, match="party stops during key generation") as info:
        run_in_memory(3, _stopping_job, 1, str(tmp_path), timeout=120)
    assert info.value.party == "party1"
    assert time.monotonic() - start < 30  # not the 300 s receive timeout
    assert list(tmp_path.iterdir()) == []  # no key directory, no partial one


def _dying_job(session, out_dir):
    def progress(event):
        if session.index == 1 and event["phase"] == "s^2 (square pairs)":
            os._exit(3)  # the process dies without a word to its peers
    return keygen_job(session, CHAIN, insecure=True, out=os.path.join(out_dir, session.name), progress=progress,
                      engine=engine_for_tests(session))


def test_a_killed_party_process_is_noticed_by_the_others(tmp_path):
    start = time.monotonic()
    with pytest.raises(PartyError):
        launch(2, _dying_job, str(tmp_path), config=NetConfig(timeout=60), timeout=120, workers_per_party=1)
    assert time.monotonic() - start < 45
    assert list(tmp_path.iterdir()) == []


def _saving_job(session, out_dir):
    return keygen_job(session, CHAIN, rotations=[2], insecure=True, out=os.path.join(out_dir, session.name),
                      engine=engine_for_tests(session))


def test_key_directories_hold_the_public_keys_and_a_private_share(tmp_path):
    res = run_in_memory(2, _saving_job, str(tmp_path), timeout=300)
    assert res[0]["sizes"] == res[1]["sizes"]
    for r in res:
        d = tmp_path / r["party"]
        assert sorted(p.name for p in d.iterdir()) == sorted(
            ["params.shpr", "public.shpr", "relin.shpr", f"galois-{ckks.galois_element(PARAMS, 2)}.shpr",
             tc.SHARE_FILE, tc.LEDGER_FILE])
        for private in (tc.SHARE_FILE, tc.LEDGER_FILE):  # the share and the ledger: this party's alone
            assert stat.S_IMODE((d / private).stat().st_mode) == 0o600, private
        with pytest.raises(SerializationError, match="insecure test set"):
            tc.JointKeys.load(d)  # test parameters load only when asked for
        keys = tc.JointKeys.load(d, insecure=True)
        assert keys.share.index == int(r["party"][-1]) and keys.share.parties == 2
        assert sorted(keys.galois) == [ckks.galois_element(PARAMS, 2)]
        # the ledger came back from disk: the budget, the key check's two decryptions charged, and
        # the check's ciphertexts accounted for as outputs
        assert keys.ledger.budget == r["budget"] == tc.DEFAULT_BUDGET
        assert keys.ledger.spent == r["budget"] - r["budget_left"] == 2
        assert keys.ledger.path == d / tc.LEDGER_FILE
        assert sorted(e.source for e in keys.ledger.entries.values()) == ["key check: relinearisation key",
                                                                          "key check: rotation keys"]
    # the public material alone: anyone can encrypt and compute, nobody can decrypt
    a, b = (tc.PublicKeys.load(tmp_path / p, insecure=True) for p in ("party0", "party1"))
    assert np.array_equal(a.public.data, b.public.data) and np.array_equal(a.relin.data, b.relin.data)
    pub_only = tmp_path / "public"
    a.save(pub_only)
    assert not (pub_only / tc.SHARE_FILE).exists() and not (pub_only / tc.LEDGER_FILE).exists()
    with pytest.raises(ConfigError, match="no secret-key share"):
        tc.JointKeys.load(pub_only, insecure=True)
    with pytest.raises(ConfigError, match="never overwritten"):
        a.save(pub_only)
    # shares: seeded sizes, tamper checks
    blob = bytearray((tmp_path / "party0" / tc.SHARE_FILE).read_bytes())
    blob[-1] = 0xFF
    with pytest.raises(SerializationError, match="not below its prime"):
        ckks.from_bytes(bytes(blob), a.params)
    with pytest.raises(SerializationError, match="bytes"):
        ckks.from_bytes(bytes(blob[:-8]), a.params)
    # a ledger that does not read back refuses the key rather than guess its budget
    (tmp_path / "party1" / tc.LEDGER_FILE).write_text("{}")
    with pytest.raises(ConfigError, match="not a readable ledger"):
        tc.JointKeys.load(tmp_path / "party1", insecure=True)


def _local_keys(budget=tc.DEFAULT_BUDGET):
    sk = ckks.SecretKey.generate(PARAMS)
    return tc.JointKeys(PARAMS, ckks.public_key(sk), ckks.relin_key(sk), {}, ckks.SecretKeyShare(PARAMS, sk.ntt, 0, 2),
                        ledger=tc.Ledger(budget=budget))


def test_a_ledger_is_bound_to_its_key_and_never_recreated(tmp_path):
    import json

    from shaper.errors import KeyValidationError

    first, second = _local_keys(budget=3), _local_keys(budget=3)
    assert first.ledger.key == first.fingerprint() != second.fingerprint()
    first.save(tmp_path / "first")
    second.save(tmp_path / "second")
    loaded = tc.JointKeys.load(tmp_path / "first", insecure=True)
    loaded.ledger.spend(3)  # the first key's budget is spent
    assert json.loads((tmp_path / "first" / tc.LEDGER_FILE).read_bytes())["key"] == first.fingerprint()
    # a fresh ledger copied in from another key's directory: refused, not used
    (tmp_path / "first" / tc.LEDGER_FILE).write_bytes((tmp_path / "second" / tc.LEDGER_FILE).read_bytes())
    with pytest.raises(KeyValidationError, match="another key"):
        tc.JointKeys.load(tmp_path / "first", insecure=True)
    # a missing ledger beside a share: refused, never recreated with a fresh budget
    (tmp_path / "first" / tc.LEDGER_FILE).unlink()
    with pytest.raises(ConfigError, match="holds no ledger"):
        tc.JointKeys.load(tmp_path / "first", insecure=True)
    with pytest.raises(KeyValidationError, match="another key"):  # saving a key with another key's ledger
        first.save(tmp_path / "third", ledger=second.ledger)
    assert not (tmp_path / "third").exists()
    # a ledger written before fingerprints (format 1) is bound to the key it is first loaded with
    data = json.loads((tmp_path / "second" / tc.LEDGER_FILE).read_bytes())
    data["format"] = "shaper-threshold-ckks-ledger/1"
    del data["key"]
    (tmp_path / "second" / tc.LEDGER_FILE).write_text(json.dumps(data))
    assert tc.JointKeys.load(tmp_path / "second", insecure=True).ledger.key == second.fingerprint()
    assert json.loads((tmp_path / "second" / tc.LEDGER_FILE).read_bytes())["key"] == second.fingerprint()
    data["key"] = "ab" * 31 + "zz"
    data["format"] = "shaper-threshold-ckks-ledger/2"
    (tmp_path / "second" / tc.LEDGER_FILE).write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="bad key fingerprint"):
        tc.JointKeys.load(tmp_path / "second", insecure=True)


def test_a_failed_save_leaves_nothing(tmp_path, monkeypatch):
    sk = ckks.SecretKey.generate(PARAMS)
    keys = tc.JointKeys(PARAMS, ckks.public_key(sk), ckks.relin_key(sk), {},
                        ckks.SecretKeyShare(PARAMS, sk.ntt, 0, 2))
    real = ckks.save

    def failing(obj, path):
        if isinstance(obj, ckks.SecretKeyShare):
            raise OSError("disk full")
        return real(obj, path)

    monkeypatch.setattr(ckks, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        keys.save(tmp_path / "keys")
    assert list(tmp_path.iterdir()) == []


# -- full size -------------------------------------------------------------------------------------------

def _cnn_job(session, with_demo):
    e = engine_for_tests(session)
    params = cnn_parameters()
    keys = tc.keygen(e, params, rotations=[1] if with_demo else [])
    x = np.cos(np.arange(params.slots) * 0.37)
    mine = x if session.index == 0 else None
    fresh = tc.encrypt_jointly(e, keys, mine, value_bound=1.0, tag="fresh")[0]
    low = tc.encrypt_jointly(e, keys, mine, value_bound=1.0, level=0, tag="level0")[0]  # the CNN's output level
    cases = [("fresh", fresh, x), ("level 0", low, x)]
    if with_demo:  # shaper fhe demo's circuit
        cases.append(("demo", tc.evaluate(keys, tc.chain(["square", "rotate:1"]), [fresh])[0], np.roll(x * x, -1)))
    out = {"sizes": keys.sizes()}
    for label, ct, want in cases:
        flood = tc.plan_flood(keys, [ct])
        t0 = time.process_time()
        got = tc.decrypt(e, keys, ct)
        out[label] = {"error": float(np.max(np.abs(got - want))), "cpu": time.process_time() - t0,
                      "flood": flood, "level": ct.level}
    return out


@pytest.mark.skipif(not native_selected(), reason="N = 2^14 keys take minutes on the numpy reference kernels; "
                    "the flood's precision rule is tested at small N on every kernel")
def test_cnn_scale_precision_is_the_flood_prediction():
    """N = 2^14, the CNN's 438-bit chain at 128-bit security, 2 parties: keys of single-key size;
    a joint input (at the top level and at level 0, the CNN's output level) and the output of
    ``shaper fhe demo``'s circuit (square, rotate by 1), decrypted with each party's flood for
    the key's default budget, are as precise as ``plan_flood`` predicts: the largest slot error
    within 4 x 2^-bits and within 1.5 bits of it."""
    with_demo = True
    res = run_in_memory(2, _cnn_job, with_demo, timeout=600)
    for label in ("fresh", "level 0") + (("demo",) if with_demo else ()):
        floods = [r[label]["flood"] for r in res]
        assert floods[0] == floods[1]  # both parties planned the same flood
        predicted = floods[0].precision_bits
        for r in res:
            err = r[label]["error"]
            assert err <= 4 * 2.0 ** -predicted and abs(-np.log2(err) - predicted) < 1.5, (label, err, predicted)
    assert res[0]["level 0"]["level"] == 0
    if with_demo:
        assert res[0]["demo"]["level"] == cnn_parameters().max_level - 1
    sizes = res[0]["sizes"]
    assert sizes == res[1]["sizes"]
    assert sizes["public key"] < 2 << 20 and sizes["relinearisation key"] < 18 << 20


@NEEDS_NATIVE
@pytest.mark.once  # the example as a user runs it: CI's first run only
def test_the_example_runs():
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "threshold_ckks.py"
    out = subprocess.run([sys.executable, str(example), "--small"], capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "secret-share.shpr" in out.stdout and "ledger.json" in out.stdout
    assert "parties 1 and 2 learnt nothing: True" in out.stdout
    line = out.stdout.split("largest error over all slots: ")[1]
    err, predicted = float(line.split(" ")[0]), float(line.split("the flood predicts ")[1].split(" bits")[0])
    assert err <= 4 * 2.0 ** -predicted and abs(-np.log2(err) - predicted) < 1.5, (err, predicted)
