//! Reading cold values, off every shard lock: the engine's reader, usable
//! by anyone who embeds the engine (the server's connections use it).
//!
//! Three ways, best first:
//!
//! - **A ring per thread.** A thread that runs an event loop (the server's
//!   network threads) calls [`ColdReader::start_thread_ring`]: reads it
//!   submits go to its own io_uring, with no other thread involved, and
//!   their completions signal an eventfd that its event loop watches and
//!   answers with [`reap_thread_ring`]. Results are handed back on that
//!   same thread. On two cores shared with the load generator, handing
//!   each batch to a reader thread and back cost two wake-ups per batch.
//! - **One io_uring thread** for every other thread: it takes every queued
//!   read, submits them together and hands results back as they complete
//!   (one wake-up per batch).
//! - Where io_uring is unavailable, `threads` threads doing one blocking
//!   `pread` each.
//!
//! SSDs deliver several times the IOPS at queue depth 32 that they do one
//! read at a time, so readers submit every read a command needs before
//! waiting for any. A record longer than the first read (4 KiB) is read
//! again whole through the ring, never with a blocking read on the
//! submitting thread. Results go to a callback, so callers can wait
//! however they like (the server completes a tokio oneshot).
//!
//! A read that fails (a damaged record, an I/O error) is an error result
//! for whoever asked, counted in `read_errors`; it never panics.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;

use crate::tiering::location::ColdLocation;
use crate::tiering::tier::{ColdValue, ReadPlan, Tier};

/// What is done with a read's result.
pub type Done = Box<dyn FnOnce(Result<ColdValue, String>) + Send>;

struct Job {
    loc: u64,
    key: Vec<u8>,
    done: Done,
}

/// Reads cold values (see the module documentation).
pub struct ColdReader {
    jobs: mpsc::Sender<Job>,
    queued: Arc<AtomicU64>,
    tier: Arc<Tier>,
    engine: &'static str,
}

/// Reads one io_uring keeps in flight (the shared thread's, or a
/// thread's own); more wait in its queue.
pub(crate) const URING_DEPTH: usize = 64;
/// Longest the io_uring thread waits for a completion before taking newly
/// queued reads (a device read takes ~100 µs here).
const URING_WAIT_NS: u32 = 30_000;

thread_local! {
    /// This thread's own ring, once [`ColdReader::start_thread_ring`] ran.
    static THREAD_RING: RefCell<Option<ThreadRing>> = const { RefCell::new(None) };
}

