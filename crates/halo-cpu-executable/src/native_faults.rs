//! Faults in compiled code (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP`) returned as errors
//! instead of ending the process (Linux on x86-64 and AArch64; elsewhere calls are direct).
//!
//! Compiled kernels check no bounds. A module whose machine code, push constants or workgroup
//! counts were damaged can make one read or write outside its memory, run an illegal instruction,
//! divide by zero (x86-64) or jump into the trap padding between functions; the CPU then raises a
//! signal on the thread running it. Every call into a library's code goes through a small
//! trampoline (each architecture's, in `arch/`) that records its stack. The signal handler,
//! installed when the first library loads, sees that the faulting thread is inside such a call
//! and resumes it at the trampoline's return with the fault recorded, so the call fails with an
//! error naming the kernel. Only native frames are abandoned: host imports (Rust a kernel calls
//! back into) run with the guard lifted ([`unguarded`]), so no Rust frame is ever skipped. Faults
//! anywhere else go on to the handler installed before halo's (Rust's stack-overflow report,
//! Python's `faulthandler`), or to the default action.
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
#[cfg(guarded_calls)]
use std::cell::OnceCell;
use std::ffi::c_int;
use std::ptr::null_mut;
#[cfg(guarded_calls)]
use std::thread::LocalKey;

#[cfg(guarded_calls)]
use halo_hal::guarded_memory::GuardedRegion;

#[cfg(guarded_calls)]
use crate::arch::guarded_call;

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
/// trampoline, at offset 0) and the fault (written by the handler; `signal` 0 while there is
/// none).
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
    #[cfg(guarded_calls)]
    static NATIVE_STACK: OnceCell<Option<GuardedRegion>> = const { OnceCell::new() };
    /// The thread's page for what calls hand native code by pointer, mapped at first use.
    #[cfg(guarded_calls)]
    static ARGUMENT_PAGE: OnceCell<Option<GuardedRegion>> = const { OnceCell::new() };
    /// Whether a call of this thread has its arguments on the page now.
    #[cfg(guarded_calls)]
    static ARGUMENT_PAGE_IN_USE: Cell<bool> = const { Cell::new(false) };
    /// Whether the thread is running on its native stack, so a nested call stays where it is.
    #[cfg(guarded_calls)]
    static ON_NATIVE_STACK: Cell<bool> = const { Cell::new(false) };
    /// The thread's thread pointer as the fault handler finds it, recorded at its first call.
    #[cfg(guarded_calls)]
    static THREAD_POINTER: Option<crate::thread_pointer::Registration> = crate::thread_pointer::register();
}

/// Inaccessible address space at each end of a thread's native stack and argument page.
#[cfg(guarded_calls)]
const GUARD_BYTES: usize = 64 << 10;
/// Room on a native stack for the deepest kernel: IREE limits a kernel's stack allocations to
/// tens of KiB.
#[cfg(guarded_calls)]
const NATIVE_STACK_BYTES: usize = 4 << 20;
/// Room for what a call hands native code by pointer ([`on_argument_page`]).
#[cfg(guarded_calls)]
const ARGUMENT_BYTES: usize = 16 << 10;

#[cfg(guarded_calls)]
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
#[cfg(guarded_calls)]
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
    #[cfg(guarded_calls)]
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
#[cfg(guarded_calls)]
struct ArgumentPageInUse;

#[cfg(guarded_calls)]
impl Drop for ArgumentPageInUse {
    fn drop(&mut self) {
        ARGUMENT_PAGE_IN_USE.set(false);
    }
}

/// Calls native code `function(a, b, c)` (the C calling convention's first three integer
/// arguments, one integer result) with faults inside it returned as [`NativeFault`].
///
/// # Safety
/// As calling `function` directly with these arguments: it must be a function of at most three
/// integer or pointer arguments that returns an integer or pointer, and what it may touch must
/// be alive for the call.
pub unsafe fn call(function: usize, arguments: [usize; 3]) -> Result<usize, NativeFault> {
    #[cfg(guarded_calls)]
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
    #[cfg(not(guarded_calls))]
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
    #[cfg(guarded_calls)]
    guarded_call::clear_left_flags();
    let outer = GUARD.replace(null_mut());
    let result = body();
    GUARD.set(outer);
    result
}

