//! Queue operations on `local-task`: each waits for its fence, runs its regions, then signals.
//!
//! Readiness arrives as a semaphore callback on whichever thread signalled. Ready submissions are
//! run through a per-thread trampoline so that a chain of submissions releasing each other never
//! recurses deeper than one level. Regions cheap enough to run where they are (by the measured
//! cost of their kernels) run on the current thread; larger ones become executor jobs whose
//! completion continues with the next region.

use super::executor::{Executor, Job};
use crate::command_buffer::{run_region_inline, HostProgram};
use halo_hal::submission_count::SubmissionCount;
use halo_hal::trace::QueueTrack;
use halo_hal::{Binding, Buffer, CommandBuffer, Error, Fence, Result, Timeout};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Scheduling settings of a `local-task` device.
#[derive(Debug, Clone, Default)]
pub struct SchedulingOptions {
    /// Regions estimated below this many nanoseconds run on the thread that reaches them. Unset:
    /// [`DEFAULT_INLINE_NS`], or every region when the device's one worker would share the
    /// process's only core with that thread (see [`Inline`]).
    pub inline_ns: Option<u64>,
}

/// Regions estimated below this cost run where they are by default: handing them to a worker
/// would cost more than it saves.
pub const DEFAULT_INLINE_NS: u64 = 20_000;

/// Which regions run on the thread that reaches them rather than on the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inline {
    /// Those estimated at most this many nanoseconds.
    Below(u64),
    /// All of them. With one core, a hand-off to the one worker cannot overlap anything: it only
    /// adds two thread switches per call (local-task took 1.18x local-sync's time per call on one
    /// core, SqueezeNet at test scale).
    Everything,
}

impl Inline {
    /// What `options` ask of a device with `workers` workers in a process that may use `cores`
    /// cores.
    pub fn resolve(options: &SchedulingOptions, workers: usize, cores: usize) -> Inline {
        match options.inline_ns {
            Some(ns) => Inline::Below(ns),
            None if workers == 1 && cores == 1 => Inline::Everything,
            None => Inline::Below(DEFAULT_INLINE_NS),
        }
    }
}

/// State shared by a device and its submissions.
pub struct Queue {
    pub(crate) executor: Executor,
    inline: Inline,
    track: QueueTrack,
    in_flight: SubmissionCount,
    pending: Mutex<Vec<Weak<Submission>>>,
}

/// What a submission does once its waits are met.
pub enum Work {
    /// Nothing: a barrier (or an allocation that is already usable).
    Barrier,
    /// Releases a buffer reference (queue dealloca).
    Release(Buffer),
    /// Runs a command buffer with a binding table.
    Execute {
        /// The command buffer.
        command_buffer: Arc<CommandBuffer>,
        /// Buffers for its slots.
        table: Arc<[Binding<'static>]>,
        /// Its span on the queue's track, from its start to its finish (none until it starts).
        span: tracing::Span,
    },
}

/// One queue operation in flight.
pub struct Submission {
    queue: Arc<Queue>,
    signal: Fence,
    /// Taken out before the signal, so the buffers the work references are released before anyone
    /// waiting on the signal can run (a transient buffer must be free again by then).
    work: Mutex<Option<Work>>,
    started: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// Submissions made ready on this thread while it is already running one.
    static READY: RefCell<Option<VecDeque<Arc<Submission>>>> = const { RefCell::new(None) };
}

impl Queue {
    /// A queue running on `executor`, shown in timelines as `track`.
    pub fn new(executor: Executor, options: SchedulingOptions, track: QueueTrack) -> Arc<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Arc::new(Queue {
            inline: Inline::resolve(&options, executor.worker_count(), cores),
            executor,
            track,
            in_flight: SubmissionCount::default(),
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Queues `work` to run after `wait`, signalling `signal` when done.
    pub fn submit(self: &Arc<Self>, wait: &Fence, signal: Fence, work: Work) {
        self.in_flight.add();
        let releases = matches!(work, Work::Release(_));
        let submission = Arc::new(Submission {
            queue: self.clone(),
            signal,
            work: Mutex::new(Some(work)),
            started: AtomicBool::new(false),
        });
        {
            let mut pending = lock(&self.pending);
            pending.retain(|weak| weak.strong_count() > 0);
            pending.push(Arc::downgrade(&submission));
        }
        // A release runs as soon as its waits are reached, before anyone who waited for the
        // same values can allocate again; other work once they are published, so that nobody
        // sees its signal before the values it waited for.
        if releases {
            wait.on_reached(move |outcome| submission.ready(outcome));
        } else {
            wait.on_published(move |outcome| submission.ready(outcome));
        }
    }

    /// Blocks until nothing is in flight.
    pub fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.in_flight.wait_idle(timeout, "submissions")
    }

    /// Fails every submission whose waits have not been met yet (the device is going away).
    pub fn cancel_pending(&self) {
        let pending: Vec<_> = lock(&self.pending)
            .drain(..)
            .filter_map(|weak| weak.upgrade())
            .collect();
        for submission in pending {
            if !submission.started.swap(true, Ordering::AcqRel) {
                submission.finish(Err(Error::cancelled(
                    "the device was dropped before this submission started",
                )));
            }
        }
    }
}

/// Runs `first`, then one after another every submission it made ready on this thread.
///
/// Inside the scope a signal's callbacks only queue the submissions they make ready (releasing a
/// dealloca's buffer at once), so every release triggered by a signal happens before any
/// submission it unblocked can signal further: a host thread woken by the last signal of a call
/// finds the call's transient memory already freed.
fn in_ready_scope(first: impl FnOnce()) {
    if READY.with(|ready| ready.borrow().is_some()) {
        first();
        return;
    }
    READY.with(|ready| *ready.borrow_mut() = Some(VecDeque::new()));
    first();
    while let Some(submission) = READY.with(|ready| ready.borrow_mut().as_mut().and_then(VecDeque::pop_front)) {
        submission.start();
    }
    READY.with(|ready| *ready.borrow_mut() = None);
}

impl Submission {
    fn ready(self: Arc<Self>, outcome: Result<()>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Err(error) = outcome {
            self.finish(Err(error));
            return;
        }
        let released = {
            let mut work = lock(&self.work);
            if matches!(*work, Some(Work::Release(_))) {
                work.take()
            } else {
                None
            }
        };
        // Transient memory goes back to the allocator now, before anyone who waited on the same
        // timepoint can ask for it again, not when this submission's turn comes.
        drop(released);
        let nested = READY.with(|ready| match ready.borrow_mut().as_mut() {
            Some(queue) => {
                queue.push_back(self.clone());
                true
            }
            None => false,
        });
        if !nested {
            in_ready_scope(|| self.start());
        }
    }

