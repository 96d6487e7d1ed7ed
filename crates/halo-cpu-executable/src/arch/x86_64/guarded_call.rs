//! The x86-64 half of `native_faults`: the trampoline every guarded call goes through, what the
//! fault handler changes in an interrupted thread's context, and the thread pointer (FS base)
//! a damaged kernel may move.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::native_faults::stack_of_current_call;

// The stack at `recovery.stack` holds the callee-saved registers the trampoline pushed, so
// resuming at its epilogue with that stack pointer restores them and returns to the Rust caller
// as if the call had returned; a call that returns goes back to that stack the same way.
//
// Native code gets no register that points into Rust memory: the callee-saved registers (which
// held the record, the trampoline's frame and whatever the Rust caller kept there) are zeroed
// before the call, and after it the record is found again through the thread's guard
// (`stack_of_current_call`) rather than a register the native code was trusted to preserve. A
// damaged kernel that wrote through `rbx` or `rbp` on entry, or returned with them changed, once
// overwrote the record or sent the trampoline to a stack that was not its own. Before any Rust
// code runs again the flags native code could leave set are cleared ([`LEFT_FLAGS`]): the
// direction flag the ABI expects clear, and the trap and alignment-check flags a damaged
// `popf` can set, which would raise `SIGTRAP` after every instruction or `SIGBUS` at every
// unaligned access of the Rust code that follows, outside the guard. Clearing the trap flag
// traps once more, still inside the guard. MXCSR and the x87 control word, saved in the frame's
// last slot before the call, go back after it when native code changed them ([`CONTROL_BITS`]).
std::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl halo_guarded_native_call",
    ".hidden halo_guarded_native_call",
    ".type halo_guarded_native_call, @function",
    "halo_guarded_native_call:",
    "push rbp",
    "mov rbp, rsp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "sub rsp, 8",
    "stmxcsr [rsp]",
    "fnstcw [rsp + 4]",
    "mov [r8], rsp",
    "mov r11, qword ptr fs:[0]",
    "test r9, r9",
    "jz 2f",
    "mov rsp, r9",
    "2:",
    // The thread pointer, checked after the call; two slots keep the stack aligned.
    "push r11",
    "sub rsp, 8",
    "xor r11d, r11d",
    "mov rax, rdi",
    "mov rdi, rsi",
    "mov rsi, rdx",
    "mov rdx, rcx",
    "xor ebx, ebx",
    "xor ebp, ebp",
    "xor r12d, r12d",
    "xor r13d, r13d",
    "xor r14d, r14d",
    "xor r15d, r15d",
    "call rax",
    // `popfq` takes tens of cycles, so it runs only when a flag is set.
    "pushfq",
    "test dword ptr [rsp], {left_flags}",
    "jz 3f",
    "and qword ptr [rsp], {kept_flags}",
    "popfq",
    "jmp 4f",
    "3:",
    "add rsp, 8",
    "4:",
    // Where native code can move FS (`wrfsbase`), the thread pointer (which the x86-64 TLS ABI
    // keeps at `fs:[0]`) must be the one saved before the call; else a fault here (a load through
    // an unmapped FS, or `ud2`) lets the handler put the recorded one back before anything
    // touches thread-local storage.
    "add rsp, 8",
    "pop rcx",
    "cmp rcx, qword ptr fs:[0]",
    "je 7f",
    "ud2",
    "7:",
    // The result stays on the stack across the look-up, which keeps the stack aligned.
    "push rax",
    "sub rsp, 8",
    "call {stack_of_current_call}",
    "mov rcx, rax",
    "add rsp, 8",
    "pop rax",
    "mov rsp, rcx",
    ".globl halo_guarded_native_return",
    ".hidden halo_guarded_native_return",
    "halo_guarded_native_return:",
    "cld",
    // MXCSR and the x87 control word as they are now (below the stack pointer), beside their
    // values saved before the call, which go back when a control bit differs (MXCSR's status
    // bits are the caller's to lose).
    "stmxcsr [rsp - 4]",
    "fnstcw [rsp - 6]",
    "mov ecx, [rsp - 4]",
    "xor ecx, [rsp]",
    "test ecx, {control_bits}",
    "jz 5f",
    "ldmxcsr [rsp]",
    "5:",
    "mov cx, [rsp - 6]",
    "cmp cx, [rsp + 4]",
    "je 6f",
    "fldcw [rsp + 4]",
    "6:",
    "add rsp, 8",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".size halo_guarded_native_call, . - halo_guarded_native_call",
    stack_of_current_call = sym stack_of_current_call,
    left_flags = const LEFT_FLAGS,
    control_bits = const CONTROL_BITS,
    kept_flags = const !LEFT_FLAGS,
);

