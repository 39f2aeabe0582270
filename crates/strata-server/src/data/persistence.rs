//! Persistence's state as the running server holds it (`docs/storage.md`
//! has the formats and the recovery rules; the engine has the mechanisms;
//! [`crate::data::background`] runs the loading and the checkpoints).
//!
//! - **Loading.** The listeners are up before the data is: commands other
//!   than those flagged `loading` get `-LOADING` until loading (`crate::data::background`) has read
//!   the newest checkpoint and replayed the log, then the log is attached
//!   and "Ready to accept connections" is logged, as in Redis.
//! - **Durability.** The engine's log owns the one watermark (its written
//!   and synced LSNs); a connection holds its replies until the LSN its
//!   commands committed is covered (`Log::wait_durable`).
//! - **Checkpoints.** One at a time (`crate::data::background::checkpoint`): SAVE runs it at full
//!   speed on the caller's thread; BGSAVE, BGREWRITEAOF, save points and
//!   log growth (`auto-aof-rewrite-*`) run it on the checkpoint thread at
//!   `checkpoint-max-rate`. A finished checkpoint deletes the log segments
//!   it covers: that is Strata's log compaction. SHUTDOWN writes a final
//!   one unless NOSAVE.

use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::{Condvar, Mutex};
use strata_engine::storage::recovery::Progress;

use crate::observe::stats::ThreadStats;

pub struct Persistence {
    pub loading: AtomicBool,
    pub loading_started_s: AtomicU64,
    pub loading_progress: Mutex<Progress>,
    pub keys_loaded: AtomicU64,
    /// Next LSN when the log is off: checkpoints are stamped with it.
    pub(crate) base_lsn: AtomicU64,
    pub(crate) running: Mutex<()>,
    /// The data directory's lock, checked before each checkpoint writes
    /// (`strata_engine::storage::dir_lock`; none in unit tests).
    pub dir_lock: Mutex<Option<strata_engine::storage::dir_lock::DirLock>>,
    pub checkpoint_started_ms: AtomicU64,
    /// Bytes of the log when the last checkpoint cycle ended (what log
    /// growth is measured from).
    pub log_bytes_after_cycle: AtomicU64,
    pub last_save_s: AtomicU64,
    pub last_save_ok: AtomicBool,
    pub last_attempt_s: AtomicU64,
    pub last_duration_ms: AtomicU64,
    pub saves: AtomicU64,
    pub rewrites: AtomicU64,
    pub rewrite_consecutive_failures: AtomicU64,
    pub last_rewrite_ok: AtomicBool,
    pub last_checkpoint_bytes: AtomicU64,
    pub last_checkpoint_keys: AtomicU64,
    pub last_checkpoint_lsn: AtomicU64,
    /// Dataset changes counted when the last checkpoint started.
    pub changes_at_last_save: AtomicU64,
    /// A background checkpoint was asked for (BGSAVE/BGREWRITEAOF).
    pub(crate) requested: Mutex<Option<Trigger>>,
    /// A requested checkpoint is queued or running: set when one is
    /// queued, cleared by the checkpoint thread when it has run it. What
    /// INFO's `rdb_bgsave_in_progress` shows, so that a client polling it
    /// right after BGSAVE answered sees the save (as Redis, which forks
    /// before it answers), not the moment before the thread picked it up.
    pub(crate) queued: AtomicBool,
    pub(crate) wake: Condvar,
    /// The network threads' counters, whose changes to the dataset save
    /// points count.
    thread_stats: Vec<Arc<ThreadStats>>,
}

/// Why a checkpoint runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Save,
    Bgsave,
    Rewrite,
    SavePoint,
    LogGrowth,
    Shutdown,
}

impl Persistence {
    pub fn new(started_s: u64, thread_stats: Vec<Arc<ThreadStats>>) -> Self {
        Persistence {
            loading: AtomicBool::new(true),
            loading_started_s: AtomicU64::new(started_s),
            loading_progress: Mutex::new(Progress::default()),
            keys_loaded: AtomicU64::new(0),
            base_lsn: AtomicU64::new(1),
            running: Mutex::new(()),
            log_bytes_after_cycle: AtomicU64::new(0),
            dir_lock: Mutex::new(None),
            checkpoint_started_ms: AtomicU64::new(0),
            last_save_s: AtomicU64::new(started_s),
            last_save_ok: AtomicBool::new(true),
            last_attempt_s: AtomicU64::new(0),
            last_duration_ms: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            rewrites: AtomicU64::new(0),
            rewrite_consecutive_failures: AtomicU64::new(0),
            last_rewrite_ok: AtomicBool::new(true),
            last_checkpoint_bytes: AtomicU64::new(0),
            last_checkpoint_keys: AtomicU64::new(0),
            last_checkpoint_lsn: AtomicU64::new(0),
            changes_at_last_save: AtomicU64::new(0),
            requested: Mutex::new(None),
            queued: AtomicBool::new(false),
            wake: Condvar::new(),
            thread_stats,
        }
    }

    /// Changes to the dataset since start (rdb_changes_since_last_save
    /// counts from the last checkpoint).
    pub fn total_changes(&self) -> u64 {
        self.thread_stats
            .iter()
            .map(|t| t.changes.load(Relaxed))
            .sum()
    }

    pub fn is_loading(&self) -> bool {
        // Acquire pairs with the Release below: whoever sees loading over
        // also sees the log attached before it, so no write goes unlogged.
        self.loading.load(Acquire)
    }

    pub fn checkpoint_running(&self) -> bool {
        self.checkpoint_started_ms.load(Relaxed) != 0
    }

    /// A checkpoint runs, or a requested one waits for the thread.
    pub fn checkpoint_in_progress(&self) -> bool {
        self.checkpoint_running() || self.queued.load(Relaxed)
    }

    /// Asks the checkpoint thread for a background checkpoint. False if
    /// one is already running or queued.
    pub fn request(&self, trigger: Trigger) -> bool {
        if self.checkpoint_running() {
            return false;
        }
        self.schedule(trigger)
    }

    /// Queues a background checkpoint to run after the current one, if
    /// any. False if one is already queued.
    pub fn schedule(&self, trigger: Trigger) -> bool {
        let mut requested = self.requested.lock();
        if requested.is_some() {
            return false;
        }
        *requested = Some(trigger);
        self.queued.store(true, Relaxed);
        self.wake.notify_one();
        true
    }
}
