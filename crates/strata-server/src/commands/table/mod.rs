//! Every command Strata serves, as data: one file per family here
//! (`table/strings.rs`, `table/hashes.rs`, …) next to its handlers'
//! module. Adding a command is one entry plus its handler; arity,
//! authentication, COMMAND's replies and commandstats follow from it.
//!
//! Arity, flags, key positions, ACL categories, groups and "since" versions
//! are Redis 7's, so clients that introspect COMMAND see what they expect.

mod acl;
mod bitmaps;
mod connection;
mod functions;
mod geo;
mod hashes;
mod hyperloglog;
mod keys;
mod lists;
mod pubsub;
mod scripting;
mod server;
mod sets;
mod sort;
mod strings;
mod transactions;
mod zsets;

use super::keyspec::{KeySpec, keynum, keyword_range, noted, range, unknown};
use super::{
    Handler, Spec, acl as ac, bits, cluster as cl, connection as conn, debug as dbg, dump,
    functions as fc, geo as gs, hashes as hs, hyperloglog as hll, introspection as intro,
    keys as ks, latency as lat, lists as ls, memory as mem, pubsub as ps, scripting as sc,
    server as srv, sets as se, sort as so, strings as st, transactions as tx, zsets as zs,
};

const NO_KEYS: &[KeySpec] = &[];

// Key spec flags (see `keyspec`), in Redis' order.
const K_RO: &[&str] = &["RO"];
const K_RO_ACCESS: &[&str] = &["RO", "access"];
const K_RW_UPDATE: &[&str] = &["RW", "update"];
const K_RW_INSERT: &[&str] = &["RW", "insert"];
const K_RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
const K_RW_ACCESS_UPDATE_VARIABLE: &[&str] = &["RW", "access", "update", "variable_flags"];
const K_RW_ACCESS_DELETE: &[&str] = &["RW", "access", "delete"];
const K_OW_UPDATE: &[&str] = &["OW", "update"];
const K_OW_INSERT: &[&str] = &["OW", "insert"];
const K_RM_DELETE: &[&str] = &["RM", "delete"];
const K_RW_DELETE: &[&str] = &["RW", "delete"];

#[allow(clippy::too_many_arguments)]
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: &'static [KeySpec],
    acl: &'static [&'static str],
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        acl,
        group,
        since,
        summary,
        complexity,
        handler: Some(handler),
        subcommands: &[],
    }
}

/// A command whose first argument names a subcommand.
#[allow(clippy::too_many_arguments)]
const fn container(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    acl: &'static [&'static str],
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    handler: Option<Handler>,
    subcommands: &'static [Spec],
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys: NO_KEYS,
        acl,
        group,
        since,
        summary,
        complexity: "Depends on subcommand.",
        handler,
        subcommands,
    }
}

/// A subcommand (its group is its container's).
#[allow(clippy::too_many_arguments)]
const fn sub(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: &'static [KeySpec],
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    handler: Handler,
) -> Spec {
    cmd(
        name, arity, flags, keys, acl, "", since, summary, "O(1)", handler,
    )
}

const R_FAST: &[&str] = &["readonly", "fast"];
const R: &[&str] = &["readonly"];
const W_OOM: &[&str] = &["write", "denyoom"];
const W_OOM_FAST: &[&str] = &["write", "denyoom", "fast"];
const W: &[&str] = &["write"];
const W_FAST: &[&str] = &["write", "fast"];
const W_BLOCKING: &[&str] = &["write", "blocking"];
const W_NOSCRIPT_BLOCKING: &[&str] = &["write", "noscript", "blocking"];
const W_OOM_NOSCRIPT_BLOCKING: &[&str] = &["write", "denyoom", "noscript", "blocking"];
const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const CONN: &[&str] = &["noscript", "loading", "stale"];
const LOADING_STALE: &[&str] = &["loading", "stale"];
const NO_AUTH: &[&str] = &[
    "noscript",
    "loading",
    "stale",
    "fast",
    "no_auth",
    "allow_busy",
];

