"""Ids as PSI sees them: normalised, encoded to bytes, checked for duplicates, and packed into one
byte string with offsets so the native kernels hash millions of them without a Python loop.

An id is one value or a tuple of values (a multi-column key). Each value becomes text: ``str``
as given, ``bytes`` as UTF-8 text if it decodes, integers (Python or numpy) in decimal, and
floats only when they hold an integer (``7.0`` -> ``"7"``, the way a CSV reader may have
parsed an integer column); other floats, NaN and None are refused. Text is then normalised by
the options (``strip`` surrounding white space, ``casefold``, both off by default, and always
Unicode NFC so that the same visible text matches). A key of several columns is encoded as the
length-prefixed UTF-8 of each value, so ``("ab", "c")`` and ``("a", "bc")`` differ.
"""

from __future__ import annotations

import itertools
import numbers
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from ...errors import ConfigError
from ...kernels.ecc import item_digests, item_sort

CHUNK = 1 << 16  # ids encoded or gathered per step


@dataclass(frozen=True)
class Normalise:
    """How both parties turn values into ids (they must agree; the hello compares it)."""

    strip: bool = False
    casefold: bool = False

    def describe(self) -> str:
        return f"strip={self.strip}, casefold={self.casefold}"


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{where} is bytes that are not UTF-8 text") from None
    if isinstance(value, (bool, np.bool_)):
        raise ConfigError(f"{where} is a boolean ({value}); ids must be text or integers")
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        f = float(value)
        if f.is_integer():
            return str(int(f))
        raise ConfigError(f"{where} is {value!r}, not an integer: ids must be text or integers "
                          "(read the id column as text)")
    if value is None:
        raise ConfigError(f"{where} is missing")
    raise ConfigError(f"{where} has type {type(value).__name__}; ids must be text or integers")


def _encode_one(value: Any, i: int, normalise: Normalise, columns: int) -> bytes:
    parts = tuple(value) if columns > 1 else (value,)
    if len(parts) != columns:
        raise ConfigError(f"id {i} has {len(parts)} parts, expected {columns}")
    texts = []
    for c, part in enumerate(parts):
        t = unicodedata.normalize("NFC", _text(part, f"id {i}" + (f" column {c}" if columns > 1 else "")))
        if normalise.strip:
            t = t.strip()
        if normalise.casefold:
            t = t.casefold()
        texts.append(t.encode("utf-8"))
    if columns == 1:
        return texts[0]
    return b"".join(len(t).to_bytes(4, "little") + t for t in texts)


def _is_arrow_text(values: Any) -> bool:
    """An Arrow (chunked) array of strings, without importing pyarrow when it is not in use."""
    kind = type(values).__module__
    if not kind.startswith("pyarrow"):
        return False
    import pyarrow as pa

    return isinstance(values, (pa.Array, pa.ChunkedArray)) and (pa.types.is_string(values.type)
                                                                or pa.types.is_large_string(values.type))


def _arrow_values(column: Any, chunk: int) -> Iterable[Any]:
    """The Python values of an Arrow column, ``chunk`` at a time."""
    for start in range(0, len(column), chunk):
        yield from column.slice(start, chunk).to_pylist()


