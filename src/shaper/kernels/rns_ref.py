"""The numpy reference of the RNS polynomial kernels (:mod:`shaper.kernels.rns`): test oracle
for the native ``shaper._native.RnsContext`` and the fallback where the extension is not built.

It follows the contract in :mod:`shaper.kernels.rns` bit for bit and is written to be obviously
correct rather than fast: residues are turned into numpy arrays of Python integers
(``dtype=object``), so every modular product is exact, and each operation is one vectorised
expression over whole rows (the NTT one per butterfly stage). A CKKS-sized operation (N = 2^12,
four primes) takes milliseconds to tens of milliseconds. Nothing here is constant time; the
kernels compute on public or already-encrypted data.

:func:`shaper.kernels.rns.rns_context` picks the native class where the extension has it and
this reference otherwise (``SHAPER_NATIVE=off`` forces the reference).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .modq import galois_permutation, is_prime, smallest_root


#: every prime is below this bound (the contract's 62-bit limit)
PRIME_BOUND = 1 << 62



#: ring degrees a context accepts (the native kernels' range)
MIN_N, MAX_N = 8, 1 << 17


def _check_n(n: int, low: int = MIN_N, high: int = MAX_N) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an integer power of two, got {n!r}")
    n = int(n)
    if not low <= n <= high or n & (n - 1):
        raise ValueError(f"n must be a power of two from {low} to {high}, got {n}")
    return n


def _bit_reverse(n: int) -> list[int]:
    bits = n.bit_length() - 1
    return [int(format(k, f"0{bits}b")[::-1], 2) if bits else 0 for k in range(n)]


class RnsReference:
    """RNS polynomial kernels over Z_q[X]/(X^n + 1) for the primes ``primes``, in numpy.

    Arrays are ``uint64``, C-contiguous, shaped ``(..., len(mods), n)``; ``mods`` lists indices
    into ``primes`` (one per row); entries must be reduced. Every operation except the in-place
    ``ntt``, ``intt`` and ``mul_acc`` returns a new array. See :mod:`shaper.kernels.rns` for
    the definitions."""

    def __init__(self, n: int, primes: Sequence[int], roots: Sequence[int] | None = None) -> None:
        n = _check_n(n)  # a power of two in [MIN_N, MAX_N]
        primes = [int(q) for q in primes]
        if not primes:
            raise ValueError("at least one prime is needed")
        for i, q in enumerate(primes):
            if not 2 < q < PRIME_BOUND or not is_prime(q):
                raise ValueError(f"primes[{i}] = {q} is not a prime below 2^62")
            if q % (2 * n) != 1:
                raise ValueError(f"primes[{i}] = {q} is not 1 mod 2n = {2 * n}")
            if q in primes[:i]:
                raise ValueError(f"primes[{i}] = {q} appears twice")
        if roots is None:
            roots = [smallest_root(q, n) for q in primes]
        else:
            roots = [int(r) for r in roots]
            if len(roots) != len(primes):
                raise ValueError(f"{len(roots)} roots for {len(primes)} primes")
            for i, (psi, q) in enumerate(zip(roots, primes)):
                if not 0 < psi < q or pow(psi, n, q) != q - 1:
                    raise ValueError(f"roots[{i}] = {psi} is not a primitive {2 * n}-th root of unity mod {q}")
        self._n = n
        self._primes = primes
        self._roots = roots
        brv = _bit_reverse(n)
        fwd, inv = [], []
        for psi, q in zip(roots, primes):
            powers = [1] * n
            for k in range(1, n):
                powers[k] = powers[k - 1] * psi % q
            psi_inv = pow(psi, -1, q)
            inv_powers = [1] * n
            for k in range(1, n):
                inv_powers[k] = inv_powers[k - 1] * psi_inv % q
            fwd.append([powers[b] for b in brv])  # psi^brv(k): the Cooley–Tukey twiddles
            inv.append([inv_powers[b] for b in brv])
        self._fwd = _objects(fwd)  # (R, n)
        self._inv = _objects(inv)
        self._q = _objects(primes)  # (R,)
        self._q64 = np.array(primes, dtype=np.uint64)
        self._n_inv = _objects([pow(n, -1, q) for q in primes])

    # -- properties -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self._n

    @property
    def primes(self) -> list[int]:
        return list(self._primes)

    @property
    def roots(self) -> list[int]:
        return list(self._roots)

    def __repr__(self) -> str:
        return f"RnsReference(n={self._n}, primes={self._primes})"

    # -- checks and conversions ---------------------------------------------------------------
    def _mods(self, mods: Sequence[int]) -> list[int]:
        out = []
        for m in mods:
            if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
                raise TypeError(f"mods must be prime indices, got {m!r}")
            m = int(m)
            if not 0 <= m < len(self._primes):
                raise ValueError(f"prime index {m} out of range (the context has {len(self._primes)} primes)")
            out.append(m)
        if not out:
            raise ValueError("mods is empty")
        return out

    def _array(self, a, name: str, mods: list[int], lead: tuple | None = None) -> np.ndarray:
        """Check a (..., len(mods), n) reduced uint64 array; ``lead``: the required leading shape."""
        if not isinstance(a, np.ndarray) or a.dtype != np.uint64:
            raise TypeError(f"{name} must be a numpy uint64 array")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous")
        if a.ndim < 2 or a.shape[-2:] != (len(mods), self._n) or (lead is not None and a.shape[:-2] != lead):
            want = ("..." if lead is None else ", ".join(map(str, lead))) + f", {len(mods)}, {self._n}"
            raise ValueError(f"{name} has shape {a.shape}, expected ({want})")
        over = (a >= self._q64[mods][:, None]).reshape(-1, len(mods), self._n).any(axis=(0, 2))
        if over.any():
            row = int(np.flatnonzero(over)[0])
            raise ValueError(f"{name}: row {row} is not reduced mod primes[{mods[row]}] = {self._primes[mods[row]]}")
        return a

    def _q_rows(self, mods: list[int]) -> np.ndarray:
        return self._q[mods][:, None]  # (r, 1) object, broadcasts over (..., r, n)

    # -- transforms (object arrays in, object arrays out) ---------------------------------------
    def _ntt(self, x: np.ndarray, mods: list[int]) -> np.ndarray:
        """Negacyclic Cooley–Tukey NTT of (..., r, n) residues; output index k holds
        a(psi^(2 brv(k) + 1)). Stage with m blocks: block i holds pairs (j, j + t), t = n / 2m,
        twiddled by psi^brv(m + i)."""
        n, lead = self._n, x.shape[:-1]
        q = self._q[mods][:, None, None]
        twiddles = self._fwd[mods]
        m = 1
        while m < n:
            t = n // (2 * m)
            x = x.reshape(*lead, m, 2, t)
            u, v = x[..., 0, :], x[..., 1, :] * twiddles[:, m:2 * m, None] % q
            x = np.stack([(u + v) % q, (u - v) % q], axis=-2)
            m *= 2
        return x.reshape(*lead, n)

    def _intt(self, x: np.ndarray, mods: list[int]) -> np.ndarray:
        """Inverse of :meth:`_ntt` (Gentleman–Sande with psi^-brv(k), then a factor n^-1)."""
        n, lead = self._n, x.shape[:-1]
        q = self._q[mods][:, None, None]
        twiddles = self._inv[mods]
        h = n // 2
        while h >= 1:
            t = n // (2 * h)
            x = x.reshape(*lead, h, 2, t)
            u, v = x[..., 0, :], x[..., 1, :]
            x = np.stack([(u + v) % q, (u - v) * twiddles[:, h:2 * h, None] % q], axis=-2)
            h //= 2
        return x.reshape(*lead, n) * self._n_inv[mods][:, None] % self._q_rows(mods)

    def _centred(self, x: np.ndarray, mods: list[int]) -> np.ndarray:
        q = self._q_rows(mods)
        return np.where(x > (q - 1) // 2, x - q, x)

    def _divide_round_last(self, x: np.ndarray, mods: list[int]) -> np.ndarray:
        """Object-array form of :meth:`divide_round_last`."""
        last, rest = mods[-1], mods[:-1]
        t = self._centred(self._intt(x[..., -1:, :], [last]), [last])  # (..., 1, n)
        q = self._q_rows(rest)
        t_ntt = self._ntt(t % q, rest)  # broadcast the one row over the remaining primes
        inv_last = _objects([pow(self._primes[last], -1, self._primes[m]) for m in rest])[:, None]
        return (x[..., :-1, :] - t_ntt) * inv_last % q

    # -- kernels --------------------------------------------------------------------------------
    def ntt(self, a: np.ndarray, mods: Sequence[int]) -> None:
        """Coefficients -> NTT form, in place."""
        mods = self._mods(mods)
        self._array(a, "a", mods)
        a[...] = _u64(self._ntt(_obj(a), mods))

    def intt(self, a: np.ndarray, mods: Sequence[int]) -> None:
        """NTT form -> coefficients, in place."""
        mods = self._mods(mods)
        self._array(a, "a", mods)
        a[...] = _u64(self._intt(_obj(a), mods))

    def _pair(self, a, b, mods: Sequence[int]) -> tuple[np.ndarray, np.ndarray, list[int]]:
        mods = self._mods(mods)
        self._array(a, "a", mods)
        self._array(b, "b", mods, a.shape[:-2])
        return _obj(a), _obj(b), mods

    def add(self, a: np.ndarray, b: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        x, y, mods = self._pair(a, b, mods)
        return _u64((x + y) % self._q_rows(mods))

    def sub(self, a: np.ndarray, b: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        x, y, mods = self._pair(a, b, mods)
        return _u64((x - y) % self._q_rows(mods))

    def neg(self, a: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        mods = self._mods(mods)
        self._array(a, "a", mods)
        return _u64(-_obj(a) % self._q_rows(mods))

    def mul(self, a: np.ndarray, b: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        """Pointwise product (the negacyclic product of NTT-form operands)."""
        x, y, mods = self._pair(a, b, mods)
        return _u64(x * y % self._q_rows(mods))

    def mul_acc(self, acc: np.ndarray, a: np.ndarray, b: np.ndarray, mods: Sequence[int]) -> None:
        """``acc += a * b`` pointwise, in place."""
        x, y, mods = self._pair(a, b, mods)
        self._array(acc, "acc", mods, a.shape[:-2])
        acc[...] = _u64((_obj(acc) + x * y) % self._q_rows(mods))

    def mul_scalar(self, a: np.ndarray, scalars: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        """Row i times ``scalars[i]`` (reduced mod that row's prime)."""
        mods = self._mods(mods)
        self._array(a, "a", mods)
        if not isinstance(scalars, np.ndarray) or scalars.dtype != np.uint64:
            raise TypeError("scalars must be a numpy uint64 array")
        if scalars.shape != (len(mods),):
            raise ValueError(f"scalars has shape {scalars.shape}, expected ({len(mods)},)")
        over = np.flatnonzero(scalars >= self._q64[mods])
        if over.size:
            i = int(over[0])
            raise ValueError(f"scalars[{i}] is not reduced mod primes[{mods[i]}] = {self._primes[mods[i]]}")
        return _u64(_obj(a) * _obj(scalars)[:, None] % self._q_rows(mods))

    def from_signed(self, x: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        """Signed integers x (int64, (..., n), |x| < 2^62) reduced mod each prime of ``mods``:
        (..., len(mods), n) uint64, coefficient form."""
        if len(mods) == 0:
            raise ValueError("mods must name at least one prime")
        for m in mods:
            if not 0 <= int(m) < len(self._primes):
                raise ValueError(f"prime index {m} is outside 0..{len(self._primes) - 1}")
        if not isinstance(x, np.ndarray) or x.dtype != np.int64:
            raise TypeError("x must be a numpy int64 array")
        if x.ndim == 0 or x.shape[-1] != self._n:
            raise ValueError(f"x's last axis must have length n = {self._n}, got shape {x.shape}")
        big = np.flatnonzero((x >= 1 << 62) | (x <= -(1 << 62)))
        if big.size:
            raise ValueError(f"x[{int(big[0])}] = {int(x.ravel()[big[0]])} is not below 2^62 in magnitude")
        return np.stack([x % np.int64(self._primes[int(m)]) for m in mods], axis=-2).astype(np.uint64)

    def tensor(self, a: np.ndarray, b: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        """(a0, a1) x (b0, b1) -> (a0 b0, a0 b1 + a1 b0, a1 b1); shapes (2, r, n) -> (3, r, n)."""
        mods = self._mods(mods)
        self._array(a, "a", mods, (2,))
        self._array(b, "b", mods, (2,))
        x, y, q = _obj(a), _obj(b), self._q_rows(mods)
        return _u64(np.stack([x[0] * y[0] % q, (x[0] * y[1] + x[1] * y[0]) % q, x[1] * y[1] % q]))

    def automorph(self, a: np.ndarray, g: int) -> np.ndarray:
        """sigma_g (X -> X^g) on NTT-form rows: ``out[..., k] = a[..., p[k]]`` with p from
        :func:`~shaper.kernels.rns.galois_permutation`; the permutation needs no primes."""
        if not isinstance(a, np.ndarray) or a.dtype != np.uint64:
            raise TypeError("a must be a numpy uint64 array")
        if not a.flags.c_contiguous:
            raise ValueError("a must be C-contiguous")
        if a.ndim < 1 or a.shape[-1] != self._n:
            raise ValueError(f"a has shape {a.shape}, expected (..., {self._n})")
        return np.ascontiguousarray(a[..., galois_permutation(self._n, _galois(g))])

    def divide_round_last(self, a: np.ndarray, mods: Sequence[int]) -> np.ndarray:
        """round(a / q_last) on NTT-form rows over ``mods``: shape (..., r, n) -> (..., r-1, n)."""
        mods = self._mods(mods)
        if len(mods) < 2:
            raise ValueError("divide_round_last needs at least two primes")
        self._array(a, "a", mods)
        return _u64(self._divide_round_last(_obj(a), mods))

    def decompose(self, a: np.ndarray, mods: Sequence[int], sp: int) -> np.ndarray:
        """Key-switching digits of an NTT-form (..., l+1, n) row set: (..., l+1, l+2, n), digit
        j = the centred lift of row j in NTT form over ``mods + [sp]``."""
        mods = self._mods(mods)
        ext = self._extended(mods, sp)
        self._array(a, "a", mods)
        lifted = self._centred(self._intt(_obj(a), mods), mods)  # (..., l+1, n) signed coefficients
        per_prime = lifted[..., :, None, :] % self._q_rows(ext)  # (..., l+1, l+2, n)
        return _u64(self._ntt(per_prime, ext))

    def key_switch(self, digits: np.ndarray, key: np.ndarray, mods: Sequence[int], sp: int, g: int = 1) -> np.ndarray:
        """``divide_round_last`` over ``mods + [sp]`` of sum_j sigma_g(digits[j]) * key[mods[j], c,
        mods + [sp]]; digits (l+1, l+2, n), key (D, 2, len(primes), n) indexed by context prime
        -> (2, l+1, n)."""
        mods = self._mods(mods)
        ext = self._extended(mods, sp)
        g = _galois(g)
        self._array(digits, "digits", ext, (len(mods),))
        if not isinstance(key, np.ndarray) or key.dtype != np.uint64:
            raise TypeError("key must be a numpy uint64 array")
        if not key.flags.c_contiguous:
            raise ValueError("key must be C-contiguous")
        R = len(self._primes)
        if key.ndim != 4 or key.shape[1:] != (2, R, self._n) or key.shape[0] <= max(mods):
            raise ValueError(f"key has shape {key.shape}, expected (D > {max(mods)}, 2, {R}, {self._n})")
        used = np.ascontiguousarray(key[mods][:, :, ext])  # (l+1, 2, l+2, n)
        self._array(used, "key", ext)
        d = _obj(digits)
        if g != 1:
            d = d[..., galois_permutation(self._n, g)]
        acc = (d[:, None] * _obj(used)).sum(axis=0) % self._q_rows(ext)  # (2, l+2, n)
        return _u64(self._divide_round_last(acc, ext))

    def _extended(self, mods: list[int], sp: int) -> list[int]:
        (sp,) = self._mods([sp])
        if sp in mods:
            raise ValueError(f"the special prime {sp} is also in mods")
        return mods + [sp]


def _galois(g) -> int:
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
        raise TypeError(f"Galois element must be an odd integer, got {g!r}")
    return int(g)


def _objects(values) -> np.ndarray:
    """Python integers into an object array (exact arithmetic)."""
    out = np.empty(np.shape(values), dtype=object)
    out[...] = values
    return out


def _obj(a: np.ndarray) -> np.ndarray:
    return a.astype(object)  # uint64 -> Python ints


def _u64(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.astype(np.uint64))


__all__ = ["MAX_N", "MIN_N", "PRIME_BOUND", "RnsReference"]