impl ColdReader {
    /// Starts the reader threads. With `use_uring` and io_uring available,
    /// one io_uring thread; otherwise `threads` pread threads, and the
    /// reason io_uring was not used is returned beside the reader.
    pub fn start(
        tier: Arc<Tier>,
        threads: usize,
        use_uring: bool,
    ) -> std::io::Result<(ColdReader, Option<String>)> {
        let mut why_not_uring = None;
        let queued = Arc::new(AtomicU64::new(0));
        if use_uring {
            match RingReads::new() {
                Ok(ring) => {
                    let (jobs, receiver) = mpsc::channel::<Job>();
                    let counter = queued.clone();
                    let thread_tier = tier.clone();
                    std::thread::Builder::new()
                        .name("tier-uring".into())
                        .spawn(move || run_uring(ring, &thread_tier, &receiver, &counter))?;
                    let reader = ColdReader {
                        jobs,
                        queued,
                        tier,
                        engine: "io_uring",
                    };
                    return Ok((reader, None));
                }
                Err(e) => why_not_uring = Some(format!("io_uring unavailable ({e})")),
            }
        }
        let (jobs, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for index in 0..threads {
            let receiver = receiver.clone();
            let tier = tier.clone();
            let queued = queued.clone();
            std::thread::Builder::new()
                .name(format!("tier-read-{index}"))
                .spawn(move || {
                    loop {
                        let job = match receiver.lock() {
                            Ok(receiver) => receiver.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else {
                            return;
                        };
                        queued.fetch_sub(1, Relaxed);
                        // read_value counts its own failures.
                        (job.done)(tier.read_value(job.loc, &job.key));
                    }
                })?;
        }
        let reader = ColdReader {
            jobs,
            queued,
            tier,
            engine: "threads",
        };
        Ok((reader, why_not_uring))
    }

    /// Gives the calling thread its own io_uring (when this reader uses
    /// io_uring): reads it submits from now on go there, and their results
    /// come back on this thread from [`reap_thread_ring`], which the caller
    /// runs whenever the returned eventfd is readable. The thread must keep
    /// doing so for as long as it submits reads.
    pub fn start_thread_ring(&self) -> std::io::Result<RawFd> {
        if self.engine != "io_uring" {
            return Err(std::io::Error::other("cold reads do not use io_uring"));
        }
        let ring = RingReads::new()?;
        // SAFETY: eventfd with valid flags; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor nobody else owns.
        let eventfd = unsafe { OwnedFd::from_raw_fd(raw) };
        ring.ring
            .submitter()
            .register_eventfd(eventfd.as_raw_fd())?;
        let fd = eventfd.as_raw_fd();
        THREAD_RING.with(|slot| {
            *slot.borrow_mut() = Some(ThreadRing {
                reads: ring,
                eventfd,
                tier: self.tier.clone(),
                queued: self.queued.clone(),
            });
        });
        Ok(fd)
    }

    /// Queues a read of the value of `key` at `loc`; `done` gets the
    /// result (on this thread if it has its own ring, else on a reader
    /// thread). Submit every read a command needs before waiting for any,
    /// so they are in flight together (as
    /// [`crate::tiering::fetch::ColdFetch::submit`] does).
    pub(crate) fn submit(&self, loc: ColdLocation, key: Vec<u8>, done: Done) {
        let ColdLocation(loc) = loc;
        self.queued.fetch_add(1, Relaxed);
        let job = Job { loc, key, done };
        let job = THREAD_RING.with(|slot| match slot.borrow_mut().as_mut() {
            Some(ring) => {
                ring.reads.waiting.push_back(job);
                None
            }
            None => Some(job),
        });
        let Some(job) = job else {
            return;
        };
        if let Err(failed) = self.jobs.send(job) {
            self.queued.fetch_sub(1, Relaxed);
            (failed.0.done)(Err("no reader threads".into()));
        }
    }

    /// Sends the reads this thread submitted to its own ring to the
    /// kernel, all in one system call (reads to the reader threads are on
    /// their way already). Call it after the last read of a batch; with
    /// nothing waiting it makes no system call, so of several callers
    /// after one batch only the first pays for it.
    pub fn flush(&self) {
        let mut failed = Vec::new();
        THREAD_RING.with(|slot| {
            if let Some(ring) = slot.borrow_mut().as_mut() {
                ring.submit(&mut failed);
            }
        });
        for (done, value) in failed {
            done(value);
        }
    }

    /// Reads waiting for a place in a ring or for a reader thread.
    pub fn queued(&self) -> u64 {
        self.queued.load(Relaxed)
    }

    /// `io_uring` or `threads`.
    pub fn engine(&self) -> &'static str {
        self.engine
    }
}

/// Hands this thread's completed reads to their callbacks and submits
/// reads that were waiting for a place; run it when the eventfd of
/// [`ColdReader::start_thread_ring`] is readable.
pub fn reap_thread_ring() {
    // Callbacks run after the ring is released: one may submit again.
    let mut finished = Vec::new();
    THREAD_RING.with(|slot| {
        if let Some(ring) = slot.borrow_mut().as_mut() {
            ring.clear_eventfd();
            ring.reads.reap(&ring.tier, &mut finished);
            ring.submit(&mut finished);
        }
    });
    for (done, value) in finished {
        done(value);
    }
}

/// A thread's own ring (see [`ColdReader::start_thread_ring`]). It lives
/// as long as its thread (the server's network threads run until the
/// process exits), so no buffer of a read in flight is ever freed early.
struct ThreadRing {
    reads: RingReads,
    eventfd: OwnedFd,
    tier: Arc<Tier>,
    queued: Arc<AtomicU64>,
}

impl ThreadRing {
    /// Moves waiting reads into the ring and tells the kernel, without
    /// waiting for anything; reads that cannot be planned go to `failed`
    /// (for the caller to answer once the ring is released).
    fn submit(&mut self, failed: &mut Vec<Finished>) {
        let moved = self.reads.fill(&self.tier, failed);
        self.queued.fetch_sub(moved as u64, Relaxed);
        // New reads, or records read again whole after a reap.
        if !self.reads.ring.submission().is_empty() {
            // EINTR, EBUSY: the entries stay queued and go with the next
            // submission (every reap submits again).
            let _ = self.reads.ring.submit();
        }
    }

    fn clear_eventfd(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a local buffer from a descriptor we
        // own; EAGAIN (nothing signalled) is fine.
        unsafe {
            libc::read(
                self.eventfd.as_raw_fd(),
                count.as_mut_ptr().cast(),
                count.len(),
            );
        }
    }
}

/// A read submitted to a ring: the job, its plan, and the buffer the
/// kernel writes into (kept here, unmoved, until the read completes).
struct InFlight {
    job: Job,
    plan: ReadPlan,
    raw: Vec<u8>,
    at: usize,
}

/// One io_uring with its reads in flight and those waiting for a slot.
struct RingReads {
    ring: io_uring::IoUring,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    waiting: VecDeque<Job>,
    /// Buffers of finished reads, for the next ones: a read of a small
    /// record neither allocates nor zeroes its buffer (8 KiB each, a few
    /// percent of a network thread's time at 66 000 cold reads a second
    /// when each was new). At most one per slot, none over
    /// [`SPARE_BUFFER_MAX`].
    spare: Vec<Vec<u8>>,
}

/// Largest read buffer kept for reuse: the first read of a record and the
/// whole of a small one; a large record's buffer is freed after its read.
const SPARE_BUFFER_MAX: usize = 64 * 1024;

/// A result ready for its callback.
type Finished = (Done, Result<ColdValue, String>);

impl RingReads {
    fn new() -> std::io::Result<RingReads> {
        Ok(RingReads {
            ring: io_uring::IoUring::new(URING_DEPTH as u32)?,
            slots: (0..URING_DEPTH).map(|_| None).collect(),
            free: (0..URING_DEPTH).rev().collect(),
            waiting: VecDeque::new(),
            spare: Vec::new(),
        })
    }

