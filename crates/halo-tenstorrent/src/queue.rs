//! The chip's two queues, compute and transfer, each in order on its own thread, and the
//! device-side events that order one after the other.
//!
//! A queue operation waits on a fence of semaphore values. When an operation already submitted
//! to this device will signal a value the new one waits for, the wait becomes a device-side
//! event: "operation `n` of that queue has completed", which the waiting queue's thread observes
//! on the other queue's progress counter; no semaphore and no host thread is involved, and the
//! submitting thread never blocks. Only a value nothing on the device has been asked to signal
//! yet (wait-before-signal from the host, or another device) is waited on as a semaphore.
//!
//! An operation that fails fails its signal semaphores; an event on it sees that failure (it
//! checks the semaphore once the operation has completed), so a failed transfer fails every
//! dispatch that waits for it.

use halo_hal::{Error, Fence, Result, Semaphore, StatusCode, Timeout};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Work a queue runs once its waits are met.
pub type Work = Box<dyn FnOnce() -> Result<()> + Send>;

/// How many operations' run times each device remembers ([`Queues::activity`]).
const ACTIVITY_KEPT: usize = 1024;

/// How long an idle queue thread, or one waiting for the other queue, polls before it sleeps:
/// waking a sleeping thread costs tens of microseconds (docs/architecture.md), more than most
/// operations of a small program, and a call hands work between the host and both queues several
/// times.
const SPIN: Duration = Duration::from_micros(50);

/// How often a blocked queue thread checks whether the device is being destroyed.
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// One of the two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Runs dispatches (command buffers with dispatches, barriers).
    Compute,
    /// Moves bytes: fills, updates, copies, host↔device transfers.
    Transfer,
}

impl QueueKind {
    fn index(self) -> usize {
        self as usize
    }

    /// The queue's name.
    pub fn name(self) -> &'static str {
        match self {
            QueueKind::Compute => "compute",
            QueueKind::Transfer => "transfer",
        }
    }
}

/// How many operations of one queue have completed, observable by the other.
#[derive(Default)]
struct Progress {
    /// Read without the lock by spinning waiters; written under it, so sleepers miss nothing.
    completed: AtomicU64,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Progress {
    fn complete(&self, sequence: u64) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.completed.store(sequence, Ordering::Release);
        self.changed.notify_all();
    }

    fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// Blocks until operation `sequence` has completed, `deadline` passes (false) or `stop`
    /// is raised (false). Spins for [`SPIN`] first: the other queue is often about to finish.
    fn wait_for(&self, sequence: u64, deadline: Option<Instant>, stop: &AtomicBool) -> bool {
        if spin_until(|| self.completed() >= sequence) {
            return true;
        }
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while self.completed() < sequence {
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            let poll = deadline.map_or(SHUTDOWN_POLL, |d| {
                d.saturating_duration_since(Instant::now()).min(SHUTDOWN_POLL)
            });
            guard = self
                .changed
                .wait_timeout(guard, poll)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// Polls `done` for up to [`SPIN`]; true once it holds.
fn spin_until(mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < SPIN {
        if done() {
            return true;
        }
        std::hint::spin_loop();
    }
    done()
}

/// When one operation ran: from the moment its waits were met to the end of its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// The queue it ran on.
    pub queue: QueueKind,
    /// Its position in that queue (1 for the first operation).
    pub sequence: u64,
    /// When its work started.
    pub started: Instant,
    /// When its work ended.
    pub finished: Instant,
}

/// The latest operations' run times, oldest first.
type ActivityLog = Mutex<VecDeque<Activity>>;

/// What an operation waits for before it runs.
enum Wait {
    /// Completion of another operation on this device, which signals `semaphore`.
    Event {
        progress: Arc<Progress>,
        sequence: u64,
        semaphore: Arc<dyn Semaphore>,
    },
    /// A value no operation on this device has been asked to signal.
    Semaphore(Arc<dyn Semaphore>, u64),
}

struct Operation {
    sequence: u64,
    waits: Vec<Wait>,
    signal: Fence,
    work: Work,
}

/// A value a submitted operation will signal, for turning later waits into events.
struct PendingSignal {
    semaphore: Arc<dyn Semaphore>,
    value: u64,
    queue: QueueKind,
    sequence: u64,
}

/// Counts of how waits were resolved, for tests and statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStatistics {
    /// Operations submitted to the compute queue.
    pub compute_operations: u64,
    /// Operations submitted to the transfer queue.
    pub transfer_operations: u64,
    /// Waits resolved as device-side events on an operation of the other queue.
    pub cross_queue_events: u64,
    /// Waits on values nothing on the device had been asked to signal when submitted.
    pub semaphore_waits: u64,
}

struct Submitted {
    /// The queue threads' inboxes; `None` once the device is being destroyed.
    senders: Option<[Sender<Operation>; 2]>,
    /// Operations submitted to each queue.
    count: [u64; 2],
    pending: Vec<PendingSignal>,
    statistics: QueueStatistics,
}

/// Both queues of one device.
pub struct Queues {
    progress: [Arc<Progress>; 2],
    submitted: Mutex<Submitted>,
    activity: Arc<ActivityLog>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Queues {
    /// Starts both queue threads; `device` names them.
    pub fn start(device: &str) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let progress = [Arc::new(Progress::default()), Arc::new(Progress::default())];
        let activity: Arc<ActivityLog> = Arc::default();
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for kind in [QueueKind::Compute, QueueKind::Transfer] {
            let (sender, receiver) = channel::<Operation>();
            let progress = progress[kind.index()].clone();
            let stop = stop.clone();
            let activity = activity.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{device}-{}", kind.name()))
                .spawn(move || {
                    while let Some(operation) = next_operation(&receiver) {
                        run(kind, operation, &progress, &activity, &stop);
                    }
                })
                .map_err(|error| {
                    Error::resource_exhausted(format!("cannot start the {} queue thread: {error}", kind.name()))
                })?;
            senders.push(sender);
            threads.push(thread);
        }
        let senders: [Sender<Operation>; 2] = senders.try_into().unwrap_or_else(|_| unreachable!("two queues"));
        Ok(Queues {
            progress,
            submitted: Mutex::new(Submitted {
                senders: Some(senders),
                count: [0; 2],
                pending: Vec::new(),
                statistics: QueueStatistics::default(),
            }),
            activity,
            stop,
            threads,
        })
    }

