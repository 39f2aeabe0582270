//! Every command Strata serves, as data: one file per family here
//! (`table/strings.rs`, `table/hashes.rs`, …) next to its handlers'
//! module. Adding a command is one entry plus its handler; arity,
//! authentication, COMMAND's replies and commandstats follow from it.
//!
//! Each row is a [`Spec`] with named fields. Arity, flags, key specs, ACL
//! categories, groups, "since" versions and tips are Redis 7's (from its
//! documentation), so clients that introspect COMMAND see what they
//! expect; Strata's own `traits` say how dispatch, transactions, scripts
//! and tiering treat the command; `run` is how it runs (a handler, EXEC,
//! a script, or a container of subcommands). Nothing about a command is
//! kept outside its row.

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

use super::keyspec::{self, keynum, keyword_range, noted, range, unknown};
use super::{
    Run, Spec, acl as ac, bits, cluster as cl, connection as conn, debug as dbg, dump,
    functions as fc, geo as gs, hashes as hs, hyperloglog as hll, introspection as intro,
    keys as ks, latency as lat, lists as ls, memory as mem, pubsub as ps, scripting as sc,
    server as srv, sets as se, sort as so, strings as st, transactions as tx, zsets as zs,
};

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

const CLIENT_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "reply",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "3.2.0",
        summary: "Instruct the server whether to reply to commands",
        complexity: "O(1)",
        run: Run::Handler(conn::client_reply),
        ..Spec::DEFAULT
    },
    Spec {
        name: "id",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "5.0.0",
        summary: "Returns the unique client ID of the connection.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_id),
        ..Spec::DEFAULT
    },
    Spec {
        name: "setname",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "2.6.9",
        summary: "Sets the connection name.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_setname),
        ..Spec::DEFAULT
    },
    Spec {
        name: "getname",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "2.6.9",
        summary: "Returns the name of the connection.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_getname),
        ..Spec::DEFAULT
    },
    Spec {
        name: "list",
        arity: -2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS, CONNECTION],
        since: "2.4.0",
        summary: "Lists open connections.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_list),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "info",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.2.0",
        summary: "Returns information about the connection.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_info),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "kill",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS, CONNECTION],
        since: "2.4.0",
        summary: "Terminates open connections.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_kill),
        ..Spec::DEFAULT
    },
    Spec {
        name: "setinfo",
        arity: 4,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "7.2.0",
        summary: "Sets information specific to the client or connection.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_setinfo),
        ..Spec::DEFAULT
    },
    Spec {
        name: "no-evict",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS, CONNECTION],
        since: "7.0.0",
        summary: "Sets the client eviction mode of the connection.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_no_evict),
        ..Spec::DEFAULT
    },
    Spec {
        name: "pause",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS, CONNECTION],
        since: "2.9.50",
        summary: "Stop processing commands from clients for some time",
        complexity: "O(1)",
        run: Run::Handler(conn::client_pause),
        ..Spec::DEFAULT
    },
    Spec {
        name: "unpause",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS, CONNECTION],
        since: "6.2.0",
        summary: "Resume processing of clients that were paused",
        complexity: "O(1)",
        run: Run::Handler(conn::client_unpause),
        ..Spec::DEFAULT
    },
    Spec {
        name: "unblock",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS, CONNECTION],
        since: "5.0.0",
        summary: "Unblock a client blocked in a blocking command from a different connection",
        complexity: "O(1)",
        run: Run::Handler(conn::client_unblock),
        ..Spec::DEFAULT
    },
    Spec {
        name: "tracking",
        arity: -3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.0.0",
        summary: "Controls server-assisted client-side caching for the connection.",
        complexity: "O(1)",
        run: Run::Handler(super::tracking::client_tracking),
        ..Spec::DEFAULT
    },
    Spec {
        name: "caching",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.0.0",
        summary: "Instructs the server whether to track the keys in the next request.",
        complexity: "O(1)",
        run: Run::Handler(super::tracking::client_caching),
        ..Spec::DEFAULT
    },
    Spec {
        name: "getredir",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.0.0",
        summary: "Returns the client ID to which the connection's tracking notifications are redirected.",
        complexity: "O(1)",
        run: Run::Handler(super::tracking::client_getredir),
        ..Spec::DEFAULT
    },
    Spec {
        name: "trackinginfo",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.2.0",
        summary: "Returns information about server-assisted client-side caching for the connection.",
        complexity: "O(1)",
        run: Run::Handler(super::tracking::client_trackinginfo),
        ..Spec::DEFAULT
    },
    Spec {
        name: "no-touch",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "7.2.0",
        summary: "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_no_touch),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "5.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_help),
        ..Spec::DEFAULT
    },
];

const CONFIG_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "get",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "2.0.0",
        summary: "Returns the effective values of configuration parameters.",
        complexity: "O(1)",
        run: Run::Handler(srv::config_get),
        ..Spec::DEFAULT
    },
    Spec {
        name: "set",
        arity: -4,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "2.0.0",
        summary: "Sets configuration parameters in-flight.",
        complexity: "O(1)",
        run: Run::Handler(srv::config_set),
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "resetstat",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "2.0.0",
        summary: "Resets the server's statistics.",
        complexity: "O(1)",
        run: Run::Handler(srv::config_resetstat),
        ..Spec::DEFAULT
    },
    Spec {
        name: "rewrite",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "2.8.0",
        summary: "Persists the effective configuration to file.",
        complexity: "O(1)",
        run: Run::Handler(srv::config_rewrite),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW],
        since: "5.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(srv::config_help),
        ..Spec::DEFAULT
    },
];

