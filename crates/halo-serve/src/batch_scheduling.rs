//! The server's I/O threads are batch work for Linux's scheduler (`SCHED_BATCH`), so that
//! waking one does not take the core from the thread running.
//!
//! On a busy core a request passes between an I/O thread and a computing thread twice. Under
//! the default policy each wake-up preempts the running thread on the spot: two thread switches
//! per request, about a tenth of a small model's time on one core. A computing thread that
//! wakes a batch I/O thread runs on to its next queued call, and the I/O thread, when its turn
//! comes, answers and reads many requests in one pass. The computing threads keep the default
//! policy, so a call handed to an idle one starts at once (as batch threads they measured no
//! fewer switches under load, and a slower start for a lone request). Nice values and CPU
//! shares are unchanged.

/// How the scheduler treats a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The default (`SCHED_OTHER`): a woken thread may preempt the running one.
    Normal,
    /// `SCHED_BATCH`: a woken thread waits for the running one's turn to end.
    Batch,
}

/// Sets the calling thread's policy; on other systems, or when refused, leaves it be.
pub fn set_current_thread(policy: Policy) {
    #[cfg(target_os = "linux")]
    {
        let code = match policy {
            Policy::Normal => libc::SCHED_OTHER,
            Policy::Batch => libc::SCHED_BATCH,
        };
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 names the calling
        // thread, and both policies take static priority 0 and need no privilege.
        let refused = unsafe { libc::sched_setscheduler(0, code, &param) } != 0;
        if refused {
            tracing::debug!(?policy, error = %std::io::Error::last_os_error(), "scheduling policy refused");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = policy;
}

/// The calling thread's policy (`Normal` for any but batch, and on other systems).
pub fn current_thread() -> Policy {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getscheduler reads the calling thread's (pid 0) policy; no memory is
        // passed.
        if unsafe { libc::sched_getscheduler(0) } == libc::SCHED_BATCH {
            return Policy::Batch;
        }
    }
    Policy::Normal
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_takes_the_policy_it_is_given() {
        std::thread::spawn(|| {
            assert_eq!(current_thread(), Policy::Normal);
            set_current_thread(Policy::Batch);
            assert_eq!(current_thread(), Policy::Batch);
            set_current_thread(Policy::Normal);
            assert_eq!(current_thread(), Policy::Normal);
        })
        .join()
        .unwrap();
    }
}
