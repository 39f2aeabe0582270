//! Counters a single thread writes and any thread reads: a leaf, so that
//! the statistics and the latency histograms both use it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Adds `n` to a counter that only the calling thread writes (a load and
/// a store: no locked instruction on the hot path).
#[inline]
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}
