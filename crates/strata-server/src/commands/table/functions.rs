//! The function commands' entries of the command table (FUNCTION, FCALL).

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "fcall",
        arity: -3,
        flags: flags![
            NOSCRIPT,
            SKIP_MONITOR,
            MAY_REPLICATE,
            NO_MANDATORY_KEYS,
            STALE
        ],
        keys: &[noted(
            "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
            keynum(&["RW", "access", "update"], 2),
        )],
        acl: categories![SLOW, SCRIPTING],
        group: "scripting",
        since: "7.0.0",
        summary: "Calls a function from a loaded library, passing keys and arguments.",
        complexity: "Depends on the function that is executed.",
        run: Run::Script(fc::fcall),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "fcall_ro",
        arity: -3,
        flags: flags![NOSCRIPT, SKIP_MONITOR, NO_MANDATORY_KEYS, STALE, READONLY],
        keys: &[noted(
            "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS",
            keynum(&["RO", "access"], 2),
        )],
        acl: categories![SLOW, SCRIPTING],
        group: "scripting",
        since: "7.0.0",
        summary: "Calls a library function flagged no-writes, as a read-only command.",
        complexity: "Depends on the function that is executed.",
        run: Run::Script(fc::fcall_ro),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "function",
        arity: -2,
        flags: flags![],
        acl: categories![SLOW],
        group: "scripting",
        since: "7.0.0",
        summary: "Groups the subcommands that manage function libraries.",
        complexity: "Depends on subcommand.",
        run: Run::Container,
        subcommands: FUNCTION_SUBCOMMANDS,
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
];

const FUNCTION_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "delete",
        arity: 3,
        flags: flags![NOSCRIPT, WRITE],
        acl: categories![WRITE, SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Removes a function library and all of its functions.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_delete),
        traits: traits![DATABASE_WIDE],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "dump",
        arity: 2,
        flags: flags![NOSCRIPT],
        acl: categories![SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Serializes every loaded function library into a binary payload.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_dump),
        ..Spec::DEFAULT
    },
    Spec {
        name: "flush",
        arity: -2,
        flags: flags![NOSCRIPT, WRITE],
        acl: categories![WRITE, SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Removes every function library.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_flush),
        traits: traits![DATABASE_WIDE],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Lists the FUNCTION subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_help),
        ..Spec::DEFAULT
    },
    Spec {
        name: "kill",
        arity: 2,
        flags: flags![NOSCRIPT, ALLOW_BUSY],
        acl: categories![SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Stops the running function, provided it has not written anything.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_kill),
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "list",
        arity: -2,
        flags: flags![NOSCRIPT],
        acl: categories![SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Lists the loaded libraries and their functions, optionally filtered by name.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_list),
        tips: &["nondeterministic_output_order"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "load",
        arity: -3,
        flags: flags![NOSCRIPT, WRITE, DENYOOM],
        acl: categories![WRITE, SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Loads a library from its source code, optionally replacing an existing one.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_load),
        traits: traits![DATABASE_WIDE],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "restore",
        arity: -3,
        flags: flags![NOSCRIPT, WRITE, DENYOOM],
        acl: categories![WRITE, SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Loads function libraries from a payload made by FUNCTION DUMP.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_restore),
        traits: traits![DATABASE_WIDE],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "stats",
        arity: 2,
        flags: flags![NOSCRIPT, ALLOW_BUSY],
        acl: categories![SLOW, SCRIPTING],
        since: "7.0.0",
        summary: "Reports the function running now, if any, and the engines available.",
        complexity: "O(1)",
        run: Run::Handler(fc::function_stats),
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..Spec::DEFAULT
    },
];
