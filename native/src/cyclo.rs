//! The double-CRT transform of Z_q[X]/Phi_m(X) for odd m (GHS-style BGV; HElib's `bluestein.cpp`
//! and `CModulus.cpp`): coefficients of a polynomial of degree < phi(m) to its values at the
//! primitive m-th roots of unity zeta^u (u in Z_m^*, increasing), and back. The contract is the
//! module docstring of `shaper.kernels.cyclo`; the numpy reference (`cyclo_ref.py`) computes the
//! same outputs bit for bit by exact integer convolutions.
//!
//! **Forward (Bluestein over length m).** With m odd, h = 2^-1 mod m = (m + 1) / 2 and
//! i j = h (i^2 + j^2 - (i - j)^2) mod m, so with the chirp c_k = zeta^(h k^2) and d_k = c_k^-1
//! (both periodic mod m and even in k):
//! a(zeta^j) = c_j sum_i (a_i c_i) d_(j - i). The sum is a convolution that this module runs as
//! one negacyclic product of length N = 2^ceil(log2(2m - 2)) (at least 8) on the RNS kernels'
//! NTT ([`crate::rns::ntt`]): the kernel D holds d_k at k in [0, m) and -d_k at N - k (the minus
//! undoes the negacyclic sign of a wrapped index), so no twist by a 2N-th root is needed and the
//! arrays never overlap (N >= m + phi - 1 for the forward, N >= 2m - 2 for the inverse). Cost:
//! two NTTs of length N, a pointwise product with the precomputed NTT of D, and two chirps.
//!
//! **Inverse.** g_j = m^-1 d_j sum_u (v_u d_u) c_(j - u) over the units u (zeros elsewhere) is
//! the polynomial of degree < m that takes the given values at the primitive roots and vanishes
//! at the other m-th roots; the answer is g mod Phi_m. With Psi_m = (X^m - 1) / Phi_m (degree
//! k = m - phi, monic) and g = Q Phi_m + a: g Psi_m = Q X^m - Q + a Psi_m where the last two
//! terms have degree < m, so **Q is the top of g Psi_m**, Q_j = (g Psi_m)_(m + j), which only
//! involves g_phi..g_(m-1): one product of length 2k (NTT length N2 >= 2k). Then a = g - Q Phi_m
//! on the low phi coefficients: one product of length < m (NTT length N3 = N / 2 >= m - 1, with
//! Phi_m's leading 1 left out since it only touches coefficients >= phi). Both fixed operands
//! (Psi_m, Phi_m mod q, from Phi_m = prod_(d | m) (X^d - 1)^mu(m/d) by sparse products and exact
//! divisions mod q) are stored transformed.
//!
//! **Primes and roots.** Every prime q < 2^62 satisfies q = 1 mod 2 N m (the 2N-th roots for
//! the negacyclic NTTs, the m-th roots for the evaluation points): `shaper.kernels.cyclo.primes`
//! chooses them. zeta_q is the *smallest* primitive m-th root of unity mod q.
//!
//! Arithmetic is [`Prime`]'s (Shoup products by the precomputed chirps and kernels, lazy in
//! [0, 2q) where the NTT accepts it); nothing here depends on secret values' timing beyond what
//! the NTT does. Rows (one per prime) run in parallel with rayon; the caller installs the pool.
//!
//! **Batched arithmetic and basis extension** (the second half of this file): element-wise
//! add/sub/mul/mul_acc/mul_scalar over (..., L, phi) batches with per-limb broadcasting, the
//! centred fast basis extension [`CycloContext::extend`] (float quotient estimate, bit for bit
//! the numpy reference's), and BGV's two uses of it fused with the transforms:
//! [`CycloContext::divide_round`] and [`CycloContext::digits`]. Outputs are written into
//! uninitialised buffers that the caller allocates ([`filled`]).

use std::mem::MaybeUninit;

use rayon::prelude::*;

use crate::rns::ntt::NttTable;
use crate::rns::prime::{is_prime, minimal_root, Prime};

/// Largest m accepted: 2m - 2 = 2^17, the largest NTT length of the RNS kernels.
pub const MAX_M: usize = (1 << 16) + 1;

fn next_pow2_at_least_8(x: usize) -> usize {
    x.next_power_of_two().max(8)
}

/// The Bluestein NTT length N for m: the least power of two >= 2m - 2 (at least 8).
pub fn ntt_size(m: usize) -> usize {
    next_pow2_at_least_8(2 * m - 2)
}

