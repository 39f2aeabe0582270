//! The engine's front door: opening a data directory, in two steps.
//!
//! 1. [`open`] reads only the directory listing, `log/HEAD` and the
//!    checkpoint headers (the hash seed must be known before the keyspace
//!    exists) and makes the empty [`Keyspace`]. A server binds its
//!    listeners and answers `-LOADING` from here on.
//! 2. [`Pending::load`] loads the newest checkpoint and replays the log
//!    after it ([`crate::storage::recovery`]), prunes the cache store, starts the
//!    log (or, without one, the cache store that takes values leaving
//!    RAM), attaches it to the keyspace and lets compaction take the
//!    segments that were mostly dead before the restart. From then on
//!    every change is logged.
//!
//! What a caller assembled by hand before (plan, load, prune, start the
//! log or the cache store, attach) is these two calls; `tests/` opens,
//! writes, drops without closing, tears tails and recovers through them.

use std::path::Path;

use crate::keyspace::shards::Keyspace;
use crate::storage::log::{FsyncPolicy, Log, LogStart};
use crate::storage::recovery::{self, LoadOptions, Plan, Progress, RecoveryError};
use crate::tiering::tier;

/// How [`Pending::load`] opens the log.
#[derive(Clone, Copy, Debug)]
pub struct LogOptions {
    /// Largest segment file (`log-segment-size`).
    pub segment_bytes: u64,
    /// When writes reach the disk (`appendfsync`).
    pub fsync: FsyncPolicy,
    /// Whether big rounds bypass the page cache (`O_DIRECT`).
    pub direct_io: bool,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_bytes: 64 << 20,
            fsync: FsyncPolicy::EverySec,
            direct_io: true,
        }
    }
}

/// How [`Pending::load`] loads and what it starts.
pub struct LoadSettings {
    /// How recovery reads (torn tails, locations, the RAM budget).
    pub load: LoadOptions,
    /// Whether the log is on (`appendonly yes`). Without it, values
    /// leaving RAM go to the cache store (written, never fsynced, never
    /// replayed), which takes `log`'s segment size and direct I/O.
    pub appendonly: bool,
    pub log: LogOptions,
    /// Start empty, leaving what the directory holds untouched (Redis
    /// without an RDB: `appendonly no` with no save point). A later open
    /// without it loads the directory again.
    pub start_empty: bool,
}

impl Default for LoadSettings {
    fn default() -> Self {
        LoadSettings {
            load: LoadOptions::default(),
            appendonly: true,
            log: LogOptions::default(),
            start_empty: false,
        }
    }
}

/// What [`Pending::load`] loaded.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Keys the checkpoint held.
    pub checkpoint_keys: u64,
    /// Log records replayed after it.
    pub records_replayed: u64,
    /// One line per torn tail cut off (a crash's normal state).
    pub truncated: Vec<String>,
    /// Whether the directory's data was left unloaded (`start_empty`).
    pub skipped: bool,
    /// The LSN the data loaded reaches (the first a new change gets, with
    /// the log on; without it, what a checkpoint of the loaded data is
    /// stamped with).
    pub next_lsn: u64,
    /// Bytes of the checkpoint files loaded.
    pub checkpoint_bytes: u64,
}

/// A directory opened but not loaded yet (see the module docs).
pub struct Pending {
    plan: Plan,
}

/// Step 1: the keyspace for the data directory `dir` (with `databases`
/// databases and the checkpoints' hash seed and sharding), and what
/// loading it will read. Reads no data.
pub fn open(dir: &Path, databases: usize) -> Result<(Keyspace, Pending), RecoveryError> {
    let plan = recovery::plan(dir)?;
    let keyspace = match plan.seed {
        Some(seed) => Keyspace::with_seed(databases, seed, plan.sharding),
        None => Keyspace::new(databases),
    };
    Ok((keyspace, Pending { plan }))
}

impl Pending {
    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.plan.dir
    }

    /// Whether there is anything to load (a checkpoint or a segment).
    pub fn has_data(&self) -> bool {
        !(self.plan.checkpoints.is_empty() && self.plan.segments.is_empty())
    }

    /// Step 2 (see the module docs): loads into `keyspace` (the one
    /// [`open`] made), reporting progress, and starts the log or the
    /// cache store. On an error nothing was started; the keyspace holds
    /// part of the data and should be dropped.
    pub fn load(
        self,
        keyspace: &Keyspace,
        now_ms: u64,
        settings: LoadSettings,
        progress: impl FnMut(Progress),
    ) -> Result<Loaded, RecoveryError> {
        let plan = &self.plan;
        let skip = settings.start_empty && self.has_data();
        let (loaded, skip_lsn) = if skip {
            // Nothing is read, so nothing can be found missing either:
            // HEAD is checked when a later open loads the log.
            let empty = Plan {
                checkpoints: Vec::new(),
                segments: Vec::new(),
                head: None,
                ..plan.clone()
            };
            let bound = recovery::lsn_bound(plan)?;
            (
                recovery::load(&empty, keyspace, now_ms, settings.load, progress)?,
                bound,
            )
        } else {
            (
                recovery::load(plan, keyspace, now_ms, settings.load, progress)?,
                0,
            )
        };
        // The cache store is never replayed: what no loaded key needs
        // goes, unless a checkpoint that was not loaded may name it.
        let cache_segments = recovery::prune_cache_store(plan, keyspace, skip)?;
        let checkpoint_bytes = (plan.checkpoints.iter())
            .filter_map(|path| std::fs::metadata(path).ok())
            .map(|m| m.len())
            .sum();
        let mut result = Loaded {
            checkpoint_keys: loaded.checkpoint_keys,
            records_replayed: loaded.records_replayed,
            truncated: loaded.truncated,
            skipped: skip,
            next_lsn: loaded.next_lsn.max(skip_lsn),
            checkpoint_bytes,
        };
        if settings.appendonly {
            let start = LogStart {
                next_lsn: loaded.next_lsn,
                next_segment: loaded.next_segment,
                segments: loaded.segments,
            };
            let dir = recovery::log_dir(&plan.dir);
            let log = start_log(&dir, settings.log, start)
                .map_err(|e| e.context("Can't start the log"))?;
            keyspace.attach_log(log);
            // Compaction may take the segments that were mostly dead
            // before the restart at once, without waiting a cycle.
            crate::storage::compaction::note_dying_at_start(keyspace);
            result.next_lsn = loaded.next_lsn;
        } else {
            let next_segment = cache_segments
                .last()
                .map_or(tier::CACHE_SEGMENT_BASE, |s| s.seq + 1);
            // What is on disk already may be named by the checkpoint.
            keyspace.tier().set_named_below(next_segment);
            let start = LogStart {
                next_lsn: 1,
                next_segment,
                segments: cache_segments,
            };
            let options = LogOptions {
                fsync: FsyncPolicy::No,
                ..settings.log
            };
            let dir = tier::cache_dir(&plan.dir);
            let store = start_log(&dir, options, start)
                .map_err(|e| e.context("Can't start the cache store"))?;
            keyspace.attach_cache_store(store);
        }
        Ok(result)
    }
}

/// Starts the log (or the cache store) in `dir`.
fn start_log(
    dir: &Path,
    options: LogOptions,
    start: LogStart,
) -> Result<std::sync::Arc<Log>, RecoveryError> {
    let log = Log::start(dir, options.segment_bytes, options.fsync, start)
        .map_err(|e| RecoveryError::io(dir, &e))?;
    // Before it is attached: no segment is opened before this.
    log.set_direct_io(options.direct_io);
    Ok(log)
}
