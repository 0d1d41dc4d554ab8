"""``shaper fhe``: threshold CKKS with keys generated inside the n-party MPC (docs/threshold-ckks.md).

    shaper fhe keygen --local 3 --out keys/              three local parties, keys/party0..2
    shaper fhe keygen --parties p.toml --me bank --out keys/bank --rotations 1,2,4
    shaper fhe encrypt --keys keys/party0 --input x.csv --out x.ct
    shaper fhe decrypt --parties p.toml --me bank --keys keys/bank --ciphertext y.ct --to bank
    shaper fhe decrypt --local-keys keys/ --ciphertext y.ct --out y.csv
    shaper fhe demo --parties 3
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .common import HelpFormatter, command

CNN = "cnn"


def add_parser(subparsers: Any) -> None:
    fhe = subparsers.add_parser("fhe", help="threshold CKKS: joint key generation in MPC, joint decryption",
                                formatter_class=HelpFormatter,
                                description="n parties generate one CKKS key inside the MPC (the secret key stays "
                                            "shared), anyone computes with the opened keys, the parties decrypt "
                                            "jointly (docs/threshold-ckks.md).")
    fhe.set_defaults(prog=fhe.prog)
    sub = fhe.add_subparsers(dest="fhe_command", required=True, metavar="COMMAND")

    kg = command(sub, "keygen", run_keygen, "generate a joint CKKS key in MPC",
                 "Every party runs this (or --local N runs N parties here). The secret key is sampled "
                 "shared, never revealed; the public, relinearisation and rotation keys are opened and "
                 "checked by a joint test decryption. Each party's directory gets the public keys and its "
                 "own secret-key share (mode 0600), written atomically.")
    _party_options(kg)
    kg.add_argument("--out", required=True, metavar="DIR",
                    help="key directory to create (with --local N: DIR/party0 .. DIR/party<N-1>)")
    kg.add_argument("--rotations", default="", metavar="R,...",
                    help=f"slot rotation steps to make keys for, or '{CNN}' for the CNN plan's 28 steps")
    kg.add_argument("--conjugation", action="store_true", help="also make the conjugation key")
    kg.add_argument("--method", choices=("exact", "local"), default="exact",
                    help="exact: every error sampled in MPC (GMPFHE); local: each party adds its own error")
    _params_options(kg)

    enc = command(sub, "encrypt", run_encrypt, "encrypt a vector under a joint public key (public material only)")
    enc.add_argument("--keys", required=True, metavar="DIR", help="a key directory (the share is not read)")
    enc.add_argument("--input", required=True, metavar="FILE", help=".npy, or .csv/.txt with one number per line")
    enc.add_argument("--out", required=True, metavar="FILE", help="ciphertext file to write")

    dec = command(sub, "decrypt", run_decrypt, "decrypt a ciphertext jointly",
                  "Every party runs this with its own key directory and its copy of the ciphertext. The parties "
                  "first exchange the ciphertext's digest: if one holds another ciphertext, or refuses "
                  "(--digest given and not matching), nobody learns anything. Smudging noise is sampled "
                  "jointly in the MPC.")
    _party_options(dec, local=False)
    dec.add_argument("--local-keys", metavar="DIR", help="run every party here, from DIR/party0 .. (keygen --local)")
    dec.add_argument("--keys", metavar="DIR", help="this party's key directory")
    dec.add_argument("--ciphertext", required=True, metavar="FILE", help="this party's copy of the ciphertext")
    dec.add_argument("--to", metavar="NAME", help="the only party to learn the result (default: every party)")
    dec.add_argument("--digest", metavar="HEX", help="consent only to a ciphertext whose SHA-256 starts with HEX")
    dec.add_argument("--smudge-bits", type=int, default=None,
                     help="width of the joint smudging noise in bits (default: the library's, 25)")
    dec.add_argument("--out", metavar="FILE", help="write the real parts of the slots (.npy or .csv)")

    demo = command(sub, "demo", run_demo, "n local parties: joint keys, one encrypts, one computes, all decrypt")
    demo.add_argument("--parties", type=int, default=3, metavar="N", help="parties, as local processes (2..16)")
    demo.add_argument("--method", choices=("exact", "local"), default="exact",
                      help="exact: every error sampled in MPC (GMPFHE); local: each party adds its own error")
    _params_options(demo)


def _party_options(p: argparse.ArgumentParser, local: bool = True) -> None:
    if local:
        p.add_argument("--local", type=int, metavar="N", help="run N parties here as processes over loopback TLS")
    p.add_argument("--parties", metavar="FILE", help="parties file (TOML), see docs/net.md")
    p.add_argument("--me", metavar="NAME", help="this party's name in the parties file")
    p.add_argument("--key", metavar="FILE", help="TLS private key (overrides the parties file)")


def _params_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", default=CNN, metavar="SPEC",
                   help=f"'{CNN}' (N = 2^14, 60 + 6 x 53-bit chain, 60-bit special prime, scale 2^53), or "
                        "N:q_bits,...:p_bits:scale_bits, e.g. 8192:60,40,40:60:40")
    p.add_argument("--insecure", action="store_true",
                   help="allow parameters below 128-bit security (tests and demos only)")


def _chain(spec: str, insecure: bool) -> tuple:
    """The (N, q bits, p bits, scale bits) of --params, checked here before any party starts."""
    from ..crypto import ckks
    from ..protocols.threshold_ckks import CNN_CHAIN

    if spec == CNN:
        chain = CNN_CHAIN
    else:
        try:
            n, q, p, scale = spec.split(":")
            chain = int(n), tuple(int(b) for b in q.split(",")), int(p), int(scale)
        except ValueError:
            raise ConfigError(f"--params {spec!r}: expected '{CNN}' or N:q_bits,...:p_bits:scale_bits") from None
    ckks.Parameters.from_literal(chain[0], list(chain[1]), chain[2], chain[3], insecure=insecure)
    return chain


def _rotations(text: str) -> tuple[int, ...]:
    from ..protocols.threshold_ckks import CNN_ROTATIONS

    if text.strip() == CNN:
        return CNN_ROTATIONS
    try:
        return tuple(int(r) for r in text.split(",") if r.strip())
    except ValueError:
        raise ConfigError(f"--rotations {text!r}: expected comma-separated integers or '{CNN}'") from None


def _print_phases(report: dict) -> None:
    print(f"{'phase':<34s} {'seconds':>8s} {'MB sent':>10s}")
    for p in report["phases"]:
        print(f"{p['name']:<34s} {p['seconds']:8.2f} {p['bytes_sent'] / 1e6:10.1f}")
    print(f"{'total':<34s} {report['seconds']:8.2f} {report['bytes_sent'] / 1e6:10.1f}")
    print("key sizes: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in report["sizes"].items()))


def _progress(event: dict) -> None:
    if event["status"] == "start":
        print(f"  ... {event['phase']}", flush=True)
    else:
        print(f"  done {event['phase']}: {event['seconds']:.2f} s, {event['bytes'] / 1e6:.1f} MB sent", flush=True)


def run_keygen(args: argparse.Namespace) -> int:
    from ..protocols.threshold_ckks import keygen_job

    chain, rotations = _chain(args.params, args.insecure), _rotations(args.rotations)
    out = Path(args.out)
    options = {"rotations": rotations, "conjugation": args.conjugation, "method": args.method, "insecure": args.insecure}
    if args.local is not None:
        from ..net import launch

        if not 2 <= args.local <= 16:
            raise ConfigError(f"--local takes 2..16 parties, got {args.local}")
        dirs = [out / f"party{i}" for i in range(args.local)]
        if any(d.exists() for d in dirs):
            raise ConfigError(f"{out} already holds key directories; choose a new --out")
        print(f"{args.local} parties as local processes over TLS: joint key generation ({args.method}), "
              f"{len(rotations)} rotation keys", flush=True)
        results = launch(args.local, _per_party_keygen, str(out), chain, options, timeout=None)
        _print_phases(results[0])
        print(f"keys written to {out}/party0 .. party{args.local - 1} (each with its own share, mode 0600)")
        return 0
    if not args.parties or not args.me:
        raise ConfigError("pass --parties FILE and --me NAME (or --local N)")
    if out.exists():
        raise ConfigError(f"{out} exists already; key directories are never overwritten")
    from ..net import Session

    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        report = keygen_job(session, chain, out=out, progress=_progress, **options)
        _print_phases(report)
        print(session.stats.table(f"traffic of {args.me}"))
    print(f"keys written to {out} (secret-key share mode 0600)")
    return 0


def _per_party_keygen(session: Any, out: str, chain: tuple, options: dict) -> dict:
    """keygen_job into out/<party>, progress lines from party 0 only (module level: launch may spawn)."""
    from ..protocols.threshold_ckks import keygen_job

    return keygen_job(session, chain, out=str(Path(out) / session.name),
                      progress=_progress if session.index == 0 else None, **options)


def _read_vector(path: Path) -> np.ndarray:
    if not path.is_file():
        raise ConfigError(f"input file {path} does not exist")
    if path.suffix == ".npy":
        values = np.load(path, allow_pickle=False)
    else:
        values = np.loadtxt(path, delimiter=",", ndmin=1)
    values = np.asarray(values)
    if values.ndim != 1 or not np.issubdtype(values.dtype, np.number):
        raise ConfigError(f"{path}: expected one column of numbers, got shape {values.shape} ({values.dtype})")
    if not np.all(np.isfinite(values)):
        raise ConfigError(f"{path}: the input holds NaN or infinite values")
    return values


def run_encrypt(args: argparse.Namespace) -> int:
    from ..crypto import ckks
    from ..protocols.threshold_ckks import PublicKeys, ciphertext_digest

    keys = PublicKeys.load(args.keys)
    values = _read_vector(Path(args.input))
    if values.size > keys.params.slots:
        raise ConfigError(f"{args.input} has {values.size} values; a ciphertext holds {keys.params.slots} slots")
    ct = ckks.encrypt(keys.public, ckks.Encoder(keys.params).encode(values))
    ckks.save(ct, args.out)
    print(f"{values.size} values encrypted to {args.out} (SHA-256 {ciphertext_digest(ct)})")
    return 0


def _decrypt_local(session: Any, root: str, ciphertext: str, to: str | None, smudge: int, digest: str | None) -> dict:
    from ..protocols.threshold_ckks import decrypt_job

    return decrypt_job(session, str(Path(root) / session.name), ciphertext, to=to, smudge_bits=smudge, digest=digest)


def _write_values(path: str | None, values: np.ndarray) -> None:
    real = np.ascontiguousarray(values.real)
    if path is None:
        shown = ", ".join(f"{v:.6g}" for v in real[:8])
        print(f"slots 0..7: {shown}{', ...' if real.size > 8 else ''}")
    elif path.endswith(".npy"):
        np.save(path, real)
    else:
        np.savetxt(path, real, delimiter=",")


def run_decrypt(args: argparse.Namespace) -> int:
    from ..protocols.threshold_ckks import SMUDGE_BITS, decrypt_job

    smudge = SMUDGE_BITS if args.smudge_bits is None else args.smudge_bits
    if args.local_keys:
        from ..net import launch

        root = Path(args.local_keys)
        parties = sorted(p.name for p in root.glob("party*") if p.is_dir())
        if len(parties) < 2:
            raise ConfigError(f"{root} holds no party directories (party0, party1, ...) from 'shaper fhe keygen --local'")
        results = launch(len(parties), _decrypt_local, str(root), args.ciphertext, args.to, smudge, args.digest)
        report = next(r for r in results if r["values"] is not None)
    else:
        if not (args.parties and args.me and args.keys):
            raise ConfigError("pass --parties FILE --me NAME --keys DIR (or --local-keys DIR)")
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            report = decrypt_job(session, args.keys, args.ciphertext, to=args.to, smudge_bits=smudge, digest=args.digest)
        if report["values"] is None:
            print(f"ciphertext {report['digest']} decrypted jointly for {args.to}; nothing learnt here")
            return 0
    print(f"ciphertext {report['digest']} decrypted jointly in {report['seconds'] * 1e3:.0f} ms "
          f"(smudging 2^{smudge}: about {report['precision_bits']:.1f} bits of precision at scale "
          f"2^{np.log2(report['scale']):.1f})")
    _write_values(args.out, report["values"])
    if args.out:
        print(f"real parts of {report['values'].size} slots written to {args.out}")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from ..jobs.fhe import run_demo as demo_job
    from ..net import launch

    if not 2 <= args.parties <= 16:
        raise ConfigError(f"--parties takes 2..16, got {args.parties}")
    chain = _chain(args.params, args.insecure)
    print(f"{args.parties} parties as local processes over TLS generate one CKKS key in MPC ({args.method}); "
          f"party0 encrypts x, party{args.parties - 1} computes rot(x*x, 1), all decrypt jointly", flush=True)
    results = launch(args.parties, demo_job, chain, (1,), args.method, args.insecure, True, timeout=None)
    r = results[0]
    print(r["params"])
    print("key sizes: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in r["sizes"].items())
          + " (the same for any number of parties)")
    print(f"key generation {r['keygen_s']:.1f} s, {max(x['bytes_sent'] for x in results) / 1e6:.0f} MB sent "
          f"by the busiest party in all; compute {r['compute_s'] * 1e3:.0f} ms; joint decryption "
          f"{r['decrypt_s'] * 1e3:.0f} ms")
    print(f"decrypted {', '.join(f'{v:.6f}' for v in r['sample'])} ... expected "
          f"{', '.join(f'{v:.6f}' for v in r['expected'])}; largest error {r['error']:.2e} "
          f"over all slots ({-np.log2(r['error']):.1f} bits; the smudging predicts {r['predicted_bits']:.1f}), on every party")
    return 0
