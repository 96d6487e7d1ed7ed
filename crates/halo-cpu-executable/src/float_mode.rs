//! Denormal flushing while kernels run, as IREE's CPU runtime does (MXCSR FTZ and DAZ on x86-64).
//!
//! IREE's kernels are compiled and tested with subnormals flushed to zero; results differ without
//! it (e.g. `1e-38 * 1 + 1e-38` is 0 under IREE). The guard sets the bits on the executing thread
//! and restores the caller's mode when dropped.

/// MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6).
#[cfg(target_arch = "x86_64")]
const FTZ_DAZ: u32 = 0x8040;

/// Flushes denormals on this thread until dropped.
pub struct FlushDenormals {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

impl FlushDenormals {
    /// Sets FTZ and DAZ on the calling thread.
    pub fn enter() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_mxcsr();
            if saved & FTZ_DAZ != FTZ_DAZ {
                write_mxcsr(saved | FTZ_DAZ);
            }
            FlushDenormals { saved }
        }
        #[cfg(not(target_arch = "x86_64"))]
        FlushDenormals {}
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if self.saved & FTZ_DAZ != FTZ_DAZ {
            write_mxcsr(self.saved);
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn read_mxcsr() -> u32 {
    let mut value: u32 = 0;
    // SAFETY: `stmxcsr` stores the 32-bit control register to the given stack slot and has no
    // other effect.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut value, options(nostack, preserves_flags)) };
    value
}

#[cfg(target_arch = "x86_64")]
fn write_mxcsr(value: u32) {
    // SAFETY: `ldmxcsr` loads a value derived from the current register with only the FTZ/DAZ
    // bits changed (or the saved original), so no reserved bit is set and no exception unmasked.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &value, options(nostack, preserves_flags, readonly)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_and_restores() {
        let tiny = std::hint::black_box(1e-38f32);
        assert_ne!(tiny * std::hint::black_box(0.5f32), 0.0);
        {
            let _guard = FlushDenormals::enter();
            assert_eq!(std::hint::black_box(tiny * std::hint::black_box(0.5f32)), 0.0);
        }
        assert_ne!(std::hint::black_box(tiny * std::hint::black_box(0.5f32)), 0.0);
    }
}
