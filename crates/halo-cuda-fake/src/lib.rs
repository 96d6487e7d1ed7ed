//! A stand-in for CUDA's driver library (`libcuda.so.1`), built as a shared library that halo's
//! GPU driver loads in place of the real one (`GpuDriver::from_library`). It has one device whose
//! memory is host memory; modules load without compiling anything and kernel launches fail
//! (`CUDA_ERROR_NOT_SUPPORTED`). What it exercises is everything around the kernels:
//! allocation, fills, copies, submission order, semaphores and failure.
//!
//! Like a GPU, the stream runs its work some time after it is enqueued: here, only when the host
//! waits for an event recorded after it (or for the whole stream, or calls something that
//! synchronizes). A host that reads results before waiting for them sees stale memory, as it
//! would on a GPU. Host data given to an enqueued copy is taken at once, as CUDA stages pageable
//! memory.
//!
//! A 32-bit fill of [`FAULTING_FILL`] stands for a kernel that faults: when it runs it poisons
//! the context, and every later call that touches the stream returns
//! `CUDA_ERROR_ILLEGAL_ADDRESS`. So does a fill or copy outside the fake's allocations.
//!
//! A 32-bit fill of [`SLOW_FILL`] stands for long work: for [`SLOW_WORK`] after it is enqueued,
//! events say they are not reached, and a thread synchronizing with one spins on the CPU, as
//! under CUDA's default scheduling.
//!
//! Every entry point has the contract `cuda.h` gives it; pointers are trusted as CUDA trusts
//! them.
#![allow(
    clippy::missing_safety_doc,
    reason = "each entry point's contract is the CUDA driver API's own"
)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

type CuResult = c_int;

const SUCCESS: CuResult = 0;
const INVALID_VALUE: CuResult = 1;
const OUT_OF_MEMORY: CuResult = 2;
const INVALID_DEVICE: CuResult = 101;
const NOT_READY: CuResult = 600;
const ILLEGAL_ADDRESS: CuResult = 700;
const NOT_SUPPORTED: CuResult = 801;

/// The 32-bit fill pattern that makes the fake fault, as a kernel storing out of bounds would.
pub const FAULTING_FILL: u32 = 0xDEAD_FA17;

/// The 32-bit fill pattern that stands for work the device takes [`SLOW_WORK`] to finish.
pub const SLOW_FILL: u32 = 0x0DE1_A7ED;

/// How long the work a [`SLOW_FILL`] stands for takes.
pub const SLOW_WORK: Duration = Duration::from_millis(300);

/// Until when the device is busy with slow work.
static BUSY_UNTIL: Mutex<Option<Instant>> = Mutex::new(None);

/// How long the device stays busy with slow work, if it is.
fn busy_for() -> Option<Duration> {
    let until = (*BUSY_UNTIL.lock().unwrap_or_else(|p| p.into_inner()))?;
    until
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
}

/// The fake device's memory, in bytes.
const TOTAL_MEMORY: usize = 1 << 30;

/// The context's sticky error, once something faulted.
static FAULT: AtomicI32 = AtomicI32::new(SUCCESS);

/// Live allocations: address and layout.
static ALLOCATIONS: Mutex<Vec<(usize, Layout)>> = Mutex::new(Vec::new());

/// A handle the fake hands out for streams, contexts, modules and functions: any non-null value
/// will do, since each kind has one behaviour.
const HANDLE: *mut c_void = 0x1000 as *mut c_void;

/// Work on the stream, not yet run.
enum Work {
    Fill {
        address: u64,
        pattern: u32,
        width: usize,
        count: usize,
    },
    Write {
        target: u64,
        data: Vec<u8>,
    },
    Copy {
        source: u64,
        target: u64,
        bytes: usize,
    },
    Free(u64),
}

/// The stream: work in order with its ticket, and the number of tickets handed out.
struct Stream {
    pending: VecDeque<(u64, Work)>,
    enqueued: u64,
}

static STREAM: Mutex<Stream> = Mutex::new(Stream {
    pending: VecDeque::new(),
    enqueued: 0,
});

