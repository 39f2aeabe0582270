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
//! [`Shard::get`]: crate::keyspace::shards::Shard::get

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::storage::log::segment_path;
use crate::storage::record::{self, FLAG_INT, HEADER_BYTES, Kind};
pub use crate::tiering::location::loc;
pub(crate) use crate::tiering::location::{NO_LOC, loc_offset, loc_segment};

/// Segment numbers of the *cache store* start here. With `appendonly no`
/// there is no log of changes, yet values must still be able to leave
/// RAM: they go to a store of their own in `<dir>/cache`, written like
/// the log (same records, same segment files) but never replayed — after
/// a restart the data is what the last checkpoint holds, as with Redis'
/// save points. Its segment numbers live above the log's, so one location
/// (`loc`) names the store, the segment and the offset, and checkpoints,
/// reads and compaction handle both alike.
pub(crate) const CACHE_SEGMENT_BASE: u64 = 1 << 31;

/// The cache store's directory inside the data directory.
pub(crate) fn cache_dir(dir: &Path) -> PathBuf {
    dir.join("cache")
}

/// Whether `segment` belongs to the cache store.
pub(crate) fn is_cache_segment(segment: u64) -> bool {
    segment >= CACHE_SEGMENT_BASE
}

/// Bytes read for a record whose length is unknown: one 4 KiB read is one
/// device operation whatever part of it is used, and covers the header and
/// most values; longer records take a second read.
const FIRST_READ_BYTES: usize = 4096;

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
    /// Segments compaction could not read (their values stay put).
    pub compaction_errors: AtomicU64,
}

/// A value read back from disk.
pub struct ColdValue {
    pub bytes: Vec<u8>,
    pub int: bool,
}

/// Alignment of `O_DIRECT` reads.
const DIRECT_ALIGN: usize = 4096;

/// An open segment: `direct` when opened with `O_DIRECT`.
#[derive(Clone)]
struct Segment {
    file: Arc<File>,
    direct: bool,
}

/// Shared by the keyspace, its shards and the server's readers.
///
/// Cold reads of closed segments use `O_DIRECT`: the RAM budget is the
/// process's, and reading through the page cache would let the kernel
/// hold a second, uncounted copy of the cold data (and make benchmarks
/// measure memory, not the disk). The segment the log is still appending
/// to is read through the page cache (a direct read would first force its
/// dirty pages out), as is any file system that refuses `O_DIRECT`.
pub struct Tier {
    log_dir: RwLock<Option<PathBuf>>,
    cache_dir: RwLock<Option<PathBuf>>,
    files: RwLock<HashMap<u64, Segment>>,
    /// Segments from this one on may still be written (buffered reads).
    head_segment: AtomicU64,
    /// Whether commits give entries the location of their image (a RAM
    /// budget under `tiered`: every value).
    tracking: AtomicBool,
    /// Whether big values get their location (the log of changes is on).
    locating_big: AtomicBool,
    /// The segments that were mostly dead at the last checkpoint cycle.
    dying: Mutex<BTreeSet<u64>>,
    /// Cache-store segments below this one may be named by a checkpoint
    /// on disk, even where no entry is located in them any more (a value
    /// overwritten since): only a checkpoint cycle, which replaces the
    /// files, may delete them.
    named_below: AtomicU64,
    pub stats: TierStats,
    /// The last compaction error, for INFO.
    pub compaction_error: RwLock<Option<String>>,
}

impl Default for Tier {
    fn default() -> Self {
        Tier {
            log_dir: RwLock::new(None),
            cache_dir: RwLock::new(None),
            files: RwLock::new(HashMap::new()),
            head_segment: AtomicU64::new(0),
            tracking: AtomicBool::new(false),
            locating_big: AtomicBool::new(false),
            dying: Mutex::new(BTreeSet::new()),
            named_below: AtomicU64::new(0),
            stats: TierStats::default(),
            compaction_error: RwLock::new(None),
        }
    }
}

impl Tier {
    /// Where segment files are (set by recovery or when the log starts).
    pub(crate) fn set_log_dir(&self, dir: &Path) {
        *self.log_dir.write() = Some(dir.to_path_buf());
    }

