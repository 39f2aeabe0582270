//! The RDB file a full synchronisation sends, written from a copy of the
//! keyspace made shard by shard ([`strata_engine::keyspace::copy`]) into a file
//! under the data directory: no fork, one shard locked at a time, the
//! file on disk rather than in RAM.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use strata_engine::keyspace::copy::Copied;
use strata_engine::keyspace::shards::SHARD_COUNT;
use strata_engine::storage::record::{Kind, Record};
use strata_engine::{Keyspace, ValueType};

use crate::rdb::file::Writer;

/// A written copy: the file, its length, and what it covers.
pub struct Snapshot {
    pub path: PathBuf,
    pub bytes: u64,
    pub keys: u64,
    /// Per shard, the sequence number from which its changes are not in
    /// the copy (`L_s`).
    pub covered: Vec<u64>,
}

/// What a record that follows the copy is to the replica.
#[derive(Debug, PartialEq, Eq)]
pub enum Follows {
    /// The copy already holds it.
    Skip,
    /// It must be sent.
    Send,
    /// It changed every shard (FLUSHALL, FLUSHDB, SWAPDB) while the copy
    /// was being made: some shards were copied before it, some after, and
    /// no command could now bring the replica to an exact state. The
    /// synchronisation starts again.
    Restart,
}

impl Snapshot {
    /// Whether every record of `group` came after every shard's copy: the
    /// stream needs no more leaving out from there on.
    pub fn passed(&self, group: &strata_engine::feed::Group) -> bool {
        let last = self.covered.iter().max().copied().unwrap_or(0);
        let records = &group.records;
        if records.is_empty() {
            return true;
        }
        let len = strata_engine::storage::record::encoded_len(records).min(records.len());
        let first =
            strata_engine::storage::record::decode(&records[..len]).map_or(u64::MAX, |r| r.lsn);
        first >= last
    }

    /// Where `record` (from the change feed, subscribed before the copy
    /// began) stands relative to the copy.
    pub fn follows(&self, keyspace: &Keyspace, record: &Record) -> Follows {
        let shard_wide = matches!(record.kind, Kind::FlushDb | Kind::FlushAll | Kind::SwapDb);
        if shard_wide {
            let first = self.covered.iter().min().copied().unwrap_or(0);
            let last = self.covered.iter().max().copied().unwrap_or(0);
            return if record.lsn < first {
                Follows::Skip
            } else if record.lsn >= last {
                Follows::Send
            } else {
                Follows::Restart
            };
        }
        let shard = if record.kind == Kind::Meta {
            0
        } else {
            keyspace.key(record.key).shard()
        };
        if record.lsn >= self.covered[shard] {
            Follows::Send
        } else {
            Follows::Skip
        }
    }
}

/// A value on disk only, noted under its shard's lock, read after.
struct ColdKey {
    db: usize,
    key: Vec<u8>,
    deadline: Option<u64>,
    loc: u64,
    value_type: ValueType,
}

/// Writes a copy that holds the function libraries only, no key
/// (`REPLCONF rdb-filter-only functions`, which `redis-cli
/// --functions-rdb` sends), to `path`.
pub fn write_functions(
    functions: &crate::functions::Libraries,
    path: &Path,
    redis_version: &str,
    now_ms: u64,
) -> std::io::Result<Snapshot> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = BufWriter::new(File::create(path)?);
    let mut writer = Writer::new(file, redis_version, now_ms)?;
    if !functions.libraries.is_empty() {
        let codes = functions.libraries.values().map(|l| l.code.as_bytes());
        writer.functions(&crate::functions::dump_body(codes))?;
    }
    let (file, bytes) = writer.finish()?;
    file.into_inner().map_err(|e| e.into_error())?;
    Ok(Snapshot {
        path: path.to_path_buf(),
        bytes,
        keys: 0,
        covered: Vec::new(),
    })
}

/// Writes the copy to `path`; the file says it is from Redis
/// `redis_version`, and that the stream after it has database
/// `stream_db` selected.
pub fn write(
    keyspace: &Keyspace,
    path: &Path,
    redis_version: &str,
    stream_db: u16,
    now_ms: u64,
) -> std::io::Result<Snapshot> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut writer = Writer::new(file, redis_version, now_ms)?;
    writer.aux("repl-stream-db", &stream_db.to_string())?;
    let mut covered = Vec::with_capacity(SHARD_COUNT);
    let mut keys = 0;
    let mut cold = Vec::new();
    for index in 0..SHARD_COUNT {
        let (from, meta) = keyspace.copy_shard(index, now_ms, |db, key, deadline, copied| {
            keys += 1;
            match copied {
                Copied::Value(value) => writer.key(db, key, deadline, value, now_ms),
                Copied::Cold { loc, value_type } => cold.push(ColdKey {
                    db,
                    key: key.to_vec(),
                    deadline,
                    loc,
                    value_type,
                }),
            }
        });
        covered.push(from);
        // Function libraries: each in its own item, or (older data
        // directories) all in one, FUNCTION DUMP's payload.
        let mut libraries = Vec::new();
        for (name, image) in &meta {
            if name == crate::functions::META_NAME && image.len() > crate::rdb::FOOTER_BYTES {
                writer.functions(&image[..image.len() - crate::rdb::FOOTER_BYTES])?;
            } else if name.starts_with(crate::functions::LIBRARY_META_PREFIX) {
                libraries.push(image.as_slice());
            }
        }
        if !libraries.is_empty() {
            writer.functions(&crate::functions::dump_body(libraries))?;
        }
        for ColdKey {
            db,
            key,
            deadline,
            loc,
            value_type,
        } in cold.drain(..)
        {
            let value = keyspace
                .read_cold_copy(loc, value_type, &key)
                .map_err(std::io::Error::other)?;
            writer.key(db, &key, deadline, value.value(), now_ms);
        }
        writer.spill()?;
    }
    // Not synced: the file only lives until it is sent.
    let (file, bytes) = writer.finish()?;
    file.into_inner().map_err(|e| e.into_error())?;
    Ok(Snapshot {
        path: path.to_path_buf(),
        bytes,
        keys,
        covered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: Kind, key: &[u8], lsn: u64) -> Record<'_> {
        Record {
            lsn,
            aux: 0,
            db: 0,
            kind,
            flags: 0,
            value_type: 0,
            key,
            payload: &[],
        }
    }

    /// A key's record follows its shard's L; one that changes every shard
    /// is left out before every shard's copy, sent after all of them, and
    /// between the two the synchronisation must start over.
    #[test]
    fn records_follow_the_copy_of_their_shard() {
        let keyspace = Keyspace::new(16);
        let shard = keyspace.key(b"k").shard();
        let mut covered = vec![100; SHARD_COUNT];
        covered[0] = 50;
        covered[shard] = 200;
        let copy = Snapshot {
            path: PathBuf::new(),
            bytes: 0,
            keys: 0,
            covered,
        };
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::Set, b"k", 199)),
            Follows::Skip
        );
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::Set, b"k", 200)),
            Follows::Send
        );
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::Meta, b"functions", 49)),
            Follows::Skip
        );
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::Meta, b"functions", 50)),
            Follows::Send
        );
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::FlushAll, b"", 49)),
            Follows::Skip
        );
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::FlushAll, b"", 120)),
            Follows::Restart
        );
        assert_eq!(
            copy.follows(&keyspace, &record(Kind::SwapDb, b"", 200)),
            Follows::Send
        );
    }
}
