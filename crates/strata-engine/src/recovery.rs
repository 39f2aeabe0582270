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
//!    header, or the last record's body fails its CRC — is a *torn tail*:
//!    the segment is truncated to the end of the last complete group, and
//!    what was dropped is logged. Only zero bytes where the next record
//!    would start, after a complete group, are the padding of direct
//!    writes: the segment is cut there without a message. Any other damage is *corruption*: start-up
//!    stops with the file and offset, and `strata-check` can inspect it.
//!
//! [`verify`] runs the same walk without a keyspace, for `strata-check`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::checkpoint::{self, CheckpointReader};
use crate::keyspace::{KeyRef, Keyspace, SHARD_COUNT, Shard, Sharding};
use crate::log::{SegmentInfo, segment_path, segment_seq};
use crate::record::{self, FLAG_INT, FLAG_LOCATED, Invalid, Kind, Record};
use crate::tier;
use crate::value::Value;

/// How often [`load`] reports progress.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

pub use crate::log::log_dir;

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

/// Why recovery stopped.
#[derive(Debug)]
pub struct RecoveryError(pub String);

impl std::fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<checkpoint::CheckpointError> for RecoveryError {
    fn from(e: checkpoint::CheckpointError) -> Self {
        RecoveryError(e.to_string())
    }
}

