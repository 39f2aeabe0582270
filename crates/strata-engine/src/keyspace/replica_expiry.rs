//! Expiry on a replica: a key whose deadline passed reads as absent to
//! clients but stays until the primary's stream deletes it, as Redis
//! replicas do. Deleting it here could lose a change the primary made
//! just in time (a PERSIST or a later deadline a clock a moment ahead
//! would beat); the primary, whose clock decides, sends the DEL.
//!
//! While the replica applies its primary's stream ([`applying_primary`]),
//! deadlines are not looked at at all: a command from the primary sees
//! every key the primary still had.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static FOLLOWING: AtomicBool = AtomicBool::new(false);

thread_local! {
    static APPLYING: Cell<bool> = const { Cell::new(false) };
}

/// This server follows a primary (on), or decides expiry itself (off).
pub fn set_following(on: bool) {
    FOLLOWING.store(on, Relaxed);
}

/// Whether expired keys wait for the primary's DEL.
pub fn following() -> bool {
    FOLLOWING.load(Relaxed)
}

/// Runs `f` as the primary's stream: no key counts as expired inside.
pub fn applying_primary<R>(f: impl FnOnce() -> R) -> R {
    let before = APPLYING.with(|a| a.replace(true));
    let result = f();
    APPLYING.with(|a| a.set(before));
    result
}

/// Whether this thread applies the primary's stream now.
pub(crate) fn ignores_deadlines() -> bool {
    APPLYING.with(Cell::get)
}
