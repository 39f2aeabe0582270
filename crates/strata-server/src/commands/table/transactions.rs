//! The transaction commands' entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "multi",
        arity: 1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY],
        keys: &[],
        acl: categories![FAST, TRANSACTION],
        group: "transactions",
        since: "1.2.0",
        summary: "Starts a transaction: later commands are queued until EXEC.",
        complexity: "O(1)",
        run: Run::Handler(tx::multi),
        traits: traits![RUNS_AT_ONCE, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "exec",
        arity: 1,
        flags: flags![NOSCRIPT, LOADING, STALE, SKIP_SLOWLOG],
        keys: &[],
        acl: categories![SLOW, TRANSACTION],
        group: "transactions",
        since: "1.2.0",
        summary: "Runs all commands queued since MULTI as one atomic transaction.",
        complexity: "Depends on commands in the transaction",
        run: Run::Exec,
        traits: traits![RUNS_AT_ONCE, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "discard",
        arity: 1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY],
        keys: &[],
        acl: categories![FAST, TRANSACTION],
        group: "transactions",
        since: "2.0.0",
        summary: "Drops the commands queued since MULTI and ends the transaction.",
        complexity: "O(N), when N is the number of queued commands",
        run: Run::Handler(tx::discard),
        traits: traits![RUNS_AT_ONCE, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "watch",
        arity: -2,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY],
        keys: &[range(&["RO"], 1, -1, 1)],
        acl: categories![FAST, TRANSACTION],
        group: "transactions",
        since: "2.2.0",
        summary: "Makes the next EXEC fail if any of the given keys changes before it.",
        complexity: "O(1) for every key.",
        run: Run::Handler(tx::watch),
        traits: traits![RUNS_AT_ONCE, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "unwatch",
        arity: 1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY],
        keys: &[],
        acl: categories![FAST, TRANSACTION],
        group: "transactions",
        since: "2.2.0",
        summary: "Stops watching all the keys this connection watches.",
        complexity: "O(1)",
        run: Run::Handler(tx::unwatch),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
];
