//! Batch algorithms written once against [`Engine`]: exponentiation (shared or per-element
//! exponent), fixed-base comb exponentiation, products, sparse row products, and Horner
//! packing with squaring chains. Values enter and leave in the canonical layout (row-major,
//! `e.words()` little-endian 64-bit words per value, reduced); groups of `e.lanes()` values are
//! spread over the rayon pool that the caller installs.
//!
//! Constant time: exponentiations use fixed windows whose number depends only on the largest
//! exponent *length* of the batch, every window costs the same squarings and one product, and
//! table entries are chosen by scanning the whole table with masks. Row products and Horner
//! packing only touch public data (ciphertexts) and have data-independent control flow too.

use rayon::prelude::*;

use super::engine::{bits_at, rows_bit_length, zeroize, zeroize_u32, Engine};

/// Sliding-free fixed window for an exponent of `bits` bits: minimises table building
/// (2^w - 2 products) plus one product per window; at most 5 (32-entry tables).
pub fn window_for(bits: usize) -> usize {
    let mut best = (usize::MAX, 1);
    for w in 1..=5usize {
        let cost = (1usize << w).saturating_sub(2) + bits.div_ceil(w);
        if cost < best.0 {
            best = (cost, w);
        }
    }
    best.1
}

/// Calls `f(group_index, out_chunk)` for every group of `lanes` values in parallel.
/// `min_groups` keeps cheap operations from being split into tasks smaller than the
/// scheduling overhead.
fn par_groups<F>(out: &mut [u64], count: usize, lanes: usize, words: usize, min_groups: usize, f: F)
where
    F: Fn(usize, &mut [u64], usize) + Sync + Send,
{
    out.par_chunks_mut(lanes * words)
        .enumerate()
        .with_min_len(min_groups.max(1))
        .for_each(|(g, chunk)| {
            let n = (count - g * lanes).min(lanes);
            f(g, chunk, n)
        });
}

/// Windowed exponentiation of one group: `out = x^e` (Montgomery form in and out), lane l's
/// exponent `exps[l]`; `bits` is the public length that fixes the number of windows.
fn pow_group<E: Engine>(e: &E, x: &[u64], exps: &[&[u64]], bits: usize, out: &mut [u64]) {
    let gw = e.gw();
    if bits == 0 {
        out[..gw].copy_from_slice(e.one());
        return;
    }
    let w = window_for(bits);
    let size = 1usize << w;
    let mut table = vec![0u64; size * gw];
    table[..gw].copy_from_slice(e.one());
    table[gw..2 * gw].copy_from_slice(&x[..gw]);
    for k in 2..size {
        let (done, rest) = table.split_at_mut(k * gw);
        e.mul(&mut rest[..gw], &done[(k - 1) * gw..], x);
    }
    let windows = bits.div_ceil(w);
    let lanes = e.lanes();
    let mut idx = vec![0u32; lanes];
    let mut acc = vec![0u64; gw];
    let mut tmp = vec![0u64; gw];
    let mut sel = vec![0u64; gw];
    let digits = |i: usize, idx: &mut [u32]| {
        for (l, slot) in idx.iter_mut().enumerate() {
            *slot = exps.get(l).map_or(0, |ex| bits_at(ex, i * w, w));
        }
    };
    digits(windows - 1, &mut idx);
    e.select(&mut acc, &table, size, &idx);
    for i in (0..windows - 1).rev() {
        for _ in 0..w {
            e.sqr(&mut tmp, &acc);
            std::mem::swap(&mut acc, &mut tmp);
        }
        digits(i, &mut idx);
        e.select(&mut sel, &table, size, &idx);
        e.mul(&mut tmp, &acc, &sel);
        std::mem::swap(&mut acc, &mut tmp);
    }
    out[..gw].copy_from_slice(&acc);
    zeroize(&mut table);
    zeroize(&mut acc);
    zeroize(&mut sel);
    zeroize(&mut tmp);
    zeroize_u32(&mut idx);
}

