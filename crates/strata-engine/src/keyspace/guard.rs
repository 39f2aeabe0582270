//! Locked shards ([`ShardGuard`], [`ShardSet`]): the changes made through
//! them collect in the log group the guard owns (`storage::group`),
//! committed as one group when the guard drops, before the locks are
//! released.

use std::ops::{Deref, DerefMut};

use parking_lot::MutexGuard;

use crate::keyspace::commit::Commit;
use crate::keyspace::key::SHARD_BITS;
use crate::keyspace::shard::Shard;
use crate::keyspace::undo::{Undo, UndoFull};
use crate::storage::group::{Group, GroupSlot};
use crate::storage::log::Sink;
use crate::tiering::tier;

thread_local! {
    /// Shard locks this thread has taken: a statistic (DEBUG SHARD-LOCKS,
    /// which tests use to count a request's lock acquisitions), not a
    /// channel anything else reads.
    static SHARD_LOCKS_TAKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many shard locks the calling thread has taken since it started.
pub fn shard_locks_taken() -> u64 {
    SHARD_LOCKS_TAKEN.get()
}

/// Counts one shard lock taken by the calling thread.
pub(crate) fn count_shard_lock() {
    SHARD_LOCKS_TAKEN.set(SHARD_LOCKS_TAKEN.get() + 1);
}

/// Where a lock set takes its shards from: the keyspace. A trait, so that
/// lock sets (made by the keyspace) do not name the keyspace in turn.
pub(crate) trait ShardSource: Sync {
    /// Locks shard `index` with a log group of its own.
    fn lock_index(&self, index: usize) -> ShardGuard<'_>;
    /// Locks shard `index` (waiting for it, or not at all when `wait` is
    /// false and it is busy), counted and noted as possibly changing.
    fn take_shard(&self, index: usize, wait: bool) -> Option<MutexGuard<'_, Shard>>;
    /// The hash of key `bytes`.
    fn hash_key(&self, bytes: &[u8]) -> u64;
}

/// One locked shard. While it is held, the records of the changes made
/// through it collect in its log group (lent to the shard's
/// [`GroupSlot`]), committed as one group when the guard drops — before
/// the lock is released.
pub struct ShardGuard<'a> {
    pub(crate) guard: MutexGuard<'a, Shard>,
    pub(crate) sink: Sink<'a>,
    /// Which shard.
    pub(crate) index: usize,
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
        self.close();
    }
}

impl<'a> ShardGuard<'a> {
    /// Shard `index`, locked as `guard`, with `group` for what `sink`
    /// takes.
    pub(crate) fn new(
        mut guard: MutexGuard<'a, Shard>,
        (sink, group): (Sink<'a>, Box<Group>),
        index: usize,
    ) -> Self {
        guard.group.lend(group);
        ShardGuard { guard, sink, index }
    }
}

impl ShardGuard<'_> {
    /// Commits the changes made through this guard.
    fn close(&mut self) -> Commit {
        let sink = std::mem::replace(&mut self.sink, Sink::closed());
        let Some(group) = self.guard.group.take() else {
            return Commit::default();
        };
        if sink.log.is_some() && self.guard.tier.places() {
            let shard = &mut *self.guard;
            group.commit(sink, Some(&mut |record, loc| shard.place(record, loc)))
        } else {
            group.commit(sink, None)
        }
    }

    /// The log group of the changes made so far.
    fn group(&self) -> Option<&Group> {
        self.guard.group.get()
    }

    /// Commits and unlocks; returns the LSN of the last record logged and
    /// the keys changed.
    pub fn commit(mut self) -> Commit {
        self.close()
    }
}

/// Several shards locked together, in ascending index order. Everything
/// changed through them is one log group: all or nothing after a crash.
/// The group rests in `group` and is lent to the shard the set last
/// handed out ([`ShardSet::shard_at`]), whose changes it then takes.
pub struct ShardSet<'a> {
    indices: Vec<usize>,
    guards: Vec<MutexGuard<'a, Shard>>,
    sink: Sink<'a>,
    group: GroupSlot,
    /// The position in `guards` of the shard the group is lent to.
    lent_to: Option<usize>,
}

impl Drop for ShardSet<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<'a> ShardSet<'a> {
    /// The shards `indices` (ascending), locked as `guards`, with `group`
    /// for what `sink` takes.
    pub(crate) fn new(
        indices: Vec<usize>,
        guards: Vec<MutexGuard<'a, Shard>>,
        (sink, group): (Sink<'a>, Box<Group>),
    ) -> Self {
        let mut slot = GroupSlot::default();
        slot.lend(group);
        ShardSet {
            indices,
            guards,
            sink,
            group: slot,
            lent_to: None,
        }
    }
}

impl ShardSet<'_> {
    /// Commits and unlocks; returns the LSN of the last record logged and
    /// the keys changed.
    pub fn commit(mut self) -> Commit {
        self.close()
    }

