//! Bindings of word-size modular arithmetic (`crate::modq`): element-wise and matrix products
//! modulo odd moduli below 2^62, for the n-party engine's prime-field and RNS shares.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use crate::modq;

/// ``a * b`` element-wise for (n, L) arrays, column c modulo ``moduli[c]`` (inputs reduced).
#[pyfunction]
fn mod_mul<'py>(py: Python<'py>, a: PyReadonlyArray2<'py, u64>, b: PyReadonlyArray2<'py, u64>,
                moduli: PyReadonlyArray1<'py, u64>) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let (shape, l) = (a.shape().to_vec(), moduli.len());
    if b.shape() != shape.as_slice() || shape[1] != l {
        return Err(PyValueError::new_err(format!(
            "mod_mul needs two (n, {l}) arrays, got {:?} and {:?}", shape, b.shape())));
    }
    let mods = modq::moduli(contiguous(&moduli, "moduli")?).map_err(PyValueError::new_err)?;
    let (xs, ys) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
    let mut out = vec![0u64; xs.len()];
    py.detach(|| modq::mul(xs, ys, &mods, &mut out)).map_err(PyValueError::new_err)?;
    Ok(numpy::ndarray::Array2::from_shape_vec((shape[0], shape[1]), out).expect("shape").into_pyarray(py))
}

/// ``a @ b`` modulo one odd modulus below 2^62 (inputs reduced).
#[pyfunction]
fn mod_matmul<'py>(py: Python<'py>, a: PyReadonlyArray2<'py, u64>, b: PyReadonlyArray2<'py, u64>,
                   modulus: u64) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let (m, k, k2, n) = (a.shape()[0], a.shape()[1], b.shape()[0], b.shape()[1]);
    if k != k2 {
        return Err(PyValueError::new_err(format!("mod_matmul: ({m}x{k}) @ ({k2}x{n}) do not fit")));
    }
    check_size(m * n, "mod_matmul's result")?;
    let md = modq::Modulus::new(modulus).map_err(PyValueError::new_err)?;
    let (xs, ys) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
    let mut out = vec![0u64; m * n];
    py.detach(|| modq::matmul(xs, ys, m, k, n, &md, &mut out)).map_err(PyValueError::new_err)?;
    Ok(numpy::ndarray::Array2::from_shape_vec((m, n), out).expect("shape").into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mod_mul, m)?)?;
    m.add_function(wrap_pyfunction!(mod_matmul, m)?)?;
    Ok(())
}
