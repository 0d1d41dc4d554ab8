"""Set-up failures reach the other parties at once, not after ``connect_timeout``.

"At once" is checked by the cause, not with a stopwatch: a party that had to wait for its
connect timeout would raise the timeout's HandshakeError ("waited ... for ... to connect", "could
not reach"); each test asserts the error of the fast path instead (the refusal, the peer's abort,
its dropped link), which no timeout can produce. Where one party must act only after others have
reached a state, the test waits for that state, observed in shaper.net.connect, not for a while.
"""

import threading
import time

import pytest

from shaper.errors import HandshakeError, PeerError
from shaper.net import NetConfig, Party, Session, TLSFiles, make_certificates
from shaper.net import connect as connect_module
from shaper.net.connect import READS, WRITES, _dial, _send_abort, listen
from shaper.net.tls import client_context

# connect_timeout, and the hang guard of every wait below: the failures come from fast paths,
# so a passing run never waits for it; had a fast path failed, the timeout's own error shows it
PATIENT = 120.0


def _files(d, name):
    return TLSFiles(d / "ca.pem", d / f"{name}.pem", d / f"{name}.key")


def _timed_out(exc):
    """Whether ``exc`` is the error a party raises when its connect timeout ran out."""
    return isinstance(exc, HandshakeError) and ("to connect to port" in str(exc) or "could not reach" in str(exc))


class Parties:
    """Listening sockets and Party records for a job run as threads of this process."""

    def __init__(self, tmp_path, names):
        make_certificates(names, tmp_path)
        self.dir = tmp_path
        self.listeners = {n: listen(Party(n, "127.0.0.1", 0)) for n in names}
        self.parties = [Party(n, "127.0.0.1", self.listeners[n].getsockname()[1]) for n in names]
        self.out = {}
        self.threads = []

    def start(self, name, session_id="job"):
        def run():
            try:
                self.out[name] = Session.connect(name, self.parties, NetConfig(connect_timeout=PATIENT,
                                                 session_id=session_id), tls=_files(self.dir, name),
                                                 listener=self.listeners[name])
            except Exception as exc:  # collected for the assertions
                self.out[name] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self):
        for t in self.threads:
            t.join(PATIENT + 10)
        for sock in self.listeners.values():
            sock.close()
        for value in self.out.values():
            if isinstance(value, Session):
                value.close()
        assert not any(t.is_alive() for t in self.threads), "a party is still connecting"
        return self.out


def test_session_id_mismatch_stops_the_listener_too(tmp_path):
    job = Parties(tmp_path, ["alpha", "beta"])
    job.start("alpha", session_id="job-A")
    job.start("beta", session_id="job-B")
    out = job.join()
    assert isinstance(out["beta"], HandshakeError) and "session id mismatch" in str(out["beta"])
    # alpha stopped on beta's refusal (authenticated, so final), not at its connect timeout
    assert isinstance(out["alpha"], HandshakeError) and "party 'beta' cannot join the job" in str(out["alpha"])
    assert not _timed_out(out["alpha"]) and not _timed_out(out["beta"])


@pytest.mark.parametrize("reason", [None, "beta: its data file is missing"])
def test_dialer_that_stops_after_its_first_link_is_noticed(tmp_path, reason):
    """beta dials alpha's first link, then stops (with or without saying why)."""
    job = Parties(tmp_path, ["alpha", "beta"])
    job.start("alpha")
    me, peer = job.parties[1], job.parties[0]
    sock = _dial(me, peer, WRITES, NetConfig(connect_timeout=PATIENT, session_id="job"),
                 client_context(_files(tmp_path, "beta")), time.monotonic() + PATIENT)  # a hang guard
    if reason:
        _send_abort(sock, reason)
    sock.close()
    out = job.join()
    # alpha noticed the link it had (a PeerError from watching it), not its connect timeout
    assert isinstance(out["alpha"], PeerError) and not _timed_out(out["alpha"])
    if reason:
        assert str(out["alpha"]) == f"party 'beta' aborted: {reason}"
    else:
        assert "party 'beta' dropped its connection while the parties were connecting" in str(out["alpha"])


def _watch_links(monkeypatch):
    """Record, each time a party checks the links it already has while waiting for others, which
    links those are; returns ``linked(party, peer)``, which blocks until ``party`` has been seen
    waiting with both of its links to ``peer`` registered."""
    seen, cond = set(), threading.Condition()
    real = connect_module._check_linked

    def check_linked(links, names, me, finished_peers, both_links):
        with cond:
            seen.update((names[me], peer, role) for peer, role in links)
            cond.notify_all()
        return real(links, names, me, finished_peers, both_links)

    monkeypatch.setattr(connect_module, "_check_linked", check_linked)

    def linked(party, peer):
        with cond:
            return cond.wait_for(lambda: {(party, peer, WRITES), (party, peer, READS)} <= seen, timeout=PATIENT)

    return linked


def test_a_party_that_fails_during_setup_aborts_the_parties_it_reached(tmp_path, monkeypatch):
    """p2 is in another session: p0 refuses it and stops at once, and tells p1 (already linked
    to p0 and waiting for p2) why, so all three stop without waiting for their connect timeout."""
    linked = _watch_links(monkeypatch)
    job = Parties(tmp_path, ["p0", "p1", "p2"])
    job.start("p0")
    job.start("p1")
    # p2 comes only once p0 has registered both links with p1 (so p0's abort goes out on them) and
    # p1, linked to p0, waits for p2
    assert linked("p0", "p1") and linked("p1", "p0"), "p0 and p1 did not link"
    job.start("p2", session_id="another-job")
    out = job.join()
    assert "session id mismatch" in str(out["p2"])
    assert isinstance(out["p0"], HandshakeError) and "party 'p2' cannot join the job" in str(out["p0"])
    # p1's wait was ended by p0's abort, which carries p0's reason
    assert isinstance(out["p1"], PeerError)
    assert str(out["p1"]).startswith("party 'p0' aborted: HandshakeError: party 'p2' cannot join the job")
    assert not any(_timed_out(out[n]) for n in ("p0", "p1", "p2"))
