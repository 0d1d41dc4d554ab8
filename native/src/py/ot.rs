//! Bindings of oblivious transfer (`crate::ot`): `BaseOtSender`/`BaseOtReceiver` (Chou–Orlandi),
//! `IknpReceiver`/`IknpSender` (IKNP extension; `extend_hash`, `extend_bits` and the sender's
//! `extend_cot` fuse it with the kernel that consumes the rows), their subclasses
//! `SoftReceiver`/`SoftSender` (SoftSpoken with groups of k = 1, 2, 4: the same methods and rows,
//! 128/k message bits per OT, a setup message at construction), `ot_hash`/`ot_bits` (random OT
//! by the TCCR hash),
//! `cot_send`/`cot_recv` (correlated OT and Gilboa products mod q) and `pack_choice_bits`.
//!
//! Sans I/O: bytes and arrays in, bytes and arrays out; randomness comes from the caller. Each
//! kernel runs on the calling thread with the GIL released (one core per party: the protocol
//! runs the parties' roles side by side, so the rayon pool would only contend with the peer).
//! Rows are (m, 16) uint8 C-contiguous arrays; packed bits are LSB-first (see `crate::ot`).

use numpy::ndarray::Dimension;
use numpy::{Element, PyArray, PyArray1, PyArray2, PyArray3, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
            PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::boundary::{check_size, contiguous};
use crate::ot::block::BLOCK;
use crate::ot::{base, check, cot, iknp, tccr};

fn value_error(e: String) -> PyErr {
    PyValueError::new_err(e)
}

/// The rows of an (m, 16) uint8 array.
fn rows<'a>(arr: &'a PyReadonlyArray2<'_, u8>, what: &str) -> PyResult<&'a [u8]> {
    if arr.shape()[1] != BLOCK {
        return Err(PyValueError::new_err(format!("{what} must have shape (m, {BLOCK}), got {:?}", arr.shape())));
    }
    contiguous(arr, what)
}

fn delta_block(delta: &[u8]) -> PyResult<u128> {
    let d: [u8; BLOCK] = delta.try_into()
        .map_err(|_| PyValueError::new_err(format!("delta must be {BLOCK} bytes, got {}", delta.len())))?;
    Ok(u128::from_le_bytes(d))
}

/// A zeroed array from numpy's allocator, filled by `fill` with the GIL released. numpy asks the
/// kernel for huge pages on large arrays: first-touch page faults on a fresh 64 MiB Vec cost
/// several times the hashing itself.
fn filled<'py, T: Element, D: Dimension, R: Send>(py: Python<'py>, dims: D, fill: impl FnOnce(&mut [T]) -> R + Send)
                                                  -> (Bound<'py, PyArray<T, D>>, R) {
    let arr = PyArray::<T, D>::zeros(py, dims, false);
    let r = {
        let mut rw = arr.readwrite();
        let out = rw.as_slice_mut().expect("a new array is contiguous");
        py.detach(|| fill(out))
    };
    (arr, r)
}

/// (m, 16) rows filled with the GIL released.
fn rows_out<'py>(py: Python<'py>, m: usize, fill: impl FnOnce(&mut [u8]) + Send) -> Bound<'py, PyArray2<u8>> {
    filled(py, numpy::ndarray::Ix2(m, BLOCK), fill).0
}

/// Asks Linux for transparent huge pages under a large, not yet touched buffer, as numpy does for
/// its arrays (`MADV_HUGEPAGE`; a hint: errors are ignored). With 4 KiB pages, the first-touch
/// faults of a fresh 64 MiB message cost more than computing it.
fn hint_huge_pages(buf: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        const MIN: usize = 4 << 20;
        const PAGE: usize = 4096;
        const MADV_HUGEPAGE: std::os::raw::c_int = 14;
        extern "C" {
            fn madvise(addr: *mut std::os::raw::c_void, len: usize, advice: std::os::raw::c_int) -> std::os::raw::c_int;
        }
        if buf.len() >= MIN {
            let skip = buf.as_ptr().align_offset(PAGE);
            // SAFETY: the range lies inside `buf` and is page-aligned; MADV_HUGEPAGE changes no
            // contents, only how the kernel backs the pages.
            unsafe { madvise(buf.as_mut_ptr().add(skip).cast(), buf.len() - skip, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// A bytes object of `len` bytes written by `fill` (which must write every byte) with the GIL
/// released; `fill`'s error, if any, becomes a ValueError.
fn bytes_out<'py>(py: Python<'py>, len: usize, fill: impl FnOnce(&mut [u8]) -> Result<(), String> + Send)
                  -> PyResult<Bound<'py, PyBytes>> {
    // SAFETY: PyBytes_FromStringAndSize(NULL, n) returns a new, uninitialised bytes object (or
    // NULL with an exception set), which no other code can see until we return it; `fill` writes
    // all of it before that. This skips `PyBytes::new_with`'s memset of tens of MiB under the GIL.
    unsafe {
        let obj = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as pyo3::ffi::Py_ssize_t);
        let bytes = Bound::from_owned_ptr_or_err(py, obj)?.cast_into_unchecked::<PyBytes>();
        let data = std::slice::from_raw_parts_mut(pyo3::ffi::PyBytes_AsString(bytes.as_ptr()) as *mut u8, len);
        hint_huge_pages(data);
        py.detach(|| fill(data)).map_err(value_error)?;
        Ok(bytes)
    }
}

/// The caller's (count, 16) uint8 output array, checked, or a new one.
fn rows_target<'py>(py: Python<'py>, out: Option<Bound<'py, PyArray2<u8>>>, count: usize, what: &str)
                    -> PyResult<Bound<'py, PyArray2<u8>>> {
    match out {
        None => Ok(PyArray2::<u8>::zeros(py, [count, BLOCK], false)),
        Some(a) => {
            if a.shape() != [count, BLOCK] || !a.is_c_contiguous() {
                return Err(PyValueError::new_err(format!(
                    "{what} must be a C-contiguous ({count}, {BLOCK}) uint8 array, got shape {:?}", a.shape())));
            }
            Ok(a)
        }
    }
}

