//! How entries record access, for eviction and OBJECT IDLETIME / FREQ.
//! Redis' two schemes share the 24 bits of an entry's access field, and
//! so do Strata's:
//!
//! - **LRU** (every policy but the `*-lfu` ones): Unix seconds of the last
//!   access, modulo 2^24.
//! - **LFU** (`allkeys-lfu`, `volatile-lfu`): the minute of the last
//!   access (16 bits, modulo 2^16) above a logarithmic access counter (8
//!   bits). A new key starts at [`LFU_INIT`]; an access first takes one
//!   off the counter per `lfu-decay-time` minutes since the last one, then
//!   adds one with probability `1 / ((counter - LFU_INIT) * log_factor + 1)`
//!   (`lfu-log-factor`), so the counter grows with the logarithm of the
//!   access rate and 255 stands for about a million hits with the default
//!   factor 10.
//!
//! The scheme is process-wide, switched by CONFIG SET maxmemory-policy.
//! Fields written under the other scheme are read as if they were this
//! one's until the key is next accessed; Redis says the same ("LRU and
//! LFU data will take some time to adjust").

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32};

use crate::random::random_u64;

/// The counter of a key that has just been created.
pub(crate) const LFU_INIT: u8 = 5;
/// The access field's bits.
pub(crate) const FIELD_MASK: u32 = (1 << 24) - 1;

static LFU: AtomicBool = AtomicBool::new(false);
static LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static DECAY_MINUTES: AtomicU32 = AtomicU32::new(1);

/// Selects LFU (with its `lfu-log-factor` and `lfu-decay-time`) or LRU.
pub fn set_lfu(on: bool, log_factor: u32, decay_minutes: u32) {
    LOG_FACTOR.store(log_factor, Relaxed);
    DECAY_MINUTES.store(decay_minutes, Relaxed);
    LFU.store(on, Relaxed);
}

thread_local! {
    /// Set while a CLIENT NO-TOUCH client's command runs on this thread.
    static NO_TOUCH: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (one command) with accesses left unrecorded when `no_touch`
/// (CLIENT NO-TOUCH): the keys it reads or writes keep their idle time
/// and counter. New keys still start theirs.
pub fn with_no_touch<R>(no_touch: bool, f: impl FnOnce() -> R) -> R {
    if !no_touch {
        return f();
    }
    let before = NO_TOUCH.replace(true);
    let result = f();
    NO_TOUCH.set(before);
    result
}

/// Whether entries count accesses (an LFU policy) rather than time them.
pub fn is_lfu() -> bool {
    LFU.load(Relaxed)
}

fn seconds(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & FIELD_MASK
}

fn minutes(now_ms: u64) -> u32 {
    (now_ms / 60_000) as u32 & 0xffff
}

/// The field of an entry created at `now_ms`.
pub(crate) fn created(now_ms: u64) -> u32 {
    if is_lfu() {
        lfu_field(LFU_INIT, now_ms)
    } else {
        seconds(now_ms)
    }
}

/// The field after an access at `now_ms`.
pub(crate) fn accessed(field: u32, now_ms: u64) -> u32 {
    if NO_TOUCH.get() {
        return field;
    }
    if !is_lfu() {
        return seconds(now_ms);
    }
    let mut counter = frequency(field, now_ms);
    if counter < u8::MAX {
        let base = counter.saturating_sub(LFU_INIT) as f64;
        let chance = 1.0 / (base * LOG_FACTOR.load(Relaxed) as f64 + 1.0);
        let draw = (random_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if draw < chance {
            counter += 1;
        }
    }
    lfu_field(counter, now_ms)
}

/// An LFU field of `counter` last touched at `now_ms` (RESTORE FREQ).
pub(crate) fn lfu_field(counter: u8, now_ms: u64) -> u32 {
    (minutes(now_ms) << 8) | counter as u32
}

/// The LFU counter as of `now_ms`, decayed by the minutes since the last
/// access (OBJECT FREQ; eviction's rank under LFU).
pub(crate) fn frequency(field: u32, now_ms: u64) -> u8 {
    let counter = (field & 0xff) as u8;
    let decay = DECAY_MINUTES.load(Relaxed);
    if decay == 0 {
        return counter;
    }
    let elapsed = minutes(now_ms).wrapping_sub(field >> 8) & 0xffff;
    let periods = elapsed / decay;
    counter.saturating_sub(periods.min(255) as u8)
}

/// Seconds since the last access: exact to the second under LRU; to the
/// minute under LFU, which keeps only the minute.
pub(crate) fn idle_s(field: u32, now_ms: u64) -> u64 {
    if is_lfu() {
        (minutes(now_ms).wrapping_sub(field >> 8) & 0xffff) as u64 * 60
    } else {
        (seconds(now_ms).wrapping_sub(field) & FIELD_MASK) as u64
    }
}

/// The LRU field of an access `idle_s` seconds before `now_ms` (RESTORE
/// IDLETIME).
pub(crate) fn lru_field(idle_s: u64, now_ms: u64) -> u32 {
    seconds(now_ms.saturating_sub(idle_s.saturating_mul(1000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays() {
        // The process-wide scheme is only read here through the explicit
        // LFU helpers, so other tests running LRU are not disturbed.
        let now = 10 * 60_000;
        let field = lfu_field(LFU_INIT, now);
        assert_eq!(frequency(field, now), LFU_INIT);
        assert_eq!(frequency(field, now + 3 * 60_000), LFU_INIT - 3);
        assert_eq!(frequency(field, now + 300 * 60_000), 0);
        // Minutes wrap at 2^16.
        let late = 65_535 * 60_000;
        assert_eq!(frequency(lfu_field(9, late), late + 2 * 60_000), 7);
    }
}
