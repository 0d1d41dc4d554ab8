//! AES-128 with AES-NI and VAES (x86-64 only; compiled there alone, see `lib.rs`): the key
//! schedule, and counter-mode keystream blocks four per AVX-512 instruction for [`crate::prf`].

use std::arch::x86_64::*;

/// True when the CPU has AES-NI, VAES and AVX-512F.
pub fn available() -> bool {
    is_x86_feature_detected!("aes")
        && is_x86_feature_detected!("vaes")
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
}

/// AES-128 round keys.
pub struct Aes128 {
    rk: [[u8; 16]; 11],
}

macro_rules! expand_round {
    ($k:expr, $rcon:expr) => {{
        let t = _mm_aeskeygenassist_si128::<$rcon>($k);
        let t = _mm_shuffle_epi32::<0xff>(t);
        let mut k = $k;
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        _mm_xor_si128(k, t)
    }};
}

impl Aes128 {
    /// `None` on CPUs without AES-NI/VAES/AVX-512F.
    pub fn new(key: &[u8; 16]) -> Option<Self> {
        if !available() {
            return None;
        }
        // SAFETY: the CPU features were checked just above.
        Some(unsafe { Self::expand(key) })
    }

    #[target_feature(enable = "aes,sse2")]
    unsafe fn expand(key: &[u8; 16]) -> Self {
        let mut ks = [_mm_setzero_si128(); 11];
        ks[0] = _mm_loadu_si128(key.as_ptr() as *const __m128i);
        ks[1] = expand_round!(ks[0], 0x01);
        ks[2] = expand_round!(ks[1], 0x02);
        ks[3] = expand_round!(ks[2], 0x04);
        ks[4] = expand_round!(ks[3], 0x08);
        ks[5] = expand_round!(ks[4], 0x10);
        ks[6] = expand_round!(ks[5], 0x20);
        ks[7] = expand_round!(ks[6], 0x40);
        ks[8] = expand_round!(ks[7], 0x80);
        ks[9] = expand_round!(ks[8], 0x1b);
        ks[10] = expand_round!(ks[9], 0x36);
        let mut rk = [[0u8; 16]; 11];
        for (dst, k) in rk.iter_mut().zip(ks.iter()) {
            _mm_storeu_si128(dst.as_mut_ptr() as *mut __m128i, *k);
        }
        Aes128 { rk }
    }

    /// Keystream blocks `counter, counter + 1, ...` into `out` (whole 16-byte blocks; `out.len()`
    /// a multiple of 2 words). The counter is the block index; it must stay below 2^64.
    pub fn ctr(&self, counter: u64, out: &mut [u64]) {
        assert!(out.len() % 2 == 0);
        // SAFETY: `new` only succeeds where the features exist.
        unsafe { self.ctr_vaes(counter, out) }
    }

