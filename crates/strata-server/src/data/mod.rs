//! The data side as the running server drives the engine: loading at
//! start, checkpoints and other background work, reply durability, and
//! the server's side of tiering.
//!
//! - `persistence`: the persistence state (the log, checkpoints, what a
//!   reply waits for); `background`: the loader, checkpoints, compaction
//!   and the other background threads; `tiering`: the RAM and disk
//!   budgets, the cold-value readers of the network threads.

pub mod background;
pub mod persistence;
pub mod tiering;
