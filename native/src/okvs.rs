//! OT-based PSI: RR22's VOLE-PSI structure (Raghuraman–Rindal, CCS 2022) with a clustered
//! 3-hash OKVS, over SoftSpoken's *subspace* VOLE with a binary BCH code (Roy, CRYPTO 2022 §3.2)
//! instead of a field VOLE. Sans I/O: the protocol layer (`shaper.protocols.psi.okvs`) moves the
//! bytes; randomness (the OKVS seed, the SoftSpoken trees' seeds, Δ) comes from the caller.
//!
//! # The protocol (semi-honest)
//! Call R the party that learns (it encodes the OKVS) and S the other. Both hash each item to a
//! 16-byte digest (SHA-256 with a domain), and from the digest and R's public seed r to a
//! [`Row`]: a cluster, 3 distinct *sparse* positions in the cluster, a mask of [`Params::dense`]
//! *dense* positions, and a 64-bit value H(x).
//! 1. R encodes P (one u64 per position, [`Params::size`] positions) with Decode(P, x) = H(x)
//!    for its items, Decode(P, x) = ⊕ of P over the row's positions ([`encode`]).
//! 2. For every position j, R's SoftSpoken choice bits are the codeword C(P_j) of a binary
//!    [192, 64, ≥ 37] code ([`code`]): one bit per SoftSpoken group of k = 4 columns, 192 groups
//!    over [`LANES`] = 6 extensions of 128 columns. R sends the extension's message (192 bits
//!    per position) and gets rows T_j; S gets Q_j = T_j ⊕ (C(P_j) ∗ Δ), where c ∗ Δ keeps
//!    group g's 4 bits of the 768-bit Δ when bit g of c is set (`iknp::extend_groups`).
//! 3. Both decode: R at its x, Decode(T, x); S at its y, Decode(Q, y) ⊕ (C(H(y)) ∗ Δ), which by
//!    linearity (of the OKVS and of C) equals Decode(T, y) ⊕ (C(Decode(P, y) ⊕ H(y)) ∗ Δ).
//!    For y in R's set the code word is 0 and S's value is R's; otherwise it is a nonzero
//!    codeword (except with probability 2^-64 per y), of weight ≥ 37, so the value hides
//!    4 · 37 = 148 bits of Δ from R. Each party hashes its 96-byte values to masks
//!    ([`mask`]: SHA-256 of the value and a run tag, truncated), S sends its masks shuffled, R
//!    matches.
//!
//! # The OKVS
//! A cluster of [`Params::width`] = sparse + dense positions per cluster; items go to clusters by
//! their row hash and R's clusters hold at most [`Params::capacity`] items (the caller sizes it by
//! the binomial tail). [`encode`] peels the 3-uniform hypergraph of sparse positions (a position
//! of degree 1 fixes its row; XOR peeling, no adjacency lists), sets the positions no peeled row
//! fixes to 0, solves the rows left (the 2-core) over the dense positions by Gaussian elimination
//! over GF(2) and back-substitutes the peeled rows in reverse. It fails only when the core is
//! larger than the dense part can solve (the caller's parameters make that ≤ 2^-40).

use sha2::digest::generic_array::GenericArray;
use std::sync::OnceLock;

use crate::aes::{Cipher, BLOCK};
use crate::ot::iknp::{self, IknpReceiver, IknpSender};
use crate::ot::transpose;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

/// SoftSpoken extensions (of 128 columns, k = 4: 32 groups each) per OKVS position.
pub const LANES: usize = 6;
/// Bytes of one VOLE row (all lanes).
pub const ROW: usize = LANES * BLOCK;
/// SoftSpoken's group size.
pub const K: usize = 4;
/// Groups per lane.
pub const GROUPS: usize = 128 / K;
/// Code length: one bit per group.
pub const CODE_LEN: usize = LANES * GROUPS;
/// Sparse positions per row.
pub const WEIGHT: usize = 3;
/// Most dense positions (a row's dense part is one u64).
pub const MAX_DENSE: usize = 64;
/// Generator polynomial of the narrow-sense BCH code of length 255 with designed distance 37
/// (roots α^1..α^36, α a root of x^8 + x^4 + x^3 + x^2 + 1): degree 124, dimension 131. The
/// code used is its subcode {v(x) g(x) : deg v < 64}, length 188 (the last 4 of 192 groups
/// are always 0), minimum distance ≥ 37 by the BCH bound.
pub const GENERATOR: u128 = 0x11bcb6cce6906958aa17f2231050eb39;
/// Most rows per item set (a bound on allocations).
pub const MAX_ITEMS: usize = 1 << 32;

/// OKVS parameters (both parties use R's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub clusters: usize,
    pub capacity: usize,
    pub sparse: usize,
    pub dense: usize,
}

impl Params {
    pub fn new(clusters: usize, capacity: usize, sparse: usize, dense: usize) -> Result<Self, String> {
        if clusters == 0 || clusters > 1 << 24 {
            return Err(format!("the OKVS needs 1 to 2^24 clusters, got {clusters}"));
        }
        if capacity == 0 || capacity > MAX_ITEMS {
            return Err(format!("a cluster's capacity must be 1 to 2^32, got {capacity}"));
        }
        if sparse < WEIGHT || sparse > u32::MAX as usize {
            return Err(format!("a cluster needs {WEIGHT} to 2^32 sparse positions, got {sparse}"));
        }
        if dense == 0 || dense > MAX_DENSE {
            return Err(format!("a cluster needs 1 to {MAX_DENSE} dense positions, got {dense}"));
        }
        let p = Params { clusters, capacity, sparse, dense };
        if p.width().checked_mul(clusters).is_none_or(|m| m > iknp::MAX_COUNT) {
            return Err(format!("the OKVS of {clusters} clusters of {} positions is too large", p.width()));
        }
        Ok(p)
    }

    /// Positions per cluster.
    pub fn width(&self) -> usize {
        self.sparse + self.dense
    }

    /// Positions in all.
    pub fn size(&self) -> usize {
        self.clusters * self.width()
    }
}

/// An item's place in the OKVS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub cluster: u32,
    /// Distinct sparse positions within the cluster.
    pub pos: [u32; WEIGHT],
    /// Dense positions (bit i: position sparse + i), below 2^dense.
    pub dense: u64,
    /// H(x), the value the OKVS encodes for x.
    pub value: u64,
}

fn mulhi(x: u32, n: usize) -> u32 {
    ((x as u64 * n as u64) >> 32) as u32
}

/// 16 bytes of SHA-256(label || seed).
fn derive(label: &[u8], seed: &[u8; 16]) -> [u8; 16] {
    let d = Sha256::new().chain_update(label).chain_update(seed).finalize();
    d[..16].try_into().unwrap()
}