/// Loads a group: stored Montgomery rows as they are, canonical ones converted.
fn load_as<E: Engine>(e: &E, mont: bool, out: &mut [u64], src: &[u64], count: usize) {
    if mont {
        e.load_mont(out, src, count)
    } else {
        e.load(out, src, count)
    }
}

/// Stores a group as Montgomery rows or converted back to canonical values.
fn store_as<E: Engine>(e: &E, mont: bool, dst: &mut [u64], src: &[u64], count: usize) {
    if mont {
        e.store_mont(dst, src, count)
    } else {
        e.store(dst, src, count)
    }
}

/// Row width of values in (`mont`) the Montgomery storage layout or canonical words.
fn width<E: Engine>(e: &E, mont: bool) -> usize {
    if mont {
        e.mw()
    } else {
        e.words()
    }
}

/// Into (`to_mont`) or out of the Montgomery storage layout: x -> xR mod m, or xR -> x.
pub fn convert<E: Engine>(e: &E, values: &[u64], count: usize, to_mont: bool) -> Vec<u64> {
    let (lanes, gw) = (e.lanes(), e.gw());
    let (iw, ow) = (width(e, !to_mont), width(e, to_mont));
    let mut out = vec![0u64; count * ow];
    par_groups(&mut out, count, lanes, ow, 16, |g, chunk, n| {
        let mut x = vec![0u64; gw];
        load_as(e, !to_mont, &mut x, &values[g * lanes * iw..], n);
        store_as(e, to_mont, chunk, &x, n);
    });
    out
}

/// `[a_i * b_i]` of stored Montgomery values, stored the same way: one product each.
pub fn mont_mul<E: Engine>(e: &E, a: &[u64], b: &[u64], count: usize) -> Vec<u64> {
    let (lanes, mw, gw) = (e.lanes(), e.mw(), e.gw());
    let mut out = vec![0u64; count * mw];
    par_groups(&mut out, count, lanes, mw, 16, |g, chunk, n| {
        let mut x = vec![0u64; gw];
        let mut y = vec![0u64; gw];
        let mut t = vec![0u64; gw];
        e.load_mont(&mut x, &a[g * lanes * mw..], n);
        e.load_mont(&mut y, &b[g * lanes * mw..], n);
        e.mul(&mut t, &x, &y);
        e.store_mont(chunk, &t, n);
    });
    out
}

/// `[b_i ^ exp mod m]` with one exponent for the whole batch (little-endian words); `mont`:
/// bases and results in Montgomery form.
pub fn powmod_same<E: Engine>(e: &E, bases: &[u64], count: usize, exp: &[u64], mont: bool) -> Vec<u64> {
    let (lanes, words, gw) = (e.lanes(), width(e, mont), e.gw());
    let bits = rows_bit_length(exp, 1, exp.len());
    let mut out = vec![0u64; count * words];
    par_groups(&mut out, count, lanes, words, 1, |g, chunk, n| {
        let mut x = vec![0u64; gw];
        let mut r = vec![0u64; gw];
        load_as(e, mont, &mut x, &bases[g * lanes * words..], n);
        let exps = vec![exp; lanes];
        pow_group(e, &x, &exps, bits, &mut r);
        store_as(e, mont, chunk, &r, n);
    });
    out
}

/// `[b_i ^ e_i mod m]`, exponents as rows of `ew` little-endian words.
pub fn powmod_each<E: Engine>(e: &E, bases: &[u64], count: usize, exps: &[u64], ew: usize, mont: bool) -> Vec<u64> {
    let (lanes, words, gw) = (e.lanes(), width(e, mont), e.gw());
    let bits = rows_bit_length(exps, count, ew);
    let mut out = vec![0u64; count * words];
    par_groups(&mut out, count, lanes, words, 1, |g, chunk, n| {
        let mut x = vec![0u64; gw];
        let mut r = vec![0u64; gw];
        load_as(e, mont, &mut x, &bases[g * lanes * words..], n);
        let rows: Vec<&[u64]> = (0..n).map(|l| &exps[(g * lanes + l) * ew..(g * lanes + l + 1) * ew]).collect();
        pow_group(e, &x, &rows, bits, &mut r);
        store_as(e, mont, chunk, &r, n);
    });
    out
}

