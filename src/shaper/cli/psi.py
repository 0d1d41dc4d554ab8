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
from typing import Any, Iterator

import numpy as np

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
    p.add_argument("--payload-bytes", type=int, default=0, metavar="N",
                   help="labelled PSI (fnp, --to the client): the other party's --payload-column text, up to N "
                        "UTF-8 bytes, reaches the client for each shared id (both hosts pass the same N)")
    p.add_argument("--payload-column", metavar="NAME",
                   help="with --payload-bytes: at the server, the column whose text is sent; at the client, the "
                        "name of the column the received text is written to")
    p.add_argument("--checkpoint-dir", metavar="DIR", help="keep the run's state here, chunk by chunk")
    p.add_argument("--resume", action="store_true", help="continue a killed run from --checkpoint-dir")


def run_psi(args: argparse.Namespace) -> int:
    from ..net import Session
    from ..protocols import psi

    try:
        table = _check_inputs(args)
    except EXPECTED_ERRORS as exc:
        abort_job(args, exc)
        return 2
    display = _Progress(sys.stderr.isatty())
    labelled = {}
    if args.payload_bytes:
        labelled["payload_bytes"] = args.payload_bytes
        if args.to != args.me:  # the server sends the column's text
            labelled["payloads"] = [v.encode("utf-8") for v in table.texts([args.payload_column])]
    with Session.from_config(args.parties, me=args.me, key=args.key) as session:
        with display:
            result = psi.intersect(session, table.ids(args.id_column), protocol=args.protocol, to=args.to, **labelled,
                                   cardinality_only=args.cardinality_only, strip=args.strip, casefold=args.casefold,
                                   duplicates=args.duplicates, columns=len(args.id_column), order="id",
                                   key_bits=args.key_bits, scheme=args.scheme, checkpoint_dir=args.checkpoint_dir,
                                   resume=args.resume, progress=display)
        stats = result.stats
        print(f"{args.me}: {len(table):,} ids here, {result.peer_size:,} at the peer; "
              + (f"{result.size:,} in common" if result.size is not None else "the result goes to the peer")
              + f" ({stats['seconds']:.1f} s, {stats['bytes_sent'] / 1e6:.1f} MB sent, "
                f"{stats['bytes_received'] / 1e6:.1f} MB received)")
        if result.indices is not None and args.output:
            if "payloads" in result.stats:
                table.add_column(args.payload_column, [p.rstrip(b"\0").decode("utf-8", "replace")
                                                       for p in result.stats["payloads"]], result.indices)
            table.write(Path(args.output), result.indices)
            print(f"{args.me}: wrote {len(result.indices):,} aligned rows to {args.output}")
    return 0


def _check_inputs(args: argparse.Namespace) -> "RowFile":
    if args.resume and not args.checkpoint_dir:
        raise ConfigError("--resume needs --checkpoint-dir")
    if args.cardinality_only and args.output:
        raise ConfigError("--cardinality-only reveals no rows: drop --output")
    if args.payload_bytes < 0 or args.payload_bytes and (args.protocol != "fnp" or args.to == "both"
                                                         or not args.payload_column or args.cardinality_only):
        raise ConfigError("labelled PSI needs --protocol fnp, --to <the client>, --payload-column and a positive "
                          "--payload-bytes, and returns rows (no --cardinality-only)")
    if not args.cardinality_only and args.to in ("both", args.me) and not args.output:
        raise ConfigError("pass --output FILE for the aligned rows (or --cardinality-only)")
    if args.output:
        suffix = Path(args.output).suffix.lower()
        if suffix not in (".csv", ".parquet", ".pq"):
            raise ConfigError(f"--output must end in .csv or .parquet, got {args.output}")
        if not Path(args.output).resolve().parent.is_dir():
            raise ConfigError(f"the directory of --output {args.output} does not exist")
    table = RowFile.read(Path(args.input))
    for c in args.id_column + ([args.payload_column] if args.payload_bytes and args.to != args.me else []):
        if c not in table.header:
            raise ConfigError(f"{args.input} has no column {c!r}; its columns are {table.header}")
    if args.payload_bytes and args.to == args.me and args.payload_column in table.header:
        raise ConfigError(f"{args.input} already has a column {args.payload_column!r}: name the received payloads "
                          "differently (--payload-column)")
    return table


