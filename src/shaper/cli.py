"""The ``shaper`` command line.

    shaper demo      a tour of the additive-HE engine (sparse X @ Enc(w), packing), checked
    shaper keygen    write a Paillier/OU key pair (private key mode 0600)
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
