//! CPU executable libraries: kernels compiled by `iree-compile` for the host,
//! loaded from either CPU format and called one workgroup at a time through
//! IREE's executable library ABI ([`abi`]).
//!
//! Loading runs the library's query function once (with halo's environment),
//! copies and validates every table it returns, resolves its imports, and keeps
//! the image loaded for as long as the [`Library`] lives.

pub mod abi;
mod environment;
mod tables;

use std::collections::HashMap;
use std::ffi::c_void;

use halo_hal::{Error, Result, ResultExt};

use crate::arch;
use crate::elf::ElfModule;
use crate::native_faults::{self, NativeFault};
use crate::system_library::{Container, SystemLibrary};

pub use self::abi::{DispatchStateV0 as DispatchState, WorkgroupStateV0 as WorkgroupState};
use self::environment::Environment;
pub use self::environment::{host_processor, HostImport};
use self::tables::{Bounds, Export};

/// Format of static-PIE ELF libraries that halo loads itself, for the host's architecture
/// (`embedded-elf-x86_64`, `embedded-elf-arm_64`).
pub const EMBEDDED_ELF_FORMAT: &str = match arch::HOST {
    Some(arch) => arch.embedded_format,
    None => "embedded-elf",
};
/// Format of ELF shared objects loaded through the system's loader (Linux), for the host's
/// architecture.
pub const SYSTEM_ELF_FORMAT: &str = match arch::HOST {
    Some(arch) => arch.system_elf_format,
    None => "system-elf",
};
/// Format of Mach-O dynamic libraries loaded through the system's loader (macOS), for the host's
/// architecture.
pub const SYSTEM_DYLIB_FORMAT: &str = match arch::HOST {
    Some(arch) => arch.system_dylib_format,
    None => "system-dylib",
};

/// The executable formats [`Library::load`] accepts on this host: the embedded ELF everywhere
/// halo knows the CPU, and the system loader's own kind of shared library.
pub fn supported_formats() -> &'static [&'static str] {
    match arch::HOST {
        Some(_) if cfg!(target_os = "linux") => &[EMBEDDED_ELF_FORMAT, SYSTEM_ELF_FORMAT],
        Some(_) if cfg!(target_os = "macos") => &[EMBEDDED_ELF_FORMAT, SYSTEM_DYLIB_FORMAT],
        _ => &[],
    }
}

/// The error for a format this host cannot load, naming the architecture or the system it is for.
fn unloadable_format(format: &str) -> Error {
    let supported = supported_formats().join(", ");
    let host = arch::HOST.map_or(std::env::consts::ARCH, |arch| arch.name);
    let wrong_system = |container: &str, system: &str| {
        Error::incompatible(format!(
            "executable format '{format}' is a {container} library, which only {system}'s loader \
             opens, and this host runs {}; compile with IREE's embedded linker (the default) \
             (supported here: {supported})",
            std::env::consts::OS
        ))
    };
    match arch::of_format(format) {
        Some(other) if other.name != host => Error::incompatible(format!(
            "executable format '{format}' holds {} code and this host runs {host}; compile for \
             this CPU (supported here: {supported})",
            other.name
        )),
        Some(arch) if format == arch.system_dylib_format => wrong_system("Mach-O", "macOS"),
        Some(arch) if format == arch.system_elf_format => wrong_system("ELF shared", "Linux"),
        _ => Error::incompatible(format!(
            "executable format '{format}' is not loadable here; supported: {supported}"
        )),
    }
}

/// How an export must be dispatched (`iree_hal_executable_dispatch_attrs_v0_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportAttrs {
    /// Workgroup size the kernel was compiled for.
    pub workgroup_size: [u32; 3],
    /// 32-bit push constants a dispatch must pass.
    pub constant_count: u32,
    /// Bindings a dispatch must pass.
    pub binding_count: u32,
    /// Workgroup-local scratch memory each workgroup needs, in bytes.
    pub local_memory_bytes: u32,
    /// Contiguous workgroups touch contiguous data; schedule them together.
    pub sequential: bool,
    /// The workgroup size may be chosen at dispatch time (a multiple of `workgroup_size`).
    pub workgroup_size_dynamic: bool,
    /// Entries in the export's parameter table.
    pub parameter_count: u32,
}

