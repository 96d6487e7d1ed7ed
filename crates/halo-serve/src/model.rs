//! A served model: one function of a loaded module, its inputs and outputs as the protocol
//! describes them, and the admission limits that bound its concurrent work.

use crate::batcher::{BatchKey, BatchQueue};
use crate::classification::{read_labels, ClassLabels};
use crate::compute::ComputeThreads;
use crate::metrics::Metrics;
use crate::model_source;
use crate::sized_functions::{batch_functions, check_batch_sizes, check_batchable, common_rows, unbatched_sizes};
use crate::statistics::{ModelStatistics, StatisticsSnapshot};
use crate::tensor_spec::{check_input, zeros};
use halo_hal::{ElementType, Error, HostTensor, Result, ResultExt};
use halo_runtime::{CancelToken, Function, Instance, Session, Value};
use halo_vm::module::{BytecodeModule, LoadMode};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

pub use crate::model_config::{ModelConfig, MAX_BATCH_SIZE, MAX_CONCURRENCY, MAX_QUEUE, MAX_QUEUE_DELAY};
pub use crate::tensor_spec::{InputTensor, OutputTensor, TensorSpec};

/// The models a server answers for, by name.
pub type Models = BTreeMap<String, Arc<Model>>;

/// The model called `name`, at `version` when one is given.
///
/// # Errors
/// `InvalidArgument` naming the models there are, or the versions the model has.
pub fn find(models: &Models, name: &str, version: Option<&str>) -> Result<Arc<Model>> {
    let model = models.get(name).ok_or_else(|| {
        Error::invalid_argument(format!(
            "unknown model '{name}'; this server has {:?}",
            models.keys().collect::<Vec<_>>()
        ))
    })?;
    if let Some(version) = version.filter(|v| *v != model.config().version) {
        return Err(Error::invalid_argument(format!(
            "model '{name}' has no version '{version}'; it has '{}'",
            model.config().version
        )));
    }
    Ok(model.clone())
}

/// How long a model's device (or each of its computing threads) may stay held by the same work
/// before the model is [stalled](Model::stalled), for a model without a timeout (one with a
/// timeout is stalled past it).
pub const STALLED_WITHOUT_TIMEOUT: Duration = Duration::from_secs(60);

/// A loaded model.
pub struct Model {
    config: ModelConfig,
    session: Session,
    function: Function,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
    /// Each output's class labels, if it has a label file.
    labels: Vec<Option<ClassLabels>>,
    /// Requests admitted whose calls are queued or running, or that are not yet answered.
    admitted: Arc<AtomicUsize>,
    /// The threads its calls run on, `max_concurrency` at most; a call keeps its thread until
    /// it returns, or until it is cancelled once its request is answered without it (at its
    /// deadline, or when its client goes).
    compute: ComputeThreads,
    /// Requests run so far: each one's number in the trace.
    requests_run: AtomicU64,
    /// Requests waiting to be batched, for a model with a `max_batch_size`.
    batches: Option<Arc<BatchQueue>>,
    /// The function for each fixed batch size, smallest first (`halo compile --batch-sizes`):
    /// a batching model's calls go to the smallest that holds their rows, padded up to it.
    sized_functions: Vec<(u64, Function)>,
    statistics: ModelStatistics,
}

/// Cancels its token when dropped: a request's call is stopped once nothing waits for it.
struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A request's place in a model's admission: released when dropped.
pub struct Admission {
    admitted: Arc<AtomicUsize>,
}