    /// Queues `work` on `kind` after `wait`; `signal` is reached when it succeeds and failed when
    /// it (or a wait) fails. Never blocks on the waits.
    pub fn submit(&self, kind: QueueKind, wait: &Fence, signal: &Fence, work: Work) -> Result<()> {
        let mut submitted = self.submitted.lock().unwrap_or_else(PoisonError::into_inner);
        let progress = &self.progress;
        submitted
            .pending
            .retain(|p| progress[p.queue.index()].completed() < p.sequence);
        let mut waits = Vec::with_capacity(wait.timepoints().len());
        for (semaphore, value) in wait.timepoints() {
            if semaphore.query().is_ok_and(|current| current >= *value) {
                continue;
            }
            let signaller = submitted
                .pending
                .iter()
                .filter(|p| Arc::ptr_eq(&p.semaphore, semaphore) && p.value >= *value)
                .min_by_key(|p| p.value)
                .map(|p| (p.queue, p.sequence));
            waits.push(match signaller {
                Some((queue, sequence)) => {
                    if queue != kind {
                        submitted.statistics.cross_queue_events += 1;
                    }
                    Wait::Event {
                        progress: progress[queue.index()].clone(),
                        sequence,
                        semaphore: semaphore.clone(),
                    }
                }
                None => {
                    submitted.statistics.semaphore_waits += 1;
                    Wait::Semaphore(semaphore.clone(), *value)
                }
            });
        }
        let sequence = submitted.count[kind.index()] + 1;
        let sender = submitted
            .senders
            .as_ref()
            .map(|s| &s[kind.index()])
            .ok_or_else(|| Error::cancelled("the device is being destroyed"))?;
        sender
            .send(Operation {
                sequence,
                waits,
                signal: signal.clone(),
                work,
            })
            .map_err(|_| Error::internal(format!("the {} queue thread has stopped", kind.name())))?;
        submitted.count[kind.index()] = sequence;
        match kind {
            QueueKind::Compute => submitted.statistics.compute_operations += 1,
            QueueKind::Transfer => submitted.statistics.transfer_operations += 1,
        }
        for (semaphore, value) in signal.timepoints() {
            submitted.pending.push(PendingSignal {
                semaphore: semaphore.clone(),
                value: *value,
                queue: kind,
                sequence,
            });
        }
        Ok(())
    }