/// Maps digests to rows under R's seed: two AES-128 blocks per item (Davies–Meyer style,
/// AES_k(d ⊕ i) ⊕ d ⊕ i for i = 0, 1), k = SHA-256("shaper/psi/okvs/rows/v1" || seed).
pub struct Hasher {
    cipher: Cipher,
    p: Params,
}

impl Hasher {
    pub fn new(p: Params, seed: &[u8; 16]) -> Self {
        Hasher { cipher: Cipher::new(&derive(b"shaper/psi/okvs/rows/v1", seed)), p }
    }

    /// The rows of `digests` (16 bytes each).
    pub fn rows(&self, digests: &[u8]) -> Vec<Row> {
        assert!(digests.len().is_multiple_of(BLOCK));
        let mut out = vec![Row::default(); digests.len() / BLOCK];
        self.rows_into(digests, &mut out);
        out
    }

    /// The items sorted by cluster with their rows ([`Partition`]), in two passes so that only
    /// the sorted rows are ever held (32 bytes per item; 512 MiB at 2^24): the clusters, a
    /// counting sort, then the rows again in sorted order.
    pub fn partition(&self, digests: &[u8]) -> Partition {
        assert!(digests.len().is_multiple_of(BLOCK));
        let n = digests.len() / BLOCK;
        const STEP: usize = 4096;
        let mut buf = vec![Row::default(); STEP];
        let mut clusters = Vec::with_capacity(n);
        for chunk in digests.chunks(STEP * BLOCK) {
            let rows = &mut buf[..chunk.len() / BLOCK];
            self.rows_into(chunk, rows);
            clusters.extend(rows.iter().map(|r| r.cluster));
        }
        let mut starts = vec![0usize; self.p.clusters + 1];
        for &c in &clusters {
            starts[c as usize + 1] += 1;
        }
        for c in 0..self.p.clusters {
            starts[c + 1] += starts[c];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; n];
        for (i, &c) in clusters.iter().enumerate() {
            order[next[c as usize]] = i as u32;
            next[c as usize] += 1;
        }
        drop(clusters);
        let mut rows = vec![Row::default(); n];
        let mut gathered = vec![0u8; STEP * BLOCK];
        for (at, out) in order.chunks(STEP).zip(rows.chunks_mut(STEP)) {
            for (k, &i) in at.iter().enumerate() {
                gathered[k * BLOCK..(k + 1) * BLOCK].copy_from_slice(&digests[i as usize * BLOCK..(i as usize + 1) * BLOCK]);
            }
            self.rows_into(&gathered[..at.len() * BLOCK], out);
        }
        Partition { order, rows, starts }
    }

    /// The digests sorted by cluster: (order, the digests in that order, cluster starts), as
    /// [`Partition`] without the rows, which [`Self::rows`] then makes batch by batch: 16 bytes
    /// per item held instead of 32.
    pub fn sort_digests(&self, digests: &[u8]) -> (Vec<u32>, Vec<u8>, Vec<usize>) {
        assert!(digests.len().is_multiple_of(BLOCK));
        let n = digests.len() / BLOCK;
        const STEP: usize = 4096;
        let mut buf = vec![Row::default(); STEP];
        let mut starts = vec![0usize; self.p.clusters + 1];
        let mut clusters = Vec::with_capacity(n);
        for chunk in digests.chunks(STEP * BLOCK) {
            let rows = &mut buf[..chunk.len() / BLOCK];
            self.rows_into(chunk, rows);
            for r in rows.iter() {
                starts[r.cluster as usize + 1] += 1;
                clusters.push(r.cluster);
            }
        }
        for c in 0..self.p.clusters {
            starts[c + 1] += starts[c];
        }
        let mut next = starts.clone();
        let mut order = vec![0u32; n];
        let mut sorted = vec![0u8; digests.len()];
        for (i, (&c, d)) in clusters.iter().zip(digests.chunks_exact(BLOCK)).enumerate() {
            let at = next[c as usize];
            order[at] = i as u32;
            sorted[at * BLOCK..(at + 1) * BLOCK].copy_from_slice(d);
            next[c as usize] += 1;
        }
        (order, sorted, starts)
    }

    fn rows_into(&self, digests: &[u8], out: &mut [Row]) {
        const STEP: usize = 1024;
        let mut buf = vec![0u8; 2 * STEP * BLOCK];
        let (p, mask) = (self.p, if self.p.dense == 64 { u64::MAX } else { (1u64 << self.p.dense) - 1 });
        for (chunk, rows) in digests.chunks(STEP * BLOCK).zip(out.chunks_mut(STEP)) {
            let m = rows.len();
            let buf = &mut buf[..2 * m * BLOCK];
            for (i, d) in chunk.chunks_exact(BLOCK).enumerate() {
                buf[2 * i * BLOCK..(2 * i + 1) * BLOCK].copy_from_slice(d);
                buf[(2 * i + 1) * BLOCK..(2 * i + 2) * BLOCK].copy_from_slice(d);
                buf[(2 * i + 1) * BLOCK] ^= 1;
            }
            self.cipher.encrypt(buf);
            for (i, (d, row)) in chunk.chunks_exact(BLOCK).zip(rows.iter_mut()).enumerate() {
                let a = u128::from_le_bytes(buf[2 * i * BLOCK..(2 * i + 1) * BLOCK].try_into().unwrap())
                    ^ u128::from_le_bytes(d.try_into().unwrap());
                let b = u128::from_le_bytes(buf[(2 * i + 1) * BLOCK..(2 * i + 2) * BLOCK].try_into().unwrap())
                    ^ u128::from_le_bytes(d.try_into().unwrap())
                    ^ 1;
                let w = |s: u32| (a >> s) as u32;
                // three distinct positions, uniform: p1 skips p0, p2 skips both
                let s = p.sparse;
                let p0 = mulhi(w(32), s);
                let mut p1 = mulhi(w(64), s - 1);
                if p1 >= p0 {
                    p1 += 1;
                }
                let (lo, hi) = if p0 < p1 { (p0, p1) } else { (p1, p0) };
                let mut p2 = mulhi(w(96), s - 2);
                if p2 >= lo {
                    p2 += 1;
                }
                if p2 >= hi {
                    p2 += 1;
                }
                *row = Row { cluster: mulhi(w(0), p.clusters), pos: [p0, p1, p2], dense: b as u64 & mask,
                             value: (b >> 64) as u64 };
            }
        }
    }
}

