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

/// True where the AVX2 kernels run (x86-64 with AVX2, unless SHAPER_NO_AVX2 is set).
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return avx2::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
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
    //! Four lanes of 64 bits. Shoup's product needs hi64(y w') and two low 64-bit products;
    //! vpmuludq multiplies the low 32-bit halves of each lane, so hi64 takes four of them with
    //! exact carry propagation and each low product three (the two low products share one
    //! combining shift). Comparisons use the sign bit: every value is below 4q <= 2^64 and every
    //! bound subtracted (q, 2q) is below 2^63, so "x - c is negative as a signed number" means
    //! x < c, and vblendvpd selects on that sign bit.

    use super::{NttTable, BLOCK};
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| std::env::var_os("SHAPER_NO_AVX2").is_none() && is_x86_feature_detected!("avx2"))
    }

    /// A fixed operand w < q broadcast with its 32-bit halves swapped and its Shoup constant
    /// w' with its high half.
    #[derive(Clone, Copy)]
    struct Tw {
        w: __m256i,
        wswap: __m256i,
        ws: __m256i,
        wsh: __m256i,
    }

    #[derive(Clone, Copy)]
    struct Q {
        q: __m256i,
        qswap: __m256i,
        two_q: __m256i,
        hi_mask: __m256i,
    }

    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn tw(w: __m256i, ws: __m256i) -> Tw {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe { Tw { w, wswap: _mm256_shuffle_epi32(w, 0xB1), ws, wsh: _mm256_srli_epi64(ws, 32) } }
    }

    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn tw1(w: u64, ws: u64) -> Tw {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe { tw(_mm256_set1_epi64x(w as i64), _mm256_set1_epi64x(ws as i64)) }
    }

    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn consts(q: u64) -> Q {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe {
            let qv = _mm256_set1_epi64x(q as i64);
            Q {
                q: qv,
                qswap: _mm256_shuffle_epi32(qv, 0xB1),
                two_q: _mm256_set1_epi64x(2 * q as i64),
                hi_mask: _mm256_set1_epi64x(0xffff_ffff_0000_0000u64 as i64),
            }
        }
    }

    /// y w mod q in [0, 2q), any 64-bit y. Seven multiplications instead of ten:
    /// - the quotient hi64(y w') drops the low 32 x 32 product and the carries of the two
    ///   cross products, so it is at most 2 below Shoup's: y w - qhat q lies in [0, 4q), and one
    ///   conditional subtraction of 2q restores [0, 2q);
    /// - of the low product y w - qhat q (mod 2^64) the cross terms are needed only mod 2^32:
    ///   one vpmulld of y by w with halves swapped gives both (one per 32-bit half), for y w and
    ///   for qhat q alike.
    ///
    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn mul_shoup(y: __m256i, t: &Tw, c: &Q) -> __m256i {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe {
            let yh = _mm256_srli_epi64(y, 32);
            let lh = _mm256_mul_epu32(y, t.wsh);
            let hl = _mm256_mul_epu32(yh, t.ws);
            let hh = _mm256_mul_epu32(yh, t.wsh);
            let qhat = _mm256_add_epi64(hh, _mm256_add_epi64(_mm256_srli_epi64(hl, 32), _mm256_srli_epi64(lh, 32)));
            let lo = _mm256_sub_epi64(_mm256_mul_epu32(y, t.w), _mm256_mul_epu32(qhat, c.q));
            let cr = _mm256_sub_epi32(_mm256_mullo_epi32(y, t.wswap), _mm256_mullo_epi32(qhat, c.qswap));
            // high half: sum of the two halves of cr (mod 2^32)
            let cross = _mm256_and_si256(_mm256_add_epi64(cr, _mm256_slli_epi64(cr, 32)), c.hi_mask);
            csub(_mm256_add_epi64(lo, cross), c.two_q)
        }
    }

    /// x - b if x >= b else x (x < 2^64, b < 2^63, x - b < 2^63 when x >= b).
    ///
    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn csub(x: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe {
            let d = _mm256_sub_epi64(x, b);
            _mm256_castpd_si256(_mm256_blendv_pd(_mm256_castsi256_pd(d), _mm256_castsi256_pd(x), _mm256_castsi256_pd(d)))
        }
    }

    /// Harvey's forward butterfly: x, y in [0, 4q) -> x + wy, x - wy + 2q in [0, 4q).
    ///
    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn fwd_bf(x: __m256i, y: __m256i, t: &Tw, c: &Q) -> (__m256i, __m256i) {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe {
            let x = csub(x, c.two_q);
            let v = mul_shoup(y, t, c);
            (_mm256_add_epi64(x, v), _mm256_sub_epi64(_mm256_add_epi64(x, c.two_q), v))
        }
    }

    /// Gentleman–Sande butterfly: x, y in [0, 2q) -> x + y, (x - y) w in [0, 2q).
    ///
    /// # Safety
    /// The CPU must have AVX2 (it runs inside the AVX2 [`forward`] and [`inverse`] only).
    #[inline(always)]
    unsafe fn inv_bf(x: __m256i, y: __m256i, t: &Tw, c: &Q) -> (__m256i, __m256i) {
        // SAFETY: AVX2 is present (this function's contract); registers only.
        unsafe {
            let s = csub(_mm256_add_epi64(x, y), c.two_q);
            let d = mul_shoup(_mm256_sub_epi64(_mm256_add_epi64(x, c.two_q), y), t, c);
            (s, d)
        }
    }

    /// # Safety
    /// The CPU must have AVX2, and `p` must be readable for 4 words.
    #[inline(always)]
    unsafe fn ld(p: *const u64) -> __m256i {
        // SAFETY: AVX2 and the 32 readable bytes are the caller's guarantee (`loadu`: any alignment).
        unsafe { _mm256_loadu_si256(p as *const __m256i) }
    }

    /// # Safety
    /// The CPU must have AVX2, and `p` must be writable for 4 words.
    #[inline(always)]
    unsafe fn st(p: *mut u64, v: __m256i) {
        // SAFETY: AVX2 and the 32 writable bytes are the caller's guarantee (`storeu`: any alignment).
        unsafe { _mm256_storeu_si256(p as *mut __m256i, v) }
    }

    /// One group of a stage with half-length t >= 4 (twiddle index k).
    ///
    /// # Safety
    /// The CPU must have AVX2; `g` must be valid for reading and writing 2 t words, t a multiple
    /// of 4.
    #[inline(always)]
    unsafe fn fwd_group(tb: &NttTable, g: *mut u64, k: usize, t: usize, c: &Q) {
        // SAFETY: the butterflies touch words `j` and `j + t` of `g` for j < t, t a multiple of 4:
        // inside the 2 t words the caller guarantees.
        unsafe {
            let w = tw1(tb.fwd[k], tb.fwd_s[k]);
            let mut j = 0;
            while j < t {
                let (x, y) = fwd_bf(ld(g.add(j)), ld(g.add(j + t)), &w, c);
                st(g.add(j), x);
                st(g.add(j + t), y);
                j += 4;
            }
        }
    }

    /// # Safety
    /// As for [`fwd_group`].
    #[inline(always)]
    unsafe fn inv_group(tb: &NttTable, g: *mut u64, k: usize, t: usize, c: &Q) {
        // SAFETY: as in `fwd_group`.
        unsafe {
            let w = tw1(tb.inv[k], tb.inv_s[k]);
            let mut j = 0;
            while j < t {
                let (x, y) = inv_bf(ld(g.add(j)), ld(g.add(j + t)), &w, c);
                st(g.add(j), x);
                st(g.add(j + t), y);
                j += 4;
            }
        }
    }

    /// The last two forward stages (t = 2, then t = 1) on `len` words at offset e of the row,
    /// with the final reduction to [0, q).
    ///
    /// # Safety
    /// The CPU must have AVX2; `a` must be valid for reading and writing words `e0..e0 + len`,
    /// `e0` and `len` multiples of 8 with `e0 + len` <= n (`tb.n`), and the twiddle tables hold
    /// n words each (as [`NttTable::new`] makes them).
    #[inline(always)]
    unsafe fn fwd_last2(tb: &NttTable, a: *mut u64, e0: usize, len: usize, c: &Q) {
        // SAFETY: words `e..e + 8` of `a` lie in `e0..e0 + len`; the twiddles read are words
        // n/4 + e/4 (two) and n/2 + e/2 (four) of tables of n words, e <= n - 8.
        unsafe {
            let n = tb.n;
            let (m2, m1) = (n / 4, n / 2);
            let dup = _mm256_setr_epi64x(0, 0, 1, 1);
            let _ = dup;
            let mut e = e0;
            while e < e0 + len {
                let v0 = ld(a.add(e));
                let v1 = ld(a.add(e + 4));
                let x = _mm256_permute2x128_si256(v0, v1, 0x20);
                let y = _mm256_permute2x128_si256(v0, v1, 0x31);
                let i2 = m2 + e / 4;
                let w2 = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128(tb.fwd.as_ptr().add(i2) as *const __m128i)), 0x50);
                let w2s = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128(tb.fwd_s.as_ptr().add(i2) as *const __m128i)), 0x50);
                let (x, y) = fwd_bf(x, y, &tw(w2, w2s), c);
                let lo = _mm256_unpacklo_epi64(x, y);
                let hi = _mm256_unpackhi_epi64(x, y);
                let i1 = m1 + e / 2;
                let t1 = tw(ld(tb.fwd.as_ptr().add(i1)), ld(tb.fwd_s.as_ptr().add(i1)));
                let (x, y) = fwd_bf(lo, hi, &t1, c);
                let x = csub(csub(x, c.two_q), c.q);
                let y = csub(csub(y, c.two_q), c.q);
                let lo = _mm256_unpacklo_epi64(x, y);
                let hi = _mm256_unpackhi_epi64(x, y);
                st(a.add(e), _mm256_permute2x128_si256(lo, hi, 0x20));
                st(a.add(e + 4), _mm256_permute2x128_si256(lo, hi, 0x31));
                e += 8;
            }
        }
    }

    /// The first two inverse stages (t = 1, then t = 2) on `len` words at offset e0.
    ///
    /// # Safety
    /// As for [`fwd_last2`].
    #[inline(always)]
    unsafe fn inv_first2(tb: &NttTable, a: *mut u64, e0: usize, len: usize, c: &Q) {
        // SAFETY: as in `fwd_last2`.
        unsafe {
            let n = tb.n;
            let (m1, m2) = (n / 2, n / 4);
            let mut e = e0;
            while e < e0 + len {
                let v0 = ld(a.add(e));
                let v1 = ld(a.add(e + 4));
                let x = _mm256_unpacklo_epi64(v0, v1); // a0 a4 a2 a6
                let y = _mm256_unpackhi_epi64(v0, v1); // a1 a5 a3 a7
                let i1 = m1 + e / 2;
                let t1 = tw(_mm256_permute4x64_epi64(ld(tb.inv.as_ptr().add(i1)), 0xD8),
                            _mm256_permute4x64_epi64(ld(tb.inv_s.as_ptr().add(i1)), 0xD8));
                let (x, y) = inv_bf(x, y, &t1, c);
                let lo = _mm256_unpacklo_epi64(x, y); // a0 a1 a2 a3
                let hi = _mm256_unpackhi_epi64(x, y); // a4 a5 a6 a7
                let x = _mm256_permute2x128_si256(lo, hi, 0x20);
                let y = _mm256_permute2x128_si256(lo, hi, 0x31);
                let i2 = m2 + e / 4;
                let w2 = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128(tb.inv.as_ptr().add(i2) as *const __m128i)), 0x50);
                let w2s = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128(tb.inv_s.as_ptr().add(i2) as *const __m128i)), 0x50);
                let (x, y) = inv_bf(x, y, &tw(w2, w2s), c);
                st(a.add(e), _mm256_permute2x128_si256(x, y, 0x20));
                st(a.add(e + 4), _mm256_permute2x128_si256(x, y, 0x31));
                e += 8;
            }
        }
    }

    /// # Safety
    /// The CPU must have AVX2 ([`available`]), and `row` must hold `tb.n` words.
    #[target_feature(enable = "avx2")]
    pub unsafe fn forward(tb: &NttTable, row: &mut [u64]) {
        // SAFETY: every group, `fwd_last2` block and butterfly pair lies inside the n words of
        // `row` (the stage loops split 0..n into disjoint groups), as those helpers require.
        unsafe {
            let n = tb.n;
            if n < 8 {
                return tb.forward_portable(row);
            }
            let c = consts(tb.p.q);
            let a = row.as_mut_ptr();
            let (mut m, mut t) = (1, n / 2);
            while 2 * t > BLOCK {
                for i in 0..m {
                    fwd_group(tb, a.add(2 * i * t), m + i, t, &c);
                }
                m *= 2;
                t /= 2;
            }
            let blk = 2 * t;
            for b in 0..n / blk {
                let base = b * blk;
                let (mut mm, mut tt) = (m, t);
                while tt >= 4 {
                    let first = base / (2 * tt);
                    for i in first..first + blk / (2 * tt) {
                        fwd_group(tb, a.add(2 * i * tt), mm + i, tt, &c);
                    }
                    mm *= 2;
                    tt /= 2;
                }
                fwd_last2(tb, a, base, blk, &c);
            }
        }
    }

    /// # Safety
    /// As for [`forward`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn inverse(tb: &NttTable, row: &mut [u64]) {
        // SAFETY: as in `forward`: `inv_first2`, the groups and the last stage stay inside `row`.
        unsafe {
            let n = tb.n;
            if n < 8 {
                return tb.inverse_portable(row);
            }
            let c = consts(tb.p.q);
            let a = row.as_mut_ptr();
            let blk = BLOCK.min(n);
            // per block: stages t = 1, 2 (m = n/2, n/4), then t = 4.. while within the block
            // (and never the last stage, m = 1)
            let mut m_after = n / 8;
            let mut t_after = 4;
            while m_after > 1 && 2 * t_after <= blk {
                m_after /= 2;
                t_after *= 2;
            }
            for b in 0..n / blk {
                let base = b * blk;
                inv_first2(tb, a, base, blk, &c);
                let (mut mm, mut tt) = (n / 8, 4);
                while mm > m_after {
                    let first = base / (2 * tt);
                    for i in first..first + blk / (2 * tt) {
                        inv_group(tb, a.add(2 * i * tt), mm + i, tt, &c);
                    }
                    mm /= 2;
                    tt *= 2;
                }
            }
            let (mut m, mut t) = (m_after, t_after);
            while m > 1 {
                for i in 0..m {
                    inv_group(tb, a.add(2 * i * t), m + i, t, &c);
                }
                m /= 2;
                t *= 2;
            }
            // last stage, n^-1 folded in, reduced to [0, q)
            let h = n / 2;
            let ti = tw1(tb.n_inv, tb.n_inv_s);
            let tl = tw1(tb.last, tb.last_s);
            let mut j = 0;
            while j < h {
                let x = ld(a.add(j));
                let y = ld(a.add(j + h));
                let s = mul_shoup(_mm256_add_epi64(x, y), &ti, &c);
                let d = mul_shoup(_mm256_sub_epi64(_mm256_add_epi64(x, c.two_q), y), &tl, &c);
                st(a.add(j), csub(s, c.q));
                st(a.add(j + h), csub(d, c.q));
                j += 4;
            }
        }
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
        let a: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e3779b97f4a7c15) % q).collect();
        let lazy: Vec<u64> = a.iter().enumerate().map(|(i, &x)| x + (i as u64 % 4) * q).collect();
        let (mut x, mut y) = (a.clone(), lazy.clone());
        t.forward_portable(&mut x);
        t.forward_portable(&mut y);
        assert_eq!(x, y);
    }
}
