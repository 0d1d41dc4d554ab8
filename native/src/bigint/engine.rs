//! The engine abstraction: Montgomery arithmetic on a *group* of `lanes()` independent values
//! modulo one shared odd modulus, in the engine's own buffer layout.
//!
//! Values cross the boundary in the canonical layout: little-endian 64-bit words, `words()` per
//! value, fully reduced (< m). Inside, values live in Montgomery form (x·R mod m) and in the
//! "almost Montgomery" range [0, 2m): the modulus is given two bits of headroom (4m < R), so no
//! multiplication needs a final subtraction; one constant-time subtraction happens on the way
//! out. Group buffers hold `gw()` words; a *shared* value (one value for all lanes, used by the
//! fixed-base comb tables) holds `sw()` words.

/// Montgomery arithmetic over groups of lanes. All methods are constant time with respect to
/// the values (not to the lane count or modulus size).
/// The Montgomery constants of a modulus, in an engine's own group layout.
pub struct Constants {
    /// Montgomery form of 1 in every lane
    pub one: Vec<u64>,
    /// R^2 mod m in every lane
    pub rr: Vec<u64>,
    /// canonical 1 in every lane
    pub unit: Vec<u64>,
    /// 2m in the storage layout: the bound of stored Montgomery values
    pub two_m: Vec<u64>,
}

pub trait Engine: Sync + Send {
    /// Values per group (8 for the IFMA engine, 1 for the portable one).
    fn lanes(&self) -> usize;
    /// Words of one group buffer.
    fn gw(&self) -> usize;
    /// Words of one shared (single-lane) value.
    fn sw(&self) -> usize;
    /// Canonical words per value (ceil(bits(m) / 64)).
    fn words(&self) -> usize;
    /// `out = a * b / R mod m` (almost Montgomery: inputs and output in [0, 2m)).
    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64]);
    /// `out = a * a / R mod m`.
    fn sqr(&self, out: &mut [u64], a: &[u64]);
    /// Loads up to `lanes()` canonical values (`count` of them, contiguous) without conversion;
    /// missing lanes are zero.
    fn load_raw(&self, out: &mut [u64], src: &[u64], count: usize);
    /// Writes `count` lanes as canonical values (reducing [0, 2m) to [0, m)), without conversion.
    fn store_raw(&self, dst: &mut [u64], src: &[u64], count: usize);
    /// Words of one value in the Montgomery *storage* layout (`load_mont`/`store_mont`): the
    /// engine's own digits, element after element, kept in [0, 2m) so that values held in
    /// Montgomery form between calls cost no conversion and no subtraction.
    fn mw(&self) -> usize;
    /// Loads up to `lanes()` values in the storage layout (rows of `mw()` words).
    fn load_mont(&self, out: &mut [u64], src: &[u64], count: usize);
    /// Writes `count` lanes in the storage layout (no reduction: values stay in [0, 2m)).
    fn store_mont(&self, dst: &mut [u64], src: &[u64], count: usize);
    /// Whether a row is a valid stored value: digits in range and value below 2m.
    fn mont_ok(&self, row: &[u64]) -> bool;
    /// The modulus's Montgomery constants in this engine's layout.
    fn constants(&self) -> &Constants;
    /// Montgomery form of 1 in every lane.
    fn one(&self) -> &[u64] {
        &self.constants().one
    }
    /// R^2 mod m in every lane (multiplying by it converts into Montgomery form).
    fn rr(&self) -> &[u64] {
        &self.constants().rr
    }
    /// Canonical 1 in every lane (multiplying by it converts out of Montgomery form).
    fn unit(&self) -> &[u64] {
        &self.constants().unit
    }
    /// Constant-time selection: lane l of `out` = lane l of `table[idx[l]]`; `table` holds
    /// `entries` group buffers. Every entry is read whatever the indices.
    fn select(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]);
    /// Words of one selection table of `entries` shared values in this engine's layout.
    fn shared_block(&self, entries: usize) -> usize {
        entries * self.sw()
    }
    /// Converts `count` tables of `entries` shared values each, stored entry after entry, into
    /// this engine's selection layout (`shared_block(entries)` words per table).
    fn shared_layout(&self, raw: Vec<u64>, _entries: usize, _count: usize) -> Vec<u64> {
        raw
    }
    /// Constant-time selection from one table in the selection layout:
    /// lane l of `out` = entry `idx[l]`.
    fn select_shared(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]);
    /// Lane l of `out` = the shared value starting at word `offsets[l]` of `table` (index reads:
    /// not constant time). `offsets` has one entry per lane.
    fn gather(&self, out: &mut [u64], table: &[u64], offsets: &[usize]) {
        let sw = self.sw();
        for (l, &o) in offsets.iter().enumerate() {
            self.insert(&table[o..o + sw], l, out);
        }
    }
    /// Copies lane `lane` of a group buffer into a shared value.
    fn extract(&self, src: &[u64], lane: usize, dst: &mut [u64]);
    /// Fills every lane of `out` with a shared value.
    fn broadcast(&self, src: &[u64], out: &mut [u64]);
    /// Writes a shared value into lane `lane` of a group buffer.
    fn insert(&self, src: &[u64], lane: usize, dst: &mut [u64]);

    /// Montgomery form of `count` canonical values.
    fn load(&self, out: &mut [u64], src: &[u64], count: usize) {
        let mut raw = vec![0u64; self.gw()];
        self.load_raw(&mut raw, src, count);
        self.mul(out, &raw, self.rr());
    }
    /// Canonical values of `count` lanes in Montgomery form.
    fn store(&self, dst: &mut [u64], src: &[u64], count: usize) {
        let mut raw = vec![0u64; self.gw()];
        self.mul(&mut raw, src, self.unit());
        self.store_raw(dst, &raw, count);
    }
}

