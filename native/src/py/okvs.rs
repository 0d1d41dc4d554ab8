//! Bindings of OT-based PSI (`crate::okvs`): `OkvsItems` (a party's ids hashed and sorted by
//! cluster), `OkvsReceiver` (the OKVS encoder and extension receiver, the party that learns) and
//! `OkvsSender` (the extension sender), batch by batch,
//! and for tests `okvs_rows`, `okvs_encode` and `okvs_code`.
//!
//! Sans I/O as `crate::ot`: bytes and arrays in and out, randomness from the caller. A batch runs
//! on the native pool with the GIL released: its clusters and its six extensions in parallel,
//! which uses a core the peer leaves idle (two parties on two cores mostly alternate).
//! Digests are (n, 16) uint8 C-contiguous arrays; masks come back as (items, mask_bytes) arrays
//! in the party's *sorted* order (`order()` maps sorted positions to item positions).

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::boundary::{check_size, contiguous};
use super::pool;
use crate::okvs::{self, Params};

fn value_error(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn params(p: (usize, usize, usize, usize)) -> PyResult<Params> {
    Params::new(p.0, p.1, p.2, p.3).map_err(value_error)
}

fn seed16(seed: &[u8]) -> PyResult<[u8; 16]> {
    seed.try_into().map_err(|_| PyValueError::new_err(format!("the OKVS seed must be 16 bytes, got {}", seed.len())))
}

fn digests<'a>(arr: &'a PyReadonlyArray2<'_, u8>) -> PyResult<&'a [u8]> {
    if arr.shape()[1] != 16 {
        return Err(PyValueError::new_err(format!("digests must have shape (n, 16), got {:?}", arr.shape())));
    }
    contiguous(arr, "digests")
}

fn order_array<'py>(py: Python<'py>, order: &[u32]) -> Bound<'py, PyArray1<u32>> {
    PyArray1::from_slice(py, order)
}

/// A party's ids under R's seed and OKVS parameters, hashed to rows and sorted by cluster: made
/// while the base OTs run, then handed to :class:`OkvsReceiver` or :class:`OkvsSender` (once).
#[pyclass(module = "shaper._native")]
struct OkvsItems {
    inner: Option<okvs::Items>,
    mask_bytes: usize,
    pad_bytes: usize,
}

#[pymethods]
impl OkvsItems {
    /// ``params``: (clusters, capacity, sparse, dense); ``seed``: R's 16 random bytes;
    /// ``digests``: (n, 16) item digests; ``batch_clusters`` clusters per batch; masks of
    /// ``mask_bytes`` and payload pads of ``pad_bytes`` (labelled PSI; 0 for none) per item.
    #[new]
    #[pyo3(signature = (params, seed, digests, batch_clusters, mask_bytes, pad_bytes=0))]
    fn new(py: Python<'_>, params: (usize, usize, usize, usize), seed: &[u8], digests: PyReadonlyArray2<'_, u8>,
           batch_clusters: usize, mask_bytes: usize, pad_bytes: usize) -> PyResult<Self> {
        let (p, seed, d) = (self::params(params)?, seed16(seed)?, self::digests(&digests)?);
        let inner = py.detach(|| okvs::Items::new(p, &seed, d, batch_clusters, mask_bytes, pad_bytes))
            .map_err(value_error)?;
        Ok(Self { inner: Some(inner), mask_bytes, pad_bytes })
    }
}

impl OkvsItems {
    fn take(&mut self) -> PyResult<(okvs::Items, usize, usize)> {
        let items = self.inner.take().ok_or_else(|| PyValueError::new_err("these OKVS items were used already"))?;
        Ok((items, self.mask_bytes, self.pad_bytes))
    }
}

/// R: encodes its items' OKVS cluster by cluster and receives the subspace-VOLE extension.
#[pyclass(module = "shaper._native")]
struct OkvsReceiver {
    inner: okvs::Receiver,
    setup: Vec<u8>,
    mask_bytes: usize,
    pad_bytes: usize,
}

