//! A stand-in for CUDA's driver library (`libcuda.so.1`), built as a shared library that halo's
//! GPU driver loads in place of the real one (`GpuDriver::from_library`). It has one device whose
//! memory is host memory: streams run each operation at once, so events are always complete;
//! modules load without compiling anything and kernel launches fail (`CUDA_ERROR_NOT_SUPPORTED`).
//! What it exercises is everything around the kernels: allocation, fills, copies, submission
//! order, semaphores and failure.
//!
//! A 32-bit fill of [`FAULTING_FILL`] stands for a kernel that faults: like a real fault it
//! poisons the context, and every later call that touches the stream returns
//! `CUDA_ERROR_ILLEGAL_ADDRESS`. So does any fill or copy outside the fake's allocations.
//!
//! Every entry point has the contract `cuda.h` gives it; pointers are trusted as CUDA trusts
//! them.
#![allow(
    clippy::missing_safety_doc,
    reason = "each entry point's contract is the CUDA driver API's own"
)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

type CuResult = c_int;

const SUCCESS: CuResult = 0;
const INVALID_VALUE: CuResult = 1;
const OUT_OF_MEMORY: CuResult = 2;
const INVALID_DEVICE: CuResult = 101;
const ILLEGAL_ADDRESS: CuResult = 700;
const NOT_SUPPORTED: CuResult = 801;

/// The 32-bit fill pattern that makes the fake fault, as a kernel storing out of bounds would.
pub const FAULTING_FILL: u32 = 0xDEAD_FA17;

/// The fake device's memory, in bytes.
const TOTAL_MEMORY: usize = 1 << 30;

/// The context's sticky error, once something faulted.
static FAULT: AtomicI32 = AtomicI32::new(SUCCESS);

/// Live allocations: address and layout.
static ALLOCATIONS: Mutex<Vec<(usize, Layout)>> = Mutex::new(Vec::new());

/// A handle the fake hands out for streams, contexts, events, modules and functions: any
/// non-null value will do, since each kind has one behaviour.
const HANDLE: *mut c_void = 0x1000 as *mut c_void;

fn allocations() -> std::sync::MutexGuard<'static, Vec<(usize, Layout)>> {
    ALLOCATIONS.lock().unwrap_or_else(|p| p.into_inner())
}

fn fault() -> CuResult {
    FAULT.store(ILLEGAL_ADDRESS, Ordering::SeqCst);
    ILLEGAL_ADDRESS
}

/// The sticky error, or success.
fn poisoned() -> CuResult {
    FAULT.load(Ordering::SeqCst)
}

/// Whether `[address, address + bytes)` lies in one allocation.
fn allocated(address: u64, bytes: usize) -> bool {
    let (Ok(start), Some(end)) = (usize::try_from(address), (address as usize).checked_add(bytes)) else {
        return false;
    };
    allocations()
        .iter()
        .any(|(base, layout)| start >= *base && end <= base + layout.size())
}

unsafe fn allocate(pointer: *mut u64, bytes: usize) -> CuResult {
    let Ok(layout) = Layout::from_size_align(bytes.max(1), 256) else {
        return INVALID_VALUE;
    };
    if bytes > TOTAL_MEMORY {
        return OUT_OF_MEMORY;
    }
    // SAFETY: the layout has a non-zero size.
    let memory = unsafe { alloc_zeroed(layout) };
    if memory.is_null() {
        return OUT_OF_MEMORY;
    }
    allocations().push((memory as usize, layout));
    // SAFETY: the caller gives a valid out-pointer.
    unsafe { *pointer = memory as u64 };
    SUCCESS
}

fn free(address: u64) -> CuResult {
    let mut allocations = allocations();
    let Some(index) = allocations.iter().position(|(base, _)| *base as u64 == address) else {
        return INVALID_VALUE;
    };
    let (base, layout) = allocations.swap_remove(index);
    // SAFETY: `base` was allocated with `layout` and is freed once (it left the list).
    unsafe { dealloc(base as *mut u8, layout) };
    SUCCESS
}

