//! The scripting commands' entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "eval",
        arity: -3,
        flags: flags![
            NOSCRIPT,
            SKIP_MONITOR,
            MAY_REPLICATE,
            NO_MANDATORY_KEYS,
            STALE
        ],
        keys: &[keynum(&["RW", "access", "update"], 2)],
        acl: categories![SLOW, SCRIPTING],
        group: "scripting",
        since: "2.6.0",
        summary: "Execute a Lua script server side",
        complexity: "Depends on the script that is executed.",
        run: Run::Script(sc::eval),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "evalsha",
        arity: -3,
        flags: flags![
            NOSCRIPT,
            SKIP_MONITOR,
            MAY_REPLICATE,
            NO_MANDATORY_KEYS,
            STALE
        ],
        keys: &[keynum(&["RW", "access", "update"], 2)],
        acl: categories![SLOW, SCRIPTING],
        group: "scripting",
        since: "2.6.0",
        summary: "Execute a Lua script server side",
        complexity: "Depends on the script that is executed.",
        run: Run::Script(sc::evalsha),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "eval_ro",
        arity: -3,
        flags: flags![NOSCRIPT, SKIP_MONITOR, NO_MANDATORY_KEYS, STALE, READONLY],
        keys: &[keynum(&["RO", "access"], 2)],
        acl: categories![READ, SLOW, SCRIPTING],
        group: "scripting",
        since: "7.0.0",
        summary: "Execute a read-only Lua script server side",
        complexity: "Depends on the script that is executed.",
        run: Run::Script(sc::eval_ro),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "evalsha_ro",
        arity: -3,
        flags: flags![NOSCRIPT, SKIP_MONITOR, NO_MANDATORY_KEYS, STALE, READONLY],
        keys: &[keynum(&["RO", "access"], 2)],
        acl: categories![READ, SLOW, SCRIPTING],
        group: "scripting",
        since: "7.0.0",
        summary: "Execute a read-only Lua script server side",
        complexity: "Depends on the script that is executed.",
        run: Run::Script(sc::evalsha_ro),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "script",
        arity: -2,
        flags: flags![],
        acl: categories![SLOW],
        group: "scripting",
        since: "2.6.0",
        summary: "A container for Lua scripts management commands",
        complexity: "Depends on subcommand.",
        run: Run::Container,
        subcommands: SCRIPT_SUBCOMMANDS,
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
];

const SCRIPT_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "load",
        arity: 3,
        flags: flags![NOSCRIPT, STALE],
        acl: categories![SLOW, SCRIPTING],
        since: "2.6.0",
        summary: "Load the specified Lua script into the script cache.",
        complexity: "O(1)",
        run: Run::Handler(sc::script_load),
        ..Spec::DEFAULT
    },
    Spec {
        name: "exists",
        arity: -3,
        flags: flags![NOSCRIPT],
        acl: categories![SLOW, SCRIPTING],
        since: "2.6.0",
        summary: "Check existence of scripts in the script cache.",
        complexity: "O(1)",
        run: Run::Handler(sc::script_exists),
        ..Spec::DEFAULT
    },
    Spec {
        name: "flush",
        arity: -2,
        flags: flags![NOSCRIPT],
        acl: categories![SLOW, SCRIPTING],
        since: "2.6.0",
        summary: "Remove all the scripts from the script cache.",
        complexity: "O(1)",
        run: Run::Handler(sc::script_flush),
        ..Spec::DEFAULT
    },
    Spec {
        name: "kill",
        arity: 2,
        flags: flags![NOSCRIPT, ALLOW_BUSY],
        acl: categories![SLOW, SCRIPTING],
        since: "2.6.0",
        summary: "Kill the script currently in execution.",
        complexity: "O(1)",
        run: Run::Handler(sc::script_kill),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW, SCRIPTING],
        since: "5.0.0",
        summary: "Show helpful text about the different subcommands",
        complexity: "O(1)",
        run: Run::Handler(sc::script_help),
        ..Spec::DEFAULT
    },
];
