//! The scripting commands' entries of the command table.

use super::prelude::*;

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
        summary: "Runs a Lua script on the server, passing keys and arguments.",
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
        summary: "Runs a cached Lua script identified by its SHA1 digest.",
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
        summary: "Runs a Lua script that only reads data, as a read-only command.",
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
        summary: "Runs a cached Lua script, by SHA1 digest, that only reads data.",
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
        summary: "Groups the subcommands that manage the Lua script cache.",
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
        summary: "Adds a Lua script to the script cache without running it; replies its SHA1.",
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
        summary: "Tells, for each SHA1 digest given, whether the script cache holds it.",
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
        summary: "Empties the Lua script cache.",
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
        summary: "Stops the running Lua script, provided it has not written anything.",
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
        summary: "Lists the SCRIPT subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(sc::script_help),
        ..Spec::DEFAULT
    },
];