impl Admission {
    /// One of the `limit` places `admitted` counts, if one is free.
    pub(crate) fn take(admitted: &Arc<AtomicUsize>, limit: usize) -> Option<Admission> {
        admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .ok()
            .map(|_| Admission {
                admitted: admitted.clone(),
            })
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Model {
    /// Loads the modules of `config` on its devices and finds its function.
    ///
    /// # Errors
    /// Device creation, loading, a missing function, or a declaration the protocol cannot
    /// describe, each naming the model.
    pub fn load(instance: &Instance, config: ModelConfig) -> Result<Model> {
        Self::load_cancellable(instance, config, &CancelToken::new())
    }

    /// [`Model::load`], its compile, its modules' initializers and its warm-up stopping with
    /// `Cancelled` (at their next step) once `cancel` is cancelled: a damaged initializer may
    /// loop for ever, a compile take minutes.
    ///
    /// # Errors
    /// As [`Model::load`]'s, and `Cancelled`.
    pub fn load_cancellable(instance: &Instance, config: ModelConfig, cancel: &CancelToken) -> Result<Model> {
        let name = config.name.clone();
        let model = Self::build(instance, config, cancel).with_context(|| format!("loading model '{name}'"))?;
        if model.config.warmup {
            let started = Instant::now();
            model
                .warm_up(cancel)
                .with_context(|| format!("warming up model '{name}'"))?;
            tracing::info!(model = %name, ms = started.elapsed().as_secs_f64() * 1e3, "warmed up");
        }
        Ok(model)
    }

    /// Calls the function once with every input zero.
    ///
    /// # Errors
    /// `InvalidArgument` naming an input whose shape is not static; `ResourceExhausted` when the
    /// zeros do not fit in memory; the call's own error.
    fn warm_up(&self, cancel: &CancelToken) -> Result<()> {
        let batch_of_one = |spec: &TensorSpec| {
            let mut spec = spec.clone();
            if self.batches.is_some() {
                spec.shape[0] = 1;
            }
            zeros(&spec)
        };
        let inputs = self.inputs.iter().map(batch_of_one).collect::<Result<Vec<_>>>()?;
        self.infer_cancellable(inputs, cancel).map(drop)
    }

    fn build(instance: &Instance, config: ModelConfig, cancel: &CancelToken) -> Result<Model> {
        config.check_limits()?;
        let uris: Vec<&str> = config.devices.iter().map(String::as_str).collect();
        let mut session = Session::new(instance, &uris)?;
        let first_device = uris.first().copied().unwrap_or("local-task");
        let mut public_functions = Vec::new();
        for module in &config.modules {
            let path = model_source::compiled(module, first_device, cancel)?;
            let loading = || format!("loading module '{}'", path.display());
            let module = BytecodeModule::open(&path, LoadMode::Map).with_context(loading)?;
            public_functions = module.public_functions();
            session
                .load_module_cancellable(Arc::new(module), cancel)
                .with_context(loading)?;
        }
        let function = match &config.function {
            Some(name) => session.function(name)?,
            None => session.function(&only_function(public_functions.clone())?)?,
        };
        let specs = |declared: Vec<(String, String)>, prefix: &str| {
            declared
                .iter()
                .enumerate()
                .map(|(index, (name, ty))| {
                    let name = if name.is_empty() {
                        format!("{prefix}{index}")
                    } else {
                        name.clone()
                    };
                    TensorSpec::declared(&name, ty)
                })
                .collect::<Result<Vec<_>>>()
        };
        let inputs = renamed(
            specs(typed(function.declared_inputs(), &config.input_types), "input")?,
            &config.input_names,
            "input",
        )?;
        let outputs = renamed(
            specs(typed(function.declared_outputs(), &config.output_types), "output")?,
            &config.output_names,
            "output",
        )?;
        check_against_function(&function, &inputs, &outputs)?;
        let sized_functions = if config.max_batch_size > 0 {
            check_batchable(config.max_batch_size, &inputs, &outputs)?;
            let sized = batch_functions(&session, &public_functions, &function, (&inputs, &outputs))?;
            check_batch_sizes(config.max_batch_size, &sized)?;
            sized
        } else {
            unbatched_sizes(&session, &public_functions, &function, (&inputs, &outputs))
        };
        let labels = output_labels(&config.output_labels, &outputs)?;
        Ok(Model {
            sized_functions,
            batches: (config.max_batch_size > 0).then(Arc::default),
            compute: ComputeThreads::new("halo-compute", config.max_concurrency),
            config,
            session,
            function,
            inputs,
            outputs,
            labels,
            admitted: Arc::new(AtomicUsize::new(0)),
            requests_run: AtomicU64::new(0),
            statistics: ModelStatistics::default(),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Its inputs, in the function's order.
    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    /// Its outputs, in the function's order.
    pub fn outputs(&self) -> &[TensorSpec] {
        &self.outputs
    }

    /// Admits a request when fewer than `max_concurrency + max_queue` are in the model and it is
    /// not [stalled](Model::stalled).
    ///
    /// # Errors
    /// `Unavailable` naming the model and its limits when it is full, or why it is stalled.
    pub fn admit(&self) -> Result<Admission> {
        if let Some(stalled) = self.stalled() {
            self.statistics.finished(false, Duration::ZERO);
            return Err(Error::unavailable(stalled));
        }
        let limit = self.config.max_concurrency + self.config.max_queue;
        match Admission::take(&self.admitted, limit) {
            Some(admission) => Ok(admission),
            None => {
                // A refused request is a failed one in the model's statistics, as Triton counts it.
                self.statistics.finished(false, Duration::ZERO);
                Err(Error::unavailable(format!(
                    "model '{}' is busy: {} requests running and {} queued",
                    self.config.name, self.config.max_concurrency, self.config.max_queue
                )))
            }
        }
    }

    /// Why the model cannot answer now, if it cannot: one of its devices has been held by the
    /// same work (every worker of a `local-task` pool; the queue of a GPU or OpenCL device), or
    /// each of its computing threads by the same call (a `local-sync` kernel runs on it), for
    /// longer than the model's timeout (or [`STALLED_WITHOUT_TIMEOUT`]), so a request would wait
    /// at least that long. A kernel that never returns does that; a request answered at its
    /// deadline leaves its kernel running. The model answers again once they are free.
    pub fn stalled(&self) -> Option<String> {
        // Asked for every request: nothing is formatted unless the model is stalled.
        let patience = self.config.timeout.unwrap_or(STALLED_WITHOUT_TIMEOUT);
        let threads = self.compute.all_held_for();
        let device = self
            .session
            .devices()
            .iter()
            .map(|device| device.all_held_for())
            .enumerate()
            .max_by_key(|&(_, held)| held);
        let (what, held) = match device {
            Some((index, held)) if held > threads && held > patience => {
                let uri = self.config.devices.get(index).map_or("?", String::as_str);
                (format!("its device '{uri}' has been held by the same work"), held)
            }
            _ if threads > patience => (
                format!(
                    "each of its {} computing threads has been inside the same call",
                    self.config.max_concurrency
                ),
                threads,
            ),
            _ => return None,
        };
        Some(format!(
            "model '{}' is stalled: {what} for {:.1} s, longer than its requests wait ({:.1} s): \
             a kernel has not returned in that time",
            self.config.name,
            held.as_secs_f64(),
            patience.as_secs_f64()
        ))
    }

    /// How long each of its devices, by URI, has been held by the work it runs now
    /// ([`halo_hal::Device::all_held_for`]).
    pub fn devices_held(&self) -> Vec<(String, Duration)> {
        let devices = self.session.devices().iter().map(|device| device.all_held_for());
        self.config.devices.iter().cloned().zip(devices).collect()
    }

    /// The threads its calls run on.
    pub fn compute_threads(&self) -> &ComputeThreads {
        &self.compute
    }

    /// How many requests wait to be batched (0 for a model that does not batch).
    pub fn waiting_for_batch(&self) -> usize {
        self.batches.as_ref().map_or(0, |batches| batches.len())
    }

    /// Runs a request: admits it and calls the function on one of the model's computing
    /// threads, so the server's threads keep answering while models compute. Both the time it
    /// waited for a thread and the time it computed go to `metrics`. A request still waiting
    /// or computing at `deadline` is answered then. A call whose request is answered without
    /// it (at the deadline, or because the client went and this future was dropped) is
    /// cancelled: its program stops at its next step, so one that would loop for ever on its
    /// inputs gives its thread back; device work it queued runs to its end.
    ///
    /// # Errors
    /// `Unavailable` when the model is full; `DeadlineExceeded` at the deadline; the errors of
    /// [`Model::infer`].
    pub async fn run(
        self: &Arc<Self>,
        inputs: Vec<InputTensor>,
        metrics: &Metrics,
        deadline: Option<Instant>,
    ) -> Result<Vec<OutputTensor>> {
        let admission = self.admit()?;
        self.run_admitted(admission, inputs, metrics, deadline).await
    }

    /// Runs a request already admitted, as [`Model::run`] does: a server admits a request
    /// before it reads its body, so bodies it has no room for are never held.
    ///
    /// # Errors
    /// As [`Model::run`]'s, but for the admission's.
    pub async fn run_admitted(
        self: &Arc<Self>,
        admission: Admission,
        inputs: Vec<InputTensor>,
        metrics: &Metrics,
        deadline: Option<Instant>,
    ) -> Result<Vec<OutputTensor>> {
        let started = Instant::now();
        let number = self.requests_run.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("serve.request", model = %self.config.name, request = number);
        let outputs = (self.admitted_run(admission, inputs, metrics, deadline, number))
            .instrument(span)
            .await;
        self.statistics.finished(outputs.is_ok(), started.elapsed());
        outputs
    }

    async fn admitted_run(
        self: &Arc<Self>,
        admission: Admission,
        inputs: Vec<InputTensor>,
        metrics: &Metrics,
        deadline: Option<Instant>,
        number: u64,
    ) -> Result<Vec<OutputTensor>> {
        if let Some(batches) = &self.batches {
            return self
                .batched_run(batches, (admission, number), inputs, metrics, deadline)
                .await;
        }
        let model = self.clone();
        let cancel = CancelToken::new();
        let _cancel_unless_answered = CancelOnDrop(cancel.clone());
        let queued = Instant::now();
        // The call holds the admission, so one withdrawn at its deadline still counts until a
        // thread drops it from the queue: the queued inputs' memory stays within the limits.
        let mut ticket = self.compute.submit(move || {
            let _admission = admission;
            let waited = queued.elapsed();
            let computing = Instant::now();
            let call = tracing::info_span!("serve.call", model = %model.config.name, requests = %number);
            let outputs = call.in_scope(|| model.infer_cancellable(inputs, &cancel));
            let computed = computing.elapsed();
            if outputs.is_ok() {
                model.statistics.executed(1, computed);
            }
            (waited, computed, outputs)
        })?;
        let finished = match deadline {
            None => ticket.result().await,
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), ticket.result()).await {
                Ok(finished) => finished,
                Err(_) => return Err(self.out_of_time(ticket.withdraw())),
            },
        };
        let (waited, computed, outputs) = finished.with_context(|| format!("running model '{}'", self.config.name))?;
        metrics.observe_queue(&self.config.name, waited);
        metrics.observe_compute(&self.config.name, computed);
        if outputs.is_ok() {
            // As Triton's, the stage times are those of successful requests.
            self.statistics.succeeded_in(waited, computed, 1);
        }
        outputs
    }

    /// Runs a request of a batching model: queued with its inputs, and a turn on a computing
    /// thread that calls the function for it and every request waiting that can join it
    /// ([`crate::batcher`]), unless another request's turn took it first.
    async fn batched_run(
        self: &Arc<Self>,
        batches: &Arc<BatchQueue>,
        (admission, number): (Admission, u64),
        inputs: Vec<InputTensor>,
        metrics: &Metrics,
        deadline: Option<Instant>,
    ) -> Result<Vec<OutputTensor>> {
        let inputs = self.checked_inputs(inputs)?;
        let (key, rows) = BatchKey::of(&inputs)?;
        if rows == 0 || rows > self.config.max_batch_size {
            return Err(Error::invalid_argument(format!(
                "the request has {rows} rows along the batch dimension; model '{}' takes 1 to at most {} (max_batch_size)",
                self.config.name, self.config.max_batch_size
            )));
        }
        let (place, answer) = batches.push(key, rows, (inputs, number), Box::new(admission));
        let model = self.clone();
        // Never withdrawn, even once another turn has answered this request: a turn serves the
        // oldest waiting request, not its own, so withdrawing this one could leave a request
        // that an earlier turn passed over (it did not fit) with no turn left to take it (two
        // requests pushed in one order and their turns submitted in the other hung a client).
        // With every turn run, the turns still to run always number at least the requests
        // waiting; a turn finding none waiting returns at once.
        self.compute.submit(move || model.run_batch())?.keep_queued();
        let answer = match deadline {
            None => answer.await,
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), answer).await {
                Ok(answer) => answer,
                Err(_) => return Err(self.out_of_time(!place.in_call())),
            },
        };
        let answer = answer
            .map_err(|_| Error::internal("the batched call ended without an answer: it panicked"))
            .with_context(|| format!("running model '{}'", self.config.name))?;
        metrics.observe_queue(&self.config.name, answer.waited);
        metrics.observe_compute(&self.config.name, answer.computed);
        if answer.first {
            metrics.observe_batch(&self.config.name, answer.batch_rows);
        }
        if answer.outputs.is_ok() {
            self.statistics.succeeded_in(answer.waited, answer.computed, rows);
        }
        answer.outputs
    }

    /// The answer to a request whose deadline passed while it was `waiting` for a turn, or else
    /// computing.
    fn out_of_time(&self, waiting: bool) -> Error {
        let stage = if waiting { "waiting for a turn" } else { "computing" };
        Error::deadline_exceeded(format!(
            "the request to model '{}' ran out of time while {stage}",
            self.config.name
        ))
    }

    /// A computing thread's turn of a batching model: one call for the oldest waiting request
    /// and those that can join it; nothing when other turns took them all.
    fn run_batch(&self) {
        let Some(batches) = &self.batches else { return };
        let mut batch = batches.take(self.config.max_batch_size, self.config.max_queue_delay);
        if batch.is_empty() {
            return;
        }
        let started = Instant::now();
        let rows = batch.rows();
        let requests = batch.request_numbers();
        let call = tracing::info_span!("serve.call", model = %self.config.name, rows, requests = %requests);
        let outputs = call.in_scope(|| (batch.inputs()).and_then(|inputs| self.call_rows(inputs, rows, &batch.cancel)));
        let computed = started.elapsed();
        if outputs.is_ok() {
            self.statistics.executed(batch.rows(), computed);
        }
        batch.answer(outputs, started, computed);
    }

    /// Its inference statistics since it was loaded.
    pub fn statistics(&self) -> StatisticsSnapshot {
        self.statistics.snapshot()
    }

    /// When a request arriving now must be answered: after the sooner of the model's timeout
    /// and the request's own, if either is set.
    pub fn deadline(&self, requested: Option<Duration>) -> Option<Instant> {
        let timeout = match (self.config.timeout, requested) {
            (Some(model), Some(request)) => Some(model.min(request)),
            (model, request) => model.or(request),
        };
        timeout.and_then(|t| Instant::now().checked_add(t))
    }

    /// The bytes allocated on each of the model's devices, by device URI.
    pub fn device_memory(&self) -> Vec<(String, u64)> {
        self.config
            .devices
            .iter()
            .zip(self.session.devices())
            .map(|(uri, device)| (uri.clone(), device.allocator().statistics().bytes_allocated))
            .collect()
    }

    /// Calls the function with `inputs` (matched to its inputs by name) on the calling thread
    /// and reads every result back.
    ///
    /// # Errors
    /// `InvalidArgument` for a missing, unknown or repeated input, a wrong datatype, shape or
    /// byte count; the call's own errors.
    pub fn infer(&self, inputs: Vec<InputTensor>) -> Result<Vec<OutputTensor>> {
        self.infer_cancellable(inputs, &CancelToken::new())
    }

    /// Calls the function as [`Model::infer`] does, stopping its program at its next step once
    /// `cancel` is cancelled.
    ///
    /// # Errors
    /// As [`Model::infer`]'s, and `Cancelled`.
    pub fn infer_cancellable(&self, inputs: Vec<InputTensor>, cancel: &CancelToken) -> Result<Vec<OutputTensor>> {
        let inputs = self.checked_inputs(inputs)?;
        self.call(inputs, cancel)
    }

    /// Calls the function with `inputs`, checked against its inputs and in their order: through
    /// a fixed-size function ([`Model::call_rows`]) when the module has them and every input has
    /// the same number of rows, since IREE's code for known shapes is faster.
    fn call(&self, inputs: Vec<InputTensor>, cancel: &CancelToken) -> Result<Vec<OutputTensor>> {
        match common_rows(&inputs).filter(|_| !self.sized_functions.is_empty()) {
            Some(rows) => self.call_rows(inputs, rows, cancel),
            None => self.call_function(&self.function, inputs, cancel),
        }
    }

    /// Calls the function for a batch of `rows` rows: the fixed-size function that holds them,
    /// its inputs padded with zero rows and its outputs cut back to `rows`, where the module has
    /// one; else the function itself.
    fn call_rows(&self, mut inputs: Vec<InputTensor>, rows: u64, cancel: &CancelToken) -> Result<Vec<OutputTensor>> {
        let Some((size, function)) = self.sized_functions.iter().find(|(size, _)| *size >= rows) else {
            return self.call_function(&self.function, inputs, cancel);
        };
        crate::batcher::pad_rows(&mut inputs, rows, *size)?;
        let mut outputs = self.call_function(function, inputs, cancel)?;
        crate::batcher::cut_rows(&mut outputs, rows, *size)?;
        Ok(outputs)
    }

    /// The fixed batch sizes the model's calls use; empty when it has none.
    pub fn batch_sizes(&self) -> Vec<u64> {
        self.sized_functions.iter().map(|(size, _)| *size).collect()
    }

    /// Calls `function` with `inputs`, checked against the model's inputs and in their order.
    fn call_function(
        &self,
        function: &Function,
        inputs: Vec<InputTensor>,
        cancel: &CancelToken,
    ) -> Result<Vec<OutputTensor>> {
        let values = (self.inputs.iter().zip(inputs))
            .map(|(spec, input)| self.input_value(spec, input))
            .collect::<Result<Vec<_>>>()?;
        let results = self.session.call_cancellable(function, &values, cancel)?;
        results
            .iter()
            .enumerate()
            .map(|(index, value)| self.output(index, value))
            .collect()
    }

    /// The input called `name`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the model's inputs when it has none of that name.
    pub fn input_spec(&self, name: &str) -> Result<&TensorSpec> {
        self.inputs.iter().find(|s| s.name == name).ok_or_else(|| {
            Error::invalid_argument(format!(
                "model '{}' has no input '{name}'; its inputs are {:?}",
                self.config.name,
                self.inputs.iter().map(|s| &s.name).collect::<Vec<_>>()
            ))
        })
    }

    /// `inputs` in the function's order, each checked against its spec.
    ///
    /// # Errors
    /// `InvalidArgument` for a missing, unknown or repeated input, a wrong datatype, shape or
    /// byte count.
    fn checked_inputs(&self, mut inputs: Vec<InputTensor>) -> Result<Vec<InputTensor>> {
        for input in &inputs {
            self.input_spec(&input.name)?;
        }
        self.inputs
            .iter()
            .map(|spec| {
                let position = inputs.iter().position(|i| i.name == spec.name).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "the request lacks input '{}' of model '{}'",
                        spec.name, self.config.name
                    ))
                })?;
                let input = inputs.swap_remove(position);
                if inputs.iter().any(|i| i.name == spec.name) {
                    return Err(Error::invalid_argument(format!("input '{}' is given twice", spec.name)));
                }
                check_input(spec, &input)?;
                Ok(input)
            })
            .collect()
    }

    /// The value the function takes for `input`, already checked against `spec`.
    fn input_value(&self, spec: &TensorSpec, input: InputTensor) -> Result<Value> {
        if spec.scalar {
            return scalar_value(spec, &input.bytes);
        }
        let tensor = HostTensor {
            shape: input.shape,
            element_type: spec.element_type,
            bytes: input.bytes,
        };
        self.session.tensor_input(&tensor)
    }

    fn output(&self, index: usize, value: &Value) -> Result<OutputTensor> {
        let name = self
            .outputs
            .get(index)
            .map_or_else(|| format!("output{index}"), |s| s.name.clone());
        let tensor = match value {
            Value::I32(v) => scalar_tensor(ElementType::parse("i32")?, &v.to_le_bytes()),
            Value::I64(v) => scalar_tensor(ElementType::parse("i64")?, &v.to_le_bytes()),
            Value::F32(v) => scalar_tensor(ElementType::parse("f32")?, &v.to_le_bytes()),
            Value::F64(v) => scalar_tensor(ElementType::parse("f64")?, &v.to_le_bytes()),
            Value::Ref(_) => halo_runtime::tensor::to_host(self.session.device().as_ref(), value)
                .with_context(|| format!("reading output '{name}'"))?,
        };
        Ok(OutputTensor {
            name,
            shape: tensor.shape,
            element_type: tensor.element_type,
            bytes: tensor.bytes,
            labels: self.labels.get(index).cloned().flatten(),
        })
    }
}

