//! The sharded keyspace.
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
//! SCAN walks the keyspace in hash order: the cursor is the next hash value
//! to visit. A key's hash never changes, so every key present for a whole
//! iteration is returned exactly once, however tables grow or shrink.
//!
//! The entry is kept small and its value private to this module's API, so
//! the tiering issue can make a value hot (in RAM), cold (a location in the
//! log) or both without touching command code that only calls these methods.
//!
//! Logging: every method that changes an entry appends the change's record
//! (a full SET image, DEL, EXPIRE, or a database-level record) to the
//! calling thread's log group, and the lock guards ([`ShardGuard`],
//! [`ShardSet`]) commit that group when they drop, before unlocking. So no
//! command can change data without logging it, and a multi-key command's
//! records are one all-or-nothing group. Recovery and checkpoints lock
//! shards without a group (`lock_unlogged`) and log nothing. The hash seed
//! is fixed per data directory (kept in checkpoints) so a key's shard
//! survives restarts.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use foldhash::SharedSeed;
use foldhash::quality::SeedableRandomState;
use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};

use crate::glob;
use crate::log::{self, Log};
use crate::record::{Draft, FLAG_INT, Kind};
use crate::value::{Value, ValueRef};

type RandomState = SeedableRandomState;

pub const SHARD_BITS: u32 = 10;
pub const SHARD_COUNT: usize = 1 << SHARD_BITS;
/// Width of one shard's range of hash values.
const SHARD_HASH_WIDTH: u128 = 1 << (64 - SHARD_BITS);
/// Upper bound on table entries one SCAN call examines, beyond what COUNT
/// asks for, so a sparse keyspace is crossed in few calls but no call runs
/// long.
const SCAN_EXAMINED_PER_CALL_MIN: usize = 4096;

/// A key together with its hash; computed once per command.
#[derive(Clone, Copy, Debug)]
pub struct KeyRef<'a> {
    pub bytes: &'a [u8],
    pub hash: u64,
}

impl KeyRef<'_> {
    pub fn shard(&self) -> usize {
        (self.hash >> (64 - SHARD_BITS)) as usize
    }

    fn slot_hash(&self) -> u64 {
        slot_hash(self.hash)
    }
}

/// The hash a shard's table uses for `hash`.
///
/// Every key in a shard has the same top [`SHARD_BITS`] bits, and hashbrown
/// takes its 7-bit control tag from the top of the hash and the bucket from
/// the bottom. Fed the raw hash, every key of a shard would carry the same
/// tag and each probe would compare full keys; rotating moves the shard
/// bits to the middle, where neither tag nor bucket index looks.
fn slot_hash(hash: u64) -> u64 {
    hash.rotate_right(SHARD_BITS)
}

/// Bit of `Entry::key_len_and_flags` set when the value is int-encoded.
const INT_FLAG: u32 = 1 << 31;

/// One key and its value.
///
/// Memory layout, chosen for RAM per key (DESIGN.md: RAM is the scarce
/// resource): the table holds a pointer to this 32-byte header, and the
/// header owns one allocation holding the key's bytes followed by the
/// value's bytes. For 1 M keys with 100-byte values that is ≈ 180 bytes per
/// key (table slot, header, one allocation), against ≈ 200 for Redis. The
/// price is that growing a value (APPEND, SETRANGE, SETBIT) reallocates;
/// the allocator's size classes absorb most small growth in place.
#[derive(Debug)]
pub struct Entry {
    /// Key bytes, then value bytes.
    data: Box<[u8]>,
    /// Length of the key in `data`, plus [`INT_FLAG`].
    key_len_and_flags: u32,
    /// Unix seconds of the last access (LRU clock for OBJECT IDLETIME and
    /// eviction).
    access_s: u32,
    /// Absolute deadline in Unix milliseconds; 0 when the key persists.
    expire_at_ms: u64,
}

