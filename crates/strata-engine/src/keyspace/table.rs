//! One database's share of a shard: the hash table of its entries and the
//! index of their deadlines ([`Table`]), and a shard's tables, allocated
//! per database only once written ([`Tables`]). Tables shrink when
//! deletions leave them sparse (hashbrown never shrinks by itself).

use std::collections::BTreeSet;
use std::sync::atomic::AtomicUsize;

use crate::keyspace::entry::Entry;
use crate::keyspace::key::KeyHasher;
use crate::keyspace::key_table::KeyTable;

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
