//! The tweakable correlation-robust hash of Guo–Katz–Wang–Yu (S&P 2020, "TCCR"):
//! H(x, τ) = π(π(x) ⊕ τ) ⊕ π(x), π = AES-128 under a fixed public key ([`super::block::fixed`]).
//!
//! It turns correlated OT rows into random OT messages: the receiver's t_j gives
//! H(t_j, τ_j) and the sender's q_j gives H(q_j, τ_j) and H(q_j ⊕ Δ, τ_j), of which the receiver
//! knows exactly the one of its choice bit. The tweak τ(j, c) has low 64 bits the OT index j and
//! high 64 bits `domain ⊕ c` (c < 256, the output column; the caller keeps `domain`'s low 8 bits
//! zero and different per purpose/pair/direction), so no two hashes in a session share a tweak.
//! π(x) is computed once per row and reused for every column.

use super::block::{fixed, load, store, BLOCK};

/// Rows hashed per batch (a multiple of the 30-block VAES batch; buffers stay on the stack).
pub const BATCH: usize = 240;
/// Output columns per row at most (the low byte of the tweak's high half).
pub const MAX_COLUMNS: usize = 256;

/// τ(j, c) as a little-endian `u128`.
#[inline(always)]
pub fn tweak(j: u64, domain: u64, c: u64) -> u128 {
    (j as u128) | (((domain ^ c) as u128) << 64)
}

/// `domain` must leave the column byte free.
pub fn check_domain(domain: u64) -> Result<(), String> {
    if domain & 0xff != 0 {
        return Err(format!("the hash domain must have its low 8 bits zero (they number columns), got {domain:#x}"));
    }
    Ok(())
}

/// OT indices `start..start + rows` must fit in 64 bits.
pub fn check_indices(start: u64, rows: usize) -> Result<(), String> {
    if start.checked_add(rows as u64).is_none() {
        return Err(format!("OT indices {start} + {rows} overflow 64 bits"));
    }
    Ok(())
}

/// π of each row of `rows` into `px`; with `delta`, also π(row ⊕ Δ) into the second half of `px`
/// (`px` holds 1 or 2 times `rows.len()` bytes).
#[inline]
pub fn permute(rows: &[u8], delta: Option<u128>, px: &mut [u8]) {
    let n = rows.len();
    px[..n].copy_from_slice(rows);
    if let Some(d) = delta {
        for (o, x) in px[n..2 * n].chunks_exact_mut(BLOCK).zip(rows.chunks_exact(BLOCK)) {
            store(o, load(x) ^ d);
        }
    }
    fixed().encrypt(px);
}

/// `out = π(px ⊕ τ) ⊕ px` for the blocks of `px` (one or two halves of `half` blocks each; block k
/// gets the tweak of OT `start + k mod half` and column `c`).
#[inline]
pub fn finish(px: &[u8], half: usize, domain: u64, start: u64, c: u64, out: &mut [u8]) {
    for (k, (o, x)) in out.chunks_exact_mut(BLOCK).zip(px.chunks_exact(BLOCK)).enumerate() {
        let j = start + (if k >= half { k - half } else { k }) as u64;
        store(o, load(x) ^ tweak(j, domain, c));
    }
    fixed().encrypt(&mut out[..px.len()]);
    for (o, x) in out.chunks_exact_mut(BLOCK).zip(px.chunks_exact(BLOCK)) {
        store(o, load(o) ^ load(x));
    }
}

/// Receiver: `out[j] = H(rows[j], τ(start + j, 0))`, 16 bytes per row.
pub fn hash(rows: &[u8], domain: u64, start: u64, out: &mut [u8]) {
    let mut px = [0u8; BATCH * BLOCK];
    for (b, (chunk, o)) in rows.chunks(BATCH * BLOCK).zip(out.chunks_mut(BATCH * BLOCK)).enumerate() {
        let n = chunk.len();
        permute(chunk, None, &mut px[..n]);
        finish(&px[..n], n / BLOCK, domain, start + (b * BATCH) as u64, 0, o);
    }
}

/// Sender: `out0[j] = H(rows[j], τ)`, `out1[j] = H(rows[j] ⊕ Δ, τ)`, τ = τ(start + j, 0).
pub fn hash_pair(rows: &[u8], delta: u128, domain: u64, start: u64, out0: &mut [u8], out1: &mut [u8]) {
    let mut px = [0u8; 2 * BATCH * BLOCK];
    for (b, ((chunk, o0), o1)) in rows.chunks(BATCH * BLOCK).zip(out0.chunks_mut(BATCH * BLOCK))
        .zip(out1.chunks_mut(BATCH * BLOCK)).enumerate() {
        let n = chunk.len();
        let first = start + (b * BATCH) as u64;
        permute(chunk, Some(delta), &mut px[..2 * n]);
        finish(&px[..n], n / BLOCK, domain, first, 0, o0);
        finish(&px[n..2 * n], n / BLOCK, domain, first, 0, o1);
    }
}

/// Sets bit j of `out` (words, bit j at `out[j >> 6] >> (j & 63)`) to the lowest bit of block j
/// of `h`, for blocks `first..first + h.len() / 16`.
#[inline]
fn pack_low_bits(h: &[u8], first: usize, out: &mut [u64]) {
    for (k, blk) in h.chunks_exact(BLOCK).enumerate() {
        let j = first + k;
        out[j >> 6] |= ((blk[0] & 1) as u64) << (j & 63);
    }
}

