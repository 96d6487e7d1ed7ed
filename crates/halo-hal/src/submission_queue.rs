//! A device queue for drivers whose device runs commands in order (an OpenCL in-order queue, a
//! Metal command queue), with timelines built on host timepoints as IREE's GPU driver design
//! does.
//!
//! A submission runs on the queue's submission thread once its waits are met, which issues its
//! commands onto the device and goes on to the next; the completion thread waits for each issued
//! submission in turn and then signals its semaphores. A wait is met on the host (the semaphore
//! has the value: a callback, never a blocked thread) or on the device: a timepoint that a
//! submission already on the queue will signal is reached before anything queued after it runs,
//! so a submission that waits only on such timepoints (and reached ones) is issued at once, with
//! no round trip through the host. Its signal then fails if a semaphore it waited on failed.
//!
//! A submission whose waits are met when it is made, with nothing else pending, is issued and
//! waited for on the calling thread instead: handing it over would only add the threads'
//! wake-ups, and nothing could overlap with it.
//! Submissions run in the order their waits are met, so one that waits for a later one is no
//! deadlock.

use crate::held::HeldSince;
use crate::promised_timepoints::{Coverage, PromisedTimepoints};
use crate::submission_count::SubmissionCount;
use crate::{Binding, CommandBuffer, Error, Fence, Result, Timeout};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Commands a device is running, which the completion thread waits for.
///
/// Ownership: holds what the commands use until they have run; dropping it unwaited must not
/// free anything the device still reads.
pub trait InFlight: Send + 'static {
    /// Waits until the commands have run.
    ///
    /// # Errors
    /// The first failure among them.
    fn wait(self) -> Result<()>;
}

/// What a submission does once its waits are met: issue its commands (`None`: it has none).
pub type Work<F> = Box<dyn FnOnce() -> Result<Option<F>> + Send>;

enum Message<F> {
    Run {
        waited: Result<()>,
        /// Met on the device (promised by submissions already queued), not on the host.
        on_device: bool,
        wait: Fence,
        signal: Fence,
        work: Work<F>,
    },
    Stop,
}

/// A submission issued: its commands on the queue, to signal once they have run.
struct Completion<F> {
    issued: Result<Option<F>>,
    /// When its commands went onto the queue.
    issued_at: Instant,
    wait: Fence,
    signal: Fence,
}

/// Hands `message` to the submission thread through `sender`, promising its signal when its
/// waits succeeded (one whose wait failed fails its signal instead). Promised under the table's
/// lock, so anything that counts on the promise is handed over after it and issued after it on
/// the in-order queue.
fn hand_over<F>(
    promises: &PromisedTimepoints,
    sender: &Sender<Message<F>>,
    message: Message<F>,
) -> std::result::Result<(), Message<F>> {
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
    fn running<F: InFlight>(&self, issued_at: Instant, in_flight: F) -> Result<()> {
        let last_finished = *self.last_finished.lock().unwrap_or_else(PoisonError::into_inner);
        self.front
            .hold(last_finished.map_or(issued_at, |finished| finished.max(issued_at)));
        let outcome = in_flight.wait();
        *self.last_finished.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        self.front.release();
        outcome
    }
}

/// One device's submission and completion threads, for commands of type `F`.
///
/// Threading: any thread submits; dropping the queue lets issued submissions finish and cancels
/// those whose waits are not met yet.
pub struct SubmissionQueue<F: InFlight> {
    /// The device's kind, in messages ("OpenCL").
    device: &'static str,
    sender: Sender<Message<F>>,
    pending: Arc<Pending>,
    promises: Arc<PromisedTimepoints>,
    /// Submissions whose waits were met on the device.
    device_waits: AtomicU64,
    thread: Option<JoinHandle<()>>,
    completions: Option<JoinHandle<()>>,
}

