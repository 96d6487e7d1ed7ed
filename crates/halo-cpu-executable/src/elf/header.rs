//! Validation of the ELF file header and program headers, before anything is mapped.
//!
//! Both CPU loaders run this on untrusted bytes: the embedded loader because it
//! copies segments by these numbers, the system loader because `dlopen` of a
//! truncated file can fault instead of failing.

use halo_hal::{Error, Result};
use object::elf::{self, FileHeader64, ProgramHeader64};
use object::LittleEndian as LE;

/// A `PT_LOAD` segment, as validated numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Index in the program header table, for messages.
    pub index: usize,
    pub vaddr: u64,
    pub memsz: u64,
    pub offset: u64,
    pub filesz: u64,
    /// `PF_*` bits.
    pub flags: u32,
    /// `p_align`, at least 1.
    pub align: u64,
}

impl Segment {
    /// End of the segment in memory; validated not to overflow.
    pub fn vaddr_end(&self) -> u64 {
        self.vaddr + self.memsz
    }
}

/// A virtual address range named by a program header (`PT_DYNAMIC`, `PT_GNU_RELRO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VaddrRange {
    pub index: usize,
    pub vaddr: u64,
    pub size: u64,
}

/// What the headers of a well-formed 64-bit little-endian ELF shared object say.
#[derive(Debug, Clone)]
pub(crate) struct ElfHeaders {
    pub loads: Vec<Segment>,
    /// `PT_DYNAMIC`, with its file size (the table's extent).
    pub dynamic: Option<VaddrRange>,
    pub relro: Option<VaddrRange>,
    /// Index of a `PT_TLS` header, which no CPU loader supports.
    pub tls: Option<usize>,
}

/// Offsets in `e_ident` (not exported by `object`).
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;

const EHDR_SIZE: usize = std::mem::size_of::<FileHeader64<LE>>();
const PHDR_SIZE: usize = std::mem::size_of::<ProgramHeader64<LE>>();
const SHDR_SIZE: usize = std::mem::size_of::<elf::SectionHeader64<LE>>();

/// A readable name for an `e_machine` value, so "wrong architecture" errors say which one.
pub(crate) fn machine_name(machine: u16) -> String {
    let name = match machine {
        elf::EM_386 => "x86",
        elf::EM_X86_64 => "x86_64",
        elf::EM_ARM => "arm_32",
        elf::EM_AARCH64 => "arm_64",
        elf::EM_RISCV => "riscv",
        elf::EM_PPC => "powerpc",
        elf::EM_PPC64 => "powerpc64",
        elf::EM_MIPS => "mips",
        elf::EM_S390 => "s390",
        elf::EM_SPARCV9 => "sparcv9",
        elf::EM_LOONGARCH => "loongarch",
        elf::EM_AMDGPU => "amdgpu",
        elf::EM_CUDA => "cuda",
        elf::EM_BPF => "bpf",
        _ => return format!("unknown machine {machine:#x}"),
    };
    format!("{name} (e_machine {machine:#x})")
}

