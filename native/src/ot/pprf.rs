//! The punctured PRF of SoftSpoken (Roy, CRYPTO 2022), semi-honest: GGM trees of depth k over the
//! 128 base OTs, grouped into 128/k groups of k. The extension receiver (the base-OT sender, keys
//! k0_i, k1_i) expands one tree per group into 2^k leaf seeds; the extension sender (the base-OT
//! receiver, choice bits Δ, keys k_{Δ_i}) learns every leaf but one, α, whose bits are its own
//! choice bits of the group.
//!
//! Tree of group g: root = AES_seed(g) (`seed` 16 random bytes from the caller); a node s has
//! children (AES_s(0), AES_s(1)) (counter blocks, little-endian), the left one at bit l = 0 of the
//! leaf index, l the node's depth: leaf x (0 ≤ x < 2^k) is reached by taking side x_l at depth l,
//! x_l = bit l of x (LSB first). Level l of group g uses base OT i = g·k + l.
//!
//! The setup message (receiver → sender, once, [`SETUP_LEN`] bytes): for every base OT i, two
//! blocks, S0_i ⊕ P(k1_i) then S1_i ⊕ P(k0_i), where S_b is the XOR of all nodes at depth l + 1
//! on side b (bit l = b) and P(key) = AES_key("softspoken/setup"). Side b is masked under the key
//! of the *other* choice, so the sender, holding k_{Δ_i}, opens the sum of side ¬Δ_i: it knows
//! all nodes of that side but one (the child of the punctured node), which the sum gives, and
//! the punctured path takes side Δ_i. Hence α = Σ_l Δ_{g·k+l}·2^l: the extension's Δ is the
//! base-OT choice bits, as in IKNP (where leaf x of base OT i is simply k_{1-x,i}).
//!
//! Nothing here draws random numbers; a base key is used for one pad only (it keys no PRG
//! stream of the extension when k ≥ 2).

use super::block::{load, store, Cipher, BLOCK};

/// Base OTs.
const KAPPA: usize = 128;
/// Bytes of the setup message: two blocks per base OT.
pub const SETUP_LEN: usize = 2 * KAPPA * BLOCK;
/// The block P(key) encrypts.
const PAD_BLOCK: [u8; BLOCK] = *b"softspoken/setup";

/// A 16-byte seed.
pub type Seed = [u8; BLOCK];

fn children(node: &Seed) -> (Seed, Seed) {
    let mut b = [0u8; 2 * BLOCK];
    Cipher::new(node).ctr(0, &mut b);
    (b[..BLOCK].try_into().unwrap(), b[BLOCK..].try_into().unwrap())
}

fn pad(key: &[u8]) -> u128 {
    let mut b = PAD_BLOCK;
    Cipher::new(key[..BLOCK].try_into().unwrap()).encrypt(&mut b);
    load(&b)
}

fn bit(delta: &[u8; BLOCK], i: usize) -> usize {
    ((delta[i >> 3] >> (i & 7)) & 1) as usize
}

/// The receiver's trees: the leaves ((128/k) groups × 2^k seeds, group g leaf x at g·2^k + x)
/// and the setup message. `k0`, `k1`: 128 × 16 bytes each; `k` ≥ 1 divides 128.
pub fn expand(k0: &[u8], k1: &[u8], k: usize, seed: &Seed) -> (Vec<Seed>, Vec<u8>) {
    assert!(k0.len() == KAPPA * BLOCK && k1.len() == KAPPA * BLOCK && KAPPA.is_multiple_of(k));
    let n = 1 << k;
    let roots = Cipher::new(seed);
    let mut leaves = vec![[0u8; BLOCK]; KAPPA / k * n];
    let mut setup = vec![0u8; SETUP_LEN];
    for (g, tree) in leaves.chunks_exact_mut(n).enumerate() {
        tree[0] = (g as u128).to_le_bytes();
        roots.encrypt(&mut tree[0]);
        for l in 0..k {
            // depth l holds tree[..w]; node p's children go to p and p + w
            let w = 1 << l;
            let (mut s0, mut s1) = (0u128, 0u128);
            for p in 0..w {
                let (a, b) = children(&tree[p]);
                (tree[p], tree[p + w]) = (a, b);
                s0 ^= load(&a);
                s1 ^= load(&b);
            }
            let i = g * k + l;
            store(&mut setup[2 * i * BLOCK..], s0 ^ pad(&k1[i * BLOCK..]));
            store(&mut setup[(2 * i + 1) * BLOCK..], s1 ^ pad(&k0[i * BLOCK..]));
        }
    }
    (leaves, setup)
}

