//! The mock Tenstorrent device: simulated memory, two queues, and mock cores.

use crate::allocator::TenstorrentAllocator;
use crate::command_buffer::{CoreGrid, Traffic};
use crate::driver::{MockConfig, DRIVER_NAME};
use crate::memory::{DeviceMemory, KindUsage};
use crate::queue::{Activity, QueueKind, QueueStatistics, Queues};
use halo_cpu_executable::executable::LocalExecutableCache;
use halo_hal::device::{glob_match, query_common_i64};
use halo_hal::{
    Allocator, Binding, Buffer, BufferParams, CommandBuffer, CommandCategory, Device, DeviceInfo, ElementType,
    ExecutableCache, Fence, QueueAffinity, Result, Semaphore, TimelineSemaphore, Timeout,
};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// How long a host thread waiting for the device spins before sleeping: a program's call hands
/// work from the host to the queues and back several times, each hop a few tens of
/// microseconds, and waking a sleeping thread costs about as much again.
const HOST_WAIT_SPIN: Duration = Duration::from_micros(100);

/// A simulated Tenstorrent chip whose memory the host reaches only through its queues.
pub struct TenstorrentDevice {
    info: DeviceInfo,
    allocator: TenstorrentAllocator,
    executables: LocalExecutableCache,
    grid: Arc<CoreGrid>,
    queues: Queues,
}

/// What a device has in use and has done, per memory kind and queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenstorrentStatistics {
    /// Use of each memory kind.
    pub memory: Vec<KindUsage>,
    /// Operations per queue and how their waits were resolved.
    pub queues: QueueStatistics,
    /// Bytes moved between host and device memory.
    pub traffic: Traffic,
}

impl TenstorrentDevice {
    /// A mock device with `config`'s grid and memory, identified as `info`.
    pub fn new(info: DeviceInfo, config: &MockConfig) -> Result<Self> {
        let memory = DeviceMemory::new(config.memory())?;
        Ok(TenstorrentDevice {
            info,
            allocator: TenstorrentAllocator::new(memory),
            executables: LocalExecutableCache::new(Arc::from([])),
            grid: Arc::new(CoreGrid::new(
                config.rows,
                config.columns,
                config.host_threads,
                DRIVER_NAME,
            )?),
            queues: Queues::start(DRIVER_NAME)?,
        })
    }

    /// A device buffer holding a `shape` tensor of `element_type` stored in the tile layout
    /// (see [`TenstorrentAllocator::allocate_tiled`]).
    pub fn allocate_tiled(&self, params: BufferParams, shape: &[u64], element_type: ElementType) -> Result<Buffer> {
        self.allocator.allocate_tiled(params, shape, element_type)
    }

    /// When the latest queue operations ran, oldest first.
    pub fn activity(&self) -> Vec<Activity> {
        self.queues.activity()
    }

    /// Memory in use per kind, queue counts and host↔device traffic.
    pub fn statistics(&self) -> TenstorrentStatistics {
        TenstorrentStatistics {
            memory: self.allocator.usage(),
            queues: self.queues.statistics(),
            traffic: self.grid.traffic(),
        }
    }

    /// The queue a submission goes to: anything with dispatches (or nothing: a barrier) on the
    /// compute queue, pure transfers on the transfer queue.
    fn queue_for(command_buffer: Option<&Arc<CommandBuffer>>) -> QueueKind {
        match command_buffer {
            Some(command_buffer) if !command_buffer.categories().contains(CommandCategory::DISPATCH) => {
                QueueKind::Transfer
            }
            _ => QueueKind::Compute,
        }
    }
}

impl Device for TenstorrentDevice {
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
        // The mock cores run the CPU target's executables, and `iree-compile` marks programs for
        // that target as wanting a device whose id matches `local*`: the mock answers to it.
        if category == "hal.device.id" && glob_match(key, "local") {
            return Ok(1);
        }
        query_common_i64(self, &self.executables, category, key)
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
        let kind = Self::queue_for(command_buffer);
        let Some(command_buffer) = command_buffer else {
            return self.queues.barrier(kind, wait, signal);
        };
        command_buffer.validate_submission(binding_table)?;
        let command_buffer = command_buffer.clone();
        let table: Vec<Binding<'static>> = binding_table.iter().map(Binding::to_static).collect();
        let grid = self.grid.clone();
        self.queues.submit(
            kind,
            wait,
            signal,
            Box::new(move || grid.execute(&command_buffer, &table)),
        )
    }

    // Host bytes go to the device the way the card takes them, by a copy out of host memory:
    // one transfer of any size (IREE's inline updates stop at 64 KiB), and whole, which a
    // buffer in the tile layout needs.
    fn queue_update(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        data: &[u8],
        target: &Buffer,
        offset: u64,
    ) -> Result<()> {
        let length = data.len() as u64;
        let staging = self.allocator.allocate_buffer(BufferParams::host_mappable(), length)?;
        staging.map_write(0, data)?;
        self.queue_copy(queue_affinity, wait, signal, &staging, 0, target, offset, length)
    }

    fn create_semaphore(&self, initial_value: u64) -> Result<Arc<dyn Semaphore>> {
        Ok(TimelineSemaphore::with_wait_spin(initial_value, HOST_WAIT_SPIN))
    }

    fn queue_alloca(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        params: BufferParams,
        size: u64,
    ) -> Result<Buffer> {
        // The range is taken now; the transfer queue orders its first use after `wait`.
        let buffer = self.allocator.allocate_buffer(params, size)?;
        self.queues.barrier(QueueKind::Transfer, wait, signal)?;
        Ok(buffer)
    }

    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.queues.wait_idle(timeout)
    }
}