/// Checks the file header and program headers of `data` and returns the segments.
///
/// `expected_machine` is the host's `EM_*` value; another one is `Incompatible`.
///
/// # Errors
/// `InvalidArgument` naming the field for anything truncated or inconsistent;
/// `Incompatible` for a valid ELF of another class, byte order or machine.
pub(crate) fn parse(data: &[u8], expected_machine: u16) -> Result<ElfHeaders> {
    if data.len() < 4 || data[..4] != elf::ELFMAG {
        return Err(Error::invalid_argument(format!(
            "not an ELF file: the first 4 bytes are {:02x?}, expected 7f 45 4c 46",
            &data[..data.len().min(4)]
        )));
    }
    if data.len() < EHDR_SIZE {
        return Err(Error::invalid_argument(format!(
            "ELF file is {} bytes, smaller than its 64-byte file header",
            data.len()
        )));
    }
    let class = data[EI_CLASS];
    if class != elf::ELFCLASS64 {
        return Err(Error::incompatible(format!(
            "ELF class {class} (EI_CLASS) is not ELFCLASS64; only 64-bit executables load here"
        )));
    }
    let encoding = data[EI_DATA];
    if encoding != elf::ELFDATA2LSB {
        return Err(Error::incompatible(format!(
            "ELF data encoding {encoding} (EI_DATA) is not little-endian"
        )));
    }
    let (header, _) = object::pod::from_bytes::<FileHeader64<LE>>(data)
        .map_err(|_| Error::internal("ELF file header does not fit after size check"))?;
    if header.e_ident.version != elf::EV_CURRENT {
        return Err(Error::invalid_argument(format!(
            "ELF identification version {} (EI_VERSION) is not 1",
            header.e_ident.version
        )));
    }
    let version = header.e_version.get(LE);
    if version != u32::from(elf::EV_CURRENT) {
        return Err(Error::invalid_argument(format!("ELF e_version {version} is not 1")));
    }
    let machine = header.e_machine.get(LE);
    if machine != expected_machine {
        return Err(Error::incompatible(format!(
            "ELF is built for {}, but this host runs {}",
            machine_name(machine),
            machine_name(expected_machine)
        )));
    }
    let e_type = header.e_type.get(LE);
    if e_type != elf::ET_DYN {
        return Err(Error::invalid_argument(format!(
            "ELF e_type {e_type} is not ET_DYN (3); executable libraries are shared objects"
        )));
    }
    let ehsize = header.e_ehsize.get(LE);
    let phentsize = header.e_phentsize.get(LE);
    let shentsize = header.e_shentsize.get(LE);
    if usize::from(ehsize) != EHDR_SIZE || usize::from(phentsize) != PHDR_SIZE || usize::from(shentsize) != SHDR_SIZE {
        return Err(Error::invalid_argument(format!(
            "ELF entry sizes e_ehsize={ehsize} e_phentsize={phentsize} e_shentsize={shentsize} \
             are not the ELF64 sizes {EHDR_SIZE}/{PHDR_SIZE}/{SHDR_SIZE}"
        )));
    }

    let phoff = header.e_phoff.get(LE);
    let phnum = header.e_phnum.get(LE);
    if phoff == 0 || phnum == 0 {
        return Err(Error::invalid_argument(format!(
            "ELF has no program header table (e_phoff={phoff}, e_phnum={phnum})"
        )));
    }
    let phdrs = table(data, "program header", phoff, phnum, PHDR_SIZE)?;
    let phdrs = object::pod::slice_from_all_bytes::<ProgramHeader64<LE>>(phdrs)
        .map_err(|_| Error::internal("program header table size is not a multiple of 56"))?;

    // The section headers are not used for loading, but the linker always
    // writes them last: requiring them in bounds rejects truncated files early.
    let shoff = header.e_shoff.get(LE);
    let shnum = header.e_shnum.get(LE);
    if shoff == 0 || shnum == 0 {
        return Err(Error::invalid_argument(format!(
            "ELF has no section header table (e_shoff={shoff}, e_shnum={shnum})"
        )));
    }
    table(data, "section header", shoff, shnum, SHDR_SIZE)?;

    let mut headers = ElfHeaders {
        loads: Vec::new(),
        dynamic: None,
        relro: None,
        tls: None,
    };
    for (index, phdr) in phdrs.iter().enumerate() {
        let p_type = phdr.p_type.get(LE);
        let vaddr = phdr.p_vaddr.get(LE);
        let memsz = phdr.p_memsz.get(LE);
        let offset = phdr.p_offset.get(LE);
        let filesz = phdr.p_filesz.get(LE);
        match p_type {
            elf::PT_LOAD => {
                if filesz > memsz {
                    return Err(Error::invalid_argument(format!(
                        "PT_LOAD program header {index}: p_filesz {filesz:#x} exceeds p_memsz {memsz:#x}"
                    )));
                }
                if !fits(offset, filesz, data.len() as u64) {
                    return Err(Error::invalid_argument(format!(
                        "PT_LOAD program header {index}: file range {offset:#x}+{filesz:#x} \
                         lies outside the {}-byte file",
                        data.len()
                    )));
                }
                if !fits(vaddr, memsz, MAX_VADDR) {
                    return Err(Error::invalid_argument(format!(
                        "PT_LOAD program header {index}: address range {vaddr:#x}+{memsz:#x} \
                         exceeds the address space limit {MAX_VADDR:#x}"
                    )));
                }
                let align = phdr.p_align.get(LE);
                if align > 1 && !align.is_power_of_two() {
                    return Err(Error::invalid_argument(format!(
                        "PT_LOAD program header {index}: p_align {align:#x} is not a power of two"
                    )));
                }
                // The ELF rule for loadable segments; a file that breaks it has had its offsets
                // or addresses changed, so its code would be copied from the wrong bytes.
                if align > 1 && offset % align != vaddr % align {
                    return Err(Error::invalid_argument(format!(
                        "PT_LOAD program header {index}: p_offset {offset:#x} and p_vaddr {vaddr:#x} \
                         differ modulo p_align {align:#x}"
                    )));
                }
                if memsz == 0 {
                    continue;
                }
                let segment = Segment {
                    index,
                    vaddr,
                    memsz,
                    offset,
                    filesz,
                    flags: phdr.p_flags.get(LE),
                    align: align.max(1),
                };
                if let Some(other) = headers
                    .loads
                    .iter()
                    .find(|s| s.vaddr < segment.vaddr_end() && segment.vaddr < s.vaddr_end())
                {
                    return Err(Error::invalid_argument(format!(
                        "PT_LOAD program headers {} and {index} overlap in memory \
                         ({:#x}..{:#x} and {vaddr:#x}..{:#x})",
                        other.index,
                        other.vaddr,
                        other.vaddr_end(),
                        segment.vaddr_end()
                    )));
                }
                headers.loads.push(segment);
            }
            elf::PT_DYNAMIC | elf::PT_GNU_RELRO => {
                let (name, slot, size) = if p_type == elf::PT_DYNAMIC {
                    ("PT_DYNAMIC", &mut headers.dynamic, filesz)
                } else {
                    ("PT_GNU_RELRO", &mut headers.relro, memsz)
                };
                if slot.is_some() {
                    return Err(Error::invalid_argument(format!(
                        "program header {index} is a second {name}"
                    )));
                }
                if !fits(vaddr, size, MAX_VADDR) {
                    return Err(Error::invalid_argument(format!(
                        "{name} program header {index}: address range {vaddr:#x}+{size:#x} overflows"
                    )));
                }
                *slot = Some(VaddrRange { index, vaddr, size });
            }
            elf::PT_TLS => headers.tls = Some(index),
            _ => {}
        }
    }
    if headers.loads.is_empty() {
        return Err(Error::invalid_argument("ELF has no non-empty PT_LOAD segment"));
    }
    Ok(headers)
}

/// Addresses above this are rejected so that offset arithmetic cannot overflow.
pub(crate) const MAX_VADDR: u64 = 1 << 47;

/// True when `[start, start + size)` does not overflow and ends at or before `limit`.
pub(crate) fn fits(start: u64, size: u64, limit: u64) -> bool {
    matches!(start.checked_add(size), Some(end) if end <= limit)
}

/// The bytes of a table of `count` entries of `entry_size` at `offset`, bounds-checked.
fn table<'a>(data: &'a [u8], what: &str, offset: u64, count: u16, entry_size: usize) -> Result<&'a [u8]> {
    let size = u64::from(count) * entry_size as u64;
    offset
        .checked_add(size)
        .filter(|&end| end <= data.len() as u64)
        .map(|end| &data[offset as usize..end as usize])
        .ok_or_else(|| {
            Error::invalid_argument(format!(
                "ELF {what} table ({count} entries at offset {offset:#x}) extends past the \
                 end of the {}-byte file",
                data.len()
            ))
        })
}
