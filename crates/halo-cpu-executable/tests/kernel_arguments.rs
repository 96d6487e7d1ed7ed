//! What a kernel is handed stays out of reach of its own damaged code: a kernel that writes
//! through its environment pointer (the register `rep stos` writes through) faults on the first
//! byte, and the environment still serves the next call; its dispatch and workgroup states end
//! just below a guard region, so reaching past them faults; and the arrays its dispatch state
//! points at are copies, so writing through them leaves the driver's own untouched.
//!
//! The damaged kernels are machine code for the host (x86-64 or AArch64).
#![cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]

use std::ffi::c_void;
use std::path::Path;

use halo_cpu_executable::library::{DispatchState, Library, EMBEDDED_ELF_FORMAT};
use halo_hal::StatusCode;
use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection, ObjectSymbol, RelocationFlags};

/// x86-64 machine code for each damage.
#[cfg(target_arch = "x86_64")]
mod code {
    /// `int3`, which fills the code around the damaged kernels.
    pub const TRAP: u8 = 0xcc;
    /// `mov byte ptr [rdi], 0; xor eax, eax; ret`: zeroes the first byte of the environment and
    /// reports success.
    pub const WRITE_ENVIRONMENT: &[u8] = &[0xc6, 0x07, 0x00, 0x31, 0xc0, 0xc3];
    /// `mov al, [rsi + 0x100]; xor eax, eax; ret`: reads 256 bytes into the dispatch state.
    pub const READ_PAST_DISPATCH_STATE: &[u8] = &[0x8a, 0x86, 0x00, 0x01, 0x00, 0x00, 0x31, 0xc0, 0xc3];
    /// `mov al, [rdx + 0x100]; xor eax, eax; ret`: reads 256 bytes into the workgroup state.
    pub const READ_PAST_WORKGROUP_STATE: &[u8] = &[0x8a, 0x82, 0x00, 0x01, 0x00, 0x00, 0x31, 0xc0, 0xc3];
    /// `mov rax, [rsi + 0x18]; mov dword ptr [rax], 0; xor eax, eax; ret`: zeroes the first push
    /// constant through the dispatch state's array.
    pub const WRITE_CONSTANTS: &[u8] = &[0x48, 0x8b, 0x46, 0x18, 0xc7, 0x00, 0, 0, 0, 0, 0x31, 0xc0, 0xc3];
    /// `mov rax, [rsi + 0x20]; mov qword ptr [rax], 0; xor eax, eax; ret`: zeroes the first
    /// binding pointer.
    pub const WRITE_BINDING_POINTERS: &[u8] = &[0x48, 0x8b, 0x46, 0x20, 0x48, 0xc7, 0x00, 0, 0, 0, 0, 0x31, 0xc0, 0xc3];
    /// The same through `[rsi + 0x28]`: zeroes the first binding length.
    pub const WRITE_BINDING_LENGTHS: &[u8] = &[0x48, 0x8b, 0x46, 0x28, 0x48, 0xc7, 0x00, 0, 0, 0, 0, 0x31, 0xc0, 0xc3];
}

/// AArch64 machine code for each damage (little-endian instruction words).
#[cfg(target_arch = "aarch64")]
mod code {
    /// Zero bytes are `udf #0`, which fills the code around the damaged kernels.
    pub const TRAP: u8 = 0;
    /// `strb wzr, [x0]; mov w0, #0; ret`: zeroes the first byte of the environment and reports
    /// success.
    pub const WRITE_ENVIRONMENT: &[u8] = &words::<3>([0x3900_001f, 0x5280_0000, 0xd65f_03c0]);
    /// `ldrb w9, [x1, #0x100]; mov w0, #0; ret`: reads 256 bytes into the dispatch state.
    pub const READ_PAST_DISPATCH_STATE: &[u8] = &words::<3>([0x3944_0029, 0x5280_0000, 0xd65f_03c0]);
    /// `ldrb w9, [x2, #0x100]; mov w0, #0; ret`: reads 256 bytes into the workgroup state.
    pub const READ_PAST_WORKGROUP_STATE: &[u8] = &words::<3>([0x3944_0049, 0x5280_0000, 0xd65f_03c0]);
    /// `ldr x9, [x1, #0x18]; str wzr, [x9]; mov w0, #0; ret`: zeroes the first push constant
    /// through the dispatch state's array.
    pub const WRITE_CONSTANTS: &[u8] = &words::<4>([0xf940_0c29, 0xb900_013f, 0x5280_0000, 0xd65f_03c0]);
    /// `ldr x9, [x1, #0x20]; str xzr, [x9]; mov w0, #0; ret`: zeroes the first binding pointer.
    pub const WRITE_BINDING_POINTERS: &[u8] = &words::<4>([0xf940_1029, 0xf900_013f, 0x5280_0000, 0xd65f_03c0]);
    /// The same through `[x1, #0x28]`: zeroes the first binding length.
    pub const WRITE_BINDING_LENGTHS: &[u8] = &words::<4>([0xf940_1429, 0xf900_013f, 0x5280_0000, 0xd65f_03c0]);

    /// Instruction words as the bytes of code.
    const fn words<const N: usize>(words: [u32; N]) -> [u8; 64] {
        let mut bytes = [TRAP; 64];
        let mut i = 0;
        while i < N {
            let word = words[i].to_le_bytes();
            bytes[4 * i] = word[0];
            bytes[4 * i + 1] = word[1];
            bytes[4 * i + 2] = word[2];
            bytes[4 * i + 3] = word[3];
            i += 1;
        }
        bytes
    }
}

