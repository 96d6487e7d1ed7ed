//! The emulated Metal device: buffers in host memory, each library's MSL compiled for the host
//! by [`HostCompiler`], and a dispatch's threadgroups spread over a pool of host threads.
//!
//! Commands run while they are encoded, so the command buffer holds nothing to commit; Metal's
//! ordering within a command buffer (everything before a barrier first) holds trivially.

use super::host_compiler::{BindingMemory, CompiledLibrary, HostCompiler, KernelEntry};
use crate::backend::{check_grid, Backend, Committed, Dispatch, Encoder, Pipelines, Span, Threadgroups};
use crate::executable_def::MetalExecutable;
use halo_hal::{host_transfer, Allocator, Error, HeapAllocator, Result, ResultExt};
use rayon::prelude::*;
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

/// A Metal device whose kernels run on host threads.
pub struct EmulatedBackend {
    allocator: HeapAllocator,
    compiler: HostCompiler,
    threads: rayon::ThreadPool,
}

impl EmulatedBackend {
    /// A device compiling with `compiler` and running threadgroups on `threads` host threads.
    ///
    /// # Errors
    /// `ResourceExhausted` when the threads cannot be started.
    pub fn new(compiler: HostCompiler, threads: usize) -> Result<Self> {
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|index| format!("metal-emulated-{index}"))
            .build()
            .map_err(|e| Error::resource_exhausted(format!("cannot start the emulated Metal device's threads: {e}")))?;
        Ok(EmulatedBackend {
            allocator: HeapAllocator::new(),
            compiler,
            threads,
        })
    }
}

