//! IKNP OT extension (semi-honest): 128 base OTs in the opposite direction become any number of
//! correlated OTs q_j = t_j ⊕ b_j·Δ.
//!
//! Roles: the extension receiver was the base-OT sender and holds (k0_i, k1_i); the extension
//! sender was the base-OT receiver with choice bits Δ and holds k_{Δ_i}. Each key seeds a PRG G,
//! AES-128 in counter mode under that key (block n of the stream is AES_k(n), n a little-endian
//! 128-bit counter), and the stream continues across calls: both sides keep a counter.
//!
//! One `extend(count)` covers M = `count` rounded up to a multiple of 128 rows; the receiver's
//! choice bits r are zero-padded to M. Column i (M bits) of the receiver: t^i = G(k0_i),
//! u^i = t^i ⊕ G(k1_i) ⊕ r; of the sender: q^i = G(k_{Δ_i}) ⊕ Δ_i·u^i = t^i ⊕ Δ_i·r. Row j of the
//! 128 × M matrices, bit i = column i's bit j, is t_j and q_j = t_j ⊕ r_j·Δ. The message u is the
//! columns one after another, u^0 || u^1 || ... || u^127, M/8 bytes each (16·M bytes).
//!
//! Rows are computed in chunks of [`CHUNK`] rows: per chunk the 128 column streams (a few KB
//! each, encrypted in batches) and then 128 × 128 tile transposes into the output rows.

use super::block::{load, store, xor_into, Cipher, BLOCK};
use super::transpose::{self, TILE};

/// Base OTs (and bits per row).
pub const KAPPA: usize = 128;
/// Rows per chunk: 64 PRG blocks per column per AES call (a multiple of the 8-block AES-NI batch,
/// so no block is encrypted alone), 128 KiB of columns.
pub const CHUNK: usize = 64 * 128;
/// Most rows one call may extend (a bound on allocations: 2^32 rows = 64 GiB of u).
pub const MAX_COUNT: usize = 1 << 32;

/// `count` rounded up to the 128-row granularity of the extension.
pub fn rounded(count: usize) -> usize {
    count.div_ceil(KAPPA) * KAPPA
}

/// Bytes of the message u for `count` OTs.
pub fn message_len(count: usize) -> usize {
    rounded(count) / 8 * KAPPA
}

fn ciphers(keys: &[u8], what: &str) -> Result<Vec<Cipher>, String> {
    if keys.len() != KAPPA * BLOCK {
        return Err(format!("{what} must be {} bytes ({KAPPA} keys of {BLOCK}), got {}", KAPPA * BLOCK, keys.len()));
    }
    Ok(keys.chunks_exact(BLOCK).map(|k| Cipher::new(k.try_into().unwrap())).collect())
}

fn check_count(count: usize) -> Result<(), String> {
    if count > MAX_COUNT {
        return Err(format!("at most {MAX_COUNT} OTs per extend() call, got {count}"));
    }
    Ok(())
}

/// Transposes chunk columns (128 columns of `cols.len() / 128` bytes) into rows `0..rows` of `out`
/// (16 bytes each); `rows` may stop inside the last tile.
fn transpose_chunk(cols: &[u8], rows: usize, out: &mut [u8]) {
    let stride = cols.len() / KAPPA;
    let mut tmp = [0u8; TILE];
    for tile in 0..rows.div_ceil(KAPPA) {
        let input = &cols[tile * BLOCK..];
        let first = tile * KAPPA;
        if rows - first >= KAPPA {
            transpose::tile(input, stride, &mut out[first * BLOCK..(first + KAPPA) * BLOCK]);
        } else {
            transpose::tile(input, stride, &mut tmp);
            out[first * BLOCK..rows * BLOCK].copy_from_slice(&tmp[..(rows - first) * BLOCK]);
        }
    }
}

/// The extension receiver (holds both base keys of every column).
pub struct IknpReceiver {
    g0: Vec<Cipher>,
    g1: Vec<Cipher>,
    /// PRG blocks used per column so far (= index / 128).
    blocks: u128,
}

impl IknpReceiver {
    /// `k0`, `k1`: the base-OT sender's keys, 128 × 16 bytes each.
    pub fn new(k0: &[u8], k1: &[u8]) -> Result<Self, String> {
        Ok(IknpReceiver { g0: ciphers(k0, "k0")?, g1: ciphers(k1, "k1")?, blocks: 0 })
    }