/// The declared `(name, type)` pairs, with `types` in place of the declared types when given
/// (the declared names stay where there are as many).
fn typed(declared: Vec<(String, String)>, types: &[String]) -> Vec<(String, String)> {
    if types.is_empty() {
        return declared;
    }
    let names = |index: usize| match declared.len() == types.len() {
        true => declared[index].0.clone(),
        false => String::new(),
    };
    types
        .iter()
        .enumerate()
        .map(|(index, ty)| (names(index), ty.clone()))
        .collect()
}

/// The one public function of a model's last module, for a configuration that names none.
fn only_function(public_functions: Vec<String>) -> Result<String> {
    // Functions for fixed batch sizes (`f_b4` beside `f`) are the function's, not others.
    let sized = |name: &String| {
        (name.rsplit_once("_b")).is_some_and(|(base, size)| {
            size.parse::<u64>().is_ok() && public_functions.iter().any(|other| other == base)
        })
    };
    let functions: Vec<String> = public_functions.iter().filter(|name| !sized(name)).cloned().collect();
    match <[String; 1]>::try_from(functions) {
        Ok([only]) => Ok(only),
        Err(several) => Err(Error::invalid_argument(format!(
            "no function is named and the last module exports {} ({}); name the one requests call \
             (`function` in config.toml, --function)",
            several.len(),
            several.join(", ")
        ))),
    }
}

