//! What a connection holds between MULTI and EXEC ([`Multi`]) and while
//! it WATCHes keys ([`Watching`]). The session owns it;
//! [`super::transactions`] queues, checks and runs it. A leaf beside the
//! table's catalog.

use bytes::Bytes;
use strata_engine::feed::Subscription;

use super::catalog::{CommandTable, Gates, RunKind};

/// A transaction being queued.
#[derive(Default)]
pub struct Multi {
    pub queued: Vec<Queued>,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    pub dirty: bool,
    /// Memory the queue holds, limited by `client-query-buffer-limit`.
    pub(crate) bytes: usize,
}

impl Multi {
    /// Memory the queued commands hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether every queued command may run on a replica whose link is
    /// down (`stale`; EXEC answers MASTERDOWN otherwise, as Redis does).
    pub fn all_stale<R: RunKind>(&self, table: &CommandTable<R>) -> bool {
        (self.queued.iter()).all(|queued| table.gates(queued.id).has(Gates::STALE))
    }

    /// Whether a queued command may use memory (`denyoom`: EXEC answers
    /// OOM when memory is full, as Redis does).
    pub fn uses_memory<R: RunKind>(&self, table: &CommandTable<R>) -> bool {
        (self.queued.iter()).any(|queued| table.gates(queued.id).has(Gates::DENYOOM))
    }
}

pub struct Queued {
    pub(crate) id: usize,
    pub args: Vec<Bytes>,
}

/// The keys a connection WATCHes.
#[derive(Default)]
pub struct Watching {
    /// Every change committed since the first WATCH (None once broken).
    pub(crate) subscription: Option<Subscription>,
    pub(crate) keys: Vec<Watched>,
    pub(crate) broken: bool,
}

pub struct Watched {
    pub(crate) db: usize,
    pub(crate) key: Bytes,
    /// The key existed and had not expired when WATCHed.
    pub(crate) live: bool,
    /// The key had expired, unreclaimed, when WATCHed: its removal is no
    /// change (Redis' rule for stale keys).
    pub(crate) stale: bool,
    /// A SWAPDB moved another database's key here: broken if one exists.
    pub(crate) swapped: bool,
}
