//! The sharded keyspace: [`Keyspace`] and what it does across shards
//! (locking in order, database-level changes, SCAN and KEYS, statistics,
//! the census). One shard's own work is in `shard`, an entry's in `entry`,
//! lock guards in `guard`, tiering and eviction in `eviction`, a key's hash
//! in `key`; their public types are re-exported here.
//!
//! A key's 64-bit hash (foldhash, seeded randomly per data directory
//! against hash flooding) picks its shard by its top [`SHARD_BITS`] bits and its
//! slot inside the shard's table. A [`Shard`] holds one table per database,
//! so a key and its namesakes in other databases share one lock: MOVE and
//! COPY … DB take a single lock, and SWAPDB/FLUSHALL take every shard in
//! ascending order, which makes them atomic to every other command.
//!
//! Expiry: each table keeps an index of its volatile keys ordered by
//! deadline. Reads delete an expired key they meet (lazy expiry), and
//! [`Keyspace::active_expire_cycle`] pops due deadlines from the front of
//! each index with a per-shard bound, so an expired key is reclaimed without
//! being read, deterministically rather than by sampling.
//!
//! Memory: a shard allocates the tables of databases only once they are
//! written; tables that deletions leave below 1/8 full shrink (hashbrown
//! never shrinks by itself), emptied ones are freed; and a census
//! ([`Keyspace::census_step`]) counts the index and the values in RAM for
//! INFO, a bounded number of entries per call.
//!
//! SCAN walks the keyspace in hash order: the cursor is the next hash value
//! to visit. A key's hash never changes, so every key present for a whole
//! iteration is returned exactly once, however tables grow or shrink.
//!
//! The entry is kept small and its value private to this module's API: a
//! value is in RAM, on disk only (a location in the log), or both, and
//! command code sees only values in RAM ([`Shard::get`] reads a cold one
//! in). Eviction, promotion and locations are described in
//! `docs/tiering.md` and the `tier` module.
//!
//! Logging: every method that changes an entry appends the change's record
//! (a full SET image, DEL, EXPIRE, or a database-level record) to the log
//! group of the lock set that handed the shard out (`storage::group`: the
//! group is lent to the shard's `group` slot), and the lock sets
//! ([`ShardGuard`], [`ShardSet`]) commit that group when they drop, before
//! unlocking. So no
//! command can change data without logging it, and a multi-key command's
//! records are one all-or-nothing group. Recovery and checkpoints lock
//! shards without a group (`lock_unlogged`) and log nothing. The hash seed
//! is fixed per data directory (kept in checkpoints) so a key's shard
//! survives restarts.

use crate::keyspace::commit::Commit;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};

use crate::feed::{Feed, Subscription};
use crate::glob;
use crate::keyspace::shard::log_db_change;
use crate::storage::group::Group;
use crate::storage::log::{Log, Sink};
use crate::storage::record::Kind;
use crate::tiering::tier::Tier;

pub use crate::keyspace::entry::{Entry, EntryMut};
use crate::keyspace::guard::Held;
pub use crate::keyspace::guard::Locked;
pub use crate::keyspace::guard::{ShardGuard, ShardSet};
pub(crate) use crate::keyspace::key::KeyHasher;
pub(crate) use crate::keyspace::key::SHARD_BITS;
pub use crate::keyspace::key::{KeyRef, SHARD_COUNT};
pub use crate::keyspace::key::{SLOT_COUNT, Sharding, key_slot};
pub use crate::keyspace::shard::{ColdReadError, Flushed, GetError, MemoryCensus, Shard};
pub use crate::keyspace::thin::set_size_class;
use crate::random::random_seed;
pub use crate::random::random_u64;
pub use crate::types::hash::FieldChange;
use crate::types::hash::SharedLimits;

/// Width of one shard's range of hash values.
const SHARD_HASH_WIDTH: u128 = 1 << (64 - SHARD_BITS);
/// Upper bound on table entries one SCAN call examines, beyond what COUNT
/// asks for, so a sparse keyspace is crossed in few calls but no call runs
/// long.
const SCAN_EXAMINED_PER_CALL_MIN: usize = 4096;

/// One database's figures for INFO keyspace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    pub keys: usize,
    /// Keys with a deadline.
    pub expires: usize,
    /// Mean remaining time to live of those keys.
    pub avg_ttl_ms: u64,
}

use crate::keyspace::guard::count_shard_lock;
pub use crate::keyspace::guard::shard_locks_taken;

/// All databases, sharded.
pub struct Keyspace {
    pub(crate) shards: Box<[Mutex<Shard>]>,
    pub(crate) tier: Arc<Tier>,
    pub(crate) hasher: KeyHasher,
    /// The hash seed: secret, random per data directory, and kept in
    /// checkpoints so a key lands in the same shard after a restart.
    pub(crate) seed: u64,
    pub(crate) db_count: usize,
    /// Where cold values go: the log of changes (`appendonly yes`), or the
    /// cache store (`appendonly no`, see [`tier::CACHE_SEGMENT_BASE`]).
    pub(crate) log: OnceLock<Arc<Log>>,
    /// False when `log` is the cache store: commands then log nothing;
    /// only eviction and compaction append (value images).
    pub(crate) changes_logged: std::sync::atomic::AtomicBool,
    /// The shard the next [`Keyspace::census_step`] counts.
    pub(crate) census_cursor: std::sync::atomic::AtomicUsize,
    /// Per shard: what active expiry and eviction need not look at, read
    /// without its lock ([`ShardHints`]).
    pub(crate) hints: Box<[ShardHints]>,
    /// Every committed group of changes, to subscribers.
    pub(crate) feed: Feed,
    /// When hashes convert from packed to table.
    pub(crate) hash_limits: Arc<SharedLimits>,
}

