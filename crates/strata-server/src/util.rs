//! Small helpers every layer uses: the wall clock in milliseconds, the
//! Redis version Strata answers to, random hex identifiers and the text of
//! an I/O error. A leaf: it names nothing in the crate, so any module may
//! use it without joining an import circle.

use std::time::{SystemTime, UNIX_EPOCH};

/// The Redis version we answer to in HELLO and INFO: the behaviour Strata
/// reproduces, which is what clients use for feature detection.
pub const REDIS_VERSION: &str = "7.4.1";

/// [`REDIS_VERSION`] as Lua's `redis.REDIS_VERSION_NUM` gives it: one
/// byte each for major, minor and patch (7.2.4 is 0x070204).
pub fn redis_version_num() -> u32 {
    REDIS_VERSION
        .split('.')
        .map(|part| part.parse::<u32>().unwrap_or(0))
        .fold(0, |num, part| (num << 8) | (part & 0xff))
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `len` random lower-case hex digits (run IDs, replication IDs).
pub fn random_hex(len: usize) -> String {
    (0..len)
        .map(|_| {
            char::from_digit(
                (strata_engine::keyspace::shards::random_u64() % 16) as u32,
                16,
            )
            .unwrap_or('0')
        })
        .collect()
}

/// The Redis-style text of an I/O error (strerror, without Rust's suffix).
pub fn strerror(error: &str) -> &str {
    match error.find(" (os error") {
        Some(end) => &error[..end],
        None => error,
    }
}
