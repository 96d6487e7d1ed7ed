//! The task executor: a pool of worker threads that run the tiles of parallel jobs.
//!
//! A [`Job`] is a parallel-for over tiles (workgroups, transfer chunks), dealt out in one
//! contiguous share per worker. A worker claims from the front of its own share, then steals from
//! the back of the others', so idle workers take whatever is left of any posted job while each
//! keeps to the same part of consecutive dispatches (and of the data they pass on). Claims start
//! at one tile and grow while tiles are cheap, so that costly tiles are shared out one by one.
//! The thread that finishes a job's last tile runs its completion (which usually posts the next job), so
//! there is no coordinator thread. Idle workers spin, watching for new jobs, before they sleep:
//! waking a sleeping thread costs tens of microseconds on these machines, a spinning one about
//! one. They spin longer while a posted job is unfinished, since its completion usually posts the
//! next, and not at all while their core is contended ([`super::contention`]).

use super::contention::ContentionWatch;
use crate::tile::{TileWork, WorkerContext};
use halo_hal::held::{all_held_for, HeldSince};
use halo_hal::{Error, Result};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the executor is built.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Worker threads; one per core by default.
    pub worker_count: usize,
    /// Whether workers are bound to cores.
    pub pinning: Pinning,
    /// How long an idle worker spins before sleeping when no posted job is unfinished.
    pub spin: Duration,
    /// How long an idle worker spins before sleeping while some posted job is unfinished.
    pub spin_while_busy: Duration,
    /// How long stopping the pool waits for work in progress. A worker still inside a kernel
    /// after that is left to finish on its own (or to end with the process), so a kernel that
    /// never returns cannot keep a program from dropping its device and exiting.
    pub stop_wait: Duration,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            worker_count: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            pinning: Pinning::Auto,
            spin: Duration::from_micros(50),
            spin_while_busy: DEFAULT_SPIN_WHILE_BUSY,
            stop_wait: DEFAULT_STOP_WAIT,
        }
    }
}

/// Whether worker threads are bound to cores.
///
/// Bound workers keep their caches, and when another busy process shares the cores it is that
/// process the scheduler moves, not a worker in the middle of a region. Measured on 2 cores, per
/// call against IREE's runtime (which binds its workers the same way by default), bound/unbound:
/// ResNet-50 0.92 against 1.11-1.14 beside one busy loop, 0.97 against 1.09 alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pinning {
    /// Worker `i` on core `i` when there is one worker for each core this process may use;
    /// otherwise (fewer or more workers) left to the scheduler, so that several small devices
    /// do not all pile onto the first cores.
    #[default]
    Auto,
    /// Worker `i` on the `i`-th core this process may use, wrapping around.
    Always,
    /// Left to the scheduler.
    Never,
}

impl Pinning {
    /// Whether `workers` workers are bound, given the cores this process may use.
    fn binds(self, workers: usize, cores: usize) -> bool {
        match self {
            Pinning::Auto => cores > 0 && workers == cores,
            Pinning::Always => cores > 0,
            Pinning::Never => false,
        }
    }
}

/// The default [`ExecutorOptions::spin_while_busy`]. The completion of an unfinished job usually
/// posts the next region at once, so a worker that ran out of tiles keeps watching for it
/// instead of sleeping through the other workers' last tiles. With only the idle spin (50 us),
/// MobileNet-v2's two workers went to sleep 9 to 18 times a call, each time to be woken at the
/// next region; with this, 1.6 times (between calls). 2 ms is longer than the tails of the
/// benchmark models' regions, and short enough that one enormous tile does not keep a core
/// spinning for long.
pub const DEFAULT_SPIN_WHILE_BUSY: Duration = Duration::from_millis(2);

/// The default [`ExecutorOptions::stop_wait`]: far longer than any tile of the benchmark models
/// (milliseconds), short enough that a program interrupted during a kernel that never returns
/// still exits promptly.
pub const DEFAULT_STOP_WAIT: Duration = Duration::from_secs(2);

/// Called once with the job's outcome by the thread that finished its last tile.
pub type Completion = Box<dyn FnOnce(Result<()>) + Send>;

/// A job's work and the workers holding it.
///
/// The last holder to let go once every tile is done drops the work, then completes the job:
/// the buffers the work references are released before the completion signals anyone, so a
/// transient buffer is freed by the time the host learns the call finished.
struct WorkSlot {
    work: Option<Arc<dyn TileWork>>,
    holders: usize,
}

/// One worker's part of a job: a run of claim units, `front` in the high half of `ends` and
/// `back` in the low half. Its owner claims from the front and other workers steal from the
/// back, so each worker runs the same slice of every dispatch of one shape, and reads what it
/// wrote in the previous dispatch from its own cache rather than its neighbour's.
#[repr(align(64))]
struct Share {
    ends: AtomicU64,
}

