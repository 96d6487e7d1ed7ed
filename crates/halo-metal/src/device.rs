//! The Metal device: its backend's memory and pipelines, halo-hal's command lists encoded into
//! one backend command buffer per submission.
//!
//! The queue is halo-hal's [`SubmissionQueue`], as OpenCL's: Metal's command queue runs
//! command buffers in the order they are committed, so a submission that waits only on values
//! promised by work already committed is committed at once, and one waiting on anything else
//! (another device's semaphore, a host signal) is committed from the host timeline's callback.
//! Semaphores stay host timelines, shared by every driver, so a Metal submission can wait on a
//! CPU device's work and the reverse.

use crate::backend::{Backend, Committed};
use crate::driver::DRIVER_NAME;
use crate::executable::MetalExecutableCache;
use halo_hal::device::query_common_i64;
use halo_hal::submission_queue::{InFlight, SubmissionQueue};
use halo_hal::trace::QueueTrack;
use halo_hal::transient_pool::{TransientPool, TransientPoolOptions};
use halo_hal::{
    Allocator, Binding, Buffer, BufferParams, CommandBuffer, Device, DeviceInfo, ExecutableCache, Fence, QueueAffinity,
    Result, Timeout,
};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// A Metal device over one backend.
pub struct MetalDevice {
    info: DeviceInfo,
    backend: Arc<dyn Backend>,
    executables: Arc<MetalExecutableCache>,
    transient: TransientPool,
    track: QueueTrack,
    queue: SubmissionQueue<Running>,
}

impl MetalDevice {
    /// A device named by `info` over `backend`, serving queue allocations from a pool bounded by
    /// `transient`.
    ///
    /// # Errors
    /// `ResourceExhausted` when the queue's threads cannot start.
    pub fn new(info: DeviceInfo, backend: Arc<dyn Backend>, transient: TransientPoolOptions) -> Result<Self> {
        Ok(MetalDevice {
            info,
            executables: Arc::new(MetalExecutableCache::new(backend.clone())),
            backend,
            transient: TransientPool::new(transient),
            track: QueueTrack::new(DRIVER_NAME),
            queue: SubmissionQueue::start("Metal")?,
        })
    }
}

/// A submission's command buffer on the device, with the command list and bindings it uses.
struct Running {
    committed: Box<dyn Committed>,
    _uses: (Arc<CommandBuffer>, Vec<Binding<'static>>),
    /// The trace's span of its execution, ended once it has run.
    _span: tracing::Span,
}

impl InFlight for Running {
    fn wait(self) -> Result<()> {
        self.committed.wait()
    }
}

impl Device for MetalDevice {
    fn driver_name(&self) -> &str {
        DRIVER_NAME
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn allocator(&self) -> &dyn Allocator {
        self.backend.allocator()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn query_i64(&self, category: &str, key: &str) -> Result<i64> {
        match category {
            TransientPool::QUERY_CATEGORY => self.transient.query_i64(key),
            _ => query_common_i64(self, &*self.executables, category, key),
        }
    }

    fn trim(&self) -> Result<()> {
        self.transient.trim();
        Ok(())
    }

    fn create_executable_cache(&self) -> Result<Arc<dyn ExecutableCache>> {
        Ok(self.executables.clone())
    }

    fn queue_execute(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        command_buffer: Option<&Arc<CommandBuffer>>,
        binding_table: &[Binding],
    ) -> Result<()> {
        let _span = tracing::info_span!("queue.execute", wait = ?wait, signal = ?signal).entered();
        let (backend, track) = (self.backend.clone(), self.track.clone());
        self.queue.execute(
            wait,
            signal,
            command_buffer,
            binding_table,
            move |command_buffer, table| {
                let span = track.execute(&command_buffer);
                let committed = crate::command_buffer::commit(&backend, command_buffer.commands()?, &table)?;
                Ok(Running {
                    committed,
                    _uses: (command_buffer, table),
                    _span: span,
                })
            },
        )
    }

    fn queue_alloca(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        params: BufferParams,
        size: u64,
    ) -> Result<Buffer> {
        let buffer = self.transient.allocate(self.backend.allocator(), params, size)?;
        self.queue.submit(wait, signal, Box::new(|| Ok(None)));
        Ok(buffer)
    }

    fn all_held_for(&self) -> Duration {
        self.queue.held_for()
    }

    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.queue.wait_idle(timeout)
    }
}