@dataclass(frozen=True)
class PackedItems:
    """Items as one byte array and ``offsets`` (n + 1 positions): item i is
    ``data[offsets[i]:offsets[i + 1]]``. ``data`` is a read-only uint8 array (a zero-copy view of
    bytes, or of the data buffer of an Arrow string column)."""

    data: np.ndarray
    offsets: np.ndarray

    @classmethod
    def encode(cls, values: Iterable[Any], normalise: Normalise = Normalise(), *, columns: int = 1,
               chunk: int = CHUNK) -> "PackedItems":
        """The packed encodings of ``values``, made ``chunk`` ids at a time: the only per-id
        Python objects alive are one chunk's. An Arrow string column of ASCII text needing no
        strip or casefold (NFC leaves ASCII as it is) is used as it is, without a copy."""
        if columns == 1 and _is_arrow_text(values):
            packed = cls._from_arrow(values, normalise)
            if packed is not None:
                return packed
            values = _arrow_values(values, chunk)
        pieces, lengths, it, i = [], [], iter(values), 0
        while True:
            block = [_encode_one(v, i + j, normalise, columns) for j, v in enumerate(itertools.islice(it, chunk))]
            if not block:
                break
            pieces.append(b"".join(block))
            lengths.append(np.fromiter(map(len, block), dtype=np.uint64, count=len(block)))
            i += len(block)
        offsets = np.zeros(i + 1, dtype=np.uint64)
        if i:
            np.cumsum(np.concatenate(lengths), out=offsets[1:])
        return cls(np.frombuffer(b"".join(pieces), dtype=np.uint8), offsets)

    @classmethod
    def _from_arrow(cls, column: Any, normalise: Normalise) -> "PackedItems | None":
        import pyarrow as pa
        import pyarrow.compute as pc

        if normalise.strip or normalise.casefold or column.null_count:
            return None
        if len(column) and not pc.all(pc.string_is_ascii(column)).as_py():
            return None
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if not pa.types.is_large_string(array.type):
            array = array.cast(pa.large_string())
        _, offsets, data = array.buffers()
        offsets = np.frombuffer(offsets, dtype=np.int64)[array.offset:array.offset + len(array) + 1].view(np.uint64)
        if not len(array):
            return cls(np.zeros(0, np.uint8), np.zeros(1, np.uint64))
        first = int(offsets[0])
        raw = np.frombuffer(data, dtype=np.uint8)[first:int(offsets[-1])]
        return cls(raw, offsets - np.uint64(first) if first else offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes:
        return self.data[int(self.offsets[i]):int(self.offsets[i + 1])].tobytes()

    def chunk(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Items [start, stop) as (data, offsets from 0)."""
        lo, hi = int(self.offsets[start]), int(self.offsets[stop])
        return self.data[lo:hi], self.offsets[start:stop + 1] - self.offsets[start]

    def take(self, rows: np.ndarray, chunk: int = CHUNK) -> "PackedItems":
        """The items at ``rows``, in that order (a vectorised gather, ``chunk`` rows at a time)."""
        rows = np.asarray(rows, dtype=np.int64)
        raw = self.data
        starts, ends = self.offsets[rows].astype(np.int64), self.offsets[rows + 1].astype(np.int64)
        offsets = np.zeros(len(rows) + 1, dtype=np.uint64)
        np.cumsum(ends - starts, out=offsets[1:])
        pieces = []
        for s in range(0, len(rows), chunk):
            b, e = starts[s:s + chunk], ends[s:s + chunk]
            lengths = e - b
            if lengths.sum():  # byte k of the block comes from its item's start plus its place in the item
                begin = np.repeat(b - (np.cumsum(lengths) - lengths), lengths)
                pieces.append(raw[begin + np.arange(len(begin))].tobytes())
        return PackedItems(np.frombuffer(b"".join(pieces), dtype=np.uint8), offsets)

    def digests(self, prefix: bytes, width: int) -> np.ndarray:
        """(n, width) uint8: the first ``width`` bytes of SHA-256(prefix || item) per item (the
        native core when built, else hashlib: :func:`shaper.kernels.ecc.item_digests`)."""
        out = item_digests(prefix, self.data, self.offsets, width)
        return np.frombuffer(out, dtype=np.uint8).reshape(len(self), width)

    def sort_order(self, rows: np.ndarray) -> np.ndarray:
        """The permutation of ``rows`` that sorts their items' bytes (byte-wise, a shorter prefix
        first): an order any two holders of the same items compute alike."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) < 2:
            return np.arange(len(rows))
        native = item_sort(self.data, self.offsets, rows)
        if native is not None:
            return native
        try:
            import pyarrow as pa
            import pyarrow.compute as pc
        except ImportError:
            return np.argsort(np.array([self[i] for i in rows], dtype=object), kind="stable")
        sub = self.take(rows)
        array = pa.Array.from_buffers(pa.large_binary(), len(rows), [None, pa.py_buffer(sub.offsets.astype(np.int64)),
                                                                      pa.py_buffer(sub.data)])
        return pc.sort_indices(array).to_numpy()


def unique_rows(items: PackedItems, duplicates: str, label: Callable[[int], Any] | None = None,
                digests: np.ndarray | None = None) -> np.ndarray | None:
    """Positions of the items PSI uses: None when all are distinct. ``duplicates="error"`` refuses
    a repeated id, naming it; ``"first"`` keeps the first row of each id. Vectorised: ids are
    sorted by an 8-byte digest and only rows with an equal digest are compared byte by byte.
    ``digests``: the items' digests (n, ≥ 8) when the caller has them already (their first 8
    bytes serve), else computed here."""
    if duplicates not in ("error", "first"):
        raise ConfigError(f"duplicates must be 'error' or 'first', got {duplicates!r}")
    if digests is not None:
        words = np.ascontiguousarray(digests[:, :8]).view("<u8")[:, 0]
    else:
        words = items.digests(b"shaper/psi/duplicates\0", 8).view("<u8")[:, 0] if len(items) else np.zeros(0, np.uint64)
    ranked = np.sort(words)  # a radix sort: when no digest repeats (the usual case) no argsort is needed
    if not np.any(ranked[1:] == ranked[:-1]):
        return None
    order = np.argsort(words, kind="stable")  # rows with equal digests stay in row order
    ranked = words[order]
    tied = np.nonzero(ranked[1:] == ranked[:-1])[0]
    if not len(tied):
        return None
    del words, ranked
    drop = []
    for group in _tie_groups(order, tied):
        seen: dict[bytes, int] = {}
        for i in group.tolist():
            first = seen.setdefault(items[i], i)
            if first == i:
                continue
            if duplicates == "error":
                shown = label(i) if label is not None else items[i].decode("utf-8", "replace")
                raise ConfigError(f"id {shown!r} appears more than once (rows {first} and {i}); ids must be "
                                  "unique (or pass duplicates='first' to keep the first row of each)")
            drop.append(i)
    if not drop:
        return None
    keep = np.ones(len(items), dtype=bool)
    keep[drop] = False
    return np.nonzero(keep)[0].astype(np.int64)


def _tie_groups(order: np.ndarray, tied: np.ndarray) -> list[np.ndarray]:
    """The runs of ``order`` whose digests are equal, given the positions k where entry k equals
    entry k + 1."""
    breaks = np.nonzero(np.diff(tied) != 1)[0] + 1
    return [order[run[0]:run[-1] + 2] for run in np.split(tied, breaks)]
