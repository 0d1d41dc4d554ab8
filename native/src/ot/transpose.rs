//! 128 x 128 bit-matrix transpose, the step of IKNP that turns 128 PRG columns into one 128-bit
//! row per OT.
//!
//! A tile is 128 input rows of 16 bytes, row `i` at `input[i * stride..][..16]`; bit `j` of a row
//! is `(row[j >> 3] >> (j & 7)) & 1` (LSB-first). The output is 128 rows of 16 bytes, contiguous,
//! with bit `i` of output row `j` equal to bit `j` of input row `i`.
//!
//! Three versions, all equal to [`naive`] (tested):
//! - AVX2 (x86-64, detected at run time): a 16 x 16 byte transpose of 32 rows at once (one group
//!   of 16 rows per 128-bit lane) by unpack instructions, then `vpmovmskb` gathers the top bit of
//!   32 bytes, i.e. 32 bits of one output row, and a shift brings up the next bit;
//! - SSE2 (x86-64 baseline): the same with 16 rows per register;
//! - portable (elsewhere): the recursive block swap of Hacker's Delight §7-3 on `u128` rows.
//!
//! An AVX-512 version (64 rows per `vpmovmskb`-style mask) would be faster still; it is not
//! written because this code is only shipped where it has been tested.

/// Bytes of one tile row (and one output row).
pub const ROW: usize = 16;
/// Bytes of one transposed tile.
pub const TILE: usize = 128 * ROW;