/// Key and value bytes in one allocation, and whether the value is an int.
fn pack(key: &[u8], value: Value) -> (Box<[u8]>, bool) {
    match value {
        Value::Int(n) => {
            let mut digits = itoa::Buffer::new();
            let text = digits.format(n).as_bytes();
            let mut data = Vec::with_capacity(key.len() + text.len());
            data.extend_from_slice(key);
            data.extend_from_slice(text);
            (data.into_boxed_slice(), true)
        }
        Value::Str(bytes) => {
            let mut data = Vec::with_capacity(key.len() + bytes.len());
            data.extend_from_slice(key);
            data.extend_from_slice(&bytes);
            (data.into_boxed_slice(), false)
        }
    }
}

impl Entry {
    fn new(key: &[u8], value: Value, expire_at_ms: u64, access_s: u32) -> Box<Entry> {
        assert!(
            key.len() < INT_FLAG as usize,
            "keys are limited by proto-max-bulk-len"
        );
        let (data, int) = pack(key, value);
        let flags = if int { INT_FLAG } else { 0 };
        Box::new(Entry {
            data,
            key_len_and_flags: key.len() as u32 | flags,
            access_s,
            expire_at_ms,
        })
    }

    fn key_len(&self) -> usize {
        (self.key_len_and_flags & !INT_FLAG) as usize
    }

    pub fn key(&self) -> &[u8] {
        &self.data[..self.key_len()]
    }

    pub fn value(&self) -> ValueRef<'_> {
        ValueRef::new(
            &self.data[self.key_len()..],
            self.key_len_and_flags & INT_FLAG != 0,
        )
    }

    /// Replaces the value of this entry of database `db`, keeping key,
    /// expiry and access time, and logs the new image.
    pub fn set_value(&mut self, db: usize, value: Value) {
        self.replace_value(value);
        log_image(db, self);
    }

    fn replace_value(&mut self, value: Value) {
        let key_len = self.key_len();
        if let Value::Int(n) = value {
            // INCR and friends: rewrite the digits in place when they fit.
            let mut digits = itoa::Buffer::new();
            let text = digits.format(n).as_bytes();
            if self.data.len() - key_len == text.len() {
                self.data[key_len..].copy_from_slice(text);
                self.key_len_and_flags = key_len as u32 | INT_FLAG;
                return;
            }
        }
        let (data, int) = pack(&self.data[..key_len], value);
        self.data = data;
        self.key_len_and_flags = key_len as u32 | if int { INT_FLAG } else { 0 };
    }

    /// Changes the value's bytes in place (APPEND, SETRANGE, SETBIT,
    /// BITFIELD) for this entry of database `db`; the result is a plain
    /// string, and its new image is logged.
    pub fn update_bytes<R>(&mut self, db: usize, change: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let key_len = self.key_len();
        let mut bytes = std::mem::take(&mut self.data).into_vec();
        let mut value = bytes.split_off(key_len);
        let result = change(&mut value);
        bytes.extend_from_slice(&value);
        self.data = bytes.into_boxed_slice();
        self.key_len_and_flags = key_len as u32;
        log_image(db, self);
        result
    }

    fn is_int(&self) -> bool {
        self.key_len_and_flags & INT_FLAG != 0
    }

    pub fn expire_at_ms(&self) -> Option<u64> {
        (self.expire_at_ms != 0).then_some(self.expire_at_ms)
    }

    pub fn idle_s(&self, now_ms: u64) -> u64 {
        (now_ms / 1000).saturating_sub(self.access_s as u64)
    }

    fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms != 0 && self.expire_at_ms <= now_ms
    }

    /// Approximate bytes this entry costs (MEMORY USAGE): header, table
    /// slot and the key/value allocation.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Entry>() + std::mem::size_of::<Box<Entry>>() + self.data.len()
    }
}

/// Logs the full current image of `entry` (a SET record).
fn log_image(db: usize, entry: &Entry) {
    log::append(&Draft {
        kind: Kind::Set,
        db: db as u16,
        aux: entry.expire_at_ms,
        flags: if entry.is_int() { FLAG_INT } else { 0 },
        key: entry.key(),
        payload: entry.value().as_bytes(),
    });
}

/// Logs that `key` no longer exists in `db`.
fn log_del(db: usize, key: &[u8]) {
    log::append(&Draft {
        kind: Kind::Del,
        db: db as u16,
        aux: 0,
        flags: 0,
        key,
        payload: &[],
    });
}

