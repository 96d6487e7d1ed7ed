//! The CUDA driver API, loaded from `libcuda.so.1` at run time: the symbols halo calls, typed,
//! and `CUresult`s turned into halo errors.
//!
//! Every foreign call in the crate goes through [`Api`]: its functions are `unsafe` because the
//! driver trusts the handles and pointers it is given; callers state why theirs are valid.

use halo_hal::{Error, Result, StatusCode};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

/// `CUresult`: 0 is success.
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

/// `CUDA_ERROR_OUT_OF_MEMORY`.
const ERROR_OUT_OF_MEMORY: CuResult = 2;
/// `CUDA_ERROR_NO_DEVICE`.
const ERROR_NO_DEVICE: CuResult = 100;
/// `CUDA_ERROR_NOT_READY`: an event or stream query found work still running.
pub const ERROR_NOT_READY: CuResult = 600;

/// `cuDeviceGetAttribute` attributes halo reads (`CUdevice_attribute`).
#[derive(Debug, Clone, Copy)]
#[repr(i32)]
pub enum DeviceAttribute {
    /// Threads one block may have.
    MaxThreadsPerBlock = 1,
    /// Largest block, x.
    MaxBlockDimX = 2,
    /// Largest block, y.
    MaxBlockDimY = 3,
    /// Largest block, z.
    MaxBlockDimZ = 4,
    /// Largest grid, x.
    MaxGridDimX = 5,
    /// Largest grid, y.
    MaxGridDimY = 6,
    /// Largest grid, z.
    MaxGridDimZ = 7,
    /// Whether host and device share one address space.
    UnifiedAddressing = 41,
    /// Compute capability, major.
    ComputeCapabilityMajor = 75,
    /// Compute capability, minor.
    ComputeCapabilityMinor = 76,
    /// Whether managed memory exists.
    ManagedMemory = 83,
    /// Shared memory a block may opt in to, in bytes.
    MaxSharedMemoryPerBlockOptin = 97,
    /// Whether stream-ordered allocation (`cuMemAllocAsync`) is supported.
    MemoryPoolsSupported = 115,
}

