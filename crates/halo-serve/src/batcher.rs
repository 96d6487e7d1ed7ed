//! Batching a model's concurrent requests into one call, as IREE's roadmap describes cellular
//! batching: by default nothing waits for company; when a computing thread frees, every request
//! already waiting that can join (same datatypes and shapes but for the leading batch dimension,
//! up to `max_batch_size` rows) goes into its call, inputs concatenated along the batch
//! dimension and outputs split back. With a queue delay (Triton's
//! `max_queue_delay_microseconds`) a free thread waits up to that long after the oldest request
//! arrived for enough company to fill the call.
//!
//! Each request queues its inputs here and a turn on the model's computing threads; the turn
//! takes the oldest waiting request with those that can join it, so a request answered by
//! another's call leaves its own turn to serve whoever waits then (or return at once), and one
//! left behind (another shape, or too many rows to join) is taken by a later turn and never
//! blocks the rest. Turns are never withdrawn: then the turns still to run always number at least
//! the requests waiting.

use crate::model::{InputTensor, OutputTensor};
use halo_hal::{Error, Result};
use halo_runtime::CancelToken;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What a batched call hands each of its requests: how long the request waited, how long the
/// call computed, its outputs, and how many rows the call had.
pub struct Answer {
    /// From queueing to the call's start.
    pub waited: Duration,
    /// The call's time.
    pub computed: Duration,
    /// This request's rows of every output.
    pub outputs: Result<Vec<OutputTensor>>,
    /// The rows of the whole call.
    pub batch_rows: u64,
    /// Whether this request is the call's first, which reports the call where one report per
    /// call is wanted (the batch-size histogram).
    pub first: bool,
}

/// The requests that can share a call: each input's datatype and shape after the batch
/// dimension, in the model's input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchKey(Vec<(String, Vec<u64>)>);

impl BatchKey {
    /// The key of `inputs` (in the model's order, checked against it) and their rows along the
    /// batch dimension.
    ///
    /// # Errors
    /// `InvalidArgument` naming an input without a batch dimension or whose rows differ from
    /// the first input's.
    pub fn of(inputs: &[InputTensor]) -> Result<(BatchKey, u64)> {
        let mut rows = None;
        let mut key = Vec::with_capacity(inputs.len());
        for input in inputs {
            let Some((&leading, rest)) = input.shape.split_first() else {
                return Err(Error::invalid_argument(format!(
                    "input '{}' has no batch dimension to batch requests along",
                    input.name
                )));
            };
            match rows {
                None => rows = Some((leading, &input.name)),
                Some((first, first_name)) if first != leading => {
                    return Err(Error::invalid_argument(format!(
                        "input '{}' has {leading} rows along the batch dimension, input '{first_name}' {first}",
                        input.name
                    )))
                }
                Some(_) => {}
            }
            key.push((input.datatype.clone(), rest.to_vec()));
        }
        Ok((BatchKey(key), rows.map_or(0, |(rows, _)| rows)))
    }
}

/// A call's cancellation, shared by its requests: cancelled once every one of them has gone.
struct CallWatch {
    members: AtomicUsize,
    cancel: CancelToken,
}

/// One request's place: in the queue, or in a call.
struct Member {
    /// Set, under the queue's lock, when a call takes the request.
    call: OnceLock<Arc<CallWatch>>,
}

/// A request waiting for a call.
struct Waiting {
    member: Arc<Member>,
    /// The request's number in the trace.
    number: u64,
    key: BatchKey,
    rows: u64,
    inputs: Vec<InputTensor>,
    queued: Instant,
    reply: oneshot::Sender<Answer>,
    /// What the request holds until it is answered (its admission).
    _holds: Box<dyn Send>,
}

/// A model's waiting requests.
#[derive(Default)]
pub struct BatchQueue {
    waiting: Mutex<VecDeque<Waiting>>,
    /// Signalled when a request arrives, for a turn waiting for company.
    arrived: Condvar,
}

/// A request's hold on its place: dropped (answered, or gone at its deadline or with its
/// client) it leaves the queue, or its call, which is cancelled once all its requests are gone.
pub struct Place {
    queue: Arc<BatchQueue>,
    member: Arc<Member>,
}

impl Place {
    /// Whether a call has taken the request.
    pub fn in_call(&self) -> bool {
        let _queue = self.queue.lock();
        self.member.call.get().is_some()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut waiting = self.queue.lock();
        if let Some(index) = waiting.iter().position(|w| Arc::ptr_eq(&w.member, &self.member)) {
            let gone = waiting.remove(index);
            drop(waiting);
            drop(gone);
        } else if let Some(call) = self.member.call.get() {
            if call.members.fetch_sub(1, Ordering::AcqRel) == 1 {
                call.cancel.cancel();
            }
        }
    }
}

