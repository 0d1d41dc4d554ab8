//! Bit-sliced boolean gates for three-party replicated sharing (Araki et al.).
//!
//! A party's state is two arrays `x`, `a` of `slots` rows × `w` uint64 words: row s holds the
//! party's two share components of the wire in register s, bit k of word j being circuit
//! instance 64 j + k. Gates come from the layered schedule built in Python
//! (`shaper.protocols.bristol`): local gates as rows [op, a, b, c, out] (op: 0 XOR, 2 INV,
//! 3 EQW, 4 EQ0, 5 EQ1, 6 XOR3), AND gates as rows [a, b, out]. Every slot number is checked once per call, so
//! the word loops run without bounds checks and vectorise.

/// Gate codes, as in `shaper.protocols.bristol`.
pub const XOR: i32 = 0;
pub const INV: i32 = 2;
pub const EQW: i32 = 3;
pub const EQ0: i32 = 4;
pub const EQ1: i32 = 5;
/// a ^ b ^ c: a two-XOR chain whose middle wire has no other reader, folded by the schedule.
pub const XOR3: i32 = 6;

/// Checks that every slot in `rows` (of `width` columns, the first `skip` not slots) is below
/// `slots` or is -1 where allowed; returns the offending row.
pub fn check_slots(rows: &[i32], width: usize, skip: usize, slots: usize, optional: &[bool]) -> Result<(), String> {
    for (r, row) in rows.chunks(width).enumerate() {
        for (c, &v) in row.iter().enumerate().skip(skip) {
            let ok = (v >= 0 && (v as usize) < slots) || (v == -1 && optional[c]);
            if !ok {
                return Err(format!("gate row {r}: slot {v} is out of range (0..{slots})"));
            }
        }
    }
    Ok(())
}

#[inline(always)]
unsafe fn row(p: *mut u64, s: i32, w: usize) -> *mut u64 {
    p.add(s as usize * w)
}

/// Words of a column block: the gate list of a layer runs over one block of columns at a time,
/// so the rows it touches (hundreds of slots) stay in L2 instead of streaming from memory per gate.
const BLOCK: usize = 256;

/// Local gates on both share arrays, in order, block of columns by block. Slots must have been
/// checked.
pub fn local(x: &mut [u64], a: &mut [u64], w: usize, gates: &[i32]) -> Result<(), String> {
    for g in gates.chunks(5) {
        if !matches!(g[0], XOR | XOR3 | INV | EQW | EQ0 | EQ1) {
            return Err(format!("unknown local gate code {}", g[0]));
        }
    }
    let (px, pa) = (x.as_mut_ptr(), a.as_mut_ptr());
    let mut c0 = 0;
    while c0 < w {
        let n = BLOCK.min(w - c0);
        // SAFETY: columns c0..c0+n lie inside every row of `w` words.
        unsafe { local_block(px.add(c0), pa.add(c0), w, n, gates) };
        c0 += n;
    }
    Ok(())
}

type V = [u64; 8];

#[inline(always)]
unsafe fn ld(p: *const u64) -> V {
    std::ptr::read_unaligned(p as *const V)
}

#[inline(always)]
unsafe fn st(p: *mut u64, v: V) {
    std::ptr::write_unaligned(p as *mut V, v)
}

#[inline(always)]
fn xor8(a: V, b: V) -> V {
    let mut o = [0u64; 8];
    for k in 0..8 {
        o[k] = a[k] ^ b[k];
    }
    o
}

#[inline(always)]
fn not8(a: V) -> V {
    let mut o = [0u64; 8];
    for k in 0..8 {
        o[k] = !a[k];
    }
    o
}

