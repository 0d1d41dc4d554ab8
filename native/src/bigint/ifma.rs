//! AVX-512 IFMA engine: eight independent values per group ("mb8" layout), radix 2^52.
//!
//! A value of `l` digits lives digit-major across the group: word `j * 8 + lane` holds digit j
//! of that lane, so digit j of all eight values is one zmm register. The modulus is shared by
//! all lanes and kept as scalar digits that are broadcast as needed. Multiplication is the
//! word-serial almost-Montgomery product (AMM) with the low/high halves and the one-digit shift
//! fused into a single pass; squaring computes each cross product once. Accumulator digits
//! absorb about 4l terms below 2^52 before the final carry pass (< 2^62 for l <= 158).
//!
//! Every function here is compiled with `avx512f,avx512ifma` enabled and must only be called
//! after [`available`] returned true. The module exists on x86-64 only (see `bigint/mod.rs`);
//! elsewhere the portable engine is the only one.

use std::arch::x86_64::*;

use super::engine::{ct_mask, less_than, neg_inv64, pow2_mod, twice, Constants, Engine, Modulus};

const MASK52: u64 = (1u64 << 52) - 1;
/// Largest digit count (8192-bit moduli: ceil(8194 / 52) = 158).
const MAX_L: usize = 160;

/// True when this CPU (and OS) supports AVX-512F and AVX-512 IFMA.
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512ifma")
}

pub struct Ifma {
    l: usize,
    w: usize,
    /// modulus digits (scalar, l of them)
    m: Vec<u64>,
    k0: u64,
    /// 1, R^2, canonical 1 (spread over the lanes) and the digits of 2m
    c: Constants,
}

/// Little-endian 64-bit words -> `l` 52-bit digits.
pub fn words_to_digits(src: &[u64], l: usize, dst: &mut [u64]) {
    for j in 0..l {
        let off = 52 * j;
        let i = off / 64;
        let s = off % 64;
        let lo = if i < src.len() { src[i] >> s } else { 0 };
        let hi = if s > 12 && i + 1 < src.len() { src[i + 1] << (64 - s) } else { 0 };
        dst[j] = (lo | hi) & MASK52;
    }
}

/// `l` 52-bit digits -> `w` little-endian words (bits beyond 64w are dropped; callers pass
/// values below 2^(64w)).
pub fn digits_to_words(src: &[u64], w: usize, dst: &mut [u64]) {
    dst[..w].fill(0);
    for (j, &d) in src.iter().enumerate() {
        let off = 52 * j;
        let i = off / 64;
        let s = off % 64;
        if i < w {
            dst[i] |= d << s;
        }
        if s > 12 && i + 1 < w {
            dst[i + 1] |= d >> (64 - s);
        }
    }
}

impl Ifma {
    /// `None` when this CPU lacks AVX-512 IFMA (the engine's code must not run there).
    pub fn new(modulus: &Modulus) -> Option<Self> {
        if !available() {
            return None;
        }
        let l = (modulus.bits + 2).div_ceil(52);
        assert!(l <= MAX_L);
        let w = modulus.words();
        let mut m = vec![0u64; l + R + 2]; // zero digits of padding (see amm_rows, ams_reduce)
        words_to_digits(&modulus.m, l, &mut m[..l]);
        let k0 = neg_inv64(modulus.m[0]) & MASK52;
        let spread = |words: &[u64]| {
            let mut d = vec![0u64; l];
            words_to_digits(words, l, &mut d);
            let mut g = vec![0u64; 8 * l];
            for j in 0..l {
                for lane in 0..8 {
                    g[j * 8 + lane] = d[j];
                }
            }
            g
        };
        let one = spread(&pow2_mod(52 * l, &modulus.m));
        let rr = spread(&pow2_mod(104 * l, &modulus.m));
        let unit = spread(&[1u64]);
        let mut two_m = vec![0u64; l];
        words_to_digits(&twice(&modulus.m, w + 1), l, &mut two_m); // 2m < 4m < 2^(52 l)
        Some(Ifma { l, w, m, k0, c: Constants { one, rr, unit, two_m } })
    }
}

