//! A model's computing threads: calls run on at most `max_concurrency` threads of the model's
//! own, taken in arrival order.
//!
//! Under load a thread finishing one call takes the next queued one without sleeping, so a
//! saturated server pays no thread switch per request between the calls (tokio's blocking pool
//! would have a thread sleep and be woken for each call the semaphore let through). Threads start
//! when a call finds none idle, up to the limit, and stay until the model goes. They run at the
//! default scheduling policy even when started by the server's batch threads (see
//! [`crate::batch_scheduling`]), so a call handed to an idle one starts at once.

use crate::batch_scheduling::{self, Policy};
use halo_hal::held::{all_held_for, HeldSince};
use halo_hal::{Error, Result};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A call waiting for a thread.
type Call = Box<dyn FnOnce() + Send>;

/// A bounded set of threads running calls in arrival order.
pub struct ComputeThreads {
    shared: Arc<Shared>,
    /// Most threads it starts.
    limit: usize,
    /// Names its threads.
    name: String,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a call is queued or the threads are told to stop.
    work: Condvar,
    /// Per thread (by the order they started): since when it has been running its call.
    held: Box<[HeldSince]>,
}

#[derive(Default)]
struct State {
    calls: VecDeque<Call>,
    /// Threads started and not stopped.
    threads: usize,
    /// Threads waiting for a call.
    idle: usize,
    /// Set when the owner goes: threads finish the queued calls, then stop.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Calls run outside the lock and their panics are caught, so a poisoned state is whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a queued call stands.
const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const WITHDRAWN: u8 = 2;

/// A submitted call's result, to come.
pub struct Ticket<T> {
    stage: Arc<AtomicU8>,
    result: oneshot::Receiver<T>,
    /// Whether dropping the ticket withdraws a call not yet started (see [`Ticket::keep_queued`]).
    withdraw_on_drop: bool,
}

impl<T> Ticket<T> {
    /// Takes the call back if no thread has started it; `false` when one has (it runs until it
    /// returns, holding its thread, and its result is dropped). Dropping the ticket withdraws
    /// too.
    pub fn withdraw(&self) -> bool {
        self.stage
            .compare_exchange(QUEUED, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Lets the call run in its turn even after the ticket is dropped, for a call whose work
    /// is not its submitter's alone (a batching model's turn serves whoever waits).
    pub fn keep_queued(mut self) {
        self.withdraw_on_drop = false;
    }

    /// The call's result.
    ///
    /// # Errors
    /// `Internal` when the call panicked, or was dropped because no computing thread could
    /// start.
    pub async fn result(&mut self) -> Result<T> {
        (&mut self.result).await.map_err(|_| {
            Error::internal("the call ended without a result: it panicked, or no computing thread could start")
        })
    }
}

impl<T> Drop for Ticket<T> {
    fn drop(&mut self) {
        // Nobody waits for a call that has not started (its client went): it need not run.
        if self.withdraw_on_drop {
            self.withdraw();
        }
    }
}

impl ComputeThreads {
    /// Threads named `name` (as the OS shows them), at most `limit` of them; none starts yet.
    pub fn new(name: &str, limit: usize) -> Self {
        let limit = limit.max(1);
        ComputeThreads {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                held: (0..limit).map(|_| HeldSince::default()).collect(),
            }),
            limit,
            name: name.to_string(),
        }
    }

    /// Queues `call` behind those already queued, starting a thread for it when none is idle
    /// and fewer than the limit run.
    ///
    /// # Errors
    /// `ResourceExhausted` when no thread runs and the OS refuses to start one.
    pub fn submit<T: Send + 'static>(&self, call: impl FnOnce() -> T + Send + 'static) -> Result<Ticket<T>> {
        let stage = Arc::new(AtomicU8::new(QUEUED));
        let (sender, result) = oneshot::channel();
        let queued_stage = stage.clone();
        let call: Call = Box::new(move || {
            if queued_stage
                .compare_exchange(QUEUED, STARTED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // The receiver may have gone at its deadline; the result is dropped then.
                let _ = sender.send(call());
            }
        });
        let start_one = {
            let mut state = self.shared.lock();
            state.calls.push_back(call);
            let start = state.calls.len() > state.idle && state.threads < self.limit;
            if start {
                state.threads += 1;
            } else {
                self.shared.work.notify_one();
            }
            // The new thread's place among the started ones.
            start.then_some(state.threads - 1)
        };
        if let Some(index) = start_one {
            self.start_thread(index)?;
        }
        Ok(Ticket {
            stage,
            result,
            withdraw_on_drop: true,
        })
    }

