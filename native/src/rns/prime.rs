//! Word-size NTT primes: the arithmetic every RNS kernel shares, primality, SEAL's prime choice
//! and the roots of unity that define the NTT.
//!
//! Three reductions, each picked for where it is used:
//! - **Shoup's multiplication by a fixed operand** (the twiddles of the NTT, n^-1, q_last^-1):
//!   with w' = floor(w 2^64 / q) precomputed, x w mod q lies in [0, 2q) as
//!   x w - floor(x w' / 2^64) q, computed with one high and two low products and no division,
//!   for *any* 64-bit x. Harvey (2014) builds his lazy NTT butterflies on exactly this bound.
//! - **Barrett's reduction of a product** of two residues (element-wise products): with k the
//!   bit length of q and mu = floor(2^(63+k) / q), x < 2^(2k) is reduced with two products and
//!   at most two subtractions (Handbook of Applied Cryptography 14.42, base 2, with the final
//!   shift made a whole word). Nothing is stored per operand, so it serves arrays times arrays.
//! - **Any 128-bit value** (the lazily accumulated sums of key switching) splits as
//!   x1 2^64 + x0 and becomes Shoup(x1, 2^64 mod q) + Shoup(x0, 1), each below 2q.
//!
//! Primes are below 2^62 so that 4q fits a word: the lazy NTT keeps values in [0, 4q).
//! Control flow never depends on the values (selects, not branches), so the compiler is free to
//! vectorise the element-wise loops.

/// One NTT prime q < 2^62 with its reduction constants.
#[derive(Clone, Copy, Debug)]
pub struct Prime {
    pub q: u64,
    /// k - 1 for the bit length k of q (2^(k-1) < q < 2^k)
    shift: u32,
    /// floor(2^(63+k) / q) < 2^64
    mu: u64,
    /// floor(2^64 / q): Shoup constant of 1
    one_shoup: u64,
    /// 2^64 mod q and its Shoup constant
    r64: u64,
    r64_shoup: u64,
}

/// High word of a 64 x 64-bit product.
#[inline(always)]
pub fn mulhi(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) >> 64) as u64
}

impl Prime {
    /// Constants for an odd q with 3 <= q < 2^62 (primality is checked by the caller).
    pub fn new(q: u64) -> Prime {
        assert!(q >= 3 && q & 1 == 1 && q < 1 << 62, "modulus {q} out of range");
        let bits = 64 - q.leading_zeros();
        let mu = ((1u128 << (63 + bits)) / q as u128) as u64;
        let r64 = ((1u128 << 64) % q as u128) as u64;
        let mut p = Prime { q, shift: bits - 1, mu, one_shoup: 0, r64, r64_shoup: 0 };
        p.one_shoup = p.shoup(1);
        p.r64_shoup = p.shoup(r64);
        p
    }

    /// Shoup constant floor(w 2^64 / q) of a fixed operand w < q.
    #[inline]
    pub fn shoup(&self, w: u64) -> u64 {
        debug_assert!(w < self.q);
        (((w as u128) << 64) / self.q as u128) as u64
    }

    /// x w mod q in [0, 2q) for any 64-bit x (w < q, ws = shoup(w)).
    #[inline(always)]
    pub fn mul_shoup_lazy(&self, x: u64, w: u64, ws: u64) -> u64 {
        let qhat = mulhi(x, ws);
        x.wrapping_mul(w).wrapping_sub(qhat.wrapping_mul(self.q))
    }

    /// x w mod q in [0, q) for any 64-bit x.
    #[inline(always)]
    pub fn mul_shoup(&self, x: u64, w: u64, ws: u64) -> u64 {
        self.reduce_2q(self.mul_shoup_lazy(x, w, ws))
    }

    /// x in [0, 2q) to [0, q).
    #[inline(always)]
    pub fn reduce_2q(&self, x: u64) -> u64 {
        let d = x.wrapping_sub(self.q);
        if (d as i64) < 0 { x } else { d }
    }

    /// x in [0, 4q) to [0, q).
    #[inline(always)]
    pub fn reduce_4q(&self, x: u64) -> u64 {
        let d = x.wrapping_sub(2 * self.q);
        self.reduce_2q(if (d as i64) < 0 { x } else { d })
    }

    /// x mod q for x < 2^(2k), k the bit length of q (so any a b + c with a, b, c < q).
    /// Barrett with the quotient x / 2^(k-1) times 2^(63+k) / q over 2^64: it is at most 2
    /// below floor(x / q) (the two truncations each cost less than one).
    #[inline(always)]
    pub fn reduce_product(&self, x: u128) -> u64 {
        let (hi, lo) = ((x >> 64) as u64, x as u64);
        // shift is 4..61: neither shift below is by 0 or 64
        let q1 = (hi << (64 - self.shift)) | (lo >> self.shift);
        let q3 = mulhi(q1, self.mu);
        let r = lo.wrapping_sub(q3.wrapping_mul(self.q)); // in [0, 3q)
        let d = r.wrapping_sub(self.q);
        let r = if (d as i64) < 0 { r } else { d };
        self.reduce_2q(r)
    }