const READ_STRING_FAST: &[&str] = &["read", "string", "fast"];
const READ_STRING_SLOW: &[&str] = &["read", "string", "slow"];
const WRITE_STRING_FAST: &[&str] = &["write", "string", "fast"];
const WRITE_STRING_SLOW: &[&str] = &["write", "string", "slow"];
const READ_BITMAP_FAST: &[&str] = &["read", "bitmap", "fast"];
const READ_BITMAP_SLOW: &[&str] = &["read", "bitmap", "slow"];
const WRITE_BITMAP_SLOW: &[&str] = &["write", "bitmap", "slow"];
const READ_HASH_FAST: &[&str] = &["read", "hash", "fast"];
const READ_HASH_SLOW: &[&str] = &["read", "hash", "slow"];
const WRITE_HASH_FAST: &[&str] = &["write", "hash", "fast"];
const READ_LIST_FAST: &[&str] = &["read", "list", "fast"];
const READ_LIST_SLOW: &[&str] = &["read", "list", "slow"];
const WRITE_LIST_FAST: &[&str] = &["write", "list", "fast"];
const WRITE_LIST_SLOW: &[&str] = &["write", "list", "slow"];
const WRITE_LIST_BLOCKING: &[&str] = &["write", "list", "slow", "blocking"];
const READ_KEYSPACE_FAST: &[&str] = &["keyspace", "read", "fast"];
const READ_KEYSPACE_SLOW: &[&str] = &["keyspace", "read", "slow"];
const WRITE_KEYSPACE_FAST: &[&str] = &["keyspace", "write", "fast"];
const WRITE_KEYSPACE_SLOW: &[&str] = &["keyspace", "write", "slow"];
const DANGEROUS: &[&str] = &["admin", "slow", "dangerous"];
const CONNECTION_FAST: &[&str] = &["fast", "connection"];
const CONNECTION_SLOW: &[&str] = &["slow", "connection"];
const SLOW: &[&str] = &["slow"];
const READ_SLOW: &[&str] = &["read", "slow"];
const DANGEROUS_CONNECTION: &[&str] = &["admin", "slow", "dangerous", "connection"];

const CLIENT_SUBCOMMANDS: &[Spec] = &[
    sub(
        "reply",
        3,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "3.2.0",
        "Instruct the server whether to reply to commands",
        conn::client_reply,
    ),
    sub(
        "id",
        2,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "5.0.0",
        "Returns the unique client ID of the connection.",
        conn::client_id,
    ),
    sub(
        "setname",
        3,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "2.6.9",
        "Sets the connection name.",
        conn::client_setname,
    ),
    sub(
        "getname",
        2,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "2.6.9",
        "Returns the name of the connection.",
        conn::client_getname,
    ),
    sub(
        "list",
        -2,
        ADMIN,
        NO_KEYS,
        DANGEROUS_CONNECTION,
        "2.4.0",
        "Lists open connections.",
        conn::client_list,
    ),
    sub(
        "info",
        2,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "6.2.0",
        "Returns information about the connection.",
        conn::client_info,
    ),
    sub(
        "kill",
        -3,
        ADMIN,
        NO_KEYS,
        DANGEROUS_CONNECTION,
        "2.4.0",
        "Terminates open connections.",
        conn::client_kill,
    ),
    sub(
        "setinfo",
        4,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "7.2.0",
        "Sets information specific to the client or connection.",
        conn::client_setinfo,
    ),
    sub(
        "no-evict",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS_CONNECTION,
        "7.0.0",
        "Sets the client eviction mode of the connection.",
        conn::client_no_evict,
    ),
    sub(
        "pause",
        -3,
        ADMIN,
        NO_KEYS,
        DANGEROUS_CONNECTION,
        "2.9.50",
        "Stop processing commands from clients for some time",
        conn::client_pause,
    ),
    sub(
        "unpause",
        2,
        ADMIN,
        NO_KEYS,
        DANGEROUS_CONNECTION,
        "6.2.0",
        "Resume processing of clients that were paused",
        conn::client_unpause,
    ),
    sub(
        "unblock",
        -3,
        ADMIN,
        NO_KEYS,
        DANGEROUS_CONNECTION,
        "5.0.0",
        "Unblock a client blocked in a blocking command from a different connection",
        conn::client_unblock,
    ),
    sub(
        "tracking",
        -3,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "6.0.0",
        "Controls server-assisted client-side caching for the connection.",
        super::tracking::client_tracking,
    ),
    sub(
        "caching",
        3,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "6.0.0",
        "Instructs the server whether to track the keys in the next request.",
        super::tracking::client_caching,
    ),
    sub(
        "getredir",
        2,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "6.0.0",
        "Returns the client ID to which the connection's tracking notifications are redirected.",
        super::tracking::client_getredir,
    ),
    sub(
        "trackinginfo",
        2,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "6.2.0",
        "Returns information about server-assisted client-side caching for the connection.",
        super::tracking::client_trackinginfo,
    ),
    sub(
        "no-touch",
        3,
        CONN,
        NO_KEYS,
        CONNECTION_SLOW,
        "7.2.0",
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        conn::client_no_touch,
    ),
    sub(
        "help",
        2,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        conn::client_help,
    ),
];