impl Default for ExportAttrs {
    /// What an export without an attributes entry gets: 1×1×1, nothing declared.
    fn default() -> Self {
        ExportAttrs {
            workgroup_size: [1, 1, 1],
            constant_count: 0,
            binding_count: 0,
            local_memory_bytes: 0,
            sequential: false,
            workgroup_size_dynamic: false,
            parameter_count: 0,
        }
    }
}

impl ExportAttrs {
    fn from_raw(raw: &abi::DispatchAttrsV0) -> std::result::Result<Self, String> {
        if u32::from(raw.constant_count) > abi::MAX_CONSTANT_COUNT {
            return Err(format!(
                "{} constants exceed the limit of {}",
                raw.constant_count,
                abi::MAX_CONSTANT_COUNT
            ));
        }
        if u32::from(raw.binding_count) > abi::MAX_BINDING_COUNT {
            return Err(format!(
                "{} bindings exceed the limit of {}",
                raw.binding_count,
                abi::MAX_BINDING_COUNT
            ));
        }
        Ok(ExportAttrs {
            workgroup_size: [raw.workgroup_size_x, raw.workgroup_size_y, raw.workgroup_size_z.into()],
            constant_count: raw.constant_count.into(),
            binding_count: raw.binding_count.into(),
            local_memory_bytes: u32::from(raw.local_memory_pages) * abi::WORKGROUP_LOCAL_MEMORY_PAGE_SIZE,
            sequential: raw.flags & abi::DISPATCH_FLAG_SEQUENTIAL != 0,
            workgroup_size_dynamic: raw.flags & abi::DISPATCH_FLAG_WORKGROUP_SIZE_DYNAMIC != 0,
            parameter_count: raw.parameter_count.into(),
        })
    }
}

/// What kind of value a logical export parameter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A value in the constants table, at byte `offset`.
    Constant,
    /// A buffer binding; `offset` is the binding ordinal.
    Binding,
    /// A raw pointer in the constants table, at byte `offset`.
    BufferPtr,
}

/// One logical parameter of an export (`iree_hal_executable_dispatch_parameter_v0_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportParam {
    /// What the parameter is.
    pub kind: ParamKind,
    /// Size in bytes, without padding.
    pub size: u8,
    /// Flag bits (none defined yet).
    pub flags: u16,
    /// Byte offset into the constants, or the binding ordinal.
    pub offset: u16,
    /// Name, when the library records one.
    pub name: Option<String>,
}

/// Where an export came from in the compiler's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLocation {
    /// File path as the compiler saw it.
    pub path: String,
    /// Line in that file.
    pub line: u32,
}

/// A source file the compiler embedded for debugging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path as the compiler wrote it.
    pub path: String,
    /// Contents (possibly binary).
    pub content: Vec<u8>,
}

/// The loaded code behind a library; dropping it unloads the code.
#[derive(Debug)]
enum Loaded {
    Embedded(ElfModule),
    System(SystemLibrary),
}

/// One loaded CPU executable library.
///
/// Ownership: owns the loaded code; the dispatch functions and every table
/// copied from the library stay valid until it is dropped. Threading: immutable
/// after load; `dispatch_workgroup` may run on many threads at once.
#[derive(Debug)]
pub struct Library {
    format: &'static str,
    name: String,
    exports: Vec<Export>,
    ordinals: HashMap<String, u32>,
    imports: Vec<String>,
    constant_count: u32,
    sources: Vec<SourceFile>,
    environment: Environment,
    // Last, so the code is unloaded only after everything pointing into it is gone.
    loaded: Loaded,
}

