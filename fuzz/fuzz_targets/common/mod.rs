//! A cursor over the fuzzer's bytes: every read succeeds (zeros once the input is exhausted),
//! so one input always decodes to one call and the fuzzer's mutations map to small changes.
#![allow(dead_code)]

pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.array())
    }

    /// A value in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.u16() as usize % n
    }

    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        for b in a.iter_mut() {
            *b = self.u8();
        }
        a
    }

    /// Up to `n` bytes (fewer when the input runs out).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    /// Up to `below(max)` bytes.
    pub fn bytes_below(&mut self, max: usize) -> &'a [u8] {
        let n = self.below(max);
        self.bytes(n)
    }

    /// Exactly `n` bytes: the input's, then a fixed filler.
    pub fn bytes_exact(&mut self, n: usize) -> Vec<u8> {
        let mut v = self.bytes(n).to_vec();
        let have = v.len();
        v.extend((have..n).map(|i| (i as u8).wrapping_mul(151).wrapping_add(7)));
        v
    }

    pub fn words(&mut self, n: usize) -> Vec<u64> {
        (0..n).map(|_| self.u64()).collect()
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.data;
        self.data = &[];
        r
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Deterministic bytes (not random: the fuzz targets only need fixed, distinct material).
pub fn filler(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i as u32).wrapping_mul(2654435761) >> 13) as u8 ^ seed.rotate_left((i % 8) as u32)).collect()
}
