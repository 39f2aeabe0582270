//! A log group: the records of the changes made under one lock set,
//! committed as one unit (consecutive LSNs, all or nothing after a crash)
//! before its locks are released.
//!
//! The group is a value its lock set owns ([`ShardGuard`], [`ShardSet`]),
//! opened when the set locks and committed when it drops. While the set
//! hands out a shard, the group sits in that shard's [`GroupSlot`]
//! (`Shard::group`), so the code that changes the shard — its methods,
//! an entry's view, a value type's `change` — appends to the group of the
//! lock set that reached it, with no other channel. A set of several
//! shards moves its group to the shard it hands out
//! (`ShardSet::shard_at`). A shard locked without a lock set (recovery
//! applying the log, checkpoints, statistics) has an empty slot, and what
//! is appended to it goes nowhere.
//!
//! Each thread keeps the buffers of its last groups for the next ones
//! ([`POOL`]): an allocation cache (a write of a few KiB must not grow a
//! fresh buffer every time), through which nothing is passed — a group
//! comes out of it empty.
//!
//! [`ShardGuard`]: crate::keyspace::guard::ShardGuard
//! [`ShardSet`]: crate::keyspace::guard::ShardSet

use std::cell::RefCell;

use crate::keyspace::commit::{ChangeRef, Changed, Commit};
use crate::storage::log::Sink;
use crate::storage::record::{self, Draft, Kind};

/// A group's buffer larger than this is released after its commit, so one
/// huge command does not pin memory in every network thread.
const RETAINED_BYTES_MAX: usize = 64 << 10;
/// Emptied groups each thread keeps for reuse.
const POOL_MAX: usize = 2;

thread_local! {
    /// Emptied groups of this thread, for reuse (see the module docs).
    /// Boxed: a group travels as one pointer (lent to shards, kept
    /// here), so taking one out allocates nothing.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<Group>>> = const { RefCell::new(Vec::new()) };
}

/// The records of one lock set's changes, not yet committed.
pub(crate) struct Group {
    /// Whether records are encoded into `bytes` (a log or feed takes them).
    encode: bool,
    /// Whether changes are listed in `changed` (data changes, not value
    /// images).
    collect: bool,
    bytes: Vec<u8>,
    changed: Changed,
    /// Flags added to every record appended meanwhile
    /// ([`GroupSlot::add_cause`]).
    cause: u8,
    /// A record was appended (encoded or not).
    dirty: bool,
    /// Where in `bytes` a replication position record starts, if the
    /// group holds one (`repl_position`).
    position_at: Option<usize>,
}

impl Group {
    /// An empty group for `sink`'s destinations: its records are encoded
    /// when `sink` takes them, and the keys changed are listed when
    /// `collect` (data changes, as opposed to value images).
    pub(crate) fn open(sink: &Sink, collect: bool) -> Box<Group> {
        let mut group = POOL
            .with(|pool| pool.borrow_mut().pop())
            .unwrap_or_else(|| {
                Box::new(Group {
                    encode: false,
                    collect: false,
                    bytes: Vec::new(),
                    changed: Changed::new(),
                    cause: 0,
                    dirty: false,
                    position_at: None,
                })
            });
        group.encode = sink.log.is_some() || sink.feed.is_some();
        group.collect = collect;
        group
    }

    /// Whether the group holds any record (a change not yet committed).
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The changes appended so far.
    pub(crate) fn changed(&self) -> &Changed {
        &self.changed
    }

    /// Commits the group to `sink`. Must run before the shard locks
    /// covering it are released. `placed`, when given, is called with
    /// each record and its location in the log. Returns the LSN of the
    /// group's last record when it went to the log, and the keys it
    /// changed.
    pub(crate) fn commit(
        mut self: Box<Self>,
        sink: Sink,
        placed: Option<&mut crate::storage::log::Placed>,
    ) -> Commit {
        let changed = std::mem::take(&mut self.changed);
        let position_at = self.position_at.take();
        let mut lsn = None;
        if !self.bytes.is_empty() {
            match sink.log {
                Some(log) => {
                    // A replica applying its primary's stream ends each
                    // group of data changes with its position after the
                    // command.
                    let position_at = position_at.or_else(|| {
                        let mut at = None;
                        if self.collect && !changed.is_empty() {
                            crate::storage::repl_position::with_current(|image| {
                                at = Some(self.bytes.len());
                                record::encode(
                                    &mut self.bytes,
                                    &Draft::meta(crate::storage::repl_position::NAME, image),
                                );
                            });
                        }
                        at
                    });
                    let feed = sink.feed.map(|feed| (feed, &changed));
                    let committed = log.commit_positioned(&mut self.bytes, feed, position_at);
                    lsn = Some(committed.last_lsn);
                    if let Some(placed) = placed {
                        let mut at = 0;
                        while at < self.bytes.len() {
                            let len = record::encoded_len(&self.bytes[at..]);
                            let loc = crate::tiering::location::loc(
                                committed.segment,
                                committed.offset + at as u64,
                            );
                            placed(&self.bytes[at..at + len], loc);
                            at += len;
                        }
                    }
                }
                None => {
                    if let Some(feed) = sink.feed {
                        feed.publish_unlogged(&changed, &mut self.bytes);
                    }
                }
            }
        }
        self.recycle();
        Commit { lsn, changed }
    }

