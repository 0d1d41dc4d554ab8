//! The consistency check of the OT extension (Keller–Orsini–Scholl, CRYPTO 2015, §3; for
//! SoftSpoken with k > 1 the same check on the small-field VOLE's output, Roy, CRYPTO 2022, as
//! libOTe and MP-SPDZ run it): a receiver whose message u does not come from *one* choice vector
//! r (a column or a group with its own r, or a wrong setup message) fails it, except where it
//! guesses the bits of Δ its deviation touches, each guessed bit halving its chance of passing.
//!
//! # The check
//! A checked call extends [`CHECK_ROWS`] more rows than `rounded(count)`, with choice bits the
//! receiver draws at random (from its own AES-CTR stream, keyed from its secret seed) and both
//! sides discard. Rows j of the call are weighed by χ_j ∈ GF(2^128), and the receiver appends
//! x = Σ χ_j·r_j and t̃ = Σ χ_j·t_j (32 bytes, [`TRAILER`]) to u; the sender accepts iff
//! q̃ = Σ χ_j·q_j equals t̃ + x·Δ, which holds when q_j = t_j ⊕ r_j·Δ for every j. A deviating
//! receiver makes q_j = t_j ⊕ (R_j ∧ Δ) with R_j not all-zero or all-one (k = 1: a bit per
//! column; k > 1: a bit per group, or arbitrary functions of a group's Δ bits when the setup
//! message is wrong); writing y_i = Σ χ_j R_{j,i}, it passes only where x = y_i for every
//! column i whose Δ_i it has not guessed, so distinct columns of R must collide under the χ.
//!
//! The extra rows make x uniform: their χ are the powers s^0 … s^255 of the last chunk's
//! element s, which span GF(2^128) over GF(2) unless s lies in a proper subfield (probability
//! below 2^-63), so their random choice bits mask the sum of the real ones (KOS take κ + s
//! extra OTs, s the statistical parameter: here 128 + 128). t̃ = q̃ + x·Δ tells the sender
//! nothing more.
//!
//! # Where the χ come from: Fiat–Shamir, per chunk
//! The χ must not be known to the receiver before it fixes u (else it picks R in their kernel).
//! A coin the sender sends after u would cost a round and, worse, the fused calls keep no rows
//! to sum afterwards. So the χ of chunk c (the [`super::iknp::CHUNK`] rows processed together)
//! are the powers of s_c, the first 16 bytes of
//! h_c = SHA-256([`LABEL`], context, k, index, count, c, h_{c-1}, u's columns of chunk c),
//! `context` the 16-byte id of the session, pair and direction (`protocols/ot.py` passes the
//! direction's link id), `index` the extension's index before the call: both sides compute it
//! from the bytes of u they already hold, and the chain binds every chunk to those before it.
//! In chunk c, χ_j = s_c^(n_c − 1 − j) (Horner's rule, j the row within the chunk of n_c rows),
//! so for a fixed nonzero error column e, Σ χ_j e_j = 0 for at most n_c − 1 values of s_c.
//! With 128 columns, n_c ≤ 2^13 and 2^g hash evaluations a receiver finds a colliding pair of
//! distinct columns with probability at most 2^g · C(128, 2) · 2^13 / 2^128 ≈ 2^(g − 102): a
//! computational security of about 102 bits for the check (the base OTs on Ristretto255 give
//! about 126), and without grinding (g = 0) 2^-102 per call. Powers of one element instead of
//! χ_j from a PRG cost one GF(2^128) multiplication per row and no AES; the factor n_c is the
//! price.
//!
//! # Arithmetic
//! GF(2^128) = GF(2)[X]/(X^128 + X^7 + X^2 + X + 1), an element a u128 whose bit i is the
//! coefficient of X^i (a 16-byte row read little-endian, as in [`super::block::load`]; not
//! GCM's bit-reflected convention). No GF(2^128) multiply existed in the crate. Products are
//! carry-less (256-bit VPCLMULQDQ, two rows per instruction, or PCLMULQDQ, checked at run time;
//! else a portable shift-and-add), sixteen rows per reduction: Horner's rule in steps of
//! sixteen rows, acc·s^16 + Σ_l row_l·s^(15−l), the seventeen 256-bit products summed before
//! the one reduction. The choice bits (for x) go 64 at a time through sixteen tables of 16
//! sums of powers (one per nibble), one multiplication per 64 rows. Both sums run inside the extension's chunk
//! loop, on the chunk's rows right after their transpose, while they are in L2.