/// Logs a database-level change (FLUSHDB, FLUSHALL, SWAPDB).
fn log_db_change(kind: Kind, db: usize, aux: u64) {
    log::append(&Draft {
        kind,
        db: db as u16,
        aux,
        flags: 0,
        key: &[],
        payload: &[],
    });
}

#[derive(Default)]
struct Table {
    entries: HashTable<Box<Entry>>,
    expiring: ExpiryIndex,
}

/// The volatile keys of one table, ordered by deadline, and the sum of
/// their deadlines (so INFO's `avg_ttl` is exact at no cost).
#[derive(Default)]
struct ExpiryIndex {
    /// (deadline ms, key) of every key with an expiry.
    deadlines: BTreeSet<(u64, Box<[u8]>)>,
    deadline_sum_ms: u128,
}

impl ExpiryIndex {
    fn insert(&mut self, deadline: u64, key: Box<[u8]>) {
        if self.deadlines.insert((deadline, key)) {
            self.deadline_sum_ms += deadline as u128;
        }
    }

    fn remove(&mut self, deadline: u64, key: &[u8]) {
        if self.deadlines.remove(&(deadline, Box::<[u8]>::from(key))) {
            self.deadline_sum_ms -= deadline as u128;
        }
    }

    /// The key with the earliest deadline, if that deadline is at or before
    /// `now_ms`.
    fn pop_due(&mut self, now_ms: u64) -> Option<Box<[u8]>> {
        match self.deadlines.first() {
            Some((deadline, _)) if *deadline <= now_ms => {}
            _ => return None,
        }
        let (deadline, key) = self.deadlines.pop_first().expect("checked above");
        self.deadline_sum_ms -= deadline as u128;
        Some(key)
    }

    fn len(&self) -> usize {
        self.deadlines.len()
    }
}

/// Gives `entry` a new deadline (0: none), keeping the expiry index in step.
fn set_deadline(expiring: &mut ExpiryIndex, entry: &mut Entry, deadline: u64) {
    if deadline != entry.expire_at_ms {
        forget_deadline(expiring, entry);
        entry.expire_at_ms = deadline;
        if deadline != 0 {
            expiring.insert(deadline, entry.key().into());
        }
    }
}

/// Removes `entry`'s deadline from its table's expiry index.
fn forget_deadline(expiring: &mut ExpiryIndex, entry: &Entry) {
    if entry.expire_at_ms != 0 {
        expiring.remove(entry.expire_at_ms, entry.key());
    }
}

/// One lock's worth of the keyspace: a table per database.
pub struct Shard {
    tables: Box<[Table]>,
    hasher: RandomState,
    expired_keys: u64,
}

