//! Hash values: fields and their values, each field with an optional
//! deadline (Redis 7.4's HEXPIRE family), in one of two encodings, and the
//! image codec that turns a hash into one record payload and back.
//!
//! - **Packed** (OBJECT ENCODING `listpack`, or `listpackex` once a field
//!   has a deadline): every field in one byte buffer, in insertion order,
//!   found by a linear scan. Small hashes are most hashes; one allocation
//!   for all their fields is what keeps them near Redis' listpack in RAM.
//! - **Table** (`hashtable`, the `table` module): every field in one byte
//!   arena, found through a hash index of offsets.
//!   A packed hash converts once it has more than `hash-max-listpack-entries`
//!   fields or a field or value longer than `hash-max-listpack-value`
//!   ([`Limits`]), and never converts back, as in Redis.
//!
//! A field is stored as `flags u8 | varint field length | field | varint
//! value length | value | deadline u64 LE (when flags bit 0)`, the same in
//! both encodings, so the image of a hash is a varint field count followed
//! by its fields in that layout, whatever the encoding it came from.
//!
//! Expired fields are invisible to reads and removed by
//! [`HashValue::remove_expired`] (the caller decides when: on the hash's
//! next write, or from the active expiry cycle).
//!
//! The keyspace keeps a packed hash as its image inline in the key's entry
//! (read in place through [`HashRef::Packed`]) and a table as a live
//! [`HashValue`] beside it; commands change either through field changes
//! that the log records field by field (`entry::EntryMut::change_hash`).

mod field;
mod table;

use crate::varint::{put_varint, write_varint};

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

pub(crate) use field::BadImage;
pub use field::Field;
use field::{HAS_DEADLINE, read_bytes, read_varint};
use table::FieldTable;

/// Largest image of a hash a command may build: its record must fit the
/// 32-bit record length with a key of up to 512 MB beside it.
pub const IMAGE_BYTES_MAX: usize = 3 << 30;

/// When a packed hash converts to a table (`hash-max-listpack-entries`,
/// `hash-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_packed_entries: usize,
    pub max_packed_value: usize,
}

impl Default for Limits {
    /// Redis 7's defaults (`hash-max-listpack-entries 512`,
    /// `hash-max-listpack-value 64`).
    fn default() -> Self {
        Limits {
            max_packed_entries: 512,
            max_packed_value: 64,
        }
    }
}

impl Limits {
    /// Limits that never convert (changing a field's deadline only).
    pub const NEVER_CONVERT: Limits = Limits {
        max_packed_entries: usize::MAX,
        max_packed_value: usize::MAX,
    };
}

/// The limits in force, shared by the keyspace's shards and changed at
/// run time by CONFIG SET.
#[derive(Debug)]
pub struct SharedLimits {
    max_packed_entries: AtomicUsize,
    max_packed_value: AtomicUsize,
}

impl Default for SharedLimits {
    fn default() -> Self {
        let limits = Limits::default();
        SharedLimits {
            max_packed_entries: AtomicUsize::new(limits.max_packed_entries),
            max_packed_value: AtomicUsize::new(limits.max_packed_value),
        }
    }
}

impl SharedLimits {
    pub fn get(&self) -> Limits {
        Limits {
            max_packed_entries: self.max_packed_entries.load(Relaxed),
            max_packed_value: self.max_packed_value.load(Relaxed),
        }
    }

    pub fn set(&self, limits: Limits) {
        self.max_packed_entries
            .store(limits.max_packed_entries, Relaxed);
        self.max_packed_value
            .store(limits.max_packed_value, Relaxed);
    }
}

/// Appends the payload of a field record for a run of changes of one kind:
/// a varint count, then each put field in the stored layout (HASH_PUT:
/// an image of those fields) or each removed name as a varint length and
/// its bytes (HASH_DEL).
pub(crate) fn encode_run(run: &[FieldChange], out: &mut Vec<u8>) {
    write_varint(out, run.len());
    for change in run {
        match change {
            FieldChange::Put(field) => field.encode(out),
            FieldChange::Remove(name) => {
                write_varint(out, name.len());
                out.extend_from_slice(name);
            }
        }
    }
}

