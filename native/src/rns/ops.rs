//! Whole-array RNS kernels on an [`RnsContext`]: arrays `(..., rows, n)` with `mods[i]` the
//! context prime of row i (of the last-but-one axis); inputs checked to be reduced.
//!
//! Element-wise products use Barrett reduction of the 128-bit product; products by a per-row
//! constant use Shoup's. divide_round_last, decompose and key_switch follow the contract in
//! `shaper.kernels.rns`: a centred lift of one row's coefficients into the other primes
//! (the "basis extension" of one prime, exact because it is a single residue), forward NTTs,
//! and for the key switch a multiply-accumulate whose sums stay in 128 bits and are reduced
//! once per output (eight products below q^2 < 2^124 each fit), with the automorphism applied
//! on the fly as a gather. The key switch fuses its last step, divide-and-round by the special
//! prime, per row so that each row's accumulation and NTTs run while it is in cache; its input
//! checks are folded into the accumulation (a max per row), so the 16 MB key is read once.
//!
//! Parallelism: rayon over rows (or over coefficient blocks where there is one row); the
//! caller installs the pool. Results are independent of the thread count.

use rayon::prelude::*;

use super::ntt::brv;
use super::prime::Prime;
use super::RnsContext;

/// Rows per rayon task, so that a task holds at least about 4096 words.
fn min_rows(n: usize) -> usize {
    (4096 / n).max(1)
}

/// `sigma_g` on NTT-form rows of length n: `out[k] = A[p[k]]` (the contract's
/// `galois_permutation`); g odd in (0, 2n).
pub fn galois_permutation(n: usize, g: u64) -> Result<Vec<u32>, String> {
    let two_n = 2 * n as u64;
    if g % 2 == 0 || g == 0 || g >= two_n {
        return Err(format!("Galois element must be odd and in (0, {two_n}), got {g}"));
    }
    let bits = n.trailing_zeros();
    let mut where_ = vec![0u32; 2 * n];
    for k in 0..n {
        where_[2 * brv(k, bits) + 1] = k as u32;
    }
    Ok((0..n).map(|k| where_[((g * (2 * brv(k, bits) as u64 + 1)) % two_n) as usize]).collect())
}

/// Centred lift of residues mod `from` into residues mod `to.q`: x <= (from - 1) / 2 stands
/// for x, a larger x for x - from.
#[derive(Clone, Copy)]
struct Lift {
    half: u64,
    from: u64,
    /// from < 2 to.q: a centred value is already within (-to.q, to.q)
    small: bool,
    /// -from mod to.q
    neg: u64,
    to: Prime,
}

impl Lift {
    fn new(from: u64, to: Prime) -> Lift {
        Lift { half: (from - 1) / 2, from, small: from / 2 < to.q, neg: (to.q - from % to.q) % to.q, to }
    }

    fn apply(&self, src: &[u64], dst: &mut [u64]) {
        let (half, neg, to) = (self.half, self.neg, self.to);
        if self.small {
            // x <= half < to.q stays; x - from lies in (-to.q, 0), so adding to.q suffices
            let shift = to.q.wrapping_sub(self.from);
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = x.wrapping_add(if x > half { shift } else { 0 });
            }
        } else {
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = to.reduce_2q(to.reduce_u64(x) + if x > half { neg } else { 0 });
            }
        }
    }
}

/// A pointer tasks write disjoint rows through.
#[derive(Clone, Copy)]
struct SendPtr(*mut u64);
// SAFETY: used only for writes to disjoint rows of a buffer that outlives the parallel loop
unsafe impl Send for SendPtr {}
// SAFETY: as for `Send`: tasks share the pointer only to reach their own rows.
unsafe impl Sync for SendPtr {}

impl SendPtr {
    fn get(self) -> *mut u64 {
        self.0
    }
}

/// (a - b) c mod q for a, b < q, c given with its Shoup constant.
#[inline(always)]
fn sub_mul(p: &Prime, a: u64, b: u64, c: u64, cs: u64) -> u64 {
    p.mul_shoup(a + p.q - b, c, cs)
}

/// Largest entry of a row (0 for an empty one).
#[inline]
fn row_max(row: &[u64]) -> u64 {
    row.iter().fold(0, |m, &x| m.max(x))
}

/// Whether some entry of the row is >= q.
#[inline]
fn any_at_least(row: &[u64], q: u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if super::ntt::has_avx2() {
        // SAFETY: AVX2 checked at run time
        return unsafe { any_at_least_avx2(row, q) };
    }
    row.iter().fold(false, |b, &x| b | (x >= q))
}

/// x >= q as a signed comparison of x ^ 2^63 with (q - 1) ^ 2^63, OR-ed over the row.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn any_at_least_avx2(row: &[u64], q: u64) -> bool {
    use std::arch::x86_64::*;
    let flip = _mm256_set1_epi64x(i64::MIN);
    let lim = _mm256_set1_epi64x(((q - 1) ^ (1 << 63)) as i64);
    let (mut acc0, mut acc1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        // SAFETY: `c` is 8 words: two unaligned 4-word loads (`loadu`) at words 0 and 4.
        let (v0, v1) = unsafe {
            (_mm256_loadu_si256(c.as_ptr() as *const __m256i), _mm256_loadu_si256(c.as_ptr().add(4) as *const __m256i))
        };
        acc0 = _mm256_or_si256(acc0, _mm256_cmpgt_epi64(_mm256_xor_si256(v0, flip), lim));
        acc1 = _mm256_or_si256(acc1, _mm256_cmpgt_epi64(_mm256_xor_si256(v1, flip), lim));
    }
    let acc = _mm256_or_si256(acc0, acc1);
    _mm256_testz_si256(acc, acc) == 0 || chunks.remainder().iter().any(|&x| x >= q)
}

