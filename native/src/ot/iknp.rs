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
use super::{cot, tccr};

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

/// Per-extension working memory, kept between calls: the chunk's columns (128 KiB), one pad
/// column and the transposed rows of a fused call. Allocating them per call costs page faults
/// (glibc hands out blocks this large with mmap, fresh each time); the fused calls exist
/// precisely so that rows never leave the cache, so their buffer must not be a new one either.
#[derive(Default)]
struct Scratch {
    cols: Vec<u8>,
    pad: Vec<u8>,
    rows: Vec<u8>,
}

impl Scratch {
    fn ready(&mut self) {
        if self.cols.is_empty() {
            self.cols = vec![0u8; CHUNK / 8 * KAPPA];
            self.pad = vec![0u8; CHUNK / 8];
            self.rows = vec![0u8; CHUNK * BLOCK];
        }
    }
}

/// What a chunk's rows become. Either they are transposed straight into the caller's row array
/// (the plain `extend`), or into the scratch rows and handed to a consumer while they are still
/// in L2: `rows` are the chunk's live rows, `first` their position in this call (a multiple of
/// [`CHUNK`], so of 64, which keeps packed-bit outputs word-aligned).
enum Sink<'a, F: FnMut(usize, &[u8])> {
    Rows(&'a mut [u8]),
    Fused(F),
}

type NoFuse = fn(usize, &[u8]);

impl<F: FnMut(usize, &[u8])> Sink<'_, F> {
    fn chunk(&mut self, cols: &[u8], first: usize, live: usize, scratch_rows: &mut [u8]) {
        match self {
            Sink::Rows(t) => transpose_chunk(cols, live, &mut t[first * BLOCK..(first + live) * BLOCK]),
            Sink::Fused(f) => {
                let rows = &mut scratch_rows[..live * BLOCK];
                transpose_chunk(cols, live, rows);
                f(first, rows);
            }
        }
    }
}

/// The extension receiver (holds both base keys of every column).
pub struct IknpReceiver {
    g0: Vec<Cipher>,
    g1: Vec<Cipher>,
    /// PRG blocks used per column so far (= index / 128).
    blocks: u128,
    scratch: Scratch,
}

impl IknpReceiver {
    /// `k0`, `k1`: the base-OT sender's keys, 128 × 16 bytes each.
    pub fn new(k0: &[u8], k1: &[u8]) -> Result<Self, String> {
        Ok(IknpReceiver { g0: ciphers(k0, "k0")?, g1: ciphers(k1, "k1")?, blocks: 0, scratch: Scratch::default() })
    }

    /// OTs extended so far (rounded counts).
    pub fn index(&self) -> u64 {
        (self.blocks * KAPPA as u128) as u64
    }

    /// Extends by `count` OTs with choice bits `choices` (packed, at least `ceil(count / 8)`
    /// bytes; bits past `count` ignored): writes u (`message_len(count)` bytes) and t
    /// (`count` × 16 bytes).
    pub fn extend(&mut self, choices: &[u8], count: usize, u: &mut [u8], t: &mut [u8]) -> Result<(), String> {
        assert!(t.len() == count * BLOCK);
        self.run(choices, count, u, Sink::<NoFuse>::Rows(t))
    }

    /// [`extend`](Self::extend) then [`tccr::hash`] of t with OT indices from `start`, without
    /// materialising t: `out` (`count` × 16 bytes) gets H(t_j, τ(start + j, 0)).
    pub fn extend_hash(&mut self, choices: &[u8], count: usize, domain: u64, start: u64, u: &mut [u8], out: &mut [u8])
                       -> Result<(), String> {
        assert!(out.len() == count * BLOCK);
        self.run(choices, count, u, Sink::Fused(|first: usize, rows: &[u8]| {
            tccr::hash(rows, domain, start + first as u64, &mut out[first * BLOCK..first * BLOCK + rows.len()]);
        }))
    }

    /// [`extend`](Self::extend) then [`tccr::bits`] (`out`: `bit_words(count)` words).
    pub fn extend_bits(&mut self, choices: &[u8], count: usize, domain: u64, start: u64, u: &mut [u8], out: &mut [u64])
                       -> Result<(), String> {
        assert!(out.len() == tccr::bit_words(count));
        self.run(choices, count, u, Sink::Fused(|first: usize, rows: &[u8]| {
            let n = rows.len() / BLOCK;
            tccr::bits(rows, domain, start + first as u64, &mut out[first / 64..(first + n).div_ceil(64)]);
        }))
    }

