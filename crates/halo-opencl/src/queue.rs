//! The device's queue: each submission waits for its fence on the host timelines (a callback,
//! never a blocked thread), then runs on the device's submission thread, which issues its
//! commands onto the in-order OpenCL command queue, waits for them and signals. A submission
//! whose waits are met when it is made, with nothing else pending, runs on the calling thread
//! instead: handing it over would only add the submission thread's wake-up.
//!
//! Submissions run in the order their waits are met, so one that waits for a later one is no
//! deadlock.

use halo_hal::{Error, Fence, Result, Timeout};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

/// What a submission does once its waits are met.
pub(crate) type Work = Box<dyn FnOnce() -> Result<()> + Send>;

enum Message {
    Run {
        waited: Result<()>,
        wait: Fence,
        signal: Fence,
        work: Work,
    },
    Stop,
}

/// Submissions not finished yet (waiting or running).
#[derive(Default)]
struct Pending {
    count: Mutex<u64>,
    idle: Condvar,
}

impl Pending {
    /// Counts one submission if none is pending; whether it did.
    fn claim_idle(&self) -> bool {
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = *count == 0;
        if idle {
            *count = 1;
        }
        idle
    }

    fn add(&self) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    fn done(&self) {
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *count -= 1;
        if *count == 0 {
            self.idle.notify_all();
        }
    }
}

/// One device's submission thread.
pub(crate) struct SubmissionQueue {
    sender: Sender<Message>,
    pending: Arc<Pending>,
    thread: Option<JoinHandle<()>>,
}

impl SubmissionQueue {
    /// Starts the submission thread.
    pub(crate) fn start() -> Result<Self> {
        let (sender, receiver) = channel::<Message>();
        let pending = Arc::new(Pending::default());
        let finished = pending.clone();
        let thread = std::thread::Builder::new()
            .name("halo-opencl-queue".into())
            .spawn(move || {
                while let Ok(Message::Run {
                    waited,
                    wait,
                    signal,
                    work,
                }) = receiver.recv()
                {
                    // A semaphore runs its callbacks before its waiters can see the new value: wait
                    // for that, so no one sees this signal while a value it waited on is unseen.
                    if waited.is_ok() {
                        let _ = wait.wait(Timeout::Infinite);
                    }
                    run(waited, &signal, work);
                    finished.done();
                }
            })
            .map_err(|e| Error::resource_exhausted(format!("starting the OpenCL submission thread: {e}")))?;
        Ok(SubmissionQueue {
            sender,
            pending,
            thread: Some(thread),
        })
    }

    /// Runs `work` once `wait` is reached, then signals `signal` (or fails it with the wait's or
    /// the work's error).
    pub(crate) fn submit(&self, wait: &Fence, signal: &Fence, work: Work) {
        // Waits already met and nothing else pending: the calling thread runs it, since handing
        // it to the submission thread would cost that thread's wake-up and nothing would overlap.
        if wait.query() == Ok(true) && self.pending.claim_idle() {
            run(Ok(()), signal, work);
            self.pending.done();
            return;
        }
        self.pending.add();
        let (sender, pending, signal) = (self.sender.clone(), self.pending.clone(), signal.clone());
        let waits = wait.clone();
        wait.on_reached(move |waited| {
            let message = Message::Run {
                waited,
                wait: waits,
                signal,
                work,
            };
            if let Err(unsent) = sender.send(message) {
                if let Message::Run { signal, .. } = unsent.0 {
                    signal.fail(&Error::cancelled(
                        "the OpenCL device was destroyed before this submission's waits were met",
                    ));
                }
                pending.done();
            }
        });
    }

    /// Waits until every submission so far has finished.
    pub(crate) fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        let mut count = self.pending.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *count > 0 {
            let deadline = match timeout {
                Timeout::Infinite => None,
                Timeout::Immediate => Some(Instant::now()),
                Timeout::Deadline(deadline) => Some(deadline),
            };
            count = match deadline {
                None => self.pending.idle.wait(count).unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::deadline_exceeded(format!(
                            "{} OpenCL submissions still pending",
                            *count
                        )));
                    }
                    self.pending
                        .idle
                        .wait_timeout(count, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        Ok(())
    }
}

/// Runs one submission whose waits ended in `waited`, then signals or fails `signal`.
fn run(waited: Result<()>, signal: &Fence, work: Work) {
    let outcome = waited.and_then(|()| {
        catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| Err(Error::internal("an OpenCL submission panicked")))
    });
    match outcome {
        // A timeline failed meanwhile keeps its failure; nothing more to say.
        Ok(()) => {
            let _ = signal.signal();
        }
        Err(error) => signal.fail(&error),
    }
}

impl Drop for SubmissionQueue {
    fn drop(&mut self) {
        // Submissions already running finish; those whose waits are met later are cancelled.
        let _ = self.sender.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
