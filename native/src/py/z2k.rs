//! Bindings of the SPDZ2k ring kernels (`crate::z2k`: arithmetic mod 2^(64 L) on flat uint64
//! arrays, L words per element, and the wide correlated OT) and of the AND triples' bucketing
//! (`crate::bucket`). Sans I/O; GIL released while they run.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::boundary::{check_size, contiguous};
use crate::aes::BLOCK;
use crate::z2k;

type Words<'py> = Bound<'py, PyArray1<u64>>;

fn err(msg: String) -> PyErr {
    PyValueError::new_err(msg)
}

fn ring(l: usize) -> PyResult<()> {
    z2k::check_words(l).map_err(err)
}

fn elements(a: &[u64], l: usize, what: &str) -> PyResult<usize> {
    if !a.len().is_multiple_of(l) {
        return Err(err(format!("{what}: {} words is not a whole number of {l}-word elements", a.len())));
    }
    Ok(a.len() / l)
}

fn out<'py>(py: Python<'py>, v: Vec<u64>) -> Words<'py> {
    v.into_pyarray(py)
}

fn binary<'py>(py: Python<'py>, a: PyReadonlyArray1<'py, u64>, b: PyReadonlyArray1<'py, u64>, l: usize, name: &str,
               f: fn(&[u64], &[u64], &mut [u64], usize)) -> PyResult<Words<'py>> {
    ring(l)?;
    let (x, y) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
    elements(x, l, name)?;
    if x.len() != y.len() {
        return Err(err(format!("{name}: {} and {} words", x.len(), y.len())));
    }
    let mut o = vec![0u64; x.len()];
    py.detach(|| f(x, y, &mut o, l));
    Ok(out(py, o))
}

/// ``a + b`` mod 2^(64 l), element by element (flat, l words each).
#[pyfunction]
fn z2k_add<'py>(py: Python<'py>, a: PyReadonlyArray1<'py, u64>, b: PyReadonlyArray1<'py, u64>, l: usize) -> PyResult<Words<'py>> {
    binary(py, a, b, l, "z2k_add", z2k::add)
}

/// ``a − b`` mod 2^(64 l).
#[pyfunction]
fn z2k_sub<'py>(py: Python<'py>, a: PyReadonlyArray1<'py, u64>, b: PyReadonlyArray1<'py, u64>, l: usize) -> PyResult<Words<'py>> {
    binary(py, a, b, l, "z2k_sub", z2k::sub)
}

/// ``a · b`` mod 2^(64 l), element by element.
#[pyfunction]
fn z2k_mul<'py>(py: Python<'py>, a: PyReadonlyArray1<'py, u64>, b: PyReadonlyArray1<'py, u64>, l: usize) -> PyResult<Words<'py>> {
    binary(py, a, b, l, "z2k_mul", z2k::mul)
}

/// ``a_n · w_n`` for one word per element.
#[pyfunction]
fn z2k_mul_word<'py>(py: Python<'py>, a: PyReadonlyArray1<'py, u64>, w: PyReadonlyArray1<'py, u64>, l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let (x, v) = (contiguous(&a, "a")?, contiguous(&w, "w")?);
    if elements(x, l, "z2k_mul_word")? != v.len() {
        return Err(err(format!("z2k_mul_word: {} elements and {} words", x.len() / l, v.len())));
    }
    let mut o = vec![0u64; x.len()];
    py.detach(|| z2k::mul_word(x, v, &mut o, l));
    Ok(out(py, o))
}

/// ``Σ_n w_n · a_n`` (l words).
#[pyfunction]
fn z2k_dot<'py>(py: Python<'py>, w: PyReadonlyArray1<'py, u64>, a: PyReadonlyArray1<'py, u64>, l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let (v, x) = (contiguous(&w, "w")?, contiguous(&a, "a")?);
    if elements(x, l, "z2k_dot")? != v.len() {
        return Err(err(format!("z2k_dot: {} words and {} elements", v.len(), x.len() / l)));
    }
    Ok(out(py, py.detach(|| z2k::dot_words(v, x, l))))
}

/// ``a`` (R, cols) elements summed over R.
#[pyfunction]
fn z2k_sum_rows<'py>(py: Python<'py>, a: PyReadonlyArray1<'py, u64>, cols: usize, l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let x = contiguous(&a, "a")?;
    let n = elements(x, l, "z2k_sum_rows")?;
    if cols == 0 || !n.is_multiple_of(cols) {
        return Err(err(format!("z2k_sum_rows: {n} elements are not rows of {cols}")));
    }
    Ok(out(py, py.detach(|| z2k::sum_rows(x, cols, l))))
}

