//! Faults in compiled code (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP`) returned as errors
//! instead of ending the process (Linux on x86-64).
//!
//! Compiled kernels check no bounds. A module whose machine code, push constants or workgroup
//! counts were damaged can make one read or write outside its memory, run an illegal instruction,
//! divide by zero or jump into the `int3` padding between functions; the CPU then raises a signal
//! on the thread running it. Every call into a library's code goes through a small trampoline
//! that records its stack. The signal handler, installed when the first library loads, sees that
//! the faulting thread is inside such a call and resumes it at the trampoline's return with the
//! fault recorded, so the call fails with an error naming the kernel. Only native frames are
//! abandoned: host imports (Rust a kernel calls back into) run with the guard lifted
//! ([`unguarded`]), so no Rust frame is ever skipped. Faults anywhere else go on to the handler
//! installed before halo's (Rust's stack-overflow report, Python's `faulthandler`), or to the
//! default action.
//!
//! Native code runs on a stack of its own per thread (a `GuardedRegion`), between guard regions.
//! A kernel that writes past its frames (a damaged `rep stos` running up its stack) then faults
//! on the guard above them instead of overwriting the Rust frames, and the record the recovery
//! resumes from, that lie above them on the thread's stack. What a call hands native code by
//! pointer goes on a second guarded region per thread ([`on_argument_page`]), for the same
//! reason.
//!
//! What this cannot catch is a stray write that lands in mapped memory: like any native code's,
//! it corrupts that memory silently.

use std::cell::Cell;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use std::cell::OnceCell;
use std::ffi::c_int;
use std::ptr::null_mut;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use std::thread::LocalKey;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
use halo_hal::guarded_memory::GuardedRegion;

/// A fault that stopped native code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeFault {
    /// The signal raised (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` or `SIGTRAP`).
    pub signal: c_int,
    /// The address accessed, for `SIGSEGV` and `SIGBUS`.
    pub address: usize,
    /// The address of the instruction that faulted.
    pub instruction: usize,
}

impl NativeFault {
    /// What happened, in words: "SIGSEGV: invalid access to address 0x10 at instruction 0x7f...".
    pub fn describe(&self) -> String {
        let at = self.instruction;
        match self.signal {
            libc::SIGSEGV => format!(
                "SIGSEGV: invalid access to address {:#x} at instruction {at:#x}",
                self.address
            ),
            libc::SIGBUS => format!(
                "SIGBUS: bad access to address {:#x} at instruction {at:#x}",
                self.address
            ),
            libc::SIGILL => format!("SIGILL: illegal instruction at {at:#x}"),
            libc::SIGFPE => format!("SIGFPE: arithmetic fault at instruction {at:#x}"),
            libc::SIGTRAP => format!("SIGTRAP: breakpoint at instruction {at:#x}"),
            signal => format!("signal {signal} at instruction {at:#x}"),
        }
    }
}

/// What the trampoline and the handler share for one call: the stack to resume on (written by the
/// trampoline) and the fault (written by the handler; `signal` 0 while there is none).
#[repr(C)]
struct Recovery {
    stack: usize,
    signal: c_int,
    address: usize,
    instruction: usize,
}

thread_local! {
    /// The call the thread is in, if any. Const-initialized and without a destructor, so the
    /// signal handler may read it.
    static GUARD: Cell<*mut Recovery> = const { Cell::new(null_mut()) };
    /// The thread's stack for native code, mapped at its first call (`None` when mapping failed:
    /// calls then run on the thread's own stack).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    static NATIVE_STACK: OnceCell<Option<GuardedRegion>> = const { OnceCell::new() };
    /// The thread's page for what calls hand native code by pointer, mapped at first use.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    static ARGUMENT_PAGE: OnceCell<Option<GuardedRegion>> = const { OnceCell::new() };
    /// Whether a call of this thread has its arguments on the page now.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    static ARGUMENT_PAGE_IN_USE: Cell<bool> = const { Cell::new(false) };
    /// Whether the thread is running on its native stack, so a nested call stays where it is.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    static ON_NATIVE_STACK: Cell<bool> = const { Cell::new(false) };
    /// The thread's FS base as the fault handler finds it, recorded at its first call.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    static THREAD_POINTER: Option<crate::thread_pointer::Registration> = crate::thread_pointer::register();
}