/// The databases' contents removed by FLUSHDB/FLUSHALL, to be dropped
/// outside any lock (in the background for ASYNC).
pub struct Flushed(#[allow(dead_code)] Vec<Table>);

impl Shard {
    fn new(db_count: usize, hasher: RandomState) -> Self {
        Shard {
            tables: (0..db_count).map(|_| Table::default()).collect(),
            hasher,
            expired_keys: 0,
        }
    }

    /// The live entry for `key`, deleting it first if it has expired.
    /// Records the access for LRU.
    pub fn get(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        let entry = self.lookup(db, key, now_ms)?;
        entry.access_s = (now_ms / 1000) as u32;
        Some(entry)
    }

    /// Like [`Shard::get`] without recording an access (OBJECT, TTL, TYPE).
    pub fn peek(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        self.lookup(db, key, now_ms)
    }

    fn lookup(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        let table = &mut self.tables[db];
        let found = table
            .entries
            .find_entry(key.slot_hash(), |e| e.key() == key.bytes)
            .ok()?;
        if !found.get().is_expired(now_ms) {
            return Some(found.into_mut());
        }
        let (expired, _) = found.remove();
        forget_deadline(&mut table.expiring, &expired);
        log_del(db, expired.key());
        self.expired_keys += 1;
        None
    }

    pub fn contains(&mut self, db: usize, key: KeyRef, now_ms: u64) -> bool {
        self.lookup(db, key, now_ms).is_some()
    }

    /// Sets `key` to `value`. `expire_at_ms` is the new deadline (`None`:
    /// persist) unless `keep_ttl` keeps an existing key's deadline.
    pub fn set(
        &mut self,
        db: usize,
        key: KeyRef,
        value: Value,
        expire_at_ms: Option<u64>,
        keep_ttl: bool,
        now_ms: u64,
    ) {
        let access_s = (now_ms / 1000) as u32;
        let hasher = &self.hasher;
        let table = &mut self.tables[db];
        match table.entries.entry(
            key.slot_hash(),
            |e| e.key() == key.bytes,
            |e| slot_hash(hasher.hash_one(e.key())),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut occupied) => {
                let entry = occupied.get_mut();
                entry.replace_value(value);
                entry.access_s = access_s;
                let expired = entry.is_expired(now_ms);
                if !keep_ttl || expired {
                    set_deadline(&mut table.expiring, entry, expire_at_ms.unwrap_or(0));
                }
                if expired {
                    self.expired_keys += 1;
                }
                log_image(db, entry);
            }
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                let deadline = if keep_ttl {
                    0
                } else {
                    expire_at_ms.unwrap_or(0)
                };
                if deadline != 0 {
                    table.expiring.insert(deadline, key.bytes.into());
                }
                let inserted = vacant.insert(Entry::new(key.bytes, value, deadline, access_s));
                log_image(db, inserted.get());
            }
        }
    }

    /// Removes `key`; an expired key counts as absent.
    pub fn remove(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<Box<Entry>> {
        let table = &mut self.tables[db];
        let found = table
            .entries
            .find_entry(key.slot_hash(), |e| e.key() == key.bytes)
            .ok()?;
        let (entry, _) = found.remove();
        forget_deadline(&mut table.expiring, &entry);
        log_del(db, entry.key());
        if entry.is_expired(now_ms) {
            self.expired_keys += 1;
            return None;
        }
        Some(entry)
    }

    /// Sets or clears (`None`) the deadline of an existing live key.
    /// Returns false when the key does not exist.
    pub fn set_expire(
        &mut self,
        db: usize,
        key: KeyRef,
        expire_at_ms: Option<u64>,
        now_ms: u64,
    ) -> bool {
        if self.lookup(db, key, now_ms).is_none() {
            return false;
        }
        let table = &mut self.tables[db];
        let entry = table
            .entries
            .find_mut(key.slot_hash(), |e| e.key() == key.bytes)
            .expect("looked up above");
        let deadline = expire_at_ms.unwrap_or(0);
        set_deadline(&mut table.expiring, entry, deadline);
        log::append(&Draft {
            kind: Kind::Expire,
            db: db as u16,
            aux: deadline,
            flags: 0,
            key: key.bytes,
            payload: &[],
        });
        true
    }

    /// Number of keys in `db` (including expired ones not yet reclaimed, as
    /// Redis' DBSIZE).
    pub fn len(&self, db: usize) -> usize {
        self.tables[db].entries.len()
    }

    fn volatile_len(&self, db: usize) -> usize {
        self.tables[db].expiring.len()
    }

    /// Deletes up to `budget` keys whose deadline has passed, earliest first.
    fn expire_due(&mut self, now_ms: u64, budget: usize) -> usize {
        let mut removed = 0;
        for (db, table) in self.tables.iter_mut().enumerate() {
            while removed < budget {
                let Some(key) = table.expiring.pop_due(now_ms) else {
                    break;
                };
                let hash = slot_hash(self.hasher.hash_one(&*key));
                if let Ok(found) = table.entries.find_entry(hash, |e| e.key() == &*key) {
                    found.remove();
                    log_del(db, &key);
                    removed += 1;
                }
            }
        }
        self.expired_keys += removed as u64;
        removed
    }
}

/// Recovery and checkpoints work on whole shards, without logging.
impl Shard {
    /// Live and expired-but-unreclaimed entries of `db`.
    pub(crate) fn entries(&self, db: usize) -> impl Iterator<Item = &Entry> {
        self.tables[db].entries.iter().map(|e| &**e)
    }