/// Items sorted by cluster: `order[i]` is the item at sorted position i, `rows[i]` its row,
/// cluster c's items are sorted positions `starts[c]..starts[c + 1]` (a counting sort: items
/// keep their order within a cluster). Rows move with the sort, so every later pass reads
/// them in order instead of gathering 32-byte rows from all over memory.
pub struct Partition {
    pub order: Vec<u32>,
    pub rows: Vec<Row>,
    pub starts: Vec<usize>,
}

pub fn partition(rows: &[Row], clusters: usize) -> Partition {
    let mut starts = vec![0usize; clusters + 1];
    for r in rows {
        starts[r.cluster as usize + 1] += 1;
    }
    for c in 0..clusters {
        starts[c + 1] += starts[c];
    }
    let mut next = starts.clone();
    let mut order = vec![0u32; rows.len()];
    let mut sorted = vec![Row::default(); rows.len()];
    for (i, r) in rows.iter().enumerate() {
        let at = &mut next[r.cluster as usize];
        order[*at] = i as u32;
        sorted[*at] = *r;
        *at += 1;
    }
    Partition { order, rows: sorted, starts }
}

/// Working memory of [`encode`], reused across clusters.
#[derive(Default)]
pub struct Scratch {
    degree: Vec<u32>,
    xor: Vec<u32>,
    peeled: Vec<(u32, u32)>,
    live: Vec<bool>,
}

/// Encodes one cluster: `out` (width u64s) with Decode(out, r) = r.value for every row, or an
/// error when the rows' 2-core cannot be solved over the dense positions.
pub fn encode(p: &Params, rows: &[Row], out: &mut [u64], s: &mut Scratch) -> Result<(), String> {
    assert_eq!(out.len(), p.width());
    let n = rows.len();
    if n > p.capacity {
        return Err(format!("a cluster holds {n} items, more than its capacity {}", p.capacity));
    }
    s.degree.clear();
    s.degree.resize(p.sparse, 0);
    s.xor.clear();
    s.xor.resize(p.sparse, 0);
    s.live.clear();
    s.live.resize(n, true);
    s.peeled.clear();
    for (i, r) in rows.iter().enumerate() {
        for &c in &r.pos {
            s.degree[c as usize] += 1;
            s.xor[c as usize] ^= i as u32;
        }
    }
    // peel: a position of degree 1 is its one row's pivot
    let mut queue: Vec<u32> = (0..p.sparse as u32).filter(|&c| s.degree[c as usize] == 1).collect();
    while let Some(c) = queue.pop() {
        if s.degree[c as usize] != 1 {
            continue;
        }
        let i = s.xor[c as usize];
        s.peeled.push((i, c));
        s.live[i as usize] = false;
        for &d in &rows[i as usize].pos {
            s.degree[d as usize] -= 1;
            s.xor[d as usize] ^= i;
            if s.degree[d as usize] == 1 {
                queue.push(d);
            }
        }
    }
    out.fill(0);
    // the core: rows whose positions all have degree ≥ 2 after peeling. Their sparse positions
    // are no pivot (stay 0), so they constrain the dense values alone.
    let mut pivots: Vec<(u64, u64, u32)> = Vec::new(); // (mask, value, pivot bit), reduced in order
    for (i, r) in rows.iter().enumerate() {
        if !s.live[i] {
            continue;
        }
        let (mut mask, mut value) = (r.dense, r.value);
        for &(pm, pv, bit) in &pivots {
            if mask >> bit & 1 == 1 {
                mask ^= pm;
                value ^= pv;
            }
        }
        if mask == 0 {
            if value != 0 {
                return Err(format!("the OKVS cannot encode a cluster of {n} items (its 2-core has no solution over the \
                                    {} dense positions); the chance of this is below 2^-40 per run", p.dense));
            }
            continue; // a dependent, consistent row
        }
        pivots.push((mask, value, mask.trailing_zeros()));
    }
    // back-substitute the dense values (free ones 0): a later pivot row holds no earlier pivot
    let dense = &mut out[p.sparse..];
    for &(mask, value, bit) in pivots.iter().rev() {
        let mut v = value;
        let mut rest = mask & !(1u64 << bit);
        while rest != 0 {
            v ^= dense[rest.trailing_zeros() as usize];
            rest &= rest - 1;
        }
        dense[bit as usize] = v;
    }
    // peeled rows in reverse: their other positions are later pivots or 0
    for &(i, c) in s.peeled.iter().rev() {
        let r = &rows[i as usize];
        let mut v = r.value ^ dense_sum(r.dense, &out[p.sparse..]);
        for &d in &r.pos {
            if d != c {
                v ^= out[d as usize];
            }
        }
        out[c as usize] = v;
    }
    Ok(())
}

fn dense_sum(mut mask: u64, dense: &[u64]) -> u64 {
    let mut v = 0;
    while mask != 0 {
        v ^= dense[mask.trailing_zeros() as usize];
        mask &= mask - 1;
    }
    v
}

/// Decode(P, r) for one cluster's u64 values.
pub fn decode(p: &Params, cluster: &[u64], r: &Row) -> u64 {
    r.pos.iter().fold(dense_sum(r.dense, &cluster[p.sparse..]), |v, &d| v ^ cluster[d as usize])
}

/// The dense part of one cluster's VOLE rows as byte tables: entry (b, x) is the XOR of dense
/// rows 8b + i over the bits i of x, so a row's dense sum is one lookup per byte of its mask
/// (7 for 50 dense positions, instead of about 25 row XORs).
struct DenseTable {
    entries: Vec<[u128; LANES]>,
    bytes: usize,
}

impl DenseTable {
    fn new() -> Self {
        DenseTable { entries: Vec::new(), bytes: 0 }
    }

    fn fill(&mut self, dense: &[[u128; LANES]]) {
        self.bytes = dense.len().div_ceil(8);
        self.entries.resize(self.bytes * 256, [0u128; LANES]);
        for b in 0..self.bytes {
            let t = &mut self.entries[b * 256..(b + 1) * 256];
            t[0] = [0u128; LANES];
            for x in 1..256usize {
                let low = x.trailing_zeros() as usize;
                let i = 8 * b + low;
                let prev = t[x & (x - 1)];
                t[x] = if i < dense.len() {
                    let d = &dense[i];
                    std::array::from_fn(|l| prev[l] ^ d[l])
                } else {
                    prev
                };
            }
        }
    }

    #[inline(always)]
    fn add(&self, mask: u64, acc: &mut [u128; LANES]) {
        for b in 0..self.bytes {
            let e = &self.entries[b * 256 + ((mask >> (8 * b)) as usize & 0xff)];
            for l in 0..LANES {
                acc[l] ^= e[l];
            }
        }
    }
}

