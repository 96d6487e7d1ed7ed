//! The AArch64 half of `native_faults`: the trampoline every guarded call goes through, what the
//! fault handler changes in an interrupted thread's context, and the thread pointer
//! (`TPIDR_EL0`) a damaged kernel may move.

use crate::native_faults::stack_of_current_call;

// The trampoline's frame (176 bytes on the caller's stack, at `recovery.stack`) holds the frame
// pointer and link register, the callee-saved x19-x28 and d8-d15, and FPCR; resuming at its
// epilogue with that stack pointer restores them and returns to the Rust caller as if the call
// had returned, and a call that returns goes back to that stack the same way.
//
// As on x86-64, native code gets no register that points into Rust memory: the callee-saved
// registers and the frame pointer are zeroed before the call, and afterwards the record is
// found again through the thread's guard (`stack_of_current_call`), not through a register the
// native code was trusted to preserve. x18 is neither used nor relied on: IREE compiles kernels
// with it reserved, and Linux gives it no meaning. FPCR goes back after the call when native
// code changed it (the ABI has callees preserve its control bits; a damaged kernel that set a
// rounding mode would change every later result of the thread). The thread pointer is checked
// after the call: a kernel that moved it (`msr tpidr_el0`) ends in `udf`, which faults into the
// handler, and the handler puts the recorded one back before it touches thread-local storage.
std::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl halo_guarded_native_call",
    ".hidden halo_guarded_native_call",
    ".type halo_guarded_native_call, %function",
    "halo_guarded_native_call:",
    "stp x29, x30, [sp, #-176]!",
    "mov x29, sp",
    "stp x19, x20, [sp, #16]",
    "stp x21, x22, [sp, #32]",
    "stp x23, x24, [sp, #48]",
    "stp x25, x26, [sp, #64]",
    "stp x27, x28, [sp, #80]",
    "stp d8, d9, [sp, #96]",
    "stp d10, d11, [sp, #112]",
    "stp d12, d13, [sp, #128]",
    "stp d14, d15, [sp, #144]",
    "mrs x9, fpcr",
    "str x9, [sp, #160]",
    "mov x9, sp",
    "str x9, [x4]",
    "mrs x10, tpidr_el0",
    "cbz x5, 1f",
    "mov sp, x5",
    "1:",
    // The thread pointer, checked after the call; the pair keeps the stack 16-byte aligned.
    "stp x10, xzr, [sp, #-16]!",
    "mov x9, x0",
    "mov x0, x1",
    "mov x1, x2",
    "mov x2, x3",
    "mov x3, xzr",
    "mov x4, xzr",
    "mov x5, xzr",
    "mov x10, xzr",
    "mov x19, xzr",
    "mov x20, xzr",
    "mov x21, xzr",
    "mov x22, xzr",
    "mov x23, xzr",
    "mov x24, xzr",
    "mov x25, xzr",
    "mov x26, xzr",
    "mov x27, xzr",
    "mov x28, xzr",
    "mov x29, xzr",
    "blr x9",
    "ldp x10, x11, [sp], #16",
    "mrs x11, tpidr_el0",
    "cmp x10, x11",
    "b.eq 2f",
    "udf #0",
    "2:",
    // The result stays on the stack across the look-up.
    "stp x0, xzr, [sp, #-16]!",
    "bl {stack_of_current_call}",
    "mov x9, x0",
    "ldp x0, x11, [sp], #16",
    "mov sp, x9",
    ".globl halo_guarded_native_return",
    ".hidden halo_guarded_native_return",
    "halo_guarded_native_return:",
    "ldr x9, [sp, #160]",
    "mrs x10, fpcr",
    "cmp x9, x10",
    "b.eq 3f",
    "msr fpcr, x9",
    "3:",
    "ldp d14, d15, [sp, #144]",
    "ldp d12, d13, [sp, #128]",
    "ldp d10, d11, [sp, #112]",
    "ldp d8, d9, [sp, #96]",
    "ldp x27, x28, [sp, #80]",
    "ldp x25, x26, [sp, #64]",
    "ldp x23, x24, [sp, #48]",
    "ldp x21, x22, [sp, #32]",
    "ldp x19, x20, [sp, #16]",
    "ldp x29, x30, [sp], #176",
    "ret",
    ".size halo_guarded_native_call, . - halo_guarded_native_call",
    stack_of_current_call = sym stack_of_current_call,
);

/// Nothing to clear: AArch64 has no state user code can set that would trap or change the Rust
/// code that follows (single-stepping and alignment checks are the kernel's to enable).
pub(crate) fn clear_left_flags() {}

