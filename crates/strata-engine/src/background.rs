//! Memory held by background work (checkpoint writes, compaction reads),
//! kept apart from the data so the RAM budget is not charged for it.
//!
//! A checkpoint writes through a 1 MiB aligned buffer and compaction reads
//! segments through a 1 MiB buffer: transient, bounded and independent of
//! the dataset, like Redis' AOF and replication buffers, which Redis also
//! leaves out of the memory it compares with `maxmemory`. Charging them to
//! the budget made a 4 MiB budget refuse writes (OOM) whenever a checkpoint
//! and a compaction ran at the same time, with every value already on disk.
//! INFO reports them in `mem_not_counted_for_evict`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes background buffers hold now.
pub fn bytes() -> u64 {
    BYTES.load(Relaxed)
}

/// Accounts for `bytes` of a background buffer while it lives.
#[derive(Debug)]
pub(crate) struct BackgroundBytes(u64);

impl BackgroundBytes {
    pub(crate) fn new(bytes: usize) -> BackgroundBytes {
        BYTES.fetch_add(bytes as u64, Relaxed);
        BackgroundBytes(bytes as u64)
    }

    /// Changes the accounted size to `bytes` (a buffer that grew).
    pub(crate) fn set(&mut self, bytes: usize) {
        let bytes = bytes as u64;
        if bytes >= self.0 {
            BYTES.fetch_add(bytes - self.0, Relaxed);
        } else {
            BYTES.fetch_sub(self.0 - bytes, Relaxed);
        }
        self.0 = bytes;
    }
}

impl Drop for BackgroundBytes {
    fn drop(&mut self) {
        BYTES.fetch_sub(self.0, Relaxed);
    }
}