    /// How long every one of the `limit` threads has been running the call it runs now: zero
    /// while one is idle or not started. Past the callers' patience no queued call can start.
    pub fn all_held_for(&self) -> Duration {
        all_held_for(self.shared.held.iter())
    }

    fn start_thread(&self, index: usize) -> Result<()> {
        let shared = self.shared.clone();
        let started = std::thread::Builder::new().name(self.name.clone()).spawn(move || {
            batch_scheduling::set_current_thread(Policy::Normal);
            work(&shared, index)
        });
        let Err(error) = started else {
            return Ok(());
        };
        let mut state = self.shared.lock();
        state.threads -= 1;
        if state.threads > 0 {
            // The queued call waits for a running thread.
            tracing::warn!(threads = state.threads, %error, "could not start another computing thread");
            return Ok(());
        }
        // No thread would ever take the queued calls (others may have queued beside this one
        // while their threads failed to start too): their tickets end without a result. They
        // are dropped outside the lock, since what they hold may own these threads.
        let abandoned = std::mem::take(&mut state.calls);
        drop(state);
        drop(abandoned);
        Err(Error::resource_exhausted(format!(
            "could not start a computing thread '{}': {error}",
            self.name
        )))
    }
}

impl Drop for ComputeThreads {
    fn drop(&mut self) {
        // Not joined: the last reference to a model can go on one of its own threads.
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
    }
}