/// (items, w) arrays of masks and of payload pads, filled by `fill` with the GIL released.
#[allow(clippy::type_complexity)]
fn masks_and_pads<'py>(py: Python<'py>, items: usize, mask_bytes: usize, pad_bytes: usize,
                       fill: impl FnOnce(&mut [u8], &mut [u8]) -> Result<(), String> + Send)
                       -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
    check_size(items * (mask_bytes + pad_bytes) / 8, "the masks")?;
    let masks = PyArray2::<u8>::zeros(py, [items, mask_bytes], false);
    let pads = PyArray2::<u8>::zeros(py, [items, pad_bytes], false);
    {
        let (mut m, mut p) = (masks.readwrite(), pads.readwrite());
        let (m, p) = (m.as_slice_mut().expect("a new array is contiguous"), p.as_slice_mut().expect("contiguous"));
        pool::run(py, || fill(m, p))?.map_err(value_error)?;
    }
    Ok((masks, pads))
}

#[pymethods]
impl OkvsReceiver {
    /// ``items``: R's :class:`OkvsItems`; ``k0s``, ``k1s``: the base-OT sender's keys of the 6
    /// lanes (6 × 2048 bytes each); ``tree_seeds``: 6 × 16 random bytes. ValueError when a
    /// cluster overflows its capacity (below 2^-40 with the protocol's parameters).
    #[new]
    fn new(py: Python<'_>, mut items: PyRefMut<'_, OkvsItems>, k0s: &[u8], k1s: &[u8], tree_seeds: &[u8])
           -> PyResult<Self> {
        let (items, mask_bytes, pad_bytes) = items.take()?;
        let (inner, setup) = py.detach(|| okvs::Receiver::new(items, k0s, k1s, tree_seeds)).map_err(value_error)?;
        Ok(Self { inner, setup, mask_bytes, pad_bytes })
    }

    /// The 6 SoftSpoken setup messages (6 × 4096 bytes), sent once before the first batch.
    #[getter]
    fn setup_message<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.setup)
    }

    #[getter]
    fn batches(&self) -> usize {
        self.inner.shared().batches()
    }

    /// Item positions in sorted (cluster) order: the masks' row k belongs to item order[k].
    fn order<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        order_array(py, self.inner.shared().order())
    }

    /// Sorted positions (start, stop) of batch b's items.
    fn items(&self, b: usize) -> (usize, usize) {
        let r = self.inner.shared().items(b);
        (r.start, r.end)
    }

    /// Bytes of batch b's message.
    fn message_len(&self, b: usize) -> usize {
        self.inner.shared().message_len(b)
    }

    /// Batch b (in order): (the message for S, the masks of this party's items of the batch,
    /// their payload pads: an (items, pad_bytes) array).
    #[allow(clippy::type_complexity)]
    fn batch<'py>(&mut self, py: Python<'py>, b: usize)
                  -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        if b >= self.inner.shared().batches() {
            return Err(PyValueError::new_err(format!("batch {b} of {}", self.inner.shared().batches())));
        }
        let r = self.inner.shared().items(b);
        let mut u = vec![0u8; self.inner.shared().message_len(b)];
        let inner = &mut self.inner;
        let (masks, pads) = masks_and_pads(py, r.len(), self.mask_bytes, self.pad_bytes,
                                           |m, p| inner.batch(b, &mut u, m, p))?;
        Ok((PyBytes::new(py, &u), masks, pads))
    }
}

/// S: the subspace-VOLE extension sender, with Δ over the 6 lanes.
#[pyclass(module = "shaper._native")]
struct OkvsSender {
    inner: okvs::Sender,
    mask_bytes: usize,
    pad_bytes: usize,
}

#[pymethods]
impl OkvsSender {
    /// ``items``: S's :class:`OkvsItems`; ``keys``: the base-OT receiver's keys of the 6 lanes
    /// (6 × 2048 bytes); ``deltas``: their choice bits (6 × 16 bytes, Δ); ``setup``: R's
    /// :attr:`OkvsReceiver.setup_message`.
    #[new]
    fn new(py: Python<'_>, mut items: PyRefMut<'_, OkvsItems>, keys: &[u8], deltas: &[u8], setup: &[u8])
           -> PyResult<Self> {
        let (items, mask_bytes, pad_bytes) = items.take()?;
        let inner = py.detach(|| okvs::Sender::new(items, keys, deltas, setup)).map_err(value_error)?;
        Ok(Self { inner, mask_bytes, pad_bytes })
    }

