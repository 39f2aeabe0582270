//! Recovery: newest checkpoint, then the log after it.
//!
//! 1. [`plan`] lists the directory: the newest checkpoint (its header gives
//!    the hash seed, so keys land in the same shards as when it was
//!    written) and the log segments in order.
//! 2. [`load`] reads the checkpoint (every CRC checked; any damage stops
//!    start-up: a checkpoint is renamed into place only once complete, so
//!    damage is never a crash artefact), then replays every segment:
//!    records are checked, LSNs must follow each other without a gap, and a
//!    record of shard `i` below that shard's checkpoint LSN is skipped. A
//!    group (one multi-key command) is applied only when its last record
//!    is there.
//! 3. Damage in the newest segment that looks like an interrupted write —
//!    the file ends inside a record, or only zero bytes follow a bad
//!    header, or the last record's body fails its CRC *and* holds a block
//!    of zeros that never landed — is a *torn tail*:
//!    the segment is truncated to the end of the last complete group, and
//!    what was dropped is logged. Only zero bytes where the next record
//!    would start, after a complete group, are the padding of direct
//!    writes: the segment is cut there without a message. Any other damage is *corruption*: start-up
//!    stops with the file and offset, and `strata-check` can inspect it.
//!
//! [`verify`] runs the same walk without a keyspace, for `strata-check`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::keyspace::shards::{KeyRef, Keyspace, SHARD_COUNT, Shard, Sharding};
use crate::storage::checkpoint::{self, CheckpointReader};
use crate::storage::log::{SegmentInfo, segment_path, segment_seq};
use crate::storage::record::{self, FLAG_INT, FLAG_LOCATED, Invalid, Kind, Record};
use crate::tiering::tier;
use crate::types::collection::{Hash, List, Set, Stream, ZSet};
use crate::types::value::{Value, ValueType};

/// How often [`load`] reports progress.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

pub use crate::storage::log::log_dir;

/// What is on disk, before anything is read.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub dir: PathBuf,
    /// The newest checkpoint file of every range present.
    pub checkpoints: Vec<PathBuf>,
    /// The checkpoints' hash seed.
    pub seed: Option<u64>,
    /// How the checkpoints' keys map to shards (by slot for a new
    /// directory; by hash for one written before format 4).
    pub sharding: Sharding,
    /// Segment sequence numbers, oldest first.
    pub segments: Vec<u64>,
    /// Segments of the cache store (`tier::CACHE_SEGMENT_BASE`), oldest
    /// first: never replayed, read only for the cold values a checkpoint
    /// names.
    pub cache_segments: Vec<u64>,
    /// What `log/HEAD` says (`crate::storage::head`); `None` for a directory
    /// written before it.
    pub head: Option<crate::storage::head::Head>,
}

impl Plan {
    /// Whether the segment of location `loc` exists, in the log or in the
    /// cache store.
    fn has_segment_of(&self, loc: u64) -> bool {
        let segment = tier::loc_segment(loc);
        let list = if tier::is_cache_segment(segment) {
            &self.cache_segments
        } else {
            &self.segments
        };
        list.binary_search(&segment).is_ok()
    }
}

/// The segment numbers of the segment files in `dir`, in order (missing
/// is fine: none).
fn list_segments(dir: &Path) -> Result<Vec<u64>, RecoveryError> {
    let mut segments = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.map_err(|e| io_error(dir, e))?;
                if let Some(seq) = entry.file_name().to_str().and_then(segment_seq) {
                    segments.push(seq);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(dir, e)),
    }
    segments.sort_unstable();
    Ok(segments)
}

/// Why recovery stopped: what a caller may decide on, each with the
/// whole message for the operator (its `Display`).
#[derive(Debug)]
pub enum RecoveryError {
    /// Damage at `offset` of `file` (a log segment or a checkpoint file):
    /// start-up stops; `strata-check` shows it. (A torn tail, the normal
    /// state after a crash, is no error: it is cut off and reported in
    /// [`Loaded::truncated`].)
    Corrupt {
        file: PathBuf,
        offset: u64,
        message: String,
    },
    /// A file start-up needs is gone (the newest log segment `log/HEAD`
    /// names, checkpoint range files).
    Missing { message: String },
    /// Reading `path` failed.
    Io { path: PathBuf, message: String },
    /// The data contradicts itself or belongs to another directory.
    Invalid { message: String },
}