impl Library {
    /// Loads `bytes` in `format` with library specialization `constants`
    /// (empty: all zero) and no host imports.
    ///
    /// # Errors
    /// `Incompatible` for an unsupported format, machine or ABI version;
    /// `InvalidArgument` for malformed bytes or tables; `NotFound` for a missing
    /// query symbol or a required import. Messages name the part at fault.
    pub fn load(format: &str, bytes: &[u8], constants: &[u32]) -> Result<Self> {
        Self::load_with_imports(format, bytes, constants, &[])
    }

    /// Like [`Library::load`], resolving the library's imports against `imports`.
    ///
    /// # Errors
    /// As [`Library::load`].
    pub fn load_with_imports(format: &str, bytes: &[u8], constants: &[u32], imports: &[HostImport]) -> Result<Self> {
        Self::load_inner(format, bytes, constants, imports)
            .with_context(|| format!("loading {format} executable library ({} bytes)", bytes.len()))
    }

    fn load_inner(format: &str, bytes: &[u8], constants: &[u32], imports: &[HostImport]) -> Result<Self> {
        let (format, loaded) = match format {
            EMBEDDED_ELF_FORMAT if supported_formats().contains(&format) => (
                EMBEDDED_ELF_FORMAT,
                Loaded::Embedded(ElfModule::load(bytes, abi::LIBRARY_QUERY_SYMBOL)?),
            ),
            SYSTEM_ELF_FORMAT if supported_formats().contains(&format) => (
                SYSTEM_ELF_FORMAT,
                Loaded::System(SystemLibrary::load(bytes, Container::Elf)?),
            ),
            SYSTEM_DYLIB_FORMAT if supported_formats().contains(&format) => (
                SYSTEM_DYLIB_FORMAT,
                Loaded::System(SystemLibrary::load(bytes, Container::MachO)?),
            ),
            _ => return Err(unloadable_format(format)),
        };
        let (query, bounds) = match &loaded {
            Loaded::Embedded(module) => (
                module.entry_address(),
                Bounds::Image {
                    readable: module.readable(),
                    executable: module.executable(),
                },
            ),
            Loaded::System(library) => (library.function(abi::LIBRARY_QUERY_SYMBOL)?, Bounds::Trusted),
        };
        let mut environment = Environment::new(constants);
        native_faults::install();
        // SAFETY: `query` is the library's query symbol in `loaded`, which is
        // alive for the call, and `bounds` describes the same image.
        let tables = unsafe { tables::query(query, &environment, bounds) }?;

        if constants.is_empty() {
            environment.set_constants(vec![0; tables.constant_count as usize].into());
        } else if constants.len() != tables.constant_count as usize {
            return Err(Error::invalid_argument(format!(
                "library '{}' declares {} specialization constants but {} were given",
                tables.name,
                tables.constant_count,
                constants.len()
            )));
        }
        environment.resolve_imports(&tables.imports, imports)?;
        environment.seal()?;
        let ordinals = tables
            .exports
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i as u32))
            .collect();
        Ok(Library {
            format,
            name: tables.name,
            exports: tables.exports,
            ordinals,
            imports: tables.imports,
            constant_count: tables.constant_count,
            sources: tables.sources,
            environment,
            loaded,
        })
    }

    /// The format it was loaded from.
    pub fn format(&self) -> &'static str {
        self.format
    }

    /// `fault` in words, with the faulting instruction's address in the library's own numbering
    /// where halo loaded the image (so it can be found in a disassembly).
    fn describe_fault(&self, fault: &NativeFault) -> String {
        let own = match &self.loaded {
            Loaded::Embedded(module) => module.code_address(fault.instruction),
            Loaded::System(_) => None,
        };
        match own {
            Some(address) => format!("{} (address {address:#x} of the library)", fault.describe()),
            None => fault.describe(),
        }
    }

    /// The library's name, for diagnostics.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of exported dispatch functions.
    pub fn export_count(&self) -> u32 {
        self.exports.len() as u32
    }

    /// Name of export `ordinal`.
    pub fn export_name(&self, ordinal: u32) -> Option<&str> {
        self.exports.get(ordinal as usize).map(|e| e.name.as_str())
    }

    /// Ordinal of the export named `name`.
    pub fn export_ordinal(&self, name: &str) -> Option<u32> {
        self.ordinals.get(name).copied()
    }

    /// Dispatch attributes of export `ordinal` (defaults when the library lists none).
    ///
    /// # Panics
    /// When `ordinal >= export_count()`; callers validate ordinals first.
    pub fn export_attrs(&self, ordinal: u32) -> ExportAttrs {
        self.exports[ordinal as usize].attrs
    }

    /// Human-readable tag of export `ordinal`, if the library has one.
    pub fn export_tag(&self, ordinal: u32) -> Option<&str> {
        self.exports.get(ordinal as usize)?.tag.as_deref()
    }

    /// Logical parameters of export `ordinal`, if the library records them.
    pub fn export_params(&self, ordinal: u32) -> Option<&[ExportParam]> {
        self.exports.get(ordinal as usize)?.params.as_deref()
    }

    /// Source location of export `ordinal`, if the library records it.
    pub fn export_source_location(&self, ordinal: u32) -> Option<&SourceLocation> {
        self.exports.get(ordinal as usize)?.source_location.as_ref()
    }

    /// Number of library-level specialization constants.
    pub fn constant_count(&self) -> u32 {
        self.constant_count
    }

    /// The specialization constants kernels see.
    pub fn constants(&self) -> &[u32] {
        self.environment.constants()
    }

    /// Import names as the library lists them (`?` marks optional ones).
    pub fn import_names(&self) -> &[String] {
        &self.imports
    }

    /// Source files embedded in the library.
    pub fn source_files(&self) -> &[SourceFile] {
        &self.sources
    }

    /// Processor data given to kernels.
    pub fn processor(&self) -> &abi::ProcessorV0 {
        self.environment.processor()
    }

    fn export(&self, ordinal: u32) -> Result<&Export> {
        self.exports.get(ordinal as usize).ok_or_else(|| {
            Error::out_of_range(format!(
                "export ordinal {ordinal} is out of range; library '{}' has {} exports",
                self.name,
                self.exports.len()
            ))
        })
    }

    /// Runs one workgroup of export `ordinal` on the calling thread.
    ///
    /// Checks the ordinal, that the state carries at least the constants and
    /// bindings the export declares, and that `workgroup` offers the local
    /// memory it needs; everything else is the caller's contract.
    ///
    /// # Errors
    /// `OutOfRange` for a bad ordinal; `InvalidArgument` when the state is
    /// short of constants, bindings or local memory; `Internal` naming the
    /// export and workgroup when the kernel returns non-zero.
    ///
    /// # Safety
    /// `dispatch_state.constants` must point at `constant_count` values and
    /// `binding_ptrs`/`binding_lengths` at `binding_count` entries, each binding
    /// pointer valid for reads and writes of its length for the whole call and
    /// not written by anyone else except other workgroups of the same dispatch;
    /// `workgroup.local_memory` must be valid for `local_memory_size` bytes and
    /// exclusive to this call. The workgroup id and counts must describe a grid
    /// the kernel's bindings are sized for.
    pub unsafe fn dispatch_workgroup(
        &self,
        ordinal: u32,
        dispatch_state: &DispatchState,
        workgroup: &WorkgroupState,
    ) -> Result<()> {
        let local_memory_size = if workgroup.local_memory.is_null() {
            0
        } else {
            workgroup.local_memory_size
        };
        let bound = self.bind_dispatch(ordinal, dispatch_state, local_memory_size)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { bound.run(workgroup) }
    }

    /// Checks once that `dispatch_state` and `local_memory_size` bytes of local memory suit export
    /// `ordinal`, and returns a handle that runs its workgroups without checking again.
    ///
    /// # Errors
    /// As [`Library::dispatch_workgroup`]'s checks.
    pub fn bind_dispatch<'a>(
        &'a self,
        ordinal: u32,
        dispatch_state: &'a DispatchState,
        local_memory_size: u32,
    ) -> Result<BoundDispatch<'a>> {
        let export = self.export(ordinal)?;
        let attrs = &export.attrs;
        if u32::from(dispatch_state.constant_count) < attrs.constant_count
            || u32::from(dispatch_state.binding_count) < attrs.binding_count
            || local_memory_size < attrs.local_memory_bytes
        {
            return Err(Error::invalid_argument(format!(
                "dispatch of export {ordinal} '{}' passes {} constants, {} bindings and {} bytes of \
                 local memory; it needs {}, {} and {}",
                export.name,
                dispatch_state.constant_count,
                dispatch_state.binding_count,
                local_memory_size,
                attrs.constant_count,
                attrs.binding_count,
                attrs.local_memory_bytes
            )));
        }
        Ok(BoundDispatch {
            library: self,
            ordinal,
            function: export.function,
            state: dispatch_state,
        })
    }

    /// Runs every workgroup of `dispatch_state`'s grid on the calling thread, in
    /// x-fastest order, with local memory allocated here.
    ///
    /// # Errors
    /// As [`Library::dispatch_workgroup`]; stops at the first failing workgroup.
    ///
    /// # Safety
    /// As [`Library::dispatch_workgroup`], for every workgroup of the grid.
    pub unsafe fn dispatch_inline(&self, ordinal: u32, dispatch_state: &DispatchState) -> Result<()> {
        let local_bytes = self.export(ordinal)?.attrs.local_memory_bytes;
        let mut local_memory = LocalMemory::new(local_bytes as usize);
        for z in 0..u32::from(dispatch_state.workgroup_count_z) {
            for y in 0..dispatch_state.workgroup_count_y {
                for x in 0..dispatch_state.workgroup_count_x {
                    let workgroup = WorkgroupState {
                        workgroup_id_x: x,
                        workgroup_id_y: y,
                        workgroup_id_z: z as u16,
                        reserved: 0,
                        processor_id: 0,
                        local_memory: local_memory.as_mut_ptr(),
                        local_memory_size: local_bytes,
                    };
                    // SAFETY: forwarded from this function's contract; the
                    // local memory is owned here and exclusive to this call.
                    unsafe { self.dispatch_workgroup(ordinal, dispatch_state, &workgroup) }?;
                }
            }
        }
        Ok(())
    }
}

