//! `shaper._native`: batch Montgomery arithmetic for the `shaper.kernels` native kernel.
//!
//! Values cross the boundary as 2-D `uint64` numpy arrays, one row per value, each row the
//! value's little-endian 64-bit words (`Context.words` of them) and reduced modulo the
//! context's modulus; exponents as rows of little-endian words of any width. Kernels release
//! the GIL and spread groups of values over a rayon pool (`set_threads`).

use std::sync::{Arc, RwLock};
use rayon::prelude::*;

use numpy::{
    IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyReadonlyArray4, PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

pub mod algo;
pub mod engine;
pub mod ifma;
pub mod portable;
pub mod prf;
pub mod rss;

use algo::Comb;
use engine::{less_than, Engine, Modulus};

enum Eng {
    Ifma(ifma::Ifma),
    Portable(portable::Portable),
}

macro_rules! with_engine {
    ($eng:expr, $e:ident => $body:expr) => {
        match $eng {
            Eng::Ifma($e) => $body,
            Eng::Portable($e) => $body,
        }
    };
}

/// The thread pool and the process it was started in: after `fork()` the child has the pool's
/// data but none of its threads, so a pool from another pid is abandoned (leaked: its threads
/// do not exist to be joined) and a new one started.
static POOL: RwLock<Option<(u32, Arc<rayon::ThreadPool>)>> = RwLock::new(None);

fn build_pool(threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("shaper-native-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start native thread pool: {e}")))
}

fn install_pool(threads: usize) -> PyResult<Arc<rayon::ThreadPool>> {
    let pool = build_pool(threads)?;
    let old = POOL.write().unwrap().replace((std::process::id(), pool.clone()));
    if let Some((pid, p)) = old {
        if pid != std::process::id() {
            std::mem::forget(p); // inherited across fork: its worker threads are gone
        }
    }
    Ok(pool)
}

fn pool() -> PyResult<Arc<rayon::ThreadPool>> {
    let (current, size) = {
        let guard = POOL.read().unwrap();
        match guard.as_ref() {
            Some((pid, p)) if *pid == std::process::id() => return Ok(p.clone()),
            Some((_, p)) => (false, p.current_num_threads()),
            None => (true, 0),
        }
    };
    let threads = if current {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        size // same size as the parent's pool
    };
    install_pool(threads)
}

/// Runs `f` on the pool with the GIL released.
fn run<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, f: F) -> PyResult<T> {
    let p = pool()?;
    Ok(py.detach(move || p.install(f)))
}

/// Number of threads native kernels use; `threads >= 1`.
#[pyfunction]
fn set_threads(threads: usize) -> PyResult<()> {
    if threads == 0 {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    install_pool(threads)?;
    Ok(())
}

/// Threads of the native pool.
#[pyfunction]
fn threads() -> PyResult<usize> {
    Ok(pool()?.current_num_threads())
}

/// True when this CPU supports AVX-512F and AVX-512 IFMA (the 8-lane engine).
#[pyfunction]
fn ifma_available() -> bool {
    ifma::available()
}

/// The array's data as a slice: it must be C-contiguous (row-major; a Fortran-ordered array
/// would be read in the wrong order) and aligned for its element type.
fn contiguous<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    arr: &'a numpy::PyReadonlyArray<'_, T, D>,
    what: &str,
) -> PyResult<&'a [T]> {
    let aligned = (arr.data() as usize) % std::mem::align_of::<T>() == 0;
    if !arr.is_c_contiguous() || !aligned {
        return Err(PyValueError::new_err(format!("{what} must be an aligned C-contiguous array")));
    }
    arr.as_slice().map_err(|_| PyValueError::new_err(format!("{what} must be an aligned C-contiguous array")))
}

/// Upper bound on the words one call may allocate for its results and tables (8 GiB): a
/// malformed shape gets an error instead of aborting the process on allocation failure.
const MAX_WORDS: usize = 1 << 30;

fn check_size(words: usize, what: &str) -> PyResult<()> {
    if words > MAX_WORDS {
        return Err(PyValueError::new_err(format!("{what} would need more than 8 GiB")));
    }
    Ok(())
}