    /// Applies a replayed FLUSHDB, FLUSHALL or SWAPDB to this shard.
    pub(crate) fn apply_db_change(&mut self, kind: Kind, db: usize, other: usize) {
        match kind {
            Kind::FlushDb => self.tables[db] = Table::default(),
            Kind::FlushAll => self.tables.iter_mut().for_each(|t| *t = Table::default()),
            Kind::SwapDb => self.tables.swap(db, other),
            _ => unreachable!("not a database-level record: {kind:?}"),
        }
    }
}

/// One database's figures for INFO keyspace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    pub keys: usize,
    /// Keys with a deadline.
    pub expires: usize,
    /// Mean remaining time to live of those keys.
    pub avg_ttl_ms: u64,
}

/// One locked shard. While it is held, the records of the changes made
/// through it collect in this thread's log group, committed as one group
/// when the guard drops — before the lock is released.
pub struct ShardGuard<'a> {
    guard: MutexGuard<'a, Shard>,
    log: Option<&'a Log>,
}

impl Deref for ShardGuard<'_> {
    type Target = Shard;
    fn deref(&self) -> &Shard {
        &self.guard
    }
}

impl DerefMut for ShardGuard<'_> {
    fn deref_mut(&mut self) -> &mut Shard {
        &mut self.guard
    }
}

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        if let Some(log) = self.log {
            log::group_close(log);
        }
    }
}

/// Several shards locked together, in ascending index order. Everything
/// changed through them is one log group: all or nothing after a crash.
pub struct ShardSet<'a> {
    indices: Vec<usize>,
    guards: Vec<MutexGuard<'a, Shard>>,
    log: Option<&'a Log>,
}

impl Drop for ShardSet<'_> {
    fn drop(&mut self) {
        if let Some(log) = self.log {
            log::group_close(log);
        }
    }
}

impl ShardSet<'_> {
    /// The locked shard with index `shard`; it must be one of those asked for.
    pub fn shard(&mut self, shard: usize) -> &mut Shard {
        let position = self
            .indices
            .binary_search(&shard)
            .expect("shard was locked");
        &mut self.guards[position]
    }
}

/// All databases, sharded.
pub struct Keyspace {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// The hash seed: secret, random per data directory, and kept in
    /// checkpoints so a key lands in the same shard after a restart.
    seed: u64,
    db_count: usize,
    log: OnceLock<Arc<Log>>,
}

impl Keyspace {
    /// A keyspace with a fresh random hash seed.
    pub fn new(db_count: usize) -> Self {
        Self::with_seed(db_count, random_seed())
    }

    pub fn with_seed(db_count: usize, seed: u64) -> Self {
        assert!(db_count > 0, "at least one database");
        let hasher = RandomState::with_seed(seed, SharedSeed::global_fixed());
        Keyspace {
            shards: (0..SHARD_COUNT)
                .map(|_| Mutex::new(Shard::new(db_count, hasher.clone())))
                .collect(),
            hasher,
            seed,
            db_count,
            log: OnceLock::new(),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// From now on every change is logged to `log`. Set once, after
    /// recovery has replayed the existing log.
    pub fn attach_log(&self, log: Arc<Log>) {
        assert!(self.log.set(log).is_ok(), "log attached twice");
    }

    pub fn log(&self) -> Option<&Arc<Log>> {
        self.log.get()
    }

    /// Opens this thread's log group when the log is on.
    fn open_group(&self) -> Option<&Log> {
        let log = self.log.get()?;
        log::group_open();
        Some(log)
    }

    /// Locks shard `index` without logging (recovery, checkpoints, stats).
    pub(crate) fn lock_unlogged(&self, index: usize) -> MutexGuard<'_, Shard> {
        self.shards[index].lock()
    }

    fn lock_index(&self, index: usize) -> ShardGuard<'_> {
        let guard = self.shards[index].lock();
        ShardGuard {
            guard,
            log: self.open_group(),
        }
    }

    pub fn db_count(&self) -> usize {
        self.db_count
    }

