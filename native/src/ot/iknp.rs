//! OT extension (with [`check`] on, the correlation holds against a malicious receiver; without,
//! semi-honest): 128 base OTs in the opposite direction become any number of
//! correlated OTs q_j = t_j ⊕ b_j·Δ. IKNP, and SoftSpoken (Roy, CRYPTO 2022) with the repetition
//! code, small-field VOLE over GF(2^k) for k = 2, 4, of which IKNP is the case k = 1: the same
//! rows, Δ and consumers, with a message of 128/k instead of 128 bits per OT.
//!
//! Roles: the extension receiver was the base-OT sender and holds (k0_i, k1_i); the extension
//! sender was the base-OT receiver with choice bits Δ and holds k_{Δ_i}. Both sides hold *leaf*
//! seeds, each keying a PRG G, AES-128 in counter mode under that seed (block n of the stream is
//! AES_s(n), n a little-endian 128-bit counter); the streams continue across calls: both sides
//! keep a counter.
//!
//! The 128 columns fall into 128/k groups of k (column i = g·k + c, c < k). Group g has 2^k
//! leaves s_x, x ∈ {0,1}^k (x_c = bit c of x); the receiver knows them all, the sender all but
//! s_α, α_c = Δ_{g·k+c}. For k = 1 the leaves are the base keys, s_x = k_{1-x,i} (so the sender's
//! one leaf s_{¬Δ_i} is k_{Δ_i}); for k ≥ 2 they are the GGM trees of [`pprf`], set up once by its
//! setup message (receiver → sender, [`pprf::SETUP_LEN`] bytes).
//!
//! One `extend(count)` covers M = `count` rounded up to a multiple of 128 rows; the receiver's
//! choice bits r are zero-padded to M. Per group, on M-bit columns:
//! - receiver: u_g = ⊕_x G(s_x), column c of t: v_c = ⊕_{x: x_c = 1} G(s_x); it sends u_g ⊕ r;
//! - sender: w_c = ⊕_{x ≠ α: (x ⊕ α)_c = 1} G(s_x), which is v_c if α_c = 0 and, if α_c = 1, the
//!   sum over x_c = 0, u_g ⊕ v_c (x = α never counts); so w_c = v_c ⊕ α_c·u_g, and column c of q
//!   is w_c ⊕ α_c·(u_g ⊕ r) = v_c ⊕ Δ_{g·k+c}·r.
//!
//! Hence column i of q is t^i ⊕ Δ_i·r, and row j of the 128 × M matrices (bit i = column i's
//! bit j) gives t_j and q_j = t_j ⊕ r_j·Δ. For k = 1 this is IKNP exactly: t^i = G(k0_i),
//! u^i = G(k0_i) ⊕ G(k1_i) ⊕ r, q^i = G(k_{Δ_i}) ⊕ Δ_i·u^i. The message is the groups' columns
//! one after another, u_0 || u_1 || ... || u_{128/k - 1}, M/8 bytes each (16·M/k bytes).
//!
//! A checked call ([`IknpReceiver::enable_check`], [`IknpSender::enable_check`]) extends
//! `rounded(count)` + [`CHECK_ROWS`] rows, the last 256 with random choices, and its message
//! ends with the check's 32 bytes (x, t̃); per chunk both sides hash the chunk's part of u, then
//! transpose all of the chunk's rows and add their weighted sum before the consumer sees them;
//! the sender verifies at the end of the call and returns an error, outputs unusable, if the
//! check fails. `index` counts the extra rows too.
//!
//! Rows are computed in chunks of [`CHUNK`] rows: per chunk and group the 2^k leaf streams (a few
//! KB each, encrypted in batches), folded into the group's k columns and message column in one
//! pass ([`fold`]: 2^k − 1 + Σ 2^c XORs per lane, in AVX2 registers where present), then
//! 128 × 128 tile transposes into the output rows. The PRG work per OT is 2^k/k AES blocks for
//! the receiver ((2^k − 1)/k for the sender): 2, 2, 4 (1, 1.5, 3.75) for k = 1, 2, 4.

use super::block::{load, Cipher, BLOCK};
use super::check::{self, ReceiverCheck, Transcript, CHECK_ROWS, TRAILER};
use super::transpose::{self, TILE};
use super::{cot, pprf, tccr};

/// Base OTs (and bits per row).
pub const KAPPA: usize = 128;
/// Rows per chunk: 64 PRG blocks per leaf stream per AES call (a multiple of the 8-block AES-NI
/// batch, so no block is encrypted alone), 128 KiB of columns.
pub const CHUNK: usize = 64 * 128;
/// Most rows one call may extend (a bound on allocations: 2^32 rows = 64 GiB of IKNP message).
pub const MAX_COUNT: usize = 1 << 32;
/// The k supported: base OTs per group (1 = IKNP).
pub const KS: [usize; 3] = [1, 2, 4];

/// `count` rounded up to the 128-row granularity of the extension.
pub fn rounded(count: usize) -> usize {
    count.div_ceil(KAPPA) * KAPPA
}

/// Bytes of the message for `count` OTs with groups of `k`: 128/k columns of `rounded(count)`
/// bits (128/k bits per OT).
pub fn message_len(count: usize, k: usize) -> usize {
    rounded(count) / 8 * (KAPPA / k)
}

/// `k` is one of [`KS`].
pub fn check_k(k: usize) -> Result<(), String> {
    if KS.contains(&k) {
        return Ok(());
    }
    let why = if k == 0 || !KAPPA.is_multiple_of(k) {
        format!("k must divide the {KAPPA} base OTs, which {k} does not")
    } else {
        format!("k = {k} divides {KAPPA} but is not implemented (2^k leaf streams per {k} columns)")
    };
    Err(format!("k must be 1 (IKNP), 2 or 4 (SoftSpoken), got {k}: {why}"))
}

/// What the messages of this extension are called in errors.
fn protocol(k: usize) -> String {
    if k == 1 { "IKNP".into() } else { format!("SoftSpoken (k = {k})") }
}

fn check_keys(keys: &[u8], what: &str) -> Result<(), String> {
    if keys.len() != KAPPA * BLOCK {
        return Err(format!("{what} must be {} bytes ({KAPPA} keys of {BLOCK}), got {}", KAPPA * BLOCK, keys.len()));
    }
    Ok(())
}