/// The fields of a HASH_PUT payload, in the order they were put. Unlike
/// a hash's image, a run may name a field twice (HSET k f 1 f 2): applied
/// in order, the last value wins, as it did when the command ran.
pub fn decode_puts(payload: &[u8]) -> Result<Vec<Field<'_>>, BadImage> {
    let (count, mut at) = read_varint(payload)?;
    let mut fields = Vec::with_capacity(count.min(payload.len()));
    for _ in 0..count {
        let (field, used) = Field::parse(payload.get(at..).ok_or(BadImage)?)?;
        fields.push(field);
        at += used;
    }
    if at != payload.len() {
        return Err(BadImage);
    }
    Ok(fields)
}

/// The names of a HASH_DEL payload.
pub fn decode_names(payload: &[u8]) -> Result<Vec<&[u8]>, BadImage> {
    let (count, mut at) = read_varint(payload)?;
    let mut names = Vec::with_capacity(count.min(payload.len()));
    for _ in 0..count {
        names.push(read_bytes(payload, &mut at)?);
    }
    if at != payload.len() {
        return Err(BadImage);
    }
    Ok(names)
}

/// Fields one after another in the stored layout (a packed hash's bytes).
fn packed_fields(bytes: &[u8]) -> impl Iterator<Item = Field<'_>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= bytes.len() {
            return None;
        }
        let (field, used) = Field::parse(&bytes[at..]).expect("well formed");
        at += used;
        Some(field)
    })
}

/// Walks a packed buffer field by field without building [`Field`]s:
/// `visit(offset, length, flags, name)` for each until it returns true;
/// returns that field's offset and length. The hot path of HGET and HSET
/// on small hashes: one-byte lengths (names and values under 128 bytes)
/// are read directly.
fn packed_scan(bytes: &[u8], mut visit: impl FnMut(u8, &[u8]) -> bool) -> Option<(usize, usize)> {
    let length = |at: usize| -> (usize, usize) {
        match bytes[at] {
            short if short < 0x80 => (short as usize, 1),
            _ => read_varint(&bytes[at..]).expect("well formed"),
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let flags = bytes[at];
        let (name_len, used) = length(at + 1);
        let name_at = at + 1 + used;
        let (value_len, used) = length(name_at + name_len);
        let value_at = name_at + name_len + used;
        let end = value_at + value_len + if flags & HAS_DEADLINE != 0 { 8 } else { 0 };
        if visit(flags, &bytes[name_at..name_at + name_len]) {
            return Some((at, end - at));
        }
        at = end;
    }
    None
}

/// The field `name` in a packed buffer.
fn packed_find<'a>(bytes: &'a [u8], name: &[u8]) -> Option<Field<'a>> {
    let (at, len) = packed_position(bytes, name)?;
    Some(Field::parse(&bytes[at..at + len]).expect("well formed").0)
}

/// Offset and length of field `name` in a packed buffer. Names of one
/// hash tend to share a prefix (`field:1`, `field:2`…): the last byte is
/// compared before the rest.
fn packed_position(bytes: &[u8], name: &[u8]) -> Option<(usize, usize)> {
    packed_scan(bytes, |_, found| {
        found.len() == name.len() && found.last() == name.last() && found == name
    })
}

/// A packed hash borrowed from its image (how the keyspace keeps small
/// hashes: the image is the value's bytes).
#[derive(Clone, Copy, Debug)]
pub struct Packed<'a> {
    count: usize,
    fields: &'a [u8],
}

impl<'a> Packed<'a> {
    /// The packed hash whose image is `image`, which the keyspace has
    /// checked when it stored it.
    pub(crate) fn from_image(image: &'a [u8]) -> Packed<'a> {
        let (count, used) = read_varint(image).expect("stored images are well formed");
        Packed {
            count,
            fields: &image[used..],
        }
    }
}

/// A hash as stored, read-only: a packed image or a hash value.
#[derive(Clone, Copy)]
pub enum HashRef<'a> {
    Packed(Packed<'a>),
    Value(&'a HashValue),
}

impl<'a> HashRef<'a> {
    /// Every stored field, expired ones included, in storage order.
    pub fn fields(self) -> Box<dyn Iterator<Item = Field<'a>> + 'a> {
        match self {
            HashRef::Packed(packed) => Box::new(packed_fields(packed.fields)),
            HashRef::Value(hash) => hash.fields(),
        }
    }

    /// Fields stored, expired ones included until removed.
    pub fn len(self) -> usize {
        match self {
            HashRef::Packed(packed) => packed.count,
            HashRef::Value(hash) => hash.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    fn find(self, name: &[u8]) -> Option<Field<'a>> {
        match self {
            HashRef::Packed(packed) => packed_find(packed.fields, name),
            HashRef::Value(hash) => hash.find(name),
        }
    }

    /// A live field.
    pub fn field(self, name: &[u8], now_ms: u64) -> Option<Field<'a>> {
        self.find(name).filter(|f| f.is_live(now_ms))
    }

    /// The value of a live field.
    pub fn get(self, name: &[u8], now_ms: u64) -> Option<&'a [u8]> {
        self.field(name, now_ms).map(|f| f.value)
    }

    /// A live field's deadline: `Some(None)` for a field without one.
    pub fn deadline(self, name: &[u8], now_ms: u64) -> Option<Option<u64>> {
        self.field(name, now_ms).map(|f| f.deadline)
    }

    /// The live fields and their values (packed: insertion order).
    pub fn iter(self, now_ms: u64) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.fields()
            .filter(move |f| f.is_live(now_ms))
            .map(|f| (f.name, f.value))
    }

