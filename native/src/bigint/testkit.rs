//! Test support: a deterministic generator and an independent big-integer oracle (schoolbook
//! products, bit-serial remainders, square-and-multiply), plus the checks every engine must
//! pass, run by the engines' own tests.

use super::algo;
use super::engine::{bit_length, Constants, Engine, Modulus};

/// splitmix64: deterministic test data without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random value of at most `bits` bits in `words` words.
    pub fn bits(&mut self, bits: usize, words: usize) -> Vec<u64> {
        let mut v: Vec<u64> = (0..words).map(|_| self.next()).collect();
        for (i, w) in v.iter_mut().enumerate() {
            let lo = 64 * i;
            if lo >= bits {
                *w = 0;
            } else if bits - lo < 64 {
                *w &= (1u64 << (bits - lo)) - 1;
            }
        }
        v
    }

    /// A random odd modulus of exactly `bits` bits (>= 2).
    pub fn modulus(&mut self, bits: usize) -> Vec<u64> {
        let mut m = self.bits(bits, bits.div_ceil(64));
        m[(bits - 1) / 64] |= 1u64 << ((bits - 1) % 64);
        m[0] |= 1;
        m
    }

    /// A random value below `m` (same word count).
    pub fn below(&mut self, m: &[u64]) -> Vec<u64> {
        loop {
            let v = self.bits(bit_length(m), m.len());
            if cmp(&v, m) == std::cmp::Ordering::Less {
                return v;
            }
        }
    }
}

/// Compares two little-endian numbers of any lengths.
pub fn cmp(a: &[u64], b: &[u64]) -> std::cmp::Ordering {
    let n = a.len().max(b.len());
    for i in (0..n).rev() {
        let (x, y) = (a.get(i).copied().unwrap_or(0), b.get(i).copied().unwrap_or(0));
        if x != y {
            return x.cmp(&y);
        }
    }
    std::cmp::Ordering::Equal
}

/// Full product, `a.len() + b.len()` words (schoolbook, u128).
pub fn mul_full(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate() {
        let mut carry = 0u128;
        for (j, &y) in b.iter().enumerate() {
            let t = out[i + j] as u128 + x as u128 * y as u128 + carry;
            out[i + j] = t as u64;
            carry = t >> 64;
        }
        out[i + b.len()] = carry as u64;
    }
    out
}

/// `x mod m` in `m.len()` words, one bit of `x` at a time (shift, subtract).
pub fn rem(x: &[u64], m: &[u64]) -> Vec<u64> {
    let n = m.len();
    let mut r = vec![0u64; n + 1];
    for bit in (0..64 * x.len()).rev() {
        let mut carry = (x[bit / 64] >> (bit % 64)) & 1;
        for w in r.iter_mut() {
            let next = *w >> 63;
            *w = (*w << 1) | carry;
            carry = next;
        }
        if cmp(&r, m) != std::cmp::Ordering::Less {
            let mut borrow = 0u64;
            for (i, w) in r.iter_mut().enumerate() {
                let (d1, b1) = w.overflowing_sub(m.get(i).copied().unwrap_or(0));
                let (d2, b2) = d1.overflowing_sub(borrow);
                *w = d2;
                borrow = (b1 | b2) as u64;
            }
        }
    }
    r.truncate(n);
    r
}

pub fn mulmod(a: &[u64], b: &[u64], m: &[u64]) -> Vec<u64> {
    rem(&mul_full(a, b), m)
}

/// `b^e mod m` by left-to-right square-and-multiply.
pub fn powmod(b: &[u64], e: &[u64], m: &[u64]) -> Vec<u64> {
    let mut acc = rem(&[1], m);
    for bit in (0..bit_length(e)).rev() {
        acc = mulmod(&acc, &acc, m);
        if (e[bit / 64] >> (bit % 64)) & 1 == 1 {
            acc = mulmod(&acc, b, m);
        }
    }
    acc
}

/// Rows of `words` words.
pub fn row(data: &[u64], i: usize, words: usize) -> &[u64] {
    &data[i * words..(i + 1) * words]
}

/// Moduli covering the digit boundaries of both engines: 1 and 2 words, each side of 52/64-bit
/// digit edges, and larger sizes up to 2048 bits.
pub const SIZES: &[usize] = &[2, 5, 50, 52, 53, 61, 62, 63, 64, 65, 103, 104, 105, 126, 127, 128, 129, 190, 255, 256, 521, 1024, 2048];