impl Share {
    fn new(front: u32, back: u32) -> Self {
        Share {
            ends: AtomicU64::new(pack(front, back)),
        }
    }

    fn is_empty(&self) -> bool {
        let (front, back) = unpack(self.ends.load(Ordering::Relaxed));
        front >= back
    }

    /// Takes up to `limit` units at `end`, and never more than a `parts`-th of what is left
    /// (rounded up; `parts` is the number of workers, at least 2): workgroups of one dispatch can
    /// differ in cost a thousandfold (a grouped convolution where the first few do all the work),
    /// and a claim that took much of a share could hold every costly one while the other workers
    /// wait. `None` once the share is empty.
    fn claim(&self, end: End, limit: u32, parts: u32) -> Option<Range<u32>> {
        let mut ends = self.ends.load(Ordering::Relaxed);
        loop {
            let (front, back) = unpack(ends);
            if front >= back {
                return None;
            }
            let count = limit.clamp(1, (back - front).div_ceil(parts.max(2)));
            let (claimed, next) = match end {
                End::Front => (front..front + count, pack(front + count, back)),
                End::Back => (back - count..back, pack(front, back - count)),
            };
            match self
                .ends
                .compare_exchange_weak(ends, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(claimed),
                Err(now) => ends = now,
            }
        }
    }
}

/// Which end of a share a claim takes: its owner's or a thief's.
#[derive(Clone, Copy)]
enum End {
    Front,
    Back,
}

fn pack(front: u32, back: u32) -> u64 {
    (u64::from(front) << 32) | u64::from(back)
}

fn unpack(ends: u64) -> (u32, u32) {
    ((ends >> 32) as u32, ends as u32)
}

/// A claim that ran for less than this doubles the next claim's size: past it, the cost of a
/// claim (a compare-and-swap and a clock reading, some 30 ns) is under a thousandth.
const CLAIM_GROW_BELOW: Duration = Duration::from_micros(20);

/// A claim that ran for longer than this halves the next claim's size, so costly tiles are taken
/// few at a time and the last of them are shared out.
const CLAIM_SHRINK_ABOVE: Duration = Duration::from_micros(100);

/// How many units one worker claims at a time within one job: one at first, then doubling while
/// claims run quickly and halving when one runs slowly, so that cheap tiles go in runs and costly
/// ones one by one. Back to one whenever the worker moves to another share, whose tiles may cost
/// differently (the cheap back of one share can border the costly front of the next). What this
/// cannot foresee is a run of costly tiles straight after cheap ones inside one share: the claim
/// that reaches it can take up to `largest` of them.
struct ClaimPace {
    share: usize,
    units: u32,
    largest: u32,
}

impl ClaimPace {
    fn new(share: usize, largest: u32) -> Self {
        ClaimPace {
            share,
            units: 1,
            largest: largest.max(1),
        }
    }

    fn limit_for(&self, share: usize) -> u32 {
        if share == self.share {
            self.units
        } else {
            1
        }
    }

    fn claimed_from(&mut self, share: usize) {
        if share != self.share {
            self.share = share;
            self.units = 1;
        }
    }

    fn ran_for(&mut self, elapsed: Duration) {
        if elapsed < CLAIM_GROW_BELOW {
            self.units = self.units.saturating_mul(2).min(self.largest);
        } else if elapsed > CLAIM_SHRINK_ABOVE {
            self.units = (self.units / 2).max(1);
        }
    }
}

/// A parallel job: `tile_count` tiles of `work`, dealt out in equal contiguous shares, one per
/// worker, and claimed in runs that adapt to how long the tiles take (`ClaimPace`).
pub struct Job {
    work: Mutex<WorkSlot>,
    tile_count: u64,
    /// Tiles per claim unit: 1, unless the count of tiles does not fit 32 bits.
    grain: u64,
    /// The most units one claim takes.
    largest_claim: u32,
    shares: Box<[Share]>,
    remaining: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
    completion: Mutex<Option<Completion>>,
}

impl Job {
    /// A job over `tile_count` tiles, split among `workers` workers, that calls `completion` when
    /// done; one claim takes at most `largest_claim` tiles (at least 1, more where the count of
    /// tiles would not fit 32 bits).
    pub fn new(
        work: Box<dyn TileWork>,
        tile_count: u64,
        largest_claim: u64,
        workers: usize,
        completion: Completion,
    ) -> Arc<Self> {
        let grain = tile_count.div_ceil(u64::from(u32::MAX)).max(1);
        let units = tile_count.div_ceil(grain);
        let workers = workers.max(1) as u64;
        let shares = (0..workers)
            .map(|i| Share::new((units * i / workers) as u32, (units * (i + 1) / workers) as u32))
            .collect();
        Arc::new(Job {
            work: Mutex::new(WorkSlot {
                work: Some(Arc::from(work)),
                holders: 0,
            }),
            tile_count,
            grain,
            largest_claim: u32::try_from(largest_claim.div_ceil(grain)).unwrap_or(u32::MAX),
            shares,
            remaining: AtomicU64::new(tile_count),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            completion: Mutex::new(Some(completion)),
        })
    }

