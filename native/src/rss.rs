//! Bit-sliced boolean gates for three-party replicated sharing (Araki et al.).
//!
//! A party's state is two arrays `x`, `a` of `slots` rows × `w` uint64 words: row s holds the
//! party's two share components of the wire in register s, bit k of word j being circuit
//! instance 64 j + k. Gates come from the layered schedule built in Python
//! (`shaper.protocols.bristol`): local gates as rows [op, a, b, c, out] (op: 0 XOR, 2 INV,
//! 3 EQW, 4 EQ0, 5 EQ1, 6 XOR3), AND gates as rows [a, b, out]. Every slot number is checked once
//! per call by the caller ([`check_slots`], [`check_local_inputs`]; the gate functions are
//! `unsafe` to say so), so the word loops run without bounds checks and vectorise.

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

/// Checks local gate rows [op, a, b, c, out] beyond their slot numbers: a known gate code, and
/// an input slot (not -1) for each input the gate reads.
pub fn check_local_inputs(rows: &[i32]) -> Result<(), String> {
    for (r, g) in rows.chunks(5).enumerate() {
        let need = match g[0] {
            XOR3 => 3,
            XOR => 2,
            INV | EQW => 1,
            EQ0 | EQ1 => 0,
            other => return Err(format!("gate row {r}: unknown gate code {other}")),
        };
        if g[1..1 + need].iter().any(|&v| v < 0) {
            return Err(format!("gate row {r}: missing input slot"));
        }
    }
    Ok(())
}

/// # Safety
/// `s` must be a slot (>= 0) of the array `p` points into, of rows `w` words apart, so that
/// `p + s w` stays inside it (slots are checked once per call, [`check_slots`]).
#[inline(always)]
unsafe fn row(p: *mut u64, s: i32, w: usize) -> *mut u64 {
    // SAFETY: inside the array by the caller's guarantee.
    unsafe { p.add(s as usize * w) }
}

/// Words of a column block: the gate list of a layer runs over one block of columns at a time,
/// so the rows it touches (hundreds of slots) stay in L2 instead of streaming from memory per gate.
const BLOCK: usize = 256;

/// Local gates on both share arrays, in order, block of columns by block.
///
/// # Safety
/// `x` and `a` must be `slots` rows of `w` words each, and every slot a gate reads or writes
/// a row: [`check_slots`] (`gates`, width 5, skip 1, `slots`, inputs optional) and
/// [`check_local_inputs`] passed. Unknown gate codes are an error, not a safety matter.
pub unsafe fn local(x: &mut [u64], a: &mut [u64], w: usize, gates: &[i32]) -> Result<(), String> {
    for g in gates.chunks(5) {
        if !matches!(g[0], XOR | XOR3 | INV | EQW | EQ0 | EQ1) {
            return Err(format!("unknown local gate code {}", g[0]));
        }
    }
    let (px, pa) = (x.as_mut_ptr(), a.as_mut_ptr());
    let mut c0 = 0;
    while c0 < w {
        let n = BLOCK.min(w - c0);
        // SAFETY: `x` and `a` are distinct arrays of rows of `w` words, borrowed mutably here;
        // every slot the gates use is a row (this function's contract) and columns c0..c0 + n
        // lie inside every row.
        unsafe { local_block(px.add(c0), pa.add(c0), w, n, gates) };
        c0 += n;
    }
    Ok(())
}

type V = [u64; 8];

/// # Safety
/// `p` must be readable for 8 words.
#[inline(always)]
unsafe fn ld(p: *const u64) -> V {
    // SAFETY: 8 readable words (caller's guarantee); `read_unaligned`: any alignment.
    unsafe { std::ptr::read_unaligned(p as *const V) }
}

