//! One key and its value in RAM ([`Entry`]), its flags and LRU clock, and
//! the handle through which commands change a value ([`EntryMut`]).
//!
//! ## One allocation per key
//!
//! RAM per key is what tiering sells (DESIGN.md: a key whose value is on
//! disk should cost little more than its own bytes), and a lookup should
//! touch one cache line behind the table. So an entry is a single pointer
//! (a [`ThinBuf`]) in its table slot, and its one allocation holds, in
//! order:
//!
//! | bytes | field | |
//! |---|---|---|
//! | 1, 2 or 5 | length | the allocation's own (`ThinBuf`): one byte below 128 |
//! | 4 | clock and flags | LRU clock (seconds mod 2^24, Redis' width) in the low 24 bits; INT, VOLATILE, SEEN, TRANSIENT, FETCHED above (COLD is the pointer's tag bit) |
//! | 1 | shape | the type (string, hash), BOXED, HAS_LOC |
//! | 8 | location | only with HAS_LOC: where the log holds the value's image ([`NO_LOC`] for none) |
//! | 8 | deadline | only with VOLATILE: Unix ms |
//! | 1 or 5 | key length | one byte below 255, else 255 and a `u32` |
//! | n | key | |
//! | rest | value | a string's bytes or a small hash's packed image; nothing while cold; with OUT or BOXED, 8 bytes: the address of the value's own allocation |
//!
//! A key of 14 bytes whose value is on disk is thus 29 bytes of
//! allocation (mimalloc's 32-byte class; 15 bytes fit it too) plus its
//! table slot. The location field is reserved when an
//! entry is made while the tier tracks locations, so giving the entry its
//! location at commit does not reallocate; without tiering entries have
//! none and pay nothing for it.
//!
//! A string can also live in an allocation of its own (OUT: a
//! [`ThinBuf`] of its bytes) when that costs less RAM once the allocator
//! rounds both up to its size classes: a 1000-byte value with a 14-byte
//! key and a location is 1 032 bytes inline, which mimalloc serves from
//! its 1 280-byte class, but 40 + 1 024 split. The server tells the
//! engine its allocator's size classes ([`thin::set_size_class`]).
//!
//! Values that are large or structured live beside the entry ([`Big`]): a
//! hash past the packed limits (a live table changed field by field) and
//! a string of more than [`BIG_STRING_BYTES`]. A big value keeps its
//! address while its entry is moved, renamed between databases by SWAPDB
//! or grown, which is how a checkpoint copying it piece by piece follows
//! it ([`Entry::big_string_identity`]).

use std::ops::Deref;

use crate::keyspace::access;
use crate::keyspace::thin::{self, ThinBuf, size_class};
use crate::storage::group::GroupSlot;
use crate::storage::record::{Draft, FLAG_INT, Kind, VALUE_HASH};
use crate::tiering::tier::{LiveCounts, NO_LOC};
use crate::types::hash::{self, FieldChange, HashRef, HashValue, Limits, Packed};
use crate::types::list::ListValue;
use crate::types::set::SetValue;
use crate::types::stream::StreamValue;
use crate::types::value::{Value, ValueRef, ValueType};
use crate::types::zset::ZSetValue;

/// Flags, in the top byte of the clock-and-flags word.
pub(crate) const INT: u32 = 1 << 24;
/// The header holds the 8-byte deadline.
pub(crate) const VOLATILE: u32 = 1 << 25;
/// The value is only on disk, at the entry's location. Kept in the
/// pointer's tag bit ([`ThinBuf::tag`]), not in the word: eviction and
/// every "is it cold?" look at it without a cache miss.
pub(crate) const COLD: u32 = 1 << 26;
/// Read from disk once recently without being kept: a second read within
/// [`PROMOTE_WINDOW_S`] keeps it in RAM.
pub(crate) const SEEN: u32 = 1 << 27;
/// Read in for one command only; leaves RAM again after it.
pub(crate) const TRANSIENT: u32 = 1 << 28;
/// Read from disk for the coming command (which counts it as a disk hit).
pub(crate) const FETCHED: u32 = 1 << 29;
/// A string changed in place (APPEND, SETRANGE): OBJECT ENCODING says
/// `raw` whatever its length, as Redis' in-place changes leave a raw
/// string until the value is replaced. On an int-encoded string (with
/// [`INT`]) it marks a copy instead (COPY): not one of Redis' shared
/// integers. Not kept across a restart (nor is it in Redis, whose load
/// encodes strings afresh).
pub(crate) const RAW: u32 = 1 << 30;
/// The low 24 bits: the access field, as [`crate::keyspace::access`] lays it out
/// (LRU: Unix seconds of the last access, modulo 2^24; LFU: minute and
/// counter), the width of Redis' `lru` field.
pub(crate) const CLOCK_MASK: u32 = crate::keyspace::access::FIELD_MASK;
/// A cold value read twice within this many seconds is promoted to RAM; a
/// value read once (a scan) is not.
pub(crate) const PROMOTE_WINDOW_S: u32 = 60;

/// Where the shape byte is, and the bytes before the optional fields.
const SHAPE_AT: usize = 4;
const FIXED_BYTES: usize = 5;
/// The type, in the shape byte's low bits. It stays while the value is
/// cold, so TYPE and WRONGTYPE never read the disk.
const TYPE_MASK: u8 = 0b111;
const TYPE_STRING: u8 = 0;
const TYPE_HASH: u8 = 1;
const TYPE_LIST: u8 = 2;
const TYPE_SET: u8 = 3;
const TYPE_ZSET: u8 = 4;
const TYPE_STREAM: u8 = 5;
/// The value region is the address of a [`Big`] value.
const BOXED: u8 = 1 << 3;
/// The header holds a location field.
const HAS_LOC: u8 = 1 << 4;
/// The value region is the address of a [`ThinBuf`] of the string's bytes.
const OUT: u8 = 1 << 5;
/// A key length byte meaning "a `u32` length follows".
const KEY_LEN_LONG: u8 = u8::MAX;
const ADDRESS_BYTES: usize = size_of::<usize>();

