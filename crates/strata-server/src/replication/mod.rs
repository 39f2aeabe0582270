//! Replication: a Strata primary serves Redis' replication protocol to
//! replicas (Strata, or redis-server itself, or `redis-cli --rdb`), and a
//! Strata replica follows a primary (Strata, or a running redis-server:
//! the way a live Redis moves in).
//!
//! The wire is Redis' (docs/replication.md): the replica sends PING,
//! optional AUTH, `REPLCONF listening-port`/`capa`, then `PSYNC`; the
//! primary answers `+FULLRESYNC <replid> <offset>`, sends an RDB file as
//! one bulk (`$<len>\r\n` and the bytes), then the commands that change
//! the data, for ever; the replica sends `REPLCONF ACK <offset>` every
//! second. The offset counts the bytes of that command stream.
//!
//! What is Strata's own:
//! - **No fork.** The RDB file is written from a copy made shard by shard
//!   ([`strata_engine::keyspace::copy`]): one shard locked at a time, each key
//!   serialised straight into a file under the data directory, which is
//!   then sent from disk. Writers go on meanwhile; the primary's memory
//!   grows by the changes made during the copy (bounded by
//!   `client-output-buffer-limit replica`), not by a copy-on-write image.
//! - **The stream is the record stream.** The primary does not re-send
//!   the commands clients sent; it translates the records they committed
//!   ([`translate`]): effects with every time and random choice made, in
//!   commit order, one group (command, MULTI, script) as one MULTI/EXEC.
//!   Which records follow a copy is exact: those numbered at or above
//!   the `L_s` of their key's shard.
//! - **One stream, one backlog** ([`backlog`]): a producer thread makes
//!   the stream once for every replica, so offsets are shared; PSYNC
//!   continues from the backlog (`+CONTINUE`), WAIT maps a change to the
//!   offset that holds it, and a replica keeps its primary's stream byte
//!   for byte so its own replicas and, after a promotion, its former
//!   siblings continue without a copy. FAILOVER is [`failover`].
//! - One thread per replica on the primary ([`primary`]) and one for the
//!   link on a replica ([`link`]): blocking sockets with timeouts, apart
//!   from the network threads.
//! - **Slots move whole** ([`migration`]): CLUSTER MIGRATION ships a
//!   cluster's slots to another primary the same way, a copy and then
//!   the stream's records of those slots.
//!
//! - **A restarted replica continues.** The position in its primary's
//!   stream (ID, offset, database selected) ends every log group the
//!   stream's commands commit ([`strata_engine::storage::repl_position`]), so after
//!   a restart, even a `kill -9`, the replica asks to continue from
//!   exactly what its data holds ([`Position`]).
//!
//! Not yet (docs/replication.md, "Limits"): a backlog on disk (it is in
//! RAM), replication over TLS or unix sockets, diskless transfers.

pub mod backlog;
pub mod failover;
pub mod link;
pub mod migration;
pub mod primary;
pub mod shared;
pub mod slot_tasks;
pub mod snapshot;
pub mod spill;
pub mod state;
pub mod translate;

pub use state::{
    Attached, BACKLOG_DEFAULT_BYTES, LinkState, Position, Replication, STATE_ONLINE,
    STATE_SEND_BULK, STATE_WAIT_BGSAVE, SyncRequest, Upstream,
};