/// The receiver's calls: choice bits and output size. Checked before anything is allocated or
/// the PRG streams move.
fn receiver_checks(r: &iknp::IknpReceiver, choices: &[u8], count: usize) -> PyResult<()> {
    check_size(r.message_len(count) / 8 + count * 2, "the extension")?;
    if choices.len() < count.div_ceil(8) {
        return Err(PyValueError::new_err(format!(
            "{count} OTs need {} bytes of packed choice bits, got {}", count.div_ceil(8), choices.len())));
    }
    Ok(())
}

/// The receiver's fused calls: as [`receiver_checks`], and hash domain and OT indices; returns
/// `start`.
fn fused_checks(r: &iknp::IknpReceiver, choices: &[u8], count: usize, domain: u64, start: u64) -> PyResult<u64> {
    receiver_checks(r, choices, count)?;
    tccr::check_domain(domain).map_err(value_error)?;
    tccr::check_indices(start, count).map_err(value_error)?;
    Ok(start)
}

/// The sender's fused calls: message length, hash domain, OT indices and output size.
fn sender_checks(s: &iknp::IknpSender, u: &[u8], count: usize, domain: u64, start: u64) -> PyResult<u64> {
    check_size(count * 4, "the extension")?;
    s.check_message(u, count).map_err(value_error)?;
    tccr::check_domain(domain).map_err(value_error)?;
    tccr::check_indices(start, count).map_err(value_error)?;
    Ok(start)
}

/// The base-OT sender (Chou–Orlandi on Ristretto255): ``count`` OTs from one message.
#[pyclass(module = "shaper._native")]
struct BaseOtSender {
    inner: base::BaseSender,
}

#[pymethods]
impl BaseOtSender {
    /// ``seed``: 64 random bytes (the secret scalar); ``session``: 16 bytes mixed into every key.
    #[new]
    fn new(count: usize, seed: &[u8], session: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: base::BaseSender::new(count, seed, session).map_err(value_error)? })
    }

    /// A (32 bytes), to the receiver.
    fn message<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.message())
    }

    /// (k0, k1), ``count`` × 16 bytes each, from the receiver's reply (``count`` × 32 bytes).
    /// Once only.
    fn keys<'py>(&mut self, py: Python<'py>, reply: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let inner = &mut self.inner;
        let (k0, k1) = py.detach(|| inner.keys(reply)).map_err(value_error)?;
        Ok((PyBytes::new(py, &k0), PyBytes::new(py, &k1)))
    }
}

/// The base-OT receiver: one choice bit per OT.
#[pyclass(module = "shaper._native")]
struct BaseOtReceiver {
    inner: base::BaseReceiver,
}

#[pymethods]
impl BaseOtReceiver {
    /// ``choices``: ``ceil(count / 8)`` bytes of packed bits; ``seed``: ``count`` × 64 random
    /// bytes; ``session``: 16 bytes (the sender's).
    #[new]
    fn new(choices: &[u8], count: usize, seed: &[u8], session: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: base::BaseReceiver::new(choices, count, seed, session).map_err(value_error)? })
    }

    /// The reply to the sender's message A: ``count`` × 32 bytes. Once only.
    fn reply<'py>(&mut self, py: Python<'py>, message: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let out = py.detach(|| inner.reply(message)).map_err(value_error)?;
        Ok(PyBytes::new(py, &out))
    }

    /// The chosen keys, ``count`` × 16 bytes; only after :meth:`reply`.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &self.inner;
        let k = py.detach(|| inner.keys()).map_err(value_error)?;
        Ok(PyBytes::new(py, &k))
    }
}

/// The IKNP extension receiver (the base-OT sender: holds k0 and k1); base class of
/// `SoftReceiver`, whose methods are these.
#[pyclass(module = "shaper._native", subclass)]
struct IknpReceiver {
    inner: iknp::IknpReceiver,
}

