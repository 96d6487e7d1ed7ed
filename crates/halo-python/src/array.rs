//! `halo.Array`: a call's tensor result, kept on its device until it is read; and call results
//! as Python values.

use crate::dtypes::{self, NumpyType};
use crate::errors::{to_py, IntoPyResult};
use halo_hal::{BufferView, Device, MemoryType};
use halo_hal_module::HalBufferView;
use halo_vm::ref_types::List;
use halo_vm::Value;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::{Arc, OnceLock};

/// A tensor on a device. Reading it on the host (`numpy()`, `np.asarray`) shares the device's
/// memory where the host can address it, and copies it once otherwise; passing it back into a
/// call keeps it on the device.
#[pyclass(frozen, module = "halo")]
pub struct Array {
    view: BufferView,
    device: Arc<dyn Device>,
    /// The contents read back, for memory the host cannot address.
    host_copy: OnceLock<Vec<u8>>,
}

impl Array {
    /// An array over `view`, which lives on `device`.
    pub fn new(view: BufferView, device: Arc<dyn Device>) -> Self {
        Array {
            view,
            device,
            host_copy: OnceLock::new(),
        }
    }

    /// The array as a call input.
    pub fn value(&self) -> Value {
        halo_runtime::tensor::view_value(self.view.clone())
    }

    /// The device the array lives on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// The host address of the contents, and whether they are the device's own memory.
    fn host_address(&self) -> PyResult<(usize, bool)> {
        let buffer = self.view.buffer();
        if buffer.validate_memory_type(MemoryType::HOST_VISIBLE).is_ok() {
            if let Ok((ptr, _)) = buffer.host_range(0, self.view.byte_length()) {
                return Ok((ptr.as_ptr() as usize, true));
            }
        }
        if let Some(bytes) = self.host_copy.get() {
            return Ok((bytes.as_ptr() as usize, false));
        }
        let bytes = self.view.to_host(self.device.as_ref()).py()?.bytes;
        Ok((self.host_copy.get_or_init(|| bytes).as_ptr() as usize, false))
    }
}

#[pymethods]
impl Array {
    /// The dimensions, outermost first.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.view.shape())
    }

    /// The NumPy dtype of the elements.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dtypes::dtype_of(py, self.view.element_type())
    }

    /// IREE's name of the element type (`f32`, `i1`, `bf16`).
    #[getter]
    fn element_type(&self) -> String {
        self.view.element_type().to_string()
    }

    /// The size of the contents in bytes.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.view.byte_length()
    }

    /// NumPy's array interface: the contents in place (the device's memory where the host can
    /// address it, else a copy read once).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let typestr = match dtypes::numpy_type_of(self.view.element_type())? {
            NumpyType::Builtin(typestr) | NumpyType::MlDtypes(_, typestr) => typestr,
        };
        let (address, shared) = py.detach(|| self.host_address())?;
        let interface = PyDict::new(py);
        interface.set_item("shape", self.shape(py)?)?;
        interface.set_item("typestr", typestr)?;
        // A copy is read-only so that writes cannot seem to reach the device.
        interface.set_item("data", (address, !shared))?;
        interface.set_item("version", 3)?;
        Ok(interface)
    }

    /// The contents as a NumPy array, sharing the device's memory where the host can address it.
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let array = py.import("numpy")?.call_method1("asarray", (slf,))?;
        match dtypes::numpy_type_of(slf.get().view.element_type())? {
            NumpyType::Builtin(_) => Ok(array),
            NumpyType::MlDtypes(name, _) => array.call_method1("view", (dtypes::ml_dtypes_type(py, name)?,)),
        }
    }

    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut array = Array::numpy(slf)?;
        if let Some(dtype) = dtype {
            array = array.call_method1("astype", (dtype,))?;
        } else if copy == Some(true) {
            array = array.call_method0("copy")?;
        }
        Ok(array)
    }

    /// DLPack export (`torch.from_dlpack(a)`, `np.from_dlpack(a)`): the same memory as
    /// `numpy()`, which the capsule keeps alive.
    #[pyo3(signature = (**kwargs))]
    fn __dlpack__<'py>(slf: &Bound<'py, Self>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        Array::numpy(slf)?.call_method("__dlpack__", (), kwargs)
    }

    /// Where DLPack consumers find the memory: the host (`kDLCPU`, device 0), since `numpy()`
    /// is host memory on every device.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    /// The contents in IREE's text form, as `iree-run-module` prints a buffer view
    /// (`2x2xf32=[1 2][3 4]`), with at most `max_elements` elements.
    #[pyo3(signature = (max_elements = 1024))]
    fn format(&self, py: Python<'_>, max_elements: usize) -> PyResult<String> {
        py.detach(|| self.view.format(self.device.as_ref(), max_elements)).py()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("halo.Array({})", self.format(py, 16)?))
    }
}

/// A call's results as Python values: `None` for none, the value for one, a tuple for more.
pub fn results_to_python(py: Python<'_>, device: &Arc<dyn Device>, results: Vec<Value>) -> PyResult<Py<PyAny>> {
    let mut values = results
        .into_iter()
        .map(|value| value_to_python(py, device, value))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(match values.len() {
        0 => py.None(),
        1 => values.remove(0),
        _ => PyTuple::new(py, values)?.into_any().unbind(),
    })
}

/// One VM value as Python: numbers, `halo.Array` for tensors, lists for lists, `None` for null.
fn value_to_python(py: Python<'_>, device: &Arc<dyn Device>, value: Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::I32(v) => v.into_pyobject(py)?.into_any().unbind(),
        Value::I64(v) => v.into_pyobject(py)?.into_any().unbind(),
        Value::F32(v) => v.into_pyobject(py)?.into_any().unbind(),
        Value::F64(v) => v.into_pyobject(py)?.into_any().unbind(),
        Value::Ref(None) => py.None(),
        Value::Ref(Some(reference)) => {
            if let Some(view) = reference.downcast::<HalBufferView>() {
                Py::new(py, Array::new(view.view().clone(), device.clone()))?.into_any()
            } else if let Some(list) = reference.downcast::<List>() {
                let items = list
                    .to_vec()
                    .into_iter()
                    .map(|item| value_to_python(py, device, item))
                    .collect::<PyResult<Vec<_>>>()?;
                PyList::new(py, items)?.into_any().unbind()
            } else {
                return Err(to_py(halo_hal::Error::unimplemented(format!(
                    "a result of type {} has no Python form",
                    reference.type_name()
                ))));
            }
        }
    })
}
