//! Calling compiled kernels: a dispatch with host pointers resolved, run one workgroup at a time.
//!
//! The pointers handed to kernels come from buffers that either the dispatch keeps alive (counted
//! references) or that it borrows for its lifetime, and every range was bounds-checked when it
//! was resolved, which is what makes the kernel calls sound.

use crate::dispatch_memory::{while_running, RunningDispatch};
use crate::executable::LocalExecutable;
use crate::library::abi::{DispatchStateV0, WorkgroupStateV0};
use crate::workgroup_cost::CostKey;
use halo_hal::{
    downcast, Binding, Buffer, DispatchCommand, Error, Executable, MemoryAccess, Result, ResultExt, WorkgroupCount,
};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

/// A dispatch ready to run: bindings resolved to host memory, grid known.
///
/// Constants and binding pointers are stored inline for typical dispatches, so preparing one
/// allocates nothing; [`PreparedDispatch::state`] points the ABI state into `self`.
///
/// `'a` is how long the executable and buffers are borrowed: a dispatch run at once on the
/// submitting thread borrows them from the command and binding table (no reference counting),
/// one that outlives them ([`PreparedDispatch::owning`]) counts references and is `'static`.
pub struct PreparedDispatch<'a> {
    executable: Cow<'a, Arc<dyn Executable>>,
    export: u32,
    workgroup_size: [u32; 3],
    workgroup_count: [u32; 3],
    local_memory_size: u32,
    constants: SmallVec<[u32; 16]>,
    /// Where the export's cost with these constants is kept.
    cost_key: CostKey,
    binding_ptrs: SmallVec<[*mut c_void; 8]>,
    binding_lengths: SmallVec<[usize; 8]>,
    /// Bit `i`: binding `i` allows writes ([`crate::dispatch_memory`]).
    writable: u64,
    /// The buffers behind `binding_ptrs` when the dispatch keeps them alive itself; empty when
    /// it borrows them for `'a`.
    buffers: SmallVec<[Buffer; 8]>,
    _borrowed: PhantomData<&'a [Binding<'a>]>,
}

// SAFETY: the raw pointers address host memory of `Send + Sync` buffers that are kept alive by
// `buffers` or borrowed for `'a`; concurrent workgroups writing disjoint data is the kernel
// contract, as in IREE.
unsafe impl Send for PreparedDispatch<'_> {}
// SAFETY: as above; the struct is immutable after preparation.
unsafe impl Sync for PreparedDispatch<'_> {}

impl<'a> PreparedDispatch<'a> {
    /// Resolves `command`'s bindings (slots from `table`) to host memory, borrowing the
    /// executable and buffers from `command` and `table` while the dispatch lives.
    pub fn borrowing(command: &'a DispatchCommand, table: &'a [Binding]) -> Result<Self> {
        Self::prepare(Cow::Borrowed(&command.executable), command, table, None)
    }

    /// Resolves `command` against `table`; `keep` collects the buffers resolved (for a dispatch
    /// that keeps them alive itself).
    fn prepare(
        executable: Cow<'a, Arc<dyn Executable>>,
        command: &DispatchCommand,
        table: &[Binding],
        mut keep: Option<&mut SmallVec<[Buffer; 8]>>,
    ) -> Result<Self> {
        let local: &LocalExecutable = downcast(command.executable.as_any(), "dispatched executable")?;
        let info = local.export(command.export);
        let count = command.bindings.len();
        let mut binding_ptrs = SmallVec::with_capacity(count);
        let mut binding_lengths = SmallVec::with_capacity(count);
        let mut writable = 0u64;
        for (ordinal, reference) in command.bindings.iter().enumerate() {
            let context = || format!("binding {ordinal} of dispatch '{}'", info.name);
            let resolved = reference.resolve(table).with_context(context)?;
            let (ptr, len) = resolved
                .buffer
                .host_range(resolved.offset, resolved.length)
                .with_context(context)?;
            binding_ptrs.push(ptr.as_ptr().cast::<c_void>());
            binding_lengths.push(len);
            if ordinal < 64 && resolved.buffer.allowed_access().contains(MemoryAccess::WRITE) {
                writable |= 1 << ordinal;
            }
            if let Some(keep) = keep.as_mut() {
                keep.push(resolved.buffer.clone());
            }
        }
        let workgroup_count = match &command.workgroup_count {
            WorkgroupCount::Static(count) => *count,
            WorkgroupCount::Indirect(reference) => read_workgroup_count(reference, table)
                .with_context(|| format!("indirect workgroup count of dispatch '{}'", info.name))?,
        };
        let total = workgroup_count
            .iter()
            .try_fold(1u64, |total, &c| total.checked_mul(u64::from(c)))
            .ok_or_else(|| {
                Error::out_of_range(format!(
                    "workgroup count {workgroup_count:?} of dispatch '{}' has more workgroups than 2^64",
                    info.name
                ))
            })?;
        if workgroup_count[2] > u16::MAX as u32 {
            return Err(Error::out_of_range(format!(
                "workgroup count z {} of dispatch '{}' exceeds {}",
                workgroup_count[2],
                info.name,
                u16::MAX
            )));
        }
        // A compiled kernel sizes its grid to its data, so every workgroup writes at least one
        // element of a binding. More workgroups than the bindings hold bytes means the count does
        // not belong to this kernel, whose extra workgroups would write past its bindings into
        // whatever memory follows: native code checks no bounds.
        let binding_bytes: u64 = binding_lengths.iter().map(|&length| length as u64).sum();
        if total > binding_bytes.max(1) {
            return Err(Error::out_of_range(format!(
                "dispatch '{}' asks for {total} workgroups ({workgroup_count:?}), more than the {binding_bytes} \
                 bytes its bindings hold: its kernel would run workgroups past its data",
                info.name
            )));
        }
        Ok(PreparedDispatch {
            executable,
            export: command.export,
            workgroup_size: info.workgroup_size,
            workgroup_count,
            local_memory_size: local.local_memory_size(command.export),
            constants: SmallVec::from_slice(&command.constants),
            cost_key: CostKey::of(&command.constants),
            binding_ptrs,
            binding_lengths,
            writable,
            buffers: SmallVec::new(),
            _borrowed: PhantomData,
        })
    }