/// A computing thread's life (thread `index` of those started): the queued calls in turn, a
/// wait when there are none.
fn work(shared: &Shared, index: usize) {
    let mut state = shared.lock();
    loop {
        if let Some(call) = state.calls.pop_front() {
            drop(state);
            shared.held[index].hold(Instant::now());
            // A panicking call drops its result sender, which its ticket reports.
            let _ = catch_unwind(AssertUnwindSafe(call));
            shared.held[index].release();
            state = shared.lock();
        } else if state.closed {
            state.threads -= 1;
            return;
        } else {
            state.idle += 1;
            state = shared.work.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.idle -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(future)
    }

    /// Occupies one thread until the returned sender sends (or goes), once it has started.
    fn occupy(threads: &ComputeThreads) -> (mpsc::Sender<()>, Ticket<()>) {
        let (release, released) = mpsc::channel();
        let (started, has_started) = mpsc::channel();
        let ticket = threads
            .submit(move || {
                started.send(()).unwrap();
                let _ = released.recv();
            })
            .unwrap();
        has_started
            .recv_timeout(Duration::from_secs(10))
            .expect("the call started");
        (release, ticket)
    }

    #[test]
    fn calls_run_and_return_their_results() {
        let threads = ComputeThreads::new("test", 2);
        let mut tickets: Vec<_> = (0..100u64).map(|i| threads.submit(move || i * i).unwrap()).collect();
        let results: Vec<u64> = block_on(async {
            let mut results = Vec::new();
            for ticket in &mut tickets {
                results.push(ticket.result().await.unwrap());
            }
            results
        });
        assert_eq!(results, (0..100u64).map(|i| i * i).collect::<Vec<_>>());
        assert!(threads.shared.lock().threads <= 2);
    }

    #[test]
    fn no_more_than_the_limit_run_at_once_and_the_rest_wait_in_order() {
        let threads = ComputeThreads::new("test", 1);
        let (release, _running) = occupy(&threads);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tickets: Vec<_> = (0..3)
            .map(|i| {
                let order = order.clone();
                threads.submit(move || order.lock().unwrap().push(i)).unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            order.lock().unwrap().is_empty(),
            "a call ran beside the one holding the only thread"
        );
        assert_eq!(threads.shared.lock().threads, 1);
        release.send(()).unwrap();
        block_on(async {
            for ticket in &mut tickets {
                ticket.result().await.unwrap();
            }
        });
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    }

    #[test]
    fn the_threads_are_held_only_while_every_one_of_them_runs_a_call() {
        let threads = ComputeThreads::new("test", 2);
        let (release_first, mut first) = occupy(&threads);
        std::thread::sleep(Duration::from_millis(20));
        let one_held = threads.all_held_for();
        let second_started = std::time::Instant::now();
        let (release_second, mut second) = occupy(&threads);
        std::thread::sleep(Duration::from_millis(50));
        let (held, at_most) = (threads.all_held_for(), second_started.elapsed());
        release_first.send(()).unwrap();
        release_second.send(()).unwrap();
        block_on(async {
            first.result().await.unwrap();
            second.result().await.unwrap();
        });
        assert_eq!(one_held, Duration::ZERO, "one of the two threads was not started");
        assert!(
            held >= Duration::from_millis(50) && held <= at_most,
            "held {held:?}, counted from the second call's start"
        );
        let released = std::time::Instant::now();
        while threads.all_held_for() != Duration::ZERO {
            assert!(
                released.elapsed() < Duration::from_secs(10),
                "held after both calls returned"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_withdrawn_or_dropped_call_never_runs_and_a_started_one_cannot_be_withdrawn() {
        let threads = ComputeThreads::new("test", 1);
        let (release, running) = occupy(&threads);
        assert!(!running.withdraw(), "a started call was withdrawn");
        let ran = Arc::new(AtomicU8::new(0));
        let flag = ran.clone();
        let waiting = threads.submit(move || flag.store(1, Ordering::Release)).unwrap();
        assert!(waiting.withdraw());
        let flag = ran.clone();
        drop(threads.submit(move || flag.store(2, Ordering::Release)).unwrap());
        release.send(()).unwrap();
        // A call queued after the withdrawn one runs, so the withdrawn one's turn has passed.
        let mut after = threads.submit(|| ()).unwrap();
        block_on(after.result()).unwrap();
        assert_eq!(ran.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_call_kept_queued_runs_after_its_ticket_is_dropped() {
        let threads = ComputeThreads::new("test", 1);
        let (release, _running) = occupy(&threads);
        let (ran, has_run) = mpsc::channel();
        threads.submit(move || ran.send(()).unwrap()).unwrap().keep_queued();
        release.send(()).unwrap();
        has_run
            .recv_timeout(Duration::from_secs(10))
            .expect("the call kept queued ran");
    }

    #[test]
    fn a_panicking_call_fails_its_ticket_and_the_thread_lives_on() {
        let threads = ComputeThreads::new("test", 1);
        let mut failing = threads.submit(|| -> u32 { panic!("a call panics") }).unwrap();
        let error = block_on(failing.result()).expect_err("a panic is an error");
        assert_eq!(error.code(), halo_hal::StatusCode::Internal);
        let mut next = threads.submit(|| 7).unwrap();
        assert_eq!(block_on(next.result()).unwrap(), 7);
        assert_eq!(threads.shared.lock().threads, 1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn calls_run_at_the_default_policy_even_when_a_batch_thread_starts_them() {
        let policy = std::thread::spawn(|| {
            batch_scheduling::set_current_thread(Policy::Batch);
            let threads = ComputeThreads::new("test", 1);
            let mut policy = threads.submit(batch_scheduling::current_thread).unwrap();
            block_on(policy.result()).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(policy, Policy::Normal);
    }

    #[test]
    fn threads_stop_when_their_owner_goes() {
        let threads = ComputeThreads::new("test", 3);
        let shared = threads.shared.clone();
        let mut tickets: Vec<_> = (0..3).map(|_| threads.submit(|| ()).unwrap()).collect();
        block_on(async {
            for ticket in &mut tickets {
                ticket.result().await.unwrap();
            }
        });
        drop(threads);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while shared.lock().threads > 0 {
            assert!(std::time::Instant::now() < deadline, "threads still running");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
