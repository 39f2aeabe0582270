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
//! (a full SET image, DEL, EXPIRE, or a database-level record) to the
//! calling thread's log group, and the lock guards ([`ShardGuard`],
//! [`ShardSet`]) commit that group when they drop, before unlocking. So no
//! command can change data without logging it, and a multi-key command's
//! records are one all-or-nothing group. Recovery and checkpoints lock
//! shards without a group (`lock_unlogged`) and log nothing. The hash seed
//! is fixed per data directory (kept in checkpoints) so a key's shard
//! survives restarts.

use std::hash::BuildHasher;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use foldhash::SharedSeed;
use foldhash::quality::SeedableRandomState;
use parking_lot::{Mutex, MutexGuard};

use std::sync::atomic::Ordering::Relaxed;

use crate::glob;
use crate::log::{self, Log};
use crate::record::{Draft, FLAG_INT, Kind};
use crate::table::{ExpiryIndex, Table, Tables};
use crate::tier::{self, LiveCounts, NO_LOC, Tier};
use crate::value::{Value, ValueRef};

pub(crate) type RandomState = SeedableRandomState;

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
pub(crate) fn slot_hash(hash: u64) -> u64 {
    hash.rotate_right(SHARD_BITS)
}

/// Flags, in the top byte of `Entry::clock_and_flags`.
const INT: u32 = 1 << 24;
/// `data` starts with the 8-byte deadline.
const VOLATILE: u32 = 1 << 25;
/// The value is only on disk, at `loc`.
const COLD: u32 = 1 << 26;
/// Read from disk once recently without being kept: a second read within
/// [`PROMOTE_WINDOW_S`] keeps it in RAM.
const SEEN: u32 = 1 << 27;
/// Read in for one command only; leaves RAM again after it.
const TRANSIENT: u32 = 1 << 28;
/// Read from disk for the coming command (which counts it as a disk hit).
const FETCHED: u32 = 1 << 29;
/// The low 24 bits: Unix seconds of the last access, modulo 2^24 (Redis'
/// LRU clock has the same width; it wraps after 194 days).
const CLOCK_MASK: u32 = (1 << 24) - 1;
/// A cold value read twice within this many seconds is promoted to RAM; a
/// value read once (a scan) is not.
pub const PROMOTE_WINDOW_S: u32 = 60;

fn clock_of(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & CLOCK_MASK
}

/// One key and its value.
///
/// Memory layout, chosen for RAM per key (DESIGN.md: RAM is the scarce
/// resource): the table holds a pointer to this 32-byte header, and the
/// header owns one allocation holding the deadline (only for keys that
/// have one), the key's bytes and, while the value is in RAM, the value's
/// bytes. A cold entry (value on disk) costs the table slot, this header
/// and its key: see README "Sizing". Growing a value (APPEND, SETRANGE,
/// SETBIT) reallocates; the allocator's size classes absorb most small
/// growth in place.
#[derive(Debug)]
pub struct Entry {
    /// [deadline: u64 LE, when VOLATILE] key bytes, then value bytes unless COLD.
    data: Box<[u8]>,
    key_len: u32,
    /// LRU clock (low 24 bits) and flags (top byte).
    clock_and_flags: u32,
    /// Where the log holds an image of the current value (`tier::loc`), or
    /// [`NO_LOC`].
    loc: u64,
}

/// Deadline (when not 0), key and value bytes in one allocation.
fn pack(deadline: u64, key: &[u8], value: &[u8]) -> Box<[u8]> {
    let prefix = if deadline != 0 { 8 } else { 0 };
    let mut data = Vec::with_capacity(prefix + key.len() + value.len());
    if deadline != 0 {
        data.extend_from_slice(&deadline.to_le_bytes());
    }
    data.extend_from_slice(key);
    data.extend_from_slice(value);
    data.into_boxed_slice()
}

/// The bytes a value is stored as, and whether it is int-encoded.
fn value_bytes(value: &Value, digits: &mut itoa::Buffer) -> (Vec<u8>, bool) {
    match value {
        Value::Int(n) => (digits.format(*n).as_bytes().to_vec(), true),
        Value::Str(bytes) => (bytes.to_vec(), false),
    }
}

impl Entry {
    fn new(key: &[u8], value: Value, deadline: u64, now_ms: u64) -> Box<Entry> {
        assert!(
            key.len() < u32::MAX as usize,
            "keys are limited by proto-max-bulk-len"
        );
        let mut digits = itoa::Buffer::new();
        let (bytes, int) = value_bytes(&value, &mut digits);
        let mut flags = if int { INT } else { 0 };
        if deadline != 0 {
            flags |= VOLATILE;
        }
        Box::new(Entry {
            data: pack(deadline, key, &bytes),
            key_len: key.len() as u32,
            clock_and_flags: clock_of(now_ms) | flags,
            loc: NO_LOC,
        })
    }