/// Checks the described inputs and outputs against what `function` takes and returns: their
/// counts, and tensors where it takes references.
fn check_against_function(function: &Function, inputs: &[TensorSpec], outputs: &[TensorSpec]) -> Result<()> {
    let kinds = function.argument_kinds();
    if inputs.len() != kinds.len() {
        let said = match function.declaration() {
            None if inputs.is_empty() => "has no declaration of them; compile it with `halo compile`, which records one, or give their types (input_types in config.toml, --input-type)".to_string(),
            _ => format!("is described with {}", inputs.len()),
        };
        return Err(Error::invalid_argument(format!(
            "function '{}' takes {} inputs but {said}",
            function.name(),
            kinds.len()
        )));
    }
    if let Some((spec, _)) = inputs
        .iter()
        .zip(&kinds)
        .find(|(spec, &kind)| spec.scalar == (kind == 'r'))
    {
        return Err(Error::invalid_argument(format!(
            "input '{}' of function '{}' is described as {} but the function takes {}",
            spec.name,
            function.name(),
            if spec.scalar { "a scalar" } else { "a tensor" },
            if spec.scalar { "a tensor" } else { "a scalar" }
        )));
    }
    let results = function.result_kinds().len();
    if !outputs.is_empty() && outputs.len() != results {
        return Err(Error::invalid_argument(format!(
            "function '{}' returns {results} results but is described with {} outputs",
            function.name(),
            outputs.len()
        )));
    }
    Ok(())
}

