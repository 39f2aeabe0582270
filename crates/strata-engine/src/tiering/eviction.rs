//! Tiering and eviction: reading cold values in and letting them go again,
//! and choosing what leaves RAM (values under `tiered`, keys under Redis'
//! policies) by sampling shards. See `docs/tiering.md`.

use std::sync::atomic::Ordering::Relaxed;

use crate::keyspace::entry::{FETCHED, PROMOTE_WINDOW_S, SEEN, TRANSIENT, VOLATILE, log_image};
use crate::keyspace::key::{KeyRef, SHARD_COUNT};
use crate::keyspace::shard::{Shard, forget_deadline, log_del_for, unlink};
use crate::keyspace::shards::Keyspace;
use crate::random::random_u64;
use crate::tiering::location::ColdLocation;
use crate::tiering::tier::{self, NO_LOC};

/// Which entries an eviction step may pick, and how it ranks them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Move values to disk, keep every key (`tiered`).
    Values,
    /// Delete keys, as Redis' `allkeys-*` / `volatile-*` policies.
    Keys { volatile_only: bool, rank: KeyRank },
}

/// How a key-deleting policy ranks its sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRank {
    /// Least recently used first (`lru`).
    Idle,
    /// Least frequently used first (`lfu`: the decayed access counter,
    /// see [`crate::keyspace::access`]).
    Rare,
    Random,
    /// Nearest deadline first (`volatile-ttl`).
    Ttl,
}

/// What eviction did.
#[derive(Clone, Debug, Default)]
pub struct Evicted {
    /// The keys deleted (under a key-deleting policy), for client-side
    /// caching to invalidate before the command that made room runs.
    pub deleted_keys: Vec<Box<[u8]>>,
    /// Values moved out of RAM.
    pub values: u64,
    /// Keys deleted.
    pub keys: u64,
    /// Bytes of RAM released (approximate: allocation sizes).
    pub bytes: u64,
    /// Dirty values whose image was appended so they can leave next time.
    pub images_written: u64,
    /// Candidates passed over because their image is committed but not yet
    /// written to its segment (they can leave once the log is written).
    pub unwritten: u64,
    /// Candidates passed over because they are lent to a command about to
    /// run (read from disk for it): they leave RAM right after it.
    pub transient: u64,
    /// Buckets of the keyspace's tables looked at.
    pub swept: u64,
}

impl Evicted {
    /// Whether anything left RAM (or was made ready to).
    pub fn progressed(&self) -> bool {
        self.values + self.keys + self.images_written > 0
    }

    /// Whether values were found that can leave RAM in a moment (their
    /// log write or their command pending).
    pub fn pending(&self) -> bool {
        self.unwritten + self.transient > 0
    }
}

/// Outcome of putting a value read from disk back into its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Installed {
    /// Kept in RAM: it is being read often.
    Promoted,
    /// In RAM for the coming command; [`Shard::release_lent`]
    /// takes it out again.
    Transient,
    /// The entry changed meanwhile (written, deleted, read in by another
    /// connection): nothing to do.
    Stale,
}

/// Shards whose samples one eviction step pools, so the oldest values of
/// several shards are compared (a shard alone may hold only fresh ones).
pub(crate) const EVICTION_WINDOW_SHARDS: usize = 8;
/// Buckets a sample sweeps at most per candidate it wants (empty
/// buckets and cold entries are passed over).
const SWEEP_PROBES_PER_SAMPLE: usize = 32;
/// Windows of only just-touched values one eviction call passes over
/// before taking from them (approximate LRU with a one-second clock).
pub(crate) const FRESH_WINDOWS_PASSED_MAX: usize = 8;

/// Tiering and eviction.
impl Keyspace {
    /// The location of `key`'s value when it is only on disk.
    pub(crate) fn cold_loc(&self, db: usize, key: KeyRef, now_ms: u64) -> Option<ColdLocation> {
        self.lock(key)
            .peek(db, key, now_ms)?
            .cold_loc()
            .map(ColdLocation)
    }