impl<F: InFlight> SubmissionQueue<F> {
    /// Starts the submission and completion threads of a `device` ("OpenCL") queue.
    ///
    /// # Errors
    /// `ResourceExhausted` when a thread cannot start.
    pub fn start(device: &'static str) -> Result<Self> {
        let (sender, receiver) = channel::<Message<F>>();
        let (completion_sender, completion_receiver) = channel::<Completion<F>>();
        let pending = Arc::new(Pending::default());
        let promises = Arc::new(PromisedTimepoints::default());
        let spawn_error = |e| Error::resource_exhausted(format!("starting the {device} device's queue threads: {e}"));
        let thread_name = |role: &str| format!("halo-{}-{role}", device.to_lowercase());
        let (finished, kept) = (pending.clone(), promises.clone());
        let (running, finishing) = (pending.clone(), promises.clone());
        let completions = std::thread::Builder::new()
            .name(thread_name("done"))
            .spawn(move || complete(completion_receiver, &kept, &finished))
            .map_err(spawn_error)?;
        let thread = std::thread::Builder::new()
            .name(thread_name("queue"))
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
                        issued: run_work(waited, work, device),
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
            device,
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
    pub fn submit(&self, wait: &Fence, signal: &Fence, work: Work<F>) {
        // Waits already met and nothing else pending: the calling thread issues it and waits
        // for it, since handing it to the queue's threads would cost their wake-ups and nothing
        // else could overlap with it.
        if wait.query() == Ok(true) && self.pending.claim_idle() {
            let issued_at = Instant::now();
            let issued = run_work(Ok(()), work, self.device);
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
                cancel(unsent, &self.pending, self.device);
            }
            return;
        }
        let (sender, pending, promises, device) = (
            self.sender.clone(),
            self.pending.clone(),
            self.promises.clone(),
            self.device,
        );
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
                cancel(unsent, &pending, device);
            }
        });
    }

    /// A device's `queue_execute` on this queue: checks `command_buffer` against
    /// `binding_table` now, then has `issue` issue it with an owned copy of the table once
    /// `wait` is reached; without a command buffer the submission only orders `signal` after
    /// `wait`.
    ///
    /// # Errors
    /// The submission's validation errors (nothing is queued then).
    pub fn execute(
        &self,
        wait: &Fence,
        signal: &Fence,
        command_buffer: Option<&Arc<CommandBuffer>>,
        binding_table: &[Binding],
        issue: impl FnOnce(Arc<CommandBuffer>, Vec<Binding<'static>>) -> Result<F> + Send + 'static,
    ) -> Result<()> {
        let Some(command_buffer) = command_buffer else {
            self.submit(wait, signal, Box::new(|| Ok(None)));
            return Ok(());
        };
        command_buffer.validate_submission(binding_table)?;
        let command_buffer = command_buffer.clone();
        let table: Vec<Binding<'static>> = binding_table.iter().map(Binding::to_static).collect();
        self.submit(wait, signal, Box::new(move || issue(command_buffer, table).map(Some)));
        Ok(())
    }

    /// How long the oldest issued submission has been running; zero while none runs.
    pub fn held_for(&self) -> Duration {
        self.pending.front.held_for().unwrap_or_default()
    }

    /// Waits until every submission so far has finished.
    ///
    /// # Errors
    /// `DeadlineExceeded` when `timeout` passes first.
    pub fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.pending
            .count
            .wait_idle(timeout, &format!("{} submissions", self.device))
    }

    /// How many submissions had their waits met on the device (promised by work already queued)
    /// rather than on the host.
    pub fn device_waits(&self) -> u64 {
        self.device_waits.load(Ordering::Relaxed)
    }
}

/// Fails the signal of a submission the destroyed device can no longer run.
fn cancel<F>(message: Message<F>, pending: &Pending, device: &str) {
    if let Message::Run { signal, .. } = message {
        signal.fail(&Error::cancelled(format!(
            "the {device} device was destroyed before this submission's waits were met"
        )));
    }
    pending.count.finish();
}

/// Runs `work` once its waits ended in `waited`.
fn run_work<F>(waited: Result<()>, work: Work<F>, device: &str) -> Result<Option<F>> {
    waited.and_then(|()| {
        catch_unwind(AssertUnwindSafe(work))
            .unwrap_or_else(|_| Err(Error::internal(format!("a submission to the {device} device panicked"))))
    })
}

/// The completion thread: finishes each issued submission in turn.
fn complete<F: InFlight>(completions: Receiver<Completion<F>>, promises: &PromisedTimepoints, pending: &Pending) {
    while let Ok(completion) = completions.recv() {
        finish(completion, promises, pending);
    }
}