const CONFIG_SUBCOMMANDS: &[Spec] = &[
    sub(
        "get",
        -3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "2.0.0",
        "Returns the effective values of configuration parameters.",
        srv::config_get,
    ),
    sub(
        "set",
        -4,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "2.0.0",
        "Sets configuration parameters in-flight.",
        srv::config_set,
    ),
    sub(
        "resetstat",
        2,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "2.0.0",
        "Resets the server's statistics.",
        srv::config_resetstat,
    ),
    sub(
        "rewrite",
        2,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "2.8.0",
        "Persists the effective configuration to file.",
        srv::config_rewrite,
    ),
    sub(
        "help",
        2,
        LOADING_STALE,
        NO_KEYS,
        &["slow"],
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        srv::config_help,
    ),
];

const OBJECT_SUBCOMMANDS: &[Spec] = &[
    sub(
        "encoding",
        3,
        R,
        &[range(K_RO, 2, 0, 1)],
        READ_KEYSPACE_SLOW,
        "2.2.3",
        "Returns the internal encoding of a Redis object.",
        ks::object_encoding,
    ),
    sub(
        "idletime",
        3,
        R,
        &[range(K_RO, 2, 0, 1)],
        READ_KEYSPACE_SLOW,
        "2.2.3",
        "Returns the time since the last access to a Redis object.",
        ks::object_idletime,
    ),
    sub(
        "freq",
        3,
        R,
        &[range(K_RO, 2, 0, 1)],
        READ_KEYSPACE_SLOW,
        "4.0.0",
        "Returns the logarithmic access frequency counter of a Redis object.",
        ks::object_freq,
    ),
    sub(
        "refcount",
        3,
        R,
        &[range(K_RO, 2, 0, 1)],
        READ_KEYSPACE_SLOW,
        "2.2.3",
        "Returns the reference count of a value of a key.",
        ks::object_refcount,
    ),
    sub(
        "residency",
        3,
        R,
        &[range(K_RO, 2, 0, 1)],
        READ_KEYSPACE_SLOW,
        "7.2.4",
        "Strata: whether the value of a key is in RAM (ram) or only on disk (disk).",
        ks::object_residency,
    ),
    sub(
        "help",
        2,
        &["loading", "stale"],
        NO_KEYS,
        &["keyspace", "slow"],
        "6.2.0",
        "Returns helpful text about the different subcommands.",
        ks::object_help,
    ),
];

