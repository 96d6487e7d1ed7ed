//! The vendor API, loaded at run time: CUDA's driver API from `libcuda.so.1`, or HIP from
//! `libamdhip64.so`, whose module API mirrors it entry point for entry point (the same handles,
//! argument orders and, for the codes halo reads, the same result numbers). One table of typed
//! entry points serves both; where the two differ (host allocation flags, the copy direction
//! argument, how error names come back, device attribute numbers) the table says so.
//!
//! Every foreign call in the crate goes through [`Api`]: its functions are `unsafe` because the
//! driver trusts the handles and pointers it is given; callers state why theirs are valid.

use halo_hal::{Error, Result, StatusCode};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

/// `CUresult` / `hipError_t`: 0 is success.
pub type CuResult = c_int;
/// `CUdevice`: an ordinal.
pub type CuDevice = c_int;
/// `CUdeviceptr`: a device (or unified) address.
pub type CuDevicePtr = u64;
/// `CUcontext`.
pub type CuContext = *mut c_void;
/// `CUstream`.
pub type CuStream = *mut c_void;
/// `CUmodule`.
pub type CuModule = *mut c_void;
/// `CUfunction`.
pub type CuFunction = *mut c_void;
/// `CUevent`.
pub type CuEvent = *mut c_void;
/// `CUgraph`.
pub type CuGraph = *mut c_void;
/// `CUgraphNode`.
pub type CuGraphNode = *mut c_void;
/// `CUgraphExec`.
pub type CuGraphExec = *mut c_void;

/// `CUDA_ERROR_OUT_OF_MEMORY`.
const ERROR_OUT_OF_MEMORY: CuResult = 2;
/// `CUDA_ERROR_NO_DEVICE`.
const ERROR_NO_DEVICE: CuResult = 100;

/// Whose API a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// NVIDIA's CUDA driver API.
    Cuda,
    /// AMD's HIP (ROCm).
    Hip,
}

impl Vendor {
    /// The shared libraries to try, in order.
    fn libraries(self) -> &'static [&'static str] {
        match self {
            Vendor::Cuda => &["libcuda.so.1"],
            Vendor::Hip => &["libamdhip64.so", "libamdhip64.so.6"],
        }
    }

    /// The environment variable that names the library file to load instead
    /// (`HALO_CUDA_LIBRARY`, `HALO_HIP_LIBRARY`), for installations outside the loader's path.
    pub fn library_variable(self) -> &'static str {
        match self {
            Vendor::Cuda => "HALO_CUDA_LIBRARY",
            Vendor::Hip => "HALO_HIP_LIBRARY",
        }
    }

    /// The API's name in messages.
    pub fn api_name(self) -> &'static str {
        match self {
            Vendor::Cuda => "CUDA",
            Vendor::Hip => "HIP",
        }
    }
}

/// Device attributes halo reads (`CUdevice_attribute`, `hipDeviceAttribute_t`: numbered
/// differently by the two APIs).
#[derive(Debug, Clone, Copy)]
pub enum DeviceAttribute {
    /// Threads one block may have.
    MaxThreadsPerBlock,
    /// Largest block, x.
    MaxBlockDimX,
    /// Largest block, y.
    MaxBlockDimY,
    /// Largest block, z.
    MaxBlockDimZ,
    /// Largest grid, x.
    MaxGridDimX,
    /// Largest grid, y.
    MaxGridDimY,
    /// Largest grid, z.
    MaxGridDimZ,
    /// Compute capability, major.
    ComputeCapabilityMajor,
    /// Compute capability, minor.
    ComputeCapabilityMinor,
    /// Shared memory a block may opt in to, in bytes.
    MaxSharedMemoryPerBlockOptin,
    /// Whether stream-ordered allocation (`cuMemAllocAsync`, `hipMallocAsync`) is supported.
    MemoryPoolsSupported,
}