    /// An entry whose value is only on disk, at `loc` (recovery).
    fn new_cold(key: &[u8], deadline: u64, int: bool, loc: u64, now_ms: u64) -> Box<Entry> {
        let mut flags = COLD | if int { INT } else { 0 };
        if deadline != 0 {
            flags |= VOLATILE;
        }
        Box::new(Entry {
            data: pack(deadline, key, &[]),
            key_len: key.len() as u32,
            clock_and_flags: clock_of(now_ms) | flags,
            loc,
        })
    }

    fn has(&self, flag: u32) -> bool {
        self.clock_and_flags & flag != 0
    }

    fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.clock_and_flags |= flag;
        } else {
            self.clock_and_flags &= !flag;
        }
    }

    fn touch(&mut self, now_ms: u64) {
        self.clock_and_flags = (self.clock_and_flags & !CLOCK_MASK) | clock_of(now_ms);
    }

    fn prefix_len(&self) -> usize {
        if self.has(VOLATILE) { 8 } else { 0 }
    }

    fn deadline(&self) -> u64 {
        if self.has(VOLATILE) {
            u64::from_le_bytes(self.data[..8].try_into().expect("8 bytes"))
        } else {
            0
        }
    }

    pub fn key(&self) -> &[u8] {
        let at = self.prefix_len();
        &self.data[at..at + self.key_len as usize]
    }

    /// The value; only for an entry in RAM, which every [`Shard::get`]
    /// returns.
    pub fn value(&self) -> ValueRef<'_> {
        assert!(
            !self.is_cold(),
            "value of a cold entry read without loading"
        );
        ValueRef::new(
            &self.data[self.prefix_len() + self.key_len as usize..],
            self.has(INT),
        )
    }

    /// Bytes of the value held in RAM (0 when cold).
    fn value_len_in_ram(&self) -> usize {
        self.data.len() - self.prefix_len() - self.key_len as usize
    }

    /// Whether the value is only on disk.
    pub fn is_cold(&self) -> bool {
        self.has(COLD)
    }

    /// Where the log holds the current value's image, if it does.
    pub fn loc(&self) -> Option<u64> {
        (self.loc != NO_LOC).then_some(self.loc)
    }

    /// The location of the value when it is only on disk.
    pub fn cold_loc(&self) -> Option<u64> {
        self.is_cold().then_some(self.loc)
    }

    /// The Redis type name (TYPE), known without the value.
    pub fn type_name(&self) -> &'static str {
        "string"
    }

    /// Replaces the value (keeping key, deadline), leaving it in RAM.
    /// The caller has already forgotten the old location.
    fn replace_value(&mut self, value: Value) {
        let key_len = self.key_len as usize;
        let prefix = self.prefix_len();
        if let Value::Int(n) = value
            && !self.is_cold()
        {
            // INCR and friends: rewrite the digits in place when they fit.
            let mut digits = itoa::Buffer::new();
            let text = digits.format(n).as_bytes();
            if self.data.len() - prefix - key_len == text.len() {
                self.data[prefix + key_len..].copy_from_slice(text);
                self.set_flag(INT, true);
                return;
            }
        }
        let mut digits = itoa::Buffer::new();
        let (bytes, int) = value_bytes(&value, &mut digits);
        self.data = pack(self.deadline(), self.key(), &bytes);
        self.set_flag(INT, int);
        self.set_flag(COLD | SEEN | TRANSIENT, false);
    }

    /// Puts a value read from disk back in RAM (its location stays).
    fn install(&mut self, bytes: &[u8], int: bool) {
        self.data = pack(self.deadline(), self.key(), bytes);
        self.set_flag(INT, int);
        self.set_flag(COLD, false);
    }

    /// Drops the value's bytes; it stays readable at `loc`. Returns the
    /// bytes freed.
    fn drop_value(&mut self) -> usize {
        debug_assert!(self.loc != NO_LOC && !self.is_cold());
        let before = self.data.len();
        self.data = pack(self.deadline(), self.key(), &[]);
        self.set_flag(COLD, true);
        self.set_flag(TRANSIENT, false);
        before - self.data.len()
    }

    /// Sets the deadline (0: none), moving the key bytes when the entry
    /// gains or loses one.
    fn set_deadline_raw(&mut self, deadline: u64) {
        if self.has(VOLATILE) && deadline != 0 {
            self.data[..8].copy_from_slice(&deadline.to_le_bytes());
            return;
        }
        if !self.has(VOLATILE) && deadline == 0 {
            return;
        }
        let rest = self.data[self.prefix_len()..].to_vec();
        let mut data = Vec::with_capacity(rest.len() + 8);
        if deadline != 0 {
            data.extend_from_slice(&deadline.to_le_bytes());
        }
        data.extend_from_slice(&rest);
        self.data = data.into_boxed_slice();
        self.set_flag(VOLATILE, deadline != 0);
    }

    pub fn is_int(&self) -> bool {
        self.has(INT)
    }

    pub fn expire_at_ms(&self) -> Option<u64> {
        let deadline = self.deadline();
        (deadline != 0).then_some(deadline)
    }

    pub fn idle_s(&self, now_ms: u64) -> u64 {
        (clock_of(now_ms).wrapping_sub(self.clock_and_flags & CLOCK_MASK) & CLOCK_MASK) as u64
    }

    fn is_expired(&self, now_ms: u64) -> bool {
        let deadline = self.deadline();
        deadline != 0 && deadline <= now_ms
    }

    /// Bytes this entry costs in RAM (MEMORY USAGE): header, table slot
    /// and the allocation (which holds the value only while it is in RAM).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Entry>() + std::mem::size_of::<Box<Entry>>() + self.data.len()
    }
}