/// What a shard holds nothing for, so that a cycle over all 1 024 shards
/// can pass it over without taking its lock. Each is set under the
/// shard's lock by the one that looked, and cleared (0: look) by any
/// other lock of the shard ([`Keyspace::take_shard`]). A shard's hints
/// share a cache line, read by every lock that may change the shard.
#[derive(Default)]
#[repr(align(32))]
pub(crate) struct ShardHints {
    /// Until when (Unix ms) active expiry has nothing to do there: an idle
    /// server's expiry cycle reads these and takes no lock.
    pub(crate) expiry: std::sync::atomic::AtomicU64,
    /// Under `tiered`: the log position up to which (inclusive) the log
    /// may be written with still no value there able to leave RAM (every
    /// value in RAM waits for its log write, none is lent to a command;
    /// `u64::MAX`: none in RAM at all). A budget the keys nearly fill
    /// leaves only such values in RAM, and eviction used to lock and sweep
    /// every shard on every write to find that out (`docs/tiering.md`).
    pub(crate) eviction: std::sync::atomic::AtomicU64,
    /// Under a `volatile-*` policy: the shard holds no key with a
    /// deadline. Over the budget with none anywhere, every command used to
    /// lock and sweep all 1 024 shards (GETs at 343/s instead of 87 000/s).
    pub(crate) no_volatile: std::sync::atomic::AtomicBool,
}

use crate::keyspace::shard::expiry_paused;
pub use crate::keyspace::shard::pause_expiry_until;

/// The metadata items as [`Keyspace::update_metas_in`] shows them.
#[derive(Clone, Copy)]
pub struct Metas<'a>(&'a std::collections::BTreeMap<Vec<u8>, Vec<u8>>);

impl<'a> Metas<'a> {
    /// The item called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.0.get(name).map(Vec::as_slice)
    }

    /// The items whose names start with `prefix` (name, image), in name
    /// order.
    pub fn with_prefix<'p>(
        &self,
        prefix: &'p [u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + use<'a, 'p> {
        (self.0.range(prefix.to_vec()..))
            .map(|(name, image)| (name.as_slice(), image.as_slice()))
            .take_while(move |(name, _)| name.starts_with(prefix))
    }
}

impl Keyspace {
    /// A new data directory's keyspace: a fresh random hash seed, shards
    /// by cluster slot.
    pub fn new(db_count: usize) -> Self {
        Self::with_seed(db_count, random_seed(), Sharding::Slots)
    }

    /// The keyspace of an existing data directory: its checkpoints' seed
    /// and sharding.
    pub fn with_seed(db_count: usize, seed: u64, sharding: Sharding) -> Self {
        assert!(db_count > 0, "at least one database");
        let hasher = KeyHasher::new(seed, sharding);
        let tier = Arc::new(Tier::default());
        let hash_limits = Arc::new(SharedLimits::default());
        Keyspace {
            shards: (0..SHARD_COUNT)
                .map(|_| {
                    Mutex::new(Shard::new(
                        db_count,
                        hasher.clone(),
                        tier.clone(),
                        hash_limits.clone(),
                    ))
                })
                .collect(),
            hash_limits,
            tier,
            hasher,
            seed,
            db_count,
            log: OnceLock::new(),
            changes_logged: std::sync::atomic::AtomicBool::new(true),
            census_cursor: std::sync::atomic::AtomicUsize::new(0),
            hints: (0..SHARD_COUNT).map(|_| ShardHints::default()).collect(),
            feed: Feed::default(),
        }
    }

    /// When hashes convert from the packed encoding to a table
    /// (`hash-max-listpack-entries`, `hash-max-listpack-value`).
    pub fn hash_limits(&self) -> &SharedLimits {
        &self.hash_limits
    }

    /// How keys map to shards in this data directory.
    pub fn sharding(&self) -> Sharding {
        self.hasher.sharding()
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// From now on every change is logged to `log`. Set once, after
    /// recovery has replayed the existing log.
    pub(crate) fn attach_log(&self, log: Arc<Log>) {
        self.tier.set_log_dir(log.dir());
        // Checkpoints name big values by their location in the log.
        self.tier.set_locating_big(true);
        assert!(self.log.set(log).is_ok(), "log attached twice");
    }

    /// Attaches the cache store instead of a log (`appendonly no`): from
    /// now on values can leave RAM into `store`, whose records are never
    /// replayed; commands log nothing.
    pub(crate) fn attach_cache_store(&self, store: Arc<Log>) {
        self.tier.set_cache_dir(store.dir());
        self.changes_logged.store(false, Relaxed);
        assert!(self.log.set(store).is_ok(), "log attached twice");
    }

    /// The log of changes, when there is one (`appendonly yes`).
    pub fn change_log(&self) -> Option<&Arc<Log>> {
        self.log.get().filter(|_| self.changes_logged.load(Relaxed))
    }

    pub fn tier(&self) -> &Arc<Tier> {
        &self.tier
    }

    /// Where cold values go and are read from: the log of changes or the
    /// cache store ([`Keyspace::change_log`] tells which).
    pub fn log(&self) -> Option<&Arc<Log>> {
        self.log.get()
    }

    /// A group for a command's changes: their records go to the log and
    /// the change feed when either takes them, and the keys changed come
    /// back from the commit ([`crate::keyspace::commit::Commit`]).
    pub(crate) fn open_group(&self) -> (Sink<'_>, Box<Group>) {
        let sink = Sink {
            log: self.change_log().map(|log| &**log),
            feed: Some(&self.feed).filter(|feed| feed.is_active()),
        };
        let group = Group::open(&sink, true);
        (sink, group)
    }

    /// A group for value images that let values leave RAM (eviction,
    /// compaction): into the log or the cache store, never to the change
    /// feed, not listed as changes (no data changes).
    pub(crate) fn open_tier_group(&self) -> (Sink<'_>, Box<Group>) {
        let sink = Sink {
            log: self.log.get().map(|log| &**log),
            feed: None,
        };
        let group = Group::open(&sink, false);
        (sink, group)
    }

    /// Subscribes to the change feed (see [`crate::feed`]): every group of
    /// changes committed from now on, `capacity` of them queued at most.
    pub fn subscribe(&self, capacity: usize) -> Subscription {
        self.feed.subscribe(capacity)
    }

    /// Subscribes to every group committed from now on with its records
    /// (replication; see [`crate::keyspace::copy`]), up to `bytes_max` bytes waiting.
    pub fn subscribe_records(&self, bytes_max: usize) -> Subscription {
        self.feed.subscribe_records(bytes_max)
    }

    /// Shard `index`'s lock, taken and counted ([`shard_locks_taken`]),
    /// for whatever may change the shard: its census, active expiry and eviction
    /// then look at it again ([`Shard::touched`], `ShardHints`).
    fn take_shard(&self, index: usize) -> MutexGuard<'_, Shard> {
        let mut shard = self.peek_shard(index);
        self.touch(index, &mut shard);
        shard
    }