impl std::fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoveryError::Corrupt { message, .. }
            | RecoveryError::Missing { message }
            | RecoveryError::Io { message, .. }
            | RecoveryError::Invalid { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for RecoveryError {}

impl From<checkpoint::CheckpointError> for RecoveryError {
    fn from(e: checkpoint::CheckpointError) -> Self {
        RecoveryError::Corrupt {
            message: e.to_string(),
            file: e.path,
            offset: e.offset,
        }
    }
}

impl RecoveryError {
    /// Reading or writing `path` failed with `error`.
    pub fn io(path: &Path, error: &std::io::Error) -> RecoveryError {
        RecoveryError::Io {
            path: path.to_path_buf(),
            message: format!("{}: {error}", path.display()),
        }
    }

    /// The same error, its message prefixed with what was being done.
    pub fn context(self, what: &str) -> RecoveryError {
        let prefix = |message: String| format!("{what}: {message}");
        match self {
            RecoveryError::Corrupt {
                file,
                offset,
                message,
            } => RecoveryError::Corrupt {
                file,
                offset,
                message: prefix(message),
            },
            RecoveryError::Missing { message } => RecoveryError::Missing {
                message: prefix(message),
            },
            RecoveryError::Io { path, message } => RecoveryError::Io {
                path,
                message: prefix(message),
            },
            RecoveryError::Invalid { message } => RecoveryError::Invalid {
                message: prefix(message),
            },
        }
    }
}

fn io_error(path: &Path, e: std::io::Error) -> RecoveryError {
    RecoveryError::io(path, &e)
}

/// Lists `dir` (missing is fine: a fresh start).
pub fn plan(dir: &Path) -> Result<Plan, RecoveryError> {
    let checkpoints: Vec<PathBuf> = checkpoint::newest(dir)
        .map_err(|e| io_error(dir, e))?
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    let mut seed = None;
    let mut sharding = None;
    for path in &checkpoints {
        let meta = CheckpointReader::meta(path)?;
        if seed.is_some_and(|seed| seed != meta.seed)
            || sharding.is_some_and(|sharding| sharding != meta.sharding)
        {
            return Err(RecoveryError::Invalid {
                message: format!(
                    "Checkpoint {} belongs to another data directory (different hash seed)",
                    path.display()
                ),
            });
        }
        seed = Some(meta.seed);
        sharding = Some(meta.sharding);
    }
    Ok(Plan {
        dir: dir.to_path_buf(),
        checkpoints,
        seed,
        sharding: sharding.unwrap_or(Sharding::Slots),
        segments: list_segments(&log_dir(dir))?,
        cache_segments: list_segments(&tier::cache_dir(dir))?,
        head: crate::storage::head::read(&log_dir(dir))
            .map_err(|message| RecoveryError::Invalid { message })?,
    })
}

/// Refuses a directory whose newest log segment, as `log/HEAD` names it,
/// is missing without the log having deleted it: the acknowledged writes
/// in it would be lost without a word (`crate::storage::head`).
fn check_head(plan: &Plan) -> Result<(), RecoveryError> {
    let Some(head) = plan.head else {
        return Ok(());
    };
    if head.newest == 0 || head.newest_deleted() || plan.segments.contains(&head.newest) {
        return Ok(());
    }
    let path = segment_path(&log_dir(&plan.dir), head.newest);
    Err(RecoveryError::Missing {
        message: format!(
            "Log segment {} is missing: log/HEAD names it as the newest segment written, and \
             Strata did not delete it. The acknowledged writes it held would be lost. \
             Start-up stopped: restore the file (`strata-check {}` lists what is there).",
            path.display(),
            plan.dir.display()
        ),
    })
}

/// Refuses a checkpoint with range files missing when the log no longer
/// holds what they covered (it was cut after a full cycle): the shards of
/// those ranges could not be rebuilt. Names the missing files.
fn check_ranges(plan: &Plan) -> Result<(), RecoveryError> {
    if plan.checkpoints.is_empty() || plan.checkpoints.len() >= checkpoint::RANGE_COUNT {
        return Ok(());
    }
    let present: Vec<(usize, u64)> = plan
        .checkpoints
        .iter()
        .filter_map(|path| path.file_name()?.to_str().and_then(checkpoint::parse_name))
        .collect();
    let log_start = match plan.segments.first() {
        Some(&seq) => first_lsn(&segment_path(&log_dir(&plan.dir), seq))?,
        None => None,
    };
    // A first cycle cut short leaves ranges without a file, and a log
    // never cut (from LSN 1), which rebuilds them; or nothing was ever
    // written (the files cover nothing below LSN 1).
    let nothing_written = log_start.is_none() && present.iter().all(|&(_, lsn)| lsn <= 1);
    if log_start == Some(1) || nothing_written {
        return Ok(());
    }
    let present: Vec<usize> = present.into_iter().map(|(range, _)| range).collect();
    let missing: Vec<String> = (0..checkpoint::RANGE_COUNT)
        .filter(|range| !present.contains(range))
        .map(|range| {
            let first = range * checkpoint::SHARDS_PER_RANGE;
            format!(
                "checkpoint-{range:02}-*.ckpt (shards {first}..{})",
                first + checkpoint::SHARDS_PER_RANGE
            )
        })
        .collect();
    let log = match log_start {
        Some(lsn) => format!("the log starts at LSN {lsn}"),
        None => "no log is left".to_owned(),
    };
    Err(RecoveryError::Missing {
        message: format!(
            "Checkpoint range files missing in {}: {}; {log}, so the keys of those shards \
             cannot be rebuilt. Start-up stopped: restore the files.",
            plan.dir.display(),
            missing.join(", ")
        ),
    })
}

/// Where loading is, for progress lines and INFO.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub keys_loaded: u64,
    pub records_replayed: u64,
}

/// What recovery found and did.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The LSN the next record must get.
    pub next_lsn: u64,
    /// The sequence number for the next new segment.
    pub next_segment: u64,
    pub segments: Vec<SegmentInfo>,
    pub checkpoint_keys: u64,
    pub records_replayed: u64,
    /// Log lines describing torn tails that were cut off.
    pub truncated: Vec<String>,
}

/// A segment's records as the walk saw them.
struct Walked {
    /// Bytes up to the end of the last complete group.
    valid_len: u64,
    lsns: Option<(u64, u64)>,
    records: u64,
    /// Why the bytes after `valid_len` were dropped, when they were.
    torn: Option<Invalid>,
    /// The newest segment ends in zero bytes where the next record would
    /// start: the padding of direct writes (`segment_file`), not damage.
    padded: bool,
}

/// Walks the records of one segment's bytes, handing each complete group
/// to `apply`. `expected_lsn` carries LSN continuity across segments.
fn walk(
    path: &Path,
    data: &[u8],
    newest: bool,
    expected_lsn: &mut Option<u64>,
    mut apply: impl FnMut(&[(usize, Record)]) -> Result<(), String>,
) -> Result<Walked, RecoveryError> {
    let mut at = 0usize;
    let mut group: Vec<(usize, Record)> = Vec::new();
    let mut group_start = 0usize;
    let mut lsns = None;
    let mut records = 0u64;
    let mut padded = false;
    let corrupt = |offset: usize, why: &str| corrupt_log(path, offset, why);
    let torn = loop {
        if at == data.len() {
            if group.is_empty() {
                break None;
            }
            if !newest {
                return Err(corrupt(
                    group_start,
                    "segment ends inside a multi-key group",
                ));
            }
            break Some(Invalid::ShortBody);
        }
        let rest = &data[at..];
        let found =
            decode_at(data, at, newest, group.is_empty()).map_err(|why| corrupt(at, &why))?;
        let record = match found {
            Found::Record(record) => record,
            Found::Torn(why) => break Some(why),
            Found::Padding => {
                padded = true;
                break None;
            }
        };
        if let Some(expected) = *expected_lsn
            && record.lsn != expected
        {
            let why = format!(
                "LSN {} where {expected} was expected (records missing)",
                record.lsn
            );
            return Err(corrupt(at, &why));
        }
        *expected_lsn = Some(record.lsn + 1);
        if group.is_empty() {
            group_start = at;
        }
        lsns = Some(match lsns {
            Some((first, _)) => (first, record.lsn),
            None => (record.lsn, record.lsn),
        });
        records += 1;
        at += record::encoded_len(rest);
        let ends_group = !record.continues_group();
        group.push((at - record::encoded_len(rest), record));
        if ends_group {
            apply(&group).map_err(|why| corrupt(group_start, &why))?;
            group.clear();
        }
    };
    let valid_len = if torn.is_some() && !group.is_empty() {
        group_start
    } else if torn.is_some() || padded {
        at
    } else {
        data.len()
    };
    if torn.is_some() {
        // LSNs of the dropped group's records must be handed out again.
        let dropped = group.len() as u64;
        records -= dropped;
        if let Some(expected) = expected_lsn.as_mut() {
            *expected -= dropped;
        }
        lsns = match lsns {
            Some((first, last)) if last - first + 1 > dropped => Some((first, last - dropped)),
            _ => None,
        };
    }
    Ok(Walked {
        valid_len: valid_len as u64,
        lsns,
        records,
        torn,
        padded,
    })
}

