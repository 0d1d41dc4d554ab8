//! Bindings of three-party replicated sharing (`crate::rss`, `crate::prf`): the bit-sliced gate
//! layers `rss_*`, run in place on a party's share arrays, and the VAES `KeyStream`.

use numpy::{IntoPyArray, PyReadonlyArray2, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use crate::{prf, rss};

fn rss_state<'a>(x: &'a mut PyReadwriteArray2<'_, u64>, a: &'a mut PyReadwriteArray2<'_, u64>) -> PyResult<(&'a mut [u64], &'a mut [u64], usize, usize)> {
    let (sx, sa) = (x.shape().to_vec(), a.shape().to_vec());
    if sx != sa {
        return Err(PyValueError::new_err(format!("share arrays differ in shape: {sx:?} and {sa:?}")));
    }
    let xs = x.as_slice_mut().map_err(|_| PyValueError::new_err("x must be a C-contiguous uint64 array"))?;
    let as_ = a.as_slice_mut().map_err(|_| PyValueError::new_err("a must be a C-contiguous uint64 array"))?;
    Ok((xs, as_, sx[0], sx[1]))
}

fn gate_rows<'a>(g: &'a PyReadonlyArray2<'_, i32>, width: usize, slots: usize, skip: usize, optional: &[bool]) -> PyResult<&'a [i32]> {
    if g.shape()[1] != width {
        return Err(PyValueError::new_err(format!("gate rows must have {width} columns, got {}", g.shape()[1])));
    }
    let rows = contiguous(g, "gates")?;
    rss::check_slots(rows, width, skip, slots, optional).map_err(PyValueError::new_err)?;
    Ok(rows)
}

/// Local gates of one layer (rows [op, a, b, c, out]) on a party's share arrays, in place.
#[pyfunction]
fn rss_local(py: Python<'_>, mut x: PyReadwriteArray2<'_, u64>, mut a: PyReadwriteArray2<'_, u64>, gates: PyReadonlyArray2<'_, i32>) -> PyResult<()> {
    let (xs, as_, slots, w) = rss_state(&mut x, &mut a)?;
    let rows = gate_rows(&gates, 5, slots, 1, &[false, true, true, true, false])?;
    // inputs may be -1 only where the gate has no such input
    rss::check_local_inputs(rows).map_err(PyValueError::new_err)?;
    // SAFETY: `rss_state` gave two arrays of `slots` rows of `w` words, and every slot in the
    // rows was checked against `slots` (`gate_rows`), the inputs each gate reads just above.
    py.detach(|| unsafe { rss::local(xs, as_, w, rows) }).map_err(PyValueError::new_err)
}

/// First half of an AND layer with the zero sharing as two keystreams (n, words):
/// `out[g] = m1[g] ^ m2[g] ^ (x[a] & x[b]) ^ (a[a] & a[b])`.
#[pyfunction]
fn rss_and_masked(py: Python<'_>, mut x: PyReadwriteArray2<'_, u64>, mut a: PyReadwriteArray2<'_, u64>, ands: PyReadonlyArray2<'_, i32>,
                  mut out: PyReadwriteArray2<'_, u64>, m1: PyReadonlyArray2<'_, u64>, m2: PyReadonlyArray2<'_, u64>) -> PyResult<()> {
    let (xs, as_, slots, w) = rss_state(&mut x, &mut a)?;
    let rows = gate_rows(&ands, 3, slots, 0, &[false, false, false])?;
    let n = rows.len() / 3;
    if out.shape() != [n, w] || m1.shape() != [n, w] || m2.shape() != [n, w] {
        return Err(PyValueError::new_err(format!(
            "output and masks must have shape ({n}, {w}), got {:?}, {:?}, {:?}", out.shape(), m1.shape(), m2.shape())));
    }
    let (k1, k2) = (contiguous(&m1, "m1")?, contiguous(&m2, "m2")?);
    let o = out.as_slice_mut().map_err(|_| PyValueError::new_err("output must be C-contiguous"))?;
    // SAFETY: two arrays of `slots` rows of `w` words (`rss_state`), every slot in the AND rows
    // checked against `slots` (`gate_rows`).
    py.detach(|| unsafe { rss::and_local_masked(xs, as_, w, rows, o, k1, k2) });
    Ok(())
}

