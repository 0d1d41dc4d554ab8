//! Bindings of the RNS-CKKS polynomial kernels (`crate::rns`): `ntt_primes` and `RnsContext`.
//! Arrays are `uint64`, C-contiguous, shape `(..., len(mods), n)` (the contract of
//! `shaper.kernels.rns`); shapes are checked here, reduction in the kernels, and every kernel
//! runs on the native pool with the GIL released.

use numpy::{IntoPyArray, PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArrayDyn,
            PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use super::pool::run;
use crate::rns;

fn value_err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

/// SEAL's prime choice: the `count` largest primes of exactly `bits` bits that are 1 mod 2n,
/// descending, skipping `exclude`.
#[pyfunction]
#[pyo3(signature = (n, bits, count, exclude = Vec::new()))]
fn ntt_primes(n: u64, bits: u32, count: usize, exclude: Vec<u64>) -> PyResult<Vec<u64>> {
    rns::prime::ntt_primes(n, bits, count, &exclude).map_err(value_err)
}

/// NTT primes and tables for ring degree n; the kernels of `shaper.kernels.rns`.
#[pyclass(frozen, module = "shaper._native")]
struct RnsContext {
    inner: rns::RnsContext,
}

/// A writable borrow of an array argument: a read-only (or already borrowed) array is a
/// ValueError, not a panic.
fn writable<'py>(a: &Bound<'py, PyArrayDyn<u64>>, what: &str) -> PyResult<PyReadwriteArrayDyn<'py, u64>> {
    a.try_readwrite().map_err(|e| PyValueError::new_err(format!("{what} must be a writable array ({e})")))
}

type Out<'py> = PyResult<Bound<'py, PyArrayDyn<u64>>>;

fn out_array<'py>(py: Python<'py>, data: Vec<u64>, shape: Vec<usize>) -> Out<'py> {
    data.into_pyarray(py).reshape(shape)
}

impl RnsContext {
    /// `shape` is `(..., len(mods), n)`.
    fn check_shape(&self, shape: &[usize], mods: &[usize], what: &str) -> PyResult<()> {
        let d = shape.len();
        if d < 2 || shape[d - 1] != self.inner.n || shape[d - 2] != mods.len() {
            return Err(PyValueError::new_err(format!(
                "{what} must have shape (..., {}, {}) for {} mods, got {shape:?}",
                mods.len(),
                self.inner.n,
                mods.len()
            )));
        }
        Ok(())
    }

    fn rows<'a>(&self, a: &'a PyReadonlyArrayDyn<'_, u64>, mods: &[usize], what: &str) -> PyResult<&'a [u64]> {
        self.check_shape(a.shape(), mods, what)?;
        contiguous(a, what)
    }

    fn pair<'a>(&self, a: &'a PyReadonlyArrayDyn<'_, u64>, b: &'a PyReadonlyArrayDyn<'_, u64>, mods: &[usize])
        -> PyResult<(&'a [u64], &'a [u64])> {
        if a.shape() != b.shape() {
            return Err(PyValueError::new_err(format!("a and b differ in shape: {:?} and {:?}", a.shape(), b.shape())));
        }
        Ok((self.rows(a, mods, "a")?, self.rows(b, mods, "b")?))
    }

    fn in_place<'py>(&self, py: Python<'py>, a: &Bound<'py, PyArrayDyn<u64>>, mods: Vec<usize>, inverse: bool)
        -> PyResult<()> {
        let mut a = writable(a, "a")?;
        self.check_shape(a.shape(), &mods, "a")?;
        let aligned = (a.data() as usize) % std::mem::align_of::<u64>() == 0;
        if !a.is_c_contiguous() || !aligned {
            return Err(PyValueError::new_err("a must be an aligned C-contiguous array"));
        }
        let x = a.as_slice_mut().map_err(|_| PyValueError::new_err("a must be an aligned C-contiguous array"))?;
        let ctx = &self.inner;
        let single = x.len() == ctx.n;
        let f = || if inverse { ctx.intt(x, &mods) } else { ctx.ntt(x, &mods) };
        if single {
            // one row runs serially (the kernel does not touch rayon): no pool round trip
            py.detach(f).map_err(value_err)
        } else {
            run(py, f)?.map_err(value_err)
        }
    }
}

#[pymethods]
impl RnsContext {
    #[new]
    #[pyo3(signature = (n, primes, roots = None))]
    fn new(n: usize, primes: Vec<u64>, roots: Option<Vec<u64>>) -> PyResult<Self> {
        let inner = rns::RnsContext::new(n, &primes, roots.as_deref()).map_err(value_err)?;
        Ok(RnsContext { inner })
    }

