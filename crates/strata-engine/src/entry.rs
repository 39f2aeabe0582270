//! One key and its value in RAM ([`Entry`]), its flags and LRU clock, and
//! the handle through which commands change a value ([`EntryMut`]).

use std::ops::Deref;

use crate::hash::{self, FieldChange, HashRef, HashValue, Limits, Packed};
use crate::log;
use crate::record::{Draft, FLAG_INT, Kind, VALUE_HASH};
use crate::tier::{LiveCounts, NO_LOC};
use crate::value::{Value, ValueRef};

/// Flags, in the top byte of `Entry::clock_and_flags`.
pub(crate) const INT: u32 = 1 << 24;
/// `data` starts with the 8-byte deadline.
pub(crate) const VOLATILE: u32 = 1 << 25;
/// The value is only on disk, at `loc`.
pub(crate) const COLD: u32 = 1 << 26;
/// Read from disk once recently without being kept: a second read within
/// [`PROMOTE_WINDOW_S`] keeps it in RAM.
pub(crate) const SEEN: u32 = 1 << 27;
/// Read in for one command only; leaves RAM again after it.
pub(crate) const TRANSIENT: u32 = 1 << 28;
/// Read from disk for the coming command (which counts it as a disk hit).
pub(crate) const FETCHED: u32 = 1 << 29;
/// The value is a hash (`hash` module); otherwise a string. Kept while
/// the value is cold, so TYPE and WRONGTYPE never read the disk.
pub(crate) const HASH: u32 = 1 << 30;
/// The low 24 bits: Unix seconds of the last access, modulo 2^24 (Redis'
/// LRU clock has the same width; it wraps after 194 days).
pub(crate) const CLOCK_MASK: u32 = (1 << 24) - 1;
/// A cold value read twice within this many seconds is promoted to RAM; a
/// value read once (a scan) is not.
pub const PROMOTE_WINDOW_S: u32 = 60;

pub(crate) fn clock_of(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & CLOCK_MASK
}

/// One key and its value.
///
/// Memory layout, chosen for RAM per key (DESIGN.md: RAM is the scarce
/// resource): the table holds a pointer to this 32-byte header, and the
/// header owns one allocation holding the deadline (only for keys that
/// have one), the key's bytes and, while the value is in RAM, the value's
/// bytes: a string's bytes, or a small hash's packed image. A cold entry
/// (value on disk) costs the table slot, this header and its key: see
/// README "Sizing". Growing a value (APPEND, SETRANGE, SETBIT) reallocates;
/// the allocator's size classes absorb most small growth in place.
///
/// A hash past the packed limits lives beside the header as a
/// [`HashValue`] table (`Body::Table`), changed field by field in place;
/// the enum costs no space (the table variant fits the niche of the
/// inline one, so the header stays 32 bytes).
#[derive(Debug)]
pub struct Entry {
    pub(crate) data: Body,
    pub(crate) key_len: u32,
    /// LRU clock (low 24 bits) and flags (top byte).
    pub(crate) clock_and_flags: u32,
    /// Where the log holds an image of the current value (`tier::loc`), or
    /// [`NO_LOC`].
    pub(crate) loc: u64,
}

/// Where an entry's bytes are.
#[derive(Debug)]
pub(crate) enum Body {
    /// [deadline: u64 LE, when VOLATILE] key bytes, then the value's bytes
    /// unless COLD (a string, or a packed hash's image).
    Inline(Box<[u8]>),
    /// A hash in the table encoding; `head` holds deadline and key.
    Table(Box<TableBody>),
}

#[derive(Debug)]
pub(crate) struct TableBody {
    head: Box<[u8]>,
    hash: HashValue,
}

impl Body {
    /// Deadline, key and (inline) value bytes.
    fn head(&self) -> &[u8] {
        match self {
            Body::Inline(data) => data,
            Body::Table(table) => &table.head,
        }
    }
}

/// Deadline (when not 0), key and value bytes in one allocation.
pub(crate) fn pack(deadline: u64, key: &[u8], value: &[u8]) -> Box<[u8]> {
    let prefix = if deadline != 0 { 8 } else { 0 };
    let mut data = Vec::with_capacity(prefix + key.len() + value.len());
    if deadline != 0 {
        data.extend_from_slice(&deadline.to_le_bytes());
    }
    data.extend_from_slice(key);
    data.extend_from_slice(value);
    data.into_boxed_slice()
}

