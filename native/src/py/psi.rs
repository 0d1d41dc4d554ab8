//! Bindings of ECDH PSI (`crate::psi`): `RistrettoKey`, a party's secret blinding scalar, with
//! the two batch operations of the protocol. Both release the GIL and run on the native pool.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::boundary::contiguous;
use super::pool;
use crate::psi::{self, BlindingKey};

/// A secret blinding scalar k of Ristretto255.
#[pyclass(frozen, module = "shaper._native")]
struct RistrettoKey {
    key: BlindingKey,
}

#[pymethods]
impl RistrettoKey {
    /// From 64 uniform bytes (``os.urandom(64)``), reduced mod the group order.
    #[new]
    fn new(wide: &[u8]) -> PyResult<Self> {
        let bytes: &[u8; 64] = wide.try_into().map_err(|_| PyValueError::new_err(format!(
            "a blinding key needs 64 random bytes, got {}", wide.len())))?;
        Ok(Self { key: BlindingKey::from_wide(bytes).map_err(PyValueError::new_err)? })
    }

    /// The key saved by :meth:`to_bytes` (a checkpoint).
    #[staticmethod]
    fn from_bytes(raw: &[u8]) -> PyResult<Self> {
        let bytes: &[u8; 32] = raw.try_into().map_err(|_| PyValueError::new_err(format!(
            "a saved blinding key has 32 bytes, got {}", raw.len())))?;
        Ok(Self { key: BlindingKey::from_canonical(bytes).map_err(PyValueError::new_err)? })
    }

    /// The 32-byte canonical scalar (secret: store it only with mode 0600).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.key.to_bytes())
    }

    /// ``k * H(item)`` for the items ``data[offsets[i]:offsets[i+1]]`` (``data``: a uint8 array,
    /// e.g. a zero-copy view of bytes or of an Arrow buffer), 32 bytes each; with
    /// ``order`` (item positions), for the items ``order[0], order[1], ...`` in that order.
    #[pyo3(signature = (data, offsets, order=None))]
    fn hash_blind<'py>(&self, py: Python<'py>, data: PyReadonlyArray1<'_, u8>, offsets: PyReadonlyArray1<'_, u64>,
                       order: Option<PyReadonlyArray1<'_, i64>>) -> PyResult<Bound<'py, PyBytes>> {
        let data = contiguous(&data, "data")?;
        let offs = positions(&offsets, "offsets")?;
        let order = match order {
            Some(o) => Some(contiguous(&o, "order")?.iter().map(|&i| usize::try_from(i)
                .map_err(|_| PyValueError::new_err(format!("item position {i} is negative")))).collect::<PyResult<Vec<usize>>>()?),
            None => None,
        };
        let out = pool::run(py, || psi::hash_blind(&self.key, data, &offs, order.as_deref()))?.map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }

    /// ``k * P`` for each 32-byte point encoding in ``points``; a ValueError names the first
    /// invalid encoding.
    fn blind<'py>(&self, py: Python<'py>, points: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let out = pool::run(py, || psi::blind(&self.key, points))?.map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }
}

/// The first ``width`` bytes of SHA-256(``prefix`` || item) for every packed item (``width`` bytes
/// each, one string).
#[pyfunction]
fn item_digests<'py>(py: Python<'py>, prefix: &[u8], data: PyReadonlyArray1<'_, u8>, offsets: PyReadonlyArray1<'_, u64>,
                     width: usize) -> PyResult<Bound<'py, PyBytes>> {
    let data = contiguous(&data, "data")?;
    let offs = positions(&offsets, "offsets")?;
    let out = pool::run(py, || psi::digests(prefix, data, &offs, width))?.map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// The permutation (int64) of ``rows`` (item positions, int64) that sorts their items' bytes
/// (byte-wise, a shorter prefix first).
#[pyfunction]
fn item_sort<'py>(py: Python<'py>, data: PyReadonlyArray1<'_, u8>, offsets: PyReadonlyArray1<'_, u64>,
                  rows: PyReadonlyArray1<'_, i64>) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let data = contiguous(&data, "data")?;
    let offs = positions(&offsets, "offsets")?;
    let rows: Vec<usize> = contiguous(&rows, "rows")?.iter().map(|&r| usize::try_from(r)
        .map_err(|_| PyValueError::new_err(format!("row {r} is negative")))).collect::<PyResult<_>>()?;
    let order = pool::run(py, || psi::sort_items(data, &offs, &rows))?.map_err(PyValueError::new_err)?;
    Ok(PyArray1::from_iter(py, order.into_iter().map(|k| k as i64)))
}

fn positions(offsets: &PyReadonlyArray1<'_, u64>, name: &str) -> PyResult<Vec<usize>> {
    Ok(contiguous(offsets, name)?.iter().map(|&o| o as usize).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RistrettoKey>()?;
    m.add_function(wrap_pyfunction!(item_sort, m)?)?;
    m.add_function(wrap_pyfunction!(item_digests, m)?)
}
