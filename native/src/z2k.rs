//! Arithmetic mod 2^(64 L) on little-endian words (L = 2, 3 or 4), and the correlated OT over
//! that ring: the shares and MACs of the active engine's SPDZ2k domain (values mod 2^64 held in
//! shares mod 2^128, and the wider rings its triples and bits are checked in).
//!
//! Every array is flat, `L` words per element, least significant word first. Products are
//! truncated to L words (the ring's own wrap). No input here can overflow or panic: the words are
//! the ring.
//!
//! **Wide correlated OT** ([`cot_send`], [`cot_recv`]): as [`crate::ot::cot`], for offsets of L
//! words. The receiver's value x_e (ℓ ≤ 64 bits) is carried by IKNP rows e·ℓ + i; for row r and
//! column c the sender's pads are the words of H(q_r, τ(j, c·W + h)) and H(q_r ⊕ Δ, ...) for
//! h < W = ⌈L / 2⌉ (one 128-bit hash per two words), so a row serves at most 256 / W columns.
//! The sender sends d = p0 − p1 + a·2^i and keeps −Σ p0; the receiver keeps Σ (p_b + b·d); the
//! two add up to a·x mod 2^(64 L).

use crate::ot::block::{load, BLOCK};
use crate::ot::tccr::{finish, permute, BATCH, MAX_COLUMNS};

/// Words per element: 2 (2^128), 3 (2^192) or 4 (2^256).
pub fn check_words(l: usize) -> Result<(), String> {
    if !(2..=4).contains(&l) {
        return Err(format!("a ring of 2, 3 or 4 words (2^128, 2^192, 2^256), got {l}"));
    }
    Ok(())
}

/// Hashes (of 128 bits) per element of L words.
pub fn hashes(l: usize) -> usize {
    l.div_ceil(2)
}

/// Columns one OT row can carry for elements of L words.
pub fn max_columns(l: usize) -> usize {
    MAX_COLUMNS / hashes(l)
}

#[inline(always)]
fn add_in<const L: usize>(a: &mut [u64; L], b: &[u64; L]) {
    let mut carry = false;
    for w in 0..L {
        let (s, c1) = a[w].overflowing_add(b[w]);
        let (s, c2) = s.overflowing_add(carry as u64);
        a[w] = s;
        carry = c1 | c2;
    }
}

#[inline(always)]
fn sub_in<const L: usize>(a: &mut [u64; L], b: &[u64; L]) {
    let mut borrow = false;
    for w in 0..L {
        let (s, c1) = a[w].overflowing_sub(b[w]);
        let (s, c2) = s.overflowing_sub(borrow as u64);
        a[w] = s;
        borrow = c1 | c2;
    }
}

/// a·b mod 2^(64 L) (schoolbook, the products that reach the top word only).
#[inline(always)]
fn mul_el<const L: usize>(a: &[u64; L], b: &[u64; L]) -> [u64; L] {
    let mut out = [0u64; L];
    for i in 0..L {
        let mut carry = 0u64;
        for j in 0..L - i {
            let t = a[i] as u128 * b[j] as u128 + out[i + j] as u128 + carry as u128;
            out[i + j] = t as u64;
            carry = (t >> 64) as u64;
        }
    }
    out
}

/// a·w mod 2^(64 L) for one word w.
#[inline(always)]
fn mul_word_el<const L: usize>(a: &[u64; L], w: u64) -> [u64; L] {
    let mut out = [0u64; L];
    let mut carry = 0u64;
    for i in 0..L {
        let t = a[i] as u128 * w as u128 + carry as u128;
        out[i] = t as u64;
        carry = (t >> 64) as u64;
    }
    out
}

#[inline(always)]
fn el<const L: usize>(s: &[u64]) -> &[u64; L] {
    s.try_into().expect("L words")
}

#[inline(always)]
fn el_mut<const L: usize>(s: &mut [u64]) -> &mut [u64; L] {
    s.try_into().expect("L words")
}

macro_rules! by_words {
    ($l:expr, $f:ident ( $($arg:expr),* )) => {
        match $l {
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            _ => unreachable!("words checked by the caller"),
        }
    };
}

