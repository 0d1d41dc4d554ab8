//! Correlated OT over Z_q from IKNP rows, several offsets per choice bit, and Gilboa's product.
//!
//! The receiver holds values x_e < 2^ℓ (e < E); IKNP row r = e·ℓ + i carries bit i of x_e (lay
//! the choice bits out with [`pack_choice_bits`]). The sender holds offsets a_{e,c} < q_c for K
//! columns c, each with its own modulus q_c (odd, 3 ≤ q_c < 2^62) or 2^64 (written 0).
//!
//! For row r (OT index j = start + r) and column c the sender's two random-OT pads are
//! p0 = H(q_r, τ(j, c)) mod q_c and p1 = H(q_r ⊕ Δ, τ(j, c)) mod q_c: the whole 128-bit hash
//! (little-endian) reduced, at statistical distance ≤ q_c/2^128 < 2^-66 from uniform (no 64-bit
//! modulus bias); for 2^64 its low 64 bits. The receiver's pad is p_{b_r} = H(t_r, τ(j, c)).
//!
//! Sender sends corrections d_{e,i,c} = p0 − p1 + a_{e,c}·2^i and keeps s_{e,c} = −Σ_i p0.
//! Receiver: y = p_b + b·d = p0 + b·a·2^i, and keeps s'_{e,c} = Σ_i y. So s + s' = a_{e,c}·x_e
//! (mod q_c): shares of a product. ℓ = 1 with x ∈ {0, 1} is plain correlated OT ("private bit
//! times value"); ℓ = bit length with K = 1 is Gilboa's oblivious linear evaluation.
//!
//! Single use: every (row, column) pad feeds exactly one correction; the caller never hashes the
//! same rows with the same domain again.

use super::block::{load, BLOCK};
use super::tccr::{finish, permute, BATCH};

/// Z_q for an odd 3 ≤ q < 2^62, or Z_{2^64} (q = 0), with a Barrett constant for 128-bit inputs.
#[derive(Clone, Copy, Debug)]
pub struct Modulus {
    q: u64,
    /// floor(2^128 / q), split in halves (unused for 2^64)
    mu_hi: u64,
    mu_lo: u64,
}

impl Modulus {
    pub fn new(q: u64) -> Result<Self, String> {
        if q == 0 {
            return Ok(Modulus { q, mu_hi: 0, mu_lo: 0 });
        }
        if q < 3 || q.is_multiple_of(2) || q >= 1 << 62 {
            return Err(format!("a modulus must be 0 (for 2^64) or odd in [3, 2^62), got {q}"));
        }
        let mu = u128::MAX / q as u128; // = floor(2^128 / q): q is odd, so it does not divide 2^128
        Ok(Modulus { q, mu_hi: (mu >> 64) as u64, mu_lo: mu as u64 })
    }

    pub fn value(&self) -> u64 {
        self.q
    }

    /// Is `a` a residue (`a < q`; anything for 2^64)?
    #[inline(always)]
    pub fn contains(&self, a: u64) -> bool {
        self.q == 0 || a < self.q
    }

    /// `x mod q` for any 128-bit x.
    #[inline(always)]
    pub fn reduce(&self, x: u128) -> u64 {
        if self.q == 0 {
            return x as u64;
        }
        let (x1, x0) = ((x >> 64) as u64, x as u64);
        let hi = |a: u64, b: u64| ((a as u128 * b as u128) >> 64) as u64;
        // floor(x / q) − 3 ≤ estimate ≤ floor(x / q): the dropped partial products and carries
        // cost at most 2, the truncated μ at most 1; so x − estimate·q < 4q < 2^64
        let est = x1.wrapping_mul(self.mu_hi).wrapping_add(hi(x1, self.mu_lo)).wrapping_add(hi(x0, self.mu_hi));
        let mut r = x0.wrapping_sub(est.wrapping_mul(self.q));
        r = r.min(r.wrapping_sub(self.q));
        r = r.min(r.wrapping_sub(self.q));
        r.min(r.wrapping_sub(self.q))
    }

    /// `a + b` for residues a, b.
    #[inline(always)]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        let s = a.wrapping_add(b); // no wrap below 2^62; the ring's own wrap for 2^64
        s.min(s.wrapping_sub(self.q))
    }

    /// `a − b` for residues a, b.
    #[inline(always)]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        let d = a.wrapping_sub(b);
        d.wrapping_add(self.q & 0u64.wrapping_sub((a < b) as u64))
    }
}

