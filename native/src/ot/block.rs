//! AES-128 for OT: the counter-mode PRG of IKNP's columns and the fixed-key permutation π of the
//! correlation-robust hash. Where the CPU has VAES and AVX2 our own 256-bit code runs (see
//! `vaes`); elsewhere RustCrypto's `aes` picks VAES (AVX-512 machines), AES-NI or
//! constant-time software at run time. Every call hands over many blocks at once so the rounds
//! are pipelined.

use std::sync::OnceLock;

use aes::cipher::array::Array;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes128Enc;
use sha2::{Digest, Sha256};

/// Bytes of one block (an OT row, a PRG output, a hash output).
pub const BLOCK: usize = 16;

/// An AES-128 encryption key schedule: RustCrypto's, and on x86-64 with AES-NI also the round
/// keys for `vaes`, which is used when the CPU has VAES and AVX2.
#[derive(Clone)]
pub struct Cipher {
    soft: Aes128Enc,
    #[cfg(target_arch = "x86_64")]
    rk: Option<[[u8; 16]; 11]>,
}

impl Cipher {
    pub fn new(key: &[u8; 16]) -> Self {
        Cipher {
            soft: Aes128Enc::new(&Array::from(*key)),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `vaes::available` checked AES-NI (and VAES, AVX2).
            rk: vaes::available().then(|| unsafe { vaes::expand(key) }),
        }
    }

    /// Encrypts `buf` (a whole number of blocks) in place.
    #[inline]
    pub fn encrypt(&self, buf: &mut [u8]) {
        debug_assert_eq!(buf.len() % BLOCK, 0);
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = &self.rk {
            // SAFETY: round keys exist only where VAES, AVX2 and AES-NI were detected.
            return unsafe { vaes::encrypt(rk, buf) };
        }
        let (blocks, _) = Array::slice_as_chunks_mut(buf);
        self.soft.encrypt_blocks(blocks);
    }

    /// Counter mode: `out` (a whole number of blocks) gets E(c), E(c + 1), ... with the 128-bit
    /// counter c little-endian in the block.
    #[inline]
    pub fn ctr(&self, counter: u128, out: &mut [u8]) {
        debug_assert_eq!(out.len() % BLOCK, 0);
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = &self.rk {
            let (lo, hi) = (counter as u64, (counter >> 64) as u64);
            if lo.checked_add((out.len() / BLOCK) as u64).is_some() {
                // SAFETY: as in `encrypt`; the low half of the counter does not wrap (checked).
                return unsafe { vaes::ctr(rk, lo, hi, out) };
            }
        }
        for (k, b) in out.chunks_exact_mut(BLOCK).enumerate() {
            b.copy_from_slice(&(counter + k as u128).to_le_bytes());
        }
        self.encrypt(out);
    }
}

/// AES-128 on 256-bit registers (VAES: two blocks per instruction, and Zen 3 and later issue two
/// per cycle, twice AES-NI's rate). RustCrypto's `aes` only takes its VAES path where the OS has
/// enabled AVX-512 state, so AVX2-only CPUs with VAES (Zen 3) would run 128-bit AES-NI; this is
/// that missing case. 16 blocks are in flight per loop (eight registers) to cover the latency.
#[cfg(target_arch = "x86_64")]
mod vaes {
    use core::arch::x86_64::*;
    use std::sync::OnceLock;

    pub fn available() -> bool {
        static YES: OnceLock<bool> = OnceLock::new();
        *YES.get_or_init(|| {
            std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("vaes")
                && std::arch::is_x86_feature_detected!("avx2")
        })
    }

