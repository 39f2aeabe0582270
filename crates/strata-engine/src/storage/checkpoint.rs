//! Fork-free checkpoints, written range by range.
//!
//! A checkpoint holds every live key's full image, as log records, written
//! shard by shard while the server keeps serving: each shard is locked only
//! while its entries are encoded into a buffer (about 1/1024 of the data,
//! which also bounds the extra memory), then the buffer is written without
//! any lock, at a bounded rate.
//!
//! Shards are copied at different moments, so a checkpoint is not one
//! instant of the whole keyspace. It does not need to be: before copying
//! shard `i` the writer notes `L_i`, the LSN the next record will get.
//! Every record of shard `i` below `L_i` is already in the copy and none at
//! or above it is (records are committed under the shard lock). Recovery
//! loads the files, then replays the log from `min L_i`, skipping for each
//! shard the records below its `L_i`. The result is exact, even for
//! SWAPDB, which replaying twice would undo.
//!
//! The shards are split into [`RANGE_COUNT`] ranges, one file each. A
//! checkpoint *cycle* rewrites the ranges one after the other, and each new
//! range file replaces the old one of that range as soon as it is complete.
//! So the disk holds about one copy of the data plus one range, never two
//! full copies; and a crash in the middle of a cycle leaves a valid mix of
//! new and old range files (the per-shard `L_i` rule does not care which
//! cycle a shard's copy comes from). The log is cut only after a whole
//! cycle, to the smallest `L_i` of the new files.
//!
//! ```text
//! CheckpointBegin  key: seed u64, shard count u32, db count u32,
//!                  version u32, first shard u32, shards in file u32,
//!                  sharding u32 (version 4: 1 by slot, 0 by hash)
//! CheckpointShard  db: shard index, aux: L_i          ┐ once per shard of
//! Meta …           shard 0 only: server state beside  │ the range, in order
//!                  the keyspace (`Kind::Meta`)        │
//! Set …            the shard's live keys, lsn: L_i    ┘
//! CheckpointEnd    aux: next LSN when done, key: key count u64
//! ```
//!
//! A key whose value is on disk only (tiering) is written as a
//! `CheckpointCold` record holding the location of its value's SET record
//! in the log instead of the image, so a checkpoint's size is that of the
//! index plus the values in RAM, and restart does not read cold values.
//! Log segments holding such records stay until no entry is located in
//! them (`tier` module).
//!
//! A range file is written as `checkpoint-<range>.tmp`, synced, renamed to
//! `checkpoint-<range>-<L of its first shard>.ckpt` and the directory
//! synced; only then is the older file of that range deleted.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::background::BackgroundBytes;
use crate::keyspace::entry::Entry;
use crate::keyspace::shards::{Keyspace, SHARD_COUNT, Sharding};
use crate::storage::log::{segment_seq, sync_dir};
use crate::storage::record::{self, Draft, FLAG_INT, FLAG_LOCATED, HEADER_BYTES, Kind, Record};
use crate::tiering::tier::LOCATE_BIG_BYTES;

const FORMAT_VERSION: u32 = 4;
/// Older versions this build reads (2: no cold records; 3 and before: no
/// sharding field, keys sharded by hash).
const FORMAT_VERSIONS_READ: [u32; 3] = [2, 3, 4];
/// Files one checkpoint is split into.
pub(crate) const RANGE_COUNT: usize = 16;
/// Shards per range file.
pub(crate) const SHARDS_PER_RANGE: usize = SHARD_COUNT / RANGE_COUNT;
/// Bytes of the CheckpointBegin record's key (28 before version 4).
const META_BYTES: usize = 32;
const META_BYTES_V3: usize = 28;
/// Bytes written between two `fdatasync`s of a checkpoint, so its data
/// reaches the disk steadily instead of in one burst at the end that would
/// stall the log's own fsyncs.
const SYNC_EVERY_BYTES: u64 = 32 << 20;

/// The file name of range `range`'s checkpoint whose first shard covers
/// the log below `lsn`.
pub(crate) fn checkpoint_path(dir: &Path, range: usize, lsn: u64) -> PathBuf {
    dir.join(format!("checkpoint-{range:02}-{lsn:020}.ckpt"))
}

/// Parses a checkpoint file name into (range, LSN).
pub(crate) fn parse_name(name: &str) -> Option<(usize, u64)> {
    let rest = name.strip_prefix("checkpoint-")?.strip_suffix(".ckpt")?;
    let (range, lsn) = rest.split_once('-')?;
    let range: usize = range.parse().ok()?;
    (range < RANGE_COUNT).then_some(())?;
    Some((range, lsn.parse().ok()?))
}

