//! The append-only log: segment files, group commit, fsync policy.
//!
//! Commands never touch a file. While a command holds its shard lock(s) it
//! encodes its records into its lock set's *group* (`storage::group`); when
//! the lock set is released the group is *committed*
//! ([`Log::commit`]): under one short mutex it gets consecutive LSNs, its
//! header CRCs, and is copied into the pending buffer. That keeps per-key
//! log order equal to apply order (DESIGN.md invariant 2) without holding a
//! shard lock across I/O (invariant 4).
//!
//! A write round takes everything pending — the records of every network
//! thread since the last round — and writes it with one `write` (group
//! commit), then, by policy, one `fdatasync`. Under `everysec` and `no` a
//! network thread runs the round itself when its connections wait for the
//! log ([`Log::flush_now`], after letting its other ready connections run
//! first), so no thread hop stands between a command and its reply; the
//! writer thread covers `always`, commits from other threads, and retries.
//! By policy:
//! - `always`: every round is synced before its LSNs count as durable;
//!   clients waiting on those LSNs share the fsync;
//! - `everysec`: rounds count as durable once written (a process crash
//!   loses nothing: the page cache survives it); a separate sync thread
//!   fsyncs once a second, so writes never wait for the disk (as Redis'
//!   background fsync);
//! - `no`: the OS decides when to write back.
//!
//! Progress is published as two watermarks, *written* and *synced*; the
//! server holds a reply until the watermark its policy needs covers the
//! command's LSN (invariant 1).
//!
//! Segments have a maximum size; a group never spans two segments, and a
//! segment is synced before the next one is created, so only the newest
//! segment can ever have a torn tail. A failed write (disk full, I/O error)
//! truncates the partial bytes away, keeps the records pending and retries
//! every [`RETRY_INTERVAL`]; meanwhile [`Log::write_error`] says why, and
//! the server refuses new writes with `-MISCONF`. A failed `fdatasync`
//! cannot be retried safely (the kernel may have dropped the dirty pages),
//! so it is sticky: nothing after it is ever reported synced, and writes
//! stay refused until a restart recovers from what the disk really holds.
//! Whoever waits for the synced watermark is told ([`Log::wait_durable`]
//! returns, [`Log::fsync_failed`] says why), rather than waiting for ever.

use std::cell::Cell;
use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::feed::Feed;
use crate::keyspace::commit::Changed;
use crate::storage::progress::Progress;
use crate::storage::record::{self, FLAG_GROUP_CONTINUES};
use crate::storage::segment_file::SegmentFile;

/// Pending (not yet written) bytes above which [`Log::backlogged`] asks
/// connections to wait before running more commands.
pub(crate) const PENDING_BYTES_MAX: usize = 64 << 20;
/// How long the writer waits before retrying after a failed write.
pub(crate) const RETRY_INTERVAL: Duration = Duration::from_millis(500);
/// Longest time between two fsyncs under `everysec`.
const EVERYSEC_INTERVAL: Duration = Duration::from_secs(1);
/// Write rounds one [`Log::flush_now`] caller runs at most.
const DRAIN_ROUNDS_MAX: usize = 4;
/// How often the writer thread looks for pending records nobody wrote.
const WRITER_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The same once nothing was committed for [`SPARE_IDLE_RELEASE`]: an idle
/// server's writer wakes 10 times a second, not 100 (a tenth of a percent
/// of a core). Only a record committed by a thread that writes for itself
/// and then did not (none is known) could wait this long, once.
const WRITER_IDLE_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Emptied chunk buffers kept for reuse (the largest ones).
const SPARE_CHUNKS_MAX: usize = 2;
/// A spare chunk buffer larger than this is freed instead of kept: one
/// huge record (a 512 MB SETRANGE) must not pin its buffer for good, while
/// the buffers of ordinary rounds (a few MB at most) are reused.
const SPARE_CHUNK_BYTES_MAX: usize = 8 << 20;
/// Spare chunk buffers are freed once nothing was committed for this long.
const SPARE_IDLE_RELEASE: Duration = Duration::from_secs(1);
/// Capacity of a fresh chunk buffer.
const CHUNK_BYTES_INITIAL: usize = 1 << 20;

/// When the log is fsynced (`appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FsyncPolicy {
    Always = 0,
    EverySec = 1,
    No = 2,
}

impl FsyncPolicy {
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }

    pub fn parse(text: &str) -> Option<FsyncPolicy> {
        match text.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::EverySec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }

    fn from_u8(byte: u8) -> FsyncPolicy {
        match byte {
            0 => FsyncPolicy::Always,
            1 => FsyncPolicy::EverySec,
            _ => FsyncPolicy::No,
        }
    }
}

/// One segment file as the log knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    pub seq: u64,
    /// LSNs of its first and last record; `None` when it holds none.
    pub lsns: Option<(u64, u64)>,
    pub bytes: u64,
}

/// The file name of segment `seq`.
pub(crate) fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("segment-{seq:010}.log"))
}

