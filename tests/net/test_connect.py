"""Set-up failures reach the other parties at once, not after ``connect_timeout``."""

import threading
import time

import pytest

from shaper.errors import HandshakeError, PeerError
from shaper.net import NetConfig, Party, Session, TLSFiles, make_certificates
from shaper.net.connect import WRITES, _dial, _send_abort, listen
from shaper.net.tls import client_context

PATIENT = 20.0  # connect_timeout: every failure below must come long before it


def _files(d, name):
    return TLSFiles(d / "ca.pem", d / f"{name}.pem", d / f"{name}.key")


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
            t0 = time.monotonic()
            try:
                self.out[name] = Session.connect(name, self.parties, NetConfig(connect_timeout=PATIENT,
                                                 session_id=session_id), tls=_files(self.dir, name),
                                                 listener=self.listeners[name])
            except Exception as exc:  # collected for the assertions
                self.out[name] = exc
            self.out[name + "_seconds"] = time.monotonic() - t0

        thread = threading.Thread(target=run)
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
        return self.out


def test_session_id_mismatch_stops_the_listener_too(tmp_path):
    job = Parties(tmp_path, ["alpha", "beta"])
    job.start("alpha", session_id="job-A")
    job.start("beta", session_id="job-B")
    out = job.join()
    assert isinstance(out["beta"], HandshakeError) and "session id mismatch" in str(out["beta"])
    assert isinstance(out["alpha"], HandshakeError) and "party 'beta' cannot join the job" in str(out["alpha"])
    assert out["alpha_seconds"] < 5 and out["beta_seconds"] < 5


@pytest.mark.parametrize("reason", [None, "beta: its data file is missing"])
def test_dialer_that_stops_after_its_first_link_is_noticed(tmp_path, reason):
    """beta dials alpha's first link, then stops (with or without saying why)."""
    job = Parties(tmp_path, ["alpha", "beta"])
    job.start("alpha")
    me, peer = job.parties[1], job.parties[0]
    sock = _dial(me, peer, WRITES, NetConfig(connect_timeout=PATIENT, session_id="job"),
                 client_context(_files(tmp_path, "beta")), time.monotonic() + PATIENT)
    if reason:
        _send_abort(sock, reason)
    sock.close()
    out = job.join()
    assert isinstance(out["alpha"], PeerError) and out["alpha_seconds"] < 5
    if reason:
        assert str(out["alpha"]) == f"party 'beta' aborted: {reason}"
    else:
        assert "party 'beta' dropped its connection while the parties were connecting" in str(out["alpha"])


def test_a_party_that_fails_during_setup_aborts_the_parties_it_reached(tmp_path):
    """p2 is in another session: p0 refuses it and stops at once, and tells p1 (already linked
    to p0 and waiting for p2) why, so all three stop within seconds."""
    job = Parties(tmp_path, ["p0", "p1", "p2"])
    job.start("p0")
    job.start("p1")
    time.sleep(1.0)  # p1 links to p0 and waits for p2
    job.start("p2", session_id="another-job")
    out = job.join()
    assert "session id mismatch" in str(out["p2"])
    assert isinstance(out["p0"], HandshakeError) and "party 'p2' cannot join the job" in str(out["p0"])
    assert isinstance(out["p1"], PeerError) and str(out["p1"]).startswith("party 'p0' aborted: HandshakeError")
    assert max(out["p0_seconds"], out["p1_seconds"], out["p2_seconds"]) < 8
