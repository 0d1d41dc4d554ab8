//! RNS inputs (`rns`): contexts from any degree, primes and roots (`RnsContext::new`,
//! `prime::ntt_primes`), then every whole-array kernel with arrays of any length, index lists
//! (`mods`) naming any prime, Galois elements and special primes of any value, as the binding
//! passes them after its shape check. Never a panic; an accepted NTT inverts, add/sub and
//! neg/mul agree, and every output is reduced.
#![no_main]
mod common;

use std::sync::OnceLock;

use _native::rns::prime::ntt_primes;
use _native::rns::RnsContext;
use common::Input;
use libfuzzer_sys::fuzz_target;

/// Degrees 8, 16, 32 with four primes of 30, 40, 50 and 61 bits.
fn context(i: usize) -> &'static RnsContext {
    static CTX: [OnceLock<RnsContext>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    CTX[i].get_or_init(|| {
        let n = 8usize << i;
        let primes: Vec<u64> = [30u32, 40, 50, 61].iter().map(|&b| ntt_primes(n as u64, b, 1, &[]).unwrap()[0]).collect();
        RnsContext::new(n, &primes, None).unwrap()
    })
}

fn construct(r: &mut Input) {
    let n = match r.u8() % 4 {
        0 => r.u32() as usize,
        _ => 1usize << r.below(12),
    };
    let count = r.below(4);
    let bits = 2 + r.below(62) as u32;
    let mut primes = match ntt_primes(n.min(1 << 20) as u64, bits, count, &[]) {
        Ok(p) => {
            assert_eq!(p.len(), count);
            p
        }
        Err(_) => vec![],
    };
    for _ in 0..r.below(3) {
        primes.push(if r.bool() { r.u64() } else { primes.first().copied().unwrap_or(0) ^ (r.u8() as u64) << r.below(62) });
    }
    if r.u8() % 8 == 0 {
        primes.reverse();
        primes.truncate(r.below(6));
    }
    let roots: Option<Vec<u64>> = match r.u8() % 3 {
        0 => None,
        1 => Some((0..primes.len()).map(|_| r.u64()).collect()),
        _ => RnsContext::new(n, &primes, None).ok().map(|c| {
            let mut roots = c.roots();
            if let Some(x) = roots.first_mut() {
                *x ^= r.u64() & 0xff;
            }
            roots.truncate((primes.len() + 1).saturating_sub(r.below(3)));
            roots
        }),
    };
    if let Ok(c) = RnsContext::new(n, &primes, roots.as_deref()) {
        assert_eq!(c.n, n);
        assert_eq!(c.primes(), primes);
        if let Some(roots) = roots {
            assert_eq!(c.roots(), roots);
        }
    }
}

fn mods(r: &mut Input) -> Vec<usize> {
    let len = r.below(6);
    (0..len).map(|_| if r.u8() % 16 == 0 { r.u64() as usize } else { r.below(5) }).collect()
}

/// An array for `mods` (batch items of len(mods) rows), its length sometimes off, its entries
/// mostly reduced by their row's prime.
fn array(r: &mut Input, c: &RnsContext, mods: &[usize], items: usize) -> Vec<u64> {
    let primes = c.primes();
    let rows = mods.len().max(1);
    let mut len = items * rows * c.n;
    if r.u8() % 16 == 0 {
        len = (len + r.below(40)).saturating_sub(20);
    }
    let reduce = r.u8() % 8 != 0;
    (0..len)
        .map(|k| {
            let x = r.u64();
            let q = mods.get(k / c.n % rows).and_then(|&m| primes.get(m)).copied().unwrap_or(0);
            if reduce && q != 0 { x % q } else { x }
        })
        .collect()
}

fn reduced(c: &RnsContext, out: &[u64], mods: &[usize]) {
    c.check_reduced(out, mods, "out").expect("kernel output is reduced");
}