/// Parses a segment file name back into its sequence number.
pub(crate) fn segment_seq(name: &str) -> Option<u64> {
    name.strip_prefix("segment-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// Where the log starts, as recovery left it.
pub struct LogStart {
    /// The LSN the next record gets.
    pub next_lsn: u64,
    /// Sequence number for the first new segment.
    pub next_segment: u64,
    /// Segments already on disk (recovered), oldest first.
    pub segments: Vec<SegmentInfo>,
}

/// What only the thread currently writing may touch.
#[derive(Default)]
struct Output {
    file: Option<OpenSegment>,
    failing: bool,
}

/// The segment file the writer appends to.
struct OpenSegment {
    seq: u64,
    file: SegmentFile,
}

/// Bytes handed over to the writer for one segment.
struct Chunk {
    segment: u64,
    bytes: Vec<u8>,
    first_lsn: u64,
    last_lsn: u64,
}

struct Pending {
    next_lsn: u64,
    chunks: Vec<Chunk>,
    /// Segment that new records go to, and its size including pending.
    head_segment: u64,
    head_bytes: u64,
    writer_idle: bool,
    shutdown: bool,
    /// Emptied chunk buffers, reused to avoid reallocating.
    spare: Vec<Vec<u8>>,
    /// The last replication position committed (`repl_position`), if any
    /// since start: kept here so a checkpoint reads it together with the
    /// next LSN.
    position: Option<Vec<u8>>,
}

/// Counters for INFO persistence.
#[derive(Default)]
pub struct LogStats {
    pub bytes_written: AtomicU64,
    pub writes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub write_errors: AtomicU64,
    /// Microseconds spent in the most recent fsync.
    pub last_fsync_us: AtomicU64,
}

pub struct Log {
    dir: PathBuf,
    segment_bytes_max: u64,
    state: Mutex<Pending>,
    wake: Condvar,
    written_lsn: AtomicU64,
    synced_lsn: AtomicU64,
    /// Location (`location::loc`) of the end of the bytes written so far: a
    /// record starting before it can be read back from its file.
    written_pos: AtomicU64,
    /// Committed bytes not yet written; read on every connection turn, so
    /// an atomic rather than the state mutex.
    pending_bytes: AtomicUsize,
    /// Capacity of every chunk buffer the log owns (pending, being
    /// written, spare): read on every command while RAM is over budget, so
    /// kept here rather than summed under the state mutex.
    buffer_capacity: AtomicUsize,
    fsync: AtomicU8,
    /// Whether segments opened from now on are written with `O_DIRECT`
    /// (`segment_file`); on by default.
    direct_io: AtomicBool,
    has_error: AtomicBool,
    error: Mutex<Option<String>>,
    fsync_failed: AtomicBool,
    /// Set by [`Log::fail_next_fsync`] (DEBUG FAIL-FSYNC): the next fsync
    /// fails as if the device had refused it.
    fail_next_fsync: AtomicBool,
    segments: Mutex<Vec<SegmentInfo>>,
    /// Wakes whoever waits for `written_lsn` / `synced_lsn` to move.
    progress: Progress,
    pub stats: LogStats,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Held by whichever thread is writing (a network thread or the writer
    /// thread): one writer at a time keeps the file append-only and LSNs
    /// in order.
    output: Mutex<Output>,
    /// The segment last written and the LSN written to it: what the
    /// `everysec` sync thread syncs next.
    to_sync: Mutex<Option<(Arc<File>, u64)>>,
    syncer_stop: Mutex<bool>,
    syncer_wake: Condvar,
    syncer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// What `log/HEAD` says (`crate::storage::head`), changed under this lock.
    head: Mutex<crate::storage::head::Head>,
}

impl Log {
    /// Starts the log in `dir` (which recovery has already read) and its
    /// writer thread.
    pub fn start(
        dir: &Path,
        segment_bytes_max: u64,
        fsync: FsyncPolicy,
        start: LogStart,
    ) -> std::io::Result<Arc<Log>> {
        std::fs::create_dir_all(dir)?;
        remove_trash(dir)?;
        let head = match crate::storage::head::read(dir).map_err(std::io::Error::other)? {
            Some(head) => head,
            // A directory from before HEAD: it starts knowing the newest
            // segment there now.
            None => {
                let head = crate::storage::head::Head {
                    newest: start.segments.last().map_or(0, |s| s.seq),
                    deleted_below: 0,
                };
                if head.newest > 0 {
                    crate::storage::head::write(dir, head)?;
                }
                head
            }
        };
        let last = start.next_lsn.saturating_sub(1);
        let log = Arc::new(Log {
            dir: dir.to_path_buf(),
            segment_bytes_max,
            state: Mutex::new(Pending {
                next_lsn: start.next_lsn,
                chunks: Vec::new(),
                head_segment: start.next_segment,
                head_bytes: 0,
                writer_idle: false,
                shutdown: false,
                spare: Vec::new(),
                position: None,
            }),
            wake: Condvar::new(),
            written_lsn: AtomicU64::new(last),
            // Every segment before the first new one is on disk: values
            // located there can leave RAM before anything new is written.
            written_pos: AtomicU64::new(crate::tiering::location::loc(start.next_segment, 0)),
            pending_bytes: AtomicUsize::new(0),
            buffer_capacity: AtomicUsize::new(0),
            synced_lsn: AtomicU64::new(last),
            fsync: AtomicU8::new(fsync as u8),
            direct_io: AtomicBool::new(true),
            has_error: AtomicBool::new(false),
            error: Mutex::new(None),
            fsync_failed: AtomicBool::new(false),
            fail_next_fsync: AtomicBool::new(false),
            segments: Mutex::new(start.segments),
            progress: Progress::default(),
            stats: LogStats::default(),
            writer: Mutex::new(None),
            output: Mutex::new(Output::default()),
            to_sync: Mutex::new(None),
            syncer_stop: Mutex::new(false),
            syncer_wake: Condvar::new(),
            syncer: Mutex::new(None),
            head: Mutex::new(head),
        });
        let writer = log.clone();
        let handle = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || writer.run_writer())?;
        *log.writer.lock() = Some(handle);
        let syncer = log.clone();
        let handle = std::thread::Builder::new()
            .name("log-sync".into())
            .spawn(move || syncer.run_syncer())?;
        *log.syncer.lock() = Some(handle);
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn fsync_policy(&self) -> FsyncPolicy {
        FsyncPolicy::from_u8(self.fsync.load(Ordering::Relaxed))
    }

    /// Writes segments opened from now on with `O_DIRECT` (where the file
    /// system allows it) or through the page cache (`log-direct-io`).
    pub fn set_direct_io(&self, direct: bool) {
        self.direct_io.store(direct, Ordering::Relaxed);
    }

    /// Changes the policy now. Moving to `always` also syncs what was
    /// written under the policy before: replies are held for the synced
    /// watermark from now on, and a client whose record was written (and
    /// answered) but not yet synced would otherwise wait, with CONFIG
    /// SET's own reply, for an fsync that only the next write's round
    /// would make.
    pub fn set_fsync_policy(&self, policy: FsyncPolicy) {
        let before = FsyncPolicy::from_u8(self.fsync.swap(policy as u8, Ordering::AcqRel));
        self.wake.notify_one();
        if policy == FsyncPolicy::Always && before != FsyncPolicy::Always {
            self.sync_now();
        }
    }

    /// The LSN the next committed record will get.
    pub fn next_lsn(&self) -> u64 {
        self.state.lock().next_lsn
    }

    /// The next LSN and the last replication position committed below
    /// it, read together (a checkpoint's copy of shard 0 covers both).
    pub(crate) fn next_lsn_and_position(&self) -> (u64, Option<Vec<u8>>) {
        let state = self.state.lock();
        (state.next_lsn, state.position.clone())
    }

    /// The last replication position committed since start (empty: one
    /// was cleared).
    pub fn position(&self) -> Option<Vec<u8>> {
        self.state.lock().position.clone()
    }

    pub fn written_lsn(&self) -> u64 {
        self.written_lsn.load(Ordering::Acquire)
    }

    /// End of the written bytes, as a location: records placed before it
    /// are in their segment file.
    pub(crate) fn written_pos(&self) -> u64 {
        self.written_pos.load(Ordering::Acquire)
    }

    pub fn synced_lsn(&self) -> u64 {
        self.synced_lsn.load(Ordering::Acquire)
    }

    /// The LSN up to which replies may be released under the current
    /// policy.
    pub fn durable_lsn(&self) -> u64 {
        match self.fsync_policy() {
            FsyncPolicy::Always => self.synced_lsn(),
            FsyncPolicy::EverySec | FsyncPolicy::No => self.written_lsn(),
        }
    }

    /// Ready once every record up to `lsn` is durable under the policy in
    /// force when it is checked ([`Log::durable_lsn`]): what a reply waits
    /// for before it leaves.
    ///
    /// Also ready, under `always`, once an fsync has failed: nothing after
    /// it will ever count as durable, and the caller must not wait for
    /// ever ([`Log::fsync_failed`] says so). (Under `everysec` and `no`
    /// replies wait for the write only, which goes on.)
    pub fn wait_durable(&self, lsn: u64) -> impl Future<Output = ()> + Send + '_ {
        self.progress.until(move || {
            self.durable_lsn() >= lsn
                || (self.fsync_failed() && self.fsync_policy() == FsyncPolicy::Always)
        })
    }

    /// Whether an fsync has failed: sticky until a restart, which
    /// recovers from what the disk really holds.
    pub fn fsync_failed(&self) -> bool {
        self.fsync_failed.load(Ordering::Relaxed)
    }

    /// Makes the next fsync fail as if the device had refused it (DEBUG
    /// FAIL-FSYNC, for tests of what clients see then).
    pub fn fail_next_fsync(&self) {
        self.fail_next_fsync.store(true, Ordering::Relaxed);
    }

    /// Ready once the log has written or synced anything after this call
    /// (a writer held back by a full buffer waits for it).
    pub fn wait_progress(&self) -> impl Future<Output = ()> + Send + '_ {
        let seen = self.progress.advances();
        self.progress
            .until(move || self.progress.advances() != seen)
    }

    /// Why writes are failing, if they are.
    pub fn write_error(&self) -> Option<String> {
        if !self.has_error.load(Ordering::Relaxed) {
            return None;
        }
        self.error.lock().clone()
    }

    /// Whether so many bytes wait for the writer that connections should
    /// pause before running more commands.
    pub fn backlogged(&self) -> bool {
        self.pending_bytes() > PENDING_BYTES_MAX
    }

    /// Bytes of memory the log's buffers hold (pending chunks and the
    /// spare ones kept for reuse): like Redis' AOF buffer, not counted
    /// against the RAM budget.
    pub fn buffer_bytes(&self) -> u64 {
        self.buffer_capacity.load(Ordering::Relaxed) as u64
    }

    /// Frees the emptied buffers kept for reuse (RAM is short). Returns
    /// the bytes freed.
    pub fn release_spare_buffers(&self) -> usize {
        let mut state = self.state.lock();
        let mut freed = 0;
        for dropped in state.spare.drain(..) {
            freed += dropped.capacity();
        }
        self.buffer_capacity.fetch_sub(freed, Ordering::Relaxed);
        freed
    }

    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes.load(Ordering::Relaxed)
    }

    /// Segments on disk, oldest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.segments.lock().clone()
    }

    pub fn disk_bytes(&self) -> u64 {
        self.segments.lock().iter().map(|s| s.bytes).sum()
    }

    /// Assigns LSNs to the encoded records in `group`, seals them and
    /// queues them for the writer. Returns the last LSN and where the
    /// group starts (segment, offset). Called with the shard locks that
    /// cover the group still held.
    /// `feed`, when given, gets the group's changes (and, when it wants
    /// them, the sealed records) inside the same critical section, so its
    /// order is the log's.
    pub fn commit(&self, group: &mut [u8], feed: Option<(&Feed, &Changed)>) -> Committed {
        self.commit_positioned(group, feed, None)
    }

    /// [`Log::commit`] of a group whose record at byte `position_at` is
    /// a replication position (`repl_position`), remembered as the last
    /// one in the same critical section that numbers it.
    pub(crate) fn commit_positioned(
        &self,
        group: &mut [u8],
        feed: Option<(&Feed, &Changed)>,
        position_at: Option<usize>,
    ) -> Committed {
        debug_assert!(!group.is_empty());
        let mut state = self.state.lock();
        let first_lsn = state.next_lsn;
        let mut lsn = first_lsn;
        let mut at = 0;
        while at < group.len() {
            let len = record::encoded_len(&group[at..]);
            let last = at + len == group.len();
            let flags = if last { 0 } else { FLAG_GROUP_CONTINUES };
            record::seal(&mut group[at..at + len], lsn, flags);
            at += len;
            lsn += 1;
        }
        let last_lsn = lsn - 1;
        state.next_lsn = lsn;
        if let Some(at) = position_at {
            let record = record::decode(&group[at..]).expect("a position record just sealed");
            let kept = state.position.get_or_insert_with(Vec::new);
            kept.clear();
            kept.extend_from_slice(record.payload);
        }
        if let Some((feed, changed)) = feed.filter(|(feed, _)| feed.is_active()) {
            feed.publish(last_lsn, changed, group);
        }
        let len = group.len() as u64;
        if state.head_bytes > 0 && state.head_bytes + len > self.segment_bytes_max {
            state.head_segment += 1;
            state.head_bytes = 0;
        }
        let placed_at = (state.head_segment, state.head_bytes);
        state.head_bytes += len;
        self.pending_bytes.fetch_add(group.len(), Ordering::Relaxed);
        let segment = state.head_segment;
        match state.chunks.last_mut() {
            Some(chunk) if chunk.segment == segment => {
                let before = chunk.bytes.capacity();
                chunk.bytes.extend_from_slice(group);
                chunk.last_lsn = last_lsn;
                self.buffer_capacity
                    .fetch_add(chunk.bytes.capacity() - before, Ordering::Relaxed);
            }
            _ => {
                let (mut bytes, before) = if state.spare.is_empty() {
                    (Vec::with_capacity(CHUNK_BYTES_INITIAL), 0)
                } else {
                    let spare = state.spare.swap_remove(0);
                    let capacity = spare.capacity();
                    (spare, capacity)
                };
                bytes.extend_from_slice(group);
                self.buffer_capacity
                    .fetch_add(bytes.capacity() - before, Ordering::Relaxed);
                state.chunks.push(Chunk {
                    segment,
                    bytes,
                    first_lsn,
                    last_lsn,
                });
            }
        }
        if state.writer_idle && !FLUSHES_ITSELF.get() {
            state.writer_idle = false;
            self.wake.notify_one();
        }
        Committed {
            last_lsn,
            segment: placed_at.0,
            offset: placed_at.1,
        }
    }

    /// Makes the next commit start a new segment. A checkpoint cycle does
    /// this first, so that when it completes, every segment before it can
    /// be deleted rather than kept for its uncovered tail.
    pub(crate) fn roll_segment(&self) {
        let mut state = self.state.lock();
        if state.head_bytes > 0 {
            state.head_segment += 1;
            state.head_bytes = 0;
        }
    }

    /// The segment new records go to.
    pub(crate) fn head_segment(&self) -> u64 {
        self.state.lock().head_segment
    }

    /// Stops the writer after it has written (and synced) everything
    /// committed so far.
    pub fn shutdown(&self) {
        self.state.lock().shutdown = true;
        self.wake.notify_one();
        if let Some(handle) = self.writer.lock().take() {
            let _ = handle.join();
        }
        *self.syncer_stop.lock() = true;
        self.syncer_wake.notify_one();
        if let Some(handle) = self.syncer.lock().take() {
            let _ = handle.join();
        }
    }

    /// Deletes every closed segment whose records all have LSNs below
    /// `lsn` (a checkpoint covers them) and for which `keep` says no.
    /// Returns the deleted segments.
    pub(crate) fn delete_segments_before(
        &self,
        lsn: u64,
        keep: impl Fn(u64) -> bool,
    ) -> std::io::Result<Vec<u64>> {
        // Which segments go is decided with no write round in flight (one
        // could be appending to a segment about to go), and no segment
        // still receiving records — the head, or one with chunks pending —
        // is chosen. Rounds after that only write at or past the head,
        // so the files are removed without holding up the writers:
        // unlinking a 64 MB segment and syncing the directory took tens
        // of milliseconds, a stall of every write when done under the
        // output lock.
        let doomed: Vec<SegmentInfo> = {
            let _output = self.output.lock();
            let (head, pending): (u64, Vec<u64>) = {
                let state = self.state.lock();
                let pending = state.chunks.iter().map(|c| c.segment).collect();
                (state.head_segment, pending)
            };
            let mut segments = self.segments.lock();
            let (doomed, kept) = segments.drain(..).partition(|segment: &SegmentInfo| {
                let covered = segment.lsns.is_none_or(|(_, last)| last < lsn);
                covered
                    && segment.seq < head
                    && !pending.contains(&segment.seq)
                    && !keep(segment.seq)
            });
            *segments = kept;
            doomed
        };
        // HEAD's segment goes (a checkpoint covered it whole): HEAD says so
        // before the file is renamed, or a crash between the two would
        // leave HEAD naming a segment the log removed, which recovery
        // takes for lost. A HEAD that cannot be written deletes nothing.
        {
            let mut head = self.head.lock();
            if doomed.iter().any(|s| s.seq == head.newest) && !head.newest_deleted() {
                let next = crate::storage::head::Head {
                    deleted_below: head.newest + 1,
                    ..*head
                };
                if let Err(error) = crate::storage::head::write(&self.dir, next) {
                    drop(head);
                    let mut segments = self.segments.lock();
                    segments.extend(doomed);
                    segments.sort_unstable_by_key(|segment| segment.seq);
                    return Err(error);
                }
                *head = next;
            }
        }
        let mut deleted = Vec::with_capacity(doomed.len());
        let mut failed = None;
        let mut back = Vec::new();
        for segment in doomed {
            if failed.is_some() {
                back.push(segment);
                continue;
            }
            let path = segment_path(&self.dir, segment.seq);
            match std::fs::rename(&path, trash_path(&path)) {
                Ok(()) => deleted.push(segment.seq),
                Err(e) => {
                    failed = Some(e);
                    back.push(segment);
                }
            }
        }
        if !back.is_empty() {
            let mut segments = self.segments.lock();
            segments.extend(back);
            segments.sort_unstable_by_key(|segment| segment.seq);
        }
        // The renames are durable before any file shrinks: a crash leaves
        // whole segments or trash, never a cut segment.
        sync_dir(&self.dir)?;
        for &seq in &deleted {
            // Best effort: a renamed segment is gone for recovery already,
            // and trash a failed removal leaves is removed at next start.
            let _ = remove_gradually(&trash_path(&segment_path(&self.dir, seq)));
        }
        if let Some(error) = failed {
            return Err(error);
        }
        Ok(deleted)
    }

    fn set_error(&self, message: String) {
        *self.error.lock() = Some(message);
        self.has_error.store(true, Ordering::Relaxed);
    }

    fn clear_error(&self) {
        if self.fsync_failed.load(Ordering::Relaxed) {
            return;
        }
        self.has_error.store(false, Ordering::Relaxed);
        *self.error.lock() = None;
    }

    /// Writes everything committed so far and fsyncs it, whatever the
    /// policy: a checkpoint calls this before it names locations in the
    /// log, so that no checkpoint can outlive the records it points at.
    /// Returns false if the log cannot write or sync.
    pub fn sync_now(&self) -> bool {
        // The first round writes everything committed before this call.
        // The fsync runs after the output lock is released: writers go on
        // appending meanwhile (a checkpoint cycle calls this once per range
        // file, and each fsync under the lock stalled every write for its
        // duration). A segment closed meanwhile was synced when it closed.
        let (file, written) = {
            let mut output = self.output.lock();
            self.drain(&mut output);
            let file = output.file.as_ref().map(|open| open.file.file().clone());
            (file, self.written_lsn())
        };
        if let Some(file) = file {
            self.sync(&file, written);
            // Wakes whoever waits for the synced watermark (`always`).
            self.progress.advanced();
        }
        !self.has_error.load(Ordering::Relaxed) && !self.fsync_failed.load(Ordering::Relaxed)
    }

    /// Writes everything pending now, on the calling thread, unless
    /// another thread is already writing or the policy is `always` (then
    /// the writer thread is asked to). Network threads call this when their connections
    /// wait for the log: one `write` covers every record committed since
    /// the last one, and no thread hop stands between a command and its
    /// reply. A round that starts a new segment is also left to the
    /// writer thread. While writes are failing, retries are left to the writer
    /// thread's schedule.
    pub fn flush_now(&self) {
        if self.has_error.load(Ordering::Relaxed) {
            return;
        }
        // `always` stays on the writer thread: a network thread in fsync
        // would stall its other connections, reads included.
        if self.fsync_policy() == FsyncPolicy::Always {
            self.wake.notify_one();
            return;
        }
        let Some(mut output) = self.output.try_lock() else {
            self.wake.notify_one();
            return;
        };
        // Moving to a new segment syncs the one before (tens of
        // milliseconds under load): the writer thread does that, so this
        // thread's other connections, reads included, are not held up.
        let open = output.file.as_ref().map(|open| open.seq);
        let rolls = self
            .state
            .lock()
            .chunks
            .iter()
            .any(|chunk| Some(chunk.segment) != open);
        if rolls {
            drop(output);
            self.wake.notify_one();
            return;
        }
        self.drain(&mut output);
    }

    /// Runs write rounds until nothing is pending (bounded, so a steady
    /// stream of commits cannot keep one caller here forever).
    fn drain(&self, output: &mut Output) {
        for _ in 0..DRAIN_ROUNDS_MAX {
            if !self.round(output) {
                return;
            }
        }
    }

    /// One write round: takes every pending chunk, writes it, syncs under
    /// `always`, publishes progress. Returns whether it wrote anything
    /// without error.
    fn round(&self, output: &mut Output) -> bool {
        let (chunks, shutdown) = {
            let mut state = self.state.lock();
            (std::mem::take(&mut state.chunks), state.shutdown)
        };
        if chunks.is_empty() {
            return false;
        }
        let mut written_to = None;
        let mut failed_at = None;
        for (index, chunk) in chunks.iter().enumerate() {
            match self.write_chunk(&mut output.file, chunk) {
                Ok(()) => written_to = Some(chunk.last_lsn),
                Err(error) => {
                    failed_at = Some((index, error));
                    break;
                }
            }
        }
        if let Some(last) = written_to {
            self.written_lsn.store(last, Ordering::Release);
            let open = output.file.as_ref().expect("written to an open segment");
            *self.to_sync.lock() = Some((open.file.file().clone(), last));
        }
        // `always` syncs in the same round, so every client whose record
        // was in it shares this one fsync; `everysec` leaves it to the sync
        // thread so writes never wait for the disk.
        if (self.fsync_policy() == FsyncPolicy::Always || shutdown)
            && let Some(open) = &output.file
        {
            self.sync(open.file.file(), self.written_lsn());
        }
        self.progress.advanced();
        let mut state = self.state.lock();
        match failed_at {
            Some((index, error)) => {
                output.failing = true;
                self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
                self.set_error(error.to_string());
                // Put the unwritten chunks back in front of anything
                // committed meanwhile, keeping LSN order.
                let mut retry: Vec<Chunk> = chunks.into_iter().skip(index).collect();
                retry.append(&mut state.chunks);
                state.chunks = retry;
                false
            }
            None => {
                if output.failing {
                    output.failing = false;
                    self.clear_error();
                }
                for chunk in chunks {
                    self.pending_bytes
                        .fetch_sub(chunk.bytes.len(), Ordering::Relaxed);
                    let mut bytes = chunk.bytes;
                    bytes.clear();
                    if bytes.capacity() > SPARE_CHUNK_BYTES_MAX {
                        self.buffer_capacity
                            .fetch_sub(bytes.capacity(), Ordering::Relaxed);
                        continue;
                    }
                    // Keep the largest buffers: a chunk that grows under
                    // the log mutex page-faults fresh memory.
                    state.spare.push(bytes);
                    state
                        .spare
                        .sort_unstable_by_key(|b| std::cmp::Reverse(b.capacity()));
                    let kept = SPARE_CHUNKS_MAX.min(state.spare.len());
                    for dropped in state.spare.drain(kept..) {
                        self.buffer_capacity
                            .fetch_sub(dropped.capacity(), Ordering::Relaxed);
                    }
                }
                true
            }
        }
    }

    /// The writer thread: writes what threads that do not write for
    /// themselves commit (expiry, or a network thread that found another
    /// writing), retries after errors, and makes sure nothing pending
    /// waits longer than [`WRITER_POLL_INTERVAL`] (while the log moves).
    fn run_writer(self: Arc<Self>) {
        // (next LSN, when it was first seen): the log is idle once it has
        // not moved for SPARE_IDLE_RELEASE.
        let mut quiet_since = (0, Instant::now());
        loop {
            let shutdown = {
                let mut state = self.state.lock();
                if state.next_lsn != quiet_since.0 {
                    quiet_since = (state.next_lsn, Instant::now());
                } else if !state.spare.is_empty() && quiet_since.1.elapsed() >= SPARE_IDLE_RELEASE {
                    // Nothing committed for a while: reuse buys nothing
                    // now, and an idle server should hold no buffers.
                    let freed: usize = state.spare.drain(..).map(|b| b.capacity()).sum();
                    self.buffer_capacity.fetch_sub(freed, Ordering::Relaxed);
                }
                if state.chunks.is_empty() && !state.shutdown {
                    state.writer_idle = true;
                    let wait = if self.has_error.load(Ordering::Relaxed) {
                        RETRY_INTERVAL
                    } else if quiet_since.1.elapsed() >= SPARE_IDLE_RELEASE {
                        WRITER_IDLE_POLL_INTERVAL
                    } else {
                        WRITER_POLL_INTERVAL
                    };
                    self.wake.wait_for(&mut state, wait);
                    state.writer_idle = false;
                }
                state.shutdown
            };
            let mut output = self.output.lock();
            self.drain(&mut output);
            if shutdown {
                let empty = self.state.lock().chunks.is_empty();
                if empty || output.failing {
                    if let Some(open) = &output.file {
                        // A clean stop leaves no padding behind.
                        let _ = open.file.finish();
                        self.sync(open.file.file(), self.written_lsn());
                    }
                    return;
                }
            }
            if output.failing {
                drop(output);
                let mut state = self.state.lock();
                if !state.shutdown {
                    self.wake.wait_for(&mut state, RETRY_INTERVAL);
                }
            }
        }
    }

    /// The `everysec` sync thread: once a second, fsyncs the segment the
    /// writer last wrote to, if anything was written since the last sync.
    fn run_syncer(self: Arc<Self>) {
        loop {
            {
                let mut stop = self.syncer_stop.lock();
                if !*stop {
                    self.syncer_wake.wait_for(&mut stop, EVERYSEC_INTERVAL);
                }
                if *stop {
                    return;
                }
            }
            if self.fsync_policy() != FsyncPolicy::EverySec {
                continue;
            }
            let target = self.to_sync.lock().clone();
            if let Some((file, lsn)) = target
                && lsn > self.synced_lsn()
            {
                self.sync(&file, lsn);
                self.progress.advanced();
            }
        }
    }

    /// Writes one chunk to its segment, opening (and first cutting to its
    /// records and syncing the previous segment) when it starts a new one.
    /// On failure the segment is cut back to its last complete group.
    fn write_chunk(&self, file: &mut Option<OpenSegment>, chunk: &Chunk) -> std::io::Result<()> {
        if file.as_ref().is_none_or(|open| open.seq != chunk.segment) {
            if let Some(previous) = file.take() {
                // Only the newest segment may end in padding or a torn tail.
                if let Err(error) = previous.file.finish() {
                    *file = Some(previous);
                    return Err(error);
                }
                self.sync(previous.file.file(), self.written_lsn());
            }
            let path = segment_path(&self.dir, chunk.segment);
            // A segment recovery left (cut to its records) is continued.
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            let opened = SegmentFile::open(
                &path,
                len,
                self.segment_bytes_max,
                self.direct_io.load(Ordering::Relaxed),
            )?;
            sync_dir(&self.dir)?;
            // HEAD names it before any record goes in (`crate::storage::head`).
            {
                let mut head = self.head.lock();
                if chunk.segment > head.newest {
                    let next = crate::storage::head::Head {
                        newest: chunk.segment,
                        ..*head
                    };
                    crate::storage::head::write(&self.dir, next)?;
                    *head = next;
                }
            }
            let mut segments = self.segments.lock();
            if segments.last().is_none_or(|s| s.seq != chunk.segment) {
                segments.push(SegmentInfo {
                    seq: chunk.segment,
                    lsns: None,
                    bytes: len,
                });
            }
            drop(segments);
            *file = Some(OpenSegment {
                seq: chunk.segment,
                file: opened,
            });
        }
        let open = file.as_mut().expect("opened above");
        let before = open.file.len();
        if let Err(error) = open.file.append(&chunk.bytes) {
            // Cut off whatever part of the chunk made it, so the segment
            // ends on a record boundary and the retry starts clean.
            let _ = open.file.file().set_len(before);
            return Err(error);
        }
        let size = open.file.len();
        self.written_pos.store(
            crate::tiering::location::loc(chunk.segment, size),
            Ordering::Release,
        );
        self.stats
            .bytes_written
            .fetch_add(chunk.bytes.len() as u64, Ordering::Relaxed);
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        let mut segments = self.segments.lock();
        let info = segments.last_mut().expect("pushed on open");
        info.bytes = size;
        info.lsns = Some(match info.lsns {
            Some((first, _)) => (first, chunk.last_lsn),
            None => (chunk.first_lsn, chunk.last_lsn),
        });
        Ok(())
    }

    /// fsyncs `file`, after which every record up to `target` is durable.
    fn sync(&self, file: &File, target: u64) {
        if self.fsync_failed.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let synced = if self.fail_next_fsync.swap(false, Ordering::Relaxed) {
            Err(std::io::Error::other(
                "failed on purpose (DEBUG FAIL-FSYNC)",
            ))
        } else {
            file.sync_data()
        };
        match synced {
            Ok(()) => {
                self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                let took = started.elapsed();
                self.stats
                    .last_fsync_us
                    .store(took.as_micros() as u64, Ordering::Relaxed);
                crate::latency::sample("log-fsync", took);
                self.synced_lsn.fetch_max(target, Ordering::AcqRel);
            }
            Err(error) => {
                self.fsync_failed.store(true, Ordering::Relaxed);
                self.set_error(format!("fsync failed: {error}; restart to recover"));
                // Replies waiting for the synced watermark give up.
                self.progress.advanced();
            }
        }
    }
}