/// A live entry borrowed from its locked shard: reads through `Deref`;
/// changes go through methods that keep the shard's location counts and
/// the log in step.
pub struct EntryMut<'a> {
    entry: &'a mut Entry,
    live: &'a mut LiveCounts,
}

impl Deref for EntryMut<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        self.entry
    }
}

impl EntryMut<'_> {
    /// Replaces the value of this entry of database `db`, keeping key,
    /// expiry and access time, and logs the new image.
    pub fn set_value(self, db: usize, value: Value) {
        forget_loc(self.live, self.entry);
        self.entry.replace_value(value);
        log_image(db, self.entry);
    }

    /// Changes the value's bytes in place (APPEND, SETRANGE, SETBIT,
    /// BITFIELD) for this entry of database `db`; the result is a plain
    /// string, and its new image is logged.
    pub fn update_bytes<R>(self, db: usize, change: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        forget_loc(self.live, self.entry);
        let entry = self.entry;
        let start = entry.prefix_len() + entry.key_len as usize;
        let mut bytes = std::mem::take(&mut entry.data).into_vec();
        let mut value = bytes.split_off(start);
        let result = change(&mut value);
        bytes.extend_from_slice(&value);
        entry.data = bytes.into_boxed_slice();
        entry.set_flag(INT | SEEN | TRANSIENT, false);
        log_image(db, entry);
        result
    }
}

/// The live entry for `key` in `table`, removing (and logging) it first if
/// it has expired.
#[allow(clippy::too_many_arguments)]
fn lookup<'t>(
    table: &'t mut Table,
    live: &mut LiveCounts,
    expired_keys: &mut u64,
    tier: &Tier,
    db: usize,
    key: KeyRef,
    now_ms: u64,
) -> Option<&'t mut Entry> {
    let found = table
        .entries
        .find_entry(key.slot_hash(), |e| e.key() == key.bytes)
        .ok()?;
    if !found.get().is_expired(now_ms) {
        return Some(found.into_mut());
    }
    let (mut expired, _) = found.remove();
    forget_deadline(&mut table.expiring, &expired);
    unlink(live, tier, &mut expired);
    log_del(db, expired.key());
    *expired_keys += 1;
    None
}

/// An entry leaves its table: its location no longer counts.
fn unlink(live: &mut LiveCounts, tier: &Tier, entry: &mut Entry) {
    if entry.is_cold() {
        tier.stats.cold_keys.fetch_sub(1, Relaxed);
    }
    live.remove(entry.loc);
}

/// The value is about to change: its image at `loc` is no longer current.
fn forget_loc(live: &mut LiveCounts, entry: &mut Entry) {
    live.remove(entry.loc);
    entry.loc = NO_LOC;
}

