//! One trait per value type, so that the keyspace reads, changes and
//! replays every type the same way.
//!
//! - [`Typed`]: a type as the keyspace names it. [`Shard::get_as`]
//!   (`crate::keyspace::shards::Shard`) finds a key of that type (another type is
//!   WRONGTYPE, decided without reading a cold value).
//! - [`Collection`]: a type whose changes the log records as operations
//!   rather than whole images (hashes, lists, sets, sorted sets): the
//!   operation a command hands [`EntryMut::change`], how it is applied and
//!   logged, how a replayed record decodes, and what a replayed record
//!   makes of a missing key. Recovery replays every such record through
//!   one generic path (`Shard::replay`), which also deletes a collection
//!   the replayed change emptied, as the command did.
//!
//! Adding a type is one module with its value and operations, and one
//! `impl Collection` here.

use crate::keyspace::entry::{Boxed, EntryMut, HashChanged, log_field_changes, log_op};
use crate::storage::group::GroupSlot;
use crate::storage::record::{Kind, VALUE_LIST, VALUE_SET, VALUE_STREAM, VALUE_ZSET};
use crate::types::hash::{self, FieldChange};
use crate::types::limits;
use crate::types::list::{Applied, ListOp, ListValue};
use crate::types::set::SetOp;
use crate::types::stream::{StreamOp, StreamValue};
use crate::types::value::{Value, ValueRef, ValueType};
use crate::types::zset::ZSetOp;

/// A value type as the keyspace names it.
pub trait Typed {
    const TYPE: ValueType;
}

/// A type whose changes are logged as operations (see the module docs).
pub trait Collection: Typed {
    /// What a command hands [`EntryMut::change`].
    type Op<'a>: ?Sized;
    /// A replayed record, decoded (it lends the operation).
    type Decoded<'a>: std::borrow::Borrow<Self::Op<'a>>;
    /// What applying it answers.
    type Changed;
    /// The record kinds its changes are logged as.
    const RECORDS: &'static [Kind];

    /// Applies `op` to `entry` (a key of this type in database `db`) and
    /// logs it. A collection left empty stays an (empty) entry: the
    /// caller deletes the key.
    fn change(entry: EntryMut<'_>, db: usize, op: &Self::Op<'_>, now_ms: u64) -> Self::Changed;

    /// A replayed record of kind `kind` (one of [`Collection::RECORDS`]).
    fn decode(kind: Kind, payload: &[u8]) -> Result<Self::Decoded<'_>, DamagedRecord>;

    /// The value a missing key becomes when `op` creates it (an add, a
    /// push, a put), with what applying `op` answers; `None` when the
    /// operation makes nothing.
    fn created_by(op: &Self::Op<'_>) -> Option<(Value<'static>, Self::Changed)>;

    /// Logs `op` as the change that made missing key `key` in database
    /// `db` (already stored, as [`Collection::created_by`] made it).
    fn log_created(group: &mut GroupSlot, db: usize, key: &[u8], op: &Self::Op<'_>);

    /// Whether the change left the collection empty (its key is then
    /// deleted, as Redis deletes an emptied collection).
    fn emptied(_changed: &Self::Changed, after: ValueRef<'_>) -> bool {
        after.is_empty_collection()
    }
}

/// A record whose payload does not decode.
#[derive(Debug)]
pub struct DamagedRecord;

/// Strings: their changes are whole images or byte ranges, not
/// operations; [`Typed`] only.
pub struct Str;

/// Hashes: field changes, logged as HASH_PUT and HASH_DEL runs.
pub struct Hash;

/// Lists: [`ListOp`], logged as LIST_OP records.
pub struct List;

/// Sets: [`SetOp`], logged as SET_OP records.
pub struct Set;

/// Sorted sets: [`ZSetOp`], logged as ZSET_OP records.
pub struct ZSet;

/// Streams: [`StreamOp`], logged as STREAM_OP records. An emptied stream
/// stays (Redis keeps it, with its groups and last ID).
pub struct Stream;

impl Typed for Stream {
    const TYPE: ValueType = ValueType::Stream;
}

impl Collection for Stream {
    type Op<'a> = StreamOp<'a>;
    type Decoded<'a> = StreamOp<'a>;
    type Changed = u64;
    const RECORDS: &'static [Kind] = &[Kind::StreamOp];

    fn change(entry: EntryMut<'_>, db: usize, op: &StreamOp<'_>, _now_ms: u64) -> u64 {
        // Another delivery of pending entries to a consumer that exists
        // is no change to the dataset; one that creates the consumer is
        // (as Redis 7.4 counts them).
        let aux = match (op, entry.value()) {
            (
                StreamOp::Deliver {
                    history: true,
                    group,
                    consumer,
                    ..
                },
                ValueRef::Stream(stream),
            ) if (stream.groups.get(*group))
                .is_some_and(|g| g.consumers.contains_key(*consumer)) =>
            {
                crate::storage::record::STREAM_AUX_DELIVERY_ONLY
            }
            _ => 0,
        };
        entry.change_boxed(
            db,
            (Kind::StreamOp, VALUE_STREAM, aux),
            |value| match value {
                Boxed::Stream(stream) => op.apply(stream),
                _ => unreachable!("a stream"),
            },
            |out| op.encode(out),
            // Entries deleted, trimmed or acknowledged: none is no change.
            |&changed| {
                changed == 0
                    && matches!(
                        op,
                        StreamOp::Delete(_)
                            | StreamOp::TrimThrough(_)
                            | StreamOp::TrimEntries(_)
                            | StreamOp::Ack { .. }
                    )
            },
        )
    }