#[pymethods]
impl IknpReceiver {
    /// ``k0``, ``k1``: the base-OT sender's keys, 128 × 16 bytes each.
    #[new]
    fn new(k0: &[u8], k1: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: iknp::IknpReceiver::new(k0, k1).map_err(value_error)? })
    }

    /// ``count`` more OTs with choice bits ``choices`` (uint8 packed, at least ``ceil(count / 8)``
    /// bytes): returns (u, t), u the message to the sender (128/k bits, 16/k bytes, per row of
    /// ``count`` rounded up to 128), t the (count, 16) rows.
    fn extend<'py>(&mut self, py: Python<'py>, choices: PyReadonlyArray1<'_, u8>, count: usize)
                   -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyArray2<u8>>)> {
        let choices = contiguous(&choices, "choices")?;
        receiver_checks(&self.inner, choices, count)?;
        let t = PyArray2::<u8>::zeros(py, [count, BLOCK], false);
        let u = {
            let mut rw = t.readwrite();
            let rows = rw.as_slice_mut().expect("a new array is contiguous");
            let inner = &mut self.inner;
            // every byte of u is written (all 128/k columns of the rounded count)
            bytes_out(py, inner.message_len(count), |u| inner.extend(choices, count, u, rows))?
        };
        Ok((u, t))
    }

    /// :meth:`extend` and :func:`ot_hash` in one pass: returns (u, hashes), hashes the (count, 16)
    /// H(t_j, τ(start + j, 0)) under ``domain``, ``start`` by default :attr:`index` before the
    /// call (what the two-step path passes). Equal to the two steps bit for bit; faster, since
    /// each chunk of t is hashed while in cache and t is never written out.
    ///
    /// ``out``: an optional (count, 16) uint8 C-contiguous array to write the hashes into (and
    /// return); reusing one across calls spares the page faults of a fresh 16 MiB per 2^20 OTs,
    /// which cost a sizeable part of the hashing itself.
    #[pyo3(signature = (choices, count, domain, start=None, out=None))]
    fn extend_hash<'py>(&mut self, py: Python<'py>, choices: PyReadonlyArray1<'_, u8>, count: usize, domain: u64,
                        start: Option<u64>, out: Option<Bound<'py, PyArray2<u8>>>)
                        -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyArray2<u8>>)> {
        let choices = contiguous(&choices, "choices")?;
        let start = fused_checks(&self.inner, choices, count, domain, start.unwrap_or(self.inner.index()))?;
        let h = rows_target(py, out, count, "out")?;
        let u = {
            let mut rw = h.try_readwrite()?;
            let out = rw.as_slice_mut().expect("checked contiguous");
            let inner = &mut self.inner;
            bytes_out(py, inner.message_len(count), |u| inner.extend_hash(choices, count, domain, start, u, out))?
        };
        Ok((u, h))
    }

    /// :meth:`extend` and the receiver's half of :func:`cot_recv` in one pass, for ``count`` =
    /// e·ℓ OTs whose choice bits are the ℓ-bit values of :func:`pack_choice_bits`: returns (u,
    /// pads), pads uint64 (e, k) the sums over each value's ℓ rows of H(t, τ) mod q_c, all the
    /// receiver keeps of t (8 k bytes per value instead of 16 ℓ). :func:`cot_finish` with the
    /// sender's corrections gives exactly ``cot_recv(t, ...)``; ``start`` as for :meth:`extend_hash`.
    /// ``out``: an optional C-contiguous (e, k) uint64 array to write the pads into (and return),
    /// e.g. the slice of the caller's result that :func:`cot_finish` then completes in place.
    #[pyo3(signature = (choices, count, domain, moduli, bits, start=None, out=None))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn extend_cot<'py>(&mut self, py: Python<'py>, choices: PyReadonlyArray1<'_, u8>, count: usize, domain: u64,
                       moduli: PyReadonlyArray1<'_, u64>, bits: usize, start: Option<u64>,
                       out: Option<Bound<'py, PyArray2<u64>>>)
                       -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyArray2<u64>>)> {
        let choices = contiguous(&choices, "choices")?;
        let start = fused_checks(&self.inner, choices, count, domain, start.unwrap_or(self.inner.index()))?;
        cot::check_bits(bits).map_err(value_error)?;
        let m = cot::moduli(contiguous(&moduli, "moduli")?).map_err(value_error)?;
        if !count.is_multiple_of(bits) {
            return Err(PyValueError::new_err(format!("{count} OTs are not whole values of {bits} bits")));
        }
        let (entries, k) = (count / bits, m.len());
        check_size(entries * k, "the pads")?;
        let pads = match out {
            None => PyArray2::<u64>::zeros(py, [entries, k], false),
            Some(a) => {
                if a.shape() != [entries, k] || !a.is_c_contiguous() {
                    return Err(PyValueError::new_err(format!(
                        "out must be a C-contiguous ({entries}, {k}) uint64 array, got shape {:?}", a.shape())));
                }
                a
            }
        };
        let u = {
            let mut rw = pads.try_readwrite()?;
            let out = rw.as_slice_mut().expect("checked contiguous");
            let inner = &mut self.inner;
            bytes_out(py, inner.message_len(count), |u| inner.extend_cot(choices, count, domain, start, &m, bits, u, out))?
        };
        Ok((u, pads))
    }

    /// :meth:`extend` and :func:`ot_bits` in one pass: returns (u, bits), bits uint64
    /// ``ceil(count / 64)`` words; ``start`` as for :meth:`extend_hash`.
    #[pyo3(signature = (choices, count, domain, start=None))]
    fn extend_bits<'py>(&mut self, py: Python<'py>, choices: PyReadonlyArray1<'_, u8>, count: usize, domain: u64,
                        start: Option<u64>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyArray1<u64>>)> {
        let choices = contiguous(&choices, "choices")?;
        let start = fused_checks(&self.inner, choices, count, domain, start.unwrap_or(self.inner.index()))?;
        let b = PyArray1::<u64>::zeros(py, tccr::bit_words(count), false);
        let u = {
            let mut rw = b.readwrite();
            let out = rw.as_slice_mut().expect("a new array is contiguous");
            let inner = &mut self.inner;
            bytes_out(py, inner.message_len(count), |u| inner.extend_bits(choices, count, domain, start, u, out))?
        };
        Ok((u, b))
    }

    /// OTs extended so far (the sum of the rounded counts, with the check's extra rows; the
    /// sender's is the same).
    #[getter]
    fn index(&self) -> u64 {
        self.inner.index()
    }

    /// Whether calls carry the consistency check (see `SoftReceiver`).
    #[getter]
    fn checked(&self) -> bool {
        self.inner.checked()
    }

    /// Base OTs per group: 1 (IKNP), 2 or 4 (SoftSpoken).
    #[getter]
    fn k(&self) -> usize {
        self.inner.k()
    }
}

