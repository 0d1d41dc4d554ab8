//! What every binding checks on arrays crossing the boundary: contiguity and alignment, and an
//! upper bound on what one call may allocate.

use numpy::{PyArrayMethods, PyReadonlyArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The array's data as a slice: it must be C-contiguous (row-major; a Fortran-ordered array
/// would be read in the wrong order) and aligned for its element type.
pub fn contiguous<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    arr: &'a PyReadonlyArray<'_, T, D>,
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

pub fn check_size(words: usize, what: &str) -> PyResult<()> {
    if words > MAX_WORDS {
        return Err(PyValueError::new_err(format!("{what} would need more than 8 GiB")));
    }
    Ok(())
}