/// The error for damage at `offset` of the segment at `path`: start-up
/// stops, naming the data directory for `strata-check`.
fn corrupt_log(path: &Path, offset: usize, why: &str) -> RecoveryError {
    let message = format!(
        "Corrupt log {} at offset {offset}: {why}. Start-up stopped; inspect it with \
         `strata-check {}` (nothing was changed).",
        path.display(),
        path.parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .display()
    );
    RecoveryError::Corrupt {
        file: path.to_path_buf(),
        offset: offset as u64,
        message,
    }
}

/// What [`decode_at`] finds where the next record of a segment would start.
enum Found<'a> {
    /// A whole record, checked.
    Record(Record<'a>),
    /// The end of a write cut by a crash: the segment's tail is torn.
    Torn(Invalid),
    /// Only zeros after a complete group: the padding of direct writes.
    Padding,
}

/// Decodes the record at `at` of a segment's `data`. Only in the `newest`
/// segment can the bytes there be a torn tail, or padding (where a group
/// would start: `group_empty`); any other damage is corruption, returned
/// as its reason.
fn decode_at(data: &[u8], at: usize, newest: bool, group_empty: bool) -> Result<Found<'_>, String> {
    let rest = &data[at..];
    let decoded = match record::parse_header(rest) {
        Ok(header) => match record::decode_with_header(rest, header) {
            Ok(record) => Ok(record),
            Err(Invalid::BadBody) => {
                let after = &rest[header.total_len..];
                // Torn only if part of the record never reached the
                // disk (a block of zeros in it); a whole record that
                // fails its checksum was damaged after it was written,
                // and may have been acknowledged.
                if newest
                    && after.iter().all(|&b| b == 0)
                    && has_unwritten_block(data, at, header.total_len)
                {
                    return Ok(Found::Torn(Invalid::BadBody));
                }
                return Err(damaged_record(rest, header));
            }
            Err(other) => {
                if newest {
                    return Ok(Found::Torn(other));
                }
                Err(other)
            }
        },
        // Only zeros where a record would start, after a complete
        // group: the end of what was written (direct writes pad the
        // last block with zeros).
        Err(Invalid::ShortHeader | Invalid::BadHeader)
            if newest && group_empty && rest.iter().all(|&b| b == 0) =>
        {
            return Ok(Found::Padding);
        }
        Err(Invalid::ShortHeader) if newest => return Ok(Found::Torn(Invalid::ShortHeader)),
        // Zeros from here to the end of the block: the end of what
        // was written, whatever follows — a multi-block direct write
        // interrupted by a crash can land a later block and not this
        // one, and nothing in it was acknowledged.
        Err(Invalid::BadHeader) if newest && zeros_to_block_end(data, at) => {
            return Ok(Found::Torn(Invalid::BadHeader));
        }
        Err(other) => Err(other),
    };
    decoded.map(Found::Record).map_err(|why| why.to_string())
}

/// Bytes a device writes whole (a sector): a write cut by a crash leaves
/// some of its sectors unwritten, which read as zeros.
const SECTOR_BYTES: usize = 512;

/// Whether the record of `len` bytes at `start` holds a sector-aligned
/// run of zeros after its header that reaches the end of its 4 KB block
/// (or the record's end): a block of the write that never landed, so the
/// record was cut by a crash rather than damaged whole.
fn has_unwritten_block(data: &[u8], start: usize, len: usize) -> bool {
    const BLOCK_BYTES: usize = 4096;
    let end = start + len;
    let mut at = (start + record::HEADER_BYTES).next_multiple_of(SECTOR_BYTES);
    while at < end {
        let block_end = (at + 1).next_multiple_of(BLOCK_BYTES).min(end);
        if data[at..block_end].iter().all(|&b| b == 0) {
            return true;
        }
        at += SECTOR_BYTES;
    }
    false
}

/// Why a complete record whose body fails its checksum is corruption,
/// naming its LSN and key (its header is intact).
fn damaged_record(bytes: &[u8], header: record::Header) -> String {
    let lsn = u64::from_le_bytes(bytes[16..24].try_into().expect("a whole header"));
    let key_end = (record::HEADER_BYTES + header.key_len).min(bytes.len());
    let key = &bytes[record::HEADER_BYTES..key_end];
    let shown = String::from_utf8_lossy(&key[..key.len().min(64)]);
    format!(
        "the record of LSN {lsn} (key '{shown}') is whole but fails its checksum: \
         damaged after it was written, not cut by a crash"
    )
}

/// Whether `data` holds only zero bytes from `at` to the next multiple of
/// the direct-write block size (or its end).
fn zeros_to_block_end(data: &[u8], at: usize) -> bool {
    const BLOCK_BYTES: usize = 4096;
    let end = ((at / BLOCK_BYTES) + 1) * BLOCK_BYTES;
    data[at..end.min(data.len())].iter().all(|&b| b == 0)
}