    pub fn key<'k>(&self, bytes: &'k [u8]) -> KeyRef<'k> {
        KeyRef {
            bytes,
            hash: self.hasher.hash_one(bytes),
        }
    }

    /// Locks the shard that holds `key`.
    pub fn lock(&self, key: KeyRef) -> ShardGuard<'_> {
        self.lock_index(key.shard())
    }

    /// Locks the shards of all `keys`, in ascending order (deadlock-free).
    pub fn lock_many<'k>(&self, keys: impl IntoIterator<Item = KeyRef<'k>>) -> ShardSet<'_> {
        let mut indices: Vec<usize> = keys.into_iter().map(|k| k.shard()).collect();
        indices.sort_unstable();
        indices.dedup();
        let guards = indices.iter().map(|&i| self.shards[i].lock()).collect();
        ShardSet {
            indices,
            guards,
            log: self.open_group(),
        }
    }

    /// Locks every shard, in ascending order.
    pub fn lock_all(&self) -> ShardSet<'_> {
        let guards = self.shards.iter().map(|s| s.lock()).collect();
        ShardSet {
            indices: (0..SHARD_COUNT).collect(),
            guards,
            log: self.open_group(),
        }
    }

    pub fn dbsize(&self, db: usize) -> usize {
        self.shards.iter().map(|s| s.lock().len(db)).sum()
    }

    /// (keys, keys with an expiry) for every database.
    pub fn db_stats(&self, now_ms: u64) -> Vec<DbStats> {
        let mut stats = vec![DbStats::default(); self.db_count];
        let mut deadline_sums = vec![0u128; self.db_count];
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for (db, stat) in stats.iter_mut().enumerate() {
                stat.keys += shard.len(db);
                stat.expires += shard.volatile_len(db);
                deadline_sums[db] += shard.tables[db].expiring.deadline_sum_ms;
            }
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
                    .map(|e| e.data.len() as u64)
                    .sum::<u64>();
            }
        }
        (keys, bytes)
    }

    pub fn expired_keys(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().expired_keys).sum()
    }

    /// Empties one database. The caller drops the result outside the lock.
    pub fn flush_db(&self, db: usize) -> Flushed {
        let mut all = self.lock_all();
        log_db_change(Kind::FlushDb, db, 0);
        Flushed(
            all.guards
                .iter_mut()
                .map(|s| std::mem::take(&mut s.tables[db]))
                .collect(),
        )
    }

    pub fn flush_all(&self) -> Flushed {
        let mut all = self.lock_all();
        log_db_change(Kind::FlushAll, 0, 0);
        let mut removed = Vec::new();
        for shard in all.guards.iter_mut() {
            for table in shard.tables.iter_mut() {
                removed.push(std::mem::take(table));
            }
        }
        Flushed(removed)
    }

    /// Swaps two databases atomically.
    pub fn swap_db(&self, a: usize, b: usize) {
        let mut all = self.lock_all();
        log_db_change(Kind::SwapDb, a, b as u64);
        for shard in all.guards.iter_mut() {
            shard.tables.swap(a, b);
        }
    }

    /// Active expiry: removes due keys, at most `budget_per_shard` per shard.
    pub fn active_expire_cycle(&self, now_ms: u64, budget_per_shard: usize) -> usize {
        (0..SHARD_COUNT)
            .map(|i| self.lock_index(i).expire_due(now_ms, budget_per_shard))
            .sum()
    }

    /// Every live key of `db` matching `pattern` (KEYS).
    pub fn keys(&self, db: usize, pattern: &[u8], now_ms: u64) -> Vec<Vec<u8>> {
        let match_all = pattern == b"*";
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for entry in shard.tables[db].entries.iter() {
                if !entry.is_expired(now_ms)
                    && (match_all || glob::matches(pattern, entry.key(), false))
                {
                    out.push(entry.key().to_vec());
                }
            }
        }
        out
    }

    /// One SCAN step from `cursor`: returns the next cursor (0 when done) and
    /// the live keys that `keep` accepts among those visited.
    pub fn scan(
        &self,
        db: usize,
        cursor: u64,
        count: usize,
        now_ms: u64,
        mut keep: impl FnMut(&Entry) -> bool,
    ) -> (u64, Vec<Vec<u8>>) {
        let count = count.max(1);
        let examine_max = count.saturating_mul(10).max(SCAN_EXAMINED_PER_CALL_MIN);
        let mut position = cursor as u128;
        let mut examined = 0;
        let mut out = Vec::new();
        loop {
            let shard_index = (position >> (64 - SHARD_BITS)) as usize;
            let shard_end = (shard_index as u128 + 1) * SHARD_HASH_WIDTH;
            let shard = self.shards[shard_index].lock();
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
                let hash = shard.hasher.hash_one(entry.key()) as u128;
                if hash >= position && hash < end && !entry.is_expired(now_ms) && keep(entry) {
                    out.push(entry.key().to_vec());
                }
            }
            examined += live + 1;
            drop(shard);
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
    pub fn random_key(&self, db: usize, now_ms: u64) -> Option<Vec<u8>> {
        const ATTEMPTS_MAX: usize = 100;
        for _ in 0..ATTEMPTS_MAX {
            let start = (random_u64() as usize) % SHARD_COUNT;
            for step in 0..SHARD_COUNT {
                let shard = self.shards[(start + step) % SHARD_COUNT].lock();
                let table = &shard.tables[db];
                if table.entries.is_empty() {
                    continue;
                }
                let pick = (random_u64() as usize) % table.entries.len();
                let entry = table.entries.iter().nth(pick).expect("index below len");
                if !entry.is_expired(now_ms) {
                    return Some(entry.key().to_vec());
                }
                break;
            }
        }
        None
    }
}

