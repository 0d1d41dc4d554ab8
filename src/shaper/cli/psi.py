"""``shaper psi``: one party's side of a private set intersection between two hosts.

Each host runs ``shaper psi`` with the job's parties file (``shaper certs``, ``docs/net.md``) on
its own file of rows. Every cell is read as text (``007`` stays ``007``). The output file holds
this party's rows whose ids the peer also has, all columns, sorted by (normalised) id, so row i
of one party's output is the same customer as row i of the other's. With
``--cardinality-only`` no rows are written: both parties learn only how many ids they share.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .common import EXPECTED_ERRORS, abort_job, command


def add_parser(subparsers: Any) -> None:
    p = command(subparsers, "psi", run_psi, "private set intersection: align rows with a peer",
                "Find the ids this party shares with its peer without revealing the others, and write this party's "
                "rows of the intersection in an order both parties share (docs/psi.md). Start the other party on its "
                "own host with the same parties file and options.")
    p.add_argument("--parties", required=True, metavar="FILE", help="parties file (TOML), see docs/net.md")
    p.add_argument("--me", required=True, metavar="NAME", help="this party's name in the parties file")
    p.add_argument("--key", metavar="FILE", help="TLS private key (overrides the parties file)")
    p.add_argument("--input", required=True, metavar="FILE", help="CSV or Parquet file of this party's rows")
    p.add_argument("--id-column", action="append", required=True, metavar="NAME",
                   help="column holding the ids; repeat for a key of several columns")
    p.add_argument("--protocol", choices=["ecdh", "fnp"], default="ecdh",
                   help="ECDH on Ristretto255, or Freedman-Nissim-Pinkas with Paillier or OU (result to one party: --to)")
    p.add_argument("--key-bits", type=int, default=2048, help="key size of the FNP client")
    p.add_argument("--scheme", choices=["paillier", "ou"], default="paillier", help="FNP's homomorphic scheme")
    p.add_argument("--output", metavar="FILE", help="where to write the aligned rows (.csv or .parquet)")
    p.add_argument("--cardinality-only", action="store_true", help="learn only the intersection's size")
    p.add_argument("--to", default="both", metavar="NAME", help="'both', or the one party that learns the result")
    p.add_argument("--strip", action="store_true", help="ignore white space around ids")
    p.add_argument("--casefold", action="store_true", help="ignore letter case in ids")
    p.add_argument("--duplicates", choices=["error", "first"], default="error",
                   help="a repeated id: refuse the file, or use its first row")
    p.add_argument("--checkpoint-dir", metavar="DIR", help="keep the run's state here, chunk by chunk (ecdh)")
    p.add_argument("--resume", action="store_true", help="continue a killed run from --checkpoint-dir")


def run_psi(args: argparse.Namespace) -> int:
    from ..net import Session
    from ..protocols import psi

    try:
        header, rows = _check_inputs(args)
    except EXPECTED_ERRORS as exc:
        abort_job(args, exc)
        return 2
    key_at = [header.index(c) for c in args.id_column]
    ids = [row[key_at[0]] for row in rows] if len(key_at) == 1 else [tuple(row[i] for i in key_at) for row in rows]
    display = _Progress(sys.stderr.isatty())
    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        with display:
            result = psi.intersect(session, ids, protocol=args.protocol, to=args.to,
                                   cardinality_only=args.cardinality_only, strip=args.strip, casefold=args.casefold,
                                   duplicates=args.duplicates, columns=len(key_at), order="id", key_bits=args.key_bits, scheme=args.scheme,
                                   checkpoint_dir=args.checkpoint_dir, resume=args.resume, progress=display)
        stats = result.stats
        print(f"{args.me}: {len(rows):,} ids here, {result.peer_size:,} at the peer; "
              + (f"{result.size:,} in common" if result.size is not None else "the result goes to the peer")
              + f" ({stats['seconds']:.1f} s, {stats['bytes_sent'] / 1e6:.1f} MB sent, "
                f"{stats['bytes_received'] / 1e6:.1f} MB received)")
        if result.indices is not None and args.output:
            write_rows(Path(args.output), header, [rows[i] for i in result.indices])
            print(f"{args.me}: wrote {len(result.indices):,} aligned rows to {args.output}")
    return 0


def _check_inputs(args: argparse.Namespace) -> tuple[list[str], list[list[str]]]:
    if args.resume and not args.checkpoint_dir:
        raise ConfigError("--resume needs --checkpoint-dir")
    if args.protocol == "fnp" and args.checkpoint_dir:
        raise ConfigError("checkpoints are kept by --protocol ecdh only")
    if args.protocol == "fnp" and args.to == "both":
        raise ConfigError("FNP gives its result to one party: pass --to NAME (the same at both hosts)")
    if args.cardinality_only and args.output:
        raise ConfigError("--cardinality-only reveals no rows: drop --output")
    if not args.cardinality_only and args.to in ("both", args.me) and not args.output:
        raise ConfigError("pass --output FILE for the aligned rows (or --cardinality-only)")
    if args.output:
        suffix = Path(args.output).suffix.lower()
        if suffix not in (".csv", ".parquet", ".pq"):
            raise ConfigError(f"--output must end in .csv or .parquet, got {args.output}")
        if not Path(args.output).resolve().parent.is_dir():
            raise ConfigError(f"the directory of --output {args.output} does not exist")
    header, rows = read_rows(Path(args.input))
    for c in args.id_column:
        if c not in header:
            raise ConfigError(f"{args.input} has no column {c!r}; its columns are {header}")
    return header, rows


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) with every cell as text."""
    if not path.is_file():
        raise ConfigError(f"input file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pandas as pd

        frame = pd.read_parquet(path).astype(str)
        return [str(c) for c in frame.columns], frame.values.tolist()
    if suffix != ".csv":
        raise ConfigError(f"cannot read {path}: use a .csv or .parquet file")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise ConfigError(f"{path} is empty (it needs a header row)")
        rows = list(reader)
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ConfigError(f"{path} line {i + 2} has {len(row)} cells, the header has {len(header)}")
    return header, rows


def write_rows(path: Path, header: list[str], rows: list[list[str]]) -> None:
    if path.suffix.lower() in (".parquet", ".pq"):
        import pandas as pd

        pd.DataFrame(rows, columns=header).to_parquet(path, index=False)
        return
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


class _Progress:
    """A bar per protocol stage on a terminal; nothing otherwise."""

    def __init__(self, live: bool) -> None:
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        if live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[bold]PSI[/bold] {task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True))

    def __enter__(self) -> "_Progress":
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, event: dict) -> None:
        if self.bar is None or event.get("event") != "psi":
            return
        names = {"blind": "blinding the peer's ids", "encrypt": "encrypting polynomials",
                 "evaluate": "evaluating polynomials", "decrypt": "decrypting results"}
        stage = names.get(event.get("stage"), event.get("stage", ""))
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=event["total"])
        self.bar.update(self.tasks[stage], completed=event["done"], total=event["total"])
