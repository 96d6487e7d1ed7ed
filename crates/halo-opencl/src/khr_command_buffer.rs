//! `cl_khr_command_buffer`, the second module that calls into OpenCL unsafely: command lists
//! recorded once and enqueued whole, as the GPU drivers' graphs are.
//!
//! The ICD loader does not export the extension's entry points, so they are looked up per
//! platform (`clGetExtensionFunctionAddressForPlatform`). Its entry points changed shape while
//! it was provisional: the final version, 1.0.0 (Intel's CPU runtime 2026), takes a properties
//! list in the copy and fill recording calls that 0.9.0 (PoCL 3.1's) does not. Those two
//! versions, whose signatures are written here, are used; a device with another runs reusable
//! command buffers as one-shot ones.

use crate::api::{cl_error, Argument};
use halo_hal::{Error, Result};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device as ClDevice;
use opencl3::error_codes::ClError;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_COPY_HOST_PTR, CL_MEM_READ_ONLY};
use opencl3::types::{cl_command_queue, cl_int, cl_kernel, cl_mem, cl_platform_id, cl_uint};
use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::Arc;

/// `CL_MAKE_VERSION(0, 9, 0)`, PoCL 3.1's provisional version.
const PROVISIONAL_0_9_0: cl_uint = 9 << 12;
/// `CL_MAKE_VERSION(1, 0, 0)`, the final version.
const FINAL_1_0_0: cl_uint = 1 << 22;

type RawCommandBuffer = *mut c_void;
type SyncPoint = cl_uint;

type CreateFn = unsafe extern "C" fn(cl_uint, *const cl_command_queue, *const u64, *mut cl_int) -> RawCommandBuffer;
type FinalizeFn = unsafe extern "C" fn(RawCommandBuffer) -> cl_int;
type ReleaseFn = unsafe extern "C" fn(RawCommandBuffer) -> cl_int;
type EnqueueFn = unsafe extern "C" fn(
    cl_uint,
    *const cl_command_queue,
    RawCommandBuffer,
    cl_uint,
    *const c_void,
    *mut c_void,
) -> cl_int;
type CopyFn = unsafe extern "C" fn(
    RawCommandBuffer,
    cl_command_queue,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut c_void,
) -> cl_int;
type CopyFnWithProperties = unsafe extern "C" fn(
    RawCommandBuffer,
    cl_command_queue,
    *const u64,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut c_void,
) -> cl_int;
type FillFnWithProperties = unsafe extern "C" fn(
    RawCommandBuffer,
    cl_command_queue,
    *const u64,
    cl_mem,
    *const c_void,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut c_void,
) -> cl_int;
type FillFn = unsafe extern "C" fn(
    RawCommandBuffer,
    cl_command_queue,
    cl_mem,
    *const c_void,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut c_void,
) -> cl_int;
type NdRangeFn = unsafe extern "C" fn(
    RawCommandBuffer,
    cl_command_queue,
    *const u64,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut c_void,
) -> cl_int;

/// The copy recording call, as the device's version spells it.
#[derive(Clone, Copy)]
enum Copy {
    Provisional(CopyFn),
    Final(CopyFnWithProperties),
}

/// The fill recording call, as the device's version spells it.
#[derive(Clone, Copy)]
enum Fill {
    Provisional(FillFn),
    Final(FillFnWithProperties),
}

/// The extension's entry points on one platform.
pub(crate) struct KhrCommandBuffers {
    create: CreateFn,
    finalize: FinalizeFn,
    release: ReleaseFn,
    enqueue: EnqueueFn,
    copy: Copy,
    fill: Fill,
    nd_range: NdRangeFn,
}

