//! The `local-sync` device: every queue operation runs to completion inside the call.

use super::driver::DRIVER_NAME;
use crate::command_buffer::execute_inline;
use halo_cpu_executable::executable::LocalExecutableCache;
use halo_cpu_executable::library::HostImport;
use halo_hal::trace::QueueTrack;
use halo_hal::transient_pool::{TransientPool, TransientPoolOptions};
use halo_hal::{
    check_direct_copy, check_direct_fill, host_transfer, Allocator, Binding, Buffer, BufferParams, CommandBuffer,
    Device, DeviceInfo, ExecutableCache, Fence, HeapAllocator, QueueAffinity, Result, Timeout,
};
use std::any::Any;
use std::sync::Arc;

/// A device that executes on the calling thread.
pub struct SyncDevice {
    info: DeviceInfo,
    allocator: HeapAllocator,
    executables: LocalExecutableCache,
    transient: TransientPool,
    track: QueueTrack,
}

impl SyncDevice {
    /// A device with identity `info` whose executables may import the host functions `imports`,
    /// serving queue allocations from a pool bounded by `transient`.
    pub fn new(info: DeviceInfo, imports: Arc<[HostImport]>, transient: TransientPoolOptions) -> Self {
        SyncDevice {
            info,
            allocator: HeapAllocator::new(),
            executables: LocalExecutableCache::new(imports),
            transient: TransientPool::new(transient),
            track: QueueTrack::new(DRIVER_NAME),
        }
    }

    /// The same device with every buffer mapped between guard pages (see
    /// [`halo_hal::allocator::read_guard_pages`]); for a device nothing has allocated from yet.
    pub fn with_guard_pages(mut self) -> Self {
        self.allocator = HeapAllocator::with_guard_pages();
        self
    }
}

impl Device for SyncDevice {
    fn driver_name(&self) -> &str {
        DRIVER_NAME
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn query_i64(&self, category: &str, key: &str) -> Result<i64> {
        crate::query_i64(self, &self.executables, &self.transient, category, key)
    }

    fn trim(&self) -> Result<()> {
        self.transient.trim();
        Ok(())
    }

    fn create_executable_cache(&self) -> Result<Arc<dyn ExecutableCache>> {
        Ok(Arc::new(self.executables.clone()))
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
                execute_inline(command_buffer, binding_table)
            }
            None => Ok(()),
        })
    }

    // Transfers run at once with the checks recording would make, instead of through a
    // transient command buffer (which costs more than a small fill or copy itself).
    fn queue_fill(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        target: &Buffer,
        offset: u64,
        length: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let length = check_direct_fill(target, offset, length, pattern)?;
        Fence::run_between(wait, signal, || host_transfer::fill(target, offset, length, pattern))
    }

    fn queue_copy(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        source: &Buffer,
        source_offset: u64,
        target: &Buffer,
        target_offset: u64,
        length: u64,
    ) -> Result<()> {
        let length = check_direct_copy(source, source_offset, target, target_offset, length)?;
        Fence::run_between(wait, signal, || {
            host_transfer::copy(source, source_offset, target, target_offset, length)
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
        let buffer = self.transient.allocate(&self.allocator, params, size)?;
        Fence::run_between(wait, signal, || Ok(()))?;
        Ok(buffer)
    }

    fn wait_idle(&self, _timeout: Timeout) -> Result<()> {
        // Every operation finished before its queue call returned.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::{Semaphore, StatusCode, TimelineSemaphore};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_wait_nothing_signals_gives_up_once_the_call_is_cancelled() {
        let device = SyncDevice::new(
            DeviceInfo {
                id: 0,
                path: "0".into(),
                name: "test".into(),
                details: Vec::new(),
            },
            Arc::from([]),
            TransientPoolOptions::default(),
        );
        let (never, done) = (TimelineSemaphore::new(0), TimelineSemaphore::new(0));
        let given_up = Arc::new(AtomicBool::new(false));
        let canceller = {
            let given_up = given_up.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                given_up.store(true, Ordering::Relaxed);
            })
        };
        // On a thread of its own with a limit: without the give-up the barrier never returns.
        let (returned, returning) = std::sync::mpsc::channel();
        let signal = Fence::at(done.clone(), 1);
        std::thread::spawn(move || {
            let outcome = halo_hal::caller::on_behalf_of(given_up, || {
                device.queue_barrier(QueueAffinity::ANY, &Fence::at(never, 1), &signal)
            });
            let _ = returned.send(outcome);
        });
        let outcome = returning
            .recv_timeout(Duration::from_secs(30))
            .expect("the barrier gave up on its wait");
        canceller.join().unwrap();
        outcome.unwrap();
        let error = done.query().unwrap_err();
        assert_eq!(error.code(), StatusCode::Cancelled, "{error}");
    }
}