/// Digit j of lane k = table[off[k] + j]: one 8-lane gather per digit (whole-register writes, so
/// the product that reads the group next does not stall on partial stores).
///
/// # Safety
/// The CPU must have AVX-512F ([`available`]). For every lane k, words `off[k]..off[k] + l`
/// of `table` must be readable (`off[k]` >= 0), and `out` valid for writing 8 l words.
#[target_feature(enable = "avx512f")]
unsafe fn gather8(out: *mut u64, table: *const u64, off: &[i64; 8], l: usize) {
    // SAFETY: every gather reads words `off[k] + j` (j < l) of `table` and every store writes
    // words `8 j..8 j + 8` of `out`, inside the ranges the caller guarantees.
    unsafe {
        let mut idx = _mm512_loadu_si512(off.as_ptr() as *const _);
        let one = _mm512_set1_epi64(1);
        for j in 0..l {
            let v = _mm512_i64gather_epi64::<8>(idx, table as *const i64);
            _mm512_storeu_si512(out.add(j * 8) as *mut _, v);
            idx = _mm512_add_epi64(idx, one);
        }
    }
}

/// Rows (digits of b, or reduction digits) handled per pass over the columns: each column
/// load/store then carries 4R multiply-adds, so the IFMA units, not the store port, set the
/// pace.
const R: usize = 2;

type Slots<const N: usize> = [std::mem::MaybeUninit<__m512i>; N];

/// # Safety
/// `k` must be at most the number of slots of the allocation `p` points into.
#[inline(always)]
unsafe fn slot(p: *mut __m512i, k: usize) -> *mut __m512i {
    // SAFETY: in bounds by the caller's guarantee.
    unsafe { p.add(k) }
}

/// # Safety
/// The CPU must have AVX-512F, and `m.add(k)` must be a readable `u64`.
#[inline(always)]
unsafe fn bcast(m: *const u64, k: usize) -> __m512i {
    // SAFETY: AVX-512F and the readable word are the caller's guarantee.
    unsafe { _mm512_set1_epi64(*m.add(k) as i64) }
}

/// One pass of word-serial almost-Montgomery multiplication over `RR` digits of b (`b_i..`),
/// on the shifted accumulator `acc` (l + R slots, the top R zero). `ap` is a with R+1 zero
/// digits of padding; `m` the modulus with R+1 zero digits of padding.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `acc` must be valid for reading and
/// writing l + RR slots, `ap` readable for l + RR slots (a's l digits, then zeros), `b`
/// readable for RR slots and `m` for l + RR words (the modulus's l digits, then zeros).
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn amm_rows<const RR: usize>(acc: *mut __m512i, ap: *const __m512i, b: *const __m512i, m: *const u64,
                                    k0: __m512i, l: usize) {
    // SAFETY: the slots read and written are `acc[0..l + RR]`, `ap[0..l + RR]`, `b[0..RR]`
    // and `m[0..l + RR]`, the ranges the caller guarantees.
    unsafe {
        let zero = _mm512_setzero_si512();
        let mut bs = [zero; RR];
        for r in 0..RR {
            bs[r] = _mm512_loadu_si512(b.add(r));
        }
        let mut ys = [zero; RR];
        let mut carry = zero;
        // columns 0..RR fix the reduction digits y_0..y_{RR-1}, one after the other
        for c in 0..RR {
            let mut v = _mm512_add_epi64(*acc.add(c), carry);
            for r in 0..=c {
                v = _mm512_madd52lo_epu64(v, *ap.add(c - r), bs[r]);
                if r < c {
                    v = _mm512_madd52hi_epu64(v, *ap.add(c - r - 1), bs[r]);
                    v = _mm512_madd52lo_epu64(v, bcast(m, c - r), ys[r]);
                    v = _mm512_madd52hi_epu64(v, bcast(m, c - r - 1), ys[r]);
                }
            }
            ys[c] = _mm512_madd52lo_epu64(zero, v, k0);
            v = _mm512_madd52lo_epu64(v, bcast(m, 0), ys[c]);
            carry = _mm512_srli_epi64::<52>(v);
        }
        // the remaining columns take every row's four terms; results shift down by RR digits.
        // aw[k] = a_{c-k}, mw[k] = m_{c-k}: one new digit of each per column, the rest rotate
        // through registers (loads, not multiplies, would otherwise bound the speed).
        let mut aw = [zero; 5];
        let mut mw = [zero; 5];
        for k in 1..=RR {
            aw[k] = *ap.add(RR - k);
            mw[k] = bcast(m, RR - k);
        }
        for c in RR..l + RR {
            aw[0] = *ap.add(c);
            mw[0] = bcast(m, c);
            // two independent chains per column keep the multiply-add latency hidden
            let mut v = *acc.add(c);
            let mut h = zero;
            for r in 0..RR {
                v = _mm512_madd52lo_epu64(v, aw[r], bs[r]);
                h = _mm512_madd52hi_epu64(h, aw[r + 1], bs[r]);
                v = _mm512_madd52lo_epu64(v, mw[r], ys[r]);
                h = _mm512_madd52hi_epu64(h, mw[r + 1], ys[r]);
            }
            v = _mm512_add_epi64(v, h);
            if c == RR {
                v = _mm512_add_epi64(v, carry);
            }
            *acc.add(c - RR) = v;
            for k in (1..=RR).rev() {
                aw[k] = aw[k - 1];
                mw[k] = mw[k - 1];
            }
        }
        for c in l..l + RR {
            *acc.add(c) = zero;
        }
    }
}

