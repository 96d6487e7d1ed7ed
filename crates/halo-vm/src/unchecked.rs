//! Unchecked access to what the verifier proved in range, for the interpreter's hot loop: a
//! frame's i32-bank registers and a function's instructions.
//!
//! Both views are made only from a [`Function`], which only the verifier ([`crate::compile`])
//! makes and nothing outside this crate can change. It proved that every register operand of
//! every instruction is inside its function's i32 bank (64-bit operands as a pair whose second
//! half is too), and [`Registers::of_frame`] checks that a frame's slice holds exactly that many
//! registers. It also proved that execution cannot leave a
//! function's instructions: it starts at the first, branch targets are instructions, and the
//! last instruction is a terminator (the one terminator that can fall through, `fail` with
//! status 0, is checked where it runs). Re-checking on every access costs about a tenth of the
//! interpreter's time on arithmetic loops (callgrind on `fixtures/vm/perf_loop`), so these
//! accessors skip the check; debug builds still assert it.

use crate::compile::{Function, Inst};

/// A verified function's instructions.
#[derive(Clone, Copy)]
pub(crate) struct Code<'a> {
    insts: &'a [Inst],
}

impl<'a> Code<'a> {
    /// The instructions of a verified function.
    #[inline(always)]
    pub(crate) fn of(function: &'a Function) -> Self {
        Code { insts: &function.insts }
    }

    /// The instruction at `index`, which the verifier proved execution can reach only in range.
    #[inline(always)]
    pub(crate) fn at(&self, index: usize) -> &'a Inst {
        debug_assert!(index < self.insts.len(), "instruction {index} outside the function");
        // SAFETY: `index` is 0, a verified branch target, or one past a non-terminator, so it
        // is inside `insts` (see the module comment).
        unsafe { self.insts.get_unchecked(index) }
    }

    /// The instruction after `inst`, one of these that is not a terminator.
    #[inline(always)]
    pub(crate) fn after(&self, inst: &'a Inst) -> &'a Inst {
        debug_assert!(
            self.index_of(inst) + 1 < self.insts.len(),
            "no instruction after the last"
        );
        // SAFETY: `inst` is in `insts` and is not the last one (the last is a terminator, and
        // terminators never continue here), so the next element is in `insts` too.
        unsafe { &*(inst as *const Inst).add(1) }
    }

    /// The index of `inst`, one of these instructions.
    pub(crate) fn index_of(&self, inst: &Inst) -> usize {
        (inst as *const Inst as usize - self.insts.as_ptr() as usize) / std::mem::size_of::<Inst>()
    }
}

/// A frame's i32-bank registers.
pub(crate) struct Registers<'a> {
    slots: &'a mut [u32],
}

impl<'a> Registers<'a> {
    /// The i32 bank of a frame of `function`.
    ///
    /// # Panics
    /// When `slots` is not exactly the bank's size: the interpreter sizes frames from the same
    /// function, so this is a bug, and checking it once per entry is what makes the unchecked
    /// accesses below sound.
    pub(crate) fn of_frame(function: &Function, slots: &'a mut [u32]) -> Self {
        assert_eq!(
            slots.len(),
            function.i32_registers as usize,
            "a frame's i32 bank differs from its function's"
        );
        Registers { slots }
    }

    /// The same registers, borrowed again for one instruction's handler.
    #[inline(always)]
    pub(crate) fn reborrow(&mut self) -> Registers<'_> {
        Registers { slots: self.slots }
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

    /// The aligned register pair at `ordinal` as one 64-bit value (low half first).
    #[inline(always)]
    pub(crate) fn get64(&self, ordinal: usize) -> u64 {
        debug_assert!(
            ordinal + 1 < self.slots.len(),
            "pair {ordinal} outside the verified bank"
        );
        // SAFETY: the verifier checked that both registers of every pair operand are in the
        // bank; the read is unaligned-tolerant, as pairs are only 4-byte aligned.
        let value = unsafe { self.slots.as_ptr().add(ordinal).cast::<u64>().read_unaligned() };
        u64::from_le(value)
    }

    /// Sets the aligned register pair at `ordinal` with one 64-bit write: a value written as two
    /// halves and read back whole stalls the processor (no store-to-load forwarding).
    #[inline(always)]
    pub(crate) fn set64(&mut self, ordinal: usize, value: u64) {
        debug_assert!(
            ordinal + 1 < self.slots.len(),
            "pair {ordinal} outside the verified bank"
        );
        // SAFETY: as in `get64`.
        unsafe {
            self.slots
                .as_mut_ptr()
                .add(ordinal)
                .cast::<u64>()
                .write_unaligned(value.to_le())
        }
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
