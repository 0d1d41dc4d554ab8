"""Each party owns its identity: keys made where they are used, fingerprints pinned.

Every party here has its own directory holding its own key and nothing else of any other party
(the multi-host set-up of docs/net.md); the parties file pins each party's certificate
fingerprint and names no CA. Set-up runs on a clock the test owns (``connect_clock``): a listener
whose only way out is its connect timeout gives up when the test moves the clock to that
deadline, after everything it waited on has happened, so no verdict depends on machine speed.
"""

import datetime
import os
import stat
import threading

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shaper.cli import main as cli_main
from shaper.errors import ConfigError, HandshakeError
from shaper.net import Party, Session, load_parties
from shaper.net.connect import listen
from shaper.net.tls import fingerprint, load_certificate, make_identity, tls_files_for

PATIENCE = 120  # seconds: connect timeout (virtual) and hang guard (real); never what ends a passing test


# -- the identity itself ------------------------------------------------------------------------
def test_identity_is_a_private_key_and_a_short_lived_self_signed_certificate(tmp_path):
    ident = make_identity("bank", tmp_path / "bank", host="10.0.0.1")
    assert stat.S_IMODE(os.stat(ident.key).st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / "bank").iterdir()) == ["bank.key", "bank.pem"]  # no temporaries
    cert = load_certificate(ident.cert)
    assert cert.subject == cert.issuer  # self-signed: no CA anywhere
    assert cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value == "bank"
    life = cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)
    assert 88 <= life.days <= 90  # short by default
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.0.0.1" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    assert ident.fingerprint == fingerprint(cert) == "sha256:" + cert.fingerprint(hashes.SHA256()).hex()
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        make_identity("bank", tmp_path / "bank")
    again = make_identity("bank", tmp_path / "bank", overwrite=True)
    assert again.fingerprint != ident.fingerprint  # a new identity is a new fingerprint