/// Almost-Montgomery multiplication of eight lane pairs: out = a * b / 2^(52 l) mod m, in
/// [0, 2m) for inputs in [0, 2m).
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `l` <= `MAX_L`; `a` and `b` must be
/// readable for 8 l words, `out` writable for 8 l words, and `m` readable for l + R words
/// (the modulus's l digits, then zeros).
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn amm8(out: *mut u64, a: *const u64, b: *const u64, m: *const u64, k0: u64, l: usize) {
    // SAFETY: the local `acc` and `ap` hold MAX_L + R + 1 and MAX_L + R + 2 >= l + R slots,
    // every one written before it is read; `a`, `b`, `m` and `out` are accessed within the
    // ranges the caller guarantees, which are those `amm_rows` and `normalize` need.
    unsafe {
        let zero = _mm512_setzero_si512();
        let mut acc_slots: Slots<{ MAX_L + R + 1 }> = [std::mem::MaybeUninit::uninit(); MAX_L + R + 1];
        let acc = acc_slots.as_mut_ptr() as *mut __m512i;
        let mut a_slots: Slots<{ MAX_L + R + 2 }> = [std::mem::MaybeUninit::uninit(); MAX_L + R + 2];
        let ap = a_slots.as_mut_ptr() as *mut __m512i;
        let src = a as *const __m512i;
        for k in 0..l {
            *slot(acc, k) = zero;
            *slot(ap, k) = _mm512_loadu_si512(src.add(k));
        }
        for k in l..l + R + 1 {
            *slot(acc, k) = zero;
            *slot(ap, k) = zero;
        }
        let k0v = _mm512_set1_epi64(k0 as i64);
        let bp = b as *const __m512i;
        let mut i = 0;
        while i + R <= l {
            amm_rows::<R>(acc, ap, bp.add(i), m, k0v, l);
            i += R;
        }
        while i < l {
            amm_rows::<1>(acc, ap, bp.add(i), m, k0v, l);
            i += 1;
        }
        normalize(out, acc, l);
    }
}

