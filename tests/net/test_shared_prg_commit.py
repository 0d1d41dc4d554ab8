"""``Session.shared_prg`` commits before it opens (issue 34): every member sends a hash of its 32
bytes first and the bytes only after it holds every commitment, so a member that sends last can no
longer choose the seed; the streams still agree within the group, differ between calls and groups,
and a contribution that does not match its commitment is named."""

from __future__ import annotations

import hashlib
import os

import pytest

from shaper.crypto.prg import Prg
from shaper.errors import FrameError
from shaper.net import run_in_memory
from shaper.net.session import SHARED_PRG_DOMAIN


def _streams(session):
    everyone = session.shared_prg(range(session.n), tag="all")
    again = session.shared_prg(range(session.n), tag="all")
    pair = session.shared_prg([0, 1], tag="pair").random_bytes(32) if session.index < 2 else None
    return everyone.random_bytes(32), again.random_bytes(32), pair


def test_members_agree_and_calls_differ(runner):
    res = runner(3, _streams)
    assert all(r[0] == res[0][0] and r[1] == res[0][1] for r in res)
    assert res[0][0] != res[0][1]  # two calls: two seeds
    assert res[0][2] == res[1][2] and res[2][2] is None and res[0][2] not in (res[0][0], res[0][1])
    assert runner(3, _streams)[0][0] != res[0][0]  # and a fresh seed every run


def _commitment(tag, name, contribution):
    """SHA-256(domain, tag, name, bytes), as the session computes it (length-prefixed)."""
    h = hashlib.sha256(SHARED_PRG_DOMAIN)
    for part in (tag.encode(), name.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    h.update(contribution)
    return h.digest()


def _cheating(session, cheater, how):
    """The cheater commits to one contribution and opens another (or sends a short commitment);
    every other member reports what it raised."""
    tag = "seed"
    if session.index != cheater:
        try:
            session.shared_prg(range(session.n), tag=tag)
        except FrameError as exc:
            return str(exc)
        return None
    committed = os.urandom(32)
    for peer in session.peers:
        session.send(peer, _commitment(tag, session.name, committed) if how == "swap" else b"\0" * 31,
                     tag + "/commit")
    session.gather(tag + "/commit")
    if how == "swap":
        # rushing: it reads every honest contribution, then opens one of its choosing
        chosen = bytes(a ^ b for a, b in zip(*session.gather(tag).values()))
        for peer in session.peers:
            session.send(peer, chosen, tag)
    return "cheated"


@pytest.mark.parametrize("how", ["swap", "short"])
def test_a_contribution_that_does_not_match_its_commitment_is_named(how):
    res = run_in_memory(3, _cheating, 1, how, timeout=60)
    assert res[1] == "cheated"
    for msg in (res[0], res[2]):
        if how == "swap":
            assert msg == ("party 'party1' opened a seed contribution under tag 'seed' that does not match its "
                           "commitment")
        else:
            assert msg == "party 'party1' sent a 31-byte seed commitment under tag 'seed'"


def test_the_commitment_is_what_the_session_sends():
    """The test's copy of the commitment is the session's: an honest member opening exactly what
    it committed to with this formula is accepted."""
    def job(session):
        if session.index == 1:
            mine = os.urandom(32)
            session.send(0, _commitment("t", session.name, mine), "t/commit")
            session.recv_bytes(0, "t/commit")
            session.send(0, mine, "t")
            theirs = session.recv_bytes(0, "t")
            return Prg(seed=bytes(a ^ b for a, b in zip(mine, theirs))).random_bytes(8)
        return session.shared_prg([0, 1], tag="t").random_bytes(8)

    res = run_in_memory(2, job, timeout=60)
    assert len(res[0]) == 8 and res[0] == res[1]