/// The IKNP extension sender (the base-OT receiver with choice bits Δ: holds k_{Δ_i}); base
/// class of `SoftSender`, whose methods are these.
#[pyclass(module = "shaper._native", subclass)]
struct IknpSender {
    inner: iknp::IknpSender,
}

#[pymethods]
impl IknpSender {
    /// ``keys``: the base-OT receiver's keys (128 × 16 bytes); ``delta``: its 16 bytes of choice
    /// bits (bit i, LSB-first, is base choice i).
    #[new]
    fn new(keys: &[u8], delta: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: iknp::IknpSender::new(keys, delta).map_err(value_error)? })
    }

    /// ``count`` more OTs from the receiver's message ``u``: the (count, 16) rows
    /// q_j = t_j ⊕ b_j·Δ.
    fn extend<'py>(&mut self, py: Python<'py>, u: &[u8], count: usize) -> PyResult<Bound<'py, PyArray2<u8>>> {
        check_size(count * 2, "the extension")?;
        self.inner.check_message(u, count).map_err(value_error)?;
        let inner = &mut self.inner;
        let mut result = Ok(());
        let q = rows_out(py, count, |q| result = inner.extend(u, count, q));
        result.map_err(value_error)?;
        Ok(q)
    }

    /// :meth:`extend` and :func:`ot_hash` (with Δ) in one pass: returns (h0, h1), the (count, 16)
    /// H(q_j, τ) and H(q_j ⊕ Δ, τ), τ = τ(start + j, 0) under ``domain``, ``start`` by default
    /// :attr:`index` before the call. Equal to the two steps bit for bit.
    /// ``out``: an optional pair of (count, 16) uint8 arrays to fill and return (see
    /// :meth:`IknpReceiver.extend_hash`).
    #[pyo3(signature = (u, count, domain, start=None, out=None))]
    #[allow(clippy::type_complexity)]
    fn extend_hash<'py>(&mut self, py: Python<'py>, u: &[u8], count: usize, domain: u64, start: Option<u64>,
                        out: Option<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)>)
                        -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        let start = sender_checks(&self.inner, u, count, domain, start.unwrap_or(self.inner.index()))?;
        let (o0, o1) = out.unzip();
        let (h0, h1) = (rows_target(py, o0, count, "out[0]")?, rows_target(py, o1, count, "out[1]")?);
        if h0.is(&h1) {
            return Err(PyValueError::new_err("out must be two different arrays"));
        }
        {
            let (mut w0, mut w1) = (h0.try_readwrite()?, h1.try_readwrite()?);
            let (out0, out1) = (w0.as_slice_mut().expect("checked contiguous"), w1.as_slice_mut().expect("checked contiguous"));
            let inner = &mut self.inner;
            py.detach(|| inner.extend_hash(u, count, domain, start, out0, out1)).map_err(value_error)?;
        }
        Ok((h0, h1))
    }

    /// :meth:`extend` and :func:`ot_bits` (with Δ) in one pass: returns (m0, m1), uint64
    /// ``ceil(count / 64)`` words each; ``start`` as for :meth:`extend_hash`.
    #[pyo3(signature = (u, count, domain, start=None))]
    #[allow(clippy::type_complexity)]
    fn extend_bits<'py>(&mut self, py: Python<'py>, u: &[u8], count: usize, domain: u64, start: Option<u64>)
                        -> PyResult<(Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>)> {
        let start = sender_checks(&self.inner, u, count, domain, start.unwrap_or(self.inner.index()))?;
        let words = tccr::bit_words(count);
        let b1 = PyArray1::<u64>::zeros(py, words, false);
        let (b0, result) = {
            let mut rw = b1.readwrite();
            let out1 = rw.as_slice_mut().expect("a new array is contiguous");
            let inner = &mut self.inner;
            filled(py, numpy::ndarray::Ix1(words), |out0| inner.extend_bits(u, count, domain, start, out0, out1))
        };
        result.map_err(value_error)?;
        Ok((b0, b1))
    }

    /// :meth:`extend` and :func:`cot_send` in one pass: from the receiver's message ``u`` for
    /// ``count`` = e·ℓ OTs, the offsets uint64 (e, k) and moduli uint64 (k,), returns
    /// (corrections uint64 (e, ℓ, k), share uint64 (e, k)) exactly as ``cot_send(extend(u, count),
    /// Δ, domain, start, offsets, moduli, bits)``; ``start`` as for :meth:`extend_hash`.
    #[pyo3(signature = (u, count, domain, offsets, moduli, bits, start=None))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn extend_cot<'py>(&mut self, py: Python<'py>, u: &[u8], count: usize, domain: u64, offsets: PyReadonlyArray2<'_, u64>,
                       moduli: PyReadonlyArray1<'_, u64>, bits: usize, start: Option<u64>)
                       -> PyResult<(Bound<'py, PyArray3<u64>>, Bound<'py, PyArray2<u64>>)> {
        let start = sender_checks(&self.inner, u, count, domain, start.unwrap_or(self.inner.index()))?;
        cot::check_bits(bits).map_err(value_error)?;
        let m = cot::moduli(contiguous(&moduli, "moduli")?).map_err(value_error)?;
        let (entries, k) = (offsets.shape()[0], m.len());
        if offsets.shape()[1] != k {
            return Err(PyValueError::new_err(format!("offsets must have shape (e, {k}), got {:?}", offsets.shape())));
        }
        if entries.checked_mul(bits) != Some(count) {
            return Err(PyValueError::new_err(format!("{entries} entries of {bits} bits need {} OTs, got {count}",
                                                     entries.saturating_mul(bits))));
        }
        check_size(count * k, "the corrections")?;
        let offs = contiguous(&offsets, "offsets")?;
        cot::check_residues(offs, &m, "offsets").map_err(value_error)?;
        let share = PyArray2::<u64>::zeros(py, [entries, k], false);
        let (corrections, result) = {
            let mut rw = share.readwrite();
            let share = rw.as_slice_mut().expect("a new array is contiguous");
            let inner = &mut self.inner;
            filled(py, numpy::ndarray::Ix3(entries, bits, k),
                   |corr| inner.extend_cot(u, count, domain, start, offs, &m, bits, corr, share))
        };
        result.map_err(value_error)?;
        Ok((corrections, share))
    }

    #[getter]
    fn index(&self) -> u64 {
        self.inner.index()
    }

    /// Whether calls are checked (see `SoftSender`).
    #[getter]
    fn checked(&self) -> bool {
        self.inner.checked()
    }

    /// Whether a call failed the consistency check (every later call raises ValueError).
    #[getter]
    fn failed(&self) -> bool {
        self.inner.failed()
    }

    /// Δ (16 bytes).
    #[getter]
    fn delta<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.delta())
    }

    /// Base OTs per group: 1 (IKNP), 2 or 4 (SoftSpoken).
    #[getter]
    fn k(&self) -> usize {
        self.inner.k()
    }
}