fn add_g<const L: usize>(a: &[u64], b: &[u64], out: &mut [u64]) {
    for ((o, x), y) in out.chunks_exact_mut(L).zip(a.chunks_exact(L)).zip(b.chunks_exact(L)) {
        let mut s = *el::<L>(x);
        add_in(&mut s, el(y));
        o.copy_from_slice(&s);
    }
}

fn sub_g<const L: usize>(a: &[u64], b: &[u64], out: &mut [u64]) {
    for ((o, x), y) in out.chunks_exact_mut(L).zip(a.chunks_exact(L)).zip(b.chunks_exact(L)) {
        let mut s = *el::<L>(x);
        sub_in(&mut s, el(y));
        o.copy_from_slice(&s);
    }
}

fn mul_g<const L: usize>(a: &[u64], b: &[u64], out: &mut [u64]) {
    for ((o, x), y) in out.chunks_exact_mut(L).zip(a.chunks_exact(L)).zip(b.chunks_exact(L)) {
        o.copy_from_slice(&mul_el::<L>(el(x), el(y)));
    }
}

fn mul_word_g<const L: usize>(a: &[u64], w: &[u64], out: &mut [u64]) {
    for ((o, x), &v) in out.chunks_exact_mut(L).zip(a.chunks_exact(L)).zip(w) {
        o.copy_from_slice(&mul_word_el::<L>(el(x), v));
    }
}

/// `out = a + b` element by element (all N·L words).
pub fn add(a: &[u64], b: &[u64], out: &mut [u64], l: usize) {
    by_words!(l, add_g(a, b, out))
}

/// `out = a − b`.
pub fn sub(a: &[u64], b: &[u64], out: &mut [u64], l: usize) {
    by_words!(l, sub_g(a, b, out))
}

/// `out = a·b` element by element, mod 2^(64 L).
pub fn mul(a: &[u64], b: &[u64], out: &mut [u64], l: usize) {
    by_words!(l, mul_g(a, b, out))
}

/// `out_n = a_n·w_n` for one word w_n per element.
pub fn mul_word(a: &[u64], w: &[u64], out: &mut [u64], l: usize) {
    by_words!(l, mul_word_g(a, w, out))
}

fn dot_g<const L: usize>(w: &[u64], a: &[u64], out: &mut [u64]) {
    let mut acc = [0u64; L];
    for (x, &v) in a.chunks_exact(L).zip(w) {
        add_in(&mut acc, &mul_word_el::<L>(el(x), v));
    }
    out.copy_from_slice(&acc);
}

/// `Σ_n w_n·a_n` (L words) for one word w_n per element.
pub fn dot_words(w: &[u64], a: &[u64], l: usize) -> Vec<u64> {
    let mut out = vec![0u64; l];
    by_words!(l, dot_g(w, a, &mut out));
    out
}

fn sum_rows_g<const L: usize>(a: &[u64], cols: usize, out: &mut [u64]) {
    for row in a.chunks_exact(cols * L) {
        for (o, x) in out.chunks_exact_mut(L).zip(row.chunks_exact(L)) {
            add_in(el_mut::<L>(o), el(x));
        }
    }
}

/// `a` (R, M) elements summed over R: (M) elements.
pub fn sum_rows(a: &[u64], cols: usize, l: usize) -> Vec<u64> {
    let mut out = vec![0u64; cols * l];
    if cols > 0 {
        by_words!(l, sum_rows_g(a, cols, &mut out));
    }
    out
}

fn matmul_g<const L: usize>(m: &[u64], rows: usize, inner: usize, x: &[u64], cols: usize, out: &mut [u64]) {
    for r in 0..rows {
        let o = &mut out[r * cols * L..(r + 1) * cols * L];
        for t in 0..inner {
            let w = m[r * inner + t];
            if w == 0 {
                continue;
            }
            for (oe, xe) in o.chunks_exact_mut(L).zip(x[t * cols * L..(t + 1) * cols * L].chunks_exact(L)) {
                add_in(el_mut::<L>(oe), &mul_word_el::<L>(el(xe), w));
            }
        }
    }
}

/// A public word matrix `m` (rows, inner) times elements `x` (inner, cols): (rows, cols).
pub fn matmul_words(m: &[u64], rows: usize, inner: usize, x: &[u64], cols: usize, l: usize) -> Vec<u64> {
    let mut out = vec![0u64; rows * cols * l];
    by_words!(l, matmul_g(m, rows, inner, x, cols, &mut out));
    out
}

