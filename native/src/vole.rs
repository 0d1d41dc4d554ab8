//! Silent VOLE over word-size prime fields, the local kernels (the protocol is
//! `shaper.protocols.active.vole`): the GGM trees of the single-point VOLEs and the LPN encoder
//! that stretches a short base VOLE into a long one (Boyle–Couteau–Gilboa–Ishai–Kohl–Scholl, CCS
//! 2019; the field version and its parameters are Wolverine's, Weng–Yang–Katz–Wang, S&P 2021).
//!
//! **GGM trees.** A tree of depth h has 2^h leaves; node s at depth l has children
//! (π_0(s) ⊕ s, π_1(s) ⊕ s) (π_b: AES-128 under fixed public keys, a correlation-robust PRG in the
//! ideal-cipher model), the left one at bit l = 0 of the leaf index (LSB first, as in `ot::pprf`):
//! leaf x is reached by taking side x_l at depth l. The expanding party also returns, per level l,
//! the XOR of all nodes at depth l + 1 on each side; a party that knows one side's sum for every
//! level (side ¬p_l, through an OT) rebuilds every leaf but p.
//!
//! **Leaf values.** Leaf s gives key j's field element from the 128 bits π_2(s ⊕ j) ⊕ s ⊕ j
//! (statistically uniform mod q: [`reduce128`]).
//!
//! **LPN.** Output i of a base vector u (length k) is Σ_{j<10} c_ij u[idx_ij] mod q plus the
//! noise: 10 distinct indices and 10 coefficients per output from AES-CTR under a public seed, so
//! that both parties apply the same public code. A coefficient is stored as a raw 62-bit word w
//! and applied as REDC(w u) = w R^-1 u mod q (one Montgomery reduction per four terms): the
//! code's coefficients are w R^-1 mod q, a fixed public map of the AES words.
//!
//! Nothing here draws random numbers (roots and seeds come from the caller).

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::aes::{Cipher, BLOCK};
use crate::modq::Modulus;

/// Terms per LPN output (the code's column weight).
pub const LPN_WEIGHT: usize = 10;
/// AES blocks of the code's randomness per output: 10 32-bit index words (3 blocks), 10 64-bit
/// coefficient words (5 blocks).
const CODE_BLOCKS: usize = 8;

fn fixed_cipher(i: usize) -> &'static Cipher {
    static KEYS: OnceLock<[Cipher; 3]> = OnceLock::new();
    &KEYS.get_or_init(|| {
        let key = |label: &[u8]| -> Cipher {
            let d = Sha256::digest(label);
            Cipher::new(d[..16].try_into().unwrap())
        };
        [key(b"shaper/vole/ggm/left"), key(b"shaper/vole/ggm/right"), key(b"shaper/vole/leaf")]
    })[i]
}

/// MMO with cipher `c` over every block of `src` into `dst`: c(s) ⊕ s.
fn mmo(c: &Cipher, src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(src);
    c.encrypt(dst);
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}

fn xor_block(acc: &mut [u8; BLOCK], b: &[u8]) {
    for (a, x) in acc.iter_mut().zip(b) {
        *a ^= *x;
    }
}

/// Expands one level in place: `tree[..w·16]` holds depth l; afterwards `tree[..2w·16]` holds depth
/// l + 1 (node p's children at p and p + w). Returns the XOR of each side.
fn expand_level(tree: &mut [u8], w: usize, scratch: &mut Vec<u8>) -> ([u8; BLOCK], [u8; BLOCK]) {
    scratch.resize(w * BLOCK, 0);
    scratch.copy_from_slice(&tree[..w * BLOCK]);
    let (left, right) = tree[..2 * w * BLOCK].split_at_mut(w * BLOCK);
    mmo(fixed_cipher(1), scratch, right);
    mmo(fixed_cipher(0), scratch, left);
    let (mut s0, mut s1) = ([0u8; BLOCK], [0u8; BLOCK]);
    for p in 0..w {
        xor_block(&mut s0, &left[p * BLOCK..(p + 1) * BLOCK]);
        xor_block(&mut s1, &right[p * BLOCK..(p + 1) * BLOCK]);
    }
    (s0, s1)
}