/// Index of the first row of `width` words failing `ok`, checked on the pool without the GIL.
fn first_bad<F: Fn(&[u64]) -> bool + Sync>(py: Python<'_>, data: &[u64], width: usize, ok: F) -> PyResult<Option<usize>> {
    if data.len() <= 64 * width {
        return Ok(data.chunks(width).position(|row| !ok(row)));
    }
    run(py, || data.par_chunks(width).with_min_len(256).position_first(|row| !ok(row)))
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
        if let Some(i) = first_bad(arr.py(), data, self.words, |row| less_than(row, m))? {
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
        if let Some(i) = first_bad(arr.py(), data, mw, |row| with_engine!(eng, e => e.mont_ok(row)))? {
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
        let eng = match engine {
            "ifma" | "auto" if ifma::available() => {
                Eng::Ifma(ifma::Ifma::new(&m).ok_or_else(|| PyRuntimeError::new_err("this CPU lacks AVX-512 IFMA"))?)
            }
            "ifma" => return Err(PyRuntimeError::new_err("this CPU lacks AVX-512 IFMA")),
            "auto" | "portable" => Eng::Portable(portable::Portable::new(&m)),
            other => return Err(PyValueError::new_err(format!("unknown engine {other:?} (ifma, portable, auto)"))),
        };
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
        match self.eng {
            Eng::Ifma(_) => "ifma",
            Eng::Portable(_) => "portable",
        }
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
        let (x, count) = self.values(&a, "a")?;
        let (y, count_b) = self.values(&b, "b")?;
        if count != count_b {
            return Err(PyValueError::new_err(format!("operands differ in length: {count} and {count_b}")));
        }
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
        let (x, count) = self.mont_values(&a, "a")?;
        let (y, count_b) = self.mont_values(&b, "b")?;
        if count != count_b {
            return Err(PyValueError::new_err(format!("operands differ in length: {count} and {count_b}")));
        }
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
        if ptr.is_empty() {
            return Err(PyValueError::new_err("indptr must hold at least one entry"));
        }
        let mut last = 0i64;
        let mut uptr = Vec::with_capacity(ptr.len());
        for (r, &p) in ptr.iter().enumerate() {
            if p < last || p as usize > idx.len() || (r == 0 && p < 0) {
                return Err(PyValueError::new_err(format!(
                    "indptr must be non-decreasing within [0, {}] (entry {r} is {p})",
                    idx.len()
                )));
            }
            last = p;
            uptr.push(p as usize);
        }
        let mut uidx = Vec::with_capacity(idx.len());
        for (k, &i) in idx.iter().enumerate() {
            if i < 0 || i as usize >= nv {
                return Err(PyValueError::new_err(format!("index {i} at position {k} is outside [0, {nv})")));
            }
            uidx.push(i as usize);
        }
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
        for i in 0..k * count {
            if !less_than(&data[i * self.words..(i + 1) * self.words], &self.modulus.m) {
                return Err(PyValueError::new_err(format!("columns: value at flat index {i} is not reduced")));
            }
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
        for i in 0..nt * k * count {
            if !less_than(&b[i * self.words..(i + 1) * self.words], &self.modulus.m) {
                return Err(PyValueError::new_err(format!("bases: value at flat index {i} is not reduced")));
            }
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
        if b.len() != self.words || !less_than(b, &self.modulus.m) {
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
            let bits = engine::rows_bit_length(data, count, ew);
            let need = bits.div_ceil(t.comb.window);
            if need > t.comb.windows {
                return Err(PyValueError::new_err(format!(
                    "exponent of {bits} bits is longer than the table serves ({} bits)",
                    t.comb.windows * t.comb.window
                )));
            }
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

// -- three-party replicated sharing: bit-sliced boolean gates (see rss.rs) -----------------------

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
    for (r, g) in rows.chunks(5).enumerate() {
        let need = match g[0] {
            rss::XOR3 => 3,
            rss::XOR => 2,
            rss::INV | rss::EQW => 1,
            rss::EQ0 | rss::EQ1 => 0,
            other => return Err(PyValueError::new_err(format!("gate row {r}: unknown gate code {other}"))),
        };
        if g[1..1 + need].iter().any(|&v| v < 0) {
            return Err(PyValueError::new_err(format!("gate row {r}: missing input slot")));
        }
    }
    py.detach(|| rss::local(xs, as_, w, rows)).map_err(PyValueError::new_err)
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
    py.detach(|| rss::and_local_masked(xs, as_, w, rows, o, k1, k2));
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

/// AES-128-CTR keystream (zero IV, big-endian block counter) computed with VAES: the same
/// stream as the `cryptography` library's; consecutive calls continue it.
#[pyclass(module = "shaper._native")]
struct KeyStream {
    inner: prf::KeyStream,
}

#[pymethods]
impl KeyStream {
    #[new]
    fn new(key: &[u8]) -> PyResult<Self> {
        let k: [u8; 16] = key.try_into().map_err(|_| PyValueError::new_err(format!("AES-128 key must be 16 bytes, got {}", key.len())))?;
        let inner = prf::KeyStream::new(&k).ok_or_else(|| PyRuntimeError::new_err("this CPU lacks VAES/AVX-512"))?;
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
    py.detach(|| rss::and_prf(xs, as_, w, rows, o, s1, s2));
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Context>()?;
    m.add_class::<CombTable>()?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(threads, m)?)?;
    m.add_function(wrap_pyfunction!(ifma_available, m)?)?;
    m.add_function(wrap_pyfunction!(rss_local, m)?)?;
    m.add_function(wrap_pyfunction!(rss_and_masked, m)?)?;
    m.add_function(wrap_pyfunction!(rss_and_prf, m)?)?;
    m.add_class::<KeyStream>()?;
    m.add_function(wrap_pyfunction!(rss_and_finish, m)?)?;
    Ok(())
}