/// How [`load`] runs.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Cut a torn tail off the newest segment (the server does; a
    /// read-only check does not).
    pub truncate_torn_tail: bool,
    /// Slows loading down on purpose (Redis' `key-load-delay`, for testing
    /// what clients see while a server loads).
    pub delay_per_key: Duration,
    /// Give replayed values the location of their record (tiering on), so
    /// they can leave RAM without being written again.
    pub locate: bool,
    /// Give replayed big values (`tier::LOCATE_BIG_BYTES`) the location of
    /// their record (the log stays on), so checkpoints name them by it.
    pub locate_big: bool,
    /// (RAM in use, budget): while loading passes the budget, located
    /// values leave RAM.
    pub memory_limit: Option<(fn() -> u64, u64)>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            truncate_torn_tail: true,
            delay_per_key: Duration::ZERO,
            locate: false,
            locate_big: false,
            memory_limit: None,
        }
    }
}

/// Loads the checkpoint and replays the log into `keyspace` (whose seed
/// must be `plan.seed` when there is a checkpoint).
pub fn load(
    plan: &Plan,
    keyspace: &Keyspace,
    now_ms: u64,
    options: LoadOptions,
    progress: impl FnMut(Progress),
) -> Result<Loaded, RecoveryError> {
    check_head(plan)?;
    check_ranges(plan)?;
    let log_dir = log_dir(&plan.dir);
    keyspace.tier().set_log_dir(&log_dir);
    keyspace.tier().set_cache_dir(&tier::cache_dir(&plan.dir));
    let bytes_total = bytes_total(plan, &log_dir)?;
    let mut loader = Loader {
        plan,
        keyspace,
        now_ms,
        options,
        log_dir,
        progress,
        state: Progress {
            bytes_total,
            ..Progress::default()
        },
        last_report: Instant::now(),
        fruitless: false,
        loaded: Loaded::default(),
    };
    let covered = loader.load_checkpoints()?;
    let replayed_any = loader.replay_log(&covered)?;
    check_log_kept(plan, replayed_any, &covered)?;
    Ok(loader.finish())
}

/// The bytes [`load`] reads at most: the checkpoint files and the log
/// segments, for the progress lines.
fn bytes_total(plan: &Plan, log_dir: &Path) -> Result<u64, RecoveryError> {
    let mut total = 0;
    for path in &plan.checkpoints {
        total += std::fs::metadata(path)
            .map_err(|e| io_error(path, e))?
            .len();
    }
    for &seq in &plan.segments {
        let path = segment_path(log_dir, seq);
        total += std::fs::metadata(&path)
            .map_err(|e| io_error(&path, e))?
            .len();
    }
    Ok(total)
}

/// Refuses a checkpoint with range files missing when no group of the
/// log was replayed yet writes happened (some shard's copy covers LSNs
/// above 1): the log was cut after a full cycle, so every range file must
/// be there.
fn check_log_kept(plan: &Plan, replayed_any: bool, covered: &[u64]) -> Result<(), RecoveryError> {
    let ranges_missing =
        !plan.checkpoints.is_empty() && plan.checkpoints.len() < checkpoint::RANGE_COUNT;
    if ranges_missing && !replayed_any && covered.iter().any(|&lsn| lsn > 1) {
        return Err(RecoveryError::Missing {
            message: format!(
                "Checkpoint in {} has {} of {} range files and the log it needs was already \
                 compacted away; restore the missing files (strata-check lists them)",
                plan.dir.display(),
                plan.checkpoints.len(),
                checkpoint::RANGE_COUNT
            ),
        });
    }
    Ok(())
}

/// What the phases of [`load`] share: where the data goes, how loading
/// runs, and how far it is (for progress lines and the memory budget).
struct Loader<'a, P> {
    plan: &'a Plan,
    keyspace: &'a Keyspace,
    now_ms: u64,
    options: LoadOptions,
    log_dir: PathBuf,
    progress: P,
    state: Progress,
    last_report: Instant,
    /// A budget pass freed nothing (only values without a location were
    /// left in RAM): no more attempts; the server evicts them by writing
    /// them once it runs.
    fruitless: bool,
    loaded: Loaded,
}

/// How the log is replayed over the checkpoint, carried from segment to
/// segment.
struct Replay<'c> {
    /// Per shard, the LSN below which its checkpoint copy holds every
    /// record.
    covered: &'c [u64],
    /// The LSN the log must reach back to.
    replay_from: Option<u64>,
    /// A group was replayed, so the log's start was checked against
    /// `replay_from`.
    replayed_any: bool,
}

