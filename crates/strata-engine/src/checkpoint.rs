//! Fork-free checkpoints.
//!
//! A checkpoint is a file of log records holding every live key's full
//! image, written shard by shard while the server keeps serving: each shard
//! is locked only while its entries are encoded into a buffer (about
//! 1/1024 of the data, which also bounds the extra memory), then the buffer
//! is written without any lock, at a bounded rate.
//!
//! Shards are copied at different moments, so the file is not one instant
//! of the whole keyspace. It does not need to be: before copying shard `i`
//! the checkpoint notes `L_i`, the LSN the next record will get. Every
//! record of shard `i` below `L_i` is already reflected in the copy and
//! none at or above it is (records are committed under the shard lock).
//! Recovery loads the file, then replays the log from `min L_i`, skipping
//! for each shard the records below its `L_i`. The result is exact, even
//! for SWAPDB, which replaying twice would undo.
//!
//! ```text
//! CheckpointBegin  key: seed u64, shard count u32, db count u32, version u32
//! CheckpointShard  db: shard index, aux: L_i          ┐ once per shard,
//! Set …            the shard's live keys, lsn: L_i    ┘ in shard order
//! CheckpointEnd    aux: next LSN when done, key: key count u64
//! ```
//!
//! The file is written as `checkpoint.tmp`, fsynced, renamed to
//! `checkpoint-<min L_i>.ckpt` and the directory fsynced; only then are
//! older checkpoints and the log segments it covers deleted. A crash at any
//! point leaves either the old checkpoint with its log, or the new one.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::keyspace::{Keyspace, SHARD_COUNT};
use crate::log::sync_dir;
use crate::record::{self, Draft, FLAG_INT, HEADER_BYTES, Kind, Record};

const FORMAT_VERSION: u32 = 1;
const TEMP_NAME: &str = "checkpoint.tmp";
/// Bytes written between two `fdatasync`s of a checkpoint, so its data
/// reaches the disk steadily instead of in one burst at the end that would
/// stall the log's own fsyncs.
const SYNC_EVERY_BYTES: u64 = 32 << 20;

/// The file name of the checkpoint whose replay starts at `lsn`.
pub fn checkpoint_path(dir: &Path, lsn: u64) -> PathBuf {
    dir.join(format!("checkpoint-{lsn:020}.ckpt"))
}

pub fn checkpoint_lsn(name: &str) -> Option<u64> {
    name.strip_prefix("checkpoint-")?
        .strip_suffix(".ckpt")?
        .parse()
        .ok()
}

/// What a finished checkpoint covers.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    pub path: PathBuf,
    /// The log must be replayed from this LSN.
    pub replay_from: u64,
    /// The LSN the next write got when the checkpoint finished.
    pub next_lsn: u64,
    pub keys: u64,
    pub bytes: u64,
}

/// Writes a checkpoint of `keyspace` into `dir`. `next_lsn` reads the
/// log's next LSN (called with the shard lock held); `bytes_per_s` bounds
/// the write rate (0: unbounded). Deletes older checkpoints when done.
pub fn write(
    keyspace: &Keyspace,
    dir: &Path,
    next_lsn: &dyn Fn() -> u64,
    bytes_per_s: u64,
    now_ms: u64,
) -> std::io::Result<CheckpointInfo> {
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(TEMP_NAME);
    let mut out = DirectWriter::create(&temp)?;
    let mut buf = Vec::new();
    let mut meta = Vec::with_capacity(20);
    meta.extend_from_slice(&keyspace.seed().to_le_bytes());
    meta.extend_from_slice(&(SHARD_COUNT as u32).to_le_bytes());
    meta.extend_from_slice(&(keyspace.db_count() as u32).to_le_bytes());
    meta.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    sealed(&mut buf, marker(Kind::CheckpointBegin, 0, 0, &meta), 0);
    let started = Instant::now();
    let mut written: u64 = 0;
    let mut synced_at: u64 = 0;
    let mut keys: u64 = 0;
    let mut replay_from = None;
    for index in 0..SHARD_COUNT {
        {
            let shard = keyspace.lock_unlogged(index);
            let covered = next_lsn();
            replay_from.get_or_insert(covered);
            let shard_marker = marker(Kind::CheckpointShard, index as u16, covered, &[]);
            sealed(&mut buf, shard_marker, covered);
            for db in 0..keyspace.db_count() {
                for entry in shard.entries(db) {
                    if entry.expire_at_ms().is_some_and(|at| at <= now_ms) {
                        continue;
                    }
                    let value = entry.value();
                    let flags = if value.as_int().is_some() {
                        FLAG_INT
                    } else {
                        0
                    };
                    let aux = entry.expire_at_ms().unwrap_or(0);
                    let image = Draft {
                        kind: Kind::Set,
                        db: db as u16,
                        aux,
                        flags,
                        key: entry.key(),
                        payload: value.as_bytes(),
                    };
                    sealed(&mut buf, image, covered);
                    keys += 1;
                }
            }
        }
        out.write_all(&buf)?;
        written += buf.len() as u64;
        buf.clear();
        if written - synced_at >= SYNC_EVERY_BYTES {
            out.sync()?;
            synced_at = written;
        }
        throttle(started, written, bytes_per_s);
    }
    let next = next_lsn();
    let count = keys.to_le_bytes();
    sealed(&mut buf, marker(Kind::CheckpointEnd, 0, next, &count), next);
    out.write_all(&buf)?;
    written += buf.len() as u64;
    out.finish()?;
    let replay_from = replay_from.expect("at least one shard");
    let path = checkpoint_path(dir, replay_from);
    std::fs::rename(&temp, &path)?;
    sync_dir(dir)?;
    for (lsn, older) in list(dir)? {
        if lsn != replay_from {
            std::fs::remove_file(older)?;
        }
    }
    sync_dir(dir)?;
    Ok(CheckpointInfo {
        path,
        replay_from,
        next_lsn: next,
        keys,
        bytes: written,
    })
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
        key,
        payload: &[],
    }
}