impl RnsContext {
    fn prime(&self, index: usize) -> &Prime {
        &self.tables[index].p
    }

    /// Every index names a context prime; `distinct`: no index twice.
    pub fn check_mods(&self, mods: &[usize], distinct: bool) -> Result<(), String> {
        if mods.is_empty() {
            return Err("mods must name at least one prime".into());
        }
        for (i, &m) in mods.iter().enumerate() {
            if m >= self.tables.len() {
                return Err(format!("mods[{i}] = {m} is not a prime index (the context has {})", self.tables.len()));
            }
            if distinct && mods[..i].contains(&m) {
                return Err(format!("prime index {m} appears twice in mods"));
            }
        }
        Ok(())
    }

    fn check_len(&self, len: usize, rows: usize, what: &str) -> Result<usize, String> {
        if rows == 0 {
            return Err(format!("{what}: no moduli given"));
        }
        if len % (rows * self.n) != 0 {
            return Err(format!("{what}: {len} words are not rows of {} x {}", rows, self.n));
        }
        Ok(len / (rows * self.n))
    }

    /// `Err` naming the first row (of the last-but-one axis) with an entry not below its prime.
    pub fn check_reduced(&self, a: &[u64], mods: &[usize], what: &str) -> Result<(), String> {
        let (n, rows) = (self.n, mods.len());
        let bad = a
            .par_chunks(n)
            .with_min_len(min_rows(n))
            .enumerate()
            .find_first(|(r, row)| any_at_least(row, self.prime(mods[r % rows]).q));
        match bad {
            None => Ok(()),
            Some((r, row)) => {
                let q = self.prime(mods[r % rows]).q;
                let (k, x) = row.iter().enumerate().find(|(_, &x)| x >= q).map(|(k, &x)| (k, x)).unwrap();
                let at = if r >= rows { format!(" of item {}", r / rows) } else { String::new() };
                Err(format!("{what}: row {}{at} (prime {q}) holds {x} at column {k}, not below the prime", r % rows))
            }
        }
    }

    /// In place, every row to NTT form.
    pub fn ntt(&self, a: &mut [u64], mods: &[usize]) -> Result<(), String> {
        self.transform(a, mods, false)
    }

    /// In place, every row back to coefficients.
    pub fn intt(&self, a: &mut [u64], mods: &[usize]) -> Result<(), String> {
        self.transform(a, mods, true)
    }

    fn transform(&self, a: &mut [u64], mods: &[usize], inverse: bool) -> Result<(), String> {
        self.check_mods(mods, false)?;
        self.check_len(a.len(), mods.len(), "a")?;
        let run = |row: &mut [u64], m: usize| {
            if inverse { self.tables[m].inverse(row) } else { self.tables[m].forward(row) }
        };
        if a.len() == self.n {
            // one row: no pool round trip (the binding calls this without the pool)
            if any_at_least(a, self.prime(mods[0]).q) {
                return self.check_reduced(a, mods, "a");
            }
            run(a, mods[0]);
            return Ok(());
        }
        self.check_reduced(a, mods, "a")?;
        let rows = mods.len();
        a.par_chunks_mut(self.n).enumerate().for_each(|(r, row)| run(row, mods[r % rows]));
        Ok(())
    }