/// The bytes a value is stored as (an integer's digits are written into
/// `digits`): borrowed, so that storing a value copies it once.
fn value_bytes<'v>(value: &'v Value, digits: &'v mut itoa::Buffer) -> &'v [u8] {
    match value {
        Value::Int(n) => digits.format(*n).as_bytes(),
        Value::Str(bytes) | Value::Hash(bytes) => bytes,
    }
}

/// The body for `value` of `key`: inline bytes, or a table for a hash past
/// the packed `limits`.
fn body_for(deadline: u64, key: &[u8], value: &Value, limits: Limits) -> Body {
    if let Value::Hash(image) = value {
        let packed = HashRef::Packed(Packed::from_image(image));
        if !fits_packed(packed, limits) {
            return Body::Table(Box::new(TableBody {
                head: pack(deadline, key, &[]),
                hash: packed.to_value(limits),
            }));
        }
        return Body::Inline(pack(deadline, key, image));
    }
    let mut digits = itoa::Buffer::new();
    Body::Inline(pack(deadline, key, value_bytes(value, &mut digits)))
}

fn fits_packed(hash: HashRef, limits: Limits) -> bool {
    hash.len() <= limits.max_packed_entries
        && hash
            .fields()
            .all(|f| f.name.len().max(f.value.len()) <= limits.max_packed_value)
}

impl Entry {
    /// A new entry; a hash value is an image the caller has checked.
    pub(crate) fn new(
        key: &[u8],
        value: Value,
        deadline: u64,
        limits: Limits,
        now_ms: u64,
    ) -> Box<Entry> {
        assert!(
            key.len() < u32::MAX as usize,
            "keys are limited by proto-max-bulk-len"
        );
        let mut flags = if matches!(value, Value::Int(_)) {
            INT
        } else {
            0
        };
        if deadline != 0 {
            flags |= VOLATILE;
        }
        if matches!(value, Value::Hash(_)) {
            flags |= HASH;
        }
        Box::new(Entry {
            data: body_for(deadline, key, &value, limits),
            key_len: key.len() as u32,
            clock_and_flags: clock_of(now_ms) | flags,
            loc: NO_LOC,
        })
    }

    /// An entry whose value is only on disk, at `loc` (recovery).
    pub(crate) fn new_cold(
        key: &[u8],
        deadline: u64,
        (int, hash): (bool, bool),
        loc: u64,
        now_ms: u64,
    ) -> Box<Entry> {
        let mut flags = COLD | if int { INT } else { 0 } | if hash { HASH } else { 0 };
        if deadline != 0 {
            flags |= VOLATILE;
        }
        Box::new(Entry {
            data: Body::Inline(pack(deadline, key, &[])),
            key_len: key.len() as u32,
            clock_and_flags: clock_of(now_ms) | flags,
            loc,
        })
    }

    pub(crate) fn has(&self, flag: u32) -> bool {
        self.clock_and_flags & flag != 0
    }

