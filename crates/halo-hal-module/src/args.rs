//! Readings of native-call arguments that only the `hal` module needs: byte sizes with IREE's
//! whole-buffer marker, and fences where null means "already reached".

use halo_hal::{Fence, Result};
use halo_vm::Args;

use crate::objects::HalFence;

/// `hal`-specific typed reads of a call's arguments.
pub trait HalArgs<'a> {
    /// An i64 byte offset or length; -1, IREE's whole-buffer marker, becomes
    /// [`halo_hal::WHOLE_BUFFER`] (the same bits).
    fn size(&self, index: usize) -> Result<u64>;

    /// A fence argument; null is the empty fence (already reached).
    fn fence(&self, index: usize) -> Result<&'a Fence>;
}

impl<'a> HalArgs<'a> for Args<'a> {
    #[inline]
    fn size(&self, index: usize) -> Result<u64> {
        Ok(self.i64(index)? as u64)
    }

    #[inline]
    fn fence(&self, index: usize) -> Result<&'a Fence> {
        static EMPTY: Fence = Fence::new();
        Ok(self.optional_object::<HalFence>(index)?.map_or(&EMPTY, |f| &f.0))
    }
}