/// What a finished checkpoint cycle covers.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    /// The log must be replayed from this LSN (the smallest `L_i`).
    pub replay_from: u64,
    /// The LSN the next write got when the cycle finished.
    pub next_lsn: u64,
    pub keys: u64,
    /// Bytes of all range files together.
    pub bytes: u64,
}

/// Spreads a cycle's writes over time: at most `bytes_per_s` (0: no limit).
pub(crate) struct Throttle {
    started: Instant,
    written: u64,
    bytes_per_s: u64,
}

impl Throttle {
    pub(crate) fn new(bytes_per_s: u64) -> Self {
        Throttle {
            started: Instant::now(),
            written: 0,
            bytes_per_s,
        }
    }

    fn wrote(&mut self, bytes: u64) {
        self.written += bytes;
        if self.bytes_per_s == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.written as f64 / self.bytes_per_s as f64);
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}

/// Runs a whole checkpoint cycle of `keyspace` into `dir` and compacts the
/// log: rolls the log to a new segment, writes every range (at most
/// `bytes_per_s`, 0: unbounded), then deletes the segments the new files
/// cover. With the log off (`appendonly no`), the files are stamped with
/// `idle_lsn` (the LSN recovery ended at) and segments left from an earlier
/// run go, except those holding some entry's value. Either way the store
/// that cold values live in (the log, or the cache store) is compacted.
pub fn run_cycle(
    keyspace: &Keyspace,
    dir: &Path,
    idle_lsn: u64,
    bytes_per_s: u64,
    now_ms: u64,
) -> std::io::Result<CheckpointInfo> {
    let changes = keyspace.change_log();
    if let Some(log) = changes {
        // Everything before the cycle becomes deletable as whole segments.
        log.roll_segment();
    }
    // The cache store likewise: records in segments before this point got
    // their locations before the cycle started.
    let store = keyspace.log().filter(|_| changes.is_none());
    let store_start_lsn = store.map(|store| {
        store.roll_segment();
        store.next_lsn()
    });
    // Segments some entry is located in now may be named by the files
    // this cycle writes; new locations only go to the head, so a segment
    // located in by nobody now stays so.
    let mut throttle = Throttle::new(bytes_per_s);
    // Values in RAM whose image lies in a segment that was mostly dead
    // already at the last cycle are appended again from RAM (compaction
    // without a read), so that the segment can go after this cycle and
    // the values are still named, not copied, by every checkpoint. A
    // segment gets one cycle to die by itself: where values are
    // overwritten often, nearly all of them are.
    if let Some(log) = keyspace.log() {
        let dying = crate::storage::compaction::dying_segments(keyspace, log);
        let still = keyspace.tier().still_dying(dying);
        keyspace.relocate_in(&still, &mut |bytes| throttle.wrote(bytes));
    }
    let located = keyspace.located_segments();
    let next_lsn = || changes.map_or(idle_lsn, |log| log.next_lsn());
    let info = write(keyspace, dir, &next_lsn, &mut throttle, now_ms)?;
    let located_now = keyspace.located_segments();
    let keep = |seq: u64| located.contains_key(&seq) || located_now.contains_key(&seq);
    match changes {
        Some(log) => {
            for seq in log.delete_segments_before(info.replay_from, keep)? {
                keyspace.tier().forget_segment(seq);
            }
        }
        None => delete_unlocated_segments(keyspace, &crate::storage::log::log_dir(dir), &keep)?,
    }
    match (store, store_start_lsn) {
        (Some(store), Some(start_lsn)) => {
            // The new files name only what was located at the cycle's
            // start or placed since (in segments from the roll on).
            for seq in store.delete_segments_before(start_lsn, keep)? {
                keyspace.tier().forget_segment(seq);
            }
            // From here on, segments before the head may be named by
            // these files: between cycles they stay.
            store.roll_segment();
            keyspace.tier().set_named_below(store.head_segment());
            crate::storage::compaction::compact(keyspace, store, &mut |bytes| {
                throttle.wrote(bytes)
            })?;
        }
        // A cache store left by an earlier `appendonly no` run: what no
        // entry uses any more goes (nothing can be placed in it now).
        _ => delete_unlocated_segments(keyspace, &crate::tiering::tier::cache_dir(dir), &keep)?,
    }
    // Segments kept for a few cold values are compacted between cycles
    // ([`compact_log_step`]), not here: a cycle that also read whole
    // segments ran long, and everything waiting for it waited longer.
    Ok(info)
}

/// Whether the log of changes has a dying segment some value on disk is
/// still located in (`compaction::dying_segments`): what
/// [`compact_log_step`] moves out.
pub fn log_compaction_due(keyspace: &Keyspace) -> bool {
    let Some(log) = keyspace.change_log() else {
        return false;
    };
    if !keyspace.tier().tracking() {
        return false;
    }
    !crate::storage::compaction::segments_to_compact_now(keyspace, log).is_empty()
}

