//! A GPU device (CUDA or HIP, named here by the CUDA calls): its primary context, one stream for everything the program submits, a pool of
//! events, and the submission path.
//!
//! A queue operation is translated at once (so bad commands fail the call that submits them).
//! When each of its waits is either reached or promised by work already on the stream (the
//! stream runs in order, so the device itself keeps the order), it is issued at once; otherwise
//! it waits on the host for its wait fence through semaphore callbacks, and the thread that
//! reaches the last wait issues it. An event recorded after each submission tells the
//! completion thread, which waits for the events in order, when to signal its semaphores (or
//! fail them with the error, or with a wait's failure).

use crate::allocator::GpuAllocator;
use crate::api::{Api, CuContext, CuDevice, CuEvent, CuStream, DeviceAttribute, Vendor, EVENT_DISABLE_TIMING};
use crate::buffer::Contents;
use crate::command_buffer::{issue, translate, StreamOp};
use crate::driver::{CommandBufferKind, DeviceOptions};
use crate::executable::GpuExecutableCache;
use crate::graph;
use crate::recycler::Recycler;
use halo_hal::device::query_common_i64;
use halo_hal::held::HeldSince;
use halo_hal::promised_timepoints::{Coverage, PromisedTimepoints};
use halo_hal::submission_count::SubmissionCount;
use halo_hal::{
    Allocator, AllocatorStatistics, Binding, Buffer, BufferParams, CommandBuffer, Device, DeviceInfo, Error,
    ExecutableCache, Fence, QueueAffinity, Result, StatusCode, Timeout,
};
use std::any::Any;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The device's limits that dispatches and executables are checked against.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Threads one block may have.
    pub max_threads_per_block: u32,
    /// Largest block in x, y, z.
    pub max_block: [u32; 3],
    /// Largest grid in x, y, z.
    pub max_grid: [u32; 3],
    /// Dynamic shared memory one block may have (with the kernel's opt-in).
    pub max_shared_memory: u32,
}

impl Limits {
    fn query(api: &Api, device: CuDevice) -> Result<Self> {
        let get = |attribute| api.attribute(device, attribute).map(|v| v.max(0) as u32);
        Ok(Limits {
            max_threads_per_block: get(DeviceAttribute::MaxThreadsPerBlock)?,
            max_block: [
                get(DeviceAttribute::MaxBlockDimX)?,
                get(DeviceAttribute::MaxBlockDimY)?,
                get(DeviceAttribute::MaxBlockDimZ)?,
            ],
            max_grid: [
                get(DeviceAttribute::MaxGridDimX)?,
                get(DeviceAttribute::MaxGridDimY)?,
                get(DeviceAttribute::MaxGridDimZ)?,
            ],
            max_shared_memory: get(DeviceAttribute::MaxSharedMemoryPerBlockOptin)?,
        })
    }
}

/// What the device's objects share: the library, the context, the stream and the bookkeeping.
///
/// Ownership: buffers, executables and submissions in flight hold it in an `Arc`; the context is
/// released when the last of them goes. Threading: any thread; the stream is used under a lock.
pub struct DeviceShared {
    pub(crate) api: Arc<Api>,
    device: CuDevice,
    context: CuContext,
    stream: Mutex<CuStream>,
    pub(crate) limits: Limits,
    pub(crate) options: DeviceOptions,
    /// How command buffers reach the GPU: the option, or the driver's best when it is unset.
    command_buffers: CommandBufferKind,
    pub(crate) total_memory: u64,
    /// Freed allocations of the memory that has no stream-ordered pool, kept for reuse.
    pub(crate) recycler: Recycler,
    /// Semaphore values that work already on the stream signals; a submission that waits for no
    /// more than these can follow it onto the stream at once.
    promises: PromisedTimepoints,
    events: Mutex<Vec<CuEvent>>,
    completions: Mutex<Sender<InFlight>>,
    allocated: AtomicI64,
    peak: AtomicU64,
    /// Submissions accepted and not yet completed or failed, for `wait_idle`.
    submissions: SubmissionCount,
    /// The first error that left the context unusable (a kernel that faulted): every later
    /// submission fails with it instead of reaching the driver.
    lost: OnceLock<Error>,
    /// Since when the oldest work on the stream has been running: the stream runs in order, so
    /// while it runs nothing behind it starts.
    front: HeldSince,
}

