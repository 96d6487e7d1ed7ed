//! Python call arguments as VM values: numbers for scalar inputs; `halo.Array`s, NumPy arrays,
//! DLPack producers and anything `numpy.asarray` takes for tensors.
//!
//! A C-contiguous NumPy array in native byte order whose data is aligned as kernels expect
//! ([`HOST_ALIGNMENT`] bytes) becomes the buffer itself; other arrays are copied once.

use crate::array::Array;
use crate::dtypes::element_type_of;
use crate::errors::{invalid_argument, IntoPyResult};
use crate::numpy_memory::{self, LentArray};
use halo_hal::buffer_view::Encoding;
use halo_hal::host_memory::HOST_ALIGNMENT;
use halo_hal::{BufferParams, BufferView, Device};
use halo_runtime::Function;
use halo_vm::Value;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;

/// The call inputs `args` stand for, by the kinds `function` takes; extra arguments are
/// converted as tensors so that the runtime's count check names the function.
pub fn call_inputs(function: &Function, device: &Arc<dyn Device>, args: &Bound<'_, PyTuple>) -> PyResult<Vec<Value>> {
    let kinds = function.argument_kinds();
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            let kind = kinds.get(index).copied().unwrap_or('r');
            input(kind, device, &arg).map_err(|error| {
                let message = format!("input {index} of '{}'", function.name());
                chain(arg.py(), error, message)
            })
        })
        .collect()
}

/// Adds "while converting `what`" to a conversion error, keeping its class and status code.
///
/// The error is made anew from the longer message where its class takes one message; any other
/// class (NumPy's out-of-memory error takes a shape and a dtype) keeps the error as raised, with
/// the context as a note where Python has notes (3.11 on): making it from a message alone would
/// raise a `TypeError` about the constructor instead.
fn chain(py: Python<'_>, error: PyErr, what: String) -> PyErr {
    let message = format!("{}; while converting {what}", error.value(py));
    let Ok(value) = error.get_type(py).call1((message,)) else {
        let _ = error
            .value(py)
            .call_method1("add_note", (format!("while converting {what}"),));
        return error;
    };
    if let Ok(code) = error.value(py).getattr("code") {
        let _ = value.setattr("code", code);
    }
    PyErr::from_value(value)
}

fn input(kind: char, device: &Arc<dyn Device>, arg: &Bound<'_, PyAny>) -> PyResult<Value> {
    let number = |what: &str| {
        invalid_argument(format!(
            "the function takes {what} here, not a {}",
            arg.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    };
    Ok(match kind {
        'i' => {
            let v: i64 = arg.extract().map_err(|_| number("an integer (i32)"))?;
            Value::I32(i32::try_from(v).map_err(|_| invalid_argument(format!("{v} does not fit in an i32")))?)
        }
        'I' => Value::I64(arg.extract().map_err(|_| number("an integer (i64)"))?),
        'f' => Value::F32(arg.extract::<f64>().map_err(|_| number("a float (f32)"))? as f32),
        'F' => Value::F64(arg.extract().map_err(|_| number("a float (f64)"))?),
        _ => tensor_input(device, arg)?,
    })
}

/// A reference input: `None`, a `halo.Array`, or an array NumPy can make of `arg`.
fn tensor_input(device: &Arc<dyn Device>, arg: &Bound<'_, PyAny>) -> PyResult<Value> {
    if arg.is_none() {
        return Ok(Value::Ref(None));
    }
    if let Ok(array) = arg.cast::<Array>() {
        return Ok(array.get().value());
    }
    Ok(halo_runtime::tensor::view_value(array_view(device.as_ref(), arg)?))
}

/// A buffer view on `device` of what `numpy.asarray` makes of `arg`.
pub fn array_view(device: &dyn Device, arg: &Bound<'_, PyAny>) -> PyResult<BufferView> {
    let array = match arg.cast::<PyUntypedArray>() {
        Ok(array) => array.clone(),
        Err(_) => {
            let numpy = arg.py().import("numpy")?;
            // DLPack producers (PyTorch, JAX on the CPU) are viewed without a copy.
            let converter = if arg.hasattr("__dlpack__")? {
                "from_dlpack"
            } else {
                "asarray"
            };
            numpy.call_method1(converter, (arg,))?.cast_into::<PyUntypedArray>()?
        }
    };
    import_array(device, &array)
}

/// A buffer view over `array`: its own memory where layout, byte order and alignment allow,
/// else a copy.
fn import_array(device: &dyn Device, array: &Bound<'_, PyUntypedArray>) -> PyResult<BufferView> {
    let element_type = element_type_of(&array.dtype())?;
    let shape: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
    let native = array.dtype().is_native_byteorder() != Some(false);
    let in_place =
        native && array.is_c_contiguous() && numpy_memory::data_address(array).is_multiple_of(HOST_ALIGNMENT);
    let buffer = if in_place {
        device
            .allocator()
            .import_host(BufferParams::host_mappable(), Box::new(LentArray::new(array)))
            .py()?
    } else {
        let numpy = array.py().import("numpy")?;
        let native_dtype = array.dtype().call_method1("newbyteorder", ("=",))?;
        let contiguous = numpy
            .call_method1("ascontiguousarray", (array, native_dtype))?
            .cast_into::<PyUntypedArray>()?;
        let bytes = numpy_memory::contiguous_bytes(&contiguous);
        let buffer = device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), bytes.len() as u64)
            .py()?;
        buffer.map_write(0, bytes).py()?;
        buffer
    };
    BufferView::new(buffer, &shape, element_type, Encoding::DenseRowMajor).py()
}