/// Compacts the log of changes between checkpoint cycles: moves the
/// values still located in the oldest dying segment to the head (read at
/// most `bytes_per_s`, 0: unbounded), so the next cycle can delete it.
/// One segment per call, so that a checkpoint that falls due meanwhile
/// waits for one segment at most.
pub fn compact_log_step(keyspace: &Keyspace, bytes_per_s: u64) -> std::io::Result<()> {
    let mut throttle = Throttle::new(bytes_per_s);
    match keyspace.change_log() {
        Some(log) => crate::storage::compaction::compact_oldest(keyspace, log, &mut |bytes| {
            throttle.wrote(bytes)
        }),
        None => Ok(()),
    }
}

/// Compacts the cache store (`appendonly no`), without a checkpoint:
/// deletes the segments no entry's value is in, then moves the values out
/// of mostly-dead ones (the next run deletes those). At most `bytes_per_s`
/// of reading (0: unbounded).
pub fn compact_cache_store(keyspace: &Keyspace, bytes_per_s: u64) -> std::io::Result<()> {
    match keyspace.log() {
        Some(store) if keyspace.change_log().is_none() => {
            compact_store(keyspace, store, &mut Throttle::new(bytes_per_s))
        }
        _ => Ok(()),
    }
}

fn compact_store(
    keyspace: &Keyspace,
    store: &crate::storage::log::Log,
    throttle: &mut Throttle,
) -> std::io::Result<()> {
    // Only segments closed before this point can go: any location in them
    // was given before it, so `located` (taken after it) sees it. Segments
    // a checkpoint on disk may name stay until the next cycle replaces it.
    store.roll_segment();
    let before = store.next_lsn();
    let located = keyspace.located_segments();
    let named_below = keyspace.tier().named_below();
    let keep = |seq: u64| seq < named_below || located.contains_key(&seq);
    for seq in store.delete_segments_before(before, keep)? {
        keyspace.tier().forget_segment(seq);
    }
    crate::storage::compaction::compact(keyspace, store, &mut |bytes| throttle.wrote(bytes))
}

/// Removes the segment files in `segments_dir` that `keep` does not name
/// (a directory no running log writes to: the log with `appendonly no`, or
/// a cache store left by an earlier run).
fn delete_unlocated_segments(
    keyspace: &Keyspace,
    segments_dir: &Path,
    keep: &dyn Fn(u64) -> bool,
) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(segments_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut deleted = false;
    for entry in entries {
        let entry = entry?;
        if let Some(seq) = entry.file_name().to_str().and_then(segment_seq)
            && !keep(seq)
        {
            std::fs::remove_file(entry.path())?;
            keyspace.tier().forget_segment(seq);
            deleted = true;
        }
    }
    if deleted {
        sync_dir(segments_dir)?;
    }
    Ok(())
}

/// Writes every range of `keyspace` into `dir`, then puts all the files in
/// place together ([`publish`]). `next_lsn` reads the log's next LSN
/// (called with a shard lock held).
fn write(
    keyspace: &Keyspace,
    dir: &Path,
    next_lsn: &dyn Fn() -> u64,
    throttle: &mut Throttle,
    now_ms: u64,
) -> std::io::Result<CheckpointInfo> {
    std::fs::create_dir_all(dir)?;
    let mut info = CheckpointInfo {
        replay_from: u64::MAX,
        next_lsn: 0,
        keys: 0,
        bytes: 0,
    };
    let mut written = Vec::with_capacity(RANGE_COUNT);
    for range in 0..RANGE_COUNT {
        let temp = temp_path(dir, range);
        match write_range_file(keyspace, &temp, range, next_lsn, throttle, now_ms) {
            Ok(range_info) => {
                info.replay_from = info.replay_from.min(range_info.replay_from);
                info.next_lsn = range_info.next_lsn;
                info.keys += range_info.keys;
                info.bytes += range_info.bytes;
                written.push((range, temp, range_info.replay_from));
            }
            Err(e) => {
                // A full disk must not also keep half-written files around.
                let _ = std::fs::remove_file(&temp);
                for (_, temp, _) in written {
                    let _ = std::fs::remove_file(temp);
                }
                return Err(e);
            }
        }
    }
    publish(keyspace, dir, &written)?;
    Ok(info)
}