/// Strings longer than this live beside their entry ([`Big::Bytes`]):
/// growing one does not copy the entry's header and key along, and a
/// checkpoint can follow it by its address while copying it in pieces.
pub(crate) const BIG_STRING_BYTES: usize = 4 << 20;
/// Strings shorter than this always stay inline: the split only pays
/// where the allocator's classes are coarse.
const OUT_VALUE_BYTES_MIN: usize = 64;

/// Bytes of an entry before its value, not counting the allocation's
/// length prefix: word, shape, optional location and deadline, key length
/// and key.
fn head_bytes(loc_field: bool, deadline: u64, key_len: usize) -> usize {
    FIXED_BYTES
        + if loc_field { 8 } else { 0 }
        + if deadline != 0 { 8 } else { 0 }
        + if key_len < KEY_LEN_LONG as usize {
            1
        } else {
            5
        }
        + key_len
}

/// Whether a string of `value_len` bytes after a head of `head` bytes
/// costs less RAM in an allocation of its own.
fn prefer_out(head: usize, value_len: usize) -> bool {
    value_len >= OUT_VALUE_BYTES_MIN
        && size_class(thin::allocation_bytes(head + ADDRESS_BYTES))
            + size_class(thin::allocation_bytes(value_len))
            < size_class(thin::allocation_bytes(head + value_len))
}

/// Where the key starts in an entry's bytes, and its length: after the
/// word, the shape, and the location and deadline fields the shape and
/// word say are there.
fn key_span_in(bytes: &[u8]) -> (usize, usize) {
    let word = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
    let shape = bytes[SHAPE_AT];
    let at = FIXED_BYTES
        + if shape & HAS_LOC != 0 { 8 } else { 0 }
        + if word & VOLATILE != 0 { 8 } else { 0 };
    match bytes[at] {
        KEY_LEN_LONG => {
            let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().expect("4 bytes"));
            (at + 5, len as usize)
        }
        short => (at + 1, short as usize),
    }
}

/// One key and its value (see the module documentation for the layout).
pub struct Entry {
    buf: ThinBuf,
}

/// A value that lives beside its entry.
enum Big {
    /// A hash in the table encoding, changed field by field in place
    /// (boxed: its header would make every `Big` larger).
    Hash(Box<HashValue>),
    /// A string of more than [`BIG_STRING_BYTES`].
    Bytes(Vec<u8>),
    /// A list (always beside the entry: its nodes are what it edits).
    List(ListValue),
    /// A set, in any of its encodings.
    Set(SetValue),
    /// A sorted set, in either of its encodings.
    ZSet(ZSetValue),
    /// A stream (boxed: its header would make every `Big` larger).
    Stream(Box<StreamValue>),
}

impl Big {
    /// Elements of a collection (0 for a string).
    fn elements(&self) -> usize {
        match self {
            Big::Hash(hash) => hash.len(),
            Big::Bytes(_) => 0,
            Big::List(list) => list.len(),
            Big::Set(set) => set.len(),
            Big::ZSet(zset) => zset.len(),
            Big::Stream(stream) => stream.len(),
        }
    }

    fn memory_bytes(&self) -> usize {
        size_of::<Big>()
            + match self {
                Big::Hash(hash) => hash.memory_bytes(),
                Big::Bytes(bytes) => bytes.capacity(),
                Big::List(list) => list.memory_bytes(),
                Big::Set(set) => set.memory_bytes(),
                Big::ZSet(zset) => zset.memory_bytes(),
                Big::Stream(stream) => stream.memory_bytes(),
            }
    }
}

/// What an entry's value region is made of when it is (re)built.
enum Body<'v> {
    Inline(&'v [u8]),
    Out(ThinBuf),
    Big(Box<Big>),
    Cold,
}

/// The body for `value` after a head of `head` bytes: inline bytes, an
/// allocation of its own ([`prefer_out`]), or a [`Big`] value for a hash
/// past the packed `limits` or a long string; calls `build` with it (an
/// inline body borrows from `value` or from a local).
fn with_body<R>(value: Value, limits: Limits, head: usize, build: impl FnOnce(Body) -> R) -> R {
    match value {
        Value::Hash(image) => {
            let packed = HashRef::Packed(Packed::from_image(&image));
            if fits_packed(packed, limits) {
                build(Body::Inline(&image))
            } else {
                build(Body::Big(Box::new(Big::Hash(Box::new(
                    packed.to_value(limits),
                )))))
            }
        }
        Value::List(image) => {
            let list = ListValue::decode_image(&image, crate::types::limits::list())
                .expect("list images are checked before they are stored");
            build(Body::Big(Box::new(Big::List(list))))
        }
        Value::Set(image) => {
            let set = SetValue::decode_image(&image, &crate::types::limits::get())
                .expect("set images are checked before they are stored");
            build(Body::Big(Box::new(Big::Set(set))))
        }
        Value::ZSet(image) => {
            let zset = ZSetValue::decode_image(&image, &crate::types::limits::get())
                .expect("sorted set images are checked before they are stored");
            build(Body::Big(Box::new(Big::ZSet(zset))))
        }
        Value::Stream(image) => {
            let stream = StreamValue::decode_image(&image)
                .expect("stream images are checked before they are stored");
            build(Body::Big(Box::new(Big::Stream(Box::new(stream)))))
        }
        Value::Str(bytes) if bytes.len() > BIG_STRING_BYTES => {
            build(Body::Big(Box::new(Big::Bytes(bytes.into_owned()))))
        }
        Value::Str(bytes) if prefer_out(head, bytes.len()) => {
            build(Body::Out(ThinBuf::from_parts(&[&bytes])))
        }
        Value::Str(bytes) => build(Body::Inline(&bytes)),
        Value::Int(n) => {
            let mut digits = itoa::Buffer::new();
            build(Body::Inline(digits.format(n).as_bytes()))
        }
    }
}

