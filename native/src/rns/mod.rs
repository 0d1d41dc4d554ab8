//! RNS polynomial kernels for RNS-CKKS: rows of Z_q[X]/(X^n + 1) for word-size NTT primes q,
//! the layout and contract of `shaper.kernels.rns` (whose module docstring is the
//! specification, shared bit for bit with the numpy reference).
//!
//! - [`prime`]: reductions (Shoup, Barrett, 128-bit), Miller–Rabin, SEAL's prime choice,
//!   minimal roots of unity;
//! - [`ntt`]: Harvey's lazy negacyclic NTT (portable and AVX2);
//! - [`ops`]: whole-array kernels on [`RnsContext`] — element-wise arithmetic, tensor product,
//!   automorphisms, divide-and-round by the last prime, key-switching decomposition and the
//!   hoisted key switch.
//!
//! Arrays are flat row-major `(..., rows, n)` slices; `mods[i]` is the context prime of row
//! `i` of the last-but-one axis. Every kernel checks its inputs are reduced and parallelises
//! over rows with rayon (the caller decides the pool).

pub mod ntt;
pub mod ops;
pub mod prime;

use ntt::NttTable;
use prime::{is_prime, minimal_root, Prime};

/// Primes, roots and NTT tables of one ring degree.
pub struct RnsContext {
    pub n: usize,
    pub tables: Vec<NttTable>,
}

impl RnsContext {
    /// Checks n (a power of two, 8..2^17), each prime (< 2^62, prime, 1 mod 2n, distinct) and
    /// each given root (a primitive 2n-th root: psi^n = -1); absent roots are the smallest.
    pub fn new(n: usize, primes: &[u64], roots: Option<&[u64]>) -> Result<RnsContext, String> {
        if !n.is_power_of_two() || !(8..=1 << 17).contains(&n) {
            return Err(format!("n must be a power of two from 8 to 2^17, got {n}"));
        }
        if primes.is_empty() {
            return Err("an RNS context needs at least one prime".into());
        }
        if let Some(r) = roots {
            if r.len() != primes.len() {
                return Err(format!("{} roots given for {} primes", r.len(), primes.len()));
            }
        }
        let two_n = 2 * n as u64;
        let mut tables = Vec::with_capacity(primes.len());
        for (i, &q) in primes.iter().enumerate() {
            if q >= 1 << 62 {
                return Err(format!("prime {q} (index {i}) is not below 2^62"));
            }
            if q % two_n != 1 {
                return Err(format!("prime {q} (index {i}) is not 1 mod 2n = {two_n}"));
            }
            if !is_prime(q) {
                return Err(format!("{q} (index {i}) is not prime"));
            }
            if primes[..i].contains(&q) {
                return Err(format!("prime {q} (index {i}) appears twice"));
            }
            let p = Prime::new(q);
            let psi = match roots {
                Some(r) => {
                    let psi = r[i];
                    if psi >= q || p.pow(psi, n as u64) != q - 1 {
                        return Err(format!("root {psi} is not a primitive {two_n}-th root of unity mod prime {q}"));
                    }
                    psi
                }
                None => minimal_root(&p, n as u64)?,
            };
            tables.push(NttTable::new(p, n, psi));
        }
        Ok(RnsContext { n, tables })
    }

    pub fn primes(&self) -> Vec<u64> {
        self.tables.iter().map(|t| t.p.q).collect()
    }

    pub fn roots(&self) -> Vec<u64> {
        self.tables.iter().map(|t| t.psi).collect()
    }
}