use sha2::{Digest, Sha256};

use super::block::{Cipher, BLOCK};

/// Extra rows of a checked call, random choices, discarded: κ + s = 128 + 128.
pub const CHECK_ROWS: usize = 256;
/// Bytes the receiver appends to u: x then t̃, 16 bytes each (little-endian elements).
pub const TRAILER: usize = 2 * BLOCK;
/// Domain label of the Fiat–Shamir hash.
pub const LABEL: &[u8] = b"shaper/ot/check/v1";
/// Domain label of the key of the receiver's extra choice bits (derived from its secret seed).
pub const CHOICES_LABEL: &[u8] = b"shaper/ot/check/choices/v1";

/// Arithmetic in GF(2^128) (see the module doc for the representation).
pub mod gf128 {
    /// The 256-bit carry-less product (lo, hi) of `a` and `b`.
    pub fn clmul(a: u128, b: u128) -> (u128, u128) {
        #[cfg(target_arch = "x86_64")]
        if super::pclmul_available() {
            // SAFETY: the CPU has PCLMULQDQ (and SSE2, part of x86-64), checked above.
            return unsafe { super::x86::clmul(a, b) };
        }
        clmul_portable(a, b)
    }

    /// The 128-bit carry-less product of two 64-bit words, bit by bit.
    pub fn clmul64(a: u64, b: u64) -> u128 {
        let mut r = 0u128;
        for i in 0..64 {
            // branch-free: the mask is all ones where bit i of b is set
            r ^= (a as u128) << i & (((b >> i) & 1) as u128).wrapping_neg();
        }
        r
    }

    /// [`clmul`] without PCLMULQDQ.
    pub fn clmul_portable(a: u128, b: u128) -> (u128, u128) {
        let (a0, a1, b0, b1) = (a as u64, (a >> 64) as u64, b as u64, (b >> 64) as u64);
        let (lo, hi) = (clmul64(a0, b0), clmul64(a1, b1));
        let mid = clmul64(a0, b1) ^ clmul64(a1, b0);
        (lo ^ (mid << 64), hi ^ (mid >> 64))
    }

    /// lo + hi·X^128 reduced modulo X^128 + X^7 + X^2 + X + 1.
    #[inline(always)]
    pub fn reduce(lo: u128, hi: u128) -> u128 {
        // X^128 = X^7 + X^2 + X + 1: hi·(X^7 + X^2 + X + 1) has up to 135 bits; the 7 bits that
        // overflow are folded once more (their product has at most 14 bits).
        let over = (hi >> 127) ^ (hi >> 126) ^ (hi >> 121);
        lo ^ hi ^ (hi << 1) ^ (hi << 2) ^ (hi << 7) ^ over ^ (over << 1) ^ (over << 2) ^ (over << 7)
    }

    /// a·b in GF(2^128).
    pub fn mul(a: u128, b: u128) -> u128 {
        let (lo, hi) = clmul(a, b);
        reduce(lo, hi)
    }
}