/// Words of packed bits for `rows` rows.
pub fn bit_words(rows: usize) -> usize {
    rows.div_ceil(64)
}

/// Receiver: the lowest bit of each `hash` output, packed (`out` zeroed, `bit_words` long).
pub fn bits(rows: &[u8], domain: u64, start: u64, out: &mut [u64]) {
    let mut px = [0u8; BATCH * BLOCK];
    let mut h = [0u8; BATCH * BLOCK];
    out.fill(0);
    for (b, chunk) in rows.chunks(BATCH * BLOCK).enumerate() {
        let n = chunk.len();
        permute(chunk, None, &mut px[..n]);
        finish(&px[..n], n / BLOCK, domain, start + (b * BATCH) as u64, 0, &mut h[..n]);
        pack_low_bits(&h[..n], b * BATCH, out);
    }
}

/// Sender: the lowest bits of both `hash_pair` outputs, packed.
pub fn bits_pair(rows: &[u8], delta: u128, domain: u64, start: u64, out0: &mut [u64], out1: &mut [u64]) {
    let mut px = [0u8; 2 * BATCH * BLOCK];
    let mut h = [0u8; 2 * BATCH * BLOCK];
    out0.fill(0);
    out1.fill(0);
    for (b, chunk) in rows.chunks(BATCH * BLOCK).enumerate() {
        let n = chunk.len();
        permute(chunk, Some(delta), &mut px[..2 * n]);
        finish(&px[..2 * n], n / BLOCK, domain, start + (b * BATCH) as u64, 0, &mut h[..2 * n]);
        pack_low_bits(&h[..n], b * BATCH, out0);
        pack_low_bits(&h[n..2 * n], b * BATCH, out1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::{Cipher, FIXED_KEY_LABEL};
    use super::*;
    use sha2::{Digest, Sha256};

    fn rows(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed | 1;
        (0..n * BLOCK).map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u8
        }).collect()
    }

    /// H(x, τ) block by block, with a separately keyed one-block AES.
    fn reference(x: &[u8], tau: u128) -> [u8; 16] {
        let pi = Cipher::new(Sha256::digest(FIXED_KEY_LABEL)[..16].try_into().unwrap());
        let mut px: [u8; 16] = x.try_into().unwrap();
        pi.encrypt(&mut px);
        let mut y = (u128::from_le_bytes(px) ^ tau).to_le_bytes();
        pi.encrypt(&mut y);
        (u128::from_le_bytes(y) ^ u128::from_le_bytes(px)).to_le_bytes()
    }

    #[test]
    fn hash_equals_the_formula() {
        let (m, domain, start) = (BATCH * 2 + 17, 0xabcd_ef00u64 << 32, 1u64 << 40);
        let x = rows(m, 3);
        let delta = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        let mut h = vec![0u8; m * BLOCK];
        hash(&x, domain, start, &mut h);
        let (mut h0, mut h1) = (vec![0u8; m * BLOCK], vec![0u8; m * BLOCK]);
        hash_pair(&x, delta, domain, start, &mut h0, &mut h1);
        assert_eq!(h, h0);
        for j in 0..m {
            let tau = tweak(start + j as u64, domain, 0);
            assert_eq!(h[j * 16..(j + 1) * 16], reference(&x[j * 16..(j + 1) * 16], tau), "row {j}");
            let xd = (load(&x[j * 16..]) ^ delta).to_le_bytes();
            assert_eq!(h1[j * 16..(j + 1) * 16], reference(&xd, tau), "row {j}");
        }
        // the tweak is j in the low half and domain ^ c in the high half
        assert_eq!(tweak(5, 0x100, 3).to_le_bytes()[..8], 5u64.to_le_bytes());
        assert_eq!(tweak(5, 0x100, 3).to_le_bytes()[8..], 0x103u64.to_le_bytes());
    }

    #[test]
    fn bits_are_the_lowest_hash_bits() {
        for m in [1usize, 63, 64, 65, BATCH + 1, 1000] {
            let x = rows(m, m as u64);
            let delta = 77u128 << 90 | 5;
            let (mut h0, mut h1) = (vec![0u8; m * BLOCK], vec![0u8; m * BLOCK]);
            hash_pair(&x, delta, 0x4200, 9, &mut h0, &mut h1);
            let mut b = vec![u64::MAX; bit_words(m)];
            bits(&x, 0x4200, 9, &mut b);
            let (mut b0, mut b1) = (vec![0u64; bit_words(m)], vec![0u64; bit_words(m)]);
            bits_pair(&x, delta, 0x4200, 9, &mut b0, &mut b1);
            assert_eq!(b, b0);
            for j in 0..m {
                assert_eq!((b0[j >> 6] >> (j & 63)) & 1, (h0[j * 16] & 1) as u64);
                assert_eq!((b1[j >> 6] >> (j & 63)) & 1, (h1[j * 16] & 1) as u64);
            }
            if m % 64 != 0 {
                assert_eq!(b0[m >> 6] >> (m & 63), 0, "pad bits are zero");
            }
        }
    }

    #[test]
    fn domain_and_index_checks() {
        assert!(check_domain(0x100).is_ok());
        assert!(check_domain(0x101).is_err());
        assert!(check_indices(u64::MAX - 5, 5).is_ok());
        assert!(check_indices(u64::MAX - 5, 6).is_err());
    }
}