fn io_error(path: &Path, e: std::io::Error) -> RecoveryError {
    RecoveryError(format!("{}: {e}", path.display()))
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
            return Err(RecoveryError(format!(
                "Checkpoint {} belongs to another data directory (different hash seed)",
                path.display()
            )));
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
    let corrupt = |offset: usize, why: &str| {
        RecoveryError(format!(
            "Corrupt log {} at offset {offset}: {why}. Start-up stopped; inspect it with \
             `strata-check {}` (nothing was changed).",
            path.display(),
            path.parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("."))
                .display()
        ))
    };
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
        let decoded = match record::parse_header(rest) {
            Ok(header) => match record::decode_with_header(rest, header) {
                Ok(record) => Ok(record),
                Err(Invalid::BadBody) => {
                    let after = &rest[header.total_len..];
                    if newest && after.iter().all(|&b| b == 0) {
                        break Some(Invalid::BadBody);
                    }
                    Err(Invalid::BadBody)
                }
                Err(other) => {
                    if newest {
                        break Some(other);
                    }
                    Err(other)
                }
            },
            // Only zeros where a record would start, after a complete
            // group: the end of what was written (direct writes pad the
            // last block with zeros).
            Err(Invalid::ShortHeader | Invalid::BadHeader)
                if newest && group.is_empty() && rest.iter().all(|&b| b == 0) =>
            {
                padded = true;
                break None;
            }
            Err(Invalid::ShortHeader) if newest => break Some(Invalid::ShortHeader),
            // Zeros from here to the end of the block: the end of what
            // was written, whatever follows — a multi-block direct write
            // interrupted by a crash can land a later block and not this
            // one, and nothing in it was acknowledged.
            Err(Invalid::BadHeader) if newest && zeros_to_block_end(data, at) => {
                break Some(Invalid::BadHeader);
            }
            Err(other) => Err(other),
        };
        let record = decoded.map_err(|why| corrupt(at, &why.to_string()))?;
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
    mut progress: impl FnMut(Progress),
) -> Result<Loaded, RecoveryError> {
    let pause = || {
        if !options.delay_per_key.is_zero() {
            std::thread::sleep(options.delay_per_key);
        }
    };
    let log_dir = log_dir(&plan.dir);
    keyspace.tier().set_log_dir(&log_dir);
    keyspace.tier().set_cache_dir(&tier::cache_dir(&plan.dir));
    let locate = options.locate;
    // A pass that frees nothing (only values without a location left in
    // RAM) ends the attempts; the server evicts them by writing them once
    // it runs.
    let fruitless = std::cell::Cell::new(false);
    let enforce_budget = || {
        if let Some((used, budget)) = options.memory_limit {
            let used = used();
            if used > budget && !fruitless.get() {
                fruitless.set(keyspace.evict_loaded(used - budget, 16, now_ms) == 0);
            }
        }
    };
    let mut state = Progress::default();
    for path in &plan.checkpoints {
        state.bytes_total += std::fs::metadata(path)
            .map_err(|e| io_error(path, e))?
            .len();
    }
    for &seq in &plan.segments {
        let path = segment_path(&log_dir, seq);
        state.bytes_total += std::fs::metadata(&path)
            .map_err(|e| io_error(&path, e))?
            .len();
    }
    let mut last_report = Instant::now();
    let mut loaded = Loaded::default();
    // Shards of a range without a file (a first cycle cut short) replay
    // the whole log, which was never cut: cutting waits for a full cycle.
    let mut covered = vec![0u64; SHARD_COUNT];
    for path in &plan.checkpoints {
        let reader = CheckpointReader::open(path)?;
        let summary = reader.read_all(|shard, record| {
            check_db(keyspace, record.db)?;
            let key = keyspace.key(record.key);
            if key.shard() != shard {
                return Err("key stored under the wrong shard".into());
            }
            if record.kind == Kind::CheckpointCold {
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
                if deadline == 0 || deadline > now_ms {
                    keyspace.lock_unlogged(shard).insert_cold(
                        record.db as usize,
                        key,
                        deadline,
                        (
                            record.flags & FLAG_INT != 0,
                            record.value_type == record::VALUE_HASH,
                        ),
                        loc,
                        now_ms,
                    );
                }
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
            pause();
            state.keys_loaded += 1;
            if state.keys_loaded.is_multiple_of(1024) {
                enforce_budget();
            }
            if state.keys_loaded.is_multiple_of(4096) && last_report.elapsed() >= PROGRESS_INTERVAL
            {
                progress(state);
                last_report = Instant::now();
            }
            Ok(())
        })?;
        state.bytes_done += summary.bytes;
        let first = summary.meta.first_shard as usize;
        covered[first..first + summary.covered.len()].copy_from_slice(&summary.covered);
        loaded.next_lsn = loaded.next_lsn.max(summary.next_lsn);
        loaded.checkpoint_keys += summary.keys;
    }
    // Without a checkpoint the log must be whole, from LSN 1; with one, it
    // must reach back to the smallest covered LSN.
    let replay_from = Some(covered.iter().min().map_or(1, |&lsn| lsn.max(1)));
    let mut expected_lsn = None;
    let mut checked_start = false;
    let newest_seq = plan.segments.last().copied();
    for (position, &seq) in plan.segments.iter().enumerate() {
        let path = segment_path(&log_dir, seq);
        // A segment kept only for the cold values in it (the next one
        // starts at or below the replay point) is not read.
        if let (Some(from), Some(&next)) = (replay_from, plan.segments.get(position + 1))
            && let Some(next_first) = first_lsn(&segment_path(&log_dir, next))?
            && next_first <= from
        {
            let bytes = std::fs::metadata(&path)
                .map_err(|e| io_error(&path, e))?
                .len();
            state.bytes_done += bytes;
            let lsns = first_lsn(&path)?
                .filter(|&first| first < next_first)
                .map(|first| (first, next_first - 1));
            loaded.segments.push(SegmentInfo { seq, lsns, bytes });
            continue;
        }
        let data = std::fs::read(&path).map_err(|e| io_error(&path, e))?;
        let newest = Some(seq) == newest_seq;
        let walked = walk(&path, &data, newest, &mut expected_lsn, |group| {
            if let (Some(from), Some(first)) = (replay_from, group.first())
                && !checked_start
                && first.1.lsn > from
            {
                return Err(format!(
                    "the log starts at LSN {} but the checkpoint needs it from {from}",
                    first.1.lsn
                ));
            }
            for (offset, record) in group {
                if apply(keyspace, &covered, record, now_ms)? {
                    loaded.records_replayed += 1;
                    if locate && record.kind == Kind::Set {
                        let key = keyspace.key(record.key);
                        keyspace.lock_unlogged(key.shard()).locate(
                            record.db as usize,
                            key,
                            tier::loc(seq, *offset as u64),
                        );
                    }
                    if loaded.records_replayed.is_multiple_of(1024) {
                        enforce_budget();
                    }
                }
                pause();
            }
            if loaded.records_replayed.is_multiple_of(1024)
                && last_report.elapsed() >= PROGRESS_INTERVAL
            {
                state.records_replayed = loaded.records_replayed;
                progress(state);
                last_report = Instant::now();
            }
            checked_start = true;
            Ok(())
        })?;
        state.bytes_done += data.len() as u64;
        state.records_replayed = loaded.records_replayed;
        if last_report.elapsed() >= PROGRESS_INTERVAL {
            progress(state);
            last_report = Instant::now();
        }
        if walked.padded && options.truncate_torn_tail {
            // Cut silently: appending continues after the records.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(walked.valid_len).and_then(|_| f.sync_all()))
                .map_err(|e| io_error(&path, e))?;
        }
        if let Some(why) = walked.torn
            && options.truncate_torn_tail
        {
            let dropped = data.len() as u64 - walked.valid_len;
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(walked.valid_len).and_then(|_| f.sync_all()))
                .map_err(|e| io_error(&path, e))?;
            loaded.truncated.push(format!(
                "Log {} had a torn tail ({why}): truncated {dropped} bytes at offset {} \
                 (an incomplete write interrupted by a crash; it was never acknowledged \
                 under appendfsync always)",
                path.display(),
                walked.valid_len
            ));
        }
        if let Some((_, last)) = walked.lsns {
            loaded.next_lsn = loaded.next_lsn.max(last + 1);
        }
        loaded.segments.push(SegmentInfo {
            seq,
            lsns: walked.lsns,
            bytes: walked.valid_len,
        });
    }
    let ranges_missing =
        !plan.checkpoints.is_empty() && plan.checkpoints.len() < checkpoint::RANGE_COUNT;
    if ranges_missing && !checked_start && covered.iter().any(|&lsn| lsn > 1) {
        // Writes happened (LSNs advanced) yet no log is left: it was cut
        // after a full cycle, so every range file must be there.
        return Err(RecoveryError(format!(
            "Checkpoint in {} has {} of {} range files and the log it needs was already \
             compacted away; restore the missing files (strata-check lists them)",
            plan.dir.display(),
            plan.checkpoints.len(),
            checkpoint::RANGE_COUNT
        )));
    }
    loaded.next_lsn = loaded.next_lsn.max(1);
    loaded.next_segment = newest_seq.map_or(1, |seq| seq + 1);
    progress(state);
    Ok(loaded)
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
pub fn lsn_bound(plan: &Plan) -> Result<u64, RecoveryError> {
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
pub fn prune_cache_store(
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
        crate::log::sync_dir(&dir).map_err(|e| io_error(&dir, e))?;
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
    let value = if record.value_type == record::VALUE_HASH {
        crate::hash::check_image(record.payload)
            .map_err(|_| "a hash image that does not decode".to_string())?;
        Value::Hash(record.payload.into())
    } else if record.value_type != record::VALUE_STRING {
        return Err(format!(
            "value type {} is not supported by this build",
            record.value_type
        ));
    } else if record.flags & FLAG_INT != 0 {
        match crate::value::parse_canonical_i64(record.payload) {
            Some(n) => Value::Int(n),
            None => Value::Str(record.payload.into()),
        }
    } else {
        Value::Str(record.payload.into())
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
        Kind::HashPut | Kind::HashDel => {
            let key = keyspace.key(record.key);
            if record.lsn < covered[key.shard()] {
                return Ok(false);
            }
            keyspace.lock_unlogged(key.shard()).replay_fields(
                db,
                key,
                record.kind == Kind::HashPut,
                record.payload,
                now_ms,
            )?;
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
        other => return Err(format!("{other:?} record inside the log")),
    }
    Ok(true)
}

/// Keys and bytes (keys plus values) of the data in `dir`, found by a
/// read-only dry run of recovery into a scratch keyspace of `db_count`
/// databases (see [`Verified::db_count`]): every record is applied as a
/// restart would apply it, and nothing on disk changes. Needs as much
/// memory as the data.
pub fn live_data(dir: &Path, db_count: usize, now_ms: u64) -> Result<(u64, u64), RecoveryError> {
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
    Ok(keyspace.data_size())
}

/// What `strata-check` reports.
#[derive(Debug, Default)]
pub struct Verified {
    pub checkpoints: Vec<(PathBuf, checkpoint::CheckpointSummary)>,
    pub segments: Vec<(PathBuf, SegmentInfo)>,
    pub records: u64,
    /// Databases the data needs: one past the highest index a record or a
    /// checkpoint names, at least 16.
    pub db_count: usize,
    /// Torn tail in the newest segment: (file, valid length, dropped bytes,
    /// why).
    pub torn: Option<(PathBuf, u64, u64, Invalid)>,
}

/// Checks every checkpoint and every segment record of `dir` without
/// changing anything.
pub fn verify(dir: &Path) -> Result<Verified, RecoveryError> {
    let plan = plan(dir)?;
    let mut verified = Verified {
        db_count: 16,
        ..Verified::default()
    };
    for (_, _, path) in checkpoint::list(dir).map_err(|e| io_error(dir, e))? {
        let summary = CheckpointReader::open(&path)?.read_all(|_, _| Ok(()))?;
        verified.db_count = verified.db_count.max(summary.meta.db_count as usize);
        verified.checkpoints.push((path, summary));
    }
    let log_dir = log_dir(dir);
    let mut expected_lsn = None;
    let newest_seq = plan.segments.last().copied();
    let mut previous = None;
    for &seq in &plan.segments {
        let path = segment_path(&log_dir, seq);
        let data = std::fs::read(&path).map_err(|e| io_error(&path, e))?;
        let newest = Some(seq) == newest_seq;
        if previous.is_some_and(|p: u64| p + 1 != seq) {
            // Segments in between were compacted away; one kept for its
            // cold values is followed by a gap in LSNs.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint;
    use crate::log::{FsyncPolicy, Log, LogStart};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    const NOW_MS: u64 = 1_000_000;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "strata-recovery-{name}-{}-{}",
            std::process::id(),
            crate::keyspace::random_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// (db, key) → (value, deadline).
    type Contents = BTreeMap<(usize, Vec<u8>), (Vec<u8>, Option<u64>)>;

    /// Every key of a keyspace with its value and deadline.
    fn dump(ks: &Keyspace) -> Contents {
        let mut out = BTreeMap::new();
        for db in 0..ks.db_count() {
            for key in ks.keys(db, b"*", NOW_MS) {
                let k = ks.key(&key);
                let mut shard = ks.lock(k);
                let entry = shard.peek(db, k, NOW_MS).unwrap();
                let value = entry.value().as_bytes().to_vec();
                out.insert((db, key.clone()), (value, entry.expire_at_ms()));
            }
        }
        out
    }

    fn start_log(dir: &Path, loaded: Loaded, segment_bytes: u64) -> Arc<Log> {
        Log::start(
            &log_dir(dir),
            segment_bytes,
            FsyncPolicy::No,
            LogStart {
                next_lsn: loaded.next_lsn,
                next_segment: loaded.next_segment,
                segments: loaded.segments,
            },
            Box::new(|_, _| {}),
        )
        .unwrap()
    }

    /// A keyspace recovered from `dir`, with its log attached.
    fn open(dir: &Path, segment_bytes: u64) -> Result<Keyspace, RecoveryError> {
        open_reporting(dir, segment_bytes).map(|(ks, _)| ks)
    }

    /// As [`open`], with the lines describing torn tails cut off.
    fn open_reporting(
        dir: &Path,
        segment_bytes: u64,
    ) -> Result<(Keyspace, Vec<String>), RecoveryError> {
        let plan = plan(dir)?;
        let ks = match plan.seed {
            Some(seed) => Keyspace::with_seed(4, seed, plan.sharding),
            None => Keyspace::new(4),
        };
        let loaded = load(&plan, &ks, NOW_MS, LoadOptions::default(), |_| {})?;
        let truncated = loaded.truncated.clone();
        ks.attach_log(start_log(dir, loaded, segment_bytes));
        Ok((ks, truncated))
    }

    fn close(ks: &Keyspace) {
        ks.log().unwrap().shutdown();
    }

    fn set(ks: &Keyspace, db: usize, key: &[u8], value: &[u8], deadline: Option<u64>) {
        let k = ks.key(key);
        ks.lock(k)
            .set(db, k, Value::from_bytes(value), deadline, false, NOW_MS);
    }

    /// A mix of every kind of change, including multi-key groups.
    fn workload(ks: &Keyspace, round: usize) {
        for i in 0..50 {
            let key = format!("k{i}");
            set(
                ks,
                i % 3,
                key.as_bytes(),
                format!("v{round}-{i}").as_bytes(),
                None,
            );
        }
        set(ks, 0, b"ttl", b"t", Some(NOW_MS + 60_000));
        set(ks, 0, b"int", b"12345", None);
        {
            let k = ks.key(b"k1");
            let mut shard = ks.lock(k);
            if let Some(entry) = shard.get(1, k, NOW_MS).unwrap() {
                let end = entry.value().len();
                entry.write_at(1, end, b"+appended");
            }
        }
        {
            // Changes of part of a value (SETRANGE records): past the end
            // of a value, and (below) on a key with a deadline.
            let k = ks.key(b"k4");
            let mut shard = ks.lock(k);
            if let Some(entry) = shard.get(1, k, NOW_MS).unwrap() {
                let end = entry.value().len();
                entry.write_at(1, end + 3, b"@");
            }
        }
        let k = ks.key(b"ttl");
        if let Some(entry) = ks.lock(k).get(0, k, NOW_MS).unwrap() {
            entry.write_at(0, 0, b"T");
        }
        {
            let (a, b) = (ks.key(b"k3"), ks.key(b"moved"));
            let mut shards = ks.lock_many([a, b]);
            if let Some(entry) = shards.shard(a.shard()).remove(0, a, NOW_MS) {
                let value = entry.value().as_bytes().to_vec();
                shards
                    .shard(b.shard())
                    .set(2, b, Value::owned(value), None, false, NOW_MS);
            }
        }
        let k = ks.key(b"k4");
        ks.lock(k).set_expire(1, k, Some(NOW_MS + 5_000), NOW_MS);
        let k = ks.key(b"k5");
        ks.lock(k).remove(2, k, NOW_MS);
        if round % 2 == 1 {
            ks.swap_db(0, 3);
        }
        if round == 2 {
            drop(ks.flush_db(1));
        }
    }

    #[test]
    fn replay_rebuilds_every_change() {
        let dir = temp_dir("replay");
        let ks = open(&dir, 4096).unwrap();
        for round in 0..4 {
            workload(&ks, round);
        }
        let expected = dump(&ks);
        assert!(expected.len() > 40, "{}", expected.len());
        close(&ks);
        let segments = plan(&dir).unwrap().segments;
        assert!(segments.len() >= 3, "small segments roll: {segments:?}");
        let recovered = open(&dir, 4096).unwrap();
        assert_eq!(dump(&recovered), expected);
        close(&recovered);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn checkpoint_taken_during_writes_plus_log_is_exact() {
        let dir = temp_dir("checkpoint");
        let ks = Arc::new(open(&dir, 64 << 10).unwrap());
        workload(&ks, 0);
        let writer = {
            let ks = ks.clone();
            std::thread::spawn(move || {
                for round in 1..40 {
                    workload(&ks, round);
                }
            })
        };
        let info = checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        let files = checkpoint::list(&dir).unwrap();
        assert_eq!(files.len(), checkpoint::RANGE_COUNT, "one file per range");
        let on_disk: u64 = files
            .iter()
            .map(|(_, _, path)| std::fs::metadata(path).unwrap().len())
            .sum();
        assert_eq!(on_disk, info.bytes, "direct-I/O padding cut off");
        writer.join().unwrap();
        let expected = dump(&ks);
        close(&ks);
        let recovered = open(&dir, 64 << 10).unwrap();
        assert_eq!(dump(&recovered), expected);
        close(&recovered);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cycle_cut_short_leaves_a_valid_mix_of_ranges() {
        let dir = temp_dir("partial");
        let ks = open(&dir, 16 << 10).unwrap();
        for round in 0..3 {
            workload(&ks, round);
        }
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        for round in 3..6 {
            workload(&ks, round);
        }
        // A second cycle that a crash stops after five ranges.
        let log = ks.log().unwrap().clone();
        let mut throttle = checkpoint::Throttle::new(0);
        for range in 0..5 {
            checkpoint::write_range(&ks, &dir, range, &|| log.next_lsn(), &mut throttle, NOW_MS)
                .unwrap();
        }
        for round in 6..8 {
            workload(&ks, round);
        }
        let expected = dump(&ks);
        close(&ks);
        assert_eq!(
            checkpoint::list(&dir).unwrap().len(),
            checkpoint::RANGE_COUNT
        );
        let recovered = open(&dir, 16 << 10).unwrap();
        assert_eq!(dump(&recovered), expected);
        close(&recovered);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_range_file_after_the_log_was_cut_stops_recovery() {
        let dir = temp_dir("missing");
        let ks = open(&dir, 16 << 10).unwrap();
        workload(&ks, 0);
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        workload(&ks, 1);
        close(&ks);
        let (_, _, third) = checkpoint::list(&dir).unwrap().remove(3);
        std::fs::remove_file(third).unwrap();
        match open(&dir, 16 << 10) {
            Ok(_) => panic!("recovered without a range of the checkpoint"),
            Err(e) => assert!(e.to_string().contains("checkpoint needs it from"), "{e}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_range_file_with_no_log_left_stops_recovery() {
        let dir = temp_dir("missing-empty");
        let ks = open(&dir, 16 << 10).unwrap();
        workload(&ks, 0);
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        close(&ks);
        let (_, _, fifth) = checkpoint::list(&dir).unwrap().remove(5);
        std::fs::remove_file(fifth).unwrap();
        match open(&dir, 16 << 10) {
            Ok(_) => panic!("recovered without a range of the checkpoint"),
            Err(e) => assert!(e.to_string().contains("range files"), "{e}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_log_cut_without_its_checkpoint_stops_recovery() {
        let dir = temp_dir("no-checkpoint");
        let ks = open(&dir, 16 << 10).unwrap();
        workload(&ks, 0);
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        workload(&ks, 1);
        close(&ks);
        for (_, _, path) in checkpoint::list(&dir).unwrap() {
            std::fs::remove_file(path).unwrap();
        }
        match open(&dir, 16 << 10) {
            Ok(_) => panic!("recovered a log cut without its checkpoint"),
            Err(e) => assert!(e.to_string().contains("needs it from 1"), "{e}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_checkpoint_file_stops_recovery_naming_it() {
        let dir = temp_dir("bad-checkpoint");
        let ks = open(&dir, 16 << 10).unwrap();
        workload(&ks, 0);
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        close(&ks);
        let (_, _, path) = checkpoint::list(&dir).unwrap().remove(7);
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let error = match open(&dir, 16 << 10) {
            Ok(_) => panic!("recovered from a damaged checkpoint"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("Bad checkpoint"), "{error}");
        assert!(verify(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn torn_tail_at_every_byte_recovers_a_prefix() {
        let dir = temp_dir("torn");
        let ks = open(&dir, 1 << 20).unwrap();
        set(&ks, 0, b"first", b"1", None);
        let before_last = dump(&ks);
        // The last command is a group: both keys or neither.
        {
            let (a, b) = (ks.key(b"a"), ks.key(b"b"));
            let mut shards = ks.lock_many([a, b]);
            shards
                .shard(a.shard())
                .set(0, a, Value::from_bytes(b"x"), None, false, NOW_MS);
            shards
                .shard(b.shard())
                .set(0, b, Value::from_bytes(b"y"), None, false, NOW_MS);
        }
        let after_last = dump(&ks);
        close(&ks);
        let segment = segment_path(&log_dir(&dir), 1);
        let full = std::fs::read(&segment).unwrap();
        let group_len = 2 * (record::HEADER_BYTES + 2);
        let start = full.len() - group_len;
        for cut in start..=full.len() {
            let copy = temp_dir("torn-copy");
            std::fs::create_dir_all(log_dir(&copy)).unwrap();
            std::fs::write(segment_path(&log_dir(&copy), 1), &full[..cut]).unwrap();
            let recovered = open(&copy, 1 << 20).unwrap();
            let expected = if cut == full.len() {
                &after_last
            } else {
                &before_last
            };
            assert_eq!(&dump(&recovered), expected, "cut at {cut}");
            close(&recovered);
            let kept = std::fs::metadata(segment_path(&log_dir(&copy), 1))
                .unwrap()
                .len();
            assert_eq!(
                kept as usize,
                if cut == full.len() { cut } else { start },
                "truncated"
            );
            std::fs::remove_dir_all(&copy).unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Direct writes leave the newest segment padded with zeros to a block
    /// boundary: that is its clean end. A crash in a multi-block write can
    /// land a later block and not the one before it: zeros to the block's
    /// end, then bytes; that is a torn tail, not corruption.
    #[test]
    fn zero_padding_is_a_clean_end_and_a_hole_before_a_block_is_a_torn_tail() {
        let dir = temp_dir("padding");
        let ks = open(&dir, 1 << 20).unwrap();
        for n in 0..5 {
            set(&ks, 0, format!("k{n}").as_bytes(), b"value", None);
        }
        let expected = dump(&ks);
        close(&ks);
        let segment = segment_path(&log_dir(&dir), 1);
        let records = std::fs::read(&segment).unwrap();
        assert!(records.len() < 4096);
        for tail in [&[][..], &[5u8; 300][..]] {
            let mut bytes = records.clone();
            bytes.resize(4096, 0);
            bytes.extend_from_slice(tail);
            std::fs::write(&segment, &bytes).unwrap();
            let (recovered, truncated) = open_reporting(&dir, 1 << 20).unwrap();
            assert_eq!(dump(&recovered), expected);
            assert_eq!(truncated.is_empty(), tail.is_empty(), "{truncated:?}");
            close(&recovered);
            assert_eq!(
                std::fs::read(&segment).unwrap(),
                records,
                "cut to the records"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn flipped_byte_mid_log_stops_recovery_with_file_and_offset() {
        let dir = temp_dir("flip");
        let ks = open(&dir, 1 << 20).unwrap();
        for i in 0..10 {
            set(&ks, 0, format!("key{i}").as_bytes(), b"value", None);
        }
        close(&ks);
        let segment = segment_path(&log_dir(&dir), 1);
        let mut bytes = std::fs::read(&segment).unwrap();
        let record_len = record::HEADER_BYTES + 4 + 5;
        let offset = 3 * record_len + record::HEADER_BYTES + 1;
        bytes[offset] ^= 0x40;
        std::fs::write(&segment, &bytes).unwrap();
        let error = match open(&dir, 1 << 20) {
            Ok(_) => panic!("recovered from a corrupt log"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(&segment.display().to_string()), "{error}");
        assert!(
            error.contains(&format!("offset {}", 3 * record_len)),
            "{error}"
        );
        assert!(verify(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every value of db 0, read into RAM where it is on disk.
    fn read_all(ks: &Keyspace, count: usize) -> Vec<Vec<u8>> {
        (0..count)
            .map(|i| {
                let key = format!("key:{i}");
                let k = ks.key(key.as_bytes());
                let mut shard = ks.lock(k);
                let entry = shard.get(0, k, NOW_MS).unwrap().expect("key exists");
                entry.value().as_bytes().to_vec()
            })
            .collect()
    }

    /// One eviction call asking for every value to leave RAM.
    fn evict_round(ks: &Keyspace) {
        ks.evict(
            crate::eviction::EvictionPolicy::Values,
            u64::MAX,
            16,
            1 << 20,
            NOW_MS,
        );
    }

    fn evict_everything(ks: &Keyspace) {
        ks.log().unwrap().flush_now();
        for _ in 0..1000 {
            if ks.tier().cold_keys() as usize == ks.total_keys() as usize {
                return;
            }
            evict_round(ks);
        }
        panic!("values stayed in RAM");
    }

    /// The engine's reader, as an embedder would use it: values evicted to
    /// the log come back through io_uring and through pread threads, and
    /// a location that holds another key's record is an error, not a panic.
    #[test]
    fn the_cold_reader_reads_values_back_with_either_engine() {
        const COUNT: usize = 64;
        let dir = temp_dir("reader");
        let value = |i: usize| format!("value {i} ").repeat(30).into_bytes();
        let ks = open(&dir, 16 * 1024).unwrap();
        ks.tier().set_tracking(true);
        for i in 0..COUNT {
            set(&ks, 0, format!("key:{i}").as_bytes(), &value(i), None);
        }
        evict_everything(&ks);
        let locs: Vec<crate::location::ColdLocation> = (0..COUNT)
            .map(|i| {
                let key = format!("key:{i}");
                ks.cold_loc(0, ks.key(key.as_bytes()), NOW_MS)
                    .expect("cold")
            })
            .collect();
        for use_uring in [true, false] {
            let (reader, _) =
                crate::reader::ColdReader::start(ks.tier().clone(), 2, use_uring).unwrap();
            let (sender, results) = std::sync::mpsc::channel();
            for (i, &loc) in locs.iter().enumerate() {
                let sender = sender.clone();
                let key = format!("key:{i}").into_bytes();
                reader.submit(loc, key, Box::new(move |r| sender.send((i, r)).unwrap()));
            }
            // The record at key:1's location is not key:0's.
            let sender_bad = sender.clone();
            reader.submit(
                locs[1],
                b"key:0".to_vec(),
                Box::new(move |r| sender_bad.send((usize::MAX, r)).unwrap()),
            );
            for _ in 0..=COUNT {
                let (i, result) = results
                    .recv_timeout(std::time::Duration::from_secs(10))
                    .expect("a read completes");
                if i == usize::MAX {
                    assert!(result.is_err(), "{} read the wrong key", reader.engine());
                } else {
                    assert_eq!(result.unwrap().bytes, value(i), "{}", reader.engine());
                }
            }
        }
        // The whole round as a command's caller makes it: want, read,
        // install (lent to the command), release (cold again).
        let (reader, _) = crate::reader::ColdReader::start(ks.tier().clone(), 2, true).unwrap();
        let mut fetch = crate::fetch::ColdFetch::new(0);
        for i in 0..COUNT {
            assert!(fetch.want(&ks, format!("key:{i}").as_bytes(), NOW_MS));
        }
        assert!(!fetch.want(&ks, b"key:0", NOW_MS), "wanted once");
        assert!(!fetch.want(&ks, b"missing", NOW_MS), "not cold: not wanted");
        let (sender, receiver) = std::sync::mpsc::channel();
        fetch.submit(&reader, |index| {
            let sender = sender.clone();
            Box::new(move |result| sender.send((index, result)).unwrap())
        });
        let mut results: Vec<Option<crate::fetch::ReadResult>> = (0..COUNT).map(|_| None).collect();
        for _ in 0..COUNT {
            let (index, result) = receiver
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("a read completes");
            results[index] = Some(result);
        }
        let results = results.into_iter().map(Option::unwrap).collect();
        let (lent, failed) = fetch.install(&ks, results, NOW_MS);
        assert!(failed.is_empty());
        let in_ram = |ks: &Keyspace| {
            (0..COUNT)
                .filter(|i| {
                    let key = format!("key:{i}");
                    ks.cold_loc(0, ks.key(key.as_bytes()), NOW_MS).is_none()
                })
                .count()
        };
        assert_eq!(in_ram(&ks), COUNT, "installed");
        // Lent values are the command's until it ran: eviction leaves them.
        for _ in 0..10 {
            evict_round(&ks);
        }
        assert_eq!(in_ram(&ks), COUNT, "eviction took a lent value");
        lent.release(&ks, NOW_MS);
        assert_eq!(in_ram(&ks), 0, "lent, then released");
        close(&ks);
    }

    #[test]
    fn cold_values_survive_checkpoints_restarts_and_compaction() {
        const COUNT: usize = 400;
        let dir = temp_dir("tiering");
        let value = |i: usize, round: usize| format!("{i}:{round}:").repeat(20).into_bytes();
        let ks = open(&dir, 16 * 1024).unwrap();
        ks.tier().set_tracking(true);
        for i in 0..COUNT {
            set(&ks, 0, format!("key:{i}").as_bytes(), &value(i, 0), None);
        }
        evict_everything(&ks);
        // Read back under the lock (the fallback path), then out again.
        let expected: Vec<Vec<u8>> = (0..COUNT).map(|i| value(i, 0)).collect();
        assert_eq!(read_all(&ks, COUNT), expected);
        evict_everything(&ks);
        let log = ks.log().unwrap().clone();
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        let kept: Vec<u64> = log.segments().iter().map(|s| s.seq).collect();
        for seq in ks.located_segments().keys() {
            assert!(
                kept.contains(seq),
                "segment {seq} holds cold values: {kept:?}"
            );
        }
        close(&ks);
        drop(ks);

        // The checkpoint holds locations: loading reads no value.
        let ks = open(&dir, 16 * 1024).unwrap();
        ks.tier().set_tracking(true);
        assert_eq!(ks.tier().cold_keys() as usize, COUNT);
        assert_eq!(
            ks.tier()
                .stats
                .disk_reads
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        assert_eq!(read_all(&ks, COUNT), expected);

        // Overwrite most values: their old segments become mostly garbage;
        // compaction moves the rest, and the next cycle deletes them.
        for i in (0..COUNT).filter(|i| i % 5 != 0) {
            set(&ks, 0, format!("key:{i}").as_bytes(), &value(i, 1), None);
        }
        evict_everything(&ks);
        let old: Vec<u64> = ks.located_segments().keys().copied().collect();
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        let moved = ks
            .tier()
            .stats
            .compaction_moves
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(moved > 0, "compaction moved nothing");
        evict_everything(&ks);
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
        let remaining: Vec<u64> = ks.log().unwrap().segments().iter().map(|s| s.seq).collect();
        assert!(
            old.iter().any(|seq| !remaining.contains(seq)),
            "no compacted segment was deleted: {old:?} vs {remaining:?}"
        );
        let expected: Vec<Vec<u8>> = (0..COUNT)
            .map(|i| value(i, if i % 5 == 0 { 0 } else { 1 }))
            .collect();
        assert_eq!(read_all(&ks, COUNT), expected);
        close(&ks);
        drop(ks);
        let ks = open(&dir, 16 * 1024).unwrap();
        assert_eq!(read_all(&ks, COUNT), expected);
        close(&ks);
        let verified = verify(&dir).unwrap();
        assert!(verified.torn.is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A SET record of a value type this build does not know stops the
    /// load with an error naming it, rather than loading the bytes as
    /// something else.
    #[test]
    fn an_unknown_value_type_stops_the_load() {
        let dir = temp_dir("unknown-type");
        let ks = open(&dir, 1 << 20).unwrap();
        set(&ks, 0, b"known", b"v", None);
        let lsn = ks.log().unwrap().next_lsn();
        close(&ks);
        drop(ks);
        let segment = *list_segments(&log_dir(&dir)).unwrap().last().unwrap();
        let mut record = Vec::new();
        record::encode(
            &mut record,
            &record::Draft {
                kind: Kind::Set,
                db: 0,
                aux: 0,
                flags: 0,
                value_type: 7,
                key: b"strange",
                payload: b"bytes",
            },
        );
        record::seal(&mut record, lsn, 0);
        let path = crate::log::segment_path(&log_dir(&dir), segment);
        let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        std::io::Write::write_all(&mut file, &record).unwrap();
        let error = open(&dir, 1 << 20).err().expect("the load fails");
        assert!(
            error.0.contains("value type 7 is not supported"),
            "{}",
            error.0
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
