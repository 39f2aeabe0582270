//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID,
//! XREAD, XREADGROUP, XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER,
//! DELCONSUMER, HELP), XACK, XPENDING, XCLAIM, XAUTOCLAIM and XINFO
//! (STREAM [FULL], GROUPS, CONSUMERS, HELP), with Redis 7.4's replies and
//! error texts; and Redis 8.2's XDELEX, XACKDEL and the KEEPREF / DELREF /
//! ACKED options of XADD and XTRIM.
//!
//! Reads borrow the stored stream (`strata_engine::types::stream::StreamValue`)
//! under the shard lock. Every change is a [`StreamOp`] the engine applies
//! and logs as it is: XADD logs its entry, XACK its IDs, XREADGROUP the
//! IDs it delivered, never the stream. A command decides everything that
//! depends on the clock or the configuration (the new ID, where a trim
//! cuts, whether an entry starts a node) before it makes the operation,
//! so replaying it gives the same stream. Streams stay when emptied, as
//! in Redis.
//!
//! XREAD and XREADGROUP with BLOCK that find nothing block like BLPOP
//! (`crate::events::blocking`): they run again when a key changes. XREAD's `$` is
//! replaced by the stream's last ID when it blocks, as Redis does, so the
//! command that runs again waits for entries after that one.
//!
//! One file per concern: `common` (arguments, replies, the stream at a
//! key), `entries` (adding, reading ranges, deleting, trimming), `read`
//! (XREAD, XREADGROUP), `groups` (consumer groups, pending entries,
//! claims), `info` (XINFO), `refs` (Redis 8.2's reference strategies).

mod common;
mod entries;
mod groups;
mod info;
mod read;
mod refs;

pub use entries::{xadd, xdel, xlen, xrange, xrevrange, xsetid, xtrim};
pub use groups::{
    xack, xautoclaim, xclaim, xgroup_create, xgroup_createconsumer, xgroup_delconsumer,
    xgroup_destroy, xgroup_help, xgroup_setid, xpending,
};
pub use info::{xinfo_consumers, xinfo_groups, xinfo_help, xinfo_stream};
pub use read::{xread, xreadgroup};
pub use refs::{xackdel, xdelex};
