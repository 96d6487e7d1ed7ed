//! Loaded programs: `halo.load`, `halo.Module` and its `halo.Function`s.

use crate::array::results_to_python;
use crate::async_call::AsyncCall;
use crate::device::Device;
use crate::errors::IntoPyResult;
use crate::inputs::call_inputs;
use crate::interrupt;
use halo_hal::ResultExt;
use halo_runtime::{CancelToken, Session};
use halo_vm::{BytecodeModule, LoadMode};
use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::path::PathBuf;
use std::sync::Arc;

/// Where a module should run: one device or several, each a URI or a `halo.Device`.
fn devices_of(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Device>> {
    let Some(device) = device else {
        return Ok(vec![Device::create(py, "local-task")?]);
    };
    let one = |item: &Bound<'_, PyAny>| -> PyResult<Device> {
        if let Ok(device) = item.cast::<Device>() {
            return Ok(device.get().clone());
        }
        let uri: String = item.extract().map_err(|_| {
            crate::errors::invalid_argument("device must be a URI string, a halo.Device, or a list of them")
        })?;
        Device::create(py, &uri)
    };
    if device.is_instance_of::<pyo3::types::PyList>() || device.is_instance_of::<PyTuple>() {
        device.try_iter()?.map(|item| one(&item?)).collect()
    } else {
        Ok(vec![one(device)?])
    }
}

/// Loads one or more `.vmfb` files (paths, or a list of them) on `device` (a URI, a
/// `halo.Device`, or a list of them; `local-task` by default) and returns the program. Files
/// are memory-mapped unless `mmap` is false, when they are read into memory (the file may then
/// change or go away).
#[pyfunction]
#[pyo3(signature = (path, device = None, mmap = true))]
pub fn load(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    mmap: bool,
) -> PyResult<Module> {
    let paths: Vec<PathBuf> = match path.extract::<PathBuf>() {
        Ok(one) => vec![one],
        Err(_) => path.extract().map_err(|_| {
            let kind = path.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            PyTypeError::new_err(format!(
                "load takes a module file's path or a list of paths, not a {kind}"
            ))
        })?,
    };
    let devices = devices_of(py, device)?;
    let mode = if mmap { LoadMode::Map } else { LoadMode::Preload };
    load_interruptibly(py, devices, &paths, mode)
}

/// Loads on a thread of its own while this one runs Python's signal handlers every
/// [`SIGNAL_CHECKS`]: a module's initializer is a program too, and Ctrl-C stops one that never
/// ends. No SIGINT action is installed for this (unlike calls, see [`interrupt`]), so a later
/// `asyncio.run`, which installs its own handler, still finds calls' action in front of it.
fn load_interruptibly(py: Python<'_>, devices: Vec<Device>, paths: &[PathBuf], mode: LoadMode) -> PyResult<Module> {
    let cancel = CancelToken::new();
    let (sender, mut loaded) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let cancel = &cancel;
        scope.spawn(move || {
            let _ = sender.send(Module::load(devices, paths, mode, cancel));
        });
        loop {
            // The receiver goes into the wait without the GIL and comes back with the outcome.
            let outcome;
            (outcome, loaded) = py.detach(move || (loaded.recv_timeout(SIGNAL_CHECKS), loaded));
            match outcome {
                Ok(module) => return module.py(),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(raised) = py.check_signals() {
                        // The initializer stops at its next step; its `Cancelled` gives way to
                        // what the handler raised (KeyboardInterrupt).
                        cancel.cancel();
                        py.detach(move || drop(loaded.recv()));
                        return Err(raised);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(PyRuntimeError::new_err("loading the modules ended without an outcome"));
                }
            }
        }
    })
}

/// How often a load checks for Python's signals.
const SIGNAL_CHECKS: std::time::Duration = std::time::Duration::from_millis(50);

/// A program: one or more modules loaded on their devices, with the functions they export.
#[pyclass(frozen, module = "halo")]
pub struct Module {
    session: Arc<Session>,
    /// The default device, as the caller named it.
    device: Device,
    functions: Vec<halo_runtime::Function>,
}