fn csr_g<const L: usize>(indptr: &[u64], indices: &[u64], data: &[u64], x: &[u64], cols: usize, out: &mut [u64]) {
    for (r, o) in out.chunks_exact_mut(cols * L).enumerate() {
        for k in indptr[r] as usize..indptr[r + 1] as usize {
            let (t, w) = (indices[k] as usize, data[k]);
            for (oe, xe) in o.chunks_exact_mut(L).zip(x[t * cols * L..(t + 1) * cols * L].chunks_exact(L)) {
                add_in(el_mut::<L>(oe), &mul_word_el::<L>(el(xe), w));
            }
        }
    }
}

/// A public sparse word matrix in CSR form (rows = indptr.len() − 1) times `x` (inner, cols).
/// The caller checks indptr is nondecreasing within `data` and every index below `inner`.
pub fn csr_matmul(indptr: &[u64], indices: &[u64], data: &[u64], x: &[u64], cols: usize, l: usize) -> Vec<u64> {
    let rows = indptr.len().saturating_sub(1);
    let mut out = vec![0u64; rows * cols * l];
    if cols > 0 {
        by_words!(l, csr_g(indptr, indices, data, x, cols, &mut out));
    }
    out
}

fn combine_g<const L: usize>(coef: &[u64], c: &[u64], terms: usize, out: &mut [u64]) {
    for (o, row) in out.chunks_exact_mut(L).zip(c.chunks_exact(terms * L)) {
        let mut acc = [0u64; L];
        for (k, x) in coef.chunks_exact(L).zip(row.chunks_exact(L)) {
            add_in(&mut acc, &mul_el::<L>(el(k), el(x)));
        }
        o.copy_from_slice(&acc);
    }
}

/// Per element n, `Σ_t coef_t·c_{n,t}`: `coef` (T) elements, `c` (N, T) elements.
pub fn combine(coef: &[u64], c: &[u64], terms: usize, l: usize) -> Vec<u64> {
    let n = c.len().checked_div(terms * l).unwrap_or(0);
    let mut out = vec![0u64; n * l];
    if terms > 0 {
        by_words!(l, combine_g(coef, c, terms, &mut out));
    }
    out
}

fn subset_g<const L: usize>(bits: &[u8], coef: &[u64], terms: usize, out: &mut [u64]) {
    for (o, row) in out.chunks_exact_mut(L).zip(bits.chunks_exact(terms)) {
        let mut acc = [0u64; L];
        for (k, &b) in coef.chunks_exact(L).zip(row) {
            let mask = 0u64.wrapping_sub((b & 1) as u64);
            let mut m = [0u64; L];
            for w in 0..L {
                m[w] = k[w] & mask;
            }
            add_in(&mut acc, &m);
        }
        o.copy_from_slice(&acc);
    }
}

/// Per element n, `Σ_t bit_{n,t}·coef_t`: `bits` (N, T) bytes (bit 0 of each), `coef` (T).
pub fn subset_sums(bits: &[u8], coef: &[u64], terms: usize, l: usize) -> Vec<u64> {
    let n = bits.len().checked_div(terms).unwrap_or(0);
    let mut out = vec![0u64; n * l];
    if terms > 0 {
        by_words!(l, subset_g(bits, coef, terms, &mut out));
    }
    out
}