    /// OTs extended so far (rounded counts).
    pub fn index(&self) -> u64 {
        (self.blocks * KAPPA as u128) as u64
    }

    /// Extends by `count` OTs with choice bits `choices` (packed, at least `ceil(count / 8)`
    /// bytes; bits past `count` ignored): writes u (`message_len(count)` bytes) and t
    /// (`count` × 16 bytes).
    pub fn extend(&mut self, choices: &[u8], count: usize, u: &mut [u8], t: &mut [u8]) -> Result<(), String> {
        check_count(count)?;
        if choices.len() < count.div_ceil(8) {
            return Err(format!("{count} OTs need {} bytes of packed choice bits, got {}", count.div_ceil(8), choices.len()));
        }
        assert!(u.len() == message_len(count) && t.len() == count * BLOCK);
        let m = rounded(count);
        let col_len = m / 8;
        // r, zero-padded to M bits
        let mut r = vec![0u8; col_len];
        r[..count.div_ceil(8)].copy_from_slice(&choices[..count.div_ceil(8)]);
        if !count.is_multiple_of(8) {
            r[count / 8] &= (1u8 << (count % 8)) - 1;
        }
        let mut cols = vec![0u8; CHUNK / 8 * KAPPA];
        let mut pad = vec![0u8; CHUNK / 8];
        let mut start = 0;
        while start < m {
            let rows = CHUNK.min(m - start);
            let (bytes, off) = (rows / 8, start / 8);
            let counter = self.blocks + (start / KAPPA) as u128;
            let cols = &mut cols[..bytes * KAPPA];
            for i in 0..KAPPA {
                let t_col = &mut cols[i * bytes..(i + 1) * bytes];
                self.g0[i].ctr(counter, t_col);
                let pad = &mut pad[..bytes];
                self.g1[i].ctr(counter, pad);
                let u_col = &mut u[i * col_len + off..i * col_len + off + bytes];
                let r = &r[off..off + bytes];
                for (((o, a), b), c) in u_col.chunks_exact_mut(BLOCK).zip(t_col.chunks_exact(BLOCK))
                    .zip(pad.chunks_exact(BLOCK)).zip(r.chunks_exact(BLOCK)) {
                    store(o, load(a) ^ load(b) ^ load(c));
                }
            }
            let live = rows.min(count.saturating_sub(start));
            transpose_chunk(cols, live, &mut t[start * BLOCK..(start + live) * BLOCK]);
            start += rows;
        }
        self.blocks += (m / KAPPA) as u128;
        Ok(())
    }
}

/// The extension sender (holds k_{Δ_i} and Δ).
pub struct IknpSender {
    g: Vec<Cipher>,
    delta: [u8; BLOCK],
    blocks: u128,
}

impl IknpSender {
    /// `keys`: the base-OT receiver's keys (128 × 16 bytes); `delta`: its 128 choice bits.
    pub fn new(keys: &[u8], delta: &[u8]) -> Result<Self, String> {
        let delta: [u8; BLOCK] = delta.try_into().map_err(|_| format!("delta must be {BLOCK} bytes, got {}", delta.len()))?;
        Ok(IknpSender { g: ciphers(keys, "the base keys")?, delta, blocks: 0 })
    }

    pub fn index(&self) -> u64 {
        (self.blocks * KAPPA as u128) as u64
    }

    pub fn delta(&self) -> [u8; BLOCK] {
        self.delta
    }