    /// Notes that shard `index`, locked, may change.
    fn touch(&self, index: usize, shard: &mut Shard) {
        shard.touched = shard.touched.wrapping_add(1);
        let hints = &self.hints[index];
        for hint in [&hints.expiry, &hints.eviction] {
            if hint.load(Relaxed) != 0 {
                hint.store(0, Relaxed);
            }
        }
        if hints.no_volatile.load(Relaxed) {
            hints.no_volatile.store(false, Relaxed);
        }
    }

    /// Shard `index`'s lock for reading it (statistics, the census) or for
    /// active expiry (which bumps `touched` itself when it changes it): an
    /// idle server's census then skips every shard.
    fn peek_shard(&self, index: usize) -> MutexGuard<'_, Shard> {
        count_shard_lock();
        self.shards[index].lock()
    }

    /// Locks shard `index` without logging (recovery, checkpoints, stats).
    pub(crate) fn lock_unlogged(&self, index: usize) -> MutexGuard<'_, Shard> {
        self.take_shard(index)
    }

    pub(crate) fn lock_index(&self, index: usize) -> ShardGuard<'_> {
        ShardGuard::new(self.take_shard(index), self.open_group(), index)
    }

    pub fn db_count(&self) -> usize {
        self.db_count
    }

    pub fn key<'k>(&self, bytes: &'k [u8]) -> KeyRef<'k> {
        KeyRef {
            bytes,
            hash: self.hasher.hash(bytes),
        }
    }

    /// Locks the shard that holds `key`.
    pub fn lock(&self, key: KeyRef) -> ShardGuard<'_> {
        self.lock_index(key.shard())
    }

    /// Nothing locked yet (see [`Locked`]).
    pub fn lock_nothing(&self) -> Locked<'_> {
        Locked::new(self, Held::Nothing, &[])
    }

    /// Locks the shards of a command's `keys` (see [`Locked`]): none, one,
    /// or several in ascending order.
    pub fn lock_keys<'k>(&self, keys: &[KeyRef<'k>]) -> Locked<'_> {
        let held = match keys {
            [] => Held::Nothing,
            [first, rest @ ..] if rest.iter().all(|k| k.shard() == first.shard()) => {
                Held::One(self.lock(*first))
            }
            _ => Held::Many(self.lock_many(keys.iter().copied())),
        };
        Locked::new(self, held, keys)
    }

    /// Locks a transaction's or script's shards for its whole run, as one
    /// log group (see [`Locked::is_pinned`]): those of `keys`, or every
    /// shard with `all` (a database-wide command among its commands).
    pub fn lock_pinned<'k>(&self, keys: &[KeyRef<'k>], all: bool) -> Locked<'_> {
        let set = if all {
            self.lock_all()
        } else {
            self.lock_many(keys.iter().copied())
        };
        let mut locked = Locked::new(self, Held::Many(set), keys);
        locked.pin();
        locked
    }

    /// Locks the shards of all `keys`, in ascending order (deadlock-free).
    pub fn lock_many<'k>(&self, keys: impl IntoIterator<Item = KeyRef<'k>>) -> ShardSet<'_> {
        let mut indices: Vec<usize> = keys.into_iter().map(|k| k.shard()).collect();
        indices.sort_unstable();
        indices.dedup();
        let guards = indices.iter().map(|&i| self.take_shard(i)).collect();
        ShardSet::new(indices, guards, self.open_group())
    }

    /// Locks the shards `indices` (ascending) for eviction. Moving values
    /// to disk (`data_changes` false) appends images of values about to
    /// leave RAM, to the log or the cache store; deleting keys (a
    /// key-evicting policy) changes data, which the log and the change
    /// feed must see like any command's deletions.
    pub(crate) fn lock_indices_for_eviction(
        &self,
        indices: Vec<usize>,
        data_changes: bool,
    ) -> ShardSet<'_> {
        debug_assert!(indices.is_sorted());
        // Moving values out bumps `Shard::touched` itself, for what it
        // moves (`Shard::evict_at`): a sweep that moves nothing leaves the
        // shard as it was, and its census and `FruitlessRun` stand.
        let guards = indices
            .iter()
            .map(|&i| {
                if data_changes {
                    self.take_shard(i)
                } else {
                    self.peek_shard(i)
                }
            })
            .collect();
        let group = if data_changes {
            self.open_group()
        } else {
            self.open_tier_group()
        };
        ShardSet::new(indices, guards, group)
    }

    /// Locks every shard, in ascending order.
    pub fn lock_all(&self) -> ShardSet<'_> {
        let guards = (0..SHARD_COUNT).map(|i| self.take_shard(i)).collect();
        ShardSet::new((0..SHARD_COUNT).collect(), guards, self.open_group())
    }

    pub fn dbsize(&self, db: usize) -> usize {
        self.dbsize_in(None, db)
    }

    /// Runs `f` on shard `index`: through `held` when the caller holds
    /// every shard (a transaction or script with a database-wide command,
    /// see [`Locked::all`]; INFO in a script), locking the shard otherwise.
    /// The `*_in` readers of every shard go through it, so that a caller
    /// holding shards never locks one again (which would deadlock).
    fn visit<R>(
        &self,
        held: &mut Option<&mut ShardSet<'_>>,
        index: usize,
        f: impl FnOnce(&Shard) -> R,
    ) -> R {
        match held {
            Some(set) => f(set.shard(index)),
            None => f(&self.peek_shard(index)),
        }
    }

    /// [`Keyspace::dbsize`], on shards the caller may hold (see `visit`).
    pub fn dbsize_in(&self, mut held: Option<&mut ShardSet<'_>>, db: usize) -> usize {
        (0..SHARD_COUNT)
            .map(|i| self.visit(&mut held, i, |shard| shard.len(db)))
            .sum()
    }

    /// (keys, keys with an expiry) for every database.
    pub fn db_stats(&self, now_ms: u64) -> Vec<DbStats> {
        self.db_stats_in(&mut None, now_ms)
    }

    /// [`Keyspace::db_stats`], on shards the caller may hold (see `visit`).
    pub fn db_stats_in(&self, held: &mut Option<&mut ShardSet<'_>>, now_ms: u64) -> Vec<DbStats> {
        let mut stats = vec![DbStats::default(); self.db_count];
        let mut deadline_sums = vec![0u128; self.db_count];
        for index in 0..SHARD_COUNT {
            self.visit(held, index, |shard| {
                for (db, stat) in stats.iter_mut().enumerate() {
                    stat.keys += shard.len(db);
                    stat.expires += shard.volatile_len(db);
                    deadline_sums[db] += shard.tables[db].expiring.deadline_sum_ms;
                }
            });
        }
        for (stat, sum) in stats.iter_mut().zip(deadline_sums) {
            if stat.expires > 0 {
                let mean_deadline = (sum / stat.expires as u128) as u64;
                stat.avg_ttl_ms = mean_deadline.saturating_sub(now_ms);
            }
        }
        stats
    }

    /// Keys in all databases and the bytes of their keys and values.
    pub fn data_size(&self) -> (u64, u64) {
        let mut keys = 0;
        let mut bytes = 0;
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for table in shard.tables.iter() {
                keys += table.entries.len() as u64;
                bytes += table
                    .entries
                    .iter()
                    .map(|e| (e.head_len() + e.value_len_in_ram()) as u64)
                    .sum::<u64>();
            }
        }
        (keys, bytes)
    }

    /// (reads served from RAM, reads that needed the disk), over all
    /// shards (the RAM hit ratio), on shards the caller may hold.
    pub fn value_hits_in(&self, held: &mut Option<&mut ShardSet<'_>>) -> (u64, u64) {
        (0..SHARD_COUNT).fold((0, 0), |(ram, disk), index| {
            self.visit(held, index, |shard| {
                (ram + shard.ram_hits, disk + shard.disk_hits)
            })
        })
    }

    /// (bytes of the log's segments, estimated bytes of records some
    /// entry is located at): a segment's live share is its located entries
    /// over its records.
    pub fn log_live_bytes(&self) -> (u64, u64) {
        self.log_live_bytes_in(&mut None)
    }

    /// Bytes of the log a checkpoint cycle can delete now: the segments no
    /// value is located in (compaction empties dying ones).
    pub fn log_reclaimable_bytes(&self) -> u64 {
        let Some(log) = self.log() else {
            return 0;
        };
        let located = self.located_segments_in(&mut None);
        log.segments()
            .iter()
            .filter(|segment| !located.contains_key(&segment.seq))
            .map(|segment| segment.bytes)
            .sum()
    }

    /// [`Keyspace::log_live_bytes`], on shards the caller may hold.
    pub fn log_live_bytes_in(&self, held: &mut Option<&mut ShardSet<'_>>) -> (u64, u64) {
        let Some(log) = self.log() else {
            return (0, 0);
        };
        let segments = log.segments();
        let located = self.located_segments_in(held);
        let total = segments.iter().map(|s| s.bytes).sum();
        let live = segments
            .iter()
            .map(|s| {
                let count = located.get(&s.seq).copied().unwrap_or(0);
                let records = s.lsns.map_or(count, |(first, last)| last - first + 1);
                (s.bytes as f64 * count.min(records) as f64 / records.max(1) as f64) as u64
            })
            .sum();
        (total, live)
    }

    /// Compaction: see [`Shard::relocate`].
    pub(crate) fn relocate(&self, db: usize, key: &[u8], loc: u64, payload: &[u8]) -> bool {
        if db >= self.db_count {
            return false;
        }
        let key = self.key(key);
        let db_count = self.db_count;
        let mut guard = ShardGuard::new(
            self.take_shard(key.shard()),
            self.open_tier_group(),
            key.shard(),
        );
        guard.relocate(db_count, db, key, loc, payload)
    }

    /// Tells tiering how far the log has been written (the cron calls it),
    /// so values whose images are written may leave RAM.
    pub fn note_log_written(&self) {
        if let Some(log) = self.log() {
            self.tier
                .set_head_segment(crate::tiering::location::loc_segment(log.written_pos()));
        }
    }

    /// Recounts the RAM of shards in turn, continuing where the last call
    /// stopped, until about `entries_max` entries were visited (at least
    /// one shard) or a pass over every shard ended. Called a few times a
    /// second, a full pass takes (keys / entries_max) calls: the figures
    /// of [`Keyspace::memory_census`] are that old at most, at a bounded
    /// cost per call. Whether this call ended a pass.
    pub fn census_step(&self, entries_max: usize) -> bool {
        let mut visited = 0;
        loop {
            let index = self.census_cursor.fetch_add(1, Relaxed) % SHARD_COUNT;
            visited += self.peek_shard(index).count_memory();
            if index == SHARD_COUNT - 1 {
                return true;
            }
            if visited >= entries_max {
                return false;
            }
        }
    }

    /// The keyspace's RAM as last counted, shard by shard.
    pub fn memory_census(&self) -> MemoryCensus {
        self.memory_census_in(&mut None)
    }

    /// [`Keyspace::memory_census`], on shards the caller may hold.
    pub fn memory_census_in(&self, held: &mut Option<&mut ShardSet<'_>>) -> MemoryCensus {
        (0..SHARD_COUNT).fold(MemoryCensus::default(), |sum, index| {
            let census = self.visit(held, index, |shard| shard.census);
            MemoryCensus {
                index_bytes: sum.index_bytes + census.index_bytes,
                value_bytes: sum.value_bytes + census.value_bytes,
            }
        })
    }

    /// Keys in all databases.
    pub fn total_keys(&self) -> u64 {
        self.total_keys_in(&mut None)
    }

    /// [`Keyspace::total_keys`], on shards the caller may hold.
    pub fn total_keys_in(&self, held: &mut Option<&mut ShardSet<'_>>) -> u64 {
        (0..SHARD_COUNT)
            .map(|index| {
                self.visit(held, index, |shard| {
                    shard
                        .tables
                        .iter()
                        .map(|t| t.entries.len() as u64)
                        .sum::<u64>()
                })
            })
            .sum()
    }

    /// Entries located in each log segment, over all shards.
    /// Values in RAM located in one of `dying` are appended again (see
    /// `Shard::relocate_in`), one shard at a time, each shard's images one
    /// group (not a change to the data: no feed, no change count);
    /// `throttle` is told the bytes appended.
    pub(crate) fn relocate_in(
        &self,
        dying: &std::collections::BTreeSet<u64>,
        throttle: &mut dyn FnMut(u64),
    ) {
        if dying.is_empty() {
            return;
        }
        for index in 0..SHARD_COUNT {
            let mut guard = ShardGuard::new(self.take_shard(index), self.open_tier_group(), index);
            let bytes = guard.relocate_in(dying);
            drop(guard);
            if bytes > 0 {
                self.tier
                    .stats
                    .compaction_moves
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                throttle(bytes);
            }
        }
    }

    /// The keys whose value is at one of `locations` (in RAM with that
    /// location, or there only): (db, key, location). Walks every entry.
    pub(crate) fn keys_located_at(&self, locations: &[u64]) -> Vec<(usize, Vec<u8>, u64)> {
        let mut found = Vec::new();
        if locations.is_empty() {
            return found;
        }
        for index in 0..SHARD_COUNT {
            self.visit(&mut None, index, |shard| {
                for db in 0..self.db_count() {
                    for entry in shard.entries(db) {
                        if let Some(loc) = entry.loc()
                            && locations.contains(&loc)
                        {
                            found.push((db, entry.key().to_vec(), loc));
                        }
                    }
                }
            });
        }
        found
    }

    pub(crate) fn located_segments(&self) -> std::collections::BTreeMap<u64, u64> {
        self.located_segments_in(&mut None)
    }

    fn located_segments_in(
        &self,
        held: &mut Option<&mut ShardSet<'_>>,
    ) -> std::collections::BTreeMap<u64, u64> {
        let mut total = std::collections::BTreeMap::new();
        for index in 0..SHARD_COUNT {
            self.visit(held, index, |shard| {
                for (segment, count) in shard.live.iter() {
                    *total.entry(segment).or_default() += count;
                }
            });
        }
        total
    }

    pub fn expired_keys(&self) -> u64 {
        self.expired_keys_in(&mut None)
    }

    /// [`Keyspace::expired_keys`], on shards the caller may hold.
    pub fn expired_keys_in(&self, held: &mut Option<&mut ShardSet<'_>>) -> u64 {
        (0..SHARD_COUNT)
            .map(|index| self.visit(held, index, |shard| shard.expired_keys))
            .sum()
    }

    /// Empties database `db`; returns its contents (to drop outside the
    /// locks) and what was committed.
    #[cfg(test)]
    pub(crate) fn flush_db(&self, db: usize) -> (Flushed, Commit) {
        self.flush_db_in(None, db)
    }

    /// [`Keyspace::flush_db`] under every shard: `held` when the caller
    /// holds them (then the change joins its group and the commit
    /// returned is empty), locked here otherwise.
    pub fn flush_db_in(&self, held: Option<&mut ShardSet<'_>>, db: usize) -> (Flushed, Commit) {
        self.with_all(held, |all| {
            log_db_change(all.group_mut(), Kind::FlushDb, db, 0);
            Flushed(all.shards_unlogged().map(|s| s.take_table(db)).collect())
        })
    }

    /// Empties every database; as [`Keyspace::flush_db`].
    #[cfg(test)]
    pub(crate) fn flush_all(&self) -> (Flushed, Commit) {
        self.flush_all_in(None, 0, || ())
    }

    /// [`Keyspace::flush_all`]; `held` as for [`Keyspace::flush_db_in`].
    /// `client_db` is the database of the client that flushed: the record
    /// names it, so a replication stream selects it first, as Redis'
    /// does. `under_locks` runs while every shard is still locked, after
    /// the flush: what the caller must order against every key at once
    /// (the server empties its client-side caching table there).
    pub fn flush_all_in(
        &self,
        held: Option<&mut ShardSet<'_>>,
        client_db: usize,
        under_locks: impl FnOnce(),
    ) -> (Flushed, Commit) {
        let (flushed, commit) = self.with_all(held, |all| {
            log_db_change(all.group_mut(), Kind::FlushAll, client_db, 0);
            let mut removed = Vec::new();
            for shard in all.shards_unlogged() {
                for db in 0..shard.tables.len() {
                    removed.push(shard.take_table(db));
                }
            }
            under_locks();
            Flushed(removed)
        });
        (flushed, commit)
    }

    /// DEBUG RELOAD's load half: every live value in RAM is stored again
    /// from its image, built as loading a checkpoint builds it (encodings
    /// chosen afresh), its deadline kept; values on disk only stay there
    /// (a load would read them back the same way). Each store is an
    /// ordinary logged write of the same value, one shard at a time, so
    /// the log stays the whole truth and no group holds more than a
    /// shard. Returns how many values were rebuilt and what was committed.
    pub fn rebuild_values(&self, now_ms: u64) -> (usize, Commit) {
        let mut rebuilt = 0;
        let mut committed = Commit::default();
        for index in 0..SHARD_COUNT {
            let mut shard = self.lock_index(index);
            for db in 0..self.db_count {
                let keys: Vec<Vec<u8>> = shard.tables[db]
                    .entries
                    .iter()
                    .filter(|e| !e.is_expired(now_ms) && !e.is_cold())
                    .map(|e| e.key().to_vec())
                    .collect();
                for bytes in keys {
                    let key = self.key(&bytes);
                    let Some(entry) = shard.peek(db, key, now_ms) else {
                        continue;
                    };
                    let value = entry.value().to_value();
                    shard.set(db, key, value, None, true, now_ms);
                    rebuilt += 1;
                }
            }
            committed.absorb(shard.commit());
        }
        (rebuilt, committed)
    }

    /// Swaps two databases atomically; returns what was committed.
    #[cfg(test)]
    pub(crate) fn swap_db(&self, a: usize, b: usize) -> Commit {
        self.swap_db_in(None, a, b)
    }

    /// [`Keyspace::swap_db`]; `held` as for [`Keyspace::flush_db_in`].
    pub fn swap_db_in(&self, held: Option<&mut ShardSet<'_>>, a: usize, b: usize) -> Commit {
        self.with_all(held, |all| {
            log_db_change(all.group_mut(), Kind::SwapDb, a, b as u64);
            for shard in all.shards_unlogged() {
                shard.swap_dbs(a, b);
            }
        })
        .1
    }

    /// The image of metadata item `name` (server state kept beside the
    /// keyspace, such as the function libraries), if set.
    pub fn meta(&self, name: &[u8]) -> Option<Vec<u8>> {
        self.lock_unlogged(0).meta.get(name).cloned()
    }

    /// The metadata items whose names start with `prefix`, in name order.
    pub fn metas_with_prefix(&self, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let shard = self.lock_unlogged(0);
        (Metas(&shard.meta).with_prefix(prefix))
            .map(|(name, image)| (name.to_vec(), image.to_vec()))
            .collect()
    }

    /// Changes several metadata items in one lock hold of every shard (one
    /// log group): `f` reads the current items (by name) and answers the
    /// new images, in order (an empty image removes its item), or an error
    /// that changes nothing. As [`Keyspace::update_meta_in`] otherwise.
    pub fn update_metas_in<R, E>(
        &self,
        held: Option<&mut ShardSet<'_>>,
        f: impl FnOnce(Metas<'_>) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, R), E>,
    ) -> Result<(R, Commit), E> {
        let (result, commit) = self.with_all(held, |all| {
            let shard = all.shard_at(0);
            let (images, result) = f(Metas(&shard.meta))?;
            for (name, image) in &images {
                shard
                    .group
                    .append(&crate::storage::record::Draft::meta(name, image));
                shard.set_meta(name, image);
            }
            Ok(result)
        });
        result.map(|r| (r, commit))
    }

    /// Replaces metadata item `name` with the image `f` makes of the
    /// current one, durably: one [`Kind::Meta`] record, committed with
    /// every shard locked (`held` as for [`Keyspace::flush_db_in`]), so
    /// updates are totally ordered and a checkpoint's copy of shard 0
    /// holds exactly those below its LSN. `f` runs under those locks (the
    /// caller updates its own view of the item there); when it fails,
    /// nothing changes. An empty image removes the item.
    pub fn update_meta_in<R, E>(
        &self,
        held: Option<&mut ShardSet<'_>>,
        name: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), E>,
    ) -> Result<(R, Commit), E> {
        self.update_metas_in(held, |metas| {
            let (image, result) = f(metas.get(name))?;
            Ok((vec![(name.to_vec(), image)], result))
        })
    }

    /// Runs `f` with every shard locked: `held`, or locked here and
    /// committed after it.
    fn with_all<R>(
        &self,
        held: Option<&mut ShardSet<'_>>,
        f: impl FnOnce(&mut ShardSet<'_>) -> R,
    ) -> (R, Commit) {
        match held {
            Some(all) => {
                debug_assert!(all.holds_all());
                (f(all), Commit::default())
            }
            None => {
                let mut all = self.lock_all();
                let result = f(&mut all);
                (result, all.commit())
            }
        }
    }

    /// Active expiry: removes due keys, at most `budget_per_shard` per shard.
    pub fn active_expire_cycle(&self, now_ms: u64, budget_per_shard: usize) -> usize {
        if expiry_paused(now_ms) {
            return 0;
        }
        (0..SHARD_COUNT)
            .map(|i| {
                let hint = &self.hints[i].expiry;
                if now_ms < hint.load(Relaxed) {
                    return 0;
                }
                // Peeked: a shard with nothing due keeps its census.
                let mut shard = ShardGuard::new(self.peek_shard(i), self.open_group(), i);
                shard
                    .group
                    .add_cause(crate::storage::record::FLAG_BACKGROUND);
                let removed = shard.guard.expire_due(now_ms, budget_per_shard);
                // Under the lock: a command locking the shard after this
                // clears it again.
                hint.store(shard.guard.next_due_ms().max(1), Relaxed);
                removed
            })
            .sum()
    }

    /// Every live key of `db` matching `pattern` (KEYS).
    pub fn keys(&self, db: usize, pattern: &[u8], now_ms: u64) -> Vec<Vec<u8>> {
        self.keys_in(None, db, pattern, now_ms)
    }

    /// [`Keyspace::keys`], on shards the caller may hold (see `visit`).
    pub fn keys_in(
        &self,
        mut held: Option<&mut ShardSet<'_>>,
        db: usize,
        pattern: &[u8],
        now_ms: u64,
    ) -> Vec<Vec<u8>> {
        let match_all = pattern == b"*";
        let mut out = Vec::new();
        for index in 0..SHARD_COUNT {
            self.visit(&mut held, index, |shard| {
                for entry in shard.tables[db].entries.iter() {
                    if !entry.is_expired(now_ms)
                        && (match_all || glob::matches(pattern, entry.key(), false))
                    {
                        out.push(entry.key().to_vec());
                    }
                }
            });
        }
        out
    }

    /// The live keys of `db` in cluster slot `slot`: how many, and the
    /// first `max` of them (CLUSTER COUNTKEYSINSLOT / GETKEYSINSLOT).
    /// Sharded by slot, one shard holds them all; a directory sharded by
    /// hash is searched whole.
    pub fn keys_in_slot(
        &self,
        mut held: Option<&mut ShardSet<'_>>,
        db: usize,
        slot: u16,
        max: usize,
        now_ms: u64,
    ) -> (usize, Vec<Vec<u8>>) {
        let (mut count, mut keys) = (0, Vec::new());
        for index in self.shards_holding(&[slot]) {
            self.visit(&mut held, index, |shard| {
                for entry in shard.tables[db].entries.iter() {
                    if !entry.is_expired(now_ms) && key_slot(entry.key()) == slot {
                        count += 1;
                        if keys.len() < max {
                            keys.push(entry.key().to_vec());
                        }
                    }
                }
            });
        }
        (count, keys)
    }

    /// The shards that may hold keys of `slots`, in ascending order:
    /// sharded by slot, each slot's one; sharded by hash, all of them.
    fn shards_holding(&self, slots: &[u16]) -> Vec<usize> {
        match self.hasher.sharding() {
            crate::keyspace::key::Sharding::Slots => {
                let mut shards: Vec<usize> = slots
                    .iter()
                    .map(|&slot| slot as usize % SHARD_COUNT)
                    .collect();
                shards.sort_unstable();
                shards.dedup();
                shards
            }
            crate::keyspace::key::Sharding::Hash => (0..SHARD_COUNT).collect(),
        }
    }

    /// The live keys of `db` in any of `slots`, one shard at a time: each
    /// shard that may hold them is locked once, its keys of those slots
    /// copied, and `each` called with them after the lock is released (so
    /// it may change them). Sharded by slot, only the shards of `slots`
    /// are read; a directory sharded by hash is read whole, once.
    pub fn keys_in_slots(
        &self,
        db: usize,
        slots: &[u16],
        now_ms: u64,
        mut each: impl FnMut(Vec<Vec<u8>>),
    ) {
        let mut wanted = vec![false; usize::from(crate::keyspace::key::SLOT_COUNT)];
        for &slot in slots {
            wanted[slot as usize] = true;
        }
        for index in self.shards_holding(slots) {
            let mut keys = Vec::new();
            self.visit(&mut None, index, |shard| {
                for entry in shard.tables[db].entries.iter() {
                    if !entry.is_expired(now_ms) && wanted[key_slot(entry.key()) as usize] {
                        keys.push(entry.key().to_vec());
                    }
                }
            });
            if !keys.is_empty() {
                each(keys);
            }
        }
    }

    /// One SCAN step from `cursor`: returns the next cursor (0 when done) and
    /// the live keys that `keep` accepts among those visited.
    pub fn scan(
        &self,
        db: usize,
        cursor: u64,
        count: usize,
        now_ms: u64,
        keep: impl FnMut(&Entry) -> bool,
    ) -> (u64, Vec<Vec<u8>>) {
        self.scan_in(None, db, cursor, count, now_ms, keep, |_| {})
    }

    /// [`Keyspace::scan`], on shards the caller may hold (see `visit`);
    /// `expired` sees the entries past their deadline the call passed (SCAN
    /// reclaims them, as Redis' does).
    #[allow(clippy::too_many_arguments)]
    pub fn scan_in(
        &self,
        mut held: Option<&mut ShardSet<'_>>,
        db: usize,
        cursor: u64,
        count: usize,
        now_ms: u64,
        mut keep: impl FnMut(&Entry) -> bool,
        mut expired: impl FnMut(&Entry),
    ) -> (u64, Vec<Vec<u8>>) {
        let count = count.max(1);
        let examine_max = count.saturating_mul(10).max(SCAN_EXAMINED_PER_CALL_MIN);
        let mut position = cursor as u128;
        let mut examined = 0;
        let mut out = Vec::new();
        loop {
            let shard_index = (position >> (64 - SHARD_BITS)) as usize;
            let shard_end = (shard_index as u128 + 1) * SHARD_HASH_WIDTH;
            let end = self.visit(&mut held, shard_index, |shard| {
                let table = &shard.tables[db];
                let live = table.entries.len();
                let wanted = (count - out.len().min(count - 1)) as u128;
                let width = if live == 0 {
                    shard_end - position
                } else {
                    (SHARD_HASH_WIDTH * wanted / live as u128).clamp(1, shard_end - position)
                };
                let end = position + width;
                for entry in table.entries.iter() {
                    let hash = shard.hasher.hash(entry.key()) as u128;
                    if hash < position || hash >= end {
                        continue;
                    }
                    if entry.is_expired(now_ms) {
                        expired(entry);
                    } else if keep(entry) {
                        out.push(entry.key().to_vec());
                    }
                }
                examined += live + 1;
                end
            });
            position = end;
            if position > u64::MAX as u128 {
                return (0, out);
            }
            if out.len() >= count || examined >= examine_max {
                return (position as u64, out);
            }
        }
    }

    /// A random live key of `db`, or `None` if it has none.
    #[cfg(test)]
    pub(crate) fn random_key(&self, db: usize, now_ms: u64) -> Option<Vec<u8>> {
        self.random_key_in(None, db, now_ms)
    }

    /// [`Keyspace::random_key`], on shards the caller may hold.
    pub fn random_key_in(
        &self,
        mut held: Option<&mut ShardSet<'_>>,
        db: usize,
        now_ms: u64,
    ) -> Option<Vec<u8>> {
        const ATTEMPTS_MAX: usize = 100;
        for _ in 0..ATTEMPTS_MAX {
            let start = (random_u64() as usize) % SHARD_COUNT;
            for step in 0..SHARD_COUNT {
                let picked = self.visit(&mut held, (start + step) % SHARD_COUNT, |shard| {
                    let table = &shard.tables[db];
                    if table.entries.is_empty() {
                        return None;
                    }
                    let pick = (random_u64() as usize) % table.entries.len();
                    let entry = table.entries.iter().nth(pick).expect("index below len");
                    Some((entry.key().to_vec(), entry.is_expired(now_ms)))
                });
                match picked {
                    None => continue,
                    Some((key, false)) => return Some(key),
                    Some((key, true)) => {
                        // Met expired, it goes (and the deletion is
                        // logged and replicated), as Redis' RANDOMKEY
                        // deletes the expired keys it meets.
                        let key = self.key(&key);
                        match held.as_mut() {
                            Some(set) => set.shard(key.shard()).peek(db, key, now_ms),
                            None => self.lock(key).peek(db, key, now_ms),
                        };
                        break;
                    }
                }
            }
        }
        None
    }
}