// SAFETY: the raw handles (context, stream, events) are identifiers the driver API lets any
// thread use once the context is current there; the stream and the event pool are used only
// under their locks.
unsafe impl Send for DeviceShared {}
// SAFETY: as above.
unsafe impl Sync for DeviceShared {}

/// Work the stream has been given, waiting for its event.
struct InFlight {
    shared: Arc<DeviceShared>,
    event: CuEvent,
    wait: Fence,
    signal: Fence,
    /// When it went onto the stream.
    issued: Instant,
    /// Held until the work completes: the command buffer, bindings and translated operations.
    _keep: Work,
}

// SAFETY: the event is an identifier usable from the completion thread with the context current.
unsafe impl Send for InFlight {}

/// What a submission executes or holds.
pub(crate) enum Work {
    /// Only waits and signals.
    Nothing,
    /// A command buffer's operations.
    Commands(Commands),
    /// A buffer released once the waits are met (queue dealloca).
    Keep(#[expect(dead_code, reason = "held, never read: dropping it releases the buffer")] Buffer),
}

/// A command buffer's translated operations, with what they address.
pub(crate) struct Commands {
    /// Issued onto the stream one by one, or moved into the command buffer's graph.
    ops: Vec<StreamOp>,
    /// Keeps the executables and buffers the operations address alive.
    command_buffer: Arc<CommandBuffer>,
    #[expect(dead_code, reason = "held, never read: keeps bound buffers alive")]
    bindings: Vec<Binding<'static>>,
}

impl Commands {
    /// Puts the operations on `stream` in the device's way of running command buffers.
    fn issue(&mut self, shared: &Arc<DeviceShared>, stream: CuStream) -> Result<()> {
        match shared.command_buffers {
            CommandBufferKind::Graph if graph::suits(&self.command_buffer, &self.ops) => {
                graph::launch(shared, stream, &self.command_buffer, std::mem::take(&mut self.ops))
            }
            _ => issue(shared, stream, &mut self.ops),
        }
    }
}

impl DeviceShared {
    fn new(api: Arc<Api>, device: CuDevice, total_memory: u64, options: DeviceOptions) -> Result<Arc<Self>> {
        let command_buffers = command_buffer_kind(&api, options.command_buffers)?;
        let limits = Limits::query(&api, device)?;
        let mut context: CuContext = std::ptr::null_mut();
        // SAFETY: `device` is a valid ordinal and `context` an out-pointer.
        unsafe { api.primary_ctx_retain(&mut context, device) }?;
        let mut stream: CuStream = std::ptr::null_mut();
        // SAFETY: the context was just retained; `stream` is an out-pointer.
        let created = unsafe {
            api.ctx_set_current(context)
                .and_then(|()| api.stream_create(&mut stream, crate::api::STREAM_NON_BLOCKING))
        };
        if let Err(error) = created {
            // SAFETY: the context was retained above and nothing else uses it.
            let _ = unsafe { api.primary_ctx_release(device) };
            return Err(error);
        }
        let (sender, receiver) = channel();
        let shared = Arc::new(DeviceShared {
            api,
            device,
            context,
            stream: Mutex::new(stream),
            limits,
            options,
            command_buffers,
            total_memory,
            recycler: Recycler::default(),
            promises: PromisedTimepoints::default(),
            events: Mutex::new(Vec::new()),
            completions: Mutex::new(sender),
            allocated: AtomicI64::new(0),
            peak: AtomicU64::new(0),
            submissions: SubmissionCount::default(),
            lost: OnceLock::new(),
            front: HeldSince::default(),
        });
        std::thread::Builder::new()
            .name("halo-cuda-completion".into())
            .spawn(move || complete_in_order(receiver))
            .map_err(|e| Error::resource_exhausted(format!("starting the GPU completion thread: {e}")))?;
        Ok(shared)
    }

    /// Makes the device's context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained for as long as `self` lives.
        unsafe { self.api.ctx_set_current(self.context) }
    }

    /// Frees the blocks the recycler keeps; the caller made the context current.
    fn free_recycled(&self) {
        for (kind, pointer) in self.recycler.drain() {
            crate::buffer::free_now(&self.api, pointer, kind);
        }
    }

