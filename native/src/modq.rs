//! Arithmetic modulo word-size odd moduli (q < 2^62) for the n-party engine's prime-field and
//! RNS shares: element-wise products and matrix products, row-major arrays whose last axis runs
//! over the limbs of an RNS basis (one modulus per column).
//!
//! Montgomery reduction with R = 2^64: REDC(T) = T R^-1 mod q for T < q R, so a product a b
//! (a, b < q) is REDC(REDC(a b) (R^2 mod q)). A matrix product sums four products (each below
//! q 2^62) before one REDC, then corrects the accumulated R^-1 with one more REDC by R^2 at the
//! end. Control flow does not depend on the values (the final subtraction is a select).

/// One odd modulus below 2^62 with its Montgomery constants.
#[derive(Clone, Copy, Debug)]
pub struct Modulus {
    pub q: u64,
    /// -q^-1 mod 2^64
    neg_inv: u64,
    /// R^2 mod q
    r2: u64,
}

impl Modulus {
    /// `Err` unless q is odd, at least 3 and below 2^62.
    pub fn new(q: u64) -> Result<Self, String> {
        if q < 3 || q % 2 == 0 || q >= 1 << 62 {
            return Err(format!("modulus {q} must be odd, at least 3 and below 2^62"));
        }
        // q^-1 mod 2^64 by Newton's iteration (each step doubles the correct low bits)
        let mut inv: u64 = 1;
        for _ in 0..7 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(q.wrapping_mul(inv)));
        }
        let r = ((1u128 << 64) % q as u128) as u64;
        let r2 = ((r as u128 * r as u128) % q as u128) as u64;
        Ok(Modulus { q, neg_inv: inv.wrapping_neg(), r2 })
    }

    /// T R^-1 mod q, for T < q 2^64.
    #[inline(always)]
    fn redc(&self, t: u128) -> u64 {
        let m = (t as u64).wrapping_mul(self.neg_inv);
        let s = ((t + m as u128 * self.q as u128) >> 64) as u64;
        let (d, borrow) = s.overflowing_sub(self.q);
        if borrow { s } else { d }
    }

    /// REDC for other kernels: T R^-1 mod q, for T < q 2^64.
    #[inline(always)]
    pub fn redc_pub(&self, t: u128) -> u64 {
        self.redc(t)
    }

    /// a b mod q (a, b < q).
    #[inline(always)]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.redc(self.redc(a as u128 * b as u128) as u128 * self.r2 as u128)
    }

    /// x mod q for any 64-bit x.
    #[inline(always)]
    pub fn reduce(&self, x: u64) -> u64 {
        // REDC(x (R^2 mod q)) = x R mod q (x r2 < 2^64 q since r2 < q), then REDC again
        self.redc(self.redc(x as u128 * self.r2 as u128) as u128)
    }
}

/// Checked moduli of a basis.
pub fn moduli(qs: &[u64]) -> Result<Vec<Modulus>, String> {
    qs.iter().map(|&q| Modulus::new(q)).collect()
}

fn check_reduced(x: &[u64], mods: &[Modulus], what: &str) -> Result<(), String> {
    let l = mods.len();
    // row by row (no division per element); the branch-free scan first, the message on a miss
    let bad = x.chunks_exact(l).any(|row| row.iter().zip(mods).fold(false, |acc, (&v, m)| acc | (v >= m.q)));
    if bad {
        for (i, &v) in x.iter().enumerate() {
            if v >= mods[i % l].q {
                return Err(format!("{what}: element {} is {v}, not below its modulus {}", i / l, mods[i % l].q));
            }
        }
    }
    Ok(())
}

/// out = a * b element-wise, all (n, L) row-major, column c modulo mods[c].
pub fn mul(a: &[u64], b: &[u64], mods: &[Modulus], out: &mut [u64]) -> Result<(), String> {
    let l = mods.len();
    if l == 0 || a.len() != b.len() || a.len() != out.len() || a.len() % l != 0 {
        return Err(format!("operands of {} and {} words do not fit {} limbs", a.len(), b.len(), l));
    }
    check_reduced(a, mods, "first factor")?;
    check_reduced(b, mods, "second factor")?;
    for ((o, x), y) in out.chunks_exact_mut(l).zip(a.chunks_exact(l)).zip(b.chunks_exact(l)) {
        for c in 0..l {
            o[c] = mods[c].mul(x[c], y[c]);
        }
    }
    Ok(())
}

