//! halo's Python package: the `halo._halo` extension module, which `python/halo` re-exports.
//!
//! Who does what:
//! - `device`: drivers, devices, the process's one instance.
//! - `module`: `halo.load`, programs and their functions.
//! - `inputs`: Python arguments as VM values (NumPy arrays in place where they can be).
//! - `compile`: `halo compile` from Python.
//! - `async_call`: calls as asyncio futures.
//! - `array`: `halo.Array` results and results as Python values.
//! - `dtypes`: NumPy dtypes and element types.
//! - `interrupt`: Ctrl-C stopping a call on the main thread.
//! - `numpy_memory`: NumPy arrays' memory (the package's only `unsafe`).
//! - `trace`: timelines for `halo.trace`.
//! - `errors`: the `halo.Error` hierarchy.

mod array;
mod async_call;
mod compile;
mod device;
mod dtypes;
mod errors;
mod inputs;
mod interrupt;
mod module;
mod numpy_memory;
mod trace;

use pyo3::prelude::*;

/// Parses a tensor in IREE's text form (`2x2xf32=1 2 3 4`, as `--input` takes it) into a NumPy
/// array.
#[pyfunction]
fn parse_tensor<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    use errors::IntoPyResult;
    let tensor = halo_hal::HostTensor::parse(text).py()?;
    let dtype = dtypes::dtype_of(py, tensor.element_type)?;
    let bytes = pyo3::types::PyBytes::new(py, &tensor.bytes);
    let flat = py.import("numpy")?.call_method1("frombuffer", (bytes, dtype))?;
    flat.call_method1("reshape", (tensor.shape,))?.call_method0("copy")
}

#[pymodule]
fn _halo(module: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(module)?;
    module.add_class::<device::Device>()?;
    module.add_class::<module::Module>()?;
    module.add_class::<module::Function>()?;
    module.add_class::<array::Array>()?;
    module.add_class::<trace::TraceWriter>()?;
    module.add_function(wrap_pyfunction!(device::drivers, module)?)?;
    module.add_function(wrap_pyfunction!(device::devices, module)?)?;
    module.add_function(wrap_pyfunction!(module::load, module)?)?;
    module.add_function(wrap_pyfunction!(parse_tensor, module)?)?;
    module.add_function(wrap_pyfunction!(compile::compile, module)?)?;
    module.add_function(wrap_pyfunction!(compile::tune, module)?)?;
    module.add_function(wrap_pyfunction!(trace::start_trace, module)?)?;
    Ok(())
}