    /// Frees about `want_bytes` of RAM under `policy`: visits shards in
    /// order from a random one, sampling `samples` entries of each and
    /// evicting the best, until enough is freed, `steps_max` entries were
    /// evicted, or every shard was visited once (so "nothing evicted"
    /// means there is nothing to evict, even when candidates are rare).
    pub fn evict(
        &self,
        policy: EvictionPolicy,
        want_bytes: u64,
        samples: usize,
        steps_max: usize,
        now_ms: u64,
    ) -> Evicted {
        let mut done = Evicted::default();
        let written_pos = match (policy, self.log()) {
            (EvictionPolicy::Values, Some(log)) => log.written_pos(),
            (EvictionPolicy::Values, None) => return done,
            (EvictionPolicy::Keys { .. }, _) => 0,
        };
        let start = random_u64() as usize;
        let mut pool = Vec::new();
        // A second pass takes just-touched values too, if the first passed
        // over some and did not free enough.
        for fresh_allowed in [false, true] {
            let mut fresh_windows = 0;
            let mut passed_over = false;
            for window in (0..SHARD_COUNT).step_by(EVICTION_WINDOW_SHARDS) {
                if done.bytes >= want_bytes
                    || (done.values + done.keys + done.images_written) as usize >= steps_max
                {
                    break;
                }
                let deletes = matches!(policy, EvictionPolicy::Keys { .. });
                let mut indices: Vec<usize> = (window..window + EVICTION_WINDOW_SHARDS)
                    .map(|i| (start + i) % SHARD_COUNT)
                    .filter(|&i| match policy {
                        EvictionPolicy::Values => !self.nothing_to_move(i, written_pos, &mut done),
                        EvictionPolicy::Keys { volatile_only, .. } => {
                            !(volatile_only && self.hints[i].no_volatile.load(Relaxed))
                        }
                    })
                    .collect();
                if indices.is_empty() {
                    continue;
                }
                indices.sort_unstable();
                let mut set = self.lock_indices_for_eviction(indices, deletes);
                pool.clear();
                for position in 0..set.len() {
                    let before = pool.len();
                    let until = set.shard_at(position).sample(
                        policy,
                        samples,
                        written_pos,
                        now_ms,
                        &mut done,
                        &mut pool,
                    );
                    // Under the lock, and nothing of the shard is in the pool.
                    let hints = &self.hints[set.index_at(position)];
                    if let Some(until) = until {
                        hints.eviction.store(until, Relaxed);
                    }
                    if let EvictionPolicy::Keys {
                        volatile_only: true,
                        ..
                    } = policy
                        && set.shard_at(position).holds_no_deadline()
                    {
                        hints.no_volatile.store(true, Relaxed);
                    }
                    for candidate in &mut pool[before..] {
                        // Remember the shard in the spare high bits of db.
                        candidate.1 |= position << 32;
                    }
                }
                if pool.is_empty() {
                    continue;
                }
                // Samples are drawn with replacement: an entry drawn twice
                // must count (and be evicted) once.
                pool.sort_unstable_by_key(|&(score, tagged, bucket)| {
                    (std::cmp::Reverse(score), tagged, bucket)
                });
                pool.dedup();
                // Values: up to half the pool leaves (finding hot values among
                // mostly cold ones is the cost; moving one out is cheap), but
                // only those older than the pool's youngest unless all are
                // equally old. Keys: one per window, as Redis deletes its best
                // candidate.
                // A window holding only values touched this second is passed
                // over while older ones may exist elsewhere (a few windows).
                let leaving = match policy {
                    EvictionPolicy::Values => {
                        let youngest = pool[pool.len() - 1].0;
                        let older = pool.iter().take_while(|c| c.0 > youngest).count();
                        match older {
                            0 if youngest == 0
                                && !fresh_allowed
                                && fresh_windows < FRESH_WINDOWS_PASSED_MAX =>
                            {
                                fresh_windows += 1;
                                passed_over = true;
                                0
                            }
                            0 => pool.len().div_ceil(2),
                            n => n.min(pool.len().div_ceil(2)),
                        }
                    }
                    EvictionPolicy::Keys { .. } => 1,
                };
                for &(_, tagged, bucket) in &pool[..leaving] {
                    let (position, db) = (tagged >> 32, tagged & u32::MAX as usize);
                    set.shard_at(position)
                        .evict_at(policy, db, bucket, &mut done);
                }
            }
            let enough = done.bytes >= want_bytes
                || (done.values + done.keys + done.images_written) as usize >= steps_max;
            if enough || !passed_over {
                break;
            }
        }
        done
    }

