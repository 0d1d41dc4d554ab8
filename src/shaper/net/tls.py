"""TLS 1.3 with mutual certificate authentication: pinned party identities, or a job CA.

A party's identity is a key and a certificate whose common name is its name in the parties file.
Both ends of every connection present a certificate and check the other's, and both check that
the peer's certificate is that of the party it claims to be. Two ways to decide whom to trust:

* **Pinned identities** (the multi-host set-up). Each party makes its own key on its own machine
  (:func:`make_identity`, ``shaper identity new``): a self-signed certificate valid for 90 days.
  Parties exchange only certificate fingerprints (SHA-256 of the certificate's DER encoding,
  written ``sha256:<64 hex digits>``), and the parties file pins one per party. A peer is
  accepted only if it presents exactly the certificate pinned for the name it claims, within
  that certificate's validity. No machine ever holds another party's private key, and there is
  no CA whose key could mint identities. Pinning the certificate (not only the public key) makes
  the validity period mean something: an expired identity cannot be renewed without a new
  fingerprint reaching every peer.
* **A job CA** (:func:`make_certificates`, ``shaper certs``): one machine makes a CA and every
  party's key. Whoever runs it can impersonate every party, so it is meant for ``--local`` runs
  and tests on one machine.

Python's ``ssl`` cannot ask for a client certificate and then accept one that no trusted
certificate vouches for, so with pinned identities the dialling party first announces its
certificate in the clear (it is public); the listener checks its fingerprint against the pins
and, only for a pinned certificate, runs the TLS handshake with that certificate as its one
trust anchor, so the handshake proves that the dialler holds its key. The dialler checks the
listener's certificate against its pin after the handshake (whose signature check proves the
listener holds the key of the certificate it presented).

Keys are ECDSA P-256 (fast handshakes), written with mode 0600. Session tickets are disabled:
links are one-way after the handshake and must close cleanly. After the handshake a link's data
travels in AES-128-GCM frames keyed inside TLS (:mod:`shaper.net.sealed`).
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import ConfigError, HandshakeError
from ..files import write_atomic
from .config import PartiesFile, check_party_name

IDENTITY_DAYS = 90  # default validity of an identity made with make_identity


@dataclass(frozen=True)
class TLSFiles:
    """This party's certificate and key, plus the CA certificate when peers are checked against
    a CA (``ca=None``: peers are checked against the fingerprints pinned in the parties file)."""

    ca: Path | None
    cert: Path
    key: Path

    def check(self) -> None:
        files = [("certificate", self.cert), ("private key", self.key)]
        if self.ca is not None:
            files.insert(0, ("CA certificate", self.ca))
        for what, path in files:
            if not Path(path).is_file():
                raise ConfigError(f"TLS {what} {path} does not exist")


# -- fingerprints and certificates --------------------------------------------------------------
def fingerprint(cert: x509.Certificate | bytes) -> str:
    """``sha256:<hex>`` of a certificate's DER encoding (a certificate or its DER bytes)."""
    der = cert if isinstance(cert, (bytes, bytearray)) else cert.public_bytes(serialization.Encoding.DER)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def load_certificate(path: str | Path) -> x509.Certificate:
    """A PEM (or DER) certificate file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read certificate {path}: {exc.strerror or exc}") from exc
    try:
        return x509.load_pem_x509_certificate(data) if b"-----BEGIN" in data else x509.load_der_x509_certificate(data)
    except ValueError as exc:
        raise ConfigError(f"{path} is not a certificate: {exc}") from exc


def common_name(cert: x509.Certificate) -> str | None:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = names[0].value if names else None
    return value if isinstance(value, str) else None


def validity_problem(cert: x509.Certificate, now: datetime.datetime | None = None) -> str | None:
    """Why ``cert`` is not valid at ``now`` ('expired on ...', 'is not valid before ...'), or None."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if now > cert.not_valid_after_utc:
        return f"expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    if now < cert.not_valid_before_utc:
        return f"is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC (check the clocks)"
    return None


def check_own_certificate(files: TLSFiles, name: str, pin: str | None) -> None:
    """Fail at start-up, locally, when this party's own certificate cannot work: expired or not
    yet valid, or (with pinned identities) not the certificate the parties file pins for it."""
    cert = load_certificate(files.cert)
    problem = validity_problem(cert)
    if problem:
        raise ConfigError(f"this party's certificate {files.cert} {problem}: make a new identity "
                          "(`shaper identity new`) and send its fingerprint to the other parties")
    if pin is not None and fingerprint(cert) != pin:
        raise ConfigError(f"this party's certificate {files.cert} has fingerprint {fingerprint(cert)}, but the "
                          f"parties file pins {pin} for {name!r}: update the file (or use the pinned identity)")


