//! Bindings of the double-CRT transform over Z_q[X]/Phi_m (`crate::cyclo`): `CycloContext`.
//! Arrays are `uint64`, C-contiguous, shape `(len(limbs), phi)` for the transforms and
//! `(..., len(limbs), phi)` for the batched arithmetic (the contract of `shaper.kernels.cyclo`);
//! shapes are checked here, reduction and limb indices in the kernels, and every call releases
//! the GIL (small work on this thread, larger on the native pool).

use std::mem::MaybeUninit;

use numpy::{IntoPyArray, PyArray2, PyArrayDyn, PyArrayMethods, PyReadonlyArray2, PyReadonlyArrayDyn,
            PyReadwriteArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use super::pool::{run, run_if};
use crate::cyclo;
use crate::cyclo::Pointwise;

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
        // the output is allocated here, on the calling thread, uninitialised (`cyclo::filled`)
        let fill = |o: &mut [MaybeUninit<u64>]| {
            let f = || if inverse { ctx.inverse_into(x, &limbs, o) } else { ctx.forward_into(x, &limbs, o) };
            // one row runs on this thread (the kernel does not touch rayon): no pool round trip
            let done = if limbs.len() > 1 { run(py, f)? } else { py.detach(f) };
            done.map_err(value_err)
        };
        // SAFETY: forward_into and inverse_into write every row when they return Ok
        let out = unsafe { cyclo::filled(x.len(), fill) }?;
        out.into_pyarray(py).reshape([limbs.len(), phi])
    }

    /// `shape` is `(..., len(limbs), phi)`.
    fn check_batch(&self, shape: &[usize], limbs: &[usize], what: &str) -> PyResult<()> {
        let (d, phi) = (shape.len(), self.inner.phi);
        if d < 2 || shape[d - 1] != phi || shape[d - 2] != limbs.len() {
            return Err(PyValueError::new_err(format!(
                "{what} must have shape (..., {}, {phi}) for {} limbs, got {shape:?}", limbs.len(), limbs.len())));
        }
        Ok(())
    }

    /// The shape of the result of operands with these shapes: each is `(..., L, phi)`, and they
    /// are equal or one of them is `(L, phi)` (broadcast over the other's leading axes).
    fn batch_shape(&self, operands: &[(&str, &[usize])], limbs: &[usize]) -> PyResult<Vec<usize>> {
        for (what, shape) in operands {
            self.check_batch(shape, limbs, what)?;
        }
        let full = operands.iter().map(|(_, s)| s.to_vec()).max_by_key(|s| s.len()).unwrap_or_default();
        for (what, shape) in operands {
            if shape.len() > 2 && *shape != full.as_slice() {
                return Err(PyValueError::new_err(format!(
                    "{what} has shape {shape:?}, but the batch is {full:?}: operands must have equal shapes or \
                     be (len(limbs), phi)")));
            }
        }
        Ok(full)
    }

    fn binary<'py>(&self, py: Python<'py>, op: Pointwise, a: PyReadonlyArrayDyn<'py, u64>,
                   b: PyReadonlyArrayDyn<'py, u64>, limbs: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        let shape = self.batch_shape(&[("a", a.shape()), ("b", b.shape())], &limbs)?;
        let (x, y) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
        let total: usize = shape.iter().product();
        check_size(total, "the result")?;
        let ctx = &self.inner;
        let fill = |o: &mut [MaybeUninit<u64>]| {
            run_if(py, cyclo::pooled(total), || ctx.pointwise_into(op, x, y, &limbs, o))?.map_err(value_err)
        };
        // SAFETY: pointwise_into writes every row when it returns Ok
        let out = unsafe { cyclo::filled(total, fill) }?;
        out.into_pyarray(py).reshape(shape)
    }
}