    /// x mod q for any 128-bit x.
    #[inline(always)]
    pub fn reduce_u128(&self, x: u128) -> u64 {
        let hi = self.mul_shoup_lazy((x >> 64) as u64, self.r64, self.r64_shoup);
        let lo = self.mul_shoup_lazy(x as u64, 1, self.one_shoup);
        self.reduce_4q(hi + lo)
    }

    /// x mod q for any 64-bit x.
    #[inline(always)]
    pub fn reduce_u64(&self, x: u64) -> u64 {
        self.reduce_2q(self.mul_shoup_lazy(x, 1, self.one_shoup))
    }

    /// a b mod q (a, b < q).
    #[inline(always)]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce_product(a as u128 * b as u128)
    }

    #[inline(always)]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        self.reduce_2q(a + b)
    }

    #[inline(always)]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        self.reduce_2q(a + self.q - b)
    }

    #[inline(always)]
    pub fn neg(&self, a: u64) -> u64 {
        // 0 stays 0: q - 0 = q reduces to 0
        self.reduce_2q(self.q - a)
    }

    pub fn pow(&self, mut base: u64, mut e: u64) -> u64 {
        let mut r = 1 % self.q;
        base %= self.q;
        while e > 0 {
            if e & 1 == 1 {
                r = self.mul(r, base);
            }
            base = self.mul(base, base);
            e >>= 1;
        }
        r
    }

    /// a^-1 mod q (q prime, a not 0 mod q).
    pub fn inv(&self, a: u64) -> u64 {
        self.pow(a, self.q - 2)
    }
}

fn mulmod(a: u64, b: u64, m: u64) -> u64 {
    (a as u128 * b as u128 % m as u128) as u64
}

fn powmod(mut b: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    b %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = mulmod(r, b, m);
        }
        b = mulmod(b, b, m);
        e >>= 1;
    }
    r
}

