"""The numpy reference of the double-CRT transform (:mod:`shaper.kernels.cyclo`): test oracle for
the native ``shaper._native.CycloContext`` and the fallback where the extension is not built.

It follows the contract in :mod:`shaper.kernels.cyclo` bit for bit but shares no arithmetic with
the native kernels: no NTT and no 2N-th root. Every convolution is exact over the integers by
Kronecker substitution (residues packed into one GMP integer, 192 bits per slot, so that no sum
of up to 2^17 products of 62-bit residues carries into the next slot; one gmpy2 multiplication;
slots unpacked and reduced mod q as Python integers):

* **forward**: a(zeta^j) = c_j sum_i (a_i c_i) d_(j - i) with c_k = zeta^(h k^2), h = 2^-1 mod m
  and d_k = c_k^-1 (Bluestein's identity i j = h (i^2 + j^2 - (i - j)^2) mod m, m odd), the sum
  a *cyclic* convolution of length m (d is periodic mod m);
* **inverse**: g_j = m^-1 d_j sum_u (v_u d_u) c_(j - u) over the units u, the polynomial of
  degree < m with the given values at the primitive m-th roots and zeros at the others; then
  g mod Phi_m = g - Q Phi_m with Q the coefficients m.. of g Psi_m, Psi_m = (X^m - 1) / Phi_m
  (from g = Q Phi_m + a: g Psi_m = Q X^m - Q + a Psi_m, the last two of degree < m).

Phi_m and Psi_m are computed over the integers from the Möbius product
Phi_m = prod_(d | m) (X^d - 1)^mu(m/d). A transform at m = 53261 takes about a second per prime;
nothing here is constant time (the transform runs on public or encrypted data).

The batched arithmetic (``add``, ``sub``, ``mul``, ``mul_acc``, ``mul_scalar``) is exact: sums in
uint64 (operands below 2^62), products in Python integers. ``extend`` computes the y_i exactly,
the rounding term u in float64 exactly as the contract orders it (numpy's IEEE division and
addition, left to right), and x' = sum_i y_i (D / p_i) - u D as a Python integer, then x' mod
each destination prime: the same residues as the native kernel's, which reduces that sum per
destination.

:func:`shaper.kernels.cyclo.context` picks the native class where the extension has it and this
reference otherwise (``SHAPER_NATIVE=off`` forces the reference).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import gmpy2
import numpy as np

from .modq import is_prime
from .modq import prime_factors as modq_prime_factors

#: the largest m: 2m - 2 = 2^17, the largest NTT length of the RNS kernels (native)
MAX_M = (1 << 16) + 1
#: every prime is below this bound (the native Prime's 62-bit limit)
PRIME_BOUND = 1 << 62
_SLOT_WORDS = 3  # 192-bit Kronecker slots: 2 * 62 + 17 bits of sum fit with room to spare


def check_m(m: int) -> int:
    """m as an int: odd, 3 <= m <= 2^16 + 1 (ValueError otherwise, TypeError for a non-integer)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"m must be an odd integer, got {m!r}")
    m = int(m)
    if m % 2 == 0 or not 3 <= m <= MAX_M:
        raise ValueError(f"m must be odd and in [3, {MAX_M}], got {m}")
    return m


def ntt_size(m: int) -> int:
    """The native Bluestein NTT length N: the least power of two >= 2m - 2 (at least 8)."""
    return max(8, 1 << (2 * check_m(m) - 3).bit_length())


def prime_step(m: int) -> int:
    """Every prime of a context for m is 1 mod this, 2 N m (a 2N-th root for the native NTTs of
    length N, an m-th root for the evaluation points)."""
    return 2 * ntt_size(m) * check_m(m)


@functools.cache
def prime_factors(n: int) -> tuple[int, ...]:
    """The distinct prime factors of n >= 1, increasing (cached :func:`.modq.prime_factors`)."""
    return modq_prime_factors(n)


@functools.cache
def _units(m: int) -> np.ndarray:
    k = np.arange(m, dtype=np.int64)
    out = k[np.gcd(k, m) == 1]
    out.flags.writeable = False
    return out


def units(m: int) -> np.ndarray:
    """The units of Z_m in increasing order (int64, read-only): the evaluation order."""
    return _units(check_m(m))


