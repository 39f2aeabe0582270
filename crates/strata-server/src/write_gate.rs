//! The commands each network thread is running between their pause
//! check and their commit: what a write pause that must be complete
//! waits for.
//!
//! A planned cluster failover and the end of a slot move hold clients'
//! writes (`crate::replication::failover::hold_writes`) and then take the
//! replication stream's offset as holding every write acknowledged. A
//! command that passed its pause check just before the pause began, and
//! whose thread was descheduled before it took its shard locks, would
//! otherwise commit after that offset: an acknowledged write the new
//! owner never gets. So a connection enters the gate before it checks the
//! pause and leaves it once the command has run; the holder sets the
//! pause and then waits until no thread is inside ([`WriteGate::wait_idle`]).
//! Every access on both sides is sequentially consistent (Dekker's
//! pattern: the gate's counters here, the pause in
//! `crate::server::Server::writes_paused_until`), so either the command
//! sees the pause or the holder sees the command.
//!
//! One counter per thread (cache-line padded, assigned on first use):
//! entering costs a thread two atomic operations on a line of its own.

use std::cell::Cell;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

/// Counters kept; threads beyond share them (sums stay right).
const SLOTS: usize = 64;

#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

/// Commands inside, per thread.
pub struct WriteGate {
    inside: Box<[Padded]>,
}

impl Default for WriteGate {
    fn default() -> Self {
        WriteGate {
            inside: (0..SLOTS).map(|_| Padded::default()).collect(),
        }
    }
}

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's counter.
fn slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    SLOT.with(|slot| {
        if slot.get() == usize::MAX {
            slot.set(NEXT.fetch_add(1, Relaxed) % SLOTS);
        }
        slot.get()
    })
}

/// Inside the gate until dropped.
pub struct Inside<'g> {
    gate: &'g WriteGate,
    slot: usize,
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.gate.inside[self.slot].0.fetch_sub(1, Release);
    }
}

impl WriteGate {
    /// Enters before the pause check; the command runs inside.
    pub fn enter(&self) -> Inside<'_> {
        let slot = slot();
        self.inside[slot].0.fetch_add(1, SeqCst);
        Inside { gate: self, slot }
    }

    /// After a pause was set: waits until every command that may not
    /// have seen it has run. False if some did not within `limit`.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        for counter in self.inside.iter() {
            while counter.0.load(SeqCst) != 0 {
                if Instant::now() >= deadline {
                    return false;
                }
                std::thread::yield_now();
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_waits_for_a_command_inside() {
        let gate = std::sync::Arc::new(WriteGate::default());
        assert!(gate.wait_idle(Duration::ZERO), "nobody inside");
        let inside = gate.enter();
        assert!(!gate.wait_idle(Duration::from_millis(20)));
        let leaving = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.wait_idle(Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(inside);
        assert!(leaving.join().unwrap(), "idle once it left");
    }
}
