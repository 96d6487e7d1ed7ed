//! Drivers and devices: `halo.drivers()`, `halo.devices()`, `halo.Device`.

use crate::array::Array;
use crate::errors::IntoPyResult;
use halo_runtime::Instance;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, OnceLock};

/// The one instance of the process: every driver this build links.
pub fn instance() -> &'static Instance {
    static INSTANCE: OnceLock<Instance> = OnceLock::new();
    INSTANCE.get_or_init(Instance::new)
}

/// The names of the drivers this build links (`local-sync`, `local-task`, `vulkan`, ...).
#[pyfunction]
pub fn drivers() -> Vec<String> {
    instance().registry().driver_names()
}

/// Every device the drivers can find on this machine, as dicts with `uri`, `driver` and `name`;
/// drivers whose library or hardware is missing contribute none.
#[pyfunction]
pub fn devices(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let found: Vec<(String, String, String)> = py.detach(|| {
        let registry = instance().registry();
        registry
            .driver_names()
            .into_iter()
            .filter_map(|name| {
                let driver = registry.create_driver(&name).ok()?;
                let infos = driver.enumerate_devices().ok()?;
                Some(
                    infos
                        .into_iter()
                        .map(|info| (format!("{name}://{}", info.path), name.clone(), info.name))
                        .collect::<Vec<_>>(),
                )
            })
            .flatten()
            .collect()
    });
    found
        .into_iter()
        .map(|(uri, driver, name)| {
            let dict = PyDict::new(py);
            dict.set_item("uri", uri)?;
            dict.set_item("driver", driver)?;
            dict.set_item("name", name)?;
            Ok(dict)
        })
        .collect()
}

/// A device, created from a URI as the CLI's `--device` takes it (`local-task`,
/// `local-task://?task_topology_group_count=2`, `vulkan://0`).
#[pyclass(frozen, module = "halo")]
#[derive(Clone)]
pub struct Device {
    pub(crate) uri: String,
    pub(crate) device: Arc<dyn halo_hal::Device>,
}

#[pymethods]
impl Device {
    #[new]
    pub fn create(py: Python<'_>, uri: &str) -> PyResult<Self> {
        let device = py.detach(|| instance().create_device(uri)).py()?;
        Ok(Device {
            uri: uri.to_string(),
            device,
        })
    }

    /// The URI the device was created from.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The name of the driver running it.
    #[getter]
    fn driver(&self) -> String {
        self.device.driver_name().to_string()
    }

    /// `array` (anything `numpy.asarray` takes) as a `halo.Array` on this device: an aligned,
    /// C-contiguous NumPy array in native byte order is used in place, anything else is copied
    /// once.
    fn put(&self, array: &Bound<'_, PyAny>) -> PyResult<Array> {
        let view = crate::inputs::array_view(self.device.as_ref(), array)?;
        Ok(Array::new(view, self.device.clone()))
    }

    fn __repr__(&self) -> String {
        format!("halo.Device('{}')", self.uri)
    }
}
