//! Each thread's thread pointer (its FS base, through which Rust and libc reach thread-local
//! storage), kept where the fault handler finds it without thread-local storage.
//!
//! Where Linux lets user code set FS directly (the `fsgsbase` instructions, Linux 5.9 and later
//! on CPUs that have them), one damaged byte can turn a kernel's instruction into `wrfsbase`
//! (`scripts/mutate-modules --seed 1131`: an MLP kernel). Every thread-local access after it
//! then reads the wrong memory or faults, the fault handler's own first among them, and the
//! process died inside its handler. Threads that call native code record their FS base here at
//! their first call; the handler puts it back before it touches thread-local storage, and the
//! trampoline checks the thread pointer after each call, so that a moved one faults into the
//! handler (see `native_faults`).

use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

/// How many threads' pointers are kept; threads beyond go unprotected.
const SLOTS: usize = 1024;

/// One thread's record: its id (0: a free slot) and its FS base.
struct Slot {
    tid: AtomicU32,
    base: AtomicUsize,
}

static THREADS: [Slot; SLOTS] = [const {
    Slot {
        tid: AtomicU32::new(0),
        base: AtomicUsize::new(0),
    }
}; SLOTS];

/// Whether user code may read and write FS (`HWCAP2_FSGSBASE`): 0 not yet known, 1 no, 2 yes.
/// Where it may not, `wrfsbase` raises `SIGILL` and the FS base cannot change under halo.
static FSGSBASE_USABLE: AtomicU8 = AtomicU8::new(0);

/// `HWCAP2_FSGSBASE` in the auxiliary vector's `AT_HWCAP2`.
const HWCAP2_FSGSBASE: u64 = 1 << 1;

/// Whether the `fsgsbase` instructions may run here.
pub(crate) fn usable() -> bool {
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

/// The calling thread's slot while it lives: freed when the thread ends.
pub(crate) struct Registration {
    slot: usize,
}

impl Drop for Registration {
    fn drop(&mut self) {
        THREADS[self.slot].tid.store(0, Ordering::Release);
    }
}

/// Records the calling thread's FS base; `None` where FS cannot change or every slot is taken.
pub(crate) fn register() -> Option<Registration> {
    if !usable() {
        return None;
    }
    let tid = current_tid();
    let base = fs_base();
    let slot = THREADS.iter().position(|slot| {
        slot.tid
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    THREADS[slot].base.store(base, Ordering::Release);
    Some(Registration { slot })
}

/// Puts the calling thread's recorded FS base back if it changed. Async-signal-safe: it uses no
/// thread-local storage, no lock and no allocation.
pub(crate) fn restore() {
    if FSGSBASE_USABLE.load(Ordering::Relaxed) != 2 {
        return;
    }
    let tid = current_tid();
    let Some(slot) = THREADS.iter().find(|slot| slot.tid.load(Ordering::Acquire) == tid) else {
        return;
    };
    let recorded = slot.base.load(Ordering::Acquire);
    if recorded != 0 && fs_base() != recorded {
        // SAFETY: `recorded` is this thread's own FS base, read when it registered.
        unsafe { std::arch::asm!("wrfsbase {0}", in(reg) recorded, options(nostack)) };
    }
}

/// The calling thread's kernel id, by a raw system call (libc's wrapper may reach errno, a
/// thread-local).
fn current_tid() -> u32 {
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

/// The calling thread's FS base; only where [`usable`].
fn fs_base() -> usize {
    let base: usize;
    // SAFETY: `rdfsbase` only reads the register, and runs only where the kernel allows it.
    unsafe { std::arch::asm!("rdfsbase {0}", out(reg) base, options(nostack, nomem)) };
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_fs_base_is_put_back_and_a_slot_is_freed_with_its_thread() {
        if !usable() {
            println!("skipped: a_changed_fs_base_is_put_back: the fsgsbase instructions are not usable here");
            return;
        }
        std::thread::spawn(|| {
            let registration = register().expect("a free slot");
            let base = fs_base();
            // A base no thread has: `restore` must put the real one back before anything
            // touches thread-local storage.
            // SAFETY: nothing between the write and `restore` uses thread-local storage.
            unsafe { std::arch::asm!("wrfsbase {0}", in(reg) 0x1000usize, options(nostack)) };
            restore();
            assert_eq!(fs_base(), base);
            let slot = registration.slot;
            assert_eq!(THREADS[slot].tid.load(Ordering::Relaxed), current_tid());
            drop(registration);
            assert_eq!(THREADS[slot].tid.load(Ordering::Relaxed), 0);
        })
        .join()
        .unwrap();
    }
}