/// Modulus facts shared by both engines, computed once from the canonical words.
#[derive(Clone, Debug)]
pub struct Modulus {
    /// canonical little-endian words, `words` of them (top word non-zero)
    pub m: Vec<u64>,
    pub bits: usize,
}

/// Largest modulus the kernels accept.
pub const MAX_BITS: usize = 8192;

impl Modulus {
    pub fn new(words: &[u64]) -> Result<Self, String> {
        let mut m = words.to_vec();
        while m.len() > 1 && *m.last().unwrap() == 0 {
            m.pop();
        }
        let bits = bit_length(&m);
        if bits < 2 {
            return Err("modulus must be at least 3".into());
        }
        if m[0] & 1 == 0 {
            return Err("modulus must be odd (Montgomery arithmetic)".into());
        }
        if bits > MAX_BITS {
            return Err(format!("modulus of {bits} bits exceeds the {MAX_BITS}-bit maximum"));
        }
        Ok(Modulus { m, bits })
    }
    pub fn words(&self) -> usize {
        self.m.len()
    }
}

pub fn bit_length(words: &[u64]) -> usize {
    for i in (0..words.len()).rev() {
        if words[i] != 0 {
            return 64 * i + 64 - words[i].leading_zeros() as usize;
        }
    }
    0
}

/// -m^{-1} mod 2^64 for odd m0 (Newton iteration).
pub fn neg_inv64(m0: u64) -> u64 {
    let mut x: u64 = 1;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(m0.wrapping_mul(x)));
    }
    x.wrapping_neg()
}

/// 2^k mod m (canonical words, `m.len()` of them) by doubling with conditional subtraction.
/// Runs once per modulus; public data only.
pub fn pow2_mod(k: usize, m: &[u64]) -> Vec<u64> {
    let n = m.len();
    let bits = bit_length(m);
    let mut x = vec![0u64; n];
    // start from 2^(bits-1) < m
    let start = bits - 1;
    x[start / 64] = 1u64 << (start % 64);
    if k < start {
        let mut y = vec![0u64; n];
        y[k / 64] = 1u64 << (k % 64);
        return y;
    }
    for _ in start..k {
        // x = 2x mod m; x < m so 2x < 2m: one subtraction suffices
        let mut carry = 0u64;
        for w in x.iter_mut() {
            let nc = *w >> 63;
            *w = (*w << 1) | carry;
            carry = nc;
        }
        if carry == 1 || !less_than(&x, m) {
            sub_in_place(&mut x, m);
        }
    }
    x
}