/// `[a_i * b_i mod m]`: one almost-Montgomery product, then one by R^2 to undo the 1/R.
pub fn mulmod<E: Engine>(e: &E, a: &[u64], b: &[u64], count: usize) -> Vec<u64> {
    let (lanes, words, gw) = (e.lanes(), e.words(), e.gw());
    let mut out = vec![0u64; count * words];
    par_groups(&mut out, count, lanes, words, 32, |g, chunk, n| {
        let mut x = vec![0u64; gw];
        let mut y = vec![0u64; gw];
        let mut t = vec![0u64; gw];
        e.load_raw(&mut x, &a[g * lanes * words..], n);
        e.load_raw(&mut y, &b[g * lanes * words..], n);
        e.mul(&mut t, &x, &y);
        e.mul(&mut x, &t, e.rr());
        e.store_raw(chunk, &x, n);
    });
    out
}

/// Longest run of factors one lane multiplies before the partial products are combined in a
/// second pass (bounds padding waste and the table of correction powers R^k).
const PIECE: usize = 64;

/// Sparse gather-product: `out[r] = prod values[indices[k]]` over `k` in
/// `[indptr[r], indptr[r+1])`, 1 for an empty row. Indices must be validated by the caller.
/// `mont`: values and results in Montgomery form (the chain needs no correction then).
pub fn prod_rows<E: Engine>(e: &E, values: &[u64], indices: &[usize], indptr: &[usize], mont: bool) -> Vec<u64> {
    let (lanes, words, gw) = (e.lanes(), width(e, mont), e.gw());
    let rows = indptr.len() - 1;
    // virtual rows: pieces of at most PIECE factors
    let mut pieces: Vec<(usize, usize)> = Vec::with_capacity(rows);
    let mut piece_ptr = Vec::with_capacity(rows + 1);
    piece_ptr.push(0usize);
    for r in 0..rows {
        let (s, t) = (indptr[r], indptr[r + 1]);
        if s == t {
            pieces.push((s, s));
        } else {
            let mut a = s;
            while a < t {
                let b = (a + PIECE).min(t);
                pieces.push((a, b));
                a = b;
            }
        }
        piece_ptr.push(pieces.len());
    }
    let np = pieces.len();
    // longest first, so the lanes of a group have similar lengths
    let mut order: Vec<usize> = (0..np).collect();
    order.sort_by_key(|&p| std::cmp::Reverse(pieces[p].1 - pieces[p].0));
    let maxlen = if mont { 1 } else { pieces.iter().map(|p| p.1 - p.0).max().unwrap_or(0).max(1) };
    // canonical R^k mod m for k = 1..=maxlen (R^k corrects a chain of k canonical factors)
    let rpow = if mont { Vec::new() } else { r_powers(e, maxlen) };
    // the neutral padding factor: Montgomery's 1 (R mod m), as a stored row or canonical words
    let mut r1 = vec![0u64; words];
    if mont {
        e.store_mont(&mut r1, e.one(), 1);
    } else {
        r1.copy_from_slice(&rpow[..words]);
    }
    let mut unit = vec![0u64; words];
    unit[0] = 1;
    let load = |out: &mut [u64], src: &[u64], n: usize| {
        if mont {
            e.load_mont(out, src, n)
        } else {
            e.load_raw(out, src, n)
        }
    };

    let mut sorted_out = vec![0u64; np * words];
    par_groups(&mut sorted_out, np, lanes, words, 2, |g, chunk, n| {
        let members: Vec<(usize, usize)> = (0..n).map(|l| pieces[order[g * lanes + l]]).collect();
        let steps = members.iter().map(|p| p.1 - p.0).max().unwrap_or(0).max(1);
        let mut src = vec![0u64; lanes * words];
        let mut acc = vec![0u64; gw];
        let mut x = vec![0u64; gw];
        let mut t = vec![0u64; gw];
        let gather = |step: usize, src: &mut [u64]| {
            for (l, &(s, f)) in members.iter().enumerate() {
                let dst = &mut src[l * words..(l + 1) * words];
                if s + step < f {
                    let v = indices[s + step];
                    dst.copy_from_slice(&values[v * words..(v + 1) * words]);
                } else if step == 0 {
                    // empty row: 1 (canonical, corrected by R^1 below; or Montgomery's R)
                    dst.copy_from_slice(if mont { &r1 } else { &unit });
                } else {
                    dst.copy_from_slice(&r1); // multiplying by R mod m leaves a chain unchanged
                }
            }
        };
        gather(0, &mut src);
        load(&mut acc, &src, n);
        for step in 1..steps {
            gather(step, &mut src);
            load(&mut x, &src, n);
            e.mul(&mut t, &acc, &x);
            std::mem::swap(&mut acc, &mut t);
        }
        if mont {
            e.store_mont(chunk, &acc, n);
            return;
        }
        // acc = prod / R^(k-1) per lane: multiply by R^k (then / R)
        for (l, &(s, f)) in members.iter().enumerate() {
            let k = (f - s).max(1);
            src[l * words..(l + 1) * words].copy_from_slice(&rpow[(k - 1) * words..k * words]);
        }
        e.load_raw(&mut x, &src, n);
        e.mul(&mut t, &acc, &x);
        e.store_raw(chunk, &t, n);
    });
    let mut piece_out = vec![0u64; np * words];
    for (pos, &p) in order.iter().enumerate() {
        piece_out[p * words..(p + 1) * words].copy_from_slice(&sorted_out[pos * words..(pos + 1) * words]);
    }
    if np == rows {
        return piece_out;
    }
    let idx: Vec<usize> = (0..np).collect();
    prod_rows(e, &piece_out, &idx, &piece_ptr, mont)
}