    fn decode(_kind: Kind, payload: &[u8]) -> Result<StreamOp<'_>, DamagedRecord> {
        StreamOp::decode(payload).map_err(|_| DamagedRecord)
    }

    /// XADD makes a stream of its entry; XGROUP CREATE MKSTREAM an empty
    /// stream with its group.
    fn created_by(op: &StreamOp<'_>) -> Option<(Value<'static>, u64)> {
        match op {
            StreamOp::Add { .. } | StreamOp::CreateGroup { .. } => {
                let mut stream = StreamValue::new();
                let changed = op.apply(&mut stream);
                Some((Value::Stream(stream.image().into()), changed))
            }
            _ => None,
        }
    }

    fn log_created(group: &mut GroupSlot, db: usize, key: &[u8], op: &StreamOp<'_>) {
        log_op(group, db, key, (Kind::StreamOp, VALUE_STREAM, 0), |out| {
            op.encode(out)
        });
    }

    fn emptied(_changed: &u64, _after: ValueRef<'_>) -> bool {
        false
    }
}

impl Typed for Str {
    const TYPE: ValueType = ValueType::String;
}

impl Typed for Hash {
    const TYPE: ValueType = ValueType::Hash;
}

impl Typed for List {
    const TYPE: ValueType = ValueType::List;
}

impl Typed for Set {
    const TYPE: ValueType = ValueType::Set;
}

impl Typed for ZSet {
    const TYPE: ValueType = ValueType::ZSet;
}

impl Collection for Hash {
    type Op<'a> = [FieldChange<'a>];
    type Decoded<'a> = Vec<FieldChange<'a>>;
    type Changed = HashChanged;
    const RECORDS: &'static [Kind] = &[Kind::HashPut, Kind::HashDel];

    fn change(entry: EntryMut<'_>, db: usize, op: &[FieldChange<'_>], now_ms: u64) -> HashChanged {
        entry.change_hash(db, op, now_ms)
    }

    fn decode(kind: Kind, payload: &[u8]) -> Result<Vec<FieldChange<'_>>, DamagedRecord> {
        decode_fields(kind, payload)
    }

    /// Fields whose deadline passed are removed by the change: its count
    /// is what is left.
    fn emptied(changed: &HashChanged, _after: ValueRef<'_>) -> bool {
        changed.len == 0
    }

    fn created_by(op: &[FieldChange<'_>]) -> Option<(Value<'static>, HashChanged)> {
        // A put of fields makes a hash of them (a field put twice holds
        // the last value); a removal makes nothing.
        if op.is_empty() || !op.iter().all(|c| matches!(c, FieldChange::Put(_))) {
            return None;
        }
        let mut hash = hash::HashValue::new();
        for change in op {
            if let FieldChange::Put(field) = *change {
                hash.put(field, hash::Limits::NEVER_CONVERT);
            }
        }
        let mut image = Vec::new();
        hash.encode_image(&mut image);
        let len = hash.len();
        Some((Value::Hash(image.into()), HashChanged { len }))
    }

    fn log_created(group: &mut GroupSlot, db: usize, key: &[u8], op: &[FieldChange<'_>]) {
        log_field_changes(group, db, key, op);
    }
}

impl Collection for List {
    type Op<'a> = ListOp<'a>;
    type Decoded<'a> = ListOp<'a>;
    type Changed = Applied;
    const RECORDS: &'static [Kind] = &[Kind::ListOp];

    fn change(entry: EntryMut<'_>, db: usize, op: &ListOp<'_>, _now_ms: u64) -> Applied {
        entry.change_boxed(
            db,
            (Kind::ListOp, VALUE_LIST, 0),
            |value| match value {
                Boxed::List(list) => op.apply(list, limits::list()),
                _ => unreachable!("a list"),
            },
            |out| op.encode(out),
            |_| false,
        )
    }

    fn decode(_kind: Kind, payload: &[u8]) -> Result<ListOp<'_>, DamagedRecord> {
        ListOp::decode(payload).map_err(|_| DamagedRecord)
    }

    fn created_by(op: &ListOp<'_>) -> Option<(Value<'static>, Applied)> {
        let (ListOp::Push(..) | ListOp::Moved(..)) = op else {
            return None;
        };
        let mut list = ListValue::new();
        let applied = op.apply(&mut list, limits::list());
        let mut image = Vec::with_capacity(list.image_len());
        list.encode_image(&mut image);
        Some((Value::List(image.into()), applied))
    }

    fn log_created(group: &mut GroupSlot, db: usize, key: &[u8], op: &ListOp<'_>) {
        log_op(group, db, key, (Kind::ListOp, VALUE_LIST, 0), |out| {
            op.encode(out)
        });
    }
}

