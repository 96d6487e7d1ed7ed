//! `#[repr(C)]` mirror of IREE's CPU executable library ABI, version 0.6.
//!
//! The layouts follow `runtime/src/iree/hal/local/executable_library.h`; the
//! compiler bakes them into every kernel, so each struct carries size and
//! offset assertions that fail the build if a field moves. Only 64-bit
//! little-endian hosts are described (pointer-sized fields are 8 bytes).
//!
//! Ownership: these structs are plain views. Pointers in structs returned by a
//! library point into that library's image and live as long as it stays
//! loaded; pointers in structs halo passes to kernels are owned by halo.

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};

/// The only ABI version halo implements (`IREE_HAL_EXECUTABLE_LIBRARY_VERSION_0_6`).
pub const LIBRARY_VERSION_0_6: u32 = 6;
/// The newest ABI version halo understands; libraries reporting a newer one are rejected.
pub const LIBRARY_VERSION_LATEST: u32 = LIBRARY_VERSION_0_6;
/// The symbol every executable library exports.
pub const LIBRARY_QUERY_SYMBOL: &str = "iree_hal_executable_library_query";

/// `IREE_HAL_EXECUTABLE_LIBRARY_FEATURE_NONE`: the only feature bit value defined.
pub const LIBRARY_FEATURE_NONE: u32 = 0;

/// Sanitizer kind: none.
pub const SANITIZER_NONE: u32 = 0;
/// Sanitizer kind: AddressSanitizer.
pub const SANITIZER_ADDRESS: u32 = 1;
/// Sanitizer kind: MemorySanitizer.
pub const SANITIZER_MEMORY: u32 = 2;
/// Sanitizer kind: ThreadSanitizer.
pub const SANITIZER_THREAD: u32 = 3;
/// Sanitizer kind: UndefinedBehaviorSanitizer.
pub const SANITIZER_UNDEFINED: u32 = 4;

/// Number of 64-bit words of processor data (`IREE_HAL_PROCESSOR_DATA_CAPACITY_V0`).
pub const PROCESSOR_DATA_CAPACITY: usize = 8;
/// Bytes per page of workgroup local memory.
pub const WORKGROUP_LOCAL_MEMORY_PAGE_SIZE: u32 = 4096;
/// Most 32-bit constants one dispatch may declare.
pub const MAX_CONSTANT_COUNT: u32 = 64;
/// Most bindings one dispatch may declare.
pub const MAX_BINDING_COUNT: u32 = 64;

/// Dispatch flag: contiguous workgroups process data sequentially.
pub const DISPATCH_FLAG_SEQUENTIAL: u64 = 1 << 0;
/// Dispatch flag: the workgroup size is chosen at dispatch time.
pub const DISPATCH_FLAG_WORKGROUP_SIZE_DYNAMIC: u64 = 1 << 1;

/// Parameter type: a constant in the constants table.
pub const DISPATCH_PARAM_TYPE_CONSTANT: u8 = 0;
/// Parameter type: a buffer binding.
pub const DISPATCH_PARAM_TYPE_BINDING: u8 = 1;
/// Parameter type: a raw buffer pointer in the constants table.
pub const DISPATCH_PARAM_TYPE_BUFFER_PTR: u8 = 2;

/// `iree_hal_executable_library_query_fn_t`: returns NULL when no version ≤ `max_version` exists.
pub type QueryFn =
    unsafe extern "C" fn(max_version: u32, environment: *const EnvironmentV0) -> *const *const LibraryHeader;

/// `iree_hal_executable_dispatch_v0_t`: runs one workgroup; non-zero means device loss.
pub type DispatchFn = unsafe extern "C" fn(
    environment: *const EnvironmentV0,
    dispatch_state: *const DispatchStateV0,
    workgroup_state: *const WorkgroupStateV0,
) -> c_int;

/// `iree_hal_executable_import_v0_t`: a host function called by kernels with a packed params struct.
pub type ImportFn = unsafe extern "C" fn(params: *mut c_void, context: *mut c_void, reserved: *mut c_void) -> c_int;

/// `iree_hal_executable_import_thunk_v0_t`: kernels call every import through this.
pub type ImportThunkFn = unsafe extern "C" fn(
    function: Option<ImportFn>,
    params: *mut c_void,
    context: *mut c_void,
    reserved: *mut c_void,
) -> c_int;

