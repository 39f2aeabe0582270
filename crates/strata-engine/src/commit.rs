//! What one lock hold changed ([`Commit`]), handed back as a value when
//! its locks commit: the LSN a reply must wait for before it is durable,
//! and the keys changed, one entry per change record, in apply order.
//!
//! The list is kept whether or not the log is on, so a caller can count
//! changes (INFO's `rdb_changes_since_last_save`) and will be able to
//! react to them (keyspace notifications, WATCH within one connection)
//! without subscribing to the change feed. Value images written so a
//! value can leave RAM are not changes and are not listed. Key bytes are
//! kept inline for the usual command (a few short keys): no allocation.

use smallvec::SmallVec;

use crate::record::Kind;

/// What a lock hold committed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Commit {
    /// The LSN of the last record logged (None: nothing logged, or the
    /// log is off).
    pub lsn: Option<u64>,
    pub changed: Changed,
}

impl Commit {
    /// Adds what a later commit of the same command did.
    pub fn absorb(&mut self, later: Commit) {
        self.lsn = self.lsn.max(later.lsn);
        for (kind, db, key) in later.changed.iter() {
            self.changed.push(kind, db, key);
        }
    }
}

/// The changes of one commit: kind, database and key of each record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    keys: SmallVec<[u8; 32]>,
    items: SmallVec<[Item; 2]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Item {
    kind: Kind,
    db: u16,
    /// Where this change's key ends in `keys` (it starts where the
    /// previous one ends).
    end: u32,
}

impl Changed {
    pub(crate) fn push(&mut self, kind: Kind, db: u16, key: &[u8]) {
        self.keys.extend_from_slice(key);
        self.items.push(Item {
            kind,
            db,
            end: self.keys.len() as u32,
        });
    }

    /// How many changes (records) were committed.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Each change: its kind, database and key (empty for FLUSHDB,
    /// FLUSHALL and SWAPDB).
    pub fn iter(&self) -> impl Iterator<Item = (Kind, u16, &[u8])> + '_ {
        let mut start = 0;
        self.items.iter().map(move |item| {
            let key = &self.keys[start..item.end as usize];
            start = item.end as usize;
            (item.kind, item.db, key)
        })
    }

    /// Whether `key` of `db` was changed (FLUSHDB of `db`, FLUSHALL and
    /// any SWAPDB count).
    pub fn touches(&self, db: u16, key: &[u8]) -> bool {
        self.iter()
            .any(|(kind, changed_db, changed_key)| match kind {
                Kind::FlushAll => true,
                Kind::FlushDb => changed_db == db,
                Kind::SwapDb => true,
                _ => changed_db == db && changed_key == key,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_come_back_in_order_and_tell_what_they_touch() {
        let mut changed = Changed::default();
        changed.push(Kind::Set, 0, b"a");
        changed.push(Kind::Del, 3, b"");
        changed.push(
            Kind::HashPut,
            1,
            b"a longer key that does not fit inline at all, no",
        );
        let all: Vec<_> = changed.iter().collect();
        assert_eq!(
            all,
            vec![
                (Kind::Set, 0, &b"a"[..]),
                (Kind::Del, 3, &b""[..]),
                (
                    Kind::HashPut,
                    1,
                    &b"a longer key that does not fit inline at all, no"[..]
                ),
            ]
        );
        assert!(changed.touches(0, b"a"));
        assert!(!changed.touches(1, b"a"));
        let mut flushed = Changed::default();
        flushed.push(Kind::FlushDb, 2, b"");
        assert!(flushed.touches(2, b"anything") && !flushed.touches(0, b"x"));
        let mut commit = Commit {
            lsn: Some(4),
            changed,
        };
        commit.absorb(Commit {
            lsn: Some(9),
            changed: flushed,
        });
        assert_eq!((commit.lsn, commit.changed.len()), (Some(9), 4));
        assert!(Changed::default().is_empty());
    }
}