/// Every prime of a context for m is 1 mod this (= 2 N m).
pub fn prime_step(m: usize) -> u64 {
    2 * ntt_size(m) as u64 * m as u64
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The distinct prime factors of n >= 1.
fn prime_factors(mut n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        if n.is_multiple_of(p) {
            out.push(p);
            while n.is_multiple_of(p) {
                n /= p;
            }
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// The units of Z_m in increasing order.
pub fn units(m: usize) -> Vec<usize> {
    (1..m).filter(|&i| gcd(i, m) == 1).collect()
}

/// Checks m: odd, 3..=MAX_M.
pub fn check_m(m: usize) -> Result<(), String> {
    if m.is_multiple_of(2) || !(3..=MAX_M).contains(&m) {
        return Err(format!("m must be odd and in [3, {MAX_M}], got {m}"));
    }
    Ok(())
}

/// p(X) (X^d - 1) mod q.
fn times_xd_minus_1(p: &Prime, poly: &[u64], d: usize) -> Vec<u64> {
    let mut out = vec![0u64; poly.len() + d];
    for (i, &c) in poly.iter().enumerate() {
        out[i] = p.sub(out[i], c);
        out[i + d] = p.add(out[i + d], c);
    }
    out
}

/// poly / (X^d - 1) mod q, the division being exact: from poly = (X^d - 1) r,
/// poly_i = r_(i-d) - r_i, so r_i = r_(i-d) - poly_i.
fn over_xd_minus_1(p: &Prime, poly: &[u64], d: usize) -> Vec<u64> {
    let len = poly.len() - d;
    let mut r = vec![0u64; len];
    for i in 0..len {
        let prev = if i >= d { r[i - d] } else { 0 };
        r[i] = p.sub(prev, poly[i]);
    }
    r
}

/// Phi_m and Psi_m = (X^m - 1) / Phi_m mod q, coefficients from the constant term up (lengths
/// phi + 1 and m - phi + 1). Phi_m = prod over squarefree s | m of (X^(m/s) - 1)^mu(s): the
/// factors with mu(s) = 1 multiply, the others divide exactly; Psi_m takes the factors s != 1
/// with the opposite exponents.
pub fn cyclotomic_pair(m: usize, p: &Prime) -> (Vec<u64>, Vec<u64>) {
    let primes = prime_factors(m);
    let (mut phi_up, mut phi_down, mut psi_up, mut psi_down) = (vec![], vec![], vec![], vec![]);
    for mask in 0u32..1 << primes.len() {
        let s: usize = primes.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &f)| f).product();
        let even = mask.count_ones() % 2 == 0; // mu(s) = 1
        if even {
            phi_up.push(m / s);
        } else {
            phi_down.push(m / s);
        }
        if s != 1 {
            if even {
                psi_down.push(m / s);
            } else {
                psi_up.push(m / s);
            }
        }
    }
    let build = |up: &[usize], down: &[usize]| {
        let mut poly = vec![1u64];
        for &d in up {
            poly = times_xd_minus_1(p, &poly, d);
        }
        for &d in down {
            poly = over_xd_minus_1(p, &poly, d);
        }
        poly
    };
    (build(&phi_up, &phi_down), build(&psi_up, &psi_down))
}

/// The smallest primitive m-th root of unity mod q (q = 1 mod m): x = g^((q-1)/m) for the first
/// g = 2, 3, ... of order m, then the least x^u over the units u.
pub fn smallest_primitive_root(p: &Prime, m: usize) -> Result<u64, String> {
    let q = p.q;
    if !(q - 1).is_multiple_of(m as u64) {
        return Err(format!("prime {q} is not 1 mod m = {m}"));
    }
    let factors = prime_factors(m);
    let e = (q - 1) / m as u64;
    let x = (2..q.min(1 << 20))
        .map(|g| p.pow(g, e))
        .find(|&x| factors.iter().all(|&f| p.pow(x, (m / f) as u64) != 1))
        .ok_or_else(|| format!("no primitive {m}-th root of unity found mod {q}"))?;
    let (mut best, mut cur) = (x, 1u64);
    for j in 1..m {
        cur = p.mul(cur, x);
        if gcd(j, m) == 1 {
            best = best.min(cur);
        }
    }
    Ok(best)
}

/// A fixed operand of a negacyclic product, in NTT form with Shoup constants.
struct Fixed {
    w: Vec<u64>,
    ws: Vec<u64>,
}

impl Fixed {
    /// `coeffs` (reduced, at most table.n of them) transformed by `table`.
    fn new(table: &NttTable, coeffs: &[u64]) -> Fixed {
        let mut w = vec![0u64; table.n];
        w[..coeffs.len()].copy_from_slice(coeffs);
        table.forward(&mut w);
        let ws = w.iter().map(|&x| table.p.shoup(x)).collect();
        Fixed { w, ws }
    }

    /// In place: buf (coefficients in [0, 4q), table.n of them) times this operand mod
    /// (X^n + 1, q), reduced to [0, q).
    fn apply(&self, table: &NttTable, buf: &mut [u64]) {
        let p = table.p;
        table.forward(buf);
        for ((x, &w), &ws) in buf.iter_mut().zip(&self.w).zip(&self.ws) {
            *x = p.mul_shoup_lazy(*x, w, ws); // [0, 2q): what the inverse NTT accepts
        }
        table.inverse(buf);
    }
}

/// The tables of one prime.
pub struct CycloPrime {
    pub p: Prime,
    /// the evaluation root zeta (smallest primitive m-th root)
    pub zeta: u64,
    big: NttTable,
    /// c_k = zeta^(h k^2) and d_k = c_k^-1 for k in [0, m), with Shoup constants
    c: Vec<u64>,
    cs: Vec<u64>,
    d: Vec<u64>,
    ds: Vec<u64>,
    /// the forward kernel (d_k at k, -d_k at N - k) and the inverse one (m^-1 c_k, -m^-1 c_k)
    fwd: Fixed,
    inv: Fixed,
    /// Psi_m (length N2 >= 2k) and Phi_m without its leading 1 (length N3 >= m - 1)
    quo_table: NttTable,
    psi: Fixed,
    rem_table: NttTable,
    phi: Fixed,
}

/// The transform for one m and a list of primes.
pub struct CycloContext {
    pub m: usize,
    pub phi: usize,
    /// the Bluestein NTT length N
    pub n: usize,
    pub units: Vec<usize>,
    pub primes: Vec<CycloPrime>,
}

impl CycloPrime {
    fn new(m: usize, units: &[usize], q: u64) -> Result<CycloPrime, String> {
        let (phi, n) = (units.len(), ntt_size(m));
        let k = m - phi;
        let p = Prime::new(q);
        let zeta = smallest_primitive_root(&p, m)?;
        let psi = minimal_root(&p, n as u64)?;
        let big = NttTable::new(p, n, psi);
        let mut zpow = vec![1u64; m];
        for e in 1..m {
            zpow[e] = p.mul(zpow[e - 1], zeta);
        }
        let h = m / 2 + 1; // 2^-1 mod m (m odd)
        let c: Vec<u64> = (0..m).map(|j| zpow[(j * j % m) * h % m]).collect();
        let d: Vec<u64> = (0..m).map(|j| zpow[(m - (j * j % m) * h % m) % m]).collect();
        let m_inv = p.inv(m as u64 % q);
        // forward: differences j - i in [-(phi - 1), m - 1]; inverse: [-(m - 1), m - 2]
        let mut kern = vec![0u64; n];
        kern[..m].copy_from_slice(&d);
        for j in 1..phi {
            kern[n - j] = p.neg(d[j]);
        }
        let fwd = Fixed::new(&big, &kern);
        kern.fill(0);
        for j in 0..m - 1 {
            kern[j] = p.mul(m_inv, c[j]);
        }
        for j in 1..m {
            kern[n - j] = p.neg(p.mul(m_inv, c[j]));
        }
        let inv = Fixed::new(&big, &kern);
        let (phi_poly, psi_poly) = cyclotomic_pair(m, &p);
        debug_assert!(phi_poly.len() == phi + 1 && psi_poly.len() == k + 1);
        let n2 = next_pow2_at_least_8(2 * k);
        let n3 = next_pow2_at_least_8(m - 1);
        let quo_table = NttTable::new(p, n2, p.pow(psi, (n / n2) as u64));
        let rem_table = NttTable::new(p, n3, p.pow(psi, (n / n3) as u64));
        let psi_fixed = Fixed::new(&quo_table, &psi_poly);
        let phi_fixed = Fixed::new(&rem_table, &phi_poly[..phi]);
        let shoup = |v: &[u64]| v.iter().map(|&x| p.shoup(x)).collect::<Vec<u64>>();
        Ok(CycloPrime {
            p,
            zeta,
            big,
            cs: shoup(&c),
            ds: shoup(&d),
            c,
            d,
            fwd,
            inv,
            quo_table,
            psi: psi_fixed,
            rem_table,
            phi: phi_fixed,
        })
    }
}

/// The first entry of `row` that is not below q, as an error naming the row.
fn check_row(row: &[u64], q: u64, r: usize, what: &str) -> Result<(), String> {
    match row.iter().position(|&x| x >= q) {
        Some(i) => Err(format!("{what}: row {r} (entry {i}) is not reduced mod its prime {q}")),
        None => Ok(()),
    }
}

impl CycloContext {
    /// Checks m (odd, 3..=MAX_M) and each prime (< 2^62, prime, 1 mod 2 N m, distinct), then
    /// builds the tables of each prime in parallel (on the caller's pool).
    pub fn new(m: usize, primes: &[u64]) -> Result<CycloContext, String> {
        check_m(m)?;
        if primes.is_empty() {
            return Err("a cyclotomic context needs at least one prime".into());
        }
        let step = prime_step(m);
        for (i, &q) in primes.iter().enumerate() {
            if q >= 1 << 62 {
                return Err(format!("prime {q} (index {i}) is not below 2^62"));
            }
            if q % step != 1 {
                return Err(format!("prime {q} (index {i}) is not 1 mod 2 N m = {step} (N = {})", ntt_size(m)));
            }
            if !is_prime(q) {
                return Err(format!("{q} (index {i}) is not prime"));
            }
            if primes[..i].contains(&q) {
                return Err(format!("prime {q} (index {i}) appears twice"));
            }
        }
        let units = units(m);
        let tables = primes.par_iter().map(|&q| CycloPrime::new(m, &units, q)).collect::<Result<Vec<_>, _>>()?;
        Ok(CycloContext { m, phi: units.len(), n: ntt_size(m), units, primes: tables })
    }

    pub fn roots(&self) -> Vec<u64> {
        self.primes.iter().map(|t| t.zeta).collect()
    }

    fn check(&self, a: &[u64], limbs: &[usize]) -> Result<(), String> {
        if let Some(&l) = limbs.iter().find(|&&l| l >= self.primes.len()) {
            return Err(format!("limb {l} out of range (the context has {} primes)", self.primes.len()));
        }
        if a.len() != limbs.len() * self.phi {
            return Err(format!("expected {} x {} values, got {}", limbs.len(), self.phi, a.len()));
        }
        Ok(())
    }

    /// Coefficients (len(limbs), phi) -> values: out[l][i] = a_l(zeta^units[i]) mod
    /// primes[limbs[l]].
    pub fn forward(&self, a: &[u64], limbs: &[usize]) -> Result<Vec<u64>, String> {
        // SAFETY: forward_into writes every row in full when it returns Ok
        unsafe { filled(a.len(), |out| self.forward_into(a, limbs, out)) }
    }

    /// Values (len(limbs), phi) -> the coefficients of the polynomial of degree < phi taking
    /// them (the inverse of [`forward`](Self::forward)).
    pub fn inverse(&self, a: &[u64], limbs: &[usize]) -> Result<Vec<u64>, String> {
        // SAFETY: inverse_into writes every row in full when it returns Ok
        unsafe { filled(a.len(), |out| self.inverse_into(a, limbs, out)) }
    }

    /// [`forward`](Self::forward) into `out` (a's length), every entry written when it returns
    /// Ok: the binding allocates `out` on the calling thread, uninitialised (see [`filled`]).
    pub fn forward_into(&self, a: &[u64], limbs: &[usize], out: &mut [MaybeUninit<u64>]) -> Result<(), String> {
        self.run(a, limbs, "coeffs", out, |t, row, out| self.forward_row(t, row, out))
    }

    /// [`inverse`](Self::inverse) into `out` (a's length).
    pub fn inverse_into(&self, a: &[u64], limbs: &[usize], out: &mut [MaybeUninit<u64>]) -> Result<(), String> {
        self.run(a, limbs, "values", out, |t, row, out| self.inverse_row(t, row, out))
    }

    fn run<F>(&self, a: &[u64], limbs: &[usize], what: &str, out: &mut [MaybeUninit<u64>], f: F) -> Result<(), String>
    where
        F: Fn(&CycloPrime, &[u64], &mut [MaybeUninit<u64>]) + Sync,
    {
        self.check(a, limbs)?;
        if out.len() != a.len() {
            return Err(format!("out: {} values for {} x {}", out.len(), limbs.len(), self.phi));
        }
        let phi = self.phi;
        if limbs.len() == 1 {
            // one row: no rayon at all (the caller may not have installed a pool)
            let t = &self.primes[limbs[0]];
            check_row(a, t.p.q, 0, what)?;
            f(t, a, out);
            return Ok(());
        }
        out.par_chunks_mut(phi).zip(a.par_chunks(phi)).zip(limbs.par_iter()).enumerate().try_for_each(
            |(r, ((o, row), &l))| {
                let t = &self.primes[l];
                check_row(row, t.p.q, r, what)?;
                f(t, row, o);
                Ok::<(), String>(())
            },
        )
    }

    /// Writes all of `out` (phi values).
    fn forward_row(&self, t: &CycloPrime, a: &[u64], out: &mut [MaybeUninit<u64>]) {
        self.forward_row_map(t, a, out, |_, v| v)
    }

    /// Writes all of `out`: out[i] = f(i, value i of the row's transform).
    #[inline(always)]
    fn forward_row_map<F: Fn(usize, u64) -> u64>(&self, t: &CycloPrime, a: &[u64], out: &mut [MaybeUninit<u64>], f: F) {
        let (p, phi) = (t.p, self.phi);
        let mut buf = vec![0u64; self.n];
        for (((x, &ai), &c), &cs) in buf[..phi].iter_mut().zip(a).zip(&t.c).zip(&t.cs) {
            *x = p.mul_shoup_lazy(ai, c, cs);
        }
        t.fwd.apply(&t.big, &mut buf);
        for (i, (o, &u)) in out.iter_mut().zip(&self.units).enumerate() {
            o.write(f(i, p.mul_shoup(buf[u], t.c[u], t.cs[u])));
        }
    }

    /// Writes all of `out` (phi values).
    fn inverse_row(&self, t: &CycloPrime, v: &[u64], out: &mut [MaybeUninit<u64>]) {
        let (p, m, phi) = (t.p, self.m, self.phi);
        let k = m - phi;
        let mut buf = vec![0u64; self.n];
        for (&x, &u) in v.iter().zip(&self.units) {
            buf[u] = p.mul_shoup_lazy(x, t.d[u], t.ds[u]);
        }
        t.inv.apply(&t.big, &mut buf);
        // g, the polynomial of degree < m, in buf[..m]
        for ((x, &d), &ds) in buf[..m].iter_mut().zip(&t.d).zip(&t.ds) {
            *x = p.mul_shoup(*x, d, ds);
        }
        // Q = top k coefficients of g Psi_m (only g_phi.. contributes)
        let mut quo = vec![0u64; t.quo_table.n];
        quo[..k].copy_from_slice(&buf[phi..m]);
        t.psi.apply(&t.quo_table, &mut quo);
        // a = g - Q Phi_m on the low phi coefficients
        let mut rem = vec![0u64; t.rem_table.n];
        rem[..k].copy_from_slice(&quo[k..2 * k]);
        t.phi.apply(&t.rem_table, &mut rem);
        for ((o, &g), &r) in out.iter_mut().zip(&buf[..phi]).zip(&rem) {
            o.write(p.sub(g, r));
        }
    }
}

// -- batched arithmetic and basis extension ----------------------------------------------------
//
// Arrays are rows of phi words, row r of a batch belonging to limb limbs[r % L] (L = limbs.len()):
// shape (..., L, phi) flattened. An operand either has the batch's full length or one row per
// limb, (L, phi), which then serves every item of the batch (broadcast over the leading axes).
// Inputs must be reduced mod their row's prime. The out-of-place operations OR a flag per input
// in the loop that computes the output (a refused call discards it); mul_acc, which writes its
// input, processes each row in chunks of CHUNK words, checked and then computed while they are in
// L1. Either way the check costs no extra pass over memory (add runs at the speed of a plain
// wrapping add, mul about 10% slower than unchecked, within the noise of this machine).
// An unreduced entry aborts the call with an error naming the operand, the row and the entry
// (found again by a plain scan, in operand order, so that the message does not depend on the
// threads), and an in-place accumulation is rolled back exactly first (the chunks it had done
// held reduced inputs, so acc = (acc + a b) - a b mod q).

/// Words below which a batched call runs serially on the caller's thread (no pool, no rayon):
/// the binding runs larger ones on the native pool, smaller ones without it.
pub const SERIAL_WORDS: usize = 1 << 14;
/// Words of a row checked and then computed together.
const CHUNK: usize = 1024;
/// Coefficients per task of [`CycloContext::extend`].
const EXTEND_CHUNK: usize = 256;

/// A vector of `len` words written by `fill` into its uninitialised spare capacity (no zeroing:
/// a fresh 10 MB output costs about 0.5 ms to clear, a third of an addition's time). The buffer
/// is allocated on the calling thread: the bindings call this before entering the pool, so the
/// allocator reuses the buffers the caller frees (one allocated on a pool thread and freed on the
/// caller's is not reused, and fresh pages cost more than the arithmetic).
///
/// # Safety
/// `fill` must initialise every one of the `len` elements of the slice it is given whenever it
/// returns `Ok` (the kernels' `*_into` functions do: each writes every output row in full or
/// fails).
pub unsafe fn filled<E, F>(len: usize, fill: F) -> Result<Vec<u64>, E>
where
    F: FnOnce(&mut [MaybeUninit<u64>]) -> Result<(), E>,
{
    let mut v: Vec<u64> = Vec::with_capacity(len);
    fill(&mut v.spare_capacity_mut()[..len])?;
    // SAFETY: len <= capacity, and fill returned Ok, so (by this function's contract) it
    // initialised the first len elements
    unsafe { v.set_len(len) };
    Ok(v)
}

/// Barrett reduction mod t of sums up to 2^63 t (k the bit length of t, 2^(k-1) < t < 2^k):
/// with mu = floor(2^(63+k) / t) < 2^64 and x1 = floor(x / 2^(k-1)) < 2^64, the quotient
/// estimate floor(x1 mu / 2^64) is at most 2 below floor(x / t): the truncation of x costs less
/// than 2^(k-1) / t < 1, that of mu less than x1 / 2^64 < 1, the last floor less than 1 (the
/// analysis of [`Prime::reduce_product`], whose products stay below 2^(2k), carried to any x
/// below 2^(63+k)). One wide product, one low product, two conditional subtractions.
#[derive(Clone, Copy, Debug)]
struct Wide {
    t: u64,
    shift: u32,
    mu: u64,
}

impl Wide {
    fn new(t: u64) -> Wide {
        let bits = 64 - t.leading_zeros();
        Wide { t, shift: bits - 1, mu: ((1u128 << (63 + bits)) / t as u128) as u64 }
    }

    /// x mod t for x < 2^63 t.
    #[inline(always)]
    fn reduce(&self, x: u128) -> u64 {
        let x1 = (x >> self.shift) as u64;
        let quo = ((x1 as u128 * self.mu as u128) >> 64) as u64;
        let r = (x as u64).wrapping_sub(quo.wrapping_mul(self.t)); // in [0, 3t)
        let r = r.min(r.wrapping_sub(self.t)); // a wrapped difference is the larger
        r.min(r.wrapping_sub(self.t))
    }
}

/// out[k] = (und[u_k] + sum_i ys[k LS + i] w[i]) mod t, the sum in 128 bits below 2^63 t.
#[inline(always)]
fn combine<const LS: usize>(
    out: &mut [MaybeUninit<u64>],
    ys: &[u64],
    us: &[usize],
    w: &[u64],
    und: &[u64],
    wide: &Wide,
) {
    let w: &[u64; LS] = w.try_into().expect("LS weights");
    for ((o, y), &u) in out.iter_mut().zip(ys.chunks_exact(LS)).zip(us) {
        let y: &[u64; LS] = y.try_into().expect("LS residues");
        let mut acc = und[u] as u128;
        for i in 0..LS {
            acc += y[i] as u128 * w[i] as u128;
        }
        o.write(wide.reduce(acc));
    }
}

/// [`combine`] with LS = ys.len() / out.len() as a constant for the common source counts
/// (unrolled), and a loop otherwise.
fn combine_dispatch(out: &mut [MaybeUninit<u64>], ys: &[u64], us: &[usize], w: &[u64], und: &[u64], wide: &Wide) {
    match w.len() {
        2 => combine::<2>(out, ys, us, w, und, wide),
        3 => combine::<3>(out, ys, us, w, und, wide),
        4 => combine::<4>(out, ys, us, w, und, wide),
        5 => combine::<5>(out, ys, us, w, und, wide),
        6 => combine::<6>(out, ys, us, w, und, wide),
        7 => combine::<7>(out, ys, us, w, und, wide),
        8 => combine::<8>(out, ys, us, w, und, wide),
        ls => {
            for ((o, y), &u) in out.iter_mut().zip(ys.chunks_exact(ls)).zip(us) {
                let acc = y.iter().zip(w).fold(und[u] as u128, |acc, (&y, &wi)| acc + y as u128 * wi as u128);
                o.write(wide.reduce(acc));
            }
        }
    }
}

/// Whether a call touching `words` words runs on the pool (see [`SERIAL_WORDS`]).
pub fn pooled(words: usize) -> bool {
    words > SERIAL_WORDS
}

/// Whether some entry of `x` is >= q (q < 2^62): x >= q iff x >= 2^63 or x - q (wrapping) has
/// its top bit clear; both land in bit 63, OR-ed over the slice (no branch, no 64-bit compare,
/// so SSE2 vectorises it).
#[inline]
fn any_unreduced(x: &[u64], q: u64) -> bool {
    x.iter().fold(0u64, |acc, &v| acc | unreduced_bit(v, q)) >> 63 != 0
}

/// Bit 63 set when v >= q (q < 2^62); see [`any_unreduced`].
#[inline(always)]
fn unreduced_bit(v: u64, q: u64) -> u64 {
    v | !v.wrapping_sub(q)
}

/// Runs `f(r, row)` over the rows of `out` (phi words each), serially for small arrays and on
/// the (installed) rayon pool otherwise; returns each row's result in order.
fn for_rows<T: Send, F>(out: &mut [T], phi: usize, f: F) -> Vec<usize>
where
    F: Fn(usize, &mut [T]) -> usize + Sync,
{
    if !pooled(out.len()) {
        return out.chunks_mut(phi).enumerate().map(|(r, o)| f(r, o)).collect();
    }
    let min_len = (SERIAL_WORDS / phi).max(1);
    out.par_chunks_mut(phi).enumerate().with_min_len(min_len).map(|(r, o)| f(r, o)).collect()
}

/// The element-wise operations of [`CycloContext::pointwise`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pointwise {
    Add,
    Sub,
    Mul,
}

