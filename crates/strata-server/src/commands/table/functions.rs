//! The function commands' entries of the command table (FUNCTION, FCALL).

use super::*;

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
        summary: "Invoke a function",
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
        summary: "Invoke a read-only function",
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
        summary: "A container for function commands",
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
        summary: "Delete a function by name",
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
        summary: "Dump all functions into a serialized binary payload",
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
        summary: "Deleting all functions",
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
        summary: "Show helpful text about the different subcommands",
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
        summary: "Kill the function currently in execution.",
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
        summary: "List information about all the functions",
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
        summary: "Create a function with the given arguments (name, code, description)",
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
        summary: "Restore all the functions on the given payload",
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
        summary: "Return information about the function currently running (name, description, duration)",
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
