//! Command buffers: recorded fills, updates, copies, dispatches and barriers, validated once.
//!
//! Recording is shared by every driver: a command buffer is a validated list of [`Command`]s that
//! a driver executes at submit (the CPU drivers walk it; GPU drivers translate it). Buffers may be
//! named directly or by a slot of the binding table given at submit.

use crate::buffer::{validate_fill, Buffer, Overlap, WHOLE_BUFFER};
use crate::executable::{check_export_ordinal, Executable};
use crate::memory::{BufferUsage, MemoryAccess, MemoryType, QueueAffinity};
use crate::{Error, Result, ResultExt};
use bitflags::bitflags;
use std::any::Any;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

bitflags! {
    /// How a command buffer will be used (`iree_hal_command_buffer_mode_t`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct CommandBufferMode: u32 {
        /// Submitted at most once.
        const ONE_SHOT = 1 << 0;
        /// May execute while recording (needs `ONE_SHOT`).
        const ALLOW_INLINE_EXECUTION = 1 << 4;
        /// Skip validation: the caller vouches for every command.
        const UNVALIDATED = 1 << 5;
    }
}

bitflags! {
    /// Kinds of command a buffer may hold (`iree_hal_command_category_t`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct CommandCategory: u32 {
        /// Fill, update and copy.
        const TRANSFER = 1 << 0;
        /// Dispatches.
        const DISPATCH = 1 << 1;
        /// Both.
        const ANY = Self::TRANSFER.bits() | Self::DISPATCH.bits();
    }
}

/// Largest inline update, as in IREE (`IREE_HAL_COMMAND_BUFFER_MAX_UPDATE_SIZE`).
pub const MAX_UPDATE_SIZE: usize = 64 * 1024;

/// Where a command's buffer comes from.
#[derive(Debug, Clone)]
pub enum BufferSource {
    /// A buffer fixed at record time.
    Direct(Buffer),
    /// Slot of the binding table given at submit.
    Slot(u32),
}

/// A buffer range named by a command (`iree_hal_buffer_ref_t`).
#[derive(Debug, Clone)]
pub struct BufferRef {
    /// The buffer or binding-table slot.
    pub source: BufferSource,
    /// Offset within the buffer (or the slot's range).
    pub offset: u64,
    /// Length, or [`WHOLE_BUFFER`].
    pub length: u64,
}

impl BufferRef {
    /// `[offset, offset + length)` of `buffer`.
    pub fn direct(buffer: &Buffer, offset: u64, length: u64) -> Self {
        BufferRef {
            source: BufferSource::Direct(buffer.clone()),
            offset,
            length,
        }
    }
    /// All of `buffer`.
    pub fn whole(buffer: &Buffer) -> Self {
        Self::direct(buffer, 0, WHOLE_BUFFER)
    }
    /// `[offset, offset + length)` of the buffer bound to `slot` at submit.
    pub fn slot(slot: u32, offset: u64, length: u64) -> Self {
        BufferRef {
            source: BufferSource::Slot(slot),
            offset,
            length,
        }
    }

    /// The concrete buffer, offset and length, looking slots up in `table`.
    ///
    /// # Errors
    /// `OutOfRange` for a missing slot or a range outside the buffer.
    pub fn resolve<'a>(&'a self, table: &'a [Binding<'_>]) -> Result<ResolvedRef<'a>> {
        let (buffer, offset, length) = match &self.source {
            BufferSource::Direct(buffer) => (buffer, self.offset, self.length),
            BufferSource::Slot(slot) => {
                let binding = table.get(*slot as usize).ok_or_else(|| {
                    Error::out_of_range(format!(
                        "binding table slot {slot} is not bound (table has {} entries)",
                        table.len()
                    ))
                })?;
                let slot_length = binding.buffer.checked_range(binding.offset, binding.length)?;
                let length = if self.length == WHOLE_BUFFER {
                    slot_length.checked_sub(self.offset).ok_or_else(|| {
                        Error::out_of_range(format!(
                            "offset {} exceeds the {slot_length} bytes bound to slot {slot}",
                            self.offset
                        ))
                    })?
                } else {
                    self.length
                };
                (
                    binding.buffer.as_ref(),
                    binding.offset.saturating_add(self.offset),
                    length,
                )
            }
        };
        let length = buffer.checked_range(offset, length)?;
        Ok(ResolvedRef { buffer, offset, length })
    }
}

/// A buffer range with slots resolved and the length known, borrowed from the reference or the
/// binding table it was resolved against.
#[derive(Debug, Clone, Copy)]
pub struct ResolvedRef<'a> {
    /// The buffer.
    pub buffer: &'a Buffer,
    /// Offset within `buffer`.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// One entry of a binding table: what a slot refers to for one submission.
