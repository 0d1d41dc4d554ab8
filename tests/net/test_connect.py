"""Set-up failures reach the other parties at once, not after ``connect_timeout``.

"At once" is checked by the cause, not with a stopwatch: a party that had to wait for its
connect timeout would raise the timeout's HandshakeError ("waited ... for ... to connect", "could
not reach"); each test asserts the error of the fast path instead (the refusal, the peer's abort,
its dropped link), which no timeout can produce. Where one party must act only after others have
reached a state, the test waits for that state, observed in shaper.net.connect, not for a while.
"""

import socket
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
        self.files = {n: _files(tmp_path, n) for n in names}  # each party's TLS files
        self.configs = {}  # a party's NetConfig, where not the default of start()
        self.out = {}
        self.threads = []

    def tls(self, name):
        return self.files[name]

    def start(self, name, session_id="job", *, own_listener=False, key=None):
        """Start party ``name`` (its result goes to ``out[key or name]``); ``own_listener``: it
        binds its port itself instead of using the listener made for it."""
        config = self.configs.get(name, NetConfig(connect_timeout=PATIENT, session_id=session_id))
        listener = None if own_listener else self.listeners.get(name)

        def run():
            try:
                self.out[key or name] = Session.connect(name, self.parties, config, tls=self.tls(name),
                                                        listener=listener)
            except Exception as exc:  # collected for the assertions
                self.out[key or name] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self, close=True):
        for t in self.threads:
            t.join(PATIENT + 10)
        for sock in self.listeners.values():
            sock.close()
        if close:
            self.close()
        assert not any(t.is_alive() for t in self.threads), "a party is still connecting"
        return self.out

    def close(self):
        """Close every session at once (each close waits for its peers to close theirs)."""
        closing = [threading.Thread(target=v.close, daemon=True) for v in self.out.values() if isinstance(v, Session)]
        for t in closing:
            t.start()
        for t in closing:
            t.join(PATIENT)


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