    #[getter]
    fn n(&self) -> usize {
        self.inner.n
    }

    #[getter]
    fn primes(&self) -> Vec<u64> {
        self.inner.primes()
    }

    /// psi of each prime (psi^n = -1): the NTT evaluates at psi^(2 brv(k) + 1).
    #[getter]
    fn roots(&self) -> Vec<u64> {
        self.inner.roots()
    }

    /// In place: rows to NTT form.
    fn ntt<'py>(&self, py: Python<'py>, a: &Bound<'py, PyArrayDyn<u64>>, mods: Vec<usize>) -> PyResult<()> {
        self.in_place(py, a, mods, false)
    }

    /// In place: rows back to coefficients.
    fn intt<'py>(&self, py: Python<'py>, a: &Bound<'py, PyArrayDyn<u64>>, mods: Vec<usize>) -> PyResult<()> {
        self.in_place(py, a, mods, true)
    }

    fn add<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                mods: Vec<usize>) -> Out<'py> {
        let (x, y) = self.pair(&a, &b, &mods)?;
        let out = run(py, || self.inner.add(x, y, &mods))?.map_err(value_err)?;
        out_array(py, out, a.shape().to_vec())
    }

    fn sub<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                mods: Vec<usize>) -> Out<'py> {
        let (x, y) = self.pair(&a, &b, &mods)?;
        let out = run(py, || self.inner.sub(x, y, &mods))?.map_err(value_err)?;
        out_array(py, out, a.shape().to_vec())
    }

    fn mul<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                mods: Vec<usize>) -> Out<'py> {
        let (x, y) = self.pair(&a, &b, &mods)?;
        let out = run(py, || self.inner.mul(x, y, &mods))?.map_err(value_err)?;
        out_array(py, out, a.shape().to_vec())
    }

    fn neg<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, mods: Vec<usize>) -> Out<'py> {
        let x = self.rows(&a, &mods, "a")?;
        let out = run(py, || self.inner.neg(x, &mods))?.map_err(value_err)?;
        out_array(py, out, a.shape().to_vec())
    }

    /// acc += a * b in place.
    fn mul_acc<'py>(&self, py: Python<'py>, acc: &Bound<'py, PyArrayDyn<u64>>, a: PyReadonlyArrayDyn<'py, u64>,
                    b: PyReadonlyArrayDyn<'py, u64>, mods: Vec<usize>) -> PyResult<()> {
        let mut acc = writable(acc, "acc")?;
        let (x, y) = self.pair(&a, &b, &mods)?;
        if acc.shape() != a.shape() {
            return Err(PyValueError::new_err(format!("acc has shape {:?}, a {:?}", acc.shape(), a.shape())));
        }
        let aligned = (acc.data() as usize) % std::mem::align_of::<u64>() == 0;
        if !acc.is_c_contiguous() || !aligned {
            return Err(PyValueError::new_err("acc must be an aligned C-contiguous array"));
        }
        let z = acc.as_slice_mut().map_err(|_| PyValueError::new_err("acc must be an aligned C-contiguous array"))?;
        run(py, || self.inner.mul_acc(z, x, y, &mods))?.map_err(value_err)
    }

    /// Row i times scalars[i] mod its prime.
    fn mul_scalar<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, scalars: PyReadonlyArray1<'py, u64>,
                       mods: Vec<usize>) -> Out<'py> {
        let x = self.rows(&a, &mods, "a")?;
        let s = contiguous(&scalars, "scalars")?;
        let out = run(py, || self.inner.mul_scalar(x, s, &mods))?.map_err(value_err)?;
        out_array(py, out, a.shape().to_vec())
    }

    /// (2, r, n) x (2, r, n) -> (3, r, n): (a0 b0, a0 b1 + a1 b0, a1 b1).
    fn tensor<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, b: PyReadonlyArrayDyn<'py, u64>,
                   mods: Vec<usize>) -> Out<'py> {
        let (x, y) = self.pair(&a, &b, &mods)?;
        if a.ndim() != 3 || a.shape()[0] != 2 {
            return Err(PyValueError::new_err(format!("tensor needs (2, rows, n) operands, got {:?}", a.shape())));
        }
        let out = run(py, || self.inner.tensor(x, y, &mods))?.map_err(value_err)?;
        out_array(py, out, vec![3, mods.len(), self.inner.n])
    }

    /// NTT-form automorphism X -> X^g (g odd in (0, 2n)) of every row.
    fn automorph<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, g: i64) -> Out<'py> {
        let shape = a.shape().to_vec();
        if shape.is_empty() || shape[shape.len() - 1] != self.inner.n {
            return Err(PyValueError::new_err(format!("a must have shape (..., {}), got {shape:?}", self.inner.n)));
        }
        if g <= 0 {
            return Err(PyValueError::new_err(format!(
                "Galois element must be odd and in (0, {}), got {g}", 2 * self.inner.n)));
        }
        let x = contiguous(&a, "a")?;
        let out = run(py, || self.inner.automorph(x, g as u64))?.map_err(value_err)?;
        out_array(py, out, shape)
    }

    /// x int64 (..., n), |x| < 2^62 -> uint64 (..., len(mods), n): x mod primes[mods[i]] in row i.
    fn from_signed<'py>(&self, py: Python<'py>, x: PyReadonlyArrayDyn<'py, i64>, mods: Vec<usize>) -> Out<'py> {
        let shape = x.shape().to_vec();
        if shape.is_empty() || shape[shape.len() - 1] != self.inner.n {
            return Err(PyValueError::new_err(format!("x must have shape (..., {}), got {shape:?}", self.inner.n)));
        }
        let v = contiguous(&x, "x")?;
        check_size(v.len() * mods.len(), "from_signed's result")?;
        let out = run(py, || self.inner.from_signed(v, &mods))?.map_err(value_err)?;
        let mut out_shape = shape;
        let d = out_shape.len();
        out_shape.insert(d - 1, mods.len());
        out_array(py, out, out_shape)
    }

    /// (..., r, n) -> (..., r - 1, n): rescale / mod-down by the last prime of mods.
    fn divide_round_last<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, mods: Vec<usize>) -> Out<'py> {
        let x = self.rows(&a, &mods, "a")?;
        let out = run(py, || self.inner.divide_round_last(x, &mods))?.map_err(value_err)?;
        let mut shape = a.shape().to_vec();
        let d = shape.len();
        shape[d - 2] -= 1;
        out_array(py, out, shape)
    }

    /// (..., l+1, n) -> (..., l+1, l+2, n): key-switching digits over mods + [sp].
    fn decompose<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, mods: Vec<usize>, sp: usize)
        -> Out<'py> {
        let x = self.rows(&a, &mods, "a")?;
        check_size(x.len() * (mods.len() + 1), "decompose's result")?;
        let out = run(py, || self.inner.decompose(x, &mods, sp))?.map_err(value_err)?;
        let mut shape = a.shape().to_vec();
        let d = shape.len();
        shape.insert(d - 1, mods.len() + 1);
        out_array(py, out, shape)
    }

    /// digits (l+1, l+2, n), key (D, 2, len(primes), n) -> (2, l+1, n); g != 1 applies
    /// X -> X^g to each digit first (hoisted rotation).
    #[pyo3(signature = (digits, key, mods, sp, g = 1))]
    fn key_switch<'py>(&self, py: Python<'py>, digits: PyReadonlyArrayDyn<'py, u64>, key: PyReadonlyArrayDyn<'py, u64>,
                       mods: Vec<usize>, sp: usize, g: i64) -> Out<'py> {
        let (n, l1, r) = (self.inner.n, mods.len(), self.inner.tables.len());
        if digits.shape() != [l1, l1 + 1, n] {
            return Err(PyValueError::new_err(format!(
                "digits must have shape ({l1}, {}, {n}), got {:?}", l1 + 1, digits.shape())));
        }
        let ks = key.shape();
        if ks.len() != 4 || ks[1] != 2 || ks[2] != r || ks[3] != n {
            return Err(PyValueError::new_err(format!("key must have shape (digits, 2, {r}, {n}), got {ks:?}")));
        }
        if g <= 0 {
            return Err(PyValueError::new_err(format!("Galois element must be odd and in (0, {}), got {g}", 2 * n)));
        }
        let key_digits = ks[0];
        let (d, k) = (contiguous(&digits, "digits")?, contiguous(&key, "key")?);
        let out = run(py, || self.inner.key_switch(d, k, key_digits, &mods, sp, g as u64))?.map_err(value_err)?;
        out_array(py, out, vec![2, l1, n])
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ntt_primes, m)?)?;
    m.add_class::<RnsContext>()?;
    Ok(())
}