/// The sender's side: from its keys (128 × 16 bytes, k_{Δ_i}), Δ and the setup message, the
/// leaves it knows, per group indexed by y = x ⊕ α (y = 1..2^k, 2^k − 1 per group, group g's
/// leaf y at g·(2^k − 1) + y − 1). A wrong setup message of the right length gives wrong leaves
/// (and no correlation), which the sender cannot detect.
pub fn puncture(keys: &[u8], delta: &[u8; BLOCK], k: usize, setup: &[u8]) -> Result<Vec<Seed>, String> {
    assert!(keys.len() == KAPPA * BLOCK && KAPPA.is_multiple_of(k));
    if setup.len() != SETUP_LEN {
        return Err(format!("the SoftSpoken setup message must be {SETUP_LEN} bytes, got {}", setup.len()));
    }
    let n = 1 << k;
    let mut known = Vec::with_capacity(KAPPA / k * (n - 1));
    let mut tree = vec![[0u8; BLOCK]; n];
    for g in 0..KAPPA / k {
        let mut alpha = 0; // the punctured node at the current depth; tree[alpha] is unknown
        for l in 0..k {
            let w = 1 << l;
            let i = g * k + l;
            let d = bit(delta, i);
            // the nodes of side ¬d at depth l + 1 other than the punctured node's child
            let mut sum = 0u128;
            for p in (0..w).filter(|&p| p != alpha) {
                let (a, b) = children(&tree[p]);
                (tree[p], tree[p + w]) = (a, b);
                sum ^= load(if d == 0 { &b } else { &a });
            }
            let opened = load(&setup[(2 * i + 1 - d) * BLOCK..]) ^ pad(&keys[i * BLOCK..]);
            store(&mut tree[alpha + (1 - d) * w], opened ^ sum);
            alpha += d * w;
            tree[alpha] = [0u8; BLOCK];
        }
        known.extend((1..n).map(|y| tree[y ^ alpha]));
    }
    Ok(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed).rotate_left(3) ^ seed).collect()
    }

    #[test]
    fn the_sender_learns_every_leaf_but_alpha() {
        let (k0, k1) = (bytes(2048, 1), bytes(2048, 2));
        let delta: [u8; 16] = bytes(16, 3).try_into().unwrap();
        let keys: Vec<u8> = (0..KAPPA).flat_map(|i| {
            (if bit(&delta, i) == 1 { &k1 } else { &k0 })[i * 16..(i + 1) * 16].to_vec()
        }).collect();
        for k in [1usize, 2, 4, 8] {
            let n = 1 << k;
            let (leaves, setup) = expand(&k0, &k1, k, &[9u8; 16]);
            assert_eq!(setup.len(), SETUP_LEN);
            let known = puncture(&keys, &delta, k, &setup).unwrap();
            for g in 0..KAPPA / k {
                let alpha = (0..k).map(|l| bit(&delta, g * k + l) << l).sum::<usize>();
                for y in 1..n {
                    assert_eq!(known[g * (n - 1) + y - 1], leaves[g * n + (y ^ alpha)], "k {k} group {g} leaf {y}");
                }
                // leaves are distinct (no two share a seed)
                let mut all = leaves[g * n..(g + 1) * n].to_vec();
                all.sort();
                all.dedup();
                assert_eq!(all.len(), n);
            }
            // one flipped bit of the setup message changes the leaves the sender derives
            let mut bad = setup.clone();
            bad[5] ^= 1; // both sides of base OT 0: one of them is the one the sender opens
            bad[BLOCK + 5] ^= 1;
            assert_ne!(puncture(&keys, &delta, k, &bad).unwrap(), known);
        }
        assert!(puncture(&keys, &delta, 2, &[0u8; SETUP_LEN - 1]).unwrap_err().contains("setup message"));
    }
}