impl crate::keyspace::guard::ShardSource for Keyspace {
    fn lock_index(&self, index: usize) -> ShardGuard<'_> {
        Keyspace::lock_index(self, index)
    }

    fn take_shard(&self, index: usize, wait: bool) -> Option<MutexGuard<'_, Shard>> {
        let mut shard = match wait {
            true => self.shards[index].lock(),
            false => self.shards[index].try_lock()?,
        };
        count_shard_lock();
        self.touch(index, &mut shard);
        Some(shard)
    }

    fn hash_key(&self, bytes: &[u8]) -> u64 {
        self.hasher.hash(bytes)
    }
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;

/// A replica's position in its primary's stream, kept in the log
/// (`repl_position` says how).
impl Keyspace {
    /// The replication position the data holds: the last one committed
    /// since start, else the one recovered. None when there is none (or
    /// it was cleared).
    pub fn replication_position(&self) -> Option<Vec<u8>> {
        // Without a log of changes nothing keeps it in step with the data.
        let committed = self.change_log()?.position();
        let image = match committed {
            Some(image) => image,
            None => self.meta(crate::storage::repl_position::NAME)?,
        };
        (!image.is_empty()).then_some(image)
    }

    /// Forgets a recovered position without a log of changes to keep
    /// one (`appendonly no`): the data will move on without it, and
    /// checkpoints must not carry it into a later run that has a log.
    pub fn forget_replication_position(&self) {
        if self.change_log().is_none() {
            self.lock_unlogged(0)
                .set_meta(crate::storage::repl_position::NAME, &[]);
        }
    }

