//! AES-128 for OT: the counter-mode PRG of IKNP's columns and the fixed-key permutation π of the
//! correlation-robust hash. RustCrypto's `aes` picks VAES, AES-NI or constant-time software at
//! run time; every call here hands it many blocks at once so the rounds are pipelined.

use std::sync::OnceLock;

use aes::cipher::array::Array;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes128Enc;
use sha2::{Digest, Sha256};

/// Bytes of one block (an OT row, a PRG output, a hash output).
pub const BLOCK: usize = 16;

/// An AES-128 encryption key schedule.
#[derive(Clone)]
pub struct Cipher(Aes128Enc);

impl Cipher {
    pub fn new(key: &[u8; 16]) -> Self {
        Cipher(Aes128Enc::new(&Array::from(*key)))
    }

    /// Encrypts `buf` (a whole number of blocks) in place.
    #[inline]
    pub fn encrypt(&self, buf: &mut [u8]) {
        debug_assert_eq!(buf.len() % BLOCK, 0);
        let (blocks, _) = Array::slice_as_chunks_mut(buf);
        self.0.encrypt_blocks(blocks);
    }

    /// Counter mode: `out` (a whole number of blocks) gets E(c), E(c + 1), ... with the 128-bit
    /// counter c little-endian in the block.
    #[inline]
    pub fn ctr(&self, counter: u128, out: &mut [u8]) {
        for (k, b) in out.chunks_exact_mut(BLOCK).enumerate() {
            b.copy_from_slice(&(counter + k as u128).to_le_bytes());
        }
        self.encrypt(out);
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
        c.ctr(5, &mut batch);
        for k in 0..100 {
            let mut one = (5u128 + k as u128).to_le_bytes();
            c.encrypt(&mut one);
            assert_eq!(&batch[k * BLOCK..(k + 1) * BLOCK], &one);
        }
    }
}
