"""Certificates and connection set-up: mutual TLS, identity checks, clear refusals."""

import datetime
import os
import stat
import threading
import time

import numpy as np
import pytest
from cryptography import x509

from shaper.errors import ConfigError, HandshakeError
from shaper.net import NetConfig, Party, Session, TLSFiles, make_certificates
from shaper.net.connect import listen


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


def _connect_pair(tmp_path, tls_for, config=None, config_for=None):
    """Run Session.connect for two parties in threads; returns {name: session or exception}."""
    names = ["alpha", "beta"]
    listeners = {n: listen(Party(n, "127.0.0.1", 0)) for n in names}
    parties = [Party(n, "127.0.0.1", listeners[n].getsockname()[1]) for n in names]
    out = {}

    def run(name):
        cfg = (config_for or {}).get(name, config or NetConfig(connect_timeout=2))
        t0 = time.monotonic()
        try:
            out[name] = Session.connect(name, parties, cfg, tls=tls_for(name), listener=listeners[name])
        except Exception as exc:  # collected for the assertions
            out[name] = exc
        out[name + "_seconds"] = time.monotonic() - t0

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for n in names:
        listeners[n].close()
    return out


def _files(d, name, cert_name=None):
    return TLSFiles(d / "ca.pem", d / f"{cert_name or name}.pem", d / f"{cert_name or name}.key")


def test_mutual_tls_session_works(tmp_path):
    make_certificates(["alpha", "beta"], tmp_path)
    out = _connect_pair(tmp_path, lambda n: _files(tmp_path, n))
    a, b = out["alpha"], out["beta"]
    assert isinstance(a, Session) and isinstance(b, Session)
    a.send("beta", np.arange(3), tag="t")
    np.testing.assert_array_equal(b.recv_array("alpha", "t"), np.arange(3))
    sock = a._channels["beta"]._out
    assert sock.version() == "TLSv1.3"
    a.close()
    b.close()


def test_certificate_from_another_ca_is_refused(tmp_path):
    make_certificates(["alpha", "beta"], tmp_path / "good")
    make_certificates(["alpha", "beta"], tmp_path / "evil")
    tls = {"alpha": _files(tmp_path / "good", "alpha"), "beta": _files(tmp_path / "evil", "beta")}
    out = _connect_pair(tmp_path, tls.get)
    assert isinstance(out["beta"], HandshakeError) and "alpha" in str(out["beta"])
    assert isinstance(out["alpha"], HandshakeError) and "beta" in str(out["alpha"])
    assert out["alpha_seconds"] < 2 + 2 and out["beta_seconds"] < 2 + 2


def test_certificate_of_another_party_is_refused(tmp_path):
    make_certificates(["alpha", "beta", "gamma"], tmp_path)
    tls = {"alpha": _files(tmp_path, "alpha"), "beta": _files(tmp_path, "beta", cert_name="gamma")}
    out = _connect_pair(tmp_path, tls.get)
    assert isinstance(out["beta"], HandshakeError)
    assert "certificate identifies 'gamma'" in str(out["beta"]) + str(out["alpha"])


def test_session_id_mismatch_is_refused(tmp_path):
    make_certificates(["alpha", "beta"], tmp_path)
    cfgs = {"alpha": NetConfig(connect_timeout=2, session_id="job-A"),
            "beta": NetConfig(connect_timeout=2, session_id="job-B")}
    out = _connect_pair(tmp_path, lambda n: _files(tmp_path, n), config_for=cfgs)
    assert isinstance(out["beta"], HandshakeError) and "session id mismatch" in str(out["beta"])


def test_unreachable_peer_times_out_with_its_address(tmp_path):
    make_certificates(["alpha", "beta"], tmp_path)
    dead = listen(Party("alpha", "127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nobody listens there any more
    parties = [Party("alpha", "127.0.0.1", port), Party("beta", "127.0.0.1", 0)]
    t0 = time.monotonic()
    with pytest.raises(HandshakeError, match=rf"could not reach party 'alpha' at 127.0.0.1:{port}"):
        Session.connect("beta", parties, NetConfig(connect_timeout=1.5), tls=_files(tmp_path, "beta"))
    assert time.monotonic() - t0 < 4


def test_plain_tcp_only_when_asked(tmp_path):
    with pytest.raises(HandshakeError, match="TLS files are required"):
        Session.connect("beta", [Party("alpha", "127.0.0.1", 1), Party("beta", "127.0.0.1", 0)], NetConfig())
    out = _connect_pair(tmp_path, lambda n: None, config=NetConfig(insecure=True, connect_timeout=3))
    assert isinstance(out["alpha"], Session)
    out["alpha"].close()
    out["beta"].close()