/// Workgroup local memory: zeroed when first handed out, grown on demand and aligned to 64 bytes,
/// as IREE's workers align theirs (to the destructive interference size), since kernels may load
/// from it with aligned vector instructions.
#[derive(Default)]
pub struct LocalMemory(Vec<LocalBlock>);

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct LocalBlock([u8; 64]);

impl LocalMemory {
    /// `bytes` zeroed bytes.
    pub fn new(bytes: usize) -> Self {
        let mut memory = LocalMemory::default();
        memory.bytes(bytes);
        memory
    }

    /// At least `bytes` bytes (zeroed where not used before), starting on a 64-byte boundary.
    pub fn bytes(&mut self, bytes: usize) -> &mut [u8] {
        let blocks = bytes.div_ceil(64);
        if self.0.len() < blocks {
            self.0.resize(blocks, LocalBlock([0; 64]));
        }
        // SAFETY: the blocks are plain bytes without padding (`[u8; 64]` at 64-byte alignment),
        // `bytes <= 64 * len` lie inside the vector, and the borrow of `self` covers the slice.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), bytes) }
    }

    fn as_mut_ptr(&mut self) -> *mut c_void {
        if self.0.is_empty() {
            std::ptr::null_mut()
        } else {
            self.0.as_mut_ptr().cast()
        }
    }
}

