//! What one lock hold changed ([`Commit`]), handed back as a value when
//! its locks commit: the LSN a reply must wait for before it is durable,
//! and the keys changed, one entry per change record, in apply order.
//!
//! The list is kept whether or not the log is on, so a caller can count
//! changes (INFO's `rdb_changes_since_last_save`) and react to them
//! (keyspace notifications, WATCH within one connection) without
//! subscribing to the change feed; and it is what the change feed
//! publishes (`crate::feed`), so the sealed records are never decoded
//! again. Value images written so a value can leave RAM are not changes
//! and are not listed. Key bytes are kept inline for the usual command (a
//! few short keys): no allocation.

use smallvec::SmallVec;

use crate::storage::record::Kind;

/// What a lock hold committed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Commit {
    /// The LSN of the last record logged (None: nothing logged, or the
    /// log is off).
    pub lsn: Option<u64>,
    pub changed: Changed,
}

impl Commit {
    /// Nothing logged and nothing changed.
    pub fn is_empty(&self) -> bool {
        self.lsn.is_none() && self.changed.is_empty()
    }

    /// Adds what a later commit of the same command did.
    pub fn absorb(&mut self, later: Commit) {
        if self.changed.is_empty() {
            // Nothing to keep but an LSN: no copying.
            let lsn = self.lsn.max(later.lsn);
            *self = later;
            self.lsn = lsn;
            return;
        }
        self.lsn = self.lsn.max(later.lsn);
        for change in later.changed.changes() {
            self.changed.push(change);
        }
    }
}

/// The changes of one commit: kind, flags, database, aux and key of each
/// record, packed in one small buffer (kind: 1 byte, flags: 1, database:
/// 2, aux: 8, key length: 4, key), inline for one change of a key up to
/// 24 bytes: a commit is cheap to hand back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    bytes: SmallVec<[u8; INLINE_BYTES]>,
    count: u32,
}

/// Bytes of changes [`Changed`] keeps without allocating.
const INLINE_BYTES: usize = 40;
/// Bytes before each change's key in [`Changed`].
const CHANGE_HEADER_BYTES: usize = 16;

/// One change of a commit, as [`Changed::changes`] gives it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeRef<'a> {
    pub kind: Kind,
    /// The record's flags (`record::FLAG_*`: why the data changed).
    pub flags: u8,
    pub db: u16,
    /// The record's `aux`: a deadline for SET and EXPIRE, the other
    /// database for SWAPDB.
    pub aux: u64,
    /// Empty for FLUSHDB, FLUSHALL and SWAPDB.
    pub key: &'a [u8],
}

impl Changed {
    /// No changes (usable in constant initialisers).
    pub(crate) const fn new() -> Changed {
        Changed {
            bytes: SmallVec::new_const(),
            count: 0,
        }
    }

    pub(crate) fn push(&mut self, change: ChangeRef) {
        let ChangeRef {
            kind,
            flags,
            db,
            aux,
            key,
        } = change;
        let mut header = [0u8; CHANGE_HEADER_BYTES];
        header[0] = kind as u8;
        header[1] = flags;
        header[2..4].copy_from_slice(&db.to_le_bytes());
        header[4..12].copy_from_slice(&aux.to_le_bytes());
        header[12..16].copy_from_slice(&(key.len() as u32).to_le_bytes());
        self.count += 1;
        if self.bytes.is_empty() && CHANGE_HEADER_BYTES + key.len() <= INLINE_BYTES {
            // The usual first change: built in place (SmallVec's general
            // insertion costs several times this on the hot path).
            let mut inline = [0u8; INLINE_BYTES];
            inline[..CHANGE_HEADER_BYTES].copy_from_slice(&header);
            inline[CHANGE_HEADER_BYTES..CHANGE_HEADER_BYTES + key.len()].copy_from_slice(key);
            self.bytes = SmallVec::from_buf_and_len(inline, CHANGE_HEADER_BYTES + key.len());
            return;
        }
        self.bytes.extend_from_slice(&header);
        self.bytes.extend_from_slice(key);
    }

    /// How many changes (records) were committed.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Each change: its kind, database and key (empty for FLUSHDB,
    /// FLUSHALL and SWAPDB).
    pub fn iter(&self) -> impl Iterator<Item = (Kind, u16, &[u8])> + '_ {
        self.changes().map(|c| (c.kind, c.db, c.key))
    }

    /// Each change in full.
    pub fn changes(&self) -> impl Iterator<Item = ChangeRef<'_>> + '_ {
        let mut rest = &self.bytes[..];
        std::iter::from_fn(move || {
            let (header, tail) = rest.split_at_checked(CHANGE_HEADER_BYTES)?;
            let word = |at: usize, n: usize| {
                let mut bytes = [0u8; 8];
                bytes[..n].copy_from_slice(&header[at..at + n]);
                u64::from_le_bytes(bytes)
            };
            let len = word(12, 4) as usize;
            let (key, after) = tail.split_at(len);
            rest = after;
            Some(ChangeRef {
                kind: Kind::from_u8(header[0]).expect("pushed as a kind"),
                flags: header[1],
                db: word(2, 2) as u16,
                aux: word(4, 8),
                key,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: Kind, db: u16, key: &[u8]) -> ChangeRef<'_> {
        ChangeRef {
            kind,
            flags: 0,
            db,
            aux: 0,
            key,
        }
    }

    #[test]
    fn changes_come_back_in_order_and_commits_merge() {
        let mut changed = Changed::default();
        changed.push(ChangeRef {
            aux: u64::MAX - 1,
            flags: crate::storage::record::FLAG_EXPIRED,
            ..change(Kind::Set, 0, b"a")
        });
        changed.push(change(Kind::Del, 3, b""));
        changed.push(change(
            Kind::HashPut,
            1,
            b"a longer key that does not fit inline at all, no",
        ));
        let first = changed.changes().next().map(|c| (c.kind, c.aux, c.flags));
        let first = first.unwrap();
        assert_eq!(
            (first.1, first.2),
            (u64::MAX - 1, crate::storage::record::FLAG_EXPIRED)
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
        let mut flushed = Changed::default();
        flushed.push(change(Kind::FlushDb, 2, b""));
        let mut commit = Commit {
            lsn: Some(4),
            changed,
        };
        commit.absorb(Commit {
            lsn: Some(9),
            changed: flushed,
        });
        assert_eq!((commit.lsn, commit.changed.len()), (Some(9), 4));
        let kept = commit.changed.changes().next().unwrap();
        assert_eq!(
            (kept.key, kept.aux, kept.flags),
            (&b"a"[..], first.1, first.2)
        );
        assert!(Changed::default().is_empty());
    }
}