    /// Whether shard `index`'s hint says it has no value that can leave RAM
    /// with the log written up to `written_pos` (read without its lock: a
    /// shard changed meanwhile is looked at next time, as any shard a
    /// sample did not reach). Its values waiting for the log count as
    /// pending.
    fn nothing_to_move(&self, index: usize, written_pos: u64, done: &mut Evicted) -> bool {
        let until = self.hints[index].eviction.load(Relaxed);
        if until == 0 || written_pos > until {
            return false;
        }
        if until != u64::MAX {
            done.unwritten += 1;
        }
        true
    }

    /// Moves values whose image is on disk out of RAM, without logging
    /// (recovery, when the replayed data passes the RAM budget).
    pub(crate) fn evict_loaded(&self, want_bytes: u64, samples: usize, now_ms: u64) -> u64 {
        let mut done = Evicted::default();
        let start = random_u64() as usize;
        let mut pool = Vec::new();
        for step in 0..SHARD_COUNT {
            if done.bytes >= want_bytes {
                break;
            }
            let mut shard = self.lock_unlogged((start + step) % SHARD_COUNT);
            pool.clear();
            shard.sample(
                EvictionPolicy::Values,
                samples,
                u64::MAX,
                now_ms,
                &mut done,
                &mut pool,
            );
            pool.sort_unstable_by_key(|&(score, db, bucket)| {
                (std::cmp::Reverse(score), db, bucket)
            });
            pool.dedup();
            for &(_, db, bucket) in &pool[..pool.len().div_ceil(2)] {
                shard.evict_at(EvictionPolicy::Values, db, bucket, &mut done);
            }
        }
        done.bytes
    }
}

impl Shard {
    /// Samples eviction candidates of a random non-empty database: up to
    /// `samples` (a small table is looked at whole), as (score, db,
    /// bucket); the higher the score, the sooner it should go. Moving
    /// values out (`policy` Values), it returns the shard's
    /// [`ShardHints::eviction`](crate::keyspace::shards::ShardHints) when it has
    /// nothing to move until the log is written further.
    pub(crate) fn sample(
        &mut self,
        policy: EvictionPolicy,
        samples: usize,
        written_pos: u64,
        now_ms: u64,
        done: &mut Evicted,
        out: &mut Vec<(u64, usize, usize)>,
    ) -> Option<u64> {
        // Under a volatile-* policy only tables with keys that have a
        // deadline hold candidates.
        let volatile_only = matches!(
            policy,
            EvictionPolicy::Keys {
                volatile_only: true,
                ..
            }
        );
        let eligible = |t: &crate::keyspace::table::Table| match volatile_only {
            true => t.expiring.len() > 0,
            false => !t.entries.is_empty(),
        };
        let count = self.tables.iter().filter(|t| eligible(t)).count();
        if count > 0 {
            let nth = (random_u64() as usize) % count;
            let db = self
                .tables
                .iter()
                .enumerate()
                .filter(|(_, t)| eligible(t))
                .nth(nth)
                .map(|(db, _)| db)
                .expect("counted");
            self.sample_table(db, policy, samples, written_pos, now_ms, done, out);
        }
        (policy == EvictionPolicy::Values)
            .then(|| self.nothing_to_move_until())
            .flatten()
    }

    /// Whether no key here has a deadline (nothing for a `volatile-*`
    /// policy to evict).
    pub(crate) fn holds_no_deadline(&self) -> bool {
        self.tables.iter().all(|t| t.expiring.len() == 0)
    }

