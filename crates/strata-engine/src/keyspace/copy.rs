//! A copy of the keyspace made shard by shard while it keeps changing, for
//! a replica's full synchronisation.
//!
//! The rule is the checkpoint's (docs/storage.md, "Checkpoints"): while
//! shard `s` is locked, its live keys are handed to the caller together
//! with `L_s`, the sequence number the next change will get. Every change
//! of shard `s` numbered below `L_s` is in the copy, none at or above it.
//! A subscriber to the change feed's records ([`Keyspace::subscribe_records`])
//! that subscribed before the first shard was copied therefore brings the
//! copy up to date exactly by applying, per key, the records numbered at or
//! above its shard's `L_s`. Sequence numbers are the log's LSNs with the
//! log on, the feed's own count without it; both are assigned while the
//! changing shard locks are held.
//!
//! No fork and no copy of the whole dataset in RAM: one shard (1/1024 of
//! the keys) is locked at a time, and the caller serialises what it is
//! handed before the next. A value that is only on disk is named by its
//! location ([`Copied::Cold`]); its image there is the value as of `L_s`,
//! read with [`Keyspace::read_cold_copy`] once the lock is released.

use crate::keyspace::shards::Keyspace;
use crate::types::hash::{HashRef, HashValue};
use crate::types::list::ListValue;
use crate::types::set::SetValue;
use crate::types::stream::StreamValue;
use crate::types::value::{ValueRef, ValueType};
use crate::types::zset::ZSetValue;

/// Server state kept beside the keyspace: (name, image).
pub(crate) type MetaItem = (Vec<u8>, Vec<u8>);

/// One live key's value as [`Keyspace::copy_shard`] hands it over.
pub enum Copied<'a> {
    /// The value is in RAM.
    Value(ValueRef<'a>),
    /// The value is on disk only, at this location.
    Cold { loc: u64, value_type: ValueType },
}

/// A value read back from disk, owned, to be serialised.
pub enum ColdCopy {
    Str { bytes: Vec<u8>, int: bool },
    Hash(HashValue),
    List(ListValue),
    Set(SetValue),
    ZSet(ZSetValue),
    Stream(Box<StreamValue>),
}

impl ColdCopy {
    pub fn value(&self) -> ValueRef<'_> {
        match self {
            ColdCopy::Str { bytes, int } => ValueRef::Str { bytes, int: *int },
            ColdCopy::Hash(hash) => ValueRef::Hash(HashRef::Value(hash)),
            ColdCopy::List(list) => ValueRef::List(list),
            ColdCopy::Set(set) => ValueRef::Set(set),
            ColdCopy::ZSet(zset) => ValueRef::ZSet(zset),
            ColdCopy::Stream(stream) => ValueRef::Stream(stream),
        }
    }
}

impl Keyspace {
    /// The sequence number the next committed change will get (see the
    /// module docs). Meaningful while the shards that change could touch
    /// are locked, or as a lower bound.
    pub fn next_change_seq(&self) -> u64 {
        match self.change_log() {
            Some(log) => log.next_lsn(),
            None => self.feed.next_unlogged_seq(),
        }
    }

    /// Hands every live key of shard `index` to `visit` (database, key,
    /// deadline, value) under the shard's lock, and returns `L_s`: the
    /// copy holds every change of the shard numbered below it and none
    /// at or above it. `visit` runs under the lock: it should serialise
    /// and return.
    ///
    /// Shard 0 also holds the server state kept beside the keyspace (the
    /// function libraries: META records), returned as (name, image).
    pub fn copy_shard(
        &self,
        index: usize,
        now_ms: u64,
        mut visit: impl FnMut(usize, &[u8], Option<u64>, Copied),
    ) -> (u64, Vec<MetaItem>) {
        let shard = self.lock_unlogged(index);
        let covered = self.next_change_seq();
        let meta = (shard.meta.iter())
            .map(|(name, image)| (name.clone(), image.clone()))
            .collect();
        for db in 0..self.db_count() {
            for entry in shard.entries(db) {
                let deadline = entry.expire_at_ms();
                if deadline.is_some_and(|at| at <= now_ms) {
                    continue;
                }
                let copied = match entry.cold_loc() {
                    Some(loc) => Copied::Cold {
                        loc,
                        value_type: entry.value_type(),
                    },
                    None => Copied::Value(entry.value()),
                };
                visit(db, entry.key(), deadline, copied);
            }
        }
        (covered, meta)
    }

    /// Reads the value of `key` that [`Copied::Cold`] named. An error
    /// (damage, I/O, a segment compaction removed meanwhile) means the
    /// copy must start again.
    pub fn read_cold_copy(
        &self,
        loc: u64,
        value_type: ValueType,
        key: &[u8],
    ) -> Result<ColdCopy, String> {
        let cold = self.tier.read_value(loc, key)?;
        self.image_copy(value_type, cold.bytes, cold.int)
    }

    /// The value whose image (a SET record's payload) is `bytes`;
    /// `int`: a string in integer encoding.
    pub fn image_copy(
        &self,
        value_type: ValueType,
        bytes: Vec<u8>,
        int: bool,
    ) -> Result<ColdCopy, String> {
        let damaged = || format!("the stored {} image is damaged", value_type.name());
        let image = &bytes;
        Ok(match value_type {
            ValueType::String => ColdCopy::Str { bytes, int },
            ValueType::Hash => {
                crate::types::hash::check_image(image).map_err(|_| damaged())?;
                let packed = HashRef::Packed(crate::types::hash::Packed::from_image(image));
                ColdCopy::Hash(packed.to_value(self.hash_limits.get()))
            }
            ValueType::List => ColdCopy::List(
                ListValue::decode_image(image, crate::types::limits::list())
                    .map_err(|_| damaged())?,
            ),
            ValueType::Set => ColdCopy::Set(
                SetValue::decode_image(image, &crate::types::limits::get())
                    .map_err(|_| damaged())?,
            ),
            ValueType::ZSet => ColdCopy::ZSet(
                ZSetValue::decode_image(image, &crate::types::limits::get())
                    .map_err(|_| damaged())?,
            ),
            ValueType::Stream => ColdCopy::Stream(Box::new(
                StreamValue::decode_image(image).map_err(|_| damaged())?,
            )),
        })
    }
}