def test_identity_cli_prints_the_fingerprint_and_show_reads_it_back(tmp_path, capsys):
    assert cli_main(["identity", "new", "--name", "shop", "--out", str(tmp_path), "--days", "30"]) == 0
    out = capsys.readouterr().out
    fp = fingerprint(load_certificate(tmp_path / "shop.pem"))
    assert f"fingerprint: {fp}" in out and f'fingerprint = "{fp}"' in out  # copy-pasteable into the file
    assert cli_main(["identity", "show", str(tmp_path / "shop.pem")]) == 0
    shown = capsys.readouterr().out
    assert "name       : shop" in shown and f"fingerprint: {fp}" in shown and "expires    : " in shown
    assert cli_main(["identity", "new", "--name", "shop", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("shaper identity new: error: refusing to overwrite")


# -- a job of parties that each hold only their own key ----------------------------------------
NAMES = ["alpha", "beta", "gamma"]


def _parties_text(identities, ports, *, pins=None, session="pinned-job"):
    """One parties file for every host: fingerprints pinned, each party's own cert/key paths
    (which exist only on that party's host), no CA."""
    lines = [f'session_id = "{session}"', ""]
    for name in identities:
        ident = identities[name]
        lines += ["[[party]]", f'name = "{name}"', 'host = "127.0.0.1"', f"port = {ports[name]}",
                  f'fingerprint = "{(pins or {}).get(name, ident.fingerprint)}"',
                  f'cert = "{ident.cert}"', f'key = "{ident.key}"', ""]
    return "\n".join(lines)


class Job:
    """Parties of one job, each with its own directory (``root/NAME``: its key and certificate
    only) and its own copy of the parties file, connected as threads of this process over
    loopback TLS."""

    def __init__(self, root, names=NAMES):
        self.root = root
        self.ids = {n: make_identity(n, root / n) for n in names}
        self.listeners = {n: listen(Party(n, "127.0.0.1", 0)) for n in names}
        self.ports = {n: self.listeners[n].getsockname()[1] for n in names}
        self.out = {}

    def parties_file(self, name, **kwargs):
        path = self.root / name / "parties.toml"
        path.write_text(_parties_text(self.ids, self.ports, **kwargs))
        return load_parties(path)

    def run(self, clock, files=None, configs=None, **kwargs):
        files = files or {n: self.parties_file(n, **kwargs.get(n, {})) for n in self.ids}
        threads = {}
        for name, pf in files.items():
            config = (configs or {}).get(name, pf.config.with_(connect_timeout=PATIENCE))

            def run(name=name, pf=pf, config=config):
                try:
                    self.out[name] = Session.connect(name, pf.parties, config, tls=tls_files_for(pf, name),
                                                     listener=self.listeners[name])
                except Exception as exc:  # collected for the assertions
                    self.out[name] = exc

            threads[name] = threading.Thread(target=run, daemon=True)
        t0 = clock.now
        for t in threads.values():
            t.start()
        first = next(iter(threads))  # the listener that may have to wait out its deadline
        for name, t in threads.items():
            if name != first:
                t.join(PATIENCE)
        for handler in list(clock.handlers):
            handler.join(PATIENCE)
        clock.set(t0 + PATIENCE)
        threads[first].join(PATIENCE)
        for sock in self.listeners.values():
            sock.close()
        assert not any(t.is_alive() for t in threads.values()), "a party is still connecting"
        return self.out

    def close(self):
        """Close every session at once (each close waits for its peers to close theirs)."""
        closing = [threading.Thread(target=v.close, daemon=True) for v in self.out.values() if isinstance(v, Session)]
        for t in closing:
            t.start()
        for t in closing:
            t.join(PATIENCE)


def test_no_directory_holds_another_partys_key_and_a_pinned_job_runs_over_tls(tmp_path, connect_clock):
    job = Job(tmp_path)
    for name in NAMES:  # each party's directory: its own key and certificate, nothing of the others
        assert {p.name for p in (tmp_path / name).iterdir()} == {f"{name}.key", f"{name}.pem"}
    pf = job.parties_file("alpha")
    assert pf.ca is None and pf.pinned
    out = job.run(connect_clock)
    try:
        assert all(isinstance(out[n], Session) for n in NAMES), out
        out["alpha"].send("gamma", np.arange(4), tag="x")
        np.testing.assert_array_equal(out["gamma"].recv_array("alpha", "x"), np.arange(4))
        out["gamma"].send("beta", b"hi", tag="y")
        assert out["beta"].recv_bytes("gamma", "y") == b"hi"
        assert out["alpha"]._channels["beta"]._out.version() == "TLSv1.3"
    finally:
        job.close()
    keys = [p for p in tmp_path.rglob("*.key")]
    assert sorted(k.relative_to(tmp_path).as_posix() for k in keys) == [f"{n}/{n}.key" for n in NAMES]


def test_the_parties_file_needs_only_this_partys_key(tmp_path):
    job = Job(tmp_path, ["alpha", "beta"])
    text = _parties_text(job.ids, job.ports).replace(f'key = "{job.ids["beta"].key}"\n', "")
    (tmp_path / "p.toml").write_text(text)
    pf = load_parties(tmp_path / "p.toml")
    assert pf.parties[1].key is None
    files = tls_files_for(pf, "alpha")
    assert files.ca is None and files.key == job.ids["alpha"].key
    with pytest.raises(ConfigError, match="needs its cert and key"):
        tls_files_for(pf, "beta")
    assert tls_files_for(pf, "beta", key=job.ids["beta"].key).key == job.ids["beta"].key  # --key
    for sock in job.listeners.values():
        sock.close()


def test_listener_refuses_a_valid_certificate_with_the_wrong_fingerprint(tmp_path, connect_clock):
    """alpha pins an old fingerprint for beta (beta made a new identity): alpha refuses beta's
    certificate before TLS and tells beta why, naming the party and both fingerprints."""
    job = Job(tmp_path, ["alpha", "beta"])
    stale = make_identity("beta", tmp_path / "old-beta").fingerprint
    out = job.run(connect_clock, alpha={"pins": {"beta": stale}})
    beta, alpha = str(out["beta"]), str(out["alpha"])
    expected = (f"presented a certificate for 'beta' with fingerprint {job.ids['beta'].fingerprint}, but party "
                f"'beta' is pinned to {stale}")
    assert isinstance(out["beta"], HandshakeError) and "refused this party's certificate" in beta, beta
    assert expected in beta, beta
    # an unauthenticated connection cannot stop alpha: it reports it when its wait ends
    assert isinstance(out["alpha"], HandshakeError) and alpha.startswith("party 'alpha' waited"), alpha
    assert expected in alpha, alpha


def test_dialer_refuses_a_listener_with_the_wrong_fingerprint(tmp_path, connect_clock):
    job = Job(tmp_path, ["alpha", "beta"])
    stale = make_identity("alpha", tmp_path / "old-alpha").fingerprint
    out = job.run(connect_clock, beta={"pins": {"alpha": stale}})
    beta = str(out["beta"])
    assert isinstance(out["beta"], HandshakeError), beta
    assert beta.startswith("party 'alpha' at 127.0.0.1:"), beta
    assert (f"presented a certificate with fingerprint {job.ids['alpha'].fingerprint}, but party 'alpha' is pinned "
            f"to {stale}") in beta, beta
    # beta closed the link it refused: alpha's handler saw that at once, not at its handshake timeout
    assert isinstance(out["alpha"], HandshakeError) and "did not finish the handshake" not in str(out["alpha"])


def test_a_party_refuses_to_start_with_a_certificate_that_is_not_its_pin(tmp_path, connect_clock):
    job = Job(tmp_path, ["alpha", "beta"])
    pf = job.parties_file("beta", pins={"beta": make_identity("beta", tmp_path / "old").fingerprint})
    with pytest.raises(ConfigError, match=r"this party's certificate .* has fingerprint .*, but the parties file "
                                          r"pins .* for 'beta'"):
        Session.connect("beta", pf.parties, pf.config, tls=tls_files_for(pf, "beta"))
    for sock in job.listeners.values():
        sock.close()


def _expired_identity(directory, name):
    """A key and a self-signed certificate for ``name`` that expired yesterday."""
    directory.mkdir(parents=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=91))
            .not_valid_after(now - datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (directory / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                              serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))
    os.chmod(directory / f"{name}.key", 0o600)
    return directory / f"{name}.pem", directory / f"{name}.key", fingerprint(cert)


def test_expired_certificates_are_refused_with_a_clear_message(tmp_path, connect_clock, monkeypatch):
    job = Job(tmp_path, ["alpha", "beta"])
    cert, key, fp = _expired_identity(tmp_path / "expired", "beta")
    # beta itself: fails at start-up, locally
    pf = job.parties_file("beta", pins={"beta": fp})
    pf_beta = load_parties(pf.path)
    object.__setattr__(pf_beta.parties[1], "cert", cert)
    object.__setattr__(pf_beta.parties[1], "key", key)
    with pytest.raises(ConfigError, match=r"this party's certificate .* expired on .*make a new identity"):
        Session.connect("beta", pf_beta.parties, pf_beta.config, tls=tls_files_for(pf_beta, "beta"))
    # a peer presenting it anyway (beta skips its own start-up check): alpha, which pins it, refuses
    # it and says why
    from shaper.net import connect as connect_module

    monkeypatch.setattr(connect_module, "check_own_certificate", lambda *args: None)
    out = job.run(connect_clock, files={"alpha": job.parties_file("alpha", pins={"beta": fp}), "beta": pf_beta})
    assert isinstance(out["beta"], HandshakeError)
    assert "refused this party's certificate" in str(out["beta"]), out["beta"]
    assert f"the certificate of party 'beta' ({fp}) expired on" in str(out["beta"]), out["beta"]
    assert f"the certificate of party 'beta' ({fp}) expired on" in str(out["alpha"]), out["alpha"]


def test_parties_file_pins(tmp_path):
    job = Job(tmp_path, ["alpha", "beta"])
    for sock in job.listeners.values():
        sock.close()
    text = _parties_text(job.ids, job.ports)
    path = tmp_path / "p.toml"
    beta_fp = job.ids["beta"].fingerprint
    # colons between byte pairs and upper case are the same fingerprint
    spaced = "sha256:" + ":".join(beta_fp[7 + i:9 + i] for i in range(0, 64, 2)).upper()
    path.write_text(text.replace(beta_fp, spaced))
    assert load_parties(path).parties[1].fingerprint == beta_fp
    cases = [
        (text.replace(f'fingerprint = "{beta_fp}"\n', ""), "no fingerprint for 'beta'"),
        (text.replace(beta_fp, job.ids["alpha"].fingerprint), "'alpha', 'beta' pin the same fingerprint"),
        (text.replace(beta_fp, "sha256:abc"), "fingerprint must look like 'sha256:'"),
        (text.replace('name = "beta"', 'name = "alpha"'), "duplicate party names"),
        (text + '\n[tls]\nkey = "x"\n', r"\[tls\] takes only 'ca'"),
    ]
    for bad, message in cases:
        path.write_text(bad)
        with pytest.raises(ConfigError, match=message):
            load_parties(path)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_from_config_joins_a_job_of_pinned_identities(tmp_path):
    """The documented multi-host set-up end to end: each party's identity in its own directory,
    its own copy of one parties file (fingerprints, no CA), ``Session.from_config``."""
    ids = {n: make_identity(n, tmp_path / n) for n in ("alpha", "beta")}
    ports = {n: _free_port() for n in ids}
    for n in ids:
        (tmp_path / n / "parties.toml").write_text(_parties_text(ids, ports))
    out = {}

    def run(name):
        try:
            with Session.from_config(tmp_path / name / "parties.toml", me=name) as s:
                out[name] = s.exchange(1 - s.index, s.name, "hello")
        except Exception as exc:  # collected for the assertion
            out[name] = exc

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE)
    assert out == {"alpha": "beta", "beta": "alpha"}, out
