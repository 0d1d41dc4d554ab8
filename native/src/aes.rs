//! AES-128 encryption, the crate's one implementation: every AES user calls [`Cipher`] — the
//! keystreams of the replicated-sharing zero sharings ([`crate::prf`]) and, in OT, the column
//! PRGs of IKNP/SoftSpoken, the GGM trees and the fixed-key permutation π of the
//! correlation-robust hash ([`crate::ot`]).
//!
//! One key schedule, three operations, each on many blocks per call so the rounds pipeline:
//! - [`Cipher::encrypt`]: blocks in place;
//! - [`Cipher::ctr`]: counter mode with the 128-bit counter little-endian in the block (OT);
//! - [`Cipher::ctr_be`]: counter mode with the counter big-endian in the block, i.e. standard
//!   AES-128-CTR (NIST SP 800-38A; the `cryptography` library's `modes.CTR`).
//!
//! The backend is chosen at run time. Where the CPU has AES-NI, VAES and AVX2 (Zen 3 and later,
//! Ice Lake and later) our own code on 256-bit registers runs (`vaes` below): two blocks per
//! instruction and 16 blocks in flight per loop, counters made in registers. Elsewhere
//! RustCrypto's `aes` runs (AES-NI, or constant-time software; it only takes its own VAES path
//! where the OS enables AVX-512 state, and measured half our rate on a VAES + AVX2 CPU).
//!
//! The 256-bit code also serves CPUs with AVX-512: there a 512-bit `vaesenc` retires at half
//! the rate of the 256-bit one (Ice Lake, Sapphire Rapids: one port instead of two; Zen 4: split
//! in two halves), so both widths encrypt the same number of blocks per cycle.

/// Bytes of one AES block.
pub const BLOCK: usize = 16;

/// True when this CPU runs the VAES code (AES-NI, VAES and AVX2; checked once): the condition
/// for the native keystream of [`crate::prf`].
pub fn vaes_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return vaes::available();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// An AES-128 encryption key schedule: RustCrypto's, and on x86-64 with VAES also the round keys
/// of the `vaes` code.
#[derive(Clone)]
pub struct Cipher {
    soft: ::aes::Aes128Enc,
    #[cfg(target_arch = "x86_64")]
    rk: Option<[core::arch::x86_64::__m128i; 11]>,
}

impl Cipher {
    pub fn new(key: &[u8; 16]) -> Self {
        use ::aes::cipher::{array::Array, KeyInit};
        Cipher {
            soft: ::aes::Aes128Enc::new(&Array::from(*key)),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `vaes::available` checked AES-NI (and VAES, AVX2), all `expand` needs.
            rk: vaes::available().then(|| unsafe { vaes::expand(key) }),
        }
    }

    /// Encrypts `buf` (a whole number of blocks) in place.
    #[inline]
    pub fn encrypt(&self, buf: &mut [u8]) {
        use ::aes::cipher::{array::Array, BlockCipherEncrypt};
        debug_assert_eq!(buf.len() % BLOCK, 0);
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = &self.rk {
            // SAFETY: round keys exist only where `vaes::available` found AES-NI, VAES and AVX2.
            return unsafe { vaes::blocks::<false, false>(rk, 0, 0, buf) };
        }
        let (blocks, _) = Array::slice_as_chunks_mut(buf);
        self.soft.encrypt_blocks(blocks);
    }

    /// Counter mode: `out` (a whole number of blocks) gets E(c), E(c + 1), ... with the 128-bit
    /// counter c little-endian in the block.
    #[inline]
    pub fn ctr(&self, counter: u128, out: &mut [u8]) {
        self.counter_mode::<false>(counter, out)
    }

    /// Counter mode with the counter big-endian in the block: AES-128-CTR with initial counter
    /// block c. `out` is a whole number of blocks.
    #[inline]
    pub fn ctr_be(&self, counter: u128, out: &mut [u8]) {
        self.counter_mode::<true>(counter, out)
    }

