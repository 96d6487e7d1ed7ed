//! The device's queue, with timelines built on host timepoints and OpenCL events as the GPU
//! driver design does.
//!
//! A submission runs on the device's submission thread once its waits are met, which issues its
//! commands onto the in-order OpenCL command queue, ends them with a marker event and goes on to
//! the next; the completion thread waits for each marker in turn and then signals the
//! submission's semaphores. A wait is met on the host (the semaphore has the value: a callback,
//! never a blocked thread) or on the device: a timepoint that a submission already on the queue
//! will signal is reached before anything queued after it runs, so a submission that waits only
//! on such timepoints (and reached ones) is issued at once, with no round trip through the host.
//! Its signal then fails if a semaphore it waited on failed.
//!
//! A submission whose waits are met when it is made, with nothing else pending, is issued and
//! waited for on the calling thread instead: handing it over would only add the threads'
//! wake-ups, and nothing could overlap with it.
//! Submissions run in the order their waits are met, so one that waits for a later one is no
//! deadlock.

use crate::api::InFlight;
use halo_hal::held::HeldSince;
use halo_hal::promised_timepoints::{Coverage, PromisedTimepoints};
use halo_hal::submission_count::SubmissionCount;
use halo_hal::{Error, Fence, Result, Timeout};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a submission does once its waits are met: issue its commands (`None`: it has none).
pub(crate) type Work = Box<dyn FnOnce() -> Result<Option<InFlight>> + Send>;

enum Message {
    Run {
        waited: Result<()>,
        /// Met on the device (promised by submissions already queued), not on the host.
        on_device: bool,
        wait: Fence,
        signal: Fence,
        work: Work,
    },
    Stop,
}

/// A submission issued: its commands on the queue, to signal once they have run.
struct Completion {
    issued: Result<Option<InFlight>>,
    /// When its commands went onto the queue.
    issued_at: Instant,
    wait: Fence,
    signal: Fence,
}

/// Hands `message` to the submission thread through `sender`, promising its signal when its
/// waits succeeded (one whose wait failed fails its signal instead). Promised under the table's
/// lock, so anything that counts on the promise is handed over after it and issued after it on
/// the in-order queue.
fn hand_over(
    promises: &PromisedTimepoints,
    sender: &Sender<Message>,
    message: Message,
) -> std::result::Result<(), Message> {
    let promised = match &message {
        Message::Run {
            signal, waited: Ok(()), ..
        } => signal.clone(),
        _ => Fence::new(),
    };
    promises.promise_with(&promised, || sender.send(message).map_err(|unsent| unsent.0))
}

/// Submissions not finished yet (waiting or running).
#[derive(Default)]
struct Pending {
    count: SubmissionCount,
    /// Since when the oldest issued submission has been running: the queue runs in order, so
    /// while it runs nothing behind it starts.
    front: HeldSince,
    /// When the last submission finished running, if one has.
    last_finished: Mutex<Option<Instant>>,
}

impl Pending {
    /// Counts one submission if none is pending; whether it did.
    fn claim_idle(&self) -> bool {
        self.count.add_if_idle()
    }

    /// Whether the one pending submission is the caller's.
    fn only_this(&self) -> bool {
        self.count.len() == 1
    }

    /// Waits for `in_flight`, issued at `issued_at`, marking the queue held meanwhile: from then,
    /// or from when the submission before it finished if that was later.
    fn running(&self, issued_at: Instant, in_flight: InFlight) -> Result<()> {
        let last_finished = *self.last_finished.lock().unwrap_or_else(PoisonError::into_inner);
        self.front
            .hold(last_finished.map_or(issued_at, |finished| finished.max(issued_at)));
        let outcome = in_flight.wait();
        *self.last_finished.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        self.front.release();
        outcome
    }
}

/// One device's submission and completion threads.
pub(crate) struct SubmissionQueue {
    sender: Sender<Message>,
    pending: Arc<Pending>,
    promises: Arc<PromisedTimepoints>,
    /// Submissions whose waits were met on the device, for the `opencl.queue` query.
    pub(crate) device_waits: AtomicU64,
    thread: Option<JoinHandle<()>>,
    completions: Option<JoinHandle<()>>,
}

