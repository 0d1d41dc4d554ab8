//! WRK17's bucketing of leaky AND triples (Wang–Ranellucci–Katz, CCS 2017, section 5), the local
//! part: gathers each bucket's rows once and combines them, in place of numpy's gather and
//! reductions (`shaper.protocols.active.bits`).
//!
//! A leaky triple is three rows of `w` words (x, y, z; each row: the party's bit, then its MACs
//! and keys per peer); `leaky` holds L of them, (L, 3, w). `idx` (n·b) is the joint permutation
//! grouped by bucket. For bucket j with triples t_1..t_b: d_k = y^1 ⊕ y^k (opened by the
//! caller), a = ⊕_k x^k, b = y^1, c = z^1 ⊕ ⊕_{k≥2} (z^k ⊕ d_k·x^k), where d_k·x^k is x^k's whole
//! row where the opened bit d_k is 1 and zero otherwise (bit, MACs and keys alike: the MACs stay
//! MACs of the combined bits).

#[inline(always)]
fn row(leaky: &[u64], t: usize, part: usize, w: usize) -> &[u64] {
    let at = (t * 3 + part) * w;
    &leaky[at..at + w]
}

/// First half: `d` (n·(b−1), w) = y^1 ⊕ y^k, `a` (n, w) = ⊕ x^k, `y1` (n, w) = y^1. The caller
/// checks every index is below L and the sizes.
pub fn open(leaky: &[u64], idx: &[u64], b: usize, w: usize, d: &mut [u64], a: &mut [u64], y1: &mut [u64]) {
    for (j, bucket) in idx.chunks_exact(b).enumerate() {
        let first = bucket[0] as usize;
        let y_first = row(leaky, first, 1, w);
        y1[j * w..(j + 1) * w].copy_from_slice(y_first);
        let acc = &mut a[j * w..(j + 1) * w];
        acc.copy_from_slice(row(leaky, first, 0, w));
        for (k, &t) in bucket[1..].iter().enumerate() {
            let t = t as usize;
            for (v, &x) in acc.iter_mut().zip(row(leaky, t, 0, w)) {
                *v ^= x;
            }
            let out = &mut d[(j * (b - 1) + k) * w..(j * (b - 1) + k + 1) * w];
            for ((o, &p), &q) in out.iter_mut().zip(y_first).zip(row(leaky, t, 1, w)) {
                *o = p ^ q;
            }
        }
    }
}

/// Second half: `c` (n, w) from the opened bits `dbits` (n·(b−1), one byte each, 0 or 1).
pub fn close(leaky: &[u64], idx: &[u64], dbits: &[u8], b: usize, w: usize, c: &mut [u64]) {
    for (j, bucket) in idx.chunks_exact(b).enumerate() {
        let acc = &mut c[j * w..(j + 1) * w];
        acc.copy_from_slice(row(leaky, bucket[0] as usize, 2, w));
        for (k, &t) in bucket[1..].iter().enumerate() {
            let t = t as usize;
            let mask = 0u64.wrapping_sub((dbits[j * (b - 1) + k] & 1) as u64);
            for ((v, &z), &x) in acc.iter_mut().zip(row(leaky, t, 2, w)).zip(row(leaky, t, 0, w)) {
                *v ^= z ^ (x & mask);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_combine_as_the_formulas_say() {
        let (l, b, w) = (12usize, 3usize, 3usize);
        let leaky: Vec<u64> = (0..l * 3 * w).map(|i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let idx: Vec<u64> = vec![4, 0, 7, 11, 2, 9, 1, 3, 5, 10, 6, 8];
        let n = l / b;
        let (mut d, mut a, mut y1) = (vec![0u64; n * (b - 1) * w], vec![0u64; n * w], vec![0u64; n * w]);
        open(&leaky, &idx, b, w, &mut d, &mut a, &mut y1);
        let dbits: Vec<u8> = (0..n * (b - 1)).map(|i| (i % 3 == 1) as u8).collect();
        let mut c = vec![0u64; n * w];
        close(&leaky, &idx, &dbits, b, w, &mut c);
        for j in 0..n {
            let t: Vec<usize> = idx[j * b..(j + 1) * b].iter().map(|&v| v as usize).collect();
            for v in 0..w {
                let get = |tt: usize, part: usize| leaky[(tt * 3 + part) * w + v];
                assert_eq!(a[j * w + v], get(t[0], 0) ^ get(t[1], 0) ^ get(t[2], 0));
                assert_eq!(y1[j * w + v], get(t[0], 1));
                let mut want = get(t[0], 2);
                for k in 1..b {
                    assert_eq!(d[(j * (b - 1) + k - 1) * w + v], get(t[0], 1) ^ get(t[k], 1));
                    let m = if dbits[j * (b - 1) + k - 1] == 1 { u64::MAX } else { 0 };
                    want ^= get(t[k], 2) ^ (get(t[k], 0) & m);
                }
                assert_eq!(c[j * w + v], want);
            }
        }
    }
}

/// One part (x, y or z) of the leaky triples' rows: `out` (n, 3, w) gets, in part `part`, each
/// row [bit, low 64 bits of the MAC row per peer, low 64 bits of the key row per peer]; returns
/// each triple's share of bit·Δ over the low 64 bits: bit·delta ⊕ ⊕_p (MAC_p ⊕ key_p).
/// `macs[p]` and `keys[p]` are 16-byte rows from `lo` on. The caller checks the sizes.
#[allow(clippy::too_many_arguments)]
pub fn rows_into(out: &mut [u64], part: usize, bits: &[u8], macs: &[&[u8]], keys: &[&[u8]], lo: usize, delta: u64,
                 global: &mut [u64]) {
    let peers = macs.len();
    let w = 1 + 2 * peers;
    let low = |rows: &[u8], i: usize| u64::from_le_bytes(rows[(lo + i) * 16..(lo + i) * 16 + 8].try_into().unwrap());
    for (i, (&b, g)) in bits.iter().zip(global.iter_mut()).enumerate() {
        let at = (i * 3 + part) * w;
        let bit = (b & 1) as u64;
        out[at] = bit;
        let mut acc = delta & 0u64.wrapping_sub(bit);
        for p in 0..peers {
            let (m, k) = (low(macs[p], i), low(keys[p], i));
            out[at + 1 + p] = m;
            out[at + 1 + peers + p] = k;
            acc ^= m ^ k;
        }
        *g = acc;
    }
}