    pub(crate) fn count_allocated(&self, delta: i64) {
        let now = self.allocated.fetch_add(delta, Ordering::Relaxed) + delta;
        self.peak.fetch_max(now.max(0) as u64, Ordering::Relaxed);
    }

    pub(crate) fn statistics(&self) -> AllocatorStatistics {
        AllocatorStatistics {
            bytes_allocated: self.allocated.load(Ordering::Relaxed).max(0) as u64,
            bytes_peak: self.peak.load(Ordering::Relaxed),
        }
    }

    fn take_event(&self) -> Result<CuEvent> {
        if let Some(event) = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(event);
        }
        let mut event: CuEvent = std::ptr::null_mut();
        // SAFETY: the context is current (the caller bound it); `event` is an out-pointer.
        unsafe { self.api.event_create(&mut event, EVENT_DISABLE_TIMING) }?;
        Ok(event)
    }

    /// Runs `work` on the device's stream with the context current and the stream locked.
    pub(crate) fn with_stream<R>(&self, work: impl FnOnce(&Api, CuStream) -> Result<R>) -> Result<R> {
        self.bind()?;
        let stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        work(&self.api, *stream)
    }

    /// Issues `work` onto the stream and hands it to the completion thread. On error nothing
    /// was handed over; the caller fails the signals.
    fn issue(self: &Arc<Self>, mut work: Work, wait: &Fence, signal: &Fence) -> Result<()> {
        let event = self
            .with_stream(|api, stream| {
                if let Work::Commands(commands) = &mut work {
                    commands.issue(self, stream)?;
                }
                let event = self.take_event()?;
                // SAFETY: the event and the stream are live handles of this context.
                if let Err(error) = unsafe { api.event_record(event, stream) } {
                    self.events.lock().unwrap_or_else(|p| p.into_inner()).push(event);
                    return Err(error);
                }
                // Under the stream's lock, so whoever sees the promise issues behind this work.
                self.promises.promise(signal);
                Ok(event)
            })
            .inspect_err(|error| self.note_loss(error))?;
        let in_flight = InFlight {
            shared: self.clone(),
            event,
            wait: wait.clone(),
            signal: signal.clone(),
            issued: Instant::now(),
            _keep: work,
        };
        self.completions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(in_flight)
            .map_err(|_| Error::internal("the GPU completion thread has stopped"))
    }

    /// Remembers `error` as the device's loss when it left the context unusable.
    fn note_loss(&self, error: &Error) {
        if error.code() == StatusCode::DataLoss {
            let _ = self.lost.set(error.clone());
        }
    }

    /// `DataLoss` naming what was lost, once the device is.
    fn check_not_lost(&self) -> Result<()> {
        match self.lost.get() {
            None => Ok(()),
            Some(cause) => Err(Error::new(
                StatusCode::DataLoss,
                format!(
                    "the {} device was lost and takes no more work; it failed with: {cause}",
                    self.api.vendor().api_name()
                ),
            )),
        }
    }

    /// Runs `work` after `wait` and signals `signal` when the device has finished it.
    pub(crate) fn submit(self: &Arc<Self>, wait: &Fence, signal: &Fence, work: Work) {
        self.submissions.add();
        let fail = |error: Error| {
            signal.fail(&error);
            self.submissions.finish();
        };
        if let Err(error) = self.check_not_lost() {
            return fail(error);
        }
        match self.promises.cover(wait) {
            Err(error) => return fail(error),
            Ok(Coverage::Reached | Coverage::Promised) => return self.issue(work, wait, signal).unwrap_or_else(fail),
            Ok(Coverage::Neither) => {}
        }
        let (shared, wait_copy, signal) = (self.clone(), wait.clone(), signal.clone());
        // Once the waits are published, so that nobody sees this work's signal before them.
        wait.on_published(move |outcome| {
            let issued = outcome
                .and_then(|()| shared.check_not_lost())
                .and_then(|()| shared.issue(work, &wait_copy, &signal));
            if let Err(error) = issued {
                signal.fail(&error);
                shared.submissions.finish();
            }
        });
    }

    /// Blocks until every accepted submission has completed or failed.
    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.submissions.wait_idle(timeout, "GPU submissions")
    }
}

