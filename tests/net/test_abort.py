"""A party that fails tells its peers that it failed, in which phase and with what kind of error,
never the error's text: that can hold the party's data (an id, a cell value, a path, column
names), and stays in the party's own output (and, with the launcher, in its PartyError)."""

import json

import pytest

from shaper.errors import PartyError, PeerError
from shaper.net import NetConfig
from shaper.net import frames as F
from shaper.net.phases import Phases

GUARD = 60  # seconds: a hang guard, never what ends a test that passes
SECRET = "id 'USER1326@EXAMPLE0.COM' appears more than once"


def duplicate_id(session, report_path):
    """Party 0 finds a duplicate id in its data while checking its ids; party 1 waits for it."""
    if session.index == 0:
        session.send(1, 3, tag="ids/count")
        with Phases(session).phase("check ids"):
            raise ValueError(SECRET)
    try:
        session.recv(0, "ids/count", timeout=GUARD)
        session.recv(0, "ids/digest", timeout=GUARD)
        outcome = ("no error", "")
    except PeerError as exc:
        outcome = (type(exc).__name__, str(exc))
    with open(report_path, "w") as fh:
        json.dump(outcome, fh)
    return outcome


def test_a_peer_learns_the_party_phase_and_kind_never_the_data(runner, tmp_path):
    report = tmp_path / "peer.json"
    with pytest.raises(PartyError) as info:
        runner(2, duplicate_id, str(report), config=NetConfig(timeout=GUARD))
    assert info.value.party == "party0" and SECRET in str(info.value)  # the launcher's own (local) report
    kind, message = json.loads(report.read_text())
    assert kind == "PeerError"
    assert message == ("party 'party0' aborted: ValueError (phase 'check ids', last message 'ids/count'); "
                       "the details are in that party's own output")
    assert "USER1326" not in message and "more than once" not in message


def _link_session(ln, config):
    from shaper.net import Session
    from shaper.net.stats import Stats

    return Session("a", ["a", "b"], {"b": ln.a}, config, Stats())


def test_abort_takes_the_exception_and_sends_only_its_kind(link):
    ln = link(NetConfig(timeout=GUARD))
    session = _link_session(ln, ln.a.config)
    with pytest.raises(TypeError, match="abort\\(\\) takes the exception"):
        session.abort("the reason, with data")
    session.send("b", None, tag="step/1")
    session.abort(KeyError("column 'region' (e.g. 'north')"), phase="encode")
    assert ln.b.recv("step/1")[0] is None
    with pytest.raises(PeerError) as info:
        ln.b.recv("step/2")
    assert str(info.value) == ("party 'a' aborted: KeyError (phase 'encode', last message 'step/1'); "
                               "the details are in that party's own output")


def test_leaving_a_session_on_an_exception_sends_only_its_kind(link):
    ln = link(NetConfig(timeout=GUARD))
    with pytest.raises(OSError):
        with _link_session(ln, ln.a.config):
            raise FileNotFoundError("/home/alice/customers.csv")
    with pytest.raises(PeerError) as info:
        ln.b.recv("x")
    assert "FileNotFoundError" in str(info.value) and "alice" not in str(info.value)


@pytest.mark.parametrize("notice, shown", [
    ({"kind": "ValueError", "error": "the text a peer should not send"}, "party 'a' aborted: ValueError;"),
    ({"kind": "x; rm -rf /", "phase": "p"}, "party 'a' aborted: an error (phase 'p');"),
    ({"kind": "E", "phase": "\x1b[2Jline\nbreak"}, "party 'a' aborted: E (phase '\\x1b[2Jline\\nbreak');"),
    (["not", "a", "dict"], "party 'a' aborted: an error;"),
    ({"kind": 3, "tag": 4}, "party 'a' aborted: an error;"),
])
def test_a_peer_notice_is_shown_checked_and_quoted(link, notice, shown):
    """Whatever a (deviating) peer puts in its ABORT, the user sees the kind if it is a class
    name, the phase and tag quoted, and nothing else from it."""
    ln = link(NetConfig(timeout=GUARD))
    payload = json.dumps(notice).encode()
    ln.a._out.sendall(F.header(F.ABORT, b"", len(payload)) + payload)
    with pytest.raises(PeerError) as info:
        ln.b.recv("x")
    assert str(info.value).startswith(shown) and "should not send" not in str(info.value)
    assert str(info.value).endswith("the details are in that party's own output")


def test_the_notice_carries_no_text_of_the_error():
    notice = F.abort_notice(ValueError(SECRET), "load", "rows")
    assert notice == {"kind": "ValueError", "phase": "load", "tag": "rows",
                      "error": "ValueError (phase 'load', last message 'rows'); the details are in that party's own "
                               "output"}
    assert F.abort_notice(RuntimeError("x"))["error"] == "RuntimeError; the details are in that party's own output"
