"""Certificates and connection set-up: mutual TLS, identity checks, clear refusals.

Set-up runs on a clock the test owns (``connect_clock``): shaper.net.connect reads it for its
connect deadlines and its retry back-off sleeps advance it at once. A refusal is checked by its
cause (the error names the TLS failure, the foreign certificate, the session id), never by how
long it took; a party whose only way out is its connect timeout gives up when the test moves the
clock to that deadline, after everything it was waiting on has happened. No verdict depends on
how fast or loaded the machine is.
"""

import datetime
import os
import socket
import stat
import threading

import numpy as np
import pytest
from cryptography import x509

from shaper.errors import ConfigError, HandshakeError
from shaper.net import NetConfig, Party, Session, TLSFiles, make_certificates
from shaper.net.connect import listen

EPS = 1e-9  # float rounding of sums of seconds, not a timing tolerance
PATIENCE = 120  # seconds: connect timeout (virtual) and hang guard (real); never what ends a passing test


def test_make_certificates(tmp_path):
    files = make_certificates(["bank", "shop"], tmp_path, hosts={"bank": "10.0.0.1", "shop": "shop.example"})
    for name in ("ca", "bank", "shop"):
        key = files[name]["key"]
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    cert = x509.load_pem_x509_certificate(files["bank"]["cert"].read_bytes())
    assert cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value == "bank"
    life = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    assert life.days > 3000  # ten years: no month-old expiry surprises
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "bank" in san.get_values_for_type(x509.DNSName)
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        make_certificates(["bank"], tmp_path)
    with pytest.raises(ConfigError):
        make_certificates(["bad name"], tmp_path / "x")


def _connect_pair(clock, tls_for, config=None, config_for=None):
    """Run Session.connect for alpha (listens) and beta (dials alpha) in threads; returns
    {name: session or exception}.

    Once beta has finished and alpha has finished handling every connection that reached it, the
    clock is moved to alpha's connect deadline: a listener that is still waiting then gives up,
    with everything that happened in its report (on the real clock, a slow handshake could miss
    a short deadline; here the deadline cannot come first)."""
    names = ["alpha", "beta"]
    listeners = {n: listen(Party(n, "127.0.0.1", 0)) for n in names}
    parties = [Party(n, "127.0.0.1", listeners[n].getsockname()[1]) for n in names]
    cfg = {n: (config_for or {}).get(n, config or NetConfig(connect_timeout=PATIENCE)) for n in names}
    out = {}

    def run(name):
        try:
            out[name] = Session.connect(name, parties, cfg[name], tls=tls_for(name), listener=listeners[name])
        except Exception as exc:  # collected for the assertions
            out[name] = exc

    threads = {n: threading.Thread(target=run, args=(n,), daemon=True) for n in names}
    t0 = clock.now
    for t in threads.values():
        t.start()
    threads["beta"].join(PATIENCE)
    for handler in list(clock.handlers):  # beta's handshake got an answer: alpha's handler is listed
        handler.join(PATIENCE)
    clock.set(t0 + cfg["alpha"].connect_timeout)
    threads["alpha"].join(PATIENCE)
    for n in names:
        listeners[n].close()
    assert not any(t.is_alive() for t in threads.values()), "a party is still connecting"
    return out


def _files(d, name, cert_name=None):
    return TLSFiles(d / "ca.pem", d / f"{cert_name or name}.pem", d / f"{cert_name or name}.key")


def test_mutual_tls_session_works(tmp_path, connect_clock):
    make_certificates(["alpha", "beta"], tmp_path)
    out = _connect_pair(connect_clock, lambda n: _files(tmp_path, n))
    a, b = out["alpha"], out["beta"]
    assert isinstance(a, Session) and isinstance(b, Session)
    a.send("beta", np.arange(3), tag="t")
    np.testing.assert_array_equal(b.recv_array("alpha", "t"), np.arange(3))
    sock = a._channels["beta"]._out
    assert sock.version() == "TLSv1.3"
    a.close()
    b.close()