/// How a device runs command buffers: as asked, or, unasked, as graphs where the driver has the
/// graph entry points. Graphs were faster than the stream on every reused command buffer measured
/// on an H100, and they leave one-shot command buffers, fills and copies on the stream.
///
/// # Errors
/// `Unimplemented` when graphs are asked of a driver without them (HIP, old CUDA drivers).
fn command_buffer_kind(api: &Api, asked: Option<CommandBufferKind>) -> Result<CommandBufferKind> {
    match asked {
        Some(CommandBufferKind::Graph) => api.graphs().map(|_| CommandBufferKind::Graph),
        Some(kind) => Ok(kind),
        None if api.graphs().is_ok() => Ok(CommandBufferKind::Graph),
        None => Ok(CommandBufferKind::Stream),
    }
}

/// The longest nap between polls once a submission has run past the device's poll time: a bound
/// on how late long work is noticed.
const LONGEST_NAP: Duration = Duration::from_micros(100);

/// Waits for `event`: polling for `poll` (the device's `poll_us`), yielding the core between
/// polls, so that short work completes without a wake-up's latency; then napping between polls,
/// so that long work leaves the CPU to other threads. `cuEventSynchronize` spins under CUDA's
/// default scheduling: a server computing MobileNet-v2 on an H100 spent 3 ms of CPU per 3 ms
/// call, on the core its protocol threads needed. Events created to block instead
/// (`CU_EVENT_BLOCKING_SYNC`) made programs of tens of microseconds 10-40 % slower there.
///
/// # Safety
/// `event` must be a live event of the current context, recorded on its stream.
unsafe fn wait_for_event(api: &Api, event: CuEvent, poll: Duration) -> Result<()> {
    let start = Instant::now();
    let mut nap = Duration::from_micros(10);
    // SAFETY: the caller passes a live, recorded event.
    while !unsafe { api.event_reached(event) }? {
        if start.elapsed() < poll {
            std::thread::yield_now();
        } else {
            std::thread::sleep(nap);
            nap = (nap * 2).min(LONGEST_NAP);
        }
    }
    Ok(())
}

