//! Bindings of the batch Montgomery arithmetic (`crate::bigint`): `Context`, `CombTable` and
//! `ifma_available`. Values cross the boundary as 2-D `uint64` arrays, one row per value (see
//! `_native.pyi`); every kernel runs on the pool with the GIL released.

use numpy::{
    IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyReadonlyArray4, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use super::pool::{run, run_if};
use crate::bigint::algo::{self, Comb};
use crate::bigint::engine::{Engine, Modulus};
#[cfg(target_arch = "x86_64")]
use crate::bigint::ifma;
use crate::bigint::{check, portable};

/// The engine a context runs on; IFMA exists on x86-64 only.
enum Eng {
    #[cfg(target_arch = "x86_64")]
    Ifma(ifma::Ifma),
    Portable(portable::Portable),
}

macro_rules! with_engine {
    ($eng:expr, $e:ident => $body:expr) => {
        match $eng {
            #[cfg(target_arch = "x86_64")]
            Eng::Ifma($e) => $body,
            Eng::Portable($e) => $body,
        }
    };
}

impl Eng {
    /// The engine for a request ("ifma", "portable" or "auto": IFMA where the CPU has it).
    fn new(m: &Modulus, engine: &str) -> PyResult<Self> {
        let lacks = || PyRuntimeError::new_err("this CPU lacks AVX-512 IFMA");
        Ok(match engine {
            #[cfg(target_arch = "x86_64")]
            "ifma" | "auto" if ifma::available() => Eng::Ifma(ifma::Ifma::new(m).ok_or_else(lacks)?),
            "ifma" => return Err(lacks()),
            "auto" | "portable" => Eng::Portable(portable::Portable::new(m)),
            other => return Err(PyValueError::new_err(format!("unknown engine {other:?} (ifma, portable, auto)"))),
        })
    }

    /// "ifma" or "portable".
    fn name(&self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Eng::Ifma(_) => "ifma",
            Eng::Portable(_) => "portable",
        }
    }
}

/// True when this CPU supports AVX-512F and AVX-512 IFMA (the 8-lane engine).
#[pyfunction]
fn ifma_available() -> bool {
    crate::bigint::ifma_available()
}

/// Montgomery context for one odd modulus and one engine ("ifma" or "portable").
#[pyclass(frozen, module = "shaper._native")]
struct Context {
    eng: Eng,
    modulus: Modulus,
    words: usize,
}

impl Context {
    fn values<'a>(&self, arr: &'a PyReadonlyArray2<'_, u64>, what: &str) -> PyResult<(&'a [u64], usize)> {
        let shape = arr.shape();
        if shape[1] != self.words {
            return Err(PyValueError::new_err(format!(
                "{what} rows must have {} words for this {}-bit modulus, got {}",
                self.words, self.modulus.bits, shape[1]
            )));
        }
        let data = contiguous(arr, what)?;
        let m = &self.modulus.m;
        let pooled = check::wants_pool(data.len(), self.words);
        if let Some(i) = run_if(arr.py(), pooled, || check::first_unreduced(data, m))? {
            return Err(PyValueError::new_err(format!("{what}: value at index {i} is not reduced modulo the modulus")));
        }
        Ok((data, shape[0]))
    }

    fn array<'py>(&self, py: Python<'py>, data: Vec<u64>, count: usize) -> PyResult<Bound<'py, PyArray2<u64>>> {
        data.into_pyarray(py).reshape([count, self.words])
    }

    /// Words per value in the Montgomery storage layout.
    fn mw(&self) -> usize {
        with_engine!(&self.eng, e => e.mw())
    }

    /// Rows in the Montgomery storage layout, each checked (digits in range, value < 2m).
    fn mont_values<'a>(&self, arr: &'a PyReadonlyArray2<'_, u64>, what: &str) -> PyResult<(&'a [u64], usize)> {
        let (shape, mw) = (arr.shape(), self.mw());
        if shape[1] != mw {
            return Err(PyValueError::new_err(format!(
                "{what}: Montgomery rows of this context have {mw} words, got {}",
                shape[1]
            )));
        }
        let data = contiguous(arr, what)?;
        let eng = &self.eng;
        let pooled = check::wants_pool(data.len(), mw);
        if let Some(i) = run_if(arr.py(), pooled, || with_engine!(eng, e => check::first_not_mont(e, data)))? {
            return Err(PyValueError::new_err(format!("{what}: row {i} is not a Montgomery value of this context")));
        }
        Ok((data, shape[0]))
    }

    /// Values of either layout.
    fn values_as<'a>(&self, arr: &'a PyReadonlyArray2<'_, u64>, what: &str, mont: bool) -> PyResult<(&'a [u64], usize)> {
        if mont {
            self.mont_values(arr, what)
        } else {
            self.values(arr, what)
        }
    }

    /// Two operand arrays of equal length (`mont`: in the Montgomery storage layout).
    fn operand_pair<'a>(&self, a: &'a PyReadonlyArray2<'_, u64>, b: &'a PyReadonlyArray2<'_, u64>, mont: bool)
        -> PyResult<(&'a [u64], &'a [u64], usize)> {
        let (x, count) = self.values_as(a, "a", mont)?;
        let (y, count_b) = self.values_as(b, "b", mont)?;
        if count != count_b {
            return Err(PyValueError::new_err(format!("operands differ in length: {count} and {count_b}")));
        }
        Ok((x, y, count))
    }

    fn array_as<'py>(&self, py: Python<'py>, data: Vec<u64>, count: usize, mont: bool) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let width = if mont { self.mw() } else { self.words };
        data.into_pyarray(py).reshape([count, width])
    }
}