impl CycloContext {
    fn check_limbs(&self, limbs: &[usize], what: &str) -> Result<(), String> {
        match limbs.iter().find(|&&l| l >= self.primes.len()) {
            Some(&l) => Err(format!("{what}: limb {l} out of range (the context has {} primes)", self.primes.len())),
            None => Ok(()),
        }
    }

    /// Checks limbs and the operands' lengths; returns the batch's length (the longest
    /// operand's): each operand holds L rows or exactly that many.
    fn batch_len(&self, operands: &[(&str, &[u64])], limbs: &[usize]) -> Result<usize, String> {
        if limbs.is_empty() {
            return Err("limbs is empty".into());
        }
        self.check_limbs(limbs, "limbs")?;
        let unit = limbs.len() * self.phi;
        let total = operands.iter().map(|(_, x)| x.len()).max().unwrap_or(0);
        for (what, x) in operands {
            if x.is_empty() || !x.len().is_multiple_of(unit) || (x.len() != unit && x.len() != total) {
                return Err(format!(
                    "{what}: {} values are neither {} x {} (one row per limb) nor the batch's {total}",
                    x.len(),
                    limbs.len(),
                    self.phi
                ));
            }
        }
        Ok(total)
    }

    /// Row r of the batch in operand `x` (its own row r, or row r mod L of a per-limb operand).
    #[inline]
    fn row_of<'a>(&self, x: &'a [u64], r: usize, limbs: usize, total: usize) -> &'a [u64] {
        let i = if x.len() == total { r } else { r % limbs };
        &x[i * self.phi..(i + 1) * self.phi]
    }

    /// The error for the first unreduced entry, by operand in order, then row, then entry.
    fn first_unreduced(&self, operands: &[(&str, &[u64])], limbs: &[usize]) -> String {
        let l = limbs.len();
        for (what, x) in operands {
            let batched = x.len() > l * self.phi;
            for (r, row) in x.chunks(self.phi).enumerate() {
                let q = self.primes[limbs[r % l]].p.q;
                if let Some(i) = row.iter().position(|&v| v >= q) {
                    let item = if batched { format!(" of item {}", r / l) } else { String::new() };
                    return format!("{what}: row {}{item} (entry {i}) is not reduced mod its prime {q}", r % l);
                }
            }
        }
        "an operand is not reduced".into() // unreachable: a chunk check found one
    }

    fn map2<F>(&self, a: &[u64], b: &[u64], limbs: &[usize], out: &mut [MaybeUninit<u64>], f: F)
        -> Result<(), String>
    where
        F: Fn(&Prime, u64, u64) -> u64 + Sync,
    {
        let total = self.batch_len(&[("a", a), ("b", b)], limbs)?;
        if out.len() != total {
            return Err(format!("out: {} values, but the batch has {total}", out.len()));
        }
        let (l, phi) = (limbs.len(), self.phi);
        let done = for_rows(out, phi, |r, o| {
            let p = &self.primes[limbs[r % l]].p;
            let (x, y) = (self.row_of(a, r, l, total), self.row_of(b, r, l, total));
            // one pass: the output is computed and the inputs' flags OR-ed in the same loop (a
            // refused call discards the output)
            let mut flags = 0u64;
            for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                flags |= unreduced_bit(x, p.q) | unreduced_bit(y, p.q);
                o.write(f(p, x, y));
            }
            if flags >> 63 != 0 { 0 } else { phi }
        });
        if done.iter().any(|&d| d < phi) {
            return Err(self.first_unreduced(&[("a", a), ("b", b)], limbs));
        }
        Ok(())
    }

    /// Element-wise a + b, a - b or a b mod each row's prime. `a` and `b` are (B, L, phi) or
    /// (L, phi) (broadcast); the result has the batch's length.
    pub fn pointwise(&self, op: Pointwise, a: &[u64], b: &[u64], limbs: &[usize]) -> Result<Vec<u64>, String> {
        // SAFETY: pointwise_into writes every row in full when it returns Ok
        unsafe { filled(a.len().max(b.len()), |out| self.pointwise_into(op, a, b, limbs, out)) }
    }

    /// [`pointwise`](Self::pointwise) into `out` (the batch's length), every entry written when
    /// it returns Ok (see [`filled`]).
    pub fn pointwise_into(&self, op: Pointwise, a: &[u64], b: &[u64], limbs: &[usize], out: &mut [MaybeUninit<u64>])
        -> Result<(), String> {
        match op {
            Pointwise::Add => self.map2(a, b, limbs, out, |p, x, y| p.add(x, y)),
            Pointwise::Sub => self.map2(a, b, limbs, out, |p, x, y| p.sub(x, y)),
            Pointwise::Mul => self.map2(a, b, limbs, out, |p, x, y| p.mul(x, y)),
        }
    }

    /// In place: acc += a b mod each row's prime. acc is the batch, (B, L, phi); a and b are
    /// acc's length or (L, phi). On an error acc is left as it was.
    pub fn mul_acc(&self, acc: &mut [u64], a: &[u64], b: &[u64], limbs: &[usize]) -> Result<(), String> {
        let total = self.batch_len(&[("acc", acc), ("a", a), ("b", b)], limbs)?;
        if acc.len() != total {
            return Err(format!("acc: {} values, but the batch has {total}", acc.len()));
        }
        let (l, phi) = (limbs.len(), self.phi);
        let done = for_rows(acc, phi, |r, o| {
            let p = &self.primes[limbs[r % l]].p;
            let (x, y) = (self.row_of(a, r, l, total), self.row_of(b, r, l, total));
            let mut done = 0;
            for ((o, x), y) in o.chunks_mut(CHUNK).zip(x.chunks(CHUNK)).zip(y.chunks(CHUNK)) {
                if any_unreduced(o, p.q) || any_unreduced(x, p.q) || any_unreduced(y, p.q) {
                    return done;
                }
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    *o = p.reduce_product(x as u128 * y as u128 + *o as u128);
                }
                done += o.len();
            }
            done
        });
        if done.iter().all(|&d| d == phi) {
            return Ok(());
        }
        // roll back what was done (all of it on reduced inputs), then name the culprit
        for (r, (o, &d)) in acc.chunks_mut(phi).zip(&done).enumerate() {
            let p = &self.primes[limbs[r % l]].p;
            let (x, y) = (self.row_of(a, r, l, total), self.row_of(b, r, l, total));
            for ((o, &x), &y) in o[..d].iter_mut().zip(x).zip(y) {
                *o = p.sub(*o, p.mul(x, y));
            }
        }
        Err(self.first_unreduced(&[("acc", acc), ("a", a), ("b", b)], limbs))
    }

    /// Each row times its limb's scalar: out[.., l, :] = a[.., l, :] scalars[l] mod
    /// primes[limbs[l]] (scalars reduced; a is (B, L, phi)).
    pub fn mul_scalar(&self, a: &[u64], scalars: &[u64], limbs: &[usize]) -> Result<Vec<u64>, String> {
        // SAFETY: mul_scalar_into writes every row in full when it returns Ok
        unsafe { filled(a.len(), |out| self.mul_scalar_into(a, scalars, limbs, out)) }
    }

    /// [`mul_scalar`](Self::mul_scalar) into `out` (a's length), every entry written when it
    /// returns Ok.
    pub fn mul_scalar_into(&self, a: &[u64], scalars: &[u64], limbs: &[usize], out: &mut [MaybeUninit<u64>])
        -> Result<(), String> {
        let total = self.batch_len(&[("a", a)], limbs)?;
        if out.len() != total {
            return Err(format!("out: {} values, but a has {total}", out.len()));
        }
        if scalars.len() != limbs.len() {
            return Err(format!("{} scalars for {} limbs", scalars.len(), limbs.len()));
        }
        let mut consts = Vec::with_capacity(limbs.len());
        for (i, (&limb, &s)) in limbs.iter().zip(scalars).enumerate() {
            let p = &self.primes[limb].p;
            if s >= p.q {
                return Err(format!("scalars[{i}] = {s} is not reduced mod its prime {}", p.q));
            }
            consts.push((s, p.shoup(s)));
        }
        let (l, phi) = (limbs.len(), self.phi);
        let done = for_rows(out, phi, |r, o| {
            let p = &self.primes[limbs[r % l]].p;
            let (w, ws) = consts[r % l];
            let mut flags = 0u64;
            for (o, &x) in o.iter_mut().zip(&a[r * phi..(r + 1) * phi]) {
                flags |= unreduced_bit(x, p.q);
                o.write(p.mul_shoup(x, w, ws));
            }
            if flags >> 63 != 0 { 0 } else { phi }
        });
        if done.iter().any(|&d| d < phi) {
            return Err(self.first_unreduced(&[("a", a)], limbs));
        }
        Ok(())
    }

    /// Limb indices: in range, distinct; `what` names them in errors.
    fn distinct_limbs(&self, limbs: &[usize], what: &str) -> Result<(), String> {
        self.check_limbs(limbs, what)?;
        match (1..limbs.len()).find(|&i| limbs[..i].contains(&limbs[i])) {
            Some(i) => Err(format!("{what} names limb {} twice", limbs[i])),
            None => Ok(()),
        }
    }

    /// Checks that every entry of `a` (B x L x phi over `limbs`) is reduced, on the pool.
    fn check_reduced(&self, a: &[u64], limbs: &[usize], what: &str) -> Result<(), String> {
        let (l, phi) = (limbs.len(), self.phi);
        let bad = |(r, row): (usize, &[u64])| any_unreduced(row, self.primes[limbs[r % l]].p.q);
        let any = if pooled(a.len()) {
            a.par_chunks(phi).enumerate().any(bad)
        } else {
            a.chunks(phi).enumerate().any(bad)
        };
        if any { Err(self.first_unreduced(&[(what, a)], limbs)) } else { Ok(()) }
    }

    /// ring.py's `Ring.divide_round`, fused: a (B, L, phi) in evaluation form over `limbs`
    /// (distinct), D = the product of the primes of `drop` (distinct, a subset of limbs), keep =
    /// limbs without drop in order; returns (B, len(keep), phi): (a - delta) D^-1 on keep with
    /// delta = 2 extend([a 2^-1]_D) (coefficients of a's dropped rows times 2^-1, lifted by
    /// [`extend`](Self::extend), in evaluation form), so delta = a mod D and delta = 0 mod 2.
    /// Per kept row the forward transform of the lift and (a - 2 F) D^-1 run in one pass (2 F is
    /// the transform of the doubled lift: the transform is linear), the same residues as the
    /// unfused steps.
    pub fn divide_round(&self, a: &[u64], limbs: &[usize], drop: &[usize]) -> Result<Vec<u64>, String> {
        let keep = limbs.iter().filter(|l| !drop.contains(l)).count();
        let items = if limbs.is_empty() { 0 } else { a.len() / (limbs.len() * self.phi) };
        // SAFETY: divide_round_into writes every kept row of every item when it returns Ok
        unsafe { filled(items * keep * self.phi, |out| self.divide_round_into(a, limbs, drop, out)) }
    }

    /// [`divide_round`](Self::divide_round) into `out` (B x len(keep) x phi), every entry
    /// written when it returns Ok.
    pub fn divide_round_into(&self, a: &[u64], limbs: &[usize], drop: &[usize], out: &mut [MaybeUninit<u64>])
        -> Result<(), String> {
        if limbs.is_empty() {
            return Err("limbs is empty".into());
        }
        self.distinct_limbs(limbs, "limbs")?;
        if drop.is_empty() {
            return Err("drop is empty".into());
        }
        self.distinct_limbs(drop, "drop")?;
        if let Some(&d) = drop.iter().find(|d| !limbs.contains(d)) {
            return Err(format!("drop names limb {d}, which is not among the limbs"));
        }
        let (l, phi) = (limbs.len(), self.phi);
        if a.is_empty() || !a.len().is_multiple_of(l * phi) {
            return Err(format!("a: {} values are not items of {l} x {phi}", a.len()));
        }
        let items = a.len() / (l * phi);
        let keep: Vec<usize> = limbs.iter().copied().filter(|x| !drop.contains(x)).collect();
        if keep.is_empty() {
            return Err("drop must leave at least one limb".into());
        }
        let pos_drop: Vec<usize> = drop.iter().map(|d| limbs.iter().position(|x| x == d).unwrap_or(0)).collect();
        let pos_keep: Vec<usize> = keep.iter().map(|k| limbs.iter().position(|x| x == k).unwrap_or(0)).collect();
        let (nd, nk) = (drop.len(), keep.len());
        if out.len() != items * nk * phi {
            return Err(format!("out: {} values for {items} x {nk} x {phi}", out.len()));
        }
        self.check_reduced(a, limbs, "a")?;
        // [a 2^-1]_D in coefficients: the dropped rows' inverse transforms times 2^-1
        let halves: Vec<(u64, u64)> = drop
            .iter()
            .map(|&d| {
                let p = &self.primes[d].p;
                let h = p.inv(2);
                (h, p.shoup(h))
            })
            .collect();
        let row = |b: usize, pos: usize| &a[(b * l + pos) * phi..(b * l + pos + 1) * phi];
        // SAFETY: every row of `tops` (item b, dropped row j) is written in full by inverse_row
        let tops = unsafe {
            filled(items * nd * phi, |o| {
                for_rows(o, phi, |r, o| {
                    let (b, j) = (r / nd, r % nd);
                    self.inverse_row(&self.primes[drop[j]], row(b, pos_drop[j]), o);
                    phi
                });
                Ok::<(), String>(())
            })
        }?;
        let mut tops = tops;
        let _ = for_rows(&mut tops, phi, |r, o| {
            let (p, (h, hs)) = (&self.primes[drop[r % nd]].p, halves[r % nd]);
            for x in o.iter_mut() {
                *x = p.mul_shoup(*x, h, hs);
            }
            phi
        });
        // the lift to the kept primes, item by item (extend runs its chunks on the pool)
        let mut lifts = Vec::with_capacity(items);
        for b in 0..items {
            lifts.push(self.extend(&tops[b * nd * phi..(b + 1) * nd * phi], drop, &keep)?);
        }
        // D^-1 mod each kept prime, and 2 D^-1
        let consts: Vec<(u64, u64, u64, u64)> = keep
            .iter()
            .map(|&k| {
                let t = &self.primes[k].p;
                let dmod = drop.iter().fold(1 % t.q, |acc, &d| t.mul(acc, t.reduce_u64(self.primes[d].p.q)));
                let inv = t.inv(dmod);
                (inv, t.shoup(inv), t.add(inv, inv), t.shoup(t.add(inv, inv)))
            })
            .collect();
        // out = (a - 2 F(lift)) D^-1 = a D^-1 - F(lift) (2 D^-1), fused into the forward transform
        let _ = for_rows(out, phi, |r, o| {
            let (b, j) = (r / nk, r % nk);
            let cp = &self.primes[keep[j]];
            let (p, x) = (&cp.p, row(b, pos_keep[j]));
            let (w, ws, w2, w2s) = consts[j];
            self.forward_row_map(cp, &lifts[b][j * phi..(j + 1) * phi], o, |i, f| {
                p.sub(p.mul_shoup(x[i], w, ws), p.mul_shoup(f, w2, w2s))
            });
            phi
        });
        Ok(())
    }

    /// ring.py's `Ring.digits`, fused: `a` (len(limbs), phi) in evaluation form over `limbs`
    /// (distinct); `groups` disjoint non-empty lists of limbs (each among `limbs`); `target`
    /// distinct limbs containing every group's. Returns (len(groups), len(target), phi): for
    /// group G, row t of `target` is a's own row where t is in G, and elsewhere the evaluation
    /// form of [`extend`](Self::extend) of a's coefficients on G to the other target limbs (in
    /// target order) — [a]_(prod G) lifted, the key-switching digit.
    pub fn digits(&self, a: &[u64], limbs: &[usize], groups: &[Vec<usize>], target: &[usize])
        -> Result<Vec<u64>, String> {
        // SAFETY: digits_into writes every row of every group when it returns Ok
        unsafe { filled(groups.len() * target.len() * self.phi, |o| self.digits_into(a, limbs, groups, target, o)) }
    }

    /// [`digits`](Self::digits) into `out` (len(groups) x len(target) x phi), every entry
    /// written when it returns Ok.
    pub fn digits_into(&self, a: &[u64], limbs: &[usize], groups: &[Vec<usize>], target: &[usize],
                       out: &mut [MaybeUninit<u64>]) -> Result<(), String> {
        if limbs.is_empty() {
            return Err("limbs is empty".into());
        }
        self.distinct_limbs(limbs, "limbs")?;
        self.distinct_limbs(target, "target")?;
        let phi = self.phi;
        if a.len() != limbs.len() * phi {
            return Err(format!("a: expected {} x {phi} values, got {}", limbs.len(), a.len()));
        }
        if groups.is_empty() {
            return Err("groups is empty".into());
        }
        let mut seen: Vec<usize> = vec![];
        for (gi, g) in groups.iter().enumerate() {
            if g.is_empty() {
                return Err(format!("groups[{gi}] is empty"));
            }
            for &x in g {
                if !limbs.contains(&x) {
                    return Err(format!("groups[{gi}] names limb {x}, which is not among the limbs"));
                }
                if !target.contains(&x) {
                    return Err(format!("groups[{gi}] names limb {x}, which is not among the target limbs"));
                }
                if seen.contains(&x) {
                    return Err(format!("groups[{gi}] names limb {x}, which an earlier group (or this one) has"));
                }
                seen.push(x);
            }
        }
        let (nt, ng) = (target.len(), groups.len());
        if out.len() != ng * nt * phi {
            return Err(format!("out: {} values for {ng} x {nt} x {phi}", out.len()));
        }
        self.check_reduced(a, limbs, "a")?;
        let pos = |x: usize| limbs.iter().position(|&y| y == x).unwrap_or(0);
        let row = |x: usize| &a[pos(x) * phi..(pos(x) + 1) * phi];
        // coefficients of every grouped row (seen, in group order)
        // SAFETY: inverse_row writes each row of `coeffs` in full
        let coeffs = unsafe {
            filled(seen.len() * phi, |o| {
                for_rows(o, phi, |r, o| {
                    self.inverse_row(&self.primes[seen[r]], row(seen[r]), o);
                    phi
                });
                Ok::<(), String>(())
            })
        }?;
        let mut lifts = Vec::with_capacity(ng);
        let mut start = 0;
        for g in groups {
            let others: Vec<usize> = target.iter().copied().filter(|t| !g.contains(t)).collect();
            lifts.push((self.extend(&coeffs[start * phi..(start + g.len()) * phi], g, &others)?, others));
            start += g.len();
        }
        let _ = for_rows(out, phi, |r, o| {
            let (gi, t) = (r / nt, target[r % nt]);
            let (lift, others) = &lifts[gi];
            match others.iter().position(|&x| x == t) {
                Some(j) => self.forward_row(&self.primes[t], &lift[j * phi..(j + 1) * phi], o),
                None => {
                    for (o, &x) in o.iter_mut().zip(row(t)) {
                        o.write(x);
                    }
                }
            }
            phi
        });
        Ok(())
    }

    /// The centred fast basis extension (the contract's `extend`): x given by its residues mod
    /// p_i = primes[src[i]] (`residues`, len(src) x phi, row i reduced mod p_i), D = prod p_i,
    /// to x' mod each primes[dst[j]] (len(dst) x phi, reduced), x' = x mod D and |x'| <= D/2
    /// but at the float rounding's edge. One source: x' is the residue taken as signed
    /// (x > p/2 -> x - p). More: y_i = x_i (D/p_i)^-1 mod p_i, frac = sum_i f64(y_i) / f64(p_i)
    /// left to right in IEEE doubles, u = floor(frac + 0.5), and x' = sum_i y_i (D/p_i) - u D,
    /// taken mod t as one 128-bit sum (u (t - D mod t) plus the products y_i (D/p_i mod t),
    /// folded every 16 terms) reduced once.
    pub fn extend(&self, residues: &[u64], src: &[usize], dst: &[usize]) -> Result<Vec<u64>, String> {
        // SAFETY: extend_into writes every destination row in full when it returns Ok
        unsafe { filled(dst.len() * self.phi, |out| self.extend_into(residues, src, dst, out)) }
    }

    /// [`extend`](Self::extend) into `out` (len(dst) x phi), every entry written when it returns
    /// Ok.
    pub fn extend_into(&self, residues: &[u64], src: &[usize], dst: &[usize], out: &mut [MaybeUninit<u64>])
        -> Result<(), String> {
        if out.len() != dst.len() * self.phi {
            return Err(format!("out: {} values for {} x {}", out.len(), dst.len(), self.phi));
        }
        if src.is_empty() {
            return Err("src is empty".into());
        }
        self.check_limbs(src, "src")?;
        self.check_limbs(dst, "dst")?;
        if let Some(i) = (1..src.len()).find(|&i| src[..i].contains(&src[i])) {
            return Err(format!("src names limb {} twice (the sources' primes must be distinct)", src[i]));
        }
        let (phi, ls) = (self.phi, src.len());
        if residues.len() != ls * phi {
            return Err(format!("residues: expected {ls} x {phi} values, got {}", residues.len()));
        }
        let sp: Vec<&Prime> = src.iter().map(|&i| &self.primes[i].p).collect();
        let tp: Vec<&Prime> = dst.iter().map(|&j| &self.primes[j].p).collect();
        // (D / p_i)^-1 mod p_i with its Shoup constant; D / p_i mod t_j; t_j - D mod t_j
        let hat_mod = |i: usize, t: &Prime| {
            sp.iter().enumerate().filter(|&(k, _)| k != i).fold(1 % t.q, |acc, (_, p)| t.mul(acc, t.reduce_u64(p.q)))
        };
        let inv: Vec<(u64, u64)> = (0..ls)
            .map(|i| {
                let v = sp[i].inv(hat_mod(i, sp[i]));
                (v, sp[i].shoup(v))
            })
            .collect();
        let w: Vec<Vec<u64>> = tp.iter().map(|t| (0..ls).map(|i| hat_mod(i, t)).collect()).collect();
        // u (t - D mod t) mod t for u = 0..=ls, per destination
        let unds: Vec<Vec<u64>> = tp
            .iter()
            .map(|t| {
                let nd = t.neg(sp.iter().fold(1 % t.q, |acc, p| t.mul(acc, t.reduce_u64(p.q))));
                (0..=ls as u64).map(|u| t.mul(t.reduce_u64(u), nd)).collect()
            })
            .collect();
        let pf: Vec<f64> = sp.iter().map(|p| p.q as f64).collect();
        let half = sp[0].q / 2;
        let wides: Vec<Wide> = tp.iter().map(|t| Wide::new(t.q)).collect();
        // each term is below p_max t (y_i < p_i, u <= ls and the weights below t): this many
        // of them stay below 2^63 t, which Wide::reduce takes
        let budget = ((1u64 << 63) / sp.iter().map(|p| p.q).max().unwrap_or(1)) as usize;

        let chunks = phi.div_ceil(EXTEND_CHUNK);
        let mut tasks: Vec<Vec<&mut [MaybeUninit<u64>]>> = (0..chunks).map(|_| Vec::with_capacity(dst.len())).collect();
        for row in out.chunks_mut(phi) {
            for (task, piece) in tasks.iter_mut().zip(row.chunks_mut(EXTEND_CHUNK)) {
                task.push(piece);
            }
        }
        let work = |(c, mut pieces): (usize, Vec<&mut [MaybeUninit<u64>]>)| -> bool {
            let k0 = c * EXTEND_CHUNK;
            let n = EXTEND_CHUNK.min(phi - k0);
            let rows: Vec<&[u64]> = (0..ls).map(|i| &residues[i * phi + k0..i * phi + k0 + n]).collect();
            if rows.iter().zip(&sp).any(|(x, p)| any_unreduced(x, p.q)) {
                return false;
            }
            if ls == 1 {
                let p = sp[0].q;
                for (o, t) in pieces.iter_mut().zip(&tp) {
                    for (o, &x) in o.iter_mut().zip(rows[0]) {
                        let neg = x > half;
                        let r = t.reduce_u64(if neg { p - x } else { x });
                        o.write(if neg { t.neg(r) } else { r });
                    }
                }
                return true;
            }
            // y_i per coefficient, k-major (ys[k ls + i]), and u from the float sum in i order
            let mut ys = vec![0u64; ls * n];
            let mut frac = vec![0f64; n];
            for (i, x) in rows.iter().enumerate() {
                let (p, (v, vs), pi) = (sp[i], inv[i], pf[i]);
                for ((f, y), &x) in frac.iter_mut().zip(ys[i..].iter_mut().step_by(ls)).zip(x.iter()) {
                    *y = p.mul_shoup(x, v, vs);
                    *f += *y as f64 / pi;
                }
            }
            // frac >= 0, so truncation is floor; u <= ls (each quotient is at most 1.0)
            let us: Vec<usize> = frac.iter().map(|&f| ((f + 0.5) as usize).min(ls)).collect();
            for ((o, wide), (wj, und)) in pieces.iter_mut().zip(&wides).zip(w.iter().zip(&unds)) {
                if ls < budget {
                    // the usual case: every sum fits one Barrett reduction (no folds)
                    combine_dispatch(o, &ys, &us, wj, und, wide);
                    continue;
                }
                for ((o, y), &u) in o.iter_mut().zip(ys.chunks_exact(ls)).zip(&us) {
                    let mut acc = und[u] as u128;
                    let mut terms = 1;
                    for (&y, &wi) in y.iter().zip(wj) {
                        if terms == budget {
                            acc = wide.reduce(acc) as u128;
                            terms = 1;
                        }
                        acc += y as u128 * wi as u128;
                        terms += 1;
                    }
                    o.write(wide.reduce(acc));
                }
            }
            true
        };
        let ok = if pooled((ls + dst.len()) * phi) {
            tasks.into_par_iter().enumerate().map(work).collect::<Vec<bool>>()
        } else {
            tasks.into_iter().enumerate().map(work).collect()
        };
        if ok.iter().all(|&b| b) {
            return Ok(());
        }
        Err(self.first_unreduced(&[("residues", residues)], src))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *s ^ (*s >> 29)
    }

    /// The largest prime below 2^bits that is 1 mod 2 N m.
    fn prime_for(m: usize, bits: u32) -> u64 {
        let step = prime_step(m);
        let mut q = ((1u64 << bits) - 1) / step * step + 1;
        while !is_prime(q) {
            q -= step;
        }
        q
    }

    /// Phi_m over the integers by long division of X^m - 1 by Phi_d for the proper divisors d
    /// (an independent construction), reduced mod q.
    fn phi_by_division(m: usize, q: u64) -> Vec<u64> {
        let mut cache: Vec<Option<Vec<i128>>> = vec![None; m + 1];
        fn get(n: usize, cache: &mut Vec<Option<Vec<i128>>>) -> Vec<i128> {
            if let Some(v) = &cache[n] {
                return v.clone();
            }
            let mut num = vec![0i128; n + 1];
            num[0] = -1;
            num[n] = 1;
            for d in 1..n {
                if n.is_multiple_of(d) {
                    let den = get(d, cache);
                    let dd = den.len() - 1;
                    let mut quo = vec![0i128; num.len() - dd];
                    for i in (0..quo.len()).rev() {
                        let c = num[i + dd]; // den is monic
                        quo[i] = c;
                        for (j, &x) in den.iter().enumerate() {
                            num[i + j] -= c * x;
                        }
                    }
                    num = quo;
                }
            }
            cache[n] = Some(num.clone());
            num
        }
        get(m, &mut cache).iter().map(|&c| c.rem_euclid(q as i128) as u64).collect()
    }

    #[test]
    fn cyclotomic_pair_matches_long_division_and_multiplies_to_xm_minus_1() {
        for m in [3usize, 9, 15, 45, 105, 127, 255, 1271] {
            let q = prime_for(m, 50);
            let p = Prime::new(q);
            let (phi, psi) = cyclotomic_pair(m, &p);
            assert_eq!(phi, phi_by_division(m, q), "m={m}");
            let mut prod = vec![0u64; m + 1];
            for (i, &a) in phi.iter().enumerate() {
                for (j, &b) in psi.iter().enumerate() {
                    prod[i + j] = p.add(prod[i + j], p.mul(a, b));
                }
            }
            let mut want = vec![0u64; m + 1];
            want[0] = q - 1;
            want[m] = 1;
            assert_eq!(prod, want, "m={m}");
        }
    }

    #[test]
    fn forward_matches_direct_evaluation_and_inverse_undoes_it() {
        for m in [3usize, 5, 9, 15, 21, 45, 63, 105, 257] {
            for bits in [40u32, 62] {
                let q = prime_for(m, bits);
                let ctx = CycloContext::new(m, &[q]).unwrap();
                let p = ctx.primes[0].p;
                let zeta = ctx.primes[0].zeta;
                assert_eq!(p.pow(zeta, m as u64), 1);
                let mut s = q ^ m as u64;
                let mut a: Vec<u64> = (0..ctx.phi).map(|_| lcg(&mut s) % q).collect();
                a[0] = q - 1;
                let vals = ctx.forward(&a, &[0]).unwrap();
                for (i, &u) in ctx.units.iter().enumerate() {
                    let x = p.pow(zeta, u as u64);
                    let want = a.iter().rev().fold(0, |acc, &c| p.add(p.mul(acc, x), c));
                    assert_eq!(vals[i], want, "m={m} q={q} u={u}");
                }
                assert_eq!(ctx.inverse(&vals, &[0]).unwrap(), a, "m={m} q={q}");
            }
        }
    }

    #[test]
    fn smallest_root_is_the_least_primitive_one() {
        for (m, bits) in [(3usize, 22u32), (15, 22), (45, 22), (105, 24)] {
            let q = prime_for(m, bits);
            let p = Prime::new(q);
            let r = smallest_primitive_root(&p, m).unwrap();
            let primitive = |x: u64| prime_factors(m).iter().all(|&f| p.pow(x, (m / f) as u64) != 1);
            let least = (2..q).find(|&x| p.pow(x, m as u64) == 1 && primitive(x));
            assert_eq!(Some(r), least, "m={m}");
        }
    }

    #[test]
    fn pointwise_products_are_products_mod_phi() {
        for m in [45usize, 105, 1271] {
            let q = prime_for(m, 55);
            let ctx = CycloContext::new(m, &[q]).unwrap();
            let p = ctx.primes[0].p;
            let phi_poly = phi_by_division(m, q);
            let mut s = 7 + m as u64;
            let a: Vec<u64> = (0..ctx.phi).map(|_| lcg(&mut s) % q).collect();
            let b: Vec<u64> = (0..ctx.phi).map(|_| lcg(&mut s) % q).collect();
            let mut prod = vec![0u64; 2 * ctx.phi - 1];
            for (i, &x) in a.iter().enumerate() {
                for (j, &y) in b.iter().enumerate() {
                    prod[i + j] = p.add(prod[i + j], p.mul(x, y));
                }
            }
            for top in (ctx.phi..prod.len()).rev() {
                let c = prod[top];
                for (j, &f) in phi_poly.iter().enumerate() {
                    prod[top - ctx.phi + j] = p.sub(prod[top - ctx.phi + j], p.mul(c, f));
                }
            }
            let (fa, fb) = (ctx.forward(&a, &[0]).unwrap(), ctx.forward(&b, &[0]).unwrap());
            let fc: Vec<u64> = fa.iter().zip(&fb).map(|(&x, &y)| p.mul(x, y)).collect();
            assert_eq!(ctx.inverse(&fc, &[0]).unwrap(), prod[..ctx.phi], "m={m}");
        }
    }

    /// The `count` largest primes below 2^bits that are 1 mod 2 N m.
    fn primes_for(m: usize, bits: u32, count: usize) -> Vec<u64> {
        let step = prime_step(m);
        let mut q = ((1u64 << bits) - 1) / step * step + 1;
        let mut out = vec![];
        while out.len() < count {
            if is_prime(q) {
                out.push(q);
            }
            q -= step;
        }
        out
    }

    fn residues(s: &mut u64, qs: &[u64], limbs: &[usize], items: usize, phi: usize) -> Vec<u64> {
        let mut out = vec![];
        for _ in 0..items {
            for &l in limbs {
                let q = qs[l];
                out.extend((0..phi).map(|k| if k == 0 { q - 1 } else { lcg(s) % q }));
            }
        }
        out
    }

    #[test]
    fn pointwise_ops_match_u128_arithmetic_with_broadcasting() {
        // m = 1271: 3 items x 5 rows x 1200 words is above SERIAL_WORDS (the pooled path), one
        // item below it (the serial one)
        let m = 1271;
        let qs: Vec<u64> = [primes_for(m, 40, 2), primes_for(m, 62, 1)].concat();
        let ctx = CycloContext::new(m, &qs).unwrap();
        let phi = ctx.phi;
        let limbs = [2usize, 0, 1, 0, 2];
        let mut s = 11;
        for items in [1usize, 3] {
            let a = residues(&mut s, &qs, &limbs, items, phi);
            let b = residues(&mut s, &qs, &limbs, items, phi);
            let c = residues(&mut s, &qs, &limbs, 1, phi); // per limb
            let q = |r: usize| qs[limbs[(r / phi) % limbs.len()]] as u128;
            let per = |x: &[u64], r: usize| if x.len() == a.len() { x[r] } else { x[r % c.len()] };
            for (x, y) in [(&a, &b), (&a, &c), (&c, &a)] {
                let add = ctx.pointwise(Pointwise::Add, x, y, &limbs).unwrap();
                let sub = ctx.pointwise(Pointwise::Sub, x, y, &limbs).unwrap();
                let mul = ctx.pointwise(Pointwise::Mul, x, y, &limbs).unwrap();
                assert_eq!(mul.len(), a.len());
                for r in 0..a.len() {
                    let (u, v) = (per(x, r) as u128, per(y, r) as u128);
                    assert_eq!(add[r] as u128, (u + v) % q(r));
                    assert_eq!(sub[r] as u128, (u + q(r) - v) % q(r));
                    assert_eq!(mul[r] as u128, u * v % q(r));
                }
            }
            let mut acc = a.clone();
            ctx.mul_acc(&mut acc, &b, &c, &limbs).unwrap();
            for r in 0..a.len() {
                assert_eq!(acc[r] as u128, (a[r] as u128 + b[r] as u128 * per(&c, r) as u128) % q(r));
            }
            let scalars = [qs[2] - 1, 0, 1, 12345, qs[2] - 2];
            let out = ctx.mul_scalar(&a, &scalars, &limbs).unwrap();
            for r in 0..a.len() {
                assert_eq!(out[r] as u128, a[r] as u128 * scalars[(r / phi) % limbs.len()] as u128 % q(r));
            }
        }
    }

    #[test]
    fn batched_ops_refuse_unreduced_inputs_by_name_and_leave_acc_alone() {
        let m = 1271;
        let qs = primes_for(m, 40, 2);
        let ctx = CycloContext::new(m, &qs).unwrap();
        let phi = ctx.phi;
        let limbs = [0usize, 1];
        let mut s = 5;
        let a = residues(&mut s, &qs, &limbs, 8, phi);
        let b = residues(&mut s, &qs, &limbs, 8, phi);
        let mut bad = b.clone();
        bad[(2 * 7 + 1) * phi + 1100] = qs[1]; // item 7, row 1, entry 1100
        let err = ctx.pointwise(Pointwise::Mul, &a, &bad, &limbs).unwrap_err();
        assert_eq!(err, format!("b: row 1 of item 7 (entry 1100) is not reduced mod its prime {}", qs[1]));
        let mut acc = a.clone();
        let err = ctx.mul_acc(&mut acc, &b, &bad, &limbs).unwrap_err();
        assert!(err.starts_with("b: row 1 of item 7 (entry 1100)"), "{err}");
        assert_eq!(acc, a, "acc must be rolled back");
        let mut bad_acc = a.clone();
        bad_acc[3] = u64::MAX;
        assert!(ctx.mul_acc(&mut bad_acc, &b, &b, &limbs).unwrap_err().starts_with("acc: row 0 of item 0 (entry 3)"));
        assert!(ctx.mul_scalar(&a, &[1, qs[1]], &limbs).unwrap_err().contains("scalars[1]"));
        assert!(ctx.pointwise(Pointwise::Add, &a, &b[..phi], &limbs).unwrap_err().starts_with("b:"));
        assert!(ctx.pointwise(Pointwise::Add, &a, &b, &[0, 2]).unwrap_err().contains("limb 2 out of range"));
        assert!(ctx.pointwise(Pointwise::Add, &a, &b, &[]).unwrap_err().contains("limbs is empty"));
        let mut short = a[..2 * phi].to_vec();
        assert!(ctx.mul_acc(&mut short, &a, &b, &limbs).unwrap_err().starts_with("acc:"));
        let r = residues(&mut s, &qs, &limbs, 1, phi);
        assert!(ctx.extend(&r, &[0, 0], &[1]).unwrap_err().contains("twice"));
        assert!(ctx.extend(&r, &[], &[1]).unwrap_err().contains("src is empty"));
        assert!(ctx.extend(&r, &[0, 1], &[3]).unwrap_err().contains("dst: limb 3"));
        let mut rb = r.clone();
        rb[phi + 9] = qs[1];
        assert!(ctx.extend(&rb, &[0, 1], &[0]).unwrap_err().starts_with("residues: row 1 (entry 9)"));
        assert!(ctx.extend(&r, &[0, 1], &[]).unwrap().is_empty());
    }

    /// x from its residues by CRT (u128), centred, then reduced mod t.
    fn crt_centred_mod(res: &[u64], ps: &[u64], t: u64) -> u64 {
        let d: u128 = ps.iter().map(|&p| p as u128).product();
        let mut x = 0u128;
        for (&r, &p) in res.iter().zip(ps) {
            let hat = d / p as u128;
            let pp = Prime::new(p);
            let c = pp.mul(r, pp.inv((hat % p as u128) as u64)) as u128;
            // x += c hat mod d without overflow: c < p, so c hat < d
            x = (x + c * hat) % d;
        }
        let t = t as i128;
        let signed = if x > d / 2 { x as i128 - d as i128 } else { x as i128 };
        signed.rem_euclid(t) as u64
    }

    #[test]
    fn extend_is_the_centred_crt_lift() {
        // (m, source bits, sources): 62-bit sources take the folding path (two terms per
        // reduction), ten small ones the generic combination, 2..=4 the unrolled ones
        for (m, bits, count) in [(45usize, 40u32, 3usize), (45, 62, 2), (45, 30, 4), (3, 12, 10), (1271, 45, 2)] {
            let mut qs = primes_for(m, bits, count);
            qs.extend(primes_for(m, 61, 2));
            qs.extend(primes_for(m, 36.max(prime_step(m).ilog2() + 2), 1));
            let ctx = CycloContext::new(m, &qs).unwrap();
            let phi = ctx.phi;
            let src: Vec<usize> = (0..count).rev().collect();
            let dst: Vec<usize> = (0..qs.len()).collect();
            let ps: Vec<u64> = src.iter().map(|&i| qs[i]).collect();
            let mut s = m as u64 + bits as u64;
            for one in [false, true] {
                let src = if one { &src[..1] } else { &src[..] };
                let mut r = residues(&mut s, &qs, src, 1, phi);
                if !one {
                    // zero and D - 1 (x = -1) as the last coefficient
                    for (i, &p) in ps.iter().enumerate() {
                        r[i * phi + phi - 1] = p - 1;
                        r[i * phi + phi - 2] = 0;
                    }
                }
                let out = ctx.extend(&r, src, &dst).unwrap();
                for (j, &t) in dst.iter().map(|&j| &qs[j]).enumerate() {
                    for k in 0..phi {
                        let col: Vec<u64> = (0..src.len()).map(|i| r[i * phi + k]).collect();
                        assert_eq!(out[j * phi + k], crt_centred_mod(&col, &ps[..src.len()], t), "m={m} k={k} j={j}");
                    }
                }
            }
        }
    }

    #[test]
    fn divide_round_and_digits_equal_their_unfused_steps() {
        let m = 105;
        let qs: Vec<u64> = [primes_for(m, 40, 3), primes_for(m, 60, 2)].concat();
        let ctx = CycloContext::new(m, &qs).unwrap();
        let phi = ctx.phi;
        let mut s = 3;
        let limbs = [0usize, 3, 1, 4, 2];
        let a = residues(&mut s, &qs, &limbs, 2, phi);
        for drop in [vec![4usize], vec![3, 4], vec![2, 0]] {
            let keep: Vec<usize> = limbs.iter().copied().filter(|x| !drop.contains(x)).collect();
            let got = ctx.divide_round(&a, &limbs, &drop).unwrap();
            for b in 0..2 {
                let item = &a[b * 5 * phi..(b + 1) * 5 * phi];
                let rows = |ls: &[usize]| -> Vec<u64> {
                    ls.iter().flat_map(|x| {
                        let i = limbs.iter().position(|y| y == x).unwrap();
                        item[i * phi..(i + 1) * phi].to_vec()
                    }).collect()
                };
                let top = ctx.inverse(&rows(&drop), &drop).unwrap();
                let halves: Vec<u64> = drop.iter().map(|&d| ctx.primes[d].p.inv(2)).collect();
                let y = ctx.mul_scalar(&top, &halves, &drop).unwrap();
                let lift = ctx.extend(&y, &drop, &keep).unwrap();
                let delta = ctx.forward(&ctx.pointwise(Pointwise::Add, &lift, &lift, &keep).unwrap(), &keep).unwrap();
                let diff = ctx.pointwise(Pointwise::Sub, &rows(&keep), &delta, &keep).unwrap();
                let d_inv: Vec<u64> = keep
                    .iter()
                    .map(|&k| {
                        let t = &ctx.primes[k].p;
                        t.inv(drop.iter().fold(1, |acc, &d| t.mul(acc, ctx.primes[d].p.q % t.q)))
                    })
                    .collect();
                let want = ctx.mul_scalar(&diff, &d_inv, &keep).unwrap();
                assert_eq!(got[b * keep.len() * phi..(b + 1) * keep.len() * phi], want[..], "drop {drop:?}");
            }
        }
        assert!(ctx.divide_round(&a, &limbs, &[0, 1, 2, 3, 4]).unwrap_err().contains("at least one limb"));
        assert!(ctx.divide_round(&a, &limbs, &[5]).unwrap_err().contains("limb 5 out of range"));
        // digits: own rows, and the lifted group elsewhere
        let x = &a[..4 * phi]; // limbs 0, 3, 1, 4
        let (dl, groups, target) = ([0usize, 3, 1, 4], vec![vec![1usize, 0], vec![3]], [0usize, 1, 2, 3, 4]);
        let got = ctx.digits(x, &dl, &groups, &target).unwrap();
        let g0: Vec<u64> = [&x[2 * phi..3 * phi], &x[..phi]].concat(); // rows of limbs 1, 0
        let coeffs = ctx.inverse(&g0, &[1, 0]).unwrap();
        let lift = ctx.forward(&ctx.extend(&coeffs, &[1, 0], &[2, 3, 4]).unwrap(), &[2, 3, 4]).unwrap();
        assert_eq!(got[..phi], x[..phi]);
        assert_eq!(got[phi..2 * phi], x[2 * phi..3 * phi]);
        assert_eq!(got[2 * phi..5 * phi], lift[..]);
        assert_eq!(got[5 * phi + 3 * phi..5 * phi + 4 * phi], x[phi..2 * phi]);
        assert!(ctx.digits(x, &dl, &[vec![0], vec![0]], &target).unwrap_err().contains("earlier group"));
    }

    #[test]
    fn bad_inputs_are_refused() {
        let m = 15;
        assert!(CycloContext::new(16, &[97]).is_err());
        assert!(CycloContext::new(m, &[]).is_err());
        let q = prime_for(m, 40);
        let composite = (1..).map(|i| q + i * prime_step(m)).find(|&c| !is_prime(c)).unwrap();
        let err = |primes: &[u64]| CycloContext::new(m, primes).err().unwrap();
        assert!(err(&[composite]).contains("not prime"));
        assert!(err(&[q + 2]).contains("not 1 mod"));
        assert!(err(&[q, q]).contains("twice"));
        let ctx = CycloContext::new(m, &[q]).unwrap();
        assert!(ctx.forward(&[0; 8], &[1]).unwrap_err().contains("limb 1"));
        assert!(ctx.forward(&[0; 7], &[0]).is_err());
        let mut a = vec![0u64; 8];
        a[3] = q;
        assert!(ctx.forward(&a, &[0]).unwrap_err().contains("row 0"));
        assert!(ctx.inverse(&a, &[0]).unwrap_err().contains("row 0"));
    }
}
