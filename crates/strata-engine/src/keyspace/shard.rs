//! One lock's worth of the keyspace ([`Shard`]): a table per database, its
//! expiry index, the log records of every change made through it, and
//! the counts INFO reports (hits, expired keys, the memory census).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use std::borrow::Borrow;

use crate::keyspace::entry::{
    Entry, EntryMut, FETCHED, FieldsDue, VOLATILE, forget_loc, log_image,
};
use crate::keyspace::key::{KeyHasher, KeyRef};
use crate::keyspace::table::{ExpiryIndex, Table, Tables};
use crate::storage::group::GroupSlot;
use crate::storage::record::{Draft, FLAG_EMPTIED, FLAG_EXPIRED, FLAG_NEW, Kind};
use crate::tiering::tier::{self, LiveCounts, Tier};
use crate::types::collection::{Collection, Typed};
use crate::types::hash::{self, SharedLimits};
use crate::types::value::{Value, ValueType};

/// The live entry for `key` in `table`, removing (and logging) it first if
/// it has expired.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lookup<'t>(
    table: &'t mut Table,
    live: &mut LiveCounts,
    expired_keys: &mut u64,
    tier: &Tier,
    group: &mut GroupSlot,
    db: usize,
    key: KeyRef,
    now_ms: u64,
) -> Option<&'t mut Entry> {
    let found = table
        .entries
        .find_entry(key.slot_hash(), |e| e.key() == key.bytes)?;
    if !found.get().is_expired(now_ms) {
        return Some(found.into_mut());
    }
    if expiry_paused(now_ms) {
        // Logically expired, deleted once the pause ends.
        return None;
    }
    let mut expired = found.remove();
    forget_deadline(&mut table.expiring, &expired);
    unlink(live, tier, &mut expired);
    log_del_for(group, FLAG_EXPIRED, db, expired.key());
    *expired_keys += 1;
    None
}

/// An entry leaves its table: its location no longer counts.
pub(crate) fn unlink(live: &mut LiveCounts, tier: &Tier, entry: &mut Entry) {
    if entry.is_cold() {
        tier.stats.cold_keys.fetch_sub(1, Relaxed);
    }
    live.remove(entry.loc_raw());
}

/// Logs that `key` no longer exists in `db`.
pub(crate) fn log_del(group: &mut GroupSlot, db: usize, key: &[u8]) {
    log_del_as(group, db, key, 0);
}

/// [`log_del`] of a deletion made for `cause` (`FLAG_EXPIRED`,
/// `FLAG_EVICTED` …: why the data changed, for the change feed).
pub(crate) fn log_del_for(group: &mut GroupSlot, cause: u8, db: usize, key: &[u8]) {
    let before = group.add_cause(cause);
    log_del(group, db, key);
    group.restore_cause(before);
}

/// [`log_del`], `aux` 1 when the deletion is an UNLINK (see
/// [`Shard::remove_unlinked`]).
fn log_del_as(group: &mut GroupSlot, db: usize, key: &[u8], aux: u64) {
    group.append(&Draft {
        kind: Kind::Del,
        db: db as u16,
        aux,
        flags: 0,
        value_type: 0,
        key,
        payload: &[],
    });
}

/// Logs a database-level change (FLUSHDB, FLUSHALL, SWAPDB).
pub(crate) fn log_db_change(group: &mut GroupSlot, kind: Kind, db: usize, aux: u64) {
    group.append(&Draft {
        kind,
        db: db as u16,
        aux,
        flags: 0,
        value_type: 0,
        key: &[],
        payload: &[],
    });
}

/// Gives `entry` a new deadline (0: none), keeping the expiry index in step.
pub(crate) fn set_deadline(expiring: &mut ExpiryIndex, entry: &mut Entry, deadline: u64) {
    if deadline != entry.deadline() {
        forget_deadline(expiring, entry);
        entry.set_deadline_raw(deadline);
        if deadline != 0 {
            expiring.insert(deadline, entry.key().into());
        }
    }
}

/// Removes `entry`'s deadline from its table's expiry index.
pub(crate) fn forget_deadline(expiring: &mut ExpiryIndex, entry: &Entry) {
    let deadline = entry.deadline();
    if deadline != 0 {
        expiring.remove(deadline, entry.key());
    }
}

/// Until when (Unix ms) clients are paused (CLIENT PAUSE): meanwhile
/// expired keys read as absent but are not deleted, by lookups or the
/// active cycle, so a paused server's dataset (and its log) does not
/// change, as Redis does it. Process-wide, like the pause; 0: none.
static EXPIRY_PAUSED_UNTIL_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Pauses the deletion of expired keys until `until_ms` (0: resumes now).
pub fn pause_expiry_until(until_ms: u64) {
    EXPIRY_PAUSED_UNTIL_MS.store(until_ms, Relaxed);
}