/// A dispatch whose state was checked against its export: runs workgroups with no further checks.
pub struct BoundDispatch<'a> {
    library: &'a Library,
    ordinal: u32,
    function: abi::DispatchFn,
    state: &'a DispatchState,
}

impl BoundDispatch<'_> {
    /// Runs one workgroup on the calling thread.
    ///
    /// # Errors
    /// As [`BoundDispatch::run_range`].
    ///
    /// # Safety
    /// As [`BoundDispatch::run_range`].
    pub unsafe fn run(&self, workgroup: &WorkgroupState) -> Result<()> {
        // SAFETY: forwarded; one workgroup steps nowhere.
        unsafe { self.run_range(workgroup, 1, [1, 1]) }
    }

    /// Runs `count` workgroups on the calling thread from `first`, in x-fastest order over a grid
    /// `grid[0]` wide and `grid[1]` high, through one guarded call (a guarded call per workgroup
    /// made a dispatch of 24 tiny workgroups 1.5x slower).
    ///
    /// # Errors
    /// `Internal` naming the export and workgroup when the kernel returns non-zero; `DataLoss`
    /// naming them when it faults.
    ///
    /// # Safety
    /// As [`Library::dispatch_workgroup`] for every workgroup of the range; `first.local_memory`
    /// must hold at least the bytes given to [`Library::bind_dispatch`].
    pub unsafe fn run_range(&self, first: &WorkgroupState, count: u64, grid: [u32; 2]) -> Result<()> {
        let mut arguments = KernelArguments {
            constants: [0; COPIED_CONSTANTS],
            binding_ptrs: [std::ptr::null_mut(); COPIED_BINDINGS],
            binding_lengths: [0; COPIED_BINDINGS],
            state: *self.state,
            range: WorkgroupRange {
                function: self.function,
                environment: self.library.environment.as_ptr(),
                state: std::ptr::null(),
                workgroup: *first,
                count,
                grid,
                rc: 0,
            },
        };
        // SAFETY: the state's arrays hold its counts (`Library::dispatch_workgroup`'s contract).
        let copied = unsafe { arguments.copy_arrays() };
        native_faults::on_argument_page(arguments, |arguments| {
            // SAFETY: `arguments` is valid and exclusive to this body; kernels are handed the
            // copy of the dispatch state next to their range, pointing at the copied arrays.
            let range = unsafe {
                if copied {
                    let state = &mut (*arguments).state;
                    state.constants = (&raw const (*arguments).constants).cast();
                    state.binding_ptrs = (&raw const (*arguments).binding_ptrs).cast();
                    state.binding_lengths = (&raw const (*arguments).binding_lengths).cast();
                }
                (*arguments).range.state = &raw const (*arguments).state;
                &raw mut (*arguments).range
            };
            // SAFETY: `run_range_natively` takes the range it is given and returns an integer;
            // the range points at a dispatch function of the library that `library` keeps
            // loaded, its environment and the states the caller vouches for. A fault abandons
            // its frame, which holds nothing to drop.
            let result =
                unsafe { native_faults::call(run_range_natively as *const () as usize, [range as usize, 0, 0]) };
            // SAFETY: the call is over; a damaged kernel may have written anything into the
            // range, so only its plain-data fields (integers and a pointer) are read.
            let (workgroup, rc) = unsafe { ((&raw const (*range).workgroup).read(), (&raw const (*range).rc).read()) };
            match result {
                Err(fault) => Err(self.fault(&fault, &workgroup)),
                Ok(_) if rc != 0 => Err(self.failure(rc, &workgroup)),
                Ok(_) => Ok(()),
            }
        })
    }

    #[cold]
    fn fault(&self, fault: &NativeFault, workgroup: &WorkgroupState) -> Error {
        let name = self.library.export_name(self.ordinal).unwrap_or_default();
        Error::data_loss(format!(
            "export {} '{name}' of library '{}' faulted in workgroup ({}, {}, {}): {}; the kernel \
             went outside its memory or code (a damaged module, or push constants or a workgroup \
             count that do not fit its bindings), so its outputs are lost",
            self.ordinal,
            self.library.name,
            workgroup.workgroup_id_x,
            workgroup.workgroup_id_y,
            workgroup.workgroup_id_z,
            self.library.describe_fault(fault)
        ))
    }

    #[cold]
    fn failure(&self, rc: i32, workgroup: &WorkgroupState) -> Error {
        let name = self.library.export_name(self.ordinal).unwrap_or_default();
        Error::internal(format!(
            "export {} '{name}' of library '{}' failed with code {rc} in workgroup ({}, {}, {})",
            self.ordinal,
            self.library.name,
            workgroup.workgroup_id_x,
            workgroup.workgroup_id_y,
            workgroup.workgroup_id_z
        ))
    }
}