/// The gates on columns [0, n) of rows of stride `w` starting at px/pa, eight words at a time
/// (each eight-word chunk is read whole before it is written, so in-place gates are fine).
unsafe fn local_block(px: *mut u64, pa: *mut u64, w: usize, n: usize, gates: &[i32]) {
    let full = n - n % 8;
    for g in gates.chunks(5) {
        let (op, ia, ib, ic, o) = (g[0], g[1], g[2], g[3], g[4]);
        let (xo, ao) = (row(px, o, w), row(pa, o, w));
        match op {
            XOR3 => {
                let (xa, xb, xc) = (row(px, ia, w), row(px, ib, w), row(px, ic, w));
                let (aa, ab, ac) = (row(pa, ia, w), row(pa, ib, w), row(pa, ic, w));
                let mut j = 0;
                while j < full {
                    let vx = xor8(xor8(ld(xa.add(j)), ld(xb.add(j))), ld(xc.add(j)));
                    let va = xor8(xor8(ld(aa.add(j)), ld(ab.add(j))), ld(ac.add(j)));
                    st(xo.add(j), vx);
                    st(ao.add(j), va);
                    j += 8;
                }
                for j in full..n {
                    let vx = *xa.add(j) ^ *xb.add(j) ^ *xc.add(j);
                    let va = *aa.add(j) ^ *ab.add(j) ^ *ac.add(j);
                    *xo.add(j) = vx;
                    *ao.add(j) = va;
                }
            }
            XOR => {
                let (xa, xb, aa, ab) = (row(px, ia, w), row(px, ib, w), row(pa, ia, w), row(pa, ib, w));
                let mut j = 0;
                while j < full {
                    let vx = xor8(ld(xa.add(j)), ld(xb.add(j)));
                    let va = xor8(ld(aa.add(j)), ld(ab.add(j)));
                    st(xo.add(j), vx);
                    st(ao.add(j), va);
                    j += 8;
                }
                for j in full..n {
                    let (vx, va) = (*xa.add(j) ^ *xb.add(j), *aa.add(j) ^ *ab.add(j));
                    *xo.add(j) = vx;
                    *ao.add(j) = va;
                }
            }
            INV | EQW => {
                let (xa, aa) = (row(px, ia, w), row(pa, ia, w));
                let flip = op == INV;
                let mut j = 0;
                while j < full {
                    let vx = ld(xa.add(j));
                    let va = ld(aa.add(j));
                    st(xo.add(j), vx);
                    st(ao.add(j), if flip { not8(va) } else { va });
                    j += 8;
                }
                for j in full..n {
                    let (vx, va) = (*xa.add(j), *aa.add(j));
                    *xo.add(j) = vx;
                    *ao.add(j) = if flip { !va } else { va };
                }
            }
            EQ0 | EQ1 => {
                let fill = if op == EQ1 { u64::MAX } else { 0 };
                for j in 0..n {
                    *xo.add(j) = 0;
                    *ao.add(j) = fill;
                }
            }
            _ => unreachable!("gate codes checked by the caller"),
        }
    }
}

/// First half of an AND layer, the zero sharing given as this party's two keystreams:
/// `out[g] = m1[g] ^ m2[g] ^ (x[a] & x[b]) ^ (a[a] & a[b])`, this party's message r.
pub fn and_local_masked(x: &[u64], a: &[u64], w: usize, ands: &[i32], out: &mut [u64], m1: &[u64], m2: &[u64]) {
    let (px, pa) = (x.as_ptr() as *mut u64, a.as_ptr() as *mut u64);
    for (g, t) in ands.chunks(3).enumerate() {
        let (o, k1, k2) = (&mut out[g * w..(g + 1) * w], &m1[g * w..(g + 1) * w], &m2[g * w..(g + 1) * w]);
        // SAFETY: slots checked; only reads through px/pa.
        unsafe {
            let (xa, xb, aa, ab) = (row(px, t[0], w), row(px, t[1], w), row(pa, t[0], w), row(pa, t[1], w));
            for j in 0..w {
                o[j] = k1[j] ^ k2[j] ^ (*xa.add(j) & *xb.add(j)) ^ (*aa.add(j) & *ab.add(j));
            }
        }
    }
}

/// Second half: with r (ours) and r_prev (received from the previous party), the new share of
/// gate g's output is (r_prev ^ r, r).
pub fn and_finish(x: &mut [u64], a: &mut [u64], w: usize, ands: &[i32], r: &[u64], r_prev: &[u64]) {
    for (g, t) in ands.chunks(3).enumerate() {
        let o = t[2] as usize;
        let (rr, rp) = (&r[g * w..(g + 1) * w], &r_prev[g * w..(g + 1) * w]);
        let xo = &mut x[o * w..(o + 1) * w];
        for j in 0..w {
            xo[j] = rp[j] ^ rr[j];
        }
        a[o * w..(o + 1) * w].copy_from_slice(rr);
    }
}

/// `and_masked` with the keystreams generated on the fly, row by row (no keystream arrays in
/// memory): `out[g] = own[g] ^ prev[g] ^ (x[a] & x[b]) ^ (a[a] & a[b])`.
pub fn and_prf(
    x: &[u64],
    a: &[u64],
    w: usize,
    ands: &[i32],
    out: &mut [u64],
    own: &mut crate::prf::KeyStream,
    prev: &mut crate::prf::KeyStream,
) {
    let (px, pa) = (x.as_ptr() as *mut u64, a.as_ptr() as *mut u64);
    let mut k1 = vec![0u64; w];
    let mut k2 = vec![0u64; w];
    for (g, t) in ands.chunks(3).enumerate() {
        own.fill(&mut k1);
        prev.fill(&mut k2);
        let o = &mut out[g * w..(g + 1) * w];
        // SAFETY: slots checked; only reads through px/pa.
        unsafe {
            let (xa, xb, aa, ab) = (row(px, t[0], w), row(px, t[1], w), row(pa, t[0], w), row(pa, t[1], w));
            for j in 0..w {
                o[j] = k1[j] ^ k2[j] ^ (*xa.add(j) & *xb.add(j)) ^ (*aa.add(j) & *ab.add(j));
            }
        }
    }
}