/// The expanding party's trees: `roots` (t × 16 bytes) → (leaves, t × 2^h × 16 bytes, tree-major;
/// sums, t × h × 2 × 16 bytes: tree, level, side).
pub fn ggm_expand(roots: &[u8], depth: usize) -> (Vec<u8>, Vec<u8>) {
    assert!(roots.len().is_multiple_of(BLOCK) && (1..=20).contains(&depth));
    let t = roots.len() / BLOCK;
    let m = 1usize << depth;
    let mut leaves = vec![0u8; t * m * BLOCK];
    let mut sums = vec![0u8; t * depth * 2 * BLOCK];
    let mut scratch = Vec::new();
    for (g, tree) in leaves.chunks_exact_mut(m * BLOCK).enumerate() {
        tree[..BLOCK].copy_from_slice(&roots[g * BLOCK..(g + 1) * BLOCK]);
        for l in 0..depth {
            let (s0, s1) = expand_level(tree, 1 << l, &mut scratch);
            let at = (g * depth + l) * 2 * BLOCK;
            sums[at..at + BLOCK].copy_from_slice(&s0);
            sums[at + BLOCK..at + 2 * BLOCK].copy_from_slice(&s1);
        }
    }
    (leaves, sums)
}

/// The puncturing party's trees: from the sum of side ¬p_l at every level l (`chosen`, t × h × 16
/// bytes) and the punctured leaves `points` (each < 2^h), every leaf but p (leaf p is zero).
pub fn ggm_punctured(chosen: &[u8], points: &[u64], depth: usize) -> Result<Vec<u8>, String> {
    let t = points.len();
    let m = 1usize << depth;
    if chosen.len() != t * depth * BLOCK {
        return Err(format!("{} level sums for {t} trees of depth {depth}: expected {} bytes, got {}",
                           t * depth, t * depth * BLOCK, chosen.len()));
    }
    if let Some(p) = points.iter().find(|&&p| p >= m as u64) {
        return Err(format!("punctured leaf {p} outside a tree of {m} leaves"));
    }
    let mut leaves = vec![0u8; t * m * BLOCK];
    let mut scratch = Vec::new();
    for (g, tree) in leaves.chunks_exact_mut(m * BLOCK).enumerate() {
        let p = points[g] as usize;
        let mut alpha = 0usize; // the unknown node at the current depth (zero in `tree`)
        for l in 0..depth {
            let w = 1 << l;
            let bit = (p >> l) & 1;
            // every known node's children; the unknown node's come out wrong and are fixed below
            let (s0, s1) = expand_level(tree, w, &mut scratch);
            let mut sum = if bit == 0 { s1 } else { s0 }; // side ¬bit, including alpha's wrong child
            let missing = alpha + (1 - bit) * w;
            xor_block(&mut sum, &tree[missing * BLOCK..(missing + 1) * BLOCK]);
            let got: [u8; BLOCK] = chosen[(g * depth + l) * BLOCK..(g * depth + l + 1) * BLOCK].try_into().unwrap();
            let mut node = got;
            xor_block(&mut node, &sum);
            tree[missing * BLOCK..(missing + 1) * BLOCK].copy_from_slice(&node);
            alpha += bit * w;
            tree[alpha * BLOCK..(alpha + 1) * BLOCK].fill(0);
        }
    }
    Ok(leaves)
}

/// A uniform residue from 128 uniform bits: T = (the top bitlen(q) − 1 bits) 2^64 + (the low 64
/// bits) is uniform below 2^(63 + bitlen(q)) (and below q 2^64), so T mod q is within 2^-63 of
/// uniform, and so is REDC(T) = T R^-1 mod q (one Montgomery reduction).
#[inline(always)]
fn reduce128(md: &Modulus, shift: u32, x: u128) -> u64 {
    md.redc_pub((((x >> 64) as u64 >> shift) as u128) << 64 | (x as u64) as u128)
}