    /// The set's log group, taken back from the shard it was lent to:
    /// for changes that belong to no one shard (a flush, metadata).
    pub(crate) fn group_mut(&mut self) -> &mut GroupSlot {
        if let Some(position) = self.lent_to.take()
            && let Some(group) = self.guards[position].group.take()
        {
            self.group.lend(group);
        }
        &mut self.group
    }

    /// The log group of the changes made so far.
    fn group(&self) -> Option<&Group> {
        match self.lent_to {
            Some(position) => self.guards[position].group.get(),
            None => self.group.get(),
        }
    }

    /// How many shards the set holds.
    pub(crate) fn len(&self) -> usize {
        self.guards.len()
    }

    /// The index of the shard at `position` (of those held, ascending).
    pub(crate) fn index_at(&self, position: usize) -> usize {
        self.indices[position]
    }

    /// The shard at `position` (of those held, in ascending order), with
    /// the set's log group lent to it, so that its changes join the set's
    /// group.
    pub(crate) fn shard_at(&mut self, position: usize) -> &mut Shard {
        if self.lent_to != Some(position)
            && let Some(group) = self.group_mut().take()
        {
            self.guards[position].group.lend(group);
            self.lent_to = Some(position);
        }
        &mut self.guards[position]
    }

    /// Every shard held, for a change that does not log per shard (a
    /// flush takes their tables; SWAPDB swaps them): the group stays with
    /// the set.
    pub(crate) fn shards_unlogged(&mut self) -> impl Iterator<Item = &mut Shard> {
        self.group_mut();
        self.guards.iter_mut().map(|guard| &mut **guard)
    }

    fn close(&mut self) -> Commit {
        let sink = std::mem::replace(&mut self.sink, Sink::closed());
        let Some(group) = self.group_mut().take() else {
            return Commit::default();
        };
        let places = self.guards.first().is_some_and(|g| g.tier.places());
        if sink.log.is_none() || !places {
            return group.commit(sink, None);
        }
        let (indices, guards) = (&self.indices, &mut self.guards);
        group.commit(
            sink,
            Some(&mut |record, loc| {
                if let Some(placed) = tier::placed(record) {
                    let hash = guards[0].hasher.hash(placed.key);
                    let shard = (hash >> (64 - SHARD_BITS)) as usize;
                    if let Ok(position) = indices.binary_search(&shard) {
                        guards[position].place(record, loc);
                    }
                }
            }),
        )
    }
}

impl<'a> ShardSet<'a> {
    /// The locked shard with index `shard`; it must be one of those asked for.
    pub fn shard(&mut self, shard: usize) -> &mut Shard {
        let position = self
            .indices
            .binary_search(&shard)
            .expect("shard was locked");
        self.shard_at(position)
    }

    /// Whether shard `shard` is among those held.
    pub fn holds(&self, shard: usize) -> bool {
        self.indices.binary_search(&shard).is_ok()
    }

    /// Whether every shard is held (FLUSHALL's lock set).
    pub fn holds_all(&self) -> bool {
        self.indices.len() == crate::keyspace::key::SHARD_COUNT
    }

    /// Adds shard `shard` to the set (see [`Locked::shard_or_escalate`]):
    /// blocking when it comes after every shard held (the global lock
    /// order is kept, so this cannot deadlock), trying once otherwise.
    /// False when the shard is busy and out of order.
    pub(crate) fn escalate(&mut self, keyspace: &'a dyn ShardSource, shard: usize) -> bool {
        let Err(position) = self.indices.binary_search(&shard) else {
            return true;
        };
        let wait = position == self.indices.len();
        let Some(guard) = keyspace.take_shard(shard, wait) else {
            return false;
        };
        // Positions move: the group comes back to the set first.
        self.group_mut();
        self.indices.insert(position, shard);
        self.guards.insert(position, guard);
        true
    }
}