#[inline(always)]
fn prefetch(row: &[u128; LANES]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; the address is that of a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = row as *const _ as *const i8;
        _mm_prefetch::<_MM_HINT_T0>(p);
        _mm_prefetch::<_MM_HINT_T0>(p.add(64));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// The code: C(v) = v(x) · g(x) over GF(2) (bit i of v the coefficient of x^i), 192 bits as
/// three u64 (bit i of the codeword = coefficient of x^i), through 8 tables of 256 entries.
pub mod code {
    use super::*;

    fn tables() -> &'static [[[u64; 3]; 256]; 8] {
        static T: OnceLock<Box<[[[u64; 3]; 256]; 8]>> = OnceLock::new();
        T.get_or_init(|| {
            let mut t = Box::new([[[0u64; 3]; 256]; 8]);
            for b in 0..8 {
                for x in 1..256usize {
                    let low = x & x.wrapping_neg();
                    let i = 8 * b + low.trailing_zeros() as usize; // g · x^i
                    let shifted = [(GENERATOR << i) as u64, (GENERATOR << i >> 64) as u64,
                                   if i == 0 { 0 } else { (GENERATOR >> (128 - i)) as u64 }];
                    let prev = t[b][x ^ low];
                    t[b][x] = [prev[0] ^ shifted[0], prev[1] ^ shifted[1], prev[2] ^ shifted[2]];
                }
            }
            t
        })
    }

    /// C(v).
    #[inline]
    pub fn encode(v: u64) -> [u64; 3] {
        let t = tables();
        let mut c = [0u64; 3];
        for (b, tb) in t.iter().enumerate() {
            let e = &tb[(v >> (8 * b)) as usize & 0xff];
            c[0] ^= e[0];
            c[1] ^= e[1];
            c[2] ^= e[2];
        }
        c
    }

    /// Bit i of a codeword spread over 4 bits (group i's k = 4 columns): the 32 bits of lane l as
    /// a 128-bit row.
    pub fn spread(c: &[u64; 3], lane: usize) -> u128 {
        let bits = (c[lane / 2] >> (32 * (lane % 2))) as u32;
        let mut out = 0u128;
        for g in 0..GROUPS {
            if bits >> g & 1 == 1 {
                out |= 0xFu128 << (K * g);
            }
        }
        out
    }
}

/// S's table of v ↦ C(v) ∗ Δ (linear in v): 8 × 256 rows.
fn delta_table(delta: &[u128; LANES]) -> Vec<[u128; LANES]> {
    let mut t = vec![[0u128; LANES]; 8 * 256];
    for b in 0..8 {
        for x in 1..256usize {
            let low = x & x.wrapping_neg();
            let c = code::encode((low as u64) << (8 * b));
            let prev = t[b * 256 + (x ^ low)];
            let mut e = [0u128; LANES];
            for l in 0..LANES {
                e[l] = prev[l] ^ (code::spread(&c, l) & delta[l]);
            }
            t[b * 256 + x] = e;
        }
    }
    t
}

fn apply_table(t: &[[u128; LANES]], v: u64, acc: &mut [u128; LANES]) {
    for b in 0..8 {
        let e = &t[b * 256 + ((v >> (8 * b)) as usize & 0xff)];
        for l in 0..LANES {
            acc[l] ^= e[l];
        }
    }
}

/// The first `out.len()` bytes of SHA-256(value || tag) (96 + 16 bytes: two compression blocks).
#[inline]
pub fn mask(value: &[u128; LANES], tag: &[u8; 16], out: &mut [u8]) {
    let mut block = [0u8; 128];
    for l in 0..LANES {
        block[16 * l..16 * l + 16].copy_from_slice(&value[l].to_le_bytes());
    }
    block[96..112].copy_from_slice(tag);
    block[112] = 0x80;
    block[120..].copy_from_slice(&(112u64 * 8).to_be_bytes());
    let mut state: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                               0x5be0cd19];
    let blocks = [*GenericArray::from_slice(&block[..64]), *GenericArray::from_slice(&block[64..])];
    sha2::compress256(&mut state, &blocks);
    let mut digest = [0u8; 32];
    for (i, w) in state.iter().enumerate() {
        digest[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
    }
    out.copy_from_slice(&digest[..out.len()]);
}

/// `out.len()` bytes of payload pad from a VOLE value: SHA-256(value || tag_i) for blocks of 32
/// bytes, tag_i the run's pad tag with its first 4 bytes XORed with i (little-endian): random
/// oracle outputs independent of the mask's, so a matched id's pad is known to both parties and
/// any other id's pad hides as much of Δ as its mask.
pub fn pad(value: &[u128; LANES], tag: &[u8; 16], out: &mut [u8]) {
    for (i, chunk) in out.chunks_mut(32).enumerate() {
        let mut t = *tag;
        for (b, x) in t[..4].iter_mut().zip((i as u32).to_le_bytes()) {
            *b ^= x;
        }
        mask(value, &t, chunk);
    }
}

/// The run's pad tag: SHA-256("shaper/psi/okvs/pad/v1" || seed), 16 bytes.
pub fn pad_tag(seed: &[u8; 16]) -> [u8; 16] {
    derive(b"shaper/psi/okvs/pad/v1", seed)
}

/// Most pad (payload) bytes per item.
pub const MAX_PAD: usize = 1 << 16;

/// The run's hash tag: SHA-256("shaper/psi/okvs/mask/v1" || seed), 16 bytes.
pub fn tag(seed: &[u8; 16]) -> [u8; 16] {
    derive(b"shaper/psi/okvs/mask/v1", seed)
}

/// What both roles share: parameters, rows of this party's items in cluster order, batches.
pub struct Items {
    p: Params,
    hasher: Hasher,
    /// Item positions in cluster order, the digests in that order, each cluster's first place.
    order: Vec<u32>,
    digests: Vec<u8>,
    starts: Vec<usize>,
    batch_clusters: usize,
    next: usize,
    tag: [u8; 16],
    mask_bytes: usize,
    pad_tag: [u8; 16],
    pad_bytes: usize,
}