/// `iree_hal_executable_library_header_t`: the versioned head of every library.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LibraryHeader {
    /// ABI version the library was built for.
    pub version: u32,
    /// NUL-terminated name for diagnostics.
    pub name: *const c_char,
    /// Feature bits the library requires (only NONE is defined).
    pub features: u32,
    /// `SANITIZER_*` kind the library was compiled with.
    pub sanitizer: u32,
}

/// `iree_hal_executable_import_table_v0_t`: host functions the library wants, sorted by strcmp.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ImportTableV0 {
    /// Number of imports.
    pub count: u32,
    /// `count` NUL-terminated names; a leading `?` marks an optional import.
    pub symbols: *const *const c_char,
}

/// `iree_hal_processor_v0_t`: architecture-specific CPU data (`schemas/cpu_data.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessorV0 {
    /// Opaque words; on x86_64 word 0 holds the feature bits.
    pub data: [u64; PROCESSOR_DATA_CAPACITY],
}

/// `iree_hal_executable_environment_v0_t`: what the host offers every call into the library.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct EnvironmentV0 {
    /// Library-level specialization constants, as many as the library declares.
    pub constants: *const u32,
    /// Trampoline through which kernels call imports.
    pub import_thunk: Option<ImportThunkFn>,
    /// One function per import ordinal; NULL for a missing optional import.
    pub import_funcs: *const Option<ImportFn>,
    /// One context pointer per import ordinal, passed back to the import.
    pub import_contexts: *const *const c_void,
    /// CPU information of the executing processor.
    pub processor: ProcessorV0,
}

/// `iree_hal_executable_dispatch_state_v0_t`: read-only state shared by all workgroups of a dispatch.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DispatchStateV0 {
    /// Workgroup size, X.
    pub workgroup_size_x: u32,
    /// Workgroup size, Y.
    pub workgroup_size_y: u32,
    /// Workgroup size, Z.
    pub workgroup_size_z: u16,
    /// Number of 32-bit values in `constants`.
    pub constant_count: u16,
    /// Workgroup count of the dispatch, X.
    pub workgroup_count_x: u32,
    /// Workgroup count of the dispatch, Y.
    pub workgroup_count_y: u32,
    /// Workgroup count of the dispatch, Z.
    pub workgroup_count_z: u16,
    /// Estimated number of workgroups that may run at once.
    pub max_concurrency: u8,
    /// Number of entries in `binding_ptrs` and `binding_lengths`.
    pub binding_count: u8,
    /// `constant_count` push constants.
    pub constants: *const u32,
    /// Base pointer of each binding.
    pub binding_ptrs: *const *mut c_void,
    /// Length in bytes of each binding, 1:1 with `binding_ptrs`.
    pub binding_lengths: *const usize,
}

/// `iree_hal_executable_workgroup_state_v0_t`: state unique to one workgroup.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct WorkgroupStateV0 {
    /// Workgroup id, X, in `[0, workgroup_count_x)`.
    pub workgroup_id_x: u32,
    /// Workgroup id, Y.
    pub workgroup_id_y: u32,
    /// Workgroup id, Z.
    pub workgroup_id_z: u16,
    /// Must be zero.
    pub reserved: u16,
    /// Logical id of the processor running the workgroup.
    pub processor_id: u32,
    /// Scratch memory exclusive to this workgroup, or NULL when none was requested.
    pub local_memory: *mut c_void,
    /// Bytes available at `local_memory`.
    pub local_memory_size: u32,
}

/// `iree_hal_executable_dispatch_attrs_v0_t`: how one export must be dispatched.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchAttrsV0 {
    /// `DISPATCH_FLAG_*` bits.
    pub flags: u64,
    /// Workgroup local memory required, in 4096-byte pages.
    pub local_memory_pages: u16,
    /// Number of 32-bit constants the export reads.
    pub constant_count: u8,
    /// Number of bindings the export reads.
    pub binding_count: u8,
    /// Compiled workgroup size, X.
    pub workgroup_size_x: u32,
    /// Compiled workgroup size, Y.
    pub workgroup_size_y: u32,
    /// Compiled workgroup size, Z.
    pub workgroup_size_z: u16,
    /// Number of entries in this export's parameter table.
    pub parameter_count: u16,
    /// Unused; zero.
    pub reserved_1: [u64; 5],
}

