//! Since when a worker or a queue has been held by the work it runs, for
//! [`Device::all_held_for`](crate::Device::all_held_for).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// When the work that holds something started: marked by the thread running the work without a
/// lock, read by any thread.
#[derive(Debug)]
pub struct HeldSince {
    /// Nanoseconds from [`epoch`] to the start of the work, plus one; 0 while free.
    since: AtomicU64,
}

impl Default for HeldSince {
    fn default() -> Self {
        // Fixed now at the latest, so that work starting after this counts in full.
        epoch();
        HeldSince {
            since: AtomicU64::new(0),
        }
    }
}

/// The instant every [`HeldSince`] counts from: one for the process, so that comparing several
/// takes one clock reading.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX - 1)
}

impl HeldSince {
    /// Held by work that started at `start`.
    pub fn hold(&self, start: Instant) {
        self.since.store(nanos_since_epoch(start) + 1, Ordering::Relaxed);
    }

    /// Free again.
    pub fn release(&self) {
        self.since.store(0, Ordering::Relaxed);
    }

    /// How long the work holding it has run; `None` while free.
    pub fn held_for(&self) -> Option<Duration> {
        let since = self.since.load(Ordering::Relaxed).checked_sub(1)?;
        Some(Duration::from_nanos(
            nanos_since_epoch(Instant::now()).saturating_sub(since),
        ))
    }
}

/// How long every one of `all` has been held: since the latest of their starts, zero when one is
/// free (or there are none).
pub fn all_held_for<'a>(all: impl IntoIterator<Item = &'a HeldSince>) -> Duration {
    let latest = all.into_iter().try_fold(None, |latest: Option<u64>, held| {
        let since = held.since.load(Ordering::Relaxed).checked_sub(1)?;
        Some(Some(latest.map_or(since, |latest| latest.max(since))))
    });
    match latest.flatten() {
        Some(since) => Duration::from_nanos(nanos_since_epoch(Instant::now()).saturating_sub(since)),
        None => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_for_counts_from_the_start_of_the_work_until_it_is_released() {
        let held = HeldSince::default();
        assert_eq!(held.held_for(), None);
        let start = Instant::now();
        held.hold(start);
        std::thread::sleep(Duration::from_millis(20));
        let (time, at_most) = (held.held_for(), start.elapsed());
        assert!(
            time.is_some_and(|t| t >= Duration::from_millis(20) && t <= at_most),
            "{time:?}"
        );
        held.release();
        assert_eq!(held.held_for(), None);
    }

    #[test]
    fn all_are_held_for_the_shortest_time_and_not_at_all_while_one_is_free() {
        let (long, short, free) = (HeldSince::default(), HeldSince::default(), HeldSince::default());
        long.hold(Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        short.hold(start);
        std::thread::sleep(Duration::from_millis(20));
        let (both, at_most) = (all_held_for([&long, &short]), start.elapsed());
        assert!(both >= Duration::from_millis(20) && both <= at_most, "{both:?}");
        assert_eq!(all_held_for([&long, &short, &free]), Duration::ZERO);
        assert_eq!(all_held_for([]), Duration::ZERO);
    }
}