/// Transposes one tile (see the module doc) into `out` (`TILE` bytes).
#[inline]
pub fn tile(input: &[u8], stride: usize, out: &mut [u8]) {
    assert!(stride >= ROW && input.len() >= 127 * stride + ROW && out.len() >= TILE);
    #[cfg(target_arch = "x86_64")]
    {
        if avx2_available() {
            // SAFETY: AVX2 is present (checked) and the bounds were asserted above.
            unsafe { x86::tile_avx2(input, stride, out) };
        } else {
            // SAFETY: SSE2 is part of the x86-64 baseline; bounds asserted above.
            unsafe { x86::tile_sse2(input, stride, out) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    portable(input, stride, out);
}

#[cfg(target_arch = "x86_64")]
fn avx2_available() -> bool {
    use std::sync::OnceLock;
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
}

/// The portable transpose: 7 rounds of swapping off-diagonal blocks of halving size.
pub fn portable(input: &[u8], stride: usize, out: &mut [u8]) {
    let mut a = [0u128; 128];
    for (i, r) in a.iter_mut().enumerate() {
        *r = u128::from_le_bytes(input[i * stride..i * stride + ROW].try_into().unwrap());
    }
    let mut j = 64;
    let mut m: u128 = u64::MAX as u128; // low half of each 2j-bit group
    while j != 0 {
        let mut k = 0;
        while k < 128 {
            // rows k (bit j of k clear) and k + j: swap the high j bits of row k's 2j-bit groups
            // with the low j bits of row k + j's
            let t = ((a[k] >> j) ^ a[k + j]) & m;
            a[k] ^= t << j;
            a[k + j] ^= t;
            k = (k + j + 1) & !j;
        }
        j >>= 1;
        m ^= m << j;
    }
    for (i, r) in a.iter().enumerate() {
        out[i * ROW..(i + 1) * ROW].copy_from_slice(&r.to_le_bytes());
    }
}

/// Bit by bit: the reference the fast versions are tested against.
pub fn naive(input: &[u8], stride: usize, out: &mut [u8]) {
    out[..TILE].fill(0);
    for i in 0..128 {
        for j in 0..128 {
            let bit = (input[i * stride + (j >> 3)] >> (j & 7)) & 1;
            out[j * ROW + (i >> 3)] |= bit << (i & 7);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    use super::{ROW, TILE};

    /// Transposes the 16 x 16 byte matrix whose row `k` is `x[k]`: afterwards `x[b]` holds byte
    /// `b` of every row, row `k` in byte `k`. Works per 128-bit lane, so on 256-bit vectors it does
    /// two independent 16 x 16 transposes.
    macro_rules! transpose_bytes {
        ($x:ident, $unpacklo8:ident, $unpackhi8:ident, $unpacklo16:ident, $unpackhi16:ident,
         $unpacklo32:ident, $unpackhi32:ident, $unpacklo64:ident, $unpackhi64:ident) => {{
            // s1[h * 8 + p]: bytes 8h..8h+8 of rows 2p, 2p+1, interleaved (2-byte units)
            let mut s1 = [$x[0]; 16];
            for p in 0..8 {
                s1[p] = $unpacklo8($x[2 * p], $x[2 * p + 1]);
                s1[8 + p] = $unpackhi8($x[2 * p], $x[2 * p + 1]);
            }
            // s2[g * 4 + q]: bytes 4g..4g+4 of rows 4q..4q+4 (4-byte units)
            let mut s2 = s1;
            for h in 0..2 {
                for q in 0..4 {
                    let (a, b) = (s1[h * 8 + 2 * q], s1[h * 8 + 2 * q + 1]);
                    s2[(2 * h) * 4 + q] = $unpacklo16(a, b);
                    s2[(2 * h + 1) * 4 + q] = $unpackhi16(a, b);
                }
            }
            // s3[f * 2 + r]: bytes 2f..2f+2 of rows 8r..8r+8 (8-byte units)
            let mut s3 = s2;
            for g in 0..4 {
                for r in 0..2 {
                    let (a, b) = (s2[g * 4 + 2 * r], s2[g * 4 + 2 * r + 1]);
                    s3[(2 * g) * 2 + r] = $unpacklo32(a, b);
                    s3[(2 * g + 1) * 2 + r] = $unpackhi32(a, b);
                }
            }
            for f in 0..8 {
                $x[2 * f] = $unpacklo64(s3[2 * f], s3[2 * f + 1]);
                $x[2 * f + 1] = $unpackhi64(s3[2 * f], s3[2 * f + 1]);
            }
        }};
    }

    /// SSE2 tile transpose; see the module doc.
    ///
    /// # Safety
    /// `input` holds 128 rows of `stride` bytes (the last one 16 bytes) and `out` `TILE` bytes.
    #[target_feature(enable = "sse2")]
    pub unsafe fn tile_sse2(input: &[u8], stride: usize, out: &mut [u8]) {
        debug_assert!(input.len() >= 127 * stride + ROW && out.len() >= TILE);
        let src = input.as_ptr();
        let dst = out.as_mut_ptr();
        for group in 0..8 {
            let mut x = [_mm_setzero_si128(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                // SAFETY: row 16 group + k <= 127 starts at byte (16 group + k) stride, and
                // 16 bytes from there lie in `input` (caller's guarantee); unaligned load.
                *v = unsafe { _mm_loadu_si128(src.add((group * 16 + k) * stride) as *const __m128i) };
            }
            transpose_bytes!(x, _mm_unpacklo_epi8, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpackhi_epi16,
                             _mm_unpacklo_epi32, _mm_unpackhi_epi32, _mm_unpacklo_epi64, _mm_unpackhi_epi64);
            for (b, v) in x.iter().enumerate() {
                let mut v = *v;
                for t in (0..8).rev() {
                    // top bit of byte k = bit 8b + t of row 16 group + k
                    let mask = _mm_movemask_epi8(v) as u16;
                    // SAFETY: bytes 2 group..2 group + 2 (group < 8) of output row 8 b + t < 128:
                    // inside the TILE bytes of `out` (caller's guarantee); unaligned store.
                    unsafe { (dst.add((8 * b + t) * ROW + 2 * group) as *mut u16).write_unaligned(mask) };
                    v = _mm_slli_epi64(v, 1);
                }
            }
        }
    }

    /// AVX2 tile transpose; see the module doc.
    ///
    /// # Safety
    /// AVX2 must be available; `input` and `out` as for [`tile_sse2`].
    #[target_feature(enable = "avx2")]
    pub unsafe fn tile_avx2(input: &[u8], stride: usize, out: &mut [u8]) {
        debug_assert!(input.len() >= 127 * stride + ROW && out.len() >= TILE);
        let src = input.as_ptr();
        let dst = out.as_mut_ptr();
        for group in 0..4 {
            // lane 0: rows 32 group + k, lane 1: rows 32 group + 16 + k
            let mut x = [_mm256_setzero_si256(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                // SAFETY: rows 32 group + k and 32 group + 16 + k (<= 127), 16 bytes each, lie in
                // `input` (caller's guarantee); unaligned loads.
                let lo = unsafe { _mm_loadu_si128(src.add((group * 32 + k) * stride) as *const __m128i) };
                // SAFETY: see above.
                let hi = unsafe { _mm_loadu_si128(src.add((group * 32 + 16 + k) * stride) as *const __m128i) };
                *v = _mm256_set_m128i(hi, lo);
            }
            transpose_bytes!(x, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16,
                             _mm256_unpacklo_epi32, _mm256_unpackhi_epi32, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64);
            for (b, v) in x.iter().enumerate() {
                let mut v = *v;
                for t in (0..8).rev() {
                    let mask = _mm256_movemask_epi8(v) as u32;
                    // SAFETY: bytes 4 group..4 group + 4 (group < 4) of output row 8 b + t < 128:
                    // inside the TILE bytes of `out` (caller's guarantee); unaligned store.
                    unsafe { (dst.add((8 * b + t) * ROW + 4 * group) as *mut u32).write_unaligned(mask) };
                    v = _mm256_slli_epi64(v, 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_tile(seed: u64, stride: usize) -> Vec<u8> {
        // xorshift: test data only
        let mut s = seed | 1;
        (0..127 * stride + ROW).map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        }).collect()
    }

    #[test]
    fn portable_equals_naive() {
        for (seed, stride) in [(1u64, 16usize), (2, 48), (3, 960)] {
            let input = random_tile(seed, stride);
            let (mut want, mut got) = (vec![0u8; TILE], vec![0u8; TILE]);
            naive(&input, stride, &mut want);
            portable(&input, stride, &mut got);
            assert_eq!(want, got);
        }
    }

    #[test]
    fn naive_is_an_involution() {
        let input = random_tile(9, 16);
        let (mut once, mut twice) = (vec![0u8; TILE], vec![0u8; TILE]);
        naive(&input, 16, &mut once);
        naive(&once, 16, &mut twice);
        assert_eq!(input, twice);
        // a single set bit lands where the definition says
        let mut one = vec![0u8; TILE];
        one[5 * ROW + (77 >> 3)] = 1 << (77 & 7); // row 5, bit 77
        naive(&one, 16, &mut once);
        assert_eq!(once[77 * ROW], 1 << 5); // row 77, bit 5
        assert_eq!(once.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse2_and_avx2_equal_naive() {
        for (seed, stride) in [(4u64, 16usize), (5, 32), (6, 960)] {
            let input = random_tile(seed, stride);
            let mut want = vec![0u8; TILE];
            naive(&input, stride, &mut want);
            let mut got = vec![0u8; TILE];
            // SAFETY: SSE2 is part of x86-64; `input` holds 127 strides + 16 bytes, `got` TILE.
            unsafe { x86::tile_sse2(&input, stride, &mut got) };
            assert_eq!(want, got, "sse2");
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut got = vec![0u8; TILE];
                // SAFETY: AVX2 checked just above; buffers as for SSE2.
                unsafe { x86::tile_avx2(&input, stride, &mut got) };
                assert_eq!(want, got, "avx2");
            }
            let mut got = vec![0u8; TILE];
            tile(&input, stride, &mut got);
            assert_eq!(want, got, "dispatch");
        }
    }
}