/// A writable borrow of an array argument: a read-only (or already borrowed) array is a
/// ValueError naming it, not a panic.
fn writable<'py>(a: &Bound<'py, PyArrayDyn<u64>>, what: &str) -> PyResult<PyReadwriteArrayDyn<'py, u64>> {
    a.try_readwrite().map_err(|e| PyValueError::new_err(format!("{what} must be a writable array ({e})")))
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

    /// a + b mod each row's prime; a, b of shape (..., L, phi), equal or one of them (L, phi).
    fn add<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                limbs: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        self.binary(py, Pointwise::Add, a, b, limbs)
    }

    /// a - b mod each row's prime (shapes as for `add`).
    fn sub<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                limbs: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        self.binary(py, Pointwise::Sub, a, b, limbs)
    }

    /// a b mod each row's prime (shapes as for `add`).
    fn mul<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                limbs: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        self.binary(py, Pointwise::Mul, a, b, limbs)
    }

    /// In place: acc += a b mod each row's prime; acc (..., L, phi), a and b acc's shape or
    /// (L, phi). acc is unchanged when the call fails.
    fn mul_acc<'py>(&self, py: Python<'py>, acc: &Bound<'py, PyArrayDyn<u64>>, a: PyReadonlyArrayDyn<'py, u64>,
                    b: PyReadonlyArrayDyn<'py, u64>, limbs: Vec<usize>) -> PyResult<()> {
        let mut acc = writable(acc, "acc")?;
        let shape = self.batch_shape(&[("acc", acc.shape()), ("a", a.shape()), ("b", b.shape())], &limbs)?;
        if acc.shape() != shape.as_slice() {
            return Err(PyValueError::new_err(format!(
                "acc has shape {:?}, but the batch is {shape:?}: acc must hold the whole result", acc.shape())));
        }
        let (x, y) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
        let aligned = (acc.data() as usize).is_multiple_of(std::mem::align_of::<u64>());
        if !acc.is_c_contiguous() || !aligned {
            return Err(PyValueError::new_err("acc must be an aligned C-contiguous array"));
        }
        let z = acc.as_slice_mut().map_err(|_| PyValueError::new_err("acc must be an aligned C-contiguous array"))?;
        let ctx = &self.inner;
        run_if(py, cyclo::pooled(z.len()), || ctx.mul_acc(z, x, y, &limbs))?.map_err(value_err)
    }

    /// Row l of a (..., L, phi) times scalars[l] (reduced mod primes[limbs[l]]).
    fn mul_scalar<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, scalars: Vec<u64>,
                       limbs: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        self.check_batch(a.shape(), &limbs, "a")?;
        let x = contiguous(&a, "a")?;
        let ctx = &self.inner;
        let fill = |o: &mut [MaybeUninit<u64>]| {
            run_if(py, cyclo::pooled(x.len()), || ctx.mul_scalar_into(x, &scalars, &limbs, o))?.map_err(value_err)
        };
        // SAFETY: mul_scalar_into writes every row when it returns Ok
        let out = unsafe { cyclo::filled(x.len(), fill) }?;
        out.into_pyarray(py).reshape(a.shape().to_vec())
    }

    /// ring.py's `Ring.divide_round`, fused: a (..., L, phi) values over `limbs` (distinct) ->
    /// (..., len(keep), phi), keep = limbs without `drop` (the contract's `divide_round`).
    fn divide_round<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, limbs: Vec<usize>,
                         drop: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        self.check_batch(a.shape(), &limbs, "a")?;
        let x = contiguous(&a, "a")?;
        let phi = self.inner.phi;
        let keep = limbs.iter().filter(|l| !drop.contains(l)).count();
        let items = x.len() / (limbs.len() * phi).max(1);
        check_size(items * keep * phi, "the result")?;
        let ctx = &self.inner;
        let fill =
            |o: &mut [MaybeUninit<u64>]| run(py, || ctx.divide_round_into(x, &limbs, &drop, o))?.map_err(value_err);
        // SAFETY: divide_round_into writes every kept row of every item when it returns Ok
        let out = unsafe { cyclo::filled(items * keep * phi, fill) }?;
        let mut shape = a.shape().to_vec();
        let d = shape.len();
        shape[d - 2] = keep;
        out.into_pyarray(py).reshape(shape)
    }

    /// ring.py's `Ring.digits`, fused: a (len(limbs), phi) values -> (len(groups), len(target),
    /// phi), the key-switching digit of each group over the target limbs (the contract's
    /// `digits`).
    fn digits<'py>(&self, py: Python<'py>, a: PyReadonlyArray2<'py, u64>, limbs: Vec<usize>, groups: Vec<Vec<usize>>,
                   target: Vec<usize>) -> PyResult<Bound<'py, PyArrayDyn<u64>>> {
        let phi = self.inner.phi;
        if a.shape() != [limbs.len(), phi] {
            return Err(PyValueError::new_err(format!(
                "a must have shape ({}, {phi}) for {} limbs, got {:?}", limbs.len(), limbs.len(), a.shape())));
        }
        let x = contiguous(&a, "a")?;
        let words = groups.len() * target.len() * phi;
        check_size(words, "the digits")?;
        let ctx = &self.inner;
        let fill = |o: &mut [MaybeUninit<u64>]| {
            run(py, || ctx.digits_into(x, &limbs, &groups, &target, o))?.map_err(value_err)
        };
        // SAFETY: digits_into writes every row of every group when it returns Ok
        let out = unsafe { cyclo::filled(words, fill) }?;
        out.into_pyarray(py).reshape(vec![groups.len(), target.len(), phi])
    }

    /// The centred fast basis extension: residues (len(src), phi) mod the primes of `src`
    /// (distinct) -> (len(dst), phi) mod the primes of `dst` (the contract's `extend`).
    fn extend<'py>(&self, py: Python<'py>, residues: PyReadonlyArray2<'py, u64>, src: Vec<usize>, dst: Vec<usize>)
        -> PyResult<Bound<'py, PyArray2<u64>>> {
        let phi = self.inner.phi;
        if residues.shape() != [src.len(), phi] {
            return Err(PyValueError::new_err(format!(
                "residues must have shape ({}, {phi}) for {} source limbs, got {:?}", src.len(), src.len(),
                residues.shape())));
        }
        let x = contiguous(&residues, "residues")?;
        check_size(dst.len() * phi, "the extension")?;
        let ctx = &self.inner;
        let words = (src.len() + dst.len()) * phi;
        let fill = |o: &mut [MaybeUninit<u64>]| {
            run_if(py, cyclo::pooled(words), || ctx.extend_into(x, &src, &dst, o))?.map_err(value_err)
        };
        // SAFETY: extend_into writes every destination row when it returns Ok
        let out = unsafe { cyclo::filled(dst.len() * phi, fill) }?;
        out.into_pyarray(py).reshape([dst.len(), phi])
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CycloContext>()?;
    Ok(())
}