    #[target_feature(enable = "aes,vaes,avx512f,avx512bw")]
    unsafe fn ctr_vaes(&self, counter: u64, out: &mut [u64]) {
        let mut rk = [_mm512_setzero_si512(); 11];
        for (r, k) in rk.iter_mut().zip(self.rk.iter()) {
            *r = _mm512_broadcast_i32x4(_mm_loadu_si128(k.as_ptr() as *const __m128i));
        }
        // counters as little-endian u64 pairs (low, high = 0) in each 128-bit lane, byte-reversed
        // per lane into the big-endian block
        let bswap = _mm512_set_epi64(
            0x0001020304050607, 0x08090a0b0c0d0e0f, 0x0001020304050607, 0x08090a0b0c0d0e0f,
            0x0001020304050607, 0x08090a0b0c0d0e0f, 0x0001020304050607, 0x08090a0b0c0d0e0f,
        );
        let blocks = out.len() / 2;
        let mut ctr = _mm512_add_epi64(_mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0), _mm512_set1_epi64(counter as i64));
        let zero_high = _mm512_set_epi64(0, -1, 0, -1, 0, -1, 0, -1);
        ctr = _mm512_and_si512(ctr, zero_high);
        let four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
        let p = out.as_mut_ptr() as *mut u8;
        let mut b = 0;
        while b + 16 <= blocks {
            let mut s = [_mm512_setzero_si512(); 4];
            for v in s.iter_mut() {
                *v = _mm512_xor_si512(_mm512_shuffle_epi8(ctr, bswap), rk[0]);
                ctr = _mm512_add_epi64(ctr, four);
            }
            for r in rk.iter().take(10).skip(1) {
                for v in s.iter_mut() {
                    *v = _mm512_aesenc_epi128(*v, *r);
                }
            }
            for (k, v) in s.iter().enumerate() {
                _mm512_storeu_si512(p.add((b + 4 * k) * 16) as *mut _, _mm512_aesenclast_epi128(*v, rk[10]));
            }
            b += 16;
        }
        while b < blocks {
            let mut v = _mm512_xor_si512(_mm512_shuffle_epi8(ctr, bswap), rk[0]);
            ctr = _mm512_add_epi64(ctr, four);
            for r in rk.iter().take(10).skip(1) {
                v = _mm512_aesenc_epi128(v, *r);
            }
            v = _mm512_aesenclast_epi128(v, rk[10]);
            let mut tmp = [0u8; 64];
            _mm512_storeu_si512(tmp.as_mut_ptr() as *mut _, v);
            let n = (blocks - b).min(4);
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), p.add(b * 16), n * 16);
            b += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One block with AES-NI alone: the reference for the counter mode.
    #[target_feature(enable = "aes,sse2")]
    unsafe fn encrypt_block(aes: &Aes128, block: [u8; 16]) -> [u8; 16] {
        let key = |r: usize| _mm_loadu_si128(aes.rk[r].as_ptr() as *const __m128i);
        let mut v = _mm_xor_si128(_mm_loadu_si128(block.as_ptr() as *const __m128i), key(0));
        for r in 1..10 {
            v = _mm_aesenc_si128(v, key(r));
        }
        v = _mm_aesenclast_si128(v, key(10));
        let mut out = [0u8; 16];
        _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, v);
        out
    }

    fn hex(s: &str) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    /// FIPS-197 appendix C.1 (cipher) and A.1 (last round key of the key expansion).
    #[test]
    fn fips197_vectors() {
        if !is_x86_feature_detected!("aes") {
            eprintln!("note: this CPU lacks AES-NI; the AES vector test does nothing here");
            return;
        }
        // SAFETY: AES-NI (and SSE2, part of x86-64) checked just above.
        unsafe {
            let aes = Aes128::expand(&hex("000102030405060708090a0b0c0d0e0f"));
            let ct = encrypt_block(&aes, hex("00112233445566778899aabbccddeeff"));
            assert_eq!(ct, hex("69c4e0d86a7b0430d8cdb78070b4c55a"));
            let aes = Aes128::expand(&hex("2b7e151628aed2a6abf7158809cf4f3c"));
            assert_eq!(aes.rk[10], hex("d014f9a8c9ee2589e13f0cc8b6630ca6"));
        }
    }

    /// The VAES counter mode: block i is AES(counter + i) with the counter as a 128-bit
    /// big-endian block, its bytes in order in the output words (little-endian), across the
    /// 16-block main loop and the 4-block tail.
    #[test]
    fn ctr_layout() {
        if !available() {
            eprintln!("note: this CPU lacks VAES/AVX-512; the counter-mode test does nothing here");
            return;
        }
        let aes = Aes128::new(&hex("000102030405060708090a0b0c0d0e0f")).unwrap();
        for (counter, blocks) in [(0u64, 1usize), (0, 3), (5, 16), (7, 37), (u32::MAX as u64 - 3, 21), (1 << 40, 64)] {
            let mut out = vec![0u64; 2 * blocks];
            aes.ctr(counter, &mut out);
            for b in 0..blocks {
                let mut block = [0u8; 16];
                block[8..].copy_from_slice(&(counter + b as u64).to_be_bytes());
                // SAFETY: `available()` implies AES-NI.
                let want = unsafe { encrypt_block(&aes, block) };
                let mut got = [0u8; 16];
                got[..8].copy_from_slice(&out[2 * b].to_le_bytes());
                got[8..].copy_from_slice(&out[2 * b + 1].to_le_bytes());
                assert_eq!(got, want, "block {b} from counter {counter}");
            }
        }
    }
}
