//! The module that calls into OpenCL unsafely (with `khr_command_buffer` for that extension):
//! buffers over host memory or of the device's own, and a batch of queue commands whose borrowed
//! inputs outlive the device's use of them.
//!
//! The ICD loader (`libOpenCL.so.1`) is opened at run time by `opencl3`'s dynamic loading, so
//! the build needs no SDK and a machine without OpenCL reports the driver unavailable.

use halo_hal::{Error, Result};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::error_codes::ClError;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR};
use opencl3::types::{cl_mem, CL_BLOCKING};
use std::any::Any;
use std::ptr::{self, NonNull};

/// An OpenCL failure of `function` as a halo error: out-of-memory codes as `ResourceExhausted`,
/// a missing loader as `Unavailable`, the rest as `Internal`.
pub(crate) fn cl_error(function: &str, error: ClError) -> Error {
    use opencl3::error_codes::*;
    let message = format!("{function} failed: {error} ({})", error.0);
    match error.0 {
        CL_OUT_OF_RESOURCES | CL_OUT_OF_HOST_MEMORY | CL_MEM_OBJECT_ALLOCATION_FAILURE | CL_INVALID_BUFFER_SIZE => {
            Error::resource_exhausted(message)
        }
        DLOPEN_RUNTIME_LOAD_FAILED | DLOPEN_FUNCTION_NOT_AVAILABLE => Error::unavailable(format!(
            "{message}: the OpenCL ICD loader libOpenCL.so.1 is missing (Debian: ocl-icd-libopencl1 and a driver \
             such as pocl-opencl-icd)"
        )),
        _ => Error::internal(message),
    }
}

/// A buffer object over `size` bytes of host memory at `host` (`CL_MEM_USE_HOST_PTR`): on a
/// device whose memory is the host's, kernels read and write those very bytes.
///
/// # Safety
/// `host` must address `size` bytes that stay allocated, and are not moved, until the returned
/// buffer is dropped.
pub(crate) unsafe fn host_buffer(context: &Context, host: NonNull<u8>, size: u64) -> Result<Buffer<u8>> {
    let size = usize::try_from(size.max(1))
        .map_err(|_| Error::resource_exhausted(format!("a buffer of {size} bytes does not fit this host")))?;
    // SAFETY: the caller keeps `host` valid for `size` bytes for the buffer's lifetime.
    unsafe {
        Buffer::<u8>::create(
            context,
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            size,
            host.as_ptr().cast(),
        )
    }
    .map_err(|e| cl_error("clCreateBuffer", e))
}

/// A buffer object of `size` bytes of the device's own memory, zeroed by a fill enqueued on
/// `queue` ahead of anything that can use it (every use of the buffer goes through that
/// in-order queue; the host cannot map it).
pub(crate) fn device_buffer(context: &Context, queue: &CommandQueue, size: u64) -> Result<Buffer<u8>> {
    let size = usize::try_from(size.max(1))
        .map_err(|_| Error::resource_exhausted(format!("a buffer of {size} bytes does not fit this host")))?;
    // SAFETY: no host pointer is given, so OpenCL allocates the memory itself.
    let buffer = unsafe { Buffer::<u8>::create(context, CL_MEM_READ_WRITE, size, ptr::null_mut()) }
        .map_err(|e| cl_error("clCreateBuffer", e))?;
    let zero = 0u8;
    // SAFETY: the range is the whole buffer; OpenCL copies the one-byte pattern at enqueue.
    let event = unsafe {
        opencl3::command_queue::enqueue_fill_buffer(
            queue.get(),
            buffer.get(),
            ptr::from_ref(&zero).cast(),
            1,
            0,
            size,
            0,
            ptr::null(),
        )
    }
    .map_err(|e| cl_error("clEnqueueFillBuffer", ClError(e)))?;
    drop(Event::new(event));
    Ok(buffer)
}

/// Which way [`sync_host_range`] copies.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncDirection {
    /// The host's bytes to the device's copy (after host writes).
    ToDevice,
    /// The device's copy to the host's bytes (before host reads).
    ToHost,
}

