"""``shaper keygen`` (a homomorphic key pair) and ``shaper certs`` (a CA, every party's TLS key
and certificate and a parties file, all on one machine: for ``--local`` runs and tests).

``shaper certs`` puts every party's private key and the CA key in one directory, so whoever runs
it can impersonate every party. On several hosts each party runs ``shaper identity new`` on its
own machine instead (:mod:`shaper.cli.identity`, ``docs/net.md``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import write_atomic
from .common import command, deprecated_alias, key_bits_option


def add_parser(subparsers: Any) -> None:
    keygen = command(subparsers, "keygen", run_keygen, "generate a Paillier or OU key pair",
                     "Write PREFIX.pub.* (give it to the parties that encrypt for you) and PREFIX.key.* "
                     "(mode 0600; keep it on this host).")
    keygen.add_argument("--scheme", choices=["paillier", "ou"], default="paillier", help="homomorphic scheme")
    key_bits_option(keygen, "key size", old="--bits")
    keygen.add_argument("--out", required=True, metavar="PREFIX", help="file prefix: writes PREFIX.pub.* and PREFIX.key.*")
    keygen.add_argument("--format", choices=["binary", "json"], default="binary", help="file format of both keys")

    certs = command(subparsers, "certs", run_certs,
                    "a CA and every party's TLS key on this machine, for --local runs and tests",
                    "Make a CA, one certificate and key per party, and optionally the parties file, all on this "
                    "machine: for --local runs and tests on one machine. Whoever holds these files can "
                    "impersonate every party; for a job on several hosts each party runs `shaper identity new` on "
                    "its own machine instead (docs/net.md).")
    certs.add_argument("--names", nargs="+", metavar="NAME", help="party names, in order (required)")
    deprecated_alias(certs, "--parties", "--names", nargs="+")
    certs.add_argument("--out", required=True, metavar="DIR", help="directory for ca.pem, NAME.pem, NAME.key")
    certs.add_argument("--hosts", nargs="*", metavar="NAME=HOST",
                       help="each party's host name or address (parties not named here get 127.0.0.1)")
    certs.add_argument("--days", type=int, default=3650, help="validity in days")
    certs.add_argument("--write-parties", metavar="FILE", help="also write a parties file (TOML)")
    certs.add_argument("--base-port", type=int, default=7100, help="first port in the parties file (one per party)")
    certs.add_argument("--session-id", default="shaper-job", help="session id in the parties file")
    certs.add_argument("--force", action="store_true", help="overwrite existing files")


def run_keygen(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..crypto import ou, paillier
    from ..crypto.serialization import save_key

    console = Console()
    module = paillier if args.scheme == "paillier" else ou
    with console.status(f"generating a {args.key_bits}-bit {args.scheme} key ..."):
        pk, sk = module.keygen(args.key_bits)
    suffix = ".json" if args.format == "json" else ".bin"
    prefix = Path(args.out)
    pub = save_key(pk, prefix.with_name(prefix.name + ".pub" + suffix), format=args.format)
    key = save_key(sk, prefix.with_name(prefix.name + ".key" + suffix), format=args.format)
    console.print(f"public key : {pub}   (give this to the parties that encrypt for you)")
    console.print(f"private key: {key}   (mode 0600; keep it on this host only)")
    console.print(f"fingerprint: {pk.fingerprint.hex()[:32]}")
    return 0


def run_certs(args: argparse.Namespace) -> int:
    from ..net.tls import make_certificates

    names = getattr(args, "names", None)
    if not names:
        raise ConfigError("pass --names NAME [NAME ...]: the parties of the job, in order")
    hosts: dict[str, str] = {}
    for item in args.hosts or []:
        if "=" not in item:
            raise ConfigError(f"--hosts entries look like NAME=HOST, got {item!r}")
        name, host = item.split("=", 1)
        hosts[name] = host
    unknown = set(hosts) - set(names)
    if unknown:
        raise ConfigError(f"--hosts names parties that are not in --names: {sorted(unknown)}")
    target = Path(args.write_parties) if args.write_parties else None
    if target is not None and target.exists() and not args.force:
        raise ConfigError(f"refusing to overwrite {target} (use --force)")
    files = make_certificates(names, args.out, hosts=hosts, days=args.days, overwrite=args.force)
    out = Path(args.out)
    print(f"wrote a CA and {len(names)} party certificates to {out}/ (keys are mode 0600)")
    print("  for --local runs and tests on this machine: whoever holds this directory can impersonate every "
          "party; on several hosts each party runs `shaper identity new` (docs/net.md)")
    for name in names:
        print(f"  {name}: {files[name]['cert']}, {files[name]['key']}")
    if target is not None:
        rel = os.path.relpath(out, target.parent if str(target.parent) else ".")
        lines = [f'session_id = "{args.session_id}"', "", "[network]", 'timeout = "300s"',
                 'connect_timeout = "60s"', "", "[tls]", f'ca = "{rel}/ca.pem"', ""]
        for i, name in enumerate(names):
            lines += ["[[party]]", f'name = "{name}"', f'host = "{hosts.get(name, "127.0.0.1")}"',
                      f"port = {args.base_port + i}", f'cert = "{rel}/{name}.pem"', f'key = "{rel}/{name}.key"', ""]
        write_atomic(target, "\n".join(lines).encode(), private=False)
        print(f"wrote {target}")
    return 0