class RowFile:
    """The rows of a CSV or Parquet file, every cell as text (``007`` stays ``007``). Held as
    Arrow string columns when pyarrow is installed (a few bytes per cell, no Python object per
    cell: 2^24 ids fit in a few hundred MB), else as lists of ``str``."""

    CHUNK = 1 << 16  # cells turned into Python objects at a time

    def __init__(self, header: list[str], columns: list[Any]) -> None:
        self.header, self.columns = header, columns

    @classmethod
    def read(cls, path: Path) -> "RowFile":
        if not path.is_file():
            raise ConfigError(f"input file {path} does not exist")
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".parquet", ".pq"):
            raise ConfigError(f"cannot read {path}: use a .csv or .parquet file")
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            if suffix != ".csv":
                raise ConfigError("reading Parquet needs pyarrow: pip install 'shaper-ppml[data]'") from None
            return cls._read_csv_lists(path)
        return cls._read_arrow(path, suffix)

    @classmethod
    def _read_arrow(cls, path: Path, suffix: str) -> "RowFile":
        import pyarrow as pa
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq

        if suffix == ".csv":
            header = cls._csv_header(path)
            try:
                table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
                                       convert_options=pacsv.ConvertOptions(
                                           column_types={c: pa.large_string() for c in header}, strings_can_be_null=False,
                                           quoted_strings_can_be_null=False))
            except pa.ArrowInvalid as exc:
                raise ConfigError(f"{path} is not a CSV file whose rows all have the header's {len(header)} cells: "
                                  f"{exc}") from None
        else:
            table = pq.read_table(path)
            header = [str(c) for c in table.column_names]
            table = pa.table([c if pa.types.is_string(c.type) else pa.array(c.to_pandas().astype(str), pa.string())
                              for c in table.columns], names=header)
        # one contiguous large_string array per column: the ids are hashed in place (no copy)
        columns = [table.column(i).cast(pa.large_string()).combine_chunks() for i in range(table.num_columns)]
        del table
        pa.default_memory_pool().release_unused()  # the reader's blocks, which the pool would keep
        return cls(header, columns)

    @staticmethod
    def _csv_header(path: Path) -> list[str]:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
        if header is None:
            raise ConfigError(f"{path} is empty (it needs a header row)")
        return header

    @classmethod
    def _read_csv_lists(cls, path: Path) -> "RowFile":
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise ConfigError(f"{path} is empty (it needs a header row)")
            rows = list(reader)
        for i, row in enumerate(rows):
            if len(row) != len(header):
                raise ConfigError(f"{path} line {i + 2} has {len(row)} cells, the header has {len(header)}")
        return cls(header, [list(col) for col in zip(*rows)] if rows else [[] for _ in header])

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def texts(self, names: list[str]) -> "_Cells":
        """The cells of ``names`` as Python text: a value per row, or a tuple for several columns."""
        return _Cells([self.columns[self.header.index(n)] for n in names])

    def ids(self, names: list[str]) -> Any:
        """The id of every row: the cell of ``names[0]`` (an Arrow column as it is, which PSI
        hashes in place), or a tuple for several columns."""
        columns = [self.columns[self.header.index(n)] for n in names]
        return columns[0] if len(columns) == 1 and not isinstance(columns[0], list) else _Cells(columns)

    def add_column(self, name: str, values: list[str], rows: np.ndarray) -> None:
        """A new text column holding ``values[k]`` at row ``rows[k]`` ("" elsewhere)."""
        cells = [""] * len(self)
        for r, v in zip(rows.tolist(), values):
            cells[r] = v
        self.header.append(name)
        if self.columns and not isinstance(self.columns[0], list):
            import pyarrow as pa

            self.columns.append(pa.array(cells, pa.large_string()))
        else:
            self.columns.append(cells)

    def write(self, path: Path, rows: np.ndarray) -> None:
        """Writes the rows at ``rows`` (positions, in that order), all columns, as CSV or Parquet."""
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow as pa
            import pyarrow.parquet as pq

            at = pa.array(rows, pa.int64())
            pq.write_table(pa.table([c.take(at) if not isinstance(c, list) else
                                     pa.array([c[i] for i in rows], pa.string()) for c in self.columns],
                                    names=self.header), path)
            return
        everything = _Cells(self.columns)
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(self.header)
            for start in range(0, len(rows), self.CHUNK):
                writer.writerows(everything.rows(rows[start:start + self.CHUNK]))


class _Cells:
    """Rows of one or more text columns (Arrow or lists), read ``RowFile.CHUNK`` at a time: a
    value per row for one column, a tuple for several."""

    def __init__(self, columns: list[Any]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int) -> Any:
        cells = [c[int(i)] if isinstance(c, list) else c[int(i)].as_py() for c in self.columns]
        return cells[0] if len(cells) == 1 else tuple(cells)

    def _block(self, column: Any, start: int, stop: int) -> list:
        return column[start:stop] if isinstance(column, list) else column.slice(start, stop - start).to_pylist()

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, len(self), RowFile.CHUNK):
            blocks = [self._block(c, start, start + RowFile.CHUNK) for c in self.columns]
            yield from blocks[0] if len(blocks) == 1 else zip(*blocks)

    def rows(self, at: np.ndarray) -> list[list[str]]:
        """The rows at positions ``at``, every column, as lists."""
        blocks = [[c[i] for i in at.tolist()] if isinstance(c, list) else c.take(at).to_pylist()
                  for c in self.columns]
        return [list(r) for r in zip(*blocks)]


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
        if event.get("event") == "resume" and "blocks" in event:
            print(f"resuming the killed run: {event['blocks']} blocks of bins were already evaluated", flush=True)
        elif event.get("event") == "resume":
            print(f"resuming the killed run: {event['own_chunks']} chunks of this side's doubly blinded ids and "
                  f"{event['peer_chunks']} of the peer's were done", flush=True)
        if self.bar is None or event.get("event") != "psi":
            return
        names = {"blind": "blinding the peer's ids", "encrypt": "encrypting polynomials",
                 "evaluate": "evaluating polynomials", "decrypt": "decrypting results"}
        stage = names.get(event.get("stage"), event.get("stage", ""))
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=event["total"])
        self.bar.update(self.tasks[stage], completed=event["done"], total=event["total"])