/// The sub-directory of `dir` holding log segments.
pub fn log_dir(dir: &Path) -> PathBuf {
    dir.join("log")
}

/// Bytes one step of [`remove_gradually`] frees.
const REMOVE_STEP_BYTES: u64 = 8 << 20;
/// Pause between two steps of [`remove_gradually`].
const REMOVE_STEP_PAUSE: Duration = Duration::from_millis(2);

/// The name a segment takes once it is no longer needed, before its file
/// is removed (`segment-N.log.deleted`): recovery ignores such files and
/// [`remove_trash`] deletes any left by a crash.
fn trash_path(segment: &Path) -> PathBuf {
    let mut name = segment.as_os_str().to_owned();
    name.push(".deleted");
    PathBuf::from(name)
}

/// Removes a file a few megabytes at a time. Unlinking a 64 MB segment in
/// one go freed all its blocks in one journal transaction (15–35 ms on
/// this project's ext4 disk), and the log's own appends, which need the
/// journal too, waited behind the unlinks of a whole checkpoint cycle: the
/// 100–200 ms stalls seen in soaks. Shrinking in steps with a pause keeps
/// each transaction small.
fn remove_gradually(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(file) => {
            let mut len = file.metadata()?.len();
            while len > REMOVE_STEP_BYTES {
                len -= REMOVE_STEP_BYTES;
                file.set_len(len)?;
                std::thread::sleep(REMOVE_STEP_PAUSE);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    std::fs::remove_file(path)
}

/// Deletes segments a crash left half removed (see [`trash_path`]).
pub(crate) fn remove_trash(dir: &Path) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name
            .strip_suffix(".deleted")
            .and_then(segment_seq)
            .is_some()
        {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Makes a directory's entries (created, renamed, removed files) durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

thread_local! {
    /// Set on threads that call [`Log::flush_now`] themselves before
    /// waiting for the log, so their commits do not wake the writer.
    static FLUSHES_ITSELF: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as one that flushes the log itself (network
/// threads).
pub fn set_flushes_itself() {
    FLUSHES_ITSELF.set(true);
}

/// Told each committed record and its location (`location::loc`).
pub(crate) type Placed<'a> = dyn FnMut(&[u8], u64) + 'a;

/// What [`Log::commit`] did with a group.
#[derive(Clone, Copy, Debug)]
pub struct Committed {
    pub last_lsn: u64,
    /// Segment and offset of the group's first record.
    pub segment: u64,
    pub offset: u64,
}

/// Where a group of records goes when its lock guard drops: the log
/// (or the cache store, for value images), the change feed, both, or
/// neither (then nothing is encoded, and only the keys changed are
/// listed).
#[derive(Clone, Copy, Default)]
pub(crate) struct Sink<'a> {
    pub log: Option<&'a Log>,
    pub feed: Option<&'a Feed>,
}

impl Sink<'_> {
    /// A sink that takes nothing (a guard whose group was committed).
    pub(crate) fn closed() -> Self {
        Sink::default()
    }
}
