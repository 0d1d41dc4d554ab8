"""``shaper fhe``: threshold CKKS with keys generated inside the n-party MPC (docs/threshold-ckks.md).

    shaper fhe keygen --local 3 --out keys/              three local parties, keys/party0..2
    shaper fhe keygen --parties p.toml --me bank --out keys/bank --rotations 1,2,4
    shaper fhe encrypt --keys keys/party0 --input x.csv --out x.ct
    shaper fhe decrypt --parties p.toml --me bank --keys keys/bank --ciphertext y.ct --to bank
    shaper fhe decrypt --local 3 --keys keys/ --ciphertext y.ct --out y.csv
    shaper fhe demo --local 3                            (or --parties p.toml --me bank on each host)

The options are parsed here; the jobs are :mod:`shaper.jobs.fhe`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .common import HelpFormatter, command, deprecated_alias, local_count, out_option, party_options, where

CNN = "cnn"
DEMO_PARTIES = 3


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
    party_options(kg)
    out_option(kg, "key directory to create (with --local N: DIR/party0 .. DIR/party<N-1>)", metavar="DIR",
               required=True)
    kg.add_argument("--rotations", default="", metavar="R,...",
                    help=f"slot rotation steps to make keys for, or '{CNN}' for the CNN plan's 28 steps")
    kg.add_argument("--conjugation", action="store_true", help="also make the conjugation key")
    _method_option(kg)
    _params_options(kg)

    enc = command(sub, "encrypt", run_encrypt, "encrypt a vector under a joint public key (public material only)")
    enc.add_argument("--keys", required=True, metavar="DIR", help="a key directory (the share is not read)")
    enc.add_argument("--input", required=True, metavar="FILE", help=".npy, or .csv/.txt with one number per line")
    out_option(enc, "ciphertext file to write", metavar="FILE", required=True)

    dec = command(sub, "decrypt", run_decrypt, "decrypt a ciphertext jointly",
                  "Every party runs this with its own key directory and its copy of the ciphertext (or --local N "
                  "--keys DIR runs every party here). The parties first exchange the ciphertext's digest: if one "
                  "holds another ciphertext, or refuses (--digest given and not matching), nobody learns "
                  "anything. Smudging noise is sampled jointly in the MPC.")
    party_options(dec)
    dec.add_argument("--keys", metavar="DIR",
                     help="this party's key directory (with --local N: the directory holding party0 ..)")
    deprecated_alias(dec, "--local-keys", "--keys", metavar="DIR")
    dec.add_argument("--ciphertext", required=True, metavar="FILE", help="this party's copy of the ciphertext")
    dec.add_argument("--to", metavar="NAME", help="the only party to learn the result (default: every party)")
    dec.add_argument("--digest", metavar="HEX", help="consent only to a ciphertext whose SHA-256 starts with HEX")
    dec.add_argument("--smudge-bits", type=int, default=None,
                     help="width of the joint smudging noise in bits (default: the library's, 25)")
    out_option(dec, "write the real parts of the slots (.npy or .csv)", metavar="FILE")

    demo = command(sub, "demo", run_demo, "n parties: joint keys, one encrypts, one computes, all decrypt",
                   "Runs every party here (--local N, the default with 3 parties) or one party on each host "
                   "(--parties FILE --me NAME): joint key generation, party 0 encrypts x, the last party "
                   "computes rot(x*x, 1) with the opened keys alone, all decrypt jointly and check the result.")
    party_options(demo, local_help=f"run N parties here as processes over loopback TLS (2..16; {DEMO_PARTIES} "
                                   "when no parties file is given)")
    _method_option(demo)
    _params_options(demo)


def _method_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=("exact", "local"), default="exact",
                   help="exact: every error sampled in MPC (GMPFHE); local: each party adds its own error")


def _params_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", default=CNN, metavar="SPEC",
                   help=f"'{CNN}' (N = 2^14, 60 + 6 x 53-bit chain, 60-bit special prime, scale 2^53), or "
                        "N:q_bits,...:p_bits:scale_bits, e.g. 8192:60,40,40:60:40")
    p.add_argument("--insecure", action="store_true",
                   help="allow parameters below 128-bit security (tests and demos only)")


def _chain(spec: str, insecure: bool) -> tuple:
    """The (N, q bits, p bits, scale bits) of --params, checked here before any party starts."""
    from ..jobs.fhe import parameters
    from ..ml.cnn.params import CNN_CHAIN

    if spec == CNN:
        chain = CNN_CHAIN
    else:
        try:
            n, q, p, scale = spec.split(":")
            chain = int(n), tuple(int(b) for b in q.split(",")), int(p), int(scale)
        except ValueError:
            raise ConfigError(f"--params {spec!r}: expected '{CNN}' or N:q_bits,...:p_bits:scale_bits") from None
    parameters(chain, insecure)
    return chain


def _rotations(text: str) -> tuple[int, ...]:
    from ..ml.cnn.params import CNN_ROTATIONS

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
    from ..jobs.fhe import check_new_key_dirs, keygen_job, keygen_local

    local = where(args)
    chain, rotations = _chain(args.params, args.insecure), _rotations(args.rotations)
    out = Path(args.out)
    options = {"rotations": rotations, "conjugation": args.conjugation, "method": args.method, "insecure": args.insecure}
    if local is not None:
        check_new_key_dirs(out, local)
        print(f"{local} parties as local processes over TLS: joint key generation ({args.method}), "
              f"{len(rotations)} rotation keys", flush=True)
        results = keygen_local(local, out, chain, options, _progress)
        _print_phases(results[0])
        print(f"keys written to {out}/party0 .. party{local - 1} (each with its own share, mode 0600)")
        return 0
    if out.exists():
        raise ConfigError(f"{out} exists already; key directories are never overwritten")
    from ..net import Session

    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        report = keygen_job(session, chain, out=out, progress=_progress, **options)
        _print_phases(report)
        print(session.stats.table(f"traffic of {args.me}"))
    print(f"keys written to {out} (secret-key share mode 0600)")
    return 0


def run_encrypt(args: argparse.Namespace) -> int:
    from ..jobs.fhe import encrypt_job

    report = encrypt_job(args.keys, args.input, args.out)
    print(f"{report['values']} values encrypted to {report['out']} (SHA-256 {report['digest']})")
    return 0


def _write_values(path: str | None, values: np.ndarray) -> None:
    real = np.ascontiguousarray(values.real)
    if path is None:
        shown = ", ".join(f"{v:.6g}" for v in real[:8])
        print(f"slots 0..7: {shown}{', ...' if real.size > 8 else ''}")
    elif path.endswith(".npy"):
        np.save(path, real)
    else:
        np.savetxt(path, real, delimiter=",")


def _local_from_keys(args: argparse.Namespace) -> int | None:
    """``--local N``, or, with neither --local nor a parties file, the count of party directories
    under ``--keys`` (what the retired ``--local-keys DIR`` meant)."""
    from ..jobs.fhe import local_key_dirs

    local = local_count(args)
    if local is None and not args.parties and not args.me and args.keys and (Path(args.keys) / "party0").is_dir():
        args.local = len(local_key_dirs(args.keys))
    return where(args)


def run_decrypt(args: argparse.Namespace) -> int:
    from ..jobs.fhe import decrypt_job, decrypt_local
    from ..protocols.threshold_ckks import SMUDGE_BITS

    smudge = SMUDGE_BITS if args.smudge_bits is None else args.smudge_bits
    local = _local_from_keys(args)
    if not args.keys:
        raise ConfigError("pass --keys DIR (this party's key directory; with --local N the one holding party0 ..)")
    if local is not None:
        results = decrypt_local(args.keys, args.ciphertext, parties=local, to=args.to, smudge_bits=smudge,
                                digest=args.digest)
        report = next(r for r in results if r["values"] is not None)
    else:
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
    from ..jobs.fhe import demo_job

    local = local_count(args)
    if local is None and not args.parties and not args.me:
        local = args.local = DEMO_PARTIES
    local = where(args)
    chain = _chain(args.params, args.insecure)
    if local is not None:
        from ..net import launch

        print(f"{local} parties as local processes over TLS generate one CKKS key in MPC ({args.method}); "
              f"party0 encrypts x, party{local - 1} computes rot(x*x, 1), all decrypt jointly", flush=True)
        results = launch(local, demo_job, chain, (1,), args.method, args.insecure, True, timeout=None)
        r, busiest, where_ = results[0], max(x["bytes_sent"] for x in results), "on every party"
    else:
        from ..net import Session

        with Session.from_config(args.parties, me=args.me, key=args.key) as session:
            print(f"{session.n} parties generate one CKKS key in MPC ({args.method}); {session.parties[0]} "
                  f"encrypts x, {session.parties[-1]} computes rot(x*x, 1), all decrypt jointly", flush=True)
            r = demo_job(session, chain, (1,), args.method, args.insecure, True)
            print(session.stats.table(f"traffic of {args.me}"))
        busiest, where_ = r["bytes_sent"], f"at {args.me}"
    print(r["params"])
    print("key sizes: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in r["sizes"].items())
          + " (the same for any number of parties)")
    sent = "by the busiest party" if local is not None else f"by {args.me}"
    print(f"key generation {r['keygen_s']:.1f} s, {busiest / 1e6:.0f} MB sent {sent} in all; compute "
          f"{r['compute_s'] * 1e3:.0f} ms; joint decryption {r['decrypt_s'] * 1e3:.0f} ms")
    print(f"decrypted {', '.join(f'{v:.6f}' for v in r['sample'])} ... expected "
          f"{', '.join(f'{v:.6f}' for v in r['expected'])}; largest error {r['error']:.2e} "
          f"over all slots ({-np.log2(r['error']):.1f} bits; the smudging predicts {r['predicted_bits']:.1f}), {where_}")
    return 0
