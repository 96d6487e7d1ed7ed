//! Executables in the `cuda-nvptx-fb` and `rocm-hsaco-fb` formats: a 64-byte header, then a
//! `CDA1` (`HIP1`) FlatBuffer of PTX modules (AMD code objects) and exports (kernel name, block
//! size, dynamic shared memory, constant and binding counts).
//!
//! A dispatch passes one kernel parameter per binding (the device address of the bound range)
//! followed by one per constant (a u32), as IREE's CUDA driver does.

mod schema;

use crate::api::{CuFunction, CuModule, Vendor};
use crate::device::DeviceShared;
use halo_hal::{Error, Executable, ExecutableCache, ExecutableParams, ExportInfo, Result};
use std::any::Any;
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// The format name `iree-compile` gives CUDA executables.
pub const CUDA_FORMAT: &str = "cuda-nvptx-fb";
/// The format name `iree-compile` gives HIP (ROCm) executables.
pub const HIP_FORMAT: &str = "rocm-hsaco-fb";

/// The executable format `vendor`'s devices load.
pub fn format(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Cuda => CUDA_FORMAT,
        Vendor::Hip => HIP_FORMAT,
    }
}

/// The header magic and FlatBuffer identifier of `vendor`'s executables.
fn identifier(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Cuda => "CDA1",
        Vendor::Hip => "HIP1",
    }
}

/// One kernel as the executable describes it, before any module is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSpec {
    /// Name (as programs look it up), block size and parameter counts.
    pub info: ExportInfo,
    /// The kernel's symbol in its PTX module.
    pub symbol: String,
    /// Index of the PTX module that holds it.
    pub module: usize,
    /// Dynamic shared memory per block, in bytes.
    pub shared_memory: u32,
}

/// What a `cuda-nvptx-fb` or `rocm-hsaco-fb` executable holds, read and checked without a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutableSpec {
    /// Each module: PTX text (CUDA) or an ELF code object (HIP).
    pub modules: Vec<Vec<u8>>,
    /// The kernels, by export ordinal.
    pub exports: Vec<ExportSpec>,
}

impl ExecutableSpec {
    /// Reads a file in `vendor`'s format.
    ///
    /// # Errors
    /// `InvalidArgument` (or `Incompatible`, `OutOfRange`) naming what is malformed: the header,
    /// the FlatBuffer, an export without a name or block size, a module ordinal out of range.
    pub fn parse(data: &[u8], vendor: Vendor) -> Result<Self> {
        let what = format!("{} executable", vendor.api_name());
        let body = halo_hal::executable::gpu_flatbuffer(data, identifier(vendor), &what)?;
        let def =
            schema::root(body).map_err(|e| Error::invalid_argument(format!("malformed {what} FlatBuffer: {e}")))?;
        let modules: Vec<Vec<u8>> = def
            .modules()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(index, module)| {
                module
                    .image()
                    .filter(|image| !image.is_empty())
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| Error::invalid_argument(format!("{what} module {index} is empty")))
            })
            .collect::<Result<_>>()?;
        let exports = def
            .exports()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(ordinal, export)| export_spec(&what, ordinal, &export, modules.len()))
            .collect::<Result<_>>()?;
        Ok(ExecutableSpec { modules, exports })
    }
}

fn export_spec(
    executable: &str,
    ordinal: usize,
    export: &schema::ExportDef<'_>,
    module_count: usize,
) -> Result<ExportSpec> {
    let fail = |what: String| Error::invalid_argument(format!("{executable} export {ordinal}: {what}"));
    let symbol = export.kernel_name().ok_or_else(|| fail("no kernel name".into()))?;
    let module = export.module_ordinal() as usize;
    if module >= module_count {
        return Err(fail(format!("module ordinal {module} out of range {module_count}")));
    }
    let workgroup_size = export.block_dims().ok_or_else(|| fail("no block size".into()))?;
    if workgroup_size.contains(&0) {
        return Err(fail(format!("block size {workgroup_size:?} has an empty dimension")));
    }
    Ok(ExportSpec {
        info: ExportInfo {
            name: export.debug_name().unwrap_or(symbol).to_string(),
            constant_count: export.constant_count(),
            binding_count: export.binding_flags().map_or(0, |flags| flags.len() as u32),
            workgroup_size,
        },
        symbol: symbol.to_string(),
        module,
        shared_memory: export.block_shared_memory_size(),
    })
}

/// One loaded kernel.
pub(crate) struct Kernel {
    pub(crate) spec: ExportSpec,
    pub(crate) function: CuFunction,
}

/// A loaded GPU executable: its modules loaded (PTX JIT-compiled) for the device, one function per
/// export.
///
/// Ownership: owns its modules (unloaded on drop); keeps its device alive. Threading: any thread.
pub struct GpuExecutable {
    shared: Arc<DeviceShared>,
    modules: Vec<CuModule>,
    kernels: Vec<Kernel>,
}

// SAFETY: module and function handles are plain identifiers that the driver lets any thread use
// once the context is current; halo makes it current before every call.
unsafe impl Send for GpuExecutable {}
// SAFETY: as above; nothing mutates the handles after loading.
unsafe impl Sync for GpuExecutable {}