impl<P: FnMut(Progress)> Loader<'_, P> {
    /// Loads every checkpoint file; returns, per shard, the LSN its copy
    /// covers the log below (0 for shards of a range without a file).
    fn load_checkpoints(&mut self) -> Result<Vec<u64>, RecoveryError> {
        // Shards of a range without a file (a first cycle cut short) replay
        // the whole log, which was never cut: cutting waits for a full cycle.
        let mut covered = vec![0u64; SHARD_COUNT];
        let plan = self.plan;
        for path in &plan.checkpoints {
            let reader = CheckpointReader::open(path)?;
            let summary = reader.read_all(|shard, record| self.load_image(shard, record))?;
            self.state.bytes_done += summary.bytes;
            let first = summary.meta.first_shard as usize;
            covered[first..first + summary.covered.len()].copy_from_slice(&summary.covered);
            self.loaded.next_lsn = self.loaded.next_lsn.max(summary.next_lsn);
            self.loaded.checkpoint_keys += summary.keys;
        }
        Ok(covered)
    }

    /// Loads one record of a checkpoint file of shard `shard`: server
    /// state beside the keyspace, or a key, counted.
    fn load_image(&mut self, shard: usize, record: &Record) -> Result<(), String> {
        if record.kind == Kind::Meta {
            self.keyspace
                .lock_unlogged(0)
                .set_meta(record.key, record.payload);
            return Ok(());
        }
        restore_key(self.plan, self.keyspace, shard, record, self.now_ms)?;
        self.pause();
        self.state.keys_loaded += 1;
        if self.state.keys_loaded.is_multiple_of(1024) {
            self.enforce_budget();
        }
        if self.state.keys_loaded.is_multiple_of(4096) && self.report_due() {
            self.report();
        }
        Ok(())
    }

    /// Replays every segment of the log over the checkpoint copies
    /// `covered`; returns whether any group was replayed.
    fn replay_log(&mut self, covered: &[u64]) -> Result<bool, RecoveryError> {
        // Without a checkpoint the log must be whole, from LSN 1; with one, it
        // must reach back to the smallest covered LSN.
        let mut replay = Replay {
            covered,
            replay_from: Some(covered.iter().min().map_or(1, |&lsn| lsn.max(1))),
            replayed_any: false,
        };
        let mut expected_lsn = None;
        let plan = self.plan;
        let newest_seq = plan.segments.last().copied();
        for (position, &seq) in plan.segments.iter().enumerate() {
            let path = segment_path(&self.log_dir, seq);
            // A segment kept only for the cold values in it is not read.
            if let Some(from) = replay.replay_from
                && let Some(next_first) = kept_only(&self.log_dir, &plan.segments, position, from)?
            {
                self.skip_segment(seq, &path, next_first)?;
                continue;
            }
            let newest = Some(seq) == newest_seq;
            self.replay_segment(seq, &path, newest, &mut expected_lsn, &mut replay)?;
        }
        Ok(replay.replayed_any)
    }

    /// Accounts for segment `seq`, kept only for the cold values in it,
    /// without reading it: its LSNs end before `next_first`, the next
    /// segment's first.
    fn skip_segment(
        &mut self,
        seq: u64,
        path: &Path,
        next_first: u64,
    ) -> Result<(), RecoveryError> {
        let bytes = std::fs::metadata(path)
            .map_err(|e| io_error(path, e))?
            .len();
        self.state.bytes_done += bytes;
        let lsns = first_lsn(path)?
            .filter(|&first| first < next_first)
            .map(|first| (first, next_first - 1));
        self.loaded.segments.push(SegmentInfo { seq, lsns, bytes });
        Ok(())
    }

    /// Reads and replays segment `seq`, then cuts its torn tail or
    /// padding (only the `newest` can have either).
    fn replay_segment(
        &mut self,
        seq: u64,
        path: &Path,
        newest: bool,
        expected_lsn: &mut Option<u64>,
        replay: &mut Replay,
    ) -> Result<(), RecoveryError> {
        let data = std::fs::read(path).map_err(|e| io_error(path, e))?;
        let walked = walk(path, &data, newest, expected_lsn, |group| {
            self.replay_group(replay, seq, group)
        })?;
        self.state.bytes_done += data.len() as u64;
        self.state.records_replayed = self.loaded.records_replayed;
        if self.report_due() {
            self.report();
        }
        self.cut_tail(path, data.len() as u64, &walked)?;
        if let Some((_, last)) = walked.lsns {
            self.loaded.next_lsn = self.loaded.next_lsn.max(last + 1);
        }
        self.loaded.segments.push(SegmentInfo {
            seq,
            lsns: walked.lsns,
            bytes: walked.valid_len,
        });
        Ok(())
    }

    /// Applies one complete group of segment `seq` (the first one checked
    /// against where the log must start), locating values as asked.
    fn replay_group(
        &mut self,
        replay: &mut Replay,
        seq: u64,
        group: &[(usize, Record)],
    ) -> Result<(), String> {
        if let (Some(from), Some(first)) = (replay.replay_from, group.first())
            && !replay.replayed_any
            && first.1.lsn > from
        {
            return Err(format!(
                "the log starts at LSN {} but the checkpoint needs it from {from}",
                first.1.lsn
            ));
        }
        for (offset, record) in group {
            if apply(self.keyspace, replay.covered, record, self.now_ms)? {
                self.loaded.records_replayed += 1;
                if self.options.locates(record) {
                    let key = self.keyspace.key(record.key);
                    self.keyspace.lock_unlogged(key.shard()).locate(
                        record.db as usize,
                        key,
                        tier::loc(seq, *offset as u64),
                    );
                }
                if self.loaded.records_replayed.is_multiple_of(1024) {
                    self.enforce_budget();
                }
            }
            self.pause();
        }
        if self.loaded.records_replayed.is_multiple_of(1024) && self.report_due() {
            self.state.records_replayed = self.loaded.records_replayed;
            self.report();
        }
        replay.replayed_any = true;
        Ok(())
    }

    /// Cuts the segment at `path` (`len` bytes) after its last complete
    /// group when the walk found padding (silently: appending continues
    /// after the records) or a torn tail (logged), if the options allow.
    fn cut_tail(&mut self, path: &Path, len: u64, walked: &Walked) -> Result<(), RecoveryError> {
        if walked.padded && self.options.truncate_torn_tail {
            truncate_segment(path, walked.valid_len)?;
        }
        if let Some(why) = walked.torn
            && self.options.truncate_torn_tail
        {
            let dropped = len - walked.valid_len;
            truncate_segment(path, walked.valid_len)?;
            self.loaded.truncated.push(format!(
                "Log {} had a torn tail ({why}): truncated {dropped} bytes at offset {} \
                 (a write cut by a crash: under appendfsync always it was never \
                 acknowledged; under everysec up to a second of writes can be lost \
                 this way when the machine crashes)",
                path.display(),
                walked.valid_len
            ));
        }
        Ok(())
    }

    /// Sleeps `delay_per_key`, if any (Redis' `key-load-delay`).
    fn pause(&self) {
        if !self.options.delay_per_key.is_zero() {
            std::thread::sleep(self.options.delay_per_key);
        }
    }

    /// While RAM in use passes the budget, makes located values leave RAM.
    fn enforce_budget(&mut self) {
        if let Some((used, budget)) = self.options.memory_limit {
            let used = used();
            if used > budget && !self.fruitless {
                self.fruitless = self.keyspace.evict_loaded(used - budget, 16, self.now_ms) == 0;
            }
        }
    }

    /// Whether [`PROGRESS_INTERVAL`] has passed since the last report.
    fn report_due(&self) -> bool {
        self.last_report.elapsed() >= PROGRESS_INTERVAL
    }

    /// Hands the caller where loading is, and restarts the interval.
    fn report(&mut self) {
        (self.progress)(self.state);
        self.last_report = Instant::now();
    }

    /// Reports the final progress and returns what was loaded.
    fn finish(mut self) -> Loaded {
        self.loaded.next_lsn = self.loaded.next_lsn.max(1);
        self.loaded.next_segment = self.plan.segments.last().map_or(1, |seq| seq + 1);
        (self.progress)(self.state);
        self.loaded
    }
}

