//! Sessions: devices, a VM context with the `hal` module, and the program's modules.

use crate::call::CallFuture;
use crate::function::{AbiModel, Function};
use crate::instance::Instance;
use crate::tensor;
use halo_hal::{Device, Error, Fence, HostTensor, Result, ResultExt, Timeout};
use halo_hal_module::HalFence;
use halo_vm::interp::Invocation;
use halo_vm::ref_types::Ref;
use halo_vm::{BytecodeModule, CancelToken, Context, LoadMode, Value};
use std::path::Path;
use std::sync::Arc;

/// Loaded modules on one or more devices, ready to call (`iree_runtime_session_t`).
///
/// Ownership: keeps its devices and modules alive; values returned by calls keep what they
/// reference alive independently. Threading: calls may come from any thread; loading modules
/// needs `&mut self`.
pub struct Session {
    devices: Vec<Arc<dyn Device>>,
    context: Context,
}

impl Session {
    /// Creates the devices `uris` name (the first is the default device) and a context holding
    /// the `hal` module over them.
    ///
    /// # Errors
    /// Whatever creating a device fails with (`NotFound` for an unknown driver, listing the
    /// known ones).
    pub fn new(instance: &Instance, uris: &[&str]) -> Result<Session> {
        let devices = uris
            .iter()
            .map(|uri| {
                instance
                    .create_device(uri)
                    .with_context(|| format!("creating device '{uri}'"))
            })
            .collect::<Result<Vec<_>>>()?;
        Session::with_devices(devices)
    }

    /// A session over devices the caller created.
    ///
    /// # Errors
    /// `InvalidArgument` when `devices` is empty.
    pub fn with_devices(devices: Vec<Arc<dyn Device>>) -> Result<Session> {
        if devices.is_empty() {
            return Err(Error::invalid_argument("a session needs at least one device"));
        }
        let mut context = Context::new();
        context.add_native(halo_hal_module::create_module(devices.clone())?)?;
        Ok(Session { devices, context })
    }

