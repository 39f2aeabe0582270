//! CLUSTER: Strata runs as a single node. `CLUSTER KEYSLOT` answers (keys
//! are sharded by their cluster slot, see the engine's `key` module);
//! every other subcommand Redis 7 has answers what a Redis started without
//! `cluster-enabled` answers, so clients that probe for cluster mode
//! (`CLUSTER INFO`, `CLUSTER SLOTS`) see a standalone server.

use bytes::Bytes;
use strata_engine::keyspace::key_slot;

use super::ctx::help_lines;
use super::{CmdResult, Ctx};

pub const ERR_CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

/// Redis 7's CLUSTER subcommands that Strata does not serve.
pub const DISABLED_SUBCOMMANDS: &[&str] = &[
    "addslots",
    "addslotsrange",
    "bumpepoch",
    "count-failure-reports",
    "countkeysinslot",
    "delslots",
    "delslotsrange",
    "failover",
    "flushslots",
    "forget",
    "getkeysinslot",
    "info",
    "links",
    "meet",
    "myid",
    "nodes",
    "replicas",
    "replicate",
    "reset",
    "saveconfig",
    "set-config-epoch",
    "setslot",
    "shards",
    "slaves",
    "slots",
];

pub fn cluster_keyslot(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.out.int(key_slot(&args[2]) as i64);
    Ok(())
}

/// READONLY, READWRITE and ASKING: cluster clients' commands, answered
/// as a standalone Redis answers them.
pub fn cluster_only(_ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    Err(ERR_CLUSTER_DISABLED.into())
}

pub fn cluster_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "CLUSTER",
        &[
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "(Strata runs as a single node: other subcommands answer that cluster support is disabled.)",
        ],
    );
    Ok(())
}