/// The engine checks: Montgomery round trips, products, squares, conversions and powers, on
/// `count` values (partial groups included) against the oracle. `pow`: also exponentiations
/// (left out for the largest moduli to keep the run short).
pub fn engine_suite<E: Engine>(e: &E, m: &[u64], rng: &mut Rng, pow: bool) {
    let (words, gw, lanes, mw) = (e.words(), e.gw(), e.lanes(), e.mw());
    assert_eq!(words, m.len());
    let count = 2 * lanes + 3;
    // random values, with 0, 1 and m - 1 among them
    let mut vals: Vec<Vec<u64>> = (0..count).map(|_| rng.below(m)).collect();
    vals[0] = vec![0; words];
    vals[1] = rem(&[1], m);
    let mut m1 = m.to_vec();
    m1[0] -= 1; // m is odd
    vals[2] = m1;
    let a: Vec<u64> = vals.concat();
    let b: Vec<u64> = (0..count).flat_map(|_| rng.below(m)).collect();
    let want: Vec<Vec<u64>> = (0..count).map(|i| mulmod(row(&a, i, words), row(&b, i, words), m)).collect();

    // batch product
    let got = algo::mulmod(e, &a, &b, count);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(row(&got, i, words), &w[..], "mulmod row {i}");
    }

    // group by group: load/store round trip, Montgomery product and square
    let mut x = vec![0u64; gw];
    let mut y = vec![0u64; gw];
    let mut t = vec![0u64; gw];
    let mut s = vec![0u64; gw];
    let mut back = vec![0u64; lanes * words];
    let mut stored = vec![0u64; lanes * mw];
    for g in 0..count.div_ceil(lanes) {
        let n = (count - g * lanes).min(lanes);
        let (av, bv) = (&a[g * lanes * words..], &b[g * lanes * words..]);
        e.load(&mut x, av, n);
        e.store(&mut back, &x, n);
        assert_eq!(&back[..n * words], &av[..n * words], "load/store round trip, group {g}");
        e.load(&mut y, bv, n);
        e.mul(&mut t, &x, &y);
        e.store_mont(&mut stored, &t, n);
        for l in 0..n {
            assert!(e.mont_ok(row(&stored, l, mw)), "product below 2m, group {g} lane {l}");
        }
        e.store(&mut back, &t, n);
        for l in 0..n {
            assert_eq!(row(&back, l, words), &want[g * lanes + l][..], "Montgomery product, group {g} lane {l}");
        }
        e.sqr(&mut s, &x);
        e.mul(&mut t, &x, &x);
        e.store(&mut back, &s, n);
        let mut again = vec![0u64; lanes * words];
        e.store(&mut again, &t, n);
        assert_eq!(back[..n * words], again[..n * words], "square equals product with itself, group {g}");
        for l in 0..n {
            let v = row(av, l, words);
            assert_eq!(row(&back, l, words), &mulmod(v, v, m)[..], "square, group {g} lane {l}");
        }
        // stored rows round trip
        let mut z = vec![0u64; gw];
        e.load_mont(&mut z, &stored, n);
        let mut stored2 = vec![0u64; lanes * mw];
        e.store_mont(&mut stored2, &z, n);
        assert_eq!(stored[..n * mw], stored2[..n * mw], "load_mont/store_mont round trip, group {g}");
    }

    // conversions and stored products
    let am = algo::convert(e, &a, count, true);
    let bm = algo::convert(e, &b, count, true);
    assert_eq!(algo::convert(e, &am, count, false), a, "to_mont/from_mont round trip");
    let pm = algo::mont_mul(e, &am, &bm, count);
    let p = algo::convert(e, &pm, count, false);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(row(&p, i, words), &w[..], "mont_mul row {i}");
    }
    if !pow {
        return;
    }
    // shared exponent: 0, 1, short and multi-word
    for exp in [vec![0u64], vec![1u64], vec![0x1234_5678_9abc_def1u64], rng.bits(100, 2)] {
        let got = algo::powmod_same(e, &a, count, &exp, false);
        let gotm = algo::convert(e, &algo::powmod_same(e, &am, count, &exp, true), count, false);
        for i in 0..count {
            let want = powmod(row(&a, i, words), &exp, m);
            assert_eq!(row(&got, i, words), &want[..], "powmod_same row {i} exp {exp:x?}");
            assert_eq!(row(&gotm, i, words), &want[..], "powmod_same (mont) row {i}");
        }
    }
    // one exponent per value, of different lengths (zero rows included)
    let ew = 2;
    let exps: Vec<u64> = (0..count).flat_map(|i| rng.bits([0, 1, 7, 64, 90][i % 5], ew)).collect();
    let got = algo::powmod_each(e, &a, count, &exps, ew, false);
    let gotm = algo::convert(e, &algo::powmod_each(e, &am, count, &exps, ew, true), count, false);
    for i in 0..count {
        let want = powmod(row(&a, i, words), row(&exps, i, ew), m);
        assert_eq!(row(&got, i, words), &want[..], "powmod row {i}");
        assert_eq!(row(&gotm, i, words), &want[..], "powmod (mont) row {i}");
    }
}