/// Cross products of rows i..i+RR of a squaring into absolute columns: lo(a_{i+r} a_j) at
/// column i+r+j and hi at i+r+j+1, for j > i+r. `ap` has R+1 zero digits of padding.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `acc` must be valid for reading and
/// writing i + l + RR slots and `ap` readable for l + RR slots (a's l digits, then zeros).
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn ams_cross<const RR: usize>(acc: *mut __m512i, ap: *const __m512i, i: usize, l: usize) {
    // SAFETY: the columns touched are `acc[2 i + 1..i + l + RR]` and the digits read
    // `ap[i..l + RR]`, the ranges the caller guarantees.
    unsafe {
        let zero = _mm512_setzero_si512();
        let mut ar = [zero; RR];
        for r in 0..RR {
            ar[r] = *ap.add(i + r);
        }
        let last = i + RR - 1 + l; // hi of the last row's last product
        let full = 2 * i + 2 * RR; // from here on every row's terms are in range
        for c in 2 * i + 1..full.min(last + 1) {
            let mut v = *acc.add(c);
            for r in 0..RR {
                let lo_j = c as isize - (i + r) as isize;
                if lo_j > (i + r) as isize {
                    v = _mm512_madd52lo_epu64(v, ar[r], *ap.add(lo_j as usize));
                }
                if lo_j - 1 > (i + r) as isize {
                    v = _mm512_madd52hi_epu64(v, ar[r], *ap.add(lo_j as usize - 1));
                }
            }
            *acc.add(c) = v;
        }
        // aw[k] = a_{c-i-k}, rotated through registers
        let mut aw = [zero; 5];
        if full <= last {
            for k in 1..=RR {
                aw[k] = *ap.add(full - i - k);
            }
        }
        for c in full..=last {
            aw[0] = *ap.add(c - i);
            let mut v = *acc.add(c);
            let mut h = zero;
            for r in 0..RR {
                v = _mm512_madd52lo_epu64(v, ar[r], aw[r]);
                h = _mm512_madd52hi_epu64(h, ar[r], aw[r + 1]);
            }
            v = _mm512_add_epi64(v, h);
            *acc.add(c) = v;
            for k in (1..=RR).rev() {
                aw[k] = aw[k - 1];
            }
        }
    }
}

/// Montgomery reduction of columns i..i+RR of a squaring's 2l-column sum (absolute columns).
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `acc` must be valid for reading and
/// writing i + l + RR slots and `m` readable for l + RR words (the modulus's l digits,
/// then zeros).
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn ams_reduce<const RR: usize>(acc: *mut __m512i, m: *const u64, k0: __m512i, i: usize, l: usize) {
    // SAFETY: the columns touched are `acc[i..i + l + RR]` and the words read `m[0..l + RR]`,
    // the ranges the caller guarantees.
    unsafe {
        let zero = _mm512_setzero_si512();
        let mut ys = [zero; RR];
        let mut carry = zero;
        for c in 0..RR {
            let mut v = _mm512_add_epi64(*acc.add(i + c), carry);
            for r in 0..c {
                v = _mm512_madd52lo_epu64(v, bcast(m, c - r), ys[r]);
                v = _mm512_madd52hi_epu64(v, bcast(m, c - r - 1), ys[r]);
            }
            ys[c] = _mm512_madd52lo_epu64(zero, v, k0);
            v = _mm512_madd52lo_epu64(v, bcast(m, 0), ys[c]);
            carry = _mm512_srli_epi64::<52>(v);
        }
        let mut mw = [zero; 5];
        for k in 1..=RR {
            mw[k] = bcast(m, RR - k);
        }
        for c in RR..l + RR {
            mw[0] = bcast(m, c);
            let mut v = *acc.add(i + c);
            let mut h = zero;
            for r in 0..RR {
                v = _mm512_madd52lo_epu64(v, mw[r], ys[r]);
                h = _mm512_madd52hi_epu64(h, mw[r + 1], ys[r]);
            }
            v = _mm512_add_epi64(v, h);
            for k in (1..=RR).rev() {
                mw[k] = mw[k - 1];
            }
            if c == RR {
                v = _mm512_add_epi64(v, carry);
            }
            *acc.add(i + c) = v;
        }
    }
}