    fn exhausted(&self) -> bool {
        self.shares.iter().all(Share::is_empty)
    }

    fn pace_for(&self, worker: usize) -> ClaimPace {
        ClaimPace::new(worker % self.shares.len(), self.largest_claim)
    }

    /// The next tiles for worker `worker`: from the front of its own share, else from the back of
    /// the next share along that has any left.
    fn claim(&self, worker: usize, pace: &mut ClaimPace) -> Option<Range<u64>> {
        let count = self.shares.len();
        let own = worker % count;
        let (share, units) = (0..count).find_map(|step| {
            let share = (own + step) % count;
            let end = if step == 0 { End::Front } else { End::Back };
            self.shares[share]
                .claim(end, pace.limit_for(share), count as u32)
                .map(|units| (share, units))
        })?;
        pace.claimed_from(share);
        let start = u64::from(units.start) * self.grain;
        Some(start..(u64::from(units.end) * self.grain).min(self.tile_count))
    }

    /// Claims and runs tiles until none are left; true when this call completed the job. A failed
    /// claim stops later claims from running (they still count as finished) and its error becomes
    /// the job's outcome.
    fn run_claims(&self, context: &mut WorkerContext, watch: &JobWatch) -> bool {
        let work = {
            let mut slot = lock(&self.work);
            let Some(work) = slot.work.clone() else {
                return false;
            };
            slot.holders += 1;
            work
        };
        let started = Instant::now();
        let worker = context.processor_id as usize;
        watch.enter(worker, started);
        let mut pace = self.pace_for(worker);
        let mut claim_started = started;
        while let Some(tiles) = self.claim(worker, &mut pace) {
            let count = tiles.end - tiles.start;
            if !self.failed.load(Ordering::Relaxed) {
                if let Err(error) = run_catching_panics(&*work, tiles, context) {
                    self.failed.store(true, Ordering::Relaxed);
                    lock(&self.error).get_or_insert(error);
                }
            }
            self.remaining.fetch_sub(count, Ordering::AcqRel);
            let now = Instant::now();
            pace.ran_for(now - claim_started);
            claim_started = now;
        }
        watch.leave(worker);
        context.add_busy_ns(claim_started.duration_since(started).as_nanos() as u64);
        drop(work);
        let done = {
            let mut slot = lock(&self.work);
            slot.holders -= 1;
            if slot.holders == 0 && self.remaining.load(Ordering::Acquire) == 0 {
                slot.work.take()
            } else {
                None
            }
        };
        match done {
            Some(work) => {
                drop(work);
                self.complete();
                true
            }
            None => false,
        }
    }

    fn complete(&self) {
        let outcome = match lock(&self.error).take() {
            Some(error) => Err(error),
            None => Ok(()),
        };
        if let Some(completion) = lock(&self.completion).take() {
            completion(outcome);
        }
    }
}

/// Runs tiles, turning a panic into the job's error: a worker that died mid-job would leave the
/// job's remaining count above zero and everyone waiting on it blocked forever.
fn run_catching_panics(work: &dyn TileWork, tiles: Range<u64>, context: &mut WorkerContext) -> Result<()> {
    let first = tiles.start;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.run_tiles(tiles, context))).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(Error::internal(format!(
            "a worker panicked running tiles from {first}: {message}"
        )))
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

struct Shared {
    jobs: Mutex<VecDeque<Arc<Job>>>,
    /// Bumped on every post; spinning workers watch it instead of the lock.
    generation: AtomicU64,
    sleeping: Mutex<usize>,
    wake: Condvar,
    shutdown: AtomicBool,
    /// Jobs posted whose completion has not run yet.
    unfinished: AtomicUsize,
    spin: Duration,
    spin_while_busy: Duration,
    /// Time workers spent running workgroups; see [`Executor::busy_ns`].
    busy_ns: AtomicU64,
    /// When each worker took the job it runs; see [`Executor::all_held_for`].
    watch: JobWatch,
}

/// When each worker took the job it is running: a worker inside one job for long is inside one
/// kernel for long (a job's tiles are short), and when every worker is, nothing else can run.
struct JobWatch(Box<[HeldSince]>);

impl JobWatch {
    fn new(worker_count: usize) -> Self {
        JobWatch((0..worker_count).map(|_| HeldSince::default()).collect())
    }

    fn enter(&self, worker: usize, at: Instant) {
        self.0[worker].hold(at);
    }

    fn leave(&self, worker: usize) {
        self.0[worker].release();
    }

    fn all_held_for(&self) -> Duration {
        all_held_for(self.0.iter())
    }
}