impl DeviceAttribute {
    /// The attribute's number in `vendor`'s API (CUDA 12's `cuda.h`; HIP 6's
    /// `hip_runtime_api.h`, where the CUDA-compatible attributes are numbered alphabetically).
    fn code(self, vendor: Vendor) -> c_int {
        use DeviceAttribute::*;
        match (vendor, self) {
            (Vendor::Cuda, MaxThreadsPerBlock) => 1,
            (Vendor::Cuda, MaxBlockDimX) => 2,
            (Vendor::Cuda, MaxBlockDimY) => 3,
            (Vendor::Cuda, MaxBlockDimZ) => 4,
            (Vendor::Cuda, MaxGridDimX) => 5,
            (Vendor::Cuda, MaxGridDimY) => 6,
            (Vendor::Cuda, MaxGridDimZ) => 7,
            (Vendor::Cuda, ComputeCapabilityMajor) => 75,
            (Vendor::Cuda, ComputeCapabilityMinor) => 76,
            (Vendor::Cuda, MaxSharedMemoryPerBlockOptin) => 97,
            (Vendor::Cuda, MemoryPoolsSupported) => 115,
            (Vendor::Hip, ComputeCapabilityMajor) => 23,
            (Vendor::Hip, MaxBlockDimX) => 26,
            (Vendor::Hip, MaxBlockDimY) => 27,
            (Vendor::Hip, MaxBlockDimZ) => 28,
            (Vendor::Hip, MaxGridDimX) => 29,
            (Vendor::Hip, MaxGridDimY) => 30,
            (Vendor::Hip, MaxGridDimZ) => 31,
            (Vendor::Hip, MaxThreadsPerBlock) => 56,
            (Vendor::Hip, ComputeCapabilityMinor) => 61,
            (Vendor::Hip, MaxSharedMemoryPerBlockOptin) => 75,
            (Vendor::Hip, MemoryPoolsSupported) => 88,
        }
    }
}