/// Key j's value of every leaf (`keys` × m, key-major) and every tree's sum of them (`keys` × t),
/// for trees of `tree` leaves; the leaves at `skip` (one per tree, or none) count as zero.
pub fn leaf_values(leaves: &[u8], md: &Modulus, keys: usize, tree: usize, skip: Option<&[u64]>) -> (Vec<u64>, Vec<u64>) {
    let m = leaves.len() / BLOCK;
    assert!(tree > 0 && m.is_multiple_of(tree));
    let t = m / tree;
    let shift = 65 - (64 - md.q.leading_zeros()); // keep bitlen(q) - 1 bits of the high word
    let mut values = vec![0u64; keys * m];
    let mut sums = vec![0u64; keys * t];
    const CHUNK: usize = 4096;
    let mut buf = vec![0u8; CHUNK * BLOCK];
    for j in 0..keys {
        let row = &mut values[j * m..(j + 1) * m];
        for (c, src) in leaves.chunks(CHUNK * BLOCK).enumerate() {
            let b = &mut buf[..src.len()];
            b.copy_from_slice(src);
            for blk in b.chunks_exact_mut(BLOCK) {
                let x = u128::from_le_bytes(blk.try_into().unwrap()) ^ j as u128;
                blk.copy_from_slice(&x.to_le_bytes());
            }
            fixed_cipher(2).encrypt(b);
            for (i, (blk, s)) in b.chunks_exact(BLOCK).zip(src.chunks_exact(BLOCK)).enumerate() {
                let x = u128::from_le_bytes(blk.try_into().unwrap()) ^ u128::from_le_bytes(s.try_into().unwrap())
                    ^ j as u128;
                row[c * CHUNK + i] = reduce128(md, shift, x);
            }
        }
        if let Some(points) = skip {
            for (g, &p) in points.iter().enumerate() {
                row[g * tree + p as usize] = 0;
            }
        }
        for g in 0..t {
            let mut acc = 0u64;
            for &v in &row[g * tree..(g + 1) * tree] {
                acc += v;
                if acc >= md.q {
                    acc -= md.q;
                }
            }
            sums[j * t + g] = acc;
        }
    }
    (values, sums)
}

/// Σ_x c_x rows[r][x] mod q for every row (rows × n, row-major; inputs reduced), the weights c_x
/// 62-bit words of AES-CTR under `seed` (applied as REDC(c u), as in [`lpn_encode`]: weights
/// c R^-1 mod q, none more likely than 2/q, so a fixed nonzero error vector survives with
/// probability at most 2/q).
pub fn weighted_sums(seed: &[u8; BLOCK], md: &Modulus, rows: &[u64], n: usize) -> Result<Vec<u64>, String> {
    if n == 0 || rows.len() % n != 0 {
        return Err(format!("weighted sums: {} words in rows of {n}", rows.len()));
    }
    if rows.iter().any(|&x| x >= md.q) {
        return Err(format!("weighted sums: an input is not reduced modulo {}", md.q));
    }
    let r = rows.len() / n;
    let cipher = Cipher::new(seed);
    const CHUNK: usize = 4096;
    let mut stream = vec![0u8; CHUNK * 8];
    let mut total = vec![0u64; r];
    let mut acc = vec![0u128; r];
    for start in (0..n).step_by(CHUNK) {
        let count = CHUNK.min(n - start);
        let s = &mut stream[..count.div_ceil(2) * BLOCK];
        cipher.ctr((start / 2) as u128, s);
        for i in 0..count {
            let c = (u64::from_le_bytes(s[8 * i..8 * i + 8].try_into().unwrap()) >> 2) as u128;
            for (a, row) in acc.iter_mut().zip(rows.chunks_exact(n)) {
                *a += c * row[start + i] as u128;
            }
            if i % 4 == 3 || i + 1 == count {
                for (tot, a) in total.iter_mut().zip(acc.iter_mut()) {
                    *tot += md.redc_pub(*a);
                    if *tot >= md.q {
                        *tot -= md.q;
                    }
                    *a = 0;
                }
            }
        }
    }
    Ok(total)
}

/// Outputs per batch of the code's AES keystream.
const CODE_CHUNK: usize = 512; // even: two check weights per AES block