/// Almost-Montgomery squaring: cross products once (doubled), the squares, then the
/// word-serial reduction of the 2l-digit column sums; R rows per pass in both phases.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `l` <= `MAX_L`; `a` must be readable for
/// 8 l words, `out` writable for 8 l words, and `m` readable for l + R words (the
/// modulus's l digits, then zeros).
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn ams8(out: *mut u64, a: *const u64, m: *const u64, k0: u64, l: usize) {
    // SAFETY: the local `acc` holds 2 MAX_L + R + 2 >= 2 l + R + 2 slots and `ap` MAX_L + R + 2,
    // all zeroed or loaded before use; `a`, `m` and `out` are accessed within the ranges the
    // caller guarantees, which are those `ams_cross`, `ams_reduce` and `normalize` need.
    unsafe {
        let zero = _mm512_setzero_si512();
        let mut acc_slots: Slots<{ 2 * MAX_L + R + 2 }> = [std::mem::MaybeUninit::uninit(); 2 * MAX_L + R + 2];
        let acc = acc_slots.as_mut_ptr() as *mut __m512i;
        for k in 0..2 * l + R + 2 {
            *slot(acc, k) = zero;
        }
        let mut a_slots: Slots<{ MAX_L + R + 2 }> = [std::mem::MaybeUninit::uninit(); MAX_L + R + 2];
        let ap = a_slots.as_mut_ptr() as *mut __m512i;
        let src = a as *const __m512i;
        for k in 0..l {
            *slot(ap, k) = _mm512_loadu_si512(src.add(k));
        }
        for k in l..l + R + 2 {
            *slot(ap, k) = zero;
        }
        let mut i = 0;
        while i + R <= l {
            ams_cross::<R>(acc, ap, i, l);
            i += R;
        }
        while i < l {
            ams_cross::<1>(acc, ap, i, l);
            i += 1;
        }
        for i in 0..l {
            let ai = *ap.add(i);
            let lo = acc.add(2 * i);
            *lo = _mm512_madd52lo_epu64(_mm512_add_epi64(*lo, *lo), ai, ai);
            let hi = acc.add(2 * i + 1);
            *hi = _mm512_madd52hi_epu64(_mm512_add_epi64(*hi, *hi), ai, ai);
        }
        let k0v = _mm512_set1_epi64(k0 as i64);
        let mut i = 0;
        while i + R <= l {
            ams_reduce::<R>(acc, m, k0v, i, l);
            i += R;
        }
        while i < l {
            ams_reduce::<1>(acc, m, k0v, i, l);
            i += 1;
        }
        normalize(out, acc.add(l), l);
    }
}

/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `acc` must be readable for l slots
/// and `out` writable for 8 l words.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn normalize(out: *mut u64, acc: *const __m512i, l: usize) {
    // SAFETY: reads `acc[0..l]` and writes `out[0..8 l]`, as the caller guarantees.
    unsafe {
        let mask = _mm512_set1_epi64(MASK52 as i64);
        let mut carry = _mm512_setzero_si512();
        let op = out as *mut __m512i;
        for j in 0..l {
            let v = _mm512_add_epi64(*acc.add(j), carry);
            carry = _mm512_srli_epi64::<52>(v);
            _mm512_storeu_si512(op.add(j), _mm512_and_si512(v, mask));
        }
    }
}

/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `entries` <= 256; `table` must be
/// readable for `entries` · 8 l words and `out` writable for 8 l words.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn select8(out: *mut u64, table: *const u64, entries: usize, idx: &[u32], l: usize) {
    // SAFETY: `masks` has 256 >= `entries` slots; entry e's digit j is read at slot e l + j of
    // `table` (< `entries` l) and `out` written at slots 0..l, as the caller guarantees.
    unsafe {
        let mut lanes = [0u64; 8];
        for (k, v) in idx.iter().take(8).enumerate() {
            lanes[k] = *v as u64;
        }
        let want = _mm512_loadu_si512(lanes.as_ptr() as *const __m512i);
        let op = out as *mut __m512i;
        let tp = table as *const __m512i;
        let gw = l; // in zmm units
        let mut masks = [0u8; 256];
        for e in 0..entries.min(256) {
            masks[e] = _mm512_cmpeq_epi64_mask(want, _mm512_set1_epi64(e as i64));
        }
        for j in 0..l {
            let mut r = _mm512_setzero_si512();
            for e in 0..entries {
                r = _mm512_mask_mov_epi64(r, *masks.get_unchecked(e), _mm512_loadu_si512(tp.add(e * gw + j)));
            }
            _mm512_storeu_si512(op.add(j), r);
        }
    }
}

