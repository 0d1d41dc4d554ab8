"""Commit before opening in threshold-CKKS key generation (issue 34): a rushing party that waits for
the others' openings and then opens a share of its choosing (so that the public key becomes one
it chose) is caught by every honest party before the key is used, and no key is returned; a
party whose opening does not match its commitment is named; joint seeds still agree at every
party and differ between calls; committed openings sum the shares like a plain reveal."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from shaper.crypto import ckks
from shaper.crypto.prg import Prg
from shaper.errors import FrameError, KeyValidationError
from shaper.net import NetConfig, launch, run_in_memory
from shaper.protocols import threshold_ckks as tc
from shaper.protocols.threshold_ckks import commit, polys

from .dealer_engine import engine_for_tests

PARAMS = ckks.Parameters.from_literal(64, [50, 40, 40], 50, 40, insecure=True)
QS = np.array(PARAMS.primes, np.uint64)[:, None]


def _target_b() -> np.ndarray:
    """The public key's b that the rushing party wants everyone to hold (any value it likes)."""
    prg = Prg(b"the attacker's public key b".ljust(32, b"\0"))
    return np.stack([prg.below(int(q), PARAMS.n) for q in PARAMS.primes])


def _rushing_open(session, payload, tag, *, error=KeyValidationError):
    """The attacker's opening of the public key: it commits (to its protocol share, as it must
    before it has seen anything), then waits for every honest opening and only then sends its own:
    b_target minus the others' shares, so that the opened total would be b_target."""
    nonce = os.urandom(commit.NONCE_BYTES)
    session.broadcast(commit.commitment(tag, session.index, nonce, payload), tag + "/commit")
    for peer in session.peers:
        session.recv_bytes(peer, tag + "/commit")
    opened = {peer: session.recv_bytes(peer, tag + "/open")[commit.NONCE_BYTES:] for peer in session.peers}
    theirs = np.zeros((len(PARAMS.primes), PARAMS.n), np.uint64)
    for got in opened.values():  # rushing: every honest share first
        theirs = (theirs + np.frombuffer(got, "<u8").reshape(theirs.shape)) % QS
    mine = (_target_b() + QS - theirs) % QS
    session.broadcast(nonce + mine.astype("<u8").tobytes(), tag + "/open")
    return [mine.tobytes() if p == session.name else opened[p] for p in session.parties]


def _trusting_open(session, payload, tag, *, error=KeyValidationError):
    """The same messages as :func:`commit.open_committed` without the check: what an opening
    without commitments amounts to (the control)."""
    nonce = os.urandom(commit.NONCE_BYTES)
    session.broadcast(commit.commitment(tag, session.index, nonce, payload), tag + "/commit")
    for peer in session.peers:
        session.recv_bytes(peer, tag + "/commit")
    session.broadcast(nonce + payload, tag + "/open")
    opened = {peer: session.recv_bytes(peer, tag + "/open")[commit.NONCE_BYTES:] for peer in session.peers}
    return [payload if p == session.name else opened[p] for p in session.parties]


def _rushing_job(session, attacker, trusting):
    out = {"party": session.name}
    if session.index == attacker:  # this process only: the other parties run the real protocol
        real = commit.open_committed

        def open_committed(sess, payload, tag, *, error=KeyValidationError):
            if "open-pk" not in tag:
                return real(sess, payload, tag, error=error)
            out["forged_tag"] = tag
            return _rushing_open(sess, payload, tag, error=error)

        commit.open_committed = open_committed
    elif trusting:
        commit.open_committed = _trusting_open
    start = time.monotonic()
    try:
        keys = tc.keygen(engine_for_tests(session), PARAMS, check=not trusting)
        out["pk"] = keys.public.data
    except Exception as exc:  # every party reports how it ended instead of failing the launch
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = time.monotonic() - start
    return out


def test_a_rushing_party_cannot_substitute_the_public_key():
    """Three processes; party1 commits to its share, reads both honest openings of the public key
    and opens b_target - (their shares) instead. Both honest parties raise, naming party1 and the
    public key's opening, and nobody holds a key."""
    res = launch(3, _rushing_job, 1, False, config=NetConfig(timeout=60, insecure=True), timeout=180,
                 workers_per_party=1)
    attacker = res[1]
    assert "open-pk" in attacker["forged_tag"]  # the attack really ran, on the public key
    for r in (res[0], res[2]):
        assert r["error"].startswith("KeyValidationError"), r["error"]
        assert "party 'party1'" in r["error"] and attacker["forged_tag"] in r["error"]
        assert "does not match its commitment" in r["error"]
        assert "party 'party0'" not in r["error"] and "party 'party2'" not in r["error"]
        assert r["seconds"] < 30
    assert all("pk" not in r for r in res)  # no key anywhere, not even at the attacker
    assert "error" in attacker  # its peers left: it cannot finish a key on its own


def test_the_rushing_attack_wins_where_openings_are_not_checked():
    """The control: the same attack against honest parties that open without checking the
    commitments (a plain broadcast-then-gather reveal) gives them the attacker's b_target."""
    res = launch(3, _rushing_job, 1, True, config=NetConfig(timeout=60, insecure=True), timeout=180,
                 workers_per_party=1)
    for r in (res[0], res[2]):
        assert "error" not in r, r.get("error")
        np.testing.assert_array_equal(r["pk"][0], _target_b())


# -- a mismatching opening, named ---------------------------------------------------------------