/// Checks the moduli (one per column) and returns them ready to use.
pub fn moduli(values: &[u64]) -> Result<Vec<Modulus>, String> {
    if values.is_empty() || values.len() > super::tccr::MAX_COLUMNS {
        return Err(format!("between 1 and {} moduli (columns), got {}", super::tccr::MAX_COLUMNS, values.len()));
    }
    values.iter().enumerate().map(|(c, &q)| Modulus::new(q).map_err(|e| format!("column {c}: {e}"))).collect()
}

/// Bits per value, 1..=64.
pub fn check_bits(bits: usize) -> Result<(), String> {
    if !(1..=64).contains(&bits) {
        return Err(format!("bits must be in 1..=64, got {bits}"));
    }
    Ok(())
}

/// Every value below 2^bits.
pub fn check_values(values: &[u64], bits: usize) -> Result<(), String> {
    if bits < 64 {
        if let Some((e, v)) = values.iter().enumerate().find(|(_, &v)| v >> bits != 0) {
            return Err(format!("choice value {e} ({v}) does not fit in {bits} bits"));
        }
    }
    Ok(())
}

/// `table` (rows of `k` entries) holds residues of the column moduli.
pub fn check_residues(table: &[u64], m: &[Modulus], what: &str) -> Result<(), String> {
    let k = m.len();
    // row by row, branch-free (no division per entry); the position only when one is out
    let bad = table.chunks(k).fold(false, |acc, row| row.iter().zip(m).fold(acc, |a, (&v, md)| a | !md.contains(v)));
    if !bad {
        return Ok(());
    }
    for (n, &v) in table.iter().enumerate() {
        if !m[n % k].contains(v) {
            return Err(format!("{what}: entry {} of column {} is {v}, not below its modulus {}", n / k, n % k, m[n % k].value()));
        }
    }
    Ok(())
}

/// The receiver's IKNP choice bits: bit e·ℓ + i is bit i of `values[e]` (packed LSB-first,
/// `out`: `ceil(E·ℓ / 8)` bytes). Values must fit in ℓ bits ([`check_values`]).
pub fn pack_choice_bits(values: &[u64], bits: usize, out: &mut [u8]) {
    assert_eq!(out.len(), (values.len() * bits).div_ceil(8));
    let (mut acc, mut held, mut pos) = (0u128, 0usize, 0usize);
    for &v in values {
        acc |= (v as u128) << held;
        held += bits;
        while held >= 8 {
            out[pos] = acc as u8;
            pos += 1;
            acc >>= 8;
            held -= 8;
        }
    }
    if held > 0 {
        out[pos] = acc as u8;
    }
}

/// Walks rows r = e·ℓ + i of one batch: yields (e, i) from `first` on.
#[inline(always)]
fn split(first: usize, bits: usize) -> (usize, usize) {
    (first / bits, first % bits)
}

/// Sender. `q`: E·ℓ rows of 16 bytes; `offsets`: E × K; writes `corrections` (E × ℓ × K) and
/// `share` (E × K). Inputs must be validated (row count, offsets below their moduli).
#[allow(clippy::too_many_arguments)]
pub fn send(q: &[u8], delta: u128, domain: u64, start: u64, offsets: &[u64], m: &[Modulus], bits: usize,
            corrections: &mut [u64], share: &mut [u64]) {
    debug_assert!((q.len() / BLOCK).is_multiple_of(bits) && corrections.len() == q.len() / BLOCK * m.len());
    let mut s = Sender::new(delta, domain, start, offsets, m, bits, corrections, share);
    s.rows(0, q);
    s.finish();
}

/// The sender's half fed rows in order, a run at a time: what lets IKNP hand over each chunk of
/// q while it is still in cache ([`super::iknp::IknpSender::extend_cot`]) instead of writing all
/// of q out first. Runs may split an entry's ℓ rows; the doubling offset a·2^i carries over.
pub struct Sender<'a> {
    delta: u128,
    domain: u64,
    start: u64,
    offsets: &'a [u64],
    m: &'a [Modulus],
    bits: usize,
    corrections: &'a mut [u64],
    share: &'a mut [u64],
    /// a·2^i mod q for the current row of each column, doubled row by row
    shifted: Vec<u64>,
}