/// The SoftSpoken extension receiver (Roy 2022, repetition code): an :class:`IknpReceiver`
/// whose message is 128/k bits per OT. Same methods, rows and Δ relation; k = 1 is IKNP itself.
/// With ``check`` every call carries the KOS/SoftSpoken consistency check (`crate::ot::check`):
/// 256 more rows and 32 more bytes of message per call.
#[pyclass(module = "shaper._native", extends = IknpReceiver)]
struct SoftReceiver {
    setup: Vec<u8>,
}

#[pymethods]
impl SoftReceiver {
    /// ``k0``, ``k1``: the base-OT sender's keys (128 × 16 bytes each); ``k``: 1, 2 or 4;
    /// ``seed``: 16 random bytes (the roots of the 128/k GGM trees, unused for k = 1, and, hashed
    /// apart, the key of the check's random choice bits); ``check``: None (no check) or the
    /// 16-byte context the sender passes too (the session, pair and direction).
    #[new]
    #[pyo3(signature = (k0, k1, k, seed, check=None))]
    fn new(py: Python<'_>, k0: &[u8], k1: &[u8], k: usize, seed: &[u8], check: Option<&[u8]>)
           -> PyResult<(Self, IknpReceiver)> {
        let (mut inner, setup) = py.detach(|| iknp::IknpReceiver::soft(k0, k1, k, seed)).map_err(value_error)?;
        if let Some(context) = check {
            inner.enable_check(context, seed).map_err(value_error)?;
        }
        Ok((Self { setup }, IknpReceiver { inner }))
    }

    /// The setup message for the sender's constructor (4096 bytes: two 16-byte blocks per base OT;
    /// empty for k = 1). Send it once, before the first extension message.
    #[getter]
    fn setup_message<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.setup)
    }
}