def describe(cert: x509.Certificate) -> dict[str, str]:
    """Name, fingerprint and validity of a certificate, as ``shaper identity show`` prints them."""
    return {"name": common_name(cert) or "", "fingerprint": fingerprint(cert),
            "not_before": f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC",
            "expires": f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"}


# -- contexts -----------------------------------------------------------------------------------
def _base(files: TLSFiles, server: bool) -> ssl.SSLContext:
    files.check()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False  # identity is checked against the party name instead
    try:
        ctx.load_cert_chain(str(files.cert), str(files.key))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot load this party's TLS certificate and key ({files.cert}, {files.key}): "
                          f"{exc}") from exc
    if server:
        ctx.num_tickets = 0
    return ctx


def _context(files: TLSFiles, server: bool) -> ssl.SSLContext:
    ctx = _base(files, server)
    ctx.verify_mode = ssl.CERT_REQUIRED
    if files.ca is None:
        raise ConfigError("a CA certificate is needed to check peers against a CA")
    try:
        ctx.load_verify_locations(str(files.ca))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot load the CA certificate {files.ca}: {exc}") from exc
    return ctx


def server_context(files: TLSFiles) -> ssl.SSLContext:
    """A listener's context that checks peers against the CA."""
    return _context(files, server=True)


def client_context(files: TLSFiles) -> ssl.SSLContext:
    """A dialler's context that checks peers against the CA."""
    return _context(files, server=False)


def pinned_client_context(files: TLSFiles) -> ssl.SSLContext:
    """A dialler's context for pinned identities: it presents this party's certificate and takes
    the listener's certificate without a CA; the caller must then check it with
    :func:`check_pinned` (the handshake has proven the listener holds its key)."""
    ctx = _base(files, server=False)
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def pinned_server_context(files: TLSFiles, peer_der: bytes) -> ssl.SSLContext:
    """A listener's context that requires a client certificate and trusts exactly ``peer_der``
    (a pinned party's self-signed certificate), so the handshake proves the peer holds its key."""
    ctx = _base(files, server=True)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=peer_der)
    return ctx


def peer_identity(sock: ssl.SSLSocket) -> str:
    """The common name of the peer's certificate, as verified against the CA."""
    cert = sock.getpeercert()
    if not cert:
        raise HandshakeError("peer presented no certificate")
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    raise HandshakeError("peer certificate has no common name")


def peer_certificate(sock: ssl.SSLSocket) -> bytes:
    """The DER certificate the peer presented in the handshake."""
    der = sock.getpeercert(binary_form=True)
    if not der:
        raise HandshakeError("peer presented no certificate")
    return der


def pinned_party(der: bytes, pins: dict[str, str]) -> str | None:
    """The party whose pinned fingerprint is that of ``der``, if any."""
    fp = fingerprint(der)
    return next((name for name, pin in pins.items() if pin == fp), None)


def check_pinned(der: bytes, party: str, pins: dict[str, str], where: str) -> None:
    """Raise HandshakeError unless ``der`` is exactly the certificate pinned for ``party``, names
    ``party``, and is valid now. ``where`` says who presented it, for the message."""
    fp = fingerprint(der)
    pin = pins.get(party)
    if pin is None:
        raise HandshakeError(f"{where}: no fingerprint is pinned for party {party!r}")
    if fp != pin:
        owner = pinned_party(der, pins)
        whose = f" (the certificate pinned for party {owner!r})" if owner else ""
        raise HandshakeError(f"{where} presented a certificate with fingerprint {fp}{whose}, but party {party!r} "
                             f"is pinned to {pin}")
    cert = x509.load_der_x509_certificate(der)
    if common_name(cert) != party:
        raise HandshakeError(f"{where}: the certificate pinned for party {party!r} names {common_name(cert)!r}")
    problem = validity_problem(cert)
    if problem:
        raise HandshakeError(f"{where}: the certificate of party {party!r} ({fp}) {problem}; it must make a new "
                             "identity and send its fingerprint")


