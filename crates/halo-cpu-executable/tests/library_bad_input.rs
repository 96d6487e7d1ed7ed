//! Malformed executables: every one is an error that names what is wrong, never a crash.

use std::path::Path;

use halo_cpu_executable::library::{Library, EMBEDDED_ELF_FORMAT, SYSTEM_ELF_FORMAT};
use halo_hal::{Error, StatusCode};
use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection, ObjectSegment};

const FORMATS: [&str; 2] = [EMBEDDED_ELF_FORMAT, SYSTEM_ELF_FORMAT];

/// Whether this build runs AArch64 code (else x86-64).
const ON_ARM_64: bool = cfg!(target_arch = "aarch64");

fn data(format: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/library_kernels.{format}.so"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn load(format: &str, bytes: &[u8]) -> Result<Library, Error> {
    Library::load(format, bytes, &[])
}

/// Asserts that loading fails with `code` and a message containing each of `needles`.
fn assert_error(format: &str, bytes: &[u8], code: StatusCode, needles: &[&str]) {
    let err = load(format, bytes).expect_err("corrupt executable loaded");
    assert_eq!(err.code(), code, "{format}: {err}");
    for needle in needles {
        assert!(err.message().contains(needle), "{format}: '{needle}' not in: {err}");
    }
}

fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Facts about the test file needed to corrupt one precise thing.
struct Anatomy {
    /// File offsets of the program headers, with their `p_type` and `p_flags`.
    phdrs: Vec<(usize, u32, u32)>,
    /// File range of `.rela.dyn`.
    rela: std::ops::Range<usize>,
    /// Virtual address range of `.text` and of `.rodata`.
    text: std::ops::Range<u64>,
    rodata: std::ops::Range<u64>,
    /// (vaddr, file offset, size) of each segment with file bytes.
    segments: Vec<(u64, u64, u64)>,
}

impl Anatomy {
    fn of(bytes: &[u8]) -> Self {
        let file = ElfFile64::<LittleEndian>::parse(bytes).unwrap();
        let section = |name: &str| file.section_by_name(name).unwrap_or_else(|| panic!("no {name}"));
        let vrange = |name: &str| {
            let s = section(name);
            s.address()..s.address() + s.size()
        };
        let (rela_off, rela_len) = section(".rela.dyn").file_range().unwrap();
        let phoff = get_u64(bytes, 32) as usize;
        let phnum = u16::from_le_bytes([bytes[56], bytes[57]]) as usize;
        let phdrs = (0..phnum)
            .map(|i| {
                let at = phoff + i * 56;
                let word = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
                (at, word(0), word(4))
            })
            .collect();
        let segments = file
            .segments()
            .map(|s| {
                let (off, len) = s.file_range();
                (s.address(), off, len)
            })
            .collect();
        Anatomy {
            phdrs,
            rela: rela_off as usize..(rela_off + rela_len) as usize,
            text: vrange(".text"),
            rodata: vrange(".rodata"),
            segments,
        }
    }

    fn file_offset(&self, vaddr: u64) -> usize {
        let (seg_vaddr, off, _) = self
            .segments
            .iter()
            .find(|(v, _, len)| *v <= vaddr && vaddr < v + len)
            .unwrap_or_else(|| panic!("vaddr {vaddr:#x} has no file bytes"));
        (off + (vaddr - seg_vaddr)) as usize
    }

    /// File offsets of `.rela.dyn` entries.
    fn relocations(&self) -> impl Iterator<Item = usize> {
        self.rela.clone().step_by(24)
    }

    /// The relocation whose addend is the address of the NUL-terminated `text` in the file.
    fn relocation_to_string(&self, bytes: &[u8], text: &str) -> usize {
        let needle = format!("{text}\0");
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap();
        let (seg_vaddr, off, _) = self
            .segments
            .iter()
            .find(|(_, off, len)| *off as usize <= at && at < (off + len) as usize)
            .unwrap();
        let vaddr = seg_vaddr + (at as u64 - off);
        self.relocations()
            .find(|&r| get_u64(bytes, r + 16) == vaddr)
            .expect("relocation to string")
    }
}

#[test]
fn empty_and_non_elf_files_are_invalid() {
    for format in FORMATS {
        assert_error(format, b"", StatusCode::InvalidArgument, &["not an ELF file"]);
        assert_error(
            format,
            b"MZ\x90\x00 this is a PE file",
            StatusCode::InvalidArgument,
            &["not an ELF file"],
        );
        assert_error(
            format,
            &[0x7f, b'E', b'L', b'F', 2, 1],
            StatusCode::InvalidArgument,
            &["smaller than"],
        );
    }
}

#[test]
fn every_truncation_is_an_error() {
    for format in FORMATS {
        let bytes = data(format);
        let lengths = (0..512).chain((512..bytes.len()).step_by(7)).chain([bytes.len() - 1]);
        for len in lengths {
            let err = load(format, &bytes[..len]).expect_err("truncated executable loaded");
            assert!(
                matches!(err.code(), StatusCode::InvalidArgument | StatusCode::Incompatible),
                "{format} truncated to {len}: {err}"
            );
        }
    }
}

