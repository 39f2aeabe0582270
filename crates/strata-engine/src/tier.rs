//! Tiering: keys and hot values in RAM, cold values in the log on disk.
//!
//! Every SET record in the log is a value's full, CRC-checked image, so the
//! log itself is the cold tier: a value leaves RAM by forgetting its bytes
//! and keeping the *location* of its newest image (segment and offset, one
//! `u64` in the entry). Nothing is written to evict a value that has a
//! location ("clean"); a value without one ("dirty": loaded from a
//! checkpoint image, or written before tiering was switched on) first gets
//! its image appended.
//!
//! Locations come from the commit: while location tracking is on (the
//! server turns it on with a RAM budget under the `tiered` policy), the
//! lock guard that commits a group learns where each record landed and, still
//! under the shard lock, gives each SET record's entry that location. Any
//! change to a value clears its location first, so a location always holds
//! exactly the entry's current value (its deadline lives in the entry).
//!
//! Segments holding a location stay on disk: each shard counts, per
//! segment, the entries located there, and a checkpoint deletes only
//! segments with no count (see `checkpoint::run_cycle`). Compaction
//! re-appends the live records of segments that are mostly garbage so the
//! count of their old home drops to zero.
//!
//! Reads of cold values ([`Tier::read_value`]) are `pread`s of the record,
//! CRC-checked, with its key compared. The server runs them on its reader
//! threads, outside any shard lock, many at once; [`Shard::get`] falls back
//! to a read under the lock only if a value went cold again between the
//! server's fetch and the command (counted in `sync_reads`).
//!
//! [`Shard::get`]: crate::keyspace::Shard::get

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::log::segment_path;
use crate::record::{self, FLAG_INT, HEADER_BYTES, Kind};

/// "No location": the value's current image is only in RAM.
pub const NO_LOC: u64 = u64::MAX;

/// Bytes read for a record whose length is unknown: one 4 KiB read is one
/// device operation whatever part of it is used, and covers the header and
/// most values; longer records take a second read.
const FIRST_READ_BYTES: usize = 4096;

/// A location: segment in the high 32 bits, byte offset in the low 32.
pub fn loc(segment: u64, offset: u64) -> u64 {
    assert!(segment < u32::MAX as u64 && offset <= u32::MAX as u64);
    segment << 32 | offset
}

pub fn loc_segment(loc: u64) -> u64 {
    loc >> 32
}

pub fn loc_offset(loc: u64) -> u64 {
    loc & u32::MAX as u64
}

/// Counters for INFO tiering.
#[derive(Default)]
pub struct TierStats {
    /// Keys whose value is only on disk.
    pub cold_keys: AtomicI64,
    /// Reads of cold values (by the server's readers and fallbacks).
    pub disk_reads: AtomicU64,
    pub disk_read_bytes: AtomicU64,
    /// Reads that had to happen under a shard lock (a value evicted
    /// between the server's fetch and the command, or a command whose
    /// keys the server could not name in advance).
    pub sync_reads: AtomicU64,
    /// Values read from disk and kept in RAM.
    pub promotions: AtomicU64,
    /// Values that left RAM.
    pub evictions: AtomicU64,
    /// Dirty values whose image was appended so they could leave RAM.
    pub eviction_writes: AtomicU64,
    /// Reads that found a damaged or unexpected record.
    pub read_errors: AtomicU64,
    /// Records re-appended by compaction.
    pub compaction_moves: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
}

/// A value read back from disk.
pub struct ColdValue {
    pub bytes: Vec<u8>,
    pub int: bool,
}

/// Shared by the keyspace, its shards and the server's readers.
pub struct Tier {
    log_dir: RwLock<Option<PathBuf>>,
    files: RwLock<HashMap<u64, Arc<File>>>,
    /// Whether commits give entries the location of their image.
    tracking: AtomicBool,
    pub stats: TierStats,
}

impl Default for Tier {
    fn default() -> Self {
        Tier {
            log_dir: RwLock::new(None),
            files: RwLock::new(HashMap::new()),
            tracking: AtomicBool::new(false),
            stats: TierStats::default(),
        }
    }
}

impl Tier {
    /// Where segment files are (set by recovery or when the log starts).
    pub fn set_log_dir(&self, dir: &Path) {
        *self.log_dir.write() = Some(dir.to_path_buf());
    }

