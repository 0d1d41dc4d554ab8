//! The Python bindings, one file per area, each with a `register` that adds its names to the
//! flat module `shaper._native`. Bindings check arguments and convert arrays; the arithmetic
//! lives in the Python-free modules (`bigint`, `rss`, `prf`, `psi`, `ot`, `modq`, `rns`, `cyclo`).

pub mod bigint;
pub mod boundary;
pub mod cyclo;
pub mod modq;
pub mod okvs;
pub mod ot;
pub mod pool;
pub mod rns;
pub mod psi;
pub mod rss;
pub mod vole;
pub mod z2k;
