//! Unchecked access to a frame's i32-bank registers, for the interpreter's hot loop.
//!
//! The verifier ([`crate::compile`]) proved that every register operand of every instruction is
//! inside its function's i32 bank (64-bit operands as a pair whose second half is too), and a
//! frame's slice holds exactly that many registers. Re-checking on every access costs about a
//! tenth of the interpreter's time on arithmetic loops (callgrind on `fixtures/vm/perf_loop`), so
//! these accessors skip the check; debug builds still assert it.

/// A frame's i32-bank registers.
pub(crate) struct Registers<'a> {
    slots: &'a mut [u32],
}

impl<'a> Registers<'a> {
    /// Wraps a frame's registers.
    pub(crate) fn new(slots: &'a mut [u32]) -> Self {
        Registers { slots }
    }

    /// The register at `ordinal`, which the verifier proved to be in range.
    #[inline(always)]
    pub(crate) fn get(&self, ordinal: usize) -> u32 {
        debug_assert!(
            ordinal < self.slots.len(),
            "register {ordinal} outside the verified bank"
        );
        // SAFETY: the verifier checked every register operand against the function's i32
        // register count, which is the length of `slots`.
        unsafe { *self.slots.get_unchecked(ordinal) }
    }

    /// Sets the register at `ordinal`, which the verifier proved to be in range.
    #[inline(always)]
    pub(crate) fn set(&mut self, ordinal: usize, value: u32) {
        debug_assert!(
            ordinal < self.slots.len(),
            "register {ordinal} outside the verified bank"
        );
        // SAFETY: as in `get`.
        unsafe { *self.slots.get_unchecked_mut(ordinal) = value }
    }

    /// The checked read-only view, for paths outside the hot loop.
    pub(crate) fn view(&self) -> &[u32] {
        self.slots
    }

    /// The checked view, for paths outside the hot loop (block arguments, lists).
    pub(crate) fn slots(&mut self) -> &mut [u32] {
        self.slots
    }
}