fn stream() -> std::sync::MutexGuard<'static, Stream> {
    STREAM.lock().unwrap_or_else(|p| p.into_inner())
}

/// Puts `work` on the stream, unless the context is poisoned.
fn enqueue(work: Work) -> CuResult {
    if poisoned() != SUCCESS {
        return poisoned();
    }
    let mut stream = stream();
    stream.enqueued += 1;
    let ticket = stream.enqueued;
    stream.pending.push_back((ticket, work));
    SUCCESS
}

/// Runs the stream's work up to and including `ticket`, then reports the context's state.
fn run_until(ticket: u64) -> CuResult {
    let mut stream = stream();
    while stream.pending.front().is_some_and(|(at, _)| *at <= ticket) {
        let Some((_, work)) = stream.pending.pop_front() else {
            break;
        };
        // Work behind a fault does not run; the context is lost.
        if poisoned() == SUCCESS {
            run(work);
        }
    }
    poisoned()
}

/// Runs everything on the stream.
fn run_all() -> CuResult {
    run_until(u64::MAX)
}

fn run(work: Work) {
    match work {
        Work::Fill {
            address,
            pattern,
            width,
            count,
        } => fill(address, pattern, width, count),
        Work::Write { target, data } => {
            if !allocated(target, data.len()) {
                fault();
                return;
            }
            // SAFETY: the target range lies in a live allocation (checked above).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), target as *mut u8, data.len()) };
        }
        Work::Copy { source, target, bytes } => {
            if !allocated(target, bytes) || !allocated(source, bytes) {
                fault();
                return;
            }
            // SAFETY: both ranges lie in live allocations (checked above); they may overlap.
            unsafe { std::ptr::copy(source as *const u8, target as *mut u8, bytes) };
        }
        Work::Free(address) => {
            free(address);
        }
    }
}

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

/// Writes `count` copies of `pattern` (`width` bytes each) at `address`, or faults when that is
/// not allocated (or the pattern is [`FAULTING_FILL`]).
fn fill(address: u64, pattern: u32, width: usize, count: usize) {
    let Some(bytes) = count.checked_mul(width) else {
        fault();
        return;
    };
    if (width == 4 && pattern == FAULTING_FILL) || !allocated(address, bytes) {
        fault();
        return;
    }
    let pattern = pattern.to_le_bytes();
    for element in 0..count {
        // SAFETY: the range was checked against a live allocation above.
        unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), (address as *mut u8).add(element * width), width) };
    }
}

fn enqueue_fill(address: u64, pattern: u32, width: usize, count: usize) -> CuResult {
    enqueue(Work::Fill {
        address,
        pattern,
        width,
        count,
    })
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
    unsafe { *uuid = device_uuid() };
    SUCCESS
}

/// The device's UUID: `HALO_CUDA_FAKE_UUID` (32 hex digits, dashes ignored) when set, so that a
/// test can make the fake the CUDA side of another driver's device, as an NVIDIA GPU is both a
/// CUDA and a Vulkan device under one UUID.
fn device_uuid() -> [u8; 16] {
    let mut uuid = *b"halo-fake-gpu-00";
    let Ok(text) = std::env::var("HALO_CUDA_FAKE_UUID") else {
        return uuid;
    };
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b'-').collect();
    let bytes: Option<Vec<u8>> = digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect();
    if let Some(bytes) = bytes.filter(|bytes| bytes.len() == 16) {
        uuid.copy_from_slice(&bytes);
    }
    uuid
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
    run_all()
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

// The synchronous frees wait for the stream, as CUDA's do.
#[no_mangle]
pub extern "C" fn cuMemFree_v2(address: u64) -> CuResult {
    run_all();
    free(address)
}

#[no_mangle]
pub extern "C" fn cuMemFreeAsync(address: u64, _stream: *mut c_void) -> CuResult {
    enqueue(Work::Free(address))
}

#[no_mangle]
pub extern "C" fn cuMemFreeHost(pointer: *mut c_void) -> CuResult {
    run_all();
    free(pointer as u64)
}