impl LoadOptions {
    /// Whether a replayed `record` gets the location of its record (its
    /// value can then leave RAM, or be named by it in checkpoints).
    fn locates(&self, record: &Record) -> bool {
        record.kind == Kind::Set
            && (self.locate || (self.locate_big && record.payload.len() >= tier::LOCATE_BIG_BYTES))
    }
}

/// Cuts the segment at `path` to `len` bytes, synced.
fn truncate_segment(path: &Path, len: u64) -> Result<(), RecoveryError> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len).and_then(|_| f.sync_all()))
        .map_err(|e| io_error(path, e))
}

/// Loads one key of a checkpoint file of shard `shard`: a cold key by the
/// location of its value, a located image with its location (kept only
/// while its segment exists), or a plain image.
fn restore_key(
    plan: &Plan,
    keyspace: &Keyspace,
    shard: usize,
    record: &Record,
    now_ms: u64,
) -> Result<(), String> {
    check_db(keyspace, record.db)?;
    let key = keyspace.key(record.key);
    if key.shard() != shard {
        return Err("key stored under the wrong shard".into());
    }
    if record.kind == Kind::CheckpointCold {
        restore_cold(plan, keyspace, shard, key, record, now_ms)?;
    } else if record.flags & FLAG_LOCATED != 0 && record.payload.len() >= 8 {
        let (value, loc) = record.payload.split_at(record.payload.len() - 8);
        let loc = u64::from_le_bytes(loc.try_into().expect("8 bytes"));
        let image = Record {
            payload: value,
            ..*record
        };
        let mut locked = keyspace.lock_unlogged(shard);
        apply_set(&mut locked, key, &image, now_ms)?;
        // Without its segment the value simply stays in RAM only.
        if plan.has_segment_of(loc) {
            locked.locate(record.db as usize, key, loc);
        }
    } else {
        apply_set(&mut keyspace.lock_unlogged(shard), key, record, now_ms)?;
    }
    Ok(())
}

/// Loads a key whose value is on disk only (`CheckpointCold`): its entry
/// names the value's location, whose segment must exist; an expired key
/// is skipped.
fn restore_cold(
    plan: &Plan,
    keyspace: &Keyspace,
    shard: usize,
    key: KeyRef,
    record: &Record,
    now_ms: u64,
) -> Result<(), String> {
    let loc = <[u8; 8]>::try_from(record.payload)
        .map(u64::from_le_bytes)
        .map_err(|_| "cold record without a location".to_string())?;
    if !plan.has_segment_of(loc) {
        return Err(format!(
            "the value of a key is in log segment {}, which is missing",
            tier::loc_segment(loc)
        ));
    }
    let deadline = record.aux;
    let value_type = ValueType::from_record_code(record.value_type).ok_or_else(|| {
        format!(
            "value type {} is not supported by this build",
            record.value_type
        )
    })?;
    if deadline == 0 || deadline > now_ms {
        keyspace.lock_unlogged(shard).insert_cold(
            record.db as usize,
            key,
            deadline,
            (value_type, record.flags & FLAG_INT != 0),
            loc,
            now_ms,
        );
    }
    Ok(())
}

/// Whether the segment at `position` of `segments` is kept only for the
/// cold values in it: the next one starts at or below `replay_from`, so
/// none of its records is replayed (recovery does not read it; strata-check
/// reads it for the values keys point at). The next segment's first LSN
/// when it is.
fn kept_only(
    log_dir: &Path,
    segments: &[u64],
    position: usize,
    replay_from: u64,
) -> Result<Option<u64>, RecoveryError> {
    let Some(&next) = segments.get(position + 1) else {
        return Ok(None);
    };
    Ok(first_lsn(&segment_path(log_dir, next))?.filter(|&first| first <= replay_from))
}

/// The LSN of the first record of the segment at `path`, if it has one
/// with an intact header.
fn first_lsn(path: &Path) -> Result<Option<u64>, RecoveryError> {
    let mut header = [0u8; record::HEADER_BYTES];
    let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    match std::os::unix::fs::FileExt::read_exact_at(&file, &mut header, 0) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io_error(path, e)),
    }
    if record::parse_header(&header).is_err() {
        return Ok(None);
    }
    Ok(Some(u64::from_le_bytes(
        header[16..24].try_into().expect("8 bytes"),
    )))
}

/// An LSN above every LSN the files of `plan` use, without reading them:
/// the checkpoints' end markers (their last record: `next LSN` in aux) and
/// the newest segment's first LSN plus its size (every record takes more
/// than one byte). A server that does not load the directory's data
/// stamps what it writes from here, so its checkpoints still sort after
/// anything already on disk.
pub(crate) fn lsn_bound(plan: &Plan) -> Result<u64, RecoveryError> {
    const END_MARKER_BYTES: usize = record::HEADER_BYTES + 8;
    let mut bound = 1;
    for path in &plan.checkpoints {
        let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
        let len = file.metadata().map_err(|e| io_error(path, e))?.len();
        let mut tail = [0u8; END_MARKER_BYTES];
        if len < END_MARKER_BYTES as u64 {
            continue;
        }
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut tail, len - END_MARKER_BYTES as u64)
            .map_err(|e| io_error(path, e))?;
        if let Ok(record) = record::decode(&tail)
            && record.kind == Kind::CheckpointEnd
        {
            bound = bound.max(record.aux);
        }
    }
    if let Some(&seq) = plan.segments.last() {
        let path = segment_path(&log_dir(&plan.dir), seq);
        let size = std::fs::metadata(&path)
            .map_err(|e| io_error(&path, e))?
            .len();
        let first = first_lsn(&path)?.unwrap_or(0);
        bound = bound.max(first + size + 1);
    }
    Ok(bound)
}

