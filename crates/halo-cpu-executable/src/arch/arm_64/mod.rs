//! AArch64: `embedded-elf-arm_64` and `system-elf-arm_64`.
//!
//! IREE compiles ARM64 kernels with x18 reserved (`+reserve-x18`), the platform register of
//! Apple's and Windows' ABIs, so nothing halo passes or expects may live there.

use object::elf;

use super::{Arch, Relocation};

#[cfg(all(target_arch = "aarch64", guarded_calls))]
pub(crate) mod guarded_call;
#[cfg(target_arch = "aarch64")]
pub(crate) mod host;

/// AArch64 as IREE's CPU executables name it.
pub(crate) const ARCH: Arch = Arch {
    name: "arm_64",
    embedded_format: "embedded-elf-arm_64",
    system_elf_format: "system-elf-arm_64",
    system_dylib_format: "system-dylib-arm_64",
    machine: elf::EM_AARCH64,
    macho_cpu_type: object::macho::CPU_TYPE_ARM64,
    relocation,
    relocation_name,
};

/// The relocations IREE's embedded linker leaves in an AArch64 static PIE. Unlike x86-64's, the
/// GOT and jump-slot kinds add their addend (the AArch64 ELF ABI's `S + A`).
fn relocation(r_type: u32) -> Option<Relocation> {
    match r_type {
        elf::R_AARCH64_NONE => Some(Relocation::Nothing),
        elf::R_AARCH64_RELATIVE => Some(Relocation::BiasPlusAddend),
        elf::R_AARCH64_ABS64 | elf::R_AARCH64_GLOB_DAT | elf::R_AARCH64_JUMP_SLOT => Some(Relocation::SymbolPlusAddend),
        _ => None,
    }
}

fn relocation_name(r_type: u32) -> &'static str {
    match r_type {
        elf::R_AARCH64_NONE => "R_AARCH64_NONE",
        elf::R_AARCH64_ABS64 => "R_AARCH64_ABS64",
        elf::R_AARCH64_ABS32 => "R_AARCH64_ABS32",
        elf::R_AARCH64_PREL64 => "R_AARCH64_PREL64",
        elf::R_AARCH64_COPY => "R_AARCH64_COPY",
        elf::R_AARCH64_GLOB_DAT => "R_AARCH64_GLOB_DAT",
        elf::R_AARCH64_JUMP_SLOT => "R_AARCH64_JUMP_SLOT",
        elf::R_AARCH64_RELATIVE => "R_AARCH64_RELATIVE",
        elf::R_AARCH64_TLS_DTPMOD => "R_AARCH64_TLS_DTPMOD",
        elf::R_AARCH64_TLS_DTPREL => "R_AARCH64_TLS_DTPREL",
        elf::R_AARCH64_TLS_TPREL => "R_AARCH64_TLS_TPREL",
        elf::R_AARCH64_TLSDESC => "R_AARCH64_TLSDESC",
        elf::R_AARCH64_IRELATIVE => "R_AARCH64_IRELATIVE",
        _ => "unknown",
    }
}
