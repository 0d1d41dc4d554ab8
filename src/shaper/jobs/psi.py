"""``shaper psi``: one party's side of a private set intersection between two hosts.

Each host runs ``shaper psi`` with the job's parties file (``shaper certs``, ``docs/net.md``) on
its own file of rows. Every cell is read as text (``007`` stays ``007``). The output file holds
this party's rows whose ids the peer also has, all columns, sorted by (normalised) id, so row i
of one party's output is the same customer as row i of the other's. With
``--cardinality-only`` no rows are written: both parties learn only how many ids they share.

``--protocol auto`` (the default) runs the protocol :func:`shaper.protocols.psi.resolve` picks
for the options: OT-based ``okvs`` where it applies (labelled PSI, ``--payload-bytes``,
included), ECDH for ``--cardinality-only`` or ``--checkpoint-dir`` (FNP for a checkpointed
labelled run); :func:`prepare` refuses a
protocol named explicitly that cannot do what the options ask, before anything connects.

The job shows where it stands on stderr (:class:`PsiProgress`): a line per stage (reading the
file, connecting, the intersection, writing) and the protocol's counts (OKVS batches, ids
blinded, bins encrypted or evaluated, results decrypted), as a bar on a terminal and as lines in
a log; the summary line names the protocol that ran. The protocol itself is
:func:`shaper.protocols.psi.intersect`; what each party learns is in ``docs/psi.md``.
"""

from __future__ import annotations

import csv
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TextIO

import numpy as np

from ..errors import ConfigError
from ..net.phases import Phases
from ..protocols.psi import resolve


@dataclass(frozen=True)
class PsiOptions:
    """What this party asks for; both hosts pass the same, except ``to`` may name either and
    ``payload_column`` means the column sent (server) or written (client)."""

    id_columns: tuple[str, ...]
    protocol: str = "auto"
    key_bits: int = 2048
    scheme: str = "paillier"
    cardinality_only: bool = False
    to: str = "both"
    strip: bool = False
    casefold: bool = False
    duplicates: str = "error"
    payload_bytes: int = 0
    payload_column: str | None = None
    checkpoint_dir: str | None = None
    resume: bool = False

    def resolved(self) -> str:
        """The protocol that runs: ``protocol``, or for "auto" the one
        :func:`~shaper.protocols.psi.resolve` picks for these options (FNP for labelled PSI, ECDH
        for the size only or a checkpoint, else OT-based okvs where the native core is built,
        labelled PSI included)."""
        return resolve(self.protocol, cardinality_only=self.cardinality_only, labelled=self.payload_bytes != 0,
                       checkpoint=self.checkpoint_dir is not None)


def prepare(me: str, input: str | Path, out: str | None, options: PsiOptions,
            progress: "PsiProgress | None" = None) -> "RowFile":
    """Checks the options and reads this party's rows, before the job is joined: a problem
    raises :class:`ConfigError` naming it (the caller tells the peer and stops)."""
    if options.resume and not options.checkpoint_dir:
        raise ConfigError("--resume needs --checkpoint-dir")
    if options.cardinality_only and out:
        raise ConfigError("--cardinality-only reveals no rows: drop --out")
    protocol = options.resolved()
    if protocol == "okvs":  # named explicitly: auto never picks okvs for what it cannot do
        if options.cardinality_only:
            raise ConfigError("--protocol okvs cannot tell only the intersection's size (its learner sees which of "
                              "its rows matched): use --protocol ecdh (or auto, which picks it) with "
                              "--cardinality-only")
        if options.checkpoint_dir:
            raise ConfigError("--protocol okvs keeps no checkpoint (a killed run is redone): drop --checkpoint-dir, "
                              "or use --protocol ecdh (or auto, which picks it) to resume long runs")
    if options.payload_bytes < 0 or options.payload_bytes and (
            protocol not in ("okvs", "fnp") or options.to == "both" or not options.payload_column
            or options.cardinality_only):
        raise ConfigError("labelled PSI needs --protocol auto, okvs or fnp, --to <the party that learns>, "
                          "--payload-column and a positive --payload-bytes, and returns rows (no --cardinality-only)")
    if not options.cardinality_only and options.to in ("both", me) and not out:
        raise ConfigError("pass --out FILE for the aligned rows (or --cardinality-only)")
    if out:
        suffix = Path(out).suffix.lower()
        if suffix not in (".csv", ".parquet", ".pq"):
            raise ConfigError(f"--out must end in .csv or .parquet, got {out}")
        if not Path(out).resolve().parent.is_dir():
            raise ConfigError(f"the directory of --out {out} does not exist")
    phases = Phases(progress=progress)
    with phases.phase("read"):
        table = RowFile.read(Path(input))
    if progress is not None:
        progress.note(f"{len(table):,} rows in {input}")
    server = options.payload_bytes and options.to != me
    for c in list(options.id_columns) + ([options.payload_column] if server else []):
        if c not in table.header:
            raise ConfigError(f"{input} has no column {c!r}; its columns are {table.header}")
    if options.payload_bytes and options.to == me and options.payload_column in table.header:
        raise ConfigError(f"{input} already has a column {options.payload_column!r}: name the received payloads "
                          "differently (--payload-column)")
    return table