def _tampering(real, cheater, match):
    """open_committed as the cheater runs it: a commitment to its share, then an opening of the
    share with one byte changed (only under tags containing ``match``)."""
    def open_committed(session, payload, tag, *, error=KeyValidationError):
        if session.index != cheater or match not in tag:
            return real(session, payload, tag, error=error)
        nonce = os.urandom(commit.NONCE_BYTES)
        session.broadcast(commit.commitment(tag, session.index, nonce, payload), tag + "/commit")
        for peer in session.peers:
            session.recv_bytes(peer, tag + "/commit")
        changed = bytearray(payload)
        changed[0] ^= 1
        session.broadcast(nonce + bytes(changed), tag + "/open")
        for peer in session.peers:  # it stays for the round, as a real cheater would: every honest
            session.recv_bytes(peer, tag + "/open")  # party's send then lands, whatever the timing
        return [bytes(changed)] * session.n
    return open_committed


def _keygen_job(session):
    try:
        tc.keygen(engine_for_tests(session), PARAMS, check=False)
    except Exception as exc:  # the honest parties' KeyValidationError; the cheater's peers leave it
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.mark.parametrize("match", ["open-s2-masked", "open-rlk", "seed-pk"])
def test_an_opening_that_does_not_match_its_commitment_names_the_party(monkeypatch, match):
    """Party 2 of 3 opens something else than it committed to: the masked difference of s^2, the
    relinearisation key, or its share of the public key's seed; parties 0 and 1 name it and the
    opening, and stop there."""
    monkeypatch.setattr(commit, "open_committed", _tampering(commit.open_committed, 2, match))
    res = run_in_memory(3, _keygen_job, timeout=120)
    for msg in res[:2]:
        assert msg.startswith("KeyValidationError") and "party 'party2'" in msg and match in msg
        assert "does not match its commitment" in msg


def _open_job(session, mode):
    e = engine_for_tests(session)
    rows = np.stack([Prg().below(int(q), PARAMS.n) for q in PARAMS.primes])
    if mode == "rows":
        return rows, commit.committed_open_rows(e, rows, PARAMS.primes, what="test")
    if mode == "copy":  # party 1 sends party 0's commitment as its own
        tag = "copied"
        if session.index == 1:
            c0 = session.recv_bytes(0, tag + "/commit")
            session.broadcast(c0, tag + "/commit")
            session.recv_bytes(2, tag + "/commit")
            opened0 = session.recv_bytes(0, tag + "/open")
            session.broadcast(opened0, tag + "/open")  # opening party 0's value, as party 1
            session.recv_bytes(2, tag + "/open")  # stay until party 2 has sent everything to us
            return None
        try:
            commit.open_committed(session, b"my share", tag)
        except KeyValidationError as exc:
            return str(exc)
        return None
    if mode == "short":
        tag = "short"
        if session.index == 1:
            session.broadcast(b"\0" * 31, tag + "/commit")
            session.gather(tag + "/commit")
            return None
        with pytest.raises(FrameError, match="party 'party1' sent a 31-byte commitment"):
            commit.open_committed(session, b"x", tag)
        return "raised"
    if mode == "range":  # party 2 opens residues of the first prime that are not below it
        if session.index == 2:
            rows[0, 0] = PARAMS.primes[0]
        try:
            commit.committed_open_rows(e, rows, PARAMS.primes, what="range")
        except FrameError as exc:
            return str(exc)
        return None
    raise ValueError(mode)


def test_committed_openings_sum_the_shares_at_every_party():
    res = run_in_memory(3, _open_job, "rows", timeout=60)
    total = sum(r[0] for r in res) % QS
    for _, opened in res:
        np.testing.assert_array_equal(opened, total)


def test_a_copied_commitment_cannot_be_opened_as_ones_own():
    """The commitment names the committer's index: party 1 replaying party 0's commitment and
    opening is caught (it would need that to cancel or copy an honest share)."""
    res = run_in_memory(3, _open_job, "copy", timeout=60)
    for msg in (res[0], res[2]):
        assert "party 'party1'" in msg and "'copied'" in msg


def test_malformed_commitments_and_openings_are_frame_errors():
    res = run_in_memory(3, _open_job, "short", timeout=60)
    assert res[0] == res[2] == "raised"
    res = run_in_memory(3, _open_job, "range", timeout=60)
    for msg in res[:2]:
        assert "party 'party2' opened residues out of range" in msg


def test_the_commitment_binds_every_input():
    base = commit.commitment("t", 0, bytes(32), b"payload")
    assert len(base) == 32 and base == commit.commitment("t", 0, bytes(32), b"payload")
    others = [commit.commitment("u", 0, bytes(32), b"payload"), commit.commitment("t", 1, bytes(32), b"payload"),
              commit.commitment("t", 0, b"\1" + bytes(31), b"payload"),
              commit.commitment("t", 0, bytes(32), b"payloaD"), commit.commitment("t0", 0, bytes(32), b"payload"[1:])]
    assert len({base, *others}) == len(others) + 1


# -- joint seeds ------------------------------------------------------------------------------------

def _seed_job(session):
    e = engine_for_tests(session)
    return [polys.joint_seed(e, "x"), polys.joint_seed(e, "x"), polys.joint_seed(e, "y")]


@pytest.mark.parametrize("n", [2, 3])
def test_joint_seeds_agree_at_every_party_and_differ_between_calls(n):
    res = run_in_memory(n, _seed_job, timeout=60)
    assert all(r == res[0] for r in res[1:])
    assert len(set(res[0])) == 3 and all(len(s) == 32 for s in res[0])
    again = run_in_memory(n, _seed_job, timeout=60)
    assert not set(again[0]) & set(res[0])
