//! How a waiter learns that the log advanced: the log's written and synced
//! LSNs are the one durability watermark, and [`Progress`] wakes the async
//! tasks (connections holding replies under `appendfsync always`, writers
//! held back by a full log buffer) that wait for them to move.
//!
//! The engine has no async runtime; a waiter is a plain [`Future`] that
//! registers its [`Waker`] here. Each waiter has one slot, replaced on
//! every poll and freed when the future drops, so a task polled many
//! times (a `select!`) holds one slot, and registering or waking costs no
//! search. A wake takes every slot: each woken future checks its
//! condition again and registers anew if it must wait on.
//!
//! No wake is lost, and an advance with nobody waiting takes no lock (the
//! log advances on every write round, and a lock taken there by every
//! network thread convoys when the machine is short of CPU). A waiter
//! registers its slot and publishes how many wait, then checks its
//! condition again; the log stores its new LSNs, then reads how many
//! wait. Both sides put a sequentially consistent fence between their
//! store and their load, so at least one of them sees the other's.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use std::collections::HashMap;

/// Tasks waiting for the log to advance.
#[derive(Default)]
pub(crate) struct Progress {
    /// Advances counted so far: a waiter for "any progress" waits for it
    /// to change.
    advances: AtomicU64,
    /// How many slots are registered (kept under `waiters`' lock, read
    /// without it).
    waiting: AtomicUsize,
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    next_id: u64,
    slots: HashMap<u64, Waker>,
}

impl Progress {
    /// Called after the log's LSNs moved: wakes every waiter.
    pub(crate) fn advanced(&self) {
        self.advances.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let woken = {
            let mut waiters = self.waiters.lock();
            self.waiting.store(0, Ordering::SeqCst);
            std::mem::take(&mut waiters.slots)
        };
        for (_, waker) in woken {
            waker.wake();
        }
    }

    /// How many times the log advanced.
    pub(crate) fn advances(&self) -> u64 {
        self.advances.load(Ordering::SeqCst)
    }

    /// A future that is ready once `ready()` holds, checked now and after
    /// every advance.
    pub(crate) fn until<F: Fn() -> bool>(&self, ready: F) -> Until<'_, F> {
        Until {
            progress: self,
            ready,
            slot: None,
        }
    }
}

/// Waits until its condition holds ([`Progress::until`]).
pub(crate) struct Until<'a, F: Fn() -> bool> {
    progress: &'a Progress,
    ready: F,
    slot: Option<u64>,
}

/// Every closure the log builds captures references and integers only, so
/// the future is `Unpin` and is polled through a plain `&mut`.
impl<F: Fn() -> bool + Unpin> Future for Until<'_, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if (this.ready)() {
            return Poll::Ready(());
        }
        let mut waiters = this.progress.waiters.lock();
        let id = match this.slot {
            Some(id) => id,
            None => {
                waiters.next_id += 1;
                let id = waiters.next_id;
                this.slot = Some(id);
                id
            }
        };
        match waiters.slots.get_mut(&id) {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            Some(waker) => waker.clone_from(cx.waker()),
            None => {
                waiters.slots.insert(id, cx.waker().clone());
            }
        }
        this.progress
            .waiting
            .store(waiters.slots.len(), Ordering::SeqCst);
        drop(waiters);
        // Checked again once registered: an advance that stored its LSNs
        // after the first check either sees this slot or is seen here.
        fence(Ordering::SeqCst);
        if (this.ready)() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl<F: Fn() -> bool> Drop for Until<'_, F> {
    fn drop(&mut self) {
        if let Some(id) = self.slot {
            let mut waiters = self.progress.waiters.lock();
            if waiters.slots.remove(&id).is_some() {
                self.progress
                    .waiting
                    .store(waiters.slots.len(), Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::task::Wake;

    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn poll<F: Fn() -> bool + Unpin>(until: &mut Until<'_, F>, flag: &Arc<Flag>) -> bool {
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        Pin::new(until).poll(&mut cx).is_ready()
    }

    #[test]
    fn a_waiter_is_woken_by_the_advance_that_satisfies_it_and_holds_one_slot() {
        let progress = Progress::default();
        let lsn = AtomicU64::new(0);
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let mut until = progress.until(|| lsn.load(Ordering::Acquire) >= 2);
        assert!(!poll(&mut until, &flag));
        // Polled again (as select! does): still one slot.
        assert!(!poll(&mut until, &flag));
        assert_eq!(progress.waiters.lock().slots.len(), 1);
        lsn.store(1, Ordering::Release);
        progress.advanced();
        assert!(flag.0.swap(false, Ordering::SeqCst), "woken by an advance");
        assert!(!poll(&mut until, &flag), "LSN 1 is not LSN 2");
        lsn.store(2, Ordering::Release);
        progress.advanced();
        assert!(flag.0.load(Ordering::SeqCst));
        assert!(poll(&mut until, &flag));
        assert_eq!(progress.advances(), 2);
    }

    #[test]
    fn a_dropped_waiter_leaves_no_slot() {
        let progress = Progress::default();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let mut until = progress.until(|| false);
        assert!(!poll(&mut until, &flag));
        drop(until);
        assert!(progress.waiters.lock().slots.is_empty());
    }
}