/// Selection from a shared table laid out digit-major (`table[j * stride + e]`, stride >= 8,
/// a multiple of 8 or 16 for 16+ entries): per digit, in-register permutes pick each lane's
/// entry out of 16 at a time and a blend tree on the higher index bits merges the blocks. Every
/// entry is loaded and the permutes' timing does not depend on the indices (constant time).
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512 IFMA ([`available`]). `stride` is 8 or a multiple of
/// 16 up to 256; `table` must be readable for l `stride` words and `out` writable for
/// 8 l words.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn select_shared8(out: *mut u64, table: *const u64, stride: usize, idx: &[u32], l: usize) {
    // SAFETY: digit j reads words `j stride..(j + 1) stride` of `table` (`level` holds the
    // `stride` / 16 <= 16 blocks) and writes slot j of `out`, within the caller's guarantees.
    unsafe {
        let mut lanes = [0u64; 8];
        for (k, v) in idx.iter().take(8).enumerate() {
            lanes[k] = *v as u64;
        }
        let want = _mm512_loadu_si512(lanes.as_ptr() as *const __m512i);
        let op = out as *mut __m512i;
        if stride == 8 {
            for j in 0..l {
                let col = _mm512_loadu_si512(table.add(j * 8) as *const __m512i);
                _mm512_storeu_si512(op.add(j), _mm512_permutexvar_epi64(want, col));
            }
            return;
        }
        let blocks = stride / 16;
        let mut bit = [0u8; 4];
        for (k, b) in bit.iter_mut().enumerate() {
            *b = _mm512_test_epi64_mask(want, _mm512_set1_epi64(16i64 << k));
        }
        let mut level = [_mm512_setzero_si512(); 16];
        for j in 0..l {
            let col = table.add(j * stride) as *const __m512i;
            for k in 0..blocks {
                let lo = _mm512_loadu_si512(col.add(2 * k));
                let hi = _mm512_loadu_si512(col.add(2 * k + 1));
                level[k] = _mm512_permutex2var_epi64(lo, want, hi);
            }
            let mut n = blocks;
            let mut depth = 0;
            while n > 1 {
                for k in 0..n / 2 {
                    level[k] = _mm512_mask_blend_epi64(bit[depth], level[2 * k], level[2 * k + 1]);
                }
                n /= 2;
                depth += 1;
            }
            _mm512_storeu_si512(op.add(j), level[0]);
        }
    }
}

/// Entries per digit in the selection layout: 8, or a power of two >= 16.
fn shared_stride(entries: usize) -> usize {
    if entries <= 8 {
        8
    } else {
        entries.next_power_of_two().max(16)
    }
}

