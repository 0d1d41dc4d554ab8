//! `shaper._native`: batch Montgomery arithmetic and three-party replicated-sharing gates for
//! `shaper` — this file only assembles the areas.
//!
//! Python-free arithmetic (no pyo3, no numpy; unit-tested with `cargo test`):
//! - [`bigint`]: the Montgomery engines (IFMA on x86-64, portable everywhere), batch algorithms
//!   and input checks;
//! - [`rss`]: bit-sliced boolean gates of replicated sharing;
//! - [`aes`]: AES-128, the one implementation (VAES where the CPU has it, else RustCrypto's),
//!   for [`prf`] and [`ot`];
//! - [`prf`]: the AES-128-CTR keystreams of the zero sharings;
//! - [`psi`]: Ristretto255 hash-to-group and blinding for ECDH private set intersection;
//! - [`modq`]: products modulo odd word-size moduli (prime-field and RNS shares);
//! - [`ot`]: oblivious transfer (base OT, IKNP extension, correlation-robust hash, COT/Gilboa);
//! - [`rns`]: RNS-CKKS polynomial kernels (NTT, element-wise ops, rescale, key switching);
//! - [`cyclo`]: the double-CRT transform of Z_q[X]/Phi_m for odd m (Bluestein on [`rns`]'s NTT);
//! - [`vole`]: the silent VOLE's GGM trees and LPN encoder;
//! - [`z2k`]: arithmetic mod 2^(64 L) and the wide correlated OT of the SPDZ2k domain;
//! - [`bucket`]: the local combining of WRK17's bucketed AND triples.
//!
//! Bindings (`py/`): `pool` (thread pool, GIL release), `boundary` (array checks), `bigint`
//! (`Context`, `CombTable`, `ifma_available`), `rss` (`rss_*`, `KeyStream`), `psi`
//! (`RistrettoKey`), `rns` (`RnsContext`, `ntt_primes`), `cyclo` (`CycloContext`) and `ot`
//! (`BaseOt*`, `Iknp*`, `ot_hash`, `ot_bits`, `cot_*`), each adding its names to the one flat
//! module.

// Every `unsafe fn` states its callers' obligations (`# Safety`), every unsafe block why it is
// sound (`// SAFETY:`), and unsafe operations inside an `unsafe fn` sit in explicit blocks
// (tests/test_native_hygiene.py checks the same without a Rust toolchain).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

use pyo3::prelude::*;

pub mod aes;
pub mod bigint;
pub mod bucket;
pub mod cyclo;
pub mod modq;
pub mod okvs;
pub mod ot;
pub mod prf;
pub mod psi;
mod py;
pub mod rns;
pub mod rss;
pub mod vole;
pub mod z2k;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::pool::register(m)?;
    py::bigint::register(m)?;
    py::rss::register(m)?;
    py::psi::register(m)?;
    py::ot::register(m)?;
    py::okvs::register(m)?;
    py::modq::register(m)?;
    py::rns::register(m)?;
    py::cyclo::register(m)?;
    py::vole::register(m)?;
    py::z2k::register(m)?;
    Ok(())
}