/// A random 64-bit seed from the OS (via std's randomly keyed hasher).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState as StdRandomState};
    StdRandomState::new().hash_one(std::time::SystemTime::now())
}

/// A fast per-thread pseudo-random number (xorshift64*), for sampling.
pub fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
            (seed ^ (&seed as *const u64 as u64)) | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn set(
        ks: &Keyspace,
        db: usize,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
        now_ms: u64,
    ) {
        let k = ks.key(key);
        ks.lock(k)
            .set(db, k, Value::from_bytes(value), expire_at_ms, false, now_ms);
    }

    #[test]
    fn set_get_remove() {
        let ks = Keyspace::new(16);
        set(&ks, 0, b"a", b"1", None, 1000);
        let k = ks.key(b"a");
        assert_eq!(
            ks.lock(k).get(0, k, 1000).unwrap().value().as_int(),
            Some(1)
        );
        assert!(
            ks.lock(k).get(1, k, 1000).is_none(),
            "databases are separate"
        );
        assert!(ks.lock(k).remove(0, k, 1000).is_some());
        assert!(ks.lock(k).get(0, k, 1000).is_none());
    }

    #[test]
    fn expired_keys_are_invisible_and_reclaimed() {
        let ks = Keyspace::new(1);
        set(&ks, 0, b"lazy", b"v", Some(2000), 1000);
        set(&ks, 0, b"active", b"v", Some(2000), 1000);
        set(&ks, 0, b"later", b"v", Some(9000), 1000);
        let lazy = ks.key(b"lazy");
        assert!(ks.lock(lazy).get(0, lazy, 1999).is_some());
        assert!(ks.lock(lazy).get(0, lazy, 2000).is_none());
        assert_eq!(
            ks.active_expire_cycle(2000, 100),
            1,
            "only 'active' is still due"
        );
        assert_eq!(ks.dbsize(0), 1);
        assert_eq!(ks.expired_keys(), 2);
        assert_eq!(ks.keys(0, b"*", 9000), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn keep_ttl_and_overwrite() {
        let ks = Keyspace::new(1);
        set(&ks, 0, b"k", b"v", Some(5000), 1000);
        let k = ks.key(b"k");
        ks.lock(k)
            .set(0, k, Value::from_bytes(b"w"), None, true, 1000);
        assert_eq!(
            ks.lock(k).get(0, k, 1000).unwrap().expire_at_ms(),
            Some(5000)
        );
        ks.lock(k)
            .set(0, k, Value::from_bytes(b"x"), None, false, 1000);
        assert_eq!(ks.lock(k).get(0, k, 1000).unwrap().expire_at_ms(), None);
        assert_eq!(
            ks.db_stats(1000)[0],
            DbStats {
                keys: 1,
                expires: 0,
                avg_ttl_ms: 0
            }
        );
    }

    #[test]
    fn avg_ttl_is_the_exact_mean_of_remaining_ttls() {
        let ks = Keyspace::new(1);
        set(&ks, 0, b"a", b"v", Some(11_000), 1000);
        set(&ks, 0, b"b", b"v", Some(31_000), 1000);
        set(&ks, 0, b"c", b"v", None, 1000);
        assert_eq!(
            ks.db_stats(1000)[0],
            DbStats {
                keys: 3,
                expires: 2,
                avg_ttl_ms: 20_000
            }
        );
        let b = ks.key(b"b");
        ks.lock(b).set_expire(0, b, Some(21_000), 1000);
        let a = ks.key(b"a");
        ks.lock(a).remove(0, a, 1000);
        assert_eq!(
            ks.db_stats(1000)[0],
            DbStats {
                keys: 2,
                expires: 1,
                avg_ttl_ms: 20_000
            }
        );
        ks.active_expire_cycle(30_000, 10);
        assert_eq!(
            ks.db_stats(30_000)[0],
            DbStats {
                keys: 1,
                expires: 0,
                avg_ttl_ms: 0
            }
        );
    }

    #[test]
    fn scan_returns_every_key_once_while_tables_change() {
        let ks = Keyspace::new(1);
        let stable: Vec<Vec<u8>> = (0..5000)
            .map(|i| format!("stable:{i}").into_bytes())
            .collect();
        for key in &stable {
            set(&ks, 0, key, b"v", None, 0);
        }
        let mut seen = Vec::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            let (next, keys) = ks.scan(0, cursor, 10, 0, |_| true);
            seen.extend(keys);
            // Grow and shrink tables mid-iteration.
            for i in 0..20 {
                set(
                    &ks,
                    0,
                    format!("churn:{step}:{i}").as_bytes(),
                    b"v",
                    None,
                    0,
                );
            }
            if step % 3 == 0 {
                ks.flush_db(0);
                for key in &stable {
                    set(&ks, 0, key, b"v", None, 0);
                }
            }
            step += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        let seen_stable: Vec<&Vec<u8>> =
            seen.iter().filter(|k| k.starts_with(b"stable:")).collect();
        let unique: HashSet<&Vec<u8>> = seen_stable.iter().copied().collect();
        assert_eq!(unique.len(), stable.len(), "every stable key returned");
        assert_eq!(seen_stable.len(), stable.len(), "and only once");
    }

    #[test]
    fn scan_of_empty_db_finishes_quickly() {
        let ks = Keyspace::new(1);
        let mut calls = 0;
        let mut cursor = 0;
        loop {
            let (next, keys) = ks.scan(0, cursor, 10, 0, |_| true);
            assert!(keys.is_empty());
            calls += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert!(calls <= 2, "took {calls} calls");
    }

    #[test]
    fn keys_of_one_shard_get_varied_table_tags_and_buckets() {
        let ks = Keyspace::new(1);
        let names: Vec<String> = (0..200_000).map(|i| format!("k{i}")).collect();
        let same_shard: Vec<u64> = names
            .iter()
            .map(|name| ks.key(name.as_bytes()))
            .filter(|k| k.shard() == 0)
            .map(|k| k.slot_hash())
            .collect();
        assert!(same_shard.len() > 100);
        let tags: HashSet<u64> = same_shard.iter().map(|h| h >> 57).collect();
        let buckets: HashSet<u64> = same_shard.iter().map(|h| h & 1023).collect();
        assert!(tags.len() > 64, "only {} distinct 7-bit tags", tags.len());
        assert!(
            buckets.len() > same_shard.len() / 2,
            "buckets cluster: {}",
            buckets.len()
        );
    }

    #[test]
    fn swap_and_random() {
        let ks = Keyspace::new(2);
        set(&ks, 0, b"k", b"v", None, 0);
        ks.swap_db(0, 1);
        assert_eq!(ks.dbsize(0), 0);
        assert_eq!(ks.random_key(1, 0), Some(b"k".to_vec()));
        assert_eq!(ks.random_key(0, 0), None);
    }
}