/// # Safety
/// `p` must be writable for 8 words.
#[inline(always)]
unsafe fn st(p: *mut u64, v: V) {
    // SAFETY: 8 writable words (caller's guarantee); `write_unaligned`: any alignment.
    unsafe { std::ptr::write_unaligned(p as *mut V, v) }
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
///
/// # Safety
/// `px` and `pa` must point at column c0 of row 0 of two arrays of rows `w` words apart
/// (distinct arrays, live and not otherwise borrowed), columns c0..c0 + `n` inside every
/// row; every slot the gates read or write must be a row of both (checked by
/// [`check_slots`] and [`check_local_inputs`]).
unsafe fn local_block(px: *mut u64, pa: *mut u64, w: usize, n: usize, gates: &[i32]) {
    // SAFETY: every access is word j < n of a gate's slot row in `px` or `pa`, inside the
    // arrays by the caller's guarantee; rows are only reached through these two pointers here,
    // and each eight-word chunk is read whole before it is written.
    unsafe {
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
}

/// First half of an AND layer, the zero sharing given as this party's two keystreams:
/// `out[g] = m1[g] ^ m2[g] ^ (x[a] & x[b]) ^ (a[a] & a[b])`, this party's message r.
///
/// # Safety
/// `x` and `a` must be `slots` rows of `w` words each and the input slots of every AND row a
/// row of them ([`check_slots`] on `ands`, width 3, passed). (`out`, `m1`, `m2` are indexed
/// with bounds checks.)
pub unsafe fn and_local_masked(x: &[u64], a: &[u64], w: usize, ands: &[i32], out: &mut [u64], m1: &[u64], m2: &[u64]) {
    let (px, pa) = (x.as_ptr() as *mut u64, a.as_ptr() as *mut u64);
    for (g, t) in ands.chunks(3).enumerate() {
        let (o, k1, k2) = (&mut out[g * w..(g + 1) * w], &m1[g * w..(g + 1) * w], &m2[g * w..(g + 1) * w]);
        // SAFETY: rows t[0] and t[1] of `x` and `a` (this function's contract), words 0..w;
        // only reads through px/pa (cast from shared borrows, never written).
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
///
/// # Safety
/// As for [`and_local_masked`].
pub unsafe fn and_prf(
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
        // SAFETY: rows t[0] and t[1] of `x` and `a` (this function's contract), words 0..w;
        // only reads through px/pa (cast from shared borrows, never written).
        unsafe {
            let (xa, xb, aa, ab) = (row(px, t[0], w), row(px, t[1], w), row(pa, t[0], w), row(pa, t[1], w));
            for j in 0..w {
                o[j] = k1[j] ^ k2[j] ^ (*xa.add(j) & *xb.add(j)) ^ (*aa.add(j) & *ab.add(j));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn words(&mut self, n: usize) -> Vec<u64> {
            (0..n).map(|_| self.next()).collect()
        }
    }

    /// Bit k (circuit instance k) of slot s.
    fn get(v: &[u64], w: usize, s: i32, k: usize) -> bool {
        (v[s as usize * w + k / 64] >> (k % 64)) & 1 == 1
    }

    fn set(v: &mut [u64], w: usize, s: i32, k: usize, bit: bool) {
        let word = &mut v[s as usize * w + k / 64];
        *word = (*word & !(1u64 << (k % 64))) | ((bit as u64) << (k % 64));
    }

    /// The local gates one instance (bit) at a time.
    fn local_ref(x: &mut [u64], a: &mut [u64], w: usize, gates: &[i32]) {
        for g in gates.chunks(5) {
            for k in 0..64 * w {
                let (gx, ga) = (|s| get(x, w, s, k), |s| get(a, w, s, k));
                let (vx, va) = match g[0] {
                    XOR3 => (gx(g[1]) ^ gx(g[2]) ^ gx(g[3]), ga(g[1]) ^ ga(g[2]) ^ ga(g[3])),
                    XOR => (gx(g[1]) ^ gx(g[2]), ga(g[1]) ^ ga(g[2])),
                    INV => (gx(g[1]), !ga(g[1])),
                    EQW => (gx(g[1]), ga(g[1])),
                    EQ0 => (false, false),
                    EQ1 => (false, true),
                    _ => unreachable!(),
                };
                set(x, w, g[4], k, vx);
                set(a, w, g[4], k, va);
            }
        }
    }

    /// Gates of every kind, in place (output = an input) among them; word counts below, at and
    /// above one column block, with and without an eight-word tail.
    #[test]
    fn local_gates_match_bitwise_reference() {
        let mut rng = Rng(1);
        let slots = 9;
        let gates: Vec<i32> = vec![
            XOR, 0, 1, -1, 4, //
            XOR3, 2, 3, 4, 5, //
            INV, 5, -1, -1, 6, //
            EQW, 6, -1, -1, 7, //
            EQ0, -1, -1, -1, 8, //
            EQ1, -1, -1, -1, 1, //
            XOR, 2, 7, -1, 2, // in place
            INV, 3, -1, -1, 3, // in place
            XOR3, 0, 0, 6, 0, // repeated input, in place
        ];
        check_slots(&gates, 5, 1, slots, &[false, true, true, true, false]).unwrap();
        check_local_inputs(&gates).unwrap();
        for w in [1usize, 7, 8, 19, 256, 300] {
            let (mut x, mut a) = (rng.words(slots * w), rng.words(slots * w));
            let (mut rx, mut ra) = (x.clone(), a.clone());
            // SAFETY: `x`, `a` are `slots` rows of `w` words and the gates were checked above.
            unsafe { local(&mut x, &mut a, w, &gates) }.unwrap();
            local_ref(&mut rx, &mut ra, w, &gates);
            assert!(x == rx && a == ra, "{w} words");
        }
    }

    #[test]
    fn gate_rows_checked() {
        assert_eq!(check_slots(&[0, 1, 5], 3, 0, 5, &[false; 3]).unwrap_err(), "gate row 0: slot 5 is out of range (0..5)");
        assert!(check_slots(&[XOR, 0, 1, -1, 2], 5, 1, 3, &[false, true, true, true, false]).is_ok());
        assert!(check_slots(&[XOR, 0, 1, -1, -1], 5, 1, 3, &[false, true, true, true, false]).is_err());
        assert_eq!(check_local_inputs(&[XOR, 0, 1, -1, 2, XOR, 0, -1, -1, 2]).unwrap_err(), "gate row 1: missing input slot");
        assert_eq!(check_local_inputs(&[1, 0, 0, 0, 0]).unwrap_err(), "gate row 0: unknown gate code 1");
        assert!(check_local_inputs(&[EQ1, -1, -1, -1, 0, INV, 0, -1, -1, 1]).is_ok());
        let (mut x, mut a) = (vec![0u64; 2], vec![0u64; 2]);
        // SAFETY: slots 0 and 1 are the two rows of one word (the code is rejected before use).
        assert_eq!(unsafe { local(&mut x, &mut a, 1, &[7, 0, 0, 0, 1]) }.unwrap_err(), "unknown local gate code 7");
    }

    /// The two halves of an AND layer against the bitwise definition.
    #[test]
    fn and_halves_match_bitwise_reference() {
        let mut rng = Rng(2);
        let (slots, w) = (6, 37);
        let ands: Vec<i32> = vec![0, 1, 2, 3, 3, 4, 5, 0, 5];
        let n = ands.len() / 3;
        let (x, a) = (rng.words(slots * w), rng.words(slots * w));
        let (m1, m2) = (rng.words(n * w), rng.words(n * w));
        let mut out = vec![0u64; n * w];
        // SAFETY: every slot in `ands` is below `slots`, the rows of `x` and `a`.
        unsafe { and_local_masked(&x, &a, w, &ands, &mut out, &m1, &m2) };
        for (g, t) in ands.chunks(3).enumerate() {
            for k in 0..64 * w {
                let want = get(&m1, w, g as i32, k) ^ get(&m2, w, g as i32, k)
                    ^ (get(&x, w, t[0], k) & get(&x, w, t[1], k))
                    ^ (get(&a, w, t[0], k) & get(&a, w, t[1], k));
                assert_eq!(get(&out, w, g as i32, k), want, "gate {g} bit {k}");
            }
        }
        let (r, rp) = (rng.words(n * w), rng.words(n * w));
        let (mut fx, mut fa) = (x.clone(), a.clone());
        and_finish(&mut fx, &mut fa, w, &ands, &r, &rp);
        let (mut rx, mut ra) = (x.clone(), a.clone());
        for (g, t) in ands.chunks(3).enumerate() {
            for k in 0..64 * w {
                let (vr, vp) = (get(&r, w, g as i32, k), get(&rp, w, g as i32, k));
                set(&mut rx, w, t[2], k, vp ^ vr);
                set(&mut ra, w, t[2], k, vr);
            }
        }
        assert!(fx == rx && fa == ra);
    }

    /// Three parties end to end: v = a_i ^ x_{i-1}, x_0 ^ x_1 ^ x_2 = 0; local gates and an AND
    /// layer (zero sharing from per-party streams) reconstruct to the cleartext circuit.
    #[test]
    fn three_parties_compute_the_circuit() {
        let mut rng = Rng(3);
        let (slots, w) = (6, 5);
        let clear = rng.words(slots * w);
        let x0 = rng.words(slots * w);
        let x1 = rng.words(slots * w);
        let x2: Vec<u64> = x0.iter().zip(&x1).map(|(p, q)| p ^ q).collect();
        let xs = [x0, x1, x2];
        let mut parties: Vec<(Vec<u64>, Vec<u64>)> = (0..3)
            .map(|i| {
                let a = xs[(i + 2) % 3].iter().zip(&clear).map(|(p, v)| p ^ v).collect();
                (xs[i].clone(), a)
            })
            .collect();
        let gates = [XOR, 0, 1, -1, 2, INV, 2, -1, -1, 3, XOR3, 0, 1, 3, 4, EQ1, -1, -1, -1, 5];
        let ands = [3, 4, 0, 5, 2, 1, 0, 0, 3];
        // cleartext
        let mut cx = vec![0u64; slots * w];
        let mut ca = clear.clone();
        // SAFETY: every slot in `gates` and `ands` is below `slots`, the rows of every state here
        // (and no gate reads an input it lacks).
        unsafe { local(&mut cx, &mut ca, w, &gates) }.unwrap();
        let n = ands.len() / 3;
        let mut want = ca.clone();
        for t in ands.chunks(3) {
            let (p, q, o) = (t[0] as usize, t[1] as usize, t[2] as usize);
            for j in 0..w {
                want[o * w + j] = ca[p * w + j] & ca[q * w + j];
            }
        }
        // shared
        for (x, a) in parties.iter_mut() {
            // SAFETY: as above.
            unsafe { local(x, a, w, &gates) }.unwrap();
        }
        let streams: Vec<Vec<u64>> = (0..3).map(|_| rng.words(n * w)).collect();
        let r: Vec<Vec<u64>> = (0..3)
            .map(|i| {
                let mut out = vec![0u64; n * w];
                let (x, a) = &parties[i];
                // SAFETY: as above.
                unsafe { and_local_masked(x, a, w, &ands, &mut out, &streams[i], &streams[(i + 2) % 3]) };
                out
            })
            .collect();
        for i in 0..3 {
            let (x, a) = &mut parties[i];
            and_finish(x, a, w, &ands, &r[i], &r[(i + 2) % 3]);
        }
        for i in 0..3 {
            let v: Vec<u64> = parties[i].1.iter().zip(&parties[(i + 2) % 3].0).map(|(p, q)| p ^ q).collect();
            assert_eq!(v, want, "reconstructed by party {i}");
        }
    }

    /// Masks drawn from keystreams on the fly equal masks passed as arrays.
    #[test]
    fn and_prf_matches_and_masked() {
        use crate::prf::{available, KeyStream};
        if !available() {
            eprintln!("note: this CPU lacks VAES/AVX2; the keystream AND test does nothing here");
            return;
        }
        let mut rng = Rng(4);
        let (slots, w) = (5, 300);
        let ands = [0, 1, 2, 3, 4, 4, 2, 2, 0];
        let n = ands.len() / 3;
        let (x, a) = (rng.words(slots * w), rng.words(slots * w));
        let (k1, k2) = ([1u8; 16], [2u8; 16]);
        let (mut m1, mut m2) = (vec![0u64; n * w], vec![0u64; n * w]);
        KeyStream::new(&k1).unwrap().fill(&mut m1);
        KeyStream::new(&k2).unwrap().fill(&mut m2);
        let mut want = vec![0u64; n * w];
        // SAFETY: every slot in `ands` is below `slots`, the rows of `x` and `a`.
        unsafe { and_local_masked(&x, &a, w, &ands, &mut want, &m1, &m2) };
        let mut got = vec![0u64; n * w];
        let (mut s1, mut s2) = (KeyStream::new(&k1).unwrap(), KeyStream::new(&k2).unwrap());
        // SAFETY: as above.
        unsafe { and_prf(&x, &a, w, &ands, &mut got, &mut s1, &mut s2) };
        assert_eq!(got, want);
    }
}