/// The public code's row i from its keystream block `buf` (`CODE_BLOCKS` × 16 bytes):
/// `LPN_WEIGHT` distinct indices below k and `LPN_WEIGHT` coefficient words.
#[inline(always)]
fn code_row(buf: &[u8], k: usize, idx: &mut [usize; LPN_WEIGHT], coef: &mut [u64; LPN_WEIGHT]) {
    let mut seen = [0u64; 4]; // bit x mod 256 of every index so far: most draws skip the scan
    for j in 0..LPN_WEIGHT {
        let w = u32::from_le_bytes(buf[4 * j..4 * j + 4].try_into().unwrap());
        let mut x = ((w as u64 * k as u64) >> 32) as usize;
        if seen[(x >> 6) & 3] >> (x & 63) & 1 == 1 {
            while idx[..j].contains(&x) {
                x = if x + 1 == k { 0 } else { x + 1 };
            }
        }
        seen[(x >> 6) & 3] |= 1 << (x & 63);
        idx[j] = x;
        coef[j] = u64::from_le_bytes(buf[48 + 8 * j..56 + 8 * j].try_into().unwrap()) >> 2;
    }
}

/// The code's indices for outputs [0, n) (`LPN_WEIGHT` per output), kept for the last (seed, k, n)
/// asked for: deciding them (distinct per output) is most of the code's cost, and a pool uses one
/// code for every run (25.7 MB for Wolverine's 642,048 outputs).
fn code_indices(seed: &[u8; BLOCK], k: usize, n: usize) -> std::sync::Arc<Vec<u32>> {
    type Cached = Option<([u8; BLOCK], usize, usize, std::sync::Arc<Vec<u32>>)>;
    static CACHE: std::sync::Mutex<Cached> = std::sync::Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((s, kk, nn, v)) = cache.as_ref() {
        if s == seed && *kk == k && *nn >= n {
            return v.clone();
        }
    }
    let cipher = Cipher::new(seed);
    let mut buf = vec![0u8; CODE_CHUNK * CODE_BLOCKS * BLOCK];
    let mut out = vec![0u32; n * LPN_WEIGHT];
    let (mut idx, mut coef) = ([0usize; LPN_WEIGHT], [0u64; LPN_WEIGHT]);
    for start in (0..n).step_by(CODE_CHUNK) {
        let count = CODE_CHUNK.min(n - start);
        let stream = &mut buf[..count * CODE_BLOCKS * BLOCK];
        cipher.ctr((start * CODE_BLOCKS) as u128, stream);
        for (c, row) in stream.chunks_exact(CODE_BLOCKS * BLOCK).enumerate() {
            code_row(row, k, &mut idx, &mut coef);
            for j in 0..LPN_WEIGHT {
                out[(start + c) * LPN_WEIGHT + j] = idx[j] as u32;
            }
        }
    }
    let v = std::sync::Arc::new(out);
    *cache = Some((*seed, k, n, v.clone()));
    v
}

/// One group of R rows of [`lpn_encode`] over outputs [start, start + count): `base_t` is the
/// group's base row-interleaved (k × R), `noise` every row (row r0 + r of the group at (r0 + r) n).
#[inline(never)]
fn apply<const R: usize>(md: &Modulus, base_t: &[u64], code: (&[[usize; LPN_WEIGHT]], &[[u64; LPN_WEIGHT]]),
                         noise: &mut [u64], n: usize, r0: usize, start: usize, weights: Option<&[u8]>,
                         wsum: &mut [u64]) {
    let q = md.q;
    let fold = |x: u64| -> u64 {
        let x = if x >= 2 * q { x - 2 * q } else { x };
        if x >= q { x - q } else { x }
    };
    for (c, (idx, coef)) in code.0.iter().zip(code.1).enumerate() {
        let i = start + c;
        let mut tot: [u64; R] = std::array::from_fn(|r| noise[(r0 + r) * n + i]);
        // coefficients below 2^62 and terms below q: four products sum below q 2^64, one REDC
        // per group of four (as `modq::matmul` does)
        for (lo, hi) in [(0, 4), (4, 8), (8, LPN_WEIGHT)] {
            let mut acc = [0u128; R];
            for j in lo..hi {
                let cj = coef[j] as u128;
                let src: &[u64; R] = base_t[idx[j] * R..(idx[j] + 1) * R].try_into().unwrap();
                for r in 0..R {
                    acc[r] += cj * src[r] as u128;
                }
            }
            for r in 0..R {
                tot[r] = fold(tot[r] + md.redc_pub(acc[r]));
            }
        }
        for r in 0..R {
            noise[(r0 + r) * n + i] = tot[r];
        }
        if let Some(w) = weights {
            // the check's weighted sums, as `weighted_sums` defines them (one REDC per product:
            // the weights are below 2^62 and the outputs below q)
            let wi = (u64::from_le_bytes(w[8 * c..8 * c + 8].try_into().unwrap()) >> 2) as u128;
            for r in 0..R {
                wsum[r0 + r] = fold(wsum[r0 + r] + md.redc_pub(wi * tot[r] as u128));
            }
        }
    }
}

