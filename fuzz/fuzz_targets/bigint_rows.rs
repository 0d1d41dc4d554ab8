//! Bigint rows (`bigint`): a modulus from any words (`Modulus::new`), value rows checked with
//! `check::first_unreduced`, Montgomery rows with `check::first_not_mont`, CSR index arrays with
//! `check::csr`, exponents with `Comb::windows_for` — the checks the binding runs — then the
//! batch algorithms on what passes, on the portable engine (and IFMA where the CPU has it).
//! Never a panic; results agree across entry points (mulmod = from_mont(mont_mul(to_mont)),
//! b^1 = b, b^2 = b·b, prod_rows = a chain of mulmod, 1-word results = u128 arithmetic).
#![no_main]
mod common;

use _native::bigint::algo;
use _native::bigint::check;
use _native::bigint::engine::{Engine, Modulus};
use _native::bigint::portable::Portable;
use common::Input;
use libfuzzer_sys::fuzz_target;

fn modulus(r: &mut Input) -> Option<Modulus> {
    let words = match r.u8() % 16 {
        0 => r.below(140), // up to 8960 bits: past MAX_BITS, and 0 words
        1..=6 => 1,
        _ => 1 + r.below(8),
    };
    let mut w = r.words(words);
    if r.u8() % 8 != 0 {
        if let Some(x) = w.first_mut() {
            *x |= 1; // mostly odd: the interesting ones
        }
    }
    Modulus::new(&w).ok()
}

/// Rows of the modulus' width from the input, as a peer would send them, and whether each
/// passed the binding's reduced check.
fn rows(r: &mut Input, m: &Modulus, count: usize) -> (Vec<u64>, bool) {
    let mut v = r.words(count * m.words());
    if r.u8() % 4 != 0 {
        // mostly reduced: shift each row below the modulus' top word
        for row in v.chunks_mut(m.words()) {
            let top = row.len() - 1;
            row[top] %= m.m[top].max(1);
        }
    }
    let ok = check::first_unreduced(&v, &m.m).is_none();
    assert_eq!(ok, v.chunks(m.words()).all(|row| check::is_reduced(row, &m.m)));
    (v, ok)
}