/// `CU_STREAM_NON_BLOCKING`: no implicit ordering with the legacy default stream.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_EVENT_DISABLE_TIMING`: cheaper events that only order and report completion.
pub const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_MEM_ATTACH_GLOBAL`: managed memory any stream may touch.
pub const MEM_ATTACH_GLOBAL: c_uint = 1;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
/// `CU_JIT_ERROR_LOG_BUFFER`.
pub const JIT_ERROR_LOG_BUFFER: c_int = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
pub const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

macro_rules! symbols {
    ($($name:ident = $symbol:literal : fn($($arg:ident: $ty:ty),*);)*) => {
        /// The driver API's entry points halo uses, resolved once.
        ///
        /// Ownership: keeps the library loaded for as long as any handle made through it lives
        /// (devices and buffers hold the `Api` in an `Arc`). Threading: any thread; the driver
        /// API is thread-safe given a current context.
        pub struct Api {
            $($name: unsafe extern "C" fn($($ty),*) -> CuResult,)*
            get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
            _library: libloading::Library,
        }

        impl Api {
            fn resolve(library: libloading::Library) -> std::result::Result<Self, String> {
                // SAFETY: each symbol is looked up by its exported name with the signature the
                // CUDA driver API documents for that version of the entry point.
                unsafe {
                    Ok(Api {
                        $($name: *library
                            .get::<unsafe extern "C" fn($($ty),*) -> CuResult>(concat!($symbol, "\0").as_bytes())
                            .map_err(|e| format!("{}: {e}", $symbol))?,)*
                        get_error_name: *library
                            .get::<unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult>(b"cuGetErrorName\0")
                            .map_err(|e| format!("cuGetErrorName: {e}"))?,
                        _library: library,
                    })
                }
            }

            $(
                #[doc = concat!("`", $symbol, "`, its result checked.")]
                ///
                /// # Safety
                /// The arguments must be valid for this entry point as the CUDA driver API
                /// documents it (live handles, pointers to enough memory).
                #[allow(clippy::too_many_arguments, reason = "the entry point's own arity")]
                pub unsafe fn $name(&self, $($arg: $ty),*) -> Result<()> {
                    // SAFETY: the caller upholds the entry point's contract.
                    let result = unsafe { (self.$name)($($arg),*) };
                    self.check(result, $symbol)
                }
            )*
        }
    };
}

symbols! {
    init = "cuInit": fn(flags: c_uint);
    driver_get_version = "cuDriverGetVersion": fn(version: *mut c_int);
    device_get_count = "cuDeviceGetCount": fn(count: *mut c_int);
    device_get = "cuDeviceGet": fn(device: *mut CuDevice, ordinal: c_int);
    device_get_name = "cuDeviceGetName": fn(name: *mut c_char, length: c_int, device: CuDevice);
    device_get_uuid = "cuDeviceGetUuid_v2": fn(uuid: *mut [u8; 16], device: CuDevice);
    device_total_mem = "cuDeviceTotalMem_v2": fn(bytes: *mut usize, device: CuDevice);
    device_get_attribute = "cuDeviceGetAttribute": fn(value: *mut c_int, attribute: c_int, device: CuDevice);
    primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(context: *mut CuContext, device: CuDevice);
    primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(device: CuDevice);
    ctx_set_current = "cuCtxSetCurrent": fn(context: CuContext);
    stream_create = "cuStreamCreate": fn(stream: *mut CuStream, flags: c_uint);
    stream_destroy = "cuStreamDestroy_v2": fn(stream: CuStream);
    stream_synchronize = "cuStreamSynchronize": fn(stream: CuStream);
    mem_alloc = "cuMemAlloc_v2": fn(pointer: *mut CuDevicePtr, bytes: usize);
    mem_free = "cuMemFree_v2": fn(pointer: CuDevicePtr);
    mem_alloc_async = "cuMemAllocAsync": fn(pointer: *mut CuDevicePtr, bytes: usize, stream: CuStream);
    mem_free_async = "cuMemFreeAsync": fn(pointer: CuDevicePtr, stream: CuStream);
    mem_alloc_host = "cuMemAllocHost_v2": fn(pointer: *mut *mut c_void, bytes: usize);
    mem_free_host = "cuMemFreeHost": fn(pointer: *mut c_void);
    mem_alloc_managed = "cuMemAllocManaged": fn(pointer: *mut CuDevicePtr, bytes: usize, flags: c_uint);
    memset_d8 = "cuMemsetD8_v2": fn(pointer: CuDevicePtr, value: u8, count: usize);
    memset_d8_async = "cuMemsetD8Async": fn(pointer: CuDevicePtr, value: u8, count: usize, stream: CuStream);
    memset_d16_async = "cuMemsetD16Async": fn(pointer: CuDevicePtr, value: u16, count: usize, stream: CuStream);
    memset_d32_async = "cuMemsetD32Async": fn(pointer: CuDevicePtr, value: u32, count: usize, stream: CuStream);
    memcpy_async = "cuMemcpyAsync": fn(target: CuDevicePtr, source: CuDevicePtr, bytes: usize, stream: CuStream);
    memcpy_htod_async = "cuMemcpyHtoDAsync_v2": fn(target: CuDevicePtr, source: *const c_void, bytes: usize, stream: CuStream);
    module_load_data_ex = "cuModuleLoadDataEx": fn(module: *mut CuModule, image: *const c_void, count: c_uint, options: *mut c_int, values: *mut *mut c_void);
    module_get_function = "cuModuleGetFunction": fn(function: *mut CuFunction, module: CuModule, name: *const c_char);
    module_unload = "cuModuleUnload": fn(module: CuModule);
    func_set_attribute = "cuFuncSetAttribute": fn(function: CuFunction, attribute: c_int, value: c_int);
    launch_kernel = "cuLaunchKernel": fn(function: CuFunction, grid_x: c_uint, grid_y: c_uint, grid_z: c_uint, block_x: c_uint, block_y: c_uint, block_z: c_uint, shared_bytes: c_uint, stream: CuStream, params: *mut *mut c_void, extra: *mut *mut c_void);
    event_create = "cuEventCreate": fn(event: *mut CuEvent, flags: c_uint);
    event_record = "cuEventRecord": fn(event: CuEvent, stream: CuStream);
    event_synchronize = "cuEventSynchronize": fn(event: CuEvent);
    event_destroy = "cuEventDestroy_v2": fn(event: CuEvent);
}

// SAFETY: the table holds plain function pointers into a library that stays loaded; the driver
// API may be called from any thread.
unsafe impl Send for Api {}
// SAFETY: as above; nothing in the table is mutated after loading.
unsafe impl Sync for Api {}

/// The library's file name on Linux.
pub const LIBRARY: &str = "libcuda.so.1";

impl Api {
    /// Loads the driver library and initializes it.
    ///
    /// # Errors
    /// `Unavailable` when the library is missing, lacks an entry point halo needs, or finds no
    /// device.
    pub fn load() -> Result<Api> {
        // SAFETY: loading the NVIDIA driver library runs its initializers, which have no
        // preconditions on the loading process.
        let library = unsafe { libloading::Library::new(LIBRARY) }
            .map_err(|e| Error::unavailable(format!("the CUDA driver library {LIBRARY} could not be loaded: {e}")))?;
        let api = Api::resolve(library)
            .map_err(|e| Error::unavailable(format!("{LIBRARY} lacks an entry point halo needs: {e}")))?;
        // SAFETY: cuInit takes flags, which must be 0.
        unsafe { api.init(0) }.map_err(|e| Error::unavailable(e.message().to_string()))?;
        Ok(api)
    }

    /// Turns a `CUresult` of `what` into a halo error.
    pub fn check(&self, result: CuResult, what: &str) -> Result<()> {
        if result == 0 {
            return Ok(());
        }
        Err(Error::new(
            status_code(result),
            format!("{what} failed: {}", self.error_name(result)),
        ))
    }

    /// The driver's name for `result` (`CUDA_ERROR_OUT_OF_MEMORY`), or its number.
    pub fn error_name(&self, result: CuResult) -> String {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static string, or fails for unknown codes.
        let known = unsafe { (self.get_error_name)(result, &mut name) } == 0 && !name.is_null();
        if known {
            // SAFETY: the driver returned a NUL-terminated static string.
            let name = unsafe { CStr::from_ptr(name) };
            format!("{} ({result})", name.to_string_lossy())
        } else {
            format!("CUresult {result}")
        }
    }

    /// Reads one integer attribute of `device`.
    pub fn attribute(&self, device: CuDevice, attribute: DeviceAttribute) -> Result<i32> {
        let mut value = 0;
        // SAFETY: `value` is a valid out-pointer and the attribute is a known enumerant.
        unsafe { self.device_get_attribute(&mut value, attribute as c_int, device) }?;
        Ok(value)
    }
}

/// The HAL status of a `CUresult`.
fn status_code(result: CuResult) -> StatusCode {
    match result {
        ERROR_OUT_OF_MEMORY => StatusCode::ResourceExhausted,
        ERROR_NO_DEVICE => StatusCode::Unavailable,
        // CUDA_ERROR_INVALID_VALUE, _INVALID_IMAGE, _INVALID_PTX, _NOT_FOUND, _INVALID_HANDLE.
        1 | 200 | 218 | 400 | 500 => StatusCode::InvalidArgument,
        // Launch failures and illegal accesses leave the context unusable: the device's state
        // is lost, as Vulkan's device loss is.
        700..=720 => StatusCode::DataLoss,
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
        assert_eq!(status_code(999), StatusCode::Internal);
    }
}