fn kernels(r: &mut Input) {
    let c = context(r.below(3));
    let mods = mods(r);
    let items = r.below(3);
    let a = array(r, c, &mods, items);
    let b = array(r, c, &mods, items);
    match r.u8() % 10 {
        0 => {
            let mut x = a.clone();
            if c.ntt(&mut x, &mods).is_ok() {
                reduced(c, &x, &mods);
                c.intt(&mut x, &mods).unwrap();
                assert_eq!(x, a, "intt(ntt(a)) = a");
            }
        }
        1 => {
            if let Ok(s) = c.add(&a, &b, &mods) {
                reduced(c, &s, &mods);
                assert_eq!(c.sub(&s, &b, &mods).unwrap(), a, "(a + b) - b = a");
            }
        }
        2 => {
            if let Ok(p) = c.mul(&a, &b, &mods) {
                reduced(c, &p, &mods);
                let na = c.neg(&a, &mods).unwrap();
                let np = c.mul(&na, &b, &mods).unwrap();
                assert_eq!(c.add(&p, &np, &mods).unwrap(), vec![0; p.len()], "a b + (-a) b = 0");
                let mut acc = vec![0u64; a.len()];
                c.mul_acc(&mut acc, &a, &b, &mods).unwrap();
                assert_eq!(acc, p, "0 + a b = a b");
            }
        }
        3 => {
            let scalars: Vec<u64> = (0..r.below(6)).map(|_| r.u64() >> r.below(64)).collect();
            if let Ok(out) = c.mul_scalar(&a, &scalars, &mods) {
                reduced(c, &out, &mods);
            }
        }
        4 => {
            let mut a2 = a.clone();
            a2.extend(&b);
            let mut b2 = b.clone();
            b2.extend(&a);
            if let Ok(out) = c.tensor(&a2, &b2, &mods) {
                assert_eq!(out.len(), a2.len() / 2 * 3);
            }
        }
        5 => {
            let g = match r.u8() % 3 {
                0 => r.u64(),
                _ => r.below(4 * c.n) as u64,
            };
            if let Ok(out) = c.automorph(&a, g) {
                let mut sa = a.clone();
                sa.sort();
                let mut so = out.clone();
                so.sort();
                assert_eq!(sa, so, "an automorphism permutes each row");
            }
        }
        6 => {
            let x: Vec<i64> = (0..r.below(3) * c.n + if r.u8() % 16 == 0 { 1 } else { 0 })
                .map(|_| r.i64() >> r.below(64))
                .collect();
            if let Ok(out) = c.from_signed(&x, &mods) {
                reduced(c, &out, &mods);
            }
        }
        7 => {
            if let Ok(out) = c.divide_round_last(&a, &mods) {
                reduced(c, &out, &mods[..mods.len() - 1]);
            }
        }
        8 => {
            let sp = if r.bool() { r.below(6) } else { r.u64() as usize };
            if let Ok(out) = c.decompose(&a, &mods, sp) {
                assert_eq!(out.len(), a.len() * (mods.len() + 1));
            }
        }
        _ => {
            let sp = r.below(6);
            let g = if r.bool() { 1 } else { r.below(4 * c.n) as u64 };
            let key_digits = r.below(6);
            let rows = mods.len();
            let primes = c.primes().len();
            let mut digits: Vec<u64> = (0..rows * (rows + 1) * c.n).map(|_| r.u64() >> 4).collect();
            let mut key: Vec<u64> = (0..key_digits * 2 * primes * c.n).map(|_| r.u64() >> 4).collect();
            if r.u8() % 8 == 0 {
                digits.pop();
            }
            if r.u8() % 8 == 0 {
                key.push(0);
            }
            if let Ok(out) = c.key_switch(&digits, &key, key_digits, &mods, sp, g) {
                assert_eq!(out.len(), 2 * rows * c.n);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut r = Input::new(data);
    if r.u8() % 4 == 0 {
        construct(&mut r);
    } else {
        kernels(&mut r);
    }
});
