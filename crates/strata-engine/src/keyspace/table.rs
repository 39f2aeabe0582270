//! One database's share of a shard: the hash table of its entries and the
//! index of their deadlines ([`Table`]), and a shard's tables, allocated
//! per database only once written ([`Tables`]). Tables shrink when
//! deletions leave them sparse.
//!
//! The hash table is the engine's own ([`KeyTable`], below; its
//! documentation says why not hashbrown): one entry pointer per slot,
//! seven bits of the key's hash in the pointer's top byte.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;

use crate::keyspace::entry::Entry;
use crate::keyspace::key::KeyHasher;

#[derive(Default)]
pub(crate) struct Table {
    pub(crate) entries: KeyTable<Entry>,
    pub(crate) expiring: ExpiryIndex,
    /// Where eviction's next sample starts: it sweeps the buckets in
    /// order (neighbouring slots share cache lines) instead of probing at
    /// random. Atomic only so that the shared empty table can be a static.
    pub(crate) sweep: AtomicUsize,
    /// What eviction's sweeps found since the table last changed: when
    /// they covered it all and found no value that can leave RAM, the
    /// next eviction skips it until the shard changes or the log is
    /// written past its oldest unwritten value (see [`FruitlessRun`]).
    pub(crate) fruitless: FruitlessRun,
}

/// A run of eviction sweeps over one table (under `tiered`) that found
/// nothing to move out: every value in RAM was either waiting for its
/// log write or lent to a command about to run. A budget the keys nearly
/// fill leaves only such values in RAM, and without this record every
/// write swept all 1 024 shards to find that out again (`docs/tiering.md`).
/// The run belongs to one state of the shard ([`crate::keyspace::shard::Shard::touched`],
/// which every change bumps and eviction's own sampling does not).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FruitlessRun {
    /// `Shard::touched` when the run began.
    pub(crate) touched: u64,
    /// Buckets swept in the run (once it reaches the table's size, the
    /// whole table was seen).
    pub(crate) covered: usize,
    /// Values passed over because their log write is pending, and the
    /// lowest log position among them: the run stops holding once the log
    /// is written past it.
    pub(crate) unwritten: u64,
    pub(crate) first_unwritten: u64,
    /// Values passed over because they are lent to a command.
    pub(crate) transient: u64,
}

impl FruitlessRun {
    pub(crate) const NONE: FruitlessRun = FruitlessRun {
        touched: 0,
        covered: 0,
        unwritten: 0,
        first_unwritten: u64::MAX,
        transient: 0,
    };

    /// Whether the run says that the table (of `buckets` buckets, in a
    /// shard at `touched`) holds no value that can leave RAM with the log
    /// written up to `written_pos`.
    pub(crate) fn holds(&self, touched: u64, buckets: usize, written_pos: u64) -> bool {
        self.touched == touched && self.covered >= buckets && written_pos <= self.first_unwritten
    }

    /// Adds a sweep of `probed` buckets to the run. A sweep that found a
    /// candidate, or a shard that changed since, starts a new one.
    pub(crate) fn extend(&mut self, touched: u64, probed: usize, found: bool, seen: &FruitlessRun) {
        if found || self.touched != touched {
            *self = FruitlessRun {
                touched,
                ..FruitlessRun::NONE
            };
            if found {
                return;
            }
        }
        self.covered += probed;
        self.unwritten += seen.unwritten;
        self.transient += seen.transient;
        self.first_unwritten = self.first_unwritten.min(seen.first_unwritten);
    }
}

impl Default for FruitlessRun {
    fn default() -> Self {
        FruitlessRun::NONE
    }
}

/// Non-empty tables of at most this many slots are not shrunk.
const TABLE_SHRINK_CAPACITY_MIN: usize = 64;
/// A table filled below 1/this of its capacity is shrunk.
const TABLE_SHRINK_SPARSENESS: usize = 8;