///
/// The buffer is borrowed from the submitter for the call that submits it (no reference
/// counting on the way in); a driver that keeps the table past that call takes an owned copy
/// ([`Binding::to_static`]).
#[derive(Debug, Clone)]
pub struct Binding<'a> {
    /// The buffer.
    pub buffer: Cow<'a, Buffer>,
    /// Offset within the buffer.
    pub offset: u64,
    /// Length, or [`WHOLE_BUFFER`].
    pub length: u64,
}

impl<'a> Binding<'a> {
    /// `[offset, offset + length)` of `buffer`, borrowed.
    pub fn new(buffer: &'a Buffer, offset: u64, length: u64) -> Self {
        Binding {
            buffer: Cow::Borrowed(buffer),
            offset,
            length,
        }
    }

    /// All of `buffer`, borrowed.
    pub fn whole(buffer: &'a Buffer) -> Self {
        Binding::new(buffer, 0, WHOLE_BUFFER)
    }

    /// The same entry holding its own reference to the buffer, for a table kept past the
    /// submitting call.
    pub fn to_static(&self) -> Binding<'static> {
        Binding {
            buffer: Cow::Owned(self.buffer.as_ref().clone()),
            offset: self.offset,
            length: self.length,
        }
    }
}

/// How many workgroups a dispatch runs.
#[derive(Debug, Clone)]
pub enum WorkgroupCount {
    /// Fixed at record time.
    Static([u32; 3]),
    /// Three u32s read from a buffer when the dispatch executes.
    Indirect(BufferRef),
}

/// A dispatch of one export over a grid of workgroups.
#[derive(Clone)]
pub struct DispatchCommand {
    /// The executable; kept alive by the command buffer.
    pub executable: Arc<dyn Executable>,
    /// Export ordinal.
    pub export: u32,
    /// The grid.
    pub workgroup_count: WorkgroupCount,
    /// 32-bit constants.
    pub constants: Vec<u32>,
    /// Buffer bindings in the order the export declares them.
    pub bindings: Vec<BufferRef>,
}

/// A recorded command.
#[derive(Clone)]
pub enum Command {
    /// Everything before completes before anything after starts.
    Barrier,
    /// Repeats a 1-, 2- or 4-byte pattern over the target.
    Fill {
        /// Target range.
        target: BufferRef,
        /// Pattern bytes (1, 2 or 4).
        pattern: Vec<u8>,
    },
    /// Writes bytes captured at record time.
    Update {
        /// Bytes to write.
        data: Box<[u8]>,
        /// Target range (its length is `data.len()`).
        target: BufferRef,
    },
    /// Copies between two ranges of equal length.
    Copy {
        /// Source range.
        source: BufferRef,
        /// Target range.
        target: BufferRef,
    },
    /// Runs a kernel.
    Dispatch(DispatchCommand),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Initial,
    Recording,
    Executable,
}

/// A slot reference checked against the binding table at submit.
#[derive(Debug, Clone, Copy)]
struct SlotUse {
    slot: u32,
    offset: u64,
    length: u64,
    usage: BufferUsage,
    access: MemoryAccess,
}

struct Recording {
    state: State,
    commands: Vec<Command>,
    slot_uses: Vec<SlotUse>,
}

struct Recorded {
    commands: Arc<[Command]>,
    slot_uses: Vec<SlotUse>,
}

