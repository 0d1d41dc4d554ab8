//! The negacyclic number-theoretic transform of one RNS row (Z_q[X]/(X^n + 1), n a power of
//! two up to 2^17, q < 2^62 prime with q = 1 mod 2n).
//!
//! Forward: Cooley–Tukey butterflies with the powers of psi (a primitive 2n-th root) stored in
//! bit-reversed order, merging the twist by psi into the butterflies (Longa and Naehrig 2016):
//! the output, in place and in natural index order, is A[k] = a(psi^(2 brv(k) + 1)). Inverse:
//! Gentleman–Sande butterflies with the inverse powers in the same order, n^-1 folded into the
//! last stage (one Shoup product per element instead of an extra pass).
//!
//! Butterflies are Harvey's (2014) lazy ones: every twiddle product is Shoup's (precomputed
//! w' = floor(w 2^64 / q)) and left in [0, 2q); forward values live in [0, 4q), inverse in
//! [0, 2q), and only the last stage reduces to [0, q). With q < 2^62 no intermediate overflows.
//!
//! Speed: stages whose two halves are at least a block apart run over the whole row; the rest
//! run block by block (a block of 2^11 words is 16 KiB, half of L1) so that most stages touch
//! only L1. Where the CPU has AVX2 (detected at run time) four butterflies run per instruction;
//! AVX2 has no 64 x 64-bit multiplier, so a high product is assembled from four 32 x 32-bit ones
//! (vpmuludq) and a low one from three. The portable path is always compiled and tested, and the
//! two agree bit for bit (both reduce fully at the end).

use super::prime::Prime;

/// Twiddle tables of one prime for one ring degree.
pub struct NttTable {
    pub n: usize,
    pub p: Prime,
    pub psi: u64,
    /// [k] = psi^brv(k) and its Shoup constant (k = 1..n; entry 0 unused)
    fwd: Vec<u64>,
    fwd_s: Vec<u64>,
    /// [k] = psi^-brv(k) and its Shoup constant
    inv: Vec<u64>,
    inv_s: Vec<u64>,
    /// n^-1 and n^-1 psi^-brv(1) (the last inverse stage), with Shoup constants
    n_inv: u64,
    n_inv_s: u64,
    last: u64,
    last_s: u64,
}

