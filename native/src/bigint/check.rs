//! Checks on the arrays a call brings before any arithmetic runs on them: values reduced modulo
//! the modulus, stored Montgomery rows valid for the engine, CSR index arrays in range. They
//! report the first offending row so that the caller can name it.

use rayon::prelude::*;

use super::engine::{less_than, Engine};

/// Batches of at most this many rows are checked in the calling thread; larger ones in
/// parallel, on the pool the caller installs (see [`wants_pool`]).
const SERIAL_ROWS: usize = 64;

/// Whether checking `len` words of rows `width` words wide is worth the pool: [`first_bad`]
/// runs in parallel exactly then, so the caller installs the pool (and releases the GIL) then.
pub fn wants_pool(len: usize, width: usize) -> bool {
    len > SERIAL_ROWS * width
}

/// Index of the first row of `width` words failing `ok`: serially for small batches, in
/// parallel (rows in chunks of at least 256) for large ones.
pub fn first_bad<F: Fn(&[u64]) -> bool + Sync>(data: &[u64], width: usize, ok: F) -> Option<usize> {
    if !wants_pool(data.len(), width) {
        return data.chunks(width).position(|row| !ok(row));
    }
    data.par_chunks(width).with_min_len(256).position_first(|row| !ok(row))
}

/// Index of the first row (of `m.len()` words) that is not below the modulus `m`.
pub fn first_unreduced(data: &[u64], m: &[u64]) -> Option<usize> {
    first_bad(data, m.len(), |row| less_than(row, m))
}

/// [`first_unreduced`] in the calling thread whatever the size (flat multi-dimensional arrays
/// whose index the caller reports as a flat index).
pub fn first_unreduced_serial(data: &[u64], m: &[u64]) -> Option<usize> {
    data.chunks(m.len()).position(|row| !less_than(row, m))
}

/// Whether `row` is one value reduced modulo `m` (same word count).
pub fn is_reduced(row: &[u64], m: &[u64]) -> bool {
    row.len() == m.len() && less_than(row, m)
}

/// Index of the first row (of `e.mw()` words) that is not a stored Montgomery value of `e`.
pub fn first_not_mont<E: Engine>(e: &E, data: &[u64]) -> Option<usize> {
    first_bad(data, e.mw(), |row| e.mont_ok(row))
}

/// CSR arrays as indices for [`super::algo::prod_rows`]: `indptr` non-empty and non-decreasing
/// within [0, indices.len()], every index in [0, nv). Returns (indices, indptr).
pub fn csr(indices: &[i64], indptr: &[i64], nv: usize) -> Result<(Vec<usize>, Vec<usize>), String> {
    if indptr.is_empty() {
        return Err("indptr must hold at least one entry".into());
    }
    let mut last = 0i64;
    let mut uptr = Vec::with_capacity(indptr.len());
    for (r, &p) in indptr.iter().enumerate() {
        if p < last || p as usize > indices.len() || (r == 0 && p < 0) {
            return Err(format!(
                "indptr must be non-decreasing within [0, {}] (entry {r} is {p})",
                indices.len()
            ));
        }
        last = p;
        uptr.push(p as usize);
    }
    let mut uidx = Vec::with_capacity(indices.len());
    for (k, &i) in indices.iter().enumerate() {
        if i < 0 || i as usize >= nv {
            return Err(format!("index {i} at position {k} is outside [0, {nv})"));
        }
        uidx.push(i as usize);
    }
    Ok((uidx, uptr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bad_row_serial_and_parallel() {
        let m = [10u64, 1];
        for rows in [1usize, 64, 65, 5000] {
            for bad in [rows - 1, rows / 2, 0] {
                let mut data: Vec<u64> = (0..2 * rows).map(|i| 3 * (1 - i as u64 % 2)).collect(); // rows of 3
                assert_eq!(first_unreduced(&data, &m), None);
                assert_eq!(first_unreduced_serial(&data, &m), None);
                data[2 * bad + 1] = 1; // row = 2^64 + 3 < m
                assert_eq!(first_unreduced(&data, &m), None);
                data[2 * bad] = 10; // row = m
                assert_eq!(first_unreduced(&data, &m), Some(bad), "{rows} rows");
                assert_eq!(first_unreduced_serial(&data, &m), Some(bad));
            }
        }
        assert!(!wants_pool(64 * 3, 3) && wants_pool(64 * 3 + 3, 3));
        assert!(is_reduced(&[9, 1], &m) && !is_reduced(&[10, 1], &m) && !is_reduced(&[1], &m));
    }

    #[test]
    fn csr_validation() {
        assert_eq!(csr(&[2, 0, 1], &[0, 2, 2, 3], 3), Ok((vec![2, 0, 1], vec![0, 2, 2, 3])));
        assert_eq!(csr(&[], &[0], 0), Ok((vec![], vec![0])));
        assert_eq!(csr(&[], &[], 1).unwrap_err(), "indptr must hold at least one entry");
        assert_eq!(csr(&[0], &[0, 2], 1).unwrap_err(), "indptr must be non-decreasing within [0, 1] (entry 1 is 2)");
        assert_eq!(csr(&[0, 0], &[-1, 2], 1).unwrap_err(), "indptr must be non-decreasing within [0, 2] (entry 0 is -1)");
        assert_eq!(csr(&[0, 0], &[0, 2, 1], 1).unwrap_err(), "indptr must be non-decreasing within [0, 2] (entry 2 is 1)");
        assert_eq!(csr(&[0, 3], &[0, 2], 3).unwrap_err(), "index 3 at position 1 is outside [0, 3)");
        assert_eq!(csr(&[-1], &[0, 1], 3).unwrap_err(), "index -1 at position 0 is outside [0, 3)");
    }
}