    fn in_flight(&self) -> usize {
        URING_DEPTH - self.free.len()
    }

    /// Keeps a finished read's buffer for a later read, if it is small.
    fn recycle(&mut self, raw: Vec<u8>) {
        if raw.len() <= SPARE_BUFFER_MAX && self.spare.len() < URING_DEPTH {
            self.spare.push(raw);
        }
    }

    /// Puts waiting reads into free slots (submission entries, not yet
    /// submitted); reads that cannot even be planned go to `failed`.
    /// Returns how many left the waiting queue.
    fn fill(&mut self, tier: &Tier, failed: &mut Vec<Finished>) -> usize {
        let mut moved = 0;
        while !self.free.is_empty() {
            let Some(job) = self.waiting.pop_front() else {
                break;
            };
            moved += 1;
            match tier.plan_read(job.loc, job.key.len()) {
                Ok(plan) => self.push(job, plan),
                Err(why) => {
                    tier.stats.read_errors.fetch_add(1, Relaxed);
                    failed.push((job.done, Err(why)));
                }
            }
        }
        moved
    }

    /// Pushes the read of `plan` into a free slot.
    fn push(&mut self, job: Job, plan: ReadPlan) {
        let slot = self.free.pop().expect("the caller checked for a free slot");
        let mut raw = self.spare.pop().unwrap_or_default();
        if raw.len() < plan.buffer_len() {
            raw.resize(plan.buffer_len(), 0);
        }
        let at = plan.buffer_start(&raw);
        let read = io_uring::opcode::Read::new(
            io_uring::types::Fd(plan.file.as_raw_fd()),
            raw[at..].as_mut_ptr(),
            plan.len as u32,
        )
        .offset(plan.offset)
        .build()
        .user_data(slot as u64);
        // SAFETY: the buffer and the file stay alive in `slots[slot]`
        // until this read's completion is reaped.
        let pushed = unsafe { self.ring.submission().push(&read) };
        assert!(pushed.is_ok(), "the ring has an entry per slot");
        self.slots[slot] = Some(InFlight { job, plan, raw, at });
    }

    /// Takes every completion: results go to `finished`; a record longer
    /// than its first read is read again whole (pushed, submitted by the
    /// caller's next submission).
    fn reap(&mut self, tier: &Tier, finished: &mut Vec<Finished>) {
        let completed: Vec<(usize, i32)> = self
            .ring
            .completion()
            .map(|cqe| (cqe.user_data() as usize, cqe.result()))
            .collect();
        for (slot, result) in completed {
            let Some(done) = self.slots[slot].take() else {
                continue;
            };
            self.free.push(slot);
            let InFlight { job, plan, raw, at } = done;
            let value = if result < 0 {
                Err(plan.error(std::io::Error::from_raw_os_error(-result)))
            } else {
                let got = &raw[at..at + result as usize];
                match tier.rest_of_record(&plan, got) {
                    Some(whole) => {
                        self.recycle(raw);
                        self.push(job, whole);
                        continue;
                    }
                    None => tier.finish_read(&plan, &job.key, got),
                }
            };
            self.recycle(raw);
            if value.is_err() {
                tier.stats.read_errors.fetch_add(1, Relaxed);
            }
            finished.push((job.done, value));
        }
    }
}

/// The shared io_uring thread: blocks for work only when nothing is in
/// flight; otherwise submits what is queued and waits for at least one
/// completion.
fn run_uring(
    mut reads: RingReads,
    tier: &Tier,
    receiver: &mpsc::Receiver<Job>,
    queued: &AtomicU64,
) {
    let mut finished = Vec::new();
    loop {
        if reads.in_flight() == 0 && reads.waiting.is_empty() {
            match receiver.recv() {
                Ok(job) => reads.waiting.push_back(job),
                Err(_) => return,
            }
        }
        reads.waiting.extend(receiver.try_iter());
        let moved = reads.fill(tier, &mut finished);
        queued.fetch_sub(moved as u64, Relaxed);
        for (done, value) in finished.drain(..) {
            done(value);
        }
        if reads.in_flight() == 0 {
            continue;
        }
        // Wait for a completion, but no longer than a fraction of a
        // device read, so reads queued meanwhile join soon.
        let wait = io_uring::types::Timespec::new().nsec(URING_WAIT_NS);
        let args = io_uring::types::SubmitArgs::new().timespec(&wait);
        // ETIME (no completion yet) and EINTR are expected; any other
        // error shows as reads that do not complete, retried next turn.
        let _ = reads.ring.submitter().submit_with_args(1, &args);
        reads.reap(tier, &mut finished);
        for (done, value) in finished.drain(..) {
            done(value);
        }
    }
}
