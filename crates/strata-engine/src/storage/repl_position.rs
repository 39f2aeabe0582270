//! The replication position a replica keeps in its own log, so that a
//! replica restarted (even after `kill -9`) asks its primary to continue
//! from exactly what it holds instead of copying everything again.
//!
//! The position is an opaque image the server makes (its primary's
//! replication ID, the offset and the database the stream has selected
//! there). It must never claim more or less than the data holds: resuming
//! from too early applies a command twice (an LPUSH, an INCRBY), from too
//! late skips one. So it travels *inside* the data's own log groups:
//!
//! - While the replica applies a command of its primary's stream it runs
//!   under [`with_trailer`]: every group of data changes committed then
//!   gets one more record at its end, a [`Kind::Meta`] record named
//!   [`NAME`] holding the position after that command. Groups are all or
//!   nothing after a crash, so the last position recovered is the one of
//!   the last command whose changes were recovered.
//! - [`crate::Keyspace::save_replication_position`] commits a position alone (after
//!   a full synchronisation has loaded; empty: none, before one starts or
//!   when the server stops following).
//! - The log remembers the last position committed, and a checkpoint's
//!   copy of shard 0 takes it together with the LSN the copy covers, in
//!   one critical section of the log ([`crate::storage::log::Log::next_lsn_and_position`]).
//!   Recovery then treats it as any metadata item: the checkpoint's image,
//!   replaced by every later record replayed.
//!
//! A command that commits more than one group (a transaction from the
//! primary holding a database-wide command, which runs in a lock hold of
//! its own) puts the position after the command in each of them: a crash
//! between those groups leaves the rest of that command unapplied. Such
//! transactions are rare in a replication stream, and the replica's
//! answer is then what Redis' always is: a full synchronisation is needed
//! to be sure (the operator's `REPLICAOF` again).

use std::cell::RefCell;

/// The metadata item's name (shard 0's [`Kind::Meta`] items).
///
/// [`Kind::Meta`]: crate::storage::record::Kind::Meta
pub const NAME: &[u8] = b"replication-position";

thread_local! {
    /// The position groups committed by this thread end with, while set.
    static TRAILER: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// Runs `f`, ending every group of data changes it commits to the log
/// with the position `image`.
pub fn with_trailer<R>(image: &[u8], f: impl FnOnce() -> R) -> R {
    TRAILER.with(|trailer| {
        let mut trailer = trailer.borrow_mut();
        let buf = trailer.get_or_insert_with(Vec::new);
        buf.clear();
        buf.extend_from_slice(image);
    });
    let result = f();
    // Kept allocated for the next command, but off.
    TRAILER.with(|trailer| {
        if let Some(buf) = trailer.borrow_mut().as_mut() {
            buf.clear();
        }
    });
    result
}

/// Calls `f` with the trailer to end a group with, if one is set.
pub(crate) fn with_current(f: impl FnOnce(&[u8])) {
    TRAILER.with(|trailer| {
        if let Some(image) = trailer.borrow().as_deref()
            && !image.is_empty()
        {
            f(image);
        }
    });
}