impl Table {
    /// Tables do not shrink by themselves: after mass deletion or expiry
    /// they would keep their peak size forever. As Redis shrinks
    /// its dicts below 10 % fill, a table below 1/8 full is rebuilt at
    /// twice its length (hysteresis: the next insertions do not grow it
    /// straight back). Cheap: one table is 1/1024 of a database. SCAN is
    /// unaffected: its cursor is a hash value, not a bucket.
    pub(crate) fn shrink_if_sparse(&mut self, hasher: &KeyHasher) -> bool {
        let (len, capacity) = (self.entries.len(), self.entries.capacity());
        let sparse =
            capacity > TABLE_SHRINK_CAPACITY_MIN && len * TABLE_SHRINK_SPARSENESS < capacity;
        // An emptied table frees its memory whatever its size: 16 384 small
        // tables left allocated add up.
        let shrink = sparse || (len == 0 && capacity > 0);
        if shrink {
            self.entries
                .shrink_to(self.entries.len() * 2, |e| hasher.table_hash(e.key()));
        }
        // An emptied B-tree keeps its root node.
        if self.expiring.len() == 0 {
            self.expiring = ExpiryIndex::default();
        }
        shrink
    }
}

/// The volatile keys of one table, ordered by deadline, and the sum of
/// their deadlines (so INFO's `avg_ttl` is exact at no cost).
#[derive(Default)]
pub(crate) struct ExpiryIndex {
    /// (deadline ms, key) of every key with an expiry.
    pub(crate) deadlines: BTreeSet<(u64, Box<[u8]>)>,
    pub(crate) deadline_sum_ms: u128,
}

impl ExpiryIndex {
    pub(crate) fn insert(&mut self, deadline: u64, key: Box<[u8]>) {
        if self.deadlines.insert((deadline, key)) {
            self.deadline_sum_ms += deadline as u128;
        }
    }

    pub(crate) fn remove(&mut self, deadline: u64, key: &[u8]) {
        if self.deadlines.remove(&(deadline, Box::<[u8]>::from(key))) {
            self.deadline_sum_ms -= deadline as u128;
        }
    }

    /// The key with the earliest deadline, if that deadline is at or before
    /// `now_ms`.
    pub(crate) fn pop_due(&mut self, now_ms: u64) -> Option<Box<[u8]>> {
        match self.deadlines.first() {
            Some((deadline, _)) if *deadline <= now_ms => {}
            _ => return None,
        }
        let (deadline, key) = self.deadlines.pop_first().expect("checked above");
        self.deadline_sum_ms -= deadline as u128;
        Some(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.deadlines.len()
    }

    /// The earliest deadline.
    pub(crate) fn first_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }
}

/// A shard's tables, one per database, allocated only up to the highest
/// database written: 16 databases x 1024 shards of empty tables would
/// take over a megabyte of an idle server's RAM. Indexing a database not
/// allocated yet reads as an empty table; indexing it mutably allocates.
pub(crate) struct Tables {
    allocated: Vec<Table>,
    db_count: usize,
}

/// What every database not allocated yet looks like.
static EMPTY_TABLE: Table = Table {
    entries: KeyTable::new(),
    expiring: ExpiryIndex {
        deadlines: BTreeSet::new(),
        deadline_sum_ms: 0,
    },
    sweep: AtomicUsize::new(0),
    fruitless: FruitlessRun::NONE,
};

impl Tables {
    pub(crate) fn new(db_count: usize) -> Self {
        Tables {
            allocated: Vec::new(),
            db_count,
        }
    }

    /// The number of databases (allocated or not).
    pub(crate) fn len(&self) -> usize {
        self.db_count
    }

    /// The allocated tables, database 0 first.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Table> {
        self.allocated.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Table> {
        self.allocated.iter_mut()
    }

    fn allocate_up_to(&mut self, db: usize) {
        assert!(db < self.db_count, "database {db} out of range");
        if db >= self.allocated.len() {
            self.allocated.resize_with(db + 1, Table::default);
        }
    }

    /// Empties database `db`, returning its table (without allocating
    /// one it never had).
    pub(crate) fn take(&mut self, db: usize) -> Table {
        match self.allocated.get_mut(db) {
            Some(table) => std::mem::take(table),
            None => Table::default(),
        }
    }

    pub(crate) fn swap(&mut self, a: usize, b: usize) {
        self.allocate_up_to(a.max(b));
        self.allocated.swap(a, b);
    }
}