/// The shard locks one command holds: taken by dispatch for the keys the
/// command declares (its key specs), before its handler runs, and
/// committed as one log group after it. A handler reaches a key's shard
/// through [`Locked::shard`] and never locks anything itself, so any
/// number of commands (a transaction, a script) can later run under one
/// lock set.
pub struct Locked<'a> {
    keyspace: &'a dyn ShardSource,
    held: Held<'a>,
    /// Held for a whole transaction or script ([`Keyspace::lock_pinned`]):
    /// [`Locked::release`] commits nothing early, and keys beyond the
    /// declared ones may be reached ([`Locked::shard_or_escalate`]).
    pinned: bool,
    /// Before-images of what the run changed, when it keeps them
    /// ([`Locked::keep_undo`]; `crate::keyspace::undo`).
    undo: Option<Box<Undo>>,
    /// Hashes of the declared keys (debug builds check every access
    /// against them: a handler sees exactly the keys it declared).
    #[cfg(debug_assertions)]
    declared: Vec<u64>,
}

impl Drop for Locked<'_> {
    /// A pinned set dropped by a panic (a command of a script or of a
    /// transaction panicked) must not commit the part of the run done
    /// before it: the run is undone first, or, when it cannot be, the
    /// process ends before its group is written, and recovery finds the
    /// data as it was before the run.
    fn drop(&mut self) {
        if !self.pinned || !std::thread::panicking() || !self.group().is_some_and(Group::is_dirty) {
            return;
        }
        if self.undo() {
            return;
        }
        eprintln!(
            "strata: a command panicked inside a transaction or script that had written and cannot be undone; exiting so that recovery restores the data as it was before it"
        );
        std::process::abort();
    }
}

