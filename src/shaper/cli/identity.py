"""``shaper identity``: this party's own TLS identity, made on its own machine.

``shaper identity new --name NAME --out DIR`` writes ``DIR/NAME.key`` (mode 0600; it never
leaves this machine) and ``DIR/NAME.pem`` (a self-signed certificate, common name NAME, 90 days
by default) and prints the certificate's SHA-256 fingerprint. The other parties put that
fingerprint in the job's parties file (``fingerprint = "sha256:..."`` under this party's
``[[party]]``); nothing else is exchanged. ``shaper identity show CERT`` prints a certificate's
name, fingerprint and expiry, to check what a file pins. See ``docs/net.md``.
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from .common import command


def add_parser(subparsers: Any) -> None:
    group = command(subparsers, "identity", None, "this party's own TLS key and certificate (multi-host jobs)",
                    "Make this party's key and certificate on its own machine and print the fingerprint the "
                    "other parties pin in the parties file (docs/net.md).")
    sub = group.add_subparsers(dest="identity_command", required=True, metavar="ACTION")

    new = command(sub, "new", run_new, "make this party's key and a self-signed certificate",
                  "Write DIR/NAME.key (mode 0600: keep it on this machine, never send it) and DIR/NAME.pem, and "
                  "print the certificate's fingerprint: send only that (or NAME.pem) to the other parties.")
    new.add_argument("--name", required=True, metavar="NAME", help="this party's name in the parties file")
    new.add_argument("--out", required=True, metavar="DIR", help="directory for NAME.key and NAME.pem")
    new.add_argument("--days", type=int, default=90, help="validity in days (make a new identity before it ends)")
    new.add_argument("--host", metavar="HOST", help="this party's host name or address, added to the certificate")
    new.add_argument("--force", action="store_true", help="replace an identity already in DIR")

    show = command(sub, "show", run_show, "print a certificate's name, fingerprint and expiry",
                   "Print the party name, the SHA-256 fingerprint (as the parties file pins it) and the validity "
                   "of a certificate.")
    show.add_argument("cert", metavar="CERT", help="a certificate file (NAME.pem)")


def run_new(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import ConfigError
    from ..net.tls import make_identity

    existing = [str(Path(args.out) / f"{args.name}.{s}") for s in ("pem", "key") if (Path(args.out) / f"{args.name}.{s}").exists()]
    if existing and not args.force:
        raise ConfigError(f"refusing to overwrite {', '.join(existing)}: an identity exists there (--force replaces "
                          "it; the other parties then need the new fingerprint)")
    identity = make_identity(args.name, args.out, days=args.days, host=args.host, overwrite=args.force)
    print(f"wrote {identity.key} (mode 0600: keep it on this machine only) and {identity.cert}")
    print(f"name       : {identity.name}")
    print(f"fingerprint: {identity.fingerprint}")
    print(f"expires    : {identity.expires:%Y-%m-%d %H:%M} UTC")
    print("Send the fingerprint to the other parties. In the job's parties file, this party's entry reads:")
    print("    [[party]]")
    print(f'    name = "{identity.name}"')
    print(f'    fingerprint = "{identity.fingerprint}"')
    print(f'    cert = "{identity.cert}"')
    print(f'    key = "{identity.key}"')
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ..net.tls import describe, load_certificate, validity_problem

    cert = load_certificate(args.cert)
    info = describe(cert)
    print(f"name       : {info['name']}")
    print(f"fingerprint: {info['fingerprint']}")
    problem = validity_problem(cert, datetime.datetime.now(datetime.timezone.utc))
    print(f"expires    : {info['expires']}" + (f"  (this certificate {problem})" if problem else ""))
    return 0