/// Copies `[offset, offset + length)` between a buffer object and the host memory beside it
/// (`host`, the start of the host's copy of the whole buffer), blocking: the host's bytes to the
/// buffer after host writes, the buffer's to the host before host reads. The in-order queue
/// orders the copy after every command already enqueued on the buffer.
///
/// # Safety
/// `host` must address at least `offset + length` bytes, none of them `mem`'s own storage, and
/// `mem` must hold at least `offset + length` bytes.
pub(crate) unsafe fn sync_host_range(
    queue: &CommandQueue,
    mem: cl_mem,
    host: NonNull<u8>,
    offset: u64,
    length: u64,
    direction: SyncDirection,
) -> Result<()> {
    // SAFETY: the caller guarantees the range lies within the buffer's host memory.
    let pointer = unsafe { host.as_ptr().add(offset as usize) }.cast();
    let (offset, length) = (offset as usize, length as usize);
    // SAFETY: blocking calls over a range the caller guarantees within both copies.
    let event = unsafe {
        match direction {
            SyncDirection::ToDevice => opencl3::command_queue::enqueue_write_buffer(
                queue.get(),
                mem,
                CL_BLOCKING,
                offset,
                length,
                pointer,
                0,
                ptr::null(),
            ),
            SyncDirection::ToHost => opencl3::command_queue::enqueue_read_buffer(
                queue.get(),
                mem,
                CL_BLOCKING,
                offset,
                length,
                pointer,
                0,
                ptr::null(),
            ),
        }
    };
    let function = match direction {
        SyncDirection::ToDevice => "clEnqueueWriteBuffer",
        SyncDirection::ToHost => "clEnqueueReadBuffer",
    };
    event
        .map(|event| drop(Event::new(event)))
        .map_err(|e| cl_error(function, ClError(e)))
}

/// One kernel argument.
pub(crate) enum Argument<'a> {
    /// A buffer object.
    Buffer(cl_mem),
    /// A byte offset or length (`ulong`).
    Offset(u64),
    /// Bytes passed by value (the push constant struct).
    Bytes(&'a [u8]),
}

/// Sets `kernel`'s arguments, which OpenCL captures when a launch is enqueued or recorded.
pub(crate) fn set_arguments(kernel: &Kernel, arguments: &[Argument<'_>]) -> Result<()> {
    for (index, argument) in arguments.iter().enumerate() {
        let index = index as u32;
        // SAFETY: the arguments follow the translator's kernel signature: a `__global uchar*`
        // and a `ulong` offset per binding, then the push constant struct of exactly its size.
        let set = unsafe {
            match argument {
                Argument::Buffer(mem) => kernel.set_arg(index, mem),
                Argument::Offset(offset) => kernel.set_arg(index, offset),
                Argument::Bytes(bytes) => {
                    opencl3::kernel::set_kernel_arg(kernel.get(), index, bytes.len(), bytes.as_ptr().cast())
                        .map_err(ClError)
                }
            }
        };
        set.map_err(|e| cl_error(&format!("clSetKernelArg (argument {index})"), e))?;
    }
    Ok(())
}

/// Commands enqueued on an in-order queue. The bytes of updates are copied into the batch and
/// kept until the commands have finished: dropping an unfinished batch waits for the queue, and
/// [`Batch::finish_later`] hands them, with what the caller keeps alive, to an [`InFlight`].
pub(crate) struct Batch<'q> {
    queue: &'q CommandQueue,
    finished: bool,
    /// The bytes of updates, read by the device until the commands finish.
    written: Vec<Box<[u8]>>,
}

impl<'q> Batch<'q> {
    pub(crate) fn new(queue: &'q CommandQueue) -> Self {
        Batch {
            queue,
            finished: false,
            written: Vec::new(),
        }
    }

    /// Repeats `pattern` over `[offset, offset + length)` of `buffer`.
    pub(crate) fn fill(&mut self, buffer: cl_mem, pattern: &[u8], offset: u64, length: u64) -> Result<()> {
        // SAFETY: the range was validated against the buffer; OpenCL copies the pattern at enqueue.
        let event = unsafe {
            opencl3::command_queue::enqueue_fill_buffer(
                self.queue.get(),
                buffer,
                pattern.as_ptr().cast(),
                pattern.len(),
                offset as usize,
                length as usize,
                0,
                ptr::null(),
            )
        }
        .map_err(|e| cl_error("clEnqueueFillBuffer", ClError(e)))?;
        drop(Event::new(event));
        Ok(())
    }