/// The SoftSpoken extension sender: an :class:`IknpSender` set up from the receiver's setup
/// message.
#[pyclass(module = "shaper._native", extends = IknpSender)]
struct SoftSender {}

#[pymethods]
impl SoftSender {
    /// ``keys``: the base-OT receiver's keys (128 × 16 bytes); ``delta``: its 16 bytes of choice
    /// bits (Δ, as for IKNP); ``k``: the receiver's; ``setup_message``: the receiver's
    /// :attr:`SoftReceiver.setup_message`; ``check``: None or the receiver's context. Without the
    /// check a corrupted setup message of the right length is not detected (the OTs then do not
    /// correlate); with it, the first call fails its check (ValueError naming it), as does any
    /// message not made from one vector of choice bits, and the sender refuses every later call.
    #[new]
    #[pyo3(signature = (keys, delta, k, setup_message, check=None))]
    fn new(py: Python<'_>, keys: &[u8], delta: &[u8], k: usize, setup_message: &[u8], check: Option<&[u8]>)
           -> PyResult<(Self, IknpSender)> {
        let mut inner = py.detach(|| iknp::IknpSender::soft(keys, delta, k, setup_message)).map_err(value_error)?;
        if let Some(context) = check {
            inner.enable_check(context).map_err(value_error)?;
        }
        Ok((Self {}, IknpSender { inner }))
    }
}

/// Random OT messages from IKNP rows by the TCCR hash, tweak τ(start + j, 0) under ``domain``
/// (low 8 bits zero): receiver (``delta`` None) the (m, 16) array H(t_j, τ); sender the pair
/// (H(q_j, τ), H(q_j ⊕ Δ, τ)).
#[pyfunction]
#[pyo3(signature = (rows, domain, start, delta=None))]
fn ot_hash<'py>(py: Python<'py>, rows: PyReadonlyArray2<'_, u8>, domain: u64, start: u64, delta: Option<&[u8]>)
                -> PyResult<Bound<'py, PyAny>> {
    let x = self::rows(&rows, "rows")?;
    let m = x.len() / BLOCK;
    tccr::check_domain(domain).map_err(value_error)?;
    tccr::check_indices(start, m).map_err(value_error)?;
    check_size(4 * m, "the hashes")?;
    match delta {
        None => Ok(rows_out(py, m, |out| tccr::hash(x, domain, start, out)).into_any()),
        Some(d) => {
            let d = delta_block(d)?;
            let h1 = PyArray2::<u8>::zeros(py, [m, BLOCK], false);
            let h0 = {
                let mut rw = h1.readwrite();
                let out1 = rw.as_slice_mut().expect("a new array is contiguous");
                rows_out(py, m, |out0| tccr::hash_pair(x, d, domain, start, out0, out1))
            };
            Ok((h0, h1).into_pyobject(py)?.into_any())
        }
    }
}

/// As :func:`ot_hash`, but only the lowest bit of each hash, packed into uint64 words
/// (``ceil(m / 64)``; bit j at ``w[j >> 6] >> (j & 63)``; pad bits zero).
#[pyfunction]
#[pyo3(signature = (rows, domain, start, delta=None))]
fn ot_bits<'py>(py: Python<'py>, rows: PyReadonlyArray2<'_, u8>, domain: u64, start: u64, delta: Option<&[u8]>)
                -> PyResult<Bound<'py, PyAny>> {
    let x = self::rows(&rows, "rows")?;
    let m = x.len() / BLOCK;
    tccr::check_domain(domain).map_err(value_error)?;
    tccr::check_indices(start, m).map_err(value_error)?;
    let words = tccr::bit_words(m);
    match delta {
        None => Ok(filled(py, numpy::ndarray::Ix1(words), |out| tccr::bits(x, domain, start, out)).0.into_any()),
        Some(d) => {
            let d = delta_block(d)?;
            let b1 = PyArray1::<u64>::zeros(py, words, false);
            let b0 = {
                let mut rw = b1.readwrite();
                let out1 = rw.as_slice_mut().expect("a new array is contiguous");
                filled(py, numpy::ndarray::Ix1(words), |out0| tccr::bits_pair(x, d, domain, start, out0, out1)).0
            };
            Ok((b0, b1).into_pyobject(py)?.into_any())
        }
    }
}