/// The requests one call serves, and the token that stops it once none of them waits.
pub struct Batch {
    members: Vec<Waiting>,
    /// Cancelled when every request of the call has gone.
    pub cancel: CancelToken,
}

impl BatchQueue {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Waiting>> {
        // Nothing panics while holding it; a poisoned queue is whole.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues request `number` of `rows` rows with `inputs` (in the model's order) and `key`; the
    /// answer comes through the receiver. `holds` is kept until the request leaves the queue.
    pub fn push(
        self: &Arc<Self>,
        key: BatchKey,
        rows: u64,
        (inputs, number): (Vec<InputTensor>, u64),
        holds: Box<dyn Send>,
    ) -> (Place, oneshot::Receiver<Answer>) {
        let member = Arc::new(Member { call: OnceLock::new() });
        let (reply, answer) = oneshot::channel();
        self.lock().push_back(Waiting {
            member: member.clone(),
            number,
            key,
            rows,
            inputs,
            queued: Instant::now(),
            reply,
            _holds: holds,
        });
        self.arrived.notify_all();
        (
            Place {
                queue: self.clone(),
                member,
            },
            answer,
        )
    }

    /// How many requests wait.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Takes the oldest waiting request and, after it, every one with its key while the rows
    /// stay within `max_rows`; empty when none waits. With a `delay`, first waits until the
    /// requests with the oldest one's key fill `max_rows` or it has waited `delay`.
    pub fn take(&self, max_rows: u64, delay: Duration) -> Batch {
        let watch = Arc::new(CallWatch {
            members: AtomicUsize::new(0),
            cancel: CancelToken::new(),
        });
        let mut waiting = self.lock();
        if !delay.is_zero() {
            waiting = self.wait_for_company(waiting, max_rows, delay);
        }
        let mut members: Vec<Waiting> = Vec::new();
        let mut rows = 0u64;
        let mut index = 0;
        while index < waiting.len() {
            let fits = match members.first() {
                None => true,
                Some(first) => waiting[index].key == first.key && rows + waiting[index].rows <= max_rows,
            };
            if !fits {
                index += 1;
                continue;
            }
            let Some(taken) = waiting.remove(index) else { break };
            rows += taken.rows;
            let _ = taken.member.call.set(watch.clone());
            members.push(taken);
        }
        watch.members.store(members.len(), Ordering::Release);
        Batch {
            members,
            cancel: watch.cancel.clone(),
        }
    }
}

impl BatchQueue {
    /// Waits, with the queue's lock, until the requests with the oldest one's key fill
    /// `max_rows` or the oldest has waited `delay`, whichever comes first.
    fn wait_for_company<'a>(
        &self,
        mut waiting: MutexGuard<'a, VecDeque<Waiting>>,
        max_rows: u64,
        delay: Duration,
    ) -> MutexGuard<'a, VecDeque<Waiting>> {
        loop {
            let Some(oldest) = waiting.front() else { return waiting };
            let rows: u64 = (waiting.iter().filter(|w| w.key == oldest.key)).map(|w| w.rows).sum();
            let now = Instant::now();
            let due = oldest.queued.checked_add(delay).unwrap_or(now);
            if rows >= max_rows || now >= due {
                return waiting;
            }
            waiting = (self.arrived.wait_timeout(waiting, due - now))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Batch {
    /// Whether it serves no request.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Its requests' rows together.
    pub fn rows(&self) -> u64 {
        self.members.iter().map(|m| m.rows).sum()
    }

    /// The numbers of the requests it serves, in order, as the trace shows them (`3,4,7`).
    pub fn request_numbers(&self) -> String {
        let numbers: Vec<String> = self.members.iter().map(|m| m.number.to_string()).collect();
        numbers.join(",")
    }

    /// How many requests it serves.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The call's inputs: each request's taken whole when it is alone, else concatenated along
    /// the batch dimension in request order.
    ///
    /// # Errors
    /// `ResourceExhausted` when the concatenation does not fit in memory.
    pub fn inputs(&mut self) -> Result<Vec<InputTensor>> {
        if let [only] = self.members.as_mut_slice() {
            return Ok(std::mem::take(&mut only.inputs));
        }
        let rows = self.rows();
        let Some(first) = self.members.first() else {
            return Ok(Vec::new());
        };
        let mut joined = Vec::with_capacity(first.inputs.len());
        for (index, input) in first.inputs.iter().enumerate() {
            let total: usize = self.members.iter().map(|m| m.inputs[index].bytes.len()).sum();
            let mut bytes = Vec::new();
            bytes.try_reserve_exact(total).map_err(|_| {
                Error::resource_exhausted(format!(
                    "no memory to join {total} bytes of input '{}' for a batch",
                    input.name
                ))
            })?;
            for member in &self.members {
                bytes.extend_from_slice(&member.inputs[index].bytes);
            }
            let mut shape = input.shape.clone();
            shape[0] = rows;
            joined.push(InputTensor {
                name: input.name.clone(),
                datatype: input.datatype.clone(),
                shape,
                bytes,
            });
        }
        Ok(joined)
    }

    /// Answers each request with its rows of `outputs` (or the call's error), computed in
    /// `computed` from `started`.
    pub fn answer(self, outputs: Result<Vec<OutputTensor>>, started: Instant, computed: Duration) {
        let batch_rows = self.rows();
        let mut parts = match outputs.and_then(|outputs| split(outputs, &self.members)) {
            Ok(parts) => parts.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(error) => vec![Err(error); self.members.len()],
        };
        for (index, (member, outputs)) in self.members.into_iter().zip(parts.drain(..)).enumerate() {
            let answer = Answer {
                waited: started.saturating_duration_since(member.queued),
                computed,
                outputs,
                batch_rows,
                first: index == 0,
            };
            // A request that went meanwhile no longer listens.
            let _ = member.reply.send(answer);
        }
    }
}

/// Pads each of `inputs`, of `rows` rows, with zero rows up to `size`.
///
/// # Errors
/// `ResourceExhausted` when the padding does not fit in memory.
pub fn pad_rows(inputs: &mut [InputTensor], rows: u64, size: u64) -> Result<()> {
    if size == rows {
        return Ok(());
    }
    for input in inputs {
        let row_bytes = input.bytes.len() as u64 / rows.max(1);
        let padding = usize::try_from(row_bytes * (size - rows)).unwrap_or(usize::MAX);
        input.bytes.try_reserve_exact(padding).map_err(|_| {
            Error::resource_exhausted(format!(
                "no memory to pad input '{}' from {rows} to {size} rows",
                input.name
            ))
        })?;
        input.bytes.resize(input.bytes.len() + padding, 0);
        input.shape[0] = size;
    }
    Ok(())
}

/// Cuts each of `outputs`, of `size` rows, back to its first `rows`: padding is never returned.
///
/// # Errors
/// `Internal` naming an output that does not lead with `size` rows.
pub fn cut_rows(outputs: &mut [OutputTensor], rows: u64, size: u64) -> Result<()> {
    for output in outputs {
        if output.shape.first() != Some(&size) {
            return Err(Error::internal(format!(
                "output '{}' of shape {:?} does not lead with the call's {size} batch rows",
                output.name, output.shape
            )));
        }
        let row_bytes = output.bytes.len() as u64 / size;
        output.bytes.truncate((row_bytes * rows) as usize);
        output.shape[0] = rows;
    }
    Ok(())
}

/// Each request's rows of every output.
fn split(outputs: Vec<OutputTensor>, members: &[Waiting]) -> Result<Vec<Vec<OutputTensor>>> {
    if members.len() == 1 {
        return Ok(vec![outputs]);
    }
    let rows: u64 = members.iter().map(|m| m.rows).sum();
    let mut parts: Vec<Vec<OutputTensor>> = members.iter().map(|_| Vec::with_capacity(outputs.len())).collect();
    for output in outputs {
        if output.shape.first() != Some(&rows) {
            return Err(Error::internal(format!(
                "output '{}' of shape {:?} does not lead with the call's {rows} batch rows, so it cannot be \
                 split among its requests",
                output.name, output.shape
            )));
        }
        let row_bytes = output.bytes.len() as u64 / rows.max(1);
        let mut start = 0usize;
        for (member, part) in members.iter().zip(&mut parts) {
            let length = (member.rows * row_bytes) as usize;
            let mut shape = output.shape.clone();
            shape[0] = member.rows;
            part.push(OutputTensor {
                name: output.name.clone(),
                shape,
                element_type: output.element_type,
                bytes: output.bytes[start..start + length].to_vec(),
                labels: output.labels.clone(),
            });
            start += length;
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::ElementType;

    fn input(name: &str, shape: &[u64], first: u8) -> InputTensor {
        let count: u64 = shape.iter().product();
        InputTensor {
            name: name.into(),
            datatype: "FP32".into(),
            shape: shape.to_vec(),
            bytes: (0..count * 4).map(|i| first.wrapping_add(i as u8)).collect(),
        }
    }

    fn push(queue: &Arc<BatchQueue>, inputs: Vec<InputTensor>) -> (Place, oneshot::Receiver<Answer>) {
        let (key, rows) = BatchKey::of(&inputs).unwrap();
        let number = queue.len() as u64;
        queue.push(key, rows, (inputs, number), Box::new(()))
    }

    /// Output rows as the model would give them: each input row's first byte, four times.
    fn echo_outputs(inputs: &[InputTensor]) -> Vec<OutputTensor> {
        let input = &inputs[0];
        let rows = input.shape[0];
        let row_bytes = input.bytes.len() / rows as usize;
        let bytes = (0..rows as usize)
            .flat_map(|r| [input.bytes[r * row_bytes]; 4])
            .collect();
        vec![OutputTensor {
            name: "output0".into(),
            shape: vec![rows, 1],
            element_type: ElementType::parse("f32").unwrap(),
            bytes,
            labels: None,
        }]
    }

    #[test]
    fn waiting_requests_with_one_key_share_a_call_and_get_their_own_rows_back() {
        let queue = Arc::new(BatchQueue::default());
        let (_a, answer_a) = push(&queue, vec![input("x", &[1, 3], 10)]);
        let (_b, answer_b) = push(&queue, vec![input("x", &[2, 4], 50)]);
        let (_c, answer_c) = push(&queue, vec![input("x", &[2, 3], 100)]);
        let mut batch = queue.take(8, Duration::ZERO);
        assert_eq!((batch.len(), batch.rows()), (2, 3), "a and c share a key; b waits");
        assert_eq!(batch.request_numbers(), "0,2");
        let inputs = batch.inputs().unwrap();
        assert_eq!(inputs[0].shape, [3, 3]);
        assert_eq!(inputs[0].bytes[..12], input("x", &[1, 3], 10).bytes[..]);
        assert_eq!(inputs[0].bytes[12..], input("x", &[2, 3], 100).bytes[..]);
        batch.answer(Ok(echo_outputs(&inputs)), Instant::now(), Duration::from_millis(1));

        let a = answer_a.blocking_recv().unwrap();
        let a_outputs = a.outputs.unwrap();
        assert_eq!((a_outputs[0].shape.as_slice(), a.batch_rows), (&[1u64, 1][..], 3));
        assert_eq!(a_outputs[0].bytes, [10; 4]);
        let c_outputs = answer_c.blocking_recv().unwrap().outputs.unwrap();
        assert_eq!(c_outputs[0].shape, [2, 1]);
        assert_eq!(c_outputs[0].bytes, [100, 100, 100, 100, 112, 112, 112, 112]);

        let mut alone = queue.take(8, Duration::ZERO);
        assert_eq!(alone.len(), 1);
        let inputs = alone.inputs().unwrap();
        assert_eq!(inputs[0].shape, [2, 4], "a request alone is passed as it came");
        alone.answer(Ok(echo_outputs(&inputs)), Instant::now(), Duration::ZERO);
        assert_eq!(answer_b.blocking_recv().unwrap().outputs.unwrap()[0].shape, [2, 1]);
        assert!(queue.take(8, Duration::ZERO).is_empty());
    }

    #[test]
    fn a_call_stops_at_max_rows_and_the_rest_wait_in_order() {
        let queue = Arc::new(BatchQueue::default());
        let places: Vec<_> = [3u64, 2, 2, 1]
            .iter()
            .map(|&rows| push(&queue, vec![input("x", &[rows, 2], 0)]))
            .collect();
        assert_eq!(
            queue.take(5, Duration::ZERO).rows(),
            5,
            "3 + 2; the next 2 would pass 5"
        );
        let next = queue.take(5, Duration::ZERO);
        assert_eq!((next.len(), next.rows()), (2, 3));
        drop(places);
    }

    #[test]
    fn a_request_gone_while_waiting_leaves_the_queue_and_its_memory_with_it() {
        let queue = Arc::new(BatchQueue::default());
        let holds = Arc::new(());
        let (key, rows) = BatchKey::of(&[input("x", &[1, 2], 0)]).unwrap();
        let (place, _answer) = queue.push(key, rows, (vec![input("x", &[1, 2], 0)], 0), Box::new(holds.clone()));
        assert!(!place.in_call());
        assert_eq!(Arc::strong_count(&holds), 2);
        drop(place);
        assert_eq!(Arc::strong_count(&holds), 1, "its admission went with it");
        assert!(queue.take(8, Duration::ZERO).is_empty());
    }

    #[test]
    fn a_call_is_cancelled_once_every_one_of_its_requests_has_gone() {
        let queue = Arc::new(BatchQueue::default());
        let (a, _answer_a) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let (b, _answer_b) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let batch = queue.take(8, Duration::ZERO);
        assert!(a.in_call() && b.in_call());
        drop(a);
        assert!(!batch.cancel.is_cancelled(), "b still waits for the call");
        drop(b);
        assert!(batch.cancel.is_cancelled());
    }

    #[test]
    fn a_failed_call_answers_each_of_its_requests_with_the_error() {
        let queue = Arc::new(BatchQueue::default());
        let (_a, answer_a) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let (_b, answer_b) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let batch = queue.take(8, Duration::ZERO);
        batch.answer(Err(Error::data_loss("kernel faulted")), Instant::now(), Duration::ZERO);
        for answer in [answer_a, answer_b] {
            let error = answer.blocking_recv().unwrap().outputs.unwrap_err();
            assert!(error.to_string().contains("kernel faulted"), "{error}");
        }
    }

    #[test]
    fn outputs_without_the_calls_rows_are_an_error_for_every_request() {
        let queue = Arc::new(BatchQueue::default());
        let (_a, answer_a) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let (_b, _answer_b) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let mut batch = queue.take(8, Duration::ZERO);
        let mut outputs = echo_outputs(&batch.inputs().unwrap());
        outputs[0].shape = vec![1, 2];
        batch.answer(Ok(outputs), Instant::now(), Duration::ZERO);
        let error = answer_a.blocking_recv().unwrap().outputs.unwrap_err();
        assert!(
            error.to_string().contains("output 'output0' of shape [1, 2]"),
            "{error}"
        );
    }

    #[test]
    fn inputs_must_agree_on_their_rows_and_have_a_batch_dimension() {
        let error = BatchKey::of(&[input("a", &[2, 3], 0), input("b", &[3, 3], 0)]).unwrap_err();
        assert!(error.to_string().contains("input 'b' has 3 rows"), "{error}");
        let error = BatchKey::of(&[input("s", &[], 0)]).unwrap_err();
        assert!(
            error.to_string().contains("input 's' has no batch dimension"),
            "{error}"
        );
        let (key, rows) = BatchKey::of(&[input("a", &[2, 3], 0), input("b", &[2, 5], 0)]).unwrap();
        assert_eq!(rows, 2);
        assert_ne!(
            key,
            BatchKey::of(&[input("a", &[2, 3], 0), input("b", &[2, 6], 0)])
                .unwrap()
                .0
        );
    }

    #[test]
    fn with_a_delay_a_turn_waits_for_company_until_the_call_is_full_or_the_oldest_is_due() {
        let queue = Arc::new(BatchQueue::default());
        let (_a, _answer_a) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let arriving = {
            let queue = queue.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                push(&queue, vec![input("x", &[2, 2], 0)])
            })
        };
        let started = Instant::now();
        let batch = queue.take(3, Duration::from_secs(20));
        assert_eq!(batch.rows(), 3, "the company that arrived filled the call");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let _b = arriving.join().unwrap();

        let (_c, _answer_c) = push(&queue, vec![input("x", &[1, 2], 0)]);
        let started = Instant::now();
        let batch = queue.take(3, Duration::from_millis(30));
        assert_eq!(batch.rows(), 1, "no company came");
        assert!(
            started.elapsed() >= Duration::from_millis(25),
            "{:?}",
            started.elapsed()
        );
        assert!(
            queue.take(3, Duration::from_secs(20)).is_empty(),
            "nothing waits: no wait"
        );
    }

    #[test]
    fn padding_adds_zero_rows_and_cutting_returns_only_the_real_ones() {
        let mut inputs = vec![input("x", &[2, 3], 1)];
        let original = inputs[0].bytes.clone();
        pad_rows(&mut inputs, 2, 4).unwrap();
        assert_eq!(inputs[0].shape, [4, 3]);
        assert_eq!(inputs[0].bytes[..24], original[..]);
        assert!(inputs[0].bytes[24..].iter().all(|&b| b == 0) && inputs[0].bytes.len() == 48);
        let mut outputs = echo_outputs(&inputs);
        cut_rows(&mut outputs, 2, 4).unwrap();
        assert_eq!(
            (outputs[0].shape.as_slice(), outputs[0].bytes.len()),
            (&[2u64, 1][..], 8)
        );
        let error = cut_rows(&mut outputs, 2, 4).unwrap_err();
        assert!(
            error.to_string().contains("does not lead with the call's 4 batch rows"),
            "{error}"
        );
    }
}
