//! What differs between CPU architectures, one module per architecture behind one small interface
//! (IREE keeps the same split in its ELF loader's `arch/` directory).
//!
//! Each architecture module has two halves:
//! - its [`Arch`] description (ELF machine, IREE's format names, what each dynamic relocation
//!   type means), compiled on every host, so that the loader's checks of either architecture's
//!   objects run anywhere;
//! - the parts that run on that CPU, compiled only there: the CPU data words IREE's `cpu_data`
//!   layout defines ([`host::cpu_data`]), the floating-point controls kernels expect
//!   ([`host::FloatControls`]), making loaded code visible to instruction fetch
//!   ([`host::flush_instruction_cache`]), and, where calls are guarded, the trampoline, the fault
//!   context and the thread pointer of `native_faults` (`guarded_call`).
//!
//! Adding an architecture is adding a module here with both halves and a line in [`HOST`].

pub(crate) mod arm_64;
pub(crate) mod x86_64;

/// What one dynamic relocation type asks the loader to write into its 8-byte target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relocation {
    /// Nothing (`R_*_NONE`).
    Nothing,
    /// The image's load bias plus the addend (`R_*_RELATIVE`).
    BiasPlusAddend,
    /// The symbol's address plus the addend (`R_X86_64_64`, `R_AARCH64_ABS64`, AArch64's GOT and
    /// jump slots).
    SymbolPlusAddend,
    /// The symbol's address, the addend ignored (x86-64's GOT and jump slots).
    Symbol,
}

/// One CPU architecture as IREE's CPU executables name it, and the facts the loaders need.
#[derive(Debug)]
pub(crate) struct Arch {
    /// IREE's name in format strings: `x86_64`, `arm_64`.
    pub name: &'static str,
    /// The format of static-PIE ELF libraries halo loads itself.
    pub embedded_format: &'static str,
    /// The format of ELF shared objects loaded through the system's loader (Linux).
    pub system_elf_format: &'static str,
    /// The format of Mach-O dynamic libraries loaded through the system's loader (macOS).
    pub system_dylib_format: &'static str,
    /// The ELF `e_machine` of its objects.
    pub machine: u16,
    /// The Mach-O `cputype` of its dynamic libraries.
    pub macho_cpu_type: u32,
    /// What a relocation type means; `None` for a type the embedded loader refuses.
    pub relocation: fn(u32) -> Option<Relocation>,
    /// The psABI name of a relocation type, for messages.
    pub relocation_name: fn(u32) -> &'static str,
}

/// Every architecture halo has CPU executables for.
pub(crate) const ALL: [&Arch; 2] = [&x86_64::ARCH, &arm_64::ARCH];

/// The architecture whose embedded or system format `format` is, if any.
pub(crate) fn of_format(format: &str) -> Option<&'static Arch> {
    ALL.into_iter()
        .find(|arch| [arch.embedded_format, arch.system_elf_format, arch.system_dylib_format].contains(&format))
}

/// The architecture this build runs code for; `None` where halo has no CPU executables.
#[cfg(target_arch = "x86_64")]
pub(crate) const HOST: Option<&Arch> = Some(&x86_64::ARCH);
/// The architecture this build runs code for; `None` where halo has no CPU executables.
#[cfg(target_arch = "aarch64")]
pub(crate) const HOST: Option<&Arch> = Some(&arm_64::ARCH);
/// The architecture this build runs code for; `None` where halo has no CPU executables.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const HOST: Option<&Arch> = None;

/// The running CPU's half of its architecture module.
#[cfg(target_arch = "x86_64")]
pub(crate) use x86_64::host;

/// The running CPU's half of its architecture module.
#[cfg(target_arch = "aarch64")]
pub(crate) use arm_64::host;

/// The guarded-call trampoline and fault context of the running CPU (`native_faults`' half).
#[cfg(all(target_arch = "aarch64", guarded_calls))]
pub(crate) use arm_64::guarded_call;
/// The guarded-call trampoline and fault context of the running CPU (`native_faults`' half).
#[cfg(all(target_arch = "x86_64", guarded_calls))]
pub(crate) use x86_64::guarded_call;

/// What a CPU without an architecture module gets: no feature bits, no floating-point controls.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) mod host {
    /// No CPU data words are known for this architecture.
    pub(crate) fn cpu_data() -> [u64; 8] {
        [0; 8]
    }

    /// No code is loaded for this architecture, so no cache needs maintenance.
    pub(crate) fn flush_instruction_cache(_start: usize, _len: usize) {}

    /// No floating-point controls are set on this architecture.
    pub(crate) struct FloatControls;

    impl FloatControls {
        pub(crate) fn flush_denormals() -> Option<Self> {
            None
        }

        pub(crate) fn restore(self) {}
    }
}