impl std::ops::Index<usize> for Tables {
    type Output = Table;
    fn index(&self, db: usize) -> &Table {
        debug_assert!(db < self.db_count, "database {db} out of range");
        self.allocated.get(db).unwrap_or(&EMPTY_TABLE)
    }
}

impl std::ops::IndexMut<usize> for Tables {
    fn index_mut(&mut self, db: usize) -> &mut Table {
        self.allocate_up_to(db);
        &mut self.allocated[db]
    }
}

/// Entries keep the table's hash tag in their pointer's top byte.
impl Tagged for Entry {
    fn hash_tag(&self) -> u8 {
        Entry::hash_tag(self)
    }

    fn set_hash_tag(&mut self, tag: u8) {
        Entry::set_hash_tag(self, tag);
    }

    fn prefetch(&self) {
        Entry::prefetch(self);
    }
}

/// An item that keeps seven bits of its hash for the table.
pub(crate) trait Tagged {
    /// The bits set by [`Tagged::set_hash_tag`] (0 until then).
    fn hash_tag(&self) -> u8;
    /// Keeps the low seven bits of `tag`; every later change of the item
    /// must keep them while it is in a table.
    fn set_hash_tag(&mut self, tag: u8);
    /// Starts bringing what hashing the item reads into the cache.
    fn prefetch(&self) {}
}

/// The highest fill, tombstones included, in hundredths.
const MAX_LOAD_PERCENT: usize = 85;
/// A rebuilt table is at most this full (before the allocator's class
/// rounds its size up).
const REBUILD_LOAD_PERCENT: usize = 80;
/// The smallest table that holds anything.
const CAPACITY_MIN: usize = 4;
/// Tables below this many slots double when they grow (their few bytes
/// per key matter less than rehashing at every size class).
const SMALL_TABLE_SLOTS: usize = 64;

/// The bits of a hash the table reads: the low 32 (the slot) and the top
/// seven (the tag). Callers may hash differently elsewhere as long as
/// these bits agree.
#[cfg(test)]
pub(crate) const TABLE_HASH_BITS: u64 = 0xFE00_0000_FFFF_FFFF;

/// The slot where `hash`'s probe starts in a table of `capacity` slots.
fn home(hash: u64, capacity: usize) -> usize {
    ((hash as u32 as u64 * capacity as u64) >> 32) as usize
}

/// The seven bits kept with an item (the hash's top bits: its low bits
/// pick the slot).
fn tag_of(hash: u64) -> u8 {
    (hash >> 57) as u8
}

/// How many items a table of `capacity` slots holds before it grows (at
/// least one slot always stays empty, which ends every probe).
fn limit(capacity: usize) -> usize {
    (capacity * MAX_LOAD_PERCENT / 100).min(capacity.saturating_sub(1))
}

/// The capacity to rebuild into for `items`, growing from `current`
/// slots: at most [`REBUILD_LOAD_PERCENT`] full, a whole size class.
fn capacity_for(items: usize, current: usize, growing: bool) -> usize {
    if items == 0 {
        return 0;
    }
    let mut wanted = (items * 100)
        .div_ceil(REBUILD_LOAD_PERCENT)
        .max(CAPACITY_MIN);
    if growing {
        // Every item is hashed again at each growth: small tables double,
        // larger ones grow by a quarter (the size class then rounds up).
        let quarters = if current < SMALL_TABLE_SLOTS { 8 } else { 5 };
        wanted = wanted.max((current * quarters).div_ceil(4));
    }
    let slot = size_of::<usize>();
    let capacity = crate::keyspace::thin::size_class(wanted * slot) / slot;
    debug_assert!(limit(capacity) >= items);
    capacity
}