impl Shared {
    /// The first job with tiles left, dropping exhausted ones from the front.
    fn next_job(&self) -> Option<Arc<Job>> {
        let mut jobs = lock(&self.jobs);
        while let Some(job) = jobs.front() {
            if !job.exhausted() {
                return Some(job.clone());
            }
            jobs.pop_front();
        }
        None
    }

    fn has_work(&self) -> bool {
        lock(&self.jobs).iter().any(|job| !job.exhausted())
    }

    /// How long an idle worker spins before sleeping: longer while a posted job is unfinished,
    /// since its completion usually posts more work.
    fn spin_budget(&self) -> Duration {
        if self.unfinished.load(Ordering::Acquire) > 0 {
            self.spin.max(self.spin_while_busy)
        } else {
            self.spin
        }
    }
}

/// A pool of worker threads (`iree_task_executor_t`).
///
/// Ownership: the executor owns its threads; dropping it lets them finish posted jobs and joins
/// them, waiting at most [`ExecutorOptions::stop_wait`] (see [`Executor::shutdown`]).
/// Threading: `post` may be called from any thread, including from a job's completion.
pub struct Executor {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    worker_count: usize,
    stop_wait: Duration,
}

thread_local! {
    static IS_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True on the executor's worker threads.
pub fn on_worker_thread() -> bool {
    IS_WORKER.with(|flag| flag.get())
}

impl Executor {
    /// Starts the workers.
    ///
    /// # Errors
    /// `ResourceExhausted` when a thread cannot be spawned.
    pub fn new(options: &ExecutorOptions) -> Result<Self> {
        let worker_count = options.worker_count.max(1);
        let shared = Arc::new(Shared {
            jobs: Mutex::new(VecDeque::new()),
            generation: AtomicU64::new(0),
            sleeping: Mutex::new(0),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            unfinished: AtomicUsize::new(0),
            spin: options.spin,
            spin_while_busy: options.spin_while_busy,
            busy_ns: AtomicU64::new(0),
            watch: JobWatch::new(worker_count),
        });
        let mut cores = core_affinity::get_core_ids().unwrap_or_default();
        if !options.pinning.binds(worker_count, cores.len()) {
            cores.clear();
        }
        let mut threads = Vec::with_capacity(worker_count);
        for index in 0..worker_count {
            let shared = shared.clone();
            let core = cores.get(index % cores.len().max(1)).copied();
            let thread = std::thread::Builder::new()
                .name(format!("halo-worker-{index}"))
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    worker_loop(&shared, index as u32, worker_count.min(u8::MAX as usize) as u8)
                })
                .map_err(|e| Error::resource_exhausted(format!("cannot start worker thread {index}: {e}")))?;
            threads.push(thread);
        }
        Ok(Executor {
            shared,
            threads: Mutex::new(threads),
            worker_count,
            stop_wait: options.stop_wait,
        })
    }

    /// Number of worker threads.
    pub fn worker_count(&self) -> usize {
        self.worker_count
    }

    /// How long [`Executor::shutdown`] waits for work in progress.
    pub fn stop_wait(&self) -> Duration {
        self.stop_wait
    }

    /// Nanoseconds spent running commands (workgroups and transfers), summed over workers, since
    /// they started (a job's time is added when the worker leaves it), with what
    /// [`Executor::add_busy_ns`] added.
    pub fn busy_ns(&self) -> u64 {
        self.shared.busy_ns.load(Ordering::Relaxed)
    }

    /// How long every worker has been inside the job it runs now: zero while any worker is
    /// without one. A pool whose workers have all been held for long cannot start other work:
    /// some kernel is not returning, or takes far longer than its callers wait.
    pub fn all_held_for(&self) -> Duration {
        self.shared.watch.all_held_for()
    }

    /// Counts workgroups run outside the workers (small regions run inline by the thread that
    /// reaches them) in [`Executor::busy_ns`].
    pub fn add_busy_ns(&self, ns: u64) {
        self.shared.busy_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Makes `job` available to every worker; a job without tiles completes at once, here.
    pub fn post(&self, job: Arc<Job>) {
        if job.tile_count == 0 {
            lock(&job.work).work.take();
            job.complete();
            return;
        }
        self.shared.unfinished.fetch_add(1, Ordering::AcqRel);
        lock(&self.shared.jobs).push_back(job);
        self.shared.generation.fetch_add(1, Ordering::Release);
        if *lock(&self.shared.sleeping) > 0 {
            self.shared.wake.notify_all();
        }
    }
}

impl Executor {
    /// Stops the workers once every posted job is done, and joins them (unless called on a worker,
    /// which cannot join itself: then they exit on their own). Waits at most
    /// [`ExecutorOptions::stop_wait`]; see [`Executor::shutdown_by`].
    pub fn shutdown(&self) {
        self.shutdown_by(Instant::now() + self.stop_wait);
    }

