//! The queue tracks of a trace: spans with target [`QUEUE_TARGET`] become slices on one track per
//! queue, appended to the trace file when it is complete.
//!
//! Queue work starts and ends on different threads, which a thread's track cannot show, so these
//! spans are recorded from their creation to their close (never entered) and written as complete
//! (`X`) events on a track named after the queue. Work that overlaps on one queue (a queue may
//! run submissions whose waits are met in any order) goes on extra lanes, so slices on each track
//! nest as viewers require.

use halo_hal::trace::QUEUE_TARGET;
use halo_hal::{Error, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Thread ids of queue tracks start here, far above the writer's own thread numbers.
const FIRST_TRACK_ID: u64 = 1 << 20;

/// One finished piece of queue work.
#[derive(Debug, Clone)]
struct Slice {
    queue: String,
    name: &'static str,
    /// Microseconds since the trace started.
    begin: f64,
    end: f64,
    args: Map<String, Value>,
}

/// What a queue span carries while it is open.
struct Open {
    queue: String,
    begin: f64,
    args: Map<String, Value>,
}

/// Records queue spans; share its slices with [`append`] through [`QueueTracks::slices`].
pub(super) struct QueueTracks {
    start: Instant,
    slices: Slices,
}

/// The slices a [`QueueTracks`] layer recorded.
#[derive(Clone)]
pub(super) struct Slices(Arc<Mutex<Vec<Slice>>>);

impl QueueTracks {
    /// A recorder whose times count from `start` (the instant the trace's other events count from).
    pub(super) fn new(start: Instant) -> Self {
        QueueTracks {
            start,
            slices: Slices(Arc::new(Mutex::new(Vec::new()))),
        }
    }

    pub(super) fn slices(&self) -> Slices {
        self.slices.clone()
    }

    fn now(&self) -> f64 {
        self.start.elapsed().as_nanos() as f64 / 1000.0
    }
}

#[derive(Default)]
struct Args(Map<String, Value>);

impl Visit for Args {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}").into());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for QueueTracks {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != QUEUE_TARGET {
            return;
        }
        let mut args = Args::default();
        attrs.record(&mut args);
        let queue = match args.0.remove("queue") {
            Some(Value::String(queue)) => queue,
            _ => "queue".to_string(),
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Open {
                queue,
                begin: self.now(),
                args: args.0,
            });
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        let slice = Slice {
            queue: open.queue,
            name: span.metadata().name(),
            begin: open.begin,
            end: self.now(),
            args: open.args,
        };
        self.slices.0.lock().unwrap_or_else(|p| p.into_inner()).push(slice);
    }
}

/// Trace events for `slices`: a named track per queue (and per overlapping lane), each slice a
/// complete event on it.
fn events(mut slices: Vec<Slice>) -> Vec<Value> {
    slices.sort_by(|a, b| a.begin.total_cmp(&b.begin));
    // Per queue, the end of the last slice on each of its lanes.
    let mut lanes: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    let mut next_track = FIRST_TRACK_ID;
    let mut events = Vec::new();
    for slice in slices {
        let queue_lanes = lanes.entry(slice.queue.clone()).or_default();
        let track = match queue_lanes.iter_mut().find(|(_, end)| *end <= slice.begin) {
            Some(lane) => {
                lane.1 = slice.end;
                lane.0
            }
            None => {
                let track = next_track;
                next_track += 1;
                let name = match queue_lanes.len() {
                    0 => slice.queue.clone(),
                    lane => format!("{} (overlapping work, lane {})", slice.queue, lane + 1),
                };
                events.push(json!({
                    "ph": "M", "pid": 1, "tid": track, "name": "thread_name", "args": { "name": name },
                }));
                queue_lanes.push((track, slice.end));
                track
            }
        };
        events.push(json!({
            "ph": "X",
            "pid": 1,
            "tid": track,
            "ts": slice.begin,
            "dur": slice.end - slice.begin,
            "name": slice.name,
            "cat": QUEUE_TARGET,
            "args": slice.args,
        }));
    }
    events
}