/// [`KeyTable`]: the hash table of one database's entries in a shard, one
/// pointer per slot.
///
/// ## Why not hashbrown
///
/// RAM per key is what tiering sells: a key whose value is on disk should
/// cost little more than its own bytes (issue "ahead of Redis where it
/// counts": ≤ 32 B + key). hashbrown's table costs 9 bytes a slot (the
/// entry's pointer and a control byte) and doubles when 7/8 full, so right
/// after a doubling it is 7/16 full; at 1 M keys (977 per shard, just past
/// 896) every shard had 2 048 slots, which the allocator rounds up to
/// 20 KiB: 21 bytes of table per key, more than the entry's own 18.
///
/// This table spends 8 bytes a slot and stays between about 60 % and 85 %
/// full (by its growth rule, 76 % at 1 M memtier keys, 68 % at 10 M):
///
/// - **A slot is the entry itself** (`Option<T>`, one pointer). The seven
///   bits of hash that let a probe pass over other keys without reading
///   them ride in the entry pointer's top byte ([`Tagged`];
///   `ThinBuf::hash_tag`), where hashbrown keeps a control byte.
/// - **Capacities the allocator hands out whole.** A table's slots are
///   one allocation whose size is one of the allocator's size classes
///   (four per power of two in mimalloc), so none of it is rounding, and
///   a table grows by a quarter (to the class at or above 1.25×; tables
///   under 64 slots double) instead of doubling. The price is more
///   rebuilds while a table grows (an entry is moved about four times
///   over its table's growth instead of twice), each one a thousand-odd
///   entries of one shard, hashed with entries prefetched ahead: a
///   10 M-key fill took as long as with hashbrown, and
///   `bench/instructions.sh` (a third of its commands create keys)
///   counts the same instructions per command.
/// - **Linear probing** from the slot the hash picks (the hash's low 32
///   bits times the capacity, so any capacity works). At 85 % a hit reads
///   about four slots and a miss about twenty, eight to a cache line.
/// - **Removal leaves a tombstone** (a bit in a side bitmap, made on the
///   first removal), unless the slot after it is empty, so every other
///   entry keeps its position while a lock is held: eviction samples
///   positions first and removes by them after. Tombstones count as full
///   for the growth rule; a rebuild drops them.
///
/// SCAN is unaffected: its cursor is a hash value, not a position.
pub(crate) struct KeyTable<T> {
    /// Every slot, `None` when empty or a tombstone.
    slots: Vec<Option<T>>,
    /// One bit per slot: a removed item's slot, which probes pass
    /// through. Empty until the first tombstone.
    tombstones: Vec<u64>,
    len: usize,
    tombstone_count: usize,
}

impl<T: Tagged> Default for KeyTable<T> {
    fn default() -> Self {
        KeyTable::new()
    }
}

/// An item found in the table, to read, change or remove.
pub(crate) struct Occupied<'a, T> {
    table: &'a mut KeyTable<T>,
    index: usize,
}

/// Where an absent item would go.
pub(crate) struct Vacant<'a, T, H> {
    table: &'a mut KeyTable<T>,
    hash: u64,
    hasher: H,
}

