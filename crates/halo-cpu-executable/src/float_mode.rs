//! Denormal flushing while kernels run, as IREE's CPU runtime does (MXCSR's FTZ and DAZ on
//! x86-64, FPCR's FZ and FZ16 on AArch64).
//!
//! IREE's kernels are compiled and tested with subnormals flushed to zero; results differ without
//! it (e.g. `1e-38 * 1 + 1e-38` is 0 under IREE). The guard sets the bits on the executing thread
//! and restores the caller's mode when dropped.

use crate::arch::host::FloatControls;

/// Flushes denormals on this thread until dropped.
pub struct FlushDenormals {
    saved: Option<FloatControls>,
}

impl FlushDenormals {
    /// Sets the flush bits on the calling thread.
    pub fn enter() -> Self {
        FlushDenormals {
            saved: FloatControls::flush_denormals(),
        }
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            saved.restore();
        }
    }
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
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