#[cfg(test)]
/// Writes the file of one range and replaces that range's older file.
pub(crate) fn write_range(
    keyspace: &Keyspace,
    dir: &Path,
    range: usize,
    next_lsn: &dyn Fn() -> u64,
    throttle: &mut Throttle,
    now_ms: u64,
) -> std::io::Result<CheckpointInfo> {
    assert!(range < RANGE_COUNT);
    std::fs::create_dir_all(dir)?;
    let temp = temp_path(dir, range);
    let written = write_range_file(keyspace, &temp, range, next_lsn, throttle, now_ms);
    match written {
        Ok(info) => {
            publish(keyspace, dir, &[(range, temp, info.replay_from)])?;
            Ok(info)
        }
        Err(e) => {
            // A full disk must not also keep a half-written file around.
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

fn temp_path(dir: &Path, range: usize) -> PathBuf {
    dir.join(format!("checkpoint-{range:02}.tmp"))
}

/// Puts written range files (range, temporary file, replay LSN) in place
/// of the older files of their ranges. The files may name values by their
/// location in the log (or the cache store): those records must be on
/// disk before a file counts, or a machine crash could leave it pointing
/// at nothing, so the log is synced first, once for every file: a sync
/// per range file (sixteen per cycle) took a sixth off the 10 KB write
/// load's throughput while cycles ran back to back.
fn publish(
    keyspace: &Keyspace,
    dir: &Path,
    written: &[(usize, PathBuf, u64)],
) -> std::io::Result<()> {
    if let Some(log) = keyspace.log()
        && !log.sync_now()
    {
        for (_, temp, _) in written {
            let _ = std::fs::remove_file(temp);
        }
        return Err(std::io::Error::other(
            "the log could not be synced before the checkpoint",
        ));
    }
    let mut placed = Vec::with_capacity(written.len());
    for &(range, ref temp, replay_from) in written {
        let path = checkpoint_path(dir, range, replay_from);
        std::fs::rename(temp, &path)?;
        placed.push((range, path));
    }
    sync_dir(dir)?;
    for (older_range, _, older) in list(dir)? {
        if placed
            .iter()
            .any(|(range, path)| *range == older_range && *path != older)
        {
            std::fs::remove_file(older)?;
        }
    }
    sync_dir(dir)
}

/// Writes the file of one range to `temp` (synced; not yet in place).
fn write_range_file(
    keyspace: &Keyspace,
    temp: &Path,
    range: usize,
    next_lsn: &dyn Fn() -> u64,
    throttle: &mut Throttle,
    now_ms: u64,
) -> std::io::Result<CheckpointInfo> {
    let mut out = DirectWriter::create(temp)?;
    let first_shard = range * SHARDS_PER_RANGE;
    let mut encoder = RangeEncoder::default();
    let meta = begin_meta(keyspace, first_shard);
    sealed(
        &mut encoder.buf,
        marker(Kind::CheckpointBegin, 0, 0, &meta),
        0,
    );
    let mut written: u64 = 0;
    let mut synced_at: u64 = 0;
    let mut replay_from = None;
    for index in first_shard..first_shard + SHARDS_PER_RANGE {
        let covered = encoder.encode_shard(keyspace, index, next_lsn, now_ms);
        replay_from.get_or_insert(covered);
        for value in encoder.big.drain(..) {
            copy_big_value(keyspace, index, &value, covered, &mut encoder.buf);
        }
        out.write_all(&encoder.buf)?;
        written += encoder.buf.len() as u64;
        throttle.wrote(encoder.buf.len() as u64);
        encoder.buf.clear();
        if written - synced_at >= SYNC_EVERY_BYTES {
            out.sync()?;
            synced_at = written;
        }
    }
    let next = next_lsn();
    let keys = encoder.keys;
    let count = keys.to_le_bytes();
    let mut buf = encoder.buf;
    sealed(&mut buf, marker(Kind::CheckpointEnd, 0, next, &count), next);
    out.write_all(&buf)?;
    written += buf.len() as u64;
    out.finish()?;
    let replay_from = replay_from.expect("a range has shards");
    Ok(CheckpointInfo {
        replay_from,
        next_lsn: next,
        keys,
        bytes: written,
    })
}

/// The key of a range file's CheckpointBegin record: what a reader needs
/// before the first shard (seed, shape, format, which shards, sharding).
fn begin_meta(keyspace: &Keyspace, first_shard: usize) -> Vec<u8> {
    let mut meta = Vec::with_capacity(META_BYTES);
    meta.extend_from_slice(&keyspace.seed().to_le_bytes());
    meta.extend_from_slice(&(SHARD_COUNT as u32).to_le_bytes());
    meta.extend_from_slice(&(keyspace.db_count() as u32).to_le_bytes());
    meta.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    meta.extend_from_slice(&(first_shard as u32).to_le_bytes());
    meta.extend_from_slice(&(SHARDS_PER_RANGE as u32).to_le_bytes());
    meta.extend_from_slice(&keyspace.sharding().code().to_le_bytes());
    meta
}

/// The encoded records of one range file, shard by shard: the buffers
/// live across shards so that each shard's copy reuses the memory of the
/// one before.
#[derive(Default)]
struct RangeEncoder {
    /// Records of the current shard not yet written out.
    buf: Vec<u8>,
    /// Keys copied so far (big values included).
    keys: u64,
    /// A located image followed by its location.
    located: Vec<u8>,
    scratch: Vec<u8>,
    /// Big values seen under the current shard's lock, to copy after it.
    big: Vec<BigValue>,
}

impl RangeEncoder {
    /// Appends shard `index`'s marker, meta and live keys to `buf`, under
    /// the shard's lock, and returns the LSN the copy covers the log
    /// below. Big string values are only noted in `big`, to be copied
    /// once the lock is released.
    fn encode_shard(
        &mut self,
        keyspace: &Keyspace,
        index: usize,
        next_lsn: &dyn Fn() -> u64,
        now_ms: u64,
    ) -> u64 {
        let shard = keyspace.lock_unlogged(index);
        // Shard 0 also holds the replication position committed below the
        // LSN it covers (`repl_position`): read together with it.
        let (covered, position) = match keyspace.change_log() {
            Some(log) if index == 0 => log.next_lsn_and_position(),
            _ => (next_lsn(), None),
        };
        let shard_marker = marker(Kind::CheckpointShard, index as u16, covered, &[]);
        sealed(&mut self.buf, shard_marker, covered);
        for (name, image) in &shard.meta {
            if position.is_some() && name.as_slice() == crate::storage::repl_position::NAME {
                continue;
            }
            sealed(&mut self.buf, Draft::meta(name, image), covered);
        }
        if let Some(image) = position.filter(|image| !image.is_empty()) {
            let draft = Draft::meta(crate::storage::repl_position::NAME, &image);
            sealed(&mut self.buf, draft, covered);
        }
        for db in 0..keyspace.db_count() {
            for entry in shard.entries(db) {
                if entry.expire_at_ms().is_some_and(|at| at <= now_ms) {
                    continue;
                }
                self.encode_entry(db, entry, covered);
                self.keys += 1;
            }
        }
        covered
    }

    /// Appends the record of one live `entry` of database `db`: its image,
    /// or where in the log its value is, or (a big string value in RAM
    /// only) a note in `big` to copy it later.
    fn encode_entry(&mut self, db: usize, entry: &Entry, covered: u64) {
        let mut flags = if entry.is_int() { FLAG_INT } else { 0 };
        let aux = entry.expire_at_ms().unwrap_or(0);
        if let Some(identity) = entry.big_string_identity()
            && entry.loc().is_none()
            && entry.value().len() > PIECEWISE_VALUE_BYTES
        {
            // Copied after the shard's lock is released (`write_range_file`).
            self.big.push(BigValue {
                db,
                identity,
                key: entry.key().to_vec(),
                aux,
                flags,
                len: entry.value().len(),
            });
            return;
        }
        let loc_bytes;
        let (kind, payload) = match (entry.cold_loc(), entry.loc()) {
            (Some(loc), _) => {
                loc_bytes = loc.to_le_bytes();
                (Kind::CheckpointCold, &loc_bytes[..])
            }
            // A big value in RAM is named by its image in the
            // log, as a cold one: copying it into every
            // checkpoint cost the 10 KB write load a quarter
            // of its throughput.
            (None, Some(loc)) if entry.image_len() >= LOCATE_BIG_BYTES => {
                loc_bytes = loc.to_le_bytes();
                (Kind::CheckpointCold, &loc_bytes[..])
            }
            (None, Some(loc)) => {
                self.located.clear();
                self.located
                    .extend_from_slice(entry.image(&mut self.scratch));
                self.located.extend_from_slice(&loc.to_le_bytes());
                flags |= FLAG_LOCATED;
                (Kind::Set, &self.located[..])
            }
            (None, None) => (Kind::Set, entry.image(&mut self.scratch)),
        };
        let image = Draft {
            kind,
            db: db as u16,
            aux,
            flags,
            value_type: entry.value_type_code(),
            key: entry.key(),
            payload,
        };
        sealed(&mut self.buf, image, covered);
    }
}

/// String values above this size are copied into a checkpoint piece by
/// piece, the shard locked for one piece at a time ([`copy_big_value`]).
/// They live beside their entries, whose address follows them.
const PIECEWISE_VALUE_BYTES: usize = crate::keyspace::entry::BIG_STRING_BYTES;
/// Bytes copied per lock hold of [`copy_big_value`].
const PIECE_BYTES: usize = 1 << 20;

/// A big string value seen under its shard's lock, copied after it.
struct BigValue {
    db: usize,
    /// The value's identity (`Entry::big_string_identity`): it is
    /// followed by that, into whichever database a SWAPDB moved it to.
    identity: usize,
    key: Vec<u8>,
    aux: u64,
    flags: u8,
    len: usize,
}

/// Appends to `buf` the image of a big string `value` of shard `index`,
/// copied [`PIECE_BYTES`] at a time, each under a short hold of the shard
/// lock: copying a 256 MB value in one hold stalled every command on that
/// shard for 0.7 s. The image is stamped with the shard's `covered` LSN
/// like the rest of the shard's copy, yet pieces copied later may already
/// hold changes made after it. Replay makes that exact: every change to a
/// string after `covered` is in the log and is replayed over the image
/// (SETRANGE records write the same bytes again; SET, DEL and expiry
/// records replace or remove the whole value), so each byte ends as the
/// last change left it. If the key is gone, or no longer a string in RAM,
/// the rest of the image stays zero: what happened to it has a record at
/// or after `covered` that replay applies. The value is followed by its
/// entry, not its database: after a SWAPDB the same entry is found in the
/// other database (copying whatever that database now holds under the key
/// would be wrong: the replayed SWAPDB moves images, not values). Values
/// with a location in the log are not copied this way (they could leave
/// RAM between two pieces without any record saying so).
fn copy_big_value(
    keyspace: &Keyspace,
    index: usize,
    value: &BigValue,
    covered: u64,
    buf: &mut Vec<u8>,
) {
    let mut image = vec![0u8; value.len];
    let key = keyspace.key(&value.key);
    let mut at = 0;
    while at < value.len {
        let end = (at + PIECE_BYTES).min(value.len);
        let shard = keyspace.lock_unlogged(index);
        let same = |db: usize| {
            shard
                .find(db, key)
                .filter(|entry| entry.big_string_identity() == Some(value.identity))
        };
        let Some(entry) = same(value.db).or_else(|| (0..keyspace.db_count()).find_map(same)) else {
            break;
        };
        if entry.value_type() != crate::types::value::ValueType::String || entry.is_cold() {
            break;
        }
        let bytes = entry.value().as_bytes();
        let available = end.min(bytes.len());
        if available > at {
            image[at..available].copy_from_slice(&bytes[at..available]);
        }
        drop(shard);
        at = end;
    }
    let draft = Draft {
        kind: Kind::Set,
        db: value.db as u16,
        aux: value.aux,
        flags: value.flags,
        value_type: record::VALUE_STRING,
        key: &value.key,
        payload: &image,
    };
    sealed(buf, draft, covered);
}

/// Alignment and size unit of direct I/O.
const DIRECT_ALIGN_BYTES: usize = 4096;
/// Bytes a [`DirectWriter`] collects before one write.
const DIRECT_BUFFER_BYTES: usize = 1 << 20;

/// Writes a checkpoint with `O_DIRECT` where the file system allows it:
/// the data goes from our buffer to the device without being copied into
/// the page cache, which a profile showed costing a third of two cores
/// during a checkpoint, and without crowding the log's pages out of it.
/// Falls back to buffered writes (e.g. on tmpfs); the aligned buffer works
/// either way.
struct DirectWriter {
    file: File,
    /// Over-allocated so that `buffer[start..start + DIRECT_BUFFER_BYTES]`
    /// is 4096-aligned.
    buffer: Vec<u8>,
    _accounted: BackgroundBytes,
    start: usize,
    filled: usize,
    /// Bytes of real content written to the file so far.
    length: u64,
}

impl DirectWriter {
    fn create(path: &Path) -> std::io::Result<DirectWriter> {
        let open = |flags| {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags)
                .open(path)
        };
        let file = open(libc::O_DIRECT).or_else(|_| open(0))?;
        let buffer = vec![0u8; DIRECT_BUFFER_BYTES + DIRECT_ALIGN_BYTES];
        let start = buffer.as_ptr().align_offset(DIRECT_ALIGN_BYTES);
        Ok(DirectWriter {
            file,
            _accounted: BackgroundBytes::new(buffer.len()),
            buffer,
            start,
            filled: 0,
            length: 0,
        })
    }

    fn write_all(&mut self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let room = DIRECT_BUFFER_BYTES - self.filled;
            let take = room.min(data.len());
            let at = self.start + self.filled;
            self.buffer[at..at + take].copy_from_slice(&data[..take]);
            self.filled += take;
            data = &data[take..];
            if self.filled == DIRECT_BUFFER_BYTES {
                self.write_block(DIRECT_BUFFER_BYTES)?;
            }
        }
        Ok(())
    }

    /// Writes the first `len` buffered bytes (a multiple of the alignment).
    fn write_block(&mut self, len: usize) -> std::io::Result<()> {
        debug_assert!(len.is_multiple_of(DIRECT_ALIGN_BYTES));
        (&self.file).write_all(&self.buffer[self.start..self.start + len])?;
        self.length += self.filled as u64;
        self.filled = 0;
        Ok(())
    }

    fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// Writes the rest, zero-padded to the alignment, cuts the file back
    /// to its real length and syncs it.
    fn finish(mut self) -> std::io::Result<()> {
        if self.filled > 0 {
            let padded = self.filled.next_multiple_of(DIRECT_ALIGN_BYTES);
            let tail = self.start + self.filled;
            self.buffer[tail..self.start + padded].fill(0);
            self.write_block(padded)?;
        }
        self.file.set_len(self.length)?;
        self.file.sync_all()
    }
}

/// Appends one complete record (LSN and CRCs filled in) to `buf`.
fn sealed(buf: &mut Vec<u8>, draft: Draft, lsn: u64) {
    let start = buf.len();
    record::encode(buf, &draft);
    record::seal(&mut buf[start..], lsn, 0);
}

fn marker(kind: Kind, db: u16, aux: u64, key: &[u8]) -> Draft<'_> {
    Draft {
        kind,
        db,
        aux,
        flags: 0,
        value_type: 0,
        key,
        payload: &[],
    }
}

