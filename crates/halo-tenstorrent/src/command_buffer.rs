//! Command buffers on mock mode's Tensix cores: host threads stand in for the core grid.
//!
//! A dispatch's workgroups are cut into one contiguous share per simulated core (as the card's
//! work distribution gives each core its part of the grid), and a pool of host threads runs the
//! shares. The kernels are IREE's CPU executables (`embedded-elf-*` of the host), loaded by the shared
//! `halo-cpu-executable` crate; they compute on row-major data, which is why only buffers
//! created with the tiled layout are converted (by the transfer queue, never here).
//!
//! This is the seam for hardware mode: on a card, a dispatch would instead be a TT-Metal program
//! enqueued on the device's command queue. That mode needs TT-Metal and is not built here.

use crate::allocator::{is_device_memory, tiled_layout};
use crate::tiled_transfer;
use halo_cpu_executable::dispatch::PreparedDispatch;
use halo_cpu_executable::float_mode::FlushDenormals;
use halo_cpu_executable::library::LocalMemory;
use halo_hal::{host_transfer, Binding, Buffer, Command, CommandBuffer, DispatchCommand, Error, Result, ResultExt};
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// Dispatches estimated below this many nanoseconds run on the queue thread (local-task's default).
const INLINE_NS: u64 = 20_000;
/// Once a dispatch's cost is known, one run in this many is timed again.
const TIMING_PERIOD: u32 = 32;

/// Bytes moved between host memory and device memory by transfers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Into device memory from the host (updates, and copies out of host memory).
    pub host_to_device_bytes: u64,
    /// Out of device memory into host memory.
    pub device_to_host_bytes: u64,
}

#[derive(Default)]
struct TrafficCounters {
    host_to_device: AtomicU64,
    device_to_host: AtomicU64,
}

/// The simulated grid of Tensix cores and the host threads that run it.
pub struct CoreGrid {
    rows: u32,
    columns: u32,
    threads: rayon::ThreadPool,
    traffic: TrafficCounters,
    /// Cheap dispatches run so far, to time one in [`TIMING_PERIOD`].
    runs: AtomicU32,
}

thread_local! {
    /// Workgroup local memory of the thread running a core's share, reused across dispatches.
    static SCRATCH: RefCell<LocalMemory> = RefCell::new(LocalMemory::default());
}

impl CoreGrid {
    /// A `rows`×`columns` grid run by `host_threads` threads.
    pub fn new(rows: u32, columns: u32, host_threads: usize, device: &str) -> Result<Self> {
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(host_threads)
            .thread_name({
                let device = device.to_string();
                move |index| format!("{device}-core-{index}")
            })
            .build()
            .map_err(|error| Error::resource_exhausted(format!("cannot start the mock core threads: {error}")))?;
        Ok(CoreGrid {
            rows,
            columns,
            threads,
            traffic: TrafficCounters::default(),
            runs: AtomicU32::new(0),
        })
    }