/// Inaccessible address space at each end of a thread's native stack and argument page.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const GUARD_BYTES: usize = 64 << 10;
/// Room on a native stack for the deepest kernel: IREE limits a kernel's stack allocations to
/// tens of KiB.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const NATIVE_STACK_BYTES: usize = 4 << 20;
/// Room for what a call hands native code by pointer ([`on_argument_page`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const ARGUMENT_BYTES: usize = 16 << 10;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
/// The stack top for a call from this thread now: its native stack's, or 0 (stay on the current
/// stack) when the thread is on it already or it could not be mapped.
fn native_stack_top() -> usize {
    if ON_NATIVE_STACK.get() {
        return 0;
    }
    // The thread's first call records its thread pointer, so the handler can undo a kernel's
    // `wrfsbase`.
    let record_thread_pointer = || {
        let _ = THREAD_POINTER.try_with(|_| ());
    };
    region_end(&NATIVE_STACK, NATIVE_STACK_BYTES, record_thread_pointer).unwrap_or(0)
}

/// The end of this thread's region in `region`, mapped with `usable` bytes at first use (after
/// `first_use` runs); `None` when it cannot be mapped or the thread is ending.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn region_end(
    region: &'static LocalKey<OnceCell<Option<GuardedRegion>>>,
    usable: usize,
    first_use: impl FnOnce(),
) -> Option<usize> {
    region
        .try_with(|region| {
            region
                .get_or_init(|| {
                    first_use();
                    GuardedRegion::map(GUARD_BYTES, usable, GUARD_BYTES).ok()
                })
                .as_ref()
                .map(GuardedRegion::end)
        })
        .ok()
        .flatten()
}

/// Moves `value` to this thread's argument page and runs `body` with a pointer to it there; the
/// value sits at the page's end, below a guard region. Kernels get pointers to their dispatch
/// and workgroup state, and a damaged one writing through them then faults on the guards
/// instead of overwriting the caller's stack. Where the page is in use (a nested call), cannot
/// be mapped or is too small for `T`, `body` gets a pointer to a copy on the caller's stack.
///
/// What native code wrote there is the body's to read through the pointer, field by field: it
/// may have left bits that are no valid `T`.
pub fn on_argument_page<T: Copy, R>(value: T, body: impl FnOnce(*mut T) -> R) -> R {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let fits = size_of::<T>() <= ARGUMENT_BYTES && align_of::<T>() <= 4096;
        let end = (fits && !ARGUMENT_PAGE_IN_USE.get())
            .then(|| region_end(&ARGUMENT_PAGE, ARGUMENT_BYTES, || {}))
            .flatten();
        if let Some(end) = end {
            let place = ((end - size_of::<T>()) & !(align_of::<T>() - 1)) as *mut T;
            // SAFETY: `place` is aligned for `T` and its bytes lie in this thread's argument
            // page, which nothing else uses now (the in-use flag keeps nested calls off it).
            unsafe { place.write(value) };
            ARGUMENT_PAGE_IN_USE.set(true);
            let _free = ArgumentPageInUse;
            return body(place);
        }
    }
    let mut value = value;
    body(&mut value)
}

/// Marks the thread's argument page free again when dropped, also when the body panics.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
struct ArgumentPageInUse;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
impl Drop for ArgumentPageInUse {
    fn drop(&mut self) {
        ARGUMENT_PAGE_IN_USE.set(false);
    }
}