/// Writes `count` copies of `pattern` (`width` bytes each) at `address`, when that is allocated.
fn fill(address: u64, pattern: u32, width: usize, count: usize) -> CuResult {
    if poisoned() != SUCCESS {
        return poisoned();
    }
    if width == 4 && pattern == FAULTING_FILL {
        return fault();
    }
    let Some(bytes) = count.checked_mul(width) else {
        return INVALID_VALUE;
    };
    if !allocated(address, bytes) {
        return fault();
    }
    let pattern = pattern.to_le_bytes();
    for element in 0..count {
        // SAFETY: the range was checked against a live allocation above.
        unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), (address as *mut u8).add(element * width), width) };
    }
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuInit(_flags: c_uint) -> CuResult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *version = 12040 };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *count = 1 };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CuResult {
    if ordinal != 0 {
        return INVALID_DEVICE;
    }
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *device = 0 };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, length: c_int, _device: c_int) -> CuResult {
    let text = b"halo fake GPU\0";
    let count = text.len().min(length.max(0) as usize);
    // SAFETY: the caller's buffer holds `length` bytes.
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast(), name, count) };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], _device: c_int) -> CuResult {
    // SAFETY: a valid out-pointer to 16 bytes, per the API.
    unsafe { *uuid = *b"halo-fake-gpu-00" };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, _device: c_int) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *bytes = TOTAL_MEMORY };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(value: *mut c_int, attribute: c_int, _device: c_int) -> CuResult {
    // The numbers are `CUdevice_attribute`'s.
    let answer = match attribute {
        // Threads per block; largest block in x and y.
        1..=3 => 1024,
        // Largest block in z.
        4 => 64,
        // Largest grid in x, then y and z.
        5 => i32::MAX,
        6 | 7 => 65535,
        // Compute capability 8.0.
        75 => 8,
        76 => 0,
        // Shared memory a block may opt in to.
        97 => 100 * 1024,
        // Memory pools (stream-ordered allocation).
        115 => 1,
        _ => return INVALID_VALUE,
    };
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *value = answer };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(context: *mut *mut c_void, _device: c_int) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *context = HANDLE };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(_device: c_int) -> CuResult {
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuCtxSetCurrent(_context: *mut c_void) -> CuResult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(stream: *mut *mut c_void, _flags: c_uint) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *stream = HANDLE };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuStreamDestroy_v2(_stream: *mut c_void) -> CuResult {
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuStreamSynchronize(_stream: *mut c_void) -> CuResult {
    poisoned()
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(pointer: *mut u64, bytes: usize) -> CuResult {
    // SAFETY: the caller's out-pointer, per the API.
    unsafe { allocate(pointer, bytes) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(pointer: *mut u64, bytes: usize, _stream: *mut c_void) -> CuResult {
    if poisoned() != SUCCESS {
        return poisoned();
    }
    // SAFETY: the caller's out-pointer, per the API.
    unsafe { allocate(pointer, bytes) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocManaged(pointer: *mut u64, bytes: usize, _flags: c_uint) -> CuResult {
    // SAFETY: the caller's out-pointer, per the API.
    unsafe { allocate(pointer, bytes) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pointer: *mut *mut c_void, bytes: usize) -> CuResult {
    // SAFETY: the caller's out-pointer, which holds an address either way.
    unsafe { allocate(pointer.cast(), bytes) }
}

#[no_mangle]
pub extern "C" fn cuMemFree_v2(address: u64) -> CuResult {
    free(address)
}

#[no_mangle]
pub extern "C" fn cuMemFreeAsync(address: u64, _stream: *mut c_void) -> CuResult {
    free(address)
}

#[no_mangle]
pub extern "C" fn cuMemFreeHost(pointer: *mut c_void) -> CuResult {
    free(pointer as u64)
}

#[no_mangle]
pub extern "C" fn cuMemsetD8_v2(address: u64, value: u8, count: usize) -> CuResult {
    fill(address, u32::from(value), 1, count)
}

#[no_mangle]
pub extern "C" fn cuMemsetD8Async(address: u64, value: u8, count: usize, _stream: *mut c_void) -> CuResult {
    fill(address, u32::from(value), 1, count)
}

#[no_mangle]
pub extern "C" fn cuMemsetD16Async(address: u64, value: u16, count: usize, _stream: *mut c_void) -> CuResult {
    fill(address, u32::from(value), 2, count)
}

#[no_mangle]
pub extern "C" fn cuMemsetD32Async(address: u64, value: u32, count: usize, _stream: *mut c_void) -> CuResult {
    fill(address, value, 4, count)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    target: u64,
    source: *const c_void,
    bytes: usize,
    _stream: *mut c_void,
) -> CuResult {
    if poisoned() != SUCCESS {
        return poisoned();
    }
    if !allocated(target, bytes) {
        return fault();
    }
    // SAFETY: the source holds `bytes` bytes per the API; the target was checked above.
    unsafe { std::ptr::copy(source.cast::<u8>(), target as *mut u8, bytes) };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuMemcpyAsync(target: u64, source: u64, bytes: usize, _stream: *mut c_void) -> CuResult {
    if poisoned() != SUCCESS {
        return poisoned();
    }
    if !allocated(target, bytes) || !allocated(source, bytes) {
        return fault();
    }
    // SAFETY: both ranges lie in live allocations (checked above); they may overlap.
    unsafe { std::ptr::copy(source as *const u8, target as *mut u8, bytes) };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    module: *mut *mut c_void,
    _image: *const c_void,
    _count: c_uint,
    _options: *mut c_int,
    _values: *mut *mut c_void,
) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *module = HANDLE };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(
    function: *mut *mut c_void,
    _module: *mut c_void,
    _name: *const c_char,
) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *function = HANDLE };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuModuleUnload(_module: *mut c_void) -> CuResult {
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuFuncSetAttribute(_function: *mut c_void, _attribute: c_int, _value: c_int) -> CuResult {
    SUCCESS
}

#[no_mangle]
#[allow(clippy::too_many_arguments, reason = "the entry point's own arity")]
pub extern "C" fn cuLaunchKernel(
    _function: *mut c_void,
    _grid_x: c_uint,
    _grid_y: c_uint,
    _grid_z: c_uint,
    _block_x: c_uint,
    _block_y: c_uint,
    _block_z: c_uint,
    _shared_bytes: c_uint,
    _stream: *mut c_void,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CuResult {
    match poisoned() {
        SUCCESS => NOT_SUPPORTED,
        fault => fault,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(event: *mut *mut c_void, _flags: c_uint) -> CuResult {
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *event = HANDLE };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cuEventRecord(_event: *mut c_void, _stream: *mut c_void) -> CuResult {
    poisoned()
}

#[no_mangle]
pub extern "C" fn cuEventSynchronize(_event: *mut c_void) -> CuResult {
    poisoned()
}

#[no_mangle]
pub extern "C" fn cuEventDestroy_v2(_event: *mut c_void) -> CuResult {
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(result: CuResult, name: *mut *const c_char) -> CuResult {
    let text: &'static [u8] = match result {
        SUCCESS => b"CUDA_SUCCESS\0",
        INVALID_VALUE => b"CUDA_ERROR_INVALID_VALUE\0",
        OUT_OF_MEMORY => b"CUDA_ERROR_OUT_OF_MEMORY\0",
        INVALID_DEVICE => b"CUDA_ERROR_INVALID_DEVICE\0",
        ILLEGAL_ADDRESS => b"CUDA_ERROR_ILLEGAL_ADDRESS\0",
        NOT_SUPPORTED => b"CUDA_ERROR_NOT_SUPPORTED\0",
        _ => return INVALID_VALUE,
    };
    // SAFETY: a valid out-pointer, per the API; the string is static.
    unsafe { *name = text.as_ptr().cast() };
    SUCCESS
}