#[test]
fn foreign_class_byte_order_and_machine_are_incompatible() {
    for format in FORMATS {
        let bytes = data(format);
        let mut b = bytes.clone();
        b[4] = 1;
        assert_error(format, &b, StatusCode::Incompatible, &["ELFCLASS64"]);
        let mut b = bytes.clone();
        b[5] = 2;
        assert_error(format, &b, StatusCode::Incompatible, &["little-endian"]);
        let mut b = bytes.clone();
        // The other architecture halo knows: EM_AARCH64 on x86-64, EM_X86_64 on AArch64.
        put_u16(&mut b, 18, if ON_ARM_64 { 62 } else { 183 });
        assert_error(format, &b, StatusCode::Incompatible, &["arm_64", "x86_64"]);
        let mut b = bytes.clone();
        put_u16(&mut b, 18, 0x1234);
        assert_error(format, &b, StatusCode::Incompatible, &["0x1234"]);
    }
}

#[test]
fn corrupt_file_headers_name_the_field() {
    for format in FORMATS {
        let bytes = data(format);
        let mut b = bytes.clone();
        b[6] = 0;
        assert_error(format, &b, StatusCode::InvalidArgument, &["EI_VERSION"]);
        let mut b = bytes.clone();
        put_u16(&mut b, 16, 2);
        assert_error(format, &b, StatusCode::InvalidArgument, &["ET_DYN"]);
        let mut b = bytes.clone();
        put_u16(&mut b, 54, 32);
        assert_error(format, &b, StatusCode::InvalidArgument, &["e_phentsize=32"]);
        let mut b = bytes.clone();
        put_u64(&mut b, 32, 0xffff_ffff_ffff_fff0);
        assert_error(format, &b, StatusCode::InvalidArgument, &["program header table"]);
        let mut b = bytes.clone();
        put_u16(&mut b, 56, 0x7fff);
        assert_error(
            format,
            &b,
            StatusCode::InvalidArgument,
            &["program header table", "32767 entries"],
        );
        let mut b = bytes.clone();
        put_u64(&mut b, 40, bytes.len() as u64);
        assert_error(format, &b, StatusCode::InvalidArgument, &["section header table"]);
    }
}

#[test]
fn corrupt_program_headers_name_the_header() {
    for format in FORMATS {
        let bytes = data(format);
        let anatomy = Anatomy::of(&bytes);
        let (first_load, ..) = *anatomy.phdrs.iter().find(|(_, t, _)| *t == 1).unwrap();
        let mut b = bytes.clone();
        put_u64(&mut b, first_load + 32, 1 << 40);
        assert_error(
            format,
            &b,
            StatusCode::InvalidArgument,
            &["PT_LOAD program header", "p_filesz"],
        );
        let mut b = bytes.clone();
        put_u64(&mut b, first_load + 40, 0);
        assert_error(format, &b, StatusCode::InvalidArgument, &["exceeds p_memsz"]);
        let mut b = bytes.clone();
        put_u64(&mut b, first_load + 8, bytes.len() as u64);
        assert_error(format, &b, StatusCode::InvalidArgument, &["lies outside the"]);
    }

    let bytes = data(EMBEDDED_ELF_FORMAT);
    let anatomy = Anatomy::of(&bytes);
    let (text, ..) = *anatomy.phdrs.iter().find(|(_, t, f)| *t == 1 && f & 1 != 0).unwrap();
    let mut b = bytes.clone();
    put_u32(&mut b, text + 4, 7);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::PermissionDenied,
        &["writable and executable"],
    );

    // Found by the mutation campaign: code copied from 5 bytes off its place trapped at run time.
    let mut b = bytes.clone();
    put_u64(&mut b, text + 16, get_u64(&bytes, text + 16) + 5);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["p_offset", "differ modulo p_align"],
    );

    let (dynamic, ..) = *anatomy.phdrs.iter().find(|(_, t, _)| *t == 2).unwrap();
    let mut b = bytes.clone();
    put_u32(&mut b, dynamic, 0);
    assert_error(EMBEDDED_ELF_FORMAT, &b, StatusCode::InvalidArgument, &["PT_DYNAMIC"]);

    let mut b = bytes.clone();
    put_u64(&mut b, dynamic + 16, 0x7000_0000);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["PT_DYNAMIC", "outside the loaded image"],
    );

    let mut b = bytes.clone();
    put_u64(&mut b, text + 40, 1 << 40);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["overlap in memory"],
    );

    let (last_load, ..) = *anatomy.phdrs.iter().rev().find(|(_, t, _)| *t == 1).unwrap();
    let mut b = bytes.clone();
    put_u64(&mut b, last_load + 40, 1 << 40);
    assert_error(EMBEDDED_ELF_FORMAT, &b, StatusCode::InvalidArgument, &["span", "limit"]);
}