/// `iree_hal_executable_dispatch_parameter_v0_t`: one logical parameter of an export.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchParameterV0 {
    /// `DISPATCH_PARAM_TYPE_*`.
    pub kind: u8,
    /// Size in bytes, without padding.
    pub size: u8,
    /// Flag bits (none defined).
    pub flags: u16,
    /// Index into the export table's parameter names, or `u16::MAX` when unnamed.
    pub name: u16,
    /// Byte offset into the constants, or the binding ordinal.
    pub offset: u16,
}

/// `iree_hal_executable_dispatch_occupancy_v0_t`: placeholder for occupancy data.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DispatchOccupancyV0 {
    /// Unused.
    pub reserved: c_int,
}

/// `iree_hal_executable_source_location_v0_t`: where an export came from.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SourceLocationV0 {
    /// Line in the file.
    pub line: u32,
    /// Length of `path` in bytes.
    pub path_length: u32,
    /// NUL-terminated path.
    pub path: *const c_char,
}

/// `iree_hal_executable_stage_location_table_v0_t`: source locations by compilation stage.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StageLocationTableV0 {
    /// Number of locations.
    pub count: u32,
    /// Stage names, 1:1 with `locations`.
    pub names: *const *const c_char,
    /// Locations, 1:1 with `names`.
    pub locations: *const SourceLocationV0,
}

/// `iree_hal_executable_export_table_v0_t`: the exports as a struct of arrays indexed by ordinal.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ExportTableV0 {
    /// Number of exports.
    pub count: u32,
    /// Dispatch function of each export.
    pub ptrs: *const Option<DispatchFn>,
    /// Attributes of each export (may be NULL).
    pub attrs: *const DispatchAttrsV0,
    /// Parameter table of each export (may be NULL, as may each entry).
    pub params: *const *const DispatchParameterV0,
    /// Occupancy of each export (may be NULL).
    pub occupancy: *const DispatchOccupancyV0,
    /// NUL-terminated name of each export.
    pub names: *const *const c_char,
    /// Optional human-readable tag of each export.
    pub tags: *const *const c_char,
    /// Optional names the parameter tables refer to.
    pub parameter_names: *const *const c_char,
    /// Optional source location of each export.
    pub source_locations: *const SourceLocationV0,
    /// Optional per-stage source locations of each export.
    pub stage_locations: *const StageLocationTableV0,
}

/// `iree_hal_executable_constant_table_v0_t`: library-level specialization constants.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ConstantTableV0 {
    /// Number of 32-bit constants the environment must provide.
    pub count: u32,
}

/// `iree_hal_executable_source_file_v0_t`: a source file embedded for debugging.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SourceFileV0 {
    /// Length of `path` in bytes.
    pub path_length: u32,
    /// NUL-terminated path.
    pub path: *const c_char,
    /// Length of `content` in bytes.
    pub content_length: u32,
    /// File contents.
    pub content: *const u8,
}

/// `iree_hal_executable_source_file_table_v0_t`: the embedded source files.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SourceFileTableV0 {
    /// Number of files.
    pub count: u32,
    /// `count` files.
    pub files: *const SourceFileV0,
}

/// `iree_hal_executable_library_v0_t`: what the query function returns for version 0.6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LibraryV0 {
    /// Header; its version selects this layout.
    pub header: *const LibraryHeader,
    /// Host functions the library imports.
    pub imports: ImportTableV0,
    /// Dispatch functions the library exports.
    pub exports: ExportTableV0,
    /// Library-level specialization constants.
    pub constants: ConstantTableV0,
    /// Embedded source files.
    pub sources: SourceFileTableV0,
}

