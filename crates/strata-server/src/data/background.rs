//! The data side's background work, as the running server drives it:
//! loading the data directory at start ([`spawn_loader`]), checkpoints
//! ([`checkpoint()`]) and the thread that starts them on their triggers
//! ([`spawn_checkpointer`]), and the [`Handles`] they take instead of the
//! whole server. [`crate::data::persistence`] holds their shared state.

use crate::config::SharedConfig;
use crate::data::persistence::{Persistence, Trigger};
use crate::data::tiering::Tiering;
use crate::server::Server;
use crate::util::now_ms;
use crate::{log_notice, log_warning};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::time::{Duration, Instant};
use strata_engine::Keyspace;
use strata_engine::open::{LoadSettings, LogOptions, Pending};
use strata_engine::storage::checkpoint::{self, CheckpointInfo};
use strata_engine::storage::recovery::{self, RecoveryError};

/// How often the checkpoint thread looks at its triggers.
const TRIGGER_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// How often triggers are looked at while the log does not move.
const QUIET_TRIGGER_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How often the log's own triggers are looked at while it does not move.
const QUIET_RECHECK_INTERVAL: Duration = Duration::from_secs(5);
/// After a failed background checkpoint, wait this long before a save
/// point may start another (Redis' CONFIG_BGSAVE_RETRY_DELAY).
const RETRY_DELAY_S: u64 = 5;

/// The data side of the server without its connections: what background
/// threads (loading, checkpoints, the cron) take instead of the whole
/// [`Server`]. Cheap to clone.
#[derive(Clone)]
pub struct Handles {
    pub keyspace: Arc<Keyspace>,
    pub config: Arc<SharedConfig>,
    pub persistence: Arc<Persistence>,
    pub tiering: Arc<Tiering>,
    pub active_expire: Arc<AtomicBool>,
    pub cron_paused: Arc<AtomicBool>,
    pub functions: Arc<crate::functions::Functions>,
}

impl Handles {
    /// The data side of `server`, for a background thread.
    pub fn of(server: &Server) -> Handles {
        Handles {
            keyspace: server.keyspace.clone(),
            config: server.config.clone(),
            persistence: server.persistence.clone(),
            tiering: server.tiering.clone(),
            active_expire: server.active_expire.clone(),
            cron_paused: server.cron_paused.clone(),
            functions: server.functions.clone(),
        }
    }
}

/// Loads the data directory on a background thread, then attaches the log
/// and announces readiness. A recovery error stops the process.
pub fn spawn_loader(
    handles: Handles,
    pending: Pending,
    ready_lines: Vec<String>,
    notifier: Option<std::sync::Arc<crate::supervise::Notifier>>,
) {
    let spawned = std::thread::Builder::new()
        .name("strata-load".into())
        .spawn(move || {
            if let Err(error) = load(&handles, pending) {
                log_warning!("{error}");
                log_warning!("Fatal error loading the data directory; exiting.");
                std::process::exit(1);
            }
            for line in ready_lines {
                log_notice!("{line}");
            }
            if let Some(notifier) = notifier {
                notifier.send("READY=1\nSTATUS=Ready to accept connections");
            }
        });
    if let Err(e) = spawned {
        log_warning!("Can't start the loading thread: {e}");
        std::process::exit(1);
    }
}