    /// Where the cache store's segment files are.
    pub(crate) fn set_cache_dir(&self, dir: &Path) {
        *self.cache_dir.write() = Some(dir.to_path_buf());
    }

    /// See `named_below`: set at start and at the end of each checkpoint
    /// cycle to the cache store's head segment.
    pub(crate) fn set_named_below(&self, segment: u64) {
        self.named_below.store(segment, Ordering::Relaxed);
    }

    pub(crate) fn named_below(&self) -> u64 {
        self.named_below.load(Ordering::Relaxed)
    }

    pub fn tracking(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    /// With the log of changes on: big values get their locations too
    /// ([`LOCATE_BIG_BYTES`]).
    pub(crate) fn set_locating_big(&self, on: bool) {
        self.locating_big.store(on, Ordering::Relaxed);
    }

    /// The segments that were mostly dead when the last cycle began.
    pub(crate) fn dying_at_last_cycle(&self) -> BTreeSet<u64> {
        self.dying.lock().clone()
    }

    /// Notes the segments mostly dead now (`compaction::dying_segments`)
    /// and returns those that were so at the last call too.
    pub(crate) fn still_dying(&self, now: BTreeSet<u64>) -> BTreeSet<u64> {
        let mut dying = self.dying.lock();
        let still = dying.intersection(&now).copied().collect();
        *dying = now;
        still
    }

    /// Whether commits give any record's location to its entry.
    pub fn places(&self) -> bool {
        self.tracking() || self.locating_big.load(Ordering::Relaxed)
    }

    /// Whether a value whose image is `image_len` bytes long gets its
    /// location (all of them while tiering tracks locations).
    pub(crate) fn locates(&self, image_len: usize) -> bool {
        self.tracking()
            || (image_len >= LOCATE_BIG_BYTES && self.locating_big.load(Ordering::Relaxed))
    }

    /// Turns location tracking on or off (on: RAM budget under `tiered`).
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
    }

    pub fn cold_keys(&self) -> u64 {
        self.stats.cold_keys.load(Ordering::Relaxed).max(0) as u64
    }

    /// The segment the log appends to now (the server's cron keeps this
    /// current; lagging behind only means a buffered read).
    pub(crate) fn set_head_segment(&self, segment: u64) {
        self.head_segment.store(segment, Ordering::Relaxed);
    }

    fn file(&self, segment: u64) -> std::io::Result<Segment> {
        let closed = segment < self.head_segment.load(Ordering::Relaxed);
        if let Some(open) = self.files.read().get(&segment)
            && (open.direct || !closed)
        {
            return Ok(open.clone());
        }
        let dir = if is_cache_segment(segment) {
            self.cache_dir.read().clone()
        } else {
            self.log_dir.read().clone()
        };
        let dir = dir
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no log directory"))?;
        let path = segment_path(&dir, segment);
        let direct = if closed {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .ok()
        } else {
            None
        };
        let open = match direct {
            Some(file) => Segment {
                file: Arc::new(file),
                direct: true,
            },
            None => Segment {
                file: Arc::new(File::open(&path)?),
                direct: false,
            },
        };
        self.files.write().insert(segment, open.clone());
        Ok(open)
    }

    /// Closes the cached descriptor of a deleted segment.
    pub(crate) fn forget_segment(&self, segment: u64) {
        self.files.write().remove(&segment);
    }

