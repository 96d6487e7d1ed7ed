//! Contexts: modules linked together, imports resolved, module state (globals) allocated.
//!
//! Modules are added in dependency order: a bytecode module's imports resolve against the
//! modules added before it, by `module.function` name and calling convention; its initializer
//! (`__init`) runs when it is added.

use crate::cancel::CancelToken;
use crate::cconv::Signature;
use crate::compile::{compile, Function, FunctionSource, ModuleShape};
use crate::module::BytecodeModule;
use crate::native::{NativeFunction, NativeModule};
use crate::ref_types::{Buffer, ElementType, Ref};
use crate::value::Value;
use halo_hal::{Error, Result, ResultExt};
use std::sync::{Arc, Mutex, MutexGuard};

/// Globals of one bytecode module in one context.
pub struct ModuleState {
    bytes: Vec<u8>,
    pub(crate) refs: Vec<Option<Ref>>,
}

impl ModuleState {
    pub(crate) fn load32(&self, offset: usize) -> u32 {
        u32::from_le_bytes(self.bytes[offset..offset + 4].try_into().expect("4 bytes"))
    }
    pub(crate) fn load64(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.bytes[offset..offset + 8].try_into().expect("8 bytes"))
    }
    pub(crate) fn store32(&mut self, offset: usize, value: u32) {
        self.bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
    }
    pub(crate) fn store64(&mut self, offset: usize, value: u64) {
        self.bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    }
    fn range(&self, offset: usize, width: usize) -> Result<std::ops::Range<usize>> {
        match offset.checked_add(width) {
            Some(end) if end <= self.bytes.len() => Ok(offset..end),
            _ => Err(Error::out_of_range(format!(
                "global byte offset {offset} out of range {}",
                self.bytes.len()
            ))),
        }
    }
    pub(crate) fn checked_load32(&self, offset: usize) -> Result<u32> {
        self.range(offset, 4).map(|_| self.load32(offset))
    }
    pub(crate) fn checked_load64(&self, offset: usize) -> Result<u64> {
        self.range(offset, 8).map(|_| self.load64(offset))
    }
    pub(crate) fn checked_store(&mut self, offset: usize, value: &[u8]) -> Result<()> {
        let range = self.range(offset, value.len())?;
        self.bytes[range].copy_from_slice(value);
        Ok(())
    }
}

/// Where an import goes.
#[derive(Clone)]
pub enum ImportTarget {
    /// A native function.
    Native(Arc<NativeFunction>),
    /// An export of another bytecode module.
    Bytecode {
        /// The module.
        instance: Arc<Instance>,
        /// Internal ordinal of the exported function.
        ordinal: u32,
        /// Its calling convention.
        signature: Arc<Signature>,
    },
}

/// A bytecode module linked into a context.
pub struct Instance {
    /// Module name.
    pub name: String,
    module: Arc<BytecodeModule>,
    pub(crate) functions: Vec<Function>,
    signatures: Vec<Option<Arc<Signature>>>,
    pub(crate) types: Vec<String>,
    /// Per type-table entry, the ref type name a value must have (`None`: any ref).
    pub(crate) ref_types: Vec<Option<String>>,
    pub(crate) rodata: Vec<Ref>,
    pub(crate) imports: Vec<Option<ImportTarget>>,
    pub(crate) import_names: Vec<String>,
    state: Mutex<ModuleState>,
    /// Trips through the interpreter's loop one invocation may make (see [`Context::limit_steps`]).
    pub(crate) step_limit: u64,
}

impl Instance {
    /// The loaded module.
    pub fn module(&self) -> &Arc<BytecodeModule> {
        &self.module
    }

    /// Calls internal function `ordinal` (from [`Context::lookup`]) with `args`.
    ///
    /// Threading: any thread; calls into one module serialize on its globals while bytecode
    /// runs, not across imports that release them (queue work, waits).
    ///
    /// # Errors
    /// Argument mismatches as `InvalidArgument`; whatever the function fails with.
    pub fn invoke(self: &Arc<Self>, ordinal: u32, args: &[Value]) -> Result<Vec<Value>> {
        crate::interp::invoke(self, ordinal, args, None)
    }

    /// Calls internal function `ordinal` with `args` as [`Instance::invoke`] does, stopping with
    /// `Cancelled` at its next step once `cancel` is cancelled.
    ///
    /// # Errors
    /// As [`Instance::invoke`]'s, and `Cancelled`.
    pub fn invoke_cancellable(
        self: &Arc<Self>,
        ordinal: u32,
        args: &[Value],
        cancel: &CancelToken,
    ) -> Result<Vec<Value>> {
        crate::interp::invoke(self, ordinal, args, Some(cancel))
    }

