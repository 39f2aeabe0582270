//! The latency monitor (Redis' LATENCY LATEST / HISTORY / RESET / GRAPH /
//! DOCTOR): events that took at least `latency-monitor-threshold`
//! milliseconds, kept per event as the last [`HISTORY_LEN`] samples (one
//! per second: a second's worst) and the all-time worst.
//!
//! The monitor is process-wide, as Redis' is: the engine reports its own
//! events (the log's fsync, checkpoints, compaction, cold reads) and the
//! server its commands and cycles, through [`sample`]. With the threshold
//! at 0 (the default) nothing is kept and [`sample`] returns at once.
//!
//! Events Strata reports: `command` and `fast-command` (as Redis),
//! `expire-cycle`, `eviction-cycle`, `log-fsync` (Redis' `aof-fsync-always`
//! and `aof-fsync` in one), `log-write` (a group commit's write), `checkpoint`
//! (Redis' `rdb-unlink-temp-file`/fork have no counterpart: a checkpoint is
//! a background write), `compaction` and `cold-read` (a command waiting
//! for values on disk).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Samples kept per event (Redis' `LATENCY_TS_LEN`).
pub(crate) const HISTORY_LEN: usize = 160;

static THRESHOLD_MS: AtomicU64 = AtomicU64::new(0);
static EVENTS: Mutex<BTreeMap<&'static str, History>> = Mutex::new(BTreeMap::new());

/// One sample: the Unix second it happened in and its latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub time_s: u64,
    pub latency_ms: u64,
}

/// The samples of one event.
#[derive(Clone, Debug)]
pub struct History {
    samples: Box<[Sample; HISTORY_LEN]>,
    next: usize,
    /// The worst latency since the last reset.
    pub max_ms: u64,
}

impl Default for History {
    fn default() -> History {
        History {
            samples: Box::new([Sample::default(); HISTORY_LEN]),
            next: 0,
            max_ms: 0,
        }
    }
}

impl History {
    /// Adds a sample; one in the same second as the newest replaces it
    /// if worse, as in Redis.
    pub fn add_sample(&mut self, time_s: u64, latency_ms: u64) {
        self.max_ms = self.max_ms.max(latency_ms);
        let previous = &mut self.samples[(self.next + HISTORY_LEN - 1) % HISTORY_LEN];
        if previous.time_s == time_s {
            previous.latency_ms = previous.latency_ms.max(latency_ms);
            return;
        }
        self.samples[self.next] = Sample { time_s, latency_ms };
        self.next = (self.next + 1) % HISTORY_LEN;
    }

    /// The samples kept, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        (0..HISTORY_LEN)
            .map(|n| self.samples[(self.next + n) % HISTORY_LEN])
            .filter(|s| s.time_s != 0)
            .collect()
    }

    /// The newest sample.
    pub fn latest(&self) -> Sample {
        self.samples[(self.next + HISTORY_LEN - 1) % HISTORY_LEN]
    }
}

/// Sets `latency-monitor-threshold` (0: off).
pub fn set_threshold_ms(ms: u64) {
    THRESHOLD_MS.store(ms, Relaxed);
}

/// Whether the monitor is on (callers skip measuring when it is not).
pub fn is_on() -> bool {
    THRESHOLD_MS.load(Relaxed) != 0
}

/// Records that `event` took `elapsed`, if the monitor is on and it took
/// at least the threshold.
pub fn sample(event: &'static str, elapsed: Duration) {
    let threshold = THRESHOLD_MS.load(Relaxed);
    if threshold == 0 {
        return;
    }
    let ms = elapsed.as_millis() as u64;
    if ms < threshold {
        return;
    }
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut events = EVENTS.lock().unwrap_or_else(|p| p.into_inner());
    events.entry(event).or_default().add_sample(now_s, ms);
}

/// Every event with samples, by name.
pub fn events() -> BTreeMap<&'static str, History> {
    EVENTS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Forgets `names` (every event when empty); returns how many there were.
pub fn reset(names: &[&[u8]]) -> usize {
    let mut events = EVENTS.lock().unwrap_or_else(|p| p.into_inner());
    if names.is_empty() {
        let count = events.len();
        events.clear();
        return count;
    }
    let before = events.len();
    events.retain(|name, _| {
        !names
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name.as_bytes()))
    });
    before - events.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_keeps_its_worst_sample_and_the_ring_wraps() {
        let mut history = History::default();
        history.add_sample(10, 5);
        history.add_sample(10, 9);
        history.add_sample(10, 7);
        assert_eq!(
            history.samples(),
            vec![Sample {
                time_s: 10,
                latency_ms: 9
            }]
        );
        for n in 0..HISTORY_LEN as u64 + 5 {
            history.add_sample(100 + n, n);
        }
        let samples = history.samples();
        assert_eq!(samples.len(), HISTORY_LEN);
        assert_eq!(samples[0].time_s, 105);
        assert_eq!(history.latest().time_s, 100 + HISTORY_LEN as u64 + 4);
        assert_eq!(history.max_ms, HISTORY_LEN as u64 + 4);
    }
}