    /// The session's devices, in the order programs see them (`hal.devices.get`).
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }

    /// The default device (the first).
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.devices[0]
    }

    /// The VM context, for adding native modules of one's own.
    pub fn context_mut(&mut self) -> &mut Context {
        &mut self.context
    }

    /// Loads a `.vmfb` file (memory-mapped; large constants are used in place) and links it; once
    /// the module is initialized its file pages leave resident memory until a call reads them.
    ///
    /// # Errors
    /// The loader's or verifier's error naming the file; `NotFound` for a missing import; the
    /// module initializer's error (e.g. no device matching what the module was compiled for).
    pub fn load_module_file(&mut self, path: &Path) -> Result<()> {
        self.load_module_file_as(path, LoadMode::Map)
    }

    /// Loads a `.vmfb` file mapped or read into memory as `mode` says, and links it.
    ///
    /// # Errors
    /// As [`Session::load_module_file`].
    pub fn load_module_file_as(&mut self, path: &Path, mode: LoadMode) -> Result<()> {
        let module =
            BytecodeModule::open(path, mode).with_context(|| format!("loading module '{}'", path.display()))?;
        self.load_module(Arc::new(module))
            .with_context(|| format!("loading module '{}'", path.display()))
    }

    /// Links a loaded module and runs its initializer.
    ///
    /// # Errors
    /// As [`Session::load_module_file`].
    pub fn load_module(&mut self, module: Arc<BytecodeModule>) -> Result<()> {
        self.context
            .add_bytecode(module)
            .map_err(|e| self.explain_device_mismatch(e))?;
        Ok(())
    }

    /// [`Session::load_module`], its initializer stopping with `Cancelled` at its next step once
    /// `cancel` is cancelled (a damaged initializer may loop for ever).
    ///
    /// # Errors
    /// As [`Session::load_module`]'s, and `Cancelled`.
    pub fn load_module_cancellable(&mut self, module: Arc<BytecodeModule>, cancel: &CancelToken) -> Result<()> {
        self.context
            .add_bytecode_cancellable(module, cancel)
            .map_err(|e| self.explain_device_mismatch(e))?;
        Ok(())
    }

    /// Adds the session's devices and their executable formats to an initializer's failure to
    /// find the device it was compiled for.
    fn explain_device_mismatch(&self, error: Error) -> Error {
        if !error.message().contains("not found or unavailable") {
            return error;
        }
        let devices: Vec<String> = self
            .devices
            .iter()
            .map(|d| {
                let formats = d
                    .create_executable_cache()
                    .map(|c| c.supported_formats().join(", "))
                    .unwrap_or_default();
                format!("{} (executable formats: {formats})", d.driver_name())
            })
            .collect();
        error.context(format!(
            "looking for it among the session's devices: {}",
            devices.join("; ")
        ))
    }

    /// The exported function `name` (`f` or `module.f`) of the loaded modules.
    ///
    /// # Errors
    /// `NotFound` listing the module's exports.
    pub fn function(&self, name: &str) -> Result<Function> {
        let (module, ordinal) = self.context.lookup(name)?;
        Function::new(name, module, ordinal)
    }

    /// Calls `function` and returns its results once they are ready.
    ///
    /// A coarse-fences function gets an empty wait fence and a new signal fence, which this
    /// waits on.
    ///
    /// # Errors
    /// `InvalidArgument` for inputs that do not match the function; whatever the program or its
    /// queued work fails with, with the function's declaration as context.
    pub fn call(&self, function: &Function, inputs: &[Value]) -> Result<Vec<Value>> {
        self.call_with(function, inputs, None)
    }

    /// Calls `function` as [`Session::call`] does, stopping its program with `Cancelled` at its
    /// next step once `cancel` is cancelled (from another thread), so a program that loops for
    /// ever on its inputs, or waits on a kernel that never returns, gives the calling thread
    /// back. Work already queued on a device runs on (to its end, or until the device is
    /// dropped).
    ///
    /// # Errors
    /// As [`Session::call`]'s, and `Cancelled`.
    pub fn call_cancellable(&self, function: &Function, inputs: &[Value], cancel: &CancelToken) -> Result<Vec<Value>> {
        self.call_with(function, inputs, Some(cancel))
    }

    fn call_with(&self, function: &Function, inputs: &[Value], cancel: Option<&CancelToken>) -> Result<Vec<Value>> {
        let _span = tracing::info_span!("call", function = function.name.as_str()).entered();
        let (outputs, signal) = self.start(function, inputs, cancel)?;
        if let Some(signal) = signal {
            match cancel {
                Some(cancel) => signal.wait_unless(Timeout::Infinite, || cancel.is_cancelled()),
                None => signal.wait(Timeout::Infinite),
            }
            .with_context(|| format!("waiting for the results of '{}'", function.name))?;
        }
        Ok(outputs)
    }

    /// Calls `function`, returning a future of its results.
    ///
    /// No thread blocks on the call: a coarse-fences function is queued on the calling thread
    /// and the future completes when its signal fence is reached; a sync function runs when the
    /// future is polled and suspends at each `hal.fence.await` until the fence is reached.
    pub fn call_async(&self, function: &Function, inputs: Vec<Value>) -> CallFuture {
        match function.abi_model() {
            AbiModel::CoarseFences => match self.start(function, &inputs, None) {
                Err(error) => CallFuture::ready(Err(error)),
                Ok((outputs, Some(signal))) => CallFuture::on_fence(&signal, outputs),
                Ok((outputs, None)) => CallFuture::ready(Ok(outputs)),
            },
            AbiModel::Sync => {
                let started = function
                    .check_inputs(&inputs)
                    .and_then(|()| Invocation::new(function.module.clone(), function.ordinal, &inputs))
                    .with_context(|| format!("calling '{}'{}", function.name, function.declared()));
                match started {
                    Ok(invocation) => CallFuture::on_invocation(invocation),
                    Err(error) => CallFuture::ready(Err(error)),
                }
            }
        }
    }

    /// Checks the inputs and invokes the function; for a coarse-fences function, with fences
    /// appended and the signal fence returned.
    fn start(
        &self,
        function: &Function,
        inputs: &[Value],
        cancel: Option<&CancelToken>,
    ) -> Result<(Vec<Value>, Option<Fence>)> {
        function.check_inputs(inputs)?;
        if function.abi_model() == AbiModel::Sync {
            return Ok((invoke(function, inputs, cancel)?, None));
        }
        let signal = Fence::at(self.device().create_semaphore(0)?, 1);
        let mut arguments = inputs.to_vec();
        arguments.push(Value::Ref(None));
        arguments.push(Value::Ref(Some(Ref::new(HalFence(signal.clone())))));
        Ok((invoke(function, &arguments, cancel)?, Some(signal)))
    }

    /// A buffer view on the default device holding `tensor`, as a call input.
    ///
    /// # Errors
    /// Allocation failures.
    pub fn tensor_input(&self, tensor: &HostTensor) -> Result<Value> {
        tensor::buffer_view_value(self.device().as_ref(), tensor)
    }
}

fn invoke(function: &Function, inputs: &[Value], cancel: Option<&CancelToken>) -> Result<Vec<Value>> {
    let outcome = match cancel {
        Some(cancel) => function.module.invoke_cancellable(function.ordinal, inputs, cancel),
        None => function.module.invoke(function.ordinal, inputs),
    };
    outcome.with_context(|| format!("calling '{}'{}", function.name, function.declared()))
}
