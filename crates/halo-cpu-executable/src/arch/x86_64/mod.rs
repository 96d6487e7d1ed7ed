//! x86-64: `embedded-elf-x86_64` and `system-elf-x86_64`.

use object::elf;

use super::{Arch, Relocation};

#[cfg(all(target_arch = "x86_64", guarded_calls))]
pub(crate) mod guarded_call;
#[cfg(target_arch = "x86_64")]
pub(crate) mod host;

/// x86-64 as IREE's CPU executables name it.
pub(crate) const ARCH: Arch = Arch {
    name: "x86_64",
    embedded_format: "embedded-elf-x86_64",
    system_elf_format: "system-elf-x86_64",
    system_dylib_format: "system-dylib-x86_64",
    machine: elf::EM_X86_64,
    macho_cpu_type: object::macho::CPU_TYPE_X86_64,
    relocation,
    relocation_name,
};

/// The relocations IREE's embedded linker leaves in an x86-64 static PIE.
fn relocation(r_type: u32) -> Option<Relocation> {
    match r_type {
        elf::R_X86_64_NONE => Some(Relocation::Nothing),
        elf::R_X86_64_RELATIVE => Some(Relocation::BiasPlusAddend),
        elf::R_X86_64_64 => Some(Relocation::SymbolPlusAddend),
        elf::R_X86_64_GLOB_DAT | elf::R_X86_64_JUMP_SLOT => Some(Relocation::Symbol),
        _ => None,
    }
}

fn relocation_name(r_type: u32) -> &'static str {
    match r_type {
        elf::R_X86_64_NONE => "R_X86_64_NONE",
        elf::R_X86_64_64 => "R_X86_64_64",
        elf::R_X86_64_PC32 => "R_X86_64_PC32",
        elf::R_X86_64_GOT32 => "R_X86_64_GOT32",
        elf::R_X86_64_PLT32 => "R_X86_64_PLT32",
        elf::R_X86_64_COPY => "R_X86_64_COPY",
        elf::R_X86_64_GLOB_DAT => "R_X86_64_GLOB_DAT",
        elf::R_X86_64_JUMP_SLOT => "R_X86_64_JUMP_SLOT",
        elf::R_X86_64_RELATIVE => "R_X86_64_RELATIVE",
        elf::R_X86_64_GOTPCREL => "R_X86_64_GOTPCREL",
        elf::R_X86_64_32 => "R_X86_64_32",
        elf::R_X86_64_32S => "R_X86_64_32S",
        elf::R_X86_64_DTPMOD64 => "R_X86_64_DTPMOD64",
        elf::R_X86_64_DTPOFF64 => "R_X86_64_DTPOFF64",
        elf::R_X86_64_TPOFF64 => "R_X86_64_TPOFF64",
        elf::R_X86_64_IRELATIVE => "R_X86_64_IRELATIVE",
        _ => "unknown",
    }
}