def run(parties: str, me: str, table: "RowFile", out: str | None, options: PsiOptions, *, key: str | None = None,
        progress: "PsiProgress | None" = None) -> Any:
    """Joins the job as ``me``, intersects the ids of ``table`` with the peer's, prints the
    result, and writes this party's aligned rows to ``out``. Returns the
    :class:`~shaper.protocols.psi.PsiResult`."""
    from ..net import Session
    from ..protocols import psi

    labelled: dict[str, Any] = {}
    if options.payload_bytes:
        labelled["payload_bytes"] = options.payload_bytes
        if options.to != me:  # the server sends the column's text
            labelled["payloads"] = [v.encode("utf-8") for v in table.texts([options.payload_column])]
    protocol = options.resolved()
    if progress is not None:
        progress.describe("intersect", f"private set intersection of {len(table):,} ids ({protocol})")
    phases = Phases(progress=progress)
    with phases.phase("connect"):
        session = Session.from_config(parties, me=me, key=key)
    with session:
        with phases.phase("intersect", items=len(table)):
            result = psi.intersect(session, table.ids(list(options.id_columns)), protocol=protocol,
                                   to=options.to, **labelled, cardinality_only=options.cardinality_only,
                                   strip=options.strip, casefold=options.casefold, duplicates=options.duplicates,
                                   columns=len(options.id_columns), order="id", key_bits=options.key_bits,
                                   scheme=options.scheme, checkpoint_dir=options.checkpoint_dir,
                                   resume=options.resume, progress=progress)
        stats = result.stats
        print(f"{me}: {len(table):,} ids here, {result.peer_size:,} at the peer; "
              + (f"{result.size:,} in common" if result.size is not None else "the result goes to the peer")
              + f" ({stats.get('protocol', protocol)}, {stats['seconds']:.1f} s, "
                f"{stats['bytes_sent'] / 1e6:.1f} MB sent, {stats['bytes_received'] / 1e6:.1f} MB received)",
              flush=True)
        if result.indices is not None and out:
            with phases.phase("write", items=len(result.indices)):
                if "payloads" in result.stats:
                    table.add_column(options.payload_column, [p.rstrip(b"\0").decode("utf-8", "replace")
                                                              for p in result.stats["payloads"]], result.indices)
                table.write(Path(out), result.indices)
            print(f"{me}: wrote {len(result.indices):,} aligned rows to {out}")
    return result


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
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(self.header)
            if self._write_arrow(fh, rows):
                return
            everything = _Cells(self.columns)
            for start in range(0, len(rows), self.CHUNK):
                writer.writerows(everything.rows(rows[start:start + self.CHUNK]))

    def _write_arrow(self, fh: TextIO, rows: np.ndarray) -> bool:
        """The rows through Arrow's CSV writer (a tenth of the time of Python's at a million
        rows), when the columns are Arrow and no cell needs quoting: then its output is byte for
        byte what Python's csv writer gives (unquoted cells, CRLF). False (nothing written)
        otherwise."""
        if not self.columns or isinstance(self.columns[0], list):
            return False
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv

        sub = pa.table([c.take(pa.array(rows, pa.int64())) for c in self.columns],
                       names=[f"c{i}" for i in range(len(self.columns))])
        for col in sub.columns:  # a quote, a comma or a line break needs quoting; so does "" alone on a line
            if len(col) and (pc.any(pc.match_substring_regex(col, '[",\r\n]')).as_py()
                             or len(self.columns) == 1 and pc.any(pc.equal(pc.utf8_length(col), 0)).as_py()):
                return False
        fh.flush()
        pacsv.write_csv(sub, fh.buffer, pacsv.WriteOptions(include_header=False, quoting_style="none", eol="\r\n"))
        return True


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