# -- fail fast at start-up: each cause named within seconds ------------------------------------
def _raw_listener():
    """A socket that holds a port and listens, but never accepts (another program, a stuck process)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def test_a_party_whose_port_is_taken_says_so_and_tells_the_parties_it_dials(tmp_path):
    """p1's port is held by another program: p1 fails at once, locally, naming the port, and
    dials p0 to tell it why, so p0 stops at once too instead of waiting for p1."""
    job = Parties(tmp_path, ["p0", "p1", "p2"])
    with _raw_listener() as squatter:
        port = squatter.getsockname()[1]
        job.parties[1] = Party("p1", "127.0.0.1", port)
        job.listeners.pop("p1").close()
        job.start("p0")
        job.start("p1", own_listener=True)
        out = job.join()
    taken = f"party 'p1' cannot listen: port {port} on 127.0.0.1 is taken"
    assert isinstance(out["p1"], HandshakeError) and str(out["p1"]).startswith(taken), out["p1"]
    assert isinstance(out["p0"], PeerError), out["p0"]
    assert str(out["p0"]).startswith(f"party 'p1' aborted: HandshakeError: {taken}"), out["p0"]


def test_a_port_held_by_a_program_that_never_answers_is_named_after_the_handshake_timeout(tmp_path):
    make_certificates(["alpha", "beta"], tmp_path)
    with _raw_listener() as squatter:
        port = squatter.getsockname()[1]
        parties = [Party("alpha", "127.0.0.1", port), Party("beta", "127.0.0.1", 0)]
        config = NetConfig(connect_timeout=PATIENT, handshake_timeout=0.5)
        with pytest.raises(HandshakeError) as info:
            Session.connect("beta", parties, config, tls=_files(tmp_path, "beta"))
    assert str(info.value).startswith(f"party 'alpha' at 127.0.0.1:{port} accepted the connection but did not finish "
                                      "the handshake within 0.5s"), info.value
    assert not _timed_out(info.value)


def test_two_processes_claiming_one_name(tmp_path, monkeypatch):
    """A second 'gamma' while the first is linked to alpha: alpha refuses it at once, naming the
    duplicate, and the job goes on with the first."""
    linked = _watch_links(monkeypatch)
    job = Parties(tmp_path, ["alpha", "beta", "gamma"])
    job.start("alpha")
    job.start("gamma")
    assert linked("alpha", "gamma"), "gamma did not link to alpha"
    job.start("gamma", key="gamma-2")
    job.start("beta")
    out = job.join()
    second = out["gamma-2"]
    assert isinstance(second, HandshakeError), second
    assert str(second) == "party 'alpha' refused the connection: duplicate connection from party 'gamma'"
    assert all(isinstance(out[n], Session) for n in ("alpha", "beta", "gamma")), out


def test_a_second_copy_of_a_listening_party_fails_at_once(tmp_path):
    job = Parties(tmp_path, ["alpha", "beta"])
    with pytest.raises(HandshakeError, match=f"port {job.parties[0].port} on 127.0.0.1 is taken"):
        Session.connect("alpha", job.parties, NetConfig(connect_timeout=PATIENT), tls=_files(tmp_path, "alpha"))
    job.join()


@pytest.mark.parametrize("mode", ["ca", "pinned"])
def test_a_party_running_under_another_partys_name_stops_the_listener_at_once(tmp_path, mode):
    """gamma's key holder runs as 'beta': alpha authenticates gamma, refuses the link, and stops at
    once (gamma, a party of this job, is misconfigured: waiting cannot help)."""
    from shaper.net.connect import _Trust
    from shaper.net.tls import make_identity

    names = ["alpha", "beta", "gamma"]
    job = Parties(tmp_path, names)
    if mode == "pinned":
        ids = {n: make_identity(n, tmp_path / "id" / n) for n in names}
        job.parties = [Party(p.name, p.host, p.port, fingerprint=ids[p.name].fingerprint) for p in job.parties]
        job.files = {n: TLSFiles(None, ids[n].cert, ids[n].key) for n in names}
    job.start("alpha")
    trust = _Trust(job.tls("gamma"), job.parties, "gamma")  # gamma's own files, checked as gamma's
    with pytest.raises(HandshakeError) as info:
        _dial(job.parties[1], job.parties[0], WRITES, NetConfig(connect_timeout=PATIENT, session_id="job"),
              trust.client(), time.monotonic() + PATIENT, trust=trust)
    out = job.join()
    problem = "certificate identifies 'gamma', but the peer claims to be 'beta'"
    assert str(info.value) == f"party 'alpha' refused the connection: {problem}"
    assert isinstance(out["alpha"], HandshakeError) and not _timed_out(out["alpha"])
    assert str(out["alpha"]) == f"party 'gamma' cannot join the job: {problem}"


def test_parties_files_that_differ_ca_against_pins_are_named(tmp_path, connect_clock):
    """alpha checks against a CA, beta pins fingerprints: alpha tells beta at once. (alpha, which
    nothing authenticated reached, waits for its connect deadline on the test's clock.)"""
    from shaper.net.tls import make_identity

    job = Parties(tmp_path, ["alpha", "beta"])
    t0 = connect_clock.now
    job.start("alpha")
    ids = {n: make_identity(n, tmp_path / "id" / n) for n in ("alpha", "beta")}
    pinned = [Party(p.name, p.host, p.port, fingerprint=ids[p.name].fingerprint) for p in job.parties]
    with pytest.raises(HandshakeError) as info:
        Session.connect("beta", pinned, NetConfig(connect_timeout=PATIENT, session_id="job"),
                        tls=TLSFiles(None, ids["beta"].cert, ids["beta"].key))
    assert "refused this party's certificate: party 'alpha' checks certificates against a CA, but this party " \
           "pins fingerprints" in str(info.value)
    for handler in list(connect_clock.handlers):
        if handler is not threading.current_thread():
            handler.join(PATIENT)
    connect_clock.set(t0 + PATIENT)
    out = job.join()
    assert isinstance(out["alpha"], HandshakeError)  # at its deadline: nothing authenticated reached it


# -- bounded handshakes -------------------------------------------------------------------------
def test_a_listener_authenticates_at_most_max_pending_connections_at_once(tmp_path, monkeypatch):
    """Three silent connections to a listener with max_pending=2: two are in hand, the third
    waits in the backlog until one of the two goes."""
    started, cond = [], threading.Condition()
    real = connect_module._tune

    def tune(sock):
        with cond:
            started.append(sock)
            cond.notify_all()
        return real(sock)

    monkeypatch.setattr(connect_module, "_tune", tune)
    job = Parties(tmp_path, ["alpha", "beta"])
    job.configs["alpha"] = NetConfig(connect_timeout=PATIENT, session_id="job", max_pending=2)
    job.start("alpha")
    silent = [socket.create_connection(("127.0.0.1", job.parties[0].port)) for _ in range(3)]
    with cond:
        assert cond.wait_for(lambda: len(started) >= 2, timeout=PATIENT)
    time.sleep(0.3)  # a third handler would have started by now were there no cap (a slow machine only hides it)
    with cond:
        assert len(started) == 2
    silent[0].close()  # its handler ends (end of stream): the third connection is taken up
    with cond:
        assert cond.wait_for(lambda: len(started) == 3, timeout=PATIENT)
    job.start("beta")
    for sock in silent[1:]:
        sock.close()
    out = job.join()
    assert isinstance(out["alpha"], Session) and isinstance(out["beta"], Session), out


def test_a_silent_connection_gives_its_slot_back_after_the_handshake_timeout(tmp_path):
    job = Parties(tmp_path, ["alpha", "beta"])
    job.configs["alpha"] = NetConfig(connect_timeout=PATIENT, session_id="job", max_pending=1, handshake_timeout=0.5)
    with socket.create_connection(("127.0.0.1", job.parties[0].port)):  # says nothing, holds the only slot
        job.start("alpha")
        job.start("beta")  # its connection waits in the backlog until alpha drops the silent one
        out = job.join()
    assert isinstance(out["alpha"], Session) and isinstance(out["beta"], Session), out


def test_links_have_tcp_keepalive(tmp_path):
    job = Parties(tmp_path, ["alpha", "beta"])
    for name in ("alpha", "beta"):
        job.configs[name] = NetConfig(connect_timeout=PATIENT, session_id="job", keepalive=7)
        job.start(name)
    out = job.join(close=False)
    try:
        for name, peer in (("alpha", "beta"), ("beta", "alpha")):
            channel = out[name]._channels[peer]
            for link in (channel._out, channel._in):
                raw = link._raw
                assert raw.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                if hasattr(socket, "TCP_KEEPIDLE"):
                    assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 7
                    assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 2
                    assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
    finally:
        job.close()