def test_certificate_from_another_ca_is_refused(tmp_path, connect_clock):
    make_certificates(["alpha", "beta"], tmp_path / "good")
    make_certificates(["alpha", "beta"], tmp_path / "evil")
    tls = {"alpha": _files(tmp_path / "good", "alpha"), "beta": _files(tmp_path / "evil", "beta")}
    out = _connect_pair(connect_clock, tls.get)
    beta, alpha = str(out["beta"]), str(out["alpha"])
    # beta stops at its failed handshake, not after retrying until its connect timeout
    assert isinstance(out["beta"], HandshakeError), beta
    assert beta.startswith("TLS handshake with party 'alpha' at 127.0.0.1:"), beta
    assert "CERTIFICATE_VERIFY_FAILED" in beta and "could not reach" not in beta, beta
    # alpha cannot tell a stranger from beta (nothing authenticated), so only its connect deadline
    # ends its wait, and its report names the connection that failed the handshake
    assert isinstance(out["alpha"], HandshakeError), alpha
    assert alpha.startswith(f"party 'alpha' waited {PATIENCE}s for 'beta' to connect"), alpha
    assert "connection from 127.0.0.1:" in alpha and "[SSL" in alpha, alpha  # the refused handshake


def test_certificate_of_another_party_is_refused(tmp_path, connect_clock):
    make_certificates(["alpha", "beta", "gamma"], tmp_path)
    tls = {"alpha": _files(tmp_path, "alpha"), "beta": _files(tmp_path, "beta", cert_name="gamma")}
    out = _connect_pair(connect_clock, tls.get)
    # alpha refuses beta's link at once: the certificate is gamma's
    assert isinstance(out["beta"], HandshakeError)
    assert str(out["beta"]).startswith("party 'alpha' refused the connection: certificate identifies 'gamma'")
    # a peer presenting another party's certificate is not beta for sure: alpha waits for beta until
    # its deadline, and reports what it refused
    assert isinstance(out["alpha"], HandshakeError)
    assert str(out["alpha"]).startswith(f"party 'alpha' waited {PATIENCE}s for 'beta'")
    assert "certificate identifies 'gamma', but the peer claims to be 'beta'" in str(out["alpha"])


def test_session_id_mismatch_is_refused(tmp_path, connect_clock):
    make_certificates(["alpha", "beta"], tmp_path)
    cfgs = {"alpha": NetConfig(connect_timeout=PATIENCE, session_id="job-A"),
            "beta": NetConfig(connect_timeout=PATIENCE, session_id="job-B")}
    out = _connect_pair(connect_clock, lambda n: _files(tmp_path, n), config_for=cfgs)
    assert isinstance(out["beta"], HandshakeError) and "session id mismatch" in str(out["beta"])


def test_unreachable_peer_times_out_with_its_address(tmp_path, connect_clock):
    """Nobody listens at alpha's port (a socket holds it, so no other process can take it, but
    refuses connections): beta retries with a growing back-off and gives up exactly at its connect
    deadline, naming the address and the last refusal."""
    clock, timeout = connect_clock, 2.0
    make_certificates(["alpha", "beta"], tmp_path)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = held.getsockname()[1]
        parties = [Party("alpha", "127.0.0.1", port), Party("beta", "127.0.0.1", 0)]
        t0 = clock.now
        with pytest.raises(HandshakeError, match=rf"could not reach party 'alpha' at 127.0.0.1:{port} within 2s: "
                                                 r".*Connection refused"):
            Session.connect("beta", parties, NetConfig(connect_timeout=timeout), tls=_files(tmp_path, "beta"))
    assert clock.now == pytest.approx(t0 + timeout, abs=EPS)  # not a moment before its deadline, nor after
    assert sum(clock.sleeps) == pytest.approx(timeout, abs=EPS)  # every wait was a retry's back-off
    assert len(clock.sleeps) > 3 and clock.sleeps[1] > clock.sleeps[0]  # retried, each time waiting longer


def test_plain_tcp_only_when_asked(tmp_path, connect_clock):
    with pytest.raises(HandshakeError, match="TLS files are required"):
        Session.connect("beta", [Party("alpha", "127.0.0.1", 1), Party("beta", "127.0.0.1", 0)], NetConfig())
    out = _connect_pair(connect_clock, lambda n: None, config=NetConfig(insecure=True, connect_timeout=PATIENCE))
    assert isinstance(out["alpha"], Session)
    out["alpha"].close()
    out["beta"].close()