/// Canonical R^k mod m for k = 1..=n, as n rows of words (lanes compute 8 exponents at once).
fn r_powers<E: Engine>(e: &E, n: usize) -> Vec<u64> {
    let (lanes, words, gw) = (e.lanes(), e.words(), e.gw());
    let mut out = vec![0u64; n.max(lanes) * words];
    // first `lanes` powers one by one: R^1 = one(), R^(k+1) = AMM(R^k, R^2)
    let mut cur = e.one().to_vec();
    let mut t = vec![0u64; gw];
    let mut row = vec![0u64; words * lanes];
    for k in 0..lanes.min(n.max(1)) {
        e.store_raw(&mut row, &cur, 1);
        out[k * words..(k + 1) * words].copy_from_slice(&row[..words]);
        e.mul(&mut t, &cur, e.rr());
        std::mem::swap(&mut cur, &mut t);
    }
    if n > lanes {
        // step factor R^(lanes+1): AMM(R^k, R^(lanes+1)) = R^(k+lanes)
        let mut step_src = vec![0u64; lanes * words];
        e.store_raw(&mut step_src, &cur, 1); // cur = R^(lanes+1)
        for l in 1..lanes {
            step_src.copy_within(0..words, l * words);
        }
        let mut stepv = vec![0u64; gw];
        e.load_raw(&mut stepv, &step_src, lanes);
        let mut acc = vec![0u64; gw];
        e.load_raw(&mut acc, &out[..lanes * words], lanes);
        let mut k = lanes;
        while k < n {
            e.mul(&mut t, &acc, &stepv);
            std::mem::swap(&mut acc, &mut t);
            e.store_raw(&mut row, &acc, lanes);
            let take = (n - k).min(lanes);
            out[k * words..(k + take) * words].copy_from_slice(&row[..take * words]);
            k += lanes;
        }
    }
    out.truncate(n * words);
    out
}