/// A public word matrix ``m`` (rows, inner) times ``x`` (inner, cols) elements.
#[pyfunction]
fn z2k_matmul<'py>(py: Python<'py>, m: PyReadonlyArray1<'py, u64>, rows: usize, inner: usize, x: PyReadonlyArray1<'py, u64>,
                   cols: usize, l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let (mm, xx) = (contiguous(&m, "m")?, contiguous(&x, "x")?);
    if mm.len() != rows.saturating_mul(inner) || xx.len() != inner.saturating_mul(cols).saturating_mul(l) {
        return Err(err(format!("z2k_matmul: a ({rows}, {inner}) matrix and ({inner}, {cols}) elements, got {} and {} words",
                               mm.len(), xx.len())));
    }
    check_size(rows.saturating_mul(cols).saturating_mul(l), "the product")?;
    Ok(out(py, py.detach(|| z2k::matmul_words(mm, rows, inner, xx, cols, l))))
}

/// A public CSR word matrix (indptr, indices, data; ``inner`` columns) times ``x`` (inner, cols).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn z2k_csr_matmul<'py>(py: Python<'py>, indptr: PyReadonlyArray1<'py, u64>, indices: PyReadonlyArray1<'py, u64>,
                       data: PyReadonlyArray1<'py, u64>, inner: usize, x: PyReadonlyArray1<'py, u64>, cols: usize,
                       l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let (p, i, d, xx) = (contiguous(&indptr, "indptr")?, contiguous(&indices, "indices")?, contiguous(&data, "data")?,
                         contiguous(&x, "x")?);
    if p.is_empty() || p[0] != 0 || i.len() != d.len() || p.windows(2).any(|w| w[0] > w[1])
        || *p.last().unwrap() as usize != d.len() || i.iter().any(|&t| t as usize >= inner)
        || xx.len() != inner.saturating_mul(cols).saturating_mul(l) {
        return Err(err("z2k_csr_matmul: not a CSR matrix with the given inner size and operand".into()));
    }
    check_size((p.len() - 1).saturating_mul(cols).saturating_mul(l), "the product")?;
    Ok(out(py, py.detach(|| z2k::csr_matmul(p, i, d, xx, cols, l))))
}

/// Per element n, ``Σ_t coef_t · c_{n,t}``: coef (terms) elements, c (N, terms) elements.
#[pyfunction]
fn z2k_combine<'py>(py: Python<'py>, coef: PyReadonlyArray1<'py, u64>, c: PyReadonlyArray1<'py, u64>, terms: usize,
                    l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let (k, x) = (contiguous(&coef, "coef")?, contiguous(&c, "c")?);
    let n = elements(x, l, "z2k_combine")?;
    if terms == 0 || k.len() != terms * l || !n.is_multiple_of(terms) {
        return Err(err(format!("z2k_combine: {terms} coefficients for rows of {terms}, got {} words and {n} elements", k.len())));
    }
    Ok(out(py, py.detach(|| z2k::combine(k, x, terms, l))))
}

/// Per element n, ``Σ_t bit_{n,t} · coef_t``: bits (N, terms) uint8 (bit 0), coef (terms).
#[pyfunction]
fn z2k_subset_sums<'py>(py: Python<'py>, bits: PyReadonlyArray1<'py, u8>, coef: PyReadonlyArray1<'py, u64>, terms: usize,
                        l: usize) -> PyResult<Words<'py>> {
    ring(l)?;
    let (b, k) = (contiguous(&bits, "bits")?, contiguous(&coef, "coef")?);
    if terms == 0 || k.len() != terms * l || !b.len().is_multiple_of(terms) {
        return Err(err(format!("z2k_subset_sums: {terms} coefficients and rows of {terms} bits")));
    }
    check_size(b.len() / terms * l, "the sums")?;
    Ok(out(py, py.detach(|| z2k::subset_sums(b, k, terms, l))))
}