    pub(crate) fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.clock_and_flags |= flag;
        } else {
            self.clock_and_flags &= !flag;
        }
    }

    pub(crate) fn touch(&mut self, now_ms: u64) {
        self.clock_and_flags = (self.clock_and_flags & !CLOCK_MASK) | clock_of(now_ms);
    }

    pub(crate) fn prefix_len(&self) -> usize {
        if self.has(VOLATILE) { 8 } else { 0 }
    }

    pub(crate) fn deadline(&self) -> u64 {
        if self.has(VOLATILE) {
            u64::from_le_bytes(self.data.head()[..8].try_into().expect("8 bytes"))
        } else {
            0
        }
    }

    pub fn key(&self) -> &[u8] {
        let at = self.prefix_len();
        &self.data.head()[at..at + self.key_len as usize]
    }

    /// The value; only for an entry in RAM, which every [`Shard::get`](crate::Shard::get)
    /// returns.
    pub fn value(&self) -> ValueRef<'_> {
        assert!(
            !self.is_cold(),
            "value of a cold entry read without loading"
        );
        match &self.data {
            Body::Inline(data) => {
                let bytes = &data[self.prefix_len() + self.key_len as usize..];
                if self.is_hash() {
                    ValueRef::Hash(HashRef::Packed(Packed::from_image(bytes)))
                } else {
                    ValueRef::Str {
                        bytes,
                        int: self.has(INT),
                    }
                }
            }
            Body::Table(table) => ValueRef::Hash(table.hash.as_ref()),
        }
    }

    /// The value's image (a record's payload): its bytes, or for a hash
    /// table its image encoded into `scratch`.
    pub(crate) fn image<'s>(&'s self, scratch: &'s mut Vec<u8>) -> &'s [u8] {
        match self.value() {
            ValueRef::Str { bytes, .. } => bytes,
            ValueRef::Hash(HashRef::Packed(_)) => self.inline_value(),
            ValueRef::Hash(hash) => {
                scratch.clear();
                hash.encode_image(scratch);
                scratch
            }
        }
    }

    fn inline_value(&self) -> &[u8] {
        &self.data.head()[self.prefix_len() + self.key_len as usize..]
    }

    /// Bytes of the deadline and key.
    pub(crate) fn head_len(&self) -> usize {
        self.prefix_len() + self.key_len as usize
    }

    /// Bytes of the value held in RAM (0 when cold).
    pub(crate) fn value_len_in_ram(&self) -> usize {
        match &self.data {
            Body::Inline(_) => self.inline_value().len(),
            Body::Table(table) => table.hash.memory_bytes() + size_of::<TableBody>(),
        }
    }

    /// Whether the value is only on disk.
    pub fn is_cold(&self) -> bool {
        self.has(COLD)
    }

    /// Where the log holds the current value's image, if it does.
    pub(crate) fn loc(&self) -> Option<u64> {
        (self.loc != NO_LOC).then_some(self.loc)
    }

    /// The location of the value when it is only on disk.
    pub(crate) fn cold_loc(&self) -> Option<u64> {
        self.is_cold().then_some(self.loc)
    }

    /// The Redis type name (TYPE), known without the value.
    pub fn type_name(&self) -> &'static str {
        if self.is_hash() { "hash" } else { "string" }
    }

    /// Whether the value is a hash (known without the value).
    pub fn is_hash(&self) -> bool {
        self.has(HASH)
    }

    /// The record `value_type` of this entry's images.
    pub(crate) fn value_type_code(&self) -> u8 {
        if self.is_hash() {
            crate::record::VALUE_HASH
        } else {
            crate::record::VALUE_STRING
        }
    }

    /// Replaces the value (keeping key, deadline), leaving it in RAM.
    /// The caller has already forgotten the old location.
    pub(crate) fn replace_value(&mut self, value: Value, limits: Limits) {
        let key_len = self.key_len as usize;
        let prefix = self.prefix_len();
        let cold = self.is_cold();
        if let (Value::Int(n), Body::Inline(data)) = (&value, &mut self.data)
            && !cold
        {
            // INCR and friends: rewrite the digits in place when they fit.
            let mut digits = itoa::Buffer::new();
            let text = digits.format(*n).as_bytes();
            if data.len() - prefix - key_len == text.len() {
                data[prefix + key_len..].copy_from_slice(text);
                self.set_flag(INT, true);
                self.set_flag(HASH, false);
                return;
            }
        }
        self.data = body_for(self.deadline(), self.key(), &value, limits);
        self.set_flag(INT, matches!(value, Value::Int(_)));
        self.set_flag(HASH, matches!(value, Value::Hash(_)));
        self.set_flag(COLD | SEEN | TRANSIENT, false);
    }

    /// Puts a value read from disk back in RAM (its location stays). A
    /// hash image is checked first: a bad one is an error and the entry
    /// stays cold.
    pub(crate) fn install(
        &mut self,
        bytes: &[u8],
        int: bool,
        limits: Limits,
    ) -> Result<(), String> {
        if self.is_hash() {
            hash::check_image(bytes).map_err(|_| "the stored hash image is damaged".to_string())?;
            self.data = body_for(
                self.deadline(),
                self.key(),
                &Value::Hash(bytes.into()),
                limits,
            );
        } else {
            self.data = Body::Inline(pack(self.deadline(), self.key(), bytes));
        }
        self.set_flag(INT, int);
        self.set_flag(COLD, false);
        Ok(())
    }

    /// Drops the value's bytes; it stays readable at `loc`. Returns the
    /// bytes freed.
    pub(crate) fn drop_value(&mut self) -> usize {
        debug_assert!(self.loc != NO_LOC && !self.is_cold());
        let before = self.value_len_in_ram();
        self.data = Body::Inline(pack(self.deadline(), self.key(), &[]));
        self.set_flag(COLD, true);
        self.set_flag(TRANSIENT, false);
        before
    }

    /// Sets the deadline (0: none), moving the key bytes when the entry
    /// gains or loses one.
    pub(crate) fn set_deadline_raw(&mut self, deadline: u64) {
        let head = match &mut self.data {
            Body::Inline(data) => data,
            Body::Table(table) => &mut table.head,
        };
        let volatile = self.clock_and_flags & VOLATILE != 0;
        if volatile && deadline != 0 {
            head[..8].copy_from_slice(&deadline.to_le_bytes());
            return;
        }
        if !volatile && deadline == 0 {
            return;
        }
        let rest = head[if volatile { 8 } else { 0 }..].to_vec();
        let mut data = Vec::with_capacity(rest.len() + 8);
        if deadline != 0 {
            data.extend_from_slice(&deadline.to_le_bytes());
        }
        data.extend_from_slice(&rest);
        *head = data.into_boxed_slice();
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

    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        let deadline = self.deadline();
        deadline != 0 && deadline <= now_ms
    }

    /// Bytes this entry costs in RAM (MEMORY USAGE): header, table slot
    /// and the allocation (which holds the value only while it is in RAM).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Entry>()
            + std::mem::size_of::<Box<Entry>>()
            + self.head_len()
            + self.value_len_in_ram()
    }
}

