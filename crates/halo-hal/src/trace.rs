//! Spans for work on a device queue, which a timeline shows on a track of its own per queue.
//!
//! Work on a queue starts on one thread and ends on another (a worker, a completion thread), so
//! it cannot be an entered span of any one thread. Drivers create these spans without entering
//! them and drop them when the work completes; the trace writer turns each into a slice on its
//! queue's track.

use crate::CommandBuffer;
use std::sync::atomic::{AtomicU64, Ordering};

/// The `tracing` target of queue spans.
pub const QUEUE_TARGET: &str = "halo::queue";

/// The track of one device's queue: a label unique in the process.
#[derive(Debug, Clone)]
pub struct QueueTrack {
    label: String,
}

impl QueueTrack {
    /// The queue of a new device of driver `driver`, numbered in creation order.
    pub fn new(driver: &str) -> Self {
        static DEVICES: AtomicU64 = AtomicU64::new(0);
        let number = DEVICES.fetch_add(1, Ordering::Relaxed);
        QueueTrack {
            label: format!("{driver} device {number} queue"),
        }
    }

    /// A span covering `command_buffer`'s execution on this queue, from its start to its
    /// completion; drop it when the work is done.
    pub fn execute(&self, command_buffer: &CommandBuffer) -> tracing::Span {
        tracing::info_span!(
            target: QUEUE_TARGET,
            "execute",
            queue = self.label.as_str(),
            commands = command_buffer.commands().map_or(0, |c| c.len())
        )
    }
}