/// Waits for a submission's commands, then signals (or fails) it and forgets its promise.
fn finish<F: InFlight>(
    Completion {
        issued,
        issued_at,
        wait,
        signal,
    }: Completion<F>,
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

impl<F: InFlight> Drop for SubmissionQueue<F> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semaphore::TimelineSemaphore;
    use crate::StatusCode;
    use std::sync::mpsc::SyncSender;

    /// Commands that finish when the test says so (or at once, given no gate).
    struct Gated(Option<Receiver<Result<()>>>);

    impl InFlight for Gated {
        fn wait(self) -> Result<()> {
            self.0.map_or(Ok(()), |gate| gate.recv().unwrap_or(Ok(())))
        }
    }

    /// Work that logs `name` when issued and returns commands held by a new gate.
    fn gated_work(log: &Arc<Mutex<Vec<&'static str>>>, name: &'static str) -> (Work<Gated>, SyncSender<Result<()>>) {
        let (open, gate) = std::sync::mpsc::sync_channel(1);
        let log = log.clone();
        let work: Work<Gated> = Box::new(move || {
            log.lock().unwrap().push(name);
            Ok(Some(Gated(Some(gate))))
        });
        (work, open)
    }

    fn timeline() -> Arc<dyn crate::Semaphore> {
        TimelineSemaphore::new(0)
    }

    fn waited(semaphore: &Arc<dyn crate::Semaphore>, value: u64) -> Result<()> {
        semaphore.wait(value, Duration::from_secs(10).into())
    }

    #[test]
    fn a_wait_promised_by_queued_work_is_met_on_the_device_and_runs_behind_it() {
        let queue = SubmissionQueue::<Gated>::start("Test").unwrap();
        let (host, first_done, second_done) = (timeline(), timeline(), timeline());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (first, open_first) = gated_work(&log, "first");
        queue.submit(&Fence::at(host.clone(), 1), &Fence::at(first_done.clone(), 1), first);
        host.signal(1).unwrap();
        // The first is handed over (its signal promised) once its host wait is published.
        while log.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        let (second, open_second) = gated_work(&log, "second");
        queue.submit(
            &Fence::at(first_done.clone(), 1),
            &Fence::at(second_done.clone(), 1),
            second,
        );
        assert_eq!(queue.device_waits(), 1, "the second's wait was promised by the first");
        open_first.send(Ok(())).unwrap();
        open_second.send(Ok(())).unwrap();
        waited(&second_done, 1).unwrap();
        assert_eq!(*log.lock().unwrap(), ["first", "second"]);
        queue.wait_idle(Duration::from_secs(10).into()).unwrap();
    }

    #[test]
    fn a_failed_wait_fails_the_signal_without_running_the_work() {
        let queue = SubmissionQueue::<Gated>::start("Test").unwrap();
        let (host, done) = (timeline(), timeline());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (work, _open) = gated_work(&log, "work");
        queue.submit(&Fence::at(host.clone(), 1), &Fence::at(done.clone(), 1), work);
        host.fail(Error::aborted("the producer gave up"));
        let error = waited(&done, 1).unwrap_err();
        assert!(error.to_string().contains("the producer gave up"), "{error}");
        queue.wait_idle(Duration::from_secs(10).into()).unwrap();
        assert!(log.lock().unwrap().is_empty());
    }

    #[test]
    fn failing_commands_panicking_work_and_failed_issues_fail_their_signals() {
        let queue = SubmissionQueue::<Gated>::start("Test").unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (failing, open) = gated_work(&log, "failing");
        let failed_commands = timeline();
        open.send(Err(Error::data_loss("binding 2 was corrupted"))).unwrap();
        queue.submit(&Fence::new(), &Fence::at(failed_commands.clone(), 1), failing);
        let panicking = timeline();
        queue.submit(
            &Fence::new(),
            &Fence::at(panicking.clone(), 1),
            Box::new(|| panic!("a bug in a driver")),
        );
        let refused = timeline();
        let refusal: Work<Gated> = Box::new(|| Err(Error::invalid_argument("export 7 of an executable of 2")));
        queue.submit(&Fence::new(), &Fence::at(refused.clone(), 1), refusal);

        assert_eq!(waited(&failed_commands, 1).unwrap_err().code(), StatusCode::DataLoss);
        let error = waited(&panicking, 1).unwrap_err();
        assert_eq!(error.code(), StatusCode::Internal);
        assert!(error.to_string().contains("the Test device"), "{error}");
        assert!(waited(&refused, 1).unwrap_err().to_string().contains("export 7"));
    }

    #[test]
    fn dropping_the_queue_cancels_what_still_waits_naming_the_device() {
        let queue = SubmissionQueue::<Gated>::start("Test").unwrap();
        let (host, done) = (timeline(), timeline());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (work, _open) = gated_work(&log, "work");
        queue.submit(&Fence::at(host.clone(), 1), &Fence::at(done.clone(), 1), work);
        drop(queue);
        host.signal(1).unwrap();
        let error = waited(&done, 1).unwrap_err();
        assert_eq!(error.code(), StatusCode::Cancelled);
        assert!(error.to_string().contains("the Test device was destroyed"), "{error}");
        assert!(log.lock().unwrap().is_empty());
    }

    #[test]
    fn wait_idle_gives_up_at_its_deadline_while_commands_run() {
        let queue = SubmissionQueue::<Gated>::start("Test").unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (host, done) = (timeline(), timeline());
        let (work, open) = gated_work(&log, "work");
        queue.submit(&Fence::at(host.clone(), 1), &Fence::at(done.clone(), 1), work);
        host.signal(1).unwrap();
        let error = queue.wait_idle(Duration::from_millis(20).into()).unwrap_err();
        assert_eq!(error.code(), StatusCode::DeadlineExceeded);
        assert!(error.to_string().contains("Test submissions"), "{error}");
        open.send(Ok(())).unwrap();
        queue.wait_idle(Duration::from_secs(10).into()).unwrap();
        waited(&done, 1).unwrap();
    }
}