/// A live entry borrowed from its locked shard: reads through `Deref`;
/// changes go through methods that keep the shard's location counts and
/// the log in step.
pub struct EntryMut<'a> {
    pub(crate) entry: &'a mut Entry,
    pub(crate) live: &'a mut LiveCounts,
    /// When a hash converts to a table.
    pub(crate) limits: Limits,
    /// The shard's hashes with field deadlines (see [`FieldsDue`]).
    pub(crate) fields_due: &'a mut FieldsDue,
}

/// Hashes that have fields with deadlines, by their earliest: (deadline
/// ms, database, key). The active expiry cycle pops due items and removes
/// the expired fields; an item whose key has gone or changed is dropped
/// when popped, so deletions need not find it.
pub(crate) type FieldsDue = std::collections::BTreeSet<(u64, u16, Box<[u8]>)>;

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
        self.entry.replace_value(value, self.limits);
        log_image(db, self.entry);
    }
}

impl EntryMut<'_> {
    /// Writes `bytes` at byte `offset` of the value (zero-padding it to
    /// `offset` first if it is shorter) for this entry of database `db`,
    /// in place, and logs only that change (a SETRANGE record), so a
    /// command's log bytes grow with its arguments, not with the value.
    /// The result is a plain string. Returns the value's new length.
    pub fn write_at(self, db: usize, offset: usize, bytes: &[u8]) -> usize {
        forget_loc(self.live, self.entry);
        let entry = self.entry;
        let start = entry.prefix_len() + entry.key_len as usize;
        let end = start + offset + bytes.len();
        let Body::Inline(data) = &mut entry.data else {
            unreachable!("write_at on a hash: commands check the type first");
        };
        if end > data.len() {
            if end > 2 * data.len() {
                // Growing far: zeroed memory from the allocator (fresh
                // pages are zero already, nothing is written to them
                // until used), then the old bytes copied in.
                let mut grown = vec![0u8; end].into_boxed_slice();
                grown[..data.len()].copy_from_slice(data);
                *data = grown;
            } else {
                // Growing a little reallocates once (often in place); the
                // value is not copied aside and back.
                let mut grown = std::mem::take(data).into_vec();
                grown.resize(end, 0);
                *data = grown.into_boxed_slice();
            }
        }
        data[start + offset..end].copy_from_slice(bytes);
        let len = data.len() - start;
        entry.set_flag(INT | HASH | SEEN | TRANSIENT, false);
        log::append(&Draft {
            kind: Kind::SetRange,
            db: db as u16,
            aux: offset as u64,
            flags: 0,
            value_type: 0,
            key: entry.key(),
            payload: bytes,
        });
        len
    }
}

/// A hash's fields changed by one command, as [`EntryMut::change_hash`]
/// reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashChanged {
    /// Fields now stored, expired ones included until removed.
    pub len: usize,
}

