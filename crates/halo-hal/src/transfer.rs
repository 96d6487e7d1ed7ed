//! Moving bytes between host memory and device buffers whether or not the host can map them
//! (what `iree_hal_device_transfer_h2d`/`d2h` do): through the mapping where the buffer allows
//! one, else on the device's queue, blocking until the bytes have arrived.
//!
//! Device-local memory on a discrete GPU is the usual case without a mapping; CPU devices and
//! integrated GPUs map everything, so they never touch the queue here.

use crate::buffer::Buffer;
use crate::device::Device;
use crate::fence::Fence;
use crate::memory::{BufferParams, BufferUsage, MemoryType, QueueAffinity};
use crate::semaphore::{Timeout, WaitMode};
use crate::{Result, ResultExt};

/// Whether the host can read and write `buffer` through a mapping: what [`Buffer::map_read`] and
/// [`Buffer::map_write`] require of the memory type and usage.
pub fn host_mappable(buffer: &Buffer) -> bool {
    buffer.memory_type().contains(MemoryType::HOST_VISIBLE)
        && buffer.allowed_usage().contains(BufferUsage::MAPPING_SCOPED)
}

/// Copies `target.len()` bytes of `source` from `offset` into `target`.
///
/// # Errors
/// Out-of-range reads; allocation or queue failures of the staging copy (naming the range).
pub fn read(device: &dyn Device, source: &Buffer, offset: u64, target: &mut [u8]) -> Result<()> {
    if target.is_empty() {
        return source.checked_range(offset, 0).map(drop);
    }
    if host_mappable(source) {
        return source.map_read(offset, target);
    }
    let length = target.len() as u64;
    let staging = device.allocator().allocate_buffer(staging_params(), length)?;
    run_on_queue(device, |wait, signal| {
        device.queue_copy(QueueAffinity::ANY, wait, signal, source, offset, &staging, 0, length)
    })
    .with_context(|| {
        format!(
            "staging bytes [{offset}, {}) of {source:?} for the host",
            offset + length
        )
    })?;
    staging.map_read(0, target)
}

/// Copies `source` into `target` at `offset`.
///
/// # Errors
/// Out-of-range writes; queue failures of the staged update (naming the range).
pub fn write(device: &dyn Device, target: &Buffer, offset: u64, source: &[u8]) -> Result<()> {
    if source.is_empty() {
        return target.checked_range(offset, 0).map(drop);
    }
    if host_mappable(target) {
        return target.map_write(offset, source);
    }
    run_on_queue(device, |wait, signal| {
        device.queue_update(QueueAffinity::ANY, wait, signal, source, target, offset)
    })
    .with_context(|| {
        format!(
            "staging bytes [{offset}, {}) of {target:?} from the host",
            offset + source.len() as u64
        )
    })
}

/// Host memory the device copies into: the far side of a staged read.
fn staging_params() -> BufferParams {
    BufferParams {
        memory_type: MemoryType::HOST_LOCAL | MemoryType::DEVICE_VISIBLE,
        usage: BufferUsage::TRANSFER | BufferUsage::MAPPING,
        ..Default::default()
    }
}

/// Submits one queue operation with nothing to wait for and blocks until it completes.
fn run_on_queue(device: &dyn Device, submit: impl FnOnce(&Fence, &Fence) -> Result<()>) -> Result<()> {
    let signal = Fence::at(device.create_semaphore(0)?, 1);
    submit(&Fence::default(), &signal)?;
    device.wait_semaphores(WaitMode::All, &signal, Timeout::Infinite)
}