impl Backend for EmulatedBackend {
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }

    fn make_pipelines(&self, executable: &MetalExecutable) -> Result<Arc<dyn Pipelines>> {
        let mut libraries = Vec::with_capacity(executable.libraries.len());
        let mut exports = vec![None; executable.exports.len()];
        for (index, library) in executable.libraries.iter().enumerate() {
            let ordinals: Vec<usize> = (executable.exports.iter().enumerate())
                .filter(|(_, export)| export.library == index)
                .map(|(ordinal, _)| ordinal)
                .collect();
            if ordinals.is_empty() {
                continue;
            }
            let source = library.source.as_deref().ok_or_else(|| {
                Error::unimplemented(format!(
                    "library {index} holds only a precompiled metallib; the emulated Metal device runs MSL source \
                     (compile without --iree-metal-compile-to-metallib)"
                ))
            })?;
            let entries: Vec<KernelEntry<'_>> = (ordinals.iter())
                .map(|&ordinal| KernelEntry {
                    entry_point: &executable.exports[ordinal].entry_point,
                    threadgroup_size: executable.exports[ordinal].threadgroup_size,
                })
                .collect();
            let compiled = (self.compiler.compile(source, &entries))
                .with_context(|| format!("compiling library {index} for the emulated Metal device"))?;
            for (entry, &ordinal) in ordinals.iter().enumerate() {
                exports[ordinal] = Some(ExportEntry {
                    library: libraries.len(),
                    entry,
                    threadgroup_size: executable.exports[ordinal].threadgroup_size,
                });
            }
            libraries.push(compiled);
        }
        let exports = (exports.into_iter().enumerate())
            .map(|(ordinal, entry)| {
                entry.ok_or_else(|| Error::invalid_argument(format!("export {ordinal} names no library that is there")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(EmulatedPipelines { libraries, exports }))
    }

    fn command_buffer(&self) -> Result<Box<dyn Encoder + '_>> {
        Ok(Box::new(EmulatedEncoder { backend: self }))
    }
}

/// Where an export's code is.
#[derive(Clone, Copy)]
struct ExportEntry {
    library: usize,
    entry: usize,
    threadgroup_size: [u32; 3],
}

/// An executable's libraries compiled for the host.
struct EmulatedPipelines {
    libraries: Vec<CompiledLibrary>,
    exports: Vec<ExportEntry>,
}

impl Pipelines for EmulatedPipelines {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Runs each command as it is encoded.
struct EmulatedEncoder<'a> {
    backend: &'a EmulatedBackend,
}

impl Encoder for EmulatedEncoder<'_> {
    fn dispatch(&mut self, dispatch: &Dispatch<'_>) -> Result<()> {
        let pipelines: &EmulatedPipelines = halo_hal::downcast(dispatch.pipelines.as_any(), "a Metal pipeline")?;
        let export = pipelines.exports.get(dispatch.export).ok_or_else(|| {
            Error::out_of_range(format!(
                "export {} of an executable of {} exports",
                dispatch.export,
                pipelines.exports.len()
            ))
        })?;
        let groups = match dispatch.threadgroups {
            Threadgroups::Direct(groups) => groups,
            Threadgroups::Indirect(span) => read_threadgroup_count(span)?,
        };
        if groups.contains(&0) {
            return Ok(());
        }
        check_grid(groups, export.threadgroup_size)?;
        let bindings = (dispatch.bindings.iter().enumerate())
            .map(|(ordinal, span)| {
                let (pointer, length) =
                    (span.buffer.host_range(span.offset, span.length)).with_context(|| format!("binding {ordinal}"))?;
                Ok(BindingMemory {
                    start: pointer.as_ptr().cast::<c_void>(),
                    length,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let run = GroupRun {
            library: &pipelines.libraries[export.library],
            entry: export.entry,
            bindings,
            constants: dispatch.constants,
            groups,
        };
        let total = groups.iter().map(|&g| u64::from(g)).product::<u64>();
        self.backend
            .threads
            .install(|| (0..total).into_par_iter().try_for_each(|index| run.group(index)))
            .with_context(|| format!("running export {} on the emulated Metal device", dispatch.export))
    }

    fn fill(&mut self, target: Span<'_>, pattern: &[u8]) -> Result<()> {
        host_transfer::fill(target.buffer, target.offset, target.length, pattern)
    }

    fn update(&mut self, target: Span<'_>, data: &[u8]) -> Result<()> {
        host_transfer::update(data, target.buffer, target.offset)
    }

    fn copy(&mut self, source: Span<'_>, target: Span<'_>) -> Result<()> {
        host_transfer::copy(
            source.buffer,
            source.offset,
            target.buffer,
            target.offset,
            source.length,
        )
    }

    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<Box<dyn Committed>> {
        Ok(Box::new(HasRun))
    }
}

/// A command buffer whose commands ran as they were encoded: the queue's submission thread did
/// the work, so there is nothing left to wait for.
struct HasRun;

impl Committed for HasRun {
    fn wait(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// The three threadgroup counts at `span`.
fn read_threadgroup_count(span: Span<'_>) -> Result<[u32; 3]> {
    let mut bytes = [0u8; 12];
    host_transfer::copy_out(span.buffer, span.offset, &mut bytes).context("reading the indirect threadgroup count")?;
    Ok([0, 1, 2].map(|i| u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]])))
}

/// One dispatch's threadgroups, run by index from any pool thread.
struct GroupRun<'a> {
    library: &'a CompiledLibrary,
    entry: usize,
    bindings: Vec<BindingMemory>,
    constants: &'a [u32],
    groups: [u32; 3],
}

// SAFETY: the binding pointers address buffers the dispatch keeps alive until every group has
// run; threadgroups of one dispatch share them as a GPU's threadgroups do.
unsafe impl Sync for GroupRun<'_> {}

impl GroupRun<'_> {
    /// Runs threadgroup `index` of the grid, x fastest.
    fn group(&self, index: u64) -> Result<()> {
        let [x, y, _] = self.groups.map(u64::from);
        let group = [index % x, index / x % y, index / (x * y)].map(|g| g as u32);
        // SAFETY: each binding is its range of host memory, alive for the dispatch (the command
        // buffer checked the ranges when recorded and submitted).
        let run = unsafe { (self.library).run(self.entry, &self.bindings, self.constants, group, self.groups) };
        run.with_context(|| format!("running threadgroup {group:?}"))
    }
}