/// Sleeps as needed to keep `written` bytes since `started` under
/// `bytes_per_s`.
fn throttle(started: Instant, written: u64, bytes_per_s: u64) {
    if bytes_per_s == 0 {
        return;
    }
    let due = Duration::from_secs_f64(written as f64 / bytes_per_s as f64);
    if let Some(ahead) = due.checked_sub(started.elapsed()) {
        std::thread::sleep(ahead);
    }
}

/// Checkpoint files in `dir`, oldest first, as (replay-from LSN, path).
pub fn list(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if let Some(lsn) = entry.file_name().to_str().and_then(checkpoint_lsn) {
            found.push((lsn, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// A checkpoint's header fields.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointMeta {
    pub seed: u64,
    pub shard_count: u32,
    pub db_count: u32,
}

/// A problem found in a checkpoint file.
#[derive(Debug)]
pub struct CheckpointError {
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
pub struct CheckpointReader {
    path: PathBuf,
    input: BufReader<File>,
    offset: u64,
    buf: Vec<u8>,
}

/// What a complete checkpoint holds besides its keys.
#[derive(Clone, Debug)]
pub struct CheckpointSummary {
    pub meta: CheckpointMeta,
    /// `L_i` of every shard.
    pub covered: Vec<u64>,
    pub next_lsn: u64,
    pub keys: u64,
    pub bytes: u64,
}

impl CheckpointReader {
    pub fn open(path: &Path) -> Result<CheckpointReader, CheckpointError> {
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
    pub fn meta(path: &Path) -> Result<CheckpointMeta, CheckpointError> {
        let mut reader = CheckpointReader::open(path)?;
        reader.read_meta()
    }

    fn read_meta(&mut self) -> Result<CheckpointMeta, CheckpointError> {
        let path = self.path.clone();
        let fail = failure(&path, 0);
        let record = self.next()?.ok_or_else(|| fail("empty file".into()))?;
        if record.kind != Kind::CheckpointBegin || record.key.len() != 20 {
            return Err(fail("does not start with a checkpoint header".into()));
        }
        let u32_at = |at: usize| u32::from_le_bytes(record.key[at..at + 4].try_into().expect("4"));
        let meta = CheckpointMeta {
            seed: u64::from_le_bytes(record.key[..8].try_into().expect("8")),
            shard_count: u32_at(8),
            db_count: u32_at(12),
        };
        let version = u32_at(16);
        if version != FORMAT_VERSION {
            return Err(fail(format!(
                "format version {version}, expected {FORMAT_VERSION}"
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
    pub fn read_all(
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
                    if record.db as usize != covered.len() {
                        return Err(fail(format!("shard {} out of order", record.db)));
                    }
                    covered.push(record.aux);
                }
                Kind::Set if !covered.is_empty() => {
                    let shard = covered.len() - 1;
                    keys += 1;
                    visit(shard, &record).map_err(fail)?;
                }
                Kind::CheckpointEnd => {
                    let next_lsn = record.aux;
                    let counted = record.key.try_into().map(u64::from_le_bytes).ok();
                    if covered.len() != SHARD_COUNT || counted != Some(keys) {
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