    #[inline]
    fn counter_mode<const BE: bool>(&self, counter: u128, out: &mut [u8]) {
        debug_assert_eq!(out.len() % BLOCK, 0);
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = &self.rk {
            let (lo, hi) = (counter as u64, (counter >> 64) as u64);
            if lo.checked_add((out.len() / BLOCK) as u64).is_some() {
                // SAFETY: as in `encrypt`. (`vaes::blocks` increments the low half alone; it does
                // not wrap here, checked just above.)
                return unsafe { vaes::blocks::<true, BE>(rk, lo, hi, out) };
            }
        }
        for (k, b) in out.chunks_exact_mut(BLOCK).enumerate() {
            let c = counter + k as u128;
            b.copy_from_slice(&if BE { c.to_be_bytes() } else { c.to_le_bytes() });
        }
        self.encrypt(out);
    }
}

/// AES-128 on 256-bit registers (VAES: two blocks per instruction; Zen 3 and later issue two
/// per cycle, twice AES-NI's rate). 16 blocks are in flight per loop (eight registers) to cover
/// the latency; a last odd block runs on a 128-bit register.
#[cfg(target_arch = "x86_64")]
mod vaes {
    use core::arch::x86_64::*;
    use std::sync::OnceLock;

    /// True when the CPU has AES-NI, VAES and AVX2 (checked once): what every function below needs.
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
    ///
    /// # Safety
    /// The CPU must have AES-NI (checked by [`available`]; SSE2 is part of x86-64).
    #[target_feature(enable = "aes,sse2")]
    pub unsafe fn expand(key: &[u8; 16]) -> [__m128i; 11] {
        // SAFETY: `key` is 16 readable bytes and `loadu` has no alignment requirement.
        let mut k = [unsafe { _mm_loadu_si128(key.as_ptr().cast()) }; 11];
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
        k
    }

