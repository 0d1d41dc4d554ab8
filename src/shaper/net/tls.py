"""TLS 1.3 with mutual certificate authentication, and the small CA behind ``shaper certs``.

Every party has a key and a certificate signed by the job's CA; a party's identity is the
certificate's common name, which must equal its name in the parties file. Both ends of every
connection present and verify certificates (``CERT_REQUIRED``), and both check that the peer's
common name is the party they expect. Session tickets are disabled: links are one-way after the
handshake and must close cleanly.

Keys are ECDSA P-256 (fast handshakes), written with mode 0600; certificates are valid for ten
years by default so jobs do not break when a month-old certificate expires. After the handshake
a link's data travels in AES-128-GCM frames keyed inside TLS (:mod:`shaper.net.sealed`).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import ConfigError, HandshakeError
from ..files import write_private
from .config import check_party_name


@dataclass(frozen=True)
class TLSFiles:
    """The CA certificate plus this party's certificate and key."""

    ca: Path
    cert: Path
    key: Path

    def check(self) -> None:
        for what, path in (("CA certificate", self.ca), ("certificate", self.cert), ("private key", self.key)):
            if not Path(path).is_file():
                raise ConfigError(f"TLS {what} {path} does not exist")


def _context(files: TLSFiles, server: bool) -> ssl.SSLContext:
    files.check()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False  # identity is checked against the party name instead
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_cert_chain(str(files.cert), str(files.key))
        ctx.load_verify_locations(str(files.ca))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot load TLS files ({files.cert}, {files.key}, CA {files.ca}): {exc}") from exc
    if server:
        ctx.num_tickets = 0
    return ctx


def server_context(files: TLSFiles) -> ssl.SSLContext:
    return _context(files, server=True)


def client_context(files: TLSFiles) -> ssl.SSLContext:
    return _context(files, server=False)


def peer_identity(sock: ssl.SSLSocket) -> str:
    cert = sock.getpeercert()
    if not cert:
        raise HandshakeError("peer presented no certificate")
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    raise HandshakeError("peer certificate has no common name")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "shaper job")])


def make_certificates(names: list[str], out_dir: str | Path, *, hosts: dict[str, str] | None = None,
                      days: int = 3650, overwrite: bool = False) -> dict[str, dict[str, Path]]:
    """Create a CA and one key + certificate per party in ``out_dir``.

    Returns ``{party: {"cert": path, "key": path}, "ca": {"cert": path, "key": path}}``. The CA key
    signs certificates only; keep it off the party hosts. ``hosts`` optionally adds each party's
    host (DNS name or IP) to its certificate's subject alternative names.
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
    (out / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    write_private(out / "ca.key", ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    result: dict[str, dict[str, Path]] = {"ca": {"cert": out / "ca.pem", "key": out / "ca.key"}}
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        alt: list[x509.GeneralName] = [x509.DNSName(name)] if all(c.isalnum() or c in "-." for c in name) else []
        host = (hosts or {}).get(name)
        if host:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alt.append(x509.DNSName(host))
        builder = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
        )
        if alt:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        (out / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        write_private(out / f"{name}.key", key.private_bytes(serialization.Encoding.PEM,
                                                              serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))
        result[name] = {"cert": out / f"{name}.pem", "key": out / f"{name}.key"}
    return result