/// `CU_STREAM_NON_BLOCKING`: no implicit ordering with the legacy default stream.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_EVENT_DISABLE_TIMING`: cheaper events that only order and report completion.
pub const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CUDA_ERROR_NOT_READY` / `hipErrorNotReady`: the work an event follows is still running.
pub const NOT_READY: CuResult = 600;
/// `CU_MEM_ATTACH_GLOBAL`: managed memory any stream may touch.
pub const MEM_ATTACH_GLOBAL: c_uint = 1;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
/// `CU_JIT_ERROR_LOG_BUFFER`.
pub const JIT_ERROR_LOG_BUFFER: c_int = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
pub const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

/// `hipMemcpyDefault`: the runtime infers the direction from the unified addresses.
const HIP_MEMCPY_DEFAULT: c_int = 4;

/// The entry points whose signatures differ between the two APIs.
#[derive(Clone, Copy)]
enum Divergent {
    Cuda {
        mem_alloc_host: unsafe extern "C" fn(*mut *mut c_void, usize) -> CuResult,
        memcpy_async: unsafe extern "C" fn(CuDevicePtr, CuDevicePtr, usize, CuStream) -> CuResult,
        get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
        func_set_attribute: unsafe extern "C" fn(CuFunction, c_int, c_int) -> CuResult,
    },
    Hip {
        host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult,
        memcpy_async: unsafe extern "C" fn(CuDevicePtr, CuDevicePtr, usize, c_int, CuStream) -> CuResult,
        get_error_name: unsafe extern "C" fn(CuResult) -> *const c_char,
    },
}

/// Looks up `name` in `library` as a function of type `T`.
///
/// # Safety
/// `T` must be the entry point's true signature.
unsafe fn symbol<T: Copy>(library: &libloading::Library, name: &str) -> std::result::Result<T, String> {
    let with_nul = format!("{name}\0");
    // SAFETY: the caller names the signature the library defines for `name`.
    unsafe { library.get::<T>(with_nul.as_bytes()) }
        .map(|symbol| *symbol)
        .map_err(|e| format!("{name}: {e}"))
}

macro_rules! symbols {
    ($($name:ident = ($cuda:literal, $hip:literal) : fn($($arg:ident: $ty:ty),*);)*) => {
        /// The vendor API's entry points halo uses, resolved once.
        ///
        /// Ownership: keeps the library loaded for as long as any handle made through it lives
        /// (devices and buffers hold the `Api` in an `Arc`). Threading: any thread; the API is
        /// thread-safe given a current context.
        pub struct Api {
            vendor: Vendor,
            $($name: unsafe extern "C" fn($($ty),*) -> CuResult,)*
            divergent: Divergent,
            graphs: Option<GraphApi>,
            _library: libloading::Library,
        }

        impl Api {
            fn resolve(vendor: Vendor, library: libloading::Library) -> std::result::Result<Self, String> {
                // SAFETY: each symbol is looked up by its exported name with the signature the
                // vendor's API documents for that entry point.
                unsafe {
                    let divergent = match vendor {
                        Vendor::Cuda => Divergent::Cuda {
                            mem_alloc_host: symbol(&library, "cuMemAllocHost_v2")?,
                            memcpy_async: symbol(&library, "cuMemcpyAsync")?,
                            get_error_name: symbol(&library, "cuGetErrorName")?,
                            func_set_attribute: symbol(&library, "cuFuncSetAttribute")?,
                        },
                        Vendor::Hip => Divergent::Hip {
                            host_malloc: symbol(&library, "hipHostMalloc")?,
                            memcpy_async: symbol(&library, "hipMemcpyAsync")?,
                            get_error_name: symbol(&library, "hipGetErrorName")?,
                        },
                    };
                    // Graphs are optional: HIP's node parameters are laid out differently, and a
                    // driver without them still runs stream command buffers.
                    let graphs = match vendor {
                        Vendor::Cuda => GraphApi::resolve(&library).ok(),
                        Vendor::Hip => None,
                    };
                    Ok(Api {
                        vendor,
                        $($name: symbol(&library, pick_name(vendor, $cuda, $hip))?,)*
                        divergent,
                        graphs,
                        _library: library,
                    })
                }
            }

            $(
                #[doc = concat!("`", $cuda, "` / `", $hip, "`, its result checked.")]
                ///
                /// # Safety
                /// The arguments must be valid for this entry point as the vendor's API
                /// documents it (live handles, pointers to enough memory).
                #[allow(clippy::too_many_arguments, reason = "the entry point's own arity")]
                pub unsafe fn $name(&self, $($arg: $ty),*) -> Result<()> {
                    // SAFETY: the caller upholds the entry point's contract.
                    let result = unsafe { (self.$name)($($arg),*) };
                    self.check(result, pick_name(self.vendor, $cuda, $hip))
                }
            )*
        }
    };
}

fn pick_name(vendor: Vendor, cuda: &'static str, hip: &'static str) -> &'static str {
    match vendor {
        Vendor::Cuda => cuda,
        Vendor::Hip => hip,
    }
}

symbols! {
    init = ("cuInit", "hipInit"): fn(flags: c_uint);
    driver_get_version = ("cuDriverGetVersion", "hipDriverGetVersion"): fn(version: *mut c_int);
    device_get_count = ("cuDeviceGetCount", "hipGetDeviceCount"): fn(count: *mut c_int);
    device_get = ("cuDeviceGet", "hipDeviceGet"): fn(device: *mut CuDevice, ordinal: c_int);
    device_get_name = ("cuDeviceGetName", "hipDeviceGetName"): fn(name: *mut c_char, length: c_int, device: CuDevice);
    device_get_uuid = ("cuDeviceGetUuid_v2", "hipDeviceGetUuid"): fn(uuid: *mut [u8; 16], device: CuDevice);
    device_total_mem = ("cuDeviceTotalMem_v2", "hipDeviceTotalMem"): fn(bytes: *mut usize, device: CuDevice);
    device_get_attribute = ("cuDeviceGetAttribute", "hipDeviceGetAttribute"): fn(value: *mut c_int, attribute: c_int, device: CuDevice);
    primary_ctx_retain = ("cuDevicePrimaryCtxRetain", "hipDevicePrimaryCtxRetain"): fn(context: *mut CuContext, device: CuDevice);
    primary_ctx_release = ("cuDevicePrimaryCtxRelease_v2", "hipDevicePrimaryCtxRelease"): fn(device: CuDevice);
    ctx_set_current = ("cuCtxSetCurrent", "hipCtxSetCurrent"): fn(context: CuContext);
    stream_create = ("cuStreamCreate", "hipStreamCreateWithFlags"): fn(stream: *mut CuStream, flags: c_uint);
    stream_destroy = ("cuStreamDestroy_v2", "hipStreamDestroy"): fn(stream: CuStream);
    stream_synchronize = ("cuStreamSynchronize", "hipStreamSynchronize"): fn(stream: CuStream);
    mem_alloc = ("cuMemAlloc_v2", "hipMalloc"): fn(pointer: *mut CuDevicePtr, bytes: usize);
    mem_free = ("cuMemFree_v2", "hipFree"): fn(pointer: CuDevicePtr);
    mem_alloc_async = ("cuMemAllocAsync", "hipMallocAsync"): fn(pointer: *mut CuDevicePtr, bytes: usize, stream: CuStream);
    mem_free_async = ("cuMemFreeAsync", "hipFreeAsync"): fn(pointer: CuDevicePtr, stream: CuStream);
    mem_free_host = ("cuMemFreeHost", "hipHostFree"): fn(pointer: *mut c_void);
    mem_alloc_managed = ("cuMemAllocManaged", "hipMallocManaged"): fn(pointer: *mut CuDevicePtr, bytes: usize, flags: c_uint);
    memset_d8 = ("cuMemsetD8_v2", "hipMemsetD8"): fn(pointer: CuDevicePtr, value: u8, count: usize);
    memset_d8_async = ("cuMemsetD8Async", "hipMemsetD8Async"): fn(pointer: CuDevicePtr, value: u8, count: usize, stream: CuStream);
    memset_d16_async = ("cuMemsetD16Async", "hipMemsetD16Async"): fn(pointer: CuDevicePtr, value: u16, count: usize, stream: CuStream);
    memset_d32_async = ("cuMemsetD32Async", "hipMemsetD32Async"): fn(pointer: CuDevicePtr, value: u32, count: usize, stream: CuStream);
    memcpy_htod_async = ("cuMemcpyHtoDAsync_v2", "hipMemcpyHtoDAsync"): fn(target: CuDevicePtr, source: *const c_void, bytes: usize, stream: CuStream);
    module_load_data_ex = ("cuModuleLoadDataEx", "hipModuleLoadDataEx"): fn(module: *mut CuModule, image: *const c_void, count: c_uint, options: *mut c_int, values: *mut *mut c_void);
    module_get_function = ("cuModuleGetFunction", "hipModuleGetFunction"): fn(function: *mut CuFunction, module: CuModule, name: *const c_char);
    module_unload = ("cuModuleUnload", "hipModuleUnload"): fn(module: CuModule);
    launch_kernel = ("cuLaunchKernel", "hipModuleLaunchKernel"): fn(function: CuFunction, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_bytes: c_uint, stream: CuStream, params: *mut *mut c_void, extra: *mut *mut c_void);
    event_create = ("cuEventCreate", "hipEventCreateWithFlags"): fn(event: *mut CuEvent, flags: c_uint);
    event_record = ("cuEventRecord", "hipEventRecord"): fn(event: CuEvent, stream: CuStream);
    event_synchronize = ("cuEventSynchronize", "hipEventSynchronize"): fn(event: CuEvent);
    event_query = ("cuEventQuery", "hipEventQuery"): fn(event: CuEvent);
    event_destroy = ("cuEventDestroy_v2", "hipEventDestroy"): fn(event: CuEvent);
}

/// `CUDA_KERNEL_NODE_PARAMS_v2`, which `cuGraphAddKernelNode_v2` takes.
#[repr(C)]
pub struct KernelNodeParams {
    /// The kernel.
    pub function: CuFunction,
    /// Blocks in x, y, z.
    pub grid: [c_uint; 3],
    /// Threads per block in x, y, z.
    pub block: [c_uint; 3],
    /// Dynamic shared memory per block.
    pub shared_memory: c_uint,
    /// One pointer per kernel parameter; the values are copied when the node is set.
    pub params: *mut *mut c_void,
    /// Unused (the packed-parameter alternative).
    pub extra: *mut *mut c_void,
    /// Null: the kernel is `function`.
    pub kernel: *mut c_void,
    /// Null: the current context.
    pub context: CuContext,
}

macro_rules! graph_symbols {
    ($($name:ident = $symbol:literal : fn($($arg:ident: $ty:ty),*);)*) => {
        /// CUDA's graph entry points (`cuGraph*`), for graph-backed command buffers.
        #[derive(Clone, Copy)]
        pub struct GraphApi {
            $($name: unsafe extern "C" fn($($ty),*) -> CuResult,)*
        }

        impl GraphApi {
            /// # Safety
            /// `library` must be CUDA's driver library.
            unsafe fn resolve(library: &libloading::Library) -> std::result::Result<Self, String> {
                // SAFETY: each symbol is looked up with the signature `cuda.h` declares for it.
                unsafe { Ok(GraphApi { $($name: symbol(library, $symbol)?,)* }) }
            }
        }

        impl Api {
            $(
                #[doc = concat!("`", $symbol, "`, its result checked.")]
                ///
                /// # Safety
                /// The arguments must be valid for this entry point as `cuda.h` documents it.
                ///
                /// # Errors
                /// `Unimplemented` where the library has no graph entry points.
                pub unsafe fn $name(&self, $($arg: $ty),*) -> Result<()> {
                    let graphs = self.graphs()?;
                    // SAFETY: the caller upholds the entry point's contract.
                    let result = unsafe { (graphs.$name)($($arg),*) };
                    self.check(result, $symbol)
                }
            )*
        }
    };
}

graph_symbols! {
    graph_create = "cuGraphCreate": fn(graph: *mut CuGraph, flags: c_uint);
    graph_destroy = "cuGraphDestroy": fn(graph: CuGraph);
    graph_add_empty_node = "cuGraphAddEmptyNode": fn(node: *mut CuGraphNode, graph: CuGraph, dependencies: *const CuGraphNode, count: usize);
    graph_add_kernel_node = "cuGraphAddKernelNode_v2": fn(node: *mut CuGraphNode, graph: CuGraph, dependencies: *const CuGraphNode, count: usize, params: *const KernelNodeParams);
    graph_instantiate = "cuGraphInstantiateWithFlags": fn(exec: *mut CuGraphExec, graph: CuGraph, flags: u64);
    graph_exec_kernel_node_set_params = "cuGraphExecKernelNodeSetParams_v2": fn(exec: CuGraphExec, node: CuGraphNode, params: *const KernelNodeParams);
    graph_launch = "cuGraphLaunch": fn(exec: CuGraphExec, stream: CuStream);
    graph_exec_destroy = "cuGraphExecDestroy": fn(exec: CuGraphExec);
}

// SAFETY: the table holds plain function pointers into a library that stays loaded; the driver
// API may be called from any thread.
unsafe impl Send for Api {}
// SAFETY: as above; nothing in the table is mutated after loading.
unsafe impl Sync for Api {}

impl Api {
    /// Loads `vendor`'s library (or the file the environment variable
    /// [`Vendor::library_variable`] names) and initializes it.
    ///
    /// # Errors
    /// `Unavailable` when the library is missing, lacks an entry point halo needs, or finds no
    /// device.
    pub fn load(vendor: Vendor) -> Result<Api> {
        match std::env::var_os(vendor.library_variable()) {
            Some(path) => Api::load_from(vendor, &[path]),
            None => Api::load_from(vendor, vendor.libraries()),
        }
    }

    /// Loads the first of `libraries` (names the dynamic loader searches for, or paths) as
    /// `vendor`'s library and initializes it.
    ///
    /// # Errors
    /// As [`Api::load`].
    pub fn load_from(vendor: Vendor, libraries: &[impl AsRef<std::ffi::OsStr>]) -> Result<Api> {
        let mut failures = Vec::new();
        let library = libraries.iter().find_map(|name| {
            // SAFETY: loading the vendor's driver library runs its initializers, which have no
            // preconditions on the loading process.
            unsafe { libloading::Library::new(name) }
                .map_err(|e| failures.push(e.to_string()))
                .ok()
        });
        let library = library.ok_or_else(|| {
            Error::unavailable(format!(
                "the {} library could not be loaded: {}",
                vendor.api_name(),
                failures.join("; ")
            ))
        })?;
        let api = Api::resolve(vendor, library).map_err(|e| {
            Error::unavailable(format!(
                "the {} library lacks an entry point halo needs: {e}",
                vendor.api_name()
            ))
        })?;
        // SAFETY: the init entry point takes flags, which must be 0.
        unsafe { api.init(0) }.map_err(|e| Error::unavailable(e.message().to_string()))?;
        Ok(api)
    }

    /// Whose API this is.
    pub fn vendor(&self) -> Vendor {
        self.vendor
    }

    /// The graph entry points.
    ///
    /// # Errors
    /// `Unimplemented` for HIP, or a CUDA driver without them.
    pub fn graphs(&self) -> Result<&GraphApi> {
        self.graphs.as_ref().ok_or_else(|| {
            Error::unimplemented(format!(
                "graph command buffers are not available on {}",
                self.vendor.api_name()
            ))
        })
    }

    /// Whether the work `event` follows has finished (`cuEventQuery`, which reports work still
    /// running as an error).
    ///
    /// # Safety
    /// `event` must be a live event of the current context.
    pub unsafe fn event_reached(&self, event: CuEvent) -> Result<bool> {
        // SAFETY: the caller passes a live event.
        match unsafe { (self.event_query)(event) } {
            NOT_READY => Ok(false),
            result => self
                .check(result, pick_name(self.vendor, "cuEventQuery", "hipEventQuery"))
                .map(|()| true),
        }
    }

    /// Turns a result of `what` into a halo error.
    pub fn check(&self, result: CuResult, what: &str) -> Result<()> {
        if result == 0 {
            return Ok(());
        }
        Err(Error::new(
            status_code(result),
            format!("{what} failed: {}", self.error_name(result)),
        ))
    }

    /// The API's name for `result` (`CUDA_ERROR_OUT_OF_MEMORY`, `hipErrorOutOfMemory`), or its
    /// number.
    pub fn error_name(&self, result: CuResult) -> String {
        let name: *const c_char = match self.divergent {
            Divergent::Cuda { get_error_name, .. } => {
                let mut name = std::ptr::null();
                // SAFETY: writes a pointer to a static string, or fails for unknown codes.
                let known = unsafe { get_error_name(result, &mut name) } == 0;
                if known {
                    name
                } else {
                    std::ptr::null()
                }
            }
            // SAFETY: returns a static string for any code.
            Divergent::Hip { get_error_name, .. } => unsafe { get_error_name(result) },
        };
        if name.is_null() {
            return format!("result {result}");
        }
        // SAFETY: the library returned a NUL-terminated static string.
        let name = unsafe { CStr::from_ptr(name) };
        format!("{} ({result})", name.to_string_lossy())
    }

    /// Reads one integer attribute of `device`.
    pub fn attribute(&self, device: CuDevice, attribute: DeviceAttribute) -> Result<i32> {
        let mut value = 0;
        // SAFETY: `value` is a valid out-pointer and the attribute a known enumerant.
        unsafe { self.device_get_attribute(&mut value, attribute.code(self.vendor), device) }?;
        Ok(value)
    }

    /// Allocates pinned host memory that the device can address (`cuMemAllocHost`,
    /// `hipHostMalloc`).
    ///
    /// # Safety
    /// `pointer` must be valid for a write; a context must be current.
    pub unsafe fn mem_alloc_host(&self, pointer: *mut *mut c_void, bytes: usize) -> Result<()> {
        let (result, what) = match self.divergent {
            // SAFETY: the caller gives a valid out-pointer.
            Divergent::Cuda { mem_alloc_host, .. } => (unsafe { mem_alloc_host(pointer, bytes) }, "cuMemAllocHost_v2"),
            // SAFETY: as above; flags 0 is `hipHostMallocDefault`.
            Divergent::Hip { host_malloc, .. } => (unsafe { host_malloc(pointer, bytes, 0) }, "hipHostMalloc"),
        };
        self.check(result, what)
    }

    /// Copies between two unified addresses in stream order.
    ///
    /// # Safety
    /// Both ranges must be valid for `bytes` bytes until the stream passes the copy.
    pub unsafe fn memcpy_async(
        &self,
        target: CuDevicePtr,
        source: CuDevicePtr,
        bytes: usize,
        stream: CuStream,
    ) -> Result<()> {
        let (result, what) = match self.divergent {
            Divergent::Cuda { memcpy_async, .. } => {
                // SAFETY: the caller guarantees the ranges.
                let result = unsafe { memcpy_async(target, source, bytes, stream) };
                (result, "cuMemcpyAsync")
            }
            Divergent::Hip { memcpy_async, .. } => {
                // SAFETY: as above.
                let result = unsafe { memcpy_async(target, source, bytes, HIP_MEMCPY_DEFAULT, stream) };
                (result, "hipMemcpyAsync")
            }
        };
        self.check(result, what)
    }

    /// Lets `function` use `bytes` of dynamic shared memory beyond the default limit (CUDA's
    /// opt-in; HIP kernels reach their whole limit without one).
    ///
    /// # Safety
    /// `function` must be a live function handle.
    pub unsafe fn allow_shared_memory(&self, function: CuFunction, bytes: c_int) -> Result<()> {
        match self.divergent {
            Divergent::Cuda { func_set_attribute, .. } => {
                // SAFETY: the caller gives a live function.
                let result =
                    unsafe { func_set_attribute(function, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes) };
                self.check(result, "cuFuncSetAttribute")
            }
            Divergent::Hip { .. } => Ok(()),
        }
    }
}

/// The HAL status of a `CUresult`.
fn status_code(result: CuResult) -> StatusCode {
    match result {
        ERROR_OUT_OF_MEMORY => StatusCode::ResourceExhausted,
        ERROR_NO_DEVICE => StatusCode::Unavailable,
        // CUDA_ERROR_INVALID_VALUE, _INVALID_IMAGE, _INVALID_PTX, _NOT_FOUND, _INVALID_HANDLE.
        1 | 200 | 218 | 400 | 500 => StatusCode::InvalidArgument,
        // Illegal addresses, launch timeouts, device-side asserts, faulting instructions and
        // other launch failures leave the context unusable: the device's state is lost, as
        // Vulkan's device loss is.
        700 | 702 | 710 | 714..=719 => StatusCode::DataLoss,
        // Too many registers or blocks for one launch: the launch fails, the context lives on.
        701 | 720 => StatusCode::ResourceExhausted,
        _ => StatusCode::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_results_to_status_codes() {
        assert_eq!(status_code(ERROR_OUT_OF_MEMORY), StatusCode::ResourceExhausted);
        assert_eq!(status_code(ERROR_NO_DEVICE), StatusCode::Unavailable);
        assert_eq!(status_code(218), StatusCode::InvalidArgument);
        assert_eq!(status_code(700), StatusCode::DataLoss);
        assert_eq!(status_code(719), StatusCode::DataLoss);
        assert_eq!(status_code(701), StatusCode::ResourceExhausted);
        assert_eq!(status_code(704), StatusCode::Internal);
        assert_eq!(status_code(999), StatusCode::Internal);
    }
}