/// After loading `plan`: deletes the cache store's segments that no loaded
/// entry is located in (the cache store is never replayed, so nothing else
/// can need them: the loaded checkpoint is the newest) and returns the
/// others, for the cache store to start with. With `keep_all` (the
/// checkpoint on disk was not loaded, so any segment may be named by it)
/// nothing is deleted.
pub(crate) fn prune_cache_store(
    plan: &Plan,
    keyspace: &Keyspace,
    keep_all: bool,
) -> Result<Vec<SegmentInfo>, RecoveryError> {
    let dir = tier::cache_dir(&plan.dir);
    let located = keyspace.located_segments();
    let mut kept = Vec::new();
    for &seq in &plan.cache_segments {
        let path = segment_path(&dir, seq);
        if keep_all || located.contains_key(&seq) {
            let bytes = std::fs::metadata(&path)
                .map_err(|e| io_error(&path, e))?
                .len();
            // No LSNs: the store's compaction treats it as closed.
            kept.push(SegmentInfo {
                seq,
                lsns: None,
                bytes,
            });
        } else {
            std::fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
        }
    }
    if kept.len() < plan.cache_segments.len() {
        crate::storage::log::sync_dir(&dir).map_err(|e| io_error(&dir, e))?;
    }
    Ok(kept)
}

fn check_db(keyspace: &Keyspace, db: u16) -> Result<(), String> {
    if db as usize >= keyspace.db_count() {
        return Err(format!(
            "data for database {db}, but 'databases' is {}",
            keyspace.db_count()
        ));
    }
    Ok(())
}

fn apply_set(shard: &mut Shard, hash: KeyRef, record: &Record, now_ms: u64) -> Result<(), String> {
    let db = record.db as usize;
    let deadline = (record.aux != 0).then_some(record.aux);
    if deadline.is_some_and(|at| at <= now_ms) {
        shard.remove(db, hash, now_ms);
        return Ok(());
    }
    let value = match ValueType::from_record_code(record.value_type) {
        Some(
            collection @ (ValueType::Hash
            | ValueType::List
            | ValueType::Set
            | ValueType::ZSet
            | ValueType::Stream),
        ) => collection
            .checked_image(record.payload)
            .expect("a collection type")?,
        Some(ValueType::String) if record.flags & FLAG_INT != 0 => {
            match crate::types::value::parse_canonical_i64(record.payload) {
                Some(n) => Value::Int(n),
                None => Value::Str(record.payload.into()),
            }
        }
        Some(ValueType::String) => Value::Str(record.payload.into()),
        None => {
            return Err(format!(
                "value type {} is not supported by this build",
                record.value_type
            ));
        }
    };
    shard.set(db, hash, value, deadline, false, now_ms);
    Ok(())
}

/// Applies one replayed record, honouring each shard's checkpoint LSN.
/// Returns whether it changed anything (false: the checkpoint covers it).
fn apply(
    keyspace: &Keyspace,
    covered: &[u64],
    record: &Record,
    now_ms: u64,
) -> Result<bool, String> {
    check_db(keyspace, record.db)?;
    let db = record.db as usize;
    match record.kind {
        Kind::Set | Kind::Del | Kind::Expire => {
            let key = keyspace.key(record.key);
            if record.lsn < covered[key.shard()] {
                return Ok(false);
            }
            let mut shard = keyspace.lock_unlogged(key.shard());
            match record.kind {
                Kind::Set => apply_set(&mut shard, key, record, now_ms)?,
                Kind::Del => {
                    shard.remove(db, key, now_ms);
                }
                _ => {
                    let deadline = (record.aux != 0).then_some(record.aux);
                    shard.set_expire(db, key, deadline, now_ms);
                }
            }
        }
        Kind::SetRange => {
            let key = keyspace.key(record.key);
            if record.lsn < covered[key.shard()] {
                return Ok(false);
            }
            keyspace.lock_unlogged(key.shard()).replay_range(
                db,
                key,
                record.aux as usize,
                record.payload,
                now_ms,
            )?;
        }
        Kind::HashPut
        | Kind::HashDel
        | Kind::ListOp
        | Kind::SetOp
        | Kind::ZSetOp
        | Kind::StreamOp => {
            let key = keyspace.key(record.key);
            if record.lsn < covered[key.shard()] {
                return Ok(false);
            }
            let mut shard = keyspace.lock_unlogged(key.shard());
            let (kind, payload) = (record.kind, record.payload);
            match kind {
                Kind::HashPut | Kind::HashDel => {
                    shard.replay::<Hash>(db, key, kind, payload, now_ms)?
                }
                Kind::ListOp => shard.replay::<List>(db, key, kind, payload, now_ms)?,
                Kind::SetOp => shard.replay::<Set>(db, key, kind, payload, now_ms)?,
                Kind::StreamOp => shard.replay::<Stream>(db, key, kind, payload, now_ms)?,
                _ => shard.replay::<ZSet>(db, key, kind, payload, now_ms)?,
            }
        }
        Kind::FlushDb | Kind::FlushAll | Kind::SwapDb => {
            if record.kind == Kind::SwapDb {
                check_db(keyspace, record.aux.min(u16::MAX as u64) as u16)?;
            }
            for (index, &from) in covered.iter().enumerate() {
                if record.lsn >= from {
                    keyspace.lock_unlogged(index).apply_db_change(
                        record.kind,
                        db,
                        record.aux as usize,
                    );
                }
            }
        }
        Kind::Meta => {
            if record.lsn < covered[0] {
                return Ok(false);
            }
            keyspace
                .lock_unlogged(0)
                .set_meta(record.key, record.payload);
        }
        other => return Err(format!("{other:?} record inside the log")),
    }
    Ok(true)
}

/// Keys and bytes (keys plus values) of the data in `dir`, found by a
/// read-only dry run of recovery into a scratch keyspace of `db_count`
/// databases (see [`Verified::db_count`]): every record is applied as a
/// restart would apply it, and nothing on disk changes. Needs as much
/// memory as the data.
/// What a dry-run recovery of a directory holds.
#[derive(Debug, Default)]
pub(crate) struct LiveData {
    pub keys: u64,
    /// Bytes of keys and values.
    pub bytes: u64,
    /// The live keys whose value is at one of the locations asked about:
    /// (db, key, location).
    pub located_at: Vec<(usize, Vec<u8>, u64)>,
}

