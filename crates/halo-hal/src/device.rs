//! Devices: one accelerator with its allocator, queues and object factories.

use crate::allocator::Allocator;
use crate::buffer::Buffer;
use crate::command_buffer::{Binding, BufferRef, CommandBuffer, CommandBufferMode, CommandCategory};
use crate::executable::ExecutableCache;
use crate::fence::Fence;
use crate::memory::{BufferParams, QueueAffinity};
use crate::semaphore::{wait_semaphores, Semaphore, TimelineSemaphore, Timeout, WaitMode};
use crate::{Error, Result};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// Identity of a device as its driver enumerates it (`iree_hal_device_info_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Stable id within the driver.
    pub id: u64,
    /// Path used in URIs (`local-task://<path>`).
    pub path: String,
    /// Human-readable name.
    pub name: String,
    /// Further facts for people choosing a device (`halo devices`): kind, driver version,
    /// memory heaps, as (what, value) lines.
    pub details: Vec<(String, String)>,
}

/// One accelerator (`iree_hal_device_t`).
///
/// Every queue operation waits for `wait` before it starts and signals `signal` when it is done;
/// operations with no ordering between them may run concurrently. A failed operation fails the
/// semaphores of its signal fence. Ownership: queue operations keep their buffers, executables
/// and command buffers alive until they complete. Threading: any thread.
pub trait Device: Send + Sync + 'static {
    /// The driver's name for it (`local-sync`, `local-task`, ...).
    fn driver_name(&self) -> &str;
    /// Its identity.
    fn info(&self) -> &DeviceInfo;
    /// Its allocator.
    fn allocator(&self) -> &dyn Allocator;
    /// For drivers to recover their concrete type.
    fn as_any(&self) -> &dyn Any;

    /// Answers IREE's well-known queries (`hal.device.id`, `hal.executable.format`, ...).
    ///
    /// # Errors
    /// `NotFound` for an unknown category or key.
    fn query_i64(&self, category: &str, key: &str) -> Result<i64>;

    /// How long everything that runs the device's work (each worker of a CPU pool, a GPU's
    /// stream) has been held by the work it runs now: while all of it is, no other work can
    /// start, and past its callers' patience it is stuck. Zero while some of it is free, or when
    /// the driver cannot tell (the default).
    fn all_held_for(&self) -> Duration {
        Duration::ZERO
    }

    /// Creates an executable cache.
    fn create_executable_cache(&self) -> Result<Arc<dyn ExecutableCache>>;

    /// Creates a command buffer in the initial state.
    fn create_command_buffer(
        &self,
        mode: CommandBufferMode,
        categories: CommandCategory,
        queue_affinity: QueueAffinity,
        binding_capacity: u32,
    ) -> Result<Arc<CommandBuffer>> {
        Ok(CommandBuffer::new(mode, categories, queue_affinity, binding_capacity))
    }

    /// Creates a timeline semaphore starting at `initial_value`.
    fn create_semaphore(&self, initial_value: u64) -> Result<Arc<dyn Semaphore>> {
        Ok(TimelineSemaphore::new(initial_value))
    }

    /// Runs `command_buffer` (or nothing: a barrier) with slots bound from `binding_table`.
    fn queue_execute(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        command_buffer: Option<&Arc<CommandBuffer>>,
        binding_table: &[Binding],
    ) -> Result<()>;

    /// Allocates a buffer that is usable once `signal` is reached (stream-ordered allocation).
    /// Unlike [`Allocator::allocate_buffer`]'s, its bytes are undefined: a pooled block holds
    /// what its last user left.
    ///
    /// The default takes the memory from [`Device::allocator`] now and orders `signal` after
    /// `wait` with [`Device::queue_barrier`], which is right for any driver; one whose memory
    /// can itself be stream-ordered or pooled (CUDA's memory pools, the CPU drivers' transient
    /// pool) writes its own.
    fn queue_alloca(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        params: BufferParams,
        size: u64,
    ) -> Result<Buffer> {
        let buffer = self.allocator().allocate_buffer(params, size)?;
        self.queue_barrier(queue_affinity, wait, signal)?;
        Ok(buffer)
    }

    /// Releases `buffer` once `wait` is reached; the memory returns when the last reference drops.
    fn queue_dealloca(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        buffer: &Buffer,
    ) -> Result<()> {
        let _ = buffer;
        self.queue_barrier(queue_affinity, wait, signal)
    }

    /// Orders `signal` after `wait` with no work in between.
    fn queue_barrier(&self, queue_affinity: QueueAffinity, wait: &Fence, signal: &Fence) -> Result<()> {
        self.queue_execute(queue_affinity, wait, signal, None, &[])
    }

    /// Fills `[offset, offset + length)` of `target` with `pattern`.
    #[allow(clippy::too_many_arguments, reason = "mirrors IREE's queue_fill signature")]
    fn queue_fill(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        target: &Buffer,
        offset: u64,
        length: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let command_buffer = self.transfer_command_buffer(queue_affinity)?;
        command_buffer.fill_buffer(BufferRef::direct(target, offset, length), pattern)?;
        command_buffer.end()?;
        self.queue_execute(queue_affinity, wait, signal, Some(&command_buffer), &[])
    }

    /// Writes `data` (captured now) into `target` at `offset`.
    fn queue_update(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        data: &[u8],
        target: &Buffer,
        offset: u64,
    ) -> Result<()> {
        let command_buffer = self.transfer_command_buffer(queue_affinity)?;
        for (index, chunk) in data.chunks(crate::command_buffer::MAX_UPDATE_SIZE).enumerate() {
            let chunk_offset = offset + (index * crate::command_buffer::MAX_UPDATE_SIZE) as u64;
            command_buffer.update_buffer(chunk, BufferRef::direct(target, chunk_offset, chunk.len() as u64))?;
        }
        command_buffer.end()?;
        self.queue_execute(queue_affinity, wait, signal, Some(&command_buffer), &[])
    }

    /// Copies `length` bytes between buffers.
    #[allow(clippy::too_many_arguments, reason = "mirrors IREE's queue_copy signature")]
    fn queue_copy(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        source: &Buffer,
        source_offset: u64,
        target: &Buffer,
        target_offset: u64,
        length: u64,
    ) -> Result<()> {
        let command_buffer = self.transfer_command_buffer(queue_affinity)?;
        command_buffer.copy_buffer(
            BufferRef::direct(source, source_offset, length),
            BufferRef::direct(target, target_offset, length),
        )?;
        command_buffer.end()?;
        self.queue_execute(queue_affinity, wait, signal, Some(&command_buffer), &[])
    }

    /// Hints that queued work should start now.
    fn queue_flush(&self, _queue_affinity: QueueAffinity) -> Result<()> {
        Ok(())
    }

    /// Waits on several semaphores at once.
    fn wait_semaphores(&self, mode: WaitMode, fence: &Fence, timeout: Timeout) -> Result<()> {
        wait_semaphores(mode, fence.timepoints(), timeout)
    }

    /// Blocks until all work submitted so far has completed.
    fn wait_idle(&self, timeout: Timeout) -> Result<()>;

    /// Gives memory the device keeps for reuse (pooled blocks, caches) back to the system.
    fn trim(&self) -> Result<()> {
        Ok(())
    }

    /// A one-shot transfer command buffer, begun, for the queue transfer helpers.
    fn transfer_command_buffer(&self, queue_affinity: QueueAffinity) -> Result<Arc<CommandBuffer>> {
        let command_buffer = self.create_command_buffer(
            CommandBufferMode::ONE_SHOT,
            CommandCategory::TRANSFER,
            queue_affinity,
            0,
        )?;
        command_buffer.begin()?;
        Ok(command_buffer)
    }
}

/// Answers the queries every device shares: `hal.device.id` (glob on the driver name) and
/// `hal.executable.format` (1 when the cache prepares it). Other categories are `NotFound`.
pub fn query_common_i64(device: &dyn Device, cache: &dyn ExecutableCache, category: &str, key: &str) -> Result<i64> {
    match category {
        "hal.device.id" => Ok(glob_match(key, device.driver_name()) as i64),
        "hal.executable.format" => Ok(cache.can_prepare_format(key) as i64),
        _ => Err(Error::not_found(format!("unknown device query '{category}::{key}'"))),
    }
}

/// A device UUID as 8-4-4-4-12 hex digits, the form device paths use (`vulkan://6d657361-...`).
pub fn uuid_text(uuid: &[u8; 16]) -> String {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Matches `*`/`?` globs, as IREE matches device ids.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// Recovers a driver's concrete type from a type-erased object, as an error when it is another
/// driver's (reachable from user input, so never a panic).
pub fn downcast<'a, T: Any>(object: &'a dyn Any, what: &str) -> Result<&'a T> {
    object.downcast_ref::<T>().ok_or_else(|| {
        Error::invalid_argument(format!(
            "{what} belongs to another driver than {}",
            std::any::type_name::<T>()
        ))
    })
}