// The compiler hard-codes these layouts; any drift would make kernels read garbage.
const _: () = {
    assert!(size_of::<LibraryHeader>() == 24);
    assert!(offset_of!(LibraryHeader, name) == 8);
    assert!(offset_of!(LibraryHeader, features) == 16);
    assert!(offset_of!(LibraryHeader, sanitizer) == 20);

    assert!(size_of::<ImportTableV0>() == 16);
    assert!(size_of::<ProcessorV0>() == 64);

    assert!(size_of::<EnvironmentV0>() == 96);
    assert!(offset_of!(EnvironmentV0, import_thunk) == 8);
    assert!(offset_of!(EnvironmentV0, import_funcs) == 16);
    assert!(offset_of!(EnvironmentV0, import_contexts) == 24);
    assert!(offset_of!(EnvironmentV0, processor) == 32);

    assert!(size_of::<DispatchStateV0>() == 48);
    assert!(offset_of!(DispatchStateV0, workgroup_size_y) == 4);
    assert!(offset_of!(DispatchStateV0, workgroup_size_z) == 8);
    assert!(offset_of!(DispatchStateV0, constant_count) == 10);
    assert!(offset_of!(DispatchStateV0, workgroup_count_x) == 12);
    assert!(offset_of!(DispatchStateV0, workgroup_count_y) == 16);
    assert!(offset_of!(DispatchStateV0, workgroup_count_z) == 20);
    assert!(offset_of!(DispatchStateV0, max_concurrency) == 22);
    assert!(offset_of!(DispatchStateV0, binding_count) == 23);
    assert!(offset_of!(DispatchStateV0, constants) == 24);
    assert!(offset_of!(DispatchStateV0, binding_ptrs) == 32);
    assert!(offset_of!(DispatchStateV0, binding_lengths) == 40);

    assert!(size_of::<WorkgroupStateV0>() == 32);
    assert!(offset_of!(WorkgroupStateV0, workgroup_id_z) == 8);
    assert!(offset_of!(WorkgroupStateV0, reserved) == 10);
    assert!(offset_of!(WorkgroupStateV0, processor_id) == 12);
    assert!(offset_of!(WorkgroupStateV0, local_memory) == 16);
    assert!(offset_of!(WorkgroupStateV0, local_memory_size) == 24);

    assert!(size_of::<DispatchAttrsV0>() == 64);
    assert!(offset_of!(DispatchAttrsV0, local_memory_pages) == 8);
    assert!(offset_of!(DispatchAttrsV0, constant_count) == 10);
    assert!(offset_of!(DispatchAttrsV0, binding_count) == 11);
    assert!(offset_of!(DispatchAttrsV0, workgroup_size_x) == 12);
    assert!(offset_of!(DispatchAttrsV0, workgroup_size_y) == 16);
    assert!(offset_of!(DispatchAttrsV0, workgroup_size_z) == 20);
    assert!(offset_of!(DispatchAttrsV0, parameter_count) == 22);
    assert!(offset_of!(DispatchAttrsV0, reserved_1) == 24);

    assert!(size_of::<DispatchParameterV0>() == 8);
    assert!(offset_of!(DispatchParameterV0, flags) == 2);
    assert!(offset_of!(DispatchParameterV0, name) == 4);
    assert!(offset_of!(DispatchParameterV0, offset) == 6);

    assert!(size_of::<SourceLocationV0>() == 16);
    assert!(size_of::<StageLocationTableV0>() == 24);

    assert!(size_of::<ExportTableV0>() == 80);
    assert!(offset_of!(ExportTableV0, ptrs) == 8);
    assert!(offset_of!(ExportTableV0, attrs) == 16);
    assert!(offset_of!(ExportTableV0, params) == 24);
    assert!(offset_of!(ExportTableV0, occupancy) == 32);
    assert!(offset_of!(ExportTableV0, names) == 40);
    assert!(offset_of!(ExportTableV0, tags) == 48);
    assert!(offset_of!(ExportTableV0, parameter_names) == 56);
    assert!(offset_of!(ExportTableV0, source_locations) == 64);
    assert!(offset_of!(ExportTableV0, stage_locations) == 72);

    assert!(size_of::<SourceFileV0>() == 32);
    assert!(size_of::<SourceFileTableV0>() == 16);

    assert!(size_of::<LibraryV0>() == 128);
    assert!(offset_of!(LibraryV0, imports) == 8);
    assert!(offset_of!(LibraryV0, exports) == 24);
    assert!(offset_of!(LibraryV0, constants) == 104);
    assert!(offset_of!(LibraryV0, sources) == 112);
};
