//! The keyspace in RAM: the shards, their tables and entries, the locks a
//! command runs under and what a commit returns.
//!
//! - `shards`: [`shards::Keyspace`], what it does across shards (locking in
//!   order, database-level changes, SCAN and KEYS, statistics, the census);
//!   its parts' public types are re-exported there.
//! - `shard`: one lock's tables, the records of its changes, hits and census.
//! - `table`: one database's table of a shard (the engine's own hash
//!   table, one pointer per slot) and its expiry index.
//! - `entry`: one key and its value, flags and clock; `thin`: the one-pointer
//!   allocation an entry is (header, key and value).
//! - `key`: a key's hash, cluster slot and shard.
//! - `guard`: locked shards that commit their log group on drop, and the lock
//!   set a command runs under; `commit`: what that commit returns.
//! - `access`: LRU and LFU clocks; `undo`: before-images that undo a script;
//!   `lazyfree`: freeing big values off the command's thread; `copy`: a
//!   shard-by-shard copy of values (full synchronisation, slot moves);
//!   `replica_expiry`: how a replica treats deadlines.

pub mod access;
pub mod commit;
pub mod copy;
pub(crate) mod entry;
pub(crate) mod guard;
pub(crate) mod key;
pub mod lazyfree;
pub mod replica_expiry;
pub(crate) mod shard;
pub mod shards;
pub(crate) mod table;
pub(crate) mod thin;
pub mod undo;