/// Most push constants a dispatch state may have for them to be copied next to it.
const COPIED_CONSTANTS: usize = 64;
/// Most bindings a dispatch state may have for their pointers and lengths to be copied next to it.
const COPIED_BINDINGS: usize = 16;

/// What one guarded call is handed: the dispatch state, its arrays (where they fit) and the range
/// its kernels run, copied to the thread's argument page (see
/// [`native_faults::on_argument_page`]), so that a damaged kernel writing through any of them
/// changes only the copies. A dispatch with more constants or bindings hands kernels the
/// driver's arrays.
#[derive(Clone, Copy)]
#[repr(C)]
struct KernelArguments {
    constants: [u32; COPIED_CONSTANTS],
    binding_ptrs: [*mut c_void; COPIED_BINDINGS],
    binding_lengths: [usize; COPIED_BINDINGS],
    state: DispatchState,
    range: WorkgroupRange,
}

impl KernelArguments {
    /// Copies the state's arrays in where they fit; whether they did.
    ///
    /// # Safety
    /// The state's arrays must hold its counts of constants and bindings.
    unsafe fn copy_arrays(&mut self) -> bool {
        let state = &self.state;
        let (constants, bindings) = (usize::from(state.constant_count), usize::from(state.binding_count));
        if constants > COPIED_CONSTANTS || bindings > COPIED_BINDINGS {
            return false;
        }
        // SAFETY: the caller vouches for the sources; the destinations hold the counts checked
        // above, and a count of zero may come with a null array, which is not read.
        unsafe {
            if constants > 0 {
                std::ptr::copy_nonoverlapping(state.constants, self.constants.as_mut_ptr(), constants);
            }
            if bindings > 0 {
                std::ptr::copy_nonoverlapping(state.binding_ptrs, self.binding_ptrs.as_mut_ptr(), bindings);
                std::ptr::copy_nonoverlapping(state.binding_lengths, self.binding_lengths.as_mut_ptr(), bindings);
            }
        }
        true
    }
}