    /// Writes `data` at `offset` of `buffer`.
    pub(crate) fn write(&mut self, buffer: cl_mem, offset: u64, data: &[u8]) -> Result<()> {
        let data: Box<[u8]> = data.into();
        // SAFETY: the range was validated; the bytes are the batch's own, kept until the queue
        // has run the write (the batch finishes it, or an `InFlight` keeps them).
        let event = unsafe {
            opencl3::command_queue::enqueue_write_buffer(
                self.queue.get(),
                buffer,
                0,
                offset as usize,
                data.len(),
                data.as_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .map_err(|e| cl_error("clEnqueueWriteBuffer", ClError(e)))?;
        drop(Event::new(event));
        self.written.push(data);
        Ok(())
    }

    /// Copies `length` bytes between two buffer ranges.
    pub(crate) fn copy(&mut self, source: (cl_mem, u64), target: (cl_mem, u64), length: u64) -> Result<()> {
        // SAFETY: both ranges were validated against their buffers.
        let event = unsafe {
            opencl3::command_queue::enqueue_copy_buffer(
                self.queue.get(),
                source.0,
                target.0,
                source.1 as usize,
                target.1 as usize,
                length as usize,
                0,
                ptr::null(),
            )
        }
        .map_err(|e| cl_error("clEnqueueCopyBuffer", ClError(e)))?;
        drop(Event::new(event));
        Ok(())
    }

    /// Reads `target.len()` bytes at `offset` of `buffer`, waiting for them.
    pub(crate) fn read_now(&mut self, buffer: cl_mem, offset: u64, target: &mut [u8]) -> Result<()> {
        // SAFETY: the range was validated; the read is blocking, so `target` outlives it.
        unsafe {
            opencl3::command_queue::enqueue_read_buffer(
                self.queue.get(),
                buffer,
                CL_BLOCKING,
                offset as usize,
                target.len(),
                target.as_mut_ptr().cast(),
                0,
                ptr::null(),
            )
        }
        .map(|event| drop(Event::new(event)))
        .map_err(|e| cl_error("clEnqueueReadBuffer", ClError(e)))
    }

    /// Runs `kernel` over `workgroups` of `local` work-items with `arguments`.
    ///
    /// The kernel's arguments are set and the launch enqueued under one borrow of the kernel;
    /// OpenCL captures argument values at enqueue.
    pub(crate) fn dispatch(
        &mut self,
        kernel: &Kernel,
        arguments: &[Argument<'_>],
        workgroups: [u32; 3],
        local: [u32; 3],
    ) -> Result<()> {
        set_arguments(kernel, arguments)?;
        let local = local.map(|l| l as usize);
        let global = [0, 1, 2].map(|d| workgroups[d] as usize * local[d]);
        // SAFETY: every argument is set; `global`/`local` have three dimensions.
        let event = unsafe {
            self.queue
                .enqueue_nd_range_kernel(kernel.get(), 3, ptr::null(), global.as_ptr(), local.as_ptr(), &[])
        }
        .map_err(|e| cl_error("clEnqueueNDRangeKernel", e))?;
        drop(event);
        Ok(())
    }

    /// Lets the commands run on without waiting: a marker after them, sent to the device, and
    /// the batch's bytes with `keep` (what the commands use: their buffers) held until it is
    /// reached.
    pub(crate) fn finish_later(mut self, keep: Box<dyn Any + Send>) -> Result<InFlight> {
        // SAFETY: no wait list; the marker completes once every command before it has.
        let marker = unsafe { self.queue.enqueue_marker_with_wait_list(&[]) }
            .map_err(|e| cl_error("clEnqueueMarkerWithWaitList", e))?;
        self.queue.flush().map_err(|e| cl_error("clFlush", e))?;
        self.finished = true;
        Ok(InFlight {
            marker: Some(marker),
            _keep: (std::mem::take(&mut self.written), keep),
        })
    }
}

/// Commands the device is still running, and what they use, kept until they have finished.
///
/// Ownership: dropping it waits for the commands, so nothing they use is freed under them.
pub(crate) struct InFlight {
    marker: Option<Event>,
    _keep: (Vec<Box<[u8]>>, Box<dyn Any + Send>),
}

impl halo_hal::submission_queue::InFlight for InFlight {
    fn wait(mut self) -> Result<()> {
        let Some(marker) = self.marker.take() else {
            return Ok(());
        };
        marker.wait().map_err(|e| cl_error("clWaitForEvents", e))?;
        match marker.command_execution_status() {
            Ok(status) if status.0 < 0 => Err(cl_error("a queued command", ClError(status.0))),
            _ => Ok(()),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(marker) = self.marker.take() {
            let _ = marker.wait();
        }
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        // An early return must not free what the device may still read.
        if !self.finished {
            let _ = self.queue.finish();
        }
    }
}
