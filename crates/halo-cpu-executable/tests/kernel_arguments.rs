//! What a kernel is handed stays out of reach of its own damaged code: a kernel that writes
//! through its environment pointer (the register `rep stos` writes through) faults on the first
//! byte, and the environment still serves the next call; its dispatch and workgroup states end
//! just below a guard region, so reaching past them faults; and the arrays its dispatch state
//! points at are copies, so writing through them leaves the driver's own untouched.
//!
//! The damaged kernels are x86-64 machine code; on other hosts the file holds no test.
#![cfg(target_arch = "x86_64")]

use std::ffi::c_void;
use std::path::Path;

use halo_cpu_executable::library::{DispatchState, Library, EMBEDDED_ELF_FORMAT};
use halo_hal::StatusCode;
use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection, ObjectSymbol};

/// `mov byte ptr [rdi], 0; xor eax, eax; ret`: zeroes the first byte of the environment and
/// reports success.
const WRITE_ENVIRONMENT: &[u8] = &[0xc6, 0x07, 0x00, 0x31, 0xc0, 0xc3];
/// `mov al, [rsi + 0x100]; xor eax, eax; ret`: reads 256 bytes into the dispatch state.
const READ_PAST_DISPATCH_STATE: &[u8] = &[0x8a, 0x86, 0x00, 0x01, 0x00, 0x00, 0x31, 0xc0, 0xc3];
/// `mov al, [rdx + 0x100]; xor eax, eax; ret`: reads 256 bytes into the workgroup state.
const READ_PAST_WORKGROUP_STATE: &[u8] = &[0x8a, 0x82, 0x00, 0x01, 0x00, 0x00, 0x31, 0xc0, 0xc3];

/// The kernels fixture with every 16-byte-aligned entry of its code before the query function
/// (where the dispatch functions lie, each aligned so) replaced by `code`.
fn kernels_running(code: &[u8]) -> Library {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/library_kernels.embedded-elf-x86_64.so");
    let mut bytes = std::fs::read(path).unwrap();
    let file = ElfFile64::<LittleEndian>::parse(&*bytes).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let (offset, _) = text.file_range().unwrap();
    let query = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("iree_hal_executable_library_query"))
        .unwrap();
    let (start, end) = (offset as usize, (offset + query.address() - text.address()) as usize);
    assert!(
        start < end && start % 16 == 0,
        "the dispatch functions come before the query function"
    );
    assert!(code.len() <= 16);
    for entry in bytes[start..end].chunks_mut(16) {
        entry.fill(0xcc);
        let length = code.len().min(entry.len());
        entry[..length].copy_from_slice(&code[..length]);
    }
    Library::load(EMBEDDED_ELF_FORMAT, &bytes, &[]).unwrap()
}

/// `mov rax, [rsi + 0x18]; mov dword ptr [rax], 0; xor eax, eax; ret`: zeroes the first push
/// constant through the dispatch state's array.
const WRITE_CONSTANTS: &[u8] = &[0x48, 0x8b, 0x46, 0x18, 0xc7, 0x00, 0, 0, 0, 0, 0x31, 0xc0, 0xc3];
/// `mov rax, [rsi + 0x20]; mov qword ptr [rax], 0; xor eax, eax; ret`: zeroes the first binding
/// pointer.
const WRITE_BINDING_POINTERS: &[u8] = &[0x48, 0x8b, 0x46, 0x20, 0x48, 0xc7, 0x00, 0, 0, 0, 0, 0x31, 0xc0, 0xc3];
/// The same through `[rsi + 0x28]`: zeroes the first binding length.
const WRITE_BINDING_LENGTHS: &[u8] = &[0x48, 0x8b, 0x46, 0x28, 0x48, 0xc7, 0x00, 0, 0, 0, 0, 0x31, 0xc0, 0xc3];

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