impl Items {
    /// A party's items under R's seed and parameters: digests sorted by cluster (made before the
    /// base OTs finish, so the hashing overlaps the peer's work), masks of `mask_bytes` and
    /// payload pads of `pad_bytes` (0: none), `batch_clusters` clusters per batch.
    pub fn new(p: Params, seed: &[u8; 16], digests: &[u8], batch_clusters: usize, mask_bytes: usize,
               pad_bytes: usize) -> Result<Self, String> {
        if pad_bytes > MAX_PAD {
            return Err(format!("payload pads are at most {MAX_PAD} bytes, got {pad_bytes}"));
        }
        if !digests.len().is_multiple_of(BLOCK) || digests.len() / BLOCK > MAX_ITEMS {
            return Err(format!("digests must be 16 bytes each, at most 2^32 of them; got {} bytes", digests.len()));
        }
        if batch_clusters == 0 {
            return Err("a batch needs at least one cluster".into());
        }
        if !(1..=32).contains(&mask_bytes) {
            return Err(format!("masks are 1 to 32 bytes, got {mask_bytes}"));
        }
        let hasher = Hasher::new(p, seed);
        let (order, digests, starts) = hasher.sort_digests(digests);
        Ok(Items { p, hasher, order, digests, starts, batch_clusters, next: 0, tag: tag(seed), mask_bytes,
                   pad_tag: pad_tag(seed), pad_bytes })
    }

    /// Batches of the run (both parties have as many).
    pub fn batches(&self) -> usize {
        self.p.clusters.div_ceil(self.batch_clusters)
    }

    /// Item positions in sorted (cluster) order: masks' row k belongs to item order[k].
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    /// Sorted positions of batch b's items (their masks' rows).
    pub fn items(&self, b: usize) -> std::ops::Range<usize> {
        let c = self.clusters(b);
        self.starts[c.start]..self.starts[c.end]
    }

    /// Bytes of batch b's extension message (the six lanes').
    pub fn message_len(&self, b: usize) -> usize {
        LANES * iknp::message_len(self.positions(b), K)
    }

    fn clusters(&self, b: usize) -> std::ops::Range<usize> {
        b * self.batch_clusters..((b + 1) * self.batch_clusters).min(self.p.clusters)
    }

    /// OKVS positions of batch b.
    fn positions(&self, b: usize) -> usize {
        self.clusters(b).len() * self.p.width()
    }

    fn step(&mut self, b: usize) -> Result<(), String> {
        if b != self.next || b >= self.batches() {
            return Err(format!("batch {b} out of turn (next is {} of {})", self.next, self.batches()));
        }
        self.next += 1;
        Ok(())
    }

    /// The rows of batch b's items, in sorted order, into `out`.
    fn rows(&self, b: usize, out: &mut Vec<Row>) {
        let range = self.items(b);
        out.resize(range.len(), Row::default());
        self.hasher.rows_into(&self.digests[range.start * BLOCK..range.end * BLOCK], out);
    }

    /// Masks of batch b's items (`items`: their rows, from [`Self::rows`]) from the batch's VOLE
    /// rows (and S's table of its values), cluster by cluster on the thread pool: the cluster's
    /// dense rows as byte tables (one table per thread), the sparse rows prefetched a few items
    /// ahead (a cluster's rows are 2 MiB: beyond L2).
    fn masks(&self, b: usize, items: &[Row], rows: &[[u128; LANES]], table: Option<&[[u128; LANES]]>,
             out: &mut [u8], pads: &mut [u8]) {
        const AHEAD: usize = 8;
        let (w, sparse, mb, pb) = (self.p.width(), self.p.sparse, self.mask_bytes, self.pad_bytes);
        let clusters = self.clusters(b);
        let first = self.starts[clusters.start];
        assert_eq!(out.len(), (self.starts[clusters.end] - first) * mb);
        assert_eq!(pads.len(), (self.starts[clusters.end] - first) * pb);
        assert_eq!(items.len(), self.starts[clusters.end] - first);
        // each cluster's share of the outputs
        let mut parts = Vec::with_capacity(clusters.len());
        let (mut out, mut pads) = (out, pads);
        for c in clusters.clone() {
            let n = self.starts[c + 1] - self.starts[c];
            let (o, rest) = std::mem::take(&mut out).split_at_mut(n * mb);
            let (p, prest) = std::mem::take(&mut pads).split_at_mut(n * pb);
            (out, pads) = (rest, prest);
            parts.push((c, o, p));
        }
        parts.into_par_iter().for_each_init(DenseTable::new, |dense, (c, out, pads)| {
            let block = &rows[(c - clusters.start) * w..(c - clusters.start + 1) * w];
            dense.fill(&block[sparse..]);
            let at = &items[self.starts[c] - first..self.starts[c + 1] - first];
            for (k, r) in at.iter().enumerate() {
                if let Some(ahead) = at.get(k + AHEAD) {
                    for &d in &ahead.pos {
                        prefetch(&block[d as usize]);
                    }
                }
                let mut acc = [0u128; LANES];
                for &d in &r.pos {
                    let x = &block[d as usize];
                    for l in 0..LANES {
                        acc[l] ^= x[l];
                    }
                }
                dense.add(r.dense, &mut acc);
                if let Some(t) = table {
                    apply_table(t, r.value, &mut acc);
                }
                mask(&acc, &self.tag, &mut out[k * mb..(k + 1) * mb]);
                if pb > 0 {
                    pad(&acc, &self.pad_tag, &mut pads[k * pb..(k + 1) * pb]);
                }
            }
        });
    }
}

/// The lanes' extension outputs (`m` × 16 bytes each) interleaved into rows, on the thread pool.
fn interleave(lanes: &[Vec<u8>], m: usize, rows: &mut [[u128; LANES]]) {
    const STEP: usize = 4096;
    rows[..m].par_chunks_mut(STEP).enumerate().for_each(|(c, chunk)| {
        for (l, t) in lanes.iter().enumerate() {
            let t = &t[c * STEP * BLOCK..];
            for (row, x) in chunk.iter_mut().zip(t.chunks_exact(BLOCK)) {
                row[l] = u128::from_le_bytes(x.try_into().unwrap());
            }
        }
    });
}

/// R: the OKVS encoder and the extension receiver on all lanes.
pub struct Receiver {
    items: Items,
    lanes: Vec<IknpReceiver>,
    buffers: Buffers,
}

/// Working memory of a batch, kept between batches (fresh pages cost page faults).
struct Buffers {
    items: Vec<Row>,
    rows: Vec<[u128; LANES]>,
    lanes: Vec<Vec<u8>>,
    values: Vec<u64>,
    columns: Vec<u8>,
}

impl Buffers {
    fn new() -> Self {
        Buffers { items: Vec::new(), rows: Vec::new(), lanes: vec![Vec::new(); LANES], values: Vec::new(),
                  columns: Vec::new() }
    }

    /// Rows and the lanes' outputs for m positions (contents unspecified: every row is written).
    fn ready(&mut self, m: usize) {
        self.rows.resize(m, [0u128; LANES]);
        for t in &mut self.lanes {
            t.resize(m * BLOCK, 0);
        }
    }
}