fn type_of(value: &Value) -> u8 {
    match value {
        Value::Hash(_) => TYPE_HASH,
        Value::List(_) => TYPE_LIST,
        Value::Set(_) => TYPE_SET,
        Value::ZSet(_) => TYPE_ZSET,
        Value::Stream(_) => TYPE_STREAM,
        Value::Int(_) | Value::Str(_) => TYPE_STRING,
    }
}

/// The shape byte's type bits of `value_type`.
fn type_code(value_type: ValueType) -> u8 {
    match value_type {
        ValueType::String => TYPE_STRING,
        ValueType::Hash => TYPE_HASH,
        ValueType::List => TYPE_LIST,
        ValueType::Set => TYPE_SET,
        ValueType::ZSet => TYPE_ZSET,
        ValueType::Stream => TYPE_STREAM,
    }
}

fn fits_packed(hash: HashRef, limits: Limits) -> bool {
    hash.len() <= limits.max_packed_entries
        && hash
            .fields()
            .all(|f| f.name.len().max(f.value.len()) <= limits.max_packed_value)
}

/// The allocation of an entry: `word` (clock and flags; VOLATILE is set
/// from `deadline`), the type, a location field when `loc` is given, the
/// deadline when not 0, the key, and `body`.
fn build(
    word: u32,
    type_code: u8,
    loc: Option<u64>,
    deadline: u64,
    key: &[u8],
    body: Body,
) -> ThinBuf {
    debug_assert_eq!(type_code & !TYPE_MASK, 0);
    let word = if deadline != 0 {
        word | VOLATILE
    } else {
        word & !VOLATILE
    };
    let mut shape = type_code;
    let loc_bytes = loc.map(u64::to_le_bytes);
    if loc_bytes.is_some() {
        shape |= HAS_LOC;
    }
    let address;
    let value: &[u8] = match body {
        Body::Inline(bytes) => bytes,
        Body::Cold => &[],
        Body::Out(buf) => {
            shape |= OUT;
            address = buf.into_address().to_le_bytes();
            &address
        }
        Body::Big(big) => {
            shape |= BOXED;
            address = Box::into_raw(big).expose_provenance().to_le_bytes();
            &address
        }
    };
    let deadline_bytes = deadline.to_le_bytes();
    let mut key_len = [0u8; 5];
    let key_len = if key.len() < KEY_LEN_LONG as usize {
        key_len[0] = key.len() as u8;
        &key_len[..1]
    } else {
        let long = u32::try_from(key.len()).expect("keys are limited by proto-max-bulk-len");
        key_len[0] = KEY_LEN_LONG;
        key_len[1..].copy_from_slice(&long.to_le_bytes());
        &key_len[..]
    };
    let cold = word & COLD != 0;
    let word = word & !COLD;
    let mut buf = ThinBuf::from_parts(&[
        &word.to_le_bytes(),
        &[shape],
        loc_bytes.as_ref().map_or(&[][..], |b| &b[..]),
        if deadline != 0 {
            &deadline_bytes[..]
        } else {
            &[]
        },
        key_len,
        key,
        value,
    ]);
    buf.set_tag(cold);
    buf
}

impl Entry {
    /// A new entry; a hash value is an image the caller has checked.
    /// `loc_field` reserves the location field (the tier tracks
    /// locations, so the commit will give it one).
    pub(crate) fn new(
        key: &[u8],
        value: Value,
        deadline: u64,
        limits: Limits,
        now_ms: u64,
        loc_field: bool,
    ) -> Entry {
        let word = access::created(now_ms)
            | if matches!(value, Value::Int(_)) {
                INT
            } else {
                0
            };
        let type_code = type_of(&value);
        let loc = loc_field.then_some(NO_LOC);
        let head = head_bytes(loc_field, deadline, key.len());
        let buf = with_body(value, limits, head, |body| {
            build(word, type_code, loc, deadline, key, body)
        });
        Entry { buf }
    }

    /// An entry whose value is only on disk, at `loc` (recovery).
    pub(crate) fn new_cold(
        key: &[u8],
        deadline: u64,
        int: bool,
        value_type: ValueType,
        loc: u64,
        now_ms: u64,
    ) -> Entry {
        let word = access::created(now_ms) | COLD | if int { INT } else { 0 };
        Entry {
            buf: build(
                word,
                type_code(value_type),
                Some(loc),
                deadline,
                key,
                Body::Cold,
            ),
        }
    }

    fn bytes(&self) -> &[u8] {
        self.buf.as_slice()
    }

    // The word and the shape are read and written in place, without the
    // buffer's length: every entry's bytes begin with them (`build` makes
    // no entry shorter than FIXED_BYTES), and they are what nearly every
    // access reads first.

    fn word(&self) -> u32 {
        // SAFETY: the bytes begin with the 4-byte word (see above).
        u32::from_le(unsafe { std::ptr::read_unaligned(self.buf.data_ptr().cast::<u32>()) })
    }

    fn set_word(&mut self, word: u32) {
        // SAFETY: as in `word`, through the exclusive borrow.
        unsafe {
            std::ptr::write_unaligned(self.buf.data_mut_ptr().cast::<u32>(), word.to_le());
        }
    }

    fn shape(&self) -> u8 {
        // SAFETY: the shape byte follows the word (see above).
        unsafe { *self.buf.data_ptr().add(SHAPE_AT) }
    }