/// out[r][i] = noise[r][i] + Σ_j c_ij base[r][idx_ij] mod q for `rows` rows (row-major: base rows ×
/// k, noise rows × n, overwritten with the result). Every input below q; k ≥ `LPN_WEIGHT`.
pub fn lpn_encode(seed: &[u8; BLOCK], md: &Modulus, base: &[u64], k: usize, noise: &mut [u64], n: usize) -> Result<(), String> {
    lpn_encode_checked(seed, md, base, k, noise, n, None).map(|_| ())
}

/// [`lpn_encode`], and with `check` every output row's [`weighted_sums`] under that seed, computed
/// on the way (the rows are not read a second time).
pub fn lpn_encode_checked(seed: &[u8; BLOCK], md: &Modulus, base: &[u64], k: usize, noise: &mut [u64], n: usize,
                          check: Option<&[u8; BLOCK]>) -> Result<Vec<u64>, String> {
    if k < LPN_WEIGHT || k > u32::MAX as usize || base.len() % k != 0 || noise.len() != base.len() / k * n {
        return Err(format!("LPN encode: base of {} words in rows of k = {k}, noise of {} words in rows of {n}",
                           base.len(), noise.len()));
    }
    let rows = base.len() / k;
    if base.iter().chain(noise.iter()).any(|&x| x >= md.q) {
        return Err(format!("LPN encode: an input is not reduced modulo {}", md.q));
    }
    // rows in groups of up to four, each group's base row-interleaved (one index fetches every
    // row's value from one place); the code decoded once per chunk of outputs for every group
    let groups: Vec<(usize, usize)> = (0..rows).step_by(4).map(|r| (r, 4.min(rows - r))).collect();
    let interleaved: Vec<Vec<u64>> = groups.iter().map(|&(r0, g)| {
        let mut t = vec![0u64; k * g];
        for r in 0..g {
            for x in 0..k {
                t[x * g + r] = base[(r0 + r) * k + x];
            }
        }
        t
    }).collect();
    let cipher = Cipher::new(seed);
    let indices = code_indices(seed, k, n);
    let wcipher = check.map(Cipher::new);
    let mut wstream = vec![0u8; CODE_CHUNK * 8];
    let mut wsum = vec![0u64; rows];
    let mut buf = vec![0u8; CODE_CHUNK * CODE_BLOCKS * BLOCK];
    let mut idx = vec![[0usize; LPN_WEIGHT]; CODE_CHUNK];
    let mut coef = vec![[0u64; LPN_WEIGHT]; CODE_CHUNK];
    for start in (0..n).step_by(CODE_CHUNK) {
        let count = CODE_CHUNK.min(n - start);
        let stream = &mut buf[..count * CODE_BLOCKS * BLOCK];
        cipher.ctr((start * CODE_BLOCKS) as u128, stream);
        for (c, row) in stream.chunks_exact(CODE_BLOCKS * BLOCK).enumerate() {
            let at = (start + c) * LPN_WEIGHT;
            for j in 0..LPN_WEIGHT {
                idx[c][j] = indices[at + j] as usize;
                coef[c][j] = u64::from_le_bytes(row[48 + 8 * j..56 + 8 * j].try_into().unwrap()) >> 2;
            }
        }
        let weights = wcipher.as_ref().map(|wc| {
            let w = &mut wstream[..count.div_ceil(2) * BLOCK];
            wc.ctr((start / 2) as u128, w);
            &*w
        });
        for (&(r0, g), t) in groups.iter().zip(&interleaved) {
            let code = (&idx[..count], &coef[..count]);
            match g {
                1 => apply::<1>(md, t, code, noise, n, r0, start, weights, &mut wsum),
                2 => apply::<2>(md, t, code, noise, n, r0, start, weights, &mut wsum),
                3 => apply::<3>(md, t, code, noise, n, r0, start, weights, &mut wsum),
                _ => apply::<4>(md, t, code, noise, n, r0, start, weights, &mut wsum),
            }
        }
    }
    Ok(wsum)
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: u64 = (1 << 61) - 1;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed).rotate_left(3) ^ seed ^ (i >> 8) as u8).collect()
    }

    #[test]
    fn punctured_trees_hold_every_leaf_but_one() {
        for depth in [1usize, 3, 8] {
            let t = 5;
            let roots = bytes(t * BLOCK, 7);
            let (leaves, sums) = ggm_expand(&roots, depth);
            let points: Vec<u64> = (0..t as u64).map(|g| (g * 37 + 3) % (1 << depth)).collect();
            let mut chosen = Vec::new();
            for g in 0..t {
                for l in 0..depth {
                    let side = 1 - ((points[g] >> l) & 1) as usize;
                    let at = ((g * depth + l) * 2 + side) * BLOCK;
                    chosen.extend_from_slice(&sums[at..at + BLOCK]);
                }
            }
            let got = ggm_punctured(&chosen, &points, depth).unwrap();
            let m = 1 << depth;
            for g in 0..t {
                for x in 0..m {
                    let at = (g * m + x) * BLOCK;
                    if x as u64 == points[g] {
                        assert_eq!(&got[at..at + BLOCK], &[0u8; BLOCK]);
                    } else {
                        assert_eq!(&got[at..at + BLOCK], &leaves[at..at + BLOCK], "depth {depth} tree {g} leaf {x}");
                    }
                }
            }
            // a wrong level sum changes leaves the puncturing party derives
            let mut bad = chosen.clone();
            bad[3] ^= 1;
            assert_ne!(ggm_punctured(&bad, &points, depth).unwrap(), got);
        }
        assert!(ggm_punctured(&[0u8; 16], &[2], 1).unwrap_err().contains("outside"));
    }

    #[test]
    fn leaf_values_are_reduced_and_summed() {
        let md = Modulus::new(Q).unwrap();
        let (leaves, _) = ggm_expand(&bytes(2 * BLOCK, 1), 4);
        let (v, s) = leaf_values(&leaves, &md, 2, 16, None);
        assert!(v.iter().all(|&x| x < Q));
        for j in 0..2 {
            for g in 0..2 {
                let want = v[j * 32 + g * 16..j * 32 + (g + 1) * 16].iter().fold(0u128, |a, &x| a + x as u128) % Q as u128;
                assert_eq!(s[j * 2 + g] as u128, want);
            }
        }
        assert_ne!(v[..32], v[32..]); // the keys' values differ
        // each value is its 128-bit hash mod q, exactly
        let mut blk = leaves[5 * BLOCK..6 * BLOCK].to_vec();
        let x0 = u128::from_le_bytes(blk[..].try_into().unwrap()) ^ 1;
        blk.copy_from_slice(&x0.to_le_bytes());
        fixed_cipher(2).encrypt(&mut blk);
        let h = u128::from_le_bytes(blk[..].try_into().unwrap()) ^ x0;
        let t = (((h >> 64) as u64 >> 4) as u128) << 64 | (h as u64) as u128; // 60 high bits kept for a 61-bit q
        assert_eq!(v[32 + 5] as u128, t % Q as u128 * inverse_r() as u128 % Q as u128);
        let (w, _) = leaf_values(&leaves, &md, 2, 16, Some(&[3, 0]));
        assert_eq!((w[3], w[16], w[32 + 3]), (0, 0, 0));
    }

    #[test]
    fn weighted_sums_match_their_definition() {
        let md = Modulus::new(Q).unwrap();
        let n = 5000;
        let rows: Vec<u64> = (0..2 * n as u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(11)) % Q).collect();
        let seed = [4u8; 16];
        let got = weighted_sums(&seed, &md, &rows, n).unwrap();
        let mut stream = vec![0u8; n.div_ceil(2) * BLOCK];
        Cipher::new(&seed).ctr(0, &mut stream);
        let r_inv = inverse_r();
        for r in 0..2 {
            let want = (0..n).fold(0u128, |acc, i| {
                let c = (u64::from_le_bytes(stream[8 * i..8 * i + 8].try_into().unwrap()) >> 2) as u128 % Q as u128;
                (acc + c * r_inv as u128 % Q as u128 * rows[r * n + i] as u128) % Q as u128
            });
            assert_eq!(got[r] as u128, want);
        }
        assert!(weighted_sums(&seed, &md, &[Q], 1).unwrap_err().contains("reduced"));
    }

    fn inverse_r() -> u64 {
        let (mut base, mut e, mut acc) = (((1u128 << 64) % Q as u128) as u64, Q - 2, 1u64);
        while e > 0 {
            if e & 1 == 1 { acc = (acc as u128 * base as u128 % Q as u128) as u64; }
            base = (base as u128 * base as u128 % Q as u128) as u64;
            e >>= 1;
        }
        acc
    }

    #[test]
    fn lpn_is_linear_and_matches_its_definition() {
        let md = Modulus::new(Q).unwrap();
        let r_inv = inverse_r(); // R^-1 mod q
        let (k, n) = (50usize, 40usize);
        let a: Vec<u64> = (0..k as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % Q).collect();
        let b: Vec<u64> = (0..k as u64).map(|i| (i.wrapping_mul(0xC2B2_AE3D_27D4_EB4F).wrapping_add(5)) % Q).collect();
        let seed = [9u8; 16];
        let mut base = a.clone();
        base.extend(&b);
        let mut out = vec![0u64; 2 * n];
        lpn_encode(&seed, &md, &base, k, &mut out, n).unwrap();
        // by definition, with the code's rows
        let cipher = Cipher::new(&seed);
        let mut buf = [0u8; CODE_BLOCKS * BLOCK];
        let (mut idx, mut coef) = ([0usize; LPN_WEIGHT], [0u64; LPN_WEIGHT]);
        for i in 0..n {
            cipher.ctr((i * CODE_BLOCKS) as u128, &mut buf);
            code_row(&buf, k, &mut idx, &mut coef);
            let mut sorted = idx.to_vec();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), LPN_WEIGHT);
            let want = (0..LPN_WEIGHT).fold(0u128, |acc, j| {
                let c = (coef[j] as u128 % Q as u128) * r_inv as u128 % Q as u128;
                (acc + c * a[idx[j]] as u128) % Q as u128
            });
            assert_eq!(out[i] as u128, want);
        }
        // the fused check sums are the weighted sums of the outputs
        let mut again = vec![0u64; 2 * n];
        let sums = lpn_encode_checked(&seed, &md, &base, k, &mut again, n, Some(&[7u8; 16])).unwrap();
        assert_eq!(again, out);
        assert_eq!(sums, weighted_sums(&[7u8; 16], &md, &out, n).unwrap());
        // linearity: encode(a + b) = encode(a) + encode(b)
        let sum: Vec<u64> = a.iter().zip(&b).map(|(x, y)| (x + y) % Q).collect();
        let mut one = vec![0u64; n];
        lpn_encode(&seed, &md, &sum, k, &mut one, n).unwrap();
        for i in 0..n {
            assert_eq!(one[i], (out[i] + out[n + i]) % Q);
        }
        assert!(lpn_encode(&seed, &md, &[Q; 10], 10, &mut [0u64; 1], 1).unwrap_err().contains("reduced"));
    }
}
