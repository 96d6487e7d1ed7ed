//! The AArch64 CPU halo runs on: its feature bits and its floating-point controls.

/// The host's CPU data in IREE's layout (`schemas/cpu_data.h`): word 0 holds the ARM64 feature
/// bits of `cpu_feature_bits.inl`, from what the operating system reports; the other words are
/// zero.
pub(crate) fn cpu_data() -> [u64; 8] {
    [features::bits(), 0, 0, 0, 0, 0, 0, 0]
}

/// IREE's ARM64 feature bits (word 0 of its CPU data), by the name IREE gives each.
#[cfg_attr(
    target_os = "macos",
    expect(dead_code, reason = "macOS names only the features Apple's CPUs have (no SVE)")
)]
mod bit {
    pub const FP_ARMV8: u32 = 0;
    pub const LSE: u32 = 1;
    pub const FULLFP16: u32 = 10;
    pub const FP16FML: u32 = 11;
    pub const DOTPROD: u32 = 12;
    pub const I8MM: u32 = 13;
    pub const BF16: u32 = 14;
    pub const SVE: u32 = 20;
    pub const SVE2: u32 = 21;
    pub const SVE2P1: u32 = 22;
    pub const SVE2_BITPERM: u32 = 23;
    pub const F32MM: u32 = 24;
    pub const F64MM: u32 = 25;
    pub const SME: u32 = 30;
    pub const SME2: u32 = 31;
    pub const SME2P1: u32 = 32;
    pub const SME_F16F16: u32 = 33;
    pub const SME_F64F64: u32 = 34;
    pub const SME_I16I64: u32 = 35;
}

/// Linux reports features in the auxiliary vector (`AT_HWCAP`, `AT_HWCAP2`; the kernel's
/// `Documentation/arch/arm64/elf_hwcaps.rst` numbers them).
#[cfg(target_os = "linux")]
mod features {
    use super::bit;

    /// Which `AT_HWCAP` (word 0) or `AT_HWCAP2` (word 1) bit stands for which of IREE's bits.
    pub(super) const HWCAPS: [(usize, u32, u32); 19] = [
        (0, 0, bit::FP_ARMV8),
        (0, 8, bit::LSE),
        (0, 10, bit::FULLFP16),
        (0, 20, bit::DOTPROD),
        (0, 22, bit::SVE),
        (0, 23, bit::FP16FML),
        (1, 1, bit::SVE2),
        (1, 4, bit::SVE2_BITPERM),
        (1, 10, bit::F32MM),
        (1, 11, bit::F64MM),
        (1, 13, bit::I8MM),
        (1, 14, bit::BF16),
        (1, 23, bit::SME),
        (1, 24, bit::SME_I16I64),
        (1, 25, bit::SME_F64F64),
        (1, 36, bit::SVE2P1),
        (1, 37, bit::SME2),
        (1, 38, bit::SME2P1),
        (1, 42, bit::SME_F16F16),
    ];

    pub(super) fn bits() -> u64 {
        // SAFETY: `getauxval` only reads the process's auxiliary vector.
        let words = unsafe { [libc::getauxval(libc::AT_HWCAP), libc::getauxval(libc::AT_HWCAP2)] };
        super::translate(&HWCAPS, |word, bit| words[word] & (1 << bit) != 0)
    }
}

/// macOS reports features as `hw.optional.*` sysctl names, each 1 where the CPU has it.
#[cfg(target_os = "macos")]
mod features {
    use super::bit;

    const NAMES: [(&str, u32); 11] = [
        ("hw.optional.floatingpoint", bit::FP_ARMV8),
        ("hw.optional.arm.FEAT_LSE", bit::LSE),
        ("hw.optional.arm.FEAT_FP16", bit::FULLFP16),
        ("hw.optional.arm.FEAT_FHM", bit::FP16FML),
        ("hw.optional.arm.FEAT_DotProd", bit::DOTPROD),
        ("hw.optional.arm.FEAT_I8MM", bit::I8MM),
        ("hw.optional.arm.FEAT_BF16", bit::BF16),
        ("hw.optional.arm.FEAT_SME", bit::SME),
        ("hw.optional.arm.FEAT_SME2", bit::SME2),
        ("hw.optional.arm.FEAT_SME_F64F64", bit::SME_F64F64),
        ("hw.optional.arm.FEAT_SME_I16I64", bit::SME_I16I64),
    ];

    pub(super) fn bits() -> u64 {
        NAMES
            .iter()
            .filter(|(name, _)| sysctl_is_one(name))
            .fold(0, |bits, &(_, bit)| bits | 1 << bit)
    }

    fn sysctl_is_one(name: &str) -> bool {
        let Ok(name) = std::ffi::CString::new(name) else {
            return false;
        };
        let mut value: i32 = 0;
        let mut size = size_of::<i32>();
        // SAFETY: `value` and `size` describe a writable 4-byte buffer, and no new value is set.
        let status = unsafe {
            libc::sysctlbyname(
                name.as_ptr(),
                (&raw mut value).cast(),
                &mut size,
                std::ptr::null_mut(),
                0,
            )
        };
        status == 0 && value == 1
    }
}

/// Elsewhere only what every ARMv8-A CPU has: floating point and Advanced SIMD.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod features {
    pub(super) fn bits() -> u64 {
        1 << super::bit::FP_ARMV8
    }
}

/// IREE's bits for the operating system's feature words: `table` pairs (word, bit) with IREE's
/// bit, and `has` says whether a word's bit is set.
#[cfg(target_os = "linux")]
fn translate(table: &[(usize, u32, u32)], has: impl Fn(usize, u32) -> bool) -> u64 {
    table
        .iter()
        .filter(|&&(word, bit, _)| has(word, bit))
        .fold(0, |bits, &(_, _, iree)| bits | 1 << iree)
}

