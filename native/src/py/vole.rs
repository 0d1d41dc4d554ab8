//! Bindings of the silent VOLE's local kernels (`crate::vole`): GGM trees, leaf values and the
//! LPN encoder. Sans I/O; roots and seeds come from the caller; GIL released while they run.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use crate::aes::BLOCK;
use crate::modq::Modulus;
use crate::vole;

fn block_rows<'py>(py: Python<'py>, data: Vec<u8>) -> Bound<'py, PyArray2<u8>> {
    let m = data.len() / BLOCK;
    numpy::ndarray::Array2::from_shape_vec((m, BLOCK), data).expect("shape").into_pyarray(py)
}

/// ``(leaves (t 2^depth, 16) uint8, sums (t depth 2, 16) uint8)``: the expanding party's GGM
/// trees from ``roots`` (t, 16) (sums: tree, level, side).
#[pyfunction]
fn vole_ggm_expand<'py>(py: Python<'py>, roots: PyReadonlyArray2<'py, u8>, depth: usize
) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
    if roots.shape()[1] != BLOCK || !(1..=20).contains(&depth) {
        return Err(PyValueError::new_err(format!("vole_ggm_expand: roots (t, 16) and depth 1..20, got {:?} and {depth}",
                                                 roots.shape())));
    }
    check_size(roots.shape()[0] << depth << 1, "the GGM leaves")?;
    let r = contiguous(&roots, "roots")?;
    let (leaves, sums) = py.detach(|| vole::ggm_expand(r, depth));
    Ok((block_rows(py, leaves), block_rows(py, sums)))
}

/// The puncturing party's leaves (t 2^depth, 16), leaf ``points[g]`` of tree g zero, from the
/// level sums of side not-p_l, ``chosen`` (t depth, 16).
#[pyfunction]
fn vole_ggm_punctured<'py>(py: Python<'py>, chosen: PyReadonlyArray2<'py, u8>, points: PyReadonlyArray1<'py, u64>,
                           depth: usize) -> PyResult<Bound<'py, PyArray2<u8>>> {
    if chosen.shape()[1] != BLOCK || !(1..=20).contains(&depth) {
        return Err(PyValueError::new_err("vole_ggm_punctured: chosen sums (t depth, 16) and depth 1..20"));
    }
    check_size(points.len() << depth << 1, "the GGM leaves")?;
    let (c, p) = (contiguous(&chosen, "chosen")?, contiguous(&points, "points")?);
    let leaves = py.detach(|| vole::ggm_punctured(c, p, depth)).map_err(PyValueError::new_err)?;
    Ok(block_rows(py, leaves))
}

/// ``(values (keys, m) uint64, sums (keys, t) uint64)``: every leaf's field element mod ``q``
/// per key and each tree's sum; leaf ``skip[g]`` of tree g (if given) counts as zero.
#[pyfunction]
#[pyo3(signature = (leaves, q, keys, tree, skip=None))]
fn vole_leaf_values<'py>(py: Python<'py>, leaves: PyReadonlyArray2<'py, u8>, q: u64, keys: usize, tree: usize,
                         skip: Option<PyReadonlyArray1<'py, u64>>
) -> PyResult<(Bound<'py, PyArray2<u64>>, Bound<'py, PyArray2<u64>>)> {
    let m = leaves.shape()[0];
    if leaves.shape()[1] != BLOCK || tree == 0 || m % tree != 0 || keys == 0 {
        return Err(PyValueError::new_err(format!("vole_leaf_values: leaves (m, 16) in trees of {tree}, keys >= 1")));
    }
    let t = m / tree;
    check_size(keys * m, "the leaf values")?;
    let md = Modulus::new(q).map_err(PyValueError::new_err)?;
    let l = contiguous(&leaves, "leaves")?;
    let s = match &skip {
        Some(a) => {
            if a.len() != t {
                return Err(PyValueError::new_err(format!("vole_leaf_values: {} skipped leaves for {t} trees", a.len())));
            }
            let points = contiguous(a, "skip")?;
            if let Some(p) = points.iter().find(|&&p| p >= tree as u64) {
                return Err(PyValueError::new_err(format!("vole_leaf_values: skipped leaf {p} outside a tree of {tree}")));
            }
            Some(points)
        }
        None => None,
    };
    let (values, sums) = py.detach(|| vole::leaf_values(l, &md, keys, tree, s));
    Ok((numpy::ndarray::Array2::from_shape_vec((keys, m), values).expect("shape").into_pyarray(py),
        numpy::ndarray::Array2::from_shape_vec((keys, t), sums).expect("shape").into_pyarray(py)))
}

