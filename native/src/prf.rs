//! Keystreams behind the zero sharings of three-party replicated sharing: AES-128 in counter
//! mode with VAES (see `aes.rs`). Byte-for-byte the same stream as AES-128-CTR with a zero IV
//! and a 128-bit big-endian counter (the `cryptography` library's `modes.CTR(b"\0" * 16)`), so
//! parties with and without VAES agree.
//!
//! The AES code is x86-64 only; on other architectures [`available`] is false and
//! [`KeyStream::new`] returns `None`, so callers fall back to another implementation of the same
//! stream.

#[cfg(target_arch = "x86_64")]
pub use crate::aes::{available, Aes128};
#[cfg(not(target_arch = "x86_64"))]
pub use fallback::{available, Aes128};

/// Stand-in off x86-64: no AES here, so no value of [`Aes128`] can exist.
#[cfg(not(target_arch = "x86_64"))]
mod fallback {
    /// Always false: the VAES keystream is x86-64 only.
    pub fn available() -> bool {
        false
    }

    /// Uninhabited off x86-64 ([`Aes128::new`] always fails).
    pub struct Aes128 {
        never: std::convert::Infallible,
    }

    impl Aes128 {
        /// Always `None` off x86-64.
        pub fn new(_key: &[u8; 16]) -> Option<Self> {
            None
        }

        /// Unreachable: no `Aes128` exists off x86-64.
        pub fn ctr(&self, _counter: u64, _out: &mut [u64]) {
            match self.never {}
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
            eprintln!("note: this CPU lacks VAES/AVX-512; the keystream test does nothing here");
            return;
        }
        let sizes = [1usize, 3, 2047, 2, CHUNK, 5, 2 * CHUNK + 5, 0, 7, CHUNK - 1, 3 * CHUNK];
        let total: usize = sizes.iter().sum();
        let mut want = vec![0u64; total + total % 2];
        Aes128::new(&KEY).unwrap().ctr(0, &mut want);
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
