//! Whether a worker shares its core with another busy thread, from the scheduler's own account of
//! the thread: time on a core against time runnable but waiting for one
//! (`/proc/thread-self/schedstat`).
//!
//! Spinning for work pays only while each worker has a core to itself. When a busy process shares
//! the cores, the scheduler charges a spinning worker for its spin, and that worker then loses its
//! core to the other process when real work arrives; a worker that sleeps at once is woken ahead of
//! it. Measured on 2 cores with one competing busy process (DenseNet-121, 2 workers): workers
//! waited for a core 40 % of their runnable time (1–2 % with the machine to themselves), and
//! spinning made calls 13 % slower than IREE's workers, which sleep at once.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// How often a worker rereads its times: a read costs a few microseconds.
const WINDOW: Duration = Duration::from_millis(10);
/// Runnable time a decision needs, so that a worker that slept through most of a window does not
/// decide from a few scheduling events.
const MIN_SAMPLE_NS: u64 = 2_000_000;
/// The share of runnable time spent waiting for a core, in percent, above which the core counts as
/// contended (alone: 1–2 %; beside one busy process: about 40 %).
const CONTENDED_PERCENT: u64 = 10;

/// A thread's scheduler times, in nanoseconds since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedTimes {
    /// Time running on a core.
    pub on_core_ns: u64,
    /// Time runnable but waiting for a core.
    pub waiting_ns: u64,
}

impl SchedTimes {
    /// Reads schedstat's text: time on a core, time waiting, number of time slices.
    pub fn parse(text: &str) -> Option<Self> {
        let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
        Some(SchedTimes {
            on_core_ns: fields.next()?.ok()?,
            waiting_ns: fields.next()?.ok()?,
        })
    }

    /// The times since `earlier`.
    fn since(self, earlier: SchedTimes) -> SchedTimes {
        SchedTimes {
            on_core_ns: self.on_core_ns.saturating_sub(earlier.on_core_ns),
            waiting_ns: self.waiting_ns.saturating_sub(earlier.waiting_ns),
        }
    }

    fn runnable_ns(self) -> u64 {
        self.on_core_ns.saturating_add(self.waiting_ns)
    }

    /// Whether these times (over some interval) are those of a contended core.
    pub fn contended(self) -> bool {
        self.waiting_ns.saturating_mul(100) > self.runnable_ns().saturating_mul(CONTENDED_PERCENT)
    }
}

/// The calling thread's contention, sampled at most once every 10 ms. Never contended where
/// the kernel keeps no schedstat.
pub struct ContentionWatch {
    /// Stays bound to the thread that opened it: `thread-self` is resolved at open.
    file: Option<File>,
    checked: Instant,
    last: SchedTimes,
    contended: bool,
}

impl ContentionWatch {
    /// A watch on the calling thread; use it on that thread only.
    pub fn for_current_thread() -> Self {
        let file = File::open("/proc/thread-self/schedstat").ok();
        let last = file.as_ref().and_then(read).unwrap_or_default();
        ContentionWatch {
            file,
            checked: Instant::now(),
            last,
            contended: false,
        }
    }

    /// Whether the thread waited for its core more than it should have lately.
    pub fn contended(&mut self) -> bool {
        let Some(file) = &self.file else {
            return false;
        };
        if self.checked.elapsed() < WINDOW {
            return self.contended;
        }
        self.checked = Instant::now();
        let Some(now) = read(file) else {
            self.file = None;
            self.contended = false;
            return false;
        };
        let window = now.since(self.last);
        // Too little runnable time to tell: keep the decision and let the sample grow.
        if window.runnable_ns() >= MIN_SAMPLE_NS {
            self.contended = window.contended();
            self.last = now;
        }
        self.contended
    }
}

fn read(file: &File) -> Option<SchedTimes> {
    let mut buffer = [0u8; 128];
    let length = file.read_at(&mut buffer, 0).ok()?;
    SchedTimes::parse(std::str::from_utf8(&buffer[..length]).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(on_core_ns: u64, waiting_ns: u64) -> SchedTimes {
        SchedTimes { on_core_ns, waiting_ns }
    }

    #[test]
    fn schedstat_text_is_read_and_bad_text_is_refused() {
        assert_eq!(SchedTimes::parse("162364 1459355 2\n"), Some(times(162_364, 1_459_355)));
        assert_eq!(SchedTimes::parse("162364\n"), None);
        assert_eq!(SchedTimes::parse("x 1 2"), None);
        assert_eq!(SchedTimes::parse(""), None);
    }

    #[test]
    fn waiting_beyond_a_tenth_of_runnable_time_is_contention() {
        // The figures measured on 2 cores: alone, and beside one busy process.
        assert!(!times(936_000_000, 12_000_000).contended());
        assert!(!times(960_000_000, 22_000_000).contended());
        assert!(times(606_000_000, 388_000_000).contended());
        assert!(!times(900, 100).contended());
        assert!(times(899, 101).contended());
        assert!(!times(0, 0).contended());
        assert!(!times(u64::MAX, u64::MAX / 2).contended(), "no overflow");
    }

    #[test]
    fn a_busy_thread_reads_growing_time_on_its_core() {
        let mut watch = ContentionWatch::for_current_thread();
        let Some(file) = &watch.file else {
            eprintln!("skipped a_busy_thread_reads_growing_time_on_its_core: no /proc/thread-self/schedstat");
            return;
        };
        let before = read(file).expect("schedstat reads");
        let start = Instant::now();
        while start.elapsed() < WINDOW * 3 {
            std::hint::spin_loop();
        }
        let after = read(file).expect("schedstat rereads at offset 0");
        assert!(after.since(before).on_core_ns >= 5_000_000, "{before:?} -> {after:?}");
        // The decision is sampled, and a thread alone on its core is not contended unless the
        // test machine is loaded; only check that asking is cheap and stable within a window.
        let first = watch.contended();
        assert_eq!(watch.contended(), first);
    }
}