/// Each output's labels, read from the files `files` names for them.
///
/// # Errors
/// `InvalidArgument` for a file named for an output the model does not have; a file that
/// cannot be read, naming it.
fn output_labels(files: &BTreeMap<String, PathBuf>, outputs: &[TensorSpec]) -> Result<Vec<Option<ClassLabels>>> {
    let mut labels = vec![None; outputs.len()];
    for (name, path) in files {
        let index = outputs.iter().position(|o| &o.name == name).ok_or_else(|| {
            Error::invalid_argument(format!(
                "labels are configured for output '{name}', which the model does not have (its outputs: {:?})",
                outputs.iter().map(|o| o.name.as_str()).collect::<Vec<_>>()
            ))
        })?;
        labels[index] = Some(read_labels(path).with_context(|| format!("the labels of output '{name}'"))?);
    }
    Ok(labels)
}

/// `specs` under the configured `names`, when there are any.
fn renamed(mut specs: Vec<TensorSpec>, names: &[String], what: &str) -> Result<Vec<TensorSpec>> {
    if names.is_empty() {
        return Ok(specs);
    }
    if names.len() != specs.len() {
        return Err(Error::invalid_argument(format!(
            "the configuration names {} {what}s but the function has {}",
            names.len(),
            specs.len()
        )));
    }
    for (spec, name) in specs.iter_mut().zip(names) {
        spec.name = name.clone();
    }
    Ok(specs)
}

fn scalar_tensor(element_type: ElementType, bytes: &[u8]) -> HostTensor {
    HostTensor {
        shape: Vec::new(),
        element_type,
        bytes: bytes.to_vec(),
    }
}

fn scalar_value(spec: &TensorSpec, bytes: &[u8]) -> Result<Value> {
    // The byte count was checked against the datatype, so each conversion below takes it whole.
    Ok(match (spec.datatype, bytes.try_into(), bytes.try_into()) {
        ("FP32", Ok(four), _) => Value::F32(f32::from_le_bytes(four)),
        ("INT32" | "UINT32", Ok(four), _) => Value::I32(i32::from_le_bytes(four)),
        ("FP64", _, Ok(eight)) => Value::F64(f64::from_le_bytes(eight)),
        ("INT64" | "UINT64", _, Ok(eight)) => Value::I64(i64::from_le_bytes(eight)),
        _ => {
            return Err(Error::unimplemented(format!(
                "scalar input '{}' of datatype {}",
                spec.name, spec.datatype
            )))
        }
    })
}