/// Installs the fault handler once per process (before the first library's code runs).
pub fn install() {
    #[cfg(guarded_calls)]
    handler::install();
}

// Each architecture's `guarded_call` module defines these two symbols in assembly.
#[cfg(guarded_calls)]
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

/// The stack pointer the trampoline recorded for the thread's current guarded call: where it
/// returns to once native code has returned.
#[cfg(guarded_calls)]
pub(crate) extern "C" fn stack_of_current_call() -> usize {
    let recovery = GUARD.get();
    // SAFETY: `call` sets the guard to its live record around the trampoline, and `unguarded`
    // puts it back before native code resumes, so after native code returns it is this call's.
    unsafe { (*recovery).stack }
}

#[cfg(guarded_calls)]
mod handler {
    use super::{guarded_call, GUARD};
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
        guarded_call::clear_left_flags();
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
            let resume = super::halo_guarded_native_return as *const () as usize;
            (*recovery).signal = signal;
            (*recovery).address = (*info).si_addr() as usize;
            (*recovery).instruction =
                guarded_call::redirect(context.cast::<libc::ucontext_t>(), (*recovery).stack, resume);
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

#[cfg(all(test, guarded_calls))]
pub(crate) mod tests {
    use super::*;
    use crate::arch::guarded_call::test_code::{
        breakpoint, clobber_upwards, fill_up_from, illegal, stack_pointer, store_to,
    };

    pub(crate) extern "C" fn add(a: usize, b: usize, c: usize) -> usize {
        a + b + c
    }

    /// Calls `function` through the guard, its callee-saved registers checked afterwards by the
    /// compiler's use of them in the caller.
    pub(crate) fn guarded(
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

        assert_eq!(guarded(breakpoint, [0, 0, 0]).unwrap_err().signal, libc::SIGTRAP);
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

    #[test]
    fn a_call_writing_up_its_stack_faults_on_the_guard_and_the_callers_frames_survive() {
        let canary = std::hint::black_box([0x5a5a_5a5a_u64; 64]);
        let fault = guarded(clobber_upwards, [0, 0, 0]).unwrap_err();
        assert_eq!(fault.signal, libc::SIGSEGV);
        assert_eq!(std::hint::black_box(canary), [0x5a5a_5a5a_u64; 64]);
        assert_eq!(guarded(add, [4, 5, 6]), Ok(15));
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

    unsafe extern "C" {
        /// Returns the callee-saved registers (and frame pointer) it was handed, ORed together.
        fn halo_test_callee_saved_registers();
        /// Returns 0 with callee-saved registers and the frame pointer changed, as damaged code
        /// may.
        fn halo_test_breaks_register_convention();
    }

    #[test]
    fn native_code_is_handed_no_pointer_into_rust_memory_and_may_return_with_any_register() {
        install();
        let probe = halo_test_callee_saved_registers as *const () as usize;
        // SAFETY: the probe takes no arguments, touches no memory and returns an integer.
        let handed = unsafe { call(probe, [1, 2, 3]) };
        assert_eq!(handed, Ok(0), "callee-saved registers are zero");
        let canary = std::hint::black_box([0x5a5a_5a5a_u64; 16]);
        let careless = halo_test_breaks_register_convention as *const () as usize;
        // SAFETY: the function touches no memory; it only breaks the register convention.
        assert_eq!(unsafe { call(careless, [0, 0, 0]) }, Ok(0));
        assert_eq!(std::hint::black_box(canary), [0x5a5a_5a5a_u64; 16]);
        assert_eq!(guarded(add, [1, 2, 3]), Ok(6));
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