    /// out[k] = f(prime of k's row, out[k], a[k], b[k]) over (checked) rows, on the pool.
    fn rows3<F>(&self, out: &mut [u64], a: &[u64], b: &[u64], mods: &[usize], f: F)
    where
        F: Fn(&Prime, u64, u64, u64) -> u64 + Sync,
    {
        let (n, rows) = (self.n, mods.len());
        out.par_chunks_mut(n)
            .zip(a.par_chunks(n).zip(b.par_chunks(n)))
            .with_min_len(min_rows(n))
            .enumerate()
            .for_each(|(r, (o, (x, y)))| {
                let p = self.prime(mods[r % rows]);
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    *o = f(p, *o, x, y);
                }
            });
    }

    fn map2<F>(&self, a: &[u64], b: &[u64], mods: &[usize], f: F) -> Result<Vec<u64>, String>
    where
        F: Fn(&Prime, u64, u64) -> u64 + Sync,
    {
        self.check_mods(mods, false)?;
        self.check_len(a.len(), mods.len(), "a")?;
        if a.len() != b.len() {
            return Err(format!("operands of {} and {} words differ", a.len(), b.len()));
        }
        self.check_reduced(a, mods, "a")?;
        self.check_reduced(b, mods, "b")?;
        let mut out = vec![0u64; a.len()];
        self.rows3(&mut out, a, b, mods, |p, _, x, y| f(p, x, y));
        Ok(out)
    }

    pub fn add(&self, a: &[u64], b: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.map2(a, b, mods, |p, x, y| p.add(x, y))
    }

    pub fn sub(&self, a: &[u64], b: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.map2(a, b, mods, |p, x, y| p.sub(x, y))
    }

    pub fn mul(&self, a: &[u64], b: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.map2(a, b, mods, |p, x, y| p.mul(x, y))
    }

    pub fn neg(&self, a: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.map2(a, a, mods, |p, x, _| p.neg(x))
    }

    /// acc += a b in place.
    pub fn mul_acc(&self, acc: &mut [u64], a: &[u64], b: &[u64], mods: &[usize]) -> Result<(), String> {
        self.check_mods(mods, false)?;
        self.check_len(acc.len(), mods.len(), "acc")?;
        if a.len() != acc.len() || b.len() != acc.len() {
            return Err(format!("acc, a and b differ in size: {}, {} and {} words", acc.len(), a.len(), b.len()));
        }
        self.check_reduced(acc, mods, "acc")?;
        self.check_reduced(a, mods, "a")?;
        self.check_reduced(b, mods, "b")?;
        self.rows3(acc, a, b, mods, |p, o, x, y| p.reduce_product(x as u128 * y as u128 + o as u128));
        Ok(())
    }

    /// Row i times scalars[i] (reduced mod the row's prime, checked).
    pub fn mul_scalar(&self, a: &[u64], scalars: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.check_mods(mods, false)?;
        self.check_len(a.len(), mods.len(), "a")?;
        if scalars.len() != mods.len() {
            return Err(format!("{} scalars for {} rows", scalars.len(), mods.len()));
        }
        self.check_reduced(a, mods, "a")?;
        for (i, (&m, &s)) in mods.iter().zip(scalars).enumerate() {
            if s >= self.prime(m).q {
                return Err(format!("scalars[{i}] = {s} is not below its prime {}", self.prime(m).q));
            }
        }
        let consts: Vec<(u64, u64)> = mods.iter().zip(scalars).map(|(&m, &w)| (w, self.prime(m).shoup(w))).collect();
        let (n, rows) = (self.n, mods.len());
        let mut out = vec![0u64; a.len()];
        out.par_chunks_mut(n).zip(a.par_chunks(n)).with_min_len(min_rows(n)).enumerate().for_each(|(r, (o, x))| {
            let p = self.prime(mods[r % rows]);
            let (w, ws) = consts[r % rows];
            for (o, &x) in o.iter_mut().zip(x) {
                *o = p.mul_shoup(x, w, ws);
            }
        });
        Ok(out)
    }

    /// (a0, a1) x (b0, b1) -> (a0 b0, a0 b1 + a1 b0, a1 b1); a, b of shape (2, rows, n).
    pub fn tensor(&self, a: &[u64], b: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.check_mods(mods, false)?;
        let (n, rows) = (self.n, mods.len());
        let rn = rows * n;
        if a.len() != 2 * rn || b.len() != 2 * rn {
            return Err(format!("tensor needs two (2, {rows}, {n}) operands"));
        }
        self.check_reduced(a, mods, "a")?;
        self.check_reduced(b, mods, "b")?;
        let mut out = vec![0u64; 3 * rn];
        let (o0, rest) = out.split_at_mut(rn);
        let (o1, o2) = rest.split_at_mut(rn);
        o0.par_chunks_mut(n)
            .zip(o1.par_chunks_mut(n).zip(o2.par_chunks_mut(n)))
            .with_min_len(min_rows(n))
            .enumerate()
            .for_each(|(i, (r0, (r1, r2)))| {
                let p = self.prime(mods[i]);
                let (a0, a1) = (&a[i * n..(i + 1) * n], &a[rn + i * n..rn + (i + 1) * n]);
                let (b0, b1) = (&b[i * n..(i + 1) * n], &b[rn + i * n..rn + (i + 1) * n]);
                for k in 0..n {
                    let (x0, x1, y0, y1) = (a0[k] as u128, a1[k] as u128, b0[k] as u128, b1[k] as u128);
                    r0[k] = p.reduce_product(x0 * y0);
                    r1[k] = p.reduce_u128(x0 * y1 + x1 * y0);
                    r2[k] = p.reduce_product(x1 * y1);
                }
            });
        Ok(out)
    }

    /// NTT-form automorphism X -> X^g of every row (any leading shape; no reduction needed).
    pub fn automorph(&self, a: &[u64], g: u64) -> Result<Vec<u64>, String> {
        let n = self.n;
        if a.len() % n != 0 {
            return Err(format!("a: {} words are not rows of {n}", a.len()));
        }
        let perm = galois_permutation(n, g)?;
        let mut out = vec![0u64; a.len()];
        out.par_chunks_mut(n).zip(a.par_chunks(n)).with_min_len(min_rows(n)).for_each(|(o, x)| {
            for (o, &k) in o.iter_mut().zip(&perm) {
                *o = x[k as usize];
            }
        });
        Ok(out)
    }

    /// x (..., n) of signed integers with |x| < 2^62 -> (..., len(mods), n): row i is x mod
    /// primes[mods[i]] (coefficient form). One Shoup reduction of |x| per element, negated
    /// where x < 0.
    pub fn from_signed(&self, x: &[i64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.check_mods(mods, false)?;
        let (n, rows) = (self.n, mods.len());
        if x.len() % n != 0 {
            return Err(format!("x: {} words are not rows of {n}", x.len()));
        }
        const LIM: u64 = 1 << 62;
        if let Some((k, &v)) = x.iter().enumerate().find(|(_, &v)| v.unsigned_abs() >= LIM) {
            return Err(format!("x holds {v} at index {k}, not below 2^62 in absolute value"));
        }
        let mut out = vec![0u64; x.len() * rows];
        out.par_chunks_mut(n).with_min_len(min_rows(n)).enumerate().for_each(|(r, o)| {
            let (b, i) = (r / rows, r % rows);
            let p = self.prime(mods[i]);
            for (o, &v) in o.iter_mut().zip(&x[b * n..(b + 1) * n]) {
                let m = p.reduce_u64(v.unsigned_abs());
                *o = if v < 0 { p.neg(m) } else { m };
            }
        });
        Ok(out)
    }

    /// (..., r, n) over mods -> (..., r - 1, n): row i becomes (A_i - ntt([t] mod m_i)) m_r^-1
    /// with t the centred lift of intt(last row).
    pub fn divide_round_last(&self, a: &[u64], mods: &[usize]) -> Result<Vec<u64>, String> {
        self.check_mods(mods, true)?;
        let (n, rows) = (self.n, mods.len());
        if rows < 2 {
            return Err("divide_round_last needs at least two rows".into());
        }
        let batch = self.check_len(a.len(), rows, "a")?;
        self.check_reduced(a, mods, "a")?;
        let last = &self.tables[mods[rows - 1]];
        let mut coeff = vec![0u64; batch * n];
        coeff.par_chunks_mut(n).enumerate().for_each(|(b, c)| {
            c.copy_from_slice(&a[(b * rows + rows - 1) * n..(b * rows + rows) * n]);
            last.inverse(c);
        });
        let consts: Vec<(Lift, u64, u64)> = mods[..rows - 1]
            .iter()
            .map(|&m| {
                let p = *self.prime(m);
                let inv = p.inv(p.reduce_u64(last.p.q));
                (Lift::new(last.p.q, p), inv, p.shoup(inv))
            })
            .collect();
        let mut out = vec![0u64; batch * (rows - 1) * n];
        out.par_chunks_mut(n).enumerate().for_each(|(r, o)| {
            let (b, i) = (r / (rows - 1), r % (rows - 1));
            let (lift, inv, inv_s) = consts[i];
            lift.apply(&coeff[b * n..(b + 1) * n], o);
            self.tables[mods[i]].forward(o);
            let src = &a[(b * rows + i) * n..(b * rows + i + 1) * n];
            let p = &lift.to;
            for (o, &x) in o.iter_mut().zip(src) {
                *o = sub_mul(p, x, *o, inv, inv_s);
            }
        });
        Ok(out)
    }

    /// (..., l+1, n) NTT form over mods -> (..., l+1, l+2, n): digit j is the centred lift of
    /// intt(row j) in every prime of mods + [sp], NTT form.
    pub fn decompose(&self, a: &[u64], mods: &[usize], sp: usize) -> Result<Vec<u64>, String> {
        let all: Vec<usize> = mods.iter().copied().chain([sp]).collect();
        self.check_mods(&all, true)?;
        let (n, rows) = (self.n, mods.len());
        let batch = self.check_len(a.len(), rows, "a")?;
        self.check_reduced(a, mods, "a")?;
        let mut coeff = a.to_vec();
        coeff.par_chunks_mut(n).enumerate().for_each(|(r, c)| self.tables[mods[r % rows]].inverse(c));
        let lifts: Vec<Lift> = mods
            .iter()
            .flat_map(|&j| all.iter().map(move |&i| (j, i)))
            .map(|(j, i)| Lift::new(self.prime(j).q, *self.prime(i)))
            .collect();
        let width = rows + 1;
        let mut out = vec![0u64; batch * rows * width * n];
        // tasks ordered by target prime, so that consecutive NTTs share one twiddle table
        // (256 KiB at n = 2^14) instead of cycling through all of them
        let ptr = SendPtr(out.as_mut_ptr());
        (0..batch * rows * width).into_par_iter().for_each(|task| {
            let (b, i, j) = (task / (rows * width), task / rows % width, task % rows);
            let src = (b * rows + j) * n..(b * rows + j + 1) * n;
            let at = ((b * rows + j) * width + i) * n;
            // SAFETY: each task writes its own row `at..at + n` of `out`, which outlives the loop
            let o = unsafe { std::slice::from_raw_parts_mut(ptr.get().add(at), n) };
            if i == j {
                o.copy_from_slice(&a[src]);
            } else {
                lifts[j * width + i].apply(&coeff[src], o);
                self.tables[all[i]].forward(o);
            }
        });
        Ok(out)
    }

    /// sum_j sigma_g(D_j) K[mods[j], c, all[i]] for output row i of both components, over the
    /// coefficient range `start..start + out0.len()`. Blocks of B coefficients: for each digit
    /// the block's products are added to 128-bit sums kept in L1 (each row is read
    /// sequentially); every eight digits the sums are folded below q. Every digit and key word
    /// read is checked below q on the block just loaded (one pass over memory instead of a
    /// separate validation pass); returns false when one is not, and the output is then void.
    #[allow(clippy::too_many_arguments)]
    fn key_products(&self, digits: &[u64], key: &[u64], key_rows: usize, mods: &[usize], all: &[usize], i: usize,
                    perm: Option<&[u32]>, start: usize, out0: &mut [u64], out1: &mut [u64]) -> bool {
        const B: usize = 128;
        let mut bad = false;
        let (n, rows) = (self.n, mods.len());
        let width = rows + 1;
        let p = *self.prime(all[i]);
        let mut acc0 = [0u128; B];
        let mut acc1 = [0u128; B];
        let mut gathered = [0u64; B];
        for (c0, (o0, o1)) in out0.chunks_mut(B).zip(out1.chunks_mut(B)).enumerate() {
            let k0 = start + c0 * B;
            let len = o0.len();
            let (acc0, acc1) = (&mut acc0[..len], &mut acc1[..len]);
            acc0.fill(0);
            acc1.fill(0);
            for (j, &m) in mods.iter().enumerate() {
                let drow = &digits[(j * width + i) * n..(j * width + i + 1) * n];
                let d = match perm {
                    None => &drow[k0..k0 + len],
                    Some(pm) => {
                        for (g, &s) in gathered[..len].iter_mut().zip(&pm[k0..k0 + len]) {
                            *g = drow[s as usize];
                        }
                        &gathered[..len]
                    }
                };
                let y0 = &key[((m * 2) * key_rows + all[i]) * n + k0..][..len];
                let y1 = &key[((m * 2 + 1) * key_rows + all[i]) * n + k0..][..len];
                bad |= any_at_least(d, p.q) | any_at_least(y0, p.q) | any_at_least(y1, p.q);
                if j % 8 == 0 && j > 0 {
                    // eight products below q^2 each, plus a reduced carry: below 2^127
                    for a in acc0.iter_mut().chain(acc1.iter_mut()) {
                        *a = p.reduce_u128(*a) as u128;
                    }
                }
                for t in 0..len {
                    acc0[t] += d[t] as u128 * y0[t] as u128;
                    acc1[t] += d[t] as u128 * y1[t] as u128;
                }
            }
            for t in 0..len {
                o0[t] = p.reduce_u128(acc0[t]);
                o1[t] = p.reduce_u128(acc1[t]);
            }
        }
        !bad
    }

    /// The message for an unreduced key-switch input touching output row i (slow path).
    fn key_switch_culprit(&self, digits: &[u64], key: &[u64], key_rows: usize, mods: &[usize], all: &[usize], i: usize) -> String {
        let n = self.n;
        let width = mods.len() + 1;
        let q = self.prime(all[i]).q;
        for (j, &m) in mods.iter().enumerate() {
            if row_max(&digits[(j * width + i) * n..(j * width + i + 1) * n]) >= q {
                return format!("digits: digit {j}, row {i} (prime {q}) is not reduced below the prime");
            }
            for c in 0..2 {
                let at = ((m * 2 + c) * key_rows + all[i]) * n;
                if row_max(&key[at..at + n]) >= q {
                    return format!("key: digit {m}, component {c}, row {} (prime {q}) is not reduced below the prime", all[i]);
                }
            }
        }
        "key switch: an input is not reduced".into()
    }

    /// Hoisted key switch: digits (l+1, l+2, n) from `decompose` over mods (+ sp), key
    /// (key_digits, 2, primes, n) -> (2, l+1, n) = divide_round_last over mods + [sp] of
    /// sum_j sigma_g(D_j) K[mods[j], c, mods + [sp]].
    pub fn key_switch(&self, digits: &[u64], key: &[u64], key_digits: usize, mods: &[usize], sp: usize, g: u64)
        -> Result<Vec<u64>, String> {
        let all: Vec<usize> = mods.iter().copied().chain([sp]).collect();
        self.check_mods(&all, true)?;
        let (n, rows) = (self.n, mods.len());
        let key_rows = self.tables.len();
        if digits.len() != rows * (rows + 1) * n {
            return Err(format!("digits must have shape ({rows}, {}, {n}) for {rows} primes", rows + 1));
        }
        if key.len() != key_digits * 2 * key_rows * n {
            return Err(format!("key must have shape (digits, 2, {key_rows}, {n})"));
        }
        if let Some(&m) = mods.iter().find(|&&m| m >= key_digits) {
            return Err(format!("key has {key_digits} digits; prime index {m} has none"));
        }
        let perm = if g == 1 { None } else { Some(galois_permutation(n, g)?) };
        let perm = perm.as_deref();
        // the special prime's row of both components, then back to coefficients
        let mut sp_rows = vec![0u64; 2 * n];
        let sp_ok = {
            const CHUNK: usize = 1024;
            let (s0, s1) = sp_rows.split_at_mut(n);
            s0.par_chunks_mut(CHUNK).zip(s1.par_chunks_mut(CHUNK)).enumerate().map(|(c, (o0, o1))| {
                self.key_products(digits, key, key_rows, mods, &all, rows, perm, c * CHUNK, o0, o1)
            }).reduce(|| true, |a, b| a & b)
        };
        if !sp_ok {
            return Err(self.key_switch_culprit(digits, key, key_rows, mods, &all, rows));
        }
        {
            let t = &self.tables[sp];
            let (s0, s1) = sp_rows.split_at_mut(n);
            rayon::join(|| t.inverse(s0), || t.inverse(s1));
        }
        let lifts: Vec<(Lift, u64, u64)> = mods
            .iter()
            .map(|&m| {
                let p = *self.prime(m);
                let inv = p.inv(p.reduce_u64(self.prime(sp).q));
                (Lift::new(self.prime(sp).q, p), inv, p.shoup(inv))
            })
            .collect();
        let mut out = vec![0u64; 2 * rows * n];
        let (out0, out1) = out.split_at_mut(rows * n);
        let bad_row = out0.par_chunks_mut(n).zip(out1.par_chunks_mut(n)).enumerate().map(|(i, (o0, o1))| {
            if !self.key_products(digits, key, key_rows, mods, &all, i, perm, 0, o0, o1) {
                return Some(i);
            }
            let (lift, inv, inv_s) = lifts[i];
            let mut tmp = vec![0u64; n];
            for (c, o) in [o0, o1].into_iter().enumerate() {
                lift.apply(&sp_rows[c * n..(c + 1) * n], &mut tmp);
                self.tables[mods[i]].forward(&mut tmp);
                for (o, &t) in o.iter_mut().zip(&tmp) {
                    *o = sub_mul(&lift.to, *o, t, inv, inv_s);
                }
            }
            None
        }).reduce(|| None, |a, b| a.or(b));
        if let Some(i) = bad_row {
            return Err(self.key_switch_culprit(digits, key, key_rows, mods, &all, i));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::prime::ntt_primes;
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *s ^ (*s >> 29)
    }

    fn ctx(n: usize, bits: &[u32]) -> RnsContext {
        let mut primes = Vec::new();
        for &b in bits {
            let q = ntt_primes(n as u64, b, 1, &primes).unwrap()[0];
            primes.push(q);
        }
        RnsContext::new(n, &primes, None).unwrap()
    }

    fn random_rows(c: &RnsContext, mods: &[usize], batch: usize, s: &mut u64) -> Vec<u64> {
        let n = c.n;
        let mut v = vec![0u64; batch * mods.len() * n];
        for (r, row) in v.chunks_mut(n).enumerate() {
            let q = c.tables[mods[r % mods.len()]].p.q;
            for x in row.iter_mut() {
                *x = match lcg(s) % 8 {
                    0 => 0,
                    1 => q - 1,
                    2 => (q - 1) / 2,
                    3 => (q + 1) / 2,
                    _ => lcg(s) % q,
                };
            }
        }
        v
    }

    #[test]
    fn no_moduli_is_an_error_not_a_division_by_zero() {
        let c = ctx(16, &[30, 50]);
        assert!(c.decompose(&[], &[], 1).unwrap_err().contains("no moduli"));
        assert!(c.add(&[], &[], &[]).is_err());
    }

    #[test]
    fn element_wise_ops_match_scalar_arithmetic() {
        let c = ctx(16, &[30, 50, 60, 61, 62]);
        let mods = [4, 0, 2, 3, 1];
        let mut s = 1;
        let (a, b) = (random_rows(&c, &mods, 2, &mut s), random_rows(&c, &mods, 2, &mut s));
        let (sum, diff, prod, neg) =
            (c.add(&a, &b, &mods).unwrap(), c.sub(&a, &b, &mods).unwrap(), c.mul(&a, &b, &mods).unwrap(), c.neg(&a, &mods).unwrap());
        let mut acc = random_rows(&c, &mods, 2, &mut s);
        let acc0 = acc.clone();
        c.mul_acc(&mut acc, &a, &b, &mods).unwrap();
        let scalars = [c.tables[4].p.q - 1, 0, 3, 1 << 58, 12345];
        assert!(c.mul_scalar(&a, &[u64::MAX, 0, 3, 1, 1], &mods).unwrap_err().contains("scalars[0]"));
        let scaled = c.mul_scalar(&a, &scalars, &mods).unwrap();
        let ten = c.tensor(&a, &b, &mods).unwrap();
        let rn = mods.len() * 16;
        for k in 0..a.len() {
            let q = c.tables[mods[k / 16 % mods.len()]].p.q as u128;
            let (x, y, z) = (a[k] as u128, b[k] as u128, acc0[k] as u128);
            assert_eq!(sum[k] as u128, (x + y) % q);
            assert_eq!(diff[k] as u128, (x + q - y) % q);
            assert_eq!(prod[k] as u128, x * y % q);
            assert_eq!(neg[k] as u128, (q - x) % q);
            assert_eq!(acc[k] as u128, (z + x * y) % q);
            assert_eq!(scaled[k] as u128, x * (scalars[k / 16 % mods.len()] as u128 % q) % q);
            if k < rn {
                let (x1, y1) = (a[rn + k] as u128, b[rn + k] as u128);
                assert_eq!(ten[k] as u128, x * y % q);
                assert_eq!(ten[rn + k] as u128, (x * y1 % q + x1 * y % q) % q);
                assert_eq!(ten[2 * rn + k] as u128, x1 * y1 % q);
            }
        }
    }

    #[test]
    fn unreduced_inputs_and_bad_indices_are_named() {
        let c = ctx(8, &[30, 40]);
        let mut a = vec![1u64; 2 * 8];
        a[8 + 3] = c.tables[1].p.q;
        let e = c.add(&a, &a, &[0, 1]).unwrap_err();
        assert!(e.contains("row 1") && e.contains(&c.tables[1].p.q.to_string()), "{e}");
        assert!(c.ntt(&mut a, &[0, 2]).unwrap_err().contains("mods[1] = 2"));
        assert!(c.divide_round_last(&a, &[1, 1]).unwrap_err().contains("twice"));
        assert!(c.automorph(&a, 4).unwrap_err().contains("odd"));
        assert!(c.automorph(&a, 17).unwrap_err().contains("odd"));
        assert!(RnsContext::new(8, &[41], None).err().unwrap().contains("41"));
        assert!(RnsContext::new(8, &[17 * 97], None).is_err());
        assert!(RnsContext::new(8, &[17], Some(&[2])).err().unwrap().contains("root 2"));
        assert!(RnsContext::new(8, &[17], Some(&[3])).is_ok()); // 3 has order 16 mod 17
    }

    #[test]
    fn automorph_matches_coefficient_substitution() {
        let n = 64;
        let c = ctx(n, &[50, 60]);
        let mods = [1, 0];
        let mut s = 7;
        let coef = random_rows(&c, &mods, 1, &mut s);
        for g in [1u64, 3, 5, 25, 2 * n as u64 - 1, 77] {
            // X -> X^g: coefficient i goes to g i mod 2n, negated when that is >= n
            let mut want = vec![0u64; coef.len()];
            for (r, row) in coef.chunks(n).enumerate() {
                let q = c.tables[mods[r]].p.q;
                for (i, &x) in row.iter().enumerate() {
                    let e = (g as usize * i) % (2 * n);
                    want[r * n + e % n] = if e >= n { (q - x) % q } else { x };
                }
            }
            let mut a = coef.clone();
            c.ntt(&mut a, &mods).unwrap();
            let mut got = c.automorph(&a, g).unwrap();
            c.intt(&mut got, &mods).unwrap();
            assert_eq!(got, want, "g={g}");
        }
    }

    fn crt(residues: &[u64], primes: &[u64]) -> u128 {
        // x mod the product, by Garner's incremental construction
        let (mut x, mut m) = (0u128, 1u128);
        for (&r, &q) in residues.iter().zip(primes) {
            let p = Prime::new(q);
            let t = p.mul(p.sub(r, (x % q as u128) as u64), p.inv((m % q as u128) as u64));
            x += m * t as u128;
            m *= q as u128;
        }
        x
    }

    #[test]
    fn divide_round_last_is_rounded_division_of_the_crt_value() {
        let n = 32;
        let c = ctx(n, &[30, 31, 29]);
        let primes = c.primes();
        for mods in [vec![0usize, 1, 2], vec![2, 0], vec![1, 2, 0]] {
            let mut s = mods.len() as u64;
            let coef = random_rows(&c, &mods, 2, &mut s);
            let mut a = coef.clone();
            c.ntt(&mut a, &mods).unwrap();
            let mut got = c.divide_round_last(&a, &mods).unwrap();
            let r = mods.len();
            c.intt(&mut got, &mods[..r - 1]).unwrap();
            let qs: Vec<u64> = mods.iter().map(|&m| primes[m]).collect();
            let (big_q, last) = (qs.iter().map(|&q| q as u128).product::<u128>(), qs[r - 1] as u128);
            for b in 0..2 {
                for k in 0..n {
                    let res: Vec<u64> = (0..r).map(|i| coef[(b * r + i) * n + k]).collect();
                    let x = crt(&res, &qs);
                    // round(x / last) of the representative in [0, Q): (x - centred(x mod last)) / last
                    let t = x % last;
                    let y = if t <= (last - 1) / 2 { (x - t) / last } else { (x + (last - t)) / last };
                    let y = y % (big_q / last);
                    for i in 0..r - 1 {
                        assert_eq!(got[(b * (r - 1) + i) * n + k] as u128, y % qs[i] as u128, "mods={mods:?} k={k}");
                    }
                }
            }
        }
    }

    /// Key K[j, 0] = P (Q / q_j) [(Q / q_j)^-1]_{q_j} (zero noise, zero mask, secret 1): rows
    /// are P mod q_j at row j and 0 elsewhere, so key switching reconstructs a by CRT, times P,
    /// divided by P: the result is exactly (sigma_g(a), 0).
    #[test]
    fn key_switch_with_a_gadget_key_returns_the_input() {
        let n = 16;
        let c = ctx(n, &[40, 41, 42, 50]);
        let (r, sp) = (4, 3);
        let big_p = c.tables[sp].p.q;
        let mut key = vec![0u64; 3 * 2 * r * n];
        for j in 0..3 {
            let q = c.tables[j].p.q;
            key[((j * 2) * r + j) * n..((j * 2) * r + j + 1) * n].fill(big_p % q);
        }
        let mut s = 11;
        for mods in [vec![0usize, 1, 2], vec![0, 1], vec![2, 0]] {
            let mut a = random_rows(&c, &mods, 1, &mut s);
            c.ntt(&mut a, &mods).unwrap();
            let digits = c.decompose(&a, &mods, sp).unwrap();
            let l1 = mods.len();
            for j in 0..l1 {
                assert_eq!(&digits[(j * (l1 + 1) + j) * n..(j * (l1 + 1) + j + 1) * n], &a[j * n..(j + 1) * n]);
            }
            for g in [1u64, 5, 31] {
                let out = c.key_switch(&digits, &key, 3, &mods, sp, g).unwrap();
                assert_eq!(&out[..l1 * n], &c.automorph(&a, g).unwrap()[..], "mods={mods:?} g={g}");
                assert!(out[l1 * n..].iter().all(|&x| x == 0));
            }
        }
    }

    /// The fused key switch agrees with its definition through the separately tested kernels
    /// (automorph, mul, add, divide_round_last), for a random key.
    #[test]
    fn key_switch_matches_its_definition() {
        let n = 64;
        let c = ctx(n, &[50, 55, 60, 61, 62]);
        let (r, sp) = (5, 4);
        let mut s = 3;
        let all_rows: Vec<usize> = (0..r).collect();
        let key = random_rows(&c, &all_rows, 4 * 2, &mut s);
        for mods in [vec![0usize, 1, 2, 3], vec![3, 1]] {
            let a = random_rows(&c, &mods, 1, &mut s);
            let digits = c.decompose(&a, &mods, sp).unwrap();
            let l1 = mods.len();
            let all: Vec<usize> = mods.iter().copied().chain([sp]).collect();
            for g in [1u64, 3, 2 * n as u64 - 1] {
                let mut sum = vec![0u64; 2 * (l1 + 1) * n];
                for (j, &m) in mods.iter().enumerate() {
                    let d = c.automorph(&digits[j * (l1 + 1) * n..(j + 1) * (l1 + 1) * n], g).unwrap();
                    for comp in 0..2 {
                        let k: Vec<u64> = all.iter().flat_map(|&i| key[((m * 2 + comp) * r + i) * n..][..n].to_vec()).collect();
                        let prod = c.mul(&d, &k, &all).unwrap();
                        let acc = &mut sum[comp * (l1 + 1) * n..(comp + 1) * (l1 + 1) * n];
                        let new = c.add(acc, &prod, &all).unwrap();
                        acc.copy_from_slice(&new);
                    }
                }
                let want = c.divide_round_last(&sum, &all).unwrap();
                assert_eq!(c.key_switch(&digits, &key, 4, &mods, sp, g).unwrap(), want, "mods={mods:?} g={g}");
            }
            let mut bad = key.clone();
            bad[((mods[0] * 2 + 1) * r + sp) * n + 5] = c.tables[sp].p.q;
            let e = c.key_switch(&digits, &bad, 4, &mods, sp, 1).unwrap_err();
            assert!(e.contains("key: digit") && e.contains("component 1"), "{e}");
        }
    }

    #[test]
    fn from_signed_reduces_each_prime() {
        let n = 16;
        let c = ctx(n, &[30, 61, 62]);
        let mods = [2usize, 0, 1];
        let mut s = 9;
        let mut x: Vec<i64> = (0..2 * n).map(|_| (lcg(&mut s) >> 2) as i64 * if lcg(&mut s) & 1 == 1 { -1 } else { 1 }).collect();
        x[0] = (1 << 62) - 1;
        x[1] = -((1 << 62) - 1);
        x[2] = 0;
        x[3] = -1;
        let got = c.from_signed(&x, &mods).unwrap();
        for b in 0..2 {
            for (i, &m) in mods.iter().enumerate() {
                let q = c.tables[m].p.q as i128;
                for k in 0..n {
                    assert_eq!(got[(b * 3 + i) * n + k] as i128, (x[b * n + k] as i128).rem_euclid(q));
                }
            }
        }
        assert!(c.from_signed(&[i64::MIN; 16], &mods).unwrap_err().contains("2^62"));
        assert!(c.from_signed(&[1 << 62; 16], &mods).is_err());
    }

    #[test]
    fn decompose_digits_are_centred_lifts() {
        let n = 16;
        let c = ctx(n, &[30, 40, 35]);
        let mods = [1usize, 0];
        let sp = 2;
        let primes = c.primes();
        let mut s = 5;
        let coef = random_rows(&c, &mods, 1, &mut s);
        let mut a = coef.clone();
        c.ntt(&mut a, &mods).unwrap();
        let mut d = c.decompose(&a, &mods, sp).unwrap();
        let all = [1usize, 0, 2];
        for j in 0..2 {
            c.intt(&mut d[j * 3 * n..(j + 1) * 3 * n], &all).unwrap();
            let qj = primes[mods[j]] as i128;
            for k in 0..n {
                let x = coef[j * n + k] as i128;
                let t = if x <= (qj - 1) / 2 { x } else { x - qj };
                for (i, &m) in all.iter().enumerate() {
                    let q = primes[m] as i128;
                    assert_eq!(d[(j * 3 + i) * n + k] as i128, t.rem_euclid(q));
                }
            }
        }
    }
}

/// Timings at n = 2^14 (run: cargo test --release rns::ops::bench -- --ignored --nocapture).
#[cfg(test)]
mod bench {
    use super::super::prime::ntt_primes;
    use super::*;
    use std::time::Instant;

    fn best<F: FnMut()>(reps: usize, mut f: F) -> f64 {
        (0..reps).map(|_| { let t = Instant::now(); f(); t.elapsed().as_secs_f64() }).fold(f64::MAX, f64::min)
    }

    #[test]
    #[ignore]
    fn bench() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            println!("threads = {threads}");
            pool.install(bench_once);
        }
    }

    fn bench_once() {
        let n = 1 << 14;
        let primes = ntt_primes(n as u64, 60, 8, &[]).unwrap();
        let c = RnsContext::new(n, &primes, None).unwrap();
        let t = &c.tables[0];
        let q = primes[0];
        let mut a: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e3779b97f4a7c15) % q).collect();
        let f = best(2000, || t.forward(&mut a));
        let i = best(2000, || t.inverse(&mut a));
        let fp = best(500, || t.forward_portable(&mut a));
        let ip = best(500, || t.inverse_portable(&mut a));
        println!("ntt {:.1} us  intt {:.1} us  portable ntt {:.1} us  intt {:.1} us", f * 1e6, i * 1e6, fp * 1e6, ip * 1e6);
        let mods: Vec<usize> = (0..7).collect();
        let x: Vec<u64> = (0..7 * n).map(|k| (k as u64).wrapping_mul(0x9e3779b97f4a7c15) % q).collect();
        let y: Vec<u64> = x.iter().rev().copied().collect();
        let m = best(100, || { std::hint::black_box(c.mul(&x, &y, &mods).unwrap()); });
        let chk = best(100, || c.check_reduced(&x, &mods, "x").unwrap());
        let d = best(10, || { std::hint::black_box(c.decompose(&x, &mods, 7).unwrap()); });
        let digits = c.decompose(&x, &mods, 7).unwrap();
        let key: Vec<u64> = (0..7 * 2 * 8 * n).map(|k| (k as u64).wrapping_mul(0x9e3779b97f4a7c15) % q).collect();
        let k = best(10, || { std::hint::black_box(c.key_switch(&digits, &key, 7, &mods, 7, 1).unwrap()); });
        let kg = best(10, || { std::hint::black_box(c.key_switch(&digits, &key, 7, &mods, 7, 5).unwrap()); });
        let two: Vec<u64> = x.iter().chain(&y).copied().collect();
        let r = best(20, || { std::hint::black_box(c.divide_round_last(&two, &mods).unwrap()); });
        let mut many = vec![0u64; 57 * n];
        for (r, row) in many.chunks_mut(n).enumerate() { row.copy_from_slice(&x[(r % 7) * n..(r % 7 + 1) * n]); }
        let nt = best(10, || for row in many.chunks_mut(n) { t.forward(row) });
        let alloc = best(10, || { std::hint::black_box(vec![0u64; 57 * n]).iter_mut().step_by(512).for_each(|x| *x = 1); });
        let p = c.tables[0].p;
        let mut o = vec![0u64; 7 * n];
        let raw = best(100, || { for ((o, &a), &b) in o.iter_mut().zip(&x).zip(&y) { *o = p.mul(a, b) } std::hint::black_box(&mut o); });
        let shoup = best(100, || { for (o, &a) in o.iter_mut().zip(&x) { *o = p.mul_shoup(a, 12345, p.shoup(12345)) } std::hint::black_box(&mut o); });
        println!("raw mul loop {:.2} ns/el, shoup loop {:.2} ns/el", raw * 1e9 / (7 * n) as f64, shoup * 1e9 / (7 * n) as f64);
        println!("57 NTTs over 7 MB {:.2} ms, fresh 7 MB touched {:.2} ms", nt * 1e3, alloc * 1e3);
        println!("mul {:.2} ns/el (check {:.2} ns/el)  decompose {:.2} ms  key_switch {:.2} ms (g=5 {:.2})  divide_round_last(2,7) {:.2} ms",
                 m * 1e9 / (7 * n) as f64, chk * 1e9 / (7 * n) as f64, d * 1e3, k * 1e3, kg * 1e3, r * 1e3);
    }
}