impl EntryMut<'_> {
    /// Applies `changes` to this hash (an entry of database `db` whose
    /// value [`Entry::is_hash`]) in order, converting it to a table past
    /// the shard's limits, and logs them as field records (HASH_PUT for
    /// the fields stored, HASH_DEL for those removed), so the bytes logged
    /// grow with the change, not with the hash.
    ///
    /// Fields whose deadline passed by `now_ms` are removed first (and
    /// logged as removed), so an emptied hash is one with no live field;
    /// it stays an (empty) entry: the caller deletes the key. A hash left
    /// with field deadlines is queued for active expiry.
    pub fn change_hash(self, db: usize, changes: &[FieldChange], now_ms: u64) -> HashChanged {
        let limits = self.limits;
        assert!(self.entry.is_hash(), "change_hash on a string");
        forget_loc(self.live, self.entry);
        let entry = self.entry;
        entry.set_flag(SEEN | TRANSIENT, false);
        // A small hash changed in place in its entry's allocation, as
        // Redis edits a listpack: no copy of the hash, no new allocation.
        let start = entry.head_len();
        if let Body::Inline(data) = &mut entry.data {
            let mut bytes = std::mem::take(data).into_vec();
            let done = hash::change_packed_in_place(&mut bytes, start, changes, limits);
            *data = bytes.into_boxed_slice();
            if let Some(len) = done {
                log_field_changes(db, entry.key(), changes);
                return HashChanged { len };
            }
        }
        let mut owned = match &entry.data {
            Body::Table(_) => None,
            Body::Inline(_) => Some(entry.value().hash().expect("a hash").to_value(limits)),
        };
        let hash = match (&mut entry.data, &mut owned) {
            (_, Some(owned)) => owned,
            (Body::Table(table), None) => &mut table.hash,
            (Body::Inline(_), None) => unreachable!("copied above"),
        };
        let expired = hash.remove_expired(now_ms);
        for change in changes {
            match *change {
                FieldChange::Put(field) => hash.put(field, limits),
                FieldChange::Remove(name) => {
                    hash.remove(name, now_ms);
                }
            }
        }
        let len = hash.len();
        let next_deadline = hash.as_ref().next_deadline();
        if let Some(owned) = owned {
            let (deadline, key) = (entry.deadline(), entry.key());
            entry.data = match owned.packed_image() {
                Some(image) => Body::Inline(pack(deadline, key, &image)),
                None => Body::Table(Box::new(TableBody {
                    head: pack(deadline, key, &[]),
                    hash: owned,
                })),
            };
        }
        if !expired.is_empty() {
            let removals: Vec<FieldChange> = expired
                .iter()
                .map(|name| FieldChange::Remove(name))
                .collect();
            log_field_changes(db, entry.key(), &removals);
        }
        log_field_changes(db, entry.key(), changes);
        if let Some(deadline) = next_deadline {
            self.fields_due
                .insert((deadline, db as u16, entry.key().into()));
        }
        HashChanged { len }
    }
}

/// Logs `changes` to the hash at `key`: runs of puts as one HASH_PUT
/// record, runs of removals as one HASH_DEL record, in order.
fn log_field_changes(db: usize, key: &[u8], changes: &[FieldChange]) {
    let mut payload = Vec::new();
    let mut rest = changes;
    while let Some(first) = rest.first() {
        let put = matches!(first, FieldChange::Put(_));
        let run = rest
            .iter()
            .take_while(|c| matches!(c, FieldChange::Put(_)) == put)
            .count();
        payload.clear();
        hash::encode_run(&rest[..run], &mut payload);
        let kind = if put { Kind::HashPut } else { Kind::HashDel };
        log::append(&Draft {
            kind,
            db: db as u16,
            aux: 0,
            flags: 0,
            value_type: VALUE_HASH,
            key,
            payload: &payload,
        });
        rest = &rest[run..];
    }
}

/// The value is about to change: its image at `loc` is no longer current.
pub(crate) fn forget_loc(live: &mut LiveCounts, entry: &mut Entry) {
    live.remove(entry.loc);
    entry.loc = NO_LOC;
}

/// Logs the full current image of `entry` (a SET record).
pub(crate) fn log_image(db: usize, entry: &Entry) {
    let mut scratch = Vec::new();
    log::append(&Draft {
        kind: Kind::Set,
        db: db as u16,
        aux: entry.deadline(),
        flags: if entry.is_int() { FLAG_INT } else { 0 },
        value_type: entry.value_type_code(),
        key: entry.key(),
        payload: entry.image(&mut scratch),
    });
}
