"""The ``shaper`` command line.

    shaper demo      a tour of the additive-HE engine (sparse X @ Enc(w), packing), checked
    shaper keygen    write a Paillier/OU key pair (private key mode 0600)
    shaper certs     a CA and per-party TLS certificates (+ a parties file) for a multi-host job
    shaper info      version, kernel, worker count, CPU features
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

from . import __version__


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demos import he

    he.run(bits=args.bits, scheme=args.scheme, rows=args.rows, cols=args.cols,
           density=args.density, json_path=args.json)
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .crypto import ou, paillier
    from .crypto.serialization import save_key

    console = Console()
    module = paillier if args.scheme == "paillier" else ou
    with console.status(f"generating a {args.bits}-bit {args.scheme} key ..."):
        pk, sk = module.keygen(args.bits)
    suffix = ".json" if args.format == "json" else ".bin"
    prefix = Path(args.out)
    pub = save_key(pk, prefix.with_name(prefix.name + ".pub" + suffix), format=args.format)
    key = save_key(sk, prefix.with_name(prefix.name + ".key" + suffix), format=args.format)
    console.print(f"public key : {pub}   (give this to the parties that encrypt for you)")
    console.print(f"private key: {key}   (mode 0600; keep it on this host only)")
    console.print(f"fingerprint: {pk.fingerprint.hex()[:32]}")
    return 0


def _cmd_certs(args: argparse.Namespace) -> int:
    import os

    from .errors import ConfigError
    from .net.tls import make_certificates

    hosts: dict[str, str] = {}
    for item in args.hosts or []:
        if "=" not in item:
            raise SystemExit(f"--hosts entries look like NAME=HOST, got {item!r}")
        name, host = item.split("=", 1)
        hosts[name] = host
    unknown = set(hosts) - set(args.parties)
    if unknown:
        raise SystemExit(f"--hosts names parties that are not in --parties: {sorted(unknown)}")
    try:
        files = make_certificates(args.parties, args.out, hosts=hosts, days=args.days, overwrite=args.force)
    except ConfigError as exc:
        raise SystemExit(str(exc))
    out = Path(args.out)
    print(f"wrote a CA and {len(args.parties)} party certificates to {out}/ (keys are mode 0600)")
    print(f"  keep {files['ca']['key']} offline: it only signs certificates")
    for i, name in enumerate(args.parties):
        where = hosts.get(name, "127.0.0.1")
        print(f"  host of {name} ({where}): {out / 'ca.pem'}, {files[name]['cert']}, {files[name]['key']}")
    if args.write_parties:
        target = Path(args.write_parties)
        if target.exists() and not args.force:
            raise SystemExit(f"refusing to overwrite {target} (use --force)")
        rel = os.path.relpath(out, target.parent if str(target.parent) else ".")
        lines = [f'session_id = "{args.session_id}"', "", "[network]", 'timeout = "300s"',
                 'connect_timeout = "60s"', "", "[tls]", f'ca = "{rel}/ca.pem"', ""]
        for i, name in enumerate(args.parties):
            lines += ["[[party]]", f'name = "{name}"', f'host = "{hosts.get(name, "127.0.0.1")}"',
                      f"port = {args.base_port + i}", f'cert = "{rel}/{name}.pem"', f'key = "{rel}/{name}.key"', ""]
        target.write_text("\n".join(lines))
        print(f"wrote {target}: give every host a copy (each needs only its own key)")
    return 0


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cmd_info(args: argparse.Namespace) -> int:
    import gmpy2
    import numpy

    from .kernels import get_kernel, workers

    flags = _cpu_flags()
    print(f"shaper       {__version__}")
    print(f"python       {platform.python_version()} ({platform.machine()})")
    print(f"numpy        {numpy.__version__}")
    print(f"gmpy2        {gmpy2.version()} ({gmpy2.mp_version()})")
    print(f"kernel       {get_kernel().name}")
    print(f"workers      {workers()}")
    print(f"avx512-ifma  {'yes' if 'avx512ifma' in flags else 'no'} (used by the native kernel, not built yet)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shaper", description="privacy-preserving ML between organisations")
    parser.add_argument("--version", action="version", version=f"shaper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="additive-HE tour: encrypted sparse mat-vec, packing, checked")
    demo.add_argument("--bits", type=int, default=2048, help="key size (default 2048)")
    demo.add_argument("--scheme", choices=["paillier", "ou"], default="paillier")
    demo.add_argument("--rows", type=int, default=2000, help="rows of A's sparse matrix")
    demo.add_argument("--cols", type=int, default=300, help="columns (length of B's vector)")
    demo.add_argument("--density", type=float, default=0.01)
    demo.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    demo.set_defaults(func=_cmd_demo)

    keygen = sub.add_parser("keygen", help="generate a key pair")
    keygen.add_argument("--scheme", choices=["paillier", "ou"], default="paillier")
    keygen.add_argument("--bits", type=int, default=2048)
    keygen.add_argument("--out", required=True, help="file prefix: writes PREFIX.pub.* and PREFIX.key.*")
    keygen.add_argument("--format", choices=["binary", "json"], default="binary")
    keygen.set_defaults(func=_cmd_keygen)

    certs = sub.add_parser("certs", help="create a CA and TLS certificates for the parties of a job")
    certs.add_argument("--parties", nargs="+", required=True, metavar="NAME", help="party names, in order")
    certs.add_argument("--out", required=True, help="directory for ca.pem, NAME.pem, NAME.key")
    certs.add_argument("--hosts", nargs="*", metavar="NAME=HOST", help="hosts to record (default 127.0.0.1)")
    certs.add_argument("--days", type=int, default=3650, help="validity (default ten years)")
    certs.add_argument("--write-parties", metavar="FILE", help="also write a parties file (TOML)")
    certs.add_argument("--base-port", type=int, default=7100, help="first port in the parties file")
    certs.add_argument("--session-id", default="shaper-job", help="session id in the parties file")
    certs.add_argument("--force", action="store_true", help="overwrite existing files")
    certs.set_defaults(func=_cmd_certs)

    info = sub.add_parser("info", help="version, kernel and CPU features")
    info.set_defaults(func=_cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
