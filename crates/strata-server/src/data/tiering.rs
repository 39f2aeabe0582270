//! The server's side of tiering (docs/tiering.md).
//!
//! - **RAM budget.** Before a command runs, [`Tiering::admit`] compares
//!   the allocator's count of used bytes with `maxmemory`. Over it, the
//!   policy evicts: `tiered` drops values whose image is in the log (keys
//!   stay), Redis' policies delete keys. If that cannot bring use under
//!   the budget, commands flagged `denyoom` get Redis' `-OOM` error. A
//!   `maxdisk` budget rejects `denyoom` commands the same way once the
//!   data directory holds that much: every write lands on disk.
//! - **Cold reads.** A connection about to run a command whose keys have
//!   cold values lists them in the engine's [`ColdFetch`] and reads them
//!   through [`ReaderPool`] — the engine's [`ColdReader`]: each network
//!   thread's own io_uring, or `tiering-io-threads` threads doing
//!   `pread`s where io_uring is unavailable — with its results awaited as
//!   futures, so its network thread keeps serving other connections; the
//!   fetch then installs them. No shard lock is held while reading.
//! - **Rates** for INFO tiering, sampled by the cron.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use parking_lot::Mutex;
use strata_engine::tiering::fetch::{ColdFetch, ReadResult};
use strata_engine::tiering::reader::ColdReader;
use strata_engine::tiering::tier::Tier;

use crate::config::{Config, MaxmemoryPolicy};
use crate::data::persistence::Persistence;
use strata_engine::Keyspace;

pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const ERR_OOM_DISK: &str = "OOM command not allowed when used disk > 'maxdisk'.";

/// Eviction steps (one shard lock each) a command may spend; bounds the
/// latency one command can add while the server catches up. As in Redis,
/// a command is refused only when eviction finds nothing to evict, not
/// when it has not caught up yet.
const EVICTION_STEPS_MAX: usize = 256;
/// Eviction calls (each up to [`EVICTION_STEPS_MAX`] steps) one cron tick
/// makes while RAM is over the budget and no command arrives.
const CRON_EVICTION_ROUNDS_MAX: usize = 64;
/// The log's buffers beyond its pending bytes above which, over the
/// budget, its spare buffers are freed before anything is evicted.
const SPARE_BYTES_WORTH_FREEING: u64 = 1 << 20;
/// Longest a writer waits, over the RAM budget, for values that can
/// leave RAM in a moment (their log write, or their command, pending).
/// Short: the writer's network thread serves nothing else meanwhile, and
/// on a loaded machine sleeping through whole milliseconds starved every
/// client of that thread (a 100 ms bound made a test's readers 3x slower
/// at load 10). The wait yields the core to whoever makes them leave (the
/// log writer, the command they are lent to).
const EVICTION_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(2);
/// Window over which INFO's per-second rates are measured.
const RATE_WINDOW_MS: u128 = 2000;

/// Memory that does not count against `maxmemory`: records committed to
/// the log (or cache store) and not yet written, as Redis leaves its AOF
/// buffer out (INFO `mem_not_counted_for_evict`), and the buffers of a
/// running checkpoint or compaction ([`strata_engine::background`]). The
/// log's spare buffers,
/// kept only for reuse, do count: RAM they hold is RAM values cannot use.
pub fn not_counted_for_evict(keyspace: &Keyspace) -> u64 {
    keyspace.log().map_or(0, |log| log.pending_bytes() as u64) + strata_engine::background::bytes()
}

/// Counter values at one instant, for rates.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    disk_reads: u64,
    promotions: u64,
    evictions: u64,
}

/// The engine's cold reader ([`ColdReader`]), its results awaited by
/// connections on their tokio thread.
pub struct ReaderPool {
    reader: ColdReader,
    pub engine: &'static str,
}

impl ReaderPool {
    fn start(tier: Arc<Tier>, threads: usize, use_uring: bool) -> std::io::Result<ReaderPool> {
        let (reader, why_not_uring) = ColdReader::start(tier, threads, use_uring)?;
        if let Some(why) = why_not_uring {
            crate::log_warning!("{why}; reading cold values with {threads} threads");
        }
        let engine = reader.engine();
        Ok(ReaderPool { reader, engine })
    }