/// Horner packing: `acc = col[k-1]`, then `acc = acc^(2^shift) * col[j]` for j = k-2..0.
pub fn horner<E: Engine>(e: &E, columns: &[u64], k: usize, count: usize, shift: usize) -> Vec<u64> {
    let (lanes, words, gw) = (e.lanes(), e.words(), e.gw());
    let mut out = vec![0u64; count * words];
    par_groups(&mut out, count, lanes, words, 1, |g, chunk, n| {
        let col = |j: usize| &columns[(j * count + g * lanes) * words..];
        let mut acc = vec![0u64; gw];
        let mut t = vec![0u64; gw];
        let mut x = vec![0u64; gw];
        e.load(&mut acc, col(k - 1), n);
        for j in (0..k - 1).rev() {
            for _ in 0..shift {
                e.sqr(&mut t, &acc);
                std::mem::swap(&mut acc, &mut t);
            }
            e.load(&mut x, col(j), n);
            e.mul(&mut t, &acc, &x);
            std::mem::swap(&mut acc, &mut t);
        }
        e.store(chunk, &acc, n);
    });
    out
}

/// Horner packing of products of powers (Shamir's trick on a shared squaring chain): for each
/// position, over slots j = k-1..0, `acc = acc^(2^shift) * prod_t bases[t][j]^exps[t][j]`.
/// `bases` is (T, k, count, words), `exps` (T, k, count, ew). Every position runs the same
/// sequence of squarings and (masked-selection) products, fixed by the longest exponent.
#[allow(clippy::too_many_arguments)]
pub fn horner_multiexp<E: Engine>(
    e: &E,
    bases: &[u64],
    exps: &[u64],
    nt: usize,
    k: usize,
    count: usize,
    ew: usize,
    shift: usize,
) -> Result<Vec<u64>, String> {
    let (lanes, words, gw) = (e.lanes(), e.words(), e.gw());
    let ebits = rows_bit_length(exps, nt * k * count, ew);
    if k > 1 && ebits > shift {
        return Err(format!("exponents of {ebits} bits exceed the {shift}-bit slot shift"));
    }
    let mut out = vec![0u64; count * words];
    let size = 1usize << nt;
    par_groups(&mut out, count, lanes, words, 1, |g, chunk, n| {
        let mut table = vec![0u64; size * gw];
        let mut acc = e.one().to_vec();
        let mut t = vec![0u64; gw];
        let mut sel = vec![0u64; gw];
        let mut idx = vec![0u32; lanes];
        let mut xs = vec![vec![0u64; gw]; nt];
        for j in (0..k).rev() {
            for (ti, x) in xs.iter_mut().enumerate() {
                e.load(x, &bases[((ti * k + j) * count + g * lanes) * words..], n);
            }
            table[..gw].copy_from_slice(e.one());
            for mask in 1..size {
                let low = mask & mask.wrapping_neg();
                let ti = low.trailing_zeros() as usize;
                let (done, rest) = table.split_at_mut(mask * gw);
                e.mul(&mut rest[..gw], &done[(mask ^ low) * gw..((mask ^ low) + 1) * gw], &xs[ti]);
            }
            if j + 1 < k {
                for _ in 0..shift - ebits {
                    e.sqr(&mut t, &acc);
                    std::mem::swap(&mut acc, &mut t);
                }
            }
            for bit in (0..ebits).rev() {
                e.sqr(&mut t, &acc);
                std::mem::swap(&mut acc, &mut t);
                for (l, slot) in idx.iter_mut().enumerate() {
                    let mut s = 0u32;
                    if l < n {
                        for ti in 0..nt {
                            let row = ((ti * k + j) * count + g * lanes + l) * ew;
                            s |= bits_at(&exps[row..row + ew], bit, 1) << ti;
                        }
                    }
                    *slot = s;
                }
                e.select(&mut sel, &table, size, &idx);
                e.mul(&mut t, &acc, &sel);
                std::mem::swap(&mut acc, &mut t);
            }
        }
        e.store(chunk, &acc, n);
        zeroize(&mut table);
        zeroize(&mut acc);
        zeroize(&mut t);
        zeroize(&mut sel);
        zeroize_u32(&mut idx);
    });
    Ok(out)
}

