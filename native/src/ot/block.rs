//! Blocks for OT: the fixed-key permutation π of the correlation-robust hash, 16-byte rows as
//! integers, and the crate's AES-128 ([`Cipher`], see `aes.rs`) that keys the counter-mode PRGs
//! of IKNP's columns and π.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

// one block is an OT row, a PRG output, a hash output
pub use crate::aes::{Cipher, BLOCK};

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