fn run<E: Engine>(e: &E, m: &Modulus, r: &mut Input) {
    let w = m.words();
    let count = r.below(if w > 8 { 4 } else { 20 });
    let (a, a_ok) = rows(r, m, count);
    let (b, b_ok) = rows(r, m, count);
    match r.u8() % 6 {
        0 => {
            if !(a_ok && b_ok) {
                return;
            }
            let prod = algo::mulmod(e, &a, &b, count);
            assert_eq!(check::first_unreduced(&prod, &m.m), None);
            let (ma, mb) = (algo::convert(e, &a, count, true), algo::convert(e, &b, count, true));
            assert_eq!(check::first_not_mont(e, &ma), None);
            let back = algo::convert(e, &algo::mont_mul(e, &ma, &mb, count), count, false);
            assert_eq!(prod, back, "mulmod and the Montgomery route differ");
            assert_eq!(algo::convert(e, &ma, count, false), a, "to_mont then from_mont");
            if w == 1 {
                for i in 0..count {
                    assert_eq!(prod[i] as u128, a[i] as u128 * b[i] as u128 % m.m[0] as u128);
                }
            }
        }
        1 => {
            if !a_ok {
                return;
            }
            let ew = r.below(4);
            let exps = r.words(count * ew);
            let p1 = algo::powmod_same(e, &a, count, &[1], false);
            assert_eq!(p1, a, "b^1");
            let p2 = algo::powmod_same(e, &a, count, &[2, 0], false);
            assert_eq!(p2, algo::mulmod(e, &a, &a, count), "b^2");
            let pe = algo::powmod_each(e, &a, count, &exps, ew, false);
            assert_eq!(check::first_unreduced(&pe, &m.m), None);
            if w == 1 && ew == 1 {
                for i in 0..count {
                    let (mut acc, mut base, mut x, q) = (1u128 % m.m[0] as u128, a[i] as u128, exps[i], m.m[0] as u128);
                    while x > 0 {
                        if x & 1 == 1 {
                            acc = acc * base % q;
                        }
                        base = base * base % q;
                        x >>= 1;
                    }
                    assert_eq!(pe[i] as u128, acc, "powmod row {i}");
                }
            }
        }
        2 => {
            // CSR from the peer's index arrays
            let nv = count;
            let nidx = r.below(24);
            let indices: Vec<i64> = (0..nidx).map(|_| if r.u8() % 8 == 0 { r.i64() } else { r.below(nv + 2) as i64 }).collect();
            let nptr = r.below(10);
            let mut indptr: Vec<i64> = (0..nptr).map(|_| if r.u8() % 8 == 0 { r.i64() } else { r.below(nidx + 2) as i64 }).collect();
            if r.bool() {
                indptr.sort();
            }
            let Ok((uidx, uptr)) = check::csr(&indices, &indptr, nv) else { return };
            if !a_ok {
                return;
            }
            let out = algo::prod_rows(e, &a, &uidx, &uptr, false);
            assert_eq!(out.len(), (uptr.len() - 1) * w);
            for row in 0..uptr.len() - 1 {
                let mut acc = vec![0u64; w];
                acc[0] = 1;
                for &i in &uidx[uptr[row]..uptr[row + 1]] {
                    acc = algo::mulmod(e, &acc, &a[i * w..(i + 1) * w], 1);
                }
                assert_eq!(&out[row * w..(row + 1) * w], &acc[..], "prod_rows row {row}");
            }
        }
        3 => {
            // stored Montgomery rows from outside (a file or a peer): checked, then used
            let mw = e.mw();
            let mut rowsm = r.words(count * mw);
            if r.bool() {
                let good = algo::convert(e, &a, count, true);
                if a_ok {
                    rowsm = good;
                }
            }
            if check::first_not_mont(e, &rowsm).is_some() {
                return;
            }
            let canon = algo::convert(e, &rowsm, count, false);
            assert_eq!(check::first_unreduced(&canon, &m.m), None);
            let sq = algo::mont_mul(e, &rowsm, &rowsm, count);
            assert_eq!(check::first_not_mont(e, &sq), None);
        }
        4 => {
            // Horner packing (the binding bounds shift_bits by 2^20; we stay small)
            if !a_ok {
                return;
            }
            let k = 1 + r.below(3);
            let shift = r.below(200);
            let cols: Vec<u64> = (0..k).flat_map(|_| a.iter().copied()).collect();
            let _ = algo::horner(e, &cols, k, count, shift);
            let nt = 1 + r.below(3);
            let ew = r.below(3);
            let bases: Vec<u64> = (0..nt * k).flat_map(|_| a.iter().copied()).collect();
            let exps = r.words(nt * k * count * ew);
            if let Ok(out) = algo::horner_multiexp(e, &bases, &exps, nt, k, count, ew, shift) {
                assert_eq!(check::first_unreduced(&out, &m.m), None);
            }
        }
        _ => {
            // fixed-base comb tables and exponents of any length
            if count == 0 || !a_ok {
                return;
            }
            let direct = r.bool();
            let window = 1 + r.below(if direct { 12 } else { 8 });
            let windows = 1 + r.below(40);
            let comb = algo::comb_build(e, &a[..w], window, windows, direct);
            let ew = r.below(5);
            let exps = r.words(count * ew);
            let Ok(need) = comb.windows_for(&exps, count, ew) else { return };
            let out = algo::fixed_base(e, &[&comb], &[(&exps, ew)], &[need], b_ok.then_some(&b[..]), count, false, false);
            let plain = algo::powmod_each(e, &vec![a[..w].to_vec(); count].concat(), count, &exps, ew, false);
            let want = if b_ok { algo::mulmod(e, &plain, &b, count) } else { plain };
            assert_eq!(out, want, "fixed_base and powmod differ");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    let Some(m) = modulus(&mut r) else { return };
    let use_ifma = r.bool();
    #[cfg(target_arch = "x86_64")]
    if use_ifma {
        if let Some(e) = _native::bigint::ifma::Ifma::new(&m) {
            run(&e, &m, &mut r);
            return;
        }
    }
    let _ = use_ifma;
    run(&Portable::new(&m), &m, &mut r);
});
