//! Timeline semaphores: a monotonically increasing u64 with a sticky failure state.

use crate::{Error, Result, StatusCode};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// How long a wait may block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// Do not block: report `DeadlineExceeded` if not already satisfied.
    Immediate,
    /// Block until this instant.
    Deadline(Instant),
    /// Block until satisfied or failed.
    Infinite,
}

impl From<Duration> for Timeout {
    fn from(duration: Duration) -> Self {
        match Instant::now().checked_add(duration) {
            Some(deadline) => Timeout::Deadline(deadline),
            None => Timeout::Infinite,
        }
    }
}

/// Called once when a semaphore reaches a value (`Ok`) or fails first (`Err`).
pub type TimepointCallback = Box<dyn FnOnce(Result<()>) + Send>;

/// A timeline semaphore (`iree_hal_semaphore_t`).
///
/// Ownership: shared as `Arc<dyn Semaphore>`; submissions keep the ones they signal alive.
/// Threading: every method may be called from any thread, any number of waiters at once.
pub trait Semaphore: Send + Sync + 'static {
    /// Current value, or the failure if the semaphore failed.
    fn query(&self) -> Result<u64>;
    /// Raises the value to `value`, waking waiters and running timepoint callbacks.
    ///
    /// # Errors
    /// `OutOfRange` if `value` is not above the current value; the failure if failed.
    fn signal(&self, value: u64) -> Result<()>;
    /// Fails the timeline: every current and later wait and query returns `error`. The first
    /// failure wins.
    fn fail(&self, error: Error);
    /// Blocks until the value is at least `value`.
    ///
    /// # Errors
    /// `DeadlineExceeded` when the timeout passes first; the failure if the semaphore failed.
    fn wait(&self, value: u64, timeout: Timeout) -> Result<()>;
    /// Runs `callback` when the value reaches `value` or the semaphore fails (at once if either
    /// already happened). The callback runs on the signalling thread and must not block long.
    fn on_reached(&self, value: u64, callback: TimepointCallback);
    /// Like [`Semaphore::on_reached`], but the callback runs once the value is visible to
    /// queries and waiters, after the signal's `on_reached` callbacks: for work that goes on to
    /// signal other semaphores, so that nobody sees its signal before the value it waited for.
    fn on_published(&self, value: u64, callback: TimepointCallback) {
        self.on_reached(value, callback);
    }
    /// For drivers to recover their concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// The host implementation of a timeline semaphore, used by CPU drivers.
pub struct TimelineSemaphore {
    state: Mutex<TimelineState>,
    changed: Condvar,
    /// The value (or [`FAILED`]) readable without the lock, so waiters can spin on it.
    published: AtomicU64,
    /// How long a waiter spins before sleeping.
    wait_spin: Duration,
}

/// `published` value meaning the semaphore failed.
const FAILED: u64 = u64::MAX;

/// How long a waiter spins on `published` before sleeping: waking a sleeping thread costs tens of
/// microseconds on the machines halo is measured on, a spinning one about one (docs/architecture.md).
const WAIT_SPIN: Duration = Duration::from_micros(20);

struct TimelineState {
    /// The value waiters see.
    value: u64,
    /// The value of the latest signal, seen by waiters once its callbacks have run.
    signalled: u64,
    failure: Option<Error>,
    timepoints: PendingTimepoints,
    /// Timepoints whose callbacks run once their value is published (`on_published`).
    after_publish: PendingTimepoints,
    /// Threads asleep on `changed`: a signal with none skips the wake-up, a system call that
    /// costs about a microsecond even when nobody is woken.
    sleepers: usize,
}

/// The callbacks waiting for a semaphore to reach their values: what every semaphore
/// implementation keeps (the host timeline here, a driver's device semaphore), with one rule for
/// which are due.
#[derive(Default)]
pub struct PendingTimepoints(Vec<(u64, TimepointCallback)>);

impl PendingTimepoints {
    /// Queues `callback` for when the semaphore reaches `value`.
    pub fn add(&mut self, value: u64, callback: TimepointCallback) {
        self.0.push((value, callback));
    }

    /// Removes the callbacks at or below `value`, to run outside the semaphore's lock.
    pub fn take_reached(&mut self, value: u64) -> DueTimepoints {
        if self.0.is_empty() {
            return DueTimepoints(Vec::new());
        }
        let (due, waiting) = std::mem::take(&mut self.0).into_iter().partition(|(v, _)| *v <= value);
        self.0 = waiting;
        DueTimepoints(due)
    }