/// The completion thread: waits for each submission's event in issue order (the stream runs them
/// in that order), then signals or fails its semaphores and lets go of what it held.
fn complete_in_order(receiver: Receiver<InFlight>) {
    let mut last_completed = Instant::now();
    while let Ok(in_flight) = receiver.recv() {
        let shared = in_flight.shared.clone();
        // It started on the GPU once it was issued and the work before it completed.
        shared.front.hold(in_flight.issued.max(last_completed));
        // SAFETY: the event was recorded on this device's stream and is not reused until it is
        // back in the pool below.
        let outcome = shared
            .bind()
            .and_then(|()| unsafe { wait_for_event(&shared.api, in_flight.event, shared.options.poll) })
            .inspect_err(|error| shared.note_loss(error))
            .map_err(|error| error.context("running work on the GPU stream"))
            // Work issued behind a promise ran even if the promise was then broken.
            .and_then(|()| in_flight.wait.query().map(|_| ()));
        last_completed = Instant::now();
        shared.front.release();
        shared
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(in_flight.event);
        let signal = in_flight.signal.clone();
        drop(in_flight);
        match outcome {
            Ok(()) => {
                for (semaphore, value) in signal.timepoints() {
                    if let Err(error) = semaphore.signal(*value) {
                        semaphore.fail(error);
                    }
                }
            }
            Err(error) => signal.fail(&error),
        }
        shared.promises.forget_kept();
        shared.submissions.finish();
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        if self.bind().is_err() {
            return;
        }
        let stream = *self.stream.get_mut().unwrap_or_else(|p| p.into_inner());
        let events = std::mem::take(self.events.get_mut().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: nothing is in flight (each submission holds the device until it completes);
        // the handles were created on this context and are destroyed once.
        unsafe {
            let _ = self.api.stream_synchronize(stream);
            self.free_recycled();
            for event in events {
                let _ = self.api.event_destroy(event);
            }
            let _ = self.api.stream_destroy(stream);
            let _ = self.api.primary_ctx_release(self.device);
        }
    }
}

/// A GPU device (`cuda://0`, `hip://0`).
///
/// Ownership: objects it creates keep its shared state alive. Threading: any thread.
pub struct GpuDevice {
    info: DeviceInfo,
    shared: Arc<DeviceShared>,
    allocator: GpuAllocator,
}

impl GpuDevice {
    /// Opens device `ordinal` of the driver's API.
    pub(crate) fn new(
        api: Arc<Api>,
        ordinal: i32,
        info: DeviceInfo,
        total_memory: u64,
        options: DeviceOptions,
    ) -> Result<Self> {
        let mut device: CuDevice = 0;
        // SAFETY: `device` is an out-pointer; the ordinal was enumerated by the driver.
        unsafe { api.device_get(&mut device, ordinal) }?;
        if options.async_allocations && api.attribute(device, DeviceAttribute::MemoryPoolsSupported)? == 0 {
            return Err(Error::unimplemented(
                "this GPU has no memory pools for stream-ordered allocation; pass async_allocations=false",
            ));
        }
        let shared = DeviceShared::new(api, device, total_memory, options)?;
        Ok(GpuDevice {
            info,
            allocator: GpuAllocator::new(shared.clone()),
            shared,
        })
    }

    /// The device's limits.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }
}

impl Device for GpuDevice {
    fn driver_name(&self) -> &str {
        crate::driver::driver_name(self.shared.api.vendor())
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn query_i64(&self, category: &str, key: &str) -> Result<i64> {
        if category == "cuda.device" && self.shared.api.vendor() == Vendor::Cuda {
            let attribute = match key {
                "compute_capability_major" => DeviceAttribute::ComputeCapabilityMajor,
                "compute_capability_minor" => DeviceAttribute::ComputeCapabilityMinor,
                _ => return Err(Error::not_found(format!("unknown device query '{category}::{key}'"))),
            };
            return self.shared.api.attribute(self.shared.device, attribute).map(i64::from);
        }
        if category == "gpu.recycler" {
            return match key {
                "kept_bytes" => Ok(self.shared.recycler.kept_bytes() as i64),
                _ => Err(Error::not_found(format!("unknown device query '{category}::{key}'"))),
            };
        }
        let cache = GpuExecutableCache::new(self.shared.clone());
        query_common_i64(self, &cache, category, key)
    }

    fn create_executable_cache(&self) -> Result<Arc<dyn ExecutableCache>> {
        Ok(Arc::new(GpuExecutableCache::new(self.shared.clone())))
    }

    fn all_held_for(&self) -> Duration {
        self.shared.front.held_for().unwrap_or_default()
    }

    /// Frees the pinned, managed and synchronously allocated blocks kept for reuse.
    fn trim(&self) -> Result<()> {
        self.shared.bind()?;
        self.shared.free_recycled();
        Ok(())
    }

    fn queue_execute(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        command_buffer: Option<&Arc<CommandBuffer>>,
        binding_table: &[Binding],
    ) -> Result<()> {
        let work = match command_buffer {
            Some(command_buffer) => {
                command_buffer.validate_submission(binding_table)?;
                let ops = translate(&self.shared, command_buffer.commands()?, binding_table)?;
                Work::Commands(Commands {
                    ops,
                    command_buffer: command_buffer.clone(),
                    bindings: binding_table.iter().map(Binding::to_static).collect(),
                })
            }
            None => Work::Nothing,
        };
        self.shared.submit(wait, signal, work);
        Ok(())
    }

    fn queue_alloca(
        &self,
        queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        params: BufferParams,
        size: u64,
    ) -> Result<Buffer> {
        // From the stream's memory pool where enabled: ordered before everything issued later,
        // so the buffer is ready once the waits are, with no host round trip.
        let buffer = self.allocator.allocate(params, size, Contents::Undefined)?;
        self.queue_barrier(queue_affinity, wait, signal)?;
        Ok(buffer)
    }

    fn queue_dealloca(
        &self,
        _queue_affinity: QueueAffinity,
        wait: &Fence,
        signal: &Fence,
        buffer: &Buffer,
    ) -> Result<()> {
        // The memory returns once nothing holds the buffer after the waits.
        self.shared.submit(wait, signal, Work::Keep(buffer.clone()));
        Ok(())
    }

    fn wait_idle(&self, timeout: Timeout) -> Result<()> {
        self.shared.wait_idle(timeout)
    }
}