/// Bit reversal of k in `bits` bits.
#[inline]
pub fn brv(k: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        k.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Rows shorter than this are transformed whole; longer ones block by block after the first
/// stages (2^11 words = 16 KiB).
const BLOCK: usize = 1 << 11;

impl NttTable {
    /// Tables for prime `p`, degree n (power of two >= 2) and primitive 2n-th root psi.
    pub fn new(p: Prime, n: usize, psi: u64) -> NttTable {
        let bits = n.trailing_zeros();
        let psi_inv = p.inv(psi);
        let (mut fwd, mut inv) = (vec![0u64; n], vec![0u64; n]);
        let (mut pw, mut pwi) = (vec![1u64; n], vec![1u64; n]);
        for i in 1..n {
            pw[i] = p.mul(pw[i - 1], psi);
            pwi[i] = p.mul(pwi[i - 1], psi_inv);
        }
        for k in 0..n {
            fwd[k] = pw[brv(k, bits)];
            inv[k] = pwi[brv(k, bits)];
        }
        let fwd_s = fwd.iter().map(|&w| p.shoup(w)).collect();
        let inv_s = inv.iter().map(|&w| p.shoup(w)).collect();
        let n_inv = p.inv(n as u64 % p.q);
        let last = if n >= 2 { p.mul(n_inv, inv[1]) } else { n_inv };
        NttTable {
            n,
            p,
            psi,
            fwd,
            fwd_s,
            inv,
            inv_s,
            n_inv,
            n_inv_s: p.shoup(n_inv),
            last,
            last_s: p.shoup(last),
        }
    }

    /// In place: coefficients (< q) to evaluations A[k] = a(psi^(2 brv(k) + 1)) (< q).
    pub fn forward(&self, a: &mut [u64]) {
        assert_eq!(a.len(), self.n);
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            // SAFETY: AVX2 is present (checked at run time)
            unsafe { avx2::forward(self, a) };
            return;
        }
        self.forward_portable(a);
    }

    /// In place: the inverse of [`forward`](Self::forward).
    pub fn inverse(&self, a: &mut [u64]) {
        assert_eq!(a.len(), self.n);
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            // SAFETY: as above
            unsafe { avx2::inverse(self, a) };
            return;
        }
        self.inverse_portable(a);
    }

    /// Forward transform without AVX2 (inputs may be anywhere in [0, 4q)).
    pub fn forward_portable(&self, a: &mut [u64]) {
        let n = self.n;
        let mut m = 1;
        let mut t = n / 2;
        // whole-row stages, then block by block
        while m < n && 2 * t > BLOCK {
            self.forward_stage(a, 0, m, t);
            m *= 2;
            t /= 2;
        }
        if m < n {
            let blocks = n / (2 * t); // = m
            for b in 0..blocks {
                let (mut mm, mut tt) = (m, t);
                let base = b * 2 * t;
                // in block b, stage mm uses twiddles mm + (base / (2 tt)) + i
                while mm < n {
                    let first = base / (2 * tt);
                    let span = 2 * t / (2 * tt);
                    for i in first..first + span {
                        self.forward_group(&mut a[2 * i * tt..2 * i * tt + 2 * tt], mm + i, tt);
                    }
                    mm *= 2;
                    tt /= 2;
                }
            }
        }
        let p = self.p;
        for x in a.iter_mut() {
            *x = p.reduce_4q(*x);
        }
    }

    fn forward_stage(&self, a: &mut [u64], _base: usize, m: usize, t: usize) {
        for i in 0..m {
            self.forward_group(&mut a[2 * i * t..2 * i * t + 2 * t], m + i, t);
        }
    }

    #[inline(always)]
    fn forward_group(&self, g: &mut [u64], k: usize, t: usize) {
        let p = self.p;
        let two_q = 2 * p.q;
        let (w, ws) = (self.fwd[k], self.fwd_s[k]);
        let (lo, hi) = g.split_at_mut(t);
        for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
            let u = *x;
            let d = u.wrapping_sub(two_q);
            let u = if (d as i64) < 0 { u } else { d };
            let v = p.mul_shoup_lazy(*y, w, ws);
            *x = u + v;
            *y = u + two_q - v;
        }
    }

    /// Inverse transform without AVX2 (inputs in [0, 2q)).
    pub fn inverse_portable(&self, a: &mut [u64]) {
        let n = self.n;
        let p = self.p;
        // block by block while the butterflies stay within a block
        let mut m = n / 2;
        let mut t = 1;
        let blk = BLOCK.min(n);
        let mut m_after = m;
        let mut t_after = t;
        while m_after > 1 && 2 * t_after <= blk {
            m_after /= 2;
            t_after *= 2;
        }
        if m > 1 {
            for b in 0..n / blk {
                let (mut mm, mut tt) = (m, t);
                while mm > m_after {
                    let first = b * blk / (2 * tt);
                    for i in first..first + blk / (2 * tt) {
                        self.inverse_group(&mut a[2 * i * tt..2 * i * tt + 2 * tt], mm + i, tt);
                    }
                    mm /= 2;
                    tt *= 2;
                }
            }
            m = m_after;
            t = t_after;
        }
        while m > 1 {
            for i in 0..m {
                self.inverse_group(&mut a[2 * i * t..2 * i * t + 2 * t], m + i, t);
            }
            m /= 2;
            t *= 2;
        }
        // last stage with n^-1 folded in
        let two_q = 2 * p.q;
        let (lo, hi) = a.split_at_mut(n / 2);
        for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
            let (u, v) = (*x, *y);
            *x = p.mul_shoup(u + v, self.n_inv, self.n_inv_s);
            *y = p.mul_shoup(u + two_q - v, self.last, self.last_s);
        }
    }

    #[inline(always)]
    fn inverse_group(&self, g: &mut [u64], k: usize, t: usize) {
        let p = self.p;
        let two_q = 2 * p.q;
        let (w, ws) = (self.inv[k], self.inv_s[k]);
        let (lo, hi) = g.split_at_mut(t);
        for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
            let (u, v) = (*x, *y);
            let s = u + v;
            let d = s.wrapping_sub(two_q);
            *x = if (d as i64) < 0 { s } else { d };
            *y = p.mul_shoup_lazy(u + two_q - v, w, ws);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::NttTable;

    pub fn available() -> bool {
        false
    }

    pub unsafe fn forward(t: &NttTable, a: &mut [u64]) {
        t.forward_portable(a)
    }

    pub unsafe fn inverse(t: &NttTable, a: &mut [u64]) {
        t.inverse_portable(a)
    }
}

