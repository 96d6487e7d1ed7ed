//! The `local-task` device: queue operations become submissions on a shared worker pool.

use super::driver::{TaskDeviceOptions, DRIVER_NAME};
use super::executor::{on_worker_thread, Executor};
use super::submission::{Queue, Work};
use halo_cpu_executable::executable::LocalExecutableCache;
use halo_hal::trace::QueueTrack;
use halo_hal::transient_pool::TransientPool;
use halo_hal::{
    Allocator, Binding, Buffer, BufferParams, CommandBuffer, Device, DeviceInfo, ExecutableCache, Fence, HeapAllocator,
    QueueAffinity, Result, Timeout,
};
use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The device query category of the worker pool: `count` (workers) and `busy_ns` (nanoseconds
/// the workers have spent running workgroups, summed over workers, since the device started;
/// what they spent otherwise, waiting or scheduling, is their idle time).
pub const WORKERS_QUERY_CATEGORY: &str = "halo.workers";

/// A device whose work runs on a pool of worker threads.
///
/// Dropping it cancels submissions still waiting on their fences (their signal semaphores fail
/// with `CANCELLED`), lets started ones finish, then stops the workers. It waits at most the
/// executor's [`stop_wait`](super::executor::ExecutorOptions::stop_wait) in all: work still
/// running then (a kernel that never returns) goes on without the device.
pub struct TaskDevice {
    info: DeviceInfo,
    allocator: HeapAllocator,
    executables: LocalExecutableCache,
    transient: TransientPool,
    queue: Arc<Queue>,
}

impl TaskDevice {
    /// Starts the device's workers.
    pub fn new(info: DeviceInfo, options: &TaskDeviceOptions) -> Result<Self> {
        let executor = Executor::new(&options.executor)?;
        Ok(TaskDevice {
            info,
            allocator: if options.guard_pages {
                HeapAllocator::with_guard_pages()
            } else {
                HeapAllocator::new()
            },
            executables: LocalExecutableCache::new(options.imports.clone()),
            transient: TransientPool::new(options.transient),
            queue: Queue::new(executor, options.scheduling.clone(), QueueTrack::new(DRIVER_NAME)),
        })
    }

    /// Number of worker threads.
    pub fn worker_count(&self) -> usize {
        self.queue.executor.worker_count()
    }
}

impl Drop for TaskDevice {
    fn drop(&mut self) {
        let deadline = Instant::now() + self.queue.executor.stop_wait();
        self.queue.cancel_pending();
        if !on_worker_thread() {
            let _ = self.queue.wait_idle(Timeout::Deadline(deadline));
        }
        self.queue.executor.shutdown_by(deadline);
    }
}

impl Device for TaskDevice {
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
        match (category, key) {
            (WORKERS_QUERY_CATEGORY, "count") => Ok(self.worker_count() as i64),
            (WORKERS_QUERY_CATEGORY, "busy_ns") => Ok(i64::try_from(self.queue.executor.busy_ns()).unwrap_or(i64::MAX)),
            (WORKERS_QUERY_CATEGORY, _) => Err(halo_hal::Error::not_found(format!(
                "unknown device query '{category}::{key}': the keys of '{category}' are count and busy_ns"
            ))),
            _ => crate::query_i64(self, &self.executables, &self.transient, category, key),
        }
    }

    fn all_held_for(&self) -> Duration {
        self.queue.executor.all_held_for()
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
        let work = match command_buffer {
            Some(command_buffer) => {
                command_buffer.validate_submission(binding_table)?;
                Work::Execute {
                    command_buffer: command_buffer.clone(),
                    table: binding_table.iter().map(Binding::to_static).collect(),
                    span: tracing::Span::none(),
                }
            }
            None => Work::Barrier,
        };
        self.queue.submit(wait, signal.clone(), work);
        Ok(())
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
        self.queue.submit(wait, signal.clone(), Work::Barrier);
        Ok(buffer)
    }

    fn queue_dealloca(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        buffer: &Buffer,
    ) -> Result<()> {
        self.queue.submit(wait, signal.clone(), Work::Release(buffer.clone()));
        Ok(())
    }

    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.queue.wait_idle(timeout)
    }
}