/// True when this CPU has PCLMULQDQ (checked once).
pub fn pclmul_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("pclmulqdq"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Rows per reduction in [`Weights::rows`] (Horner's step).
const STEP: usize = 16;

/// The weights of one chunk: s^0 … s^16 for the rows, and for the choice bits, 64 at a time,
/// sixteen tables of 16 (4 KiB, built with 256 XORs): table n at nibble v holds
/// Σ s^(63 − 4n − l) over the set bits l of v.
pub struct Weights {
    pow: [u128; STEP + 1],
    pow64: u128,
    bits: [[u128; 16]; 16],
}

impl Weights {
    pub fn new(s: u128) -> Self {
        let mut all = [1u128; 65];
        for e in 1..65 {
            all[e] = gf128::mul(all[e - 1], s);
        }
        let mut bits = [[0u128; 16]; 16];
        for (n, table) in bits.iter_mut().enumerate() {
            for v in 1..16usize {
                let l = v.trailing_zeros() as usize;
                table[v] = table[v & (v - 1)] ^ all[63 - 4 * n - l];
            }
        }
        Weights { pow: all[..STEP + 1].try_into().unwrap(), pow64: all[64], bits }
    }

    /// Σ_j s^(n − 1 − j)·row_j over the n rows of `rows` (16 bytes each, n a multiple of 16).
    pub fn rows(&self, rows: &[u8]) -> u128 {
        assert!(rows.len().is_multiple_of(STEP * BLOCK));
        #[cfg(target_arch = "x86_64")]
        {
            if vpclmul_available() {
                // SAFETY: the CPU has VPCLMULQDQ and AVX2; `rows` is whole steps (asserted).
                return unsafe { x86::rows_wide(&self.pow, rows) };
            }
            if pclmul_available() {
                // SAFETY: the CPU has PCLMULQDQ; `rows` is whole steps (asserted).
                return unsafe { x86::rows(&self.pow, rows) };
            }
        }
        self.rows_portable(rows)
    }

    /// [`rows`](Self::rows) without carry-less multiplication instructions.
    pub fn rows_portable(&self, rows: &[u8]) -> u128 {
        let mut acc = 0u128;
        for step in rows.chunks_exact(STEP * BLOCK) {
            let (mut lo, mut hi) = gf128::clmul_portable(acc, self.pow[STEP]);
            for (l, row) in step.chunks_exact(BLOCK).enumerate() {
                let (a, b) = gf128::clmul_portable(super::block::load(row), self.pow[STEP - 1 - l]);
                lo ^= a;
                hi ^= b;
            }
            acc = gf128::reduce(lo, hi);
        }
        acc
    }

    /// Σ_j s^(n − 1 − j)·r_j over the n = 8·`bits.len()` packed bits r (LSB-first), n a
    /// multiple of 64.
    pub fn bits(&self, bits: &[u8]) -> u128 {
        assert!(bits.len().is_multiple_of(8));
        let mut acc = 0u128;
        for word in bits.chunks_exact(8) {
            let mut sum = 0u128;
            for (b, &v) in word.iter().enumerate() {
                sum ^= self.bits[2 * b][(v & 15) as usize] ^ self.bits[2 * b + 1][(v >> 4) as usize];
            }
            acc = gf128::mul(acc, self.pow64) ^ sum;
        }
        acc
    }
}

/// True when this CPU has VPCLMULQDQ and AVX2 (checked once).
pub fn vpclmul_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("vpclmulqdq") && std::arch::is_x86_feature_detected!("avx2")
                         && pclmul_available())
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::STEP;
    use core::arch::x86_64::*;

    #[inline(always)]
    fn to_u128(v: __m128i) -> u128 {
        // SAFETY: __m128i and u128 are both 16 plain bytes; x86-64 is little-endian.
        unsafe { core::mem::transmute::<__m128i, u128>(v) }
    }

    #[inline(always)]
    fn from_u128(v: u128) -> __m128i {
        // SAFETY: as in `to_u128`.
        unsafe { core::mem::transmute::<u128, __m128i>(v) }
    }

    /// # Safety
    /// The CPU must have PCLMULQDQ.
    #[target_feature(enable = "pclmulqdq")]
    pub unsafe fn clmul(a: u128, b: u128) -> (u128, u128) {
        let (a, b) = (from_u128(a), from_u128(b));
        let lo = _mm_clmulepi64_si128::<0x00>(a, b);
        let hi = _mm_clmulepi64_si128::<0x11>(a, b);
        let mid = _mm_xor_si128(_mm_clmulepi64_si128::<0x01>(a, b), _mm_clmulepi64_si128::<0x10>(a, b));
        (to_u128(_mm_xor_si128(lo, _mm_slli_si128::<8>(mid))), to_u128(_mm_xor_si128(hi, _mm_srli_si128::<8>(mid))))
    }

    /// lo + mid·X^64 + hi·X^128, reduced.
    #[inline(always)]
    fn finish(lo: __m128i, mid: __m128i, hi: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        let l = unsafe { _mm_xor_si128(lo, _mm_slli_si128::<8>(mid)) };
        // SAFETY: as above.
        let h = unsafe { _mm_xor_si128(hi, _mm_srli_si128::<8>(mid)) };
        from_u128(super::gf128::reduce(to_u128(l), to_u128(h)))
    }

    /// Horner's rule over `rows` in steps of [`STEP`] (see [`super::Weights::rows`]): per step
    /// seventeen products by the powers, their halves summed unreduced, one reduction.
    ///
    /// # Safety
    /// The CPU must have PCLMULQDQ; `rows.len()` is a multiple of 16 · [`STEP`].
    #[target_feature(enable = "pclmulqdq")]
    pub unsafe fn rows(pow: &[u128; STEP + 1], rows: &[u8]) -> u128 {
        let p: [__m128i; STEP + 1] = core::array::from_fn(|e| from_u128(pow[e]));
        let mut acc = _mm_setzero_si128();
        for step in rows.chunks_exact(16 * STEP) {
            let a = acc;
            let mut lo = _mm_clmulepi64_si128::<0x00>(a, p[STEP]);
            let mut hi = _mm_clmulepi64_si128::<0x11>(a, p[STEP]);
            let mut mid = _mm_xor_si128(_mm_clmulepi64_si128::<0x01>(a, p[STEP]), _mm_clmulepi64_si128::<0x10>(a, p[STEP]));
            for l in 0..STEP - 1 {
                // SAFETY: row l of this step; loadu needs no alignment.
                let r = unsafe { _mm_loadu_si128(step.as_ptr().add(16 * l).cast()) };
                let w = p[STEP - 1 - l];
                lo = _mm_xor_si128(lo, _mm_clmulepi64_si128::<0x00>(r, w));
                hi = _mm_xor_si128(hi, _mm_clmulepi64_si128::<0x11>(r, w));
                mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x01>(r, w));
                mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x10>(r, w));
            }
            // the last row has weight s^0 = 1
            // SAFETY: as above.
            lo = _mm_xor_si128(lo, unsafe { _mm_loadu_si128(step.as_ptr().add(16 * (STEP - 1)).cast()) });
            acc = finish(lo, mid, hi);
        }
        to_u128(acc)
    }

    /// [`rows`] with 256-bit VPCLMULQDQ: two rows per instruction (lane 0 row 2i, lane 1 row
    /// 2i + 1, weighed by s^(STEP − 1 − 2i) and s^(STEP − 2 − 2i)).
    ///
    /// # Safety
    /// The CPU must have VPCLMULQDQ, PCLMULQDQ and AVX2; `rows.len()` as for [`rows`].
    #[target_feature(enable = "pclmulqdq,vpclmulqdq,avx2")]
    pub unsafe fn rows_wide(pow: &[u128; STEP + 1], rows: &[u8]) -> u128 {
        let w: [__m256i; STEP / 2] = core::array::from_fn(|i| {
            _mm256_set_m128i(from_u128(pow[STEP - 2 - 2 * i]), from_u128(pow[STEP - 1 - 2 * i]))
        });
        let top = from_u128(pow[STEP]);
        let mut acc = _mm_setzero_si128();
        for step in rows.chunks_exact(16 * STEP) {
            let (mut lo, mut hi, mut mid) = (_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256());
            for (i, wi) in w.iter().enumerate() {
                // SAFETY: rows 2i and 2i + 1 of this step; loadu needs no alignment.
                let r = unsafe { _mm256_loadu_si256(step.as_ptr().add(32 * i).cast()) };
                lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128::<0x00>(r, *wi));
                hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128::<0x11>(r, *wi));
                mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128::<0x01>(r, *wi));
                mid = _mm256_xor_si256(mid, _mm256_clmulepi64_epi128::<0x10>(r, *wi));
            }
            let fold = |v: __m256i| _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let (mut l, mut h, mut m) = (fold(lo), fold(hi), fold(mid));
            l = _mm_xor_si128(l, _mm_clmulepi64_si128::<0x00>(acc, top));
            h = _mm_xor_si128(h, _mm_clmulepi64_si128::<0x11>(acc, top));
            m = _mm_xor_si128(m, _mm_xor_si128(_mm_clmulepi64_si128::<0x01>(acc, top), _mm_clmulepi64_si128::<0x10>(acc, top)));
            acc = finish(l, m, h);
        }
        to_u128(acc)
    }
}