    /// The shard's eviction hint: when every table was swept whole since
    /// the shard last changed ([`FruitlessRun`](crate::keyspace::table::FruitlessRun))
    /// and holds no value lent to a command, the lowest log position of a
    /// value waiting for its log write (`u64::MAX`: none).
    fn nothing_to_move_until(&self) -> Option<u64> {
        let mut until = u64::MAX;
        for table in self.tables.iter().filter(|t| !t.entries.is_empty()) {
            let run = &table.fruitless;
            if run.touched != self.touched
                || run.covered < table.entries.num_buckets()
                || run.transient > 0
            {
                return None;
            }
            until = until.min(run.first_unwritten);
        }
        Some(until)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "sample's, and the table it picked"
    )]
    fn sample_table(
        &mut self,
        db: usize,
        policy: EvictionPolicy,
        samples: usize,
        written_pos: u64,
        now_ms: u64,
        done: &mut Evicted,
        out: &mut Vec<(u64, usize, usize)>,
    ) {
        let touched = self.touched;
        let table = &mut self.tables[db];
        let buckets = table.entries.num_buckets();
        let values = policy == EvictionPolicy::Values;
        if values && table.fruitless.holds(touched, buckets, written_pos) {
            // Swept whole since it last changed, with nothing to move out
            // until the log is written further or the shard changes.
            done.unwritten += table.fruitless.unwritten;
            done.transient += table.fruitless.transient;
            return;
        }
        let mut passed = crate::keyspace::table::FruitlessRun::NONE;
        let found_before = out.len();
        let samples = samples.max(1);
        let mut seen = 0;
        let whole = buckets <= 64;
        // The sample is the next `samples` candidates in bucket order from
        // where the last one stopped: slots are in hash order, so that is
        // as random as probing at random, and a sweep reads neighbouring
        // slots (8 to a cache line) instead of one line per probe. Cold
        // entries are passed over on their pointer's tag alone.
        let first = table.sweep.load(Relaxed);
        let probes = if whole {
            buckets
        } else {
            (samples * SWEEP_PROBES_PER_SAMPLE).min(buckets)
        };
        let mut probed = 0;
        for probe in 0..probes {
            if seen == samples && !whole {
                break;
            }
            probed = probe + 1;
            let index = (first + probe) % buckets;
            let Some(entry) = table.entries.get_bucket(index) else {
                continue;
            };
            let score = match policy {
                EvictionPolicy::Values => {
                    if entry.is_cold() {
                        continue;
                    }
                    if entry.loc_raw() != NO_LOC && entry.loc_raw() >= written_pos {
                        passed.unwritten += 1;
                        passed.first_unwritten = passed.first_unwritten.min(entry.loc_raw());
                        continue;
                    }
                    if entry.has(TRANSIENT) {
                        // Lent to a command about to run (its connection
                        // read it for that command, off the locks): taking
                        // it now would make that command read the disk
                        // under its lock. It leaves RAM right after the
                        // command (`Shard::release_lent`).
                        passed.transient += 1;
                        continue;
                    }
                    entry.idle_s(now_ms)
                }
                EvictionPolicy::Keys {
                    volatile_only,
                    rank,
                } => {
                    if volatile_only && !entry.has(VOLATILE) {
                        continue;
                    }
                    match rank {
                        KeyRank::Idle => entry.idle_s(now_ms),
                        KeyRank::Rare => u8::MAX as u64 - entry.frequency(now_ms) as u64,
                        KeyRank::Random => random_u64(),
                        KeyRank::Ttl => u64::MAX - entry.deadline(),
                    }
                }
            };
            seen += 1;
            out.push((score, db, index));
        }
        table.sweep.store((first + probed) % buckets, Relaxed);
        done.swept += probed as u64;
        done.unwritten += passed.unwritten;
        done.transient += passed.transient;
        if values {
            let found = out.len() > found_before;
            table.fruitless.extend(touched, probed, found, &passed);
        }
    }

    /// Evicts the entry in `bucket` of `db`'s table (sampled under this
    /// same lock hold).
    pub(crate) fn evict_at(
        &mut self,
        policy: EvictionPolicy,
        db: usize,
        bucket: usize,
        done: &mut Evicted,
    ) {
        // Eviction's lock does not mark the shard changed (a sweep that
        // finds nothing must not undo its own `FruitlessRun`): what it
        // evicts does.
        self.touched = self.touched.wrapping_add(1);
        let table = &mut self.tables[db];
        match policy {
            EvictionPolicy::Values => {
                let entry = table.entries.get_bucket_mut(bucket).expect("sampled");
                if entry.is_cold() {
                    // Sampled twice (samples are drawn with replacement)
                    // and already evicted by the first draw.
                    return;
                }
                if entry.loc_raw() == NO_LOC {
                    // Dirty: its image goes to the log now; the commit
                    // locates it, and a later step can drop it.
                    log_image(&mut self.group, db, entry);
                    done.images_written += 1;
                    self.tier.stats.eviction_writes.fetch_add(1, Relaxed);
                    return;
                }
                done.bytes += entry.drop_value() as u64;
                done.values += 1;
                self.tier.stats.cold_keys.fetch_add(1, Relaxed);
                self.tier.stats.evictions.fetch_add(1, Relaxed);
            }
            EvictionPolicy::Keys { .. } => {
                // Gone already if it was sampled twice.
                let Some(entry) = table.entries.get_bucket_entry(bucket) else {
                    return;
                };
                let mut entry = entry.remove();
                forget_deadline(&mut table.expiring, &entry);
                unlink(&mut self.live, &self.tier, &mut entry);
                // Eviction runs in the background, never inside a command.
                let cause =
                    crate::storage::record::FLAG_EVICTED | crate::storage::record::FLAG_BACKGROUND;
                log_del_for(&mut self.group, cause, db, entry.key());
                done.bytes += entry.memory_bytes() as u64;
                done.keys += 1;
                done.deleted_keys.push(entry.key().into());
            }
        }
    }
}