/// The algorithms above single products (comb tables and fixed-base exponentiation, Horner
/// packing, row products) against direct computation with the oracle.
pub fn algo_suite<E: Engine>(e: &E, m: &[u64], rng: &mut Rng) {
    let words = e.words();
    let lanes = e.lanes();
    let count = lanes + 3;
    let bases: Vec<u64> = (0..count).flat_map(|_| rng.below(m)).collect();

    // fixed base: two tables (one constant-time, one direct), multipliers, both layouts
    let (g1, g2) = (rng.below(m), rng.below(m));
    let t1 = algo::comb_build(e, &g1, 4, 20, false); // up to 80-bit exponents
    let t2 = algo::comb_build(e, &g2, 9, 8, true); // direct, up to 72 bits
    let (ew1, ew2) = (2, 2);
    let e1: Vec<u64> = (0..count).flat_map(|i| rng.bits([80, 3, 0, 64][i % 4], ew1)).collect();
    let e2: Vec<u64> = (0..count).flat_map(|_| rng.bits(72, ew2)).collect();
    let n1 = t1.windows_for(&e1, count, ew1).unwrap();
    let n2 = t2.windows_for(&e2, count, ew2).unwrap();
    assert!(n1 <= 20 && n2 <= 8);
    assert!(t1.windows_for(&[0, 1 << 16], 1, 2).is_err(), "an 81-bit exponent overflows the table");
    assert_eq!(t1.windows_for(&[0, 1 << 15], 1, 2), Ok(20));
    let want: Vec<Vec<u64>> = (0..count)
        .map(|i| {
            let p1 = powmod(&g1, row(&e1, i, ew1), m);
            let p2 = powmod(&g2, row(&e2, i, ew2), m);
            mulmod(&mulmod(&p1, &p2, m), row(&bases, i, words), m)
        })
        .collect();
    let tabs = [&t1, &t2];
    let exps = [(&e1[..], ew1), (&e2[..], ew2)];
    let got = algo::fixed_base(e, &tabs, &exps, &[n1, n2], Some(&bases), count, false, false);
    let bm = algo::convert(e, &bases, count, true);
    let gotm = algo::fixed_base(e, &tabs, &exps, &[n1, n2], Some(&bm), count, true, true);
    let gotm = algo::convert(e, &gotm, count, false);
    for (i, w) in want.iter().enumerate() {
        assert_eq!(row(&got, i, words), &w[..], "fixed_base row {i}");
        assert_eq!(row(&gotm, i, words), &w[..], "fixed_base (mont) row {i}");
    }
    // no multipliers: the powers alone
    let got = algo::fixed_base(e, &tabs[..1], &exps[..1], &[n1], None, count, false, false);
    for i in 0..count {
        assert_eq!(row(&got, i, words), &powmod(&g1, row(&e1, i, ew1), m)[..], "fixed_base (one table) row {i}");
    }

    // Horner: acc = col[k-1]; acc = acc^(2^shift) * col[j]
    let (k, shift) = (3, 5);
    let cols: Vec<u64> = (0..k * count).flat_map(|_| rng.below(m)).collect();
    let got = algo::horner(e, &cols, k, count, shift);
    for i in 0..count {
        let mut acc = row(&cols, (k - 1) * count + i, words).to_vec();
        for j in (0..k - 1).rev() {
            for _ in 0..shift {
                acc = mulmod(&acc, &acc, m);
            }
            acc = mulmod(&acc, row(&cols, j * count + i, words), m);
        }
        assert_eq!(row(&got, i, words), &acc[..], "horner row {i}");
    }

    // Horner over products of powers: T = 2 bases per slot, exponents below 2^shift
    let (nt, ew, shift) = (2, 1, 12);
    let hb: Vec<u64> = (0..nt * k * count).flat_map(|_| rng.below(m)).collect();
    let he: Vec<u64> = (0..nt * k * count).flat_map(|i| rng.bits([12, 5, 0][i % 3], ew)).collect();
    let got = algo::horner_multiexp(e, &hb, &he, nt, k, count, ew, shift).unwrap();
    for i in 0..count {
        let mut acc = rem(&[1], m);
        for j in (0..k).rev() {
            for _ in 0..shift {
                acc = mulmod(&acc, &acc, m);
            }
            for t in 0..nt {
                let at = (t * k + j) * count + i;
                acc = mulmod(&acc, &powmod(row(&hb, at, words), row(&he, at, ew), m), m);
            }
        }
        assert_eq!(row(&got, i, words), &acc[..], "horner_multiexp row {i}");
    }
    let big: Vec<u64> = vec![1u64 << 13; nt * k * count];
    assert!(algo::horner_multiexp(e, &hb, &big, nt, k, count, 1, shift).is_err(), "exponent wider than the shift");

    // row products: empty rows, single factors, repeated indices, a row longer than a piece
    let nv = 7;
    let vals: Vec<u64> = (0..nv).flat_map(|_| rng.below(m)).collect();
    let lens = [0usize, 1, 3, 0, 150, 2, 65, 64, 9];
    let mut indptr = vec![0usize];
    let mut indices = Vec::new();
    for &len in &lens {
        indices.extend((0..len).map(|_| (rng.next() % nv as u64) as usize));
        indptr.push(indices.len());
    }
    let got = algo::prod_rows(e, &vals, &indices, &indptr, false);
    let vm = algo::convert(e, &vals, nv, true);
    let gotm = algo::convert(e, &algo::prod_rows(e, &vm, &indices, &indptr, true), lens.len(), false);
    for r in 0..lens.len() {
        let mut acc = rem(&[1], m);
        for &v in &indices[indptr[r]..indptr[r + 1]] {
            acc = mulmod(&acc, row(&vals, v, words), m);
        }
        assert_eq!(row(&got, r, words), &acc[..], "prod_rows row {r}");
        assert_eq!(row(&gotm, r, words), &acc[..], "prod_rows (mont) row {r}");
    }
}