pub(crate) enum Held<'a> {
    Nothing,
    One(ShardGuard<'a>),
    Many(ShardSet<'a>),
}

impl<'a> Locked<'a> {
    pub(crate) fn new(
        keyspace: &'a dyn ShardSource,
        held: Held<'a>,
        declared: &[crate::keyspace::key::KeyRef],
    ) -> Self {
        #[cfg(not(debug_assertions))]
        let _ = declared;
        Locked {
            keyspace,
            held,
            pinned: false,
            undo: None,
            #[cfg(debug_assertions)]
            declared: declared.iter().map(|k| k.hash).collect(),
        }
    }

    /// `bytes` as a key (its hash), for [`Locked::shard`].
    pub fn key<'k>(&self, bytes: &'k [u8]) -> crate::keyspace::key::KeyRef<'k> {
        crate::keyspace::key::KeyRef {
            bytes,
            hash: self.keyspace.hash_key(bytes),
        }
    }

    /// The locked shard of `key`. A command that declared no keys gets its
    /// shard locked here (it holds no other lock, so this cannot
    /// deadlock); asking for a key outside the declared ones is a bug.
    pub fn shard(&mut self, key: crate::keyspace::key::KeyRef) -> &mut Shard {
        #[cfg(debug_assertions)]
        debug_assert!(
            self.pinned || self.declared.is_empty() || self.declared.contains(&key.hash),
            "'{}' is not among the command's declared keys",
            String::from_utf8_lossy(key.bytes)
        );
        if let Held::Nothing = self.held {
            self.held = Held::One(self.keyspace.lock_index(key.shard()));
        }
        match &mut self.held {
            Held::One(guard) => {
                assert_eq!(
                    guard.index,
                    key.shard(),
                    "a key outside the command's declared keys"
                );
                guard
            }
            Held::Many(set) => set.shard(key.shard()),
            Held::Nothing => unreachable!("locked above"),
        }
    }

    /// Commits and unlocks early, for a command that has read what it
    /// needs and has long work left that touches no key (LCS); returns
    /// what was committed (a lazily expired key's DEL, say).
    pub fn release(&mut self) -> Commit {
        if self.pinned {
            return Commit::default();
        }
        match std::mem::replace(&mut self.held, Held::Nothing) {
            Held::Nothing => Commit::default(),
            Held::One(guard) => guard.commit(),
            Held::Many(set) => set.commit(),
        }
    }

    /// Calls `f` with each change made under these locks and not yet
    /// committed (kind, database, key), in order, after the first `skip`: what [`Locked::commit`]
    /// is about to commit, seen while the locks still order it against
    /// other clients (client-side caching invalidates here).
    pub fn pending_changes(
        &self,
        skip: usize,
        f: impl FnMut(crate::storage::record::Kind, u16, &[u8]),
    ) {
        let Some(group) = self.group() else {
            return;
        };
        let mut f = f;
        for (kind, db, key) in group.changed().iter().skip(skip) {
            f(kind, db, key);
        }
    }

    /// How many changes [`Locked::pending_changes`] would see now.
    pub fn pending_count(&self) -> usize {
        self.group().map_or(0, |group| group.changed().len())
    }

    /// The log group of the changes made so far under these locks.
    fn group(&self) -> Option<&Group> {
        match &self.held {
            Held::Nothing => None,
            Held::One(guard) => guard.group(),
            Held::Many(set) => set.group(),
        }
    }

    /// Adds a replication position record (`repl_position`) to the
    /// group of these locks, committed with it; false when they hold no
    /// shard yet (and so have no group).
    pub fn append_position(&mut self, image: &[u8]) -> bool {
        match &mut self.held {
            Held::Nothing => false,
            Held::One(guard) => guard.guard.group.append_position(image),
            Held::Many(set) => set.group_mut().append_position(image),
        }
    }

    /// Commits what the command changed and unlocks; returns the LSN of
    /// the last record logged (what the command's reply waits for) and
    /// the keys changed.
    pub fn commit(mut self) -> Commit {
        self.pinned = false;
        self.release()
    }

    pub(crate) fn pin(&mut self) {
        self.pinned = true;
    }

    /// Makes this pinned set hold every shard (a script running a
    /// database-wide command), as [`Locked::shard_or_escalate`] does for
    /// one; false if a busy shard is out of order (those taken stay).
    pub fn escalate_all(&mut self) -> bool {
        let keyspace = self.keyspace;
        match &mut self.held {
            Held::Many(set) => {
                (0..crate::keyspace::key::SHARD_COUNT).all(|index| set.escalate(keyspace, index))
            }
            _ => false,
        }
    }

    /// Makes this pinned set keep a before-image of each key before a
    /// write first changes it ([`Locked::capture`]), so that the run can
    /// be undone ([`Locked::undo`]; `crate::keyspace::undo`). `now_ms`: the run's
    /// clock, which an undo uses.
    pub fn keep_undo(&mut self, now_ms: u64) {
        self.undo = Some(Box::new(Undo::new(now_ms)));
    }

    /// Whether the run can still be undone.
    pub fn can_undo(&self) -> bool {
        self.undo.as_ref().is_some_and(|undo| undo.usable())
    }

    /// Keeps `key`'s (of database `db`) image before a write changes it,
    /// if this set keeps images and has none for it yet; [`UndoFull`] when
    /// the run's images would pass their bound (then none is kept: see
    /// [`Locked::give_up_undo`]).
    pub fn capture(
        &mut self,
        db: usize,
        key: crate::keyspace::key::KeyRef,
        now_ms: u64,
    ) -> Result<(), UndoFull> {
        let Some(mut undo) = self.undo.take() else {
            return Ok(());
        };
        let kept = undo.capture(self.shard(key), db, key, now_ms);
        self.undo = Some(undo);
        kept
    }

    /// Stops keeping images and drops those kept: the run will not be
    /// undone (it holds every shard, so it cannot meet a busy one).
    pub fn give_up_undo(&mut self) {
        if let Some(undo) = &mut self.undo {
            undo.give_up();
        }
    }

    /// Puts every key the run changed back as it was before, logged in
    /// the run's own group; false when the run cannot be undone.
    pub fn undo(&mut self) -> bool {
        let Some(undo) = &mut self.undo else {
            return false;
        };
        if !undo.usable() {
            return false;
        }
        let now_ms = undo.now_ms();
        let befores = undo.take();
        for before in befores {
            let hash = self.keyspace.hash_key(before.key());
            let key = crate::keyspace::key::KeyRef {
                bytes: before.key(),
                hash,
            };
            let shard = self.shard(key);
            before.restore(shard, hash, now_ms);
        }
        true
    }

    /// Whether this lock set is held for a whole transaction or script.
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// Every shard, when this lock set holds them all (a transaction with
    /// a database-wide command): database-wide operations run on it
    /// rather than lock shards themselves.
    pub fn all(&mut self) -> Option<&mut ShardSet<'a>> {
        match &mut self.held {
            Held::Many(set) if set.holds_all() => Some(set),
            _ => None,
        }
    }

    /// The shard of `key`, which a pinned lock set (a script) may not hold
    /// yet: it is added if that cannot deadlock — taken in lock order, or
    /// free now. `None` when it is busy and out of order; the caller
    /// decides (a script that has not written runs again with every
    /// shard locked).
    pub fn shard_or_escalate(&mut self, key: crate::keyspace::key::KeyRef) -> Option<&mut Shard> {
        let keyspace = self.keyspace;
        if let Held::Many(set) = &mut self.held
            && !set.escalate(keyspace, key.shard())
        {
            return None;
        }
        Some(self.shard(key))
    }
}
