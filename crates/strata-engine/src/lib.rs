//! Strata's database, usable as a library: no sockets, no protocol.
//!
//! - [`keyspace`]: 16 (configurable) databases × [`keyspace::SHARD_COUNT`]
//!   shards. A shard is a lock around one hash table per database plus that
//!   table's expiry index. A command on one key takes one shard lock;
//!   multi-key commands take their shards' locks in ascending order
//!   ([`keyspace::Keyspace::lock_many`]); whole-keyspace commands take all.
//!   Its parts, one concern per module (private, their public types
//!   re-exported by `keyspace`): `key` (a key's hash, cluster slot and
//!   shard), `entry` (one key and its value, flags, LRU clock), `shard`
//!   (one lock's tables, the records of its changes, hits and census),
//!   `guard` (locked shards that commit their log group on drop, and
//!   [`keyspace::Locked`], the lock set a command runs under, whose commit
//!   returns the LSN and the keys changed: [`commit::Commit`]).
//! - [`eviction`]: cold values read in and let go; what leaves RAM under
//!   each policy.
//! - [`location`]: where a record lies in the log (one `u64`).
//! - [`compaction`]: moving live records out of mostly-dead segments.
//! - `table` (private): one database's table of a shard and its expiry
//!   index; a shard's tables, allocated per database once written, shrunk
//!   when sparse.
//! - [`value`]: values going in ([`Value`]) and coming out ([`ValueRef`]):
//!   strings (with Redis' integer encoding) and hashes (as their image).
//! - [`list`]: the list type (packed nodes in a deque, the image codec);
//! - [`stream`]: streams (entries by ID, consumer groups, pending
//!   lists) and the operations the log records;
//! - [`set`], [`zset`]: sets and sorted sets in Redis' encodings, their
//!   image codecs and the operations the log records; [`limits`]: when
//!   collections change encoding; [`hll`]: HyperLogLog's registers and
//!   estimate; `decimal` (private): the canonical integer parser both
//!   strings and sets use.
//! - [`collection`]: one trait per value type; reading, changing and
//!   replaying a key are generic over it (a new type is one module and
//!   one impl).
//! - [`glob`]: Redis' glob-style pattern matcher for KEYS, SCAN and CONFIG.
//! - [`hash`]: the hash type (a packed image kept inline in the entry, or
//!   an arena table beside it; field deadlines; the image codec); commands
//!   change hashes through field changes that the log records field by
//!   field. `hash::field` is the stored field both forms are made of.
//! - [`record`]: the log record format (`docs/storage.md`).
//! - [`log`]: segment files, group commit, fsync policies; `segment_file`
//!   (private): one segment appended with `O_DIRECT` (aligned, padded).
//! - [`checkpoint`]: fork-free checkpoints, shard by shard.
//! - [`open`]: the front door. `open(dir)` makes the keyspace (the hash
//!   seed comes from the checkpoint), `Pending::load` loads the checkpoint
//!   and log, and starts and attaches the log or the cache store: what a
//!   server or a test needs to run the engine, in two calls, with typed
//!   errors ([`recovery::RecoveryError`]). `tests/open.rs` uses only it.
//! - [`recovery`]: checkpoint + log replay, torn-tail handling, `verify`.
//! - [`head`]: the log's HEAD manifest (which segments and ranges a
//!   restart must find).
//! - [`dir_lock`]: one process per data directory (invariant 7).
//! - [`undo`]: before-images that undo a script's run (taken back whole
//!   when it must run again with every shard locked).
//! - [`access`]: LRU and LFU clocks; [`latency`]: LATENCY's samples;
//!   [`lazyfree`]: freeing big values off the command's thread.
//! - [`feed`]: every committed group of changes, in order, to subscribers.
//! - [`background`]: memory held by background buffers, outside the budget.
//! - `random` (private): seeds and a fast per-thread generator.
//! - `varint` (private): the LEB128 lengths of packed images.
//! - `thin` (private): the one-pointer byte buffer every entry is (its
//!   header, key and value in one allocation; see `entry`).
//! - [`reader`]: the cold-value reader (io_uring, or pread threads), off
//!   every shard lock, results to a callback.
//! - [`fetch`]: a command's cold values brought into RAM before it locks
//!   (read through the reader, installed, lent to it, released after).
//! - [`tier`]: reading cold values (io_uring plans, direct reads), per
//!   segment live counts, the cache store.
//!
//! Modules depend on each other in one direction only (no import circles,
//! checked by `crates/strata-server/tests/import_circles.rs`): leaves
//! (`record`, `location`, `key`, `value`, `random`, `feed`, `commit`)
//! below `log` and `tier`, below `entry`, `table` and `shard`, below
//! `guard` (which takes shards through a trait, not the keyspace), below
//! `keyspace`, below `eviction`, `compaction`, `checkpoint` and
//! `recovery`.
//!
//! Every mutation goes through a [`keyspace::Shard`] or [`keyspace::Entry`]
//! method while the shard lock is held, and that method appends the
//! change's record to its lock set's log group; the lock guard commits the
//! group before it unlocks. Per-key log order is therefore apply order
//! (DESIGN.md invariant 2), and no command can change data unlogged.

pub mod access;
pub mod background;
pub mod check;
pub mod checkpoint;
pub mod collection;
pub mod commit;
pub mod compaction;
pub mod copy;
mod decimal;
pub mod dir_lock;
mod entry;
pub mod eviction;
pub mod feed;
pub mod fetch;
pub mod glob;
mod guard;
pub mod hash;
pub mod head;
pub mod hll;
mod key;
pub mod keyspace;
pub mod latency;
pub mod lazyfree;
pub mod limits;
pub mod list;
pub mod location;
pub mod log;
pub mod open;
mod progress;
mod random;
pub mod reader;
pub mod record;
pub mod recovery;
pub mod repl_position;
pub mod replica_expiry;
mod segment_file;
pub mod set;
mod shard;
pub mod stream;
mod table;
mod thin;
pub mod tier;
pub mod undo;
pub mod value;
mod varint;
pub mod zset;

pub use keyspace::{DbStats, Entry, EntryMut, KeyRef, Keyspace, MemoryCensus, Shard, ShardGuard};
pub use value::{Value, ValueRef, ValueType};