impl Collection for Set {
    type Op<'a> = SetOp<'a>;
    type Decoded<'a> = SetOp<'a>;
    type Changed = usize;
    const RECORDS: &'static [Kind] = &[Kind::SetOp];

    fn change(entry: EntryMut<'_>, db: usize, op: &SetOp<'_>, _now_ms: u64) -> usize {
        entry.change_boxed(
            db,
            (Kind::SetOp, VALUE_SET, 0),
            |value| match value {
                Boxed::Set(set) => op.apply(set, &limits::get()),
                _ => unreachable!("a set"),
            },
            |out| op.encode(out),
            // Every set operation adds or removes members: none is no
            // change.
            |&changed| changed == 0,
        )
    }

    fn decode(_kind: Kind, payload: &[u8]) -> Result<SetOp<'_>, DamagedRecord> {
        SetOp::decode(payload).map_err(|_| DamagedRecord)
    }

    fn created_by(op: &SetOp<'_>) -> Option<(Value<'static>, usize)> {
        match op {
            SetOp::Add(members) if !members.is_empty() => {
                let (image, added) = crate::types::set::image_of_added(members);
                Some((Value::Set(image.into()), added))
            }
            _ => None,
        }
    }

    fn log_created(group: &mut GroupSlot, db: usize, key: &[u8], op: &SetOp<'_>) {
        log_op(group, db, key, (Kind::SetOp, VALUE_SET, 0), |out| {
            op.encode(out)
        });
    }
}

impl Collection for ZSet {
    type Op<'a> = ZSetOp<'a>;
    type Decoded<'a> = ZSetOp<'a>;
    type Changed = usize;
    const RECORDS: &'static [Kind] = &[Kind::ZSetOp];

    fn change(entry: EntryMut<'_>, db: usize, op: &ZSetOp<'_>, _now_ms: u64) -> usize {
        entry
            .change_boxed(
                db,
                (Kind::ZSetOp, VALUE_ZSET, 0),
                |value| match value {
                    Boxed::ZSet(zset) => op.apply_telling(zset, &limits::get()),
                    _ => unreachable!("a sorted set"),
                },
                |out| op.encode(out),
                // Members put with the scores they had, or none removed.
                |&(_, changed)| !changed,
            )
            .0
    }

    fn decode(_kind: Kind, payload: &[u8]) -> Result<ZSetOp<'_>, DamagedRecord> {
        ZSetOp::decode(payload).map_err(|_| DamagedRecord)
    }

    fn created_by(op: &ZSetOp<'_>) -> Option<(Value<'static>, usize)> {
        match op {
            ZSetOp::Put(entries) if !entries.is_empty() => {
                let (image, added) = crate::types::zset::image_of_put(entries);
                Some((Value::ZSet(image.into()), added))
            }
            _ => None,
        }
    }

    fn log_created(group: &mut GroupSlot, db: usize, key: &[u8], op: &ZSetOp<'_>) {
        log_op(group, db, key, (Kind::ZSetOp, VALUE_ZSET, 0), |out| {
            op.encode(out)
        });
    }
}

/// A HASH_PUT (the fields stored, as an image) or HASH_DEL (the names
/// removed) payload as field changes.
fn decode_fields(kind: Kind, payload: &[u8]) -> Result<Vec<FieldChange<'_>>, DamagedRecord> {
    if kind == Kind::HashPut {
        let fields = hash::decode_puts(payload).map_err(|_| DamagedRecord)?;
        Ok(fields.into_iter().map(FieldChange::Put).collect())
    } else {
        let names = hash::decode_names(payload).map_err(|_| DamagedRecord)?;
        Ok(names.into_iter().map(FieldChange::Remove).collect())
    }
}

impl EntryMut<'_> {
    /// Applies `op` to this key of type `C` (in database `db`) and logs it
    /// (see [`Collection::change`]).
    pub fn change<C: Collection>(self, db: usize, op: &C::Op<'_>, now_ms: u64) -> C::Changed {
        C::change(self, db, op, now_ms)
    }

    /// [`EntryMut::change`], and whether it left the collection empty.
    pub(crate) fn change_checked<C: Collection>(
        self,
        db: usize,
        op: &C::Op<'_>,
        now_ms: u64,
    ) -> (C::Changed, bool) {
        let EntryMut {
            entry,
            live,
            limits,
            fields_due,
            group,
        } = self;
        let view = EntryMut {
            entry: &mut *entry,
            live,
            limits,
            fields_due,
            group,
        };
        let changed = C::change(view, db, op, now_ms);
        let emptied = C::emptied(&changed, entry.value());
        (changed, emptied)
    }
}