#[test]
fn missing_query_symbol_is_not_found() {
    for format in FORMATS {
        let mut bytes = data(format);
        let needle = b"iree_hal_executable_library_query\0";
        let at = bytes.windows(needle.len()).position(|w| w == needle).unwrap();
        bytes[at] = b'j';
        assert_error(
            format,
            &bytes,
            StatusCode::NotFound,
            &["iree_hal_executable_library_query"],
        );
    }
}

#[test]
fn bad_relocations_name_the_entry() {
    let bytes = data(EMBEDDED_ELF_FORMAT);
    let anatomy = Anatomy::of(&bytes);
    let first = anatomy.relocations().next().unwrap();

    // A real relocation type the embedded loader does not take (a 32-bit absolute or
    // PC-relative one, which a static PIE never needs).
    let (unsupported, name) = if ON_ARM_64 {
        (258, "R_AARCH64_ABS32")
    } else {
        (2, "R_X86_64_PC32")
    };
    let mut b = bytes.clone();
    put_u64(&mut b, first + 8, unsupported);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::Unimplemented,
        &["DT_RELA entry 0", name],
    );

    let mut b = bytes.clone();
    put_u64(&mut b, first + 8, 0x4242);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::Unimplemented,
        &["relocation type 16962"],
    );

    let mut b = bytes.clone();
    put_u64(&mut b, first, anatomy.text.start);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["DT_RELA entry 0", "writable PT_LOAD"],
    );

    let mut b = bytes.clone();
    put_u64(&mut b, first, 0x7fff_0000_0000);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["writable PT_LOAD"],
    );

    // The 64-bit absolute type, which takes a symbol: R_AARCH64_ABS64 or R_X86_64_64.
    let absolute = if ON_ARM_64 { 257 } else { 1 };
    let mut b = bytes.clone();
    put_u64(&mut b, first + 8, (9 << 32) | absolute);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["symbol index out of range"],
    );
}

#[test]
fn bad_library_tables_name_the_table() {
    let bytes = data(EMBEDDED_ELF_FORMAT);
    let anatomy = Anatomy::of(&bytes);

    // The header's name pointer is relocated to the library name; the version is 8 bytes before.
    let name_reloc = anatomy.relocation_to_string(&bytes, "halo_test_kernels");
    let header = anatomy.file_offset(get_u64(&bytes, name_reloc) - 8);
    let mut b = bytes.clone();
    put_u32(&mut b, header, 7);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::Incompatible,
        &["version 7 is newer"],
    );
    let mut b = bytes.clone();
    put_u32(&mut b, header, 5);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::Incompatible,
        &["version 5 is older"],
    );
    let mut b = bytes.clone();
    put_u32(&mut b, header + 20, 1);
    assert_error(EMBEDDED_ELF_FORMAT, &b, StatusCode::Incompatible, &["AddressSanitizer"]);
    let mut b = bytes.clone();
    put_u32(&mut b, header + 16, 4);
    assert_error(EMBEDDED_ELF_FORMAT, &b, StatusCode::Incompatible, &["features 0x4"]);

    let export_name = anatomy.relocation_to_string(&bytes, "scale_and_offset");
    let mut b = bytes.clone();
    put_u64(&mut b, export_name + 16, 0x7000_0000);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["export 0 name", "outside"],
    );

    // A string running to the end of its segment without a NUL.
    let (seg_vaddr, _, seg_len) = anatomy.segments[0];
    let last = seg_vaddr + seg_len - 1;
    let mut b = bytes.clone();
    put_u64(&mut b, export_name + 16, last);
    let at = anatomy.file_offset(last);
    b[at] = b'x';
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["export 0 name", "no NUL terminator"],
    );

    let dispatch = anatomy
        .relocations()
        .find(|&r| anatomy.text.contains(&get_u64(&bytes, r + 16)))
        .unwrap();
    let mut b = bytes.clone();
    put_u64(&mut b, dispatch + 16, anatomy.rodata.start);
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["dispatch function", "executable segment"],
    );

    let mut b = bytes.clone();
    put_u64(
        &mut b,
        export_name + 16,
        get_u64(&bytes, anatomy.relocation_to_string(&bytes, "add_workgroup_id") + 16),
    );
    assert_error(
        EMBEDDED_ELF_FORMAT,
        &b,
        StatusCode::InvalidArgument,
        &["both named 'add_workgroup_id'"],
    );
}

#[test]
fn a_format_of_the_other_architecture_names_both() {
    let (other, theirs, ours) = if ON_ARM_64 {
        ("embedded-elf-x86_64", "x86_64", "arm_64")
    } else {
        ("embedded-elf-arm_64", "arm_64", "x86_64")
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/library_kernels.{other}.so"));
    let bytes = std::fs::read(path).unwrap();
    assert_error(
        other,
        &bytes,
        StatusCode::Incompatible,
        &[&format!("holds {theirs} code"), &format!("this host runs {ours}")],
    );
}