/// PSTATE's branch-type bits (`BTYPE`), which a fault in a branch target can leave set: resuming
/// elsewhere with them set would fault again where branch protection is on.
const PSTATE_BTYPE: u64 = 0b11 << 10;

/// Points the interrupted thread at `resume` with stack pointer `stack`; returns the address of
/// the instruction that faulted.
///
/// # Safety
/// `context` must be the `ucontext_t` the kernel passed to a signal handler of this thread.
pub(crate) unsafe fn redirect(context: *mut libc::ucontext_t, stack: usize, resume: usize) -> usize {
    // SAFETY: the caller passes the live signal context.
    let machine = unsafe { &mut (*context).uc_mcontext };
    let instruction = machine.pc as usize;
    machine.sp = stack as u64;
    machine.pc = resume as u64;
    machine.pstate &= !PSTATE_BTYPE;
    instruction
}

/// Whether native code can move this thread's thread pointer: always (`msr tpidr_el0` is an
/// ordinary user instruction).
pub(crate) fn thread_pointer_movable() -> bool {
    true
}

/// As [`thread_pointer_movable`], for the fault handler.
pub(crate) fn thread_pointer_known_movable() -> bool {
    true
}

/// The calling thread's `TPIDR_EL0`.
pub(crate) fn thread_pointer() -> usize {
    let pointer: usize;
    // SAFETY: reading `TPIDR_EL0` has no effect besides the read.
    unsafe { std::arch::asm!("mrs {0}, tpidr_el0", out(reg) pointer, options(nostack, nomem, preserves_flags)) };
    pointer
}

/// Sets the calling thread's `TPIDR_EL0`.
///
/// # Safety
/// `pointer` must be this thread's own thread pointer.
pub(crate) unsafe fn set_thread_pointer(pointer: usize) {
    // SAFETY: as the caller guarantees.
    unsafe { std::arch::asm!("msr tpidr_el0, {0}", in(reg) pointer, options(nostack, preserves_flags)) };
}

/// The calling thread's kernel id, by a raw system call (libc's wrapper may reach errno, a
/// thread-local).
pub(crate) fn current_tid() -> u32 {
    let tid: usize;
    // SAFETY: `gettid` takes no arguments, cannot fail and touches no memory.
    unsafe {
        std::arch::asm!(
            "svc #0",
            in("x8") libc::SYS_gettid as usize,
            lateout("x0") tid,
            options(nostack),
        )
    };
    tid as u32
}

/// Native functions for the guard's tests, each doing one thing a damaged kernel may do.
#[cfg(test)]
pub(crate) mod test_code {
    /// Stores to the address it is given.
    pub(crate) extern "C" fn store_to(address: usize, _: usize, _: usize) -> usize {
        // SAFETY: the store faults by design (the tests pass unmapped addresses) and the guard
        // turns that into an error; assembly is opaque to the compiler, so no Rust assumption
        // rests on the store.
        unsafe { std::arch::asm!("str xzr, [{0}]", in(reg) address) };
        0
    }

    pub(crate) extern "C" fn breakpoint(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: `brk` raises SIGTRAP, which the guard turns into an error.
        unsafe { std::arch::asm!("brk #0") };
        0
    }

    pub(crate) extern "C" fn illegal(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: `udf` raises SIGILL, which the guard turns into an error.
        unsafe { std::arch::asm!("udf #0") };
        0
    }

    /// Writes zeros from its stack pointer upwards until something stops it, as a damaged store
    /// loop running up its stack does.
    pub(crate) extern "C" fn clobber_upwards(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: the writes fault on the native stack's upper guard by design, and the guard
        // turns that into an error; nothing above the native stack is reached.
        unsafe { std::arch::asm!("mov {0}, sp", "2:", "str xzr, [{0}], #8", "b 2b", out(reg) _) };
        0
    }

    pub(crate) extern "C" fn stack_pointer(_: usize, _: usize, _: usize) -> usize {
        let pointer: usize;
        // SAFETY: reads a register.
        unsafe { std::arch::asm!("mov {0}, sp", out(reg) pointer) };
        pointer
    }

    /// Zeroes `count` bytes upwards from `address`, as a damaged kernel might.
    pub(crate) extern "C" fn fill_up_from(address: usize, count: usize, _: usize) -> usize {
        // SAFETY: the tests pass addresses whose writes fault on a guard region, which the guard
        // turns into an error; assembly is opaque to the compiler.
        unsafe {
            std::arch::asm!(
                "2:",
                "cbz {count}, 3f",
                "strb wzr, [{address}], #1",
                "sub {count}, {count}, #1",
                "b 2b",
                "3:",
                address = inout(reg) address => _,
                count = inout(reg) count => _,
            )
        };
        0
    }