    fn set_shape(&mut self, shape: u8) {
        // SAFETY: as in `shape`, through the exclusive borrow.
        unsafe { *self.buf.data_mut_ptr().add(SHAPE_AT) = shape };
    }

    fn deadline_at(&self) -> usize {
        FIXED_BYTES + if self.shape() & HAS_LOC != 0 { 8 } else { 0 }
    }

    /// Where the key starts and its length.
    fn key_span(&self) -> (usize, usize) {
        key_span_in(self.bytes())
    }

    /// Where the value region starts.
    fn value_at(&self) -> usize {
        let (at, len) = self.key_span();
        at + len
    }

    /// The address in the value region, when the shape has `bit` (OUT or
    /// BOXED).
    fn address(&self, bit: u8) -> Option<usize> {
        if self.shape() & bit == 0 {
            return None;
        }
        let at = self.value_at();
        let bytes = &self.bytes()[at..at + ADDRESS_BYTES];
        Some(usize::from_le_bytes(bytes.try_into().expect("an address")))
    }

    /// The address of the big value, when the value lives beside.
    fn big_address(&self) -> Option<usize> {
        self.address(BOXED)
    }

    /// A string's bytes in their own allocation (OUT).
    fn out_bytes(&self) -> Option<&[u8]> {
        let address = self.address(OUT)?;
        // SAFETY: an OUT entry's value region holds the address of a
        // ThinBuf it owns (made by `build` or `put_out`, reclaimed only by
        // `take_out`), unchanged while self is borrowed.
        Some(unsafe { ThinBuf::slice_at(address) })
    }

    /// Takes ownership of an OUT value's buffer (the entry must be rebuilt
    /// or given it back with [`Entry::put_out`]).
    fn take_out(&mut self) -> Option<ThinBuf> {
        let address = self.address(OUT)?;
        self.set_shape(self.shape() & !OUT);
        // SAFETY: the address came from ThinBuf::into_address in `build`
        // or `put_out`; clearing OUT makes this the only owner.
        Some(unsafe { ThinBuf::from_address(address) })
    }

    /// Gives an entry whose OUT buffer was taken its (changed) buffer back.
    fn put_out(&mut self, buf: ThinBuf) {
        debug_assert_eq!(self.shape() & (OUT | BOXED), 0);
        let at = self.value_at();
        let address = buf.into_address().to_le_bytes();
        self.buf.as_mut_slice()[at..at + ADDRESS_BYTES].copy_from_slice(&address);
        self.set_shape(self.shape() | OUT);
    }

    fn big(&self) -> Option<&Big> {
        let address = self.big_address()?;
        // SAFETY: a BOXED entry's value region holds the exposed address
        // of a Box<Big> it owns (made by `build`, freed only by
        // `take_big`), so it is live for as long as this borrow of self.
        Some(unsafe { &*std::ptr::with_exposed_provenance::<Big>(address) })
    }

    fn big_mut(&mut self) -> Option<&mut Big> {
        let address = self.big_address()?;
        // SAFETY: as in `big`, and self is borrowed exclusively.
        Some(unsafe { &mut *std::ptr::with_exposed_provenance_mut::<Big>(address) })
    }

    /// Takes ownership of the big value (the entry must be rebuilt next:
    /// its value region is left meaningless).
    fn take_big(&mut self) -> Option<Box<Big>> {
        let address = self.big_address()?;
        self.set_shape(self.shape() & !BOXED);
        // SAFETY: the address came from Box::into_raw in `build`, and
        // clearing BOXED above makes this the only owner from now on.
        Some(unsafe { Box::from_raw(std::ptr::with_exposed_provenance_mut::<Big>(address)) })
    }

    /// Rebuilds the allocation around a new body, keeping clock, flags
    /// (`word`), type, location field, deadline and key.
    fn rebuild(&mut self, word: u32, type_code: u8, body: Body) {
        let old_big = self.take_big();
        let old_out = self.take_out();
        let loc = (self.shape() & HAS_LOC != 0).then(|| self.loc_raw());
        let hash_tag = self.buf.hash_tag();
        self.buf = build(word, type_code, loc, self.deadline(), self.key(), body);
        // The key table found this entry by that tag: a new allocation
        // keeps it.
        self.buf.set_hash_tag(hash_tag);
        drop((old_big, old_out));
    }

    /// The head bytes a value built for this entry would follow.
    fn head(&self) -> usize {
        self.value_at()
    }

    pub(crate) fn has(&self, flag: u32) -> bool {
        let cold = if self.buf.tag() { COLD } else { 0 };
        (self.word() | cold) & flag != 0
    }

    pub(crate) fn set_flag(&mut self, flag: u32, on: bool) {
        if flag & COLD != 0 {
            self.buf.set_tag(on);
        }
        let word = self.word();
        let flag = flag & !COLD;
        self.set_word(if on { word | flag } else { word & !flag });
    }

    pub(crate) fn touch(&mut self, now_ms: u64) {
        let word = self.word();
        self.set_word((word & !CLOCK_MASK) | access::accessed(word & CLOCK_MASK, now_ms));
    }

    pub(crate) fn deadline(&self) -> u64 {
        if self.has(VOLATILE) {
            let at = self.deadline_at();
            u64::from_le_bytes(self.bytes()[at..at + 8].try_into().expect("8 bytes"))
        } else {
            0
        }
    }

    pub fn key(&self) -> &[u8] {
        // The bytes once: every key comparison of a table probe comes here.
        let bytes = self.bytes();
        let (at, len) = key_span_in(bytes);
        &bytes[at..at + len]
    }

