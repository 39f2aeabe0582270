//! Per-command latency histograms behind LATENCY HISTOGRAM, INFO
//! latencystats and the metrics endpoint (`latency-tracking`).
//!
//! Buckets are log-linear over nanoseconds: exact below 16 ns, then 8 per
//! power of two (each within 12.5 % of its values), up to 2^41 ns (about
//! 36 minutes; longer calls count in the last bucket). Powers of two are
//! bucket edges, so Redis' report (cumulative counts at 1024·2^k ns) is
//! exact, and percentiles are within a bucket's width.
//!
//! A histogram belongs to one network thread, which alone writes it
//! (relaxed load-and-store, like the other per-thread counters); readers
//! sum the threads' histograms.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::observe::counter::bump;

const EXACT: usize = 16;
const SUB_BITS: u32 = 3;
const SUBS: usize = 1 << SUB_BITS;
/// Values from 2^4 to 2^41 ns, 8 buckets per power of two.
const TOP_BIT: u32 = 41;
pub const BUCKETS: usize = EXACT + (TOP_BIT as usize - 4) * SUBS;

pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The bucket of `ns`.
fn bucket(ns: u64) -> usize {
    if ns < EXACT as u64 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    if msb >= TOP_BIT {
        return BUCKETS - 1;
    }
    let sub = ((ns >> (msb - SUB_BITS)) as usize) & (SUBS - 1);
    EXACT + (msb as usize - 4) * SUBS + sub
}

/// The largest value in bucket `index`.
pub fn upper_ns(index: usize) -> u64 {
    if index < EXACT {
        return index as u64;
    }
    let msb = (index - EXACT) / SUBS + 4;
    let sub = ((index - EXACT) % SUBS) as u64;
    let width = 1u64 << (msb as u32 - SUB_BITS);
    ((SUBS as u64 + sub) << (msb as u32 - SUB_BITS)) + width - 1
}

impl Histogram {
    /// Counts one call of `ns` (only the owning thread calls this).
    pub fn record(&self, ns: u64) {
        bump(&self.counts[bucket(ns)], 1);
    }

    pub fn reset(&self) {
        for count in &self.counts {
            count.store(0, Relaxed);
        }
    }

    /// Adds this histogram's counts into `into`.
    pub fn add_to(&self, into: &mut [u64; BUCKETS]) {
        for (sum, count) in into.iter_mut().zip(&self.counts) {
            *sum += count.load(Relaxed);
        }
    }
}

/// Counts summed over threads.
pub type Counts = [u64; BUCKETS];

pub fn total(counts: &Counts) -> u64 {
    counts.iter().sum()
}

/// Redis' LATENCY HISTOGRAM report: (µs, calls at or below it) at
/// 1024·2^k ns for each k where the cumulative count grew, as Redis
/// reports its HDR histogram (its edges, in µs rounded down: 1, 2, 4, 8,
/// 16, 32, 65, 131…).
pub fn redis_report(counts: &Counts) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut cumulative, mut reported, mut next) = (0u64, 0u64, 0usize);
    for k in 0..=(TOP_BIT - 10) {
        let edge = 1024u64 << k;
        while next < BUCKETS && upper_ns(next) < edge {
            cumulative += counts[next];
            next += 1;
        }
        if cumulative > reported {
            out.push((edge / 1000, cumulative));
            reported = cumulative;
        }
    }
    // Anything slower than the last edge.
    let all = total(counts);
    if all > reported {
        out.push((upper_ns(BUCKETS - 1) / 1000, all));
    }
    out
}

/// The value (ns) at or below which `percentile` % of calls fall: the
/// upper edge of the bucket where the count reaches it.
pub fn percentile_ns(counts: &Counts, percentile: f64) -> u64 {
    let all = total(counts);
    if all == 0 {
        return 0;
    }
    let wanted = ((percentile / 100.0) * all as f64).ceil().max(1.0) as u64;
    let mut cumulative = 0;
    for (index, count) in counts.iter().enumerate() {
        cumulative += count;
        if cumulative >= wanted {
            return upper_ns(index);
        }
    }
    upper_ns(BUCKETS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_values_in_order() {
        let mut previous_upper = None;
        for index in 0..BUCKETS {
            let upper = upper_ns(index);
            if let Some(p) = previous_upper {
                assert!(upper > p, "{index}");
                assert_eq!(bucket(p + 1), index, "first value of {index}");
            }
            assert_eq!(bucket(upper), index, "last value of {index}");
            previous_upper = Some(upper);
        }
        for ns in [0, 15, 16, 17, 1000, 1023, 1024, 1025, 123_456_789] {
            let index = bucket(ns);
            assert!(upper_ns(index) >= ns);
            // Within 12.5 % above.
            assert!(upper_ns(index) as f64 <= ns as f64 * 1.125 + 1.0, "{ns}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn report_and_percentiles() {
        let histogram = Histogram::default();
        for _ in 0..90 {
            histogram.record(900); // under 1 µs
        }
        for _ in 0..10 {
            histogram.record(3_000); // 3 µs
        }
        let mut counts = [0; BUCKETS];
        histogram.add_to(&mut counts);
        assert_eq!(redis_report(&counts), vec![(1, 90), (4, 100)]);
        assert!((900..=1024).contains(&percentile_ns(&counts, 50.0)));
        assert!((3_000..=3_375).contains(&percentile_ns(&counts, 99.0)));
        histogram.reset();
        let mut counts = [0; BUCKETS];
        histogram.add_to(&mut counts);
        assert!(redis_report(&counts).is_empty());
    }
}