    /// Reads every value `fetch` wants, all in flight together, this
    /// task free meanwhile; the results in the order wanted.
    ///
    /// The reads go to the kernel after this thread's other ready
    /// connections have queued theirs: one `io_uring_enter`, and one
    /// doorbell to the device (a costly exit from the VM on a virtual
    /// disk), for the whole batch instead of one per read (the same
    /// yield as the log's group commit in `Connection::settle`). A
    /// profile of tiered GETs at ~90 % RAM hits had the doorbell at 5.8 %
    /// of the network threads' time with a submission per read.
    pub async fn read(&self, fetch: &ColdFetch) -> Vec<ReadResult> {
        /// Sends the batch even if this task is dropped while it waits.
        struct FlushOnDrop<'a>(&'a ColdReader);
        impl Drop for FlushOnDrop<'_> {
            fn drop(&mut self) {
                self.0.flush();
            }
        }
        let mut pending = Vec::with_capacity(fetch.len());
        fetch.submit_unflushed(&self.reader, |_| {
            let (reply, receive) = tokio::sync::oneshot::channel();
            pending.push(receive);
            Box::new(move |value| {
                let _ = reply.send(value);
            })
        });
        {
            let _flush = FlushOnDrop(&self.reader);
            tokio::task::yield_now().await;
        }
        let mut results = Vec::with_capacity(pending.len());
        for read in pending {
            results.push(
                read.await
                    .unwrap_or_else(|_| Err("reader thread stopped".into())),
            );
        }
        results
    }

    /// Gives the calling network thread its own io_uring for the cold
    /// reads its connections make, and serves its completions on the
    /// thread's runtime (no other thread involved). Where io_uring is not
    /// used, reads keep going to the reader threads.
    pub fn serve_thread_ring(&self) {
        let fd = match self.reader.start_thread_ring() {
            Ok(fd) => fd,
            Err(e) => {
                if self.engine == "io_uring" {
                    crate::log_warning!(
                        "No io_uring of its own for a network thread ({e}); its cold reads go to the reader thread"
                    );
                }
                return;
            }
        };
        // SAFETY: the eventfd belongs to this thread's ring, which lives
        // until the thread ends, after its runtime and this task are gone.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        };
        let watched = match registered {
            Ok(watched) => watched,
            Err(e) => {
                // Reads submitted here would never be reaped: stop.
                crate::log_warning!("Can't watch a network thread's io_uring: {e}");
                std::process::exit(1);
            }
        };
        tokio::spawn(async move {
            loop {
                let Ok(mut ready) = watched.readable().await else {
                    return;
                };
                // Cleared before reaping, so a completion that lands while
                // reaping signals again.
                ready.clear_ready();
                strata_engine::tiering::reader::reap_thread_ring();
            }
        });
    }

    /// Reads waiting for a place in a ring or for a reader thread.
    pub fn queued(&self) -> u64 {
        self.reader.queued()
    }
}

/// Per-second rates over the last [`RATE_WINDOW_MS`].
#[derive(Clone, Copy, Default)]
pub struct Rates {
    pub disk_reads: f64,
    pub promotions: f64,
    pub evictions: f64,
}

pub struct Tiering {
    pub readers: ReaderPool,
    /// Bytes of the data directory (log + checkpoint), refreshed by the
    /// cron.
    pub disk_used: AtomicU64,
    /// Keys deleted by Redis' eviction policies (INFO `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// Commands refused with -OOM.
    pub oom_rejections: AtomicU64,
    /// Writes let through over the budget because what was over was
    /// buffers, not data (`tiered`).
    pub over_budget_buffers: AtomicU64,
    /// Writers that waited for values about to leave RAM, and how long.
    pub eviction_waits: AtomicU64,
    pub eviction_wait_us: AtomicU64,
    samples: Mutex<VecDeque<Sample>>,
}

impl Tiering {
    pub fn start(tier: Arc<Tier>, threads: usize, use_uring: bool) -> std::io::Result<Tiering> {
        Ok(Tiering {
            readers: ReaderPool::start(tier, threads, use_uring)?,
            disk_used: AtomicU64::new(0),
            evicted_keys: AtomicU64::new(0),
            oom_rejections: AtomicU64::new(0),
            over_budget_buffers: AtomicU64::new(0),
            eviction_waits: AtomicU64::new(0),
            eviction_wait_us: AtomicU64::new(0),
            samples: Mutex::new(VecDeque::new()),
        })
    }

