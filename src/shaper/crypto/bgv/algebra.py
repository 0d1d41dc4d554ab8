"""The plaintext algebra ("PAlgebra") of GHS-style BGV with p = 2: GF(2)[X]/Φ_m(X) for odd m as a
vector of slots in GF(2^d) (ghs.md §2, §3, §7 step 1; HElib's ``PAlgebra``).

Ring and slots
--------------
Let m > 1 be odd, d the multiplicative order of 2 mod m, φ = φ(m) and ℓ = φ/d. Φ_m splits mod 2
into ℓ irreducible factors of degree d, so by the CRT the plaintext ring R_2 = GF(2)[X]/Φ_m is a
product of ℓ copies of GF(2^d), the *slots*. We fix one field GF(2^d) = GF(2)[Y]/(P(Y)) (P the
smallest irreducible of degree d, :func:`gf2.field`) and one element ζ of multiplicative order m
in it (``zeta``: the first of x = Y, Y+1, ... whose power x^((2^d-1)/m) has order exactly m). The
primitive m-th roots of unity are the ζ^t, t ∈ Z_m^*, and

    slot value of a(X) at representative t  =  a(ζ^t) ∈ GF(2^d).

Since a(ζ^(2t)) = a(ζ^t)^2 (coefficients in GF(2)), t and 2t give conjugate values: one
representative per coset of ⟨2⟩ in Z_m^* suffices, and the ℓ slots are the cosets Z_m^*/⟨2⟩.

Hypercube
---------
Generators g_0, g_1, ... of Z_m^*/⟨2⟩ are chosen as HElib's ``findGenerators`` does: repeatedly take
the largest order ord_i in the quotient by ⟨2, g_0..g_{i-1}⟩; among the elements of that order
(scanned from the smallest integer up) take the first with g^ord ≡ 1 mod m ("good" dimension), or
failing that the first with g^ord a power of 2 ("bad" dimension; ``frob_twist[i]`` = that power's
exponent j, g^ord ≡ 2^j). The slot with hypercube coordinates (e_0, e_1, ...), 0 <= e_i < ord_i,
has index given by the mixed radix with e_0 most significant (``np.ravel_multi_index(e, ords)``)
and representative t = ∏ g_i^(e_i) mod m (``reps``).

Automorphisms
-------------
κ_u: a(X) ↦ a(X^u) for a unit u sends slot values to

    new slot i = Frobenius^j(old slot k)   where  u·t_i ≡ 2^j·t_k (mod m),

because κ_u(a)(ζ^(t_i)) = a(ζ^(u t_i)) = a(ζ^(2^j t_k)) = a(ζ^(t_k))^(2^j). Frobenius^j is
κ_(2^j) (every slot raised to 2^j, nothing moves). Note the direction: with *this* slot convention
(value at ζ^t, as in the design brief) κ_(g^k) moves the value at coordinate e + k to e, i.e.
rotates *backwards*; HElib, whose slot t is a mod F_t with F_t the minimal polynomial of ζ^(1/t),
has the opposite sign. :meth:`Algebra.rotation` hides this: rotating by +k along dimension i (the
value at e_i moves to e_i + k mod ord_i) is

    good dimension:  κ_u(x) with u = g_i^(-k)
    any dimension:   κ_u1(x·M1) + κ_u2(x·M2),  u1 = g_i^(-k), u2 = g_i^(ord_i - k),

M1 (M2) the 0/1 mask of the *source* slots with e_i < ord_i - k (>= ord_i - k), i.e. the masks are
applied BEFORE the automorphism. Both terms land exactly on the representative of the target
(u1·t(e') = t(e' - k) for e' >= k and u2·t(e') = t(e' + ord_i - k) for e' < k, as integers mod m),
so there is no Frobenius twist to undo; on a good dimension u1 = u2 and one automorphism suffices.
(Masks could equally be applied after: κ_u(x·M) = κ_u(x)·κ_u(M), and κ_u1(M1) is the 0/1 mask of
targets with e' >= k.)

Encoding and decoding
---------------------
decode(a) = (a(ζ^t))_t is a DFT of length m over GF(2^d) restricted to the representatives;
encode is its inverse: spread each slot value v_s to the whole coset (A[2^j t_s] = v_s^(2^j)),
put A = 0 at the non-units, take the inverse DFT b_i = Σ_k A_k ζ^(-ik) (1/m = 1 in characteristic
2, m odd) — a degree < m polynomial over GF(2) (the coset spreading makes it Frobenius-invariant)
with b(ζ^k) = A_k — and reduce it mod Φ_m by xor long division on Python ints.
The DFT is Good–Thomas (prime-factor): m = ∏ n_j over its prime-power factors, index i ↔ (i mod n_j)_j,
and ζ^(ik) = ∏ ω_j^((i mod n_j)(k mod n_j)) with ω_j = ζ^(e_j), e_j the CRT idempotents, so it is a
multi-dimensional DFT with naive transforms along each axis: m·Σ n_j multiply-adds. The longest axis
touches the GF(2) side (input bits for decode, output bits for encode) and is done as one float32
matrix product over GF(2) (bits × the bit-matrix of x ↦ Σ x_i ω^(ik)); the others by byte-table
constant multiplications. Rings whose m has a large prime-power factor n (thousands) pay m·n·d for
that axis; the ghs.md rings (largest factor 241 or 257) take well under a second.

AES embedding
-------------
When 8 | d, GF(2^8) = GF(2)[Y]/(Y^8+Y^4+Y^3+Y+1) embeds into GF(2^d) by Y ↦ ρ, ρ the root of the AES
polynomial in GF(2^d) with the smallest integer encoding (:meth:`Algebra.embed`, :meth:`extract`).
It is a field homomorphism, so it commutes with Frobenius and with every automorphism.

Everything here is plaintext algebra: no secrets, no I/O, not constant-time.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import gf2

__all__ = ["Algebra", "algebra", "AES_POLY", "HELIB_AES_GENS"]

AES_POLY = 0x11B  # Y^8 + Y^4 + Y^3 + Y + 1 (FIPS-197 §4.2)

# HElib's explicit hypercubes (misc/aes/Test_AES.cpp mValues), for algebra(m, gens=HELIB_AES_GENS[m]):
# orders 771: 32 (bad); 4369: 16 (good), 16 (bad); 21845: 16, 4 (good), 16 (bad);
# 28679: 16, 6 (good), 10 (bad); 53261: 16, 12 (good), 10 (bad); 65281: 96 (good), 14 (bad).
HELIB_AES_GENS: dict[int, tuple[int, ...]] = {
    771: (5,),
    4369: (258, 4115),
    21845: (8996, 17477, 21591),
    28679: (15184, 4098, 28204),
    53261: (43863, 28680, 15913),
    65281: (43073, 22214),
}

# bit-matrices for the GF(2) stage larger than this (entries) are built per call instead of cached
_MATRIX_CACHE_LIMIT = 1 << 25
_MATRIX_CHUNK = 1 << 23


def _check_modulus(m: object) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise ValueError(f"the cyclotomic index m must be an int, got {type(m).__name__}")
    m = int(m)
    if m <= 1:
        raise ValueError(f"the cyclotomic index m must be > 1, got {m}")
    if m % 2 == 0:
        raise ValueError(f"the cyclotomic index m must be odd for plaintext modulus 2, got {m}")
    if m >= 1 << 31:
        raise ValueError(f"the cyclotomic index m must be < 2^31 (int64 products mod m), got {m}")
    return m


def _powmod_array(base: np.ndarray, e: int, m: int) -> np.ndarray:
    """base^e mod m elementwise (int64; m < 2^31)."""
    result = np.ones_like(base, dtype=np.int64)
    b = base.astype(np.int64) % m
    while e:
        if e & 1:
            result = result * b % m
        e >>= 1
        if e:
            b = b * b % m
    return result


def _prime_power_factors(m: int) -> list[tuple[int, int]]:
    """[(p, p^e)] for m = ∏ p^e, ascending in p."""
    out = []
    for p in gf2.prime_factors(m):
        q = p
        while m % (q * p) == 0:
            q *= p
        out.append((p, q))
    return out


def _find_generators(m: int, units: np.ndarray,
                     explicit: tuple[int, ...] | None = None) -> tuple[list[int], list[int], list[bool], list[int]]:
    """Generators of Z_m^*/⟨2⟩: (gens, ords, good, frob_twist). Greedy as HElib's findGenerators
    (no candidates) unless ``explicit`` generators are given (HElib's parameter-table rows), which
    are then used in that order and must generate the whole quotient."""
    in_sub = np.zeros(m, dtype=bool)  # the subgroup generated so far: ⟨2, g_0, ...⟩
    pow2_exp = np.full(m, -1, dtype=np.int64)  # j for 2^j, -1 elsewhere
    x, j = 1, 0
    while pow2_exp[x] < 0:
        pow2_exp[x] = j
        in_sub[x] = True
        x, j = 2 * x % m, j + 1
    gens: list[int] = []
    ords: list[int] = []
    good: list[bool] = []
    twist: list[int] = []
    while True:
        # order of every unit in Z_m^* / in_sub
        order = np.where(in_sub[units], 1, 0).astype(np.int64)
        cur = units.copy()
        k = 1
        while not order.all():
            cur = cur * units % m
            k += 1
            newly = (order == 0) & in_sub[cur]
            order[newly] = k
        largest = int(order.max())
        if explicit is not None:
            if len(gens) == len(explicit):
                if largest > 1:
                    raise ValueError(f"generators {explicit} do not generate Z_{m}^*/<2>")
                break
            g = explicit[len(gens)] % m
            if np.gcd(g, m) != 1:
                raise ValueError(f"generator {explicit[len(gens)]} is not a unit mod {m}")
            largest = int(order[np.searchsorted(units, g)])
            if largest == 1:
                raise ValueError(f"generator {explicit[len(gens)]} is redundant: it lies in <2> and the earlier ones")
        else:
            if largest == 1:
                break
            cands = units[order == largest]  # ascending
            powers = _powmod_array(cands, largest, m)
            native = np.flatnonzero(powers == 1)
            in_pow2 = np.flatnonzero(pow2_exp[powers] >= 0)
            if native.size:
                g = int(cands[native[0]])
            elif in_pow2.size:
                g = int(cands[in_pow2[0]])
            else:  # HElib warns "low quality generator"; rotation below still works
                g = int(cands[0])
        gpow = pow(g, largest, m)
        gens.append(g)
        ords.append(largest)
        good.append(gpow == 1)
        twist.append(int(pow2_exp[gpow]))
        members = np.flatnonzero(in_sub)
        step = members.copy()
        for _ in range(largest - 1):
            step = step * g % m
            in_sub[step] = True
    return gens, ords, good, twist


class Algebra:
    """GF(2)[X]/Φ_m(X) as ℓ slots in GF(2^d); build it with :func:`algebra` (cached per m).

    Attributes: ``m``, ``phi``, ``d``, ``nslots``; ``gens``, ``ords``, ``good``, ``frob_twist``
    (tuples, one entry per hypercube dimension; ``frob_twist[i]`` = j with g_i^ord_i ≡ 2^j mod m,
    0 on good dimensions, -1 if g_i^ord_i is not a power of 2); ``reps`` (int64, (nslots,)) the
    representative t of every slot in hypercube order; ``exponents`` (int64, (nslots, ndims)) the
    hypercube coordinates of every slot; ``field`` (:class:`gf2.Field` GF(2^d)); ``zeta`` (int,
    the element of order m).
    """

    def __init__(self, m: int, gens: tuple[int, ...] | None = None) -> None:
        m = _check_modulus(m)
        idx = np.arange(m, dtype=np.int64)
        is_unit = np.gcd(idx, m) == 1
        units = idx[is_unit]
        self.m = m
        self.phi = int(units.size)
        d, x = 1, 2 % m
        while x != 1:
            x, d = 2 * x % m, d + 1
        self.d = d
        self.nslots = self.phi // d
        if d > gf2.MAX_DEGREE:
            raise ValueError(f"m = {m} has d = ord_m(2) = {d} > {gf2.MAX_DEGREE}: slots do not fit uint64")

        gens, ords, good, twist = _find_generators(m, units, gens)
        self.gens: tuple[int, ...] = tuple(gens)
        self.ords: tuple[int, ...] = tuple(ords)
        self.good: tuple[bool, ...] = tuple(good)
        self.frob_twist: tuple[int, ...] = tuple(twist)
        if int(np.prod(ords, dtype=np.int64)) != self.nslots:
            raise AssertionError(f"hypercube {ords} does not have {self.nslots} slots")

        # slot representatives in hypercube order (first generator most significant)
        if ords:
            exps = np.stack(np.unravel_index(np.arange(self.nslots), ords), axis=1).astype(np.int64)
        else:
            exps = np.zeros((1, 0), dtype=np.int64)
        reps = np.ones(self.nslots, dtype=np.int64)
        for i, g in enumerate(gens):
            table = np.array([pow(g, e, m) for e in range(ords[i])], dtype=np.int64)
            reps = reps * table[exps[:, i]] % m
        self.exponents = exps
        self.exponents.setflags(write=False)
        self.reps = reps
        self.reps.setflags(write=False)

        # every unit u = 2^j * t_s: slot_of[u] = s, frob_of[u] = j (-1 at non-units)
        pow2 = np.array([pow(2, j, m) for j in range(d)], dtype=np.int64)
        coset = reps[:, None] * pow2[None, :] % m
        self._slot_of = np.full(m, -1, dtype=np.int64)
        self._frob_of = np.full(m, -1, dtype=np.int64)
        self._slot_of[coset] = np.arange(self.nslots)[:, None]
        self._frob_of[coset] = np.arange(d)[None, :]
        if np.count_nonzero(self._slot_of >= 0) != self.phi or np.bincount(coset.ravel(), minlength=m).max() != 1:
            raise AssertionError("the hypercube representatives do not tile Z_m^*/<2>")
        self._units = units

        self.field = gf2.field(d)
        self.zeta = self._find_zeta()
        self._cyclotomic: list[int] | None = None
        self._cyclotomic_gf2: int | None = None
        self._aes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._plan_dft()

    def __repr__(self) -> str:
        dims = ", ".join(f"{g} ({o}, {'good' if ok else 'bad'})" for g, o, ok in zip(self.gens, self.ords, self.good))
        return f"Algebra(m={self.m}, phi={self.phi}, d={self.d}, nslots={self.nslots}, gens=[{dims}])"

    @property
    def ndims(self) -> int:
        return len(self.gens)

    # ------------------------------------------------------------------------------------------
    # set-up
    # ------------------------------------------------------------------------------------------
    def _find_zeta(self) -> int:
        f, m = self.field, self.m
        cofactor = (f.order - 1) // m
        primes = gf2.prime_factors(m)
        for x in range(2, f.order):
            z = f.spow(x, cofactor)
            if all(f.spow(z, m // q) != 1 for q in primes):
                return z
        raise AssertionError(f"no element of order {m} in GF(2^{self.d})")

    def _plan_dft(self) -> None:
        m, f = self.m, self.field
        factors = [q for _, q in _prime_power_factors(m)]
        self._axes = factors
        self._shape = tuple(factors)
        strides = np.ones(len(factors), dtype=np.int64)
        for j in range(len(factors) - 2, -1, -1):
            strides[j] = strides[j + 1] * factors[j + 1]
        i = np.arange(m, dtype=np.int64)
        self._crt_index = sum((i % n) * s for n, s in zip(factors, strides))
        omegas = []
        for n in factors:
            e = (m // n) * pow(m // n, -1, n) % m  # ≡ 1 mod n, ≡ 0 mod m/n
            omegas.append(f.spow(self.zeta, e))
        self._omegas = omegas
        self._big = int(np.argmax(factors))
        self._stage_tables: dict[tuple[int, bool], np.ndarray] = {}
        self._matrices: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------------------------
    # the cyclotomic polynomial
    # ------------------------------------------------------------------------------------------
    def cyclotomic(self) -> list[int]:
        """Integer coefficients of Φ_m(X), low degree first (length φ + 1). Computed as
        Φ_m(X) = Φ_rad(X^(m/rad)), Φ_rad = ∏_{δ | rad} (1 - X^δ)^μ(rad/δ), multiplications first so
        every intermediate is Φ_rad times binomials (small coefficients, exact in int64)."""
        if self._cyclotomic is None:
            primes = gf2.prime_factors(self.m)
            rad = int(np.prod(primes, dtype=np.int64))
            q = self.m // rad
            deg = self.phi // q
            coeffs = np.zeros(deg + 1, dtype=np.int64)
            coeffs[0] = 1
            divisors = []
            for mask in range(1 << len(primes)):
                delta = 1
                for b, p in enumerate(primes):
                    if mask >> b & 1:
                        delta *= p
                mu = (-1) ** (len(primes) - bin(mask).count("1"))
                divisors.append((delta, mu))
            for delta, mu in divisors:
                if mu == 1 and delta <= deg:
                    coeffs[delta:] -= coeffs[:-delta].copy()
            for delta, mu in divisors:
                if mu == -1 and delta <= deg:
                    # divide by (1 - X^delta): running sums along residues mod delta
                    n = -(-(deg + 1) // delta) * delta
                    padded = np.zeros(n, dtype=np.int64)
                    padded[: deg + 1] = coeffs
                    coeffs = np.cumsum(padded.reshape(-1, delta), axis=0).ravel()[: deg + 1]
            full = np.zeros(self.phi + 1, dtype=np.int64)
            full[::q] = coeffs
            if full[-1] != 1 or full[0] != 1:
                raise AssertionError("cyclotomic polynomial not monic with constant 1")
            self._cyclotomic = [int(c) for c in full]
        return list(self._cyclotomic)

    def _phi_gf2(self) -> int:
        if self._cyclotomic_gf2 is None:
            self._cyclotomic_gf2 = gf2.bits_to_int(np.array(self.cyclotomic(), dtype=np.int64) & 1)
        return self._cyclotomic_gf2

    # ------------------------------------------------------------------------------------------
    # slot lookup
    # ------------------------------------------------------------------------------------------
    def slot_of_unit(self, u: int) -> tuple[int, int]:
        """(s, j) with u ≡ 2^j · reps[s] (mod m), for a unit u."""
        u = self._unit(u)
        return int(self._slot_of[u]), int(self._frob_of[u])

    def _unit(self, u: int) -> int:
        if isinstance(u, bool) or not isinstance(u, (int, np.integer)):
            raise ValueError(f"automorphism index must be an int, got {type(u).__name__}")
        u = int(u) % self.m
        if self._slot_of[u] < 0:
            raise ValueError(f"automorphism index {u} is not a unit mod m = {self.m}")
        return u

    def _check_slots(self, slots: np.ndarray) -> np.ndarray:
        arr = np.asarray(slots)
        if arr.shape != (self.nslots,):
            raise ValueError(f"slot vector must have shape ({self.nslots},), got {arr.shape}")
        return self.field.check(arr, "slot vector")

    # ------------------------------------------------------------------------------------------
    # DFT stages
    # ------------------------------------------------------------------------------------------
    def _stage_table(self, axis: int, inverse: bool) -> np.ndarray:
        """Byte tables of x ↦ ω^r x for r < n along an axis, flattened: index (r*nb + b)*256 + byte."""
        key = (axis, inverse)
        t = self._stage_tables.get(key)
        if t is None:
            f, n = self.field, self._axes[axis]
            w = self._omegas[axis]
            if inverse:
                w = f.spow(w, n - 1)
            pw = [1]
            for _ in range(n - 1):
                pw.append(f.smul(pw[-1], w))
            t = np.stack([f.const_table(c) for c in pw]).reshape(-1)
            self._stage_tables[key] = t
        return t

    def _field_stage(self, x: np.ndarray, axis: int, inverse: bool) -> np.ndarray:
        """Naive DFT of length n along `axis` of a GF(2^d) array (uint64)."""
        n = self._axes[axis]
        table = self._stage_table(axis, inverse)
        nb = (self.d + 7) // 8
        moved = np.moveaxis(x, axis, -1)
        shape = moved.shape
        flat = moved.reshape(-1, n)
        byte_idx = [((flat >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(np.intp) + b * 256 for b in range(nb)]
        out = np.empty_like(flat)
        ar = np.arange(n, dtype=np.intp)
        for k in range(n):
            base = ((ar * k) % n * nb * 256)[None, :]
            acc = table[base + byte_idx[0]]
            for b in range(1, nb):
                acc ^= table[base + byte_idx[b]]
            out[:, k] = np.bitwise_xor.reduce(acc, axis=1)
        return np.moveaxis(out.reshape(shape), -1, axis)

    def _power_table(self, axis: int, inverse: bool) -> np.ndarray:
        f, n = self.field, self._axes[axis]
        w = self._omegas[axis]
        if inverse:
            w = f.spow(w, n - 1)
        pw = np.empty(n, dtype=np.uint64)
        c = 1
        for r in range(n):
            pw[r] = c
            c = f.smul(c, w)
        return pw

    def _bits_in_matrix(self, ks: np.ndarray, key: str | None) -> np.ndarray:
        """W (n, len(ks)*d) float32 over GF(2): row i = bits of (ω^(i k))_k along the big axis."""
        if key is not None and key in self._matrices:
            return self._matrices[key]
        n, d = self._axes[self._big], self.d
        pw = self._power_table(self._big, False)
        vals = pw[np.outer(np.arange(n, dtype=np.int64), ks) % n]  # (n, K)
        w = ((vals[:, :, None] >> np.arange(d, dtype=np.uint64)) & np.uint64(1)).astype(np.float32)
        w = w.reshape(n, -1)
        if key is not None and w.size <= _MATRIX_CACHE_LIMIT:
            self._matrices[key] = w
        return w

    def _bits_out_matrix(self, key: str) -> np.ndarray:
        """L (n*d, n) float32 over GF(2): L[(i, b), k] = constant coefficient of Y^b · ω^(-ik)."""
        if key in self._matrices:
            return self._matrices[key]
        f, n, d = self.field, self._axes[self._big], self.d
        pw = self._power_table(self._big, True)
        basis = np.array([1 << b for b in range(d)], dtype=np.uint64)
        c = (f.mul(pw[:, None], basis[None, :]) & np.uint64(1)).astype(np.float32)  # (n_r, d)
        r = np.outer(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)) % n  # (i, k)
        mat = np.ascontiguousarray(c[r].transpose(0, 2, 1)).reshape(n * d, n)
        if mat.size <= _MATRIX_CACHE_LIMIT:
            self._matrices[key] = mat
        return mat

    @staticmethod
    def _gf2_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(a @ b) mod 2 for 0/1 float32 matrices (exact while the inner dimension < 2^24)."""
        if a.shape[1] >= 1 << 24:
            a, b = a.astype(np.float64), b.astype(np.float64)
        out = np.empty((a.shape[0], b.shape[1]), dtype=np.uint8)
        step = max(1, _MATRIX_CHUNK // max(1, a.shape[0]))
        for c0 in range(0, b.shape[1], step):
            out[:, c0: c0 + step] = (a @ b[:, c0: c0 + step]).astype(np.int64) & 1
        return out

    def _pack_bits(self, bits: np.ndarray) -> np.ndarray:
        """(..., d) 0/1 -> (...) uint64 field elements."""
        weights = (np.uint64(1) << np.arange(self.d, dtype=np.uint64))
        return np.bitwise_or.reduce(bits.astype(np.uint64) * weights, axis=-1)

    # ------------------------------------------------------------------------------------------
    # decode / encode
    # ------------------------------------------------------------------------------------------
    def decode(self, bits: np.ndarray) -> np.ndarray:
        """Slot values (a(ζ^t))_t, uint64 (nslots,), of the GF(2) polynomial a with coefficient
        vector ``bits`` (any integer array, taken mod 2, low degree first). A length <= φ is a
        polynomial mod Φ_m; a length up to m is read mod X^m - 1 (same slot values)."""
        b = np.asarray(bits)
        if b.ndim != 1:
            raise ValueError(f"decode: coefficient vector must be 1-D, got shape {b.shape}")
        if b.size > self.m:
            raise ValueError(f"decode: {b.size} coefficients exceed m = {self.m} (reduce mod X^m - 1 first)")
        if b.size and b.dtype.kind not in "iub":
            raise ValueError(f"decode: coefficients must be integers, got dtype {b.dtype}")
        x = np.zeros(self.m, dtype=np.float32)
        x[self._crt_index[: b.size]] = b.astype(np.int64) & 1
        x = x.reshape(self._shape)
        big, n = self._big, self._axes[self._big]
        moved = np.moveaxis(x, big, -1)
        rest = moved.shape[:-1]
        flat = moved.reshape(-1, n)
        if len(self._axes) == 1:
            w = self._bits_in_matrix(self.reps, "decode")
            return self._pack_bits(self._gf2_matmul(flat, w).reshape(self.nslots, self.d))
        w = self._bits_in_matrix(np.arange(n, dtype=np.int64), "decode")
        y = self._pack_bits(self._gf2_matmul(flat, w).reshape(-1, n, self.d))
        y = np.moveaxis(y.reshape(rest + (n,)), -1, big)
        for axis in range(len(self._axes)):
            if axis != big:
                y = self._field_stage(y, axis, inverse=False)
        return y.reshape(-1)[self._crt_index[self.reps]]

    def spread(self, slots: np.ndarray) -> np.ndarray:
        """The values a(ζ^k) for every k < m (uint64, (m,)) of the a with these slot values:
        v_s^(2^j) at k = 2^j·t_s, 0 at non-units."""
        v = self._check_slots(slots)
        conj = self.field.conjugates(v)  # (d, nslots)
        out = np.zeros(self.m, dtype=np.uint64)
        u = self._units
        out[u] = conj[self._frob_of[u], self._slot_of[u]]
        return out

    def encode(self, slots: np.ndarray) -> np.ndarray:
        """The unique a mod Φ_m (uint8 0/1 coefficients, (phi,), low degree first) whose slot
        values are ``slots`` (uint64 (nslots,), each < 2^d)."""
        values = self.spread(slots)
        x = np.zeros(self.m, dtype=np.uint64)
        x[self._crt_index] = values
        x = x.reshape(self._shape)
        big, n, d = self._big, self._axes[self._big], self.d
        for axis in range(len(self._axes)):
            if axis != big:
                x = self._field_stage(x, axis, inverse=True)
        moved = np.moveaxis(x, big, -1)
        flat = moved.reshape(-1, n)
        xbits = ((flat[:, :, None] >> np.arange(d, dtype=np.uint64)) & np.uint64(1)).astype(np.float32)
        ybits = self._gf2_matmul(xbits.reshape(flat.shape[0], n * d), self._bits_out_matrix("encode"))
        y = np.moveaxis(ybits.reshape(moved.shape), -1, big).reshape(-1)
        coeffs = y[self._crt_index]  # b_i for i < m: the inverse DFT, a polynomial mod X^m - 1
        return self.reduce(coeffs)

    def reduce(self, bits: np.ndarray) -> np.ndarray:
        """A GF(2) coefficient vector of any length reduced mod Φ_m: uint8 (phi,)."""
        b = np.asarray(bits)
        if b.ndim != 1:
            raise ValueError(f"reduce: coefficient vector must be 1-D, got shape {b.shape}")
        a = gf2.poly_mod(gf2.bits_to_int(b), self._phi_gf2())
        return gf2.int_to_bits(a, self.phi)

    # ------------------------------------------------------------------------------------------
    # automorphisms and rotations
    # ------------------------------------------------------------------------------------------
    def automorphism_on_slots(self, u: int, slots: np.ndarray) -> np.ndarray:
        """Slot values of κ_u(a): a(X) ↦ a(X^u), given those of a. New slot i is
        Frobenius^j(old slot k) where u·t_i ≡ 2^j·t_k (mod m)."""
        u = self._unit(u)
        v = self._check_slots(slots)
        w = u * self.reps % self.m
        return self.field.frobenius(v[self._slot_of[w]], self._frob_of[w])

    def frobenius(self, slots: np.ndarray, j: int) -> np.ndarray:
        """Every slot raised to 2^j: the slot effect of κ_(2^j)."""
        return self.field.frobenius(self._check_slots(slots), int(j))

    def rotation(self, dim: int, k: int) -> list[tuple[int, np.ndarray | None]]:
        """[(u, mask)] with  rotate(x) = Σ κ_u(x · mask)  (mask applied to the SOURCE slots, before
        the automorphism; None = all ones), where rotate moves the value at hypercube coordinate
        e_dim to e_dim + k mod ord_dim and leaves the other coordinates and the values alone.
        k ≡ 0 gives [(1, None)] (κ_1 is the identity); a good dimension gives one term
        (g^(-k), None); a bad one two: (g^(-k), [e_dim < ord - k]) and (g^(ord-k), [e_dim >= ord - k])."""
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 0 <= dim < self.ndims:
            raise ValueError(f"rotation: dimension must be in [0, {self.ndims}), got {dim!r}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ValueError(f"rotation: amount must be an int, got {type(k).__name__}")
        g, order = self.gens[dim], self.ords[dim]
        k = int(k) % order
        if k == 0:
            return [(1, None)]
        u1 = pow(g, -k, self.m)
        if self.good[dim]:
            return [(u1, None)]
        u2 = pow(g, order - k, self.m)
        stays = (self.exponents[:, dim] < order - k).astype(np.uint64)
        return [(u1, stays), (u2, np.uint64(1) - stays)]

    def rotate_slots(self, slots: np.ndarray, dim: int, k: int) -> np.ndarray:
        """The plain hypercube rotation (for reference): value at e_dim moves to e_dim + k."""
        v = self._check_slots(slots)
        return np.roll(v.reshape(self.ords), int(k), axis=dim).reshape(-1)

    # ------------------------------------------------------------------------------------------
    # the AES field
    # ------------------------------------------------------------------------------------------
    def _aes_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.d % 8:
            raise ValueError(f"the AES field GF(2^8) embeds only when 8 | d; m = {self.m} has d = {self.d}")
        if self._aes is None:
            f = self.field
            cofactor = (f.order - 1) // 255
            for x in range(2, f.order):
                h = f.spow(x, cofactor)
                if all(f.spow(h, 255 // q) != 1 for q in (3, 5, 17)):
                    break
            roots = []
            for e in range(255):
                r = f.spow(h, e)
                value, power = 0, 1
                for i in range(9):
                    if AES_POLY >> i & 1:
                        value ^= power
                    power = f.smul(power, r)
                if value == 0:
                    roots.append(r)
            if len(roots) != 8:
                raise AssertionError(f"found {len(roots)} roots of the AES polynomial, expected 8")
            rho = min(roots)
            images = [f.spow(rho, i) for i in range(8)]
            table = np.zeros(256, dtype=np.uint64)
            for byte in range(256):
                acc = 0
                for i in range(8):
                    if byte >> i & 1:
                        acc ^= images[i]
                table[byte] = acc
            order = np.argsort(table)
            self._aes = (table, table[order], order.astype(np.uint8))
        return self._aes

    @property
    def aes_root(self) -> int:
        """ρ, the image of Y under the embedding of the AES field."""
        return int(self._aes_tables()[0][2])

    def embed(self, values: np.ndarray) -> np.ndarray:
        """GF(2^8) (AES polynomial) bytes -> GF(2^d), elementwise, uint64, same shape."""
        table = self._aes_tables()[0]
        arr = np.asarray(values)
        if arr.dtype.kind not in "iu" or (arr.size and (int(arr.min()) < 0 or int(arr.max()) > 255)):
            raise ValueError("embed: AES field elements must be integers in [0, 256)")
        return table[arr.astype(np.intp)]

    def extract(self, values: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`embed`: uint8 bytes, same shape; ValueError if a value is not in the
        image of GF(2^8)."""
        _, sorted_images, byte_of = self._aes_tables()
        arr = np.asarray(values)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"extract: GF(2^{self.d}) elements must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.uint64)
        pos = np.searchsorted(sorted_images, arr)
        pos = np.minimum(pos, 255)
        ok = sorted_images[pos] == arr
        if not ok.all():
            bad = arr[~ok].reshape(-1)[0]
            raise ValueError(f"extract: {int(bad):#x} is not in the image of GF(2^8) in GF(2^{self.d})")
        return byte_of[pos]


def algebra(m: int, gens: tuple[int, ...] | list[int] | None = None) -> Algebra:
    """The plaintext algebra of GF(2)[X]/Φ_m for odd m > 1 (cached per (m, gens)).

    ``gens`` None chooses the hypercube greedily as HElib's findGenerators does; explicit generators
    (e.g. HElib's AES table row for 53261: (43863, 28680, 15913) with orders 16, 12, 10) are used in
    that order, each dimension's order being its order modulo ⟨2⟩ and the earlier generators.
    """
    m = _check_modulus(m)
    if gens is not None:
        gens = tuple(int(g) for g in gens)
    return _algebra(m, gens)


@lru_cache(maxsize=16)
def _algebra(m: int, gens: tuple[int, ...] | None) -> Algebra:
    return Algebra(m, gens)