    #[getter]
    fn batches(&self) -> usize {
        self.inner.shared().batches()
    }

    fn order<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        order_array(py, self.inner.shared().order())
    }

    fn items(&self, b: usize) -> (usize, usize) {
        let r = self.inner.shared().items(b);
        (r.start, r.end)
    }

    fn message_len(&self, b: usize) -> usize {
        self.inner.shared().message_len(b)
    }

    /// Batch b (in order) from R's message ``u``: (the masks of this party's items of the batch,
    /// their payload pads). ValueError when ``u`` has the wrong length.
    #[allow(clippy::type_complexity)]
    fn batch<'py>(&mut self, py: Python<'py>, b: usize, u: &[u8])
                  -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        if b >= self.inner.shared().batches() {
            return Err(PyValueError::new_err(format!("batch {b} of {}", self.inner.shared().batches())));
        }
        let r = self.inner.shared().items(b);
        let inner = &mut self.inner;
        masks_and_pads(py, r.len(), self.mask_bytes, self.pad_bytes, |m, p| inner.batch(b, u, m, p))
    }
}

/// The rows of ``digests`` under ``seed``: (cluster (n,) uint32, sparse positions (n, 3)
/// uint32, dense masks (n,) uint64, values (n,) uint64).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn okvs_rows<'py>(py: Python<'py>, params: (usize, usize, usize, usize), seed: &[u8], digests: PyReadonlyArray2<'_, u8>)
                  -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray2<u32>>, Bound<'py, PyArray1<u64>>,
                               Bound<'py, PyArray1<u64>>)> {
    let (p, seed, d) = (self::params(params)?, seed16(seed)?, self::digests(&digests)?);
    let rows = py.detach(|| okvs::Hasher::new(p, &seed).rows(d));
    let pos: Vec<Vec<u32>> = rows.iter().map(|r| r.pos.to_vec()).collect();
    Ok((PyArray1::from_iter(py, rows.iter().map(|r| r.cluster)),
        PyArray2::from_vec2(py, &pos).map_err(|e| PyValueError::new_err(e.to_string()))?
            .reshape([rows.len(), 3])?,
        PyArray1::from_iter(py, rows.iter().map(|r| r.dense)), PyArray1::from_iter(py, rows.iter().map(|r| r.value))))
}

/// The OKVS of ``digests`` (every cluster encoded, clusters one after another: params.size
/// uint64 values) with Decode(P, x) = the value of x's row. ValueError when a cluster overflows
/// or cannot be encoded.
#[pyfunction]
fn okvs_encode<'py>(py: Python<'py>, params: (usize, usize, usize, usize), seed: &[u8],
                    digests: PyReadonlyArray2<'_, u8>) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let (p, seed, d) = (self::params(params)?, seed16(seed)?, self::digests(&digests)?);
    check_size(p.size(), "the OKVS")?;
    let out = py.detach(|| -> Result<Vec<u64>, String> {
        let part = okvs::Hasher::new(p, &seed).partition(d);
        let mut out = vec![0u64; p.size()];
        let mut scratch = okvs::Scratch::default();
        for (c, o) in out.chunks_exact_mut(p.width()).enumerate() {
            okvs::encode(&p, &part.rows[part.starts[c]..part.starts[c + 1]], o, &mut scratch)?;
        }
        Ok(out)
    }).map_err(value_error)?;
    Ok(PyArray1::from_vec(py, out))
}