/// Fixed-base comb table: entry (i, d) = base^(d * 2^(w i)) in Montgomery form, as shared
/// (single-lane) values; `windows` windows of `window` bits.
pub struct Comb {
    pub window: usize,
    pub windows: usize,
    /// words per window in the engine's selection layout
    pub block: usize,
    pub entries: Vec<u64>,
    /// entries stored one after the other and read by index (not constant time; wider windows)
    pub direct: bool,
}

impl Comb {
    pub fn nbytes(&self) -> usize {
        self.entries.len() * 8
    }

    /// Windows of this table that `count` exponent rows of `ew` words need (fixed by the
    /// longest row's bit length, the rows being OR-ed first); an error when the exponents are
    /// longer than the table serves.
    pub fn windows_for(&self, exps: &[u64], count: usize, ew: usize) -> Result<usize, String> {
        let bits = rows_bit_length(exps, count, ew);
        let need = bits.div_ceil(self.window);
        if need > self.windows {
            return Err(format!(
                "exponent of {bits} bits is longer than the table serves ({} bits)",
                self.windows * self.window
            ));
        }
        Ok(need)
    }
}

/// Asks for the cache lines of `data` ahead of use (a hint; no effect on results).
#[inline(always)]
fn prefetch(data: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    for k in (0..data.len()).step_by(8) {
        // SAFETY: prefetching is a hint; the address lies inside `data`.
        unsafe { std::arch::x86_64::_mm_prefetch(data.as_ptr().add(k) as *const i8, std::arch::x86_64::_MM_HINT_T0) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Comb table: entry (i, d) = base^(d 2^(w i)) in Montgomery form. `direct`: entries stay in
/// plain order (window, entry, value) and are read by index — not constant time, for windows too
/// wide to scan; otherwise they go into the engine's constant-time selection layout.
pub fn comb_build<E: Engine>(e: &E, base: &[u64], window: usize, windows: usize, direct: bool) -> Comb {
    let (lanes, words, gw, sw) = (e.lanes(), e.words(), e.gw(), e.sw());
    let size = 1usize << window;
    // base^(2^(w i)) for every window: one squaring chain
    let mut src = vec![0u64; lanes * words];
    for l in 0..lanes {
        src[l * words..(l + 1) * words].copy_from_slice(&base[..words]);
    }
    let mut cur = vec![0u64; gw];
    e.load(&mut cur, &src, lanes);
    let mut t = vec![0u64; gw];
    let mut starts = vec![0u64; windows * sw];
    for i in 0..windows {
        e.extract(&cur, 0, &mut starts[i * sw..(i + 1) * sw]);
        if i + 1 < windows {
            for _ in 0..window {
                e.sqr(&mut t, &cur);
                std::mem::swap(&mut cur, &mut t);
            }
        }
    }
    // rows: each lane walks d = 0..2^w for its own window
    let mut entries = vec![0u64; windows * size * sw];
    entries
        .par_chunks_mut(lanes * size * sw)
        .enumerate()
        .for_each(|(g, block)| {
            let first = g * lanes;
            let n = (windows - first).min(lanes);
            let mut x = vec![0u64; gw];
            for l in 0..lanes {
                let i = first + l.min(n - 1);
                e.insert(&starts[i * sw..(i + 1) * sw], l, &mut x);
            }
            let mut prev = e.one().to_vec();
            let mut tmp = vec![0u64; gw];
            for d in 0..size {
                for l in 0..n {
                    let off = (l * size + d) * sw;
                    e.extract(&prev, l, &mut block[off..off + sw]);
                }
                e.mul(&mut tmp, &prev, &x);
                std::mem::swap(&mut prev, &mut tmp);
            }
        });
    if direct {
        return Comb { window, windows, block: size * sw, entries, direct };
    }
    let entries = e.shared_layout(entries, size, windows);
    Comb { window, windows, block: e.shared_block(size), entries, direct }
}

/// `[mult_i * prod_t base_t ^ e_{t,i} mod m]` from comb tables (shared modulus); `windows[t]`
/// (the batch's public exponent length in windows) fixes the work per element.
pub fn fixed_base<E: Engine>(
    e: &E,
    tables: &[&Comb],
    exps: &[(&[u64], usize)],
    windows: &[usize],
    mult: Option<&[u64]>,
    count: usize,
    mult_mont: bool,
    out_mont: bool,
) -> Vec<u64> {
    let (lanes, gw) = (e.lanes(), e.gw());
    let (iw, ow) = (width(e, mult_mont), width(e, out_mont));
    let mut out = vec![0u64; count * ow];
    par_groups(&mut out, count, lanes, ow, 1, |g, chunk, n| {
        let mut acc = vec![0u64; gw];
        match mult {
            Some(mv) => load_as(e, mult_mont, &mut acc, &mv[g * lanes * iw..], n),
            None => acc.copy_from_slice(e.one()),
        }
        let mut sel = vec![0u64; gw];
        let mut t = vec![0u64; gw];
        let mut idx = vec![0u32; lanes];
        let mut offsets = vec![0usize; lanes];
        for ((tab, &(ex, ew)), &nw) in tables.iter().zip(exps).zip(windows) {
            let size = 1usize << tab.window;
            let block = tab.block;
            for i in 0..nw {
                for (l, slot) in idx.iter_mut().enumerate() {
                    *slot = if l < n {
                        let row = (g * lanes + l) * ew;
                        bits_at(&ex[row..row + ew], i * tab.window, tab.window)
                    } else {
                        0
                    };
                }
                if tab.direct {
                    // index reads (the table's owner chose speed over constant time); the next
                    // window's entries are prefetched while this window's product runs
                    let sw = e.sw();
                    for (o, &d) in offsets.iter_mut().zip(idx.iter()) {
                        *o = i * block + d as usize * sw;
                    }
                    e.gather(&mut sel, &tab.entries, &offsets);
                    if i + 1 < nw {
                        for l in 0..n {
                            let row = (g * lanes + l) * ew;
                            let d = bits_at(&ex[row..row + ew], (i + 1) * tab.window, tab.window) as usize;
                            prefetch(&tab.entries[(i + 1) * block + d * sw..(i + 1) * block + (d + 1) * sw]);
                        }
                    }
                } else {
                    e.select_shared(&mut sel, &tab.entries[i * block..(i + 1) * block], size, &idx);
                }
                e.mul(&mut t, &acc, &sel);
                std::mem::swap(&mut acc, &mut t);
            }
        }
        store_as(e, out_mont, chunk, &acc, n);
        zeroize(&mut acc);
        zeroize(&mut sel);
        zeroize(&mut t);
        zeroize_u32(&mut idx);
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bigint::portable::Portable;
    use crate::bigint::testkit::{algo_suite, modulus, Rng};

    #[test]
    fn window_choice() {
        assert_eq!(window_for(1), 1);
        assert!(window_for(2048) >= 4 && window_for(2048) <= 5);
        for bits in [0, 1, 17, 64, 1000, 5000] {
            assert!((1..=5).contains(&window_for(bits)));
        }
    }

    #[test]
    fn portable_matches_direct_computation() {
        let mut rng = Rng::new(21);
        for bits in [2, 61, 64, 65, 130, 256] {
            let (m, md) = modulus(&mut rng, bits);
            algo_suite(&Portable::new(&md), &m, &mut rng);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn ifma_matches_direct_computation() {
        use crate::bigint::ifma::{available, Ifma};
        if !available() {
            eprintln!("note: this CPU lacks AVX-512F/IFMA; the IFMA algorithm test does nothing here");
            return;
        }
        let mut rng = Rng::new(22);
        for bits in [2, 50, 61, 64, 104, 130, 256, 600] {
            let (m, md) = modulus(&mut rng, bits);
            algo_suite(&Ifma::new(&md).unwrap(), &m, &mut rng);
        }
    }
}
