//! What the server says about itself: INFO, the metrics endpoint,
//! command statistics and latency histograms, the slow log.
//!
//! - `info`: INFO's sections; `metrics`: the Prometheus endpoint.
//! - `stats`: counters per command and per server; `histogram`: latency
//!   histograms (LATENCY HISTOGRAM, INFO latencystats); `counter`: a counter
//!   one thread writes and any thread reads.
//! - `slowlog`: SLOWLOG.

pub mod counter;
pub mod histogram;
pub mod info;
pub mod metrics;
pub mod slowlog;
pub mod stats;