#[cfg(test)]
mod tests {
    use super::super::prime::{minimal_root, ntt_primes, Prime};
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *s ^ (*s >> 29)
    }

    pub fn test_primes(n: usize) -> Vec<u64> {
        [30u32, 50, 60, 61, 62].iter().map(|&b| ntt_primes(n as u64, b, 1, &[]).unwrap()[0]).collect()
    }

    fn table(q: u64, n: usize) -> NttTable {
        let p = Prime::new(q);
        NttTable::new(p, n, minimal_root(&p, n as u64).unwrap())
    }

    #[test]
    fn forward_matches_naive_evaluation() {
        for n in [16usize, 32, 64, 128, 256] {
            let bits = n.trailing_zeros();
            for q in test_primes(n) {
                let t = table(q, n);
                let p = t.p;
                let mut s = q ^ n as u64;
                let mut a: Vec<u64> = (0..n).map(|_| lcg(&mut s) % q).collect();
                a[0] = q - 1;
                a[1] = (q - 1) / 2;
                a[2] = (q + 1) / 2;
                a[3] = 0;
                let want: Vec<u64> = (0..n)
                    .map(|k| {
                        let x = p.pow(t.psi, 2 * brv(k, bits) as u64 + 1);
                        a.iter().rev().fold(0, |acc, &c| p.add(p.mul(acc, x), c))
                    })
                    .collect();
                let mut got = a.clone();
                t.forward_portable(&mut got);
                assert_eq!(got, want, "portable n={n} q={q}");
                let mut fast = a.clone();
                t.forward(&mut fast);
                assert_eq!(fast, want, "dispatched n={n} q={q}");
                t.inverse_portable(&mut got);
                assert_eq!(got, a, "portable inverse n={n} q={q}");
                t.inverse(&mut fast);
                assert_eq!(fast, a, "dispatched inverse n={n} q={q}");
            }
        }
    }

    #[test]
    fn round_trip_and_negacyclic_products_at_large_degrees() {
        for n in [8usize, 1 << 10, 1 << 12, 1 << 13, 1 << 14] {
            for q in test_primes(n) {
                let t = table(q, n);
                let p = t.p;
                let mut s = q.rotate_left(7) ^ n as u64;
                let a: Vec<u64> = (0..n).map(|_| lcg(&mut s) % q).collect();
                let b: Vec<u64> = (0..n).map(|_| if lcg(&mut s) % 3 == 0 { q - 1 } else { lcg(&mut s) % q }).collect();
                let (mut fa, mut fb) = (a.clone(), b.clone());
                t.forward(&mut fa);
                t.forward(&mut fb);
                let (mut pa, mut pb) = (a.clone(), b.clone());
                t.forward_portable(&mut pa);
                t.forward_portable(&mut pb);
                assert_eq!(fa, pa);
                assert_eq!(fb, pb);
                let mut prod: Vec<u64> = fa.iter().zip(&fb).map(|(&x, &y)| p.mul(x, y)).collect();
                let mut prod2 = prod.clone();
                t.inverse(&mut prod);
                t.inverse_portable(&mut prod2);
                assert_eq!(prod, prod2);
                if n <= 1 << 10 {
                    let mut want = vec![0u64; n];
                    for i in 0..n {
                        for j in 0..n {
                            let c = p.mul(a[i], b[j]);
                            let k = i + j;
                            if k < n {
                                want[k] = p.add(want[k], c);
                            } else {
                                want[k - n] = p.sub(want[k - n], c);
                            }
                        }
                    }
                    assert_eq!(prod, want, "n={n} q={q}");
                }
                let mut back = fa.clone();
                t.inverse(&mut back);
                assert_eq!(back, a);
            }
        }
    }

    #[test]
    fn lazy_inputs_up_to_four_q_are_accepted_forward() {
        let n = 64;
        let q = ntt_primes(n as u64, 62, 1, &[]).unwrap()[0];
        let t = table(q, n);
        let a: Vec<u64> = (0..n as u64).map(|i| (i * 0x9e3779b97f4a7c15) % q).collect();
        let lazy: Vec<u64> = a.iter().enumerate().map(|(i, &x)| x + (i as u64 % 4) * q).collect();
        let (mut x, mut y) = (a.clone(), lazy.clone());
        t.forward_portable(&mut x);
        t.forward_portable(&mut y);
        assert_eq!(x, y);
    }
}
