//! The Metal device: its backend's memory and pipelines, halo-hal's command lists encoded into
//! one backend command buffer per submission.
//!
//! The queue is in order and runs each submission inside the call once its waits are met, as
//! `local-sync` does: a Metal command buffer is committed and waited for before the signal.

use crate::backend::Backend;
use crate::driver::DRIVER_NAME;
use crate::executable::MetalExecutableCache;
use halo_hal::device::query_common_i64;
use halo_hal::trace::QueueTrack;
use halo_hal::transient_pool::{TransientPool, TransientPoolOptions};
use halo_hal::{
    Allocator, Binding, Buffer, BufferParams, CommandBuffer, Device, DeviceInfo, ExecutableCache, Fence, QueueAffinity,
    Result, Timeout,
};
use std::any::Any;
use std::sync::Arc;

/// A Metal device over one backend.
pub struct MetalDevice {
    info: DeviceInfo,
    backend: Arc<dyn Backend>,
    executables: Arc<MetalExecutableCache>,
    transient: TransientPool,
    track: QueueTrack,
}

impl MetalDevice {
    /// A device named by `info` over `backend`, serving queue allocations from a pool bounded by
    /// `transient`.
    pub fn new(info: DeviceInfo, backend: Arc<dyn Backend>, transient: TransientPoolOptions) -> Self {
        MetalDevice {
            info,
            executables: Arc::new(MetalExecutableCache::new(backend.clone())),
            backend,
            transient: TransientPool::new(transient),
            track: QueueTrack::new(DRIVER_NAME),
        }
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
        if let Some(command_buffer) = command_buffer {
            command_buffer.validate_submission(binding_table)?;
        }
        Fence::run_between(wait, signal, || match command_buffer {
            Some(command_buffer) => {
                let _queue = self.track.execute(command_buffer);
                crate::command_buffer::execute(&self.backend, command_buffer.commands()?, binding_table)
            }
            None => Ok(()),
        })
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
        Fence::run_between(wait, signal, || Ok(()))?;
        Ok(buffer)
    }

    fn wait_idle(&self, _timeout: Timeout) -> Result<()> {
        // Every operation finished before its queue call returned.
        Ok(())
    }
}