impl SubmissionQueue {
    /// Starts the submission and completion threads.
    pub(crate) fn start() -> Result<Self> {
        let (sender, receiver) = channel::<Message>();
        let (completion_sender, completion_receiver) = channel::<Completion>();
        let pending = Arc::new(Pending::default());
        let promises = Arc::new(PromisedTimepoints::default());
        let spawn_error = |e| Error::resource_exhausted(format!("starting an OpenCL queue thread: {e}"));
        let (finished, kept) = (pending.clone(), promises.clone());
        let (running, finishing) = (pending.clone(), promises.clone());
        let completions = std::thread::Builder::new()
            .name("halo-opencl-done".into())
            .spawn(move || complete(completion_receiver, &kept, &finished))
            .map_err(spawn_error)?;
        let thread = std::thread::Builder::new()
            .name("halo-opencl-queue".into())
            .spawn(move || {
                while let Ok(Message::Run {
                    waited,
                    on_device,
                    wait,
                    signal,
                    work,
                }) = receiver.recv()
                {
                    // A semaphore runs its callbacks before its waiters can see the new value: wait
                    // for that, so no one sees this signal while a value it waited on is unseen.
                    if waited.is_ok() && !on_device {
                        let _ = wait.wait(Timeout::Infinite);
                    }
                    let issued_at = Instant::now();
                    let completion = Completion {
                        issued: run_work(waited, work),
                        issued_at,
                        wait,
                        signal,
                    };
                    // With nothing else pending there is nothing to overlap: finishing here
                    // saves the completion thread's wake-up.
                    if running.only_this() {
                        finish(completion, &finishing, &running);
                    } else {
                        let _ = completion_sender.send(completion);
                    }
                }
            })
            .map_err(spawn_error)?;
        Ok(SubmissionQueue {
            sender,
            pending,
            promises,
            device_waits: AtomicU64::new(0),
            thread: Some(thread),
            completions: Some(completions),
        })
    }

    /// Issues `work` once `wait` is reached (on the host or on the device), then signals
    /// `signal` once its commands have run (or fails it with the wait's or the work's error).
    pub(crate) fn submit(&self, wait: &Fence, signal: &Fence, work: Work) {
        // Waits already met and nothing else pending: the calling thread issues it and waits
        // for it, since handing it to the queue's threads would cost their wake-ups and nothing
        // else could overlap with it.
        if wait.query() == Ok(true) && self.pending.claim_idle() {
            let issued_at = Instant::now();
            let issued = run_work(Ok(()), work);
            finish(
                Completion {
                    issued,
                    issued_at,
                    wait: wait.clone(),
                    signal: signal.clone(),
                },
                &self.promises,
                &self.pending,
            );
            return;
        }
        self.pending.count.add();
        let coverage = self.promises.cover(wait).unwrap_or(Coverage::Neither);
        if coverage != Coverage::Neither {
            if coverage == Coverage::Promised {
                self.device_waits.fetch_add(1, Ordering::Relaxed);
            }
            let message = Message::Run {
                waited: Ok(()),
                on_device: true,
                wait: wait.clone(),
                signal: signal.clone(),
                work,
            };
            if let Err(unsent) = hand_over(&self.promises, &self.sender, message) {
                cancel(unsent, &self.pending);
            }
            return;
        }
        let (sender, pending, promises) = (self.sender.clone(), self.pending.clone(), self.promises.clone());
        let (waits, signal) = (wait.clone(), signal.clone());
        // Once the waits are published, so that nobody sees this work's signal before them.
        wait.on_published(move |waited| {
            let message = Message::Run {
                waited,
                on_device: false,
                wait: waits,
                signal,
                work,
            };
            if let Err(unsent) = hand_over(&promises, &sender, message) {
                cancel(unsent, &pending);
            }
        });
    }

    /// How long the oldest issued submission has been running; zero while none runs.
    pub(crate) fn held_for(&self) -> Duration {
        self.pending.front.held_for().unwrap_or_default()
    }

    /// Waits until every submission so far has finished.
    pub(crate) fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.pending.count.wait_idle(timeout, "OpenCL submissions")
    }
}

/// Fails the signal of a submission the destroyed device can no longer run.
fn cancel(message: Message, pending: &Pending) {
    if let Message::Run { signal, .. } = message {
        signal.fail(&Error::cancelled(
            "the OpenCL device was destroyed before this submission's waits were met",
        ));
    }
    pending.count.finish();
}

/// Runs `work` once its waits ended in `waited`.
fn run_work(waited: Result<()>, work: Work) -> Result<Option<InFlight>> {
    waited.and_then(|()| {
        catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| Err(Error::internal("an OpenCL submission panicked")))
    })
}

/// The completion thread: finishes each issued submission in turn.
fn complete(completions: Receiver<Completion>, promises: &PromisedTimepoints, pending: &Pending) {
    while let Ok(completion) = completions.recv() {
        finish(completion, promises, pending);
    }
}

/// Waits for a submission's commands, then signals (or fails) it and forgets its promise.
fn finish(
    Completion {
        issued,
        issued_at,
        wait,
        signal,
    }: Completion,
    promises: &PromisedTimepoints,
    pending: &Pending,
) {
    let outcome = issued
        .and_then(|in_flight| in_flight.map_or(Ok(()), |in_flight| pending.running(issued_at, in_flight)))
        // A wait met on the device: a semaphore it waited on may have failed meanwhile.
        .and_then(|()| wait.wait(Timeout::Infinite));
    match outcome {
        // A timeline failed meanwhile keeps its failure; nothing more to say.
        Ok(()) => {
            let _ = signal.signal();
        }
        Err(error) => signal.fail(&error),
    }
    promises.forget_kept();
    pending.count.finish();
}

impl Drop for SubmissionQueue {
    fn drop(&mut self) {
        // Submissions already running finish; those whose waits are met later are cancelled.
        let _ = self.sender.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // The completion thread ends with the submission thread, which held its channel.
        if let Some(thread) = self.completions.take() {
            let _ = thread.join();
        }
    }
}