    /// Bytes of this hash's image (about: the count's varint aside).
    pub fn image_bytes(self) -> usize {
        match self {
            HashRef::Packed(packed) => packed.fields.len() + 10,
            HashRef::Value(hash) => hash.image_bytes(),
        }
    }

    /// Live fields.
    pub fn live_len(self, now_ms: u64) -> usize {
        if !self.has_deadlines() {
            return self.len();
        }
        self.fields().filter(|f| f.is_live(now_ms)).count()
    }

    /// Whether any field has a deadline.
    pub(crate) fn has_deadlines(self) -> bool {
        match self {
            HashRef::Packed(_) => self.fields().any(|f| f.deadline.is_some()),
            HashRef::Value(hash) => hash.deadlines > 0,
        }
    }

    /// OBJECT ENCODING's name.
    pub fn encoding_name(self) -> &'static str {
        let packed = match self {
            HashRef::Packed(_) => true,
            HashRef::Value(hash) => matches!(hash.repr, Repr::Packed { .. }),
        };
        match (packed, packed && self.has_deadlines()) {
            (true, true) => "listpackex",
            (true, false) => "listpack",
            (false, _) => "hashtable",
        }
    }

    /// Appends this hash's image (see the module documentation).
    pub fn encode_image(self, out: &mut Vec<u8>) {
        match self {
            HashRef::Packed(packed) => {
                write_varint(out, packed.count);
                out.extend_from_slice(packed.fields);
            }
            HashRef::Value(hash) => hash.encode_image(out),
        }
    }

    /// A live field picked uniformly at random (`random` draws u64s), or
    /// `None` when there is none. A table is sampled by bucket (O(1)
    /// expected: tables are kept at least 1/8 full); a packed hash is
    /// walked.
    pub fn random_field(self, now_ms: u64, mut random: impl FnMut() -> u64) -> Option<Field<'a>> {
        const BUCKET_DRAWS_MAX: usize = 256;
        if let HashRef::Value(HashValue {
            repr: Repr::Table(table),
            ..
        }) = self
            && table.len() > 0
        {
            for _ in 0..BUCKET_DRAWS_MAX {
                if let Some(found) = table.in_bucket(random())
                    && found.is_live(now_ms)
                {
                    return Some(found);
                }
            }
        }
        // Packed, or a table of mostly expired fields: walk the live ones.
        let live = self.live_len(now_ms);
        if live == 0 {
            return None;
        }
        let pick = (random() % live as u64) as usize;
        self.fields().filter(|f| f.is_live(now_ms)).nth(pick)
    }

    /// The earliest field deadline, if any field has one.
    pub(crate) fn next_deadline(self) -> Option<u64> {
        if !self.has_deadlines() {
            return None;
        }
        self.fields().filter_map(|f| f.deadline).min()
    }

    /// An owned copy to change, in the encoding `limits` call for.
    pub fn to_value(self, limits: Limits) -> HashValue {
        match self {
            HashRef::Packed(packed) if packed.count <= limits.max_packed_entries => {
                let mut hash = HashValue {
                    repr: Repr::Packed {
                        bytes: packed.fields.to_vec(),
                        count: packed.count,
                    },
                    deadlines: packed_fields(packed.fields)
                        .filter(|f| f.deadline.is_some())
                        .count(),
                };
                if packed_fields(packed.fields)
                    .any(|f| f.name.len().max(f.value.len()) > limits.max_packed_value)
                {
                    hash.convert_to_table();
                }
                hash
            }
            _ => {
                let mut hash = HashValue::new();
                hash.convert_to_table();
                for field in self.fields() {
                    hash.put(field, limits);
                }
                hash
            }
        }
    }
}