/// [`KeyTable::entry`]'s answer.
pub(crate) enum Slot<'a, T, H> {
    Occupied(Occupied<'a, T>),
    Vacant(Vacant<'a, T, H>),
}

impl<T: Tagged> KeyTable<T> {
    pub(crate) const fn new() -> Self {
        KeyTable {
            slots: Vec::new(),
            tombstones: Vec::new(),
            len: 0,
            tombstone_count: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots, full or not (positions run from 0 to this).
    pub(crate) fn num_buckets(&self) -> usize {
        self.slots.len()
    }

    /// Items the table holds before it grows.
    pub(crate) fn capacity(&self) -> usize {
        limit(self.slots.len())
    }

    /// Bytes the slots take (the allocation, a size class).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Option<T>>()
            + self.tombstones.capacity() * size_of::<u64>()
    }

    fn is_tombstone(&self, index: usize) -> bool {
        self.tombstone_count > 0 && self.tombstones[index / 64] & (1 << (index % 64)) != 0
    }

    fn set_tombstone(&mut self, index: usize, on: bool) {
        if self.tombstones.is_empty() {
            self.tombstones = vec![0; self.slots.len().div_ceil(64)];
        }
        let bit = 1 << (index % 64);
        if on {
            self.tombstones[index / 64] |= bit;
            self.tombstone_count += 1;
        } else {
            self.tombstones[index / 64] &= !bit;
            self.tombstone_count -= 1;
        }
    }

    /// The position of the item with `hash` that `eq` accepts.
    fn find_index(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<usize> {
        let capacity = self.slots.len();
        if capacity == 0 {
            return None;
        }
        let tag = tag_of(hash);
        let home = home(hash, capacity);
        // From the home slot to the end, then from the start: at least one
        // slot is empty (`limit`), so the probe ends within one turn.
        let (before, after) = self.slots.split_at(home);
        for (start, part) in [(home, after), (0, before)] {
            for (offset, slot) in part.iter().enumerate() {
                match slot {
                    Some(item) if item.hash_tag() == tag && eq(item) => {
                        return Some(start + offset);
                    }
                    Some(_) => {}
                    None if !self.is_tombstone(start + offset) => {
                        #[cfg(debug_assertions)]
                        self.check_absent(eq);
                        return None;
                    }
                    None => {}
                }
            }
        }
        unreachable!("a key table with no empty slot")
    }

    /// Debug builds check every miss against every item: an item whose
    /// tag was lost (a change that did not keep it) would otherwise be a
    /// key the table cannot find.
    #[cfg(debug_assertions)]
    fn check_absent(&self, eq: impl FnMut(&T) -> bool) {
        let found = self.slots.iter().flatten().any(eq);
        assert!(!found, "a key table lost an item's hash tag");
    }

    pub(crate) fn find(&self, hash: u64, eq: impl FnMut(&T) -> bool) -> Option<&T> {
        let index = self.find_index(hash, eq)?;
        self.slots[index].as_ref()
    }

    pub(crate) fn find_mut(&mut self, hash: u64, eq: impl FnMut(&T) -> bool) -> Option<&mut T> {
        let index = self.find_index(hash, eq)?;
        self.slots[index].as_mut()
    }

    pub(crate) fn find_entry(
        &mut self,
        hash: u64,
        eq: impl FnMut(&T) -> bool,
    ) -> Option<Occupied<'_, T>> {
        let index = self.find_index(hash, eq)?;
        Some(Occupied { table: self, index })
    }

    /// The item with `hash` that `eq` accepts, or where it would go;
    /// `hasher` gives the hash of any item, for a rebuild.
    pub(crate) fn entry<H: Fn(&T) -> u64>(
        &mut self,
        hash: u64,
        eq: impl FnMut(&T) -> bool,
        hasher: H,
    ) -> Slot<'_, T, H> {
        match self.find_index(hash, eq) {
            Some(index) => Slot::Occupied(Occupied { table: self, index }),
            None => Slot::Vacant(Vacant {
                table: self,
                hash,
                hasher,
            }),
        }
    }

    /// Adds an item the caller knows is absent; returns its position.
    pub(crate) fn insert_unique(
        &mut self,
        hash: u64,
        mut item: T,
        hasher: impl Fn(&T) -> u64,
    ) -> usize {
        if self.len + self.tombstone_count + 1 > limit(self.slots.len()) {
            let growing = self.len + 1 > limit(self.slots.len());
            let capacity = capacity_for(self.len + 1, self.slots.len(), growing);
            self.rebuild(capacity, &hasher);
        }
        item.set_hash_tag(tag_of(hash));
        let index = self.free_slot(hash);
        if self.is_tombstone(index) {
            self.set_tombstone(index, false);
        }
        self.slots[index] = Some(item);
        self.len += 1;
        index
    }

    /// The first empty slot (or tombstone) of `hash`'s probe.
    fn free_slot(&self, hash: u64) -> usize {
        let capacity = self.slots.len();
        let mut index = home(hash, capacity);
        while self.slots[index].is_some() {
            index += 1;
            if index == capacity {
                index = 0;
            }
        }
        index
    }

    /// Moves every item into a table of `capacity` slots (none: frees it).
    ///
    /// Hashing an item reads it, at a random address: the hashes are
    /// taken first, each item prefetched a few ahead, so that those reads
    /// overlap instead of waiting one after another.
    fn rebuild(&mut self, capacity: usize, hasher: &impl Fn(&T) -> u64) {
        const AHEAD: usize = 8;
        let old: Vec<T> = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect();
        for item in old.iter().take(AHEAD) {
            item.prefetch();
        }
        let mut hashes = Vec::with_capacity(old.len());
        for (at, item) in old.iter().enumerate() {
            if let Some(ahead) = old.get(at + AHEAD) {
                ahead.prefetch();
            }
            let hash = hasher(item);
            debug_assert_eq!(item.hash_tag(), tag_of(hash));
            hashes.push(hash);
        }
        let mut slots = Vec::with_capacity(capacity);
        slots.resize_with(capacity, || None);
        self.slots = slots;
        self.tombstones = Vec::new();
        self.tombstone_count = 0;
        for (item, hash) in old.into_iter().zip(hashes) {
            let index = self.free_slot(hash);
            self.slots[index] = Some(item);
        }
    }

    /// Rebuilds for `items` (at least the current count) items; an empty
    /// table gives its memory back.
    pub(crate) fn shrink_to(&mut self, items: usize, hasher: impl Fn(&T) -> u64) {
        let capacity = capacity_for(items.max(self.len), 0, false);
        if capacity < self.slots.len() {
            self.rebuild(capacity, &hasher);
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    /// The item at position `index`, if that slot holds one.
    pub(crate) fn get_bucket(&self, index: usize) -> Option<&T> {
        self.slots.get(index)?.as_ref()
    }

    pub(crate) fn get_bucket_mut(&mut self, index: usize) -> Option<&mut T> {
        self.slots.get_mut(index)?.as_mut()
    }

    pub(crate) fn get_bucket_entry(&mut self, index: usize) -> Option<Occupied<'_, T>> {
        self.slots.get(index)?.as_ref()?;
        Some(Occupied { table: self, index })
    }

    /// Empties slot `index`, as a tombstone unless no probe can pass
    /// through it (the next slot is empty), and then the tombstones just
    /// before it likewise.
    fn vacate(&mut self, index: usize) -> T {
        let item = self.slots[index].take().expect("an occupied slot");
        self.len -= 1;
        let capacity = self.slots.len();
        let next = if index + 1 == capacity { 0 } else { index + 1 };
        if self.slots[next].is_some() || self.is_tombstone(next) {
            self.set_tombstone(index, true);
            return item;
        }
        let mut before = index;
        loop {
            before = if before == 0 {
                capacity - 1
            } else {
                before - 1
            };
            if !self.is_tombstone(before) {
                break;
            }
            self.set_tombstone(before, false);
        }
        item
    }
}

impl<'a, T: Tagged> Occupied<'a, T> {
    pub(crate) fn get(&self) -> &T {
        self.table.slots[self.index].as_ref().expect("occupied")
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.table.slots[self.index].as_mut().expect("occupied")
    }

    pub(crate) fn into_mut(self) -> &'a mut T {
        self.table.slots[self.index].as_mut().expect("occupied")
    }

    pub(crate) fn remove(self) -> T {
        self.table.vacate(self.index)
    }
}

impl<'a, T: Tagged, H: Fn(&T) -> u64> Vacant<'a, T, H> {
    pub(crate) fn insert(self, item: T) -> &'a mut T {
        let index = self.table.insert_unique(self.hash, item, &self.hasher);
        self.table.slots[index].as_mut().expect("just inserted")
    }
}

