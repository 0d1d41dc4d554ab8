//! The native thread pool: `set_threads`, `threads`, and [`run`], which every kernel uses to run
//! on the pool with the GIL released.

use std::sync::{Arc, RwLock};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

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
pub fn run<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, f: F) -> PyResult<T> {
    let p = pool()?;
    Ok(py.detach(move || p.install(f)))
}

/// [`run`] when `pooled`, else `f` right here (work too small for the pool).
pub fn run_if<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, pooled: bool, f: F) -> PyResult<T> {
    if pooled {
        run(py, f)
    } else {
        Ok(f())
    }
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(threads, m)?)?;
    Ok(())
}