/// MXCSR's control bits (denormals-are-zero, exception masks, rounding, flush-to-zero). The
/// trampoline saves MXCSR and the x87 control word before a call and puts each back after it
/// when native code changed its controls: the ABI has callees preserve them, and a damaged
/// kernel that unmasked exceptions made Rust's next inexact operation raise `SIGFPE` outside the
/// guard.
const CONTROL_BITS: u32 = 0xffc0;

/// The flags native code may leave set that Rust code must not run with: trap (`TF`),
/// direction (`DF`) and alignment check (`AC`).
pub(crate) const LEFT_FLAGS: i32 = 0x100 | 0x400 | 0x4_0000;

/// Clears [`LEFT_FLAGS`] on this thread.
pub(crate) fn clear_left_flags() {
    // SAFETY: the sequence changes only the flags named, on the current thread; the stack is
    // balanced.
    unsafe {
        std::arch::asm!(
            "pushfq",
            "and qword ptr [rsp], {kept}",
            "popfq",
            kept = const !LEFT_FLAGS,
        )
    };
}

/// Points the interrupted thread at `resume` with stack pointer `stack`, its left flags cleared;
/// returns the address of the instruction that faulted.
///
/// # Safety
/// `context` must be the `ucontext_t` the kernel passed to a signal handler of this thread.
pub(crate) unsafe fn redirect(context: *mut libc::ucontext_t, stack: usize, resume: usize) -> usize {
    // SAFETY: the caller passes the live signal context.
    let registers = unsafe { &mut (*context).uc_mcontext.gregs };
    let instruction = registers[libc::REG_RIP as usize] as usize;
    registers[libc::REG_RSP as usize] = stack as i64;
    registers[libc::REG_RIP as usize] = resume as i64;
    registers[libc::REG_EFL as usize] &= !i64::from(LEFT_FLAGS);
    instruction
}

/// Whether user code may read and write FS (`HWCAP2_FSGSBASE`): 0 not yet known, 1 no, 2 yes.
/// Where it may not, `wrfsbase` raises `SIGILL` and the FS base cannot change under halo.
static FSGSBASE_USABLE: AtomicU8 = AtomicU8::new(0);

/// `HWCAP2_FSGSBASE` in the auxiliary vector's `AT_HWCAP2`.
const HWCAP2_FSGSBASE: u64 = 1 << 1;

/// Whether native code can move this thread's thread pointer (the `fsgsbase` instructions may
/// run here: Linux 5.9 and later, on CPUs that have them). Async-signal-safe once a thread has
/// asked.
pub(crate) fn thread_pointer_movable() -> bool {
    match FSGSBASE_USABLE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: `getauxval` only reads the process's auxiliary vector.
            let usable = unsafe { libc::getauxval(libc::AT_HWCAP2) } & HWCAP2_FSGSBASE != 0;
            FSGSBASE_USABLE.store(if usable { 2 } else { 1 }, Ordering::Relaxed);
            usable
        }
        known => known == 2,
    }
}

/// Whether it is known by now that native code can move the thread pointer; no system call, for
/// the fault handler.
pub(crate) fn thread_pointer_known_movable() -> bool {
    FSGSBASE_USABLE.load(Ordering::Relaxed) == 2
}