def tls_files_for(parties: PartiesFile, me: str, key: str | Path | None = None) -> TLSFiles:
    """The TLS files of party ``me`` from a parties file (``key`` overrides the file's key path):
    its certificate and key, and the CA unless every party's fingerprint is pinned."""
    party = parties.parties[parties.index(me)]
    key_path = Path(key) if key is not None else party.key
    where = f" in {parties.path}" if parties.path else ""
    if party.cert is None or key_path is None:
        raise ConfigError(f"party {me!r} needs its cert and key{where} (or --key)")
    if parties.ca is None and not parties.pinned:
        raise ConfigError(f"party {me!r} needs [tls] ca or a fingerprint for every party{where}")
    return TLSFiles(parties.ca, party.cert, key_path)


# -- making identities --------------------------------------------------------------------------
def _name(cn: str, organisation: str = "shaper job") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation)])


def _alt_names(name: str, host: str | None) -> list[x509.GeneralName]:
    alt: list[x509.GeneralName] = [x509.DNSName(name)] if all(c.isalnum() or c in "-." for c in name) else []
    if host:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    return alt


def _leaf(name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey,
          start: datetime.datetime, end: datetime.datetime, host: str | None,
          organisation: str = "shaper job") -> x509.Certificate:
    builder = (
        x509.CertificateBuilder().subject_name(_name(name, organisation)).issuer_name(issuer)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
    )
    alt = _alt_names(name, host)
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _pkcs8(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class Identity:
    """A party identity made by :func:`make_identity`: where its files are and its fingerprint."""

    name: str
    cert: Path
    key: Path
    fingerprint: str
    expires: datetime.datetime


def make_identity(name: str, out_dir: str | Path, *, days: int = IDENTITY_DAYS, host: str | None = None,
                  overwrite: bool = False) -> Identity:
    """Make this party's own key and self-signed certificate (common name ``name``, valid for
    ``days``) as ``out_dir/NAME.key`` (mode 0600) and ``out_dir/NAME.pem``, each written
    atomically. The key never leaves this machine; the other parties need only the fingerprint.
    ``host`` (a DNS name or IP address) is added to the certificate's subject alternative names."""
    check_party_name(name)
    if not (isinstance(days, int) and 1 <= days <= 3650):
        raise ConfigError(f"days must be 1..3650, got {days!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out / f"{name}.pem", out / f"{name}.key"
    existing = [str(p) for p in (cert_path, key_path) if p.exists()]
    if existing and not overwrite:
        raise ConfigError(f"refusing to overwrite existing files: {', '.join(existing)}")
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(name, "shaper party")
    cert = _leaf(name, key, subject, key, now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days),
                 host, "shaper party")
    # the key first: a certificate on disk always has its key beside it
    write_atomic(key_path, _pkcs8(key))
    write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return Identity(name, cert_path, key_path, fingerprint(cert), cert.not_valid_after_utc)


def make_certificates(names: list[str], out_dir: str | Path, *, hosts: dict[str, str] | None = None,
                      days: int = 3650, overwrite: bool = False) -> dict[str, dict[str, Path]]:
    """Create a CA and one key + certificate per party in ``out_dir``: for ``--local`` runs and
    tests on one machine only (whoever holds the directory can impersonate every party; on
    several hosts each party makes its own identity with :func:`make_identity`).

    Returns ``{party: {"cert": path, "key": path}, "ca": {"cert": path, "key": path}}``.
    ``hosts`` optionally adds each party's host (DNS name or IP) to its certificate's subject
    alternative names.
    """
    for n in names:
        check_party_name(n)
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate party names: {names}")
    if "ca" in names:
        raise ConfigError("'ca' is reserved for the certificate authority's files")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    targets = [out / "ca.pem", out / "ca.key"] + [out / f"{n}.{s}" for n in names for s in ("pem", "key")]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not overwrite:
        raise ConfigError(f"refusing to overwrite existing files: {', '.join(existing)}")
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shaper job CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    write_atomic(out / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    write_atomic(out / "ca.key", _pkcs8(ca_key))
    result: dict[str, dict[str, Path]] = {"ca": {"cert": out / "ca.pem", "key": out / "ca.key"}}
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _leaf(name, key, ca_name, ca_key, start, end, (hosts or {}).get(name))
        write_atomic(out / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
        write_atomic(out / f"{name}.key", _pkcs8(key))
        result[name] = {"cert": out / f"{name}.pem", "key": out / f"{name}.key"}
    return result