/// The Fiat–Shamir chain of one checked call (see the module doc).
pub struct Transcript {
    prefix: Sha256,
    prev: [u8; 32],
    chunk: u64,
}

impl Transcript {
    /// `context`: the 16-byte id both sides agreed; `index`: the extension's index before the
    /// call; `count`: the call's OTs.
    pub fn new(context: &[u8; BLOCK], k: usize, index: u64, count: u64) -> Self {
        let mut prefix = Sha256::new();
        prefix.update((LABEL.len() as u64).to_le_bytes());
        prefix.update(LABEL);
        prefix.update(context);
        prefix.update((k as u64).to_le_bytes());
        prefix.update(index.to_le_bytes());
        prefix.update(count.to_le_bytes());
        Transcript { prefix, prev: [0u8; 32], chunk: 0 }
    }

    /// The weights of the next chunk from its part of u: for every group, `bytes` bytes at
    /// `off` of that group's column (`col_len` bytes each).
    pub fn next(&mut self, u: &[u8], groups: usize, col_len: usize, off: usize, bytes: usize) -> Weights {
        let mut h = self.prefix.clone();
        h.update(self.chunk.to_le_bytes());
        h.update(self.prev);
        for g in 0..groups {
            h.update(&u[g * col_len + off..g * col_len + off + bytes]);
        }
        self.prev = h.finalize().into();
        self.chunk += 1;
        Weights::new(u128::from_le_bytes(self.prev[..BLOCK].try_into().unwrap()))
    }
}

