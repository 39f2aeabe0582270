//! What lies on disk: the log and its records, checkpoints, recovery.
//!
//! - `group`: the records of one lock set's changes, committed as one log
//!   group; `log`: segment files, group commit, fsync policies, the writer and sync
//!   threads; `segment_file`: one segment appended with `O_DIRECT`;
//!   `progress`: the log's durability watermarks and their waiters.
//! - `record`: the log record format (`docs/storage.md`); `head`: the HEAD
//!   manifest; `repl_position`: the replication position a group carries.
//! - `checkpoint`: fork-free checkpoints, shard by shard; `compaction`:
//!   moving live records out of mostly-dead segments.
//! - `recovery`: checkpoint + log replay, torn-tail handling, `verify`;
//!   `check`: the offline check `strata-check` runs.
//! - `dir_lock`: one process per data directory (invariant 7).

pub mod check;
pub mod checkpoint;
pub mod compaction;
pub mod dir_lock;
pub mod group;
pub mod head;
pub mod log;
pub(crate) mod progress;
pub mod record;
pub mod recovery;
pub mod repl_position;
pub(crate) mod segment_file;
