"""The ``shaper`` command line.

    shaper demo      two parties train a logistic regression on split data (the flagship job)
    shaper demo-he   a tour of the additive-HE engine (sparse X @ Enc(w), packing), checked
    shaper lr train  one party of a vertical logistic regression on real hosts
    shaper keygen    write a Paillier/OU key pair (private key mode 0600)
    shaper certs     a CA and per-party TLS certificates (+ a parties file) for a multi-host job
    shaper info      version, kernel, worker count, CPU features
    shaper circuit run FILE --local 3 --inputs HEX...   a Bristol Fashion circuit in 3PC
    shaper bench aes|ring   three-party replicated sharing throughput (AES-128, Z_2^64 products)
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

from . import __version__


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demos import lr

    summary = lr.run(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.learning_rate,
                     key_bits=args.key_bits, scheme=args.scheme, layout=args.layout, json_path=args.json,
                     report_path=args.report, events_path=args.events)
    return 0 if abs(summary["auc"] - summary["sklearn_auc"]) <= 0.01 else 1


def _cmd_demo_he(args: argparse.Namespace) -> int:
    from .demos import he

    he.run(bits=args.bits, scheme=args.scheme, rows=args.rows, cols=args.cols,
           density=args.density, json_path=args.json)
    return 0


def _cmd_lr_train(args: argparse.Namespace) -> int:
    import numpy as np

    from .ml import VerticalLogisticRegression
    from .ml.data import check_aligned, read_table
    from .ml.report import jsonl_writer
    from .net import Session

    if args.role == "guest" and not args.label_column:
        raise SystemExit("the guest holds the labels: pass --label-column")
    if args.role == "host" and args.label_column:
        raise SystemExit("the host has no labels: drop --label-column")
    table = read_table(args.data, id_column=args.id_column, label_column=args.label_column)
    params = {"epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": args.learning_rate,
              "key_bits": args.key_bits, "scheme": args.scheme, "layout": args.layout,
              "checkpoint_dir": args.checkpoint_dir, "resume": args.resume}
    progress = jsonl_writer(args.events) if args.events else None
    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        check_aligned(session, table.ids)
        model = VerticalLogisticRegression(**params).fit(session, table.X, table.y, progress=progress)
        out = {"coef": model.coef_}
        if model.intercept_ is not None:
            out["intercept"] = np.array([model.intercept_])
        np.savez(args.out, **out)
        print(f"{args.me} ({args.role}): trained {len(model.history_)} epochs in {model.stats_['seconds']:.1f} s, "
              f"{model.stats_['bytes_sent'] / 1e6:.1f} MB sent; own weights written to {args.out}")
        print(session.stats.table(f"traffic of {args.me}"))
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

    from .kernels import get_kernel, native, workers

    flags = _cpu_flags()
    print(f"shaper       {__version__}")
    print(f"python       {platform.python_version()} ({platform.machine()})")
    print(f"numpy        {numpy.__version__}")
    print(f"gmpy2        {gmpy2.version()} ({gmpy2.mp_version()})")
    print(f"kernel       {get_kernel().name}")
    print(f"workers      {workers()}")
    print(f"avx512-ifma  {'yes' if 'avx512ifma' in flags else 'no'}")
    built = "built" if native.available() else "not built (install with a Rust toolchain)"
    print(f"native       {built}; SHAPER_NATIVE={native.mode()}")
    return 0


def _cmd_circuit_run(args: argparse.Namespace) -> int:
    from .demos import circuits

    try:
        outs = circuits.run_circuit(args.file, args.inputs, plain=args.plain, parties=args.local)
    except (OSError, ValueError) as exc:  # missing file, malformed circuit, bad inputs
        print(f"shaper circuit run: {exc}", file=sys.stderr)
        return 2
    for value in outs:
        print(value)
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .demos import circuits

    if args.what == "aes":
        circuits.bench_aes(instances=args.blocks or circuits.AES_INSTANCES, batches=args.batches,
                           json_path=args.json)
    else:
        circuits.bench_ring(n=args.count, batches=args.batches, json_path=args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shaper", description="privacy-preserving ML between organisations")
    parser.add_argument("--version", action="version", version=f"shaper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="two parties train a logistic regression on split data (TLS, Paillier)")
    demo.add_argument("--epochs", type=int, default=10)
    demo.add_argument("--batch-size", type=int, default=64)
    demo.add_argument("--learning-rate", type=float, default=0.1)
    demo.add_argument("--key-bits", type=int, default=2048)
    demo.add_argument("--scheme", choices=["paillier", "ou"], default="paillier")
    demo.add_argument("--layout", choices=["encrypted", "caesar"], default="encrypted")
    demo.add_argument("--report", default="shaper-demo-report.html", metavar="PATH", help="HTML report ('' to skip)")
    demo.add_argument("--events", metavar="PATH", help="also write progress events as JSON lines")
    demo.add_argument("--json", metavar="PATH", help="also write the final figures as JSON")
    demo.set_defaults(func=_cmd_demo)

    he = sub.add_parser("demo-he", help="additive-HE tour: encrypted sparse mat-vec, packing, checked")
    he.add_argument("--bits", type=int, default=2048, help="key size (default 2048)")
    he.add_argument("--scheme", choices=["paillier", "ou"], default="paillier")
    he.add_argument("--rows", type=int, default=2000, help="rows of A's sparse matrix")
    he.add_argument("--cols", type=int, default=300, help="columns (length of B's vector)")
    he.add_argument("--density", type=float, default=0.01)
    he.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    he.set_defaults(func=_cmd_demo_he)

    lr = sub.add_parser("lr", help="vertical logistic regression on real hosts")
    lr_sub = lr.add_subparsers(dest="lr_command", required=True)
    train = lr_sub.add_parser("train", help="run this party's side of a training job")
    train.add_argument("--role", choices=["guest", "host"], required=True, help="guest = the party with labels")
    train.add_argument("--parties", required=True, help="parties file (TOML), see docs/net.md")
    train.add_argument("--me", required=True, help="this party's name in the parties file")
    train.add_argument("--key", help="TLS private key (overrides the parties file)")
    train.add_argument("--data", required=True, help="CSV, Parquet or LibSVM file with an id column")
    train.add_argument("--id-column", default="id")
    train.add_argument("--label-column", help="label column (guest only)")
    train.add_argument("--epochs", type=int, default=10)
    train.add_argument("--batch-size", type=int, default=64)
    train.add_argument("--learning-rate", type=float, default=0.1)
    train.add_argument("--key-bits", type=int, default=2048)
    train.add_argument("--scheme", choices=["paillier", "ou"], default="paillier")
    train.add_argument("--layout", choices=["encrypted", "caesar"], default="encrypted")
    train.add_argument("--checkpoint-dir", help="write a checkpoint after every epoch here")
    train.add_argument("--resume", action="store_true", help="continue from the newest common checkpoint")
    train.add_argument("--events", metavar="PATH", help="progress events as JSON lines")
    train.add_argument("--out", default="weights.npz", help="where to write this party's own weights")
    train.set_defaults(func=_cmd_lr_train)

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

    circuit = sub.add_parser("circuit", help="Bristol Fashion circuits in three-party replicated sharing")
    circuit_sub = circuit.add_subparsers(dest="circuit_command", required=True)
    crun = circuit_sub.add_parser("run", help="evaluate a Bristol Fashion file on hex inputs")
    crun.add_argument("file", help="Bristol Fashion circuit (.txt)")
    crun.add_argument("--inputs", nargs="+", required=True, metavar="HEX",
                      help="one big-endian hex value per circuit input (wires LSB first); AES: key, plaintext")
    crun.add_argument("--local", type=int, default=3, metavar="N", help="local parties (3: replicated sharing)")
    crun.add_argument("--plain", action="store_true", help="evaluate in the clear instead")
    crun.set_defaults(func=_cmd_circuit_run)

    bench = sub.add_parser("bench", help="3PC throughput: AES-128 blocks/s or Z_2^64 products/s")
    bench.add_argument("what", choices=["aes", "ring"])
    bench.add_argument("--blocks", type=int, help="AES blocks per batch (default 524288)")
    bench.add_argument("--count", type=int, default=4_000_000, help="ring products per batch")
    bench.add_argument("--batches", type=int, default=3, help="timed batches (best reported)")
    bench.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    bench.set_defaults(func=_cmd_bench)

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
