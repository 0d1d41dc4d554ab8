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

import numbers
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ...errors import ConfigError


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


def encode(values: Iterable[Any], normalise: Normalise = Normalise(), *, columns: int = 1) -> list[bytes]:
    """The byte encoding of each id (``values`` holds tuples when ``columns`` > 1)."""
    out = []
    for i, value in enumerate(values):
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
            out.append(texts[0])
        else:
            out.append(b"".join(len(t).to_bytes(4, "little") + t for t in texts))
    return out


@dataclass(frozen=True)
class PackedItems:
    """Items as one byte string and ``offsets`` (n + 1 positions): item i is
    ``data[offsets[i]:offsets[i + 1]]``."""

    data: bytes
    offsets: np.ndarray

    @classmethod
    def pack(cls, items: Sequence[bytes]) -> "PackedItems":
        lengths = np.fromiter((len(b) for b in items), dtype=np.uint64, count=len(items))
        offsets = np.zeros(len(items) + 1, dtype=np.uint64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(b"".join(items), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def chunk(self, start: int, stop: int) -> tuple[bytes, np.ndarray]:
        """Items [start, stop) as (data, offsets from 0)."""
        lo, hi = int(self.offsets[start]), int(self.offsets[stop])
        return self.data[lo:hi], self.offsets[start:stop + 1] - self.offsets[start]



def check_unique(items: Sequence[bytes], duplicates: str, shown: Sequence[Any] | None = None) -> np.ndarray:
    """Positions of the items PSI uses. ``duplicates="error"`` refuses a repeated id, naming it;
    ``"first"`` keeps the first row of each id."""
    if duplicates not in ("error", "first"):
        raise ConfigError(f"duplicates must be 'error' or 'first', got {duplicates!r}")
    seen: dict[bytes, int] = {}
    keep = []
    for i, item in enumerate(items):
        first = seen.setdefault(item, i)
        if first == i:
            keep.append(i)
        elif duplicates == "error":
            label = shown[i] if shown is not None else item.decode("utf-8", "replace")
            raise ConfigError(f"id {label!r} appears more than once (rows {first} and {i}); ids must be "
                              "unique (or pass duplicates='first' to keep the first row of each)")
    return np.asarray(keep, dtype=np.int64)