    /// Commits `image` as the replication position (empty: there is
    /// none): with the rest of `held`'s group when the caller runs under
    /// locks that hold a shard (a command, EXEC), alone otherwise.
    /// Nothing without a log of changes.
    pub fn save_replication_position(&self, held: Option<&mut Locked>, image: &[u8]) -> Commit {
        let Some(_) = self.change_log() else {
            return Commit::default();
        };
        if held.is_some_and(|held| held.append_position(image)) {
            return Commit::default();
        }
        let mut guard = self.lock_index(0);
        guard.group.append_position(image);
        guard.commit()
    }
}

#[cfg(test)]
mod cold_read_tests {
    use super::*;

    /// A value that must be read under the lock and cannot be (here: its
    /// location names a segment that does not exist) is an error for the
    /// caller, and the entry stays as it was.
    #[test]
    fn a_failed_read_under_the_lock_is_an_error_and_keeps_the_entry() {
        let ks = Keyspace::new(1);
        let k = ks.key(b"cold");
        let loc = crate::tiering::location::loc(99, 0);
        ks.lock_unlogged(k.shard()).insert_cold(
            0,
            k,
            0,
            (crate::types::value::ValueType::String, false),
            loc,
            1000,
        );
        let error = match ks.lock(k).get(0, k, 1000) {
            Err(error) => error,
            Ok(found) => panic!("read succeeded: {}", found.is_some()),
        };
        assert_eq!(error.key, b"cold");
        assert!(
            error
                .to_string()
                .starts_with("could not read the value of 'cold' from disk: "),
            "{error}"
        );
        let mut shard = ks.lock(k);
        let entry = shard.peek(0, k, 1000).expect("the entry is kept");
        assert_eq!(entry.cold_loc(), Some(loc));
        assert_eq!(ks.tier().stats.cold_keys.load(Relaxed), 1);
        assert!(shard.take(0, k, 1000).is_err());
    }
}
