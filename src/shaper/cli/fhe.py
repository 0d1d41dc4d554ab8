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
from typing import Any

from ..errors import ConfigError
from .common import (
    command,
    deprecated_alias,
    group,
    local_count,
    local_from_keys,
    out_option,
    party_options,
    where,
)

CNN = "cnn"
DEMO_PARTIES = 3


def add_parser(subparsers: Any) -> None:
    sub = group(subparsers, "fhe", "threshold CKKS: joint key generation in MPC, joint decryption",
                "n parties generate one CKKS key inside the MPC (the secret key stays "
                "shared), anyone computes with the opened keys, the parties decrypt "
                "jointly (docs/threshold-ckks.md).")

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




def run_keygen(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    local = where(args)
    return fhe.keygen_command(args, local, _chain(args.params, args.insecure), _rotations(args.rotations))


def run_encrypt(args: argparse.Namespace) -> int:
    from ..jobs.fhe import encrypt_job

    report = encrypt_job(args.keys, args.input, args.out)
    print(f"{report['values']} values encrypted to {report['out']} (SHA-256 {report['digest']})")
    return 0


def run_decrypt(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    return fhe.decrypt_command(args, local_from_keys(args))


def run_demo(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    if local_count(args) is None and not args.parties and not args.me:
        args.local = DEMO_PARTIES
    local = where(args)
    return fhe.demo_command(args, local, _chain(args.params, args.insecure))