/// Checkpoint files in `dir` as (range, LSN, path), by range then LSN.
pub fn list(dir: &Path) -> std::io::Result<Vec<(usize, u64, PathBuf)>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if let Some((range, lsn)) = entry.file_name().to_str().and_then(parse_name) {
            found.push((range, lsn, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// The newest file of every range present, in range order.
pub fn newest(dir: &Path) -> std::io::Result<Vec<(usize, PathBuf)>> {
    let mut newest: Vec<(usize, PathBuf)> = Vec::new();
    for (range, _, path) in list(dir)? {
        match newest.last_mut() {
            Some((last, newer)) if *last == range => *newer = path,
            _ => newest.push((range, path)),
        }
    }
    Ok(newest)
}

/// A checkpoint's header fields.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointMeta {
    pub seed: u64,
    pub shard_count: u32,
    pub db_count: u32,
    /// The shards this file holds.
    pub first_shard: u32,
    pub shards: u32,
    /// How keys map to shards in this data directory.
    pub sharding: Sharding,
}

/// A problem found in a checkpoint file.
#[derive(Debug)]
pub(crate) struct CheckpointError {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bad checkpoint {} at offset {}: {}",
            self.path.display(),
            self.offset,
            self.reason
        )
    }
}

/// Builds errors for the record at `offset` of `path`.
fn failure(path: &Path, offset: u64) -> impl Fn(String) -> CheckpointError + '_ {
    move |reason| CheckpointError {
        path: path.to_path_buf(),
        offset,
        reason,
    }
}