/// The synchronous fill: after the stream's work, at once.
#[no_mangle]
pub extern "C" fn cuMemsetD8_v2(address: u64, value: u8, count: usize) -> CuResult {
    let enqueued = enqueue_fill(address, u32::from(value), 1, count);
    if enqueued != SUCCESS {
        return enqueued;
    }
    run_all()
}

#[no_mangle]
pub extern "C" fn cuMemsetD8Async(address: u64, value: u8, count: usize, _stream: *mut c_void) -> CuResult {
    enqueue_fill(address, u32::from(value), 1, count)
}

#[no_mangle]
pub extern "C" fn cuMemsetD16Async(address: u64, value: u16, count: usize, _stream: *mut c_void) -> CuResult {
    enqueue_fill(address, u32::from(value), 2, count)
}

#[no_mangle]
pub extern "C" fn cuMemsetD32Async(address: u64, value: u32, count: usize, _stream: *mut c_void) -> CuResult {
    if value == SLOW_FILL {
        *BUSY_UNTIL.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + SLOW_WORK);
    }
    enqueue_fill(address, value, 4, count)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    target: u64,
    source: *const c_void,
    bytes: usize,
    _stream: *mut c_void,
) -> CuResult {
    // SAFETY: the source holds `bytes` bytes, per the API; they are staged now.
    let data = unsafe { std::slice::from_raw_parts(source.cast::<u8>(), bytes) }.to_vec();
    enqueue(Work::Write { target, data })
}

#[no_mangle]
pub extern "C" fn cuMemcpyAsync(target: u64, source: u64, bytes: usize, _stream: *mut c_void) -> CuResult {
    enqueue(Work::Copy { source, target, bytes })
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

/// An event: the ticket of the last work enqueued before it was recorded.
/// The ticket of the work an event follows: events are boxed tickets.
///
/// # Safety
/// `event` must be a live handle from `cuEventCreate`.
unsafe fn ticket_of<'a>(event: *mut c_void) -> &'a AtomicU64 {
    // SAFETY: the caller passes a live handle, which is a boxed `AtomicU64`.
    unsafe { &*event.cast::<AtomicU64>() }
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(event: *mut *mut c_void, _flags: c_uint) -> CuResult {
    let ticket = Box::into_raw(Box::new(AtomicU64::new(0)));
    // SAFETY: a valid out-pointer, per the API.
    unsafe { *event = ticket.cast() };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(event: *mut c_void, _stream: *mut c_void) -> CuResult {
    if poisoned() != SUCCESS {
        return poisoned();
    }
    let enqueued = stream().enqueued;
    // SAFETY: events are the fake's own (`cuEventCreate`), live until destroyed.
    unsafe { ticket_of(event) }.store(enqueued, Ordering::SeqCst);
    SUCCESS
}

/// Runs the stream up to the event: the work happens when someone waits for it. While slow work
/// is running, spins until it ends.
#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(event: *mut c_void) -> CuResult {
    // SAFETY: as in `cuEventRecord`.
    let ticket = unsafe { ticket_of(event) };
    while busy_for().is_some() {
        std::hint::spin_loop();
    }
    run_until(ticket.load(Ordering::SeqCst) & !QUERIED)
}

/// Set in an event's ticket once it has been queried since it was recorded.
const QUERIED: u64 = 1 << 63;

/// Says the event is not reached while slow work runs, and the first time it is asked after
/// each record, as a GPU still running would; asked again, runs the stream up to it.
#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(event: *mut c_void) -> CuResult {
    if busy_for().is_some() {
        return NOT_READY;
    }
    // SAFETY: as in `cuEventRecord`.
    let ticket = unsafe { ticket_of(event) }.fetch_or(QUERIED, Ordering::SeqCst);
    if ticket & QUERIED == 0 {
        return NOT_READY;
    }
    run_until(ticket & !QUERIED)
}

#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(event: *mut c_void) -> CuResult {
    // SAFETY: as in `cuEventRecord`; destroyed once, per the API.
    drop(unsafe { Box::from_raw(event.cast::<AtomicU64>()) });
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