/// The portable engine run as eight lanes (lane-major groups): exercises the algorithms'
/// multi-lane paths (partial groups, per-lane selection, lane gathers) on any CPU, and checks
/// the suites themselves with `lanes() == 8`, as the IFMA engine runs them.
pub struct Wide {
    p: super::portable::Portable,
    n: usize,
    c: Constants,
}

const WIDE: usize = 8;

impl Wide {
    pub fn new(m: &Modulus) -> Self {
        let p = super::portable::Portable::new(m);
        let n = p.gw();
        let rep = |v: &[u64]| v.repeat(WIDE);
        let c = Constants { one: rep(p.one()), rr: rep(p.rr()), unit: rep(p.unit()), two_m: p.constants().two_m.clone() };
        Wide { p, n, c }
    }
}

impl Engine for Wide {
    fn lanes(&self) -> usize {
        WIDE
    }
    fn gw(&self) -> usize {
        WIDE * self.n
    }
    fn sw(&self) -> usize {
        self.n
    }
    fn words(&self) -> usize {
        self.p.words()
    }
    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64]) {
        let n = self.n;
        for l in 0..WIDE {
            self.p.mul(&mut out[l * n..(l + 1) * n], &a[l * n..], &b[l * n..]);
        }
    }
    fn sqr(&self, out: &mut [u64], a: &[u64]) {
        self.mul(out, a, a)
    }
    fn load_raw(&self, out: &mut [u64], src: &[u64], count: usize) {
        let (n, w) = (self.n, self.words());
        for l in 0..WIDE {
            self.p.load_raw(&mut out[l * n..(l + 1) * n], &src[(l * w).min(src.len())..], (l < count) as usize);
        }
    }
    fn store_raw(&self, dst: &mut [u64], src: &[u64], count: usize) {
        let (n, w) = (self.n, self.words());
        for l in 0..count.min(WIDE) {
            self.p.store_raw(&mut dst[l * w..], &src[l * n..], 1);
        }
    }
    fn mw(&self) -> usize {
        self.n
    }
    fn load_mont(&self, out: &mut [u64], src: &[u64], count: usize) {
        let n = self.n;
        for l in 0..WIDE {
            self.p.load_mont(&mut out[l * n..(l + 1) * n], &src[(l * n).min(src.len())..], (l < count) as usize);
        }
    }
    fn store_mont(&self, dst: &mut [u64], src: &[u64], count: usize) {
        let n = self.n;
        for l in 0..count.min(WIDE) {
            self.p.store_mont(&mut dst[l * n..], &src[l * n..], 1);
        }
    }
    fn mont_ok(&self, row: &[u64]) -> bool {
        self.p.mont_ok(row)
    }
    fn constants(&self) -> &Constants {
        &self.c
    }
    fn select(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]) {
        let (n, gw) = (self.n, self.gw());
        for l in 0..WIDE {
            let lane: Vec<u64> = (0..entries).flat_map(|e| table[e * gw + l * n..e * gw + (l + 1) * n].to_vec()).collect();
            self.p.select(&mut out[l * n..(l + 1) * n], &lane, entries, &idx[l..l + 1]);
        }
    }
    fn select_shared(&self, out: &mut [u64], table: &[u64], entries: usize, idx: &[u32]) {
        let n = self.n;
        for l in 0..WIDE {
            self.p.select(&mut out[l * n..(l + 1) * n], table, entries, &idx[l..l + 1]);
        }
    }
    fn extract(&self, src: &[u64], lane: usize, dst: &mut [u64]) {
        dst[..self.n].copy_from_slice(&src[lane * self.n..(lane + 1) * self.n]);
    }
    fn broadcast(&self, src: &[u64], out: &mut [u64]) {
        for l in 0..WIDE {
            self.insert(src, l, out);
        }
    }
    fn insert(&self, src: &[u64], lane: usize, dst: &mut [u64]) {
        dst[lane * self.n..(lane + 1) * self.n].copy_from_slice(&src[..self.n]);
    }
}