    /// The value; only for an entry in RAM, which every [`Shard::get`](crate::Shard::get)
    /// returns.
    pub fn value(&self) -> ValueRef<'_> {
        assert!(
            !self.is_cold(),
            "value of a cold entry read without loading"
        );
        match self.big() {
            Some(Big::Hash(hash)) => ValueRef::Hash(HashValue::as_ref(hash)),
            Some(Big::List(list)) => ValueRef::List(list),
            Some(Big::Set(set)) => ValueRef::Set(set),
            Some(Big::ZSet(zset)) => ValueRef::ZSet(zset),
            Some(Big::Stream(stream)) => ValueRef::Stream(stream),
            Some(Big::Bytes(bytes)) => ValueRef::Str {
                bytes,
                int: self.has(INT),
            },
            None => {
                if let Some(bytes) = self.out_bytes() {
                    return ValueRef::Str {
                        bytes,
                        int: self.has(INT),
                    };
                }
                let bytes = self.inline_value();
                if self.is_hash() {
                    ValueRef::Hash(HashRef::Packed(Packed::from_image(bytes)))
                } else {
                    ValueRef::Str {
                        bytes,
                        int: self.has(INT),
                    }
                }
            }
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
            ValueRef::List(list) => {
                scratch.clear();
                list.encode_image(scratch);
                scratch
            }
            ValueRef::Set(set) => {
                scratch.clear();
                set.encode_image(scratch);
                scratch
            }
            ValueRef::ZSet(zset) => {
                scratch.clear();
                zset.encode_image(scratch);
                scratch
            }
            ValueRef::Stream(stream) => {
                scratch.clear();
                stream.encode_image(scratch);
                scratch
            }
        }
    }

    /// Bytes of the value's image (a SET record's payload), without
    /// encoding it.
    pub(crate) fn image_len(&self) -> usize {
        match self.value() {
            ValueRef::Str { bytes, .. } => bytes.len(),
            ValueRef::Hash(hash) => hash.image_bytes(),
            ValueRef::List(list) => list.image_len(),
            ValueRef::Set(set) => set.image_len(),
            ValueRef::ZSet(zset) => zset.image_len(),
            ValueRef::Stream(stream) => stream.image_len(),
        }
    }

    fn inline_value(&self) -> &[u8] {
        &self.bytes()[self.value_at()..]
    }

    /// Bytes of the entry's allocation that are not an inline value
    /// (header and key; a big value's address).
    pub(crate) fn head_len(&self) -> usize {
        let inline_value = if self.shape() & (BOXED | OUT) != 0 {
            0
        } else {
            self.inline_value().len()
        };
        thin::allocation_bytes(self.buf.len()) - inline_value
    }

    /// Bytes of the value held in RAM (0 when cold).
    pub(crate) fn value_len_in_ram(&self) -> usize {
        if let Some(big) = self.big() {
            return big.memory_bytes();
        }
        match self.out_bytes() {
            Some(bytes) => thin::allocation_bytes(bytes.len()),
            None => self.inline_value().len(),
        }
    }

    /// Whether the value is only on disk (the pointer's tag: known
    /// without touching the entry's memory).
    pub fn is_cold(&self) -> bool {
        self.buf.tag()
    }

    /// The location field: where the log holds the current value's
    /// image, or [`NO_LOC`].
    pub(crate) fn loc_raw(&self) -> u64 {
        if self.shape() & HAS_LOC == 0 {
            return NO_LOC;
        }
        let bytes = &self.bytes()[FIXED_BYTES..FIXED_BYTES + 8];
        u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
    }

    /// Sets the location (adding the field if the entry has none).
    pub(crate) fn set_loc(&mut self, loc: u64) {
        if self.shape() & HAS_LOC != 0 {
            self.buf.as_mut_slice()[FIXED_BYTES..FIXED_BYTES + 8]
                .copy_from_slice(&loc.to_le_bytes());
        } else if loc != NO_LOC {
            self.buf
                .replace_range(FIXED_BYTES..FIXED_BYTES, &loc.to_le_bytes());
            self.set_shape(self.shape() | HAS_LOC);
        }
    }

    /// Where the log holds the current value's image, if it does.
    pub(crate) fn loc(&self) -> Option<u64> {
        let loc = self.loc_raw();
        (loc != NO_LOC).then_some(loc)
    }

    /// The value's encoding, as OBJECT ENCODING replies it: a string
    /// changed in place is `raw` ([`RAW`]).
    pub fn encoding_name(&self) -> &'static str {
        if self.value_type() == ValueType::String && self.has(RAW) && !self.has(INT) {
            return "raw";
        }
        self.value().encoding_name()
    }

    /// Whether this int-encoded string was made by COPY ([`RAW`] on an
    /// int): OBJECT REFCOUNT then says 1, not Redis' shared integer.
    pub fn is_copied_int(&self) -> bool {
        self.has(INT) && self.has(RAW)
    }

    /// The location of the value when it is only on disk.
    pub(crate) fn cold_loc(&self) -> Option<u64> {
        self.is_cold().then(|| self.loc_raw())
    }

    /// The value's type, known without the value.
    pub fn value_type(&self) -> ValueType {
        match self.shape() & TYPE_MASK {
            TYPE_HASH => ValueType::Hash,
            TYPE_LIST => ValueType::List,
            TYPE_SET => ValueType::Set,
            TYPE_ZSET => ValueType::ZSet,
            TYPE_STREAM => ValueType::Stream,
            _ => ValueType::String,
        }
    }

    /// The Redis type name (TYPE), known without the value.
    pub fn type_name(&self) -> &'static str {
        self.value_type().name()
    }

    /// Whether the value is a hash (known without the value).
    pub(crate) fn is_hash(&self) -> bool {
        self.value_type() == ValueType::Hash
    }

    /// The record `value_type` of this entry's images.
    pub(crate) fn value_type_code(&self) -> u8 {
        self.value_type().record_code()
    }

    /// While a string bigger than [`BIG_STRING_BYTES`] lives beside this
    /// entry, its address: the same across SWAPDB and growth, different
    /// once the value is replaced or the key deleted (checkpoints copy
    /// such a value in pieces and follow it by this).
    pub(crate) fn big_string_identity(&self) -> Option<usize> {
        match self.big() {
            Some(Big::Bytes(_)) => self.big_address(),
            _ => None,
        }
    }

    /// Replaces the value (keeping key, deadline), leaving it in RAM.
    /// The caller has already forgotten the old location.
    pub(crate) fn replace_value(&mut self, value: Value, limits: Limits) {
        if let Value::Int(n) = value
            && !self.is_cold()
            && self.shape() & (BOXED | OUT) == 0
        {
            // INCR and friends: rewrite the digits in place when they fit.
            let mut digits = itoa::Buffer::new();
            let text = digits.format(n).as_bytes();
            let at = self.value_at();
            if self.buf.len() - at == text.len() {
                self.buf.as_mut_slice()[at..].copy_from_slice(text);
                self.set_flag(INT, true);
                self.set_flag(RAW, false);
                self.set_shape(self.shape() & !TYPE_MASK | TYPE_STRING);
                return;
            }
        }
        let mut word = self.word() & !(COLD | SEEN | TRANSIENT | INT | RAW);
        if matches!(value, Value::Int(_)) {
            word |= INT;
        }
        let type_code = type_of(&value);
        let head = self.head();
        with_body(value, limits, head, |body| {
            self.rebuild(word, type_code, body)
        });
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
        let value = match self.value_type().checked_image(bytes) {
            Some(checked) => checked
                .map_err(|_| format!("the stored {} image is damaged", self.value_type().name()))?,
            None => Value::Str(bytes.into()),
        };
        let mut word = self.word() & !(COLD | INT);
        if int {
            word |= INT;
        }
        let type_code = self.shape() & TYPE_MASK;
        let head = self.head();
        with_body(value, limits, head, |body| {
            self.rebuild(word, type_code, body)
        });
        Ok(())
    }

    /// Drops the value's bytes; it stays readable at its location. Returns
    /// the bytes freed.
    pub(crate) fn drop_value(&mut self) -> usize {
        debug_assert!(self.loc_raw() != NO_LOC && !self.is_cold());
        let before = self.value_len_in_ram();
        let word = (self.word() | COLD) & !TRANSIENT;
        self.rebuild(word, self.shape() & TYPE_MASK, Body::Cold);
        before
    }

    /// Sets the deadline (0: none), adding or removing its field when the
    /// entry gains or loses one.
    pub(crate) fn set_deadline_raw(&mut self, deadline: u64) {
        let at = self.deadline_at();
        match (self.has(VOLATILE), deadline != 0) {
            (true, true) => {
                self.buf.as_mut_slice()[at..at + 8].copy_from_slice(&deadline.to_le_bytes());
            }
            (false, false) => {}
            (true, false) => {
                self.buf.replace_range(at..at + 8, &[]);
                self.set_flag(VOLATILE, false);
            }
            (false, true) => {
                self.buf.replace_range(at..at, &deadline.to_le_bytes());
                self.set_flag(VOLATILE, true);
            }
        }
    }

    pub(crate) fn is_int(&self) -> bool {
        self.has(INT)
    }

    pub fn expire_at_ms(&self) -> Option<u64> {
        let deadline = self.deadline();
        (deadline != 0).then_some(deadline)
    }

    /// Sets the last access to `idle_s` seconds before `now_ms` (RESTORE
    /// IDLETIME), so eviction ranks the key as the source server did.
    /// Under LFU, which keeps no idle time, nothing changes (as in Redis).
    pub fn set_idle_s(&mut self, idle_s: u64, now_ms: u64) {
        if !access::is_lfu() {
            let word = self.word();
            self.set_word((word & !CLOCK_MASK) | access::lru_field(idle_s, now_ms));
        }
    }

    /// Sets the LFU counter (RESTORE FREQ); nothing under LRU, as in Redis.
    pub fn set_frequency(&mut self, counter: u8, now_ms: u64) {
        if access::is_lfu() {
            let word = self.word();
            self.set_word((word & !CLOCK_MASK) | access::lfu_field(counter, now_ms));
        }
    }

    /// The LFU counter as of `now_ms` (OBJECT FREQ under an LFU policy).
    pub fn frequency(&self, now_ms: u64) -> u8 {
        access::frequency(self.word() & CLOCK_MASK, now_ms)
    }

    /// The raw access field (DEBUG OBJECT's `lru`).
    pub fn access_field(&self) -> u32 {
        self.word() & CLOCK_MASK
    }

    pub fn idle_s(&self, now_ms: u64) -> u64 {
        access::idle_s(self.word() & CLOCK_MASK, now_ms)
    }

    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        let deadline = self.deadline();
        deadline != 0 && deadline <= now_ms && !crate::keyspace::replica_expiry::ignores_deadlines()
    }

    /// Bytes this entry costs in RAM (MEMORY USAGE): its table slot, its
    /// allocation (which holds the value only while it is in RAM) and a
    /// big value beside it.
    pub fn memory_bytes(&self) -> usize {
        size_of::<Entry>() + self.head_len() + self.value_len_in_ram()
    }
}