    /// The one kernel, 16 blocks in flight per loop (eight registers), then pairs, then a last
    /// block on a 128-bit register. `CTR` false: encrypts `buf` (whole blocks) in place (`lo`,
    /// `hi` unused). `CTR` true: fills `buf` with counter mode, block n = E(c + n) for
    /// c = lo | hi << 64, the counter little-endian in the block, or big-endian with `BE` (one
    /// byte shuffle per register); the counters are made in registers (no store and reload).
    /// Only the low half is incremented: `lo + blocks` must not wrap, or the stream is wrong.
    ///
    /// # Safety
    /// The CPU must have AES-NI, VAES and AVX2 ([`available`]).
    #[target_feature(enable = "aes,vaes,avx2")]
    pub unsafe fn blocks<const CTR: bool, const BE: bool>(rk: &[__m128i; 11], lo: u64, hi: u64, buf: &mut [u8]) {
        let k: [__m256i; 11] = core::array::from_fn(|r| _mm256_broadcastsi128_si256(rk[r]));
        // reverses the 16 bytes of each 128-bit lane: little-endian counter to big-endian block
        let bswap = _mm256_set_epi64x(0x0001020304050607, 0x08090a0b0c0d0e0f, 0x0001020304050607, 0x08090a0b0c0d0e0f);
        let two = _mm256_set_epi64x(0, 2, 0, 2);
        let mut next = _mm256_set_epi64x(hi as i64, lo.wrapping_add(1) as i64, hi as i64, lo as i64);
        // two blocks, whitened: the next two counter blocks, or the 32 bytes at `$p`
        macro_rules! first {
            ($p:expr) => {{
                let x = if CTR {
                    let c = if BE { _mm256_shuffle_epi8(next, bswap) } else { next };
                    next = _mm256_add_epi64(next, two);
                    c
                } else {
                    // SAFETY: `$p` is 32 bytes of `buf` (the callers' chunks); unaligned load.
                    unsafe { _mm256_loadu_si256($p) }
                };
                _mm256_xor_si256(x, k[0])
            }};
        }
        let mut chunks = buf.chunks_exact_mut(16 * 16);
        for c in &mut chunks {
            let p = c.as_mut_ptr() as *mut __m256i;
            // SAFETY: `c` is 256 bytes, eight registers' worth at p + 0..8.
            let mut x: [__m256i; 8] = core::array::from_fn(|i| first!(unsafe { p.add(i) }));
            for rkey in &k[1..10] {
                for v in x.iter_mut() {
                    *v = _mm256_aesenc_epi128(*v, *rkey);
                }
            }
            for (i, v) in x.iter().enumerate() {
                // SAFETY: `c` is 256 bytes, eight unaligned 32-byte stores (`storeu`) at p + 0..8.
                unsafe { _mm256_storeu_si256(p.add(i), _mm256_aesenclast_epi128(*v, k[10])) };
            }
        }
        let rest = chunks.into_remainder();
        let mut pairs = rest.chunks_exact_mut(32);
        for c in &mut pairs {
            let p = c.as_mut_ptr() as *mut __m256i;
            let mut v = first!(p);
            for rkey in &k[1..10] {
                v = _mm256_aesenc_epi128(v, *rkey);
            }
            // SAFETY: `c` is 32 bytes, one unaligned store.
            unsafe { _mm256_storeu_si256(p, _mm256_aesenclast_epi128(v, k[10])) };
        }
        let last = pairs.into_remainder();
        if !last.is_empty() {
            let p = last.as_mut_ptr() as *mut __m128i;
            let x = if CTR {
                _mm256_castsi256_si128(if BE { _mm256_shuffle_epi8(next, bswap) } else { next })
            } else {
                // SAFETY: `buf` is whole blocks, so the one left is 16 bytes: one unaligned load.
                unsafe { _mm_loadu_si128(p) }
            };
            let mut v = _mm_xor_si128(x, rk[0]);
            for rkey in &rk[1..10] {
                v = _mm_aesenc_si128(v, *rkey);
            }
            // SAFETY: as for the load, one unaligned 16-byte store.
            unsafe { _mm_storeu_si128(p, _mm_aesenclast_si128(v, rk[10])) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::aes::cipher::{array::Array, BlockCipherEncrypt};

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
    }

    /// FIPS-197 appendix C.1 (cipher) and A.1 (last round key of the key expansion).
    #[test]
    fn fips197_vectors() {
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let mut block: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
        Cipher::new(&key).encrypt(&mut block);
        assert_eq!(block[..], hex("69c4e0d86a7b0430d8cdb78070b4c55a"));
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = Cipher::new(hex("2b7e151628aed2a6abf7158809cf4f3c")[..].try_into().unwrap()).rk {
            // SAFETY: `__m128i` is 16 plain bytes, like `[u8; 16]`.
            let last: [u8; 16] = unsafe { core::mem::transmute(rk[10]) };
            assert_eq!(last[..], hex("d014f9a8c9ee2589e13f0cc8b6630ca6"));
        }
    }

    /// NIST SP 800-38A F.5.1 (CTR-AES128.Encrypt): the keystream is ciphertext ⊕ plaintext (the
    /// initial counter's low half does not wrap: the VAES path, where present). With the low
    /// half set to 2^64 - 2 it wraps within the call, which the one-block path serves.
    #[test]
    fn sp800_38a_ctr_vector() {
        let c = Cipher::new(hex("2b7e151628aed2a6abf7158809cf4f3c")[..].try_into().unwrap());
        let pt = hex(concat!("6bc1bee22e409f96e93d7e117393172a", "ae2d8a571e03ac9c9eb76fac45af8e51",
                             "30c81c46a35ce411e5fbc1191a0a52ef", "f69f2445df4f9b17ad2b417be66c3710"));
        let ct = hex(concat!("874d6191b620e3261bef6864990db6ce", "9806f66b7970fdff8617187bb9fffdff",
                             "5ae4df3edbd5d35e5b4f09020db03eab", "1e031dda2fbe03d1792170a0f3009cee"));
        let want: Vec<u8> = pt.iter().zip(&ct).map(|(p, q)| p ^ q).collect();
        let iv = u128::from_be_bytes(hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")[..].try_into().unwrap());
        let mut ks = vec![0u8; 4 * BLOCK];
        c.ctr_be(iv, &mut ks);
        assert_eq!(ks, want);
        // counter low half u64::MAX - 1: wraps within the four blocks, so the one-block path
        let start = (iv & !(u64::MAX as u128)) | (u64::MAX as u128 - 1);
        let mut wrap = vec![0u8; 4 * BLOCK];
        c.ctr_be(start, &mut wrap);
        for (k, b) in wrap.chunks_exact(BLOCK).enumerate() {
            let mut one = (start + k as u128).to_be_bytes();
            c.encrypt(&mut one);
            assert_eq!(b, one, "block {k}");
        }
    }

    /// Every path against RustCrypto one block at a time: encryption at every length mod 16
    /// blocks; counter mode in both byte orders, at every length mod 16 blocks and across the
    /// 64-bit carry (the VAES code makes counters in registers unless the low half would wrap).
    #[test]
    fn batch_equals_one_by_one() {
        let c = Cipher::new(&[7u8; 16]);
        let mut batch = vec![0u8; 100 * BLOCK];
        for n in [1usize, 2, 3, 15, 16, 17, 33, 100] {
            let mut a: Vec<u8> = (0..n * BLOCK).map(|i| (i * 37 + n) as u8).collect();
            let mut b = a.clone();
            c.encrypt(&mut a);
            let (blocks, _) = Array::slice_as_chunks_mut(&mut b[..]);
            c.soft.encrypt_blocks(blocks);
            assert_eq!(a, b, "{n} blocks");
        }
        for be in [false, true] {
            for start in [0u128, 5, (7 << 64) | 3, (1 << 64) - 40, u64::MAX as u128, u32::MAX as u128 - 3, 1 << 40] {
                for n in [1usize, 2, 3, 16, 17, 21, 33, 37, 64, 100] {
                    if be {
                        c.ctr_be(start, &mut batch[..n * BLOCK]);
                    } else {
                        c.ctr(start, &mut batch[..n * BLOCK]);
                    }
                    for k in 0..n {
                        let x = start + k as u128;
                        let mut one = Array::from(if be { x.to_be_bytes() } else { x.to_le_bytes() });
                        c.soft.encrypt_block(&mut one);
                        assert_eq!(&batch[k * BLOCK..(k + 1) * BLOCK], &one[..], "be {be}: block {k} of {n} from {start:#x}");
                    }
                }
            }
        }
    }

    /// Throughput of every operation (`cargo test --release --lib aes::tests::throughput --
    /// --ignored --nocapture`): 16 KiB per call (the keystream's refill size), the operations
    /// taking turns in 50 ms rounds, each figure the best round by on-CPU time (Linux
    /// schedstat, so other processes on a shared machine distort it less).
    #[test]
    #[ignore]
    fn throughput() {
        fn cpu_ns() -> f64 {
            let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
            s.split_whitespace().next().and_then(|t| t.parse().ok()).unwrap_or(f64::NAN)
        }
        fn round(f: &mut dyn FnMut()) -> f64 {
            let (t, c) = (std::time::Instant::now(), cpu_ns());
            let mut n = 0usize;
            while t.elapsed().as_secs_f64() < 0.05 {
                for _ in 0..20 {
                    f();
                }
                n += 20;
            }
            (n * 16384) as f64 / (cpu_ns() - c)
        }
        eprintln!("VAES code: {}", vaes_available());
        let c = Cipher::new(&[7u8; 16]);
        let (mut b1, mut b2, mut b3, mut b4) = (vec![0u8; 16384], vec![0u8; 16384], vec![0u8; 16384], vec![0u8; 16384]);
        let mut ks = crate::prf::KeyStream::new(&[7u8; 16]);
        let mut w = vec![0u64; 2048];
        type Op<'a> = (&'static str, Box<dyn FnMut() + 'a>);
        let mut ops: Vec<Op> = vec![
            ("ctr (little-endian counter, OT)", Box::new(|| c.ctr(5, std::hint::black_box(&mut b1)))),
            ("ctr_be (AES-128-CTR)", Box::new(|| c.ctr_be(5, std::hint::black_box(&mut b2)))),
            ("encrypt in place", Box::new(|| c.encrypt(std::hint::black_box(&mut b3)))),
            ("RustCrypto encrypt in place", Box::new(|| {
                let (b, _) = Array::slice_as_chunks_mut(&mut b4[..]);
                c.soft.encrypt_blocks(std::hint::black_box(b));
            })),
        ];
        if let Some(ks) = ks.as_mut() {
            ops.push(("prf::KeyStream::fill", Box::new(|| ks.fill(std::hint::black_box(&mut w)))));
        }
        let mut best = vec![0f64; ops.len()];
        for _ in 0..20 {
            for (b, (_, f)) in best.iter_mut().zip(ops.iter_mut()) {
                *b = b.max(round(f.as_mut()));
            }
        }
        for (b, (name, _)) in best.iter().zip(&ops) {
            eprintln!("{name}: {b:.2} GB/s");
        }
    }
}