    /// Reads the value of `key` stored at `loc`: the record must be intact
    /// (both CRCs), a SET, and for this key.
    pub(crate) fn read_value(&self, loc: u64, key: &[u8]) -> Result<ColdValue, String> {
        let result = self.read_record(loc, key);
        if result.is_err() {
            self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    fn read_record(&self, loc: u64, key: &[u8]) -> Result<ColdValue, String> {
        let plan = self.plan_read(loc, key.len())?;
        let mut raw = vec![0u8; plan.buffer_len()];
        let at = plan.buffer_start(&raw);
        let span = plan.len;
        let buf = &mut raw[at..at + span];
        let mut got = 0;
        // Direct reads stay aligned: a short one is the end of the file.
        while got < span && (!plan.direct || got.is_multiple_of(DIRECT_ALIGN)) {
            match plan.file.read_at(&mut buf[got..], plan.offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(plan.error(e)),
            }
        }
        self.finish_read(&plan, key, &buf[..got])
    }

    /// What to read for the value at `loc` of a key `key_len` bytes long:
    /// one read of at least [`FIRST_READ_BYTES`] (aligned blocks for a
    /// direct read) that covers the header, the key and most values.
    pub(crate) fn plan_read(&self, loc: u64, key_len: usize) -> Result<ReadPlan, String> {
        let (segment, record_at) = (loc_segment(loc), loc_offset(loc));
        let open = self
            .file(segment)
            .map_err(|e| format!("segment {segment} offset {record_at}: {e}"))?;
        let first = FIRST_READ_BYTES.max(HEADER_BYTES + key_len);
        let (offset, skip, len) = if open.direct {
            let start = record_at & !(DIRECT_ALIGN as u64 - 1);
            let skip = (record_at - start) as usize;
            (start, skip, (skip + first).next_multiple_of(DIRECT_ALIGN))
        } else {
            (record_at, 0, first)
        };
        Ok(ReadPlan {
            file: open.file,
            direct: open.direct,
            loc,
            offset,
            skip,
            len,
        })
    }

    /// When the first read of `plan` (which returned `got`) holds only
    /// the start of a longer record: the plan of one read of the whole
    /// record, which asynchronous readers submit instead of letting
    /// [`Tier::finish_read`] block for the rest. A damaged header is left
    /// for `finish_read` to report.
    pub(crate) fn rest_of_record(&self, plan: &ReadPlan, got: &[u8]) -> Option<ReadPlan> {
        let header = record::parse_header(got.get(plan.skip..)?).ok()?;
        if header.total_len <= got.len() - plan.skip {
            return None;
        }
        let record_at = plan.offset + plan.skip as u64;
        let (offset, skip, len) = if plan.direct {
            let start = record_at & !(DIRECT_ALIGN as u64 - 1);
            let skip = (record_at - start) as usize;
            (
                start,
                skip,
                (skip + header.total_len).next_multiple_of(DIRECT_ALIGN),
            )
        } else {
            (record_at, 0, header.total_len)
        };
        Some(ReadPlan {
            file: plan.file.clone(),
            direct: plan.direct,
            loc: plan.loc,
            offset,
            skip,
            len,
        })
    }

    /// Completes a planned read given the bytes it returned: reads the
    /// rest of a longer record (blocking), checks both CRCs and the key,
    /// and counts the read (errors are counted by the caller, in
    /// `stats.read_errors`).
    pub(crate) fn finish_read(
        &self,
        plan: &ReadPlan,
        key: &[u8],
        got: &[u8],
    ) -> Result<ColdValue, String> {
        let record_at = plan.offset + plan.skip as u64;
        let got = got.get(plan.skip..).unwrap_or_default();
        let header = record::parse_header(got).map_err(|e| plan.error(e))?;
        // The record is usually all in the first read: decoded in place,
        // and only its value copied out.
        let whole;
        let buf: &[u8] = if header.total_len > got.len() {
            whole = if plan.direct {
                read_direct(&plan.file, record_at, header.total_len).map_err(|e| plan.error(e))?
            } else {
                let mut buf = got.to_vec();
                buf.resize(header.total_len, 0);
                plan.file
                    .read_exact_at(&mut buf[got.len()..], record_at + got.len() as u64)
                    .map_err(|e| plan.error(e))?;
                buf
            };
            &whole
        } else {
            got
        };
        self.stats.disk_reads.fetch_add(1, Ordering::Relaxed);
        self.stats
            .disk_read_bytes
            .fetch_add(header.total_len as u64, Ordering::Relaxed);
        let record = record::decode_with_header(buf, header).map_err(|e| plan.error(e))?;
        if record.kind != Kind::Set || record.key != key {
            return Err(plan.error("not this key's image"));
        }
        let int = record.flags & FLAG_INT != 0;
        let start = HEADER_BYTES + header.key_len;
        Ok(ColdValue {
            bytes: buf[start..header.total_len].to_vec(),
            int,
        })
    }
}

/// One read a cold value needs: `len` bytes of `file` from `offset` into a
/// buffer (aligned to [`DIRECT_ALIGN`] when `direct`); the record starts
/// `skip` bytes into them. Any reader (blocking threads, io_uring) does
/// the read and hands the bytes to [`Tier::finish_read`].
pub(crate) struct ReadPlan {
    pub file: Arc<File>,
    pub direct: bool,
    pub loc: u64,
    pub offset: u64,
    pub skip: usize,
    pub len: usize,
}

impl ReadPlan {
    /// Bytes to allocate for the buffer (room to align it).
    pub(crate) fn buffer_len(&self) -> usize {
        self.len + DIRECT_ALIGN
    }

    /// Where in `raw` (of [`ReadPlan::buffer_len`] bytes) the read goes.
    pub(crate) fn buffer_start(&self, raw: &[u8]) -> usize {
        raw.as_ptr().align_offset(DIRECT_ALIGN)
    }

    pub(crate) fn error(&self, why: impl std::fmt::Display) -> String {
        format!(
            "segment {} offset {}: {why}",
            loc_segment(self.loc),
            loc_offset(self.loc)
        )
    }
}

/// Reads at most `len` bytes from `offset` of a file opened with
/// `O_DIRECT`: the aligned blocks around them go into an aligned buffer,
/// and the wanted part is copied out (short at the end of the file).
fn read_direct(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let start = offset & !(DIRECT_ALIGN as u64 - 1);
    let skip = (offset - start) as usize;
    let span = (skip + len).next_multiple_of(DIRECT_ALIGN);
    let mut raw = vec![0u8; span + DIRECT_ALIGN];
    let at = raw.as_ptr().align_offset(DIRECT_ALIGN);
    let buf = &mut raw[at..at + span];
    let mut got = 0;
    // A read short of the aligned span is the end of the file (direct
    // reads must stay aligned, so no retry from an odd offset).
    while got < span && got.is_multiple_of(DIRECT_ALIGN) {
        match file.read_at(&mut buf[got..], start + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let end = got.min(skip + len);
    Ok(if end > skip {
        raw[at + skip..at + end].to_vec()
    } else {
        Vec::new()
    })
}

/// Per shard: how many entries are located in each segment.
#[derive(Default)]
pub(crate) struct LiveCounts {
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

/// The key a committed record changed, and whether the record is that
/// value's image (a SET) rather than a change to part of it: placement
/// ([`crate::Shard`]) gives an image's location to its entry. Reads the
/// record's kind, database and key without checking CRCs (the bytes were
/// just encoded by this process).
pub(crate) fn placed(record: &[u8]) -> Option<Placed<'_>> {
    let image = match Kind::from_u8(record[34]) {
        Some(Kind::Set) => true,
        Some(
            Kind::SetRange
            | Kind::HashPut
            | Kind::HashDel
            | Kind::ListOp
            | Kind::SetOp
            | Kind::ZSetOp
            | Kind::StreamOp,
        ) => false,
        _ => return None,
    };
    let total_len = u32::from_le_bytes(record[8..12].try_into().expect("4 bytes")) as usize;
    let key_len = u32::from_le_bytes(record[12..16].try_into().expect("4 bytes")) as usize;
    let db = u16::from_le_bytes([record[32], record[33]]) as usize;
    Some(Placed {
        db,
        key: &record[HEADER_BYTES..HEADER_BYTES + key_len],
        image,
        payload_len: total_len - HEADER_BYTES - key_len,
    })
}

/// What [`placed`] reads of a committed record.
pub(crate) struct Placed<'r> {
    pub(crate) db: usize,
    pub(crate) key: &'r [u8],
    /// A SET: the value's whole image.
    pub(crate) image: bool,
    pub(crate) payload_len: usize,
}

/// Values whose image is at least this long are given their location
/// whenever the log is on, tiering or not: a checkpoint then names them
/// by it instead of copying them (docs/storage.md, "Big values are
/// named, not copied"). Smaller ones are copied: their location would
/// cost an 8-byte field in RAM for little saved.
pub(crate) const LOCATE_BIG_BYTES: usize = 4096;