#[cfg(test)]
mod key_table_tests {
    use super::*;
    use crate::keyspace::thin::ThinBuf;
    use std::collections::HashMap;

    /// A key as the tables hold one: a ThinBuf, its tag in the pointer.
    struct Item(ThinBuf);

    impl Tagged for Item {
        fn hash_tag(&self) -> u8 {
            self.0.hash_tag()
        }
        fn set_hash_tag(&mut self, tag: u8) {
            self.0.set_hash_tag(tag);
        }
    }

    fn hash(key: &[u8]) -> u64 {
        // FNV-1a then a mix: spread enough for a test, and deterministic.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in key {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        h ^= h >> 29;
        h.wrapping_mul(0xbf58_476d_1ce4_e5b9)
    }

    fn item_hash(item: &Item) -> u64 {
        hash(item.0.as_slice())
    }

    fn add(table: &mut KeyTable<Item>, key: &[u8]) -> bool {
        match table.entry(hash(key), |i| i.0.as_slice() == key, item_hash) {
            Slot::Occupied(_) => false,
            Slot::Vacant(vacant) => {
                vacant.insert(Item(ThinBuf::from_parts(&[key])));
                true
            }
        }
    }

    fn remove(table: &mut KeyTable<Item>, key: &[u8]) -> bool {
        match table.find_entry(hash(key), |i| i.0.as_slice() == key) {
            Some(found) => {
                found.remove();
                true
            }
            None => false,
        }
    }