use code::*;

/// The kernels fixture with all code before the query function (where the dispatch functions
/// lie) replaced by traps, and `code` at each dispatch function's entry (the relocated function
/// pointers of its export table that point there).
fn kernels_running(code: &[u8]) -> Library {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/library_kernels.{EMBEDDED_ELF_FORMAT}.so"));
    let mut bytes = std::fs::read(path).unwrap();
    let file = ElfFile64::<LittleEndian>::parse(&*bytes).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let (offset, _) = text.file_range().unwrap();
    let query = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("iree_hal_executable_library_query"))
        .unwrap();
    let code_range = text.address()..query.address();
    let relative = [8, 1027]; // R_X86_64_RELATIVE, R_AARCH64_RELATIVE
    let mut entries: Vec<u64> = file
        .dynamic_relocations()
        .into_iter()
        .flatten()
        .filter(|(_, r)| matches!(r.flags(), RelocationFlags::Elf { r_type } if relative.contains(&r_type)))
        .map(|(_, r)| r.addend() as u64)
        .filter(|address| code_range.contains(address))
        .collect();
    assert_eq!(entries.len(), 2, "the export table points at both dispatch functions");
    // In address order, so that a padded copy never covers the entry after it.
    entries.sort_unstable();
    let text_address = text.address();
    drop(file);
    let file_offset = |address: u64| (offset + address - text_address) as usize;
    bytes[file_offset(code_range.start)..file_offset(code_range.end)].fill(TRAP);
    for entry in entries {
        let room = (code_range.end - entry) as usize;
        let length = code.len().min(room);
        bytes[file_offset(entry)..][..length].copy_from_slice(&code[..length]);
    }
    Library::load(EMBEDDED_ELF_FORMAT, &bytes, &[]).unwrap()
}

/// The arrays a dispatch state points at: two constants and two bindings of 64 bytes.
struct Arrays {
    constants: [u32; 2],
    pointers: [*mut c_void; 2],
    lengths: [usize; 2],
    _bindings: Box<[[u8; 64]; 2]>,
}

impl Arrays {
    fn new() -> Self {
        let mut bindings = Box::new([[0u8; 64]; 2]);
        let pointers = [bindings[0].as_mut_ptr().cast(), bindings[1].as_mut_ptr().cast()];
        Arrays {
            constants: [3, 4],
            pointers,
            lengths: [64, 64],
            _bindings: bindings,
        }
    }

    /// Runs export 0 (two constants, two bindings) of `library` in one workgroup over these
    /// (mutably borrowed: a damaged kernel may write them).
    fn dispatch(&mut self, library: &Library) -> halo_hal::Result<()> {
        let state = DispatchState {
            workgroup_size_x: 1,
            workgroup_size_y: 1,
            workgroup_size_z: 1,
            constant_count: 2,
            workgroup_count_x: 1,
            workgroup_count_y: 1,
            workgroup_count_z: 1,
            max_concurrency: 1,
            binding_count: 2,
            constants: self.constants.as_mut_ptr().cast_const(),
            binding_ptrs: self.pointers.as_mut_ptr().cast_const(),
            binding_lengths: self.lengths.as_mut_ptr().cast_const(),
        };
        // SAFETY: the patched kernels touch only what they are handed; the state points at live
        // arrays of the sizes export 0 declares.
        unsafe { library.dispatch_inline(0, &state) }
    }
}

/// Runs export 0 of `library` in one workgroup; the address the call faulted at, from its
/// `DATA_LOSS` error.
fn faulting_address(library: &Library) -> usize {
    let error = Arrays::new().dispatch(library).unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    let message = error.to_string();
    message
        .split("invalid access to address 0x")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|hex| usize::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("no faulting address in: {message}"))
}

#[test]
fn a_kernel_writing_into_its_environment_faults_and_the_environment_survives() {
    let library = kernels_running(WRITE_ENVIRONMENT);
    let addresses = [faulting_address(&library), faulting_address(&library)];
    // Both calls faulted on the same first byte: the environment starts its own read-only page
    // and the first write changed nothing.
    assert_eq!(addresses[0], addresses[1]);
    assert_eq!(addresses[0] % 4096, 0, "{:#x}", addresses[0]);
}

#[test]
fn reaching_past_the_dispatch_or_workgroup_state_faults_on_a_guard() {
    for code in [READ_PAST_DISPATCH_STATE, READ_PAST_WORKGROUP_STATE] {
        let address = faulting_address(&kernels_running(code));
        // The states end within 256 bytes of a page end, and the guard begins there.
        assert!(address % 4096 < 256, "{address:#x}");
    }
}

#[test]
fn writing_through_the_dispatch_states_arrays_changes_only_copies() {
    for code in [WRITE_CONSTANTS, WRITE_BINDING_POINTERS, WRITE_BINDING_LENGTHS] {
        let library = kernels_running(code);
        let mut arrays = Arrays::new();
        let (constants, pointers, lengths) = (arrays.constants, arrays.pointers, arrays.lengths);
        arrays.dispatch(&library).unwrap();
        assert_eq!(arrays.constants, constants);
        assert_eq!(arrays.pointers, pointers);
        assert_eq!(arrays.lengths, lengths);
    }
}