/// The receiver's side of the check: its context and the stream of its extra choice bits.
pub struct ReceiverCheck {
    pub context: [u8; BLOCK],
    choices: Cipher,
}

impl ReceiverCheck {
    /// `context`: 16 bytes both sides agree on; `seed`: 16 secret random bytes (the sender must
    /// not know them: they key the extra rows' choice bits).
    pub fn new(context: &[u8], seed: &[u8]) -> Result<Self, String> {
        let context = context_bytes(context)?;
        if seed.len() != BLOCK {
            return Err(format!("the check's seed must be {BLOCK} random bytes, got {}", seed.len()));
        }
        let key = Sha256::new().chain_update(CHOICES_LABEL).chain_update(seed).finalize();
        Ok(ReceiverCheck { context, choices: Cipher::new(key[..BLOCK].try_into().unwrap()) })
    }

    /// The random choice bits of the extra rows from 128-row block `block` (global, so never
    /// reused): 16 bytes per block into `out`.
    pub fn extra_choices(&self, block: u128, out: &mut [u8]) {
        self.choices.ctr(block, out);
    }
}

/// The 16-byte context, checked.
pub fn context_bytes(context: &[u8]) -> Result<[u8; BLOCK], String> {
    context.try_into().map_err(|_| format!("the check's context must be {BLOCK} bytes, got {}", context.len()))
}