/// Second half of an AND layer: output share (r_prev ^ r, r) for each gate row.
#[pyfunction]
fn rss_and_finish(py: Python<'_>, mut x: PyReadwriteArray2<'_, u64>, mut a: PyReadwriteArray2<'_, u64>, ands: PyReadonlyArray2<'_, i32>,
                  r: PyReadonlyArray2<'_, u64>, r_prev: PyReadonlyArray2<'_, u64>) -> PyResult<()> {
    let (xs, as_, slots, w) = rss_state(&mut x, &mut a)?;
    let rows = gate_rows(&ands, 3, slots, 0, &[false, false, false])?;
    let n = rows.len() / 3;
    if r.shape() != [n, w] || r_prev.shape() != [n, w] {
        return Err(PyValueError::new_err(format!("messages must have shape ({n}, {w}), got {:?} and {:?}", r.shape(), r_prev.shape())));
    }
    let (rr, rp) = (contiguous(&r, "r")?, contiguous(&r_prev, "r_prev")?);
    py.detach(|| rss::and_finish(xs, as_, w, rows, rr, rp));
    Ok(())
}

/// AES-128-CTR keystream (zero IV, big-endian block counter) computed with VAES (and AVX2): the
/// same stream as the `cryptography` library's; consecutive calls continue it.
#[pyclass(module = "shaper._native")]
struct KeyStream {
    inner: prf::KeyStream,
}

#[pymethods]
impl KeyStream {
    #[new]
    fn new(key: &[u8]) -> PyResult<Self> {
        let k: [u8; 16] = key.try_into().map_err(|_| PyValueError::new_err(format!("AES-128 key must be 16 bytes, got {}", key.len())))?;
        let inner = prf::KeyStream::new(&k).ok_or_else(|| PyRuntimeError::new_err("this CPU lacks VAES/AVX2"))?;
        Ok(KeyStream { inner })
    }

    /// True when this CPU can run the VAES keystream.
    #[staticmethod]
    fn available() -> bool {
        prf::available()
    }

    /// The next `count` words of the stream.
    fn words<'py>(&mut self, py: Python<'py>, count: usize) -> PyResult<Bound<'py, numpy::PyArray1<u64>>> {
        check_size(count, "the keystream")?;
        let mut out = vec![0u64; count];
        let inner = &mut self.inner;
        py.detach(|| inner.fill(&mut out));
        Ok(out.into_pyarray(py))
    }
}

/// First half of an AND layer with the zero sharing drawn from two keystreams on the fly:
/// `out[g] = own[g] ^ prev[g] ^ (x[a] & x[b]) ^ (a[a] & a[b])` for rows [a, b, out].
#[pyfunction]
fn rss_and_prf(py: Python<'_>, mut x: PyReadwriteArray2<'_, u64>, mut a: PyReadwriteArray2<'_, u64>, ands: PyReadonlyArray2<'_, i32>,
               mut out: PyReadwriteArray2<'_, u64>, mut own: PyRefMut<'_, KeyStream>, mut prev: PyRefMut<'_, KeyStream>) -> PyResult<()> {
    let (xs, as_, slots, w) = rss_state(&mut x, &mut a)?;
    let rows = gate_rows(&ands, 3, slots, 0, &[false, false, false])?;
    let n = rows.len() / 3;
    if out.shape() != [n, w] {
        return Err(PyValueError::new_err(format!("output must have shape ({n}, {w}), got {:?}", out.shape())));
    }
    let o = out.as_slice_mut().map_err(|_| PyValueError::new_err("output must be C-contiguous"))?;
    let (s1, s2) = (&mut own.inner, &mut prev.inner);
    // SAFETY: as in `rss_and_masked`.
    py.detach(|| unsafe { rss::and_prf(xs, as_, w, rows, o, s1, s2) });
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rss_local, m)?)?;
    m.add_function(wrap_pyfunction!(rss_and_masked, m)?)?;
    m.add_function(wrap_pyfunction!(rss_and_prf, m)?)?;
    m.add_class::<KeyStream>()?;
    m.add_function(wrap_pyfunction!(rss_and_finish, m)?)?;
    Ok(())
}