/// Logs the full current image of `entry` (a SET record).
fn log_image(db: usize, entry: &Entry) {
    log::append(&Draft {
        kind: Kind::Set,
        db: db as u16,
        aux: entry.deadline(),
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

/// Gives `entry` a new deadline (0: none), keeping the expiry index in step.
fn set_deadline(expiring: &mut ExpiryIndex, entry: &mut Entry, deadline: u64) {
    if deadline != entry.deadline() {
        forget_deadline(expiring, entry);
        entry.set_deadline_raw(deadline);
        if deadline != 0 {
            expiring.insert(deadline, entry.key().into());
        }
    }
}

/// Removes `entry`'s deadline from its table's expiry index.
fn forget_deadline(expiring: &mut ExpiryIndex, entry: &Entry) {
    let deadline = entry.deadline();
    if deadline != 0 {
        expiring.remove(deadline, entry.key());
    }
}

/// One lock's worth of the keyspace: a table per database.
pub struct Shard {
    tables: Tables,
    hasher: RandomState,
    expired_keys: u64,
    /// Entries located in each log segment (all databases).
    live: LiveCounts,
    tier: Arc<Tier>,
    /// Reads that found the value in RAM / had to read it from disk.
    ram_hits: u64,
    disk_hits: u64,
    /// RAM of this shard as of its last census.
    census: MemoryCensus,
}

/// Where a part of the keyspace's RAM goes, as counted by walking it
/// ([`Keyspace::census_step`]): the index (table slots, entry headers,
/// keys, deadlines and the expiry index) and the values held in RAM.
/// Sizes are the bytes asked of the allocator, before its rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryCensus {
    pub index_bytes: u64,
    pub value_bytes: u64,
}

/// The databases' contents removed by FLUSHDB/FLUSHALL, to be dropped
/// outside any lock (in the background for ASYNC).
pub struct Flushed(#[allow(dead_code)] Vec<Table>);

impl Shard {
    fn new(db_count: usize, hasher: RandomState, tier: Arc<Tier>) -> Self {
        Shard {
            tables: Tables::new(db_count),
            hasher,
            expired_keys: 0,
            live: LiveCounts::default(),
            tier,
            ram_hits: 0,
            disk_hits: 0,
            census: MemoryCensus::default(),
        }
    }

    /// The live entry for `key`, deleting it first if it has expired, with
    /// its value in RAM. Records the access for LRU.
    ///
    /// The server reads cold values in before a command runs (outside any
    /// lock); if one went cold again meanwhile, it is read here, under the
    /// lock, and counted in `sync_reads`. A read that fails (a damaged
    /// record) panics: the command must not run on a value it could not
    /// see, and the connection is closed.
    pub fn get(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<EntryMut<'_>> {
        self.get_loaded(db, key, now_ms, true)
    }

    /// Like [`Shard::get`] without recording an access (OBJECT ENCODING).
    pub fn peek_loaded(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<EntryMut<'_>> {
        self.get_loaded(db, key, now_ms, false)
    }

    fn get_loaded(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
        touch: bool,
    ) -> Option<EntryMut<'_>> {
        let tier = self.tier.clone();
        let entry = lookup(
            &mut self.tables[db],
            &mut self.live,
            &mut self.expired_keys,
            &tier,
            db,
            key,
            now_ms,
        )?;
        if touch {
            entry.touch(now_ms);
            if entry.has(FETCHED) || entry.is_cold() {
                self.disk_hits += 1;
            } else {
                self.ram_hits += 1;
            }
        }
        entry.set_flag(FETCHED, false);
        if entry.is_cold() {
            tier.stats.sync_reads.fetch_add(1, Relaxed);
            match tier.read_value(entry.loc, entry.key()) {
                Ok(cold) => {
                    entry.install(&cold.bytes, cold.int);
                    tier.stats.cold_keys.fetch_sub(1, Relaxed);
                }
                Err(why) => panic!("cannot read the value of a key from disk: {why}"),
            }
        }
        Some(EntryMut {
            entry,
            live: &mut self.live,
        })
    }

    /// The entry for `key`, recording an access, without reading its value
    /// from disk (TOUCH, EXPIRE, PERSIST, SET without GET).
    pub fn touch(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        let entry = self.lookup(db, key, now_ms)?;
        entry.touch(now_ms);
        Some(entry)
    }

    /// The entry for `key` without reading its value from disk or
    /// recording an access (TTL, TYPE, OBJECT IDLETIME, MEMORY USAGE).
    pub fn peek(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        self.lookup(db, key, now_ms)
    }

    fn lookup(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        lookup(
            &mut self.tables[db],
            &mut self.live,
            &mut self.expired_keys,
            &self.tier,
            db,
            key,
            now_ms,
        )
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
        let hasher = &self.hasher;
        let table = &mut self.tables[db];
        match table.entries.entry(
            key.slot_hash(),
            |e| e.key() == key.bytes,
            |e| slot_hash(hasher.hash_one(e.key())),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut occupied) => {
                let entry = occupied.get_mut();
                if entry.is_cold() {
                    self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
                }
                forget_loc(&mut self.live, entry);
                entry.replace_value(value);
                entry.touch(now_ms);
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
                let inserted = vacant.insert(Entry::new(key.bytes, value, deadline, now_ms));
                log_image(db, inserted.get());
            }
        }
    }

    /// Removes `key`; an expired key counts as absent. The removed entry's
    /// value may be on disk only ([`Entry::is_cold`]); use
    /// [`Shard::take`] to have it in RAM.
    pub fn remove(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<Box<Entry>> {
        let table = &mut self.tables[db];
        let found = table
            .entries
            .find_entry(key.slot_hash(), |e| e.key() == key.bytes)
            .ok()?;
        let (mut entry, _) = found.remove();
        forget_deadline(&mut table.expiring, &entry);
        unlink(&mut self.live, &self.tier, &mut entry);
        log_del(db, entry.key());
        if entry.is_expired(now_ms) {
            self.expired_keys += 1;
            return None;
        }
        Some(entry)
    }

    /// A committed record landed at `loc`: a SET's entry (if it still holds
    /// that image — the last SET of a key in a group wins) takes the
    /// location.
    fn place(&mut self, record: &[u8], loc: u64) {
        let Some((db, key)) = tier::placed_set(record) else {
            return;
        };
        let hash = slot_hash(self.hasher.hash_one(key));
        // A cold entry must never point at a record that may not be
        // written yet (compaction puts values back in RAM before moving
        // them, so this only skips a SET that is not its image anyway).
        if let Some(entry) = self.tables[db].entries.find_mut(hash, |e| e.key() == key)
            && !entry.is_cold()
        {
            self.live.remove(entry.loc);
            entry.loc = loc;
            self.live.add(loc);
        }
    }

    /// Removes `key` and returns it with its value in RAM (RENAME, MOVE,
    /// GETDEL).
    pub fn take(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<Box<Entry>> {
        self.get_loaded(db, key, now_ms, false)?;
        self.remove(db, key, now_ms)
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

    /// Deletes up to `budget` keys whose deadline has passed, earliest
    /// first, and shrinks tables that deletions (of any kind) left sparse.
    fn expire_due(&mut self, now_ms: u64, budget: usize) -> usize {
        let mut removed = 0;
        for (db, table) in self.tables.iter_mut().enumerate() {
            table.shrink_if_sparse(&self.hasher);
            while removed < budget {
                let Some(key) = table.expiring.pop_due(now_ms) else {
                    break;
                };
                let hash = slot_hash(self.hasher.hash_one(&*key));
                if let Ok(found) = table.entries.find_entry(hash, |e| e.key() == &*key) {
                    let (mut entry, _) = found.remove();
                    unlink(&mut self.live, &self.tier, &mut entry);
                    log_del(db, &key);
                    removed += 1;
                }
            }
        }
        self.expired_keys += removed as u64;
        removed
    }
}

impl Shard {
    /// Counts this shard's RAM (see [`MemoryCensus`]); returns the entries
    /// visited.
    fn count_memory(&mut self) -> usize {
        let slot = std::mem::size_of::<Box<Entry>>() + 1;
        let expiry_item = std::mem::size_of::<(u64, Box<[u8]>)>();
        let mut census = MemoryCensus::default();
        let mut visited = 0;
        for table in self.tables.iter() {
            census.index_bytes += (table.entries.num_buckets() * slot) as u64;
            for entry in table.entries.iter() {
                let value = entry.value_len_in_ram();
                census.value_bytes += value as u64;
                census.index_bytes +=
                    (std::mem::size_of::<Entry>() + entry.data.len() - value) as u64;
                if entry.has(VOLATILE) {
                    census.index_bytes += (expiry_item + entry.key_len as usize) as u64;
                }
            }
            visited += table.entries.len();
        }
        self.census = census;
        visited
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
            Kind::FlushDb => drop(self.take_table(db)),
            Kind::FlushAll => {
                for db in 0..self.tables.len() {
                    drop(self.take_table(db));
                }
            }
            Kind::SwapDb => self.tables.swap(db, other),
            _ => unreachable!("not a database-level record: {kind:?}"),
        }
    }

    /// Empties database `db`'s table, returning its contents, with their
    /// locations uncounted.
    fn take_table(&mut self, db: usize) -> Table {
        let table = self.tables.take(db);
        for entry in table.entries.iter() {
            self.live.remove(entry.loc);
            if entry.is_cold() {
                self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
            }
        }
        table
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
            if self.guard.tier.tracking() {
                let shard = &mut *self.guard;
                log::group_close(log, Some(&mut |record, loc| shard.place(record, loc)));
            } else {
                log::group_close(log, None);
            }
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
        let Some(log) = self.log else {
            return;
        };
        let tracking = self.guards.first().is_some_and(|g| g.tier.tracking());
        if !tracking {
            log::group_close(log, None);
            return;
        }
        let (indices, guards) = (&self.indices, &mut self.guards);
        log::group_close(
            log,
            Some(&mut |record, loc| {
                if let Some((_, key)) = tier::placed_set(record) {
                    let hash = guards[0].hasher.hash_one(key);
                    let shard = (hash >> (64 - SHARD_BITS)) as usize;
                    if let Ok(position) = indices.binary_search(&shard) {
                        guards[position].place(record, loc);
                    }
                }
            }),
        );
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
    tier: Arc<Tier>,
    hasher: RandomState,
    /// The hash seed: secret, random per data directory, and kept in
    /// checkpoints so a key lands in the same shard after a restart.
    seed: u64,
    db_count: usize,
    /// Where cold values go: the log of changes (`appendonly yes`), or the
    /// cache store (`appendonly no`, see [`tier::CACHE_SEGMENT_BASE`]).
    log: OnceLock<Arc<Log>>,
    /// False when `log` is the cache store: commands then log nothing;
    /// only eviction and compaction append (value images).
    changes_logged: std::sync::atomic::AtomicBool,
    /// The shard the next [`Keyspace::census_step`] counts.
    census_cursor: std::sync::atomic::AtomicUsize,
}

impl Keyspace {
    /// A keyspace with a fresh random hash seed.
    pub fn new(db_count: usize) -> Self {
        Self::with_seed(db_count, random_seed())
    }

    pub fn with_seed(db_count: usize, seed: u64) -> Self {
        assert!(db_count > 0, "at least one database");
        let hasher = RandomState::with_seed(seed, SharedSeed::global_fixed());
        let tier = Arc::new(Tier::default());
        Keyspace {
            shards: (0..SHARD_COUNT)
                .map(|_| Mutex::new(Shard::new(db_count, hasher.clone(), tier.clone())))
                .collect(),
            tier,
            hasher,
            seed,
            db_count,
            log: OnceLock::new(),
            changes_logged: std::sync::atomic::AtomicBool::new(true),
            census_cursor: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// From now on every change is logged to `log`. Set once, after
    /// recovery has replayed the existing log.
    pub fn attach_log(&self, log: Arc<Log>) {
        self.tier.set_log_dir(log.dir());
        assert!(self.log.set(log).is_ok(), "log attached twice");
    }

    /// Attaches the cache store instead of a log (`appendonly no`): from
    /// now on values can leave RAM into `store`, whose records are never
    /// replayed; commands log nothing.
    pub fn attach_cache_store(&self, store: Arc<Log>) {
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

    /// Opens this thread's log group when changes are logged.
    fn open_group(&self) -> Option<&Log> {
        if !self.changes_logged.load(Relaxed) {
            return None;
        }
        self.open_tier_group()
    }

    /// Opens this thread's log group for value images that let values
    /// leave RAM (eviction, compaction): into the log or the cache store.
    fn open_tier_group(&self) -> Option<&Log> {
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

    /// Locks the shards `indices` (ascending).
    /// Locks shards for eviction: what it appends (images of values about
    /// to leave RAM) goes to the log or the cache store.
    fn lock_indices_for_tier(&self, indices: Vec<usize>) -> ShardSet<'_> {
        debug_assert!(indices.is_sorted());
        let guards = indices.iter().map(|&i| self.shards[i].lock()).collect();
        ShardSet {
            indices,
            guards,
            log: self.open_tier_group(),
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

    /// (reads served from RAM, reads that needed the disk), over all
    /// shards: the RAM hit ratio.
    pub fn value_hits(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(ram, disk), shard| {
            let shard = shard.lock();
            (ram + shard.ram_hits, disk + shard.disk_hits)
        })
    }

    /// (bytes of the log's segments, estimated bytes of records some
    /// entry is located at): a segment's live share is its located entries
    /// over its records.
    pub fn log_live_bytes(&self) -> (u64, u64) {
        let Some(log) = self.log() else {
            return (0, 0);
        };
        let segments = log.segments();
        let located = self.located_segments();
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
        let mut guard = ShardGuard {
            guard: self.shards[key.shard()].lock(),
            log: self.open_tier_group(),
        };
        guard.relocate(db_count, db, key, loc, payload)
    }

    /// Recounts the RAM of shards in turn, continuing where the last call
    /// stopped, until about `entries_max` entries were visited (at least
    /// one shard). Called a few times a second, a full pass takes
    /// (keys / entries_max) calls: the figures of [`Keyspace::memory_census`]
    /// are that old at most, at a bounded cost per call.
    pub fn census_step(&self, entries_max: usize) {
        let mut visited = 0;
        for _ in 0..SHARD_COUNT {
            let index = self.census_cursor.fetch_add(1, Relaxed) % SHARD_COUNT;
            visited += self.shards[index].lock().count_memory();
            if visited >= entries_max {
                break;
            }
        }
    }

    /// The keyspace's RAM as last counted, shard by shard.
    pub fn memory_census(&self) -> MemoryCensus {
        self.shards
            .iter()
            .fold(MemoryCensus::default(), |sum, shard| {
                let census = shard.lock().census;
                MemoryCensus {
                    index_bytes: sum.index_bytes + census.index_bytes,
                    value_bytes: sum.value_bytes + census.value_bytes,
                }
            })
    }

    /// Keys in all databases.
    pub fn total_keys(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                let shard = s.lock();
                shard
                    .tables
                    .iter()
                    .map(|t| t.entries.len() as u64)
                    .sum::<u64>()
            })
            .sum()
    }

    /// Entries located in each log segment, over all shards.
    pub fn located_segments(&self) -> std::collections::BTreeMap<u64, u64> {
        let mut total = std::collections::BTreeMap::new();
        for shard in self.shards.iter() {
            for (segment, count) in shard.lock().live.iter() {
                *total.entry(segment).or_default() += count;
            }
        }
        total
    }

    pub fn expired_keys(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().expired_keys).sum()
    }

    /// Empties one database. The caller drops the result outside the lock.
    pub fn flush_db(&self, db: usize) -> Flushed {
        let mut all = self.lock_all();
        log_db_change(Kind::FlushDb, db, 0);
        Flushed(all.guards.iter_mut().map(|s| s.take_table(db)).collect())
    }

    pub fn flush_all(&self) -> Flushed {
        let mut all = self.lock_all();
        log_db_change(Kind::FlushAll, 0, 0);
        let mut removed = Vec::new();
        for shard in all.guards.iter_mut() {
            for db in 0..shard.tables.len() {
                removed.push(shard.take_table(db));
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
    /// Least recently used first (`lru`; also `lfu`, approximated by
    /// recency: see docs/tiering.md).
    Idle,
    Random,
    /// Nearest deadline first (`volatile-ttl`).
    Ttl,
}

/// What eviction did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Evicted {
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
}

/// Outcome of putting a value read from disk back into its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Installed {
    /// Kept in RAM: it is being read often.
    Promoted,
    /// In RAM for the coming command; [`Keyspace::release_transient`]
    /// takes it out again.
    Transient,
    /// The entry changed meanwhile (written, deleted, read in by another
    /// connection): nothing to do.
    Stale,
}

/// Shards whose samples one eviction step pools, so the oldest values of
/// several shards are compared (a shard alone may hold only fresh ones).
const EVICTION_WINDOW_SHARDS: usize = 8;
/// Windows of only just-touched values one eviction call passes over
/// before taking from them (approximate LRU with a one-second clock).
const FRESH_WINDOWS_PASSED_MAX: usize = 8;

/// Tiering and eviction.
impl Keyspace {
    /// The location of `key`'s value when it is only on disk.
    pub fn cold_loc(&self, db: usize, key: KeyRef, now_ms: u64) -> Option<u64> {
        self.lock(key).peek(db, key, now_ms)?.cold_loc()
    }

    /// Puts a value read from `loc` back into `key`'s entry if it is still
    /// cold there. A value read twice within [`PROMOTE_WINDOW_S`] stays;
    /// otherwise it is only lent to the coming command, so a scan does not
    /// push the hot set out.
    pub fn install(
        &self,
        db: usize,
        key: KeyRef,
        loc: u64,
        value: &tier::ColdValue,
        now_ms: u64,
    ) -> Installed {
        let mut shard = self.lock(key);
        let Some(entry) = shard.peek(db, key, now_ms) else {
            return Installed::Stale;
        };
        if entry.cold_loc() != Some(loc) {
            return Installed::Stale;
        }
        let promote = entry.has(SEEN) && entry.idle_s(now_ms) <= PROMOTE_WINDOW_S as u64;
        entry.install(&value.bytes, value.int);
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

    /// Takes a value lent by [`Keyspace::install`] out of RAM again, if
    /// nothing changed it since.
    pub fn release_transient(&self, db: usize, key: KeyRef, loc: u64, now_ms: u64) {
        let mut shard = self.lock(key);
        if let Some(entry) = shard.peek(db, key, now_ms)
            && entry.has(TRANSIENT)
            && entry.loc == loc
            && !entry.is_cold()
        {
            entry.drop_value();
            self.tier.stats.cold_keys.fetch_add(1, Relaxed);
        }
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
                let mut indices: Vec<usize> = (window..window + EVICTION_WINDOW_SHARDS)
                    .map(|i| (start + i) % SHARD_COUNT)
                    .collect();
                indices.sort_unstable();
                let mut set = self.lock_indices_for_tier(indices);
                pool.clear();
                for position in 0..set.guards.len() {
                    let before = pool.len();
                    set.guards[position].sample(
                        policy,
                        samples,
                        written_pos,
                        now_ms,
                        &mut done,
                        &mut pool,
                    );
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
                    set.guards[position].evict_at(policy, db, bucket, &mut done);
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
    /// bucket); the higher the score, the sooner it should go.
    fn sample(
        &self,
        policy: EvictionPolicy,
        samples: usize,
        written_pos: u64,
        now_ms: u64,
        done: &mut Evicted,
        out: &mut Vec<(u64, usize, usize)>,
    ) {
        let dbs: Vec<usize> = (0..self.tables.len())
            .filter(|&db| !self.tables[db].entries.is_empty())
            .collect();
        if dbs.is_empty() {
            return;
        }
        let db = dbs[(random_u64() as usize) % dbs.len()];
        let table = &self.tables[db];
        let buckets = table.entries.num_buckets();
        let samples = samples.max(1);
        let mut seen = 0;
        let whole = buckets <= 64;
        let first = random_u64() as usize;
        let probes = if whole { buckets } else { samples * 8 };
        for probe in 0..probes {
            if seen == samples && !whole {
                break;
            }
            let index = if whole {
                (first + probe) % buckets
            } else {
                (random_u64() as usize) % buckets
            };
            let Some(entry) = table.entries.get_bucket(index) else {
                continue;
            };
            let score = match policy {
                EvictionPolicy::Values => {
                    if entry.is_cold() {
                        continue;
                    }
                    if entry.loc != NO_LOC && entry.loc >= written_pos {
                        done.unwritten += 1;
                        continue;
                    }
                    if entry.has(TRANSIENT) {
                        u64::MAX
                    } else {
                        entry.idle_s(now_ms)
                    }
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
                        KeyRank::Random => random_u64(),
                        KeyRank::Ttl => u64::MAX - entry.deadline(),
                    }
                }
            };
            seen += 1;
            out.push((score, db, index));
        }
    }

    /// Evicts the entry in `bucket` of `db`'s table (sampled under this
    /// same lock hold).
    fn evict_at(&mut self, policy: EvictionPolicy, db: usize, bucket: usize, done: &mut Evicted) {
        let table = &mut self.tables[db];
        match policy {
            EvictionPolicy::Values => {
                let entry = table.entries.get_bucket_mut(bucket).expect("sampled");
                if entry.is_cold() {
                    // Sampled twice (samples are drawn with replacement)
                    // and already evicted by the first draw.
                    return;
                }
                if entry.loc == NO_LOC {
                    // Dirty: its image goes to the log now; the commit
                    // locates it, and a later step can drop it.
                    log_image(db, entry);
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
                let Ok(entry) = table.entries.get_bucket_entry(bucket) else {
                    return;
                };
                let (mut entry, _) = entry.remove();
                forget_deadline(&mut table.expiring, &entry);
                unlink(&mut self.live, &self.tier, &mut entry);
                log_del(db, entry.key());
                done.bytes += entry.memory_bytes() as u64;
                done.keys += 1;
            }
        }
    }

    /// Compaction: if the entry of `key` (in `db`, or in another database
    /// after SWAPDB) still has its value at `loc`, appends that value again
    /// (`payload`: the record's value, for an entry whose value is on disk
    /// only); the commit gives the entry the new location.
    ///
    /// A cold value is put back in RAM first: its new record is not written
    /// when the commit locates it, and a cold entry must only ever point at
    /// written records. Eviction moves it out again once it is written.
    pub(crate) fn relocate(
        &mut self,
        keyspace_dbs: usize,
        db: usize,
        key: KeyRef,
        loc: u64,
        payload: &[u8],
    ) -> bool {
        let order = std::iter::once(db).chain((0..keyspace_dbs).filter(|&d| d != db));
        for d in order {
            let Some(entry) = self.tables[d]
                .entries
                .find_mut(key.slot_hash(), |e| e.key() == key.bytes)
            else {
                continue;
            };
            if entry.loc != loc {
                continue;
            }
            if entry.is_cold() {
                let int = entry.is_int();
                entry.install(payload, int);
                self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
            }
            log_image(d, entry);
            return true;
        }
        false
    }

    /// Recovery: `key` of `db` exists with its value on disk at `loc`.
    pub(crate) fn insert_cold(
        &mut self,
        db: usize,
        key: KeyRef,
        deadline: u64,
        int: bool,
        loc: u64,
        now_ms: u64,
    ) {
        self.remove(db, key, now_ms);
        let hasher = &self.hasher;
        let table = &mut self.tables[db];
        if deadline != 0 {
            table.expiring.insert(deadline, key.bytes.into());
        }
        table.entries.insert_unique(
            key.slot_hash(),
            Entry::new_cold(key.bytes, deadline, int, loc, now_ms),
            |e| slot_hash(hasher.hash_one(e.key())),
        );
        self.live.add(loc);
        self.tier.stats.cold_keys.fetch_add(1, Relaxed);
    }

    /// Recovery: the replayed SET of `key` is at `loc` in the log.
    pub(crate) fn locate(&mut self, db: usize, key: KeyRef, loc: u64) {
        let hash = key.slot_hash();
        if let Some(entry) = self.tables[db]
            .entries
            .find_mut(hash, |e| e.key() == key.bytes)
            && !entry.is_cold()
        {
            self.live.remove(entry.loc);
            entry.loc = loc;
            self.live.add(loc);
        }
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
