//! Reading cold values, off every shard lock: the engine's reader, usable
//! by anyone who embeds the engine (the server's connections use it).
//!
//! One io_uring thread keeps up to [`URING_DEPTH`] reads in flight (it
//! takes every queued read, submits them together and hands results back
//! as they complete: one wake-up per batch), or, where io_uring is
//! unavailable, `threads` threads do one blocking `pread` each. SSDs
//! deliver several times the IOPS at queue depth 32 that they do one read
//! at a time, so readers submit every read a command needs before waiting
//! for any. Results go to a callback, so callers can wait however they
//! like (the server completes a tokio oneshot).
//!
//! A read that fails (a damaged record, an I/O error) is an error result
//! for whoever asked, counted in `read_errors`; it never panics.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;

use crate::location::ColdLocation;
use crate::tier::{ColdValue, ReadPlan, Tier};

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
    engine: &'static str,
}

/// Reads one io_uring reader keeps in flight.
pub const URING_DEPTH: usize = 64;
/// Longest the io_uring reader waits for a completion before taking newly
/// queued reads (a device read takes ~100 µs here).
const URING_WAIT_NS: u32 = 30_000;

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
        if use_uring {
            match io_uring::IoUring::new(URING_DEPTH as u32) {
                Ok(ring) => {
                    let (jobs, receiver) = mpsc::channel::<Job>();
                    let queued = Arc::new(AtomicU64::new(0));
                    let counter = queued.clone();
                    std::thread::Builder::new()
                        .name("tier-uring".into())
                        .spawn(move || run_uring(ring, &tier, &receiver, &counter))?;
                    let reader = ColdReader {
                        jobs,
                        queued,
                        engine: "io_uring",
                    };
                    return Ok((reader, None));
                }
                Err(e) => why_not_uring = Some(format!("io_uring unavailable ({e})")),
            }
        }
        let (jobs, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let queued = Arc::new(AtomicU64::new(0));
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
            engine: "threads",
        };
        Ok((reader, why_not_uring))
    }

    /// Queues a read of the value of `key` at `loc`; `done` gets the
    /// result on a reader thread. Submit every read a command needs
    /// before waiting for any, so they are in flight together (as
    /// [`crate::fetch::ColdFetch::submit`] does).
    pub(crate) fn submit(&self, loc: ColdLocation, key: Vec<u8>, done: Done) {
        let ColdLocation(loc) = loc;
        self.queued.fetch_add(1, Relaxed);
        if let Err(failed) = self.jobs.send(Job { loc, key, done }) {
            self.queued.fetch_sub(1, Relaxed);
            (failed.0.done)(Err("no reader threads".into()));
        }
    }

    /// Reads waiting for a reader thread.
    pub fn queued(&self) -> u64 {
        self.queued.load(Relaxed)
    }

    /// `io_uring` or `threads`.
    pub fn engine(&self) -> &'static str {
        self.engine
    }
}

/// A read submitted to the ring: the job, its plan, and the buffer the
/// kernel writes into (kept here, unmoved, until the read completes).
struct InFlight {
    job: Job,
    plan: ReadPlan,
    raw: Vec<u8>,
    at: usize,
}

/// The io_uring reader: blocks for work only when nothing is in flight;
/// otherwise submits what is queued and waits for at least one completion.
fn run_uring(
    mut ring: io_uring::IoUring,
    tier: &Tier,
    receiver: &mpsc::Receiver<Job>,
    queued: &AtomicU64,
) {
    use std::os::fd::AsRawFd;
    let mut slots: Vec<Option<InFlight>> = (0..URING_DEPTH).map(|_| None).collect();
    let mut free: Vec<usize> = (0..URING_DEPTH).rev().collect();
    let mut completed = Vec::with_capacity(URING_DEPTH);
    loop {
        while let Some(&slot) = free.last() {
            let job = if free.len() == URING_DEPTH {
                match receiver.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                }
            } else {
                match receiver.try_recv() {
                    Ok(job) => job,
                    Err(_) => break,
                }
            };
            queued.fetch_sub(1, Relaxed);
            let plan = match tier.plan_read(job.loc, job.key.len()) {
                Ok(plan) => plan,
                Err(why) => {
                    tier.stats.read_errors.fetch_add(1, Relaxed);
                    (job.done)(Err(why));
                    continue;
                }
            };
            let mut raw = vec![0u8; plan.buffer_len()];
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
            // until this read's completion is reaped below.
            if unsafe { ring.submission().push(&read) }.is_err() {
                // Cannot happen: the ring has a slot per in-flight read.
                (job.done)(Err("io_uring submission queue full".into()));
                continue;
            }
            free.pop();
            slots[slot] = Some(InFlight { job, plan, raw, at });
        }
        if free.len() == URING_DEPTH {
            continue;
        }
        // Wait for a completion, but no longer than a fraction of a
        // device read, so reads queued meanwhile join soon.
        let wait = io_uring::types::Timespec::new().nsec(URING_WAIT_NS);
        let args = io_uring::types::SubmitArgs::new().timespec(&wait);
        // ETIME (no completion yet) and EINTR are expected; any other
        // error shows as reads that do not complete, retried next turn.
        let _ = ring.submitter().submit_with_args(1, &args);
        completed.clear();
        completed.extend(
            ring.completion()
                .map(|cqe| (cqe.user_data() as usize, cqe.result())),
        );
        for &(slot, result) in &completed {
            let Some(done) = slots[slot].take() else {
                continue;
            };
            free.push(slot);
            let value = if result < 0 {
                Err(done.plan.error(std::io::Error::from_raw_os_error(-result)))
            } else {
                let got = &done.raw[done.at..done.at + result as usize];
                tier.finish_read(&done.plan, &done.job.key, got)
            };
            if value.is_err() {
                tier.stats.read_errors.fetch_add(1, Relaxed);
            }
            (done.job.done)(value);
        }
    }
}