impl Receiver {
    /// R's `items`; `k0s`, `k1s`: the base-OT sender's keys of the 6 lanes (6 × 2048 bytes
    /// each); `tree_seeds` 6 × 16 random bytes. Returns R and the 6 SoftSpoken setup messages,
    /// concatenated. Fails when a cluster holds more than its capacity of R's items.
    pub fn new(items: Items, k0s: &[u8], k1s: &[u8], tree_seeds: &[u8]) -> Result<(Self, Vec<u8>), String> {
        if k0s.len() != LANES * 128 * BLOCK || k1s.len() != k0s.len() || tree_seeds.len() != LANES * BLOCK {
            return Err(format!("{LANES} lanes need {} bytes of each key set and {} of tree seeds",
                               LANES * 128 * BLOCK, LANES * BLOCK));
        }
        let p = items.p;
        if let Some(c) = (0..p.clusters).find(|&c| items.starts[c + 1] - items.starts[c] > p.capacity) {
            return Err(format!("cluster {c} holds {} items, more than its capacity {} (the chance of this is below \
                                2^-40 per run)", items.starts[c + 1] - items.starts[c], p.capacity));
        }
        let (mut lanes, mut setup) = (Vec::with_capacity(LANES), Vec::new());
        for l in 0..LANES {
            let keys = l * 128 * BLOCK..(l + 1) * 128 * BLOCK;
            let (r, s) = IknpReceiver::soft(&k0s[keys.clone()], &k1s[keys], K, &tree_seeds[l * BLOCK..(l + 1) * BLOCK])?;
            lanes.push(r);
            setup.extend_from_slice(&s);
        }
        Ok((Receiver { items, lanes, buffers: Buffers::new() }, setup))
    }

    /// R's items: batches, order, each batch's items and message length.
    pub fn shared(&self) -> &Items {
        &self.items
    }

    /// Batch b (batches in order): encodes its clusters, extends, writes the message `u`
    /// ([`Self::message_len`] bytes: lane after lane) and the masks of its items (in sorted order),
    /// and their payload pads (`pad_bytes` each; empty when 0).
    pub fn batch(&mut self, b: usize, u: &mut [u8], masks: &mut [u8], pads: &mut [u8]) -> Result<(), String> {
        self.items.step(b)?;
        let (p, m) = (self.items.p, self.items.positions(b));
        assert_eq!(u.len(), self.items.message_len(b));
        let clusters = self.items.clusters(b);
        let bufs = &mut self.buffers;
        bufs.ready(m);
        // 1. the OKVS of each cluster
        bufs.values.resize(m, 0);
        let values = &mut bufs.values[..m];
        self.items.rows(b, &mut bufs.items);
        let first = self.items.starts[clusters.start];
        let (starts, items) = (&self.items.starts, &bufs.items);
        values.par_chunks_exact_mut(p.width()).zip(clusters.clone()).try_for_each_init(Scratch::default,
            |scratch, (out, c)| encode(&p, &items[starts[c] - first..starts[c + 1] - first], out, scratch))?;
        // 2. choice columns: column g of lane l is bit 32 l + g of C(P_j) over the positions j
        let rounded = iknp::rounded(m);
        let col_len = rounded / 8;
        bufs.columns.resize(LANES * GROUPS * col_len, 0);
        let columns = &mut bufs.columns[..];
        let mut tile = vec![0u8; 2 * 128 * BLOCK];
        let mut out = vec![0u8; transpose::TILE];
        for t in 0..rounded / 128 {
            tile.fill(0);
            for i in 0..128.min(m.saturating_sub(t * 128)) {
                let c = code::encode(values[t * 128 + i]);
                tile[i * BLOCK..i * BLOCK + 8].copy_from_slice(&c[0].to_le_bytes());
                tile[i * BLOCK + 8..i * BLOCK + 16].copy_from_slice(&c[1].to_le_bytes());
                tile[(128 + i) * BLOCK..(128 + i) * BLOCK + 8].copy_from_slice(&c[2].to_le_bytes());
            }
            for half in 0..2 {
                transpose::tile(&tile[half * 128 * BLOCK..], BLOCK, &mut out);
                for bit in 0..(if half == 0 { 128 } else { 64 }) {
                    let coord = half * 128 + bit; // = 32 lane + group
                    let at = coord * col_len + t * BLOCK;
                    columns[at..at + BLOCK].copy_from_slice(&out[bit * BLOCK..bit * BLOCK + BLOCK]);
                }
            }
        }
        // 3. extend every lane; its rows into the interleaved table
        let lane_len = iknp::message_len(m, K);
        let columns = &*columns;
        self.lanes.par_iter_mut().zip(u.par_chunks_mut(lane_len)).zip(bufs.lanes.par_iter_mut()).enumerate()
            .try_for_each(|(l, ((lane, u), t))| {
                lane.extend_groups(&columns[l * GROUPS * col_len..(l + 1) * GROUPS * col_len], m, u, &mut t[..m * BLOCK])
            })?;
        interleave(&bufs.lanes, m, &mut bufs.rows);
        // 4. masks of R's items
        self.items.masks(b, &bufs.items, &bufs.rows[..m], None, masks, pads);
        Ok(())
    }
}

/// S: the extension sender on all lanes.
pub struct Sender {
    items: Items,
    lanes: Vec<IknpSender>,
    table: Vec<[u128; LANES]>,
    buffers: Buffers,
}

impl Sender {
    /// S's `items`; `keys`: the base-OT receiver's keys of the 6 lanes (6 × 2048 bytes),
    /// `deltas` their choice bits (6 × 16 bytes), `setup` R's 6 setup messages.
    pub fn new(items: Items, keys: &[u8], deltas: &[u8], setup: &[u8]) -> Result<Self, String> {
        let setup_len = setup.len() / LANES;
        if keys.len() != LANES * 128 * BLOCK || deltas.len() != LANES * BLOCK || setup.len() != LANES * setup_len {
            return Err(format!("{LANES} lanes need {} bytes of keys, {} of Δ and 6 equal setup messages",
                               LANES * 128 * BLOCK, LANES * BLOCK));
        }
        let mut lanes = Vec::with_capacity(LANES);
        let mut delta = [0u128; LANES];
        for l in 0..LANES {
            let d = &deltas[l * BLOCK..(l + 1) * BLOCK];
            lanes.push(IknpSender::soft(&keys[l * 128 * BLOCK..(l + 1) * 128 * BLOCK], d, K,
                                        &setup[l * setup_len..(l + 1) * setup_len])?);
            delta[l] = u128::from_le_bytes(d.try_into().unwrap());
        }
        Ok(Sender { items, lanes, table: delta_table(&delta), buffers: Buffers::new() })
    }

    /// S's items: batches, order, each batch's items and message length.
    pub fn shared(&self) -> &Items {
        &self.items
    }

