//! Each thread's thread pointer (through which Rust and libc reach thread-local storage: FS base
//! on x86-64, `TPIDR_EL0` on AArch64), kept where the fault handler finds it without
//! thread-local storage.
//!
//! User code can set the thread pointer directly (`wrfsbase` where Linux allows it, `msr
//! tpidr_el0` always), and one damaged byte can turn a kernel's instruction into such a write
//! (`scripts/mutate-modules --seed 1131`: an MLP kernel). Every thread-local access after it
//! then reads the wrong memory or faults, the fault handler's own first among them, and the
//! process died inside its handler. Threads that call native code record their thread pointer
//! here at their first call; the handler puts it back before it touches thread-local storage,
//! and the trampoline checks the thread pointer after each call, so that a moved one faults into
//! the handler (see `native_faults`).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::arch::guarded_call::{
    current_tid, set_thread_pointer, thread_pointer, thread_pointer_known_movable, thread_pointer_movable,
};

/// How many threads' pointers are kept; threads beyond go unprotected.
const SLOTS: usize = 1024;

/// One thread's record: its id (0: a free slot) and its thread pointer.
struct Slot {
    tid: AtomicU32,
    pointer: AtomicUsize,
}

static THREADS: [Slot; SLOTS] = [const {
    Slot {
        tid: AtomicU32::new(0),
        pointer: AtomicUsize::new(0),
    }
}; SLOTS];

/// Whether native code can move the thread pointer here.
pub(crate) fn usable() -> bool {
    thread_pointer_movable()
}

/// The calling thread's slot while it lives: freed when the thread ends.
pub(crate) struct Registration {
    slot: usize,
}

impl Drop for Registration {
    fn drop(&mut self) {
        THREADS[self.slot].tid.store(0, Ordering::Release);
    }
}

/// Records the calling thread's thread pointer; `None` where it cannot change or every slot is
/// taken.
pub(crate) fn register() -> Option<Registration> {
    if !usable() {
        return None;
    }
    let tid = current_tid();
    let pointer = thread_pointer();
    let slot = THREADS.iter().position(|slot| {
        slot.tid
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    THREADS[slot].pointer.store(pointer, Ordering::Release);
    Some(Registration { slot })
}

/// Puts the calling thread's recorded thread pointer back if it changed. Async-signal-safe: it
/// uses no thread-local storage, no lock and no allocation.
pub(crate) fn restore() {
    if !thread_pointer_known_movable() {
        return;
    }
    let tid = current_tid();
    let Some(slot) = THREADS.iter().find(|slot| slot.tid.load(Ordering::Acquire) == tid) else {
        return;
    };
    let recorded = slot.pointer.load(Ordering::Acquire);
    if recorded != 0 && thread_pointer() != recorded {
        // SAFETY: `recorded` is this thread's own thread pointer, read when it registered.
        unsafe { set_thread_pointer(recorded) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_thread_pointer_is_put_back_and_a_slot_is_freed_with_its_thread() {
        if !usable() {
            println!("skipped: a_changed_thread_pointer_is_put_back: native code cannot move it here");
            return;
        }
        std::thread::spawn(|| {
            let registration = register().expect("a free slot");
            let pointer = thread_pointer();
            // A pointer no thread has: `restore` must put the real one back before anything
            // touches thread-local storage.
            // SAFETY: nothing between the write and `restore` uses thread-local storage.
            unsafe { set_thread_pointer(0x1000) };
            restore();
            assert_eq!(thread_pointer(), pointer);
            let slot = registration.slot;
            assert_eq!(THREADS[slot].tid.load(Ordering::Relaxed), current_tid());
            drop(registration);
            assert_eq!(THREADS[slot].tid.load(Ordering::Relaxed), 0);
        })
        .join()
        .unwrap();
    }
}