/// Calls native code `function(a, b, c)` (System V arguments in registers, one integer result)
/// with faults inside it returned as [`NativeFault`].
///
/// # Safety
/// As calling `function` directly with these arguments: it must be a function of at most three
/// integer or pointer arguments that returns an integer or pointer, and what it may touch must
/// be alive for the call.
pub unsafe fn call(function: usize, arguments: [usize; 3]) -> Result<usize, NativeFault> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let mut recovery = Recovery {
            stack: 0,
            signal: 0,
            address: 0,
            instruction: 0,
        };
        let recovery: *mut Recovery = &mut recovery;
        let outer = GUARD.replace(recovery);
        let stack = native_stack_top();
        let outer_on_native_stack = ON_NATIVE_STACK.replace(ON_NATIVE_STACK.get() || stack != 0);
        let [a, b, c] = arguments;
        // SAFETY: the caller's contract covers `function` and its arguments; the trampoline
        // preserves the callee-saved registers, writes only `recovery.stack`, and runs the call
        // on `stack`, the top of this thread's native stack, which nothing else uses now.
        let result = unsafe { halo_guarded_native_call(function, a, b, c, recovery, stack) };
        ON_NATIVE_STACK.set(outer_on_native_stack);
        GUARD.set(outer);
        // SAFETY: `recovery` points at the local above, which the handler wrote only while this
        // thread was stopped inside the call.
        let recovery = unsafe { &*recovery };
        if recovery.signal != 0 {
            return Err(NativeFault {
                signal: recovery.signal,
                address: recovery.address,
                instruction: recovery.instruction,
            });
        }
        Ok(result)
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        type Native = unsafe extern "C" fn(usize, usize, usize) -> usize;
        // SAFETY: the caller guarantees `function` has (a prefix of) this signature.
        let function = unsafe { std::mem::transmute::<usize, Native>(function) };
        let [a, b, c] = arguments;
        // SAFETY: as above.
        Ok(unsafe { function(a, b, c) })
    }
}

/// Runs host code that native code called (an import) with the guard lifted, so that a fault
/// there is not recovered by abandoning Rust frames.
pub fn unguarded<R>(body: impl FnOnce() -> R) -> R {
    // The native caller may have left flags that Rust code must not run with. The trap flag is
    // not among them here: it would already have trapped inside the guarded call.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    clear_left_flags();
    let outer = GUARD.replace(null_mut());
    let result = body();
    GUARD.set(outer);
    result
}

/// Installs the fault handler once per process (before the first library's code runs).
pub fn install() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    handler::install();
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
unsafe extern "C" {
    /// The trampoline: calls `function(a, b, c)` after storing its stack pointer in
    /// `recovery.stack`, on the stack that starts at `stack` (0: on the current one).
    fn halo_guarded_native_call(
        function: usize,
        a: usize,
        b: usize,
        c: usize,
        recovery: *mut Recovery,
        stack: usize,
    ) -> usize;
    /// Where a faulted call resumes: the trampoline's epilogue.
    fn halo_guarded_native_return();
}

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
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
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
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const CONTROL_BITS: u32 = 0xffc0;

/// The flags native code may leave set that Rust code must not run with: trap (`TF`),
/// direction (`DF`) and alignment check (`AC`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const LEFT_FLAGS: i32 = 0x100 | 0x400 | 0x4_0000;

/// Clears [`LEFT_FLAGS`] on this thread.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn clear_left_flags() {
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