    /// Batch b (in order): R's message `u` for it, and the masks (and payload pads) of S's items
    /// of the batch.
    pub fn batch(&mut self, b: usize, u: &[u8], masks: &mut [u8], pads: &mut [u8]) -> Result<(), String> {
        if b < self.items.batches() && u.len() != self.items.message_len(b) {
            return Err(format!("the OKVS message of batch {b} must be {} bytes, got {}", self.items.message_len(b),
                               u.len()));
        }
        self.items.step(b)?;
        let m = self.items.positions(b);
        let lane_len = iknp::message_len(m, K);
        let bufs = &mut self.buffers;
        bufs.ready(m);
        self.lanes.par_iter_mut().zip(u.par_chunks(lane_len)).zip(bufs.lanes.par_iter_mut())
            .try_for_each(|((lane, u), t)| lane.extend(u, m, &mut t[..m * BLOCK]))?;
        interleave(&bufs.lanes, m, &mut bufs.rows);
        self.items.rows(b, &mut bufs.items);
        self.items.masks(b, &bufs.items, &bufs.rows[..m], Some(&self.table), masks, pads);
        Ok(())
    }
}

/// A mask as a big-endian integer, zero-padded (`width` ≤ 16): integer order is byte order.
#[inline]
fn mask_key(m: &[u8]) -> u128 {
    let mut k = [0u8; 16];
    k[..m.len()].copy_from_slice(m);
    u128::from_be_bytes(k)
}

/// The permutation that sorts masks (`width` bytes each) by their bytes: order[k] is the mask at
/// sorted place k (ties in any order). Masks are uniform, so a counting sort on the top 10 bits
/// (1024 write streams: few enough for the caches) leaves buckets that sort in cache, by their
/// first 8 bytes and, where those are equal (rarely), all of them: 16 bytes per mask of memory.
pub fn sort_masks(masks: &[u8], width: usize) -> Vec<u32> {
    assert!((1..=16).contains(&width) && masks.len().is_multiple_of(width));
    const TOP: u32 = 10;
    let mask = |i: u32| &masks[i as usize * width..(i as usize + 1) * width];
    let mut starts = vec![0usize; (1 << TOP) + 1];
    for m in masks.chunks_exact(width) {
        starts[(mask_key(m) >> (128 - TOP)) as usize + 1] += 1;
    }
    for b in 0..1 << TOP {
        starts[b + 1] += starts[b];
    }
    let mut next = starts.clone();
    let mut v = vec![(0u64, 0u32); masks.len() / width];
    for (i, m) in masks.chunks_exact(width).enumerate() {
        let k = mask_key(m);
        let at = &mut next[(k >> (128 - TOP)) as usize];
        v[*at] = ((k >> 64) as u64, i as u32);
        *at += 1;
    }
    let mut buckets = Vec::with_capacity(1 << TOP);
    let mut rest = &mut v[..];
    for b in 0..1 << TOP {
        let (bucket, tail) = std::mem::take(&mut rest).split_at_mut(starts[b + 1] - starts[b]);
        buckets.push(bucket);
        rest = tail;
    }
    buckets.into_par_iter().for_each(|bucket| {
        bucket.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| mask(x.1).cmp(mask(y.1))));
    });
    v.iter().map(|e| e.1).collect()
}