#[pymethods]
impl Context {
    #[new]
    #[pyo3(signature = (modulus, engine = "auto"))]
    fn new(modulus: PyReadonlyArray1<'_, u64>, engine: &str) -> PyResult<Self> {
        let words = contiguous(&modulus, "modulus")?;
        let m = Modulus::new(words).map_err(PyValueError::new_err)?;
        let eng = Eng::new(&m, engine)?;
        let words = m.words();
        Ok(Context { eng, modulus: m, words })
    }

    /// Words per value in the Montgomery storage layout (`to_mont`, `mont=True` arguments):
    /// the engine's digits, values kept in [0, 2m).
    #[getter]
    fn mont_width(&self) -> usize {
        self.mw()
    }

    /// Canonical 64-bit words per value.
    #[getter]
    fn words(&self) -> usize {
        self.words
    }

    #[getter]
    fn bits(&self) -> usize {
        self.modulus.bits
    }

    /// "ifma" or "portable".
    #[getter]
    fn engine(&self) -> &'static str {
        self.eng.name()
    }

    /// `[b ** exponent mod m]` for one shared exponent (constant time in its value); `mont`:
    /// bases and results in this context's Montgomery form.
    #[pyo3(signature = (bases, exponent, mont = false))]
    fn powmod_same<'py>(
        &self,
        py: Python<'py>,
        bases: PyReadonlyArray2<'py, u64>,
        exponent: PyReadonlyArray1<'py, u64>,
        mont: bool,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (b, count) = self.values_as(&bases, "bases", mont)?;
        let ex = contiguous(&exponent, "exponent")?;
        let out = run(py, || with_engine!(&self.eng, e => algo::powmod_same(e, b, count, ex, mont)))?;
        self.array_as(py, out, count, mont)
    }

    /// `[b_i ** e_i mod m]`; exponents as rows of little-endian words (constant time in the
    /// exponent values; the work depends on the longest exponent's length). `mont`: bases and
    /// results in Montgomery form.
    #[pyo3(signature = (bases, exponents, mont = false))]
    fn powmod<'py>(
        &self,
        py: Python<'py>,
        bases: PyReadonlyArray2<'py, u64>,
        exponents: PyReadonlyArray2<'py, u64>,
        mont: bool,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (b, count) = self.values_as(&bases, "bases", mont)?;
        let shape = exponents.shape();
        if shape[0] != count {
            return Err(PyValueError::new_err(format!("{count} bases but {} exponents", shape[0])));
        }
        let ew = shape[1];
        let ex = contiguous(&exponents, "exponents")?;
        let out = run(py, || with_engine!(&self.eng, e => algo::powmod_each(e, b, count, ex, ew, mont)))?;
        self.array_as(py, out, count, mont)
    }

    /// `[a_i * b_i mod m]`.
    fn mulmod<'py>(
        &self,
        py: Python<'py>,
        a: PyReadonlyArray2<'py, u64>,
        b: PyReadonlyArray2<'py, u64>,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (x, y, count) = self.operand_pair(&a, &b, false)?;
        let out = run(py, || with_engine!(&self.eng, e => algo::mulmod(e, x, y, count)))?;
        self.array(py, out, count)
    }

    /// Values into this context's Montgomery form (x -> xR mod m, R = 2^52L for IFMA, 2^64n
    /// portable): ciphertexts kept this way between operations need no conversions.
    fn to_mont<'py>(&self, py: Python<'py>, values: PyReadonlyArray2<'py, u64>) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (v, count) = self.values(&values, "values")?;
        let out = run(py, || with_engine!(&self.eng, e => algo::convert(e, v, count, true)))?;
        self.array_as(py, out, count, true)
    }

    /// Montgomery-form values back to canonical ones.
    fn from_mont<'py>(&self, py: Python<'py>, values: PyReadonlyArray2<'py, u64>) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (v, count) = self.mont_values(&values, "values")?;
        let out = run(py, || with_engine!(&self.eng, e => algo::convert(e, v, count, false)))?;
        self.array(py, out, count)
    }

    /// `[a_i * b_i]` of Montgomery-form values, in Montgomery form (one product each).
    fn mont_mul<'py>(
        &self,
        py: Python<'py>,
        a: PyReadonlyArray2<'py, u64>,
        b: PyReadonlyArray2<'py, u64>,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (x, y, count) = self.operand_pair(&a, &b, true)?;
        let out = run(py, || with_engine!(&self.eng, e => algo::mont_mul(e, x, y, count)))?;
        self.array_as(py, out, count, true)
    }

    /// CSR gather-product: `out[r] = prod values[indices[k]]`, k in [indptr[r], indptr[r+1]);
    /// `mont`: values and results in Montgomery form.
    #[pyo3(signature = (values, indices, indptr, mont = false))]
    fn prod_rows<'py>(
        &self,
        py: Python<'py>,
        values: PyReadonlyArray2<'py, u64>,
        indices: PyReadonlyArray1<'py, i64>,
        indptr: PyReadonlyArray1<'py, i64>,
        mont: bool,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let (v, nv) = self.values_as(&values, "values", mont)?;
        let idx = contiguous(&indices, "indices")?;
        let ptr = contiguous(&indptr, "indptr")?;
        let (uidx, uptr) = check::csr(idx, ptr, nv).map_err(PyValueError::new_err)?;
        let rows = uptr.len() - 1;
        let out = run(py, || with_engine!(&self.eng, e => algo::prod_rows(e, v, &uidx, &uptr, mont)))?;
        self.array_as(py, out, rows, mont)
    }

    /// Horner packing over columns (k, count, words): `acc = col[k-1]`, then
    /// `acc = acc ** (2 ** shift_bits) * col[j]` for j = k-2..0.
    fn horner<'py>(
        &self,
        py: Python<'py>,
        columns: PyReadonlyArray3<'py, u64>,
        shift_bits: usize,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let shape = columns.shape().to_vec();
        if shape[2] != self.words {
            return Err(PyValueError::new_err(format!("column rows must have {} words", self.words)));
        }
        let (k, count) = (shape[0], shape[1]);
        if k == 0 {
            return Err(PyValueError::new_err("horner needs at least one column"));
        }
        if shift_bits > 1 << 20 {
            return Err(PyValueError::new_err("shift_bits above 2^20 is not supported"));
        }
        let data = contiguous(&columns, "columns")?;
        if let Some(i) = check::first_unreduced_serial(data, &self.modulus.m) {
            return Err(PyValueError::new_err(format!("columns: value at flat index {i} is not reduced")));
        }
        let out = run(py, || with_engine!(&self.eng, e => algo::horner(e, data, k, count, shift_bits)))?;
        self.array(py, out, count)
    }

    /// Horner packing of products of powers: bases (T, k, count, words), exponents
    /// (T, k, count, ew); each slot is `prod_t bases[t][j] ** exponents[t][j]`.
    fn horner_multiexp<'py>(
        &self,
        py: Python<'py>,
        bases: PyReadonlyArray4<'py, u64>,
        exponents: PyReadonlyArray4<'py, u64>,
        shift_bits: usize,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        let bs = bases.shape().to_vec();
        let es = exponents.shape().to_vec();
        if bs[3] != self.words || bs[..3] != es[..3] {
            return Err(PyValueError::new_err(format!(
                "bases must be (T, k, count, {}) and exponents (T, k, count, ew); got {bs:?} and {es:?}",
                self.words
            )));
        }
        let (nt, k, count, ew) = (bs[0], bs[1], bs[2], es[3]);
        if nt == 0 || k == 0 {
            return Err(PyValueError::new_err("horner_multiexp needs at least one base and one slot"));
        }
        if shift_bits > 1 << 20 {
            return Err(PyValueError::new_err("shift_bits above 2^20 is not supported"));
        }
        if nt > 8 {
            return Err(PyValueError::new_err("at most 8 bases per slot"));
        }
        let b = contiguous(&bases, "bases")?;
        let ex = contiguous(&exponents, "exponents")?;
        if let Some(i) = check::first_unreduced_serial(b, &self.modulus.m) {
            return Err(PyValueError::new_err(format!("bases: value at flat index {i} is not reduced")));
        }
        let out = run(py, || with_engine!(&self.eng, e => algo::horner_multiexp(e, b, ex, nt, k, count, ew, shift_bits)))?
            .map_err(PyValueError::new_err)?;
        self.array(py, out, count)
    }

    /// Builds a fixed-base comb table for `base` (one row of words): `windows` windows of
    /// `window` bits (1..=8).
    #[pyo3(signature = (base, window, windows, direct = false))]
    fn comb_table(&self, py: Python<'_>, base: PyReadonlyArray1<'_, u64>, window: usize, windows: usize, direct: bool) -> PyResult<CombTable> {
        let widest = if direct { 12 } else { 8 };
        if !(1..=widest).contains(&window) || windows == 0 {
            return Err(PyValueError::new_err(format!(
                "window must be 1..={widest} bits{} and windows positive",
                if direct { "" } else { " (constant-time tables)" }
            )));
        }
        check_size(windows.saturating_mul(1 << window).saturating_mul(self.words + 2), "the comb table")?;
        let b = contiguous(&base, "base")?;
        if !check::is_reduced(b, &self.modulus.m) {
            return Err(PyValueError::new_err("base must be one reduced value of the modulus' word count"));
        }
        let comb = run(py, || with_engine!(&self.eng, e => algo::comb_build(e, b, window, windows, direct)))?;
        Ok(CombTable { comb, modulus: self.modulus.m.clone(), engine: self.engine() })
    }

    /// `[mult_i * prod_t table_t.base ** e_{t,i} mod m]`; exponents per table as rows of words.
    /// `mont_in`: multipliers in Montgomery form; `mont_out`: results in Montgomery form.
    #[pyo3(signature = (tables, exponents, multipliers = None, mont_in = false, mont_out = false))]
    fn fixed_base<'py>(
        &self,
        py: Python<'py>,
        tables: Vec<PyRef<'py, CombTable>>,
        exponents: Vec<PyReadonlyArray2<'py, u64>>,
        multipliers: Option<PyReadonlyArray2<'py, u64>>,
        mont_in: bool,
        mont_out: bool,
    ) -> PyResult<Bound<'py, PyArray2<u64>>> {
        if tables.is_empty() || tables.len() != exponents.len() {
            return Err(PyValueError::new_err("one exponent array per table is needed"));
        }
        let count = exponents[0].shape()[0];
        check_size(count.saturating_mul(self.words), "the result")?;
        let mut exps = Vec::with_capacity(tables.len());
        let mut windows = Vec::with_capacity(tables.len());
        for (t, ex) in tables.iter().zip(&exponents) {
            if t.modulus != self.modulus.m || t.engine != self.engine() {
                return Err(PyValueError::new_err("comb table belongs to another modulus or engine"));
            }
            let shape = ex.shape();
            if shape[0] != count {
                return Err(PyValueError::new_err("exponent arrays differ in length"));
            }
            let ew = shape[1];
            let data = contiguous(ex, "exponents")?;
            let need = t.comb.windows_for(data, count, ew).map_err(PyValueError::new_err)?;
            // a private copy: the caller's array could change while the GIL is released
            exps.push((data.to_vec(), ew));
            windows.push(need);
        }
        let mult = match &multipliers {
            Some(mv) => {
                let (data, n) = self.values_as(mv, "multipliers", mont_in)?;
                if n != count {
                    return Err(PyValueError::new_err(format!("{n} multipliers for {count} exponents")));
                }
                Some(data)
            }
            None => None,
        };
        let combs: Vec<&Comb> = tables.iter().map(|t| &t.comb).collect();
        let exps: Vec<(&[u64], usize)> = exps.iter().map(|(v, ew)| (v.as_slice(), *ew)).collect();
        let out = run(py, || with_engine!(&self.eng, e => algo::fixed_base(e, &combs, &exps, &windows, mult, count, mont_in, mont_out)))?;
        self.array_as(py, out, count, mont_out)
    }
}

/// A fixed-base comb table built by `Context.comb_table`.
#[pyclass(frozen, module = "shaper._native")]
struct CombTable {
    comb: Comb,
    modulus: Vec<u64>,
    engine: &'static str,
}

#[pymethods]
impl CombTable {
    #[getter]
    fn window(&self) -> usize {
        self.comb.window
    }
    #[getter]
    fn windows(&self) -> usize {
        self.comb.windows
    }
    /// Bytes held by the table.
    #[getter]
    fn nbytes(&self) -> usize {
        self.comb.nbytes()
    }
    /// True when entries are read by index (not constant time).
    #[getter]
    fn direct(&self) -> bool {
        self.comb.direct
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Context>()?;
    m.add_class::<CombTable>()?;
    m.add_function(wrap_pyfunction!(ifma_available, m)?)?;
    Ok(())
}