    /// Orders `signal` after `wait` with no work between: at once on the calling thread when
    /// every wait is already met (operations are ordered only by their fences, so nothing else
    /// has to come first), else as an empty operation on `kind`.
    pub fn barrier(&self, kind: QueueKind, wait: &Fence, signal: &Fence) -> Result<()> {
        match wait.query() {
            Ok(true) => signal.signal(),
            Ok(false) => self.submit(kind, wait, signal, Box::new(|| Ok(()))),
            Err(error) => {
                signal.fail(&error);
                Ok(())
            }
        }
    }

    /// How waits were resolved so far.
    pub fn statistics(&self) -> QueueStatistics {
        self.submitted.lock().unwrap_or_else(PoisonError::into_inner).statistics
    }

    /// When the latest operations (up to 1024) ran, oldest first: what shows transfers
    /// overlapping compute.
    pub fn activity(&self) -> Vec<Activity> {
        let log = self.activity.lock().unwrap_or_else(PoisonError::into_inner);
        log.iter().copied().collect()
    }

    /// Blocks until every operation submitted so far has completed.
    ///
    /// # Errors
    /// `DeadlineExceeded` when `timeout` passes first.
    pub fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        let count = self.submitted.lock().unwrap_or_else(PoisonError::into_inner).count;
        let deadline = match timeout {
            Timeout::Immediate => Some(Instant::now()),
            Timeout::Deadline(deadline) => Some(deadline),
            Timeout::Infinite => None,
        };
        for kind in [QueueKind::Compute, QueueKind::Transfer] {
            let never = AtomicBool::new(false);
            if !self.progress[kind.index()].wait_for(count[kind.index()], deadline, &never) {
                return Err(Error::deadline_exceeded(format!(
                    "the {} queue did not become idle in time",
                    kind.name()
                )));
            }
        }
        Ok(())
    }
}

impl Drop for Queues {
    fn drop(&mut self) {
        // Operations whose waits are met still run; those still waiting fail as cancelled.
        self.stop.store(true, Ordering::Relaxed);
        self.submitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .senders
            .take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The queue's next operation, polled for [`SPIN`] before sleeping; `None` once the device is
/// gone.
fn next_operation(receiver: &Receiver<Operation>) -> Option<Operation> {
    let mut next = None;
    let polled = spin_until(|| match receiver.try_recv() {
        Ok(operation) => {
            next = Some(operation);
            true
        }
        Err(TryRecvError::Disconnected) => true,
        Err(TryRecvError::Empty) => false,
    });
    if polled {
        next
    } else {
        receiver.recv().ok()
    }
}

/// Runs one operation on its queue's thread: waits, work, then signal or failure.
fn run(kind: QueueKind, operation: Operation, progress: &Progress, activity: &ActivityLog, stop: &AtomicBool) {
    let waited = operation.waits.iter().try_for_each(|wait| wait_for(wait, stop));
    let started = Instant::now();
    let result = waited.and_then(|()| run_work(operation.work));
    let finished = Instant::now();
    if let Err(error) = result.and_then(|()| operation.signal.signal()) {
        operation.signal.fail(&error);
    }
    {
        let mut log = activity.lock().unwrap_or_else(PoisonError::into_inner);
        if log.len() == ACTIVITY_KEPT {
            log.pop_front();
        }
        log.push_back(Activity {
            queue: kind,
            sequence: operation.sequence,
            started,
            finished,
        });
    }
    progress.complete(operation.sequence);
}

/// Runs `work`, turning a panic (a bug) into an error: a queue thread that died would leave
/// every waiter on its signals blocked for ever.
fn run_work(work: Work) -> Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(Error::internal(format!("queue work panicked: {what}")))
    })
}

fn wait_for(wait: &Wait, stop: &AtomicBool) -> Result<()> {
    let cancelled = || Error::cancelled("the device was destroyed while work waited");
    match wait {
        Wait::Event {
            progress,
            sequence,
            semaphore,
        } => {
            if !progress.wait_for(*sequence, None, stop) {
                return Err(cancelled());
            }
            semaphore.query().map(drop)
        }
        Wait::Semaphore(semaphore, value) => loop {
            match semaphore.wait(*value, Timeout::from(SHUTDOWN_POLL)) {
                Err(error) if error.code() == StatusCode::DeadlineExceeded => {
                    if stop.load(Ordering::Relaxed) {
                        return Err(cancelled());
                    }
                }
                result => return result,
            }
        },
    }
}