fn load(handles: &Handles, pending: Pending) -> Result<(), String> {
    let started = Instant::now();
    let persistence = &*handles.persistence;
    let settings = load_settings(handles);
    if settings.start_empty && pending.has_data() {
        log_notice!(
            "Not loading the checkpoint and log in {}: with appendonly no and save \"\" the server starts empty (configure a save point, e.g. --save \"3600 1\", or appendonly yes to load them)",
            pending.dir().display()
        );
    }
    let dir = pending.dir().to_path_buf();
    let loaded = pending.load(&handles.keyspace, now_ms(), settings, |progress| {
        *persistence.loading_progress.lock() = progress;
        if progress.bytes_total > 0 && started.elapsed() >= recovery::PROGRESS_INTERVAL {
            log_notice!(
                "Loading: {:.1}% ({} of {} bytes, {} keys from the checkpoint, {} log records)",
                progress.bytes_done as f64 * 100.0 / progress.bytes_total as f64,
                progress.bytes_done,
                progress.bytes_total,
                progress.keys_loaded,
                progress.records_replayed
            );
        }
    });
    let loaded = loaded.map_err(|e| match e {
        // Naming the directory as start-up's own errors do.
        e @ RecoveryError::Io { .. } => format!("{e} (data directory {})", dir.display()),
        e => e.to_string(),
    })?;
    for line in &loaded.truncated {
        log_warning!("{line}");
    }
    crate::commands::functions::load_at_start(&handles.functions, &handles.keyspace)?;
    // A replica's position (`replication::Position`) stays only while the
    // configuration still names a primary: once this server takes writes
    // of its own, the data no longer matches it.
    if handles.config.get().setting("replicaof").is_empty()
        && handles.keyspace.replication_position().is_some()
    {
        handles.keyspace.save_replication_position(None, &[]);
    }
    handles.keyspace.forget_replication_position();
    persistence
        .keys_loaded
        .store(loaded.checkpoint_keys, Relaxed);
    if handles.keyspace.log().is_none() {
        persistence.base_lsn.store(loaded.next_lsn, Relaxed);
    }
    // Writes from the first one on get locations when tiering is on.
    handles
        .tiering
        .tick(&handles.keyspace, &handles.config.get(), persistence);
    persistence
        .last_checkpoint_bytes
        .store(loaded.checkpoint_bytes, Relaxed);
    persistence.loading.store(false, Release);
    log_notice!(
        "DB loaded from disk: {:.3} seconds ({} keys from the checkpoint, {} log records replayed)",
        started.elapsed().as_secs_f64(),
        loaded.checkpoint_keys,
        loaded.records_replayed
    );
    Ok(())
}

/// How the configuration asks the engine to load and what to start.
fn load_settings(handles: &Handles) -> LoadSettings {
    let config = handles.config.get();
    let tiered =
        config.maxmemory > 0 && config.maxmemory_policy == crate::config::MaxmemoryPolicy::Tiered;
    LoadSettings {
        load: recovery::LoadOptions {
            truncate_torn_tail: true,
            delay_per_key: Duration::from_micros(config.key_load_delay_us),
            // Replayed values can leave RAM without a write: their record
            // stays (with the log on; without it, the log is not kept).
            locate: tiered && config.appendonly,
            locate_big: config.appendonly,
            memory_limit: tiered
                .then_some((crate::alloc::used_bytes as fn() -> u64, config.maxmemory)),
        },
        appendonly: config.appendonly,
        log: LogOptions {
            segment_bytes: config.log_segment_bytes,
            fsync: config.appendfsync,
            direct_io: config.log_direct_io,
        },
        // `appendonly no` with `save ""` is a pure cache: as Redis without
        // an RDB, it starts empty.
        start_empty: !config.appendonly && config.save_points.is_empty(),
    }
}