impl<'a> Sender<'a> {
    /// Outputs as for [`send`]; `share` is zeroed here.
    #[allow(clippy::too_many_arguments)]
    pub fn new(delta: u128, domain: u64, start: u64, offsets: &'a [u64], m: &'a [Modulus], bits: usize,
               corrections: &'a mut [u64], share: &'a mut [u64]) -> Self {
        debug_assert!(offsets.len() == share.len() && share.len() * bits == corrections.len());
        share.fill(0);
        Sender { delta, domain, start, offsets, m, bits, corrections, share, shifted: vec![0; m.len()] }
    }

    /// Rows `first..first + q.len() / 16` (of the whole E·ℓ), in order after the previous run.
    pub fn rows(&mut self, first: usize, q: &[u8]) {
        let (k, bits) = (self.m.len(), self.bits);
        let mut px = [0u8; 2 * BATCH * BLOCK];
        let mut h = [0u8; 2 * BATCH * BLOCK];
        for (b, chunk) in q.chunks(BATCH * BLOCK).enumerate() {
            let n = chunk.len() / BLOCK;
            let first = first + b * BATCH;
            permute(chunk, Some(self.delta), &mut px[..2 * n * BLOCK]);
            for (c, md) in self.m.iter().enumerate() {
                finish(&px[..2 * n * BLOCK], n, self.domain, self.start + first as u64, c as u64, &mut h[..2 * n * BLOCK]);
                let (mut e, mut i) = split(first, bits);
                let s = &mut self.shifted[c];
                for r in 0..n {
                    let p0 = md.reduce(load(&h[r * BLOCK..]));
                    let p1 = md.reduce(load(&h[(n + r) * BLOCK..]));
                    *s = if i == 0 { self.offsets[e * k + c] } else { md.add(*s, *s) };
                    self.corrections[(first + r) * k + c] = md.add(md.sub(p0, p1), *s);
                    self.share[e * k + c] = md.add(self.share[e * k + c], p0);
                    i += 1;
                    if i == bits {
                        i = 0;
                        e += 1;
                    }
                }
            }
        }
    }

    /// After the last row: the share is minus the sum of the p0 pads.
    pub fn finish(self) {
        let k = self.m.len();
        for (n, s) in self.share.iter_mut().enumerate() {
            *s = self.m[n % k].sub(0, *s);
        }
    }
}

/// Receiver. `t`: E·ℓ rows; `choices`: the E values x_e; `corrections`: E × ℓ × K from the
/// sender; writes `share` (E × K). Inputs must be validated (values fit ℓ bits, corrections
/// below their moduli).
#[allow(clippy::too_many_arguments)]
pub fn recv(t: &[u8], domain: u64, start: u64, choices: &[u64], corrections: &[u64], m: &[Modulus], bits: usize,
            share: &mut [u64]) {
    let rows = t.len() / BLOCK;
    debug_assert!(rows.is_multiple_of(bits) && choices.len() == rows / bits && corrections.len() == rows * m.len());
    let mut r = Receiver::new(domain, start, m, bits, share);
    r.rows(0, t);
    add_corrections(share, choices, corrections, m, bits);
}

/// The receiver's half before the corrections arrive, fed rows in order (what lets IKNP hash
/// each chunk of t while it is in cache, [`super::iknp::IknpReceiver::extend_cot`]): `pads`
/// (E × K) gets Σ_i H(t_{e·ℓ+i}, τ) mod q_c, all the receiver needs of t. Then
/// [`add_corrections`] makes them the shares.
pub struct Receiver<'a> {
    domain: u64,
    start: u64,
    m: &'a [Modulus],
    bits: usize,
    pads: &'a mut [u64],
}

impl<'a> Receiver<'a> {
    /// `pads` is zeroed here.
    pub fn new(domain: u64, start: u64, m: &'a [Modulus], bits: usize, pads: &'a mut [u64]) -> Self {
        pads.fill(0);
        Receiver { domain, start, m, bits, pads }
    }