    pub(crate) fn lock_state(&self) -> MutexGuard<'_, ModuleState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn signature(&self, ordinal: u32) -> Result<&Arc<Signature>> {
        self.signatures
            .get(ordinal as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                Error::failed_precondition(format!(
                    "function '{}' of module '{}' has no calling convention",
                    self.function_name(ordinal),
                    self.name
                ))
            })
    }

    pub(crate) fn function_name(&self, ordinal: u32) -> String {
        self.module
            .function_name(ordinal)
            .map(str::to_string)
            .unwrap_or_else(|| format!("#{ordinal}"))
    }

    /// What `list.alloc` of type `type_id` holds.
    pub(crate) fn element_type(&self, type_id: u32) -> ElementType {
        let name = self.types.get(type_id as usize).map(String::as_str).unwrap_or("?");
        match name {
            "i8" => ElementType::I8,
            "i16" => ElementType::I16,
            "i32" => ElementType::I32,
            "i64" => ElementType::I64,
            "f32" => ElementType::F32,
            "f64" => ElementType::F64,
            other if is_any_ref(other) => ElementType::Variant,
            other => ElementType::Ref(Some(ref_type_name(other).to_string())),
        }
    }
}

/// Verifies every function of `module` (the bytecode verifier), returning the lowered functions
/// and each function's calling convention. Linking does this; tools and fuzzers may call it alone.
///
/// # Errors
/// `InvalidArgument` naming the function, byte offset and reason.
pub fn verify(module: &BytecodeModule) -> Result<(Vec<Function>, Vec<Option<Signature>>)> {
    let count = module.function_count();
    let signatures: Vec<Option<Signature>> = (0..count)
        .map(|i| {
            module
                .function_signature(i)
                .and_then(|s| s.calling_convention)
                .map(Signature::parse)
                .transpose()
        })
        .collect::<Result<_>>()?;
    let imports: Vec<Option<Signature>> = module
        .imports()
        .iter()
        .map(|import| {
            import
                .calling_convention
                .map(Signature::parse)
                .transpose()
                .with_context(|| format!("import '{}'", import.full_name))
        })
        .collect::<Result<_>>()?;
    let shape = ModuleShape {
        type_count: module.types().len() as u32,
        rodata_count: module.rodata_count(),
        global_bytes: module.global_bytes_capacity(),
        global_refs: module.global_ref_count(),
        functions: &signatures,
        imports: &imports,
    };
    let mut functions = Vec::with_capacity(count as usize);
    for ordinal in 0..count {
        let descriptor = module.function(ordinal).expect("ordinal below the count");
        let name = module
            .function_name(ordinal)
            .map(str::to_string)
            .unwrap_or_else(|| format!("#{ordinal}"));
        let source = FunctionSource {
            name: &name,
            code: module.function_bytecode(ordinal).expect("ordinal below the count"),
            i32_registers: descriptor.i32_register_count,
            ref_registers: descriptor.ref_register_count,
            signature: signatures[ordinal as usize].as_ref(),
        };
        functions.push(compile(&source, &shape)?);
    }
    Ok((functions, signatures))
}

/// True for the type names that accept any ref (`?`, `!vm.ref<?>`, `!vm.opaque`).
fn is_any_ref(name: &str) -> bool {
    matches!(name.trim_start_matches('!'), "?" | "vm.ref<?>" | "vm.opaque")
}

/// `!vm.list<i32>` -> `vm.list`: the registered ref type a type-table entry names.
fn ref_type_name(name: &str) -> &str {
    let name = name.trim_start_matches('!');
    let name = name
        .strip_prefix("vm.ref<")
        .and_then(|n| n.strip_suffix('>'))
        .unwrap_or(name);
    let name = name.trim_start_matches('!');
    name.split('<').next().unwrap_or(name)
}

/// A module in a context.
#[derive(Clone)]
pub enum ContextModule {
    /// A native module.
    Native(Arc<NativeModule>),
    /// A linked bytecode module.
    Bytecode(Arc<Instance>),
}

