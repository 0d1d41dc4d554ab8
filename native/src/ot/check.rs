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
//! GCM's bit-reflected convention). Products are carry-less (PCLMULQDQ where the CPU has it,
//! checked at run time; else a portable shift-and-add), eight rows per reduction: Horner's rule
//! in steps of eight rows, acc·s^8 + Σ_l row_l·s^(7−l), the nine 256-bit products summed
//! before the one reduction.

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

/// The weights of one chunk: s^0 … s^8, and the sums of s^(7−l) over the set bits l of each byte
/// (for x, eight choice bits at a time).
pub struct Weights {
    pow: [u128; 9],
    bits: [u128; 256],
}

impl Weights {
    pub fn new(s: u128) -> Self {
        let mut pow = [1u128; 9];
        for e in 1..9 {
            pow[e] = gf128::mul(pow[e - 1], s);
        }
        let mut bits = [0u128; 256];
        for b in 1..256usize {
            let l = b.trailing_zeros() as usize;
            bits[b] = bits[b & (b - 1)] ^ pow[7 - l];
        }
        Weights { pow, bits }
    }

    /// Σ_j s^(n − 1 − j)·row_j over the n rows of `rows` (16 bytes each, n a multiple of 8).
    pub fn rows(&self, rows: &[u8]) -> u128 {
        assert!(rows.len().is_multiple_of(8 * BLOCK));
        #[cfg(target_arch = "x86_64")]
        if pclmul_available() {
            // SAFETY: the CPU has PCLMULQDQ; `rows` is a whole number of 8-row steps (asserted).
            return unsafe { x86::rows(&self.pow, rows) };
        }
        let mut acc = 0u128;
        for step in rows.chunks_exact(8 * BLOCK) {
            let (mut lo, mut hi) = gf128::clmul_portable(acc, self.pow[8]);
            for (l, row) in step.chunks_exact(BLOCK).enumerate() {
                let (a, b) = gf128::clmul_portable(super::block::load(row), self.pow[7 - l]);
                lo ^= a;
                hi ^= b;
            }
            acc = gf128::reduce(lo, hi);
        }
        acc
    }

    /// Σ_j s^(n − 1 − j)·r_j over the n = 8·`bits.len()` packed bits r (LSB-first).
    pub fn bits(&self, bits: &[u8]) -> u128 {
        let mut acc = 0u128;
        for &b in bits {
            acc = gf128::mul(acc, self.pow[8]) ^ self.bits[b as usize];
        }
        acc
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
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

    /// Horner's rule over `rows` in steps of eight (see [`super::Weights::rows`]): per step nine
    /// products by the powers, their halves summed unreduced, one reduction.
    ///
    /// # Safety
    /// The CPU must have PCLMULQDQ; `rows.len()` is a multiple of 128.
    #[target_feature(enable = "pclmulqdq")]
    pub unsafe fn rows(pow: &[u128; 9], rows: &[u8]) -> u128 {
        let p: [__m128i; 9] = core::array::from_fn(|e| from_u128(pow[e]));
        let mut acc = _mm_setzero_si128();
        for step in rows.chunks_exact(128) {
            let (mut lo, mut hi, mut mid) = (_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128());
            let mut add = |a: __m128i, b: __m128i| {
                lo = _mm_xor_si128(lo, _mm_clmulepi64_si128::<0x00>(a, b));
                hi = _mm_xor_si128(hi, _mm_clmulepi64_si128::<0x11>(a, b));
                mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x01>(a, b));
                mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x10>(a, b));
            };
            add(acc, p[8]);
            for l in 0..7 {
                // SAFETY: row l of this 128-byte step; loadu needs no alignment.
                add(unsafe { _mm_loadu_si128(step.as_ptr().add(16 * l).cast()) }, p[7 - l]);
            }
            // row 7 has weight s^0 = 1
            // SAFETY: as above.
            lo = _mm_xor_si128(lo, unsafe { _mm_loadu_si128(step.as_ptr().add(112).cast()) });
            let l128 = _mm_xor_si128(lo, _mm_slli_si128::<8>(mid));
            let h128 = _mm_xor_si128(hi, _mm_srli_si128::<8>(mid));
            acc = from_u128(super::gf128::reduce(to_u128(l128), to_u128(h128)));
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
    }
}