    fn start(self: Arc<Self>) {
        // The span ends with the work, which `finish` drops.
        let executes = match &mut *lock(&self.work) {
            Some(Work::Execute {
                command_buffer, span, ..
            }) => {
                *span = self.queue.track.execute(command_buffer);
                true
            }
            _ => false,
        };
        if executes {
            self.advance(0);
        } else {
            self.finish(Ok(()));
        }
    }

    /// Runs regions from `index` on, then finishes, unless a region went to the workers as a job
    /// that resumes here.
    fn advance(self: Arc<Self>, index: usize) {
        if let Some(outcome) = self.clone().run_regions(index) {
            self.finish(outcome);
        }
    }

    /// Runs regions from `index` on: inline while they are cheap, else as a job that resumes in
    /// [`Self::advance`] (then `None`). Its references to the work end when it returns.
    fn run_regions(self: Arc<Self>, mut index: usize) -> Option<Result<()>> {
        let (command_buffer, table) = match &*lock(&self.work) {
            Some(Work::Execute {
                command_buffer, table, ..
            }) => (command_buffer.clone(), table.clone()),
            _ => return Some(Err(Error::internal("a submission without commands has no regions"))),
        };
        let program = match command_buffer.driver_cache(HostProgram::build) {
            Ok(program) => program,
            Err(error) => return Some(Err(error)),
        };
        while index < program.regions.len() {
            let region = match program.region(&command_buffer, index, &table) {
                Ok(region) => region,
                Err(error) => return Some(Err(error)),
            };
            let tiles = region.tile_count();
            let here = tiles <= 1
                || match self.queue.inline {
                    Inline::Everything => true,
                    Inline::Below(limit) => region.estimated_ns().is_some_and(|ns| ns <= limit),
                };
            if here {
                match run_region_inline(&region) {
                    Ok(busy_ns) => self.queue.executor.add_busy_ns(busy_ns),
                    Err(error) => return Some(Err(error)),
                }
                index += 1;
                continue;
            }
            // Claims of cheap tiles grow up to this, so that even when one worker is slowed down
            // the others find tiles left to the end; the size adapts to the tiles' cost below it.
            let largest_claim = tiles.div_ceil(self.queue.executor.worker_count() as u64 * 16);
            let this = self.clone();
            let job = Job::new(
                Box::new(region),
                tiles,
                largest_claim,
                self.queue.executor.worker_count(),
                Box::new(move |outcome| {
                    in_ready_scope(|| match outcome {
                        Ok(()) => this.advance(index + 1),
                        Err(error) => this.finish(Err(error)),
                    })
                }),
            );
            // The job may finish, and the submission signal, before `post` returns here: the
            // binding table must not outlive the work in this frame, or the last reference to a
            // transient buffer could drop after the host saw the call done (and allocated anew).
            drop((table, command_buffer));
            self.queue.executor.post(job);
            return None;
        }
        Some(Ok(()))
    }

    fn finish(&self, outcome: Result<()>) {
        drop(lock(&self.work).take());
        match outcome {
            // A user may have failed the signal semaphore meanwhile; that failure stands.
            Ok(()) => {
                let _ = self.signal.signal();
            }
            Err(error) => self.signal.fail(&error),
        }
        self.queue.in_flight.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_on_the_only_core_runs_every_region_where_it_is_reached() {
        let automatic = SchedulingOptions::default();
        assert_eq!(Inline::resolve(&automatic, 1, 1), Inline::Everything);
        assert_eq!(Inline::resolve(&automatic, 1, 2), Inline::Below(DEFAULT_INLINE_NS));
        assert_eq!(Inline::resolve(&automatic, 2, 1), Inline::Below(DEFAULT_INLINE_NS));
        let asked = SchedulingOptions { inline_ns: Some(0) };
        assert_eq!(
            Inline::resolve(&asked, 1, 1),
            Inline::Below(0),
            "a threshold given is kept"
        );
    }
}