/// Deterministic primality for 64-bit integers: Miller–Rabin to the bases 2, 3, ..., 37 (the
/// first twelve primes), which no composite below 3.3 10^24 passes.
pub fn is_prime(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for &p in &BASES {
        if n % p == 0 {
            return n == p;
        }
    }
    let s = (n - 1).trailing_zeros();
    let d = (n - 1) >> s;
    'bases: for &a in &BASES {
        let mut x = powmod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mulmod(x, x, n);
            if x == n - 1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// SEAL's choice of NTT primes (`CoeffModulus::Create`): the `count` largest primes of exactly
/// `bits` bits (2^(bits-1) < q < 2^bits) with q = 1 mod 2n, descending, skipping `exclude`.
pub fn ntt_primes(n: u64, bits: u32, count: usize, exclude: &[u64]) -> Result<Vec<u64>, String> {
    if !n.is_power_of_two() || n > 1 << 62 {
        return Err(format!("n must be a power of two from 1 to 2^62, got {n}"));
    }
    if !(2..=62).contains(&bits) {
        return Err(format!("bits must be in [2, 62], got {bits}"));
    }
    let step = 2 * n as u128;
    let top = 1u128 << bits;
    let lower = 1u128 << (bits - 1);
    let mut out = Vec::with_capacity(count);
    if top <= step {
        return Err(format!("no {bits}-bit number is 1 mod {step}"));
    }
    let mut v = top - step + 1; // largest value below 2^bits that is 1 mod 2n
    while out.len() < count && v > lower {
        let c = v as u64;
        if is_prime(c) && !exclude.contains(&c) {
            out.push(c);
        }
        if v <= step {
            break;
        }
        v -= step;
    }
    if out.len() < count {
        return Err(format!("only {} primes of {bits} bits are 1 mod {step}; {count} were asked for", out.len()));
    }
    Ok(out)
}

/// The smallest primitive 2n-th root of unity mod the prime q (q = 1 mod 2n, n a power of two):
/// x = g^((q-1)/2n) for a non-residue-like g with x^n = -1, then the least of its odd powers
/// (exactly the primitive 2n-th roots).
pub fn minimal_root(p: &Prime, n: u64) -> Result<u64, String> {
    let q = p.q;
    let two_n = 2 * n;
    if (q - 1) % two_n != 0 {
        return Err(format!("prime {q} is not 1 mod {two_n}"));
    }
    let e = (q - 1) / two_n;
    let mut found = None;
    for g in 2..q.min(1 << 20) {
        let x = p.pow(g, e);
        if p.pow(x, n) == q - 1 {
            found = Some(x);
            break;
        }
    }
    let x = found.ok_or_else(|| format!("no primitive {two_n}-th root of unity found mod {q}"))?;
    let x2 = p.mul(x, x);
    let (mut best, mut cur) = (x, x);
    for _ in 1..n {
        cur = p.mul(cur, x2);
        best = best.min(cur);
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(s: &mut u64) -> u64 {
        *s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *s ^ (*s >> 29)
    }

    fn naive_prime(n: u64) -> bool {
        if n < 2 {
            return false;
        }
        let mut d = 2;
        while d * d <= n {
            if n % d == 0 {
                return false;
            }
            d += 1;
        }
        true
    }

    #[test]
    fn miller_rabin_agrees_with_trial_division() {
        for n in 0..20_000u64 {
            assert_eq!(is_prime(n), naive_prime(n), "{n}");
        }
        assert!(is_prime((1 << 61) - 1));
        assert!(!is_prime(3215031751)); // strong pseudoprime to 2, 3, 5, 7
        assert!(!is_prime(3825123056546413051)); // strong pseudoprime to bases 2..23
        assert!(is_prime(18446744073709551557));
    }

    #[test]
    fn reductions_match_u128_remainders() {
        let mut s = 5;
        for q in [17u64, 97, 65537, 1073479681, (1 << 50) - 27, 1152921504606584833, 4611686018427387847, (1 << 61) - 1] {
            let p = Prime::new(q);
            let edges = [0, 1, q / 2, q / 2 + 1, q - 2, q - 1];
            let mut vals: Vec<u64> = edges.to_vec();
            vals.extend((0..2000).map(|_| lcg(&mut s) % q));
            for &a in &vals {
                for &b in &edges {
                    assert_eq!(p.mul(a, b) as u128, a as u128 * b as u128 % q as u128);
                    assert_eq!(p.add(a, b), ((a as u128 + b as u128) % q as u128) as u64);
                    assert_eq!(p.sub(a, b), ((a as u128 + q as u128 - b as u128) % q as u128) as u64);
                }
                assert_eq!(p.neg(a), (q - a) % q);
                let x = ((lcg(&mut s) as u128) << 64) | lcg(&mut s) as u128;
                assert_eq!(p.reduce_u128(x) as u128, x % q as u128);
                let y = lcg(&mut s);
                assert_eq!(p.reduce_u64(y), y % q);
                let w = lcg(&mut s) % q;
                assert_eq!(p.mul_shoup(y, w, p.shoup(w)) as u128, y as u128 * w as u128 % q as u128);
                let lazy = p.mul_shoup_lazy(u64::MAX, w, p.shoup(w));
                assert!(lazy < 2 * q);
            }
            assert_eq!(p.reduce_u128(u128::MAX) as u128, u128::MAX % q as u128);
            assert_eq!(p.reduce_product((q as u128 - 1) * (q as u128 - 1) + q as u128 - 1) as u128,
                       ((q as u128 - 1) * (q as u128 - 1) + q as u128 - 1) % q as u128);
        }
    }

    #[test]
    fn seal_primes_by_independent_search() {
        // n = 2^14: the largest 60-bit prime that is 1 mod 2^15, by plain downward search
        let m = 1u64 << 15;
        let mut v = (1u64 << 60) - 1;
        while !(v % m == 1 && naive_mr(v)) {
            v -= 1;
        }
        let got = ntt_primes(1 << 14, 60, 3, &[]).unwrap();
        assert_eq!(got[0], v);
        assert!(got.windows(2).all(|w| w[0] > w[1]));
        assert!(got.iter().all(|&q| q % m == 1 && q >> 59 == 1));
        for (n, bits) in [(1u64 << 12, 40u32), (1 << 13, 50), (1 << 16, 61)] {
            let mut v = (1u64 << bits) - 1;
            while !(v % (2 * n) == 1 && naive_mr(v)) {
                v -= 1;
            }
            assert_eq!(ntt_primes(n, bits, 1, &[]).unwrap()[0], v);
        }
        let skip = ntt_primes(1 << 14, 60, 2, &[got[0]]).unwrap();
        assert_eq!(skip, vec![got[1], got[2]]);
        assert!(ntt_primes(1 << 14, 16, 1, &[]).is_err());
        assert!(ntt_primes(12, 30, 1, &[]).is_err());
    }

    /// A second primality check for the search: Fermat to many bases (enough for a test
    /// cross-check of Miller–Rabin's answer on a handful of numbers).
    fn naive_mr(v: u64) -> bool {
        (2..60u64).all(|a| powmod(a, v - 1, v) == 1)
    }

    #[test]
    fn minimal_root_is_smallest_primitive() {
        for (q, n) in [(17u64, 8u64), (97, 16), (7681, 256), (12289, 512)] {
            let p = Prime::new(q);
            let r = minimal_root(&p, n).unwrap();
            let smallest = (2..q).find(|&x| p.pow(x, n) == q - 1).unwrap();
            assert_eq!(r, smallest, "q={q}");
        }
    }
}
