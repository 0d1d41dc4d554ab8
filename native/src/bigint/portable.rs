//! Portable engine: one lane, 64-bit limbs, CIOS almost-Montgomery multiplication with `u128`
//! products. Used where AVX-512 IFMA is absent or disabled (`SHAPER_NATIVE=portable`).

use super::engine::{ct_eq_mask, less_than, neg_inv64, pow2_mod, reduce_once_ct, twice, Constants, Engine, Modulus};

pub struct Portable {
    /// limbs per value: 4m < 2^(64 n)
    n: usize,
    /// canonical words
    w: usize,
    m: Vec<u64>,
    k0: u64,
    /// 1, R^2, canonical 1 and 2m in n limbs (4m < 2^(64 n))
    c: Constants,
}

impl Portable {
    pub fn new(modulus: &Modulus) -> Self {
        let n = (modulus.bits + 2).div_ceil(64);
        let w = modulus.words();
        let mut m = modulus.m.clone();
        m.resize(n, 0);
        let k0 = neg_inv64(m[0]);
        let one = pow2_mod(64 * n, &m);
        let rr = pow2_mod(128 * n, &m);
        let mut unit = vec![0u64; n];
        unit[0] = 1;
        let two_m = twice(&m, n); // 4m < 2^(64 n): no carry out
        Portable { n, w, m, k0, c: Constants { one, rr, unit, two_m } }
    }
}

impl Engine for Portable {
    fn lanes(&self) -> usize {
        1
    }
    fn gw(&self) -> usize {
        self.n
    }
    fn sw(&self) -> usize {
        self.n
    }
    fn words(&self) -> usize {
        self.w
    }

    #[inline(always)]
    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64]) {
        let n = self.n;
        let (a, b, m) = (&a[..n], &b[..n], &self.m[..n]);
        // CIOS: t = (t + a * b_i + m * y) / 2^64, both inner loops fused per limb
        let mut t = [0u64; 132];
        let t = &mut t[..n + 1];
        for &bi in b {
            let y = t[0].wrapping_add(a[0].wrapping_mul(bi)).wrapping_mul(self.k0);
            // limb 0 apart: y makes its low word zero, so only the carries go on (this keeps the
            // inner loop free of a branch, and its speed free of where the loop lands in memory)
            let s = t[0] as u128 + (a[0] as u128) * (bi as u128);
            let mut c1 = (s >> 64) as u64;
            let r = (s as u64) as u128 + (m[0] as u128) * (y as u128);
            let mut c2 = (r >> 64) as u64;
            for j in 1..n {
                let s = t[j] as u128 + (a[j] as u128) * (bi as u128) + c1 as u128;
                c1 = (s >> 64) as u64;
                let r = (s as u64) as u128 + (m[j] as u128) * (y as u128) + c2 as u128;
                c2 = (r >> 64) as u64;
                t[j - 1] = r as u64;
            }
            let s = t[n] as u128 + c1 as u128 + c2 as u128;
            t[n - 1] = s as u64;
            t[n] = (s >> 64) as u64;
        }
        out[..n].copy_from_slice(&t[..n]);
    }

    fn sqr(&self, out: &mut [u64], a: &[u64]) {
        self.mul(out, a, a)
    }

    fn load_raw(&self, out: &mut [u64], src: &[u64], count: usize) {
        out.fill(0);
        if count > 0 {
            out[..self.w].copy_from_slice(&src[..self.w]);
        }
    }

    fn store_raw(&self, dst: &mut [u64], src: &[u64], count: usize) {
        if count == 0 {
            return;
        }
        let mut v = src[..self.n].to_vec();
        reduce_once_ct(&mut v, &self.m);
        dst[..self.w].copy_from_slice(&v[..self.w]);
    }

    fn mw(&self) -> usize {
        self.n
    }

    fn load_mont(&self, out: &mut [u64], src: &[u64], count: usize) {
        if count == 0 {
            out[..self.n].fill(0);
        } else {
            out[..self.n].copy_from_slice(&src[..self.n]);
        }
    }

    fn store_mont(&self, dst: &mut [u64], src: &[u64], count: usize) {
        if count > 0 {
            dst[..self.n].copy_from_slice(&src[..self.n]);
        }
    }

    fn mont_ok(&self, row: &[u64]) -> bool {
        row.len() == self.n && less_than(row, &self.c.two_m)
    }

    fn constants(&self) -> &Constants {
        &self.c
    }

    #[inline(always)]
    fn select(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]) {
        let n = self.n;
        out[..n].fill(0);
        let want = idx[0] as u64;
        for e in 0..entries {
            let mask = ct_eq_mask(e as u64, want);
            let row = &table[e * n..(e + 1) * n];
            for j in 0..n {
                out[j] |= row[j] & mask;
            }
        }
    }

    fn select_shared(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]) {
        self.select(out, table, entries, idx)
    }

    fn extract(&self, src: &[u64], _lane: usize, dst: &mut [u64]) {
        dst[..self.n].copy_from_slice(&src[..self.n]);
    }

    fn broadcast(&self, src: &[u64], out: &mut [u64]) {
        out[..self.n].copy_from_slice(&src[..self.n]);
    }

    fn insert(&self, src: &[u64], _lane: usize, dst: &mut [u64]) {
        dst[..self.n].copy_from_slice(&src[..self.n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bigint::testkit::{engine_suite, modulus, Rng, SIZES};

    #[test]
    fn matches_oracle() {
        let mut rng = Rng::new(1);
        for &bits in SIZES {
            let (m, md) = modulus(&mut rng, bits);
            engine_suite(&Portable::new(&md), &m, &mut rng, true);
        }
    }

    #[test]
    fn largest_moduli() {
        let mut rng = Rng::new(2);
        for bits in [4096, 8190, 8192] {
            let (m, md) = modulus(&mut rng, bits);
            engine_suite(&Portable::new(&md), &m, &mut rng, false);
        }
    }

    #[test]
    fn stored_rows_below_2m() {
        let mut rng = Rng::new(3);
        for bits in [5, 64, 130, 1000] {
            let (m, md) = modulus(&mut rng, bits);
            let e = Portable::new(&md);
            let mut below = e.c.two_m.clone();
            below[0] -= 1; // 2m - 1
            assert!(e.mont_ok(&below));
            assert!(!e.mont_ok(&e.c.two_m));
            assert!(!e.mont_ok(&below[..e.mw() - 1]), "wrong row width");
            assert_eq!(e.mw(), (bits + 2).div_ceil(64));
            assert_eq!(e.words(), m.len());
        }
    }
}