/// Values read from disk going back into their entries.
impl Shard {
    /// Puts a value read from `loc` back into `key`'s entry if it is still
    /// cold there. A value read twice within [`PROMOTE_WINDOW_S`] stays;
    /// otherwise it is only lent to the coming command, so a scan does not
    /// push the hot set out.
    pub(crate) fn install_read(
        &mut self,
        db: usize,
        key: KeyRef,
        loc: ColdLocation,
        value: &tier::ColdValue,
        now_ms: u64,
    ) -> Installed {
        let ColdLocation(loc) = loc;
        let tracking = self.tier.tracking();
        let limits = self.hash_limits.get();
        let Some(entry) = self.peek(db, key, now_ms) else {
            return Installed::Stale;
        };
        if entry.cold_loc() != Some(loc) {
            return Installed::Stale;
        }
        // Without a RAM budget every value read stays; under one, a value
        // read twice within the window does (a scan does not push the hot
        // set out).
        let promote =
            !tracking || (entry.has(SEEN) && entry.idle_s(now_ms) <= PROMOTE_WINDOW_S as u64);
        if entry.install(&value.bytes, value.int, limits).is_err() {
            // A damaged image: the value stays cold, and the command's own
            // read reports the damage.
            return Installed::Stale;
        }
        entry.touch(now_ms);
        entry.set_flag(FETCHED, true);
        entry.set_flag(SEEN, !promote);
        entry.set_flag(TRANSIENT, !promote);
        self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
        if promote {
            self.tier.stats.promotions.fetch_add(1, Relaxed);
            Installed::Promoted
        } else {
            Installed::Transient
        }
    }

    /// Takes a value lent by [`Shard::install_read`] out of RAM again, if
    /// nothing changed it since. Until then eviction leaves it alone, so
    /// the command it was read for finds it in RAM.
    pub(crate) fn release_lent(&mut self, db: usize, key: KeyRef, loc: ColdLocation, now_ms: u64) {
        let ColdLocation(loc) = loc;
        let mut dropped = false;
        if let Some(entry) = self.peek(db, key, now_ms)
            && entry.has(TRANSIENT)
            && !entry.is_cold()
        {
            if entry.loc_raw() == loc {
                entry.drop_value();
                dropped = true;
            } else {
                // Its record moved meanwhile (compaction): it stays, as
                // any value in RAM, no longer lent (eviction skips lent
                // values).
                entry.set_flag(TRANSIENT, false);
            }
        }
        if dropped {
            self.tier.stats.cold_keys.fetch_add(1, Relaxed);
        }
    }
}
