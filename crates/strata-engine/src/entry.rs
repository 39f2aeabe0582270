//! One key and its value in RAM ([`Entry`]), its flags and LRU clock, and
//! the handle through which commands change a value ([`EntryMut`]).

use std::ops::Deref;

use crate::log;
use crate::record::{Draft, FLAG_INT, Kind};
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
/// The value is a hash (its image, `hash` module); otherwise a string.
/// Kept while the value is cold, so TYPE never reads the disk.
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
/// bytes. A cold entry (value on disk) costs the table slot, this header
/// and its key: see README "Sizing". Growing a value (APPEND, SETRANGE,
/// SETBIT) reallocates; the allocator's size classes absorb most small
/// growth in place.
#[derive(Debug)]
pub struct Entry {
    /// [deadline: u64 LE, when VOLATILE] key bytes, then value bytes unless COLD.
    pub(crate) data: Box<[u8]>,
    pub(crate) key_len: u32,
    /// LRU clock (low 24 bits) and flags (top byte).
    pub(crate) clock_and_flags: u32,
    /// Where the log holds an image of the current value (`tier::loc`), or
    /// [`NO_LOC`].
    pub(crate) loc: u64,
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

/// The bytes a value is stored as, and whether it is int-encoded.
pub(crate) fn value_bytes(value: &Value, digits: &mut itoa::Buffer) -> (Vec<u8>, bool) {
    match value {
        Value::Int(n) => (digits.format(*n).as_bytes().to_vec(), true),
        Value::Str(bytes) | Value::Hash(bytes) => (bytes.to_vec(), false),
    }
}

impl Entry {
    pub(crate) fn new(key: &[u8], value: Value, deadline: u64, now_ms: u64) -> Box<Entry> {
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
        if matches!(value, Value::Hash(_)) {
            flags |= HASH;
        }
        Box::new(Entry {
            data: pack(deadline, key, &bytes),
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
            data: pack(deadline, key, &[]),
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
            u64::from_le_bytes(self.data[..8].try_into().expect("8 bytes"))
        } else {
            0
        }
    }

    pub fn key(&self) -> &[u8] {
        let at = self.prefix_len();
        &self.data[at..at + self.key_len as usize]
    }

    /// The value; only for an entry in RAM, which every [`Shard::get`](crate::Shard::get)
    /// returns.
    pub fn value(&self) -> ValueRef<'_> {
        assert!(
            !self.is_cold(),
            "value of a cold entry read without loading"
        );
        ValueRef::new(
            &self.data[self.prefix_len() + self.key_len as usize..],
            self.has(INT),
            self.has(HASH),
        )
    }

    /// Bytes of the value held in RAM (0 when cold).
    pub(crate) fn value_len_in_ram(&self) -> usize {
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
    pub(crate) fn replace_value(&mut self, value: Value) {
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
                self.set_flag(HASH, false);
                return;
            }
        }
        let mut digits = itoa::Buffer::new();
        let (bytes, int) = value_bytes(&value, &mut digits);
        self.data = pack(self.deadline(), self.key(), &bytes);
        self.set_flag(INT, int);
        self.set_flag(HASH, matches!(value, Value::Hash(_)));
        self.set_flag(COLD | SEEN | TRANSIENT, false);
    }

    /// Puts a value read from disk back in RAM (its location stays).
    pub(crate) fn install(&mut self, bytes: &[u8], int: bool) {
        self.data = pack(self.deadline(), self.key(), bytes);
        self.set_flag(INT, int);
        self.set_flag(COLD, false);
    }

    /// Drops the value's bytes; it stays readable at `loc`. Returns the
    /// bytes freed.
    pub(crate) fn drop_value(&mut self) -> usize {
        debug_assert!(self.loc != NO_LOC && !self.is_cold());
        let before = self.data.len();
        self.data = pack(self.deadline(), self.key(), &[]);
        self.set_flag(COLD, true);
        self.set_flag(TRANSIENT, false);
        before - self.data.len()
    }

    /// Sets the deadline (0: none), moving the key bytes when the entry
    /// gains or loses one.
    pub(crate) fn set_deadline_raw(&mut self, deadline: u64) {
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

    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
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
    pub(crate) entry: &'a mut Entry,
    pub(crate) live: &'a mut LiveCounts,
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
        if end > entry.data.len() {
            // Growing reallocates once (often in place); the value is not
            // copied aside and back.
            let mut data = std::mem::take(&mut entry.data).into_vec();
            data.resize(end, 0);
            entry.data = data.into_boxed_slice();
        }
        entry.data[start + offset..end].copy_from_slice(bytes);
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
        entry.data.len() - start
    }
}

/// The value is about to change: its image at `loc` is no longer current.
pub(crate) fn forget_loc(live: &mut LiveCounts, entry: &mut Entry) {
    live.remove(entry.loc);
    entry.loc = NO_LOC;
}

/// Logs the full current image of `entry` (a SET record).
pub(crate) fn log_image(db: usize, entry: &Entry) {
    log::append(&Draft {
        kind: Kind::Set,
        db: db as u16,
        aux: entry.deadline(),
        flags: if entry.is_int() { FLAG_INT } else { 0 },
        value_type: entry.value_type_code(),
        key: entry.key(),
        payload: entry.value().as_bytes(),
    });
}