    /// Enforces the RAM and disk budgets before a command; the error to
    /// reply instead of running it, if any. The keys a key-deleting
    /// policy evicted are added to `deleted`.
    pub fn admit(
        &self,
        keyspace: &Keyspace,
        config: &Config,
        denyoom: bool,
        now_ms: u64,
        deleted: &mut Vec<Box<[u8]>>,
    ) -> Option<&'static str> {
        if denyoom && config.maxdisk > 0 && self.disk_used.load(Relaxed) >= config.maxdisk {
            self.oom_rejections.fetch_add(1, Relaxed);
            return Some(ERR_OOM_DISK);
        }
        if self.enforce_budget(keyspace, config, now_ms, true, deleted) {
            return None;
        }
        if denyoom {
            self.oom_rejections.fetch_add(1, Relaxed);
            return Some(ERR_OOM);
        }
        None
    }

    /// Whether a write would be refused now, without evicting anything
    /// (a script's `redis.call` holds shard locks and must not evict).
    pub fn refuses_writes(&self, keyspace: &Keyspace, config: &Config) -> Option<&'static str> {
        if config.maxdisk > 0 && self.disk_used.load(Relaxed) >= config.maxdisk {
            return Some(ERR_OOM_DISK);
        }
        let used = crate::alloc::used_bytes().saturating_sub(not_counted_for_evict(keyspace));
        (config.maxmemory > 0 && used > config.maxmemory).then_some(ERR_OOM)
    }

    /// Evicts under the policy while RAM use is over `maxmemory`. False
    /// when RAM is over the budget and nothing is left to evict (writes
    /// are then refused); true otherwise.
    fn enforce_budget(
        &self,
        keyspace: &Keyspace,
        config: &Config,
        now_ms: u64,
        may_wait: bool,
        deleted: &mut Vec<Box<[u8]>>,
    ) -> bool {
        if config.maxmemory == 0 {
            return true;
        }
        let used = crate::alloc::used_bytes();
        if used <= config.maxmemory {
            return true;
        }
        let mut used = used.saturating_sub(not_counted_for_evict(keyspace));
        if used <= config.maxmemory {
            return true;
        }
        // The log's spare buffers are only kept for reuse: they go before
        // any data does.
        if let Some(log) = keyspace.log()
            && log.buffer_bytes() > log.pending_bytes() as u64 + SPARE_BYTES_WORTH_FREEING
        {
            log.release_spare_buffers();
            used = crate::alloc::used_bytes().saturating_sub(not_counted_for_evict(keyspace));
            if used <= config.maxmemory {
                return true;
            }
        }
        if let Some(policy) = config.maxmemory_policy.eviction() {
            let evict = || {
                keyspace.evict(
                    policy,
                    used - config.maxmemory,
                    config.maxmemory_samples,
                    EVICTION_STEPS_MAX,
                    now_ms,
                )
            };
            let cycle = std::time::Instant::now();
            let mut done = evict();
            strata_engine::latency::sample("eviction-cycle", cycle.elapsed());
            if done.values + done.keys + done.images_written == 0
                && done.unwritten > 0
                && let Some(log) = keyspace.log()
            {
                // The values that could leave were written by commands
                // still in this batch: write the log now, then they can.
                log.flush_now();
                done = evict();
            }
            if done.keys > 0 {
                self.evicted_keys.fetch_add(done.keys, Relaxed);
                deleted.append(&mut done.deleted_keys);
            }
            let under = || {
                crate::alloc::used_bytes().saturating_sub(not_counted_for_evict(keyspace))
                    <= config.maxmemory
            };
            if done.progressed() || under() {
                return true;
            }
            // As Redis: refuse only when there is nothing left to evict.
            // Values whose log write is in flight, or lent to a command
            // about to run, leave in a moment: a writer waits for them, a
            // bounded time (a busy machine used to get -OOM here while
            // values could still go to disk), and then runs anyway (the
            // log's pending-bytes limit bounds how far RAM runs over).
            if done.pending() {
                if may_wait {
                    self.wait_for_eviction(keyspace, &evict, &under);
                }
                return true;
            }
            // Tiered: the budget is the data's (keys stay in RAM, values
            // go to disk). With no value left to move out, what is over is
            // the server's own buffers (clients', the log's, Lua's), bounded
            // by their own limits and drained as commands run: refusing
            // writes would not bring them down (a loaded machine's queued
            // requests got -OOM so). Only when the keys and the values in
            // RAM (the census, at most a few seconds old) pass the budget.
            if config.maxmemory_policy == MaxmemoryPolicy::Tiered {
                let census = keyspace.memory_census();
                if census.index_bytes + census.value_bytes <= config.maxmemory {
                    self.over_budget_buffers.fetch_add(1, Relaxed);
                    return true;
                }
            }
        }
        false
    }

    /// Waits (at most [`EVICTION_WAIT_MAX`]) for values that are about to
    /// be able to leave RAM, evicting them as they can, until RAM is under
    /// the budget or nothing is pending any more. Counted in INFO
    /// (`eviction_waits`, `eviction_wait_us`) and LATENCY (`eviction-wait`).
    fn wait_for_eviction(
        &self,
        keyspace: &Keyspace,
        evict: &dyn Fn() -> strata_engine::tiering::eviction::Evicted,
        under: &dyn Fn() -> bool,
    ) {
        let started = Instant::now();
        while started.elapsed() < EVICTION_WAIT_MAX {
            std::thread::yield_now();
            if let Some(log) = keyspace.log() {
                log.flush_now();
            }
            let done = evict();
            if under() || !done.pending() && !done.progressed() {
                break;
            }
        }
        let waited = started.elapsed();
        self.eviction_waits.fetch_add(1, Relaxed);
        self.eviction_wait_us
            .fetch_add(waited.as_micros() as u64, Relaxed);
        strata_engine::latency::sample("eviction-wait", waited);
    }

    /// The cron's part: disk use, whether commits locate values, the RAM
    /// budget when no command enforces it (after loading, after CONFIG SET
    /// maxmemory, while clients are idle), rates.
    pub fn tick(&self, keyspace: &Keyspace, config: &Config, persistence: &Persistence) {
        if config.maxmemory > 0 && !persistence.is_loading() {
            let counted =
                || crate::alloc::used_bytes().saturating_sub(not_counted_for_evict(keyspace));
            for _ in 0..CRON_EVICTION_ROUNDS_MAX {
                let before = counted();
                if before <= config.maxmemory {
                    break;
                }
                // Stop at the first round that frees nothing (nothing left
                // to evict, or images still being written): each round
                // visits every shard, and the next tick tries again.
                // Keys deleted here reach tracking clients through the
                // feed (`crate::events::tracking`), as other background deletes.
                let evictable = self.enforce_budget(
                    keyspace,
                    config,
                    crate::util::now_ms(),
                    false,
                    &mut Vec::new(),
                );
                if !evictable || counted() >= before {
                    break;
                }
            }
        }
        let log = keyspace.log();
        let disk =
            log.map_or(0, |log| log.disk_bytes()) + persistence.last_checkpoint_bytes.load(Relaxed);
        self.disk_used.store(disk, Relaxed);
        let tiered = log.is_some()
            && config.maxmemory > 0
            && config.maxmemory_policy == MaxmemoryPolicy::Tiered;
        keyspace.tier().set_tracking(tiered);
        keyspace.note_log_written();
        let stats = &keyspace.tier().stats;
        let sample = Sample {
            at: Instant::now(),
            disk_reads: stats.disk_reads.load(Relaxed),
            promotions: stats.promotions.load(Relaxed),
            evictions: stats.evictions.load(Relaxed),
        };
        let mut samples = self.samples.lock();
        samples.push_back(sample);
        while samples
            .front()
            .is_some_and(|s| sample.at.duration_since(s.at).as_millis() > RATE_WINDOW_MS)
        {
            samples.pop_front();
        }
    }

    pub fn rates(&self) -> Rates {
        let samples = self.samples.lock();
        let (Some(first), Some(last)) = (samples.front(), samples.back()) else {
            return Rates::default();
        };
        let seconds = last.at.duration_since(first.at).as_secs_f64();
        if seconds <= 0.0 {
            return Rates::default();
        }
        Rates {
            disk_reads: (last.disk_reads - first.disk_reads) as f64 / seconds,
            promotions: (last.promotions - first.promotions) as f64 / seconds,
            evictions: (last.evictions - first.evictions) as f64 / seconds,
        }
    }
}