impl Engine for Ifma {
    fn lanes(&self) -> usize {
        8
    }
    fn gw(&self) -> usize {
        8 * self.l
    }
    fn sw(&self) -> usize {
        self.l
    }
    fn words(&self) -> usize {
        self.w
    }

    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64]) {
        let gw = self.gw();
        assert!(out.len() >= gw && a.len() >= gw && b.len() >= gw);
        // SAFETY: lengths checked; the engine exists only when `available()` held; amm8 reads
        // all of a and b before writing out, so `out` may not alias them (Rust forbids it).
        unsafe { amm8(out.as_mut_ptr(), a.as_ptr(), b.as_ptr(), self.m.as_ptr(), self.k0, self.l) }
    }

    fn sqr(&self, out: &mut [u64], a: &[u64]) {
        let gw = self.gw();
        assert!(out.len() >= gw && a.len() >= gw);
        // SAFETY: as in `mul`.
        unsafe { ams8(out.as_mut_ptr(), a.as_ptr(), self.m.as_ptr(), self.k0, self.l) }
    }

    fn load_raw(&self, out: &mut [u64], src: &[u64], count: usize) {
        let (l, w) = (self.l, self.w);
        out[..8 * l].fill(0);
        let mut d = [0u64; MAX_L];
        for lane in 0..count.min(8) {
            words_to_digits(&src[lane * w..(lane + 1) * w], l, &mut d[..l]);
            for j in 0..l {
                out[j * 8 + lane] = d[j];
            }
        }
    }

    fn store_raw(&self, dst: &mut [u64], src: &[u64], count: usize) {
        let (l, w) = (self.l, self.w);
        let mut d = [0u64; MAX_L];
        let mut t = [0u64; MAX_L];
        for lane in 0..count.min(8) {
            for j in 0..l {
                d[j] = src[j * 8 + lane];
            }
            // constant-time d -= m if d >= m (52-bit digits)
            let mut borrow = 0u64;
            for j in 0..l {
                let v = d[j].wrapping_sub(self.m[j]).wrapping_sub(borrow);
                borrow = v >> 63;
                t[j] = v & MASK52;
            }
            let keep = ct_mask(borrow);
            for j in 0..l {
                d[j] = (d[j] & keep) | (t[j] & !keep);
            }
            digits_to_words(&d[..l], w, &mut dst[lane * w..(lane + 1) * w]);
        }
    }

    fn mw(&self) -> usize {
        self.l
    }

    fn load_mont(&self, out: &mut [u64], src: &[u64], count: usize) {
        let (l, n) = (self.l, count.min(8));
        if n < 8 {
            out[..8 * l].fill(0);
        }
        let src = &src[..n * l];
        for j in 0..l {
            let col = &mut out[j * 8..j * 8 + n];
            for (lane, d) in col.iter_mut().enumerate() {
                *d = src[lane * l + j];
            }
        }
    }

    fn store_mont(&self, dst: &mut [u64], src: &[u64], count: usize) {
        let (l, n) = (self.l, count.min(8));
        let dst = &mut dst[..n * l];
        for j in 0..l {
            let col = &src[j * 8..j * 8 + n];
            for (lane, &d) in col.iter().enumerate() {
                dst[lane * l + j] = d;
            }
        }
    }

    fn mont_ok(&self, row: &[u64]) -> bool {
        row.len() == self.l && row.iter().all(|&d| d <= MASK52) && less_than(row, &self.c.two_m)
    }

    fn constants(&self) -> &Constants {
        &self.c
    }

    fn select(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]) {
        assert!(table.len() >= entries * self.gw() && out.len() >= self.gw() && entries <= 256);
        // SAFETY: bounds checked above.
        unsafe { select8(out.as_mut_ptr(), table.as_ptr(), entries, idx, self.l) }
    }

    fn shared_block(&self, entries: usize) -> usize {
        shared_stride(entries) * self.l
    }

    fn shared_layout(&self, raw: Vec<u64>, entries: usize, count: usize) -> Vec<u64> {
        // [table][entry][digit] -> [table][digit][entry], entries padded to the stride
        let (l, stride) = (self.l, shared_stride(entries));
        let mut out = vec![0u64; count * stride * l];
        for t in 0..count {
            for e in 0..entries {
                for j in 0..l {
                    out[(t * l + j) * stride + e] = raw[(t * entries + e) * l + j];
                }
            }
        }
        out
    }

    fn select_shared(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]) {
        let stride = shared_stride(entries);
        assert!(table.len() >= stride * self.l && out.len() >= self.gw() && entries <= 256);
        // SAFETY: bounds checked above; indices are < entries <= stride.
        unsafe { select_shared8(out.as_mut_ptr(), table.as_ptr(), stride, idx, self.l) }
    }

    fn gather(&self, out: &mut [u64], table: &[u64], offsets: &[usize]) {
        let l = self.l;
        assert!(offsets.len() == 8 && out.len() >= 8 * l);
        let mut off = [0i64; 8];
        for (k, &o) in offsets.iter().enumerate() {
            assert!(o + l <= table.len());
            off[k] = o as i64;
        }
        // SAFETY: every lane reads words o..o+l of `table`, checked above; `out` holds 8 l words.
        unsafe { gather8(out.as_mut_ptr(), table.as_ptr(), &off, l) }
    }

    fn extract(&self, src: &[u64], lane: usize, dst: &mut [u64]) {
        for j in 0..self.l {
            dst[j] = src[j * 8 + lane];
        }
    }

    fn broadcast(&self, src: &[u64], out: &mut [u64]) {
        for j in 0..self.l {
            for lane in 0..8 {
                out[j * 8 + lane] = src[j];
            }
        }
    }

    fn insert(&self, src: &[u64], lane: usize, dst: &mut [u64]) {
        for j in 0..self.l {
            dst[j * 8 + lane] = src[j];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bigint::algo;
    use crate::bigint::portable::Portable;
    use crate::bigint::testkit::{engine_suite, modulus, row, Rng, SIZES};

    /// False (with a note) where this CPU cannot run the engine.
    fn runnable() -> bool {
        if !available() {
            eprintln!("note: this CPU lacks AVX-512F/IFMA; the IFMA engine test does nothing here");
        }
        available()
    }

    #[test]
    fn matches_oracle() {
        if !runnable() {
            return;
        }
        let mut rng = Rng::new(11);
        // every digit count up to 12 (odd and even: the 2-row passes and the 1-row tail)
        let sizes = SIZES.iter().copied().chain((1..=12).map(|l| 52 * l - 2));
        for bits in sizes {
            let (m, md) = modulus(&mut rng, bits.max(2));
            engine_suite(&Ifma::new(&md).unwrap(), &m, &mut rng, true);
        }
    }

    /// IFMA and portable agree on the largest moduli (where the oracle would be slow).
    #[test]
    fn matches_portable() {
        if !runnable() {
            return;
        }
        let mut rng = Rng::new(12);
        for bits in [3000, 4096, 8190, 8192] {
            let (m, md) = modulus(&mut rng, bits);
            let (fast, slow) = (Ifma::new(&md).unwrap(), Portable::new(&md));
            engine_suite(&fast, &m, &mut rng, false);
            let count = 11;
            let a: Vec<u64> = (0..count).flat_map(|_| rng.below(&m)).collect();
            let b: Vec<u64> = (0..count).flat_map(|_| rng.below(&m)).collect();
            assert_eq!(algo::mulmod(&fast, &a, &b, count), algo::mulmod(&slow, &a, &b, count));
            let exp = rng.bits(300, 5);
            let (x, y) = (algo::powmod_same(&fast, &a, count, &exp, false), algo::powmod_same(&slow, &a, count, &exp, false));
            for i in 0..count {
                assert_eq!(row(&x, i, m.len()), row(&y, i, m.len()), "powmod_same row {i}, {bits} bits");
            }
        }
    }

    #[test]
    fn stored_rows_checked() {
        if !runnable() {
            return;
        }
        let mut rng = Rng::new(13);
        let (_, md) = modulus(&mut rng, 300);
        let e = Ifma::new(&md).unwrap();
        let mut below = e.c.two_m.clone();
        below[0] -= 1; // 2m is even: 2m - 1 without a borrow
        assert!(e.mont_ok(&below));
        assert!(!e.mont_ok(&e.c.two_m));
        let mut wide = below.clone();
        wide[1] |= 1 << 52; // a digit out of range
        assert!(!e.mont_ok(&wide));
    }

    /// The radix conversions are scalar code: they run on any CPU.
    #[test]
    fn digits_round_trip() {
        let mut rng = Rng::new(14);
        for words in [1usize, 2, 3, 13, 64, 128] {
            let v = rng.bits(64 * words, words);
            let l = (64 * words).div_ceil(52);
            let mut d = vec![0u64; l];
            words_to_digits(&v, l, &mut d);
            assert!(d.iter().all(|&x| x <= MASK52));
            for (j, &x) in d.iter().enumerate() {
                let want = (0..52).fold(0u64, |acc, b| {
                    let bit = 52 * j + b;
                    let set = bit < 64 * words && (v[bit / 64] >> (bit % 64)) & 1 == 1;
                    acc | ((set as u64) << b)
                });
                assert_eq!(x, want, "digit {j}");
            }
            let mut back = vec![0u64; words];
            digits_to_words(&d, words, &mut back);
            assert_eq!(back, v);
        }
    }
}