/// The pad words of element (row r, column c) from the hashes of one batch: `h` holds, for
/// each of the W hash columns, n (or 2n) blocks; returns L words.
#[inline(always)]
fn pad<const L: usize>(h: &[Vec<u8>], r: usize) -> [u64; L] {
    let mut out = [0u64; L];
    for w in 0..L {
        let block = &h[w / 2][r * BLOCK..(r + 1) * BLOCK];
        let v = load(block);
        out[w] = if w % 2 == 0 { v as u64 } else { (v >> 64) as u64 };
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn send_g<const L: usize>(q: &[u8], delta: u128, domain: u64, start: u64, offsets: &[u64], cols: usize, bits: usize,
                          corrections: &mut [u64], share: &mut [u64]) {
    let hw = hashes(L);
    let mut px = vec![0u8; 2 * BATCH * BLOCK];
    let mut h0: Vec<Vec<u8>> = vec![vec![0u8; BATCH * BLOCK]; hw];
    let mut h1: Vec<Vec<u8>> = vec![vec![0u8; BATCH * BLOCK]; hw];
    let mut hh = vec![0u8; 2 * BATCH * BLOCK];
    share.fill(0);
    for (b, chunk) in q.chunks(BATCH * BLOCK).enumerate() {
        let n = chunk.len() / BLOCK;
        let first = b * BATCH;
        permute(chunk, Some(delta), &mut px[..2 * n * BLOCK]);
        for c in 0..cols {
            for w in 0..hw {
                finish(&px[..2 * n * BLOCK], n, domain, start + first as u64, (c * hw + w) as u64, &mut hh[..2 * n * BLOCK]);
                h0[w][..n * BLOCK].copy_from_slice(&hh[..n * BLOCK]);
                h1[w][..n * BLOCK].copy_from_slice(&hh[n * BLOCK..2 * n * BLOCK]);
            }
            for r in 0..n {
                let row = first + r;
                let (e, i) = (row / bits, row % bits);
                let p0 = pad::<L>(&h0, r);
                let p1 = pad::<L>(&h1, r);
                // a·2^i: the offset shifted left by i bits
                let a = el::<L>(&offsets[(e * cols + c) * L..(e * cols + c + 1) * L]);
                let shifted = shl::<L>(a, i);
                let mut d = p0;
                sub_in(&mut d, &p1);
                add_in(&mut d, &shifted);
                corrections[(row * cols + c) * L..(row * cols + c + 1) * L].copy_from_slice(&d);
                add_in(el_mut::<L>(&mut share[(e * cols + c) * L..(e * cols + c + 1) * L]), &p0);
            }
        }
    }
    for s in share.chunks_exact_mut(L) {
        let mut z = [0u64; L];
        sub_in(&mut z, el(s));
        s.copy_from_slice(&z);
    }
}

/// a·2^i mod 2^(64 L), 0 ≤ i < 64.
#[inline(always)]
fn shl<const L: usize>(a: &[u64; L], i: usize) -> [u64; L] {
    if i == 0 {
        return *a;
    }
    let mut out = [0u64; L];
    for w in 0..L {
        out[w] = a[w] << i;
        if w > 0 {
            out[w] |= a[w - 1] >> (64 - i);
        }
    }
    out
}

/// Sender: `q` the E·ℓ IKNP rows, `offsets` (E, K) elements; writes `corrections` (E·ℓ, K) and
/// `share` (E, K) elements. The caller checks sizes, K ≤ [`max_columns`] and ℓ in 1..=64.
#[allow(clippy::too_many_arguments)]
pub fn cot_send(q: &[u8], delta: u128, domain: u64, start: u64, offsets: &[u64], cols: usize, bits: usize,
                corrections: &mut [u64], share: &mut [u64], l: usize) {
    by_words!(l, send_g(q, delta, domain, start, offsets, cols, bits, corrections, share))
}

#[allow(clippy::too_many_arguments)]
fn recv_g<const L: usize>(t: &[u8], domain: u64, start: u64, choices: &[u64], corrections: &[u64], cols: usize,
                          bits: usize, share: &mut [u64]) {
    let hw = hashes(L);
    let mut px = vec![0u8; BATCH * BLOCK];
    let mut h: Vec<Vec<u8>> = vec![vec![0u8; BATCH * BLOCK]; hw];
    share.fill(0);
    for (b, chunk) in t.chunks(BATCH * BLOCK).enumerate() {
        let n = chunk.len() / BLOCK;
        let first = b * BATCH;
        permute(chunk, None, &mut px[..n * BLOCK]);
        for c in 0..cols {
            for (w, hv) in h.iter_mut().enumerate() {
                finish(&px[..n * BLOCK], n, domain, start + first as u64, (c * hw + w) as u64, &mut hv[..n * BLOCK]);
            }
            for r in 0..n {
                let row = first + r;
                let (e, i) = (row / bits, row % bits);
                let mut y = pad::<L>(&h, r);
                if (choices[e] >> i) & 1 == 1 {
                    add_in(&mut y, el(&corrections[(row * cols + c) * L..(row * cols + c + 1) * L]));
                }
                add_in(el_mut::<L>(&mut share[(e * cols + c) * L..(e * cols + c + 1) * L]), &y);
            }
        }
    }
}

/// Receiver: `t` the E·ℓ rows, `choices` the E values, `corrections` (E·ℓ, K) elements; writes
/// `share` (E, K) elements. The caller checks sizes and that the values fit ℓ bits.
#[allow(clippy::too_many_arguments)]
pub fn cot_recv(t: &[u8], domain: u64, start: u64, choices: &[u64], corrections: &[u64], cols: usize, bits: usize,
                share: &mut [u64], l: usize) {
    by_words!(l, recv_g(t, domain, start, choices, corrections, cols, bits, share))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ot::cot::tests::words;

    /// Elements as u128 pairs for L = 2 (the oracle: Rust's own wrapping u128).
    fn as_u128(v: &[u64]) -> Vec<u128> {
        v.chunks_exact(2).map(|p| p[0] as u128 | (p[1] as u128) << 64).collect()
    }

    #[test]
    fn two_words_agree_with_u128() {
        let (a, b, w) = (words(200, 1), words(200, 2), words(100, 3));
        let (ua, ub) = (as_u128(&a), as_u128(&b));
        let mut out = vec![0u64; 200];
        add(&a, &b, &mut out, 2);
        assert_eq!(as_u128(&out), ua.iter().zip(&ub).map(|(x, y)| x.wrapping_add(*y)).collect::<Vec<_>>());
        sub(&a, &b, &mut out, 2);
        assert_eq!(as_u128(&out), ua.iter().zip(&ub).map(|(x, y)| x.wrapping_sub(*y)).collect::<Vec<_>>());
        mul(&a, &b, &mut out, 2);
        assert_eq!(as_u128(&out), ua.iter().zip(&ub).map(|(x, y)| x.wrapping_mul(*y)).collect::<Vec<_>>());
        mul_word(&a, &w, &mut out, 2);
        assert_eq!(as_u128(&out), ua.iter().zip(&w).map(|(x, y)| x.wrapping_mul(*y as u128)).collect::<Vec<_>>());
        let d = dot_words(&w, &a, 2);
        let want = ua.iter().zip(&w).fold(0u128, |s, (x, y)| s.wrapping_add(x.wrapping_mul(*y as u128)));
        assert_eq!(as_u128(&d)[0], want);
        let coef = &b[..20];
        let comb = combine(coef, &a[..200], 10, 2);
        let uc = as_u128(coef);
        for n in 0..10 {
            let want = (0..10).fold(0u128, |s, t| s.wrapping_add(uc[t].wrapping_mul(ua[n * 10 + t])));
            assert_eq!(as_u128(&comb[2 * n..2 * n + 2])[0], want);
        }
        let bits: Vec<u8> = words(30, 9).iter().map(|v| (v >> 33) as u8).collect();
        let sums = subset_sums(&bits, coef, 10, 2);
        for n in 0..3 {
            let want = (0..10).filter(|&t| bits[n * 10 + t] & 1 == 1).fold(0u128, |s, t| s.wrapping_add(uc[t]));
            assert_eq!(as_u128(&sums[2 * n..2 * n + 2])[0], want);
        }
    }

    /// Three and four words against schoolbook on u128 limbs of 32 bits (an independent path).
    #[test]
    fn wide_products_agree_with_limbs() {
        fn limbs(v: &[u64]) -> Vec<u64> {
            v.iter().flat_map(|w| [w & 0xffff_ffff, w >> 32]).collect()
        }
        for l in [3usize, 4] {
            let (a, b) = (words(l * 50, l as u64), words(l * 50, 10 + l as u64));
            let mut out = vec![0u64; l * 50];
            mul(&a, &b, &mut out, l);
            for n in 0..50 {
                let (x, y) = (limbs(&a[n * l..(n + 1) * l]), limbs(&b[n * l..(n + 1) * l]));
                let m = 2 * l;
                let mut acc = vec![0u128; m + 1];
                for i in 0..m {
                    for j in 0..m - i {
                        acc[i + j] += (x[i] * y[j]) as u128;
                    }
                }
                let mut limb_out = vec![0u64; m];
                let mut carry = 0u128;
                for k in 0..m {
                    let t = acc[k] + carry;
                    limb_out[k] = (t & 0xffff_ffff) as u64;
                    carry = t >> 32;
                }
                let got: Vec<u64> = out[n * l..(n + 1) * l].to_vec();
                let want: Vec<u64> = limb_out.chunks_exact(2).map(|p| p[0] | p[1] << 32).collect();
                assert_eq!(got, want, "L = {l}, element {n}");
            }
            // a + b − b = a and a − a = 0
            let (mut s, mut back) = (vec![0u64; l * 50], vec![0u64; l * 50]);
            add(&a, &b, &mut s, l);
            sub(&s, &b, &mut back, l);
            assert_eq!(back, a);
        }
    }

    #[test]
    fn matmul_and_sums() {
        let (m, x) = (words(6, 4), words(3 * 5 * 2, 5)); // m (2, 3), x (3, 5)
        let out = matmul_words(&m, 2, 3, &x, 5, 2);
        let ux = as_u128(&x);
        for r in 0..2 {
            for c in 0..5 {
                let want = (0..3).fold(0u128, |s, t| s.wrapping_add(ux[t * 5 + c].wrapping_mul(m[r * 3 + t] as u128)));
                assert_eq!(as_u128(&out[(r * 5 + c) * 2..(r * 5 + c + 1) * 2])[0], want);
            }
        }
        // the same matrix in CSR form
        let indptr = [0u64, 3, 6];
        let indices = [0u64, 1, 2, 0, 1, 2];
        assert_eq!(csr_matmul(&indptr, &indices, &m, &x, 5, 2), out);
        let sums = sum_rows(&x, 5, 2);
        for c in 0..5 {
            let want = (0..3).fold(0u128, |s, t| s.wrapping_add(ux[t * 5 + c]));
            assert_eq!(as_u128(&sums[2 * c..2 * c + 2])[0], want);
        }
    }

    /// The wide COT's halves add up to offset × value, on IKNP rows made in the clear.
    #[test]
    fn wide_cot_shares_add_up() {
        for (l, bits, cols, entries) in [(2usize, 64usize, 3usize, 5usize), (3, 1, 1, 40), (4, 13, 2, 7), (2, 1, 128, 3)] {
            let delta = words(2, 77);
            let delta = delta[0] as u128 | (delta[1] as u128) << 64;
            let choices: Vec<u64> = words(entries, 8).iter().map(|v| if bits == 64 { *v } else { v >> (64 - bits) }).collect();
            let rows = entries * bits;
            let mut q = vec![0u8; rows * BLOCK];
            let mut t = vec![0u8; rows * BLOCK];
            for (r, w) in words(2 * rows, 9).chunks_exact(2).enumerate() {
                let qv = w[0] as u128 | (w[1] as u128) << 64;
                let bit = (choices[r / bits] >> (r % bits)) & 1;
                let tv = if bit == 1 { qv ^ delta } else { qv };
                q[r * BLOCK..(r + 1) * BLOCK].copy_from_slice(&qv.to_le_bytes());
                t[r * BLOCK..(r + 1) * BLOCK].copy_from_slice(&tv.to_le_bytes());
            }
            let offsets = words(entries * cols * l, 10);
            let mut corr = vec![0u64; rows * cols * l];
            let mut s_send = vec![0u64; entries * cols * l];
            cot_send(&q, delta, 0x4400, 99, &offsets, cols, bits, &mut corr, &mut s_send, l);
            let mut s_recv = vec![0u64; entries * cols * l];
            cot_recv(&t, 0x4400, 99, &choices, &corr, cols, bits, &mut s_recv, l);
            let mut total = vec![0u64; entries * cols * l];
            add(&s_send, &s_recv, &mut total, l);
            let mut want = vec![0u64; entries * cols * l];
            let w: Vec<u64> = (0..entries * cols).map(|n| choices[n / cols]).collect();
            mul_word(&offsets, &w, &mut want, l);
            assert_eq!(total, want, "L = {l}, ℓ = {bits}, K = {cols}");
        }
    }
}