/// The codewords C(v) of ``values`` (uint64): (n, 3) uint64, bit i of the codeword at bit
/// i % 64 of word i / 64.
#[pyfunction]
fn okvs_code<'py>(py: Python<'py>, values: PyReadonlyArray1<'_, u64>) -> PyResult<Bound<'py, PyArray2<u64>>> {
    let v = contiguous(&values, "values")?;
    let out: Vec<u64> = v.iter().flat_map(|&x| okvs::code::encode(x)).collect();
    Ok(PyArray1::from_vec(py, out).reshape([v.len(), 3])?)
}

fn masks<'a>(arr: &'a PyReadonlyArray2<'_, u8>, what: &str) -> PyResult<(&'a [u8], usize)> {
    let width = arr.shape()[1];
    if !(1..=16).contains(&width) {
        return Err(PyValueError::new_err(format!("{what} must be an (n, w) array with w ≤ 16, got {:?}", arr.shape())));
    }
    Ok((contiguous(arr, what)?, width))
}

/// The permutation (uint32) that sorts the rows of an (n, w) uint8 array of masks (w ≤ 16) by
/// their bytes; with ``gather``, (the permutation, the masks in that order).
#[pyfunction]
#[pyo3(signature = (masks, gather=false))]
fn okvs_sort<'py>(py: Python<'py>, masks: PyReadonlyArray2<'_, u8>, gather: bool) -> PyResult<Bound<'py, PyAny>> {
    let (m, width) = self::masks(&masks, "masks")?;
    if m.len() / width > u32::MAX as usize {
        return Err(PyValueError::new_err("at most 2^32 masks"));
    }
    let order = pool::run(py, || okvs::sort_masks(m, width))?;
    if !gather {
        return Ok(PyArray1::from_vec(py, order).into_any());
    }
    let sorted = PyArray2::<u8>::zeros(py, [order.len(), width], false);
    {
        let mut rw = sorted.readwrite();
        let out = rw.as_slice_mut().expect("a new array is contiguous");
        pool::run(py, || {
            use rayon::prelude::*;
            out.par_chunks_mut(4096 * width).zip(order.par_chunks(4096)).for_each(|(out, order)| {
                for (o, &i) in out.chunks_exact_mut(width).zip(order) {
                    o.copy_from_slice(&m[i as usize * width..(i as usize + 1) * width]);
                }
            })
        })?;
    }
    Ok((PyArray1::from_vec(py, order), sorted).into_pyobject(py)?.into_any())
}

/// The masks ``own`` (sorted by ``own_order``, uint32, from :func:`okvs_sort`) and ``peer`` (sorted, as
/// the peer sends them) share: (positions in ``own``, positions in ``peer``), int64, ordered by
/// the mask's bytes. ValueError when ``peer`` is not sorted.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn okvs_match<'py>(py: Python<'py>, own: PyReadonlyArray2<'_, u8>, own_order: PyReadonlyArray1<'_, u32>,
                   peer: PyReadonlyArray2<'_, u8>) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>)> {
    let ((a, width), (b, w2)) = (masks(&own, "own")?, masks(&peer, "peer")?);
    let order = contiguous(&own_order, "own_order")?;
    if w2 != width || order.len() != a.len() / width {
        return Err(PyValueError::new_err("own, own_order and peer do not fit together"));
    }
    if let Some(&i) = order.iter().find(|&&i| i as usize >= order.len()) {
        return Err(PyValueError::new_err(format!("own_order holds {i}, outside 0..{}", order.len())));
    }
    let (mine, theirs) = py.detach(|| okvs::match_sorted(a, order, b, width)).map_err(value_error)?;
    Ok((PyArray1::from_iter(py, mine.iter().map(|&i| i as i64)), PyArray1::from_iter(py, theirs.iter().map(|&i| i as i64))))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(okvs_sort, m)?)?;
    m.add_function(wrap_pyfunction!(okvs_match, m)?)?;
    m.add_class::<OkvsItems>()?;
    m.add_class::<OkvsReceiver>()?;
    m.add_class::<OkvsSender>()?;
    m.add_function(wrap_pyfunction!(okvs_rows, m)?)?;
    m.add_function(wrap_pyfunction!(okvs_encode, m)?)?;
    m.add_function(wrap_pyfunction!(okvs_code, m)?)?;
    Ok(())
}