    macro_rules! next_key {
        ($k:expr, $rcon:literal) => {{
            let k = $k;
            let t = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<$rcon>(k));
            let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            _mm_xor_si128(k, t)
        }};
    }

    /// The 11 round keys (FIPS-197 key expansion by `aeskeygenassist`).
    #[target_feature(enable = "aes,sse2")]
    pub unsafe fn expand(key: &[u8; 16]) -> [[u8; 16]; 11] {
        let mut k = [_mm_loadu_si128(key.as_ptr().cast()); 11];
        k[1] = next_key!(k[0], 0x01);
        k[2] = next_key!(k[1], 0x02);
        k[3] = next_key!(k[2], 0x04);
        k[4] = next_key!(k[3], 0x08);
        k[5] = next_key!(k[4], 0x10);
        k[6] = next_key!(k[5], 0x20);
        k[7] = next_key!(k[6], 0x40);
        k[8] = next_key!(k[7], 0x80);
        k[9] = next_key!(k[8], 0x1b);
        k[10] = next_key!(k[9], 0x36);
        let mut out = [[0u8; 16]; 11];
        for (o, r) in out.iter_mut().zip(k) {
            _mm_storeu_si128(o.as_mut_ptr().cast(), r);
        }
        out
    }

    /// Counter mode into `out` (whole blocks): block n is E(lo + n | hi << 64), the counters made
    /// in registers (no store and reload of counter blocks); `lo + blocks` must not wrap.
    #[target_feature(enable = "aes,vaes,avx2")]
    pub unsafe fn ctr(rk: &[[u8; 16]; 11], lo: u64, hi: u64, out: &mut [u8]) {
        let k: [__m256i; 11] = core::array::from_fn(|r| _mm256_broadcastsi128_si256(_mm_loadu_si128(rk[r].as_ptr().cast())));
        let two = _mm256_set_epi64x(0, 2, 0, 2);
        let mut next = _mm256_set_epi64x(hi as i64, lo.wrapping_add(1) as i64, hi as i64, lo as i64);
        let mut chunks = out.chunks_exact_mut(16 * 16);
        for c in &mut chunks {
            let p = c.as_mut_ptr() as *mut __m256i;
            let mut x = [k[0]; 8];
            for v in x.iter_mut() {
                *v = _mm256_xor_si256(next, k[0]);
                next = _mm256_add_epi64(next, two);
            }
            for rkey in &k[1..10] {
                for v in x.iter_mut() {
                    *v = _mm256_aesenc_epi128(*v, *rkey);
                }
            }
            for (i, v) in x.iter().enumerate() {
                _mm256_storeu_si256(p.add(i), _mm256_aesenclast_epi128(*v, k[10]));
            }
        }
        let rest = chunks.into_remainder();
        let mut pairs = rest.chunks_exact_mut(32);
        for c in &mut pairs {
            let p = c.as_mut_ptr() as *mut __m256i;
            let mut v = _mm256_xor_si256(next, k[0]);
            next = _mm256_add_epi64(next, two);
            for rkey in &k[1..10] {
                v = _mm256_aesenc_epi128(v, *rkey);
            }
            _mm256_storeu_si256(p, _mm256_aesenclast_epi128(v, k[10]));
        }
        let last = pairs.into_remainder();
        if !last.is_empty() {
            let p = last.as_mut_ptr() as *mut __m128i;
            let mut v = _mm_xor_si128(_mm256_castsi256_si128(next), _mm256_castsi256_si128(k[0]));
            for rkey in &k[1..10] {
                v = _mm_aesenc_si128(v, _mm256_castsi256_si128(*rkey));
            }
            _mm_storeu_si128(p, _mm_aesenclast_si128(v, _mm256_castsi256_si128(k[10])));
        }
    }

    /// Encrypts `buf` (whole blocks) in place.
    #[target_feature(enable = "aes,vaes,avx2")]
    pub unsafe fn encrypt(rk: &[[u8; 16]; 11], buf: &mut [u8]) {
        let k: [__m256i; 11] = core::array::from_fn(|r| _mm256_broadcastsi128_si256(_mm_loadu_si128(rk[r].as_ptr().cast())));
        let mut chunks = buf.chunks_exact_mut(16 * 16);
        for c in &mut chunks {
            let p = c.as_mut_ptr() as *mut __m256i;
            let mut x: [__m256i; 8] = core::array::from_fn(|i| _mm256_xor_si256(_mm256_loadu_si256(p.add(i)), k[0]));
            for rkey in &k[1..10] {
                for v in x.iter_mut() {
                    *v = _mm256_aesenc_epi128(*v, *rkey);
                }
            }
            for (i, v) in x.iter().enumerate() {
                _mm256_storeu_si256(p.add(i), _mm256_aesenclast_epi128(*v, k[10]));
            }
        }
        let rest = chunks.into_remainder();
        let mut pairs = rest.chunks_exact_mut(32);
        for c in &mut pairs {
            let p = c.as_mut_ptr() as *mut __m256i;
            let mut v = _mm256_xor_si256(_mm256_loadu_si256(p), k[0]);
            for rkey in &k[1..10] {
                v = _mm256_aesenc_epi128(v, *rkey);
            }
            _mm256_storeu_si256(p, _mm256_aesenclast_epi128(v, k[10]));
        }
        let last = pairs.into_remainder();
        if !last.is_empty() {
            let p = last.as_mut_ptr() as *mut __m128i;
            let mut v = _mm_xor_si128(_mm_loadu_si128(p), _mm256_castsi256_si128(k[0]));
            for rkey in &k[1..10] {
                v = _mm_aesenc_si128(v, _mm256_castsi256_si128(*rkey));
            }
            _mm_storeu_si128(p, _mm_aesenclast_si128(v, _mm256_castsi256_si128(k[10])));
        }
    }
}