    /// Removes every callback (the semaphore failed).
    pub fn take_all(&mut self) -> DueTimepoints {
        DueTimepoints(std::mem::take(&mut self.0))
    }
}

/// Callbacks taken out of [`PendingTimepoints`], run once the semaphore's lock is released (a
/// callback may use the semaphore).
#[must_use = "the callbacks must be run"]
pub struct DueTimepoints(Vec<(u64, TimepointCallback)>);

impl DueTimepoints {
    /// Adds the callbacks of `other`, to run after these.
    pub fn extend(&mut self, other: DueTimepoints) {
        self.0.extend(other.0);
    }

    /// Runs every callback with `outcome`.
    pub fn run(self, outcome: &Result<()>) {
        for (_, callback) in self.0 {
            callback(outcome.clone());
        }
    }
}

impl TimelineState {
    /// Removes and returns the timepoints at or below `value` whose callbacks run before it is
    /// published.
    fn take_reached(&mut self, value: u64) -> DueTimepoints {
        self.timepoints.take_reached(value)
    }

    /// Removes and returns every timepoint at or below the published `value`: those added while
    /// the signal's first callbacks ran, then those that wait for publication.
    fn take_published(&mut self, value: u64) -> DueTimepoints {
        let mut reached = self.timepoints.take_reached(value);
        reached.extend(self.after_publish.take_reached(value));
        reached
    }
}

impl TimelineSemaphore {
    /// A semaphore starting at `initial_value`.
    pub fn new(initial_value: u64) -> Arc<Self> {
        Self::with_wait_spin(initial_value, WAIT_SPIN)
    }

    /// A semaphore whose waiters spin for `wait_spin` before sleeping: for devices whose work
    /// is handed between threads, where the usual wait would often just miss the signal.
    pub fn with_wait_spin(initial_value: u64, wait_spin: Duration) -> Arc<Self> {
        Arc::new(TimelineSemaphore {
            state: Mutex::new(TimelineState {
                value: initial_value,
                signalled: initial_value,
                failure: None,
                timepoints: PendingTimepoints::default(),
                after_publish: PendingTimepoints::default(),
                sleepers: 0,
            }),
            changed: Condvar::new(),
            published: AtomicU64::new(initial_value),
            wait_spin,
        })
    }

    /// The value, read without the lock; `None` once the semaphore failed. Most queries and waits
    /// need no more: taking the lock or reading the clock would cost more than the rest of them.
    fn published(&self) -> Option<u64> {
        Some(self.published.load(Ordering::Acquire)).filter(|&value| value != FAILED)
    }