/// Checks what both COT halves share: bits, moduli, rows = entries × bits, domain and indices.
fn cot_shape(rows: &[u8], entries: usize, moduli: &PyReadonlyArray1<'_, u64>, bits: usize, domain: u64, start: u64)
             -> PyResult<Vec<cot::Modulus>> {
    cot::check_bits(bits).map_err(value_error)?;
    let m = cot::moduli(contiguous(moduli, "moduli")?).map_err(value_error)?;
    tccr::check_domain(domain).map_err(value_error)?;
    let want = entries.checked_mul(bits).ok_or_else(|| PyValueError::new_err("too many entries"))?;
    if rows.len() / BLOCK != want {
        return Err(PyValueError::new_err(format!(
            "{entries} entries of {bits} bits need {want} OT rows, got {}", rows.len() / BLOCK)));
    }
    tccr::check_indices(start, want).map_err(value_error)?;
    check_size(want * m.len(), "the corrections")?;
    Ok(m)
}

/// Sender half of correlated OT mod q: from IKNP rows ``q`` (e·ℓ, 16), Δ, the offsets uint64
/// (e, k) and the column moduli uint64 (k,) (0 = 2^64, else odd in [3, 2^62)), returns
/// (corrections uint64 (e, ℓ, k), to the receiver; share uint64 (e, k)), with
/// share + receiver's share = offsets[e, c]·x_e mod q_c.
#[pyfunction]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn cot_send<'py>(py: Python<'py>, q: PyReadonlyArray2<'_, u8>, delta: &[u8], domain: u64, start: u64,
                 offsets: PyReadonlyArray2<'_, u64>, moduli: PyReadonlyArray1<'_, u64>, bits: usize)
                 -> PyResult<(Bound<'py, PyArray3<u64>>, Bound<'py, PyArray2<u64>>)> {
    let x = rows(&q, "q")?;
    let d = delta_block(delta)?;
    let entries = offsets.shape()[0];
    let m = cot_shape(x, entries, &moduli, bits, domain, start)?;
    let k = m.len();
    if offsets.shape()[1] != k {
        return Err(PyValueError::new_err(format!("offsets must have shape (e, {k}), got {:?}", offsets.shape())));
    }
    let offs = contiguous(&offsets, "offsets")?;
    cot::check_residues(offs, &m, "offsets").map_err(value_error)?;
    let share = PyArray2::<u64>::zeros(py, [entries, k], false);
    let corrections = {
        let mut rw = share.readwrite();
        let share = rw.as_slice_mut().expect("a new array is contiguous");
        filled(py, numpy::ndarray::Ix3(entries, bits, k), |corr| cot::send(x, d, domain, start, offs, &m, bits, corr, share)).0
    };
    Ok((corrections, share))
}

/// The receiver's checks on its values (each below 2^bits) and the sender's corrections
/// (entries, bits, k), reduced below each modulus; the corrections as a slice.
fn receiver_inputs<'a>(values: &[u64], corrections: &'a PyReadonlyArray3<'_, u64>, m: &[cot::Modulus], bits: usize)
                       -> PyResult<&'a [u64]> {
    let (entries, k) = (values.len(), m.len());
    if corrections.shape() != [entries, bits, k] {
        return Err(PyValueError::new_err(format!(
            "corrections must have shape ({entries}, {bits}, {k}), got {:?}", corrections.shape())));
    }
    cot::check_values(values, bits).map_err(value_error)?;
    let corr = contiguous(corrections, "corrections")?;
    cot::check_residues(corr, m, "corrections").map_err(value_error)?;
    Ok(corr)
}

/// Receiver half: from IKNP rows ``t`` (e·ℓ, 16), its values ``choices`` uint64 (e,) (each below
/// 2^ℓ; their bits were the IKNP choice bits, see :func:`pack_choice_bits`) and the sender's
/// ``corrections`` uint64 (e, ℓ, k), returns its share uint64 (e, k).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cot_recv<'py>(py: Python<'py>, t: PyReadonlyArray2<'_, u8>, domain: u64, start: u64, choices: PyReadonlyArray1<'_, u64>,
                 corrections: PyReadonlyArray3<'_, u64>, moduli: PyReadonlyArray1<'_, u64>, bits: usize)
                 -> PyResult<Bound<'py, PyArray2<u64>>> {
    let x = rows(&t, "t")?;
    let values = contiguous(&choices, "choices")?;
    let entries = values.len();
    let m = cot_shape(x, entries, &moduli, bits, domain, start)?;
    let k = m.len();
    let corr = receiver_inputs(values, &corrections, &m, bits)?;
    Ok(filled(py, numpy::ndarray::Ix2(entries, k), |share| cot::recv(x, domain, start, values, corr, &m, bits, share)).0)
}