pub(crate) fn expiry_paused(now_ms: u64) -> bool {
    EXPIRY_PAUSED_UNTIL_MS.load(Relaxed) > now_ms || crate::keyspace::replica_expiry::following()
}

/// A value on disk only could not be read back (a damaged record, an I/O
/// error): the command that needed it must fail, and nothing else does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdReadError {
    pub key: Vec<u8>,
    pub why: String,
}

impl std::fmt::Display for ColdReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "could not read the value of '{}' from disk: {}",
            String::from_utf8_lossy(&self.key),
            self.why
        )
    }
}

/// Why a command for one type could not have a key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetError {
    /// The key holds another type (Redis' WRONGTYPE).
    WrongType,
    ColdRead(ColdReadError),
}

impl From<ColdReadError> for GetError {
    fn from(error: ColdReadError) -> Self {
        GetError::ColdRead(error)
    }
}

/// One lock's worth of the keyspace: a table per database.
pub struct Shard {
    pub(crate) tables: Tables,
    pub(crate) hasher: KeyHasher,
    pub(crate) expired_keys: u64,
    /// Entries located in each log segment (all databases).
    pub(crate) live: LiveCounts,
    pub(crate) tier: Arc<Tier>,
    /// Reads that found the value in RAM / had to read it from disk.
    pub(crate) ram_hits: u64,
    pub(crate) disk_hits: u64,
    /// RAM of this shard as of its last census.
    pub(crate) census: MemoryCensus,
    /// Bumped by every lock that may change the shard
    /// (`Keyspace::take_shard`), and by active expiry and value eviction
    /// when they changed it: the census skips a shard whose count is the
    /// one it last saw, so an idle server's census visits no entry, and
    /// eviction skips a table it found nothing in (`FruitlessRun`).
    pub(crate) touched: u64,
    /// `touched` at the last census.
    pub(crate) census_seen: u64,
    /// When hashes convert from packed to table (CONFIG SET changes them).
    pub(crate) hash_limits: Arc<SharedLimits>,
    /// Hashes with field deadlines, for active expiry.
    pub(crate) fields_due: FieldsDue,
    /// Shard 0 only: server state kept beside the keyspace, by name
    /// ([`Kind::Meta`] records; [`Keyspace::update_meta_in`](crate::Keyspace::update_meta_in)).
    pub(crate) meta: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    /// The log group of the lock set that handed this shard out, which
    /// every change made through it appends to (`storage::group`).
    pub(crate) group: GroupSlot,
}

/// Where a part of the keyspace's RAM goes, as counted by walking it
/// ([`Keyspace::census_step`](crate::Keyspace::census_step)): the index (table slots, entry headers,
/// keys, deadlines and the expiry index) and the values held in RAM.
/// Sizes are the bytes asked of the allocator, before its rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryCensus {
    pub index_bytes: u64,
    pub value_bytes: u64,
}