    /// Extends by `count` OTs from the receiver's message `u` (exactly `message_len(count)`
    /// bytes): writes q (`count` × 16 bytes).
    pub fn extend(&mut self, u: &[u8], count: usize, q: &mut [u8]) -> Result<(), String> {
        check_count(count)?;
        if u.len() != message_len(count) {
            return Err(format!("the IKNP message for {count} OTs must be {} bytes, got {}", message_len(count), u.len()));
        }
        assert_eq!(q.len(), count * BLOCK);
        let m = rounded(count);
        let col_len = m / 8;
        let mut cols = vec![0u8; CHUNK / 8 * KAPPA];
        let mut start = 0;
        while start < m {
            let rows = CHUNK.min(m - start);
            let (bytes, off) = (rows / 8, start / 8);
            let counter = self.blocks + (start / KAPPA) as u128;
            let cols = &mut cols[..bytes * KAPPA];
            for i in 0..KAPPA {
                let q_col = &mut cols[i * bytes..(i + 1) * bytes];
                self.g[i].ctr(counter, q_col);
                if (self.delta[i >> 3] >> (i & 7)) & 1 == 1 {
                    xor_into(q_col, &u[i * col_len + off..i * col_len + off + bytes]);
                }
            }
            let live = rows.min(count.saturating_sub(start));
            transpose_chunk(cols, live, &mut q[start * BLOCK..(start + live) * BLOCK]);
            start += rows;
        }
        self.blocks += (m / KAPPA) as u128;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
        (0..n).map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        }).collect()
    }

    /// Base keys as the base OT would leave them: receiver (k0, k1), sender (k_{Δ_i}, Δ).
    fn pair() -> (IknpReceiver, IknpSender) {
        let (k0, k1, delta) = (bytes(2048, 1), bytes(2048, 2), bytes(16, 3));
        let chosen: Vec<u8> = (0..KAPPA).flat_map(|i| {
            let src = if (delta[i >> 3] >> (i & 7)) & 1 == 1 { &k1 } else { &k0 };
            src[i * 16..(i + 1) * 16].to_vec()
        }).collect();
        (IknpReceiver::new(&k0, &k1).unwrap(), IknpSender::new(&chosen, &delta).unwrap())
    }

    #[test]
    fn q_is_t_xor_choice_times_delta_over_many_calls() {
        let (mut recv, mut send) = pair();
        let delta = send.delta();
        let mut seed = 10;
        let mut all_t = Vec::new();
        for count in [1usize, 127, 128, 1000, 4097, CHUNK + 129, 0, 3] {
            seed += 1;
            let choices = bytes(count.div_ceil(8) + 2, seed); // longer than needed: extra ignored
            let mut u = vec![0u8; message_len(count)];
            let mut t = vec![0u8; count * 16];
            let mut q = vec![0u8; count * 16];
            let before = recv.index();
            recv.extend(&choices, count, &mut u, &mut t).unwrap();
            send.extend(&u, count, &mut q).unwrap();
            assert_eq!(recv.index(), before + rounded(count) as u64);
            assert_eq!(recv.index(), send.index());
            for j in 0..count {
                let b = (choices[j >> 3] >> (j & 7)) & 1;
                for k in 0..16 {
                    assert_eq!(q[j * 16 + k], t[j * 16 + k] ^ ((b * 0xff) & delta[k]), "row {j} of {count}");
                }
            }
            all_t.extend_from_slice(&t);
        }
        // the stream continues: no two rows repeat across calls
        let mut rows: Vec<&[u8]> = all_t.chunks_exact(16).collect();
        let n = rows.len();
        rows.sort();
        rows.dedup();
        assert_eq!(rows.len(), n);
    }

    #[test]
    fn rows_are_the_transposed_prg_columns() {
        let (k0, k1) = (bytes(2048, 5), bytes(2048, 6));
        let mut recv = IknpReceiver::new(&k0, &k1).unwrap();
        let count = 300;
        let mut u = vec![0u8; message_len(count)];
        let mut t = vec![0u8; count * 16];
        recv.extend(&[0u8; 38], count, &mut u, &mut t).unwrap();
        for i in [0usize, 77, 127] {
            let mut col = vec![0u8; rounded(count) / 8];
            Cipher::new(k0[i * 16..(i + 1) * 16].try_into().unwrap()).ctr(0, &mut col);
            for j in 0..count {
                assert_eq!((t[j * 16 + i / 8] >> (i % 8)) & 1, (col[j / 8] >> (j % 8)) & 1);
            }
        }
    }

    #[test]
    fn bad_inputs_are_rejected() {
        assert!(IknpReceiver::new(&[0u8; 2047], &[0u8; 2048]).is_err());
        assert!(IknpSender::new(&[0u8; 2048], &[0u8; 15]).is_err());
        let (mut recv, mut send) = pair();
        let mut t = vec![0u8; 200 * 16];
        assert!(recv.extend(&[0u8; 24], 200, &mut vec![0u8; message_len(200)], &mut t).is_err());
        let err = send.extend(&vec![0u8; message_len(200) - 1], 200, &mut t).unwrap_err();
        assert!(err.contains("must be"), "{err}");
        assert_eq!(send.index(), 0);
    }
}