impl GpuExecutable {
    fn load(shared: Arc<DeviceShared>, spec: ExecutableSpec) -> Result<Self> {
        shared.bind()?;
        let mut executable = GpuExecutable {
            shared,
            modules: Vec::new(),
            kernels: Vec::new(),
        };
        // On error, dropping `executable` unloads the modules loaded so far.
        for (index, ptx) in spec.modules.iter().enumerate() {
            let module = executable
                .load_module(ptx)
                .map_err(|e| e.context(format!("loading module {index}")))?;
            executable.modules.push(module);
        }
        for spec in spec.exports {
            let function = executable
                .function(&spec)
                .map_err(|e| e.context(format!("preparing kernel '{}'", spec.info.name)))?;
            executable.kernels.push(Kernel { spec, function });
        }
        Ok(executable)
    }

    /// Loads one module (JIT-compiling PTX), with the compiler's log in the error when it fails.
    fn load_module(&self, image: &[u8]) -> Result<CuModule> {
        // PTX is text the driver reads up to a NUL; a code object is an ELF file, which a NUL
        // after its end does not change.
        let mut image = image.to_vec();
        image.push(0);
        let mut log = vec![0u8; 8192];
        let mut options = [
            crate::api::JIT_ERROR_LOG_BUFFER,
            crate::api::JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
        let mut module: CuModule = std::ptr::null_mut();
        // SAFETY: `image` is NUL-terminated PTX or a whole code object; the option arrays have two
        // entries each, the log buffer is as long as its declared size and outlives the call.
        let loaded = unsafe {
            self.shared.api.module_load_data_ex(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        loaded.map_err(|error| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            if text.trim().is_empty() {
                error
            } else {
                Error::new(error.code(), format!("{}: {}", error.message(), text.trim()))
            }
        })?;
        Ok(module)
    }

    fn function(&self, spec: &ExportSpec) -> Result<CuFunction> {
        let limits = &self.shared.limits;
        let [x, y, z] = spec.info.workgroup_size;
        let threads = u64::from(x) * u64::from(y) * u64::from(z);
        let fits = (0..3).all(|i| spec.info.workgroup_size[i] <= limits.max_block[i]);
        if !fits || threads > u64::from(limits.max_threads_per_block) {
            return Err(Error::invalid_argument(format!(
                "block size {x}x{y}x{z} exceeds the device's limits ({:?}, {} threads)",
                limits.max_block, limits.max_threads_per_block
            )));
        }
        if spec.shared_memory > limits.max_shared_memory {
            return Err(Error::invalid_argument(format!(
                "{} bytes of shared memory per block; the device allows {}",
                spec.shared_memory, limits.max_shared_memory
            )));
        }
        let name = CString::new(spec.symbol.as_str())
            .map_err(|_| Error::invalid_argument("kernel name contains a NUL byte"))?;
        let mut function: CuFunction = std::ptr::null_mut();
        // SAFETY: the module is loaded on this context and `name` is NUL-terminated.
        unsafe {
            self.shared
                .api
                .module_get_function(&mut function, self.modules[spec.module], name.as_ptr())?
        };
        if spec.shared_memory > 48 * 1024 {
            // Blocks get at most 48 KiB of dynamic shared memory unless the kernel opts in.
            // SAFETY: `function` was just looked up; the value is within the device's limit.
            unsafe {
                self.shared
                    .api
                    .allow_shared_memory(function, spec.shared_memory as i32)?
            };
        }
        Ok(function)
    }

    /// Kernel `ordinal`, checking that the executable is on the device `shared`.
    pub(crate) fn kernel(&self, ordinal: u32, shared: &Arc<DeviceShared>) -> Result<&Kernel> {
        if !Arc::ptr_eq(&self.shared, shared) {
            return Err(Error::invalid_argument("the executable belongs to another GPU device"));
        }
        self.kernels.get(ordinal as usize).ok_or_else(|| {
            Error::out_of_range(format!(
                "export ordinal {ordinal} is out of range; the executable has {} exports",
                self.kernels.len()
            ))
        })
    }
}

impl Drop for GpuExecutable {
    fn drop(&mut self) {
        if self.shared.bind().is_err() {
            return;
        }
        for &module in &self.modules {
            // SAFETY: the module was loaded here and no submission uses it any more (command
            // buffers hold the executable until their work completes).
            let _ = unsafe { self.shared.api.module_unload(module) };
        }
    }
}

impl Executable for GpuExecutable {
    fn format(&self) -> &str {
        format(self.shared.api.vendor())
    }

    fn export_count(&self) -> u32 {
        self.kernels.len() as u32
    }

    fn export_info(&self, ordinal: u32) -> Result<ExportInfo> {
        halo_hal::executable::check_export_ordinal(self, ordinal)?;
        Ok(self.kernels[ordinal as usize].spec.info.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Prepares executables in its vendor's format for one device.
pub struct GpuExecutableCache {
    shared: Arc<DeviceShared>,
}

impl GpuExecutableCache {
    pub(crate) fn new(shared: Arc<DeviceShared>) -> Self {
        GpuExecutableCache { shared }
    }
}

impl ExecutableCache for GpuExecutableCache {
    fn can_prepare_format(&self, name: &str) -> bool {
        name == format(self.shared.api.vendor())
    }

    fn supported_formats(&self) -> Vec<String> {
        vec![format(self.shared.api.vendor()).to_string()]
    }

    fn prepare_executable(&self, params: &ExecutableParams<'_>) -> Result<Arc<dyn Executable>> {
        self.check_format(params.format)?;
        let spec = ExecutableSpec::parse(params.data, self.shared.api.vendor())?;
        Ok(Arc::new(GpuExecutable::load(self.shared.clone(), spec)?))
    }
}
