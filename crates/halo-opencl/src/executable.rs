//! Executables: `vulkan-spirv-fb` programs, their SPIR-V translated to OpenCL C
//! (`halo-spirv-opencl`) and built for the device, one kernel per export.

use crate::api::cl_error;
use crate::device::DeviceShared;
use halo_hal::{Error, Executable, ExecutableCache, ExecutableParams, ExportInfo, Result};
use halo_spirv_check::CheckedModule;
use halo_spirv_fb::{SpirvExecutable, FORMAT};
use halo_spirv_opencl::{translate, Binding, Options, Translation};
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One export: its kernel and what its arguments are.
pub(crate) struct Export {
    pub(crate) info: ExportInfo,
    /// Set by the submission thread only; a lock keeps the kernel's arguments its own per launch.
    kernel: Mutex<Kernel>,
    /// For each kernel buffer argument, the HAL binding ordinal that fills it.
    pub(crate) arguments: Vec<usize>,
    /// Bytes of the push constant struct the kernel takes by value.
    pub(crate) push_constant_bytes: usize,
}

impl Export {
    pub(crate) fn kernel(&self) -> MutexGuard<'_, Kernel> {
        self.kernel.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A `vulkan-spirv-fb` executable built for one OpenCL device.
///
/// Ownership: keeps its device's context alive. Threading: any thread.
pub struct OpenClExecutable {
    shared: Arc<DeviceShared>,
    exports: Vec<Export>,
    /// Held so that the device's program cache hands them to later loads of the same code.
    _programs: Vec<Arc<Program>>,
}

impl OpenClExecutable {
    /// Export `ordinal`, checking that the executable is on the device `shared`.
    pub(crate) fn export(&self, ordinal: u32, shared: &DeviceShared) -> Result<&Export> {
        if !std::ptr::eq(&*self.shared, shared) {
            return Err(Error::invalid_argument(
                "the executable belongs to another OpenCL device",
            ));
        }
        self.exports.get(ordinal as usize).ok_or_else(|| {
            Error::out_of_range(format!(
                "export ordinal {ordinal} is out of range; the executable has {} exports",
                self.exports.len()
            ))
        })
    }

    fn load(shared: Arc<DeviceShared>, data: &[u8], constants: &[u32]) -> Result<Self> {
        let def = halo_spirv_fb::decode(data)?;
        let options = Options {
            specialization: constants.to_vec(),
            ..shared.translation.clone()
        };
        // One translation and one program per SPIR-V module, however many exports it holds.
        let mut modules: Vec<Option<Module>> = def.modules.iter().map(|_| None).collect();
        let exports = (0..def.exports.len())
            .map(|ordinal| {
                build_export(&shared, &def, ordinal, &options, &mut modules)
                    .map_err(|e| e.context(format!("preparing export {ordinal} ('{}')", def.exports[ordinal].name)))
            })
            .collect::<Result<Vec<_>>>()?;
        let programs = modules.into_iter().flatten().filter_map(|m| m.program).collect();
        Ok(OpenClExecutable {
            shared,
            exports,
            _programs: programs,
        })
    }
}

/// The newest SPIR-V version the translator reads: what `iree-compile` emits for Vulkan 1.3.
const MAX_SPIRV_VERSION: u32 = 0x0001_0600;

/// A SPIR-V module translated, and built once an export of it is.
struct Module {
    translation: Translation,
    program: Option<Arc<Program>>,
}

fn build_export(
    shared: &DeviceShared,
    def: &SpirvExecutable,
    ordinal: usize,
    options: &Options,
    modules: &mut [Option<Module>],
) -> Result<Export> {
    let export = &def.exports[ordinal];
    if export.subgroup_size != 0 && export.subgroup_size != options.subgroup_size {
        return Err(Error::unimplemented(format!(
            "'{}' requires subgroup size {}; this device emulates {} (URI parameter subgroup_size)",
            export.entry_point, export.subgroup_size, options.subgroup_size
        )));
    }
    let module = match &mut modules[export.module] {
        Some(module) => module,
        empty => {
            let words = &def.modules[export.module];
            // The Vulkan driver's checks first: the translator trusts its SPIR-V, and a damaged
            // module could become valid but wrong OpenCL C (a branch on a condition that is not
            // a boolean became a loop that never ends).
            CheckedModule::new(words.clone(), MAX_SPIRV_VERSION)
                .map_err(|e| e.context(format!("checking shader module {}", export.module)))?;
            empty.insert(Module {
                translation: translate(words, options)?,
                program: None,
            })
        }
    };
    let kernel_info = module
        .translation
        .kernels
        .iter()
        .find(|k| k.entry_point == export.entry_point)
        .ok_or_else(|| Error::invalid_argument(format!("SPIR-V has no entry point '{}'", export.entry_point)))?;
    let arguments = kernel_info
        .bindings
        .iter()
        .map(|Binding { set, binding }| {
            export
                .bindings
                .iter()
                .position(|slot| slot.set == *set && slot.binding == *binding)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "SPIR-V uses set {set} binding {binding}, which the pipeline layout does not declare"
                    ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let push_constant_bytes = kernel_info.push_constant_bytes as usize;
    if push_constant_bytes > 4 * export.constant_count as usize {
        return Err(Error::invalid_argument(format!(
            "SPIR-V push constants take {push_constant_bytes} bytes; the layout declares {} constants",
            export.constant_count
        )));
    }
    let [x, y, z] = kernel_info.workgroup_size;
    if u64::from(x) * u64::from(y) * u64::from(z) > shared.max_workgroup_size as u64 {
        return Err(Error::resource_exhausted(format!(
            "'{}' has workgroups of {x}x{y}x{z}; the device runs at most {} work-items a group",
            export.entry_point, shared.max_workgroup_size
        )));
    }
    let program = match &mut module.program {
        Some(program) => program,
        empty => empty.insert(shared.programs.build(
            &shared.context,
            &module.translation.source,
            module.translation.build_options,
        )?),
    };
    let kernel = Kernel::create(program, &kernel_info.name).map_err(|e| cl_error("clCreateKernel", e))?;
    Ok(Export {
        info: ExportInfo {
            name: export.name.clone(),
            constant_count: export.constant_count,
            binding_count: export.bindings.len() as u32,
            workgroup_size: kernel_info.workgroup_size,
        },
        kernel: Mutex::new(kernel),
        arguments,
        push_constant_bytes,
    })
}

impl Executable for OpenClExecutable {
    fn format(&self) -> &str {
        FORMAT
    }

    fn export_count(&self) -> u32 {
        self.exports.len() as u32
    }

    fn export_info(&self, ordinal: u32) -> Result<ExportInfo> {
        halo_hal::executable::check_export_ordinal(self, ordinal)?;
        Ok(self.exports[ordinal as usize].info.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Prepares `vulkan-spirv-fb` executables for one OpenCL device.
pub struct OpenClExecutableCache {
    shared: Arc<DeviceShared>,
}

impl OpenClExecutableCache {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        OpenClExecutableCache { shared }
    }
}

impl ExecutableCache for OpenClExecutableCache {
    fn can_prepare_format(&self, format: &str) -> bool {
        format == FORMAT
    }

    fn supported_formats(&self) -> Vec<String> {
        vec![FORMAT.to_string()]
    }

    fn prepare_executable(&self, params: &ExecutableParams<'_>) -> Result<Arc<dyn Executable>> {
        self.check_format(params.format)?;
        Ok(Arc::new(OpenClExecutable::load(
            self.shared.clone(),
            params.data,
            params.constants,
        )?))
    }
}