const OBJECT_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "encoding",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![KEYSPACE, READ, SLOW],
        since: "2.2.3",
        summary: "Returns the internal encoding of a Redis object.",
        complexity: "O(1)",
        run: Run::Handler(ks::object_encoding),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "idletime",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![KEYSPACE, READ, SLOW],
        since: "2.2.3",
        summary: "Returns the time since the last access to a Redis object.",
        complexity: "O(1)",
        run: Run::Handler(ks::object_idletime),
        traits: traits![READS_NO_VALUE],
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "freq",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![KEYSPACE, READ, SLOW],
        since: "4.0.0",
        summary: "Returns the logarithmic access frequency counter of a Redis object.",
        complexity: "O(1)",
        run: Run::Handler(ks::object_freq),
        traits: traits![READS_NO_VALUE],
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "refcount",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![KEYSPACE, READ, SLOW],
        since: "2.2.3",
        summary: "Returns the reference count of a value of a key.",
        complexity: "O(1)",
        run: Run::Handler(ks::object_refcount),
        traits: traits![READS_NO_VALUE],
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "residency",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![KEYSPACE, READ, SLOW],
        since: "7.2.4",
        summary: "Strata: whether the value of a key is in RAM (ram) or only on disk (disk).",
        complexity: "O(1)",
        run: Run::Handler(ks::object_residency),
        traits: traits![READS_NO_VALUE],
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![KEYSPACE, SLOW],
        since: "6.2.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(ks::object_help),
        ..Spec::DEFAULT
    },
];

const CLUSTER_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "keyslot",
        arity: 3,
        flags: flags![STALE],
        acl: categories![SLOW],
        since: "3.0.0",
        summary: "Returns the hash slot for a key.",
        complexity: "O(1)",
        run: Run::Handler(cl::cluster_keyslot),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW],
        since: "5.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(cl::cluster_help),
        ..Spec::DEFAULT
    },
];

const MEMORY_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "stats",
        arity: 2,
        flags: flags![],
        acl: categories![SLOW],
        since: "4.0.0",
        summary: "Returns details about memory usage.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_stats),
        traits: traits![RUNS_UNLOCKED],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..Spec::DEFAULT
    },
    Spec {
        name: "doctor",
        arity: 2,
        flags: flags![],
        acl: categories![SLOW],
        since: "4.0.0",
        summary: "Outputs a memory problems report.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_doctor),
        traits: traits![RUNS_UNLOCKED],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..Spec::DEFAULT
    },
    Spec {
        name: "malloc-stats",
        arity: 2,
        flags: flags![],
        acl: categories![SLOW],
        since: "4.0.0",
        summary: "Returns the allocator statistics.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_malloc_stats),
        traits: traits![RUNS_UNLOCKED],
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..Spec::DEFAULT
    },
    Spec {
        name: "purge",
        arity: 2,
        flags: flags![],
        acl: categories![SLOW],
        since: "4.0.0",
        summary: "Asks the allocator to release memory.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_purge),
        traits: traits![RUNS_UNLOCKED],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "usage",
        arity: -3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![READ, SLOW],
        since: "4.0.0",
        summary: "Estimates the memory usage of a key.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_usage),
        traits: traits![READS_NO_VALUE],
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW],
        since: "4.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_help),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
];

const DEBUG_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "object",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Shows low level information about a key's value.",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_object),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "change-repl-id",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Accepted for Redis' tests (Strata has no replication).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_change_repl_id),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "sleep",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Pauses the whole server for the given seconds (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_sleep),
        traits: traits![RUNS_UNLOCKED, UNDER_SCRIPT_LOCKS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "set-active-expire",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Turns the active expire cycle off (0) or on (1) (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_set_active_expire),
        traits: traits![RUNS_UNLOCKED, UNDER_SCRIPT_LOCKS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "pause-cron",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "7.0.0",
        summary: "Stops (1) or resumes (0) the periodic cron work (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_pause_cron),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "reload",
        arity: -2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Saves a checkpoint and rebuilds every value as loading does (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_reload),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "panic",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Panics inside the command: its connection closes, the server runs on (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_panic),
        traits: traits![UNDER_SCRIPT_LOCKS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "protocol",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Replies with a test value of a RESP type (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_protocol),
        traits: traits![RUNS_UNLOCKED, UNDER_SCRIPT_LOCKS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "set-disable-deny-scripts",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Lets scripts call commands flagged noscript (1) or not (0) (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_set_disable_deny_scripts),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "quicklist-packed-threshold",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "7.0.0",
        summary: "Sets the size from which list elements are stored alone in a node (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_quicklist_packed_threshold),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_help),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
];

const COMMAND_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "count",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "2.8.13",
        summary: "Returns a count of commands.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_count),
        ..Spec::DEFAULT
    },
    Spec {
        name: "info",
        arity: -2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "2.8.13",
        summary: "Returns information about one, multiple or all commands.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_info),
        tips: &["nondeterministic_output_order"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "docs",
        arity: -2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "7.0.0",
        summary: "Returns documentary information about one, multiple or all commands.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_docs),
        tips: &["nondeterministic_output_order"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "list",
        arity: -2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "7.0.0",
        summary: "Returns a list of command names.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_list),
        tips: &["nondeterministic_output_order"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "getkeys",
        arity: -4,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "2.8.13",
        summary: "Extracts the key names from an arbitrary command.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_getkeys),
        ..Spec::DEFAULT
    },
    Spec {
        name: "getkeysandflags",
        arity: -4,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "7.0.0",
        summary: "Extracts the key names and access flags for an arbitrary command.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_getkeysandflags),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "5.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_help),
        ..Spec::DEFAULT
    },
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