/// `2 a` in `width` words (`width` must leave room for the carry).
pub fn twice(a: &[u64], width: usize) -> Vec<u64> {
    let mut out = a.to_vec();
    out.resize(width, 0);
    let mut carry = 0u64;
    for x in out.iter_mut() {
        let next = *x >> 63;
        *x = (*x << 1) | carry;
        carry = next;
    }
    debug_assert_eq!(carry, 0);
    out
}

pub fn less_than(a: &[u64], b: &[u64]) -> bool {
    for i in (0..a.len()).rev() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
    }
    false
}

pub fn sub_in_place(a: &mut [u64], b: &[u64]) {
    let mut borrow = 0u64;
    for i in 0..a.len() {
        let (d1, b1) = a[i].overflowing_sub(b[i]);
        let (d2, b2) = d1.overflowing_sub(borrow);
        a[i] = d2;
        borrow = (b1 | b2) as u64;
    }
}

/// Constant-time `a = a - m if a >= m` on words (a < 2m, same length as m).
pub fn reduce_once_ct(a: &mut [u64], m: &[u64]) {
    let n = a.len();
    let mut t = vec![0u64; n];
    let mut borrow = 0u64;
    for i in 0..n {
        let (d1, b1) = a[i].overflowing_sub(m[i]);
        let (d2, b2) = d1.overflowing_sub(borrow);
        t[i] = d2;
        borrow = (b1 | b2) as u64;
    }
    // borrow == 1 means a < m: keep a
    let keep = ct_mask(borrow);
    for i in 0..n {
        a[i] = (a[i] & keep) | (t[i] & !keep);
    }
}

/// All-ones when `bit` is 1, zero when it is 0, hidden from the optimiser so that masked
/// selections stay branch-free (without the barrier LLVM turns them into branches).
#[inline(always)]
pub fn ct_mask(bit: u64) -> u64 {
    std::hint::black_box(bit).wrapping_neg()
}

/// All-ones when `a == b` (constant time).
#[inline(always)]
pub fn ct_eq_mask(a: u64, b: u64) -> u64 {
    let x = std::hint::black_box(a ^ b);
    // x == 0 -> 1, else 0, without a comparison the compiler could branch on
    ct_mask(((x | x.wrapping_neg()) >> 63) ^ 1)
}

/// Bit length of the longest of `count` rows of `width` words: the rows are OR-ed together
/// first, so the time depends on the batch size only, not on each row's length.
pub fn rows_bit_length(rows: &[u64], count: usize, width: usize) -> usize {
    let mut acc = vec![0u64; width];
    for r in 0..count {
        for (a, x) in acc.iter_mut().zip(&rows[r * width..(r + 1) * width]) {
            *a |= *x;
        }
    }
    bit_length(&acc)
}

/// Bits `[pos, pos + w)` of a little-endian word array (zero beyond its end); w <= 32.
#[inline]
pub fn bits_at(words: &[u64], pos: usize, w: usize) -> u32 {
    let i = pos / 64;
    let s = pos % 64;
    let lo = if i < words.len() { words[i] >> s } else { 0 };
    let hi = if s + w > 64 && i + 1 < words.len() { words[i + 1] << (64 - s) } else { 0 };
    ((lo | hi) & ((1u64 << w) - 1)) as u32
}

/// Overwrites a buffer with zeros in a way the optimiser keeps (scratch that held secrets).
pub fn zeroize(buf: &mut [u64]) {
    for x in buf.iter_mut() {
        // SAFETY: a valid, aligned &mut u64.
        unsafe { std::ptr::write_volatile(x, 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// [`zeroize`] for window digits.
pub fn zeroize_u32(buf: &mut [u32]) {
    for x in buf.iter_mut() {
        // SAFETY: a valid, aligned &mut u32.
        unsafe { std::ptr::write_volatile(x, 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neg_inv() {
        for m0 in [1u64, 3, 0xffff_ffff_ffff_ffff, 0x1234_5678_9abc_def1] {
            assert_eq!(m0.wrapping_mul(neg_inv64(m0)), u64::MAX);
        }
    }

    #[test]
    fn pow2() {
        let m = vec![1_000_003u64];
        assert_eq!(pow2_mod(100, &m)[0], {
            let mut x = 1u128;
            for _ in 0..100 {
                x = x * 2 % 1_000_003;
            }
            x as u64
        });
    }
}