    /// Empties the group and keeps it for this thread's next one.
    fn recycle(mut self: Box<Self>) {
        self.bytes.clear();
        if self.bytes.capacity() > RETAINED_BYTES_MAX {
            self.bytes = Vec::new();
        }
        self.changed = Changed::new();
        self.cause = 0;
        self.dirty = false;
        self.position_at = None;
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOL_MAX {
                pool.push(self);
            }
        });
    }
}

/// Where a locked shard's changes go: the group of the lock set that
/// handed the shard out, or nowhere (see the module docs). Opaque outside
/// the engine: value types' `change` and `log_created` append through it.
#[derive(Default)]
pub struct GroupSlot(Option<Box<Group>>);

impl GroupSlot {
    /// Puts `group` here; the slot must be empty.
    pub(crate) fn lend(&mut self, group: Box<Group>) {
        debug_assert!(self.0.is_none(), "a shard is in one lock set at a time");
        self.0 = Some(group);
    }

    /// Takes the group back, if one is here.
    pub(crate) fn take(&mut self) -> Option<Box<Group>> {
        self.0.take()
    }

    /// The group here, if any.
    pub(crate) fn get(&self) -> Option<&Group> {
        self.0.as_deref()
    }

    /// Whether records appended here are encoded (a log or the change feed
    /// takes them): when not, a record's payload is never read, so callers
    /// need not build it (only the key changed is noted).
    pub(crate) fn encoding(&self) -> bool {
        self.0.as_ref().is_some_and(|group| group.encode)
    }

    /// Adds `cause` ([`record::FLAG_EXPIRED`], [`record::FLAG_EVICTED`],
    /// [`record::FLAG_NEW`], [`record::FLAG_BACKGROUND`]) to the flags of
    /// every record appended from now on (why the data changed, for the
    /// change feed); returns the causes before, for
    /// [`GroupSlot::restore_cause`].
    pub(crate) fn add_cause(&mut self, cause: u8) -> u8 {
        match &mut self.0 {
            Some(group) => {
                let before = group.cause;
                group.cause |= cause;
                before
            }
            None => 0,
        }
    }

    /// Puts back the causes [`GroupSlot::add_cause`] returned.
    pub(crate) fn restore_cause(&mut self, before: u8) {
        if let Some(group) = &mut self.0 {
            group.cause = before;
        }
    }

    /// Adds a record to the group (encoded if a log or feed takes it; its
    /// key listed if the group lists changes); nothing without a group.
    pub(crate) fn append(&mut self, draft: &Draft) {
        let Some(group) = &mut self.0 else {
            return;
        };
        group.dirty = true;
        if group.encode {
            if group.cause == 0 {
                record::encode(&mut group.bytes, draft);
            } else {
                let flags = draft.flags | group.cause;
                record::encode(&mut group.bytes, &Draft { flags, ..*draft });
            }
        }
        // Metadata (`Kind::Meta`) is no key's change.
        if group.collect && draft.kind != Kind::Meta {
            let flags = draft.flags | group.cause;
            group.changed.push(ChangeRef {
                kind: draft.kind,
                flags,
                db: draft.db,
                aux: draft.aux,
                key: draft.key,
            });
        }
    }

    /// Adds a replication position record (`repl_position`) to the group,
    /// remembered by the log when the group commits. False without a
    /// group.
    pub(crate) fn append_position(&mut self, image: &[u8]) -> bool {
        let Some(group) = &mut self.0 else {
            return false;
        };
        if group.encode {
            group.dirty = true;
            group.position_at = Some(group.bytes.len());
            let draft = Draft::meta(crate::storage::repl_position::NAME, image);
            record::encode(&mut group.bytes, &draft);
        }
        true
    }
}
