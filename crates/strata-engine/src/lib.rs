//! Strata's database, usable as a library: no sockets, no protocol.
//!
//! - [`keyspace`]: 16 (configurable) databases × [`keyspace::SHARD_COUNT`]
//!   shards. A shard is a lock around one hash table per database plus that
//!   table's expiry index. A command on one key takes one shard lock;
//!   multi-key commands take their shards' locks in ascending order
//!   ([`keyspace::Keyspace::lock_many`]); whole-keyspace commands take all.
//! - [`value`]: values going in ([`Value`]) and coming out ([`ValueRef`]).
//!   Today strings (with Redis' integer encoding); collections come with
//!   their issues.
//! - [`glob`]: Redis' glob-style pattern matcher for KEYS, SCAN and CONFIG.
//!
//! Every mutation goes through a [`keyspace::Shard`] method while the shard
//! lock is held. That is where the append-only log (next issue) records it,
//! which keeps per-key log order equal to apply order (DESIGN.md invariant 2).

pub mod glob;
pub mod keyspace;
pub mod value;

pub use keyspace::{DbStats, Entry, KeyRef, Keyspace, Shard};
pub use value::{Value, ValueRef};
