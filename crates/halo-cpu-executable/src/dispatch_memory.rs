//! The memory of the dispatch running on this thread, for host imports that take pointers from
//! kernels.
//!
//! A kernel that calls a host import (halo's own kernels, `halo-kernels`) hands it pointers it
//! computed itself. Host code runs with the fault guard lifted, so a damaged program passing a
//! wild pointer, or a read-only constant as an output, would fault in it and end the process. An
//! import therefore asks [`within_running_dispatch`] first: every byte it touches must lie in one
//! binding of the dispatch that called it, and a byte it writes in a binding that allows writes.

use std::cell::Cell;
use std::ffi::c_void;

/// The bindings of a dispatch while its workgroups run on this thread.
#[derive(Clone, Copy)]
pub(crate) struct RunningDispatch {
    pub(crate) ptrs: *const *mut c_void,
    pub(crate) lengths: *const usize,
    pub(crate) count: usize,
    /// Bit `i`: binding `i` allows writes (bindings past 63 are treated as read-only).
    pub(crate) writable: u64,
}

thread_local! {
    static RUNNING: Cell<Option<RunningDispatch>> = const { Cell::new(None) };
}

/// Marks `dispatch` as running on this thread while `body` runs.
///
/// # Safety
/// `dispatch`'s arrays hold `count` elements each and stay valid while `body` runs.
pub(crate) unsafe fn while_running<R>(dispatch: RunningDispatch, body: impl FnOnce() -> R) -> R {
    struct Restore(Option<RunningDispatch>);
    impl Drop for Restore {
        fn drop(&mut self) {
            RUNNING.with(|running| running.set(self.0));
        }
    }
    let _restore = Restore(RUNNING.with(|running| running.replace(Some(dispatch))));
    body()
}

/// Whether `bytes` bytes from `address` lie inside one binding of the dispatch running on this
/// thread (one that allows writes, when `write`). False outside a dispatch; true for no bytes.
pub fn within_running_dispatch(address: usize, bytes: usize, write: bool) -> bool {
    if bytes == 0 {
        return true;
    }
    let Some(end) = address.checked_add(bytes) else {
        return false;
    };
    let Some(dispatch) = RUNNING.with(Cell::get) else {
        return false;
    };
    (0..dispatch.count).any(|i| {
        // SAFETY: `while_running`'s caller keeps both arrays valid for `count` elements while the
        // dispatch is marked running, which it is for as long as this thread sees it.
        let (ptr, length) = unsafe { (*dispatch.ptrs.add(i) as usize, *dispatch.lengths.add(i)) };
        let writable = i < 64 && dispatch.writable & (1 << i) != 0;
        address >= ptr && end <= ptr.saturating_add(length) && (writable || !write)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bytes_inside_one_binding_pass_and_writes_only_where_allowed() {
        let (mut a, mut b) = ([0u8; 64], [0u8; 32]);
        let ptrs = [a.as_mut_ptr().cast::<c_void>(), b.as_mut_ptr().cast::<c_void>()];
        let lengths = [64usize, 32];
        let (a, b) = (ptrs[0] as usize, ptrs[1] as usize);
        assert!(!within_running_dispatch(a, 4, false), "no dispatch runs");
        let dispatch = RunningDispatch {
            ptrs: ptrs.as_ptr(),
            lengths: lengths.as_ptr(),
            count: 2,
            writable: 0b01,
        };
        // SAFETY: the arrays live until the end of the test.
        unsafe {
            while_running(dispatch, || {
                assert!(within_running_dispatch(a, 64, true));
                assert!(within_running_dispatch(a + 60, 4, false));
                assert!(!within_running_dispatch(a + 61, 4, false), "past the end");
                assert!(
                    !within_running_dispatch(a.wrapping_sub(1), 2, false),
                    "before the start"
                );
                assert!(within_running_dispatch(b, 32, false));
                assert!(!within_running_dispatch(b, 4, true), "binding 1 is read-only");
                assert!(!within_running_dispatch(usize::MAX - 1, 4, false), "wraps around");
                assert!(within_running_dispatch(0, 0, true), "no bytes");
            })
        };
        assert!(!within_running_dispatch(a, 4, false), "the dispatch ended");
    }
}
