"""``shaper psi``: the options of one party's side of a private set intersection; the job is
:mod:`shaper.jobs.psi`."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from .common import (
    EXPECTED_ERRORS,
    abort_job,
    command,
    deprecated_alias,
    key_bits_option,
    out_option,
    party_options,
)


def add_parser(subparsers: Any) -> None:
    p = command(subparsers, "psi", run_psi, "private set intersection: align rows with a peer",
                "Find the ids this party shares with its peer without revealing the others, and write this party's "
                "rows of the intersection in an order both parties share (docs/psi.md). Start the other party on its "
                "own host with the same parties file and options. Progress goes to stderr.")
    party_options(p, local=False, required=True)
    p.add_argument("--data", metavar="FILE", help="CSV or Parquet file of this party's rows (required)")
    deprecated_alias(p, "--input", "--data")
    p.add_argument("--id-column", action="append", required=True, metavar="NAME",
                   help="column holding the ids; repeat for a key of several columns")
    p.add_argument("--protocol", choices=["auto", "okvs", "ecdh", "fnp"], default="auto",
                   help="auto picks the OT-based okvs where it applies (labelled PSI included), else ECDH on "
                        "Ristretto255 (--cardinality-only, --checkpoint-dir) or Freedman-Nissim-Pinkas with Paillier "
                        "or OU (a checkpointed labelled run); or name one (docs/psi.md)")
    key_bits_option(p, "key size of the FNP client")
    p.add_argument("--scheme", choices=["paillier", "ou"], default="paillier", help="FNP's homomorphic scheme")
    out_option(p, "where to write the aligned rows (.csv or .parquet)", metavar="FILE", old="--output")
    p.add_argument("--cardinality-only", action="store_true",
                   help="learn only the intersection's size (ecdh or fnp; auto runs ecdh)")
    p.add_argument("--to", default="both", metavar="NAME", help="'both', or the one party that learns the result")
    p.add_argument("--strip", action="store_true", help="ignore white space around ids")
    p.add_argument("--casefold", action="store_true", help="ignore letter case in ids")
    p.add_argument("--duplicates", choices=["error", "first"], default="error",
                   help="a repeated id: refuse the file, or use its first row")
    p.add_argument("--payload-bytes", type=int, default=0, metavar="N",
                   help="labelled PSI (okvs or fnp, --to the party that learns): the other party's "
                        "--payload-column text, up to N UTF-8 bytes, reaches the learner for each shared id (both "
                        "hosts pass the same N)")
    p.add_argument("--payload-column", metavar="NAME",
                   help="with --payload-bytes: at the party that sends, the column whose text is sent; at the "
                        "learner, the name of the column the received text is written to")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="keep the run's state here, chunk by chunk (ecdh or fnp; auto runs one of them)")
    p.add_argument("--resume", action="store_true", help="continue a killed run from --checkpoint-dir")


def run_psi(args: argparse.Namespace) -> int:
    from ..jobs import psi as job

    if not getattr(args, "data", None):
        raise ConfigError("pass --data FILE: the CSV or Parquet file of this party's rows")
    options = job.PsiOptions(tuple(args.id_column), protocol=args.protocol, key_bits=args.key_bits,
                             scheme=args.scheme, cardinality_only=args.cardinality_only, to=args.to,
                             strip=args.strip, casefold=args.casefold, duplicates=args.duplicates,
                             payload_bytes=args.payload_bytes, payload_column=args.payload_column,
                             checkpoint_dir=args.checkpoint_dir, resume=args.resume)
    with job.PsiProgress(args.me) as progress:
        try:
            table = job.prepare(args.me, args.data, args.out, options, progress)
        except EXPECTED_ERRORS as exc:
            abort_job(args, exc)
            return 2
        job.run(args.parties, args.me, table, args.out, options, key=args.key, progress=progress)
    return 0