const CLUSTER_SUBCOMMANDS: &[Spec] = &[
    sub(
        "keyslot",
        3,
        &["stale"],
        NO_KEYS,
        SLOW,
        "3.0.0",
        "Returns the hash slot for a key.",
        cl::cluster_keyslot,
    ),
    sub(
        "help",
        2,
        LOADING_STALE,
        NO_KEYS,
        SLOW,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        cl::cluster_help,
    ),
];

const MEMORY_SUBCOMMANDS: &[Spec] = &[
    sub(
        "stats",
        2,
        &[],
        NO_KEYS,
        SLOW,
        "4.0.0",
        "Returns details about memory usage.",
        mem::memory_stats,
    ),
    sub(
        "doctor",
        2,
        &[],
        NO_KEYS,
        SLOW,
        "4.0.0",
        "Outputs a memory problems report.",
        mem::memory_doctor,
    ),
    sub(
        "malloc-stats",
        2,
        &[],
        NO_KEYS,
        SLOW,
        "4.0.0",
        "Returns the allocator statistics.",
        mem::memory_malloc_stats,
    ),
    sub(
        "purge",
        2,
        &[],
        NO_KEYS,
        SLOW,
        "4.0.0",
        "Asks the allocator to release memory.",
        mem::memory_purge,
    ),
    sub(
        "usage",
        -3,
        R,
        &[range(K_RO, 2, 0, 1)],
        READ_SLOW,
        "4.0.0",
        "Estimates the memory usage of a key.",
        mem::memory_usage,
    ),
    sub(
        "help",
        2,
        &["loading", "stale"],
        NO_KEYS,
        &["slow"],
        "4.0.0",
        "Returns helpful text about the different subcommands.",
        mem::memory_help,
    ),
];

const DEBUG_SUBCOMMANDS: &[Spec] = &[
    sub(
        "object",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Shows low level information about a key's value.",
        dbg::debug_object,
    ),
    sub(
        "change-repl-id",
        2,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Accepted for Redis' tests (Strata has no replication).",
        dbg::debug_change_repl_id,
    ),
    sub(
        "sleep",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Pauses the whole server for the given seconds (tests).",
        dbg::debug_sleep,
    ),
    sub(
        "set-active-expire",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Turns the active expire cycle off (0) or on (1) (tests).",
        dbg::debug_set_active_expire,
    ),
    sub(
        "pause-cron",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "7.0.0",
        "Stops (1) or resumes (0) the periodic cron work (tests).",
        dbg::debug_pause_cron,
    ),
    sub(
        "reload",
        -2,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Saves a checkpoint and rebuilds every value as loading does (tests).",
        dbg::debug_reload,
    ),
    sub(
        "panic",
        2,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Panics inside the command: its connection closes, the server runs on (tests).",
        dbg::debug_panic,
    ),
    sub(
        "protocol",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Replies with a test value of a RESP type (tests).",
        dbg::debug_protocol,
    ),
    sub(
        "set-disable-deny-scripts",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Lets scripts call commands flagged noscript (1) or not (0) (tests).",
        dbg::debug_set_disable_deny_scripts,
    ),
    sub(
        "quicklist-packed-threshold",
        3,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "7.0.0",
        "Sets the size from which list elements are stored alone in a node (tests).",
        dbg::debug_quicklist_packed_threshold,
    ),
    sub(
        "help",
        2,
        ADMIN,
        NO_KEYS,
        DANGEROUS,
        "1.0.0",
        "Returns helpful text about the different subcommands.",
        dbg::debug_help,
    ),
];