/// out (m, n) = a (m, k) @ b (k, n) mod q.
pub fn matmul(a: &[u64], b: &[u64], m: usize, k: usize, n: usize, md: &Modulus, out: &mut [u64]) -> Result<(), String> {
    if a.len() != m * k || b.len() != k * n || out.len() != m * n {
        return Err(format!("matrix product ({m}x{k}) @ ({k}x{n}): operand sizes {} and {}", a.len(), b.len()));
    }
    let one = [*md];
    check_reduced(a, &one, "left matrix")?;
    check_reduced(b, &one, "right matrix")?;
    let q = md.q;
    for i in 0..m {
        let row = &a[i * k..(i + 1) * k];
        let o = &mut out[i * n..(i + 1) * n];
        for (j, oj) in o.iter_mut().enumerate() {
            let mut total: u64 = 0; // sum of REDC'd blocks, each < q: kept < q
            let mut acc: u128 = 0;
            for (t, &x) in row.iter().enumerate() {
                acc += x as u128 * b[t * n + j] as u128;
                if t % 4 == 3 {
                    total += md.redc(acc);
                    if total >= q {
                        total -= q;
                    }
                    acc = 0;
                }
            }
            total += md.redc(acc);
            if total >= q {
                total -= q;
            }
            *oj = md.redc(total as u128 * md.r2 as u128);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMES: [u64; 5] = [3, 65537, (1 << 61) - 1, 4611686018427387847, 1152921504606584833];

    fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state ^ (*state >> 29)
    }

    #[test]
    fn products_match_u128_remainders() {
        let mut s = 9;
        for &q in &PRIMES {
            let md = Modulus::new(q).unwrap();
            for edge in [0, 1, q - 1, q / 2] {
                assert_eq!(md.mul(edge, q - 1) as u128, edge as u128 * (q - 1) as u128 % q as u128);
            }
            for _ in 0..10_000 {
                let (a, b) = (lcg(&mut s) % q, lcg(&mut s) % q);
                assert_eq!(md.mul(a, b) as u128, a as u128 * b as u128 % q as u128, "q={q} a={a} b={b}");
                let x = lcg(&mut s);
                assert_eq!(md.reduce(x), x % q);
            }
        }
    }

    #[test]
    fn bad_moduli_and_unreduced_inputs_are_refused() {
        for q in [0u64, 1, 2, 4, 1 << 62, u64::MAX] {
            assert!(Modulus::new(q).is_err(), "{q}");
        }
        let m = moduli(&[7, 11]).unwrap();
        let mut out = [0u64; 2];
        assert!(mul(&[6, 11], &[1, 1], &m, &mut out).unwrap_err().contains("not below its modulus 11"));
        assert!(mul(&[6, 10], &[1, 1], &m, &mut out).is_ok());
    }

    #[test]
    fn matrix_product_matches_naive() {
        let mut s = 3;
        for &q in &PRIMES {
            let md = Modulus::new(q).unwrap();
            for (m, k, n) in [(1, 1, 1), (3, 5, 2), (4, 9, 7), (2, 16, 3)] {
                let a: Vec<u64> = (0..m * k).map(|_| lcg(&mut s) % q).collect();
                let b: Vec<u64> = (0..k * n).map(|_| q - 1 - lcg(&mut s) % 2).collect();
                let mut out = vec![0u64; m * n];
                matmul(&a, &b, m, k, n, &md, &mut out).unwrap();
                for i in 0..m {
                    for j in 0..n {
                        let want = (0..k).fold(0u128, |acc, t| (acc + a[i * k + t] as u128 * b[t * n + j] as u128) % q as u128);
                        assert_eq!(out[i * n + j] as u128, want);
                    }
                }
            }
        }
    }
}