/// Writes a checkpoint now, on this thread. Errors if one is running.
pub fn checkpoint(handles: &Handles, trigger: Trigger) -> Result<CheckpointInfo, String> {
    let persistence = &*handles.persistence;
    let Some(_running) = persistence.running.try_lock() else {
        return Err("in progress".into());
    };
    let config = handles.config.get();
    let started = Instant::now();
    persistence.checkpoint_started_ms.store(now_ms(), Relaxed);
    persistence.last_attempt_s.store(now_ms() / 1000, Relaxed);
    let changes = persistence.total_changes();
    let rate = match trigger {
        Trigger::Save | Trigger::Shutdown => 0,
        _ => config.checkpoint_rate_bytes,
    };
    let idle_lsn = persistence.base_lsn.load(Relaxed);
    if let Some(lock) = &mut *persistence.dir_lock.lock()
        && let Err(why) = lock.verify()
    {
        log_warning!("{why}");
        persistence.checkpoint_started_ms.store(0, Relaxed);
        persistence.last_save_ok.store(false, Relaxed);
        return Err(why);
    }
    let result = checkpoint::run_cycle(&handles.keyspace, &config.dir, idle_lsn, rate, now_ms());
    if let Some(log) = handles.keyspace.change_log() {
        persistence
            .log_bytes_after_cycle
            .store(log.disk_bytes(), Relaxed);
    }
    persistence.checkpoint_started_ms.store(0, Relaxed);
    persistence
        .last_duration_ms
        .store(started.elapsed().as_millis() as u64, Relaxed);
    strata_engine::latency::sample("checkpoint", started.elapsed());
    let rewrite = matches!(trigger, Trigger::Rewrite | Trigger::LogGrowth);
    match &result {
        Ok(info) => {
            persistence.last_save_s.store(now_ms() / 1000, Relaxed);
            persistence.last_save_ok.store(true, Relaxed);
            persistence.saves.fetch_add(1, Relaxed);
            persistence.changes_at_last_save.store(changes, Relaxed);
            persistence.last_checkpoint_bytes.store(info.bytes, Relaxed);
            persistence.last_checkpoint_keys.store(info.keys, Relaxed);
            persistence
                .last_checkpoint_lsn
                .store(info.replay_from, Relaxed);
            if rewrite {
                persistence.rewrites.fetch_add(1, Relaxed);
                persistence.rewrite_consecutive_failures.store(0, Relaxed);
                persistence.last_rewrite_ok.store(true, Relaxed);
            }
            log_notice!(
                "DB saved on disk ({trigger:?}): checkpoint in {} with {} keys, {} bytes, in {:.3} seconds",
                config.dir.display(),
                info.keys,
                info.bytes,
                started.elapsed().as_secs_f64()
            );
        }
        Err(e) => {
            persistence.last_save_ok.store(false, Relaxed);
            if rewrite {
                persistence
                    .rewrite_consecutive_failures
                    .fetch_add(1, Relaxed);
                persistence.last_rewrite_ok.store(false, Relaxed);
            }
            log_warning!("Checkpoint ({trigger:?}) failed: {e}");
        }
    }
    result.map_err(|e| crate::util::strerror(&e.to_string()).to_string())
}

/// The checkpoint thread: runs requested and triggered checkpoints, and
/// hands CONFIG SET appendfsync to the log.
pub fn spawn_checkpointer(handles: Handles) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("strata-checkpoint".into())
        .spawn(move || {
            // The log position at which, and when, the last look at the
            // log found nothing to do. The log's figures walk every shard
            // (1 024 locks): while the log does not move they are looked at
            // every 5 s, not at every check (an idle server's CPU).
            let mut quiet: Option<(u64, Instant)> = None;
            loop {
                let requested = {
                    let mut requested = handles.persistence.requested.lock();
                    if requested.is_none() {
                        // A quiet log has nothing due sooner than a save
                        // point's second; requests wake this thread.
                        let wait = match quiet {
                            Some(_) => QUIET_TRIGGER_CHECK_INTERVAL,
                            None => TRIGGER_CHECK_INTERVAL,
                        };
                        handles.persistence.wake.wait_for(&mut requested, wait);
                    }
                    requested.take()
                };
                if handles.persistence.is_loading() {
                    handles.persistence.queued.store(false, Relaxed);
                    continue;
                }
                handles.config.get().apply_to_log(&handles.keyspace);
                let position = handles.keyspace.log().map(|log| log.next_lsn());
                let still_quiet = quiet.is_some_and(|(at, since)| {
                    Some(at) == position && since.elapsed() < QUIET_RECHECK_INTERVAL
                });
                let trigger = requested
                    .or_else(|| save_point_due(&handles))
                    .or_else(|| (!still_quiet).then(|| log_growth_due(&handles)).flatten());
                if still_quiet && trigger.is_none() {
                    continue;
                }
                quiet = None;
                if let Some(trigger) = trigger {
                    let _ = checkpoint(&handles, trigger);
                    // Unless another was queued meanwhile (both under
                    // the lock `schedule` holds).
                    let queued_next = handles.persistence.requested.lock();
                    if requested.is_some() && queued_next.is_none() {
                        handles.persistence.queued.store(false, Relaxed);
                    }
                } else if cache_store_due(&handles) {
                    compact_between_cycles(
                        &handles,
                        "the cache store",
                        checkpoint::compact_cache_store,
                    );
                } else if checkpoint::log_compaction_due(&handles.keyspace) {
                    // One dying segment per step (cold values moved out).
                    compact_between_cycles(&handles, "the log", checkpoint::compact_log_step);
                } else if let Some(position) = position {
                    quiet = Some((position, Instant::now()));
                }
            }
        })
        .map(|_| ())
}

