//! Bindings of the double-CRT transform over Z_q[X]/Phi_m (`crate::cyclo`): `CycloContext`.
//! Arrays are `uint64`, C-contiguous, shape `(len(limbs), phi)` (the contract of
//! `shaper.kernels.cyclo`); shapes are checked here, reduction and limb indices in the kernels,
//! and every call releases the GIL (one row on this thread, several on the native pool).

use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use super::pool::run;
use crate::cyclo;

fn value_err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

/// Tables of the transform for odd m and primes q = 1 mod 2 N m (N the Bluestein NTT length).
#[pyclass(frozen, module = "shaper._native")]
struct CycloContext {
    inner: cyclo::CycloContext,
}

impl CycloContext {
    fn transform<'py>(&self, py: Python<'py>, a: PyReadonlyArray2<'py, u64>, limbs: Vec<usize>, inverse: bool)
        -> PyResult<Bound<'py, PyArray2<u64>>> {
        let what = if inverse { "values" } else { "coeffs" };
        let phi = self.inner.phi;
        if a.shape() != [limbs.len(), phi] {
            return Err(PyValueError::new_err(format!(
                "{what} must have shape ({}, {phi}) for {} limbs, got {:?}", limbs.len(), limbs.len(), a.shape())));
        }
        let x = contiguous(&a, what)?;
        check_size(x.len(), "the transform's result")?;
        let ctx = &self.inner;
        let f = || if inverse { ctx.inverse(x, &limbs) } else { ctx.forward(x, &limbs) };
        // one row runs on this thread (the kernel does not touch rayon): no pool round trip
        let out = if limbs.len() > 1 { run(py, f)? } else { py.detach(f) };
        out.map_err(value_err)?.into_pyarray(py).reshape([limbs.len(), phi])
    }
}

#[pymethods]
impl CycloContext {
    /// Checks m (odd, 3..=2^16 + 1) and the primes (distinct, prime, < 2^62, 1 mod 2 N m);
    /// builds the tables on the native pool with the GIL released.
    #[new]
    fn new(py: Python<'_>, m: usize, primes: Vec<u64>) -> PyResult<Self> {
        let inner = run(py, || cyclo::CycloContext::new(m, &primes))?.map_err(value_err)?;
        Ok(CycloContext { inner })
    }

    #[getter]
    fn m(&self) -> usize {
        self.inner.m
    }

    #[getter]
    fn phi(&self) -> usize {
        self.inner.phi
    }

    /// The Bluestein NTT length N (a power of two >= 2m - 2, at least 8).
    #[getter]
    fn ntt_size(&self) -> usize {
        self.inner.n
    }

    #[getter]
    fn primes(&self) -> Vec<u64> {
        self.inner.primes.iter().map(|t| t.p.q).collect()
    }

    /// zeta of each prime: its smallest primitive m-th root of unity.
    #[getter]
    fn roots(&self) -> Vec<u64> {
        self.inner.roots()
    }

    /// (len(limbs), phi) coefficients -> values at zeta^u, u the units of Z_m increasing.
    fn forward<'py>(&self, py: Python<'py>, coeffs: PyReadonlyArray2<'py, u64>, limbs: Vec<usize>)
        -> PyResult<Bound<'py, PyArray2<u64>>> {
        self.transform(py, coeffs, limbs, false)
    }

    /// (len(limbs), phi) values -> coefficients (degree < phi): the inverse of `forward`.
    fn inverse<'py>(&self, py: Python<'py>, values: PyReadonlyArray2<'py, u64>, limbs: Vec<usize>)
        -> PyResult<Bound<'py, PyArray2<u64>>> {
        self.transform(py, values, limbs, true)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CycloContext>()?;
    Ok(())
}