impl KhrCommandBuffers {
    /// The entry points, where `device` has the extension at the version this module calls and
    /// its platform gives every one of them.
    pub(crate) fn load(device: &ClDevice) -> Option<Self> {
        let version = device
            .extensions_with_version()
            .ok()?
            .into_iter()
            .find(|e| name_of(&e.name) == "cl_khr_command_buffer")?
            .version;
        if version != PROVISIONAL_0_9_0 && version != FINAL_1_0_0 {
            return None;
        }
        let platform = device.platform().ok()?;
        let runtime = cl3::load_library().as_ref().ok()?;
        let lookup = |name: &[u8]| -> Option<*mut c_void> {
            let address = runtime
                .clGetExtensionFunctionAddressForPlatform(platform as cl_platform_id, name.as_ptr().cast::<c_char>())?;
            (!address.is_null()).then_some(address)
        };
        // SAFETY: each address is the platform's entry point of that name, whose C signature is
        // the function type it becomes for the version checked above.
        unsafe {
            Some(KhrCommandBuffers {
                create: std::mem::transmute::<*mut c_void, CreateFn>(lookup(b"clCreateCommandBufferKHR\0")?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(lookup(b"clFinalizeCommandBufferKHR\0")?),
                release: std::mem::transmute::<*mut c_void, ReleaseFn>(lookup(b"clReleaseCommandBufferKHR\0")?),
                enqueue: std::mem::transmute::<*mut c_void, EnqueueFn>(lookup(b"clEnqueueCommandBufferKHR\0")?),
                copy: match lookup(b"clCommandCopyBufferKHR\0")? {
                    f if version == FINAL_1_0_0 => {
                        Copy::Final(std::mem::transmute::<*mut c_void, CopyFnWithProperties>(f))
                    }
                    f => Copy::Provisional(std::mem::transmute::<*mut c_void, CopyFn>(f)),
                },
                fill: match lookup(b"clCommandFillBufferKHR\0")? {
                    f if version == FINAL_1_0_0 => {
                        Fill::Final(std::mem::transmute::<*mut c_void, FillFnWithProperties>(f))
                    }
                    f => Fill::Provisional(std::mem::transmute::<*mut c_void, FillFn>(f)),
                },
                nd_range: std::mem::transmute::<*mut c_void, NdRangeFn>(lookup(b"clCommandNDRangeKernelKHR\0")?),
            })
        }
    }
}

fn name_of(name: &[u8]) -> String {
    let end = name.iter().position(|c| *c == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

fn check(function: &str, status: cl_int) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(cl_error(function, ClError(status)))
    }
}

/// A command buffer being recorded for one in-order queue, whose commands then run in the order
/// they were recorded. (Recording calls name no queue: the extension's base version records for
/// the queue the command buffer was made for, and refuses any other argument than null.)
pub(crate) struct Recorder {
    recorded: Recorded,
}

impl Recorder {
    /// An empty command buffer for `queue`.
    pub(crate) fn new(api: &Arc<KhrCommandBuffers>, queue: &CommandQueue) -> Result<Self> {
        let queue = queue.get();
        let mut status = 0;
        // SAFETY: one live queue, no properties; the status is written before the call returns.
        let raw = unsafe { (api.create)(1, &queue, ptr::null(), &mut status) };
        check("clCreateCommandBufferKHR", status)?;
        if raw.is_null() {
            return Err(Error::internal("clCreateCommandBufferKHR gave no command buffer"));
        }
        Ok(Recorder {
            recorded: Recorded {
                api: api.clone(),
                raw,
                staged: Vec::new(),
            },
        })
    }