fn cot_shape(rows: usize, entries: usize, cols: usize, bits: usize, l: usize) -> PyResult<()> {
    ring(l)?;
    if !(1..=64).contains(&bits) || cols == 0 || cols > z2k::max_columns(l) {
        return Err(err(format!("wide COT: 1..64 bits and 1..{} columns, got {bits} and {cols}", z2k::max_columns(l))));
    }
    if rows != entries.saturating_mul(bits) {
        return Err(err(format!("wide COT: {rows} rows for {entries} values of {bits} bits")));
    }
    check_size(rows.saturating_mul(cols).saturating_mul(l), "the corrections")
}

/// Sender: ``(corrections (rows·cols·l,), share (entries·cols·l,))`` from IKNP rows ``q``
/// (rows, 16), its ``delta`` (16 bytes) and ``offsets`` (entries, cols) elements.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn z2k_cot_send<'py>(py: Python<'py>, q: PyReadonlyArray2<'py, u8>, delta: &[u8], domain: u64, start: u64,
                     offsets: PyReadonlyArray1<'py, u64>, cols: usize, bits: usize, l: usize
) -> PyResult<(Words<'py>, Words<'py>)> {
    if q.shape()[1] != BLOCK || delta.len() != BLOCK {
        return Err(err("z2k_cot_send: rows (n, 16) and a 16-byte delta".into()));
    }
    let (qq, off) = (contiguous(&q, "q")?, contiguous(&offsets, "offsets")?);
    ring(l)?;
    let entries = elements(off, l, "z2k_cot_send offsets")? / cols.max(1);
    cot_shape(q.shape()[0], entries, cols, bits, l)?;
    if off.len() != entries * cols * l {
        return Err(err("z2k_cot_send: offsets are not (entries, cols) elements".into()));
    }
    crate::ot::tccr::check_domain(domain).map_err(err)?;
    crate::ot::tccr::check_indices(start, q.shape()[0]).map_err(err)?;
    let d = u128::from_le_bytes(delta.try_into().unwrap());
    let mut corr = vec![0u64; q.shape()[0] * cols * l];
    let mut share = vec![0u64; entries * cols * l];
    py.detach(|| z2k::cot_send(qq, d, domain, start, off, cols, bits, &mut corr, &mut share, l));
    Ok((out(py, corr), out(py, share)))
}

/// Receiver: its share (entries·cols·l,) from rows ``t`` (rows, 16), its ``choices``
/// (entries,) and the sender's corrections.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn z2k_cot_recv<'py>(py: Python<'py>, t: PyReadonlyArray2<'py, u8>, domain: u64, start: u64,
                     choices: PyReadonlyArray1<'py, u64>, corrections: PyReadonlyArray1<'py, u64>, cols: usize, bits: usize,
                     l: usize) -> PyResult<Words<'py>> {
    if t.shape()[1] != BLOCK {
        return Err(err("z2k_cot_recv: rows (n, 16)".into()));
    }
    let (tt, ch, corr) = (contiguous(&t, "t")?, contiguous(&choices, "choices")?, contiguous(&corrections, "corrections")?);
    cot_shape(t.shape()[0], ch.len(), cols, bits, l)?;
    if corr.len() != t.shape()[0] * cols * l {
        return Err(err(format!("z2k_cot_recv: {} correction words for {} rows of {cols} columns", corr.len(), t.shape()[0])));
    }
    if bits < 64 && ch.iter().any(|&v| v >> bits != 0) {
        return Err(err(format!("z2k_cot_recv: a choice value does not fit in {bits} bits")));
    }
    crate::ot::tccr::check_domain(domain).map_err(err)?;
    crate::ot::tccr::check_indices(start, t.shape()[0]).map_err(err)?;
    let mut share = vec![0u64; ch.len() * cols * l];
    py.detach(|| z2k::cot_recv(tt, domain, start, ch, corr, cols, bits, &mut share, l));
    Ok(out(py, share))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(z2k_add, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_sub, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_mul, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_mul_word, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_dot, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_sum_rows, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_csr_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_combine, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_subset_sums, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_cot_send, m)?)?;
    m.add_function(wrap_pyfunction!(z2k_cot_recv, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_open, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_close, m)?)?;
    m.add_function(wrap_pyfunction!(abit_rows_into, m)?)?;
    Ok(())
}