/// The receiver's shares from the pads of :meth:`IknpReceiver.extend_cot`, its values uint64 (e,)
/// and the sender's corrections uint64 (e, ℓ, k): completes ``pads`` (e, k) **in place** (and
/// returns it), equal to :func:`cot_recv`'s shares.
#[pyfunction]
fn cot_finish<'py>(py: Python<'py>, pads: Bound<'py, PyArray2<u64>>, values: PyReadonlyArray1<'_, u64>,
                   corrections: PyReadonlyArray3<'_, u64>, moduli: PyReadonlyArray1<'_, u64>, bits: usize)
                   -> PyResult<Bound<'py, PyArray2<u64>>> {
    cot::check_bits(bits).map_err(value_error)?;
    let m = cot::moduli(contiguous(&moduli, "moduli")?).map_err(value_error)?;
    let values = contiguous(&values, "values")?;
    let (entries, k) = (values.len(), m.len());
    if pads.shape() != [entries, k] || !pads.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "pads must be a C-contiguous ({entries}, {k}) uint64 array, got shape {:?}", pads.shape())));
    }
    let corr = receiver_inputs(values, &corrections, &m, bits)?;
    {
        let mut rw = pads.try_readwrite()?;
        let share = rw.as_slice_mut().expect("checked contiguous");
        cot::check_residues(share, &m, "pads").map_err(value_error)?;
        py.detach(|| cot::add_corrections(share, values, corr, &m, bits));
    }
    Ok(pads)
}

/// The receiver's IKNP choice bits for :func:`cot_recv`: bit e·ℓ + i is bit i of ``values[e]``
/// Σ_j s^(m − 1 − j)·row_j over GF(2^128) (the KOS check's field and reduction) for the (m, 16)
/// rows and the 16-byte seed s, as 16 bytes: a random linear combination, zero for a nonzero
/// set of rows with probability at most m / 2^128 over s (the active bits' batched checks).
#[pyfunction]
fn gf128_combine<'py>(py: Python<'py>, rows: PyReadonlyArray2<'_, u8>, seed: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let x = self::rows(&rows, "rows")?;
    let s = delta_block(seed)?;
    let m = x.len() / BLOCK;
    let lead = (16 - m % 16) % 16; // zero rows in front leave the sum as it is
    let acc = py.detach(|| {
        let w = check::Weights::new(s);
        if lead == 0 {
            return w.rows(x);
        }
        let mut first = vec![0u8; 16 * BLOCK];
        let take = (16 - lead).min(m);
        first[(16 - take) * BLOCK..].copy_from_slice(&x[..take * BLOCK]);
        let head = w.rows(&first);
        let rest = &x[(16 - lead).min(m) * BLOCK..];
        if rest.is_empty() {
            return head;
        }
        // head·s^(rows in rest) + rest
        let mut scale = 1u128;
        let mut base = s;
        let mut e = rest.len() / BLOCK;
        while e > 0 {
            if e & 1 == 1 {
                scale = check::gf128::mul(scale, base);
            }
            base = check::gf128::mul(base, base);
            e >>= 1;
        }
        check::gf128::mul(head, scale) ^ w.rows(rest)
    });
    Ok(PyBytes::new(py, &acc.to_le_bytes()))
}

/// a·b over GF(2^128) (16-byte little-endian blocks, the KOS check's reduction).
#[pyfunction]
fn gf128_mul<'py>(py: Python<'py>, a: &[u8], b: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let r = check::gf128::mul(delta_block(a)?, delta_block(b)?);
    Ok(PyBytes::new(py, &r.to_le_bytes()))
}

/// (uint64, each below 2^ℓ), packed LSB-first into uint8 (``ceil(e·ℓ / 8)`` bytes).
#[pyfunction]
fn pack_choice_bits<'py>(py: Python<'py>, values: PyReadonlyArray1<'_, u64>, bits: usize) -> PyResult<Bound<'py, PyArray1<u8>>> {
    cot::check_bits(bits).map_err(value_error)?;
    let v = contiguous(&values, "values")?;
    cot::check_values(v, bits).map_err(value_error)?;
    let len = (v.len() * bits).div_ceil(8);
    Ok(filled(py, numpy::ndarray::Ix1(len), |out| cot::pack_choice_bits(v, bits, out)).0)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BaseOtSender>()?;
    m.add_class::<BaseOtReceiver>()?;
    m.add_class::<IknpReceiver>()?;
    m.add_class::<IknpSender>()?;
    m.add_class::<SoftReceiver>()?;
    m.add_class::<SoftSender>()?;
    m.add_function(wrap_pyfunction!(ot_hash, m)?)?;
    m.add_function(wrap_pyfunction!(ot_bits, m)?)?;
    m.add_function(wrap_pyfunction!(cot_send, m)?)?;
    m.add_function(wrap_pyfunction!(cot_finish, m)?)?;
    m.add_function(wrap_pyfunction!(cot_recv, m)?)?;
    m.add_function(wrap_pyfunction!(pack_choice_bits, m)?)?;
    m.add_function(wrap_pyfunction!(gf128_combine, m)?)?;
    m.add_function(wrap_pyfunction!(gf128_mul, m)?)?;
    Ok(())
}