/// Adds the recorded slices to the complete trace-event array in `path`.
pub(super) fn append(path: &Path, slices: &Slices) -> Result<()> {
    let slices = std::mem::take(&mut *slices.0.lock().unwrap_or_else(|p| p.into_inner()));
    if slices.is_empty() {
        return Ok(());
    }
    let io_error =
        |e: std::io::Error| Error::data_loss(format!("adding queue tracks to trace '{}': {e}", path.display()));
    let mut file = OpenOptions::new().read(true).write(true).open(path).map_err(io_error)?;
    let length = file.seek(SeekFrom::End(0)).map_err(io_error)?;
    let tail_start = length.saturating_sub(64);
    file.seek(SeekFrom::Start(tail_start)).map_err(io_error)?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).map_err(io_error)?;
    let tail = String::from_utf8_lossy(&tail);
    let body = tail.trim_end();
    let Some(before_close) = body.strip_suffix(']') else {
        return Err(Error::data_loss(format!(
            "trace '{}' does not end its event array",
            path.display()
        )));
    };
    let empty = before_close.trim_end().ends_with('[');
    let close_at = tail_start + before_close.len() as u64;
    file.set_len(close_at).map_err(io_error)?;
    file.seek(SeekFrom::Start(close_at)).map_err(io_error)?;
    let mut text = String::new();
    for (index, event) in events(slices).into_iter().enumerate() {
        if index > 0 || !empty {
            text.push_str(",\n");
        }
        text.push_str(&event.to_string());
    }
    text.push_str("\n]");
    file.write_all(text.as_bytes()).map_err(io_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(queue: &str, begin: f64, end: f64) -> Slice {
        Slice {
            queue: queue.to_string(),
            name: "execute",
            begin,
            end,
            args: Map::new(),
        }
    }

    fn tracks(events: &[Value]) -> Vec<(u64, f64, f64)> {
        events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                let ts = e["ts"].as_f64().unwrap_or(f64::NAN);
                (
                    e["tid"].as_u64().unwrap_or(0),
                    ts,
                    ts + e["dur"].as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect()
    }

    #[test]
    fn queues_get_their_own_tracks_and_overlaps_their_own_lanes() {
        let events = events(vec![
            slice("a", 0.0, 10.0),
            slice("b", 1.0, 2.0),
            slice("a", 5.0, 6.0),
            slice("a", 10.0, 12.0),
        ]);
        let names: Vec<_> = events
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| e["args"]["name"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(names, ["a", "b", "a (overlapping work, lane 2)"]);
        let tracks = tracks(&events);
        let a = tracks[0].0;
        assert_eq!(tracks[1].0, a + 1, "queue b has a track of its own");
        assert_eq!(tracks[2].0, a + 2, "overlapping work goes to a second lane");
        assert_eq!(tracks[3].0, a, "work after the first slice ends reuses its lane");
    }

    #[test]
    fn appending_keeps_the_array_valid() {
        for original in ["[\n{\"ph\":\"i\"}\n]", "[\n\n]"] {
            let path = std::env::temp_dir().join(format!("halo-queue-tracks-{}.json", std::process::id()));
            std::fs::write(&path, original).expect("write");
            let recorder = QueueTracks::new(Instant::now());
            recorder.slices.0.lock().expect("lock").push(slice("q", 1.0, 2.0));
            append(&path, &recorder.slices()).expect("append");
            let text = std::fs::read_to_string(&path).expect("read");
            std::fs::remove_file(&path).ok();
            let parsed: Vec<Value> = serde_json::from_str(&text).expect("valid JSON");
            let expected = if original.contains("ph") { 3 } else { 2 };
            assert_eq!(parsed.len(), expected, "{text}");
        }
    }
}