/// Whether the cache store (`appendonly no`) has grown enough dead bytes
/// to compact: the `auto-aof-rewrite-*` rule, applied to the store's dead
/// bytes over its live ones.
fn cache_store_due(handles: &Handles) -> bool {
    if handles.keyspace.change_log().is_some() || handles.keyspace.log().is_none() {
        return false;
    }
    let config = handles.config.get();
    let (total, live) = handles.keyspace.log_live_bytes();
    let dead = total.saturating_sub(live);
    config.auto_rewrite_percentage > 0
        && dead >= config.auto_rewrite_min_bytes
        && dead.saturating_mul(100) >= live.saturating_mul(config.auto_rewrite_percentage)
}

/// Runs `compact` (the cache store's compaction, or a step of the log's)
/// on this (the checkpoint) thread, one run at a time with checkpoints,
/// at `checkpoint-max-rate`.
fn compact_between_cycles(
    handles: &Handles,
    what: &str,
    compact: fn(&Keyspace, u64) -> std::io::Result<()>,
) {
    let Some(_running) = handles.persistence.running.try_lock() else {
        return;
    };
    let rate = handles.config.get().checkpoint_rate_bytes;
    let started = Instant::now();
    if let Err(e) = compact(&handles.keyspace, rate) {
        log_warning!("Compacting {what} failed: {e}");
    }
    strata_engine::latency::sample("compaction", started.elapsed());
}

/// Whether the last checkpoint failed less than [`RETRY_DELAY_S`] ago (no
/// trigger fires meanwhile).
fn failed_recently(persistence: &Persistence) -> bool {
    !persistence.last_save_ok.load(Relaxed)
        && (now_ms() / 1000).saturating_sub(persistence.last_attempt_s.load(Relaxed))
            < RETRY_DELAY_S
}

/// A save point (`save <seconds> <changes>`) that calls for a checkpoint
/// now.
fn save_point_due(handles: &Handles) -> Option<Trigger> {
    let persistence = &*handles.persistence;
    let config = handles.config.get();
    let now_s = now_ms() / 1000;
    if failed_recently(persistence) {
        return None;
    }
    let changes = persistence
        .total_changes()
        .saturating_sub(persistence.changes_at_last_save.load(Relaxed));
    let since_save_s = now_s.saturating_sub(persistence.last_save_s.load(Relaxed));
    if config
        .save_points
        .iter()
        .any(|&(seconds, needed)| changes >= needed.max(1) && since_save_s >= seconds)
    {
        return Some(Trigger::SavePoint);
    }
    None
}

/// Whether the log has grown enough for a checkpoint cycle
/// (`auto-aof-rewrite-*`).
fn log_growth_due(handles: &Handles) -> Option<Trigger> {
    let persistence = &*handles.persistence;
    let config = handles.config.get();
    if failed_recently(persistence) {
        return None;
    }
    handles.keyspace.change_log()?;
    // The whole log counts, including what was written while the last
    // checkpoint ran, except records that hold cold values (tiering):
    // disk use stays near checkpoint + cold values + percentage of both.
    let (log_total, log_live) = handles.keyspace.log_live_bytes();
    let log_bytes = log_total.saturating_sub(log_live);
    let base = persistence.last_checkpoint_bytes.load(Relaxed) + log_live;
    let percentage = config.auto_rewrite_percentage;
    // And a cycle would free something: the log grew by the minimum since
    // the last cycle ended, or compaction emptied that much. Dead records
    // in segments that still hold cold values stay after a cycle (only
    // compaction, between cycles, moves those values out); without this
    // the trigger held right after each cycle, which ran back to back
    // freeing nothing while compaction never got a turn (tiered: 2.46 GB
    // of log for 0.66 GB live).
    let grown = log_total.saturating_sub(persistence.log_bytes_after_cycle.load(Relaxed));
    let worth_a_cycle = || {
        grown >= config.auto_rewrite_min_bytes
            || handles.keyspace.log_reclaimable_bytes() >= config.auto_rewrite_min_bytes
    };
    if percentage > 0
        && log_bytes >= config.auto_rewrite_min_bytes
        && log_bytes.saturating_mul(100) >= base.saturating_mul(percentage)
        && worth_a_cycle()
    {
        return Some(Trigger::LogGrowth);
    }
    None
}
