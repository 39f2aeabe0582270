//! The subcommands of the containers whose rows live in more than one
//! family file (CLIENT, CONFIG, OBJECT, CLUSTER, MEMORY, DEBUG, COMMAND).

use super::prelude::*;

pub(super) const CLIENT_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "reply",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "3.2.0",
        summary: "Turns replies to this connection's commands on, off, or off for the next one.",
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
        summary: "Replies with the connection's unique client ID.",
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
        summary: "Assigns a name to the connection.",
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
        summary: "Replies with the name assigned to the connection.",
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
        summary: "Describes the open client connections, one per line.",
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
        summary: "Describes this connection in the format of CLIENT LIST.",
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
        summary: "Closes client connections chosen by address, ID, type, user or other filters.",
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
        summary: "Records the name or version of the client library using the connection.",
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
        summary: "Exempts the connection from client eviction, or ends the exemption.",
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
        summary: "Suspends the processing of client commands (all, or writes only) for a time.",
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
        summary: "Ends a pause started by CLIENT PAUSE.",
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
        summary: "Wakes, from another connection, a client waiting in a blocking command.",
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
        summary: "Turns key tracking for client-side caching on or off for the connection.",
        complexity: "O(1)",
        run: Run::Handler(crate::commands::tracking::client_tracking),
        ..Spec::DEFAULT
    },
    Spec {
        name: "caching",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.0.0",
        summary: "Says whether the keys read by the next command should be tracked.",
        complexity: "O(1)",
        run: Run::Handler(crate::commands::tracking::client_caching),
        ..Spec::DEFAULT
    },
    Spec {
        name: "getredir",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.0.0",
        summary: "Gives the ID of the client that receives this connection's tracking messages.",
        complexity: "O(1)",
        run: Run::Handler(crate::commands::tracking::client_getredir),
        ..Spec::DEFAULT
    },
    Spec {
        name: "trackinginfo",
        arity: 2,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "6.2.0",
        summary: "Describes the connection's client-side caching (tracking) settings.",
        complexity: "O(1)",
        run: Run::Handler(crate::commands::tracking::client_trackinginfo),
        ..Spec::DEFAULT
    },
    Spec {
        name: "no-touch",
        arity: 3,
        flags: flags![NOSCRIPT, LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "7.2.0",
        summary: "Sets whether this connection's commands update the LRU/LFU data of keys.",
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
        summary: "Lists the CLIENT subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(conn::client_help),
        ..Spec::DEFAULT
    },
];

pub(super) const CONFIG_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "get",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "2.0.0",
        summary: "Reads the values of the configuration parameters matching patterns.",
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
        summary: "Changes configuration parameters while the server runs.",
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
        summary: "Zeroes the statistics counters reported by INFO.",
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
        summary: "Writes the running configuration back to the configuration file.",
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
        summary: "Lists the CONFIG subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(srv::config_help),
        ..Spec::DEFAULT
    },
];

pub(super) const OBJECT_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "encoding",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO, 2, 0, 1)],
        acl: categories![KEYSPACE, READ, SLOW],
        since: "2.2.3",
        summary: "Names the internal encoding used for a key's value.",
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
        summary: "Gives the seconds since a key's value was last read or written.",
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
        summary: "Gives the LFU counter (a logarithmic access count) of a key's value.",
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
        summary: "Gives the number of references held to a key's value.",
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
        summary: "Strata: tells whether a key's value is held in RAM (ram) or only on disk (disk).",
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
        summary: "Lists the OBJECT subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(ks::object_help),
        ..Spec::DEFAULT
    },
];

pub(super) const CLUSTER_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "keyslot",
        arity: 3,
        flags: flags![STALE],
        acl: categories![SLOW],
        since: "3.0.0",
        summary: "Computes the cluster hash slot that a key maps to.",
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
        summary: "Lists the CLUSTER subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(cl::cluster_help),
        ..Spec::DEFAULT
    },
];

pub(super) const MEMORY_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "stats",
        arity: 2,
        flags: flags![],
        acl: categories![SLOW],
        since: "4.0.0",
        summary: "Reports a breakdown of the server's memory use.",
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
        summary: "Reports memory problems the server detects, with advice.",
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
        summary: "Prints the memory allocator's internal statistics.",
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
        summary: "Tells the memory allocator to hand unused pages back to the system.",
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
        summary: "Estimates how many bytes a key and its value take in memory.",
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
        summary: "Lists the MEMORY subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(mem::memory_help),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
];

pub(super) const DEBUG_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "object",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Prints internal details of a key's value on one line.",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_object),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "digest",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Prints a digest of the whole dataset (zeros when it is empty).",
        complexity: "O(N) for N keys and their values",
        run: Run::Handler(dbg::debug_digest),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "digest-value",
        arity: -2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Prints a digest of each key's value and deadline (zeros for a missing key).",
        complexity: "O(N) for N elements of the values",
        run: Run::Handler(dbg::debug_digest_value),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "change-repl-id",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Does nothing: accepted for Redis' test suite (Strata has no replication).",
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
        summary: "Blocks the whole server for the given number of seconds (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_sleep),
        traits: traits![RUNS_UNLOCKED, UNDER_SCRIPT_LOCKS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "populate",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Adds count string keys prefix:N holding value:N, padded to size (tests).",
        complexity: "O(N) for N keys",
        run: Run::Handler(dbg::debug_populate),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "set-active-expire",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Disables (0) or enables (1) the active expire cycle (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_set_active_expire),
        traits: traits![RUNS_UNLOCKED, UNDER_SCRIPT_LOCKS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "shard-locks",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "7.0.0",
        summary: "Gives how many shard locks this connection's thread has taken (Strata's own; tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_shard_locks),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "pause-cron",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "7.0.0",
        summary: "Halts (1) or restarts (0) the periodic cron work (tests).",
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
        summary: "Writes a checkpoint and rebuilds every value the way loading does (tests).",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_reload),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "loadaof",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Rebuilds every value from what the log holds, as loading does (tests).",
        complexity: "O(N)",
        run: Run::Handler(dbg::debug_loadaof),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
    Spec {
        name: "panic",
        arity: 2,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        since: "1.0.0",
        summary: "Panics in the command: the connection closes, the server keeps running (tests).",
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
        summary: "Replies with a sample value of a given RESP type (tests).",
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
        summary: "Allows (1) or forbids (0) scripts to call commands flagged noscript (tests).",
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
        summary: "Sets the size from which a list element is kept alone in a node (tests).",
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
        summary: "Lists the DEBUG subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(dbg::debug_help),
        traits: traits![RUNS_UNLOCKED],
        ..Spec::DEFAULT
    },
];

pub(super) const COMMAND_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "count",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, CONNECTION],
        since: "2.8.13",
        summary: "Gives the number of commands the server knows.",
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
        summary: "Describes the named commands, or all: arity, flags, key positions and more.",
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
        summary: "Gives documentation (summary, group, arguments) for named or all commands.",
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
        summary: "Lists command names, optionally filtered by module, ACL category or pattern.",
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
        summary: "Finds which arguments of a full command line are keys.",
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
        summary: "Finds the key arguments of a full command line and how each is accessed.",
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
        summary: "Lists the COMMAND subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(srv::command_help),
        ..Spec::DEFAULT
    },
];