    /// Rows `first..first + t.len() / 16` (of the whole E·ℓ), in order after the previous run.
    pub fn rows(&mut self, first: usize, t: &[u8]) {
        let (k, bits) = (self.m.len(), self.bits);
        let mut px = [0u8; BATCH * BLOCK];
        let mut h = [0u8; BATCH * BLOCK];
        for (b, chunk) in t.chunks(BATCH * BLOCK).enumerate() {
            let n = chunk.len() / BLOCK;
            let first = first + b * BATCH;
            permute(chunk, None, &mut px[..n * BLOCK]);
            for (c, md) in self.m.iter().enumerate() {
                finish(&px[..n * BLOCK], n, self.domain, self.start + first as u64, c as u64, &mut h[..n * BLOCK]);
                let (mut e, mut i) = split(first, bits);
                for r in 0..n {
                    let pad = md.reduce(load(&h[r * BLOCK..]));
                    self.pads[e * k + c] = md.add(self.pads[e * k + c], pad);
                    i += 1;
                    if i == bits {
                        i = 0;
                        e += 1;
                    }
                }
            }
        }
    }
}

/// `share[e, c] += Σ_i bit_i(x_e)·d_{e,i,c}` mod q_c: the receiver's pad sums (from
/// [`Receiver`]) become its shares. Inputs must be validated.
pub fn add_corrections(share: &mut [u64], choices: &[u64], corrections: &[u64], m: &[Modulus], bits: usize) {
    let k = m.len();
    debug_assert!(share.len() == choices.len() * k && corrections.len() == share.len() * bits);
    for ((row, &x), corr) in share.chunks_exact_mut(k).zip(choices).zip(corrections.chunks_exact(bits * k)) {
        for (i, d) in corr.chunks_exact(k).enumerate() {
            let chosen = 0u64.wrapping_sub((x >> i) & 1); // all ones when the bit is set
            for ((s, &d), md) in row.iter_mut().zip(d).zip(m) {
                *s = md.add(*s, d & chosen);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::iknp::{message_len, IknpReceiver, IknpSender};
    use super::*;

    /// Test data (xorshift), shared with the other modules' tests.
    pub(crate) fn words(n: usize, seed: u64) -> Vec<u64> {
        let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
        (0..n).map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }).collect()
    }

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        words(n, seed).into_iter().map(|w| (w >> 40) as u8).collect()
    }

    #[test]
    fn barrett_reduction_is_exact() {
        for q in [3u64, 5, (1 << 61) - 1, (1 << 62) - 1, (1 << 62) - 57, 0xffff_fffb, 1_000_000_007] {
            let md = Modulus::new(q).unwrap();
            let mut xs: Vec<u128> = vec![0, 1, q as u128, q as u128 - 1, u128::MAX, u128::MAX - 1, (q as u128) << 64,
                                         ((q as u128) << 64) - 1, (u128::MAX / q as u128) * q as u128];
            let w = words(2000, q);
            xs.extend(w.chunks_exact(2).map(|p| (p[0] as u128) << 64 | p[1] as u128));
            xs.extend(w.iter().map(|&v| v as u128));
            for x in xs {
                assert_eq!(md.reduce(x), (x % q as u128) as u64, "{x} mod {q}");
            }
            for p in w.chunks_exact(2) {
                let (a, b) = (p[0] % q, p[1] % q);
                assert_eq!(md.add(a, b), ((a as u128 + b as u128) % q as u128) as u64);
                assert_eq!(md.sub(a, b), ((a as u128 + q as u128 - b as u128) % q as u128) as u64);
            }
        }
        let ring = Modulus::new(0).unwrap();
        assert_eq!(ring.reduce(u128::MAX - 5), u64::MAX - 5);
        assert_eq!(ring.add(u64::MAX, 2), 1);
        assert_eq!(ring.sub(1, 2), u64::MAX);
        for bad in [1u64, 2, 4, 1 << 62, (1 << 62) + 1, u64::MAX] {
            assert!(Modulus::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pack_choice_bits_layout() {
        let (values, bits) = (words(37, 4).into_iter().map(|v| v >> (64 - 13)).collect::<Vec<_>>(), 13);
        let mut packed = vec![0u8; (37 * 13usize).div_ceil(8)];
        pack_choice_bits(&values, bits, &mut packed);
        for (e, v) in values.iter().enumerate() {
            for i in 0..bits {
                let r = e * bits + i;
                assert_eq!(((packed[r >> 3] >> (r & 7)) & 1) as u64, (v >> i) & 1);
            }
        }
        let full = words(5, 5);
        let mut packed = vec![0u8; 40];
        pack_choice_bits(&full, 64, &mut packed);
        let back: Vec<u64> = packed.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(back, full);
        assert!(check_values(&[8], 3).is_err());
        assert!(check_values(&[7, u64::MAX], 64).is_ok());
    }

    /// IKNP rows for `values` (ℓ bits each), then both COT halves; checks s + s' = a·x mod q.
    fn check_identity(moduli_values: &[u64], bits: usize, entries: usize, seed: u64) {
        let m = moduli(moduli_values).unwrap();
        let k = m.len();
        let values: Vec<u64> = words(entries, seed).into_iter().map(|v| if bits == 64 { v } else { v >> (64 - bits) }).collect();
        let offsets: Vec<u64> = words(entries * k, seed + 1).iter().enumerate()
            .map(|(n, &v)| match m[n % k].value() { 0 => v, q => v % q }).collect();
        let (k0, k1, delta) = (bytes(2048, seed + 2), bytes(2048, seed + 3), bytes(16, seed + 4));
        let chosen: Vec<u8> = (0..128).flat_map(|i| {
            let src = if (delta[i >> 3] >> (i & 7)) & 1 == 1 { &k1 } else { &k0 };
            src[i * 16..(i + 1) * 16].to_vec()
        }).collect();
        let (mut recv, mut send) = (IknpReceiver::new(&k0, &k1).unwrap(), IknpSender::new(&chosen, &delta).unwrap());
        let rows = entries * bits;
        let mut choice_bits = vec![0u8; rows.div_ceil(8)];
        pack_choice_bits(&values, bits, &mut choice_bits);
        let mut u = vec![0u8; message_len(rows, 1)];
        let (mut t, mut q) = (vec![0u8; rows * 16], vec![0u8; rows * 16]);
        recv.extend(&choice_bits, rows, &mut u, &mut t).unwrap();
        send.extend(&u, rows, &mut q).unwrap();
        let (domain, start) = (0x7700, 12345);
        let mut corrections = vec![0u64; rows * k];
        let mut s_send = vec![0u64; entries * k];
        send_cot(&q, load(&delta), domain, start, &offsets, &m, bits, &mut corrections, &mut s_send);
        check_residues(&corrections, &m, "corrections").unwrap();
        let mut s_recv = vec![0u64; entries * k];
        recv_cot(&t, domain, start, &values, &corrections, &m, bits, &mut s_recv);
        for e in 0..entries {
            for c in 0..k {
                let md = m[c];
                let want = match md.value() {
                    0 => offsets[e * k + c].wrapping_mul(values[e]),
                    qv => ((offsets[e * k + c] as u128 * values[e] as u128) % qv as u128) as u64,
                };
                assert_eq!(md.add(s_send[e * k + c], s_recv[e * k + c]), want, "entry {e} column {c}, q = {}", md.value());
            }
        }
    }

    use super::{recv as recv_cot, send as send_cot};

    #[test]
    fn cot_shares_add_up_to_the_product() {
        let p61 = (1u64 << 61) - 1;
        let q62 = (1u64 << 62) - 57;
        for (moduli_values, bits) in [(vec![0u64], 1usize), (vec![p61], 1), (vec![q62], 1), (vec![0], 61), (vec![p61], 61),
                                      (vec![q62], 61), (vec![0, p61, q62], 1), (vec![q62, 0, p61], 61), (vec![0], 64),
                                      (vec![p61, 1_000_000_007], 7)] {
            for entries in [1usize, 5, 300] {
                check_identity(&moduli_values, bits, entries, (bits * 1000 + entries) as u64);
            }
        }
    }

    #[test]
    fn residue_checks() {
        let m = moduli(&[0, 7]).unwrap();
        assert!(check_residues(&[u64::MAX, 6, 5, 7], &m, "offsets").unwrap_err().contains("entry 1 of column 1"));
        assert!(moduli(&[]).is_err());
        assert!(moduli(&vec![0u64; 257]).is_err());
        assert!(moduli(&[0, 8]).unwrap_err().contains("column 1"));
        assert!(check_bits(0).is_err() && check_bits(65).is_err() && check_bits(64).is_ok());
    }
}
