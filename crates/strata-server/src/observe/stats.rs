//! Counters behind INFO stats/commandstats/errorstats.
//!
//! Command counters live per network thread ([`ThreadStats`]): only that
//! thread writes them, so increments stay in its own cache and never
//! contend; INFO sums all threads. Rare events (connections, errors) use
//! shared counters in [`GlobalStats`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

#[derive(Default)]
pub struct CommandCounters {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    /// Call durations (`latency-tracking`), made on the first call.
    pub histogram: std::sync::OnceLock<Box<crate::observe::histogram::Histogram>>,
}

pub struct ThreadStats {
    pub commands: Box<[CommandCounters]>,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    /// Changes to the dataset (rdb_changes_since_last_save); per thread so
    /// write commands do not contend on one shared counter.
    pub changes: AtomicU64,
}

pub use crate::observe::counter::bump;

impl ThreadStats {
    pub fn new(command_count: usize) -> Self {
        ThreadStats {
            commands: (0..command_count)
                .map(|_| CommandCounters::default())
                .collect(),
            keyspace_hits: AtomicU64::new(0),
            keyspace_misses: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            reads_processed: AtomicU64::new(0),
            writes_processed: AtomicU64::new(0),
            changes: AtomicU64::new(0),
        }
    }

    pub fn hit(&self, found: bool) {
        bump(
            if found {
                &self.keyspace_hits
            } else {
                &self.keyspace_misses
            },
            1,
        );
    }

    fn reset(&self) {
        for c in self.commands.iter() {
            for counter in [&c.calls, &c.usec, &c.rejected, &c.failed] {
                counter.store(0, Relaxed);
            }
            if let Some(histogram) = c.histogram.get() {
                histogram.reset();
            }
        }
        for counter in [
            &self.keyspace_hits,
            &self.keyspace_misses,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.reads_processed,
            &self.writes_processed,
        ] {
            counter.store(0, Relaxed);
        }
    }
}

#[derive(Default)]
pub struct GlobalStats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub error_replies: AtomicU64,
    /// Error replies by their code (`ERR`, `WRONGTYPE`, …) for errorstats.
    pub errors_by_code: Mutex<BTreeMap<String, u64>>,
    /// Ring of (ms, total commands, network bytes in, out) samples for
    /// instantaneous_ops_per_sec and instantaneous_{input,output}_kbps.
    pub ops_samples: Mutex<Vec<(u64, u64, u64, u64)>>,
    pub expired_keys_base: AtomicU64,
}

/// Samples kept for instantaneous_ops_per_sec (as Redis: 16 × 100 ms).
const OPS_SAMPLES_MAX: usize = 16;

impl GlobalStats {
    pub fn record_error(&self, reply: &str) {
        self.error_replies.fetch_add(1, Relaxed);
        let code = reply.split(' ').next().unwrap_or("ERR").to_owned();
        *self.errors_by_code.lock().entry(code).or_insert(0) += 1;
    }

    pub fn sample_ops(&self, now_ms: u64, total_commands: u64, net_in: u64, net_out: u64) {
        let mut samples = self.ops_samples.lock();
        if samples.len() == OPS_SAMPLES_MAX {
            samples.remove(0);
        }
        samples.push((now_ms, total_commands, net_in, net_out));
    }

    /// (commands per second, network KB per second in, out) over the
    /// samples kept.
    fn rates(&self) -> (u64, f64, f64) {
        let samples = self.ops_samples.lock();
        match (samples.first(), samples.last()) {
            (Some(first), Some(last)) if last.0 > first.0 => {
                let ms = last.0 - first.0;
                let kbps =
                    |a: u64, b: u64| b.saturating_sub(a) as f64 * 1000.0 / ms as f64 / 1024.0;
                (
                    (last.1.saturating_sub(first.1)) * 1000 / ms,
                    kbps(first.2, last.2),
                    kbps(first.3, last.3),
                )
            }
            _ => (0, 0.0, 0.0),
        }
    }

    pub fn instantaneous_ops_per_sec(&self) -> u64 {
        self.rates().0
    }

    /// Network traffic in and out, KB per second (Redis'
    /// `instantaneous_input_kbps` and `instantaneous_output_kbps`).
    pub fn instantaneous_kbps(&self) -> (f64, f64) {
        let (_, input, output) = self.rates();
        (input, output)
    }

    pub fn reset(&self, threads: &[std::sync::Arc<ThreadStats>]) {
        for t in threads {
            t.reset();
        }
        self.connections_received.store(0, Relaxed);
        self.rejected_connections.store(0, Relaxed);
        self.error_replies.store(0, Relaxed);
        self.errors_by_code.lock().clear();
        self.ops_samples.lock().clear();
    }
}