/// What [`run_range_natively`] runs, and where it leaves the workgroup it stopped at.
#[derive(Clone, Copy)]
#[repr(C)]
struct WorkgroupRange {
    function: abi::DispatchFn,
    environment: *const abi::EnvironmentV0,
    state: *const DispatchState,
    workgroup: WorkgroupState,
    count: u64,
    grid: [u32; 2],
    /// The first non-zero code a kernel returned.
    rc: i32,
}

/// Runs a range's workgroups, stepping the ids in x-fastest order without dividing per
/// workgroup. It is called through the fault guard, which abandons its frame on a fault, so it
/// keeps nothing that needs dropping; the workgroup it was at stays in the range.
extern "C" fn run_range_natively(range: *mut WorkgroupRange, _: usize, _: usize) -> usize {
    // SAFETY: `BoundDispatch::run_range` passes its own live range, used by no one else.
    let range = unsafe { &mut *range };
    // Copies, so the loop keeps them in registers: the kernels get a pointer into `range`.
    let (function, environment, state) = (range.function, range.environment, range.state);
    let [width, height] = range.grid;
    for _ in 0..range.count {
        // SAFETY: `BoundDispatch::run_range`'s contract covers the function and its states.
        let rc = unsafe { function(environment, state, &range.workgroup) };
        if rc != 0 {
            range.rc = rc;
            return 0;
        }
        let workgroup = &mut range.workgroup;
        workgroup.workgroup_id_x += 1;
        if workgroup.workgroup_id_x == width {
            workgroup.workgroup_id_x = 0;
            workgroup.workgroup_id_y += 1;
            if workgroup.workgroup_id_y == height {
                workgroup.workgroup_id_y = 0;
                workgroup.workgroup_id_z += 1;
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn library_is_send_and_sync() {
        assert_send_sync::<Library>();
        assert_send_sync::<HostImport>();
    }

    #[test]
    fn unknown_format_is_incompatible_and_lists_supported() {
        let err = Library::load("vulkan-spirv-fb", b"", &[]).unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::Incompatible);
        assert!(err.message().contains("vulkan-spirv-fb"), "{err}");
        assert!(err.message().contains(EMBEDDED_ELF_FORMAT), "{err}");
    }

    /// The system loader's format of the other operating system names that system.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn the_other_systems_library_format_names_that_system() {
        let (format, container, system) = if cfg!(target_os = "linux") {
            (SYSTEM_DYLIB_FORMAT, "Mach-O", "macOS")
        } else {
            (SYSTEM_ELF_FORMAT, "ELF shared", "Linux")
        };
        assert!(!supported_formats().contains(&format));
        let err = Library::load(format, b"", &[]).unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::Incompatible);
        assert!(
            err.message()
                .contains(&format!("is a {container} library, which only {system}'s loader")),
            "{err}"
        );
    }

    /// A Mach-O library for this CPU gets through the format check on macOS and to the header
    /// checks, which refuse a truncated one before `dlopen` reads it.
    #[cfg(target_os = "macos")]
    #[test]
    fn a_truncated_dylib_is_refused_before_dlopen() {
        let err = Library::load(SYSTEM_DYLIB_FORMAT, &[0xcf, 0xfa, 0xed, 0xfe, 0], &[]).unwrap_err();
        assert!(err.message().contains("smaller than its 32-byte header"), "{err}");
    }

    #[test]
    fn local_memory_is_aligned_zeroed_and_keeps_what_was_written_as_it_grows() {
        let mut memory = LocalMemory::default();
        assert!(memory.bytes(0).is_empty());
        for bytes in [1usize, 64, 100, 4096, 3 * 4096 + 5] {
            let slice = memory.bytes(bytes);
            assert_eq!(slice.len(), bytes);
            assert_eq!(slice.as_ptr() as usize % 64, 0, "{bytes} bytes");
            assert!(slice[1..].iter().all(|&b| b == 0), "{bytes} bytes");
            slice[0] = 7;
            assert_eq!(memory.bytes(bytes)[0], 7, "{bytes} bytes");
        }
    }

    #[test]
    fn attrs_over_the_binding_limit_are_rejected() {
        let raw = abi::DispatchAttrsV0 {
            binding_count: 65,
            ..Default::default()
        };
        assert!(ExportAttrs::from_raw(&raw).unwrap_err().contains("65 bindings"));
        let raw = abi::DispatchAttrsV0 {
            flags: abi::DISPATCH_FLAG_SEQUENTIAL,
            local_memory_pages: 2,
            constant_count: 3,
            binding_count: 4,
            workgroup_size_x: 8,
            workgroup_size_y: 2,
            workgroup_size_z: 1,
            parameter_count: 7,
            reserved_1: [0; 5],
        };
        let attrs = ExportAttrs::from_raw(&raw).unwrap();
        assert_eq!(attrs.workgroup_size, [8, 2, 1]);
        assert_eq!(attrs.local_memory_bytes, 8192);
        assert!(attrs.sequential && !attrs.workgroup_size_dynamic);
        assert_eq!(
            (attrs.constant_count, attrs.binding_count, attrs.parameter_count),
            (3, 4, 7)
        );
    }
}
