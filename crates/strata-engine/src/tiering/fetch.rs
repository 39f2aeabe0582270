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
//!
//! The command that found its value cold does all of it under its own
//! locks: it notes what to read while it holds them ([`ColdFetch::want_held`]),
//! and, once read, installs, runs and releases under one lock hold again
//! ([`ColdFetch::install_held`], [`Lent::release_held`]). So a cold GET
//! takes its shard lock twice and is admitted once.

use crate::keyspace::guard::Locked;
use crate::keyspace::key::KeyRef;
use crate::keyspace::shards::Keyspace;
use crate::tiering::eviction::Installed;
use crate::tiering::location::ColdLocation;
use crate::tiering::reader::{ColdReader, Done};
use crate::tiering::tier::ColdValue;

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

    /// Adds `key` if its value is on disk only (and not wanted already),
    /// looked up under the locks `keys` the caller holds; returns whether
    /// it was added.
    pub fn want_held(&mut self, keys: &mut Locked, key: KeyRef, now_ms: u64) -> bool {
        if self.wanted.iter().any(|(wanted, _)| wanted == key.bytes) {
            return false;
        }
        let cold = keys
            .shard(key)
            .peek(self.db, key, now_ms)
            .and_then(|e| e.cold_loc());
        match cold {
            Some(loc) => {
                self.wanted.push((key.bytes.to_vec(), ColdLocation(loc)));
                true
            }
            None => false,
        }
    }

    /// Splits off the values wanted from position `at` on (those of the
    /// commands read ahead), leaving the first `at`.
    pub fn split_off(&mut self, at: usize) -> ColdFetch {
        ColdFetch {
            db: self.db,
            wanted: self.wanted.split_off(at.min(self.wanted.len())),
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
    pub fn submit(&self, reader: &ColdReader, done: impl FnMut(usize) -> Done) {
        self.submit_unflushed(reader, done);
        reader.flush();
    }

    /// [`ColdFetch::submit`] without sending a thread's own ring's reads
    /// to the kernel: the caller calls [`ColdReader::flush`] once more
    /// reads have joined them (one system call, and one doorbell to the
    /// device, for the whole batch).
    pub fn submit_unflushed(&self, reader: &ColdReader, mut done: impl FnMut(usize) -> Done) {
        for (index, (key, loc)) in self.wanted.iter().enumerate() {
            reader.submit(*loc, key.clone(), done(index));
        }
    }

    /// Puts the values read (`results`, in the order wanted) into their
    /// entries, each under a short lock of its own. Returns the values
    /// lent to the coming command, and the reads that failed.
    pub fn install(
        self,
        keyspace: &Keyspace,
        results: Vec<ReadResult>,
        now_ms: u64,
    ) -> (Lent, Vec<FailedRead>) {
        let db = self.db;
        self.install_with(results, |bytes, loc, value| {
            let key = keyspace.key(bytes);
            keyspace.lock(key).install_read(db, key, loc, value, now_ms)
        })
    }

    /// [`ColdFetch::install`] under the locks `keys` the command about to
    /// run holds: no lock of its own.
    pub fn install_held(
        self,
        keys: &mut Locked,
        results: Vec<ReadResult>,
        now_ms: u64,
    ) -> (Lent, Vec<FailedRead>) {
        let db = self.db;
        self.install_with(results, |bytes, loc, value| {
            let key = keys.key(bytes);
            keys.shard(key).install_read(db, key, loc, value, now_ms)
        })
    }

    /// Installs each value read with `install`; the values lent and the
    /// reads that failed.
    fn install_with(
        self,
        results: Vec<ReadResult>,
        mut install: impl FnMut(&[u8], ColdLocation, &ColdValue) -> Installed,
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
                    if install(&key, loc, &value) == Installed::Transient {
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
    /// Releases the values under the locks `keys` the command holds.
    pub fn release_held(self, keys: &mut Locked, now_ms: u64) {
        for (bytes, loc) in self.values {
            let key = keys.key(&bytes);
            keys.shard(key).release_lent(self.db, key, loc, now_ms);
        }
    }

    /// Releases the values, each under a short lock of its own.
    pub fn release(self, keyspace: &Keyspace, now_ms: u64) {
        for (bytes, loc) in self.values {
            let key = keyspace.key(&bytes);
            keyspace.lock(key).release_lent(self.db, key, loc, now_ms);
        }
    }
}
