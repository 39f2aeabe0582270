//! When collections change encoding: the redis.conf thresholds
//! `list-max-listpack-size`, `set-max-intset-entries`,
//! `set-max-listpack-entries`, `set-max-listpack-value`,
//! `zset-max-listpack-entries` and `zset-max-listpack-value` (hashes have
//! theirs in `hash::SharedLimits`).
//!
//! They are process-wide, as in Redis' server struct: read on every write
//! that may convert, changed only by the configuration (start and CONFIG
//! SET), so relaxed atomics suffice. A value already converted stays so,
//! as in Redis.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};

/// The thresholds in force for sets and sorted sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectionLimits {
    /// `list-max-listpack-size` (see [`crate::types::list::Limits`]).
    pub list_listpack_size: i64,
    pub set_intset_entries: usize,
    pub set_listpack_entries: usize,
    pub set_listpack_value: usize,
    pub zset_listpack_entries: usize,
    pub zset_listpack_value: usize,
}

impl Default for CollectionLimits {
    /// Redis 7's defaults.
    fn default() -> Self {
        CollectionLimits {
            list_listpack_size: -2,
            set_intset_entries: 512,
            set_listpack_entries: 128,
            set_listpack_value: 64,
            zset_listpack_entries: 128,
            zset_listpack_value: 64,
        }
    }
}

static LIST_LISTPACK_SIZE: AtomicI64 = AtomicI64::new(-2);
static SET_INTSET_ENTRIES: AtomicUsize = AtomicUsize::new(512);
static SET_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(128);
static SET_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(64);
static ZSET_LISTPACK_ENTRIES: AtomicUsize = AtomicUsize::new(128);
static ZSET_LISTPACK_VALUE: AtomicUsize = AtomicUsize::new(64);

/// The limits in force.
pub fn get() -> CollectionLimits {
    CollectionLimits {
        list_listpack_size: LIST_LISTPACK_SIZE.load(Relaxed),
        set_intset_entries: SET_INTSET_ENTRIES.load(Relaxed),
        set_listpack_entries: SET_LISTPACK_ENTRIES.load(Relaxed),
        set_listpack_value: SET_LISTPACK_VALUE.load(Relaxed),
        zset_listpack_entries: ZSET_LISTPACK_ENTRIES.load(Relaxed),
        zset_listpack_value: ZSET_LISTPACK_VALUE.load(Relaxed),
    }
}

/// Puts `limits` in force for the changes that follow.
pub fn set(limits: CollectionLimits) {
    LIST_LISTPACK_SIZE.store(limits.list_listpack_size, Relaxed);
    SET_INTSET_ENTRIES.store(limits.set_intset_entries, Relaxed);
    SET_LISTPACK_ENTRIES.store(limits.set_listpack_entries, Relaxed);
    SET_LISTPACK_VALUE.store(limits.set_listpack_value, Relaxed);
    ZSET_LISTPACK_ENTRIES.store(limits.zset_listpack_entries, Relaxed);
    ZSET_LISTPACK_VALUE.store(limits.zset_listpack_value, Relaxed);
}

/// From what size list elements are plain (alone in their node): DEBUG
/// QUICKLIST-PACKED-THRESHOLD's knob, not a configuration directive.
static LIST_PLAIN_BYTES_MIN: AtomicUsize =
    AtomicUsize::new(crate::types::list::PLAIN_BYTES_MIN_DEFAULT);

/// Sets the plain-element size (0: back to the default, 1 GB).
pub fn set_list_plain_bytes_min(bytes: usize) {
    let bytes = if bytes == 0 {
        crate::types::list::PLAIN_BYTES_MIN_DEFAULT
    } else {
        bytes
    };
    LIST_PLAIN_BYTES_MIN.store(bytes, Relaxed);
}

/// The list node limits in force.
pub fn list() -> crate::types::list::Limits {
    crate::types::list::Limits {
        plain_bytes_min: LIST_PLAIN_BYTES_MIN.load(Relaxed),
        ..crate::types::list::Limits::from_listpack_size(LIST_LISTPACK_SIZE.load(Relaxed))
    }
}