    /// [`Executor::shutdown`], joining the workers that finish by `deadline`. The others are left
    /// running (each holds what its job needs, and exits once no posted job is left), so that a
    /// kernel that never returns costs a thread, not the program.
    pub fn shutdown_by(&self, deadline: Instant) {
        self.shared.shutdown.store(true, Ordering::Release);
        {
            let _sleeping = lock(&self.shared.sleeping);
            self.shared.wake.notify_all();
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        if on_worker_thread() {
            return;
        }
        let mut left = Vec::new();
        for thread in threads {
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                left.push(thread.thread().name().unwrap_or("a worker").to_owned());
            }
        }
        if !left.is_empty() {
            tracing::warn!(
                workers = ?left,
                "the workers' jobs did not finish within {:?} of stopping the pool; \
                 they are left running (a kernel that does not return?)",
                self.stop_wait
            );
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker_loop(shared: &Shared, processor_id: u32, max_concurrency: u8) {
    IS_WORKER.with(|flag| flag.set(true));
    let mut context = WorkerContext::new(processor_id, max_concurrency);
    let _flush = halo_cpu_executable::float_mode::FlushDenormals::enter();
    let mut contention = ContentionWatch::for_current_thread();
    loop {
        if let Some(job) = shared.next_job() {
            if job.run_claims(&mut context, &shared.watch) {
                shared.unfinished.fetch_sub(1, Ordering::AcqRel);
            }
            shared.busy_ns.fetch_add(context.take_busy_ns(), Ordering::Relaxed);
            continue;
        }
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        // Beside another busy process a worker that spins loses its core when work comes.
        if !shared.spin.is_zero() && !contention.contended() && spin_for_work(shared) {
            continue;
        }
        let mut sleeping = lock(&shared.sleeping);
        if shared.has_work() || shared.shutdown.load(Ordering::Acquire) {
            continue;
        }
        *sleeping += 1;
        sleeping = shared.wake.wait(sleeping).unwrap_or_else(|p| p.into_inner());
        *sleeping -= 1;
    }
}

/// Spins until a job is posted or the spin budget runs out (the longer one while some job is
/// unfinished); true if work may have arrived.
fn spin_for_work(shared: &Shared) -> bool {
    let seen = shared.generation.load(Ordering::Acquire);
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
        if shared.generation.load(Ordering::Acquire) != seen || shared.shutdown.load(Ordering::Relaxed) {
            return true;
        }
        if start.elapsed() >= shared.spin_budget() {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

    struct Count(Arc<Vec<AtomicUsize>>);

    impl TileWork for Count {
        fn run_tiles(&self, tiles: Range<u64>, _: &mut WorkerContext) -> Result<()> {
            for tile in tiles {
                self.0[tile as usize].fetch_add(1, Ordering::Relaxed);
                if tile == 77_777 {
                    return Err(Error::internal("tile 77777 fails"));
                }
            }
            Ok(())
        }
    }

    fn run(executor: &Executor, tiles: usize, largest_claim: u64) -> (Arc<Vec<AtomicUsize>>, Result<()>) {
        let counts: Arc<Vec<AtomicUsize>> = Arc::new((0..tiles).map(|_| AtomicUsize::new(0)).collect());
        let (tx, rx) = mpsc::channel();
        let job = Job::new(
            Box::new(Count(counts.clone())),
            tiles as u64,
            largest_claim,
            executor.worker_count(),
            Box::new(move |r| tx.send(r).unwrap()),
        );
        executor.post(job);
        let outcome = rx.recv_timeout(Duration::from_secs(20)).expect("job completes");
        (counts, outcome)
    }

    #[test]
    fn every_tile_runs_exactly_once() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 3,
            ..Default::default()
        })
        .unwrap();
        for (tiles, largest_claim) in [(1, 1), (10, 3), (10_000, 1), (10_000, 64), (0, 1)] {
            if tiles == 0 {
                continue;
            }
            let (counts, outcome) = run(&executor, tiles, largest_claim);
            outcome.unwrap();
            assert!(
                counts.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                "{tiles} tiles, claims of at most {largest_claim}"
            );
        }
    }

    /// Every tile worker `worker` claims, one claim after another, as if each ran in no time.
    fn claims(job: &Job, worker: usize) -> Vec<u64> {
        let mut pace = job.pace_for(worker);
        std::iter::from_fn(|| job.claim(worker, &mut pace)).flatten().collect()
    }

    #[test]
    fn a_worker_takes_its_own_share_first_then_steals_from_the_backs_of_the_others() {
        let job = Job::new(Box::new(Panics), 10, 1, 3, Box::new(|_| ()));
        let mut pace = job.pace_for(0);
        assert_eq!(
            job.claim(0, &mut pace),
            Some(0..1),
            "worker 0 starts at the front of share [0, 3)"
        );
        assert_eq!(claims(&job, 1), [3, 4, 5, 9, 8, 7, 6, 2, 1]);
        assert!(job.exhausted());
        assert_eq!(job.claim(2, &mut job.pace_for(2)), None);
    }

    #[test]
    fn more_workers_than_tiles_leave_some_shares_empty() {
        let job = Job::new(Box::new(Panics), 2, 1, 4, Box::new(|_| ()));
        assert!(!job.exhausted());
        let mut all = claims(&job, 0);
        all.sort_unstable();
        assert_eq!(all, [0, 1]);
    }

    #[test]
    fn a_tile_count_past_32_bits_is_claimed_in_larger_units() {
        let tiles = 1u64 << 40;
        let job = Job::new(Box::new(Panics), tiles, 1, 2, Box::new(|_| ()));
        assert_eq!(job.grain, tiles.div_ceil(u64::from(u32::MAX)));
        let first = job.claim(1, &mut job.pace_for(1)).expect("worker 1 has a share");
        assert_eq!(first.end - first.start, job.grain);
        assert!(
            first.start.abs_diff(tiles / 2) <= job.grain,
            "worker 1 starts half way, not at tile {}",
            first.start
        );
    }

    #[test]
    fn a_claim_takes_at_most_a_workers_part_of_what_is_left() {
        let share = Share::new(0, 10);
        let taken: Vec<_> = std::iter::from_fn(|| share.claim(End::Front, 100, 2)).collect();
        assert_eq!(taken, [0..5, 5..8, 8..9, 9..10]);
        let share = Share::new(0, 10);
        assert_eq!(share.claim(End::Back, 100, 4), Some(7..10));
        assert_eq!(share.claim(End::Back, 2, 1), Some(5..7), "one worker still takes half");
        assert_eq!(
            share.claim(End::Back, 0, 2),
            Some(4..5),
            "a claim takes at least one unit"
        );
    }

    #[test]
    fn claims_grow_while_quick_shrink_when_slow_and_restart_on_another_share() {
        let mut pace = ClaimPace::new(0, 8);
        assert_eq!(pace.limit_for(0), 1);
        for expected in [2, 4, 8, 8] {
            pace.ran_for(Duration::from_micros(1));
            assert_eq!(pace.limit_for(0), expected);
        }
        pace.ran_for(Duration::from_millis(1));
        assert_eq!(pace.limit_for(0), 4);
        pace.ran_for(CLAIM_GROW_BELOW);
        assert_eq!(pace.limit_for(0), 4, "a claim between the bounds keeps its size");
        assert_eq!(pace.limit_for(1), 1, "a thief starts with one unit");
        pace.claimed_from(1);
        pace.ran_for(Duration::from_micros(1));
        assert_eq!((pace.limit_for(1), pace.limit_for(0)), (2, 1));
    }

    /// Runs a job's claims on `workers` simulated workers, each claim taking the sum of its tiles'
    /// `cost`, and returns the time the last worker finished.
    fn simulated_makespan(tiles: u64, workers: usize, cost: impl Fn(u64) -> Duration) -> Duration {
        let largest_claim = tiles.div_ceil(workers as u64 * 16);
        let job = Job::new(Box::new(Panics), tiles, largest_claim, workers, Box::new(|_| ()));
        let mut paces: Vec<_> = (0..workers).map(|w| job.pace_for(w)).collect();
        let mut clocks = vec![Duration::ZERO; workers];
        let mut idle = vec![false; workers];
        while let Some(worker) = (0..workers).filter(|&w| !idle[w]).min_by_key(|&w| clocks[w]) {
            match job.claim(worker, &mut paces[worker]) {
                Some(claimed) => {
                    let took: Duration = claimed.map(&cost).sum();
                    clocks[worker] += took;
                    paces[worker].ran_for(took);
                }
                None => idle[worker] = true,
            }
        }
        clocks.into_iter().max().unwrap_or_default()
    }

    #[test]
    fn costly_tiles_are_shared_out_wherever_they_sit_in_the_grid() {
        let costly = Duration::from_millis(2);
        let cheap = Duration::from_nanos(300);
        // Where IREE 3.13's grids put their costly workgroups: a grouped convolution dispatched
        // as 512 workgroups of which only the first 16 compute anything, costly ones spread
        // evenly, all alike, and (the worst case for the half-of-what-is-left rule) a run at the
        // back of a worker's share, where its owner and the thieves meet.
        type IsCostly = fn(u64) -> bool;
        let patterns: [(&str, IsCostly); 4] = [
            ("the first 16", |tile| tile < 16),
            ("every 32nd", |tile| tile % 32 == 0),
            ("all", |_| true),
            ("the last 16 of a share", |tile| (240..256).contains(&tile)),
        ];
        for (name, is_costly) in patterns {
            for workers in [2, 4, 8] {
                let cost = |tile| if is_costly(tile) { costly } else { cheap };
                let total: Duration = (0..512).map(cost).sum();
                let makespan = simulated_makespan(512, workers, cost);
                let bound = total / workers as u32 + costly * 2;
                assert!(
                    makespan <= bound,
                    "costly tiles {name} on {workers} workers: the last finished after {makespan:?}, \
                     past {bound:?} (an even split plus two costly tiles)"
                );
            }
        }
    }

    #[test]
    fn a_failing_tile_fails_the_job_once() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 2,
            ..Default::default()
        })
        .unwrap();
        let (counts, outcome) = run(&executor, 100_000, 16);
        assert!(outcome.unwrap_err().to_string().contains("tile 77777"));
        assert_eq!(counts[77_777].load(Ordering::Relaxed), 1);
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) <= 1));
        let (_, outcome) = run(&executor, 10, 1);
        outcome.unwrap();
    }

    struct Panics;

    impl TileWork for Panics {
        fn run_tiles(&self, tiles: Range<u64>, _: &mut WorkerContext) -> Result<()> {
            if tiles.contains(&500) {
                panic!("tile 500 broke an invariant");
            }
            Ok(())
        }
    }

    #[test]
    fn a_panicking_tile_fails_the_job_and_the_workers_live_on() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 2,
            ..Default::default()
        })
        .unwrap();
        let (tx, rx) = mpsc::channel();
        executor.post(Job::new(
            Box::new(Panics),
            1000,
            8,
            executor.worker_count(),
            Box::new(move |r| tx.send(r).unwrap()),
        ));
        let outcome = rx.recv_timeout(Duration::from_secs(20)).expect("the job completes");
        let error = outcome.unwrap_err().to_string();
        assert!(
            error.contains("a worker panicked") && error.contains("tile 500 broke"),
            "{error}"
        );
        // Both workers still take jobs.
        for _ in 0..4 {
            run(&executor, 10_000, 1).1.unwrap();
        }
    }

    /// Records the CPUs each tile's thread may run on (`Cpus_allowed_list`).
    struct AllowedCpus(Mutex<Vec<String>>);

    impl TileWork for AllowedCpus {
        fn run_tiles(&self, tiles: Range<u64>, _: &mut WorkerContext) -> Result<()> {
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
            let allowed = status
                .lines()
                .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                .unwrap_or("")
                .trim()
                .to_string();
            lock(&self.0).extend(tiles.map(|_| allowed.clone()));
            Ok(())
        }
    }

    fn allowed_cpus(pinning: Pinning, worker_count: usize) -> Vec<String> {
        let executor = Executor::new(&ExecutorOptions {
            worker_count,
            pinning,
            ..Default::default()
        })
        .unwrap();
        let work = Arc::new(AllowedCpus(Mutex::new(Vec::new())));
        let (tx, rx) = mpsc::channel();
        executor.post(Job::new(
            Box::new(work.clone()),
            64,
            1,
            executor.worker_count(),
            Box::new(move |r| tx.send(r).unwrap()),
        ));
        rx.recv_timeout(Duration::from_secs(20))
            .expect("job completes")
            .unwrap();
        let seen = lock(&work.0).clone();
        seen
    }

    #[test]
    fn pinning_binds_workers_when_asked_or_one_per_core() {
        let cores = core_affinity::get_core_ids().unwrap_or_default().len();
        if cores == 0 || !std::path::Path::new("/proc/thread-self/status").exists() {
            eprintln!("skipped pinning_binds_workers_when_asked_or_one_per_core: no core list or /proc");
            return;
        }
        // A single CPU number, not a list or range, is a bound thread.
        let bound = |cpus: &[String]| cpus.iter().all(|c| !c.is_empty() && c.parse::<usize>().is_ok());
        assert!(
            bound(&allowed_cpus(Pinning::Auto, cores)),
            "one worker per core is bound"
        );
        assert!(bound(&allowed_cpus(Pinning::Always, cores + 1)));
        if cores > 1 {
            assert!(!bound(&allowed_cpus(Pinning::Never, cores)));
            assert!(
                !bound(&allowed_cpus(Pinning::Auto, cores - 1)),
                "fewer workers than cores float"
            );
        }
    }

    #[test]
    fn automatic_pinning_wants_one_worker_per_core() {
        assert!(Pinning::Auto.binds(4, 4));
        assert!(!Pinning::Auto.binds(3, 4));
        assert!(!Pinning::Auto.binds(5, 4));
        assert!(!Pinning::Auto.binds(1, 0), "no core list: nothing to bind to");
        assert!(Pinning::Always.binds(9, 4));
        assert!(!Pinning::Never.binds(4, 4));
    }

    #[test]
    fn sleeping_workers_wake_for_new_jobs() {
        let options = ExecutorOptions {
            worker_count: 2,
            spin: Duration::ZERO,
            ..Default::default()
        };
        let executor = Executor::new(&options).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        run(&executor, 1000, 1).1.unwrap();
    }

    /// Tiles that only finish when the other job's tile is running at the same time.
    struct Rendezvous(Arc<AtomicUsize>);

    impl TileWork for Rendezvous {
        fn run_tiles(&self, _: Range<u64>, _: &mut WorkerContext) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.0.load(Ordering::SeqCst) < 2 {
                if Instant::now() > deadline {
                    return Err(Error::deadline_exceeded("the other job never ran concurrently"));
                }
                std::hint::spin_loop();
            }
            Ok(())
        }
    }

    #[test]
    fn independent_jobs_run_at_the_same_time() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 2,
            ..Default::default()
        })
        .unwrap();
        let arrived = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let tx = tx.clone();
            executor.post(Job::new(
                Box::new(Rendezvous(arrived.clone())),
                1,
                1,
                executor.worker_count(),
                Box::new(move |r| tx.send(r).unwrap()),
            ));
        }
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
        }
    }

    /// A tile that says it started, then runs until released.
    struct Held {
        started: Mutex<mpsc::Sender<()>>,
        released: Arc<AtomicBool>,
    }

    impl TileWork for Held {
        fn run_tiles(&self, _: Range<u64>, _: &mut WorkerContext) -> Result<()> {
            lock(&self.started).send(()).unwrap();
            while !self.released.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        }
    }

    fn eventually(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !condition() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_pool_is_held_only_while_every_worker_is_inside_a_job() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 2,
            ..Default::default()
        })
        .unwrap();
        let (started_tx, started) = mpsc::channel();
        let released = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let post_held = || {
            let (started, tx) = (Mutex::new(started_tx.clone()), tx.clone());
            let work = Held {
                started,
                released: released.clone(),
            };
            executor.post(Job::new(
                Box::new(work),
                1,
                1,
                2,
                Box::new(move |r| tx.send(r).unwrap()),
            ));
        };
        post_held();
        let first = started.recv_timeout(Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(100));
        let one_held = executor.all_held_for();
        let second_posted = Instant::now();
        post_held();
        let second = started.recv_timeout(Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(100));
        let (held, at_most) = (executor.all_held_for(), second_posted.elapsed());
        // Released before any assertion, so that a failing one does not leave a worker held.
        released.store(true, Ordering::Release);
        first.and(second).expect("both tiles start");
        assert_eq!(one_held, Duration::ZERO, "one worker is free");
        assert!(
            held >= Duration::from_millis(100) && held <= at_most,
            "held for {held:?}, counted from when the second worker took its job"
        );
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("released jobs complete")
                .unwrap();
        }
        assert_eq!(executor.all_held_for(), Duration::ZERO, "the workers are free again");
    }

    #[test]
    fn idle_workers_spin_longer_while_a_posted_job_is_unfinished() {
        let (spin, spin_while_busy) = (Duration::from_micros(50), Duration::from_millis(3));
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 2,
            spin,
            spin_while_busy,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(executor.shared.spin_budget(), spin, "nothing posted");
        let (started_tx, started) = mpsc::channel();
        let released = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        executor.post(Job::new(
            Box::new(Held {
                started: Mutex::new(started_tx),
                released: released.clone(),
            }),
            1,
            1,
            executor.worker_count(),
            Box::new(move |r| tx.send(r).unwrap()),
        ));
        let started = started.recv_timeout(Duration::from_secs(20));
        let while_running = executor.shared.spin_budget();
        // Released before any assertion, so that a failing one does not leave a worker held.
        released.store(true, Ordering::Release);
        started.expect("the tile starts");
        assert_eq!(
            while_running, spin_while_busy,
            "its tiles are all taken, but it has not completed"
        );
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the job completes")
            .unwrap();
        eventually("the budget returns to the idle spin", || {
            executor.shared.spin_budget() == spin
        });
    }

    #[test]
    fn a_job_without_tiles_completes_when_posted() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 1,
            ..Default::default()
        })
        .unwrap();
        let (tx, rx) = mpsc::channel();
        executor.post(Job::new(
            Box::new(Count(Arc::new(Vec::new()))),
            0,
            1,
            executor.worker_count(),
            Box::new(move |r| tx.send(r).unwrap()),
        ));
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the job completes")
            .unwrap();
        assert_eq!(
            executor.shared.spin_budget(),
            executor.shared.spin,
            "nothing is left unfinished"
        );
    }

    #[test]
    fn drop_finishes_posted_jobs() {
        let executor = Executor::new(&ExecutorOptions {
            worker_count: 2,
            ..Default::default()
        })
        .unwrap();
        let counts: Arc<Vec<AtomicUsize>> = Arc::new((0..5000).map(|_| AtomicUsize::new(0)).collect());
        let (tx, rx) = mpsc::channel();
        executor.post(Job::new(
            Box::new(Count(counts.clone())),
            5000,
            1,
            executor.worker_count(),
            Box::new(move |r| tx.send(r).unwrap()),
        ));
        drop(executor);
        rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap();
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }
}
