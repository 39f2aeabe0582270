//! The copy a full synchronisation sends, shared by the replicas that
//! ask while it is made: a leaf the replication state holds a weak
//! reference to, and [`super::primary`] makes and sends.

use std::sync::Arc;

use super::snapshot;

/// A full synchronisation's copy, shared by the replicas that ask for
/// one while it is being made (as Redis attaches them to a BGSAVE in
/// progress): one set of reads of the keyspace, one file.
pub struct SharedCopy {
    /// The offset the stream after the copy starts at.
    pub(crate) from: u64,
    pub(crate) made: parking_lot::Mutex<Option<Result<Arc<Prepared>, String>>>,
    pub(crate) ready: parking_lot::Condvar,
}

/// A copy and what follows it up to where the stream is sent whole; the
/// files go when the last replica sending them is done.
pub struct Prepared {
    pub(crate) copy: snapshot::Snapshot,
    pub(crate) caught_up: CatchUp,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.copy.path);
        let _ = std::fs::remove_file(&self.caught_up.path);
    }
}

/// What follows a copy up to where the stream needs no more leaving
/// out: its bytes in a file, and the offset it ends at.
pub struct CatchUp {
    pub(crate) path: std::path::PathBuf,
    /// Offsets the file's bytes start and end at.
    pub(crate) from: u64,
    pub(crate) end: u64,
}
