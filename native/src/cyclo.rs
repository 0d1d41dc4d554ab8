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
        self.run(a, limbs, "coeffs", |t, row, out| self.forward_row(t, row, out))
    }

    /// Values (len(limbs), phi) -> the coefficients of the polynomial of degree < phi taking
    /// them (the inverse of [`forward`](Self::forward)).
    pub fn inverse(&self, a: &[u64], limbs: &[usize]) -> Result<Vec<u64>, String> {
        self.run(a, limbs, "values", |t, row, out| self.inverse_row(t, row, out))
    }

    fn run<F>(&self, a: &[u64], limbs: &[usize], what: &str, f: F) -> Result<Vec<u64>, String>
    where
        F: Fn(&CycloPrime, &[u64], &mut [u64]) + Sync,
    {
        self.check(a, limbs)?;
        let phi = self.phi;
        let mut out = vec![0u64; a.len()];
        if limbs.len() == 1 {
            // one row: no rayon at all (the caller may not have installed a pool)
            let t = &self.primes[limbs[0]];
            check_row(a, t.p.q, 0, what)?;
            f(t, a, &mut out);
            return Ok(out);
        }
        out.par_chunks_mut(phi).zip(a.par_chunks(phi)).zip(limbs.par_iter()).enumerate().try_for_each(
            |(r, ((o, row), &l))| {
                let t = &self.primes[l];
                check_row(row, t.p.q, r, what)?;
                f(t, row, o);
                Ok::<(), String>(())
            },
        )?;
        Ok(out)
    }

    fn forward_row(&self, t: &CycloPrime, a: &[u64], out: &mut [u64]) {
        let (p, phi) = (t.p, self.phi);
        let mut buf = vec![0u64; self.n];
        for (((x, &ai), &c), &cs) in buf[..phi].iter_mut().zip(a).zip(&t.c).zip(&t.cs) {
            *x = p.mul_shoup_lazy(ai, c, cs);
        }
        t.fwd.apply(&t.big, &mut buf);
        for (o, &u) in out.iter_mut().zip(&self.units) {
            *o = p.mul_shoup(buf[u], t.c[u], t.cs[u]);
        }
    }

    fn inverse_row(&self, t: &CycloPrime, v: &[u64], out: &mut [u64]) {
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
            *o = p.sub(g, r);
        }
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

