"""OtLinks with the consistency check (on by default): a party whose extension messages are
altered in flight is stopped by name, and the pair is not used again; parties that disagree on
the check are refused by name."""

import importlib.util

import numpy as np
import pytest

from shaper.errors import FrameError, PartyError
from shaper.net import run_in_memory

NATIVE = importlib.util.find_spec("shaper._native") is not None
pytestmark = pytest.mark.skipif(not NATIVE, reason="OT extension runs in the native extension only")

P61 = (1 << 61) - 1


def _cot(links, other):
    values = np.arange(1000, dtype=np.uint64) % np.uint64(P61)
    offsets = (np.arange(1000, dtype=np.uint64) * np.uint64(7919))[:, None] % np.uint64(P61)
    return links.cot({other: values}, {other: offsets}, [P61], 61)


def _cheating_job(session, cheat):
    """Party ``cheat`` flips one bit of every extension message it sends as receiver; the
    honest sender catches it, says so by name, and refuses the link afterwards."""
    from shaper.protocols.ot import OtLinks

    links = OtLinks(session)
    other = 1 - session.index
    links.ensure([other])
    if session.index == cheat:
        send = session.send

        def tampered(peer, value, tag=""):
            if tag.startswith("ot-cot") and tag.endswith("u"):
                value = bytearray(value)
                value[3] ^= 0x04
                value = bytes(value)
            return send(peer, value, tag)

        session.send = tampered
        _cot(links, other)  # fails with the honest party's abort
        return "cheated"
    assert links.check
    try:
        _cot(links, other)
    except FrameError as exc:
        first = str(exc)
    else:  # pragma: no cover - the point of the test
        raise AssertionError("the tampered extension passed")
    with pytest.raises(FrameError, match="consistency check"):
        links.ensure([other])
    raise FrameError(first)


def test_a_tampered_extension_message_stops_the_sender_by_name():
    with pytest.raises(PartyError, match=r"party 'p1'.*party 'p0''s OT extension failed the consistency check"):
        run_in_memory(["p0", "p1"], _cheating_job, 0, timeout=60)


def _mixed_job(session, checks):
    from shaper.protocols.ot import OtLinks

    OtLinks(session, check=checks[session.index]).ensure([1 - session.index])


def test_links_that_disagree_on_the_check_are_refused_by_name():
    with pytest.raises(PartyError, match="runs OT extension with(out)? the consistency check, this party"):
        run_in_memory(2, _mixed_job, (True, False), timeout=60)


def _both_job(session):
    """Checked and unchecked links side by side on one session (their tags apart)."""
    from shaper.protocols.ot import OtLinks

    other = 1 - session.index
    out = []
    for links in (OtLinks(session), OtLinks(session, check=False, label="ot-plain")):
        recv, sent = _cot(links, other)
        out.append((recv[other][:, 0], sent[other][:, 0]))
    return out


def test_checked_and_unchecked_links_give_the_same_products():
    a, b = run_in_memory(2, _both_job, timeout=60)
    want = [(x % P61) * (x * 7919 % P61) % P61 for x in range(1000)]
    for (r0, s0), (r1, s1) in zip(a, b):
        assert [(int(x) + int(y)) % P61 for x, y in zip(r0, s1)] == want
        assert [(int(x) + int(y)) % P61 for x, y in zip(r1, s0)] == want