/// The sender's verdict: q̃ == t̃ + x·Δ, from the trailer (x then t̃, little-endian).
pub fn verify(trailer: &[u8], q_sum: u128, delta: u128) -> bool {
    let x = u128::from_le_bytes(trailer[..BLOCK].try_into().unwrap());
    let t = u128::from_le_bytes(trailer[BLOCK..TRAILER].try_into().unwrap());
    // not a secret-dependent branch worth hiding: the outcome is public (the sender aborts)
    q_sum == t ^ gf128::mul(x, delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rnd(seed: u64) -> u128 {
        let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        ((next() as u128) << 64) | next() as u128
    }

    /// Multiplication by X^i, one bit at a time: the definition of the field.
    fn mul_reference(a: u128, b: u128) -> u128 {
        let mut r = 0u128;
        let mut a = a;
        for i in 0..128 {
            if (b >> i) & 1 == 1 {
                r ^= a;
            }
            let carry = a >> 127;
            a <<= 1;
            if carry == 1 {
                a ^= 0x87;
            }
        }
        r
    }

    #[test]
    fn multiplication_matches_the_definition() {
        for i in 0..200u64 {
            let (a, b) = (rnd(i), rnd(i + 1000));
            let want = mul_reference(a, b);
            assert_eq!(gf128::mul(a, b), want, "{i}");
            let (lo, hi) = gf128::clmul_portable(a, b);
            assert_eq!(gf128::reduce(lo, hi), want);
            assert_eq!(gf128::clmul(a, b), (lo, hi));
        }
        assert_eq!(gf128::mul(1u128 << 127, 2), 0x87);
        assert_eq!(gf128::mul(!0, 1), !0);
        // hi·X^128 = hi·(X^7 + X^2 + X + 1), both folds of the reduction at once
        assert_eq!(gf128::reduce(0, !0), mul_reference(!0, 0x87));
    }

    #[test]
    fn weighted_sums_match_horner_one_row_at_a_time() {
        let s = rnd(7);
        let w = Weights::new(s);
        let rows: Vec<u8> = (0..64u64).flat_map(|i| rnd(i + 50).to_le_bytes()).collect();
        let mut want = 0u128;
        for row in rows.chunks_exact(16) {
            want = gf128::mul(want, s) ^ u128::from_le_bytes(row.try_into().unwrap());
        }
        assert_eq!(w.rows(&rows), want);
        let bits: Vec<u8> = (0..8u64).map(|i| rnd(i) as u8).collect();
        let mut want = 0u128;
        for j in 0..64 {
            want = gf128::mul(want, s) ^ ((bits[j / 8] >> (j % 8)) & 1) as u128;
        }
        assert_eq!(w.bits(&bits), want);
        // every kernel of the rows gives the same sum
        let rows: Vec<u8> = (0..8192u64).flat_map(|i| rnd(i + 9).to_le_bytes()).collect();
        let want = w.rows_portable(&rows);
        assert_eq!(w.rows(&rows), want);
        #[cfg(target_arch = "x86_64")]
        if pclmul_available() {
            let pow: [u128; STEP + 1] = core::array::from_fn(|e| (0..e).fold(1, |a, _| gf128::mul(a, s)));
            // SAFETY: PCLMULQDQ checked; 8192 rows are whole steps.
            assert_eq!(unsafe { x86::rows(&pow, &rows) }, want);
            if vpclmul_available() {
                // SAFETY: VPCLMULQDQ and AVX2 checked.
                assert_eq!(unsafe { x86::rows_wide(&pow, &rows) }, want);
            }
        }
    }
}
