//! Reusable command buffers recorded once through `cl_khr_command_buffer` and enqueued whole on
//! each later submission, where the device has the extension (see `khr_command_buffer`).
//!
//! A recording captures the buffers its commands use, so it holds for one binding table. Without
//! `cl_khr_command_buffer_mutable_dispatch` a new table needs a new recording, and programs that
//! bind fresh buffers on every call (IREE's memoized command buffers with transient buffers) would
//! record on every submission. So a command buffer without slots is recorded at its first
//! submission, one with slots only when a table comes back (the last few tables are remembered,
//! and their buffers kept alive so that a table's identity cannot pass to new buffers); the rest
//! run as one-shot command buffers do. Command lists with indirect dispatches, whose workgroup
//! counts are read when they run, are never recorded, and one the extension fails to record is
//! issued directly from then on.

use crate::api::Argument;
use crate::command_buffer::{issue, Sink};
use crate::device::DeviceShared;
use crate::khr_command_buffer::{KhrCommandBuffers, Recorded, Recorder};
use halo_hal::{Binding, Command, CommandBuffer, CommandBufferMode, Error, Result, WorkgroupCount};
use opencl3::kernel::Kernel;
use opencl3::types::cl_mem;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Binding tables remembered per command buffer.
const TABLES_KEPT: usize = 4;

/// One device's recordings: the extension and what it has done.
pub(crate) struct Replays {
    api: Arc<KhrCommandBuffers>,
    recorded: AtomicU64,
    replayed: AtomicU64,
}

impl Replays {
    pub(crate) fn new(api: KhrCommandBuffers) -> Self {
        Replays {
            api: Arc::new(api),
            recorded: AtomicU64::new(0),
            replayed: AtomicU64::new(0),
        }
    }

    /// The counter `key` (`recorded`: recordings made; `replayed`: submissions run from one).
    pub(crate) fn counter(&self, key: &str) -> Option<u64> {
        match key {
            "recorded" => Some(self.recorded.load(Ordering::Relaxed)),
            "replayed" => Some(self.replayed.load(Ordering::Relaxed)),
            _ => None,
        }
    }
}

/// What one HAL command buffer keeps: whether it can be recorded, and its recent tables.
///
/// Field order matters: recordings are released before the commands (whose executables and
/// buffers they name) and the tables' buffers.
struct Recordings {
    /// False for lists with indirect dispatches, and after a recording failed.
    recordable: AtomicBool,
    tables: Mutex<VecDeque<Table>>,
    _commands: Arc<[Command]>,
}

/// A binding table seen before: who its buffers are, and its recording once made.
struct Table {
    key: Vec<(usize, u64, u64, u64)>,
    recorded: Option<Arc<Recorded>>,
    _buffers: Vec<Binding<'static>>,
}

/// The recording to run `command_buffer` with `table` from, recording it now where the policy
/// above says so; `None`: issue its commands directly.
pub(crate) fn recording_for(
    shared: &DeviceShared,
    command_buffer: &CommandBuffer,
    table: &[Binding<'_>],
) -> Result<Option<Arc<Recorded>>> {
    let Some(replays) = &shared.replays else {
        return Ok(None);
    };
    if command_buffer.mode().contains(CommandBufferMode::ONE_SHOT) {
        return Ok(None);
    }
    let recordings = command_buffer.driver_cache(|_| {
        let commands = command_buffer.commands()?.clone();
        Ok(Recordings {
            recordable: AtomicBool::new(commands.iter().all(|command| {
                !matches!(command, Command::Dispatch(d) if matches!(d.workgroup_count, WorkgroupCount::Indirect(_)))
            })),
            tables: Mutex::new(VecDeque::new()),
            _commands: commands,
        })
    })?;
    if !recordings.recordable.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let key = key_of(table);
    let mut tables = recordings.tables.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = tables.iter().position(|t| t.key == key);
    if seen.is_none() {
        tables.push_front(Table {
            key,
            recorded: None,
            _buffers: table.iter().map(Binding::to_static).collect(),
        });
        tables.truncate(TABLES_KEPT);
        if !table.is_empty() {
            return Ok(None);
        }
    }
    let entry = &mut tables[seen.unwrap_or(0)];
    let recorded = match &entry.recorded {
        Some(recorded) => recorded.clone(),
        None => match record(shared, &replays.api, command_buffer.commands()?, table) {
            Ok(recorded) => {
                replays.recorded.fetch_add(1, Ordering::Relaxed);
                entry.recorded.insert(Arc::new(recorded)).clone()
            }
            // What the extension could not record still runs, issued directly from now on.
            Err(error) => {
                tracing::warn!("issuing a reusable command buffer directly: {error}");
                recordings.recordable.store(false, Ordering::Relaxed);
                return Ok(None);
            }
        },
    };
    replays.replayed.fetch_add(1, Ordering::Relaxed);
    Ok(Some(recorded))
}

/// Who a table's buffers are: each binding's allocation, the buffer's offset in it, and the
/// binding's range.
fn key_of(table: &[Binding<'_>]) -> Vec<(usize, u64, u64, u64)> {
    table
        .iter()
        .map(|b| {
            let allocation = Arc::as_ptr(b.buffer.allocation()).cast::<()>() as usize;
            (allocation, b.buffer.byte_offset(), b.offset, b.length)
        })
        .collect()
}

fn record(
    shared: &DeviceShared,
    api: &Arc<KhrCommandBuffers>,
    commands: &[Command],
    table: &[Binding<'_>],
) -> Result<Recorded> {
    let mut recording = Recording {
        recorder: Recorder::new(api, &shared.queue)?,
        shared,
    };
    issue(shared, &mut recording, commands, table).map_err(|e| e.context("recording with cl_khr_command_buffer"))?;
    recording.recorder.finish()
}

/// A recorder with the context its written data is staged in.
struct Recording<'s> {
    recorder: Recorder,
    shared: &'s DeviceShared,
}

impl Sink for Recording<'_> {
    fn fill(&mut self, buffer: cl_mem, pattern: &[u8], offset: u64, length: u64) -> Result<()> {
        self.recorder.fill(buffer, pattern, offset, length)
    }
    fn write(&mut self, buffer: cl_mem, offset: u64, data: &[u8]) -> Result<()> {
        self.recorder.write(&self.shared.context, buffer, offset, data)
    }
    fn copy(&mut self, source: (cl_mem, u64), target: (cl_mem, u64), length: u64) -> Result<()> {
        self.recorder.copy(source, target, length)
    }
    fn dispatch(
        &mut self,
        kernel: &Kernel,
        arguments: &[Argument<'_>],
        workgroups: [u32; 3],
        local: [u32; 3],
    ) -> Result<()> {
        self.recorder.dispatch(kernel, arguments, workgroups, local)
    }
    fn read_now(&mut self, _buffer: cl_mem, _offset: u64, _target: &mut [u8]) -> Result<()> {
        Err(Error::internal(
            "an indirect dispatch was recorded; command lists with them are issued directly",
        ))
    }
}