/// ``noise + A base`` row by row, mod ``q``: base (rows, k), noise (rows, n), A the public
/// 10-sparse code of ``seed`` (16 bytes); returns a new (rows, n) array, or with ``check`` (16
/// bytes) the pair (it, every row's weighted sums under that seed, as ``vole_weighted_sums``).
#[pyfunction]
#[pyo3(signature = (base, noise, q, seed, check=None))]
fn vole_lpn<'py>(py: Python<'py>, base: PyReadonlyArray2<'py, u64>, noise: PyReadonlyArray2<'py, u64>, q: u64,
                 seed: &[u8], check: Option<&[u8]>) -> PyResult<Bound<'py, PyAny>> {
    let seed: [u8; BLOCK] = seed.try_into()
        .map_err(|_| PyValueError::new_err(format!("vole_lpn: the code's seed is 16 bytes, got {}", seed.len())))?;
    let check: Option<[u8; BLOCK]> = check.map(|c| c.try_into()).transpose()
        .map_err(|_| PyValueError::new_err("vole_lpn: the check's seed is 16 bytes"))?;
    let (rows, k, n) = (base.shape()[0], base.shape()[1], noise.shape()[1]);
    if noise.shape()[0] != rows {
        return Err(PyValueError::new_err(format!("vole_lpn: {rows} base rows, {} noise rows", noise.shape()[0])));
    }
    let md = Modulus::new(q).map_err(PyValueError::new_err)?;
    let b = contiguous(&base, "base")?;
    let mut out = contiguous(&noise, "noise")?.to_vec();
    let sums = py.detach(|| vole::lpn_encode_checked(&seed, &md, b, k, &mut out, n, check.as_ref()))
        .map_err(PyValueError::new_err)?;
    let out = numpy::ndarray::Array2::from_shape_vec((rows, n), out).expect("shape").into_pyarray(py);
    Ok(match check {
        None => out.into_any(),
        Some(_) => (out, sums.into_pyarray(py)).into_pyobject(py)?.into_any(),
    })
}

/// ``sum_x c_x rows[r, x] mod q`` per row, the weights from AES-CTR under ``seed`` (16 bytes):
/// a random linear combination for a check.
#[pyfunction]
fn vole_weighted_sums<'py>(py: Python<'py>, rows: PyReadonlyArray2<'py, u64>, q: u64, seed: &[u8]
) -> PyResult<Bound<'py, numpy::PyArray1<u64>>> {
    let seed: [u8; BLOCK] = seed.try_into()
        .map_err(|_| PyValueError::new_err(format!("vole_weighted_sums: the seed is 16 bytes, got {}", seed.len())))?;
    let n = rows.shape()[1];
    let md = Modulus::new(q).map_err(PyValueError::new_err)?;
    let r = contiguous(&rows, "rows")?;
    let out = py.detach(|| vole::weighted_sums(&seed, &md, r, n)).map_err(PyValueError::new_err)?;
    Ok(out.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vole_ggm_expand, m)?)?;
    m.add_function(wrap_pyfunction!(vole_ggm_punctured, m)?)?;
    m.add_function(wrap_pyfunction!(vole_leaf_values, m)?)?;
    m.add_function(wrap_pyfunction!(vole_lpn, m)?)?;
    m.add_function(wrap_pyfunction!(vole_weighted_sums, m)?)?;
    Ok(())
}