def check_primes(m: int, primes: Sequence[int]) -> tuple[int, ...]:
    """The primes as a tuple of ints after checking each: prime, below 2^62, 1 mod 2 N m,
    distinct (ValueError naming the prime otherwise)."""
    step = prime_step(m)
    out: list[int] = []
    for i, q in enumerate(primes):
        if isinstance(q, bool) or not isinstance(q, (int, np.integer)):
            raise TypeError(f"primes[{i}] must be an integer, got {q!r}")
        q = int(q)
        if not 2 < q < PRIME_BOUND or not is_prime(q):
            raise ValueError(f"primes[{i}] = {q} is not a prime below 2^62")
        if q % step != 1:
            raise ValueError(f"primes[{i}] = {q} is not 1 mod 2 N m = {step} (m = {m}, N = {ntt_size(m)})")
        if q in out:
            raise ValueError(f"primes[{i}] = {q} appears twice")
        out.append(q)
    if not out:
        raise ValueError("a cyclotomic context needs at least one prime")
    return tuple(out)


def _times_xd_minus_1(poly: np.ndarray, d: int) -> np.ndarray:
    out = np.zeros(len(poly) + d, dtype=object)
    out[d:] += poly
    out[:len(poly)] -= poly
    return out


def _over_xd_minus_1(poly: np.ndarray, d: int) -> np.ndarray:
    """poly / (X^d - 1), exact: r_i = r_(i-d) - poly_i, i.e. minus the running sums of poly
    along each residue class mod d."""
    length = len(poly) - d
    rows = -(-length // d)
    padded = np.zeros(rows * d, dtype=object)
    padded[:length] = poly[:length]
    return -np.cumsum(padded.reshape(rows, d), axis=0).reshape(-1)[:length]


@functools.cache
def _cyclotomic_pair(m: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    factors = prime_factors(m)
    phi_up, phi_down, psi_up, psi_down = [], [], [], []
    for r in range(len(factors) + 1):
        for combo in itertools.combinations(factors, r):
            s = math.prod(combo)
            (phi_up if r % 2 == 0 else phi_down).append(m // s)  # mu(s) = (-1)^r
            if s != 1:
                (psi_down if r % 2 == 0 else psi_up).append(m // s)

    def build(up: list[int], down: list[int]) -> tuple[int, ...]:
        poly = np.array([1], dtype=object)
        for d in up:
            poly = _times_xd_minus_1(poly, d)
        for d in down:
            poly = _over_xd_minus_1(poly, d)
        return tuple(int(c) for c in poly)

    return build(phi_up, phi_down), build(psi_up, psi_down)


def cyclotomic(m: int) -> tuple[int, ...]:
    """Phi_m over the integers, coefficients from the constant term up (phi(m) + 1 of them)."""
    return _cyclotomic_pair(check_m(m))[0]


def cofactor(m: int) -> tuple[int, ...]:
    """Psi_m = (X^m - 1) / Phi_m over the integers (m - phi(m) + 1 coefficients)."""
    return _cyclotomic_pair(check_m(m))[1]


def smallest_primitive_root(q: int, m: int) -> int:
    """The smallest primitive m-th root of unity mod the prime q (q = 1 mod m): the root rule of
    :mod:`shaper.kernels.cyclo`. Found as x = g^((q-1)/m) for the first g = 2, 3, ... of order
    m, then the least x^u over the units u."""
    q, m = int(q), int(m)
    if (q - 1) % m:
        raise ValueError(f"{q} is not 1 mod m = {m}")
    exponent, factors = (q - 1) // m, prime_factors(m)
    g = 2
    while True:
        x = pow(g, exponent, q)
        if all(pow(x, m // f, q) != 1 for f in factors):
            break
        g += 1
    unit = np.zeros(m, dtype=bool)
    unit[_units(m)] = True
    best, cur = q, 1
    for j in range(1, m):
        cur = cur * x % q
        if unit[j] and cur < best:
            best = cur
    return best


# -- exact convolutions (Kronecker substitution) --------------------------------------------------


def _pack(values: np.ndarray) -> gmpy2.mpz:
    """sum_i values[i] 2^(192 i) for residues (anything numpy turns into uint64)."""
    slots = np.zeros((len(values), _SLOT_WORDS), dtype="<u8")
    slots[:, 0] = np.asarray(values, dtype=np.uint64)
    return gmpy2.mpz.from_bytes(slots.tobytes(), "little")


def _unpack_mod(value: gmpy2.mpz, count: int, q: int) -> np.ndarray:
    """The first ``count`` 192-bit slots of a non-negative integer, each reduced mod q (object)."""
    raw = value.to_bytes(count * _SLOT_WORDS * 8, "little") if value else bytes(count * _SLOT_WORDS * 8)
    words = np.frombuffer(raw, dtype="<u8").reshape(count, _SLOT_WORDS).astype(object)
    return (words[:, 2] * (pow(2, 128, q)) + words[:, 1] * (pow(2, 64, q)) + words[:, 0]) % q


def linear_product(x: np.ndarray, y: np.ndarray, q: int) -> np.ndarray:
    """The coefficients of x(X) y(X) mod q (object array, len(x) + len(y) - 1 entries), exact."""
    return _unpack_mod(_pack(x) * _pack(y), len(x) + len(y) - 1, q)


def cyclic_product(x: np.ndarray, y: np.ndarray, q: int) -> np.ndarray:
    """x(X) y(X) mod (X^n - 1, q) for two length-n sequences (object array)."""
    n = len(x)
    full = linear_product(x, y, q)
    out = full[:n].copy()
    out[:n - 1] += full[n:]
    return out % q


class _Prime:
    """The chirps and the reduction polynomials of one prime."""

    def __init__(self, m: int, q: int) -> None:
        self.q = q
        self.zeta = smallest_primitive_root(q, m)
        powers = [1] * m
        for e in range(1, m):
            powers[e] = powers[e - 1] * self.zeta % q
        h = (m + 1) // 2
        k = np.arange(m, dtype=np.int64)
        exponents = k * k % m * h % m
        table = np.array(powers, dtype=object)
        self.c = table[exponents]  # zeta^(h k^2)
        self.d = table[(m - exponents) % m]  # its inverse
        self.m_inv = pow(m, -1, q)
        phi, psi = _cyclotomic_pair(m)
        self.phi_poly = np.array([c % q for c in phi], dtype=object)
        self.psi_poly = np.array([c % q for c in psi], dtype=object)


class CycloReference:
    """The transform of :mod:`shaper.kernels.cyclo` in numpy and Python integers, for odd m and
    primes q = 1 mod 2 N m (:func:`check_primes`). ``forward``/``inverse`` take and return
    ``(len(limbs), phi)`` uint64 arrays; the face (:class:`shaper.kernels.cyclo.CycloContext`)
    checks shapes and limbs, this class checks that rows are reduced."""

    def __init__(self, m: int, primes: Sequence[int]) -> None:
        self.m = check_m(m)
        self.primes = check_primes(self.m, primes)
        self.units = units(self.m)
        self.phi = len(self.units)
        self._tables = [_Prime(self.m, q) for q in self.primes]
        self.roots = tuple(t.zeta for t in self._tables)

    def __repr__(self) -> str:
        return f"CycloReference(m={self.m}, primes={list(self.primes)})"

    def _rows(self, a: np.ndarray, limbs: Sequence[int], what: str) -> None:
        assert a.shape == (len(limbs), self.phi), (a.shape, len(limbs), self.phi)
        for r, limb in enumerate(limbs):
            q = self.primes[limb]
            if len(a[r]) and int(a[r].max()) >= q:
                entry = int(np.flatnonzero(a[r] >= np.uint64(q))[0])
                raise ValueError(f"{what}: row {r} (entry {entry}) is not reduced mod its prime {q}")

    def _batch_rows(self, a: np.ndarray, limbs: Sequence[int], what: str) -> None:
        """Raises ValueError naming the first unreduced entry of a (..., L, phi) operand: its row
        (and item, the flat index over the leading axes, when it holds more than one)."""
        count = len(limbs)
        q = np.array([self.primes[limb] for limb in limbs], dtype=np.uint64)[:, None]
        bad = (a >= q).reshape(-1, self.phi)
        if bad.size and bad.any():
            r = int(np.flatnonzero(bad.any(axis=1))[0])
            entry = int(np.flatnonzero(bad[r])[0])
            item = f" of item {r // count}" if bad.shape[0] > count else ""
            raise ValueError(f"{what}: row {r % count}{item} (entry {entry}) is not reduced mod its prime "
                             f"{self.primes[limbs[r % count]]}")

    def _q_column(self, limbs: Sequence[int], dtype=np.uint64) -> np.ndarray:
        return np.array([self.primes[limb] for limb in limbs], dtype=dtype)[:, None]

    def add(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """a + b mod each row's prime (numpy broadcasting over the leading axes)."""
        self._batch_rows(a, limbs, "a")
        self._batch_rows(b, limbs, "b")
        s = a + b  # < 2^63: no wrap
        return np.minimum(s, s - self._q_column(limbs))  # s - q wraps to a huge value when s < q

    def sub(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """a - b mod each row's prime."""
        self._batch_rows(a, limbs, "a")
        self._batch_rows(b, limbs, "b")
        d = a - b  # wraps when a < b; adding q brings it back below q
        return np.minimum(d, d + self._q_column(limbs))

    def mul(self, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """a b mod each row's prime (Python integers)."""
        self._batch_rows(a, limbs, "a")
        self._batch_rows(b, limbs, "b")
        return (a.astype(object) * b.astype(object) % self._q_column(limbs, object)).astype(np.uint64)

    def mul_acc(self, acc: np.ndarray, a: np.ndarray, b: np.ndarray, limbs: Sequence[int]) -> None:
        """In place: acc += a b mod each row's prime (acc unchanged when an operand is refused)."""
        for x, what in ((acc, "acc"), (a, "a"), (b, "b")):
            self._batch_rows(x, limbs, what)
        total = acc.astype(object) + a.astype(object) * b.astype(object)
        acc[...] = (total % self._q_column(limbs, object)).astype(np.uint64)

    def mul_scalar(self, a: np.ndarray, scalars: Sequence[int], limbs: Sequence[int]) -> np.ndarray:
        """Row l times scalars[l] (reduced mod primes[limbs[l]])."""
        for i, (s, limb) in enumerate(zip(scalars, limbs, strict=True)):
            if not 0 <= int(s) < self.primes[limb]:
                raise ValueError(f"scalars[{i}] = {s} is not reduced mod its prime {self.primes[limb]}")
        self._batch_rows(a, limbs, "a")
        column = np.array([int(s) for s in scalars], dtype=object)[:, None]
        return (a.astype(object) * column % self._q_column(limbs, object)).astype(np.uint64)

    def extend(self, residues: np.ndarray, src: Sequence[int], dst: Sequence[int]) -> np.ndarray:
        """The centred fast basis extension of :mod:`shaper.kernels.cyclo` (``extend``): residues
        (len(src), phi) mod the distinct primes p_i of ``src`` -> (len(dst), phi) mod those of
        ``dst``."""
        self._batch_rows(residues, src, "residues")
        ps = [self.primes[i] for i in src]
        ts = [self.primes[j] for j in dst]
        out = np.empty((len(ts), self.phi), dtype=np.uint64)
        if len(ps) == 1:  # one prime: the centred lift is exact
            x = residues[0].astype(np.int64)
            x = np.where(x > ps[0] // 2, x - ps[0], x)
            for j, t in enumerate(ts):
                out[j] = (x % t).astype(np.uint64)  # int64 % t >= 0
            return out
        inv, hats, d = extension_weights(tuple(ps))
        ys = [(residues[i].astype(object) * inv[i] % p).astype(np.uint64) for i, p in enumerate(ps)]
        frac = ys[0].astype(np.float64) / float(ps[0])
        for y, p in zip(ys[1:], ps[1:]):
            frac = frac + y.astype(np.float64) / float(p)  # left to right, as the contract says
        u = np.floor(frac + 0.5).astype(np.int64)
        x = sum(y.astype(object) * h for y, h in zip(ys, hats)) - u.astype(object) * d
        for j, t in enumerate(ts):
            out[j] = (x % t).astype(np.uint64)
        return out

    def divide_round(self, a: np.ndarray, limbs: Sequence[int], drop: Sequence[int]) -> np.ndarray:
        """ring.py's ``Ring.divide_round`` step by step: (a - delta) D^-1 on the limbs that
        ``drop`` leaves, delta = 2 forward(extend(inverse(a's dropped rows) 2^-1))."""
        self._batch_rows(a, limbs, "a")
        limbs, drop = list(limbs), list(drop)
        keep = [x for x in limbs if x not in drop]
        pos_drop, pos_keep = [limbs.index(x) for x in drop], [limbs.index(x) for x in keep]
        half = [pow(2, -1, self.primes[x]) for x in drop]
        d_inv = [pow(math.prod(self.primes[z] for z in drop) % self.primes[x], -1, self.primes[x]) for x in keep]
        flat = a.reshape((-1,) + a.shape[-2:])
        out = np.empty((flat.shape[0], len(keep), self.phi), dtype=np.uint64)
        for i, x in enumerate(flat):
            top = self.inverse(np.ascontiguousarray(x[pos_drop]), drop)
            lift = self.extend(self.mul_scalar(top, half, drop), drop, keep)
            delta = self.forward(self.add(lift, lift, keep), keep)
            out[i] = self.mul_scalar(self.sub(x[pos_keep], delta, keep), d_inv, keep)
        return out.reshape(a.shape[:-2] + (len(keep), self.phi))

    def digits(self, a: np.ndarray, limbs: Sequence[int], groups: Sequence[Sequence[int]],
               target: Sequence[int]) -> np.ndarray:
        """ring.py's ``Ring.digits``: per group G, a's own rows on G and forward(extend(a's
        coefficients on G)) on the other target limbs -> (len(groups), len(target), phi)."""
        self._batch_rows(a, limbs, "a")
        limbs, target = list(limbs), list(target)
        out = np.empty((len(groups), len(target), self.phi), dtype=np.uint64)
        for gi, group in enumerate(groups):
            group = list(group)
            rows = np.ascontiguousarray(a[[limbs.index(x) for x in group]])
            others = [t for t in target if t not in group]
            out[gi, [target.index(t) for t in group]] = rows
            if others:
                lift = self.extend(self.inverse(rows, group), group, others)
                out[gi, [target.index(t) for t in others]] = self.forward(lift, others)
        return out

    def forward(self, coeffs: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """out[l, i] = a_l(zeta^units[i]) mod primes[limbs[l]]."""
        self._rows(coeffs, limbs, "coeffs")
        out = np.empty(coeffs.shape, dtype=np.uint64)
        m, phi, u = self.m, self.phi, self.units
        for r, limb in enumerate(limbs):
            t = self._tables[limb]
            b = np.zeros(m, dtype=object)
            b[:phi] = coeffs[r].astype(object) * t.c[:phi] % t.q
            conv = cyclic_product(b, t.d, t.q)
            out[r] = (conv[u] * t.c[u] % t.q).astype(np.uint64)
        return out

    def inverse(self, values: np.ndarray, limbs: Sequence[int]) -> np.ndarray:
        """The coefficients (degree < phi) of the polynomial with these values."""
        self._rows(values, limbs, "values")
        out = np.empty(values.shape, dtype=np.uint64)
        m, phi, u = self.m, self.phi, self.units
        k = m - phi
        for r, limb in enumerate(limbs):
            t = self._tables[limb]
            b = np.zeros(m, dtype=object)
            b[u] = values[r].astype(object) * t.d[u] % t.q
            g = cyclic_product(b, t.c, t.q) * t.d * t.m_inv % t.q  # degree < m
            quotient = linear_product(g[phi:], t.psi_poly, t.q)[k:2 * k]
            low = linear_product(quotient, t.phi_poly, t.q)[:phi]
            out[r] = ((g[:phi] - low) % t.q).astype(np.uint64)
        return out


@functools.lru_cache(maxsize=64)
def extension_weights(primes: tuple[int, ...]) -> tuple[list[int], list[int], int]:
    """For distinct primes p_i with product D: (D/p_i)^-1 mod p_i, D/p_i (Python ints) and D."""
    d = math.prod(primes)
    hats = [d // p for p in primes]
    return [pow(h % p, -1, p) for h, p in zip(hats, primes, strict=True)], hats, d