/// A command buffer (`iree_hal_command_buffer_t`): `begin`, record, `end`, then submit.
///
/// Ownership: holds `Arc`s of the buffers and executables it names. Threading: recording methods
/// take `&self` and may be called from any thread (they serialize); after `end` it is immutable.
pub struct CommandBuffer {
    mode: CommandBufferMode,
    categories: CommandCategory,
    queue_affinity: QueueAffinity,
    binding_capacity: u32,
    recording: Mutex<Recording>,
    recorded: OnceLock<Recorded>,
    submitted: AtomicBool,
    driver_cache: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl CommandBuffer {
    /// A new command buffer in the initial state; `binding_capacity` is the binding table size it
    /// may reference.
    pub fn new(
        mode: CommandBufferMode,
        categories: CommandCategory,
        queue_affinity: QueueAffinity,
        binding_capacity: u32,
    ) -> Arc<Self> {
        Arc::new(CommandBuffer {
            mode,
            categories,
            queue_affinity,
            binding_capacity,
            recording: Mutex::new(Recording {
                state: State::Initial,
                commands: Vec::new(),
                slot_uses: Vec::new(),
            }),
            recorded: OnceLock::new(),
            submitted: AtomicBool::new(false),
            driver_cache: OnceLock::new(),
        })
    }

    /// The mode it was created with.
    pub fn mode(&self) -> CommandBufferMode {
        self.mode
    }
    /// Allowed command categories.
    pub fn categories(&self) -> CommandCategory {
        self.categories
    }
    /// Queues it may run on.
    pub fn queue_affinity(&self) -> QueueAffinity {
        self.queue_affinity
    }
    /// Binding table capacity.
    pub fn binding_capacity(&self) -> u32 {
        self.binding_capacity
    }

    fn with_recording<T>(&self, what: &str, f: impl FnOnce(&mut Recording) -> Result<T>) -> Result<T> {
        let mut recording = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        if recording.state != State::Recording {
            return Err(Error::failed_precondition(format!(
                "cannot {what}: the command buffer is not recording"
            )));
        }
        f(&mut recording)
    }

    /// Starts recording.
    pub fn begin(&self) -> Result<()> {
        let mut recording = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        if recording.state != State::Initial {
            return Err(Error::failed_precondition("command buffer has already begun recording"));
        }
        recording.state = State::Recording;
        Ok(())
    }

    /// Ends recording; the command buffer becomes immutable and submittable.
    pub fn end(&self) -> Result<()> {
        let mut recording = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        if recording.state != State::Recording {
            return Err(Error::failed_precondition(
                "cannot end a command buffer that is not recording",
            ));
        }
        recording.state = State::Executable;
        let recorded = Recorded {
            commands: std::mem::take(&mut recording.commands).into(),
            slot_uses: std::mem::take(&mut recording.slot_uses),
        };
        let _ = self.recorded.set(recorded);
        Ok(())
    }

    /// The recorded commands.
    ///
    /// # Errors
    /// `FailedPrecondition` if recording has not ended.
    pub fn commands(&self) -> Result<&Arc<[Command]>> {
        self.recorded
            .get()
            .map(|r| &r.commands)
            .ok_or_else(|| Error::failed_precondition("command buffer has not ended recording"))
    }

    /// A driver's translation of the recorded commands, built once by `build` on first use and
    /// reused by later submissions (e.g. pre-resolved dispatches, a native command buffer).
    ///
    /// # Errors
    /// `FailedPrecondition` before `end`; whatever `build` returns; `Internal` if another type was
    /// cached (two drivers sharing one command buffer).
    pub fn driver_cache<T: Any + Send + Sync>(&self, build: impl FnOnce(&[Command]) -> Result<T>) -> Result<&T> {
        if self.driver_cache.get().is_none() {
            let built = build(self.commands()?)?;
            // Another thread may have won the race; both translations are equivalent.
            let _ = self.driver_cache.set(Box::new(built));
        }
        self.driver_cache
            .get()
            .and_then(|cached| cached.downcast_ref::<T>())
            .ok_or_else(|| Error::internal("command buffer translated by a different driver"))
    }

    fn validated(&self) -> bool {
        !self.mode.contains(CommandBufferMode::UNVALIDATED)
    }

    fn require_category(&self, category: CommandCategory, what: &str) -> Result<()> {
        if self.validated() && !self.categories.intersects(category) {
            return Err(Error::failed_precondition(format!(
                "{what} needs category {category:?} but the command buffer allows {:?}",
                self.categories
            )));
        }
        Ok(())
    }

    /// Checks a reference at record time; slot references are remembered for submit.
    fn check_ref(
        &self,
        recording: &mut Recording,
        reference: &BufferRef,
        usage: BufferUsage,
        access: MemoryAccess,
    ) -> Result<()> {
        if !self.validated() {
            return Ok(());
        }
        match &reference.source {
            BufferSource::Direct(buffer) => check_buffer(buffer, reference.offset, reference.length, usage, access),
            BufferSource::Slot(slot) => {
                if *slot >= self.binding_capacity {
                    return Err(Error::out_of_range(format!(
                        "binding table slot {slot} exceeds the command buffer's capacity {}",
                        self.binding_capacity
                    )));
                }
                recording.slot_uses.push(SlotUse {
                    slot: *slot,
                    offset: reference.offset,
                    length: reference.length,
                    usage,
                    access,
                });
                Ok(())
            }
        }
    }

    /// Orders everything recorded before against everything after.
    pub fn execution_barrier(&self) -> Result<()> {
        self.with_recording("record a barrier", |recording| {
            recording.commands.push(Command::Barrier);
            Ok(())
        })
    }

    /// Records a fill of `target` with `pattern` (1, 2 or 4 bytes).
    pub fn fill_buffer(&self, target: BufferRef, pattern: &[u8]) -> Result<()> {
        self.require_category(CommandCategory::TRANSFER, "fill")?;
        self.with_recording("record a fill", |recording| {
            if self.validated() {
                match &target.source {
                    BufferSource::Direct(buffer) => {
                        check_direct_fill(buffer, target.offset, target.length, pattern)?;
                    }
                    BufferSource::Slot(_) => {
                        self.check_ref(recording, &target, BufferUsage::TRANSFER_TARGET, MemoryAccess::WRITE)?;
                        // A whole-slot length is only known at submit; the offset is checked now.
                        let length = if target.length == WHOLE_BUFFER {
                            0
                        } else {
                            target.length
                        };
                        validate_fill(target.offset, length, pattern)?;
                    }
                }
            }
            recording.commands.push(Command::Fill {
                target,
                pattern: pattern.to_vec(),
            });
            Ok(())
        })
        .context("recording fill_buffer")
    }

    /// Records a write of `data` (at most [`MAX_UPDATE_SIZE`] bytes, copied now) into `target`.
    pub fn update_buffer(&self, data: &[u8], target: BufferRef) -> Result<()> {
        self.require_category(CommandCategory::TRANSFER, "update")?;
        self.with_recording("record an update", |recording| {
            if data.len() > MAX_UPDATE_SIZE {
                return Err(Error::invalid_argument(format!(
                    "update of {} bytes exceeds the {MAX_UPDATE_SIZE}-byte limit",
                    data.len()
                )));
            }
            let target = BufferRef {
                length: data.len() as u64,
                ..target
            };
            self.check_ref(recording, &target, BufferUsage::TRANSFER_TARGET, MemoryAccess::WRITE)?;
            recording.commands.push(Command::Update {
                data: data.into(),
                target,
            });
            Ok(())
        })
        .context("recording update_buffer")
    }

    /// Records a copy of `length` bytes from `source` to `target`.
    pub fn copy_buffer(&self, source: BufferRef, target: BufferRef) -> Result<()> {
        self.require_category(CommandCategory::TRANSFER, "copy")?;
        self.with_recording("record a copy", |recording| {
            self.check_ref(recording, &source, BufferUsage::TRANSFER_SOURCE, MemoryAccess::READ)?;
            self.check_ref(recording, &target, BufferUsage::TRANSFER_TARGET, MemoryAccess::WRITE)?;
            if self.validated() {
                check_copy(&source, &target)?;
            }
            recording.commands.push(Command::Copy { source, target });
            Ok(())
        })
        .context("recording copy_buffer")
    }

    /// Records a dispatch; constants and bindings must match what the export declares.
    pub fn dispatch(&self, dispatch: DispatchCommand) -> Result<()> {
        self.require_category(CommandCategory::DISPATCH, "dispatch")?;
        let export_name = dispatch
            .executable
            .export_info(dispatch.export)
            .map(|info| info.name)
            .unwrap_or_else(|_| format!("#{}", dispatch.export));
        self.with_recording("record a dispatch", |recording| {
            if self.validated() {
                check_dispatch(&dispatch)?;
            }
            for (ordinal, binding) in dispatch.bindings.iter().enumerate() {
                self.check_ref(recording, binding, BufferUsage::DISPATCH_STORAGE, MemoryAccess::empty())
                    .with_context(|| format!("binding {ordinal}"))?;
            }
            if let WorkgroupCount::Indirect(reference) = &dispatch.workgroup_count {
                let reference = BufferRef {
                    length: 12,
                    ..reference.clone()
                };
                self.check_ref(
                    recording,
                    &reference,
                    BufferUsage::DISPATCH_INDIRECT_PARAMETERS,
                    MemoryAccess::READ,
                )
                .context("indirect workgroup count")?;
            }
            recording.commands.push(Command::Dispatch(dispatch));
            Ok(())
        })
        .with_context(|| format!("recording dispatch of '{export_name}'"))
    }

    /// Checks a binding table against every slot the commands reference, and one-shot reuse.
    ///
    /// # Errors
    /// `FailedPrecondition` for an unended or resubmitted one-shot command buffer; `OutOfRange`
    /// or `PermissionDenied` naming the slot for a bad binding.
    pub fn validate_submission(&self, table: &[Binding]) -> Result<()> {
        let recorded = self
            .recorded
            .get()
            .ok_or_else(|| Error::failed_precondition("command buffer submitted before recording ended"))?;
        if self.mode.contains(CommandBufferMode::ONE_SHOT) && self.submitted.swap(true, Ordering::AcqRel) {
            return Err(Error::failed_precondition(
                "one-shot command buffer submitted more than once",
            ));
        }
        for use_ in &recorded.slot_uses {
            let reference = BufferRef::slot(use_.slot, use_.offset, use_.length);
            // Resolving checks the range.
            reference
                .resolve(table)
                .and_then(|resolved| check_capabilities(resolved.buffer, use_.usage, use_.access))
                .with_context(|| format!("binding table slot {}", use_.slot))?;
        }
        Ok(())
    }
}

fn check_buffer(buffer: &Buffer, offset: u64, length: u64, usage: BufferUsage, access: MemoryAccess) -> Result<()> {
    buffer.checked_range(offset, length)?;
    check_capabilities(buffer, usage, access)
}

/// What a command needs of a buffer besides the range: device-visible memory, `usage`, `access`.
fn check_capabilities(buffer: &Buffer, usage: BufferUsage, access: MemoryAccess) -> Result<()> {
    buffer.validate_memory_type(MemoryType::DEVICE_VISIBLE)?;
    buffer.validate_usage(usage)?;
    buffer.validate_access(access)
}

/// The checks recording a fill of `[offset, offset + length)` of `target` makes, for drivers
/// that fill at once instead of recording; returns the length with [`WHOLE_BUFFER`] resolved.
///
/// # Errors
/// As [`CommandBuffer::fill_buffer`].
pub fn check_direct_fill(target: &Buffer, offset: u64, length: u64, pattern: &[u8]) -> Result<u64> {
    check_buffer(
        target,
        offset,
        length,
        BufferUsage::TRANSFER_TARGET,
        MemoryAccess::WRITE,
    )?;
    let length = target.checked_range(offset, length)?;
    validate_fill(offset, length, pattern)?;
    Ok(length)
}

/// The checks recording a copy of `length` bytes between direct ranges makes, for drivers that
/// copy at once; returns the length with [`WHOLE_BUFFER`] resolved.
///
/// # Errors
/// As [`CommandBuffer::copy_buffer`].
pub fn check_direct_copy(
    source: &Buffer,
    source_offset: u64,
    target: &Buffer,
    target_offset: u64,
    length: u64,
) -> Result<u64> {
    check_buffer(
        source,
        source_offset,
        length,
        BufferUsage::TRANSFER_SOURCE,
        MemoryAccess::READ,
    )?;
    check_buffer(
        target,
        target_offset,
        length,
        BufferUsage::TRANSFER_TARGET,
        MemoryAccess::WRITE,
    )?;
    check_copy_ranges((source, source_offset, length), (target, target_offset, length))
}

fn check_copy(source: &BufferRef, target: &BufferRef) -> Result<()> {
    if let (BufferSource::Direct(src), BufferSource::Direct(dst)) = (&source.source, &target.source) {
        check_copy_ranges((src, source.offset, source.length), (dst, target.offset, target.length))?;
    }
    Ok(())
}

/// Checks that two `(buffer, offset, length)` ranges have one length and do not overlap;
/// returns the length.
fn check_copy_ranges(
    (src, src_offset, src_length): (&Buffer, u64, u64),
    (dst, dst_offset, dst_length): (&Buffer, u64, u64),
) -> Result<u64> {
    let src_len = src.checked_range(src_offset, src_length)?;
    let dst_len = dst.checked_range(dst_offset, dst_length)?;
    if src_len != dst_len {
        return Err(Error::invalid_argument(format!(
            "copy source length {src_len} differs from target length {dst_len}"
        )));
    }
    if src.overlap(src_offset, src_len, dst, dst_offset, dst_len) != Overlap::Disjoint {
        return Err(Error::invalid_argument(format!(
            "copy source [{src_offset}, {}) overlaps target [{dst_offset}, {}) in the same buffer",
            src_offset + src_len,
            dst_offset + dst_len
        )));
    }
    Ok(src_len)
}

fn check_dispatch(dispatch: &DispatchCommand) -> Result<()> {
    check_export_ordinal(dispatch.executable.as_ref(), dispatch.export)?;
    let info = dispatch.executable.export_info(dispatch.export)?;
    if dispatch.constants.len() != info.constant_count as usize {
        return Err(Error::invalid_argument(format!(
            "{} constants given; export '{}' takes {}",
            dispatch.constants.len(),
            info.name,
            info.constant_count
        )));
    }
    if dispatch.bindings.len() != info.binding_count as usize {
        return Err(Error::invalid_argument(format!(
            "{} bindings given; export '{}' takes {}",
            dispatch.bindings.len(),
            info.name,
            info.binding_count
        )));
    }
    Ok(())
}
