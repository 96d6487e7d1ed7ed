//! Whether the caller on whose behalf this thread works has given up on the work.
//!
//! A program's call can be cancelled (Ctrl-C in Python, a server request past its deadline), and
//! then must not stay blocked on a fence nothing may ever signal (a hung device, a damaged
//! program): in `hal.fence.await`, or in a synchronous driver (`local-sync`) doing the program's
//! queue operations on the thread that runs it. Neither the native-function nor the device API
//! carries a token: the VM marks the thread for the time it runs a cancellable call
//! ([`on_behalf_of`]), and those waits ask [`has_given_up`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static GIVEN_UP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread on behalf of a caller who gives up by setting `given_up`.
pub fn on_behalf_of<T>(given_up: Arc<AtomicBool>, work: impl FnOnce() -> T) -> T {
    let outer = GIVEN_UP.with(|flag| flag.replace(Some(given_up)));
    // Restored on unwinding too, so a panic caught further up leaves no stale caller behind.
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            GIVEN_UP.with(|flag| *flag.borrow_mut() = outer);
        }
    }
    let _restore = Restore(outer);
    work()
}

/// Whether the caller this thread works for (see [`on_behalf_of`]) has given up; false outside
/// any such call.
pub fn has_given_up() -> bool {
    GIVEN_UP.with(|flag| flag.borrow().as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_holds_inside_the_call_only_and_nests() {
        assert!(!has_given_up());
        let (outer, inner) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
        on_behalf_of(outer.clone(), || {
            assert!(has_given_up());
            on_behalf_of(inner.clone(), || assert!(!has_given_up()));
            assert!(has_given_up());
        });
        assert!(!has_given_up());
        std::thread::spawn(move || on_behalf_of(outer, || assert!(has_given_up())))
            .join()
            .unwrap();
    }
}