impl Module {
    fn load(devices: Vec<Device>, paths: &[PathBuf], mode: LoadMode, cancel: &CancelToken) -> halo_hal::Result<Module> {
        let mut session = Session::with_devices(devices.iter().map(|d| d.device.clone()).collect())?;
        let mut names = Vec::new();
        for path in paths {
            let loading = || format!("loading module '{}'", path.display());
            let module = Arc::new(BytecodeModule::open(path, mode).with_context(loading)?);
            names.extend(
                module
                    .exports()
                    .iter()
                    .map(|export| export.local_name.to_string())
                    .filter(|name| !name.starts_with("__")),
            );
            session.load_module_cancellable(module, cancel).with_context(loading)?;
        }
        // A name exported twice means the later module's function, as lookups do.
        let mut seen = std::collections::HashSet::new();
        let mut unique: Vec<String> = names
            .into_iter()
            .rev()
            .filter(|name| seen.insert(name.clone()))
            .collect();
        unique.reverse();
        let functions = unique
            .iter()
            .map(|name| session.function(name))
            .collect::<halo_hal::Result<Vec<_>>>()?;
        Ok(Module {
            device: devices[0].clone(),
            session: Arc::new(session),
            functions,
        })
    }

    fn find(&self, name: &str) -> Option<Function> {
        let function = self.functions.iter().find(|f| f.name() == name)?;
        Some(Function {
            session: self.session.clone(),
            function: function.clone(),
        })
    }
}

#[pymethods]
impl Module {
    /// The names of the exported functions.
    #[getter]
    fn functions(&self) -> Vec<String> {
        self.functions.iter().map(|f| f.name().to_string()).collect()
    }

    /// The default device (the first the program was loaded on).
    #[getter]
    fn device(&self) -> Device {
        self.device.clone()
    }

    fn __getattr__(&self, name: &str) -> PyResult<Function> {
        self.find(name).ok_or_else(|| {
            PyAttributeError::new_err(format!(
                "the module exports no function '{name}'; it exports: {}",
                self.functions().join(", ")
            ))
        })
    }

    /// The function `name`, which may be qualified by its module (`module.main`).
    fn __getitem__(&self, name: &str) -> PyResult<Function> {
        if let Some(function) = self.find(name) {
            return Ok(function);
        }
        let function = self.session.function(name).py()?;
        Ok(Function {
            session: self.session.clone(),
            function,
        })
    }

    fn __repr__(&self) -> String {
        format!("halo.Module(functions={:?})", self.functions())
    }
}

/// An exported function; calling it runs the program and waits for its results, with the GIL
/// released meanwhile.
#[pyclass(frozen, module = "halo")]
pub struct Function {
    session: Arc<Session>,
    function: halo_runtime::Function,
}

#[pymethods]
impl Function {
    /// The name it was looked up by.
    #[getter]
    fn name(&self) -> &str {
        self.function.name()
    }

    /// The source-level declaration the compiler recorded
    /// (`sync func @main(%input0: tensor<4xf32>) -> (%output0: tensor<4xf32>)`), if any.
    #[getter]
    fn declaration(&self) -> Option<&str> {
        self.function.declaration()
    }

    /// The VM calling convention (`0rr_r`).
    #[getter]
    fn calling_convention(&self) -> &str {
        self.function.calling_convention()
    }

    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let device = self.session.device();
        let inputs = call_inputs(&self.function, device, args)?;
        let interrupt = interrupt::token_for_call(py)?;
        let results = py.detach(|| match interrupt {
            Some(token) => self.session.call_cancellable(&self.function, &inputs, token),
            None => self.session.call(&self.function, &inputs),
        });
        if interrupt::interrupted(interrupt, &results) {
            py.check_signals()?;
        }
        let results = results.py()?;
        drop(inputs);
        results_to_python(py, device, results)
    }

    /// Starts the call and returns an asyncio future of its results, for `await` on the
    /// running event loop; no thread blocks while the device works.
    #[pyo3(signature = (*args))]
    fn call_async<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let event_loop = AsyncCall::running_loop(py)?;
        let device = self.session.device();
        let inputs = call_inputs(&self.function, device, args)?;
        let call = py.detach(|| self.session.call_async(&self.function, inputs));
        AsyncCall::start(event_loop, call, device.clone())
    }

    fn __repr__(&self) -> String {
        match self.function.declaration() {
            Some(declaration) => format!("halo.Function({declaration})"),
            None => format!(
                "halo.Function({} {})",
                self.function.name(),
                self.function.calling_convention()
            ),
        }
    }
}