    /// Number of simulated cores.
    pub fn cores(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.columns)
    }

    /// Host threads running the cores.
    pub fn host_threads(&self) -> usize {
        self.threads.current_num_threads()
    }

    /// Bytes moved between host and device memory so far.
    pub fn traffic(&self) -> Traffic {
        Traffic {
            host_to_device_bytes: self.traffic.host_to_device.load(Ordering::Relaxed),
            device_to_host_bytes: self.traffic.device_to_host.load(Ordering::Relaxed),
        }
    }

    fn count_copy(&self, source: &Buffer, target: &Buffer, bytes: u64) {
        match (is_device_memory(source), is_device_memory(target)) {
            (false, true) => self.traffic.host_to_device.fetch_add(bytes, Ordering::Relaxed),
            (true, false) => self.traffic.device_to_host.fetch_add(bytes, Ordering::Relaxed),
            _ => 0,
        };
    }

    /// Runs every command of `command_buffer` in order, slots bound from `table`.
    ///
    /// Running commands one after another satisfies every barrier; within a dispatch the
    /// workgroups run concurrently.
    pub fn execute(&self, command_buffer: &CommandBuffer, table: &[Binding]) -> Result<()> {
        for (index, command) in command_buffer.commands()?.iter().enumerate() {
            self.execute_command(command, table)
                .with_context(|| format!("executing command {index}"))?;
        }
        Ok(())
    }

    fn execute_command(&self, command: &Command, table: &[Binding]) -> Result<()> {
        match command {
            Command::Barrier => Ok(()),
            Command::Dispatch(dispatch) => {
                refuse_tiled_bindings(dispatch, table)?;
                self.dispatch(&PreparedDispatch::borrowing(dispatch, table)?)
            }
            Command::Fill { target, pattern } => {
                let target = target.resolve(table)?;
                match tiled_layout(target.buffer) {
                    Some(layout) => tiled_transfer::fill(&target, layout, pattern),
                    None => host_transfer::fill(target.buffer, target.offset, target.length, pattern),
                }
            }
            Command::Update { data, target } => {
                let target = target.resolve(table)?;
                if is_device_memory(target.buffer) {
                    self.traffic
                        .host_to_device
                        .fetch_add(data.len() as u64, Ordering::Relaxed);
                }
                match tiled_layout(target.buffer) {
                    Some(layout) => tiled_transfer::write(data, &target, layout),
                    None => host_transfer::update(data, target.buffer, target.offset),
                }
            }
            Command::Copy { source, target } => {
                let source = source.resolve(table)?;
                let target = target.resolve(table)?;
                self.count_copy(source.buffer, target.buffer, source.length);
                if tiled_layout(source.buffer).is_some() || tiled_layout(target.buffer).is_some() {
                    return tiled_transfer::copy(&source, &target);
                }
                host_transfer::copy(
                    source.buffer,
                    source.offset,
                    target.buffer,
                    target.offset,
                    source.length,
                )
            }
        }
    }

    /// Runs every workgroup of `dispatch`, one contiguous share per core.
    fn dispatch(&self, dispatch: &PreparedDispatch<'_>) -> Result<()> {
        let total = dispatch.workgroup_total();
        let cores = self.cores().min(total);
        if cores == 0 {
            return Ok(());
        }
        // A dispatch known to be cheap runs on the queue thread: waking the pool costs more
        // than it does. Its cost is learnt from timed runs of the workgroups alone, as
        // local-task learns it; once known, one run in TIMING_PERIOD is timed again.
        let estimate = dispatch.workgroup_ns().map(|ns| ns.saturating_mul(total));
        let timed = estimate.is_none() || self.runs.fetch_add(1, Ordering::Relaxed).is_multiple_of(TIMING_PERIOD);
        let max_concurrency = self.host_threads().min(usize::from(u8::MAX)) as u8;
        let run_share = |first: u64, count: u64| {
            // Built per share: the ABI state holds raw pointers, so threads do not share one.
            let state = dispatch.state(max_concurrency);
            let processor_id = rayon::current_thread_index().unwrap_or(0) as u32;
            let started = timed.then(Instant::now);
            SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                let local_memory = scratch.bytes(dispatch.local_memory_size() as usize);
                let _flush = FlushDenormals::enter();
                dispatch.run_workgroups(&state, first, count, processor_id, local_memory)
            })?;
            if let Some(started) = started {
                dispatch.record_time(count, started.elapsed().as_nanos() as u64);
            }
            Ok(())
        };
        if cores == 1 || estimate.is_some_and(|ns| ns < INLINE_NS) {
            run_share(0, total)
        } else {
            self.spread(dispatch, cores, &run_share)
        }
    }

    /// Runs `cores` shares of `dispatch`'s workgroups on the pool. Each host thread takes a
    /// contiguous run of cores, whose shares are contiguous workgroups, in one call: preparing a
    /// call costs more than a small workgroup.
    fn spread(
        &self,
        dispatch: &PreparedDispatch<'_>,
        cores: u64,
        run_share: &(dyn Fn(u64, u64) -> Result<()> + Sync),
    ) -> Result<()> {
        let total = dispatch.workgroup_total();
        // In u128: a grid's workgroup total times the core count can pass 2^64.
        let first_workgroup = |core: u64| (u128::from(total) * u128::from(core) / u128::from(cores)) as u64;
        let threads = cores.min(self.host_threads() as u64);
        let first_core = |thread: u64| cores * thread / threads;
        self.threads.install(|| {
            (0..threads).into_par_iter().try_for_each(|thread| {
                let first = first_workgroup(first_core(thread));
                run_share(first, first_workgroup(first_core(thread + 1)) - first)
            })
        })
    }
}

/// Refuses a dispatch that binds a buffer in the tile layout: the mock cores run IREE's CPU
/// kernels, which read row-major tensors, so tiles would be read as garbage.
fn refuse_tiled_bindings(dispatch: &DispatchCommand, table: &[Binding]) -> Result<()> {
    for (ordinal, reference) in dispatch.bindings.iter().enumerate() {
        if let Some(layout) = tiled_layout(reference.resolve(table)?.buffer) {
            return Err(Error::invalid_argument(format!(
                "binding {ordinal} holds a {:?} tensor in the tile layout, which the mock cores' \
                 row-major kernels cannot read; only transfers may use tiled buffers",
                layout.shape
            )));
        }
    }
    Ok(())
}