fn ciphers<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<Cipher> {
    keys.into_iter().map(|k| Cipher::new(k.try_into().unwrap())).collect()
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

/// Per-extension working memory, kept between calls: the chunk's columns (128 KiB), one group's
/// leaf streams (2^k × 1 KiB) and the transposed rows of a fused call. Allocating them per call
/// costs page faults (glibc hands out blocks this large with mmap, fresh each time); the fused
/// calls exist precisely so that rows never leave the cache, so their buffer must not be a new
/// one either.
#[derive(Default)]
struct Scratch {
    cols: Vec<u8>,
    streams: Vec<u8>,
    rows: Vec<u8>,
}

impl Scratch {
    fn ready(&mut self, k: usize) {
        if self.cols.is_empty() {
            self.cols = vec![0u8; CHUNK / 8 * KAPPA];
            self.streams = vec![0u8; (1 << k) * CHUNK / 8];
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
    /// The chunk's live rows, already transposed (a checked call transposes every row of the
    /// chunk, the check weighs them all).
    fn transposed(&mut self, first: usize, rows: &[u8]) {
        if rows.is_empty() {
            return; // a chunk of the check's extra rows only: `first` may lie past the caller's rows
        }
        match self {
            Sink::Rows(t) => t[first * BLOCK..first * BLOCK + rows.len()].copy_from_slice(rows),
            Sink::Fused(f) => f(first, rows),
        }
    }

    fn chunk(&mut self, cols: &[u8], first: usize, live: usize, scratch_rows: &mut [u8]) {
        if live == 0 {
            return; // as in `transposed`
        }
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

/// One group's leaf streams folded into its k columns: the XOR accumulation of the module doc,
/// lane by lane (32 bytes in AVX2 registers, else 16 in a `u128`), reading each stream once.
///
/// Streams are `bytes` apart in `streams` (2^k of them), columns `bytes` apart in `cols`
/// (k of them). Per lane the columns are summed by halving: v_{k-1} is the sum of the upper
/// half of the streams, which is then folded onto the lower half (s_y ⊕= s_{y + 2^{k-1}}, the
/// lower bits of y unchanged), and so on down to v_0; what is left in s_0 is the sum of all.
/// For k = 4: 26 XORs per lane instead of 15 + 4·7.
///
/// For k = 1 (IKNP) the one column *is* stream 1, which the caller generates straight into it
/// (`cols`) instead of slot 1 of `streams`: the receiver then only forms u, and the sender only
/// XORs in the message where Δ_i is set, as plain IKNP does.
pub mod fold {
    /// Receiver: column c = ⊕_{x: x_c = 1} stream x; `u` = (⊕_x stream x) ⊕ `r`.
    pub fn receiver(k: usize, streams: &[u8], bytes: usize, r: &[u8], cols: &mut [u8], u: &mut [u8]) {
        assert!(bytes.is_multiple_of(16) && streams.len() >= bytes << k && r.len() >= bytes && cols.len() == k * bytes
                && u.len() == bytes);
        let p = Lanes::new(streams, bytes, r, 0, cols, Some(u));
        match k {
            1 => go::<1, true, true>(&p),
            2 => go::<2, true, true>(&p),
            4 => go::<4, true, true>(&p),
            _ => unreachable!("k checked at construction"),
        }
    }

    /// Sender: streams indexed by y = x ⊕ α, slot 0 (the unknown leaf) never read; column c =
    /// (⊕_{y: y_c = 1} stream y) ⊕ (bit c of `mask`)·`msg`.
    pub fn sender(k: usize, streams: &[u8], bytes: usize, msg: &[u8], mask: u32, cols: &mut [u8]) {
        assert!(bytes.is_multiple_of(16) && streams.len() >= bytes << k && msg.len() >= bytes && cols.len() == k * bytes);
        if k == 1 && mask == 0 {
            return; // the column is stream 1 already
        }
        let p = Lanes::new(streams, bytes, msg, mask, cols, None);
        match (k, mask != 0) {
            (1, true) => go::<1, false, true>(&p),
            (2, false) => go::<2, false, false>(&p),
            (2, true) => go::<2, false, true>(&p),
            (4, false) => go::<4, false, false>(&p),
            (4, true) => go::<4, false, true>(&p),
            _ => unreachable!("k checked at construction"),
        }
    }

    /// The checked buffers: `streams` 2^k × `bytes`, `extra` (r or the message) and `u`
    /// `bytes`, `cols` k × `bytes`; `bytes` a multiple of 16.
    pub(super) struct Lanes {
        streams: *const u8,
        bytes: usize,
        extra: *const u8,
        mask: u32,
        cols: *mut u8,
        u: *mut u8,
    }

    impl Lanes {
        pub(super) fn new(streams: &[u8], bytes: usize, extra: &[u8], mask: u32, cols: &mut [u8], u: Option<&mut [u8]>) -> Self {
            let u = u.map_or(core::ptr::null_mut(), |u| u.as_mut_ptr());
            Lanes { streams: streams.as_ptr(), bytes, extra: extra.as_ptr(), mask, cols: cols.as_mut_ptr(), u }
        }

        /// Where stream y is (at lane offset 0).
        #[inline(always)]
        fn stream<const K: usize>(&self, y: usize) -> *const u8 {
            if K == 1 && y == 1 { self.cols } else { self.streams.wrapping_add(y * self.bytes) }
        }
    }

    /// `RECV`: the receiver (reads slot 0, writes u); `EXTRA`: reads `extra` (the sender skips its
    /// message column when no column of the group takes it).
    fn go<const K: usize, const RECV: bool, const EXTRA: bool>(p: &Lanes) {
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            done = p.bytes & !31;
            // SAFETY: AVX2 is present; `p` comes from `Lanes::new` on the buffers `receiver` or
            // `sender` checked (and still borrows), and `done` <= `bytes` is a multiple of 32.
            unsafe { avx2::<K, RECV, EXTRA>(p, done) };
        }
        // SAFETY: as above; `done` is a multiple of 16 (0 or a multiple of 32).
        unsafe { portable::<K, RECV, EXTRA>(p, done) };
    }

    // Index loops, not iterator adapters: these must unroll into registers, and adapters are not
    // always inlined into a `target_feature` function.
    /// Lanes `from..bytes`, 16 bytes at a time.
    ///
    /// # Safety
    /// `p`'s buffers must be live and laid out as [`Lanes`] says (`bytes` a multiple of 16; `u`
    /// not null for `RECV`; `cols` not aliasing the streams read, except stream 1 for K = 1), as
    /// `Lanes::new` on the buffers [`receiver`] and [`sender`] check makes them; `from` a multiple
    /// of 16.
    #[allow(clippy::needless_range_loop)]
    pub(super) unsafe fn portable<const K: usize, const RECV: bool, const EXTRA: bool>(p: &Lanes, from: usize) {
        // SAFETY: `rd` and `wr` (like the address arithmetic below) only get lane addresses,
        // offset `off` < `bytes` into stream y < 2^K, `extra`, column c < K or `u`, each with 16
        // bytes inside its buffer by the caller's guarantee; the access is unaligned.
        let rd = |q: *const u8| u128::from_le_bytes(unsafe { q.cast::<[u8; 16]>().read_unaligned() });
        // SAFETY: see above.
        let wr = |q: *mut u8, v: u128| unsafe { q.cast::<[u8; 16]>().write_unaligned(v.to_le_bytes()) };
        let take: [u128; 4] = core::array::from_fn(|c| if (p.mask >> c) & 1 == 1 { !0 } else { 0 });
        let mut off = from;
        while off < p.bytes {
            let mut s = [0u128; 16];
            for y in usize::from(!RECV)..1 << K {
                // SAFETY: a lane of one of `p`'s buffers (see `rd`).
                s[y] = rd(unsafe { p.stream::<K>(y).add(off) });
            }
            let mut v = [0u128; 4];
            let mut m = 1 << K;
            for c in (0..K).rev() {
                let h = m / 2;
                v[c] = s[h];
                for y in h + 1..m {
                    v[c] ^= s[y];
                }
                for y in 0..h {
                    s[y] ^= s[y + h];
                }
                m = h;
            }
            // SAFETY: a lane of one of `p`'s buffers (see `rd`).
            let e = if EXTRA { rd(unsafe { p.extra.add(off) }) } else { 0 };
            for c in 0..K {
                if !(RECV && K == 1) {
                    // SAFETY: a lane of one of `p`'s buffers (see `rd`).
                    wr(unsafe { p.cols.add(c * p.bytes + off) }, if RECV { v[c] } else { v[c] ^ (e & take[c]) });
                }
            }
            if RECV {
                // SAFETY: a lane of one of `p`'s buffers (see `rd`).
                wr(unsafe { p.u.add(off) }, s[0] ^ e);
            }
            off += 16;
        }
    }

    /// Lanes `0..to` (a multiple of 32), 32 bytes at a time.
    ///
    /// # Safety
    /// The CPU must have AVX2; `p` as for [`portable`], and `to` <= `bytes`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::needless_range_loop)]
    unsafe fn avx2<const K: usize, const RECV: bool, const EXTRA: bool>(p: &Lanes, to: usize) {
        use core::arch::x86_64::*;
        // SAFETY: as in `portable` (`rd`, `wr` and the address arithmetic below), with lanes of
        // 32 bytes at offsets `off` < `to` <= `bytes`; `loadu`/`storeu` need no alignment.
        let rd = |q: *const u8| unsafe { _mm256_loadu_si256(q.cast()) };
        // SAFETY: see above.
        let wr = |q: *mut u8, v: __m256i| unsafe { _mm256_storeu_si256(q.cast(), v) };
        let zero = _mm256_setzero_si256();
        let take: [__m256i; 4] = core::array::from_fn(|c| if (p.mask >> c) & 1 == 1 { _mm256_set1_epi8(-1) } else { zero });
        let mut off = 0;
        while off < to {
            let mut s = [zero; 16];
            for y in usize::from(!RECV)..1 << K {
                // SAFETY: a lane of one of `p`'s buffers (see `rd`).
                s[y] = rd(unsafe { p.stream::<K>(y).add(off) });
            }
            let mut v = [zero; 4];
            let mut m = 1 << K;
            for c in (0..K).rev() {
                let h = m / 2;
                v[c] = s[h];
                for y in h + 1..m {
                    v[c] = _mm256_xor_si256(v[c], s[y]);
                }
                for y in 0..h {
                    s[y] = _mm256_xor_si256(s[y], s[y + h]);
                }
                m = h;
            }
            // SAFETY: a lane of one of `p`'s buffers (see `rd`).
            let e = if EXTRA { rd(unsafe { p.extra.add(off) }) } else { zero };
            for c in 0..K {
                if !(RECV && K == 1) {
                    let x = if RECV { v[c] } else { _mm256_xor_si256(v[c], _mm256_and_si256(e, take[c])) };
                    // SAFETY: a lane of one of `p`'s buffers (see `rd`).
                    wr(unsafe { p.cols.add(c * p.bytes + off) }, x);
                }
            }
            if RECV {
                // SAFETY: a lane of one of `p`'s buffers (see `rd`).
                wr(unsafe { p.u.add(off) }, _mm256_xor_si256(s[0], e));
            }
            off += 32;
        }
    }
}

/// The extension receiver (knows every leaf).
pub struct IknpReceiver {
    k: usize,
    /// (128/k) groups × 2^k leaves, group g's leaf x at g·2^k + x.
    leaves: Vec<Cipher>,
    /// PRG blocks used per leaf stream so far (= index / 128).
    blocks: u128,
    scratch: Scratch,
    /// The consistency check ([`check`]), when on.
    check: Option<ReceiverCheck>,
}

/// A call's choice bits: one vector for every group (the repetition code), or a column per group.
#[derive(Clone, Copy)]
enum Choices<'a> {
    One(&'a [u8]),
    Groups(&'a [u8]),
}

/// Rows a call extends: `count` rounded up to 128, and [`CHECK_ROWS`] more when checked.
fn call_rows(count: usize, checked: bool) -> usize {
    rounded(count) + if checked { CHECK_ROWS } else { 0 }
}

/// Message bytes of a call: 128/k columns of [`call_rows`] bits, and the check's
/// [`TRAILER`] when checked.
fn call_message_len(count: usize, k: usize, checked: bool) -> usize {
    message_len(call_rows(count, checked), k) + if checked { TRAILER } else { 0 }
}

impl IknpReceiver {
    /// IKNP. `k0`, `k1`: the base-OT sender's keys, 128 × 16 bytes each.
    pub fn new(k0: &[u8], k1: &[u8]) -> Result<Self, String> {
        check_keys(k0, "k0")?;
        check_keys(k1, "k1")?;
        let leaves = ciphers(k1.chunks_exact(BLOCK).zip(k0.chunks_exact(BLOCK)).flat_map(|(a, b)| [a, b]));
        Ok(IknpReceiver { k: 1, leaves, blocks: 0, scratch: Scratch::default(), check: None })
    }

    /// SoftSpoken with groups of `k` (1 = IKNP, `seed` then unused): the receiver and the setup
    /// message for the sender (empty for k = 1). `seed`: 16 random bytes, the trees' roots.
    pub fn soft(k0: &[u8], k1: &[u8], k: usize, seed: &[u8]) -> Result<(Self, Vec<u8>), String> {
        check_k(k)?;
        let seed: &pprf::Seed = seed.try_into().map_err(|_| format!("seed must be {BLOCK} random bytes, got {}", seed.len()))?;
        if k == 1 {
            return Ok((Self::new(k0, k1)?, Vec::new()));
        }
        check_keys(k0, "k0")?;
        check_keys(k1, "k1")?;
        let (leaves, setup) = pprf::expand(k0, k1, k, seed);
        Ok((IknpReceiver { k, leaves: ciphers(leaves.iter().map(|s| &s[..])), blocks: 0, scratch: Scratch::default(),
                           check: None }, setup))
    }

    /// Base OTs per group (1 = IKNP).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Turns the consistency check ([`check`]) on for every later call: `context` the 16 bytes
    /// both sides agree on (the session, pair and direction), `seed` 16 secret random bytes (the
    /// extra rows' choice bits). The sender must turn it on with the same context before the
    /// same call.
    pub fn enable_check(&mut self, context: &[u8], seed: &[u8]) -> Result<(), String> {
        self.check = Some(ReceiverCheck::new(context, seed)?);
        Ok(())
    }

    /// Whether calls are checked.
    pub fn checked(&self) -> bool {
        self.check.is_some()
    }

    /// Bytes of the message for `count` OTs (with the check's extra rows and trailer when on).
    pub fn message_len(&self, count: usize) -> usize {
        call_message_len(count, self.k, self.checked())
    }

    /// OTs extended so far (rounded counts, with the check's extra rows).
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

    /// [`extend`](Self::extend) with a choice vector per group (SoftSpoken's *subspace* VOLE,
    /// Roy 2022 §3.2, with the identity code on the groups): `columns` holds 128/k columns of
    /// `rounded(count) / 8` bytes, column g the choice bits of group g, and row j of q becomes
    /// t_j ⊕ (c_j ∗ Δ), c_j the row's 128/k bits, each bit scaling its group's k bits of Δ
    /// (bits of rows past `count` are used as given; those rows are discarded). Unchecked calls
    /// only: the consistency check is for one choice vector.
    pub fn extend_groups(&mut self, columns: &[u8], count: usize, u: &mut [u8], t: &mut [u8]) -> Result<(), String> {
        check_count(count)?;
        if self.check.is_some() {
            return Err("a checked extension takes one choice vector, not one per group".into());
        }
        let want = rounded(count) / 8 * (KAPPA / self.k);
        if columns.len() != want {
            return Err(format!("{count} OTs in {} groups need {want} bytes of choice columns, got {}", KAPPA / self.k,
                               columns.len()));
        }
        assert!(t.len() == count * BLOCK);
        self.run_with(Choices::Groups(columns), count, u, Sink::<NoFuse>::Rows(t))
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

    /// [`extend`](Self::extend) and the receiver's half of [`cot::recv`] before the corrections
    /// arrive, without materialising t: `pads` (E × K, E = count / ℓ) gets the pad sums of
    /// [`cot::Receiver`]; [`cot::add_corrections`] then makes them the shares.
    #[allow(clippy::too_many_arguments)]
    pub fn extend_cot(&mut self, choices: &[u8], count: usize, domain: u64, start: u64, m: &[cot::Modulus],
                      bits: usize, u: &mut [u8], pads: &mut [u64]) -> Result<(), String> {
        if bits == 0 || !count.is_multiple_of(bits) || pads.len() != count / bits * m.len() {
            return Err(format!("{count} OTs are not {} entries of {bits} bits with {} columns",
                               pads.len() / m.len().max(1), m.len()));
        }
        let mut cot = cot::Receiver::new(domain, start, m, bits, pads);
        self.run(choices, count, u, Sink::Fused(|first: usize, rows: &[u8]| cot.rows(first, rows)))
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

    fn run<F: FnMut(usize, &[u8])>(&mut self, choices: &[u8], count: usize, u: &mut [u8], sink: Sink<F>)
                                   -> Result<(), String> {
        check_count(count)?;
        let have = count.div_ceil(8);
        if choices.len() < have {
            return Err(format!("{count} OTs need {have} bytes of packed choice bits, got {}", choices.len()));
        }
        self.run_with(Choices::One(choices), count, u, sink)
    }

    fn run_with<F: FnMut(usize, &[u8])>(&mut self, choices: Choices, count: usize, u: &mut [u8], mut sink: Sink<F>)
                                        -> Result<(), String> {
        let have = count.div_ceil(8);
        let k = self.k;
        assert!(u.len() == self.message_len(count));
        let checked = self.check.as_ref();
        let (m, n) = (call_rows(count, checked.is_some()), 1usize << k);
        let col_len = m / 8;
        // the check: its transcript, and the sums x = Σ χ_j r_j, t̃ = Σ χ_j t_j over the call
        let mut transcript = checked.map(|c| Transcript::new(&c.context, k, self.index(), count as u64));
        let (mut x_sum, mut t_sum) = (0u128, 0u128);
        let extra_from = rounded(count) / 8; // byte of r where the check's random rows begin
        self.scratch.ready(k);
        let Scratch { cols, streams, rows: scratch_rows } = &mut self.scratch;
        // this chunk's choice bits r, zero-padded past `count` (bits of the last byte included)
        let mut r = [0u8; CHUNK / 8];
        let mut start = 0;
        while start < m {
            let rows = CHUNK.min(m - start);
            let (bytes, off) = (rows / 8, start / 8);
            let counter = self.blocks + (start / KAPPA) as u128;
            let cols = &mut cols[..bytes * KAPPA];
            let streams = &mut streams[..bytes * n];
            let r = &mut r[..bytes];
            // past `have` (the check's extra rows may start a chunk of their own) nothing is given
            let given = have.saturating_sub(off).min(bytes);
            if let Choices::One(choices) = choices {
                if given > 0 {
                    r[..given].copy_from_slice(&choices[off..off + given]);
                }
            }
            r[given..].fill(0);
            if !count.is_multiple_of(8) && (off..off + bytes).contains(&(count / 8)) {
                r[count / 8 - off] &= (1u8 << (count % 8)) - 1;
            }
            if let Some(c) = checked {
                // the extra rows (whole 128-row blocks) take random choices
                if off + bytes > extra_from {
                    let from = extra_from.max(off);
                    c.extra_choices(self.blocks + (from * 8 / KAPPA) as u128, &mut r[from - off..]);
                }
            }
            for (g, (leaves, group_cols)) in self.leaves.chunks_exact(n).zip(cols.chunks_exact_mut(k * bytes)).enumerate() {
                for (x, (leaf, s)) in leaves.iter().zip(streams.chunks_exact_mut(bytes)).enumerate() {
                    // k = 1: the column is stream 1 (see `fold`)
                    leaf.ctr(counter, if k == 1 && x == 1 { &mut *group_cols } else { s });
                }
                let r_g = match choices {
                    Choices::One(_) => &*r,
                    Choices::Groups(columns) => &columns[g * col_len + off..g * col_len + off + bytes],
                };
                fold::receiver(k, streams, bytes, r_g, group_cols, &mut u[g * col_len + off..g * col_len + off + bytes]);
            }
            let live = rows.min(count.saturating_sub(start));
            match &mut transcript {
                None => sink.chunk(cols, start, live, scratch_rows),
                Some(tr) => {
                    let weights = tr.next(u, KAPPA / k, col_len, off, bytes);
                    let all = &mut scratch_rows[..rows * BLOCK];
                    transpose_chunk(cols, rows, all);
                    t_sum ^= weights.rows(all);
                    x_sum ^= weights.bits(r);
                    sink.transposed(start, &all[..live * BLOCK]);
                }
            }
            start += rows;
        }
        if checked.is_some() {
            let tail = &mut u[m / 8 * (KAPPA / k)..];
            tail[..BLOCK].copy_from_slice(&x_sum.to_le_bytes());
            tail[BLOCK..].copy_from_slice(&t_sum.to_le_bytes());
        }
        self.blocks += (m / KAPPA) as u128;
        Ok(())
    }
}

/// The extension sender (knows every leaf but α per group, and Δ).
pub struct IknpSender {
    k: usize,
    /// (128/k) groups × (2^k − 1) leaves, group g's leaf y = x ⊕ α (y ≥ 1) at g·(2^k − 1) + y − 1.
    leaves: Vec<Cipher>,
    delta: [u8; BLOCK],
    blocks: u128,
    scratch: Scratch,
    /// The consistency check's context, when on.
    check: Option<[u8; BLOCK]>,
    /// A call failed the check: the extension is not used again (its Δ may be partly exposed).
    failed: bool,
}

/// What a sender says when a call fails the check.
pub const FAILED: &str = "the OT extension failed the consistency check: the receiver's message does not come from \
                          one vector of choice bits (a deviating receiver probing Δ); this extension is not used again";
/// What a sender says to any call after that.
pub const FAILED_BEFORE: &str = "this OT extension failed its consistency check earlier and is not used again";

fn delta_bytes(delta: &[u8]) -> Result<[u8; BLOCK], String> {
    delta.try_into().map_err(|_| format!("delta must be {BLOCK} bytes, got {}", delta.len()))
}

impl IknpSender {
    /// IKNP. `keys`: the base-OT receiver's keys (128 × 16 bytes); `delta`: its 128 choice bits.
    pub fn new(keys: &[u8], delta: &[u8]) -> Result<Self, String> {
        let delta = delta_bytes(delta)?;
        check_keys(keys, "the base keys")?;
        Ok(IknpSender { k: 1, leaves: ciphers(keys.chunks_exact(BLOCK)), delta, blocks: 0, scratch: Scratch::default(),
                        check: None, failed: false })
    }

    /// SoftSpoken with groups of `k` (1 = IKNP): `keys`, `delta` as for [`new`](Self::new),
    /// `setup` the receiver's setup message ([`pprf::SETUP_LEN`] bytes; empty for k = 1).
    pub fn soft(keys: &[u8], delta: &[u8], k: usize, setup: &[u8]) -> Result<Self, String> {
        check_k(k)?;
        if k == 1 {
            if !setup.is_empty() {
                return Err(format!("the setup message for k = 1 (IKNP) must be empty, got {} bytes", setup.len()));
            }
            return Self::new(keys, delta);
        }
        let delta = delta_bytes(delta)?;
        check_keys(keys, "the base keys")?;
        let leaves = pprf::puncture(keys, &delta, k, setup)?;
        Ok(IknpSender { k, leaves: ciphers(leaves.iter().map(|s| &s[..])), delta, blocks: 0, scratch: Scratch::default(),
                        check: None, failed: false })
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Turns the consistency check ([`check`]) on for every later call; `context` as the
    /// receiver's [`IknpReceiver::enable_check`].
    pub fn enable_check(&mut self, context: &[u8]) -> Result<(), String> {
        self.check = Some(check::context_bytes(context)?);
        Ok(())
    }

    /// Whether calls are checked.
    pub fn checked(&self) -> bool {
        self.check.is_some()
    }

    /// Whether a call failed the check (every later call is refused).
    pub fn failed(&self) -> bool {
        self.failed
    }

    pub fn message_len(&self, count: usize) -> usize {
        call_message_len(count, self.k, self.checked())
    }

    /// The receiver's message for `count` OTs has the right length (and the extension has not
    /// failed its check before).
    pub fn check_message(&self, u: &[u8], count: usize) -> Result<(), String> {
        if self.failed {
            return Err(FAILED_BEFORE.into());
        }
        check_count(count)?; // before any length is computed from it (a count near usize::MAX overflows)
        let want = self.message_len(count);
        if u.len() != want {
            return Err(format!("the {} message for {count} OTs must be {want} bytes, got {}", protocol(self.k), u.len()));
        }
        Ok(())
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
        if !count.is_multiple_of(bits) || offsets.len() != count / bits * m.len() || corrections.len() != count * m.len()
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
        self.check_message(u, count)?;
        let k = self.k;
        let (m, n) = (call_rows(count, self.check.is_some()), 1usize << k);
        let col_len = m / 8;
        let delta = load(&self.delta);
        let mut transcript = self.check.as_ref().map(|c| Transcript::new(c, k, self.index(), count as u64));
        let mut q_sum = 0u128;
        self.scratch.ready(k);
        let Scratch { cols, streams, rows: scratch_rows } = &mut self.scratch;
        let mut start = 0;
        while start < m {
            let rows = CHUNK.min(m - start);
            let (bytes, off) = (rows / 8, start / 8);
            let counter = self.blocks + (start / KAPPA) as u128;
            let cols = &mut cols[..bytes * KAPPA];
            let streams = &mut streams[..bytes * n];
            for (g, (leaves, group_cols)) in self.leaves.chunks_exact(n - 1).zip(cols.chunks_exact_mut(k * bytes)).enumerate() {
                // slot 0 (the punctured leaf) stays as it is: the fold never reads it; for k = 1 the
                // column is stream 1 (see `fold`)
                for (leaf, s) in leaves.iter().zip(streams.chunks_exact_mut(bytes).skip(1)) {
                    leaf.ctr(counter, if k == 1 { &mut *group_cols } else { s });
                }
                let mask = (delta >> (g * k)) as u32 & ((1 << k) - 1);
                fold::sender(k, streams, bytes, &u[g * col_len + off..g * col_len + off + bytes], mask, group_cols);
            }
            let live = rows.min(count.saturating_sub(start));
            match &mut transcript {
                None => sink.chunk(cols, start, live, scratch_rows),
                Some(tr) => {
                    let weights = tr.next(u, KAPPA / k, col_len, off, bytes);
                    let all = &mut scratch_rows[..rows * BLOCK];
                    transpose_chunk(cols, rows, all);
                    q_sum ^= weights.rows(all);
                    sink.transposed(start, &all[..live * BLOCK]);
                }
            }
            start += rows;
        }
        self.blocks += (m / KAPPA) as u128;
        if transcript.is_some() && !check::verify(&u[m / 8 * (KAPPA / k)..], q_sum, delta) {
            // the outputs written so far derive from rows that may expose Δ: the caller must
            // drop them (the bindings do: an error returns nothing), and the extension is done
            self.failed = true;
            return Err(FAILED.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::xor_into;
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
    fn base_keys() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
        let (k0, k1, delta) = (bytes(2048, 1), bytes(2048, 2), bytes(16, 3));
        let chosen: Vec<u8> = (0..KAPPA).flat_map(|i| {
            let src = if (delta[i >> 3] >> (i & 7)) & 1 == 1 { &k1 } else { &k0 };
            src[i * 16..(i + 1) * 16].to_vec()
        }).collect();
        (k0, k1, chosen, delta)
    }

    fn pair() -> (IknpReceiver, IknpSender) {
        let (k0, k1, chosen, delta) = base_keys();
        (IknpReceiver::new(&k0, &k1).unwrap(), IknpSender::new(&chosen, &delta).unwrap())
    }

    /// A connected SoftSpoken pair with groups of `k` (k = 1: IKNP).
    fn soft_pair(k: usize) -> (IknpReceiver, IknpSender) {
        let (k0, k1, chosen, delta) = base_keys();
        let (recv, setup) = IknpReceiver::soft(&k0, &k1, k, &bytes(16, 4)).unwrap();
        assert_eq!(setup.len(), if k == 1 { 0 } else { pprf::SETUP_LEN });
        (recv, IknpSender::soft(&chosen, &delta, k, &setup).unwrap())
    }

    /// Per-group choices: row j of q is t_j ⊕ (c_j ∗ Δ), group g's k bits of Δ where bit g of
    /// c_j is set, for every k and counts that end inside a byte, a tile and a chunk.
    #[test]
    fn group_choices_scale_their_own_group_of_delta() {
        for k in KS {
            let (mut recv, mut send) = soft_pair(k);
            let delta = load(&send.delta());
            let groups = KAPPA / k;
            for (count, seed) in [(1usize, 1u64), (200, 2), (CHUNK + 77, 3), (3 * CHUNK, 4)] {
                let col_len = rounded(count) / 8;
                let columns = bytes(groups * col_len, seed);
                let mut u = vec![0u8; recv.message_len(count)];
                let mut t = vec![0u8; count * BLOCK];
                recv.extend_groups(&columns, count, &mut u, &mut t).unwrap();
                let mut q = vec![0u8; count * BLOCK];
                send.extend(&u, count, &mut q).unwrap();
                for j in 0..count {
                    let mut want = load(&t[j * BLOCK..]);
                    for g in 0..groups {
                        if (columns[g * col_len + (j >> 3)] >> (j & 7)) & 1 == 1 {
                            let ones = ((1u128 << k) - 1) << (g * k);
                            want ^= delta & ones;
                        }
                    }
                    assert_eq!(load(&q[j * BLOCK..]), want, "k = {k}, count = {count}, row {j}");
                }
            }
            // wrong column length, and a checked extension, are refused
            let mut u = vec![0u8; recv.message_len(128)];
            let mut t = vec![0u8; 128 * BLOCK];
            assert!(recv.extend_groups(&vec![0u8; groups * 16 - 1], 128, &mut u, &mut t).is_err());
            recv.enable_check(&[0u8; 16], &[1u8; 16]).unwrap();
            let mut u = vec![0u8; recv.message_len(128)];
            assert!(recv.extend_groups(&vec![0u8; groups * 16], 128, &mut u, &mut t).is_err());
        }
    }

    #[test]
    fn a_count_near_usize_max_is_refused_not_overflowed() {
        let (_, send) = pair();
        for count in [usize::MAX, usize::MAX - 127, MAX_COUNT + 1] {
            assert!(send.check_message(&[], count).unwrap_err().contains("at most"));
        }
    }

    #[test]
    fn q_is_t_xor_choice_times_delta_over_many_calls() {
        for k in KS {
            correlated_over_many_calls(soft_pair(k), k);
        }
    }

    fn correlated_over_many_calls((mut recv, mut send): (IknpReceiver, IknpSender), k: usize) {
        assert_eq!((recv.k(), send.k()), (k, k));
        let delta = send.delta();
        let mut seed = 10;
        let mut all_t = Vec::new();
        for count in [1usize, 127, 128, 1000, 4097, CHUNK + 129, 0, 2 * CHUNK, 3, CHUNK - 101] {
            seed += 1;
            // odd counts: exactly the bytes needed (the check's extra rows may start a chunk past
            // them); even: longer than needed, the extra ignored
            let choices = bytes(count.div_ceil(8) + if count % 2 == 0 { 2 } else { 0 }, seed);
            // 128/k bits per (rounded) OT
            assert_eq!(message_len(count, k) * 8, rounded(count) * KAPPA / k);
            let mut u = vec![0u8; recv.message_len(count)];
            let mut t = vec![0u8; count * 16];
            let mut q = vec![0u8; count * 16];
            let before = recv.index();
            recv.extend(&choices, count, &mut u, &mut t).unwrap();
            send.extend(&u, count, &mut q).unwrap();
            assert_eq!(recv.index(), before + call_rows(count, recv.checked()) as u64);
            assert_eq!(recv.index(), send.index());
            for j in 0..count {
                let b = (choices[j >> 3] >> (j & 7)) & 1;
                for k in 0..16 {
                    assert_eq!(q[j * 16 + k], t[j * 16 + k] ^ ((b * 0xff) & delta[k]), "row {j} of {count}, k {}", recv.k);
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

    /// A portable fold kernel, called directly.
    type Fold = unsafe fn(&fold::Lanes, usize);

    /// The fold kernels (AVX2 with its 16-byte tail, and portable alone) against the definition,
    /// bit by bit: receiver v_c, u ⊕ r; sender (slot 0 ignored) v_c ⊕ mask_c·msg.
    #[test]
    fn fold_equals_the_definition() {
        for k in KS {
            for len in [16usize, 32, 48, 1024 + 16] {
                let n = 1 << k;
                let streams = bytes(n * len, (k * 100 + len) as u64);
                let extra = bytes(len, 99);
                let stream = |y: usize| &streams[y * len..(y + 1) * len];
                let sum = |pick: &dyn Fn(usize) -> bool| -> Vec<u8> {
                    let mut acc = vec![0u8; len];
                    for y in (0..n).filter(|&y| pick(y)) {
                        xor_into(&mut acc, stream(y));
                    }
                    acc
                };
                // receiver; k = 1 keeps stream 1 in the column
                let mut want_u = sum(&|_| true);
                xor_into(&mut want_u, &extra);
                let want_cols: Vec<u8> = (0..k).flat_map(|c| sum(&|y| (y >> c) & 1 == 1)).collect();
                for portable in [false, true] {
                    let (mut cols, mut u) = (vec![7u8; k * len], vec![7u8; len]);
                    if k == 1 {
                        cols.copy_from_slice(stream(1));
                    }
                    let p = fold::Lanes::new(&streams, len, &extra, 0, &mut cols, Some(&mut u));
                    let direct: Option<Fold> = match (k, portable) {
                        (1, true) => Some(fold::portable::<1, true, true>),
                        (2, true) => Some(fold::portable::<2, true, true>),
                        (4, true) => Some(fold::portable::<4, true, true>),
                        _ => None,
                    };
                    match direct {
                        // SAFETY: `p` covers live buffers of the sizes `fold::receiver` checks
                        // (2^k streams, k columns, `extra` and `u` of `len` bytes, len % 16 == 0).
                        Some(f) => unsafe { f(&p, 0) },
                        None => fold::receiver(k, &streams, len, &extra, &mut cols, &mut u),
                    }
                    assert!(cols == want_cols && u == want_u, "receiver k {k} len {len} portable {portable}");
                }
                // sender: slot 0 is not read
                let mut blanked = streams.clone();
                blanked[..len].fill(0xa5);
                for mask in 0..1u32 << k {
                    let want: Vec<u8> = (0..k).flat_map(|c| {
                        let mut col = sum(&|y| y != 0 && (y >> c) & 1 == 1);
                        if (mask >> c) & 1 == 1 {
                            xor_into(&mut col, &extra);
                        }
                        col
                    }).collect();
                    for portable in [false, true] {
                        let mut cols = if k == 1 { stream(1).to_vec() } else { vec![7u8; k * len] };
                        let p = fold::Lanes::new(&blanked, len, &extra, mask, &mut cols, None);
                        let direct: Option<Fold> = match (k, portable, mask != 0) {
                            (1, true, true) => Some(fold::portable::<1, false, true>),
                            (2, true, false) => Some(fold::portable::<2, false, false>),
                            (2, true, true) => Some(fold::portable::<2, false, true>),
                            (4, true, true) => Some(fold::portable::<4, false, true>),
                            _ => None,
                        };
                        match direct {
                            // SAFETY: `p` covers live buffers of the sizes `fold::sender` checks.
                            Some(f) => unsafe { f(&p, 0) },
                            None => fold::sender(k, &blanked, len, &extra, mask, &mut cols),
                        }
                        assert!(cols == want, "sender k {k} len {len} mask {mask} portable {portable}");
                    }
                }
            }
        }
    }

    /// k = 1 through `soft` is IKNP itself, bit for bit; SoftSpoken's rows differ from IKNP's
    /// (other PRG keys) while Δ stays the base-OT choice bits.
    #[test]
    fn soft_with_k_1_is_iknp() {
        let count = CHUNK + 300;
        let choices = bytes(count.div_ceil(8), 7);
        let mut outs = Vec::new();
        for (mut recv, mut send) in [pair(), soft_pair(1), soft_pair(2)] {
            let mut u = vec![0u8; recv.message_len(count)];
            let (mut t, mut q) = (vec![0u8; count * 16], vec![0u8; count * 16]);
            recv.extend(&choices, count, &mut u, &mut t).unwrap();
            send.extend(&u, count, &mut q).unwrap();
            assert_eq!(send.delta()[..], base_keys().3[..]);
            outs.push((u, t, q));
        }
        assert!(outs[0] == outs[1]);
        assert!(outs[0].1 != outs[2].1 && outs[0].0.len() == 2 * outs[2].0.len());
    }

    #[test]
    fn a_wrong_setup_message_is_rejected_or_does_not_correlate() {
        let (k0, k1, chosen, delta) = base_keys();
        for k in [2usize, 4] {
            let (mut recv, setup) = IknpReceiver::soft(&k0, &k1, k, &[5u8; 16]).unwrap();
            let err = IknpSender::soft(&chosen, &delta, k, &setup[1..]).err().unwrap();
            assert!(err.contains("setup message must be 4096 bytes"), "{err}");
            let mut bad = setup.clone();
            for i in 0..2 * KAPPA {
                bad[i * BLOCK] ^= 1; // every block: whichever side the sender opens
            }
            let mut send = IknpSender::soft(&chosen, &delta, k, &bad).unwrap();
            let count = 1000;
            let mut u = vec![0u8; message_len(count, k)];
            let (mut t, mut q) = (vec![0u8; count * 16], vec![0u8; count * 16]);
            recv.extend(&[0u8; 125], count, &mut u, &mut t).unwrap();
            send.extend(&u, count, &mut q).unwrap();
            // all choice bits 0: q should equal t; almost no row does
            let equal = t.chunks_exact(16).zip(q.chunks_exact(16)).filter(|(a, b)| a == b).count();
            assert_eq!(equal, 0, "k {k}");
            // and a message of the wrong length is refused, naming the protocol
            let err = send.extend(&u[1..], count, &mut q).unwrap_err();
            assert!(err.contains(&format!("SoftSpoken (k = {k}) message for 1000 OTs must be {} bytes", u.len())), "{err}");
        }
        assert!(IknpSender::soft(&chosen, &delta, 1, &[0u8; 16]).err().unwrap().contains("must be empty"));
        for k in [0usize, 3, 5, 8, 128] {
            let err = IknpReceiver::soft(&k0, &k1, k, &[0u8; 16]).err().unwrap();
            assert!(err.contains("k must be 1 (IKNP), 2 or 4"), "{err}");
            assert_eq!(err.contains(&format!("which {k} does not")), matches!(k, 0 | 3 | 5), "{err}");
            assert!(IknpSender::soft(&chosen, &delta, k, &[0u8; 4096]).is_err());
        }
        assert!(IknpReceiver::soft(&k0, &k1, 2, &[0u8; 15]).err().unwrap().contains("seed"));
    }

    #[test]
    fn rows_are_the_transposed_prg_columns() {
        let (k0, k1) = (bytes(2048, 5), bytes(2048, 6));
        let mut recv = IknpReceiver::new(&k0, &k1).unwrap();
        let count = 300;
        let mut u = vec![0u8; message_len(count, 1)];
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
        for k in KS {
            fused_equal_unfused((soft_pair(k), soft_pair(k)), k);
        }
    }

    fn fused_equal_unfused(((mut r1, mut s1), (mut r2, mut s2)): ((IknpReceiver, IknpSender), (IknpReceiver, IknpSender)), k: usize) {
        assert_eq!((r1.k(), s2.k()), (k, k));
        let delta = load(&s1.delta());
        let domain = 0x3300;
        let m = cot::moduli(&[(1 << 61) - 1, 0]).unwrap();
        let mut seed = 40;
        for (count, bits) in [(1usize, 1usize), (130, 13), (CHUNK + 61 * 3, 61), (2 * CHUNK + 64 * 7, 64), (4097, 17), (0, 5),
                              (CHUNK - 64 * 2, 64)] {
            seed += 1;
            // the last: exactly the bytes needed, the check's extra rows a chunk of their own
            let choices = bytes(count.div_ceil(8) + usize::from(count != CHUNK - 64 * 2), seed);
            let w = tccr::bit_words(count);
            let (mut u1, mut u2) = (vec![0u8; r1.message_len(count)], vec![0u8; r2.message_len(count)]);
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
            let (mut u1, mut u2) = (vec![0u8; r1.message_len(rows)], vec![0u8; r2.message_len(rows)]);
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

    /// A checked pair (the same context on both sides).
    fn checked_pair(k: usize) -> (IknpReceiver, IknpSender) {
        let (mut recv, mut send) = soft_pair(k);
        recv.enable_check(&[9u8; 16], &bytes(16, 77)).unwrap();
        send.enable_check(&[9u8; 16]).unwrap();
        (recv, send)
    }

    #[test]
    fn checked_calls_correlate_and_pass() {
        for k in KS {
            let (recv, send) = checked_pair(k);
            assert_eq!(recv.message_len(1000), message_len(1024 + CHECK_ROWS, k) + TRAILER);
            correlated_over_many_calls((recv, send), k);
        }
    }

    #[test]
    fn checked_fused_calls_equal_checked_extend_then_kernel() {
        for k in KS {
            fused_equal_unfused((checked_pair(k), checked_pair(k)), k);
        }
    }

    /// A malicious receiver: the rows of the call (unchecked extension of all of them, the extra
    /// rows' choices its own), its message's columns `cols` tampered by `tamper`, and the
    /// trailer it forges from its rows, with its guess `guess` XORed into t̃.
    fn forged(k: usize, count: usize, tamper: &dyn Fn(&mut [u8], usize), guess: u128) -> (Vec<u8>, IknpSender) {
        let (mut plain, mut send) = soft_pair(k);
        send.enable_check(&[9u8; 16]).unwrap();
        let m = rounded(count) + CHECK_ROWS;
        let choices = bytes(m / 8, 5);
        let mut u = vec![0u8; message_len(m, k) + TRAILER];
        let mut t = vec![0u8; m * 16];
        let (cols, _) = u.split_at_mut(message_len(m, k));
        plain.extend(&choices, m, cols, &mut t).unwrap();
        tamper(cols, m / 8);
        // the receiver's best trailer: the honest sums under the χ of the tampered message
        let mut tr = Transcript::new(&[9u8; 16], k, 0, count as u64);
        let (mut x, mut ts) = (0u128, 0u128);
        for c in 0..m.div_ceil(CHUNK) {
            let rows = CHUNK.min(m - c * CHUNK);
            let w = tr.next(cols, KAPPA / k, m / 8, c * CHUNK / 8, rows / 8);
            ts ^= w.rows(&t[c * CHUNK * 16..(c * CHUNK + rows) * 16]);
            x ^= w.bits(&choices[c * CHUNK / 8..(c * CHUNK + rows) / 8]);
        }
        let n = message_len(m, k);
        u[n..n + 16].copy_from_slice(&x.to_le_bytes());
        u[n + 16..].copy_from_slice(&(ts ^ guess).to_le_bytes());
        (u, send)
    }

    #[test]
    fn a_receiver_that_deviates_is_caught_unless_it_guesses_delta() {
        let delta = load(&base_keys().3);
        let count = CHUNK + 1000;
        // honest forgery passes (the model above is the receiver's computation)
        for k in KS {
            let (u, mut send) = forged(k, count, &|_, _| {}, 0);
            send.extend(&u, count, &mut vec![0u8; count * 16]).unwrap();
        }
        // k = 1: column i's choice vector flipped at every row; the receiver bets Δ_i = 0
        // (no correction) or Δ_i = 1 (t̃ + (Σ_j χ_j)·X^i, which it cannot know before the
        // hash: here it bets by not correcting). It passes iff Δ_i = 0: one bit, probability 1/2.
        for i in [0usize, 5, 77, 127] {
            let flip = |cols: &mut [u8], len: usize| cols[i * len..(i + 1) * len].iter_mut().for_each(|b| *b ^= 0xff);
            let (u, mut send) = forged(1, count, &flip, 0);
            let got = send.extend(&u, count, &mut vec![0u8; count * 16]);
            if (delta >> i) & 1 == 1 {
                assert_eq!(got.unwrap_err(), FAILED, "column {i}");
                assert!(send.failed());
                let err = send.extend(&vec![0u8; send.message_len(10)], 10, &mut [0u8; 160]).unwrap_err();
                assert_eq!(err, FAILED_BEFORE);
            } else {
                got.unwrap();
            }
        }
        // a different r per group (k = 2, 4), or one flipped bit in each of many columns (k = 1):
        // passing needs every touched Δ bit guessed
        for k in KS {
            let per_group = |cols: &mut [u8], len: usize| {
                for g in 0..KAPPA / k {
                    cols[g * len + g % len] ^= 1 << (g % 8); // group g's r differs at row 8 (g % len) + g % 8
                }
            };
            let (u, mut send) = forged(k, count, &per_group, 0);
            assert_eq!(send.extend(&u, count, &mut vec![0u8; count * 16]).unwrap_err(), FAILED, "k {k}");
        }
        // a tampered trailer or a tampered row after the trailer was made
        for k in KS {
            let (mut recv, mut send) = checked_pair(k);
            let mut u = vec![0u8; recv.message_len(count)];
            let mut t = vec![0u8; count * 16];
            recv.extend(&bytes(count / 8 + 1, 3), count, &mut u, &mut t).unwrap();
            let mut bad = u.clone();
            let n = bad.len();
            bad[n - 1] ^= 0x80;
            assert_eq!(send.extend(&bad, count, &mut vec![0u8; count * 16]).unwrap_err(), FAILED);
        }
    }

    #[test]
    fn bad_inputs_are_rejected() {
        assert!(IknpReceiver::new(&[0u8; 2047], &[0u8; 2048]).is_err());
        assert!(IknpSender::new(&[0u8; 2048], &[0u8; 15]).is_err());
        let (mut recv, mut send) = pair();
        let mut t = vec![0u8; 200 * 16];
        assert!(recv.extend(&[0u8; 24], 200, &mut vec![0u8; message_len(200, 1)], &mut t).is_err());
        let err = send.extend(&vec![0u8; message_len(200, 1) - 1], 200, &mut t).unwrap_err();
        assert!(err.contains("must be"), "{err}");
        assert_eq!(send.index(), 0);
    }
}
