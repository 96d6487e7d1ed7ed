//! Native modules: functions written in Rust that bytecode imports by name.
//!
//! A native function reads its arguments through [`Args`] in calling-convention order (variadic
//! segments flattened) and returns its results as [`Value`](crate::Value)s; the VM checks both
//! against the declared convention.

mod args;

use crate::cconv::Signature;
use crate::value::Results;
use halo_hal::{Error, Fence, Result};
use std::sync::Arc;

pub use args::Args;

/// The Rust side of a native function.
pub type NativeFn = Arc<dyn Fn(&Args<'_>) -> Result<Results> + Send + Sync>;

/// What a waiting native function would wait for, given its arguments (`None`: nothing).
pub type WaitFn = Arc<dyn Fn(&Args<'_>) -> Result<Option<Fence>> + Send + Sync>;

/// One function of a native module.
pub struct NativeFunction {
    /// Name within the module (`buffer_view.create`).
    pub name: String,
    /// Calling convention.
    pub signature: Signature,
    /// Implementation.
    pub function: NativeFn,
    /// Whether callers release their module state across the call: it may call back into the VM
    /// (see [`NativeModuleBuilder::leaf`]), wait, or run long (see
    /// [`NativeModuleBuilder::blocking_function`]).
    pub releases_state: bool,
    /// For functions that block until a fence is reached: the fence, so a yielding invocation
    /// suspends instead of calling the function before the fence is reached.
    pub wait: Option<WaitFn>,
}

/// A module implemented in Rust (IREE's native module).
pub struct NativeModule {
    name: String,
    version: u32,
    functions: Vec<Arc<NativeFunction>>,
    reentrant: bool,
}

impl NativeModule {
    /// Starts a module called `name` with `version` (checked against importers' minimum versions).
    pub fn builder(name: &str, version: u32) -> NativeModuleBuilder {
        NativeModuleBuilder {
            module: NativeModule {
                name: name.to_string(),
                version,
                functions: Vec::new(),
                reentrant: true,
            },
        }
    }

    /// Module name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Module version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The function called `name`.
    pub fn function(&self, name: &str) -> Option<&Arc<NativeFunction>> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// All functions.
    pub fn functions(&self) -> &[Arc<NativeFunction>] {
        &self.functions
    }
}

/// Builds a [`NativeModule`].
pub struct NativeModuleBuilder {
    module: NativeModule,
}

impl NativeModuleBuilder {
    /// Declares that the module's functions never call back into the VM (no invocation of a
    /// bytecode function from inside them), so a caller may keep its module state locked across
    /// the call instead of releasing and retaking it. Call before adding functions.
    pub fn leaf(mut self) -> Self {
        self.module.reentrant = false;
        self
    }

    /// Adds `name` with calling convention `cconv` implemented by `function`.
    ///
    /// # Errors
    /// `InvalidArgument` for a malformed convention or a duplicate name.
    pub fn function(
        self,
        name: &str,
        cconv: &str,
        function: impl Fn(&Args<'_>) -> Result<Results> + Send + Sync + 'static,
    ) -> Result<Self> {
        let releases_state = self.module.reentrant;
        self.add(name, cconv, Arc::new(function), None, releases_state)
    }

    /// Adds a function that may block or run long on the calling thread (queue work that a
    /// device runs inline, file I/O): even in a [`leaf`](NativeModuleBuilder::leaf) module,
    /// callers release their module state across it, so other invocations of that module run
    /// meanwhile instead of queueing behind the lock.
    ///
    /// # Errors
    /// As [`NativeModuleBuilder::function`].
    pub fn blocking_function(
        self,
        name: &str,
        cconv: &str,
        function: impl Fn(&Args<'_>) -> Result<Results> + Send + Sync + 'static,
    ) -> Result<Self> {
        self.add(name, cconv, Arc::new(function), None, true)
    }

    /// Adds a function that blocks until a fence is reached (IREE's `vm.yield` imports, such as
    /// `hal.fence.await`): `wait` names the fence from the arguments, and an invocation that may
    /// yield ([`crate::interp::Invocation`]) suspends until it is reached and only then calls
    /// `function`, which no longer blocks. Blocking invocations call `function` directly.
    ///
    /// # Errors
    /// As [`NativeModuleBuilder::function`].
    pub fn waiting_function(
        self,
        name: &str,
        cconv: &str,
        wait: impl Fn(&Args<'_>) -> Result<Option<Fence>> + Send + Sync + 'static,
        function: impl Fn(&Args<'_>) -> Result<Results> + Send + Sync + 'static,
    ) -> Result<Self> {
        // A blocking invocation calls it directly, and it blocks: the state is released then.
        self.add(name, cconv, Arc::new(function), Some(Arc::new(wait)), true)
    }

    fn add(
        mut self,
        name: &str,
        cconv: &str,
        function: NativeFn,
        wait: Option<WaitFn>,
        releases_state: bool,
    ) -> Result<Self> {
        if self.module.function(name).is_some() {
            return Err(Error::invalid_argument(format!(
                "module '{}' defines '{name}' twice",
                self.module.name
            )));
        }
        let signature = Signature::parse(cconv)?;
        self.module.functions.push(Arc::new(NativeFunction {
            name: name.to_string(),
            signature,
            function,
            releases_state,
            wait,
        }));
        Ok(self)
    }

    /// The finished module.
    pub fn build(self) -> Arc<NativeModule> {
        Arc::new(self.module)
    }
}