    /// xorshift, so that the sequence is the same every run.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn agrees_with_a_map_through_growth_removal_and_shrinking() {
        let mut table = KeyTable::new();
        let mut model: HashMap<Vec<u8>, ()> = HashMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15;
        for step in 0..60_000 {
            let r = next(&mut state);
            // Keys from a range that grows then shrinks, so that the table
            // both grows and empties out.
            let span = if step < 30_000 { 4_000 } else { 300 };
            let key = format!("key:{}", r % span).into_bytes();
            match r % 7 {
                0..=3 => assert_eq!(add(&mut table, &key), model.insert(key, ()).is_none()),
                4 | 5 => assert_eq!(remove(&mut table, &key), model.remove(&key).is_some()),
                _ => {
                    let found = table.find(hash(&key), |i| i.0.as_slice() == &key[..]);
                    assert_eq!(found.is_some(), model.contains_key(&key));
                }
            }
            assert_eq!(table.len(), model.len());
            if step % 5_000 == 4_999 {
                table.shrink_to(table.len() * 2, item_hash);
                let mut keys: Vec<&[u8]> = table.iter().map(|i| i.0.as_slice()).collect();
                keys.sort();
                let mut expected: Vec<&[u8]> = model.keys().map(|k| &k[..]).collect();
                expected.sort();
                assert_eq!(keys, expected);
            }
        }
        for key in model.keys() {
            assert!(remove(&mut table, key));
        }
        assert!(table.is_empty());
        table.shrink_to(0, item_hash);
        assert_eq!(table.num_buckets(), 0);
        assert_eq!(table.allocated_bytes(), 0);
    }

    #[test]
    fn stays_between_half_and_85_percent_full_while_growing() {
        let mut table = KeyTable::new();
        let mut lowest: f64 = 1.0;
        for n in 0..20_000u32 {
            add(&mut table, &n.to_le_bytes());
            let fill = table.len() as f64 / table.num_buckets() as f64;
            assert!(fill <= 0.85 + 1e-9, "{fill} at {n}");
            if n > 200 {
                lowest = lowest.min(fill);
            }
        }
        assert!(lowest > 0.45, "lowest fill {lowest}");
        // The slots are one allocation of a size class (the unit tests'
        // classes are mimalloc's kind).
        let bytes = table.num_buckets() * 8;
        assert_eq!(crate::keyspace::thin::size_class(bytes), bytes);
    }

    #[test]
    fn positions_stay_put_while_items_are_removed() {
        let mut table = KeyTable::new();
        for n in 0..1_000u32 {
            add(&mut table, &n.to_le_bytes());
        }
        let positions: Vec<(usize, Vec<u8>)> = (0..table.num_buckets())
            .filter_map(|i| {
                table
                    .get_bucket(i)
                    .map(|item| (i, item.0.as_slice().to_vec()))
            })
            .collect();
        // Remove every other item by position, as eviction does.
        for (index, _) in positions.iter().step_by(2) {
            table
                .get_bucket_entry(*index)
                .expect("still there")
                .remove();
        }
        for (n, (index, key)) in positions.iter().enumerate() {
            if n % 2 == 0 {
                assert!(table.get_bucket(*index).is_none());
                assert!(
                    table
                        .find(hash(key), |i| i.0.as_slice() == &key[..])
                        .is_none()
                );
            } else {
                assert_eq!(
                    table.get_bucket(*index).expect("kept").0.as_slice(),
                    &key[..]
                );
                assert!(
                    table
                        .find(hash(key), |i| i.0.as_slice() == &key[..])
                        .is_some()
                );
            }
        }
        assert!(table.get_bucket_entry(positions[0].0).is_none());
        assert!(table.get_bucket(table.num_buckets()).is_none());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "lost an item's hash tag")]
    fn a_lost_tag_is_caught_in_debug_builds() {
        let mut table = KeyTable::new();
        add(&mut table, b"key");
        let item = table.find_mut(hash(b"key"), |_| true).expect("there");
        let tag = item.hash_tag();
        item.set_hash_tag(tag ^ 1);
        table.find(hash(b"key"), |i| i.0.as_slice() == b"key");
    }
}
