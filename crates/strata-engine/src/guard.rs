//! Locked shards ([`ShardGuard`], [`ShardSet`]): the changes made through
//! them collect in the thread's log group, committed as one group when the
//! guard drops, before the locks are released.

use std::ops::{Deref, DerefMut};

use parking_lot::MutexGuard;

use crate::key::SHARD_BITS;
use crate::log::{self, Sink};
use crate::shard::Shard;
use crate::tier;

/// One locked shard. While it is held, the records of the changes made
/// through it collect in this thread's log group, committed as one group
/// when the guard drops — before the lock is released.
pub struct ShardGuard<'a> {
    pub(crate) guard: MutexGuard<'a, Shard>,
    pub(crate) sink: Sink<'a>,
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
        if !self.sink.is_open() {
            return;
        }
        if self.sink.log.is_some() && self.guard.tier.tracking() {
            let shard = &mut *self.guard;
            log::group_close(self.sink, Some(&mut |record, loc| shard.place(record, loc)));
        } else {
            log::group_close(self.sink, None);
        }
    }
}

/// Several shards locked together, in ascending index order. Everything
/// changed through them is one log group: all or nothing after a crash.
pub struct ShardSet<'a> {
    pub(crate) indices: Vec<usize>,
    pub(crate) guards: Vec<MutexGuard<'a, Shard>>,
    pub(crate) sink: Sink<'a>,
}

impl Drop for ShardSet<'_> {
    fn drop(&mut self) {
        if !self.sink.is_open() {
            return;
        }
        let tracking = self.guards.first().is_some_and(|g| g.tier.tracking());
        if self.sink.log.is_none() || !tracking {
            log::group_close(self.sink, None);
            return;
        }
        let (indices, guards) = (&self.indices, &mut self.guards);
        log::group_close(
            self.sink,
            Some(&mut |record, loc| {
                if let Some((_, key, _)) = tier::placed(record) {
                    let hash = guards[0].hasher.hash(key);
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