/// The stack pointer the trampoline recorded for the thread's current guarded call: where it
/// returns to once native code has returned.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
extern "C" fn stack_of_current_call() -> usize {
    let recovery = GUARD.get();
    // SAFETY: `call` sets the guard to its live record around the trampoline, and `unguarded`
    // puts it back before native code resumes, so after native code returns it is this call's.
    unsafe { (*recovery).stack }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod handler {
    use super::{halo_guarded_native_return, GUARD};
    use std::ffi::{c_int, c_void};
    use std::ptr::null_mut;
    use std::sync::{Once, OnceLock};

    const SIGNALS: [c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP];

    /// The actions in place before halo's, per signal of `SIGNALS`, to pass other faults on to.
    static PREVIOUS: OnceLock<[libc::sigaction; SIGNALS.len()]> = OnceLock::new();

    pub(super) fn install() {
        // `Once` holds back other loading threads until the handler is in; the previous actions
        // are stored before it goes in, so a fault elsewhere meanwhile still finds them.
        static INSTALLED: Once = Once::new();
        INSTALLED.call_once(|| {
            PREVIOUS.get_or_init(|| SIGNALS.map(current_action));
            for signal in SIGNALS {
                // SAFETY: an all-zero `sigaction` is a valid value (empty mask, no flags).
                let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
                action.sa_sigaction = on_fault as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
                // On the thread's alternate stack where it has one, so a kernel's stack overflow
                // is recovered too.
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                // SAFETY: `action` is initialised and `signal` is a valid signal number.
                unsafe { libc::sigaction(signal, &action, null_mut()) };
            }
        });
    }

    fn current_action(signal: c_int) -> libc::sigaction {
        // SAFETY: an all-zero `sigaction` is valid, and a null new action only reads the old.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut action);
            action
        }
    }

    extern "C" fn on_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
        // The kernel clears the trap and direction flags for a handler but not the
        // alignment-check flag: set by native code, it would fault the handler's own accesses.
        super::clear_left_flags();
        // Before the first thread-local access: a kernel may have moved the thread pointer.
        crate::thread_pointer::restore();
        let recovery = GUARD.get();
        // Only faults the CPU raised (a positive `si_code`), not signals sent by a process.
        // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
        let raised = !info.is_null() && unsafe { (*info).si_code } > 0;
        if recovery.is_null() || context.is_null() || !raised {
            forward(signal, info, context);
            return;
        }
        GUARD.set(null_mut());
        // SAFETY: `context` is the interrupted thread's `ucontext_t`, and `recovery` the live
        // record of the call this thread is inside (set and cleared around the trampoline).
        unsafe {
            let registers = &mut (*context.cast::<libc::ucontext_t>()).uc_mcontext.gregs;
            (*recovery).signal = signal;
            (*recovery).address = (*info).si_addr() as usize;
            (*recovery).instruction = registers[libc::REG_RIP as usize] as usize;
            registers[libc::REG_RSP as usize] = (*recovery).stack as i64;
            registers[libc::REG_RIP as usize] = halo_guarded_native_return as *const () as usize as i64;
            registers[libc::REG_EFL as usize] &= !i64::from(super::LEFT_FLAGS);
        }
    }

    /// Hands a fault outside native code to the action before halo's. Where that was the default
    /// (or to ignore it), the default is put back: the faulting instruction runs again and ends
    /// the process as it would have without halo.
    fn forward(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
        let previous = SIGNALS
            .iter()
            .position(|&s| s == signal)
            .and_then(|index| Some(PREVIOUS.get()?[index]));
        match previous {
            Some(action) if action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN => {
                if action.sa_flags & libc::SA_SIGINFO != 0 {
                    type Handler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);
                    // SAFETY: with `SA_SIGINFO` the field holds a three-argument handler.
                    let handler = unsafe { std::mem::transmute::<usize, Handler>(action.sa_sigaction) };
                    handler(signal, info, context);
                } else {
                    type Handler = extern "C" fn(c_int);
                    // SAFETY: without `SA_SIGINFO` the field holds a one-argument handler.
                    let handler = unsafe { std::mem::transmute::<usize, Handler>(action.sa_sigaction) };
                    handler(signal);
                }
            }
            _ => {
                // SAFETY: an all-zero `sigaction` with `SIG_DFL` (0) is the default action.
                unsafe {
                    let default: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(signal, &default, null_mut());
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    extern "C" fn add(a: usize, b: usize, c: usize) -> usize {
        a + b + c
    }

    /// Stores to the address it is given.
    extern "C" fn store_to(address: usize, _: usize, _: usize) -> usize {
        // SAFETY: the store faults by design (the tests pass unmapped addresses) and the guard
        // turns that into an error; assembly is opaque to the compiler, so no Rust assumption
        // rests on the store.
        unsafe { std::arch::asm!("mov qword ptr [{0}], 0", in(reg) address) };
        0
    }

    extern "C" fn breakpoint(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: `int3` raises SIGTRAP, which the guard turns into an error.
        unsafe { std::arch::asm!("int3") };
        0
    }

    extern "C" fn illegal(_: usize, _: usize, _: usize) -> usize {
        // SAFETY: `ud2` raises SIGILL, which the guard turns into an error.
        unsafe { std::arch::asm!("ud2") };
        0
    }

    extern "C" fn divide(a: usize, b: usize, _: usize) -> usize {
        let quotient: usize;
        // SAFETY: `div` by the zero the test passes raises SIGFPE (the guard's to catch).
        unsafe { std::arch::asm!("xor edx, edx", "div {0}", in(reg) b, inout("rax") a => quotient, out("rdx") _) };
        quotient
    }

    /// Calls `function` through the guard, its callee-saved registers checked afterwards by the
    /// compiler's use of them in the caller.
    fn guarded(
        function: extern "C" fn(usize, usize, usize) -> usize,
        arguments: [usize; 3],
    ) -> Result<usize, NativeFault> {
        install();
        // SAFETY: the test functions take three integers and return one.
        unsafe { call(function as usize, arguments) }
    }

    #[test]
    fn a_call_that_returns_gives_its_result() {
        assert_eq!(guarded(add, [1, 2, 3]), Ok(6));
    }

    #[test]
    fn faults_are_returned_with_the_signal_and_address_and_the_thread_goes_on() {
        let fault = guarded(store_to, [0x10, 0, 0]).unwrap_err();
        assert_eq!((fault.signal, fault.address), (libc::SIGSEGV, 0x10));
        let said = fault.describe();
        assert!(
            said.starts_with("SIGSEGV: invalid access to address 0x10 at instruction 0x"),
            "{said}"
        );

        let fault = guarded(illegal, [0, 0, 0]).unwrap_err();
        assert_eq!(fault.signal, libc::SIGILL);
        assert!(
            fault.describe().starts_with("SIGILL: illegal instruction at 0x"),
            "{}",
            fault.describe()
        );

        assert_eq!(guarded(divide, [7, 0, 0]).unwrap_err().signal, libc::SIGFPE);
        assert_eq!(guarded(breakpoint, [0, 0, 0]).unwrap_err().signal, libc::SIGTRAP);
        assert_eq!(guarded(divide, [7, 2, 0]), Ok(3));
        // Many in a row: each recovery leaves the stack and the guard as they were.
        for address in 1..200 {
            assert_eq!(guarded(store_to, [address * 8, 0, 0]).unwrap_err().address, address * 8);
            assert_eq!(guarded(add, [address, 1, 1]), Ok(address + 2));
        }
    }

    #[test]
    fn faults_on_many_threads_at_once_are_each_recovered() {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    (0..100).all(|i| {
                        guarded(store_to, [(t * 1000 + i + 1) * 8, 0, 0]).map_err(|f| f.address)
                            == Err((t * 1000 + i + 1) * 8)
                    })
                })
            })
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()));
    }

    /// Writes zeros from its stack pointer upwards until something stops it, as a damaged
    /// `rep stos` running up its stack does.
    extern "C" fn clobber_upwards(_: usize, _: usize, _: usize) -> usize {
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

    #[test]
    fn a_call_writing_up_its_stack_faults_on_the_guard_and_the_callers_frames_survive() {
        let canary = std::hint::black_box([0x5a5a_5a5a_u64; 64]);
        let fault = guarded(clobber_upwards, [0, 0, 0]).unwrap_err();
        assert_eq!(fault.signal, libc::SIGSEGV);
        assert_eq!(std::hint::black_box(canary), [0x5a5a_5a5a_u64; 64]);
        assert_eq!(guarded(add, [4, 5, 6]), Ok(15));
    }

    extern "C" fn stack_pointer(_: usize, _: usize, _: usize) -> usize {
        let pointer: usize;
        // SAFETY: reads a register.
        unsafe { std::arch::asm!("mov {0}, rsp", out(reg) pointer) };
        pointer
    }

    #[test]
    fn calls_run_on_the_threads_native_stack_and_nested_calls_stay_on_it() {
        let outer = guarded(stack_pointer, [0, 0, 0]).expect("a stack pointer");
        let top = region_end(&NATIVE_STACK, NATIVE_STACK_BYTES, || {}).expect("the thread's native stack");
        assert!((top - NATIVE_STACK_BYTES..top).contains(&outer), "{outer:#x} {top:#x}");

        /// Calls `stack_pointer` through the guard again from inside a native call, and checks
        /// its own frame is intact afterwards.
        extern "C" fn nested(_: usize, _: usize, _: usize) -> usize {
            let mine = std::hint::black_box(0x1234_usize);
            // SAFETY: `stack_pointer` takes three integers and returns one.
            let inner =
                unguarded(|| unsafe { call(stack_pointer as *const () as usize, [0, 0, 0]) }).expect("a stack pointer");
            let here = stack_pointer(0, 0, 0);
            assert_eq!(std::hint::black_box(mine), 0x1234);
            usize::from(inner < here)
        }
        assert_eq!(
            guarded(nested, [0, 0, 0]),
            Ok(1),
            "the nested call ran below its caller"
        );
    }

    /// Zeroes `count` bytes upwards from `address` with `rep stosb`, as a damaged kernel might.
    extern "C" fn fill_up_from(address: usize, count: usize, _: usize) -> usize {
        // SAFETY: the tests pass addresses whose writes fault on a guard region, which the guard
        // turns into an error; assembly is opaque to the compiler.
        unsafe {
            std::arch::asm!("rep stosb", inout("rdi") address => _, inout("rcx") count => _, in("al") 0u8);
        }
        0
    }

    #[test]
    fn arguments_sit_at_the_end_of_the_threads_argument_page_and_nested_ones_stay_on_the_stack() {
        let canary = std::hint::black_box([0x5a5a_5a5a_u64; 64]);
        on_argument_page([7u64; 3], |outer| {
            let end = region_end(&ARGUMENT_PAGE, ARGUMENT_BYTES, || {}).expect("the argument page");
            assert_eq!(outer as usize + 24, end, "the value ends at the page's end");
            // SAFETY: `outer` points at the value just moved there.
            assert_eq!(unsafe { outer.read() }, [7; 3]);
            on_argument_page(9u32, |inner| {
                let inner = inner as usize;
                assert!(!(end - ARGUMENT_BYTES..end).contains(&inner), "{inner:#x}");
            });
            let fault = guarded(fill_up_from, [outer as usize, 1 << 20, 0]).unwrap_err();
            assert_eq!((fault.signal, fault.address), (libc::SIGSEGV, end));
        });
        assert_eq!(std::hint::black_box(canary), [0x5a5a_5a5a_u64; 64]);
        on_argument_page(1u8, |again| {
            let end = region_end(&ARGUMENT_PAGE, ARGUMENT_BYTES, || {});
            assert_eq!(Some(again as usize + 1), end, "the page is free again after the call");
        });
    }

    // Two native functions written in assembly, so no Rust prologue touches the registers first:
    // one returns the callee-saved registers it was handed, ORed together; the other returns
    // with `rbx` and `rbp` changed, as damaged code may.
    std::arch::global_asm!(
        ".text",
        ".p2align 4",
        "halo_test_callee_saved_registers:",
        "mov rax, rbx",
        "or rax, rbp",
        "or rax, r12",
        "or rax, r13",
        "or rax, r14",
        "or rax, r15",
        "ret",
        ".p2align 4",
        "halo_test_changes_rbx_and_rbp:",
        "mov ebx, 16",
        "mov ebp, 32",
        "xor eax, eax",
        "ret",
    );
    unsafe extern "C" {
        fn halo_test_callee_saved_registers();
        fn halo_test_changes_rbx_and_rbp();
    }

    #[test]
    fn native_code_is_handed_no_pointer_into_rust_memory_and_may_return_with_any_register() {
        install();
        let probe = halo_test_callee_saved_registers as *const () as usize;
        // SAFETY: the probe takes no arguments, touches no memory and returns an integer.
        let handed = unsafe { call(probe, [1, 2, 3]) };
        assert_eq!(handed, Ok(0), "callee-saved registers are zero");
        let canary = std::hint::black_box([0x5a5a_5a5a_u64; 16]);
        let careless = halo_test_changes_rbx_and_rbp as *const () as usize;
        // SAFETY: the function touches no memory; it only breaks the register convention.
        assert_eq!(unsafe { call(careless, [0, 0, 0]) }, Ok(0));
        assert_eq!(std::hint::black_box(canary), [0x5a5a_5a5a_u64; 16]);
        assert_eq!(guarded(add, [1, 2, 3]), Ok(6));
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

    #[test]
    fn host_code_a_call_makes_runs_unguarded() {
        extern "C" fn calls_host(_: usize, _: usize, _: usize) -> usize {
            unguarded(|| GUARD.get().is_null()) as usize
        }
        assert_eq!(guarded(calls_host, [0, 0, 0]), Ok(1));
        assert!(GUARD.get().is_null(), "the guard is lifted after the call");
    }
}