    fn run<F: FnMut(usize, &[u8])>(&mut self, choices: &[u8], count: usize, u: &mut [u8], mut sink: Sink<F>)
                                   -> Result<(), String> {
        check_count(count)?;
        let have = count.div_ceil(8);
        if choices.len() < have {
            return Err(format!("{count} OTs need {have} bytes of packed choice bits, got {}", choices.len()));
        }
        assert!(u.len() == message_len(count));
        let m = rounded(count);
        let col_len = m / 8;
        self.scratch.ready();
        let Scratch { cols, pad, rows: scratch_rows } = &mut self.scratch;
        // this chunk's choice bits r, zero-padded past `count` (bits of the last byte included)
        let mut r = [0u8; CHUNK / 8];
        let mut start = 0;
        while start < m {
            let rows = CHUNK.min(m - start);
            let (bytes, off) = (rows / 8, start / 8);
            let counter = self.blocks + (start / KAPPA) as u128;
            let cols = &mut cols[..bytes * KAPPA];
            let r = &mut r[..bytes];
            let given = have.saturating_sub(off).min(bytes);
            r[..given].copy_from_slice(&choices[off..off + given]);
            r[given..].fill(0);
            if !count.is_multiple_of(8) && (off..off + bytes).contains(&(count / 8)) {
                r[count / 8 - off] &= (1u8 << (count % 8)) - 1;
            }
            for i in 0..KAPPA {
                let t_col = &mut cols[i * bytes..(i + 1) * bytes];
                self.g0[i].ctr(counter, t_col);
                let pad = &mut pad[..bytes];
                self.g1[i].ctr(counter, pad);
                let u_col = &mut u[i * col_len + off..i * col_len + off + bytes];
                for (((o, a), b), c) in u_col.chunks_exact_mut(BLOCK).zip(t_col.chunks_exact(BLOCK))
                    .zip(pad.chunks_exact(BLOCK)).zip(r.chunks_exact(BLOCK)) {
                    store(o, load(a) ^ load(b) ^ load(c));
                }
            }
            let live = rows.min(count.saturating_sub(start));
            sink.chunk(cols, start, live, scratch_rows);
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
    scratch: Scratch,
}

impl IknpSender {
    /// `keys`: the base-OT receiver's keys (128 × 16 bytes); `delta`: its 128 choice bits.
    pub fn new(keys: &[u8], delta: &[u8]) -> Result<Self, String> {
        let delta: [u8; BLOCK] = delta.try_into().map_err(|_| format!("delta must be {BLOCK} bytes, got {}", delta.len()))?;
        Ok(IknpSender { g: ciphers(keys, "the base keys")?, delta, blocks: 0, scratch: Scratch::default() })
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
        assert_eq!(q.len(), count * BLOCK);
        self.run(u, count, Sink::<NoFuse>::Rows(q))
    }

    /// [`extend`](Self::extend) then [`tccr::hash_pair`] with OT indices from `start`, without
    /// materialising q: `out0`, `out1` (`count` × 16 bytes each) get H(q_j, τ), H(q_j ⊕ Δ, τ).
    pub fn extend_hash(&mut self, u: &[u8], count: usize, domain: u64, start: u64, out0: &mut [u8], out1: &mut [u8])
                       -> Result<(), String> {
        assert!(out0.len() == count * BLOCK && out1.len() == count * BLOCK);
        let delta = load(&self.delta);
        self.run(u, count, Sink::Fused(|first: usize, rows: &[u8]| {
            let span = first * BLOCK..first * BLOCK + rows.len();
            tccr::hash_pair(rows, delta, domain, start + first as u64, &mut out0[span.clone()], &mut out1[span]);
        }))
    }

    /// [`extend`](Self::extend) then [`tccr::bits_pair`] (`out0`, `out1`: `bit_words(count)`).
    pub fn extend_bits(&mut self, u: &[u8], count: usize, domain: u64, start: u64, out0: &mut [u64], out1: &mut [u64])
                       -> Result<(), String> {
        assert!(out0.len() == tccr::bit_words(count) && out1.len() == tccr::bit_words(count));
        let delta = load(&self.delta);
        self.run(u, count, Sink::Fused(|first: usize, rows: &[u8]| {
            let words = first / 64..(first + rows.len() / BLOCK).div_ceil(64);
            tccr::bits_pair(rows, delta, domain, start + first as u64, &mut out0[words.clone()], &mut out1[words]);
        }))
    }

    /// [`extend`](Self::extend) then [`cot::send`] on the rows (`count` = entries × `bits`),
    /// OT indices from `start`. Inputs validated as for `cot::send`.
    #[allow(clippy::too_many_arguments)]
    pub fn extend_cot(&mut self, u: &[u8], count: usize, domain: u64, start: u64, offsets: &[u64], m: &[cot::Modulus],
                      bits: usize, corrections: &mut [u64], share: &mut [u64]) -> Result<(), String> {
        if count % bits != 0 || offsets.len() != count / bits * m.len() || corrections.len() != count * m.len()
            || share.len() != offsets.len() {
            return Err(format!("{count} OTs are not {} entries of {bits} bits with {} columns", offsets.len() / m.len().max(1), m.len()));
        }
        let delta = load(&self.delta);
        let mut cot = cot::Sender::new(delta, domain, start, offsets, m, bits, corrections, share);
        self.run(u, count, Sink::Fused(|first: usize, rows: &[u8]| cot.rows(first, rows)))?;
        cot.finish();
        Ok(())
    }

    fn run<F: FnMut(usize, &[u8])>(&mut self, u: &[u8], count: usize, mut sink: Sink<F>) -> Result<(), String> {
        check_count(count)?;
        if u.len() != message_len(count) {
            return Err(format!("the IKNP message for {count} OTs must be {} bytes, got {}", message_len(count), u.len()));
        }
        let m = rounded(count);
        let col_len = m / 8;
        self.scratch.ready();
        let Scratch { cols, rows: scratch_rows, .. } = &mut self.scratch;
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
            sink.chunk(cols, start, live, scratch_rows);
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

    /// Two identical pairs: one runs extend then the separate kernel, the other the fused call;
    /// outputs and indices must be bit-identical, over calls that leave the index non-zero and
    /// counts that end inside a byte, a word, a tile, a hash batch and a chunk.
    #[test]
    fn fused_calls_equal_extend_then_kernel() {
        let ((mut r1, mut s1), (mut r2, mut s2)) = (pair(), pair());
        let delta = load(&s1.delta());
        let domain = 0x3300;
        let m = cot::moduli(&[(1 << 61) - 1, 0]).unwrap();
        let mut seed = 40;
        for (count, bits) in [(1usize, 1usize), (130, 13), (CHUNK + 61 * 3, 61), (2 * CHUNK + 64 * 7, 64), (4097, 17), (0, 5)] {
            seed += 1;
            let choices = bytes(count.div_ceil(8) + 1, seed);
            let w = tccr::bit_words(count);
            let (mut u1, mut u2) = (vec![0u8; message_len(count)], vec![0u8; message_len(count)]);
            let (mut t, mut q) = (vec![0u8; count * 16], vec![0u8; count * 16]);
            // hashes
            let start = r1.index();
            assert_eq!((start, s1.index()), (r2.index(), s2.index()));
            r1.extend(&choices, count, &mut u1, &mut t).unwrap();
            s1.extend(&u1, count, &mut q).unwrap();
            let (mut h, mut h0, mut h1) = (vec![0u8; count * 16], vec![0u8; count * 16], vec![0u8; count * 16]);
            tccr::hash(&t, domain, start, &mut h);
            tccr::hash_pair(&q, delta, domain, start, &mut h0, &mut h1);
            let (mut f, mut f0, mut f1) = (vec![1u8; count * 16], vec![2u8; count * 16], vec![3u8; count * 16]);
            r2.extend_hash(&choices, count, domain, start, &mut u2, &mut f).unwrap();
            s2.extend_hash(&u2, count, domain, start, &mut f0, &mut f1).unwrap();
            assert!(u1 == u2 && h == f && h0 == f0 && h1 == f1, "hashes of {count}");
            // bits
            let start = r1.index();
            r1.extend(&choices, count, &mut u1, &mut t).unwrap();
            s1.extend(&u1, count, &mut q).unwrap();
            let (mut b, mut b0, mut b1) = (vec![0u64; w], vec![0u64; w], vec![0u64; w]);
            tccr::bits(&t, domain, start, &mut b);
            tccr::bits_pair(&q, delta, domain, start, &mut b0, &mut b1);
            let (mut g, mut g0, mut g1) = (vec![!0u64; w], vec![!0u64; w], vec![!0u64; w]);
            r2.extend_bits(&choices, count, domain, start, &mut u2, &mut g).unwrap();
            s2.extend_bits(&u2, count, domain, start, &mut g0, &mut g1).unwrap();
            assert!(u1 == u2 && b == g && b0 == g0 && b1 == g1, "bits of {count}");
            // correlated OT (count rounded down to whole entries)
            let entries = count / bits;
            let rows = entries * bits;
            let offsets: Vec<u64> = bytes(entries * 2 * 8, seed + 100).chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()) % ((1 << 61) - 1)).collect();
            let start = r1.index();
            let (mut u1, mut u2) = (vec![0u8; message_len(rows)], vec![0u8; message_len(rows)]);
            let (mut t, mut q) = (vec![0u8; rows * 16], vec![0u8; rows * 16]);
            r1.extend(&choices, rows, &mut u1, &mut t).unwrap();
            r2.extend(&choices, rows, &mut u2, &mut t).unwrap();
            s1.extend(&u1, rows, &mut q).unwrap();
            let (mut c1, mut sh1) = (vec![0u64; rows * 2], vec![0u64; entries * 2]);
            cot::send(&q, delta, domain, start, &offsets, &m, bits, &mut c1, &mut sh1);
            let (mut c2, mut sh2) = (vec![5u64; rows * 2], vec![5u64; entries * 2]);
            s2.extend_cot(&u2, rows, domain, start, &offsets, &m, bits, &mut c2, &mut sh2).unwrap();
            assert!(c1 == c2 && sh1 == sh2, "cot of {rows} rows, {bits} bits");
        }
        assert_eq!((r1.index(), s1.index()), (r2.index(), s2.index()));
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