enum Repr {
    Packed { bytes: Vec<u8>, count: usize },
    Table(FieldTable),
}

/// A hash value (see the module documentation).
pub struct HashValue {
    repr: Repr,
    /// Stored fields that have a deadline, so a hash without any is known
    /// as such without a pass over its fields.
    deadlines: usize,
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

impl std::fmt::Debug for HashValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashValue")
            .field("encoding", &self.as_ref().encoding_name())
            .field("len", &self.len())
            .finish()
    }
}

impl HashValue {
    pub fn new() -> HashValue {
        HashValue {
            repr: Repr::Packed {
                bytes: Vec::new(),
                count: 0,
            },
            deadlines: 0,
        }
    }

    /// This hash, read-only.
    pub fn as_ref(&self) -> HashRef<'_> {
        HashRef::Value(self)
    }

    /// Fields its hash table holds before it grows (`None`: packed).
    pub(crate) fn table_capacity(&self) -> Option<usize> {
        match &self.repr {
            Repr::Packed { .. } => None,
            Repr::Table(table) => Some(table.capacity()),
        }
    }

    /// Fields stored, expired ones included until removed.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed { count, .. } => *count,
            Repr::Table(table) => table.len(),
        }
    }

    /// Bytes of this hash's image.
    pub fn image_bytes(&self) -> usize {
        match &self.repr {
            Repr::Packed { bytes, .. } => bytes.len() + 10,
            Repr::Table(table) => table.image_bytes() + 10,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every stored field, expired ones included, in storage order.
    fn fields(&self) -> Box<dyn Iterator<Item = Field<'_>> + '_> {
        match &self.repr {
            Repr::Packed { bytes, .. } => Box::new(packed_fields(bytes)),
            Repr::Table(table) => Box::new(table.iter()),
        }
    }

    fn find(&self, name: &[u8]) -> Option<Field<'_>> {
        match &self.repr {
            Repr::Packed { bytes, .. } => packed_find(bytes, name),
            Repr::Table(table) => table.get(name),
        }
    }

    /// Stores `field` as it is (value and deadline), replacing a field of
    /// that name, converting to a table first if `limits` call for it.
    pub fn put(&mut self, field: Field, limits: Limits) {
        let convert = match &self.repr {
            Repr::Packed { count, .. } => {
                let too_long = field.name.len().max(field.value.len()) > limits.max_packed_value;
                let too_many = *count >= limits.max_packed_entries
                    && (*count > limits.max_packed_entries || self.find(field.name).is_none());
                too_many || too_long
            }
            Repr::Table(_) => false,
        };
        if convert {
            self.convert_to_table();
        }
        let had_deadline = self.find(field.name).is_some_and(|f| f.deadline.is_some());
        self.deadlines = self.deadlines + field.deadline.is_some() as usize - had_deadline as usize;
        match &mut self.repr {
            Repr::Packed { bytes, count } => match packed_position(bytes, field.name) {
                Some((at, len)) => {
                    let mut encoded = Vec::new();
                    field.encode(&mut encoded);
                    bytes.splice(at..at + len, encoded);
                }
                None => {
                    field.encode(bytes);
                    *count += 1;
                }
            },
            Repr::Table(table) => table.put(field),
        }
    }

    /// Removes a field (live or expired); true when it was there and live.
    pub fn remove(&mut self, name: &[u8], now_ms: u64) -> bool {
        let found = self.find(name);
        let live = found.is_some_and(|f| f.is_live(now_ms));
        self.deadlines -= found.is_some_and(|f| f.deadline.is_some()) as usize;
        match &mut self.repr {
            Repr::Packed { bytes, count } => {
                if let Some((at, len)) = packed_position(bytes, name) {
                    bytes.drain(at..at + len);
                    *count -= 1;
                }
            }
            Repr::Table(table) => {
                table.remove(name);
            }
        }
        live
    }

    /// Removes every field whose deadline has passed; returns their names.
    pub fn remove_expired(&mut self, now_ms: u64) -> Vec<Vec<u8>> {
        if self.deadlines == 0 {
            return Vec::new();
        }
        let expired: Vec<Vec<u8>> = self
            .fields()
            .filter(|f| !f.is_live(now_ms))
            .map(|f| f.name.to_vec())
            .collect();
        for name in &expired {
            self.remove(name, now_ms);
        }
        expired
    }

    fn convert_to_table(&mut self) {
        let mut table = FieldTable::with_capacity(self.len() + 1, self.image_bytes());
        for field in self.fields() {
            table.put(field);
        }
        self.repr = Repr::Table(table);
    }

    /// Bytes of RAM this value holds (requested sizes, before allocator
    /// rounding), for the census and MEMORY USAGE.
    pub fn memory_bytes(&self) -> usize {
        match &self.repr {
            Repr::Packed { bytes, .. } => bytes.capacity(),
            Repr::Table(table) => table.memory_bytes(),
        }
    }

    /// Appends this hash's image (see the module documentation).
    pub fn encode_image(&self, out: &mut Vec<u8>) {
        write_varint(out, self.len());
        match &self.repr {
            Repr::Packed { bytes, .. } => out.extend_from_slice(bytes),
            Repr::Table(table) => {
                for field in table.raw_fields() {
                    out.extend_from_slice(field);
                }
            }
        }
    }

    /// A packed hash's image: what the keyspace stores for it.
    pub(crate) fn packed_image(&self) -> Option<Vec<u8>> {
        match &self.repr {
            Repr::Packed { bytes, count } => {
                let mut out = Vec::with_capacity(bytes.len() + 3);
                write_varint(&mut out, *count);
                out.extend_from_slice(bytes);
                Some(out)
            }
            Repr::Table(_) => None,
        }
    }
}