    // Two native functions written in assembly, so no Rust prologue touches the registers first:
    // one returns the callee-saved registers and frame pointer it was handed, ORed together; the
    // other returns with x19 and the frame pointer changed, as damaged code may.
    std::arch::global_asm!(
        ".text",
        ".p2align 4",
        ".globl halo_test_callee_saved_registers",
        ".hidden halo_test_callee_saved_registers",
        "halo_test_callee_saved_registers:",
        "orr x0, x19, x20",
        "orr x0, x0, x21",
        "orr x0, x0, x22",
        "orr x0, x0, x23",
        "orr x0, x0, x24",
        "orr x0, x0, x25",
        "orr x0, x0, x26",
        "orr x0, x0, x27",
        "orr x0, x0, x28",
        "orr x0, x0, x29",
        "ret",
        ".p2align 4",
        ".globl halo_test_breaks_register_convention",
        ".hidden halo_test_breaks_register_convention",
        "halo_test_breaks_register_convention:",
        "mov x19, #16",
        "mov x29, #32",
        "mov x0, #0",
        "ret",
    );
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use crate::native_faults::tests::{add, guarded};

    /// FPCR's rounding-mode bits (`RMode`).
    const ROUNDING_MODE: u64 = 0b11 << 22;

    fn fpcr() -> u64 {
        let value: u64;
        // SAFETY: reads a register.
        unsafe { std::arch::asm!("mrs {0}, fpcr", out(reg) value) };
        value
    }

    /// Rounds toward zero from now on, then stores to `address` when it is not zero.
    extern "C" fn rounds_toward_zero(address: usize, _: usize, _: usize) -> usize {
        // SAFETY: changes only FPCR's rounding mode, which the guard puts back; the store faults
        // by design where the test asks, and the guard turns it into an error.
        unsafe {
            std::arch::asm!(
                "mrs {t}, fpcr",
                "orr {t}, {t}, #0xc00000",
                "msr fpcr, {t}",
                "cbz {a}, 2f",
                "str xzr, [{a}]",
                "2:",
                t = out(reg) _, a = in(reg) address
            )
        };
        0
    }

    #[test]
    fn floating_point_controls_native_code_changes_are_put_back() {
        let before = fpcr();
        assert_eq!(before & ROUNDING_MODE, 0, "the test starts rounding to nearest");
        assert_eq!(guarded(rounds_toward_zero, [0, 0, 0]), Ok(0));
        assert_eq!(fpcr(), before);
        let fault = guarded(rounds_toward_zero, [0x20, 0, 0]).unwrap_err();
        assert_eq!((fault.signal, fault.address), (libc::SIGSEGV, 0x20));
        assert_eq!(fpcr(), before);
        let third = std::hint::black_box(2.0f64) / std::hint::black_box(3.0);
        assert_eq!(third.to_bits(), (2.0f64 / 3.0).to_bits());
    }

    /// Moves the thread pointer to `to`, as a damaged kernel's `msr tpidr_el0` would, then stores
    /// to `address` when it is not zero.
    extern "C" fn moves_the_thread_pointer(to: usize, address: usize, _: usize) -> usize {
        // SAFETY: nothing here touches thread-local storage after the write; the guard puts the
        // thread pointer back, and the store faults by design where the test asks.
        unsafe {
            std::arch::asm!(
                "msr tpidr_el0, {0}",
                "cbz {1}, 2f",
                "str xzr, [{1}]",
                "2:",
                in(reg) to, in(reg) address
            )
        };
        0
    }

    #[test]
    fn a_thread_pointer_native_code_moved_is_put_back() {
        thread_local!(static MARK: Cell<u32> = const { Cell::new(7) });
        // Returning with a moved pointer ends in the trampoline's `udf`; a fault after the move
        // is reported as itself. Either way the handler runs with the pointer moved.
        for (to, address, signal) in [(0x1000, 0, libc::SIGILL), (0x1000, 0x28, libc::SIGSEGV)] {
            let fault = guarded(moves_the_thread_pointer, [to, address, 0]).unwrap_err();
            assert_eq!(fault.signal, signal, "to {to:#x}, storing to {address:#x}");
            if address != 0 {
                assert_eq!(fault.address, address);
            }
            assert_eq!(MARK.get(), 7);
            assert_eq!(guarded(add, [1, 2, 3]), Ok(6));
        }
    }
}