/// WRK17 bucketing, first half (`crate::bucket::open`): ``(d (n·(b−1)·w,), a (n·w,), y1 (n·w,))``
/// from ``leaky`` (L·3·w,) and the bucket permutation ``idx`` (n·b,).
#[pyfunction]
fn bucket_open<'py>(py: Python<'py>, leaky: PyReadonlyArray1<'py, u64>, idx: PyReadonlyArray1<'py, u64>, b: usize,
                    w: usize) -> PyResult<(Words<'py>, Words<'py>, Words<'py>)> {
    let (lk, ix) = (contiguous(&leaky, "leaky")?, contiguous(&idx, "idx")?);
    bucket_shapes(lk, ix, b, w)?;
    let n = ix.len() / b;
    let (mut d, mut a, mut y1) = (vec![0u64; n * (b - 1) * w], vec![0u64; n * w], vec![0u64; n * w]);
    py.detach(|| crate::bucket::open(lk, ix, b, w, &mut d, &mut a, &mut y1));
    Ok((out(py, d), out(py, a), out(py, y1)))
}

/// WRK17 bucketing, second half (`crate::bucket::close`): c (n·w,) from the opened bits.
#[pyfunction]
fn bucket_close<'py>(py: Python<'py>, leaky: PyReadonlyArray1<'py, u64>, idx: PyReadonlyArray1<'py, u64>,
                     dbits: PyReadonlyArray1<'py, u8>, b: usize, w: usize) -> PyResult<Words<'py>> {
    let (lk, ix, db) = (contiguous(&leaky, "leaky")?, contiguous(&idx, "idx")?, contiguous(&dbits, "dbits")?);
    bucket_shapes(lk, ix, b, w)?;
    let n = ix.len() / b;
    if db.len() != n * (b - 1) {
        return Err(err(format!("bucket_close: {} opened bits for {n} buckets of {b}", db.len())));
    }
    let mut c = vec![0u64; n * w];
    py.detach(|| crate::bucket::close(lk, ix, db, b, w, &mut c));
    Ok(out(py, c))
}

fn bucket_shapes(leaky: &[u64], idx: &[u64], b: usize, w: usize) -> PyResult<usize> {
    if b < 2 || w == 0 || !leaky.len().is_multiple_of(3 * w) || !idx.len().is_multiple_of(b) {
        return Err(err(format!("buckets: rows of {w} words in threes, buckets of {b} >= 2")));
    }
    let l = leaky.len() / (3 * w);
    if idx.iter().any(|&t| t as usize >= l) {
        return Err(err(format!("buckets: an index past the {l} leaky triples")));
    }
    Ok(l)
}

/// One part of the leaky AND triples' rows (`crate::bucket::rows_into`), written into ``out``
/// (n·3·w,); returns each triple's share of bit·Δ (low 64 bits).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn abit_rows_into<'py>(py: Python<'py>, out: Bound<'py, numpy::PyArray1<u64>>, part: usize, bits: PyReadonlyArray1<'py, u8>,
                       macs: Vec<PyReadonlyArray2<'py, u8>>, keys: Vec<PyReadonlyArray2<'py, u8>>, lo: usize, delta: u64
) -> PyResult<Words<'py>> {
    use numpy::PyArrayMethods;
    let b = contiguous(&bits, "bits")?;
    let n = b.len();
    let peers = macs.len();
    if keys.len() != peers || part > 2 {
        return Err(err("abit_rows_into: one key array per MAC array, part 0..2".into()));
    }
    let mut m: Vec<&[u8]> = Vec::with_capacity(peers);
    let mut k: Vec<&[u8]> = Vec::with_capacity(peers);
    for (mm, kk) in macs.iter().zip(&keys) {
        let (ms, ks) = (contiguous(mm, "macs")?, contiguous(kk, "keys")?);
        if mm.shape()[1] != BLOCK || kk.shape()[1] != BLOCK || mm.shape()[0] < lo + n || kk.shape()[0] < lo + n {
            return Err(err(format!("abit_rows_into: rows (>= {}, 16)", lo + n)));
        }
        m.push(ms);
        k.push(ks);
    }
    let mut rw = out.readwrite();
    let o = rw.as_slice_mut().map_err(|_| err("abit_rows_into: out must be a contiguous uint64 array".into()))?;
    if o.len() != n * 3 * (1 + 2 * peers) {
        return Err(err(format!("abit_rows_into: out has {} words for {n} triples of rows of {}", o.len(), 1 + 2 * peers)));
    }
    let mut global = vec![0u64; n];
    py.detach(|| crate::bucket::rows_into(o, part, b, &m, &k, lo, delta, &mut global));
    Ok(out_words(py, global))
}

fn out_words<'py>(py: Python<'py>, v: Vec<u64>) -> Words<'py> {
    v.into_pyarray(py)
}
