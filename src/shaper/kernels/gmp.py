"""The gmpy2 (GMP) kernel: portable batch modular arithmetic on one core.

This is the reference implementation of :class:`shaper.kernels.base.Kernel` and the fallback
when no native kernel is available. GMP's ``powmod`` is not constant time and fixed-base table
lookups are indexed by secret exponent digits, so this kernel does not resist timing or cache
side channels from code running on the same machine; the native kernels (constant-time
exponentiation for secret exponents) address that.

Fixed-base tables (the "precomputation" of the SHAPER paper, Table 2): for a base b, modulus m
and window w, ``T[i][d] = b^(d * 2^(w*i)) mod m``. An exponent with digits d_i then costs one
modular product per non-zero digit. A table is built only once it pays: the kernel counts the
exponentiations asked of each base, exponentiates directly (GMP's ``powmod``) while a table would
cost more than it saves, and otherwise picks the window that minimises the table's cost plus four
times the uses so far (capped by the memory budget, ``SHAPER_TABLE_MIB``, default 64 MiB per
table), rebuilding with a wider window when the uses outgrow the plan and the wider table would
pay for itself over as many uses again. Windows are built lazily,
so a table for plaintext-sized exponents only grows as far as the exponents used.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

from .base import FixedBaseSpec, check_fixed_base_args, exponent_digits, significant_windows

ONE = mpz(1)
_MAX_WINDOW = 16
_TABLE_CACHE_SIZE = 8


def budget_bytes(variable: str, default_mib: int) -> int:
    """A memory budget in bytes from the environment variable ``variable`` (MiB, positive)."""
    raw = os.environ.get(variable, str(default_mib))
    try:
        mib = float(raw)
    except ValueError as exc:
        raise ValueError(f"{variable} must be a number of MiB, got {raw!r}") from exc
    if mib <= 0:
        raise ValueError(f"{variable} must be positive, got {raw!r}")
    return int(mib * (1 << 20))


def table_budget_bytes() -> int:
    """Memory budget per fixed-base table, from ``SHAPER_TABLE_MIB`` (default 64)."""
    return budget_bytes("SHAPER_TABLE_MIB", 64)


def choose_window(exponent_bits: int, modulus_bits: int, budget_bytes: int | None = None) -> int:
    """Largest window (2..16) whose full table fits the budget.

    Cost per exponentiation is ceil(exponent_bits / w) modular products; memory is
    ceil(exponent_bits / w) * 2^w entries of about modulus_bits/8 + 48 bytes (mpz header and
    list slot included).
    """
    budget = table_budget_bytes() if budget_bytes is None else budget_bytes
    entry = (modulus_bits + 7) // 8 + 48
    best = 2
    for w in range(2, _MAX_WINDOW + 1):
        windows = -(-exponent_bits // w)
        if windows * (1 << w) * entry <= budget:
            best = w
    return best


def best_window(exponent_bits: int, uses: int, cap: int) -> int:
    """The window (2..cap) minimising a table's products plus ``uses`` exponentiations with it."""
    def cost(w: int) -> int:
        windows = -(-exponent_bits // w)
        return uses * windows + windows * ((1 << w) - 1)
    return min(range(2, max(2, cap) + 1), key=cost)


def table_pays(exponent_bits: int, uses: int, window: int) -> bool:
    """Whether ``uses`` exponentiations are cheaper with a window-``window`` table (built now)
    than with GMP's powmod (about 1.2 products per exponent bit)."""
    windows = -(-exponent_bits // window)
    return uses * windows + windows * ((1 << window) - 1) < uses * 1.2 * exponent_bits


def _rebuild_pays(exponent_bits: int, uses: int, old: int, new: int) -> bool:
    """Whether a wider table saves more than it costs over as many uses again as so far."""
    saved = uses * (-(-exponent_bits // old) - -(-exponent_bits // new))
    return saved > -(-exponent_bits // new) * ((1 << new) - 1)


class FixedBaseTable:
    """Comb table of one base; windows are appended on demand."""

    def __init__(self, base: int, modulus: int, window: int) -> None:
        self.modulus = mpz(modulus)
        self.window = window
        self.entries: list = []
        self.windows = 0
        self._next = mpz(base) % self.modulus  # base^(2^(window * windows))
        self._lock = threading.Lock()

    def ensure(self, windows: int) -> None:
        if windows <= self.windows:
            return
        with self._lock:
            m = self.modulus
            size = 1 << self.window
            while self.windows < windows:
                b = self._next
                row = [ONE, b]
                last = b
                for _ in range(size - 2):
                    last = last * b % m
                    row.append(last)
                self.entries.extend(row)
                self._next = last * b % m
                self.windows += 1


class GmpKernel:
    """Single-core gmpy2 kernel. Results are lists of ``gmpy2.mpz``."""

    name = "gmpy2"

    def __init__(self, table_budget_bytes: int | None = None) -> None:
        self._budget = table_budget_bytes
        self._tables: OrderedDict[bytes, FixedBaseTable] = OrderedDict()
        self._uses: dict[bytes, int] = {}     # exponentiations asked of each base so far
        self._planned: dict[bytes, int] = {}  # the uses each table's window was chosen for
        self._combined: OrderedDict[tuple, list] = OrderedDict()
        self._lock = threading.Lock()

    # -- tables -----------------------------------------------------------------------------
    def _planned_tables(self, specs: Sequence[FixedBaseSpec], count: int) -> list | None:
        """The tables for a call of ``count`` exponentiations, or None when exponentiating each
        value directly is cheaper (few uses of these bases so far)."""
        with self._lock:
            out = []
            for spec in specs:
                uses = self._uses.get(spec.key, 0) + count
                self._uses[spec.key] = uses
                cap = choose_window(spec.exponent_bits, int(spec.modulus).bit_length(), self._budget)
                want = best_window(spec.exponent_bits, 4 * uses, cap)
                table = self._tables.get(spec.key)
                if table is None and not table_pays(spec.exponent_bits, 4 * uses, want):
                    out = None
                    continue
                if table is None or (uses > self._planned.get(spec.key, 0) and want > table.window
                                     and _rebuild_pays(spec.exponent_bits, uses, table.window, want)):
                    table = FixedBaseTable(spec.base, spec.modulus, want)
                    self._tables[spec.key] = table
                    self._planned[spec.key] = 4 * uses
                    while len(self._tables) > _TABLE_CACHE_SIZE:
                        self._tables.popitem(last=False)
                if out is not None:
                    out.append(table)
            return out

    def table(self, spec: FixedBaseSpec) -> FixedBaseTable:
        """The table of ``spec`` (made at the widest window the budget allows if there is none)."""
        with self._lock:
            table = self._tables.get(spec.key)
            if table is None:
                window = choose_window(spec.exponent_bits, int(spec.modulus).bit_length(), self._budget)
                table = FixedBaseTable(spec.base, spec.modulus, window)
                self._tables[spec.key] = table
                while len(self._tables) > _TABLE_CACHE_SIZE:
                    self._tables.popitem(last=False)
            else:
                self._tables.move_to_end(spec.key)
            return table

    def _lookup(self, tables: list[FixedBaseTable]) -> list:
        if len(tables) == 1:
            return tables[0].entries
        key = tuple((id(t), t.windows) for t in tables)
        with self._lock:
            combined = self._combined.get(key)
            if combined is None:
                combined = []
                for t in tables:
                    combined.extend(t.entries)
                self._combined[key] = combined
                while len(self._combined) > 4:
                    self._combined.popitem(last=False)
            return combined

    # -- kernel API -------------------------------------------------------------------------
    def powmod(self, bases: Sequence, exponents: Sequence, modulus) -> list:
        m = mpz(modulus)
        powmod = gmpy2.powmod
        return [powmod(b, e, m) for b, e in zip(bases, exponents)]

    def powmod_same_exponent(self, bases: Sequence, exponent, modulus) -> list:
        if len(bases) == 0:
            return []
        return gmpy2.powmod_base_list([mpz(b) for b in bases], mpz(exponent), mpz(modulus))

    def mulmod(self, a: Sequence, b: Sequence, modulus) -> list:
        m = mpz(modulus)
        return [x * y % m for x, y in zip(a, b)]

    def invert(self, values: Sequence, modulus) -> list:
        m = mpz(modulus)
        vals = [mpz(v) for v in values]
        count = len(vals)
        if count < 4:
            return [gmpy2.invert(v, m) for v in vals]
        # Montgomery's batch inversion: one inversion and 3(count - 1) products.
        prefix = [vals[0] % m]
        for v in vals[1:]:
            prefix.append(prefix[-1] * v % m)
        try:
            inv = gmpy2.invert(prefix[-1], m)
        except ZeroDivisionError:
            for i, v in enumerate(vals):
                if gmpy2.gcd(v, m) != 1:
                    raise ZeroDivisionError(f"value at index {i} is not invertible modulo the modulus") from None
            raise
        out = [None] * count
        for i in range(count - 1, 0, -1):
            out[i] = inv * prefix[i - 1] % m
            inv = inv * vals[i] % m
        out[0] = inv
        return out

    def prod_rows(self, values: Sequence, indices: np.ndarray, indptr: np.ndarray, modulus) -> list:
        m = mpz(modulus)
        vals = values if isinstance(values, list) else list(values)
        idx = np.asarray(indices).tolist()
        ptr = np.asarray(indptr).tolist()
        out = []
        append = out.append
        for i in range(len(ptr) - 1):
            s, e = ptr[i], ptr[i + 1]
            if s == e:
                append(ONE)
                continue
            acc = mpz(vals[idx[s]]) % m if e - s == 1 else vals[idx[s]]
            for k in idx[s + 1:e]:
                acc = acc * vals[k] % m
            append(acc)
        return out

    def horner(self, columns: Sequence[Sequence], shift_bits: int, modulus) -> list:
        m = mpz(modulus)
        if not columns:
            return []
        shift = mpz(1) << int(shift_bits)
        acc = [mpz(v) % m for v in columns[-1]]
        for column in reversed(columns[:-1]):
            acc = gmpy2.powmod_base_list(acc, shift, m) if acc else []
            acc = [a * c % m for a, c in zip(acc, column)]
        return acc

    def horner_multiexp(self, bases: Sequence[Sequence[Sequence]], exponents: Sequence[Sequence[Sequence]],
                        shift_bits: int, modulus) -> list:
        """Packing of products of powers: for each position g, Horner over slots j (last first),
        ``acc = acc ** (2 ** shift_bits) * prod_t bases[t][j][g] ** exponents[t][j][g]``.

        The last e bits of each slot's shift are shared with the exponentiations (one joint
        square-and-multiply chain, Shamir's trick), so a slot costs ``shift_bits`` squarings plus
        about e * (1 - 2^-T) products instead of ``shift_bits`` + T * e squarings."""
        m = mpz(modulus)
        T = len(bases)
        if T == 0 or not bases[0]:
            return []
        k, groups = len(bases[0]), len(bases[0][0])
        out = []
        for g in range(groups):
            acc = None
            for j in range(k - 1, -1, -1):
                xs = [mpz(bases[t][j][g]) % m for t in range(T)]
                es = [int(exponents[t][j][g]) for t in range(T)]
                if any(e < 0 for e in es):
                    raise ValueError("horner_multiexp exponents must be non-negative")
                ebits = max(e.bit_length() for e in es)
                if ebits > shift_bits and acc is not None:
                    raise ValueError(f"exponents of {ebits} bits exceed the {shift_bits}-bit slot shift")
                table = [ONE] * (1 << T)  # products of subsets of the bases
                for mask in range(1, 1 << T):
                    low = mask & -mask
                    table[mask] = table[mask ^ low] * xs[low.bit_length() - 1] % m
                if acc is None:
                    acc = ONE
                else:
                    acc = gmpy2.powmod(acc, mpz(1) << (shift_bits - ebits), m)
                for i in range(ebits - 1, -1, -1):
                    acc = acc * acc % m
                    sel = 0
                    for t in range(T):
                        sel |= ((es[t] >> i) & 1) << t
                    if sel:
                        acc = acc * table[sel] % m
            out.append(acc)
        return out

    def gather(self, calls: Sequence[tuple[str, tuple]]) -> list:
        """Run independent calls (one after the other on this core)."""
        return [getattr(self, method)(*args) for method, args in calls]

    def fixed_base_powmod(
        self,
        specs: Sequence[FixedBaseSpec],
        exponents: Sequence[np.ndarray],
        multipliers: Sequence | None,
        modulus,
    ) -> list:
        count = check_fixed_base_args(specs, exponents, multipliers, modulus)
        m = mpz(modulus)
        if count == 0:
            return []

        tables = self._planned_tables(specs, count)
        if tables is None:  # too few uses of these bases yet for a table to pay: GMP's powmod
            values = [[mpz(int.from_bytes(row.tobytes(), "little")) for row in exps] for exps in exponents]
            out = []
            for i in range(count):
                acc = ONE if multipliers is None else mpz(multipliers[i]) % m
                for spec, column in zip(specs, values):
                    acc = acc * gmpy2.powmod(spec.base, column[i], m) % m
                out.append(acc)
            return out
        flat_parts = []
        nonzero_parts = []
        offset = 0
        for table, exps in zip(tables, exponents):
            windows = significant_windows(exps, table.window)
            table.ensure(windows)
            if windows:
                digits = exponent_digits(exps, table.window, windows)
                base_index = offset + (np.arange(windows, dtype=np.int64) << table.window)
                flat_parts.append(digits + base_index)
                nonzero_parts.append(digits != 0)
            offset += len(table.entries)
        lookup = self._lookup(tables)

        if flat_parts:
            flat = np.concatenate(flat_parts, axis=1)
            nonzero = np.concatenate(nonzero_parts, axis=1)
            picks = flat[nonzero].tolist()  # row-major: element by element
            ends = np.cumsum(nonzero.sum(axis=1)).tolist()
        else:
            picks, ends = [], [0] * count

        out = []
        append = out.append
        start = 0
        for i in range(count):
            end = ends[i]
            if multipliers is None:
                if start == end:
                    append(ONE)
                    continue
                acc = lookup[picks[start]]
                first = start + 1
            else:
                acc = mpz(multipliers[i])
                first = start
                if start == end:
                    acc = acc % m
            for j in picks[first:end]:
                acc = acc * lookup[j] % m
            append(acc)
            start = end
        return out


_local: GmpKernel | None = None


def local_kernel() -> GmpKernel:
    """The process's single gmpy2 kernel (its table cache is shared by all callers)."""
    global _local
    if _local is None:
        _local = GmpKernel()
    return _local