    fn local(&self) -> &LocalExecutable {
        self.executable.as_any().downcast_ref().expect("checked in prepare")
    }

    /// The measured cost per workgroup of the export with this dispatch's push constants, if
    /// known.
    pub fn workgroup_ns(&self) -> Option<u64> {
        self.local().workgroup_ns(self.export, self.cost_key)
    }

    /// Records a timed run of `workgroups` workgroups of this dispatch.
    pub fn record_time(&self, workgroups: u64, elapsed_ns: u64) {
        self.local()
            .record_workgroup_time(self.export, self.cost_key, workgroups, elapsed_ns);
    }

    /// The export's name, for traces.
    pub fn export_name(&self) -> String {
        self.local().export(self.export).name.clone()
    }

    /// Workgroups along x, y and z.
    pub fn workgroup_count(&self) -> [u32; 3] {
        self.workgroup_count
    }

    /// Total number of workgroups.
    pub fn workgroup_total(&self) -> u64 {
        self.workgroup_count.iter().map(|c| *c as u64).product()
    }

    /// Scratch bytes each concurrently running workgroup needs.
    pub fn local_memory_size(&self) -> u32 {
        self.local_memory_size
    }

    /// The ABI's dispatch state for `max_concurrency` workers. It points into `self`: use it only
    /// while `self` is borrowed (which keeps it from moving or dropping).
    pub fn state(&self, max_concurrency: u8) -> DispatchStateV0 {
        DispatchStateV0 {
            workgroup_size_x: self.workgroup_size[0],
            workgroup_size_y: self.workgroup_size[1],
            workgroup_size_z: self.workgroup_size[2] as u16,
            constant_count: self.constants.len() as u16,
            workgroup_count_x: self.workgroup_count[0],
            workgroup_count_y: self.workgroup_count[1],
            workgroup_count_z: self.workgroup_count[2] as u16,
            max_concurrency,
            binding_count: self.binding_ptrs.len() as u8,
            constants: self.constants.as_ptr(),
            binding_ptrs: self.binding_ptrs.as_ptr(),
            binding_lengths: self.binding_lengths.as_ptr(),
        }
    }

    /// Runs workgroups `[first, first + count)` in x-fastest order on the calling thread, which
    /// must have denormal flushing on ([`crate::float_mode::FlushDenormals`]).
    ///
    /// `state` must come from [`Self::state`] of this dispatch; `local_memory` must hold at least
    /// [`Self::local_memory_size`] bytes.
    pub fn run_workgroups(
        &self,
        state: &DispatchStateV0,
        first: u64,
        count: u64,
        processor_id: u32,
        local_memory: &mut [u8],
    ) -> Result<()> {
        if count == 0 {
            // Nothing to run; a grid with a zero side must not reach the index arithmetic.
            return Ok(());
        }
        let [nx, ny, _] = self.workgroup_count.map(|c| c as u64);
        let local_memory_size = local_memory.len().min(u32::MAX as usize) as u32;
        let bound = self
            .local()
            .library()
            .bind_dispatch(self.export, state, local_memory_size)?;
        let local_memory_ptr = if local_memory.is_empty() {
            std::ptr::null_mut()
        } else {
            local_memory.as_mut_ptr().cast::<c_void>()
        };
        let workgroup = WorkgroupStateV0 {
            workgroup_id_x: (first % nx) as u32,
            workgroup_id_y: ((first / nx) % ny) as u32,
            workgroup_id_z: (first / (nx * ny)) as u16,
            reserved: 0,
            processor_id,
            local_memory: local_memory_ptr,
            local_memory_size,
        };
        let running = RunningDispatch {
            ptrs: self.binding_ptrs.as_ptr(),
            lengths: self.binding_lengths.as_ptr(),
            count: self.binding_ptrs.len(),
            writable: self.writable,
        };
        // SAFETY: binding pointers and lengths were resolved from bounds-checked host buffers
        // that `self` keeps alive or borrows; `state` points into `self`; `local_memory` is an
        // exclusive scratch slice of the size the export asked for. The arrays marked running
        // are `self`'s, borrowed for the call.
        unsafe {
            while_running(running, || {
                bound.run_range(&workgroup, count, [self.workgroup_count[0], self.workgroup_count[1]])
            })
        }?;
        Ok(())
    }
}

impl PreparedDispatch<'static> {
    /// Resolves `command`'s bindings (slots from `table`) to host memory, keeping the executable
    /// and buffers alive with counted references (for a dispatch that outlives both).
    pub fn owning(command: &DispatchCommand, table: &[Binding]) -> Result<Self> {
        let mut buffers = SmallVec::new();
        let mut dispatch = Self::prepare(
            Cow::Owned(command.executable.clone()),
            command,
            table,
            Some(&mut buffers),
        )?;
        dispatch.buffers = buffers;
        Ok(dispatch)
    }
}

fn read_workgroup_count(reference: &halo_hal::BufferRef, table: &[Binding]) -> Result<[u32; 3]> {
    let resolved = reference.resolve(table)?;
    let mut raw = [0u8; 12];
    halo_hal::host_transfer::copy_out(resolved.buffer, resolved.offset, &mut raw)?;
    Ok([0, 1, 2].map(|i| u32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().expect("4 bytes"))))
}