/// What the key table keeps in the entry's pointer
/// ([`crate::keyspace::table::Tagged`]).
impl Entry {
    pub(crate) fn hash_tag(&self) -> u8 {
        self.buf.hash_tag()
    }

    pub(crate) fn set_hash_tag(&mut self, tag: u8) {
        self.buf.set_hash_tag(tag);
    }

    pub(crate) fn prefetch(&self) {
        self.buf.prefetch();
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let big = self.take_big();
        drop(self.take_out());
        if let Some(big) = big
            && big.elements() > crate::keyspace::lazyfree::ELEMENTS_MIN
        {
            crate::keyspace::lazyfree::free_later(big);
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("type", &self.type_name())
            .field("word", &format_args!("{:#010x}", self.word()))
            .field("loc", &self.loc())
            .field("deadline", &self.deadline())
            .finish()
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
    /// The log group the change is appended to (the shard's).
    pub(crate) group: &'a mut GroupSlot,
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
        log_image(self.group, db, self.entry);
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
        assert_eq!(
            entry.value_type(),
            ValueType::String,
            "write_at on another type: commands check the type first"
        );
        let end = offset + bytes.len();
        if entry.shape() & BOXED == 0 && end > BIG_STRING_BYTES {
            // Growing past the entry's limit: the value moves beside.
            let word = entry.word();
            let value = match entry.take_out() {
                Some(out) => out.as_slice().to_vec(),
                None => entry.inline_value().to_vec(),
            };
            entry.rebuild(word, TYPE_STRING, Body::Big(Box::new(Big::Bytes(value))));
        }
        let len = if let Some(big) = entry.big_mut() {
            let Big::Bytes(value) = big else {
                unreachable!("checked above")
            };
            if end > value.len() {
                grow(value, end);
            }
            value[offset..end].copy_from_slice(bytes);
            value.len()
        } else if let Some(mut out) = entry.take_out() {
            write_into(&mut out, 0, offset, bytes);
            let len = out.len();
            entry.put_out(out);
            len
        } else {
            let start = entry.value_at();
            write_into(&mut entry.buf, start, offset, bytes);
            entry.buf.len() - start
        };
        entry.set_flag(INT | SEEN | TRANSIENT, false);
        entry.set_flag(RAW, true);
        self.group.append(&Draft {
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

/// Writes `bytes` at `offset` of the value that starts at `start` of
/// `buf`, zero-padding the value first if it is shorter.
fn write_into(buf: &mut ThinBuf, start: usize, offset: usize, bytes: &[u8]) {
    let end = start + offset + bytes.len();
    if end > buf.len() {
        if end > 2 * buf.len() {
            // Growing far: zeroed memory from the allocator (fresh pages
            // are zero already, nothing is written to them until used),
            // the old bytes copied in.
            buf.grow_zeroed(end);
        } else {
            // Growing a little reallocates once (often in place).
            buf.resize(end);
        }
    }
    buf.as_mut_slice()[start + offset..end].copy_from_slice(bytes);
}

/// Grows a big string to `len` zero-padded bytes: far growth takes zeroed
/// pages from the allocator instead of writing zeros.
fn grow(value: &mut Vec<u8>, len: usize) {
    if len > 2 * value.len() {
        let mut grown = vec![0u8; len];
        grown[..value.len()].copy_from_slice(value);
        *value = grown;
    } else {
        value.resize(len, 0);
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
    pub(crate) fn change_hash(
        self,
        db: usize,
        changes: &[FieldChange],
        now_ms: u64,
    ) -> HashChanged {
        let limits = self.limits;
        assert!(self.entry.is_hash(), "change_hash on a string");
        forget_loc(self.live, self.entry);
        let entry = self.entry;
        entry.set_flag(SEEN | TRANSIENT, false);
        // A small hash changed in place in its entry's allocation, as
        // Redis edits a listpack: no copy of the hash.
        if entry.shape() & (BOXED | OUT) == 0 {
            let start = entry.value_at();
            if let Some(len) = hash::change_packed_in_place(&mut entry.buf, start, changes, limits)
            {
                log_field_changes(self.group, db, entry.key(), changes);
                return HashChanged { len };
            }
        }
        let mut owned = match entry.big() {
            Some(_) => None,
            None => Some(entry.value().hash().expect("a hash").to_value(limits)),
        };
        let hash = match (&mut owned, entry.big_mut()) {
            (Some(owned), _) => owned,
            (None, Some(Big::Hash(hash))) => &mut **hash,
            (None, _) => unreachable!("a hash beside its entry"),
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
            let word = entry.word();
            match owned.packed_image() {
                Some(image) => entry.rebuild(word, TYPE_HASH, Body::Inline(&image)),
                None => entry.rebuild(
                    word,
                    TYPE_HASH,
                    Body::Big(Box::new(Big::Hash(Box::new(owned)))),
                ),
            }
        }
        if !expired.is_empty() {
            let removals: Vec<FieldChange> = expired
                .iter()
                .map(|name| FieldChange::Remove(name))
                .collect();
            log_field_changes(self.group, db, entry.key(), &removals);
        }
        log_field_changes(self.group, db, entry.key(), changes);
        if let Some(deadline) = next_deadline {
            self.fields_due
                .insert((deadline, db as u16, entry.key().into()));
        }
        HashChanged { len }
    }
}

/// The value of a boxed collection an operation changes (see
/// [`EntryMut::change_boxed`]).
pub(crate) enum Boxed<'a> {
    List(&'a mut ListValue),
    Set(&'a mut SetValue),
    ZSet(&'a mut ZSetValue),
    Stream(&'a mut StreamValue),
}

impl EntryMut<'_> {
    /// Applies an operation to this boxed collection (a list, set or
    /// sorted set of database `db`; `crate::types::collection` says which) with
    /// `apply`, and logs it as one `kind` record (type tag `value_type`)
    /// whose payload `encode` writes: the bytes logged grow with the
    /// command's arguments, not with the value. A collection left empty
    /// stays an (empty) entry: the caller deletes the key. `aux` is the
    /// record's (0 but for [`record::STREAM_AUX_DELIVERY_ONLY`]). When
    /// `changed_nothing` says the result changed nothing (an SREM of
    /// absent members, an XDEL of absent IDs), nothing is logged: as in
    /// Redis, such a command is no write (no record, no replication, no
    /// WATCH broken, no change counted), and under tiering the value's
    /// copy on disk stays its image (a value read in for the command
    /// leaves RAM again after it).
    pub(crate) fn change_boxed<R>(
        self,
        db: usize,
        (kind, value_type, aux): (Kind, u8, u64),
        apply: impl FnOnce(Boxed) -> R,
        encode: impl FnOnce(&mut Vec<u8>),
        changed_nothing: impl FnOnce(&R) -> bool,
    ) -> R {
        let entry = self.entry;
        let boxed = match entry.big_mut() {
            Some(Big::List(list)) => Boxed::List(list),
            Some(Big::Set(set)) => Boxed::Set(set),
            Some(Big::ZSet(zset)) => Boxed::ZSet(zset),
            Some(Big::Stream(stream)) => Boxed::Stream(stream),
            _ => unreachable!("an operation on another type: commands check the type first"),
        };
        let applied = apply(boxed);
        // A change that changed nothing leaves the value as its image on
        // disk is: the location stays, and a value read in for it may
        // leave RAM again at once.
        if !changed_nothing(&applied) {
            forget_loc(self.live, entry);
            entry.set_flag(SEEN | TRANSIENT, false);
            log_op(self.group, db, entry.key(), (kind, value_type, aux), encode);
        }
        applied
    }
}

/// Logs one collection operation record for `key`, its payload made by
/// `encode` (only when a log or a feed reads it).
pub(crate) fn log_op(
    group: &mut GroupSlot,
    db: usize,
    key: &[u8],
    (kind, value_type, aux): (Kind, u8, u64),
    encode: impl FnOnce(&mut Vec<u8>),
) {
    let mut payload = Vec::new();
    if group.encoding() {
        encode(&mut payload);
    }
    group.append(&Draft {
        kind,
        db: db as u16,
        aux,
        flags: 0,
        value_type,
        key,
        payload: &payload,
    });
}

/// Logs `changes` to the hash at `key`: runs of puts as one HASH_PUT
/// record, runs of removals as one HASH_DEL record, in order.
pub(crate) fn log_field_changes(
    group: &mut GroupSlot,
    db: usize,
    key: &[u8],
    changes: &[FieldChange],
) {
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
        group.append(&Draft {
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
    live.remove(entry.loc_raw());
    entry.set_loc(NO_LOC);
}

/// Logs the full current image of `entry` (a SET record).
pub(crate) fn log_image(group: &mut GroupSlot, db: usize, entry: &Entry) {
    let mut scratch = Vec::new();
    // Nothing takes the record (no log, no feed subscriber): only its key
    // counts, and a collection's image would be built for nothing.
    let payload = match group.encoding() {
        true => entry.image(&mut scratch),
        false => &[],
    };
    group.append(&Draft {
        kind: Kind::Set,
        db: db as u16,
        aux: entry.deadline(),
        flags: if entry.is_int() { FLAG_INT } else { 0 },
        value_type: entry.value_type_code(),
        key: entry.key(),
        payload,
    });
}

#[cfg(test)]
#[path = "entry_tests.rs"]
mod tests;

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::types::hash::Limits;

    const NOW_MS: u64 = 1_700_000_000_000;
    const KEY: &[u8] = b"memtier-123456";

    #[test]
    fn a_value_moves_out_where_the_size_classes_favour_it() {
        // 1000 bytes after a 32-byte head would take the 1 280-byte class:
        // split, 40 + 1 024.
        let value = vec![b'x'; 1000];
        let mut entry = Entry::new(
            KEY,
            Value::from_bytes(&value),
            0,
            Limits::default(),
            NOW_MS,
            true,
        );
        assert!(entry.out_bytes().is_some());
        assert_eq!(entry.value().as_bytes(), &value[..]);
        // 100 bytes without a location field fit the 128-byte class inline.
        let small = Entry::new(
            KEY,
            Value::from_bytes(&[b'y'; 100]),
            0,
            Limits::default(),
            NOW_MS,
            false,
        );
        assert!(small.out_bytes().is_none());
        // Every change keeps the bytes whichever the layout.
        entry.set_deadline_raw(NOW_MS + 10);
        entry.set_loc(99);
        assert_eq!(entry.value().as_bytes(), &value[..]);
        let mut live = crate::tiering::tier::LiveCounts::default();
        live.add(99);
        let mut fields_due = FieldsDue::new();
        let mut group = GroupSlot::default();
        let handle = EntryMut {
            entry: &mut entry,
            live: &mut live,
            limits: Limits::default(),
            fields_due: &mut fields_due,
            group: &mut group,
        };
        assert_eq!(handle.write_at(0, 1500, b"end"), 1503);
        assert!(entry.out_bytes().is_some());
        assert_eq!(&entry.value().as_bytes()[..1000], &value[..]);
        assert_eq!(&entry.value().as_bytes()[1500..], b"end");
        entry.set_loc(98);
        assert_eq!(entry.drop_value(), 2 + 1503);
        assert_eq!(entry.memory_bytes(), 8 + 1 + 5 + 8 + 8 + 1 + KEY.len());
        entry
            .install(&value, false, Limits::default())
            .expect("a string");
        assert_eq!(entry.value().as_bytes(), &value[..]);
        entry.replace_value(Value::Int(5), Limits::default());
        assert_eq!(entry.value().as_int(), Some(5));
        entry.replace_value(Value::from_bytes(&value), Limits::default());
        assert_eq!(entry.deadline(), NOW_MS + 10);
        assert_eq!(entry.value().as_bytes(), &value[..]);
    }
}