    /// Spins briefly until the value reaches `value` or the semaphore fails.
    fn spin_until(&self, value: u64, timeout: Timeout) {
        let start = Instant::now();
        let limit = match timeout {
            Timeout::Immediate => return,
            Timeout::Infinite => self.wait_spin,
            Timeout::Deadline(deadline) => self.wait_spin.min(deadline.saturating_duration_since(start)),
        };
        loop {
            if self.published.load(Ordering::Acquire) >= value || start.elapsed() >= limit {
                return;
            }
            for _ in 0..32 {
                std::hint::spin_loop();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, TimelineState> {
        // A poisoned lock only means a callback panicked elsewhere; the state itself is consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Semaphore for TimelineSemaphore {
    fn query(&self) -> Result<u64> {
        if let Some(value) = self.published() {
            return Ok(value);
        }
        let state = self.lock();
        match &state.failure {
            Some(failure) => Err(failure.clone()),
            None => Ok(state.value),
        }
    }

    fn signal(&self, value: u64) -> Result<()> {
        tracing::info!(name: "semaphore.signal", value);
        // Two steps: the callbacks of the timepoints reached run before any waiter can see the
        // value. A queue's callbacks release what finished work held (transient memory is freed);
        // a host thread that saw the value first would find it still taken.
        let ready = {
            let mut state = self.lock();
            if let Some(failure) = &state.failure {
                return Err(failure.clone());
            }
            if value <= state.signalled || value == FAILED {
                return Err(Error::out_of_range(format!(
                    "semaphore signal to {value} does not advance its value {}",
                    state.signalled
                )));
            }
            state.signalled = value;
            state.take_reached(value)
        };
        ready.run(&Ok(()));
        let (late, sleepers) = {
            let mut state = self.lock();
            state.value = state.value.max(value);
            self.published.fetch_max(value, Ordering::AcqRel);
            // Timepoints added while the callbacks ran saw the old value and were queued.
            (state.take_published(value), state.sleepers)
        };
        if sleepers > 0 {
            self.changed.notify_all();
        }
        late.run(&Ok(()));
        Ok(())
    }

    fn fail(&self, error: Error) {
        let (ready, sleepers) = {
            let mut state = self.lock();
            if state.failure.is_some() {
                return;
            }
            state.failure = Some(error.clone());
            self.published.store(FAILED, Ordering::Release);
            let mut ready = state.timepoints.take_all();
            ready.extend(state.after_publish.take_all());
            (ready, state.sleepers)
        };
        if sleepers > 0 {
            self.changed.notify_all();
        }
        ready.run(&Err(error));
    }

    fn wait(&self, value: u64, timeout: Timeout) -> Result<()> {
        if self.published().is_some_and(|published| published >= value) {
            return Ok(());
        }
        let _span = tracing::info_span!("semaphore.wait", value).entered();
        self.spin_until(value, timeout);
        let mut state = self.lock();
        loop {
            if let Some(failure) = &state.failure {
                return Err(failure.clone());
            }
            if state.value >= value {
                return Ok(());
            }
            let sleep = match timeout {
                Timeout::Immediate => return Err(timed_out(value, state.value)),
                Timeout::Infinite => None,
                Timeout::Deadline(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(timed_out(value, state.value));
                    }
                    Some(deadline - now)
                }
            };
            state.sleepers += 1;
            state = match sleep {
                None => self.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(duration) => {
                    self.changed
                        .wait_timeout(state, duration)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
            state.sleepers -= 1;
        }
    }

    fn on_reached(&self, value: u64, callback: TimepointCallback) {
        self.add_timepoint(value, callback, |state| &mut state.timepoints);
    }

    fn on_published(&self, value: u64, callback: TimepointCallback) {
        self.add_timepoint(value, callback, |state| &mut state.after_publish);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl TimelineSemaphore {
    /// Runs `callback` now if the value is published at `value` (or the semaphore failed), else
    /// queues it on the timepoint list `list` picks.
    fn add_timepoint(
        &self,
        value: u64,
        callback: TimepointCallback,
        list: impl FnOnce(&mut TimelineState) -> &mut PendingTimepoints,
    ) {
        let mut state = self.lock();
        let outcome = match &state.failure {
            Some(failure) => Err(failure.clone()),
            None if state.value >= value => Ok(()),
            None => {
                list(&mut state).add(value, callback);
                return;
            }
        };
        drop(state);
        callback(outcome);
    }
}

fn timed_out(wanted: u64, current: u64) -> Error {
    Error::deadline_exceeded(format!(
        "semaphore wait for value {wanted} timed out at value {current}"
    ))
}

/// Whether a multi-wait needs every timepoint or any one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Every timepoint must be reached.
    All,
    /// One reached timepoint is enough.
    Any,
}

/// A (semaphore, value) pair.
pub type Timepoint = (Arc<dyn Semaphore>, u64);

/// Waits on several semaphores (`iree_hal_semaphore_list_wait`); any failure ends the wait.
pub fn wait_semaphores(mode: WaitMode, timepoints: &[Timepoint], timeout: Timeout) -> Result<()> {
    match mode {
        WaitMode::All => {
            for (semaphore, value) in timepoints {
                semaphore.wait(*value, timeout)?;
            }
            Ok(())
        }
        WaitMode::Any => wait_any(timepoints, timeout),
    }
}

fn wait_any(timepoints: &[Timepoint], timeout: Timeout) -> Result<()> {
    if timepoints.is_empty() {
        return Ok(());
    }
    for (semaphore, value) in timepoints {
        if semaphore.query()? >= *value {
            return Ok(());
        }
    }
    let shared = Arc::new((Mutex::new(None::<Result<()>>), Condvar::new()));
    for (semaphore, value) in timepoints {
        let weak: Weak<(Mutex<Option<Result<()>>>, Condvar)> = Arc::downgrade(&shared);
        semaphore.on_reached(
            *value,
            Box::new(move |outcome| {
                if let Some(shared) = weak.upgrade() {
                    let mut slot = shared.0.lock().unwrap_or_else(|p| p.into_inner());
                    slot.get_or_insert(outcome);
                    shared.1.notify_all();
                }
            }),
        );
    }
    let (slot, condvar) = &*shared;
    let mut outcome = slot.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(result) = outcome.take() {
            return result;
        }
        outcome = match timeout {
            Timeout::Immediate => return Err(Error::new(StatusCode::DeadlineExceeded, "wait-any timed out")),
            Timeout::Infinite => condvar.wait(outcome).unwrap_or_else(|p| p.into_inner()),
            Timeout::Deadline(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::deadline_exceeded(format!(
                        "wait for any of {} semaphores timed out",
                        timepoints.len()
                    )));
                }
                condvar
                    .wait_timeout(outcome, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_timepoints_come_due_at_their_values_and_all_at_once_on_failure() {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let mut pending = PendingTimepoints::default();
        for value in [3, 1, 5, 2] {
            let ran = ran.clone();
            pending.add(
                value,
                Box::new(move |outcome| ran.lock().unwrap().push((value, outcome.is_ok()))),
            );
        }
        pending.take_reached(0).run(&Ok(()));
        assert!(ran.lock().unwrap().is_empty(), "nothing is due below every value");
        pending.take_reached(2).run(&Ok(()));
        assert_eq!(*ran.lock().unwrap(), [(1, true), (2, true)], "in the order added");
        pending.take_all().run(&Err(Error::aborted("failed")));
        assert_eq!(*ran.lock().unwrap(), [(1, true), (2, true), (3, false), (5, false)]);
        pending.take_reached(u64::MAX).run(&Ok(()));
        assert_eq!(ran.lock().unwrap().len(), 4, "each callback runs once");
    }
    use std::sync::atomic::AtomicBool;

    #[test]
    fn published_callbacks_run_after_the_value_is_visible_and_the_others_before() {
        let semaphore = TimelineSemaphore::new(0);
        let seen = Arc::new(Mutex::new(Vec::new()));
        for (published, at) in [(true, 1), (false, 1), (true, 2)] {
            let (seen, observed) = (seen.clone(), semaphore.clone());
            let callback: TimepointCallback = Box::new(move |outcome| {
                outcome.unwrap();
                seen.lock().unwrap().push((published, at, observed.query().unwrap()));
            });
            if published {
                semaphore.on_published(at, callback);
            } else {
                semaphore.on_reached(at, callback);
            }
        }
        semaphore.signal(1).unwrap();
        // The reached callback saw the old value; the published one the new; value 2 waits.
        assert_eq!(*seen.lock().unwrap(), [(false, 1, 0), (true, 1, 1)]);
        semaphore.signal(2).unwrap();
        assert_eq!(seen.lock().unwrap().last(), Some(&(true, 2, 2)));
        // Once published, both kinds run at once; a failure reaches the queued ones too.
        let late = Arc::new(AtomicBool::new(false));
        let flag = late.clone();
        semaphore.on_published(
            2,
            Box::new(move |outcome| flag.store(outcome.is_ok(), Ordering::Release)),
        );
        assert!(late.load(Ordering::Acquire));
        let failed = Arc::new(Mutex::new(None));
        let slot = failed.clone();
        semaphore.on_published(3, Box::new(move |outcome| *slot.lock().unwrap() = Some(outcome)));
        semaphore.fail(Error::aborted("gone"));
        assert!(matches!(failed.lock().unwrap().as_ref(), Some(Err(_))));
    }

    #[test]
    fn callbacks_of_a_signal_run_before_any_waiter_sees_it() {
        for _ in 0..20 {
            let semaphore = TimelineSemaphore::new(0);
            let released = Arc::new(AtomicBool::new(false));
            let flag = released.clone();
            semaphore.on_reached(
                1,
                Box::new(move |_| {
                    // Long enough for a waiter to stop spinning and take the lock meanwhile.
                    std::thread::sleep(Duration::from_millis(2));
                    flag.store(true, Ordering::Release);
                }),
            );
            let waiter = {
                let semaphore = semaphore.clone();
                let released = released.clone();
                std::thread::spawn(move || {
                    semaphore.wait(1, Timeout::Infinite).unwrap();
                    released.load(Ordering::Acquire)
                })
            };
            std::thread::sleep(Duration::from_micros(100));
            semaphore.signal(1).unwrap();
            assert!(
                waiter.join().unwrap(),
                "a waiter saw the value before its callbacks ran"
            );
            assert_eq!(semaphore.query().unwrap(), 1);
        }
    }

    #[test]
    fn a_signal_must_advance_past_one_still_running_its_callbacks() {
        let semaphore = TimelineSemaphore::new(0);
        let inner = semaphore.clone();
        semaphore.on_reached(
            2,
            Box::new(move |_| {
                assert_eq!(inner.signal(2).unwrap_err().code(), StatusCode::OutOfRange);
                inner.signal(3).unwrap();
            }),
        );
        semaphore.signal(2).unwrap();
        assert_eq!(semaphore.query().unwrap(), 3);
    }
}
