//! Strata's database, usable as a library: no sockets, no protocol.
//!
//! The engine is in four folders by concern, and a few modules at the top:
//!
//! - [`keyspace`]: the keys in RAM. 16 (configurable) databases ×
//!   [`keyspace::key::SHARD_COUNT`] shards. A shard is a lock around one
//!   hash table per database plus that table's expiry index. A command on
//!   one key takes one shard lock; multi-key commands take their shards'
//!   locks in ascending order ([`Keyspace::lock_many`]); whole-keyspace
//!   commands take all. The lock set a command runs under
//!   ([`keyspace::guard::Locked`]) commits its log group and returns the
//!   LSN and the keys changed ([`keyspace::commit::Commit`]).
//! - [`types`]: the value types. [`Value`] going in, [`ValueRef`] coming
//!   out; one module per type (hash, list, set, zset, stream, HyperLogLog)
//!   with its operations and image codec, all behind one trait
//!   ([`types::collection::Collection`]): a new type is one module and one
//!   impl.
//! - [`storage`]: what lies on disk. The log record format
//!   (`docs/storage.md`), segment files, group commit and fsync policies,
//!   fork-free checkpoints, compaction, recovery (checkpoint + log replay,
//!   torn tails), the HEAD manifest, the offline check and the data
//!   directory's lock (invariant 7).
//! - [`tiering`]: values on disk only. Where a record lies, the cold-value
//!   reader (io_uring, or pread threads) off every shard lock, a command's
//!   cold values installed under its lock, and what leaves RAM under each
//!   policy.
//! - [`open`]: the front door. `open(dir)` makes the keyspace (the hash
//!   seed comes from the checkpoint), `Pending::load` loads the checkpoint
//!   and log, and starts and attaches the log or the cache store: what a
//!   server or a test needs to run the engine, in two calls, with typed
//!   errors ([`storage::recovery::RecoveryError`]). `tests/open.rs` uses
//!   only it.
//! - [`feed`]: every committed group of changes, in order, to subscribers.
//! - [`glob`]: Redis' glob-style pattern matcher for KEYS, SCAN and CONFIG;
//!   [`latency`]: LATENCY's samples; [`background`]: memory held by
//!   background buffers, outside the budget; `random` and `varint`
//!   (private): seeds and a per-thread generator, LEB128 lengths.
//!
//! Modules depend on each other in one direction only (no import circles,
//! checked by `crates/strata-server/tests/import_circles.rs`): leaves
//! (`storage::record`, `tiering::location`, `keyspace::key`,
//! `types::value`, `random`, `feed`, `keyspace::commit`) below
//! `storage::log` and `tiering::tier`, below `keyspace::entry`,
//! `keyspace::table` and `keyspace::shard`, below `keyspace::guard` (which
//! takes shards through a trait, not the keyspace), below
//! `keyspace::shards`, below `tiering::eviction`, `storage::compaction`,
//! `storage::checkpoint` and `storage::recovery`. A folder's `mod.rs` only
//! declares its modules, so no module depends on its folder.
//!
//! Every mutation goes through a [`Shard`] or [`Entry`] method while the
//! shard lock is held, and that method appends the change's record to its
//! lock set's log group; the lock guard commits the group before it
//! unlocks. Per-key log order is therefore apply order (DESIGN.md
//! invariant 2), and no command can change data unlogged.

pub mod background;
pub mod feed;
pub mod glob;
pub mod keyspace;
pub mod latency;
pub mod open;
mod random;
pub mod storage;
pub mod tiering;
pub mod types;
mod varint;

pub use keyspace::shards::{
    DbStats, Entry, EntryMut, KeyRef, Keyspace, MemoryCensus, Shard, ShardGuard,
};
pub use types::value::{Value, ValueRef, ValueType};