/// The masks `own` (in the order `own_order`, which sorts them) and `peer` (sorted, as the peer
/// sends them) share: (positions in `own`, positions in `peer`), ordered by the mask's bytes;
/// a mask repeated on either side matches once. An error when `peer` is not sorted.
pub fn match_sorted(own: &[u8], own_order: &[u32], peer: &[u8], width: usize) -> Result<(Vec<u32>, Vec<u32>), String> {
    assert!((1..=16).contains(&width) && own.len().is_multiple_of(width) && peer.len().is_multiple_of(width));
    assert_eq!(own_order.len(), own.len() / width);
    if peer.chunks_exact(width).zip(peer.chunks_exact(width).skip(1)).any(|(a, b)| a > b) {
        return Err("the peer's masks are not in ascending order".into());
    }
    let mine_at = |k: usize| &own[own_order[k] as usize * width..(own_order[k] as usize + 1) * width];
    let theirs_at = |j: usize| &peer[j * width..(j + 1) * width];
    let (mut mine, mut at) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    let mut last: Option<&[u8]> = None;
    while i < own_order.len() && j < peer.len() / width {
        let a = mine_at(i);
        match a.cmp(theirs_at(j)) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                if last != Some(a) {
                    mine.push(own_order[i]);
                    at.push(j as u32);
                    last = Some(a);
                }
                i += 1;
                j += 1;
            }
        }
    }
    Ok((mine, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut out = vec![0u8; n.div_ceil(16) * 16];
        Cipher::new(&[seed as u8; 16]).ctr(seed as u128, &mut out);
        out.truncate(n);
        out
    }

    fn params(n: usize) -> Params {
        let capacity = n + 8;
        Params::new(1, capacity, (capacity * 127).div_ceil(100).max(WEIGHT), 48).unwrap()
    }

    #[test]
    fn encode_then_decode_gives_every_value() {
        let mut s = Scratch::default();
        for (n, seed) in [(0usize, 1u64), (1, 2), (2, 3), (5, 4), (100, 5), (20_000, 6)] {
            let p = params(n);
            let rows = Hasher::new(p, &[seed as u8; 16]).rows(&bytes(16 * n, seed));
            let mut out = vec![0u64; p.width()];
            encode(&p, &rows, &mut out, &mut s).unwrap();
            for r in &rows {
                assert_eq!(decode(&p, &out, r), r.value);
            }
        }
    }

    #[test]
    fn the_two_pass_partition_equals_sorting_the_rows() {
        let p = Params::new(13, 1000, 50, 20).unwrap();
        let d = bytes(16 * 9000, 4);
        let h = Hasher::new(p, &[5; 16]);
        let (a, b) = (h.partition(&d), partition(&h.rows(&d), p.clusters));
        assert_eq!((a.order, a.rows, a.starts), (b.order, b.rows, b.starts));
    }

    #[test]
    fn rows_have_distinct_positions_in_range() {
        let p = Params::new(7, 100, 5, 13).unwrap();
        let rows = Hasher::new(p, &[9; 16]).rows(&bytes(16 * 5000, 9));
        let mut seen = vec![0usize; 7];
        for r in &rows {
            assert!(r.pos.iter().all(|&x| (x as usize) < p.sparse));
            assert!(r.pos[0] != r.pos[1] && r.pos[0] != r.pos[2] && r.pos[1] != r.pos[2]);
            assert!(r.dense < 1 << 13);
            seen[r.cluster as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 600), "{seen:?}");
    }

    #[test]
    fn the_generator_has_roots_alpha_1_to_36() {
        // GF(2^8) with x^8 + x^4 + x^3 + x^2 + 1, α = x
        let mul = |mut a: u16, mut b: u16| {
            let mut r = 0u16;
            while b != 0 {
                if b & 1 == 1 {
                    r ^= a;
                }
                a <<= 1;
                if a & 0x100 != 0 {
                    a ^= 0x11D;
                }
                b >>= 1;
            }
            r
        };
        for i in 1..=36u32 {
            let mut alpha_i = 1u16;
            for _ in 0..i {
                alpha_i = mul(alpha_i, 2);
            }
            let (mut value, mut power) = (0u16, 1u16);
            for d in 0..125 {
                if GENERATOR >> d & 1 == 1 {
                    value ^= power;
                }
                power = mul(power, alpha_i);
            }
            assert_eq!(value, 0, "g(α^{i}) ≠ 0");
        }
        assert_eq!(128 - GENERATOR.leading_zeros(), 125);
    }

    #[test]
    fn the_code_is_the_product_with_g_and_linear() {
        for (v, w) in [(1u64, 2u64), (0xdead_beef, 0x1234_5678_9abc_def0), (u64::MAX, 1 << 63)] {
            let (a, b, ab) = (code::encode(v), code::encode(w), code::encode(v ^ w));
            assert_eq!([a[0] ^ b[0], a[1] ^ b[1], a[2] ^ b[2]], ab);
        }
        let c = code::encode(1);
        assert_eq!((c[0] as u128) | (c[1] as u128) << 64, GENERATOR);
        let c = code::encode(1 << 63);
        assert_eq!(c[2] >> 60, 0, "the last 4 positions stay 0");
        let weight = |c: [u64; 3]| c.iter().map(|x| x.count_ones()).sum::<u32>();
        for v in 1..2000u64 {
            assert!(weight(code::encode(v.wrapping_mul(0x9e37_79b9_7f4a_7c15))) >= 37);
        }
    }

    /// The whole exchange without I/O: masks agree exactly on the common items.
    #[test]
    fn common_items_get_equal_masks_and_others_do_not() {
        let n = 3000;
        let cap = 1200;
        let p = Params::new(4, cap, (cap * 127).div_ceil(100), 50).unwrap();
        let seed = [3u8; 16];
        let r_digests = bytes(16 * n, 1);
        let mut s_digests = bytes(16 * n, 2);
        s_digests[..16 * 1000].copy_from_slice(&r_digests[16 * 500..16 * 1500]); // 1000 in common
        let (k0, k1) = (bytes(6 * 2048, 5), bytes(6 * 2048, 6));
        let deltas = bytes(6 * 16, 7);
        let mut chosen = Vec::new();
        for l in 0..LANES {
            for i in 0..128 {
                let bit = deltas[16 * l + i / 8] >> (i % 8) & 1;
                let src = if bit == 1 { &k1 } else { &k0 };
                chosen.extend_from_slice(&src[(l * 128 + i) * 16..(l * 128 + i + 1) * 16]);
            }
        }
        let items = |d: &[u8]| Items::new(p, &seed, d, 3, 10, 40).unwrap();
        let (mut r, setup) = Receiver::new(items(&r_digests), &k0, &k1, &bytes(96, 8)).unwrap();
        let mut s = Sender::new(items(&s_digests), &chosen, &deltas, &setup).unwrap();
        let (mut rm, mut sm) = (vec![0u8; n * 10], vec![0u8; n * 10]);
        let (mut rp, mut sp) = (vec![0u8; n * 40], vec![0u8; n * 40]);
        for b in 0..r.shared().batches() {
            let mut u = vec![0u8; r.shared().message_len(b)];
            let ri = r.shared().items(b);
            r.batch(b, &mut u, &mut rm[ri.start * 10..ri.end * 10], &mut rp[ri.start * 40..ri.end * 40]).unwrap();
            let si = s.shared().items(b);
            s.batch(b, &u, &mut sm[si.start * 10..si.end * 10], &mut sp[si.start * 40..si.end * 40]).unwrap();
        }
        // pads: equal exactly where the masks are, and not the masks themselves
        let place = |order: &[u32], i: usize| order.iter().position(|&x| x as usize == i).unwrap();
        for i in [500usize, 999, 1499] {
            let (kr, ks) = (place(r.shared().order(), i), place(s.shared().order(), i - 500));
            assert_eq!(&rm[kr * 10..kr * 10 + 10], &sm[ks * 10..ks * 10 + 10]);
            assert_eq!(&rp[kr * 40..kr * 40 + 40], &sp[ks * 40..ks * 40 + 40]);
            assert_ne!(&rp[kr * 40..kr * 40 + 10], &rm[kr * 10..kr * 10 + 10]);
        }
        let (kr, ks) = (place(r.shared().order(), 0), place(s.shared().order(), 2000));
        assert_ne!(&rp[kr * 40..kr * 40 + 40], &sp[ks * 40..ks * 40 + 40]);
        let mut by_item = vec![[0u8; 10]; n];
        for (k, &i) in r.shared().order().iter().enumerate() {
            by_item[i as usize].copy_from_slice(&rm[k * 10..k * 10 + 10]);
        }
        let theirs: std::collections::HashSet<[u8; 10]> =
            sm.chunks_exact(10).map(|c| c.try_into().unwrap()).collect();
        let found: Vec<usize> = (0..n).filter(|&i| theirs.contains(&by_item[i])).collect();
        assert_eq!(found, (500..1500).collect::<Vec<_>>());
        // the matcher finds the same pairs, ordered by mask
        let sorted: Vec<u8> = sort_masks(&sm, 10).iter().flat_map(|&j| sm[j as usize * 10..j as usize * 10 + 10].to_vec())
            .collect();
        assert!(match_sorted(&rm, &sort_masks(&rm, 10), &sm, 10).is_err(), "unsorted peer masks are refused");
        let (mine, at) = match_sorted(&rm, &sort_masks(&rm, 10), &sorted, 10).unwrap();
        let sm = sorted;
        let mut got: Vec<usize> = mine.iter().map(|&k| r.shared().order()[k as usize] as usize).collect();
        let keys: Vec<&[u8]> = mine.iter().map(|&k| &rm[k as usize * 10..k as usize * 10 + 10]).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for (&k, &j) in mine.iter().zip(&at) {
            assert_eq!(&rm[k as usize * 10..k as usize * 10 + 10], &sm[j as usize * 10..j as usize * 10 + 10]);
        }
        got.sort_unstable();
        assert_eq!(got, found);
    }
}