#: what a line or a bar calls each step
PHASES = {"read": "reading the rows", "connect": "connecting to the peer", "intersect": "private set intersection",
          "write": "writing the aligned rows"}
STAGES = {"okvs": "OKVS batches", "blind": "blinding the peer's ids", "encrypt": "encrypting polynomials",
          "evaluate": "evaluating polynomials", "decrypt": "decrypting results"}


class PsiProgress:
    """Where a PSI job stands, on ``stream`` (stderr): a line as each step starts and ends (reading,
    connecting, the intersection, writing) and, for each protocol stage (:data:`STAGES`: okvs's
    batches of clusters, ECDH's blinding, FNP's polynomials and results), its counts: a bar per
    stage on a terminal (``live``, by default when ``stream`` is one), else a line when a stage
    starts, at most every ``every`` seconds while it runs, and when it completes. Use it as the
    ``progress`` callback of :func:`prepare`, :func:`run` and
    :func:`shaper.protocols.psi.intersect`, inside ``with``. Thread-safe (FNP reports from its
    sending thread)."""

    def __init__(self, me: str, stream: TextIO | None = None, *, live: bool | None = None,
                 every: float = 2.0) -> None:
        self.me, self.stream = me, stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.every = every
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        self.shown: dict[str, tuple[float, int]] = {}  # stage -> (time of its last line, done then)
        self.lock = threading.Lock()
        self.names = dict(PHASES)  # what a line calls each step

    def describe(self, phase: str, text: str) -> None:
        """Call step ``phase`` ``text`` in its lines (e.g. with the count of ids)."""
        self.names[phase] = text

    def __enter__(self) -> "PsiProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.stop()
                self.bar = None

    def note(self, text: str) -> None:
        """One line about the job (above the bars on a terminal)."""
        line = f"{self.me}: {text}"
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    def __call__(self, event: dict) -> None:
        with self.lock:
            self._show(event)

    def _show(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "resume" and "blocks" in event:
            print(f"resuming the killed run: {event['blocks']} blocks of bins were already evaluated", flush=True)
        elif kind == "resume":
            print(f"resuming the killed run: {event['own_chunks']} chunks of this side's doubly blinded ids and "
                  f"{event['peer_chunks']} of the peer's were done", flush=True)
        elif kind == "phase":
            name = self.names.get(event["phase"], event["phase"])
            if event["status"] == "start":
                self.note(f"{name} ...")
            else:
                if self.bar is not None:  # the protocol's bars end with it
                    self.bar.stop()
                    self.bar, self.tasks = None, {}
                self.note(f"{name}: done in {event['seconds']:.1f} s")
        elif kind == "psi":
            self._stage(STAGES.get(event.get("stage"), str(event.get("stage", ""))), event["done"], event["total"])

    def _stage(self, stage: str, done: int, total: int) -> None:
        if self.live:
            if self.bar is None:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )

                self.bar = Progress(TextColumn("[bold]PSI[/bold] {task.description}"), BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(), console=Console(file=self.stream))
                self.bar.start()
            if stage not in self.tasks:
                self.tasks[stage] = self.bar.add_task(stage, total=total)
            self.bar.update(self.tasks[stage], completed=done, total=total)
            return
        now = time.monotonic()
        last = self.shown.get(stage)
        first, finished = last is None, last is not None and done >= total > last[1]
        if first or finished or (now - last[0] >= self.every and done != last[1]):
            self.note(f"{stage}: {done:,} / {total:,}")
            self.shown[stage] = (now, done)
