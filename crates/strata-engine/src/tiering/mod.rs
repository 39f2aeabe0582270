//! Values on disk only: where they lie, reading them back, and what
//! leaves RAM.
//!
//! - `location`: where a record lies in the log (one `u64`).
//! - `tier`: read plans (io_uring, direct reads), per-segment live counts,
//!   the cache store.
//! - `reader`: the cold-value reader (io_uring, or pread threads), off every
//!   shard lock.
//! - `fetch`: a command's cold values brought into RAM under its lock.
//! - `eviction`: values read in and let go; what leaves RAM under each policy.

pub mod eviction;
pub mod fetch;
pub mod location;
pub mod reader;
pub mod tier;