/// The calling thread's FS base; only where [`thread_pointer_movable`].
pub(crate) fn thread_pointer() -> usize {
    let base: usize;
    // SAFETY: `rdfsbase` only reads the register, and runs only where the kernel allows it.
    unsafe { std::arch::asm!("rdfsbase {0}", out(reg) base, options(nostack, nomem)) };
    base
}

/// Sets the calling thread's FS base.
///
/// # Safety
/// `base` must be this thread's own thread pointer, and the `fsgsbase` instructions usable.
pub(crate) unsafe fn set_thread_pointer(base: usize) {
    // SAFETY: as the caller guarantees.
    unsafe { std::arch::asm!("wrfsbase {0}", in(reg) base, options(nostack)) };
}

/// The calling thread's kernel id, by a raw system call (libc's wrapper may reach errno, a
/// thread-local).
pub(crate) fn current_tid() -> u32 {
    let tid: usize;
    // SAFETY: `gettid` takes no arguments, cannot fail and touches no memory; `syscall`
    // clobbers `rcx` and `r11`.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_gettid as usize => tid,
            out("rcx") _,
            out("r11") _,
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
        unsafe { std::arch::asm!("mov qword ptr [{0}], 0", in(reg) address) };
        0
    }

    pub(crate) extern "C" fn breakpoint(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: `int3` raises SIGTRAP, which the guard turns into an error.
        unsafe { std::arch::asm!("int3") };
        0
    }

    pub(crate) extern "C" fn illegal(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: `ud2` raises SIGILL, which the guard turns into an error.
        unsafe { std::arch::asm!("ud2") };
        0
    }

    /// Writes zeros from its stack pointer upwards until something stops it, as a damaged
    /// `rep stos` running up its stack does.
    pub(crate) extern "C" fn clobber_upwards(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: the writes fault on the native stack's upper guard by design, and the guard
        // turns that into an error; nothing above the native stack is reached.
        unsafe {
            std::arch::asm!(
                "mov rdi, rsp",
                "mov rcx, {count}",
                "xor eax, eax",
                "rep stosb",
                count = const 1u64 << 40,
                out("rdi") _, out("rcx") _, out("rax") _,
            )
        };
        0
    }

    pub(crate) extern "C" fn stack_pointer(_: usize, _: usize, _: usize) -> usize {
        let pointer: usize;
        // SAFETY: reads a register.
        unsafe { std::arch::asm!("mov {0}, rsp", out(reg) pointer) };
        pointer
    }

    /// Zeroes `count` bytes upwards from `address` with `rep stosb`, as a damaged kernel might.
    pub(crate) extern "C" fn fill_up_from(address: usize, count: usize, _: usize) -> usize {
        // SAFETY: the tests pass addresses whose writes fault on a guard region, which the guard
        // turns into an error; assembly is opaque to the compiler.
        unsafe {
            std::arch::asm!("rep stosb", inout("rdi") address => _, inout("rcx") count => _, in("al") 0u8);
        }
        0
    }

    // Two native functions written in assembly, so no Rust prologue touches the registers first:
    // one returns the callee-saved registers it was handed, ORed together; the other returns
    // with `rbx` and `rbp` changed, as damaged code may.
    std::arch::global_asm!(
        ".text",
        ".p2align 4",
        ".globl halo_test_callee_saved_registers",
        ".hidden halo_test_callee_saved_registers",
        "halo_test_callee_saved_registers:",
        "mov rax, rbx",
        "or rax, rbp",
        "or rax, r12",
        "or rax, r13",
        "or rax, r14",
        "or rax, r15",
        "ret",
        ".p2align 4",
        ".globl halo_test_breaks_register_convention",
        ".hidden halo_test_breaks_register_convention",
        "halo_test_breaks_register_convention:",
        "mov ebx, 16",
        "mov ebp, 32",
        "xor eax, eax",
        "ret",
    );
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::native_faults::tests::{add, guarded};
    use crate::native_faults::unguarded;

    extern "C" fn divide(a: usize, b: usize, _: usize) -> usize {
        let quotient: usize;
        // SAFETY: `div` by the zero the test passes raises SIGFPE (the guard's to catch).
        unsafe { std::arch::asm!("xor edx, edx", "div {0}", in(reg) b, inout("rax") a => quotient, out("rdx") _) };
        quotient
    }

    #[test]
    fn a_division_by_zero_is_returned_as_sigfpe() {
        assert_eq!(guarded(divide, [7, 0, 0]).unwrap_err().signal, libc::SIGFPE);
        assert_eq!(guarded(divide, [7, 2, 0]), Ok(3));
    }

    /// The flags register of the calling thread.
    fn flags() -> i64 {
        let flags: i64;
        // SAFETY: reads the flags through the stack, which it leaves balanced.
        unsafe { std::arch::asm!("pushfq", "pop {0}", out(reg) flags) };
        flags
    }

    /// Sets the trap flag, as a damaged `popf` can: the next instruction traps.
    extern "C" fn sets_the_trap_flag(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: only the flags change; the trap is the guard's to catch.
        unsafe { std::arch::asm!("pushfq", "or qword ptr [rsp], 0x100", "popfq", "nop", "nop") };
        0
    }

    /// Sets the alignment-check flag and returns.
    extern "C" fn sets_the_alignment_check_flag(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: only the flags change; nothing unaligned runs before the guard clears them.
        unsafe { std::arch::asm!("pushfq", "or qword ptr [rsp], 0x40000", "popfq") };
        0
    }

    /// Sets the alignment-check flag, then stores to the address it is given.
    extern "C" fn faults_with_alignment_checks_on(address: usize, _: usize, _: usize) -> usize {
        // SAFETY: the store faults by design, with the flag set, and the guard turns it into an
        // error.
        unsafe {
            std::arch::asm!(
                "pushfq", "or qword ptr [rsp], 0x40000", "popfq", "mov qword ptr [{0}], 0", in(reg) address
            )
        };
        0
    }

    #[test]
    fn flags_a_damaged_popf_sets_are_cleared_before_rust_code_runs_again() {
        let left = i64::from(LEFT_FLAGS);
        assert_eq!(
            guarded(sets_the_trap_flag, [0, 0, 0]).unwrap_err().signal,
            libc::SIGTRAP
        );
        assert_eq!(flags() & left, 0);
        assert_eq!(guarded(sets_the_alignment_check_flag, [0, 0, 0]), Ok(0));
        assert_eq!(flags() & left, 0);
        let fault = guarded(faults_with_alignment_checks_on, [0x18, 0, 0]).unwrap_err();
        assert_eq!((fault.signal, fault.address), (libc::SIGSEGV, 0x18));
        assert_eq!(flags() & left, 0);
        // An unaligned load, which faults while the alignment-check flag is set.
        let bytes = std::hint::black_box([7u8; 16]);
        // SAFETY: the pointer is in bounds for eight bytes.
        let unaligned = unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(1).cast::<u64>()) };
        assert_eq!(unaligned, u64::from_le_bytes([7; 8]));
        assert_eq!(guarded(add, [1, 2, 3]), Ok(6));
    }

    /// MXCSR's control bits and the x87 control word.
    fn floating_point_controls() -> (u32, u16) {
        let (mut mxcsr, mut control) = (0u32, 0u16);
        // SAFETY: stores the two registers into the locals.
        unsafe { std::arch::asm!("stmxcsr [{0}]", "fnstcw [{1}]", in(reg) &mut mxcsr, in(reg) &mut control) };
        (mxcsr & CONTROL_BITS, control)
    }

    /// Unmasks every floating-point exception and rounds toward zero, in SSE and x87, then
    /// stores to `address` when it is not zero.
    extern "C" fn unmasks_floating_point_exceptions(address: usize, _: usize, _: usize) -> usize {
        let (mxcsr, control) = (0x6000u32, 0x0c40u16);
        // SAFETY: loads the two control registers from the locals; the store faults by design
        // where the test asks, and the guard turns it into an error.
        unsafe {
            std::arch::asm!(
                "ldmxcsr [{0}]",
                "fldcw [{1}]",
                "test {2}, {2}",
                "jz 2f",
                "mov qword ptr [{2}], 0",
                "2:",
                in(reg) &mxcsr, in(reg) &control, in(reg) address
            )
        };
        0
    }

    #[test]
    fn floating_point_controls_native_code_changes_are_put_back() {
        let before = floating_point_controls();
        assert_eq!(guarded(unmasks_floating_point_exceptions, [0, 0, 0]), Ok(0));
        assert_eq!(floating_point_controls(), before);
        let fault = guarded(unmasks_floating_point_exceptions, [0x20, 0, 0]).unwrap_err();
        assert_eq!((fault.signal, fault.address), (libc::SIGSEGV, 0x20));
        assert_eq!(floating_point_controls(), before);
        // Inexact, and rounded to nearest: with the kernel's controls left in place this raised
        // SIGFPE.
        let third = std::hint::black_box(1.0f64) / std::hint::black_box(3.0);
        assert_eq!(third.to_bits(), (1.0f64 / 3.0).to_bits());
    }

    /// Moves the thread pointer to `to`, as a damaged byte turned into `wrfsbase` did, then
    /// stores to `address` when it is not zero.
    extern "C" fn moves_the_thread_pointer(to: usize, address: usize, _: usize) -> usize {
        // SAFETY: nothing here touches thread-local storage after the write; the guard puts the
        // thread pointer back, and the store faults by design where the test asks.
        unsafe {
            std::arch::asm!(
                "wrfsbase {0}",
                "test {1}, {1}",
                "jz 2f",
                "mov qword ptr [{1}], 0",
                "2:",
                in(reg) to, in(reg) address
            )
        };
        0
    }

    #[test]
    fn a_thread_pointer_native_code_moved_is_put_back() {
        if !crate::thread_pointer::usable() {
            println!("skipped: a_thread_pointer_native_code_moved_is_put_back: no fsgsbase instructions");
            return;
        }
        thread_local!(static MARK: Cell<u32> = const { Cell::new(7) });
        // Zeros that thread-local reads would take for this thread's variables: the check after
        // the call stops at them (`ud2`), where an unmapped pointer faults.
        let zeros = vec![0u64; 1 << 14];
        let mapped = zeros.as_ptr() as usize + (zeros.len() / 2) * 8;
        for (to, address, signal) in [
            (0x1000, 0, libc::SIGSEGV),
            (0x1000, 0x28, libc::SIGSEGV),
            (mapped, 0, libc::SIGILL),
        ] {
            let fault = guarded(moves_the_thread_pointer, [to, address, 0]).unwrap_err();
            assert_eq!(fault.signal, signal, "to {to:#x}, storing to {address:#x}");
            if address != 0 {
                assert_eq!(fault.address, address);
            }
            assert_eq!(MARK.get(), 7);
            assert_eq!(guarded(add, [1, 2, 3]), Ok(6));
        }
    }

    #[test]
    fn host_code_native_code_calls_runs_without_the_flags_it_left() {
        extern "C" fn calls_host_with_flags_set(_: usize, _: usize, _: usize) -> usize {
            // SAFETY: sets the direction and alignment-check flags, which `unguarded` clears
            // before the host code runs.
            unsafe { std::arch::asm!("std", "pushfq", "or qword ptr [rsp], 0x40000", "popfq") };
            unguarded(|| (flags() & i64::from(LEFT_FLAGS)) as usize)
        }
        assert_eq!(guarded(calls_host_with_flags_set, [0, 0, 0]), Ok(0));
    }
}