/// Recovers `dir` into a scratch keyspace (read-only): its live data, and
/// which live keys have their value at one of `locations` (damaged
/// records [`verify`] found).
pub(crate) fn live_data(
    dir: &Path,
    db_count: usize,
    now_ms: u64,
    locations: &[u64],
) -> Result<LiveData, RecoveryError> {
    let plan = plan(dir)?;
    let keyspace = match plan.seed {
        Some(seed) => Keyspace::with_seed(db_count, seed, plan.sharding),
        None => Keyspace::new(db_count),
    };
    let options = LoadOptions {
        truncate_torn_tail: false,
        ..LoadOptions::default()
    };
    load(&plan, &keyspace, now_ms, options, |_| {})?;
    let (keys, bytes) = keyspace.data_size();
    Ok(LiveData {
        keys,
        bytes,
        located_at: keyspace.keys_located_at(locations),
    })
}

/// What `strata-check` reports.
#[derive(Debug, Default)]
pub struct Verified {
    /// The checkpoint files recovery loads (the newest of each range).
    pub checkpoints: Vec<(PathBuf, checkpoint::CheckpointSummary)>,
    /// Older checkpoint files, which recovery ignores (checked anyway).
    pub ignored_checkpoints: Vec<PathBuf>,
    pub segments: Vec<(PathBuf, SegmentInfo)>,
    pub records: u64,
    /// Databases the data needs: one past the highest index a record or a
    /// checkpoint names, at least 16.
    pub db_count: usize,
    /// Torn tail in the newest segment: (file, valid length, dropped bytes,
    /// why).
    pub torn: Option<(PathBuf, u64, u64, Invalid)>,
    /// Damaged records in segments kept only for their cold values, which
    /// recovery does not read: the server starts, and the keys whose
    /// value is there answer an error when read ([`live_data`] names them).
    pub unreadable: Vec<Unreadable>,
}

/// A damaged record in a segment kept for its cold values
/// ([`live_data`] tells which keys point at it).
#[derive(Debug)]
pub struct Unreadable {
    pub segment: PathBuf,
    pub offset: u64,
    /// Its location (`tier::loc`), as keys point at it.
    pub loc: u64,
    pub why: String,
}

/// Checks the files recovery would read, as it would read them, without
/// changing anything: what stops start-up is an error here too, and
/// damage start-up does not see (values of segments kept only for cold
/// keys) is listed with the keys it affects ([`Verified::unreadable`]).
pub fn verify(dir: &Path) -> Result<Verified, RecoveryError> {
    let plan = plan(dir)?;
    check_head(&plan)?;
    check_ranges(&plan)?;
    let mut verified = Verified {
        db_count: 16,
        ..Verified::default()
    };
    for (_, _, path) in checkpoint::list(dir).map_err(|e| io_error(dir, e))? {
        if !plan.checkpoints.contains(&path) {
            CheckpointReader::open(&path)?.read_all(|_, _| Ok(()))?;
            verified.ignored_checkpoints.push(path);
        }
    }
    let mut covered = vec![0u64; SHARD_COUNT];
    for path in &plan.checkpoints {
        let summary = CheckpointReader::open(path)?.read_all(|_, _| Ok(()))?;
        verified.db_count = verified.db_count.max(summary.meta.db_count as usize);
        let first = summary.meta.first_shard as usize;
        covered[first..first + summary.covered.len()].copy_from_slice(&summary.covered);
        verified.checkpoints.push((path.clone(), summary));
    }
    let replay_from = covered.iter().min().map_or(1, |&lsn| lsn.max(1));
    let log_dir = log_dir(dir);
    let mut expected_lsn = None;
    let newest_seq = plan.segments.last().copied();
    let mut previous = None;
    for (position, &seq) in plan.segments.iter().enumerate() {
        let path = segment_path(&log_dir, seq);
        let data = std::fs::read(&path).map_err(|e| io_error(&path, e))?;
        if kept_only(&log_dir, &plan.segments, position, replay_from)?.is_some() {
            for (offset, why) in scan_damage(&data) {
                verified.unreadable.push(Unreadable {
                    segment: path.clone(),
                    loc: tier::loc(seq, offset),
                    offset,
                    why,
                });
            }
            verified.segments.push((
                path,
                SegmentInfo {
                    seq,
                    lsns: None,
                    bytes: data.len() as u64,
                },
            ));
            expected_lsn = None;
            previous = Some(seq);
            continue;
        }
        let newest = Some(seq) == newest_seq;
        if previous.is_some_and(|p: u64| p + 1 != seq) {
            // Segments in between were compacted away.
            expected_lsn = None;
        }
        previous = Some(seq);
        let mut db_count = verified.db_count;
        let walked = walk(&path, &data, newest, &mut expected_lsn, |group| {
            for (_, record) in group {
                let other = if record.kind == Kind::SwapDb {
                    record.aux
                } else {
                    0
                };
                let highest = (record.db as u64).max(other).min(u16::MAX as u64) as usize;
                db_count = db_count.max(highest + 1);
            }
            Ok(())
        })?;
        verified.db_count = db_count;
        verified.records += walked.records;
        if let Some(why) = walked.torn {
            let dropped = data.len() as u64 - walked.valid_len;
            verified.torn = Some((path.clone(), walked.valid_len, dropped, why));
        }
        verified.segments.push((
            path,
            SegmentInfo {
                seq,
                lsns: walked.lsns,
                bytes: data.len() as u64,
            },
        ));
    }
    Ok(verified)
}

/// The damaged records of a segment read record by record, going on past
/// each one whose header is intact (its length says where the next
/// starts): (offset, why). A damaged header ends the scan (what follows
/// cannot be told apart), reported once, unless only zeros follow (the
/// padding of direct writes).
fn scan_damage(data: &[u8]) -> Vec<(u64, String)> {
    let mut damage = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let rest = &data[at..];
        match record::parse_header(rest) {
            Ok(header) => {
                if let Err(why) = record::decode_with_header(rest, header) {
                    damage.push((at as u64, why.to_string()));
                }
                at += header.total_len;
            }
            Err(_) if rest.iter().all(|&b| b == 0) => break,
            Err(why) => {
                damage.push((
                    at as u64,
                    format!("{why}; the rest of the file is unreadable"),
                ));
                break;
            }
        }
    }
    damage
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
