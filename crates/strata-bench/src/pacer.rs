//! Waiting until a request is due, precisely (the open loop, `--rate`).
//!
//! tokio's timer counts whole milliseconds: a request due in 0.2 ms goes
//! out up to a millisecond late, and since open-loop latency is measured
//! from the intended send time, that lag lands in every percentile (against
//! a server answering in 0.08 ms, a 5 000/s run reported a p50 of 0.7 ms).
//! A [`Pacer`] instead arms a Linux `timerfd` (nanosecond resolution, an
//! hrtimer) for the due time and waits for it through tokio's reactor, so
//! each client waits on its own timer without holding up the others on its
//! thread; the thread's timer slack is set to 1 ns so the kernel does not
//! batch the wake-up up to its default 50 µs later. The last
//! [`SPIN_BEFORE_DUE`] are spent yielding to the thread's other tasks
//! rather than sleeping, which absorbs the wake-up's own latency. Where a
//! timerfd cannot be made, it falls back to tokio's timer.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// How long before a due time the pacer stops sleeping and yields until it
/// is due: a wake-up's latency on a busy machine (on an idle one it is
/// about 10 µs).
const SPIN_BEFORE_DUE: Duration = Duration::from_micros(50);

/// Waits for due times (see the module documentation).
pub struct Pacer {
    timer: Option<AsyncFd<OwnedFd>>,
}

impl Pacer {
    /// A pacer for a client on the calling thread (which must run a tokio
    /// runtime with I/O enabled).
    pub fn new() -> Pacer {
        // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's
        // timer slack; timerfd_create returns a new descriptor or -1.
        let timer = unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            let fd = libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            );
            (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
        };
        Pacer {
            // SAFETY: an OwnedFd stays open, and is the same descriptor,
            // for as long as the AsyncFd owns it.
            timer: timer.and_then(|fd| unsafe { AsyncFd::register(fd) }.ok()),
        }
    }

    /// Returns at `due` (at once if it has passed).
    pub async fn until(&mut self, due: Instant) {
        let Some(timer) = &self.timer else {
            tokio::time::sleep_until(due.into()).await;
            return;
        };
        let sleep_for = due
            .saturating_duration_since(Instant::now())
            .saturating_sub(SPIN_BEFORE_DUE);
        if !sleep_for.is_zero() && arm(timer.get_ref(), sleep_for) {
            loop {
                let Ok(mut ready) = timer.readable().await else {
                    break;
                };
                let mut expirations = [0u8; 8];
                // SAFETY: reads 8 bytes into a buffer of 8 from our fd.
                let read = unsafe {
                    libc::read(
                        timer.get_ref().as_raw_fd(),
                        expirations.as_mut_ptr().cast(),
                        expirations.len(),
                    )
                };
                if read == 8 {
                    break;
                }
                ready.clear_ready();
            }
        }
        while Instant::now() < due {
            tokio::task::yield_now().await;
        }
    }
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

/// Arms `timer` to expire once, `after` from now; false if it could not.
fn arm(timer: &OwnedFd, after: Duration) -> bool {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: a valid timerfd and a fully initialised itimerspec.
    unsafe { libc::timerfd_settime(timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Due times 0.3 ms apart are met, never early. How close they are
    /// met is a performance figure (`bench/loadgen-efficiency.sh`; a
    /// fraction of a millisecond on a quiet machine, where tokio's timer
    /// alone is late by up to a whole one): a loaded machine delays any
    /// wake-up (the test failed so at load average 10), so it asks only
    /// that the median wait ends within 20 ms, which catches a pacer that
    /// does not wake at its due time at all.
    #[test]
    fn waits_end_close_to_their_due_times() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let lateness = runtime.block_on(async {
            let mut pacer = Pacer::new();
            assert!(pacer.timer.is_some(), "timerfd available on Linux");
            let mut late = Vec::new();
            let mut due = Instant::now() + Duration::from_millis(1);
            for _ in 0..200 {
                pacer.until(due).await;
                let now = Instant::now();
                assert!(now >= due, "returned early");
                late.push(now - due);
                due += Duration::from_micros(300);
            }
            late
        });
        let mut sorted = lateness;
        sorted.sort();
        let median = sorted[sorted.len() / 2];
        assert!(
            median < Duration::from_millis(20),
            "median lateness {median:?}"
        );
    }
}