/// The public key of the fixed-key permutation π: the first 16 bytes of SHA-256 of this label.
pub const FIXED_KEY_LABEL: &[u8] = b"shaper/ot/tccr/v1";

/// π: AES-128 under the fixed public key (key schedule computed once).
pub fn fixed() -> &'static Cipher {
    static PI: OnceLock<Cipher> = OnceLock::new();
    PI.get_or_init(|| {
        let digest = Sha256::digest(FIXED_KEY_LABEL);
        Cipher::new(digest[..16].try_into().unwrap())
    })
}

/// A block as a little-endian `u128` (bit j of the block, LSB-first, is bit j of the integer).
#[inline(always)]
pub fn load(b: &[u8]) -> u128 {
    u128::from_le_bytes(b[..BLOCK].try_into().unwrap())
}

#[inline(always)]
pub fn store(b: &mut [u8], v: u128) {
    b[..BLOCK].copy_from_slice(&v.to_le_bytes());
}

/// `dst ^= src`, byte for byte (vectorised by the compiler).
#[inline]
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fips197_vector() {
        // FIPS-197 Appendix C.1
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let mut block: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
        Cipher::new(&key).encrypt(&mut block);
        let want = [0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a];
        assert_eq!(block, want);
    }

    #[test]
    fn batch_equals_one_by_one() {
        let c = Cipher::new(&[7u8; 16]);
        let mut batch = vec![0u8; 100 * BLOCK];
        // the VAES path (where present) equals RustCrypto's, at every length mod 16 blocks
        for n in [1usize, 2, 3, 15, 16, 17, 33, 100] {
            let mut a: Vec<u8> = (0..n * BLOCK).map(|i| (i * 37 + n) as u8).collect();
            let mut b = a.clone();
            c.encrypt(&mut a);
            let (blocks, _) = Array::slice_as_chunks_mut(&mut b[..]);
            c.soft.encrypt_blocks(blocks);
            assert_eq!(a, b, "{n} blocks");
        }
        // counter mode (VAES: counters made in registers, unless the low half would wrap), at
        // every length mod 16 blocks and across the 64-bit carry
        for start in [5u128, (7 << 64) | 3, (1 << 64) - 40, u64::MAX as u128] {
            for n in [1usize, 2, 3, 16, 17, 33, 100] {
                c.ctr(start, &mut batch[..n * BLOCK]);
                for k in 0..n {
                    let mut one = (start + k as u128).to_le_bytes();
                    c.encrypt(&mut one);
                    assert_eq!(&batch[k * BLOCK..(k + 1) * BLOCK], &one, "block {k} of {n} from {start:#x}");
                }
            }
        }
    }
}