/// The databases' contents removed by FLUSHDB/FLUSHALL, to be dropped
/// outside any lock (in the background for ASYNC).
pub struct Flushed(#[allow(dead_code)] pub(crate) Vec<Table>);

impl Flushed {
    /// The keys it holds (what a flush counts as lazily freed objects).
    pub fn keys(&self) -> u64 {
        self.0.iter().map(|t| t.entries.len() as u64).sum()
    }
}

impl Shard {
    pub(crate) fn new(
        db_count: usize,
        hasher: KeyHasher,
        tier: Arc<Tier>,
        hash_limits: Arc<SharedLimits>,
    ) -> Self {
        Shard {
            hash_limits,
            fields_due: FieldsDue::new(),
            tables: Tables::new(db_count),
            hasher,
            expired_keys: 0,
            live: LiveCounts::default(),
            tier,
            ram_hits: 0,
            disk_hits: 0,
            census: MemoryCensus::default(),
            touched: 1,
            census_seen: 0,
            meta: std::collections::BTreeMap::new(),
            group: GroupSlot::default(),
        }
    }

    /// Sets (an empty image: removes) the metadata item `name`: shard 0
    /// only, by recovery and [`Keyspace::update_meta_in`](crate::Keyspace::update_meta_in).
    pub(crate) fn set_meta(&mut self, name: &[u8], image: &[u8]) {
        if image.is_empty() {
            self.meta.remove(name);
        } else {
            self.meta.insert(name.to_vec(), image.to_vec());
        }
    }

    /// The live entry for `key`, deleting it first if it has expired, with
    /// its value in RAM. Records the access for LRU.
    ///
    /// The server reads cold values in before a command runs (outside any
    /// lock); if one went cold again meanwhile, it is read here, under the
    /// lock, and counted in `sync_reads`. A read that fails (a damaged
    /// record) is an error for the command, which must not run on a value
    /// it could not see; the entry stays as it was.
    pub fn get(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
    ) -> Result<Option<EntryMut<'_>>, ColdReadError> {
        self.get_loaded(db, key, now_ms, true)
    }

    /// [`Shard::get`] for a command on type `C`: a key holding another
    /// type is [`GetError::WrongType`], decided from the entry (a cold
    /// value is not read for that).
    pub fn get_as<C: Typed>(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
    ) -> Result<Option<EntryMut<'_>>, GetError> {
        self.get_typed(db, key, now_ms, true, Some(C::TYPE))
    }

    /// [`Shard::take`] for a string command (GETDEL).
    pub fn take_string(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
    ) -> Result<Option<Entry>, GetError> {
        if self
            .lookup(db, key, now_ms)
            .is_some_and(|e| e.value_type() != ValueType::String)
        {
            return Err(GetError::WrongType);
        }
        Ok(self.take(db, key, now_ms)?)
    }

    /// Like [`Shard::get`] without recording an access (OBJECT ENCODING).
    pub fn peek_loaded(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
    ) -> Result<Option<EntryMut<'_>>, ColdReadError> {
        self.get_loaded(db, key, now_ms, false)
    }

    pub(crate) fn get_loaded(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
        touch: bool,
    ) -> Result<Option<EntryMut<'_>>, ColdReadError> {
        // Without lazy field expiry: replay and the engine's own readers
        // must see a hash as its records left it (a field that expired
        // by the clock may have been persisted by a later record).
        match self.get_typed_now(db, key, now_ms, touch, None) {
            Ok(found) => Ok(found),
            Err(GetError::ColdRead(error)) => Err(error),
            Err(GetError::WrongType) => unreachable!("no type was asked for"),
        }
    }

    /// The entry for `key` with its value in RAM; when `want` is given,
    /// an entry of another type is [`GetError::WrongType`], decided
    /// before any disk read.
    fn get_typed(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
        touch: bool,
        want: Option<ValueType>,
    ) -> Result<Option<EntryMut<'_>>, GetError> {
        // Commands' typed access (get_as, change_as): some hash of this
        // shard has a field past its deadline; if it is this key's, its
        // expired fields go now (Redis 7.4's lazy expiry).
        // (Not on a replica: its primary's stream deletes them.)
        if self.fields_due.first().is_some_and(|due| due.0 <= now_ms) && !expiry_paused(now_ms) {
            self.expire_hash_fields(db, key, now_ms);
        }
        self.get_typed_now(db, key, now_ms, touch, want)
    }

    /// Lazy expiry of hash fields, as Redis 7.4 has it: a command that
    /// reaches a hash removes its fields whose deadline has passed (logged
    /// as expiry, so `hexpired` is told) and the key when none is left
    /// (`del`), rather than only hiding them until the cron comes.
    fn expire_hash_fields(&mut self, db: usize, key: KeyRef, now_ms: u64) {
        let Ok(Some(entry)) = self.get_typed_now(db, key, now_ms, false, Some(ValueType::Hash))
        else {
            return;
        };
        let due = (entry.value().hash())
            .and_then(|hash| hash.next_deadline())
            .is_some_and(|deadline| deadline <= now_ms);
        if !due {
            return;
        }
        let before = entry.group.add_cause(FLAG_EXPIRED);
        let left = entry.change_hash(db, &[], now_ms).len;
        if left == 0 {
            // Deleted by the expiry (the feed tells `del` after `hexpired`).
            self.remove(db, key, now_ms);
        }
        self.group.restore_cause(before);
    }

    /// [`Shard::get_typed`] without lazy field expiry.
    fn get_typed_now(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
        touch: bool,
        want: Option<ValueType>,
    ) -> Result<Option<EntryMut<'_>>, GetError> {
        let tier: &Tier = &self.tier;
        let Some(entry) = lookup(
            &mut self.tables[db],
            &mut self.live,
            &mut self.expired_keys,
            tier,
            &mut self.group,
            db,
            key,
            now_ms,
        ) else {
            return Ok(None);
        };
        if want.is_some_and(|want| entry.value_type() != want) {
            return Err(GetError::WrongType);
        }
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
            let limits = self.hash_limits.get();
            match tier
                .read_value(entry.loc_raw(), entry.key())
                .and_then(|cold| entry.install(&cold.bytes, cold.int, limits))
            {
                Ok(()) => {
                    tier.stats.cold_keys.fetch_sub(1, Relaxed);
                }
                Err(why) => {
                    return Err(GetError::ColdRead(ColdReadError {
                        key: entry.key().to_vec(),
                        why,
                    }));
                }
            }
        }
        Ok(Some(EntryMut {
            entry,
            live: &mut self.live,
            limits: self.hash_limits.get(),
            fields_due: &mut self.fields_due,
            group: &mut self.group,
        }))
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

    pub(crate) fn lookup(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<&mut Entry> {
        lookup(
            &mut self.tables[db],
            &mut self.live,
            &mut self.expired_keys,
            &self.tier,
            &mut self.group,
            db,
            key,
            now_ms,
        )
    }

    /// Whether `key` exists in `db` and has not expired, without removing
    /// it if it has (WATCH tells a key that expired apart from one that
    /// was deleted).
    pub fn is_live(&self, db: usize, key: KeyRef, now_ms: u64) -> Option<bool> {
        self.find(db, key).map(|entry| !entry.is_expired(now_ms))
    }

    /// Marks `key`'s int-encoded string as a copy (COPY made it): Redis'
    /// copy of a small integer is an object of its own, not one of its
    /// shared integers, so OBJECT REFCOUNT says 1 ([`Entry::is_copied_int`]).
    pub fn mark_copied(&mut self, db: usize, key: KeyRef, now_ms: u64) {
        if let Some(entry) = self.lookup(db, key, now_ms)
            && entry.has(crate::keyspace::entry::INT)
        {
            entry.set_flag(crate::keyspace::entry::RAW, true);
        }
    }

    /// Marks `key`'s string as `raw` for OBJECT ENCODING, whatever its
    /// length: what BITOP stores, as Redis builds it, is no `embstr`.
    pub fn mark_raw(&mut self, db: usize, key: KeyRef, now_ms: u64) {
        use crate::keyspace::entry::{INT, RAW};
        if let Some(entry) = self.lookup(db, key, now_ms)
            && entry.value_type() == ValueType::String
            && !entry.has(INT)
        {
            entry.set_flag(RAW, true);
        }
    }

    pub fn contains(&mut self, db: usize, key: KeyRef, now_ms: u64) -> bool {
        self.lookup(db, key, now_ms).is_some()
    }

    /// Creates `key` (absent) as a string of `offset` zero bytes followed
    /// by `bytes` (SETRANGE, SETBIT, BITFIELD on a new key), logged as one
    /// SETRANGE record, which replay and replicas apply to a missing key
    /// by creating it: a write far into a new key costs its arguments in
    /// the log, not the zeros (a SETRANGE at 512 MB used to log, copy and
    /// CRC a 512 MB image while holding the shard), and it is one change,
    /// as Redis counts it (`rdb_changes_since_last_save`). A key still
    /// stored though expired (expiry paused) is replaced by an empty SET
    /// first, so that replay does not meet the old one.
    /// Returns the value's length.
    pub fn create_at(
        &mut self,
        db: usize,
        key: KeyRef,
        offset: usize,
        bytes: &[u8],
        now_ms: u64,
    ) -> usize {
        let stored = self.tables[db]
            .entries
            .find(key.slot_hash(), |e| e.key() == key.bytes)
            .is_some();
        if stored {
            self.set(db, key, Value::owned(Vec::new()), None, false, now_ms);
        } else {
            self.store(
                db,
                key,
                Value::owned(Vec::new()),
                (None, false),
                now_ms,
                |_, _, _| {},
            );
        }
        match self.get_as::<crate::types::collection::Str>(db, key, now_ms) {
            Ok(Some(entry)) => entry.write_at(db, offset, bytes),
            _ => unreachable!("a string value was just set in RAM"),
        }
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
        self.store(db, key, value, (expire_at_ms, keep_ttl), now_ms, log_image);
    }

    /// [`Shard::set`], the change logged by `log` (told the database and
    /// the entry as stored) instead of as the value's image. A key new to
    /// the table is logged as created (`FLAG_NEW`).
    fn store(
        &mut self,
        db: usize,
        key: KeyRef,
        value: Value,
        (expire_at_ms, keep_ttl): (Option<u64>, bool),
        now_ms: u64,
        log: impl FnOnce(&mut GroupSlot, usize, &Entry),
    ) {
        // A hash arriving whole (created, renamed, copied, moved, loaded)
        // with field deadlines joins the active expiry queue.
        if let Value::Hash(image) = &value
            && let Some(deadline) =
                hash::HashRef::Packed(hash::Packed::from_image(image)).next_deadline()
        {
            self.fields_due
                .insert((deadline, db as u16, key.bytes.into()));
        }
        let hasher = &self.hasher;
        let limits = self.hash_limits.get();
        let table = &mut self.tables[db];
        match table.entries.entry(
            key.slot_hash(),
            |e| e.key() == key.bytes,
            |e| hasher.table_hash(e.key()),
        ) {
            crate::keyspace::table::Slot::Occupied(mut occupied) => {
                let entry = occupied.get_mut();
                if entry.is_cold() {
                    self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
                }
                forget_loc(&mut self.live, entry);
                entry.replace_value(value, limits);
                entry.touch(now_ms);
                let expired = entry.is_expired(now_ms);
                if !keep_ttl || expired {
                    set_deadline(&mut table.expiring, entry, expire_at_ms.unwrap_or(0));
                }
                if expired {
                    self.expired_keys += 1;
                }
                log(&mut self.group, db, entry);
            }
            crate::keyspace::table::Slot::Vacant(vacant) => {
                let deadline = if keep_ttl {
                    0
                } else {
                    expire_at_ms.unwrap_or(0)
                };
                if deadline != 0 {
                    table.expiring.insert(deadline, key.bytes.into());
                }
                let loc_field = self.tier.locates(value.image_len());
                let inserted = vacant.insert(Entry::new(
                    key.bytes, value, deadline, limits, now_ms, loc_field,
                ));
                let before = self.group.add_cause(FLAG_NEW);
                log(&mut self.group, db, inserted);
                self.group.restore_cause(before);
            }
        }
    }

    /// Removes `key`; an expired key counts as absent. The removed entry's
    /// value may be on disk only ([`Entry::is_cold`]); use
    /// [`Shard::take`] to have it in RAM.
    pub fn remove(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<Entry> {
        self.remove_logged_as(db, key, now_ms, 0)
    }

    /// [`Shard::remove`], logged as an UNLINK (the DEL record's `aux` is
    /// 1): replayed alike, sent to a replica as UNLINK, as Redis sends
    /// UNLINK and SPOP of a whole set under `lazyfree-lazy-server-del`.
    pub fn remove_unlinked(&mut self, db: usize, key: KeyRef, now_ms: u64) -> Option<Entry> {
        self.remove_logged_as(db, key, now_ms, 1)
    }

    fn remove_logged_as(&mut self, db: usize, key: KeyRef, now_ms: u64, aux: u64) -> Option<Entry> {
        let table = &mut self.tables[db];
        let found = table
            .entries
            .find_entry(key.slot_hash(), |e| e.key() == key.bytes)?;
        let mut entry = found.remove();
        forget_deadline(&mut table.expiring, &entry);
        unlink(&mut self.live, &self.tier, &mut entry);
        if entry.is_expired(now_ms) {
            log_del_for(&mut self.group, FLAG_EXPIRED, db, entry.key());
            self.expired_keys += 1;
            return None;
        }
        log_del_as(&mut self.group, db, entry.key(), aux);
        Some(entry)
    }

    /// Deletes `key`, a collection the change just made to it emptied (see
    /// `record::FLAG_EMPTIED`).
    pub fn remove_emptied(&mut self, db: usize, key: KeyRef, now_ms: u64) {
        let before = self.group.add_cause(FLAG_EMPTIED);
        self.remove(db, key, now_ms);
        self.group.restore_cause(before);
    }

    /// A committed record landed at `loc`: a SET's entry takes the
    /// location; a change to part of a value (SETRANGE, HASH_PUT,
    /// HASH_DEL) later in the same group makes that image stale again, so
    /// the entry loses it. Records are placed in log order, so the entry
    /// ends with the location of its current image or none.
    pub(crate) fn place(&mut self, record: &[u8], loc: u64) {
        let Some(tier::Placed {
            db,
            key,
            image,
            payload_len,
        }) = tier::placed(record)
        else {
            return;
        };
        // Only values that get a location at all (every one under tiering,
        // big ones with the log on); a change to part of a value makes any
        // entry's image stale whatever its size.
        if image && !self.tier.locates(payload_len) {
            return;
        }
        let hash = self.hasher.table_hash(key);
        // A cold entry must never point at a record that may not be
        // written yet (compaction puts values back in RAM before moving
        // them, so this only skips a SET that is not its image anyway).
        if let Some(entry) = self.tables[db].entries.find_mut(hash, |e| e.key() == key)
            && !entry.is_cold()
        {
            self.live.remove(entry.loc_raw());
            if image {
                entry.set_loc(loc);
                self.live.add(loc);
            } else {
                entry.set_loc(tier::NO_LOC);
            }
        }
    }

    /// Removes `key` and returns it with its value in RAM (RENAME, MOVE,
    /// GETDEL).
    pub fn take(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
    ) -> Result<Option<Entry>, ColdReadError> {
        if self.get_loaded(db, key, now_ms, false)?.is_none() {
            return Ok(None);
        }
        Ok(self.remove(db, key, now_ms))
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
        self.group.append(&Draft {
            kind: Kind::Expire,
            db: db as u16,
            aux: deadline,
            flags: 0,
            value_type: 0,
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

    pub(crate) fn volatile_len(&self, db: usize) -> usize {
        self.tables[db].expiring.len()
    }

    /// Deletes up to `budget` keys whose deadline has passed, earliest
    /// first, and shrinks tables that deletions (of any kind) left sparse.
    pub(crate) fn expire_due(&mut self, now_ms: u64, budget: usize) -> usize {
        let mut removed = 0;
        let mut shrunk = false;
        for (db, table) in self.tables.iter_mut().enumerate() {
            while removed < budget {
                let Some(key) = table.expiring.pop_due(now_ms) else {
                    break;
                };
                let hash = self.hasher.table_hash(&key);
                if let Some(found) = table.entries.find_entry(hash, |e| e.key() == &*key) {
                    let mut entry = found.remove();
                    unlink(&mut self.live, &self.tier, &mut entry);
                    log_del_for(&mut self.group, FLAG_EXPIRED, db, &key);
                    removed += 1;
                }
            }
            // After this pass's deletions: a table this pass emptied is
            // not looked at again (its shard's hint says nothing is due).
            shrunk |= table.shrink_if_sparse(&self.hasher);
        }
        self.expired_keys += removed as u64;
        let removed = removed + self.expire_fields_due(now_ms, budget.saturating_sub(removed));
        if removed != 0 || shrunk {
            self.touched = self.touched.wrapping_add(1);
        }
        removed
    }

    /// The earliest deadline of a key or a hash field here (`u64::MAX`:
    /// none): active expiry's hint (`ShardHints::expiry`).
    pub(crate) fn next_due_ms(&self) -> u64 {
        let first_key = self
            .tables
            .iter()
            .filter_map(|t| t.expiring.first_deadline());
        let first_field = self.fields_due.first().map(|due| due.0);
        first_key.chain(first_field).min().unwrap_or(u64::MAX)
    }

    /// Removes expired fields from up to `budget` hashes whose earliest
    /// field deadline has passed (and the keys of hashes left empty).
    /// A hash whose value is on disk only keeps its item for later: its
    /// expired fields are invisible meanwhile, and removing them would
    /// read the disk under the lock. Returns the keys removed.
    fn expire_fields_due(&mut self, now_ms: u64, budget: usize) -> usize {
        let mut removed = 0;
        // Items to queue again: cold hashes a second later, hashes whose
        // deadlines moved at their new earliest one.
        let mut again = Vec::new();
        for _ in 0..budget {
            let Some(first) = self.fields_due.first() else {
                break;
            };
            if first.0 > now_ms {
                break;
            }
            let (deadline, db, key_bytes) = self.fields_due.pop_first().expect("a first item");
            let key = KeyRef {
                bytes: &key_bytes,
                hash: self.hasher.hash(&key_bytes),
            };
            let db = db as usize;
            let Some(entry) = self.lookup(db, key, now_ms) else {
                continue;
            };
            if !entry.is_hash() {
                continue;
            }
            if entry.is_cold() {
                again.push((deadline.max(now_ms) + 1000, db as u16, key_bytes.clone()));
                continue;
            }
            let Ok(Some(entry)) = self.get_typed_now(db, key, now_ms, false, None) else {
                continue;
            };
            let hash = entry.value().hash().expect("a hash");
            if hash.fields().all(|f| f.is_live(now_ms)) {
                // Nothing expired (a deadline was moved or removed since):
                // no change, so the value keeps its image on disk.
                if let Some(next) = hash.next_deadline() {
                    again.push((next, db as u16, key_bytes.clone()));
                }
                continue;
            }
            let before = entry.group.add_cause(FLAG_EXPIRED);
            let left = entry.change_hash(db, &[], now_ms).len;
            self.group.restore_cause(before);
            if left == 0 {
                // The hash's last fields expired: the key is deleted (a
                // plain DEL after the expired fields' HASH_DEL).
                self.remove(db, key, now_ms);
                removed += 1;
            }
        }
        self.fields_due.extend(again);
        removed
    }
}

impl Shard {
    /// Counts this shard's RAM (see [`MemoryCensus`]); returns the entries
    /// visited.
    pub(crate) fn count_memory(&mut self) -> usize {
        if self.census_seen == self.touched {
            return 0;
        }
        self.census_seen = self.touched;
        let expiry_item = std::mem::size_of::<(u64, Box<[u8]>)>();
        let mut census = MemoryCensus::default();
        let mut visited = 0;
        for table in self.tables.iter() {
            census.index_bytes += table.entries.allocated_bytes() as u64;
            for entry in table.entries.iter() {
                let value = entry.value_len_in_ram();
                census.value_bytes += value as u64;
                census.index_bytes += entry.head_len() as u64;
                if entry.has(VOLATILE) {
                    census.index_bytes += (expiry_item + entry.key().len()) as u64;
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
    /// `key`'s entry in `db`, expired or not, without side effects.
    pub(crate) fn find(&self, db: usize, key: KeyRef) -> Option<&Entry> {
        self.tables[db]
            .entries
            .find(key.slot_hash(), |e| e.key() == key.bytes)
    }

    /// Live and expired-but-unreclaimed entries of `db`.
    pub(crate) fn entries(&self, db: usize) -> impl Iterator<Item = &Entry> {
        self.tables[db].entries.iter()
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
            Kind::SwapDb => self.swap_dbs(db, other),
            _ => unreachable!("not a database-level record: {kind:?}"),
        }
    }

    /// Swaps the contents of databases `a` and `b` (SWAPDB).
    pub(crate) fn swap_dbs(&mut self, a: usize, b: usize) {
        self.tables.swap(a, b);
        if self.fields_due.is_empty() {
            return;
        }
        let (a, b) = (a as u16, b as u16);
        self.fields_due = std::mem::take(&mut self.fields_due)
            .into_iter()
            .map(|(deadline, db, key)| {
                let db = if db == a {
                    b
                } else if db == b {
                    a
                } else {
                    db
                };
                (deadline, db, key)
            })
            .collect();
    }

    /// Empties database `db`'s table, returning its contents, with their
    /// locations uncounted.
    pub(crate) fn take_table(&mut self, db: usize) -> Table {
        let table = self.tables.take(db);
        if !self.fields_due.is_empty() {
            self.fields_due.retain(|(_, of, _)| *of as usize != db);
        }
        for entry in table.entries.iter() {
            self.live.remove(entry.loc_raw());
            if entry.is_cold() {
                self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
            }
        }
        table
    }
}

/// Locations of values on disk: compaction, loading, checkpoints.
impl Shard {
    /// Checkpoints: appends again the image of every value in RAM whose
    /// image lies in one of `dying` (segments mostly garbage), from RAM,
    /// so that the commit gives it a location at the head and those
    /// segments can go. A value on disk stays (compaction moves it).
    /// Returns the bytes appended.
    pub(crate) fn relocate_in(&mut self, dying: &std::collections::BTreeSet<u64>) -> u64 {
        if dying.is_empty() || self.live.iter().all(|(seq, _)| !dying.contains(&seq)) {
            return 0;
        }
        let mut bytes = 0;
        for (db, table) in self.tables.iter().enumerate() {
            for entry in table.entries.iter() {
                if !entry.is_cold()
                    && let Some(loc) = entry.loc()
                    && dying.contains(&tier::loc_segment(loc))
                {
                    log_image(&mut self.group, db, entry);
                    bytes += entry.image_len() as u64;
                }
            }
        }
        bytes
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
            if entry.loc_raw() != loc {
                continue;
            }
            if entry.is_cold() {
                let int = entry.is_int();
                if entry.install(payload, int, self.hash_limits.get()).is_err() {
                    // A damaged image stays where it is; reading the key
                    // reports it.
                    return false;
                }
                self.tier.stats.cold_keys.fetch_sub(1, Relaxed);
            }
            log_image(&mut self.group, d, entry);
            return true;
        }
        false
    }

    /// Recovery: `key` of `db` exists with its value on disk at `loc`;
    /// `kind`: the value's type, and whether a string is int-encoded.
    pub(crate) fn insert_cold(
        &mut self,
        db: usize,
        key: KeyRef,
        deadline: u64,
        (value_type, int): (ValueType, bool),
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
            Entry::new_cold(key.bytes, deadline, int, value_type, loc, now_ms),
            |e| hasher.table_hash(e.key()),
        );
        self.live.add(loc);
        self.tier.stats.cold_keys.fetch_add(1, Relaxed);
    }

    /// Recovery: applies a replayed SETRANGE record (see
    /// [`Kind::SetRange`]). A key that existed then but has expired by now
    /// stays gone (the change kept its deadline); a cold value is read
    /// from disk first, and a failed read is an error, not a panic.
    pub(crate) fn replay_range(
        &mut self,
        db: usize,
        key: KeyRef,
        offset: usize,
        bytes: &[u8],
        now_ms: u64,
    ) -> Result<(), String> {
        let existed = self.tables[db]
            .entries
            .find(key.slot_hash(), |e| e.key() == key.bytes)
            .is_some();
        if !existed {
            let mut value = vec![0u8; offset + bytes.len()];
            value[offset..].copy_from_slice(bytes);
            self.set(db, key, Value::owned(value), None, false, now_ms);
            return Ok(());
        }
        let tier = self.tier.clone();
        let limits = self.hash_limits.get();
        let Some(entry) = self.lookup(db, key, now_ms) else {
            return Ok(());
        };
        if entry.is_cold() {
            let cold = tier.read_value(entry.loc_raw(), entry.key())?;
            entry.install(&cold.bytes, cold.int, limits)?;
            tier.stats.cold_keys.fetch_sub(1, Relaxed);
        }
        if let Some(changed) = self
            .get_loaded(db, key, now_ms, false)
            .map_err(|e| e.to_string())?
        {
            if changed.value_type() != ValueType::String {
                return Err(format!(
                    "a SETRANGE record for the {} '{}'",
                    changed.type_name(),
                    String::from_utf8_lossy(key.bytes)
                ));
            }
            changed.write_at(db, offset, bytes);
        }
        Ok(())
    }

    /// Recovery: applies a replayed record of collection type `C` (one of
    /// its [`Collection::RECORDS`]) to `key`. A missing key becomes what
    /// the operation creates (a key that has expired by now stays gone);
    /// a value read from disk first when cold; a collection left empty is
    /// removed, as the command that emptied it did; a key of another type
    /// is an error.
    pub(crate) fn replay<C: Collection>(
        &mut self,
        db: usize,
        key: KeyRef,
        kind: Kind,
        payload: &[u8],
        now_ms: u64,
    ) -> Result<(), String> {
        let decoded = C::decode(kind, payload).map_err(|_| damaged(C::TYPE.name(), key))?;
        let op: &C::Op<'_> = decoded.borrow();
        let existed = self.tables[db]
            .entries
            .find(key.slot_hash(), |e| e.key() == key.bytes)
            .is_some();
        if !existed {
            if let Some((value, _)) = C::created_by(op) {
                self.set(db, key, value, None, false, now_ms);
            }
            return Ok(());
        }
        match self
            .get_loaded(db, key, now_ms, false)
            .map_err(|e| e.to_string())?
        {
            None => return Ok(()),
            Some(entry) if entry.value_type() != C::TYPE => {
                return Err(format!(
                    "a {} record for the {} '{}'",
                    C::TYPE.name(),
                    entry.type_name(),
                    String::from_utf8_lossy(key.bytes)
                ));
            }
            Some(entry) => {
                if entry.change_checked::<C>(db, op, now_ms).1 {
                    self.remove(db, key, now_ms);
                }
            }
        }
        Ok(())
    }

    /// A command's change of the collection of type `C` at `key`, in one
    /// lookup: `op` applied to it and logged, and the key deleted if that
    /// emptied it; a missing key becomes what `op` creates when `create`
    /// (LPUSH, SADD, ZADD) and stays missing otherwise (LPUSHX, SREM, …):
    /// `None` then. WRONGTYPE for a key of another type.
    pub fn change_as<C: Collection>(
        &mut self,
        db: usize,
        key: KeyRef,
        now_ms: u64,
        op: &C::Op<'_>,
        create: bool,
    ) -> Result<Option<C::Changed>, GetError> {
        if let Some(entry) = self.get_typed(db, key, now_ms, true, Some(C::TYPE))? {
            let (changed, emptied) = entry.change_checked::<C>(db, op, now_ms);
            if emptied {
                self.remove_emptied(db, key, now_ms);
            }
            return Ok(Some(changed));
        }
        Ok(create
            .then(|| self.create::<C>(db, key, op, now_ms))
            .flatten())
    }

    /// Makes missing `key` the collection `op` creates (None: `op` makes
    /// nothing, as a removal), logged as the operation rather than the
    /// image it made: replay makes the same value of a missing key, and a
    /// replica is sent the command (LPUSH, SADD, ...) as Redis sends it.
    pub fn create<C: Collection>(
        &mut self,
        db: usize,
        key: KeyRef,
        op: &C::Op<'_>,
        now_ms: u64,
    ) -> Option<C::Changed> {
        let (value, changed) = C::created_by(op)?;
        self.store(db, key, value, (None, false), now_ms, |group, db, entry| {
            C::log_created(group, db, entry.key(), op)
        });
        Some(changed)
    }

    /// Recovery: the replayed SET of `key` is at `loc` in the log.
    pub(crate) fn locate(&mut self, db: usize, key: KeyRef, loc: u64) {
        let hash = key.slot_hash();
        if let Some(entry) = self.tables[db]
            .entries
            .find_mut(hash, |e| e.key() == key.bytes)
            && !entry.is_cold()
        {
            self.live.remove(entry.loc_raw());
            entry.set_loc(loc);
            self.live.add(loc);
        }
    }
}

/// The error for a record that does not decode.
fn damaged(what: &str, key: KeyRef) -> String {
    format!(
        "a damaged {what} record for '{}'",
        String::from_utf8_lossy(key.bytes)
    )
}
