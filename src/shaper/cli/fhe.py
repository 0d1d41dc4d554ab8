"""``shaper fhe``: threshold CKKS with keys generated inside the n-party MPC (docs/threshold-ckks.md),
and AES-128 under BGV with one key or a joint key made in MPC (docs/bgv.md).

    shaper fhe keygen --local 3 --out keys/              three local parties, keys/party0..2
    shaper fhe keygen --parties p.toml --me bank --out keys/bank --rotations 1,2,4
    shaper fhe encrypt --local 3 --keys keys/ --input x.csv --bound 4 --out x.ct    (joint; party0's values)
    shaper fhe eval --local 3 --keys keys/ --circuit square,rotate:1 --ciphertext x.ct --out y.ct
    shaper fhe decrypt --parties p.toml --me bank --keys keys/bank --ciphertext y.ct --to bank
    shaper fhe decrypt --local 3 --keys keys/ --ciphertext y.ct --out y.csv
    shaper fhe demo --local 3                            (or --parties p.toml --me bank on each host)
    shaper fhe aes --single-key                          (one BGV key; 120 AES blocks)
    shaper fhe aes --local 2                             (threshold GHS: key in MPC, decryption to bits)
    shaper fhe aes --parties p.toml --me bank --key-owner bank --data-owner shop --to shop --keys keys/bank

The options are parsed here; the jobs are :mod:`shaper.jobs.fhe`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..crypto.ckks.multiparty import DEFAULT_BUDGET, FLOOD_MODES, SECURITY_LAMBDA, WORK_BITS
from ..errors import ConfigError
from .common import (
    command,
    deprecated_alias,
    group,
    json_option,
    local_count,
    local_from_keys,
    out_option,
    party_options,
    file_security,
    security_of,
    security_option,
    where,
)

CNN = "cnn"
DEMO_PARTIES = 3


def add_parser(subparsers: Any) -> None:
    sub = group(subparsers, "fhe", "threshold CKKS and BGV: joint key generation in MPC, joint decryption",
                "n parties generate one CKKS key inside the MPC (the secret key stays "
                "shared), anyone computes with the opened keys, the parties decrypt "
                "jointly (docs/threshold-ckks.md); 'aes' runs AES-128 under BGV with one "
                "key or a joint one (docs/bgv.md).")

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
    kg.add_argument("--budget", type=int, default=None, metavar="Q",
                    help=f"decryptions (ciphertexts) the key serves before its parties refuse (default {DEFAULT_BUDGET}; "
                         "128 with --rotations cnn, one CNN job); the flood grows with sqrt(Q)")
    _method_option(kg)
    security_option(kg, "passive")
    kg.set_defaults(active_engine=True)
    _params_options(kg)

    enc = command(sub, "encrypt", run_encrypt, "encrypt a vector jointly (its error chosen by no party)",
                  "Every party runs this (or --local N runs every party here, party0 bringing the values). The "
                  "party with --input brings the vector; a seed no party chose gives the ciphertext's c1, and each "
                  "party adds its own error, so no party can choose the ciphertext's noise. Every party records it "
                  "in its key directory's ledger: only such ciphertexts, and what every party computes from them "
                  "with 'shaper fhe eval', can be decrypted.")
    party_options(enc)
    enc.add_argument("--keys", required=True, metavar="DIR",
                     help="this party's key directory (with --local N: the directory holding party0 ..)")
    enc.add_argument("--input", metavar="FILE", help="the values (.npy, or .csv/.txt with one number per line); "
                                                     "only the party that brings them")
    enc.add_argument("--bound", type=float, default=1.0, metavar="B",
                     help="the largest |value| (default 1; every party the same): the decryption's flood is sized by it")
    out_option(enc, "ciphertext file to write", metavar="FILE", required=True)
    _key_dir_insecure_option(enc)
    enc.set_defaults(active_engine=True)  # the engine follows the key

    ev = command(sub, "eval", run_eval, "evaluate an agreed circuit on accounted ciphertexts (every party)",
                 "Every party runs the same circuit itself on its own copies of the inputs (no network): the "
                 "outputs are byte-identical, and each party records them, with their worst-case error, in its "
                 "ledger. Circuits: 'identity', or operations in order separated by commas: square, rotate:R, "
                 "conjugate (e.g. 'square,rotate:1').")
    ev.add_argument("--local", type=int, metavar="N", help="evaluate for every party directory party0 .. under --keys")
    ev.add_argument("--keys", required=True, metavar="DIR", help="this party's key directory (with --local N: their root)")
    ev.add_argument("--circuit", required=True, metavar="SPEC", help="e.g. square,rotate:1")
    ev.add_argument("--ciphertext", required=True, action="append", metavar="FILE",
                    help="an input ciphertext (a joint input or an earlier output); repeat for several")
    out_option(ev, "output ciphertext file", metavar="FILE", required=True)
    _key_dir_insecure_option(ev)

    dec = command(sub, "decrypt", run_decrypt, "decrypt a ciphertext jointly",
                  "Every party runs this with its own key directory and its copy of the ciphertext (or --local N "
                  "--keys DIR runs every party here). A party consents only to a ciphertext its ledger accounts for "
                  "(a joint input, or an output of 'shaper fhe eval' it ran itself), while the key's budget lasts; "
                  "if one refuses, holds another ciphertext or asks for another flood, nobody learns anything. Each "
                  "party floods its share with Gaussian noise sized by the ciphertext's worst-case error.")
    party_options(dec)
    dec.add_argument("--keys", metavar="DIR",
                     help="this party's key directory (with --local N: the directory holding party0 ..)")
    deprecated_alias(dec, "--local-keys", "--keys", metavar="DIR")
    dec.add_argument("--ciphertext", required=True, metavar="FILE", help="this party's copy of the ciphertext")
    dec.add_argument("--to", metavar="NAME", help="the only party to learn the result (default: every party)")
    dec.add_argument("--digest", metavar="HEX", help="consent only to the ciphertext with this SHA-256 (all 64 hex digits)")
    dec.add_argument("--flood", choices=FLOOD_MODES, default=FLOOD_MODES[0],
                     help="key-recovery (default): the key is safe with probability 1 - 2^-lambda over the budget; "
                          "statistical: the view is 2^-lambda close to the results alone (about lambda/2 bits less "
                          "precision)")
    dec.add_argument("--security", type=int, default=SECURITY_LAMBDA, metavar="LAMBDA",
                     help=f"statistical security parameter lambda, at least 40 (default {SECURITY_LAMBDA})")
    dec.add_argument("--work", type=int, default=WORK_BITS, metavar="BITS",
                     help=f"key-recovery: the attacker's work the argument allows for, 2^BITS operations (default "
                          f"{WORK_BITS}; every party the same)")
    out_option(dec, "write the real parts of the slots (.npy or .csv)", metavar="FILE")
    _key_dir_insecure_option(dec)
    dec.set_defaults(active_engine=True)  # the engine follows the key

    demo = command(sub, "demo", run_demo, "n parties: joint keys, one encrypts, one computes, all decrypt",
                   "Runs every party here (--local N, the default with 3 parties) or one party on each host "
                   "(--parties FILE --me NAME): joint key generation, party 0 encrypts x, the last party "
                   "computes rot(x*x, 1) with the opened keys alone, all decrypt jointly and check the result.")
    party_options(demo, local_help=f"run N parties here as processes over loopback TLS (2..16; {DEMO_PARTIES} "
                                   "when no parties file is given)")
    _method_option(demo)
    security_option(demo, "passive")
    demo.set_defaults(active_engine=True)
    _params_options(demo)


    aes = command(sub, "aes", run_aes, "AES-128 evaluated homomorphically under BGV (GHS's packed style)",
                  "Generates a BGV key over Z[X]/Phi_m (odd m; the slots GF(2^d) hold one byte each), encrypts the "
                  "blocks and the expanded AES-128 key, evaluates the 10 rounds homomorphically (SubBytes by "
                  "inversion and Frobenius maps, ShiftRows/MixColumns by automorphisms and constant masks), "
                  "decrypts and checks the blocks against a clear AES. Prints the time (and, with parties, the "
                  "bytes) of each phase. --single-key: one process holds the key. --local N / --parties FILE "
                  "--me NAME: threshold GHS: the parties generate the key inside the MPC (the secret stays "
                  "shared), the key owner's round keys and the data owner's blocks are encrypted jointly, every "
                  "party evaluates AES itself, and only the recipient learns the blocks, by a joint decryption "
                  "to bits. Without --input the first block is FIPS-197 C.1's plaintext under its key "
                  "(docs/bgv.md).")
    aes.add_argument("--single-key", action="store_true", help="one process holds the key")
    party_options(aes)
    aes.add_argument("--key-owner", metavar="NAME", help="the party whose AES key is used (default: the first)")
    aes.add_argument("--data-owner", metavar="NAME", help="the party whose blocks are encrypted (default: the last)")
    aes.add_argument("--to", metavar="NAME", help="the party that learns the AES output (default: the data owner)")
    aes.add_argument("--keys", metavar="DIR", help="this party's BGV key directory (with --local N: DIR/party0 ..): "
                                                 "loaded when it exists, written after key generation when not")
    aes.add_argument("--budget", type=int, default=DEFAULT_BUDGET, metavar="Q",
                     help=f"decryptions a new joint key serves before its parties refuse (default {DEFAULT_BUDGET})")
    aes.add_argument("--blocks", type=int, metavar="N", help="blocks to encrypt (default: as many as the slots hold, "
                                                           "120 at m = 53261)")
    aes.add_argument("--params", default="aes-53261", metavar="NAME",
                     help="parameter set: aes-53261 (default: dense secret, 141-bit estimate, 120 blocks), "
                          "ghs-53261 (the paper's weight-64 set, not rated; with --insecure), test-4369 / test-257 "
                          "(small test rings; with --insecure)")
    aes.add_argument("--aes-key", metavar="HEX", help="the AES-128 key, 32 hex digits (default: FIPS-197's, or random "
                                                  "with --input); with parties, the key owner's")
    aes.add_argument("--input", metavar="FILE", help="the plaintext blocks: a binary file of 16-byte blocks; with "
                                                   "parties, the data owner's")
    out_option(aes, "write the decrypted blocks (binary; with parties, at the recipient)", metavar="FILE")
    aes.add_argument("--decrypt", choices=("bits", "flood"), default="bits",
                     help="the joint decryption: bits (default: the phase converted to bits inside the MPC, nothing "
                          "else opened) or flood (each party's range-checked Gaussian flood, the flooded phase "
                          "opened to the recipient: far cheaper on the active engine; docs/bgv.md)")
    aes.add_argument("--insecure", action="store_true", help="allow a test or comparison parameter set")
    security_option(aes, "passive")
    aes.set_defaults(active_engine=True)
    json_option(aes)


def _key_dir_insecure_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--insecure", action="store_true",
                   help="accept a key directory made with test parameters below 128-bit security (fhe keygen "
                        "--insecure; tests and demos only)")


def _method_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=("exact", "local"), default=None,
                   help="exact: every error sampled in MPC (GMPFHE; the default on the passive engine); local: each "
                        "party adds its own error (with --security active, range-checked: the default there, about "
                        "30 times faster than exact)")


def _resolve_method(args: argparse.Namespace) -> None:
    """--method's default follows the engine: exact on the passive engine, local on the active one."""
    if args.method is None:
        args.method = "local" if args.engine_security == "active" else "exact"


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
    args.engine_security = security_of(args, "passive")
    _resolve_method(args)
    return fhe.keygen_command(args, local, _chain(args.params, args.insecure), _rotations(args.rotations))


def run_encrypt(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    file_security(args)
    return fhe.encrypt_command(args, local_from_keys(args))


def run_eval(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    return fhe.eval_command(args, local_count(args))


def run_decrypt(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    file_security(args)
    return fhe.decrypt_command(args, local_from_keys(args))


def run_demo(args: argparse.Namespace) -> int:
    from ..jobs import fhe

    if local_count(args) is None and not args.parties and not args.me:
        args.local = DEMO_PARTIES
    local = where(args)
    args.engine_security = security_of(args, "passive")
    _resolve_method(args)
    return fhe.demo_command(args, local, _chain(args.params, args.insecure))


def run_aes(args: argparse.Namespace) -> int:
    from ..jobs import bgv

    if args.single_key:
        if local_count(args) is not None or args.parties or args.me:
            raise ConfigError("--single-key runs one process: leave out --local / --parties / --me")
        if args.security == "active":
            raise ConfigError("--single-key runs no MPC: --security active needs parties (--local N or --parties)")
        args.engine_security = "passive"
        return bgv.aes_command(args, None)
    local = where(args)  # --local or --parties, not both: before the parties file is read
    args.engine_security = security_of(args, "passive")
    return bgv.aes_command(args, local)