    pub fn tracking(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    /// Turns location tracking on or off (on: RAM budget under `tiered`).
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
    }

    pub fn cold_keys(&self) -> u64 {
        self.stats.cold_keys.load(Ordering::Relaxed).max(0) as u64
    }

    fn file(&self, segment: u64) -> std::io::Result<Arc<File>> {
        if let Some(file) = self.files.read().get(&segment) {
            return Ok(file.clone());
        }
        let dir =
            self.log_dir.read().clone().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no log directory")
            })?;
        let file = Arc::new(File::open(segment_path(&dir, segment))?);
        self.files.write().insert(segment, file.clone());
        Ok(file)
    }

    /// Closes the cached descriptor of a deleted segment.
    pub fn forget_segment(&self, segment: u64) {
        self.files.write().remove(&segment);
    }

    /// Reads the value of `key` stored at `loc`: the record must be intact
    /// (both CRCs), a SET, and for this key.
    pub fn read_value(&self, loc: u64, key: &[u8]) -> Result<ColdValue, String> {
        let result = self.read_record(loc, key);
        if result.is_err() {
            self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn read_record(&self, loc: u64, key: &[u8]) -> Result<ColdValue, String> {
        let (segment, offset) = (loc_segment(loc), loc_offset(loc));
        let where_ = || format!("segment {segment} offset {offset}");
        let file = self
            .file(segment)
            .map_err(|e| format!("{}: {e}", where_()))?;
        let mut buf = vec![0u8; FIRST_READ_BYTES.max(HEADER_BYTES + key.len())];
        let got =
            read_at_most(&file, &mut buf, offset).map_err(|e| format!("{}: {e}", where_()))?;
        buf.truncate(got);
        let header = record::parse_header(&buf).map_err(|e| format!("{}: {e}", where_()))?;
        if header.total_len > buf.len() {
            let have = buf.len();
            buf.resize(header.total_len, 0);
            file.read_exact_at(&mut buf[have..], offset + have as u64)
                .map_err(|e| format!("{}: {e}", where_()))?;
        }
        self.stats.disk_reads.fetch_add(1, Ordering::Relaxed);
        self.stats
            .disk_read_bytes
            .fetch_add(header.total_len as u64, Ordering::Relaxed);
        let record =
            record::decode_with_header(&buf, header).map_err(|e| format!("{}: {e}", where_()))?;
        if record.kind != Kind::Set || record.key != key {
            return Err(format!("{}: not this key's image", where_()));
        }
        let int = record.flags & FLAG_INT != 0;
        let start = HEADER_BYTES + header.key_len;
        buf.truncate(header.total_len);
        buf.drain(..start);
        Ok(ColdValue { bytes: buf, int })
    }
}

/// `pread` until `buf` is full or the file ends; returns the bytes read.
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Per shard: how many entries are located in each segment.
#[derive(Default)]
pub struct LiveCounts {
    by_segment: std::collections::BTreeMap<u64, u64>,
}

impl LiveCounts {
    pub(crate) fn add(&mut self, loc: u64) {
        if loc != NO_LOC {
            *self.by_segment.entry(loc_segment(loc)).or_default() += 1;
        }
    }

    pub(crate) fn remove(&mut self, loc: u64) {
        if loc == NO_LOC {
            return;
        }
        let segment = loc_segment(loc);
        let count = self
            .by_segment
            .get_mut(&segment)
            .expect("a located entry was counted");
        *count -= 1;
        if *count == 0 {
            self.by_segment.remove(&segment);
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_segment.iter().map(|(&s, &c)| (s, c))
    }
}

/// Where a SET record in a committed group went: its location. Reads the
/// record's kind, database and key without checking CRCs (the bytes were
/// just encoded by this process).
pub(crate) fn placed_set(record: &[u8]) -> Option<(usize, &[u8])> {
    if record[34] != Kind::Set as u8 {
        return None;
    }
    let key_len = u32::from_le_bytes(record[12..16].try_into().expect("4 bytes")) as usize;
    let db = u16::from_le_bytes([record[32], record[33]]) as usize;
    Some((db, &record[HEADER_BYTES..HEADER_BYTES + key_len]))
}