/// A modulus of `bits` bits and its facts.
pub fn modulus(rng: &mut Rng, bits: usize) -> (Vec<u64>, Modulus) {
    let m = rng.modulus(bits);
    let md = Modulus::new(&m).unwrap();
    (m, md)
}

mod tests {
    use super::*;

    /// The suites with eight lanes (the layout the IFMA engine has), on any CPU.
    #[test]
    fn eight_lane_suites() {
        let mut rng = Rng::new(8);
        for bits in [2, 64, 65, 300] {
            let (m, md) = modulus(&mut rng, bits);
            let e = Wide::new(&md);
            engine_suite(&e, &m, &mut rng, true);
            algo_suite(&e, &m, &mut rng);
        }
    }

    /// The oracle itself against u128 arithmetic on one-word moduli.
    #[test]
    fn oracle_matches_u128() {
        let mut rng = Rng::new(7);
        for bits in [2, 3, 17, 63, 64] {
            let m = rng.modulus(bits);
            for _ in 0..50 {
                let (a, b) = (rng.below(&m), rng.below(&m));
                let want = (a[0] as u128 * b[0] as u128 % m[0] as u128) as u64;
                assert_eq!(mulmod(&a, &b, &m), vec![want]);
                let e = rng.next() >> (rng.next() % 64);
                let mut w = 1u128;
                for bit in (0..64).rev() {
                    w = w * w % m[0] as u128;
                    if (e >> bit) & 1 == 1 {
                        w = w * a[0] as u128 % m[0] as u128;
                    }
                }
                assert_eq!(powmod(&a, &[e], &m), vec![w as u64]);
            }
        }
        // two-word moduli: (a * b) mod m with a, b < 2^64 agrees with u128 when m > a * b
        let m = vec![u64::MAX, 1];
        let x = mulmod(&[u32::MAX as u64 + 5], &[u32::MAX as u64 + 9], &m);
        let want = (u32::MAX as u128 + 5) * (u32::MAX as u128 + 9);
        assert_eq!(x, vec![want as u64, (want >> 64) as u64]);
    }
}
