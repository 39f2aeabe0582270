//! Bringing the cold values a command will read into RAM before it locks
//! ([`ColdFetch`]), so no disk read ever happens under a shard lock.
//!
//! A caller (the server's connection, before dispatch) lists the keys
//! whose values the command reads; the fetch notes those whose values are
//! on disk only, with where they lie. It submits every read to a
//! [`ColdReader`] at once (they are in flight together), collects the
//! results however it likes to wait, and installs them: each value goes
//! back into its entry if the entry still points where it was read from.
//! A value read once is only lent to the command ([`Lent`]) and leaves RAM
//! again after it, unless the command changed it; one read twice within a
//! short window stays (promotion), so a scan does not push the hot set out.
//!
//! A value that changed or went cold elsewhere meanwhile is simply not
//! installed: the command then finds it cold under its locks and the
//! caller fetches again (the server's dispatch reports `Cold`).

use crate::eviction::Installed;
use crate::keyspace::Keyspace;
use crate::location::ColdLocation;
use crate::reader::{ColdReader, Done};
use crate::tier::ColdValue;

/// The cold values of one database that a caller wants in RAM.
#[derive(Debug, Default)]
pub struct ColdFetch {
    db: usize,
    wanted: Vec<(Vec<u8>, ColdLocation)>,
}

/// A read's result.
pub type ReadResult = Result<ColdValue, String>;

impl ColdFetch {
    pub fn new(db: usize) -> Self {
        ColdFetch {
            db,
            wanted: Vec::new(),
        }
    }

    /// Adds `key` if its value is on disk only (and not wanted already);
    /// returns whether it was added.
    pub fn want(&mut self, keyspace: &Keyspace, key: &[u8], now_ms: u64) -> bool {
        if self.wanted.iter().any(|(wanted, _)| wanted == key) {
            return false;
        }
        match keyspace.cold_loc(self.db, keyspace.key(key), now_ms) {
            Some(loc) => {
                self.wanted.push((key.to_vec(), loc));
                true
            }
            None => false,
        }
    }

    /// Values to read.
    pub fn len(&self) -> usize {
        self.wanted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.wanted.is_empty()
    }

    /// Submits every read to `reader`; `done(index)` makes the callback
    /// that receives the `index`th result (on a reader thread).
    pub fn submit(&self, reader: &ColdReader, mut done: impl FnMut(usize) -> Done) {
        for (index, (key, loc)) in self.wanted.iter().enumerate() {
            reader.submit(*loc, key.clone(), done(index));
        }
        reader.flush();
    }

    /// Puts the values read (`results`, in the order wanted) into their
    /// entries. Returns the values lent to the coming command, and the
    /// reads that failed.
    pub fn install(
        self,
        keyspace: &Keyspace,
        results: Vec<ReadResult>,
        now_ms: u64,
    ) -> (Lent, Vec<FailedRead>) {
        debug_assert_eq!(results.len(), self.wanted.len());
        let mut lent = Lent {
            db: self.db,
            values: Vec::new(),
        };
        let mut failed = Vec::new();
        for (index, ((key, loc), result)) in self.wanted.into_iter().zip(results).enumerate() {
            match result {
                Ok(value) => {
                    let installed =
                        keyspace.install(self.db, keyspace.key(&key), loc, &value, now_ms);
                    if installed == Installed::Transient {
                        lent.values.push((key, loc));
                    }
                }
                Err(why) => failed.push(FailedRead { index, key, why }),
            }
        }
        (lent, failed)
    }
}

/// A read that failed (a damaged record, an I/O error): the value stays
/// cold, and a command that needs it must answer an error.
#[derive(Debug)]
pub struct FailedRead {
    /// Its position among the values wanted.
    pub index: usize,
    pub key: Vec<u8>,
    pub why: String,
}

/// Values in RAM only for the command they were read for; release them
/// after it ran (those it changed stay).
#[must_use = "lent values stay in RAM until released"]
#[derive(Debug)]
pub struct Lent {
    db: usize,
    values: Vec<(Vec<u8>, ColdLocation)>,
}

impl Lent {
    pub fn release(self, keyspace: &Keyspace, now_ms: u64) {
        for (key, loc) in self.values {
            keyspace.release_transient(self.db, keyspace.key(&key), loc, now_ms);
        }
    }
}