/// The image of a hash of `fields` (distinct names), for a new key's
/// value.
pub fn image_of(fields: &[Field]) -> Vec<u8> {
    let mut image = Vec::new();
    write_varint(&mut image, fields.len());
    for field in fields {
        field.encode(&mut image);
    }
    image
}

/// Checks that `image` is a well-formed hash image with no field twice.
pub(crate) fn check_image(image: &[u8]) -> Result<(), BadImage> {
    let (count, mut at) = read_varint(image)?;
    let mut names = std::collections::HashSet::new();
    for _ in 0..count {
        let (field, used) = Field::parse(image.get(at..).ok_or(BadImage)?)?;
        if !names.insert(field.name) {
            return Err(BadImage);
        }
        at += used;
    }
    if at != image.len() {
        return Err(BadImage);
    }
    Ok(())
}

/// One change to a hash's fields.
#[derive(Clone, Copy, Debug)]
pub enum FieldChange<'a> {
    /// Store this field (value and deadline) as given.
    Put(Field<'a>),
    /// Remove the field of this name.
    Remove(&'a [u8]),
}

/// Applies `changes` to the packed image at `bytes[start..]` in place
/// (fields replaced, appended or removed where they are; the count
/// rewritten), when that is all they need: no field of the hash or of the
/// changes has a deadline (expiry bookkeeping is the general path's) and
/// the hash stays within the packed `limits` even if every put were new.
/// Returns the fields now stored, or `None`, leaving `bytes` untouched,
/// when the general path must run.
pub(crate) fn change_packed_in_place(
    bytes: &mut impl EditBytes,
    start: usize,
    changes: &[FieldChange],
    limits: Limits,
) -> Option<usize> {
    let (mut count, count_len) = read_varint(&bytes.as_bytes()[start..]).ok()?;
    let fields_at = start + count_len;
    let puts = changes
        .iter()
        .filter(|c| matches!(c, FieldChange::Put(_)))
        .count();
    let fits = changes.iter().all(|c| match c {
        FieldChange::Put(f) => {
            f.deadline.is_none() && f.name.len().max(f.value.len()) <= limits.max_packed_value
        }
        FieldChange::Remove(_) => true,
    });
    if !fits
        || count + puts > limits.max_packed_entries
        || packed_scan(&bytes.as_bytes()[fields_at..], |flags, _| {
            flags & HAS_DEADLINE != 0
        })
        .is_some()
    {
        return None;
    }
    let mut encoded = Vec::new();
    for change in changes {
        match *change {
            FieldChange::Put(field) => {
                encoded.clear();
                field.encode(&mut encoded);
                match packed_position(&bytes.as_bytes()[fields_at..], field.name) {
                    Some((at, len)) => {
                        let at = fields_at + at;
                        if encoded.len() == len {
                            bytes.as_bytes_mut()[at..at + len].copy_from_slice(&encoded);
                        } else {
                            bytes.replace_range(at..at + len, &encoded);
                        }
                    }
                    None => {
                        let end = bytes.as_bytes().len();
                        bytes.replace_range(end..end, &encoded);
                        count += 1;
                    }
                }
            }
            FieldChange::Remove(name) => {
                if let Some((at, len)) = packed_position(&bytes.as_bytes()[fields_at..], name) {
                    bytes.replace_range(fields_at + at..fields_at + at + len, &[]);
                    count -= 1;
                }
            }
        }
    }
    let mut prefix = [0u8; 10];
    let prefix_len = put_varint(&mut prefix, count);
    if prefix_len == count_len {
        bytes.as_bytes_mut()[start..fields_at].copy_from_slice(&prefix[..prefix_len]);
    } else {
        bytes.replace_range(start..fields_at, &prefix[..prefix_len]);
    }
    Some(count)
}

/// A byte buffer a packed image can be edited in, in place: an entry's
/// allocation, or a `Vec` (tests).
pub(crate) trait EditBytes {
    fn as_bytes(&self) -> &[u8];
    fn as_bytes_mut(&mut self) -> &mut [u8];
    /// Replaces `range` with `with` (as `Vec::splice`).
    fn replace_range(&mut self, range: std::ops::Range<usize>, with: &[u8]);
}

impl EditBytes for Vec<u8> {
    fn as_bytes(&self) -> &[u8] {
        self
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        self
    }

    fn replace_range(&mut self, range: std::ops::Range<usize>, with: &[u8]) {
        self.splice(range, with.iter().copied());
    }
}

impl EditBytes for crate::keyspace::thin::ThinBuf {
    fn as_bytes(&self) -> &[u8] {
        self.as_slice()
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }

    fn replace_range(&mut self, range: std::ops::Range<usize>, with: &[u8]) {
        crate::keyspace::thin::ThinBuf::replace_range(self, range, with);
    }
}

/// The hash as a plain map, for the tests' models: production code goes
/// through [`HashRef`] and [`FieldChange`]s.
#[cfg(test)]
impl HashValue {
    /// OBJECT ENCODING's name.
    pub fn encoding_name(&self) -> &'static str {
        self.as_ref().encoding_name()
    }

    /// The live fields and their values (packed: insertion order).
    pub fn iter(&self, now_ms: u64) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.as_ref().iter(now_ms)
    }

    /// The value of a live field.
    pub fn get(&self, name: &[u8], now_ms: u64) -> Option<&[u8]> {
        self.as_ref().get(name, now_ms)
    }

    /// A live field's deadline: `Some(None)` for a field without one.
    pub fn deadline(&self, name: &[u8], now_ms: u64) -> Option<Option<u64>> {
        self.as_ref().deadline(name, now_ms)
    }

    /// Sets `name` to `value` (clearing any deadline it had, as HSET does);
    /// true when the field is new (an expired one counts as new).
    pub fn insert(&mut self, name: &[u8], value: &[u8], limits: Limits, now_ms: u64) -> bool {
        let new = self.get(name, now_ms).is_none();
        self.put(
            Field {
                name,
                value,
                deadline: None,
            },
            limits,
        );
        new
    }

    /// Gives a field a deadline (`None`: persist); false when there is no
    /// such live field.
    pub(crate) fn set_deadline(&mut self, name: &[u8], deadline: Option<u64>, now_ms: u64) -> bool {
        let Some(found) = self.find(name).filter(|f| f.is_live(now_ms)) else {
            return false;
        };
        let value = found.value.to_vec();
        self.put(
            Field {
                name,
                value: &value,
                deadline,
            },
            Limits::NEVER_CONVERT,
        );
        true
    }

    /// A hash from its image, in the encoding `limits` call for. Checks
    /// the image (every field well formed, no field twice).
    pub(crate) fn decode_image(image: &[u8], limits: Limits) -> Result<HashValue, BadImage> {
        check_image(image)?;
        Ok(HashRef::Packed(Packed::from_image(image)).to_value(limits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::varint::varint_len;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const SMALL: Limits = Limits {
        max_packed_entries: 4,
        max_packed_value: 6,
    };

    #[test]
    fn packed_until_the_limits_then_a_table() {
        let mut hash = HashValue::new();
        for n in 0..4 {
            assert!(hash.insert(format!("f{n}").as_bytes(), b"v", SMALL, 0));
        }
        assert_eq!(hash.encoding_name(), "listpack");
        let order: Vec<&[u8]> = hash.iter(0).map(|(f, _)| f).collect();
        assert_eq!(order, [&b"f0"[..], b"f1", b"f2", b"f3"], "insertion order");
        assert!(!hash.insert(b"f1", b"again", SMALL, 0));
        assert_eq!(hash.encoding_name(), "listpack");
        assert!(hash.insert(b"f4", b"v", SMALL, 0));
        assert_eq!(hash.encoding_name(), "hashtable");
        let mut long = HashValue::new();
        long.insert(b"f", b"a value past the limit", SMALL, 0);
        assert_eq!(long.encoding_name(), "hashtable");
        assert_eq!(long.get(b"f", 0), Some(&b"a value past the limit"[..]));
    }

    #[test]
    fn field_deadlines_hide_fields_and_hset_clears_them() {
        let mut hash = HashValue::new();
        hash.insert(b"a", b"1", SMALL, 0);
        hash.insert(b"b", b"2", SMALL, 0);
        assert!(hash.set_deadline(b"a", Some(100), 0));
        assert_eq!(hash.encoding_name(), "listpackex");
        assert_eq!(hash.deadline(b"a", 50), Some(Some(100)));
        assert_eq!(hash.get(b"a", 100), None);
        assert_eq!(hash.len(), 2);
        assert_eq!(hash.remove_expired(100), vec![b"a".to_vec()]);
        assert_eq!(hash.len(), 1);
        hash.set_deadline(b"b", Some(100), 0);
        hash.insert(b"b", b"3", SMALL, 0);
        assert_eq!(hash.deadline(b"b", 200), Some(None));
        assert!(!hash.set_deadline(b"missing", Some(1), 0));
    }

    #[test]
    fn encoded_lengths_are_what_encoding_writes() {
        for n in [
            0usize,
            1,
            127,
            128,
            16_383,
            16_384,
            1 << 21,
            usize::MAX >> 1,
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, n);
            assert_eq!(varint_len(n), out.len(), "{n}");
            let mut fixed = [0u8; 10];
            let used = put_varint(&mut fixed, n);
            assert_eq!(&fixed[..used], &out[..]);
        }
        for (name, value, deadline) in [(0, 0, None), (5, 200, Some(7)), (300, 20_000, None)] {
            let (name, value) = (vec![b'n'; name], vec![b'v'; value]);
            let field = Field {
                name: &name,
                value: &value,
                deadline,
            };
            let mut out = Vec::new();
            field.encode(&mut out);
            assert_eq!(field.encoded_len(), out.len());
        }
    }

    #[test]
    fn damaged_images_are_refused() {
        let mut hash = HashValue::new();
        hash.insert(b"field", b"value", SMALL, 0);
        let mut image = Vec::new();
        hash.encode_image(&mut image);
        assert!(HashValue::decode_image(&image, SMALL).is_ok());
        for cut in 0..image.len() {
            assert_eq!(
                HashValue::decode_image(&image[..cut], SMALL).err(),
                Some(BadImage),
                "cut at {cut}"
            );
        }
        // A length that would overflow.
        let huge = [
            1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(HashValue::decode_image(&huge, SMALL).err(), Some(BadImage));
        let mut twice = vec![2];
        twice.extend_from_slice(&image[1..]);
        twice.extend_from_slice(&image[1..]);
        assert_eq!(HashValue::decode_image(&twice, SMALL).err(), Some(BadImage));
        let mut extra = image.clone();
        extra.push(0);
        assert_eq!(HashValue::decode_image(&extra, SMALL).err(), Some(BadImage));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, Vec<u8>),
        Remove(u8),
        Expire(u8, u64),
        Persist(u8),
        Advance(u64),
        RemoveExpired,
        Roundtrip,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12, proptest::collection::vec(any::<u8>(), 0..10))
                .prop_map(|(f, v)| Op::Insert(f, v)),
            2 => (0u8..12).prop_map(Op::Remove),
            1 => (0u8..12, 1u64..50).prop_map(|(f, d)| Op::Expire(f, d)),
            1 => (0u8..12).prop_map(Op::Persist),
            1 => (1u64..30).prop_map(Op::Advance),
            1 => Just(Op::RemoveExpired),
            1 => Just(Op::Roundtrip),
        ]
    }

    /// Field name `n`: short ones stay packed, every fifth is too long.
    fn name(n: u8) -> Vec<u8> {
        if n % 5 == 4 {
            format!("long-field-{n}").into_bytes()
        } else {
            vec![b'f', n]
        }
    }

    proptest! {
        /// Batches of puts and removals applied in place to a packed image
        /// (after a key-like prefix, as in an entry) give what a hash
        /// value applying them one by one gives.
        #[test]
        fn in_place_changes_match_the_value(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u8..8, proptest::option::of(0u8..4)), 1..4),
                1..20,
            )
        ) {
            let limits = Limits { max_packed_entries: 64, max_packed_value: 64 };
            let mut bytes = b"prefix".to_vec();
            bytes.push(0); // an empty image: count 0
            let mut model = HashValue::new();
            for batch in batches {
                let names: Vec<Vec<u8>> = batch.iter().map(|(f, _)| name(*f)).collect();
                let values: Vec<Vec<u8>> =
                    batch.iter().map(|(_, v)| vec![b'v'; v.unwrap_or(0) as usize * 3]).collect();
                let changes: Vec<FieldChange> = batch
                    .iter()
                    .enumerate()
                    .map(|(i, (_, v))| match v {
                        Some(_) => FieldChange::Put(Field {
                            name: &names[i],
                            value: &values[i],
                            deadline: None,
                        }),
                        None => FieldChange::Remove(&names[i]),
                    })
                    .collect();
                let count = change_packed_in_place(&mut bytes, 6, &changes, limits);
                for change in &changes {
                    match *change {
                        FieldChange::Put(f) => model.put(f, limits),
                        FieldChange::Remove(n) => {
                            model.remove(n, 0);
                        }
                    }
                }
                prop_assert_eq!(count, Some(model.len()));
                prop_assert_eq!(&bytes[..6], b"prefix");
                check_image(&bytes[6..]).unwrap();
                let decoded = HashValue::decode_image(&bytes[6..], limits).unwrap();
                let mut got: Vec<_> = decoded.iter(0).map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                let mut want: Vec<_> = model.iter(0).map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                got.sort();
                want.sort();
                prop_assert_eq!(got, want);
            }
        }
    }

    proptest! {
        /// Any sequence of operations gives what a plain map of (value,
        /// deadline) gives, in either encoding, also across an image.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(op(), 1..60)) {
            let mut hash = HashValue::new();
            let mut model: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)> = BTreeMap::new();
            let mut now = 0u64;
            for op in ops {
                let live = |m: &BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>, now: u64, f: &[u8]| {
                    m.get(f).filter(|(_, d)| d.is_none_or(|d| d > now)).is_some()
                };
                match op {
                    Op::Insert(f, v) => {
                        let f = name(f);
                        let new = !live(&model, now, &f);
                        prop_assert_eq!(hash.insert(&f, &v, SMALL, now), new);
                        model.insert(f, (v, None));
                    }
                    Op::Remove(f) => {
                        let f = name(f);
                        let was = live(&model, now, &f);
                        prop_assert_eq!(hash.remove(&f, now), was);
                        model.remove(&f);
                    }
                    Op::Expire(f, d) => {
                        let f = name(f);
                        let was = live(&model, now, &f);
                        prop_assert_eq!(hash.set_deadline(&f, Some(now + d), now), was);
                        if was {
                            model.get_mut(&f).unwrap().1 = Some(now + d);
                        }
                    }
                    Op::Persist(f) => {
                        let f = name(f);
                        let was = live(&model, now, &f);
                        prop_assert_eq!(hash.set_deadline(&f, None, now), was);
                        if was {
                            model.get_mut(&f).unwrap().1 = None;
                        }
                    }
                    Op::Advance(by) => now += by,
                    Op::RemoveExpired => {
                        let expired = model.values().filter(|(_, d)| d.is_some_and(|d| d <= now)).count();
                        prop_assert_eq!(hash.remove_expired(now).len(), expired);
                        model.retain(|_, (_, d)| d.is_none_or(|d| d > now));
                    }
                    Op::Roundtrip => {
                        let mut image = Vec::new();
                        hash.encode_image(&mut image);
                        hash = HashValue::decode_image(&image, SMALL).unwrap();
                    }
                }
                prop_assert_eq!(hash.len(), model.len());
                let mut got: Vec<(Vec<u8>, Vec<u8>)> =
                    hash.iter(now).map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                got.sort();
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .iter()
                    .filter(|(_, (_, d))| d.is_none_or(|d| d > now))
                    .map(|(f, (v, _))| (f.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, want);
                for n in 0..12 {
                    let f = name(n);
                    let want = model.get(&f).filter(|(_, d)| d.is_none_or(|d| d > now));
                    prop_assert_eq!(hash.get(&f, now), want.map(|(v, _)| &v[..]));
                    prop_assert_eq!(hash.deadline(&f, now), want.map(|(_, d)| *d));
                }
                let packable = model.len() <= SMALL.max_packed_entries;
                if !packable {
                    prop_assert_eq!(hash.encoding_name(), "hashtable");
                }
            }
        }
    }
}
