//! AES-128 in counter mode with VAES (four blocks per AVX-512 instruction): the keystreams behind
//! the zero sharings of three-party replicated sharing. Byte-for-byte the same stream as
//! AES-128-CTR with a zero IV and a 128-bit big-endian counter (the `cryptography` library's
//! `modes.CTR(b"\0" * 16)`), so parties with and without VAES agree.

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

/// Words of keystream generated per refill (16 KiB: stays in L1/L2 while consumed).
const CHUNK: usize = 2048;

/// A keystream read word by word in any amounts: consecutive calls continue the stream.
pub struct KeyStream {
    aes: Aes128,
    next_block: u64,
    buf: Vec<u64>,
    pos: usize,
}

impl KeyStream {
    pub fn new(key: &[u8; 16]) -> Option<Self> {
        Some(KeyStream { aes: Aes128::new(key)?, next_block: 0, buf: vec![0u64; CHUNK], pos: CHUNK })
    }

    /// The next `dst.len()` words of the stream.
    pub fn fill(&mut self, dst: &mut [u64]) {
        let mut done = 0;
        while done < dst.len() {
            if self.pos == CHUNK {
                let rest = dst.len() - done;
                if rest >= CHUNK {
                    // whole chunks straight into the destination
                    let whole = rest - rest % CHUNK;
                    self.aes.ctr(self.next_block, &mut dst[done..done + whole]);
                    self.next_block += (whole / 2) as u64;
                    done += whole;
                    continue;
                }
                self.aes.ctr(self.next_block, &mut self.buf);
                self.next_block += (CHUNK / 2) as u64;
                self.pos = 0;
            }
            let n = (CHUNK - self.pos).min(dst.len() - done);
            dst[done..done + n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            done += n;
        }
    }
}
