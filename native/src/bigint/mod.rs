//! Batch Montgomery arithmetic, free of Python: the engine interface and its two engines
//! (AVX-512 IFMA on x86-64, portable 64-bit everywhere), the batch algorithms written once
//! against it, and the checks on values and index arrays that the bindings run before them.

pub mod algo;
pub mod check;
pub mod engine;
#[cfg(target_arch = "x86_64")]
pub mod ifma;
pub mod portable;

#[cfg(test)]
mod testkit;

/// True when the 8-lane IFMA engine can run here: an x86-64 CPU (and OS) with AVX-512F and
/// AVX-512 IFMA. Always false on other architectures, where the engine is not compiled.
pub fn ifma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        ifma::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