    /// Records a fill of `[offset, offset + length)` of `buffer` with `pattern`.
    pub(crate) fn fill(&mut self, buffer: cl_mem, pattern: &[u8], offset: u64, length: u64) -> Result<()> {
        let api = &self.recorded.api;
        let (raw, pattern_bytes) = (self.recorded.raw, pattern.as_ptr().cast());
        let (offset, length) = (offset as usize, length as usize);
        // SAFETY: the range was validated against the buffer; the pattern is copied at recording.
        let status = unsafe {
            match api.fill {
                Fill::Provisional(fill) => fill(
                    raw,
                    ptr::null_mut(),
                    buffer,
                    pattern_bytes,
                    pattern.len(),
                    offset,
                    length,
                    0,
                    ptr::null(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                ),
                Fill::Final(fill) => fill(
                    raw,
                    ptr::null_mut(),
                    ptr::null(),
                    buffer,
                    pattern_bytes,
                    pattern.len(),
                    offset,
                    length,
                    0,
                    ptr::null(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                ),
            }
        };
        check("clCommandFillBufferKHR", status)
    }

    /// Records a copy of `length` bytes between two buffer ranges.
    pub(crate) fn copy(&mut self, source: (cl_mem, u64), target: (cl_mem, u64), length: u64) -> Result<()> {
        let api = &self.recorded.api;
        let raw = self.recorded.raw;
        let (from, to, length) = (source.1 as usize, target.1 as usize, length as usize);
        // SAFETY: both ranges were validated against their buffers.
        let status = unsafe {
            match api.copy {
                Copy::Provisional(copy) => copy(
                    raw,
                    ptr::null_mut(),
                    source.0,
                    target.0,
                    from,
                    to,
                    length,
                    0,
                    ptr::null(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                ),
                Copy::Final(copy) => copy(
                    raw,
                    ptr::null_mut(),
                    ptr::null(),
                    source.0,
                    target.0,
                    from,
                    to,
                    length,
                    0,
                    ptr::null(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                ),
            }
        };
        check("clCommandCopyBufferKHR", status)
    }

    /// Records a write of `data` at `offset` of `buffer`: the extension has no write command, so
    /// the bytes go into a buffer of their own, kept with the recording, and are copied from it.
    pub(crate) fn write(&mut self, context: &Context, buffer: cl_mem, offset: u64, data: &[u8]) -> Result<()> {
        // SAFETY: OpenCL copies `data.len()` bytes from `data` into the new buffer at creation.
        let staged = unsafe {
            Buffer::<u8>::create(
                context,
                CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                data.len(),
                data.as_ptr().cast_mut().cast(),
            )
        }
        .map_err(|e| cl_error("clCreateBuffer", e))?;
        self.copy((staged.get(), 0), (buffer, offset), data.len() as u64)?;
        self.recorded.staged.push(staged);
        Ok(())
    }

    /// Records `kernel` over `workgroups` of `local` work-items with `arguments`, which the
    /// recording captures.
    pub(crate) fn dispatch(
        &mut self,
        kernel: &Kernel,
        arguments: &[Argument<'_>],
        workgroups: [u32; 3],
        local: [u32; 3],
    ) -> Result<()> {
        crate::api::set_arguments(kernel, arguments)?;
        let local = local.map(|l| l as usize);
        let global = [0, 1, 2].map(|d| workgroups[d] as usize * local[d]);
        let api = &self.recorded.api;
        // SAFETY: every argument is set; `global`/`local` have three dimensions.
        let status = unsafe {
            (api.nd_range)(
                self.recorded.raw,
                ptr::null_mut(),
                ptr::null(),
                kernel.get(),
                3,
                ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                0,
                ptr::null(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        check("clCommandNDRangeKernelKHR", status)
    }

    /// The finished recording.
    pub(crate) fn finish(self) -> Result<Recorded> {
        // SAFETY: a command buffer in the recording state.
        check("clFinalizeCommandBufferKHR", unsafe {
            (self.recorded.api.finalize)(self.recorded.raw)
        })?;
        Ok(self.recorded)
    }
}

/// A finalized command buffer, with the buffers it copies written data from.
///
/// Ownership: released when dropped; whoever holds it keeps alive the buffers and kernels its
/// commands name. Threading: any thread; enqueued by one thread at a time.
pub(crate) struct Recorded {
    api: Arc<KhrCommandBuffers>,
    raw: RawCommandBuffer,
    staged: Vec<Buffer<u8>>,
}

// SAFETY: OpenCL objects may be used from any thread; the device enqueues a recording from one
// thread at a time and waits for it before the next submission runs.
unsafe impl Send for Recorded {}
// SAFETY: as above; nothing is mutated through a shared reference.
unsafe impl Sync for Recorded {}

impl Recorded {
    /// Enqueues the recorded commands on `queue`, the queue they were recorded for.
    pub(crate) fn enqueue(&self, queue: &CommandQueue) -> Result<()> {
        let queue = queue.get();
        // SAFETY: a finalized command buffer recorded for this queue, not pending (the device
        // waits for each submission before it runs the next).
        let status = unsafe { (self.api.enqueue)(1, &queue, self.raw, 0, ptr::null(), ptr::null_mut()) };
        check("clEnqueueCommandBufferKHR", status)
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        // SAFETY: the command buffer was created here and is released once.
        unsafe { (self.api.release)(self.raw) };
    }
}
