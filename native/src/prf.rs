//! Keystreams behind the zero sharings of three-party replicated sharing: AES-128 in counter
//! mode ([`Cipher::ctr_be`], the VAES code of `aes.rs`). Byte-for-byte the same stream as
//! AES-128-CTR with a zero IV and a 128-bit big-endian counter (the `cryptography` library's
//! `modes.CTR(b"\0" * 16)`), so parties with and without VAES agree.
//!
//! The keystream is offered where the CPU runs the VAES code ([`available`]); elsewhere
//! [`KeyStream::new`] returns `None`, so callers fall back to another implementation of the same
//! stream.

use crate::aes::Cipher;

/// True when this CPU runs the VAES keystream (AES-NI, VAES and AVX2).
pub fn available() -> bool {
    crate::aes::vaes_available()
}

/// Keystream blocks `first, first + 1, ...` into `out` (an even number of words), block bytes in
/// memory order: little-endian words on x86-64, the only place the stream runs.
#[inline]
fn blocks(aes: &Cipher, first: u64, out: &mut [u64]) {
    // SAFETY: the bytes of `out` viewed as `u8` (alignment 1, and every byte pattern is a valid
    // u64), only while `out` is borrowed mutably here.
    let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), out.len() * 8) };
    aes.ctr_be(u128::from(first), bytes);
}

/// Words of keystream generated per refill (16 KiB: stays in L1/L2 while consumed).
const CHUNK: usize = 2048;

/// A keystream read word by word in any amounts: consecutive calls continue the stream.
pub struct KeyStream {
    aes: Cipher,
    next_block: u64,
    buf: Vec<u64>,
    pos: usize,
}

impl KeyStream {
    /// `None` where the CPU lacks the VAES code ([`available`]).
    pub fn new(key: &[u8; 16]) -> Option<Self> {
        available().then(|| KeyStream { aes: Cipher::new(key), next_block: 0, buf: vec![0u64; CHUNK], pos: CHUNK })
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
                    blocks(&self.aes, self.next_block, &mut dst[done..done + whole]);
                    self.next_block += (whole / 2) as u64;
                    done += whole;
                    continue;
                }
                blocks(&self.aes, self.next_block, &mut self.buf);
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

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 16] = [7; 16];

    #[test]
    fn constructed_only_where_available() {
        assert_eq!(KeyStream::new(&KEY).is_some(), available());
        #[cfg(not(target_arch = "x86_64"))]
        assert!(!available());
    }

    /// Reads of any sizes continue one stream: the same words as one counter-mode call.
    #[test]
    fn stream_continues_across_reads() {
        if !available() {
            eprintln!("note: this CPU lacks VAES/AVX2; the keystream test does nothing here");
            return;
        }
        let sizes = [1usize, 3, 2047, 2, CHUNK, 5, 2 * CHUNK + 5, 0, 7, CHUNK - 1, 3 * CHUNK];
        let total: usize = sizes.iter().sum();
        let mut want = vec![0u64; total + total % 2];
        let mut stream = vec![0u8; 8 * want.len()];
        Cipher::new(&KEY).ctr_be(0, &mut stream);
        for (w, b) in want.iter_mut().zip(stream.chunks_exact(8)) {
            *w = u64::from_le_bytes(b.try_into().unwrap());
        }
        let mut ks = KeyStream::new(&KEY).unwrap();
        let mut got = Vec::new();
        for &n in &sizes {
            let mut part = vec![0u64; n];
            ks.fill(&mut part);
            got.extend_from_slice(&part);
        }
        assert_eq!(got[..], want[..total]);
    }
}