/// Reads a checkpoint record by record, checking every CRC and the file's
/// structure. `visit` gets (shard index, covered LSN, record) for every
/// key image. Returns the meta and the covered LSN of every shard.
pub(crate) struct CheckpointReader {
    path: PathBuf,
    input: BufReader<File>,
    offset: u64,
    buf: Vec<u8>,
}

/// What a complete range file holds besides its keys.
#[derive(Clone, Debug)]
pub struct CheckpointSummary {
    pub meta: CheckpointMeta,
    /// `L_i` of each of its shards, from `meta.first_shard` on.
    pub covered: Vec<u64>,
    pub next_lsn: u64,
    pub keys: u64,
    pub bytes: u64,
}

impl CheckpointReader {
    pub(crate) fn open(path: &Path) -> Result<CheckpointReader, CheckpointError> {
        let file = File::open(path).map_err(|e| CheckpointError {
            path: path.to_path_buf(),
            offset: 0,
            reason: e.to_string(),
        })?;
        Ok(CheckpointReader {
            path: path.to_path_buf(),
            input: BufReader::with_capacity(1 << 20, file),
            offset: 0,
            buf: Vec::new(),
        })
    }

    fn error(&self, reason: impl Into<String>) -> CheckpointError {
        CheckpointError {
            path: self.path.clone(),
            offset: self.offset,
            reason: reason.into(),
        }
    }