/// Modules linked together (`iree_vm_context_t`).
///
/// Threading: calls may come from any thread; a module's globals are locked while one of its
/// functions runs (and released while it calls out to an import).
pub struct Context {
    modules: Vec<ContextModule>,
    step_limit: u64,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            modules: Vec::new(),
            step_limit: u64::MAX,
        }
    }
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds the work of every invocation of the bytecode modules added from now on (their
    /// initializers included): each may make at most `steps` trips through the interpreter's
    /// dispatch loop, one per call, return or non-arithmetic instruction and at least one every
    /// few thousand instructions, and fails with `ResourceExhausted` past that. For running
    /// untrusted programs (fuzzing) that may loop forever; unlimited by default.
    pub fn limit_steps(&mut self, steps: u64) {
        self.step_limit = steps;
    }

    /// Adds a native module.
    pub fn add_native(&mut self, module: Arc<NativeModule>) -> Result<()> {
        self.check_unique(module.name())?;
        self.modules.push(ContextModule::Native(module));
        Ok(())
    }

    fn check_unique(&self, name: &str) -> Result<()> {
        if self.find(name).is_some() {
            return Err(Error::already_exists(format!(
                "a module named '{name}' is already in the context"
            )));
        }
        Ok(())
    }

    fn find(&self, name: &str) -> Option<&ContextModule> {
        self.modules.iter().find(|m| match m {
            ContextModule::Native(n) => n.name() == name,
            ContextModule::Bytecode(b) => b.name == name,
        })
    }

    /// Verifies, links and initializes a bytecode module.
    ///
    /// # Errors
    /// `InvalidArgument` from the verifier (naming function, offset and reason); `NotFound` for a
    /// required import or dependency the context lacks; `Incompatible` for an old dependency or a
    /// calling-convention mismatch; whatever the initializer fails with.
    pub fn add_bytecode(&mut self, module: Arc<BytecodeModule>) -> Result<Arc<Instance>> {
        self.add_bytecode_with(module, None)
    }

    /// [`Context::add_bytecode`], its initializer stopping with `Cancelled` at its next step once
    /// `cancel` is cancelled: an initializer is a program, and a damaged one may loop for ever.
    ///
    /// # Errors
    /// As [`Context::add_bytecode`]'s, and `Cancelled`.
    pub fn add_bytecode_cancellable(
        &mut self,
        module: Arc<BytecodeModule>,
        cancel: &CancelToken,
    ) -> Result<Arc<Instance>> {
        self.add_bytecode_with(module, Some(cancel))
    }

    fn add_bytecode_with(
        &mut self,
        module: Arc<BytecodeModule>,
        cancel: Option<&CancelToken>,
    ) -> Result<Arc<Instance>> {
        let name = module.name().to_string();
        self.check_unique(&name)?;
        let instance = Arc::new(self.link(module).with_context(|| format!("loading module '{name}'"))?);
        if let Some(init) = instance.module.find_export("__init") {
            crate::interp::invoke(&instance, init.internal_ordinal, &[], cancel)
                .with_context(|| format!("initializing module '{name}'"))?;
            // The initializer has read what it repacks; what calls still read faults back in.
            // A refusal only leaves the pages resident, so it is not the caller's error.
            if let Err(error) = instance.module.bytes().release_resident_pages() {
                tracing::debug!(module = %name, %error, "module file pages stay resident");
            }
        }
        self.modules.push(ContextModule::Bytecode(instance.clone()));
        Ok(instance)
    }

    fn link(&self, module: Arc<BytecodeModule>) -> Result<Instance> {
        for dependency in module.dependencies() {
            match self.find(dependency.name) {
                None if dependency.optional => {}
                None => {
                    return Err(Error::not_found(format!(
                        "required module '{}' is not in the context",
                        dependency.name
                    )))
                }
                Some(found) => {
                    let version = match found {
                        ContextModule::Native(n) => n.version(),
                        ContextModule::Bytecode(b) => b.module.version(),
                    };
                    if version < dependency.minimum_version {
                        return Err(Error::incompatible(format!(
                            "module '{}' is version {version}; at least {} is required",
                            dependency.name, dependency.minimum_version
                        )));
                    }
                }
            }
        }
        let mut imports = Vec::new();
        let mut import_names = Vec::new();
        for import in module.imports() {
            let target = self.resolve(import.full_name, import.calling_convention)?;
            if target.is_none() && !import.optional {
                return Err(Error::not_found(format!(
                    "required import '{}' is not provided by any module",
                    import.full_name
                )));
            }
            imports.push(target);
            import_names.push(import.full_name.to_string());
        }
        let (functions, signatures) = verify(&module)?;
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = module.bytes().clone();
        let rodata = (0..module.rodata_count())
            .map(|i| {
                Ref::new(Buffer::read_only(
                    owner.clone(),
                    module.rodata_range(i).expect("ordinal below the count"),
                ))
            })
            .collect();
        // Both sizes come from the module file: allocated fallibly.
        let ref_count = module.global_ref_count() as usize;
        let mut refs = Vec::new();
        refs.try_reserve_exact(ref_count).map_err(|_| {
            Error::resource_exhausted(format!(
                "cannot allocate {ref_count} ref globals of module '{}'",
                module.name()
            ))
        })?;
        refs.resize(ref_count, None);
        let state = ModuleState {
            bytes: halo_hal::host_memory::zeroed_vec(module.global_bytes_capacity() as usize, "the module's globals")?,
            refs,
        };
        Ok(Instance {
            name: module.name().to_string(),
            types: module.types().into_iter().map(str::to_string).collect(),
            ref_types: module
                .types()
                .into_iter()
                .map(|name| (!is_any_ref(name)).then(|| ref_type_name(name).to_string()))
                .collect(),
            functions,
            signatures: signatures.into_iter().map(|s| s.map(Arc::new)).collect(),
            rodata,
            imports,
            import_names,
            state: Mutex::new(state),
            module,
            step_limit: self.step_limit,
        })
    }

    fn resolve(&self, full_name: &str, cconv: Option<&str>) -> Result<Option<ImportTarget>> {
        let Some((module_name, function_name)) = full_name.split_once('.') else {
            return Err(Error::invalid_argument(format!(
                "import '{full_name}' has no module prefix"
            )));
        };
        let target = match self.find(module_name) {
            None => return Ok(None),
            Some(ContextModule::Native(native)) => match native.function(function_name) {
                None => return Ok(None),
                Some(function) => ImportTarget::Native(function.clone()),
            },
            Some(ContextModule::Bytecode(instance)) => match instance.module.find_export(function_name) {
                None => return Ok(None),
                Some(export) => {
                    let signature = instance.signature(export.internal_ordinal)?.clone();
                    ImportTarget::Bytecode {
                        instance: instance.clone(),
                        ordinal: export.internal_ordinal,
                        signature,
                    }
                }
            },
        };
        let provided = match &target {
            ImportTarget::Native(f) => &f.signature.text,
            ImportTarget::Bytecode { signature, .. } => &signature.text,
        };
        if let Some(expected) = cconv {
            if expected != provided {
                return Err(Error::incompatible(format!(
                    "import '{full_name}' expects calling convention '{expected}' but the module provides '{provided}'"
                )));
            }
        }
        Ok(Some(target))
    }

    /// Calls `module.function` (or `function` of the last bytecode module) with `args`.
    ///
    /// # Errors
    /// `NotFound` naming the function and listing the exports; argument mismatches as
    /// `InvalidArgument`; whatever the function fails with.
    pub fn invoke(&self, name: &str, args: &[Value]) -> Result<Vec<Value>> {
        let (instance, ordinal) = self.lookup(name)?;
        crate::interp::invoke(&instance, ordinal, args, None)
    }

    /// The module and internal ordinal of an exported function.
    pub fn lookup(&self, name: &str) -> Result<(Arc<Instance>, u32)> {
        let (module_name, function_name) = match name.split_once('.') {
            Some((m, f)) if self.find(m).is_some() => (Some(m), f),
            _ => (None, name),
        };
        let instance = self
            .modules
            .iter()
            .rev()
            .filter_map(|m| match m {
                ContextModule::Bytecode(b) if module_name.is_none_or(|n| n == b.name) => Some(b),
                _ => None,
            })
            .next()
            .ok_or_else(|| Error::not_found(format!("no bytecode module provides '{name}'")))?;
        let export = instance.module.find_export(function_name).ok_or_else(|| {
            let exports: Vec<String> = instance
                .module
                .exports()
                .iter()
                .map(|e| e.local_name.to_string())
                .collect();
            Error::not_found(format!(
                "module '{}' exports no function '{function_name}'; exports: {}",
                instance.name,
                exports.join(", ")
            ))
        })?;
        Ok((instance.clone(), export.internal_ordinal))
    }

    /// The modules, in the order they were added.
    pub fn modules(&self) -> &[ContextModule] {
        &self.modules
    }
}