const COMMAND_SUBCOMMANDS: &[Spec] = &[
    sub(
        "count",
        2,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "2.8.13",
        "Returns a count of commands.",
        srv::command_count,
    ),
    sub(
        "info",
        -2,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "2.8.13",
        "Returns information about one, multiple or all commands.",
        srv::command_info,
    ),
    sub(
        "docs",
        -2,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "7.0.0",
        "Returns documentary information about one, multiple or all commands.",
        srv::command_docs,
    ),
    sub(
        "list",
        -2,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "7.0.0",
        "Returns a list of command names.",
        srv::command_list,
    ),
    sub(
        "getkeys",
        -4,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "2.8.13",
        "Extracts the key names from an arbitrary command.",
        srv::command_getkeys,
    ),
    sub(
        "getkeysandflags",
        -4,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "7.0.0",
        "Extracts the key names and access flags for an arbitrary command.",
        srv::command_getkeysandflags,
    ),
    sub(
        "help",
        2,
        LOADING_STALE,
        NO_KEYS,
        CONNECTION_SLOW,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        srv::command_help,
    ),
];

/// Every command, family by family.
pub static FAMILIES: &[&[Spec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    acl::COMMANDS,
    hashes::COMMANDS,
    lists::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    hyperloglog::COMMANDS,
    geo::COMMANDS,
    sort::COMMANDS,
    keys::COMMANDS,
    strings::COMMANDS,
    bitmaps::COMMANDS,
    transactions::COMMANDS,
    pubsub::COMMANDS,
    scripting::COMMANDS,
    functions::COMMANDS,
];

/// Redis' command tips (COMMAND INFO's eighth element), by full name.
pub fn tips(full_name: &str) -> &'static [&'static str] {
    match full_name {
        "client|list" | "client|info" | "object|encoding" | "object|idletime" | "object|freq"
        | "object|refcount" | "lastsave" | "time" | "ttl" | "pttl" | "dump" | "migrate" => {
            &["nondeterministic_output"]
        }
        "config|set" | "slowlog|reset" => {
            &["request_policy:all_nodes", "response_policy:all_succeeded"]
        }
        "slowlog|get" => &["request_policy:all_nodes", "nondeterministic_output"],
        "latency|latest" | "latency|history" | "latency|graph" | "latency|doctor"
        | "latency|histogram" => &[
            "nondeterministic_output",
            "request_policy:all_nodes",
            "response_policy:special",
        ],
        "latency|reset" => &["request_policy:all_nodes", "response_policy:all_succeeded"],
        "slowlog|len" => &[
            "request_policy:all_nodes",
            "response_policy:agg_sum",
            "nondeterministic_output",
        ],
        "command|info" | "command|docs" | "command|list" | "command" | "function|list" => {
            &["nondeterministic_output_order"]
        }
        "ping" | "flushdb" | "flushall" | "function|delete" | "function|flush"
        | "function|load" | "function|restore" => {
            &["request_policy:all_shards", "response_policy:all_succeeded"]
        }
        "function|kill" => &["request_policy:all_shards", "response_policy:one_succeeded"],
        "info" | "function|stats" => &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        "dbsize" => &["request_policy:all_shards", "response_policy:agg_sum"],
        "memory|stats" | "memory|doctor" | "memory|malloc-stats" => &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        "memory|purge" => &["request_policy:all_shards", "response_policy:all_succeeded"],
        "del" | "unlink" | "exists" | "touch" => {
            &["request_policy:multi_shard", "response_policy:agg_sum"]
        }
        "keys" => &["request_policy:all_shards", "nondeterministic_output_order"],
        "scan" => &["nondeterministic_output", "request_policy:special"],
        "randomkey" => &["request_policy:all_shards", "nondeterministic_output"],
        "mget" => &["request_policy:multi_shard"],
        "mset" => &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        "msetnx" => &["request_policy:multi_shard", "response_policy:agg_min"],
        "hgetall" | "hkeys" | "hvals" | "smembers" | "sinter" | "sunion" | "sdiff" => {
            &["nondeterministic_output_order"]
        }
        "hrandfield" | "hscan" | "spop" | "srandmember" | "sscan" | "zrandmember" | "zscan" => {
            &["nondeterministic_output"]
        }
        _ => &[],
    }
}