    /// The next record, or `None` at a clean end of file.
    fn next(&mut self) -> Result<Option<Record<'_>>, CheckpointError> {
        self.buf.resize(HEADER_BYTES, 0);
        let mut filled = 0;
        while filled < HEADER_BYTES {
            match self.input.read(&mut self.buf[filled..]) {
                Ok(0) if filled == 0 => return Ok(None),
                Ok(0) => return Err(self.error("file ends inside a record header")),
                Ok(n) => filled += n,
                Err(e) => return Err(self.error(e.to_string())),
            }
        }
        let header = record::parse_header(&self.buf).map_err(|e| self.error(e.to_string()))?;
        self.buf.resize(header.total_len, 0);
        if let Err(e) = self.input.read_exact(&mut self.buf[HEADER_BYTES..]) {
            return Err(self.error(format!("file ends inside a record ({e})")));
        }
        let at = self.offset;
        self.offset += header.total_len as u64;
        match record::decode_with_header(&self.buf, header) {
            Ok(record) => Ok(Some(record)),
            Err(e) => Err(CheckpointError {
                path: self.path.clone(),
                offset: at,
                reason: e.to_string(),
            }),
        }
    }

    /// Reads just the first record: the seed and sizes.
    pub(crate) fn meta(path: &Path) -> Result<CheckpointMeta, CheckpointError> {
        let mut reader = CheckpointReader::open(path)?;
        reader.read_meta()
    }

    fn read_meta(&mut self) -> Result<CheckpointMeta, CheckpointError> {
        let path = self.path.clone();
        let fail = failure(&path, 0);
        let record = self.next()?.ok_or_else(|| fail("empty file".into()))?;
        if record.kind != Kind::CheckpointBegin || record.key.len() < META_BYTES_V3 {
            return Err(fail("does not start with a checkpoint header".into()));
        }
        let u32_at = |at: usize| u32::from_le_bytes(record.key[at..at + 4].try_into().expect("4"));
        let version = u32_at(16);
        if !FORMAT_VERSIONS_READ.contains(&version) {
            return Err(fail(format!(
                "format version {version}, expected {FORMAT_VERSION}"
            )));
        }
        let expected_len = if version >= 4 {
            META_BYTES
        } else {
            META_BYTES_V3
        };
        if record.key.len() != expected_len {
            return Err(fail("does not start with a checkpoint header".into()));
        }
        let sharding = if version >= 4 {
            Sharding::from_code(u32_at(28))
                .ok_or_else(|| fail(format!("unknown sharding {}", u32_at(28))))?
        } else {
            Sharding::Hash
        };
        let meta = CheckpointMeta {
            seed: u64::from_le_bytes(record.key[..8].try_into().expect("8")),
            shard_count: u32_at(8),
            db_count: u32_at(12),
            first_shard: u32_at(20),
            shards: u32_at(24),
            sharding,
        };
        let range_ok = meta.shards as usize == SHARDS_PER_RANGE
            && (meta.first_shard as usize).is_multiple_of(SHARDS_PER_RANGE)
            && (meta.first_shard as usize) < SHARD_COUNT;
        if !range_ok {
            return Err(fail(format!(
                "holds shards {}..{}, not one range",
                meta.first_shard,
                meta.first_shard + meta.shards
            )));
        }
        if meta.shard_count as usize != SHARD_COUNT {
            return Err(fail(format!(
                "{} shards, this build has {SHARD_COUNT}",
                meta.shard_count
            )));
        }
        Ok(meta)
    }

    /// Reads the whole file, handing every key image to `visit` as
    /// (shard, record).
    pub(crate) fn read_all(
        mut self,
        mut visit: impl FnMut(usize, &Record) -> Result<(), String>,
    ) -> Result<CheckpointSummary, CheckpointError> {
        let meta = self.read_meta()?;
        let mut covered = Vec::with_capacity(SHARD_COUNT);
        let mut keys = 0u64;
        let path = self.path.clone();
        loop {
            let at = self.offset;
            let fail = failure(&path, at);
            let Some(record) = self.next()? else {
                return Err(fail("file ends without its end marker".into()));
            };
            match record.kind {
                Kind::CheckpointShard => {
                    if record.db as usize != meta.first_shard as usize + covered.len() {
                        return Err(fail(format!("shard {} out of order", record.db)));
                    }
                    covered.push(record.aux);
                }
                Kind::Meta if covered.len() == 1 && meta.first_shard == 0 => {
                    visit(0, &record).map_err(fail)?;
                }
                Kind::Set | Kind::CheckpointCold if !covered.is_empty() => {
                    let shard = meta.first_shard as usize + covered.len() - 1;
                    keys += 1;
                    visit(shard, &record).map_err(fail)?;
                }
                Kind::CheckpointEnd => {
                    let next_lsn = record.aux;
                    let counted = record.key.try_into().map(u64::from_le_bytes).ok();
                    if covered.len() != meta.shards as usize || counted != Some(keys) {
                        return Err(fail("end marker does not match the contents".into()));
                    }
                    if self.next()?.is_some() {
                        return Err(failure(&path, at)("data after the end marker".into()));
                    }
                    return Ok(CheckpointSummary {
                        meta,
                        covered,
                        next_lsn,
                        keys,
                        bytes: self.offset,
                    });
                }
                other => return Err(fail(format!("unexpected {other:?} record"))),
            }
        }
    }
}