/// FPCR's flush-to-zero bits, for single and double (FZ, bit 24) and half precision (FZ16,
/// bit 19), as IREE's runtime sets them around kernels.
const FZ_FZ16: u64 = 0x0108_0000;

/// The thread's FPCR as it was before denormals were flushed.
pub(crate) struct FloatControls(u64);

impl FloatControls {
    /// Sets FZ and FZ16 on this thread; the controls to put back, or `None` when they were set.
    pub(crate) fn flush_denormals() -> Option<Self> {
        let saved = read_fpcr();
        (saved & FZ_FZ16 != FZ_FZ16).then(|| {
            write_fpcr(saved | FZ_FZ16);
            FloatControls(saved)
        })
    }

    /// Puts the controls back as they were.
    pub(crate) fn restore(self) {
        write_fpcr(self.0);
    }
}

fn read_fpcr() -> u64 {
    let value: u64;
    // SAFETY: reading FPCR has no effect besides the register read.
    unsafe { std::arch::asm!("mrs {}, fpcr", out(reg) value, options(nostack, nomem, preserves_flags)) };
    value
}

fn write_fpcr(value: u64) {
    // SAFETY: the value is the current FPCR with only the flush bits changed (or the saved
    // original), so no trap is enabled and no reserved bit is set.
    unsafe { std::arch::asm!("msr fpcr, {}", in(reg) value, options(nostack, nomem, preserves_flags)) };
}

/// Makes freshly written code in `[start, start + len)` visible to instruction fetch. AArch64's
/// instruction cache is not coherent with stores: without this a core may run stale bytes that
/// were in its cache before the loader wrote the kernel there (IREE's loader does the same).
#[cfg(target_os = "macos")]
pub(crate) fn flush_instruction_cache(start: usize, len: usize) {
    extern "C" {
        /// libSystem's cache maintenance for code written at run time (`libkern/OSCacheControl.h`).
        fn sys_icache_invalidate(start: *mut std::ffi::c_void, len: usize);
    }
    // SAFETY: the range is mapped memory of a loaded image; the call only maintains caches.
    unsafe { sys_icache_invalidate(start as *mut std::ffi::c_void, len) };
}

/// Makes freshly written code in `[start, start + len)` visible to instruction fetch. AArch64's
/// instruction cache is not coherent with stores: without this a core may run stale bytes that
/// were in its cache before the loader wrote the kernel there (IREE's loader does the same).
///
/// The ARM architecture's sequence: clean each data-cache line to the point of unification,
/// then invalidate each instruction-cache line, with barriers between and after. `CTR_EL0`,
/// readable at EL0 on Linux, gives the line sizes and says when a step is unnecessary (IDC, DIC).
#[cfg(not(target_os = "macos"))]
pub(crate) fn flush_instruction_cache(start: usize, len: usize) {
    let ctr: u64;
    // SAFETY: reading CTR_EL0 has no effect besides the register read.
    unsafe { std::arch::asm!("mrs {}, ctr_el0", out(reg) ctr, options(nostack, nomem, preserves_flags)) };
    let end = start.saturating_add(len);
    let lines = |log2_words: u64| {
        let line = 4usize << log2_words;
        (start & !(line - 1)..end).step_by(line)
    };
    const IDC: u64 = 1 << 28;
    const DIC: u64 = 1 << 29;
    if ctr & IDC == 0 {
        for line in lines((ctr >> 16) & 0xf) {
            // SAFETY: cleaning a cache line of mapped, readable memory changes no data.
            unsafe { std::arch::asm!("dc cvau, {}", in(reg) line, options(nostack, preserves_flags)) };
        }
    }
    // SAFETY: a barrier only orders memory accesses.
    unsafe { std::arch::asm!("dsb ish", options(nostack, preserves_flags)) };
    if ctr & DIC == 0 {
        for line in lines(ctr & 0xf) {
            // SAFETY: invalidating instruction-cache lines of mapped memory changes no data.
            unsafe { std::arch::asm!("ic ivau, {}", in(reg) line, options(nostack, preserves_flags)) };
        }
        // SAFETY: as above.
        unsafe { std::arch::asm!("dsb ish", options(nostack, preserves_flags)) };
    }
    // SAFETY: an instruction barrier only discards prefetched instructions.
    unsafe { std::arch::asm!("isb", options(nostack, preserves_flags)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_data_reports_floating_point_and_simd() {
        let data = cpu_data();
        assert_ne!(
            data[0] & (1 << bit::FP_ARMV8),
            0,
            "fp-armv8 missing from {:#x}",
            data[0]
        );
        assert!(data[1..].iter().all(|&w| w == 0));
    }

    #[test]
    fn flushing_the_instruction_cache_of_any_range_returns() {
        let bytes = vec![0u8; 3 * 4096 + 17];
        let start = bytes.as_ptr() as usize;
        for (offset, len) in [(0, 0), (1, 1), (13, 4096), (0, bytes.len())] {
            flush_instruction_cache(start + offset, len);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn hwcap_bits_map_to_irees_bits() {
        let words = [(1u64 << 20) | 1, 1u64 << 37];
        let bits = translate(&features::HWCAPS, |word, bit| words[word] & (1 << bit) != 0);
        assert_eq!(bits, (1 << bit::FP_ARMV8) | (1 << bit::DOTPROD) | (1 << bit::SME2));
    }
}
