//! The x86-64 CPU halo runs on: its feature bits and its floating-point controls.

use std::arch::x86_64::{__cpuid_count, CpuidResult};

/// The host's CPU data in IREE's layout (`schemas/cpu_data.h`): word 0 holds the feature bits of
/// `cpu_feature_bits.inl`; the other words are zero.
pub(crate) fn cpu_data() -> [u64; 8] {
    let mut bits = 0u64;
    let mut set = |bit: u32, present: bool| {
        if present {
            bits |= 1 << bit;
        }
    };
    set(0, std::is_x86_feature_detected!("sse3"));
    set(1, std::is_x86_feature_detected!("ssse3"));
    set(2, std::is_x86_feature_detected!("sse4.1"));
    set(3, std::is_x86_feature_detected!("sse4.2"));
    set(4, std::is_x86_feature_detected!("sse4a"));
    let avx = std::is_x86_feature_detected!("avx");
    set(10, avx);
    set(11, std::is_x86_feature_detected!("fma"));
    set(14, std::is_x86_feature_detected!("f16c"));
    set(15, std::is_x86_feature_detected!("avx2"));
    set(20, std::is_x86_feature_detected!("avx512f"));
    set(21, std::is_x86_feature_detected!("avx512cd"));
    set(22, std::is_x86_feature_detected!("avx512vl"));
    set(23, std::is_x86_feature_detected!("avx512dq"));
    set(24, std::is_x86_feature_detected!("avx512bw"));
    set(25, std::is_x86_feature_detected!("avx512ifma"));
    set(26, std::is_x86_feature_detected!("avx512vbmi"));
    set(27, std::is_x86_feature_detected!("avx512vpopcntdq"));
    set(28, std::is_x86_feature_detected!("avx512vnni"));
    set(29, std::is_x86_feature_detected!("avx512vbmi2"));
    set(30, std::is_x86_feature_detected!("avx512bitalg"));
    set(31, std::is_x86_feature_detected!("avx512bf16"));
    set(32, std::is_x86_feature_detected!("avx512fp16"));
    // FMA4, XOP and AMX have no stable detection macro; read CPUID the way IREE's runtime does
    // (`base/internal/cpu.c`).
    let cpuid = Leaves::read();
    if avx {
        set(12, cpuid.ext1_ecx & (1 << 16) != 0);
        set(13, cpuid.ext1_ecx & (1 << 11) != 0);
    }
    if cpuid.xsave_eax & 0x60000 == 0x60000 {
        set(50, cpuid.leaf7_edx & (1 << 24) != 0);
        set(51, cpuid.leaf7_edx & (1 << 25) != 0);
        set(52, cpuid.leaf7_edx & (1 << 22) != 0);
    }
    [bits, 0, 0, 0, 0, 0, 0, 0]
}

/// The CPUID registers the feature bits need (zero where a leaf is absent).
struct Leaves {
    ext1_ecx: u32,
    leaf7_edx: u32,
    xsave_eax: u32,
}

impl Leaves {
    fn read() -> Self {
        let cpuid = |leaf: u32, subleaf: u32| -> CpuidResult { __cpuid_count(leaf, subleaf) };
        let max_base = cpuid(0, 0).eax;
        let max_ext = cpuid(0x8000_0000, 0).eax;
        let base = |leaf: u32, sub: u32| (leaf <= max_base).then(|| cpuid(leaf, sub));
        Leaves {
            ext1_ecx: if max_ext >= 0x8000_0001 {
                cpuid(0x8000_0001, 0).ecx
            } else {
                0
            },
            leaf7_edx: base(7, 0).map_or(0, |r| r.edx),
            xsave_eax: base(0xd, 0).map_or(0, |r| r.eax),
        }
    }
}

/// MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6), which IREE's kernels are compiled
/// and tested with.
const FTZ_DAZ: u32 = 0x8040;

/// The thread's MXCSR as it was before denormals were flushed.
pub(crate) struct FloatControls(u32);

impl FloatControls {
    /// Sets FTZ and DAZ on this thread; the controls to put back, or `None` when they were set.
    pub(crate) fn flush_denormals() -> Option<Self> {
        let saved = read_mxcsr();
        (saved & FTZ_DAZ != FTZ_DAZ).then(|| {
            write_mxcsr(saved | FTZ_DAZ);
            FloatControls(saved)
        })
    }

    /// Puts the controls back as they were.
    pub(crate) fn restore(self) {
        write_mxcsr(self.0);
    }
}

fn read_mxcsr() -> u32 {
    let mut value: u32 = 0;
    // SAFETY: `stmxcsr` stores the 32-bit control register to the given stack slot and has no
    // other effect.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut value, options(nostack, preserves_flags)) };
    value
}

fn write_mxcsr(value: u32) {
    // SAFETY: `ldmxcsr` loads a value derived from the current register with only the FTZ/DAZ
    // bits changed (or the saved original), so no reserved bit is set and no exception unmasked.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &value, options(nostack, preserves_flags, readonly)) };
}

/// Nothing to do: x86-64 keeps instruction fetch coherent with stores, so freshly written code
/// runs as written once its pages are executable.
pub(crate) fn flush_instruction_cache(_start: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_data_reports_baseline_features() {
        let data = cpu_data();
        if std::is_x86_feature_detected!("sse4.2") {
            assert_ne!(data[0] & (1 << 3), 0, "SSE4.2 bit 3 missing from {:#x}", data[0]);
        }
        assert!(data[1..].iter().all(|&w| w == 0));
    }
}
