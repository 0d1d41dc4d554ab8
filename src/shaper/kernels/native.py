"""The native kernel: Rust batch Montgomery arithmetic (``shaper._native``) behind the kernel
interface.

Two engines sit behind it, chosen at start-up (``SHAPER_NATIVE``):

* ``ifma`` — AVX-512 IFMA, eight values per instruction stream (radix 2^52, almost-Montgomery
  multiplication and a dedicated squaring), picked automatically where the CPU has it;
* ``portable`` — 64-bit limbs, one value at a time; runs on any CPU. GMP's hand-written
  assembly beats it, so ``auto`` only uses it when asked (``SHAPER_NATIVE=portable``).

Both spread groups of values over all cores (a rayon pool inside the extension, the GIL
released) and give results bit-identical to :class:`~shaper.kernels.gmp.GmpKernel`.

Constant time: exponentiations (``powmod``, ``powmod_same_exponent``, ``fixed_base_powmod``,
``horner_multiexp``) use fixed windows, a number of windows set by the longest exponent of the
batch, and table lookups that read every entry under a mask, so their timing and memory
accesses do not depend on exponent values — this is what CRT decryption (secret p-1, q-1) and
key-owner encryption (secret randomness) rely on. ``mulmod``, ``prod_rows`` and ``horner``
operate on public ciphertexts with data-independent control flow. ``invert`` (ciphertext
negation, public data) is delegated to gmpy2 and is not constant time.

Values cross into the extension as rows of little-endian 64-bit words; the conversions from
and to ``gmpy2.mpz`` are the only per-element Python work and cost about 1 µs per value, which
is small next to the exponentiations but dominates ciphertext additions.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np
from gmpy2 import mpz

from .base import FixedBaseSpec, check_fixed_base_args, significant_windows
from .gmp import budget_bytes, table_budget_bytes

try:  # the extension is optional: a source checkout without a build still works on gmpy2
    from .. import _native
except ImportError:  # pragma: no cover - exercised where the extension is absent
    _native = None

ONE = mpz(1)
_CACHE = 16
_MODES = ("auto", "ifma", "portable", "off")


def available() -> bool:
    """True when the extension module is importable."""
    return _native is not None


@functools.cache
def ifma_available() -> bool:
    """True when the extension is present and this CPU has AVX-512 IFMA."""
    return _native is not None and bool(_native.ifma_available())


def mode() -> str:
    """``SHAPER_NATIVE``: ``auto`` (default), ``ifma``, ``portable`` or ``off``."""
    raw = os.environ.get("SHAPER_NATIVE", "auto").strip().lower()
    if raw not in _MODES:
        raise ValueError(f"SHAPER_NATIVE must be one of {', '.join(_MODES)}; got {raw!r}")
    return raw


def chosen_engine() -> str | None:
    """The engine the current settings select (``"ifma"``, ``"portable"``) or ``None`` for the
    gmpy2 kernel. Raises when a requested engine cannot run here."""
    choice = mode()
    if choice == "off":
        return None
    if _native is None:
        if choice == "auto":
            return None
        raise RuntimeError(f"SHAPER_NATIVE={choice} but the native extension shaper._native is not built")
    if choice == "ifma" and not ifma_available():
        raise RuntimeError("SHAPER_NATIVE=ifma but this CPU lacks AVX-512 IFMA (use portable, auto or off)")
    if choice == "auto":
        return "ifma" if ifma_available() else None
    return choice


def _fixed_window(exponent_bits: int, modulus_bits: int, budget: int) -> int:
    """Comb window for the native fixed-base kernel: each window costs one product plus an
    in-register selection among its 2^w entries; 6 bits measured best (2048- and 4096-bit
    moduli, 1024-bit exponents: 7 is no faster and doubles the table), shrunk until the table
    fits the memory budget."""
    w = 6
    words52 = (modulus_bits + 2 + 51) // 52
    while w > 2 and -(-exponent_bits // w) * (1 << w) * words52 * 8 > budget:
        w -= 1
    return w


def fast_table_budget_bytes() -> int:
    """Memory budget of one index-read table (``constant_time=False`` specs), from
    ``SHAPER_FAST_TABLE_MIB`` (default 128): these tables exist to trade memory for speed."""
    return budget_bytes("SHAPER_FAST_TABLE_MIB", 128)


def _direct_window(exponent_bits: int, modulus_bits: int, budget: int) -> int:
    """Window of a table read by index (``constant_time=False``): one product per window and no
    selection cost, so as wide as the budget allows, up to 12 bits. 2048-bit keys (1024-bit
    exponents mod a 4096-bit n^2), one core: 64 MiB gives 10 bits (~116 µs per encryption), the
    default 128 MiB 11 bits (94 windows of 2048 entries, ~110 µs), 256 MiB 12 bits (~99 µs)."""
    w = 12
    words52 = (modulus_bits + 2 + 51) // 52
    while w > 6 and -(-exponent_bits // w) * (1 << w) * words52 * 8 > budget:
        w -= 1
    return w


class MontRows:
    """Ciphertexts kept in a native context's Montgomery form between operations: rows of
    ``ctx.mont_width`` words holding x·R mod m in the engine's own digits (52-bit digits for
    IFMA, 64-bit limbs for the portable engine), in [0, 2m). Encrypted arrays hold these when
    the native kernel is active, so additions, sums and sparse products cost one Montgomery
    product per element and no conversion; :meth:`to_ints` leaves the form. Immutable: the
    row array is never written after construction."""

    __slots__ = ("ctx", "modulus", "rows")

    def __init__(self, ctx, modulus: int, rows: np.ndarray) -> None:
        self.ctx = ctx
        self.modulus = modulus
        self.rows = rows

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def take(self, index: np.ndarray) -> "MontRows":
        """Rows at the given flat positions (fancy indexing; repeats allowed)."""
        return MontRows(self.ctx, self.modulus, self.rows[np.asarray(index, dtype=np.int64)])

    def to_words(self) -> np.ndarray:
        """Canonical values as rows of little-endian words."""
        if not len(self):
            return np.zeros((0, self.ctx.words), dtype=np.uint64)
        return self.ctx.from_mont(self.rows)

    def to_ints(self) -> list:
        """Canonical values as ``gmpy2.mpz``."""
        return _ints(self.to_words()) if len(self) else []


class NativeKernel:
    """Kernel on the Rust extension. Results are lists of ``gmpy2.mpz`` (or :class:`MontRows`
    from the ``mont_*`` methods)."""

    #: encrypted arrays may keep ciphertexts in Montgomery form (:class:`MontRows`)
    montgomery = True

    def __init__(self, engine: str = "ifma", threads: int | None = None) -> None:
        if _native is None:
            raise RuntimeError("the native extension shaper._native is not built")
        if engine not in ("ifma", "portable"):
            raise ValueError(f"engine must be 'ifma' or 'portable', got {engine!r}")
        if engine == "ifma" and not ifma_available():
            raise RuntimeError("this CPU lacks AVX-512 IFMA")
        self.engine = engine
        self.name = f"native-{engine}"
        if threads is not None:
            _native.set_threads(int(threads))
        self._contexts: OrderedDict[int, object] = OrderedDict()
        self._tables: OrderedDict[tuple[bytes, bool], object] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def threads(self) -> int:
        return int(_native.threads())

    # -- conversions ------------------------------------------------------------------------
    def context(self, modulus):
        """The extension's Montgomery context for ``modulus`` (cached)."""
        return self._context(int(modulus))[0]

    def _context(self, m: int) -> tuple:
        with self._lock:
            entry = self._contexts.get(m)
            if entry is None:
                if m < 3 or m % 2 == 0:
                    raise ValueError("the native kernel needs an odd modulus >= 3")
                words = (m.bit_length() + 63) // 64
                mwords = _rows([m], words)[0]
                entry = (_native.Context(mwords, self.engine), mwords)
                self._contexts[m] = entry
                while len(self._contexts) > _CACHE:
                    self._contexts.popitem(last=False)
            else:
                self._contexts.move_to_end(m)
            return entry

    def _values(self, values: Sequence, ctx, m: int) -> np.ndarray:
        """Rows of words for values reduced modulo m (reducing only where needed)."""
        vals = values if isinstance(values, list) else list(values)
        words = ctx.words
        try:
            arr = _rows(vals, words)
        except OverflowError:  # negative or wider than the modulus
            vals = [v % m for v in vals]
            arr = _rows(vals, words)
        over = _not_below(arr, self._context(m)[1])
        if over.size:
            fixed = _rows([vals[i] % m for i in over.tolist()], words)
            arr[over] = fixed
        return arr

    # -- kernel API -------------------------------------------------------------------------
    def powmod(self, bases: Sequence, exponents: Sequence, modulus) -> list:
        if len(bases) != len(exponents):
            raise ValueError(f"{len(bases)} bases but {len(exponents)} exponents")
        if not len(bases):
            return []
        m = int(modulus)
        ctx = self.context(m)
        exps = [int(e) for e in exponents]
        if min(exps) < 0:
            raise ValueError("exponents must be non-negative")
        ew = max(1, (max(exps).bit_length() + 63) // 64)
        return _ints(ctx.powmod(self._values(bases, ctx, m), _rows(exps, ew)))

    def powmod_same_exponent(self, bases: Sequence, exponent, modulus) -> list:
        if not len(bases):
            return []
        e = int(exponent)
        if e < 0:
            raise ValueError("exponent must be non-negative")
        m = int(modulus)
        ctx = self.context(m)
        ew = max(1, (e.bit_length() + 63) // 64)
        return _ints(ctx.powmod_same(self._values(bases, ctx, m), _rows([e], ew)[0]))

    def mulmod(self, a: Sequence, b: Sequence, modulus) -> list:
        if len(a) != len(b):
            raise ValueError(f"operands differ in length: {len(a)} and {len(b)}")
        if not len(a):
            return []
        m = int(modulus)
        ctx = self.context(m)
        return _ints(ctx.mulmod(self._values(a, ctx, m), self._values(b, ctx, m)))

    def invert(self, values: Sequence, modulus) -> list:
        from .gmp import local_kernel

        return local_kernel().invert(values, modulus)

    def prod_rows(self, values: Sequence, indices: np.ndarray, indptr: np.ndarray, modulus) -> list:
        ptr = np.ascontiguousarray(indptr, dtype=np.int64)
        if ptr.size <= 1:
            return []
        m = int(modulus)
        ctx = self.context(m)
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        vals = values if isinstance(values, list) else list(values)
        if not vals:
            if ptr[-1] != ptr[0]:
                raise ValueError("indices refer to an empty value list")
            return [ONE] * (ptr.size - 1)
        return _ints(ctx.prod_rows(self._values(vals, ctx, m), idx, ptr))

    def horner(self, columns: Sequence[Sequence], shift_bits: int, modulus) -> list:
        if not columns or not len(columns[0]):
            return []
        m = int(modulus)
        ctx = self.context(m)
        stacked = np.stack([self._values(col, ctx, m) for col in columns])
        return _ints(ctx.horner(stacked, int(shift_bits)))

    def horner_multiexp(self, bases, exponents, shift_bits: int, modulus) -> list:
        if not bases or not bases[0] or not len(bases[0][0]):
            return []
        m = int(modulus)
        ctx = self.context(m)
        nt, k, count = len(bases), len(bases[0]), len(bases[0][0])
        if (len(exponents) != nt or any(len(t) != k for t in exponents)
                or any(len(col) != count for t in exponents for col in t)
                or any(len(t) != k or any(len(col) != count for col in t) for t in bases)):
            raise ValueError("bases and exponents must both be T x k x count nested sequences")
        flat_e = [int(e) for t in exponents for col in t for e in col]
        if flat_e and min(flat_e) < 0:
            raise ValueError("horner_multiexp exponents must be non-negative")
        ew = max(1, (max(flat_e, default=0).bit_length() + 63) // 64)
        b = np.stack([np.stack([self._values(col, ctx, m) for col in t]) for t in bases])
        e = _rows(flat_e, ew).reshape(nt, k, count, ew)
        return _ints(ctx.horner_multiexp(b, e, int(shift_bits)))

    def gather(self, calls: Sequence[tuple[str, tuple]]) -> list:
        """Run independent calls one after the other (each one already uses every core)."""
        return [getattr(self, method)(*args) for method, args in calls]

    def table(self, spec: FixedBaseSpec, windows_needed: int = 0, window: int | None = None):
        """The comb table of a spec (built on first use; rebuilt longer, with the same window,
        when an exponent needs more windows)."""
        key = (spec.key, spec.constant_time)
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
        if table is not None and table.windows >= windows_needed:
            return table
        m = int(spec.modulus)
        ctx = self.context(m)
        direct = not spec.constant_time
        if window is None:
            if spec.constant_time:
                window = _fixed_window(spec.exponent_bits, m.bit_length(), table_budget_bytes())
            else:
                window = _direct_window(spec.exponent_bits, m.bit_length(), fast_table_budget_bytes())
        windows = max(-(-spec.exponent_bits // window), windows_needed)
        table = ctx.comb_table(_rows([int(spec.base) % m], ctx.words)[0], window, windows, direct=direct)
        with self._lock:
            self._tables[key] = table
            while len(self._tables) > _CACHE // 2:
                self._tables.popitem(last=False)
        return table

    # -- Montgomery-form ciphertexts -----------------------------------------------------------
    def mont(self, values: Sequence, modulus) -> MontRows:
        """Values (ints) into Montgomery form."""
        m = int(modulus)
        ctx = self.context(m)
        if not len(values):
            return MontRows(ctx, m, np.zeros((0, ctx.mont_width), dtype=np.uint64))
        return MontRows(ctx, m, ctx.to_mont(self._values(values, ctx, m)))

    def adopt(self, rows: MontRows) -> MontRows:
        """``rows`` in this kernel's context (rows made by another engine are re-encoded)."""
        ctx = self.context(rows.modulus)
        if rows.ctx is ctx or rows.ctx.engine == ctx.engine:
            return rows
        return self.mont(rows.to_ints(), rows.modulus)

    def mont_mul(self, a: MontRows, b: MontRows) -> MontRows:
        a, b = self.adopt(a), self.adopt(b)
        if a.modulus != b.modulus or len(a) != len(b):
            raise ValueError("Montgomery operands differ in modulus or length")
        if not len(a):
            return a
        return MontRows(a.ctx, a.modulus, a.ctx.mont_mul(a.rows, b.rows))

    def mont_prod_rows(self, a: MontRows, indices: np.ndarray, indptr: np.ndarray) -> MontRows:
        a = self.adopt(a)
        ptr = np.ascontiguousarray(indptr, dtype=np.int64)
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        if not len(a):  # only empty rows can refer to no values
            if ptr.size and ptr[-1] != ptr[0]:
                raise ValueError("indices refer to an empty value list")
            return self.mont([ONE] * max(ptr.size - 1, 0), a.modulus)
        return MontRows(a.ctx, a.modulus, a.ctx.prod_rows(a.rows, idx, ptr, mont=True))

    def mont_powmod(self, a: MontRows, exponents: Sequence) -> MontRows:
        a = self.adopt(a)
        exps = [int(e) for e in exponents]
        if len(exps) != len(a):
            raise ValueError(f"{len(a)} bases but {len(exps)} exponents")
        if not exps:
            return a
        if min(exps) < 0:
            raise ValueError("exponents must be non-negative")
        ew = max(1, (max(exps).bit_length() + 63) // 64)
        return MontRows(a.ctx, a.modulus, a.ctx.powmod(a.rows, _rows(exps, ew), mont=True))

    def mont_powmod_same(self, a: MontRows, exponent) -> MontRows:
        a = self.adopt(a)
        e = int(exponent)
        if e < 0:
            raise ValueError("exponent must be non-negative")
        if not len(a):
            return a
        ew = max(1, (e.bit_length() + 63) // 64)
        return MontRows(a.ctx, a.modulus, a.ctx.powmod_same(a.rows, _rows([e], ew)[0], mont=True))

    def mont_fixed_base(self, specs: Sequence[FixedBaseSpec], exponents: Sequence[np.ndarray],
                        multipliers: MontRows | Sequence | None, modulus) -> MontRows:
        """:meth:`fixed_base_powmod` with the result in Montgomery form; ``multipliers`` may be
        Montgomery rows (re-randomising kept ciphertexts) or ints."""
        return self.fixed_base_powmod(specs, exponents, multipliers, modulus, mont_out=True)

    def fixed_base_powmod(self, specs: Sequence[FixedBaseSpec], exponents: Sequence[np.ndarray],
                          multipliers: Sequence | MontRows | None, modulus, *, mont_out: bool = False):
        count = check_fixed_base_args(specs, exponents, multipliers, modulus)
        m = int(modulus)
        ctx = self.context(m)
        if count == 0:
            return MontRows(ctx, m, np.zeros((0, ctx.mont_width), dtype=np.uint64)) if mont_out else []
        tables, rows = [], []
        for spec, exps in zip(specs, exponents):
            probe = self.table(spec)
            need = significant_windows(exps, probe.window)
            tables.append(self.table(spec, need, probe.window) if need > probe.windows else probe)
            rows.append(_exponent_words(exps))
        mont_in = isinstance(multipliers, MontRows)
        if mont_in:
            mult = self.adopt(multipliers).rows
        else:
            mult = None if multipliers is None else self._values(multipliers, ctx, m)
        out = ctx.fixed_base(tables, rows, mult, mont_in=mont_in, mont_out=mont_out)
        return MontRows(ctx, m, out) if mont_out else _ints(out)


def _rows(values: Sequence, words: int) -> np.ndarray:
    """Non-negative integers to a (count, words) little-endian uint64 array."""
    width = 8 * words
    buf = b"".join([v.to_bytes(width, "little") for v in values])
    return np.frombuffer(buf, dtype="<u8").reshape(len(values), words).copy()


def _ints(arr: np.ndarray) -> list:
    """(count, words) little-endian uint64 rows to ``gmpy2.mpz`` values."""
    count, words = arr.shape
    raw = memoryview(np.ascontiguousarray(arr, dtype="<u8").tobytes())
    width = 8 * words
    from_bytes = mpz.from_bytes
    return [from_bytes(raw[i * width:(i + 1) * width], "little") for i in range(count)]


def _not_below(arr: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Indices of rows whose value is >= the modulus ``m`` (its words; vectorised comparison
    from the most significant word down)."""
    if not arr.size:
        return np.zeros(0, dtype=np.int64)
    top = arr[:, -1]
    if int(top.max()) < int(m[-1]):  # common case: every top word is below the modulus'
        return np.zeros(0, dtype=np.int64)
    diff = arr != m
    # most significant differing word per row (rows equal to m have none: they are >= m)
    rev = diff[:, ::-1]
    first = rev.argmax(axis=1)
    has = rev[np.arange(arr.shape[0]), first]
    col = arr.shape[1] - 1 - first
    greater = arr[np.arange(arr.shape[0]), col] > m[col]
    return np.flatnonzero(~has | greater)


def _exponent_words(exps: np.ndarray) -> np.ndarray:
    """(count, bytes) little-endian uint8 exponents to (count, words) uint64 rows."""
    data = np.ascontiguousarray(exps, dtype=np.uint8)
    if data.ndim != 2:
        raise ValueError(f"exponent bytes must be a 2-D uint8 array, got shape {data.shape}")
    pad = (-data.shape[1]) % 8
    if pad or data.shape[1] == 0:
        data = np.concatenate([data, np.zeros((data.shape[0], pad or 8), dtype=np.uint8)], axis=1)
    return data.view("<u8").copy()  # a private, aligned copy (the kernel runs without the GIL)


__all__ = ["NativeKernel", "MontRows", "available", "ifma_available", "mode", "chosen_engine"]
