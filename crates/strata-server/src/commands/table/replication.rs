//! The replication commands' entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "sync",
        arity: 1,
        flags: flags![ADMIN, NOSCRIPT, NO_ASYNC_LOADING, NO_MULTI],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        group: "server",
        since: "1.0.0",
        summary: "Asks for the whole dataset as an RDB file, then every change after it (the replication protocol before PSYNC).",
        complexity: "",
        run: Run::Handler(repl::sync),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "psync",
        arity: -3,
        flags: flags![ADMIN, NOSCRIPT, NO_ASYNC_LOADING, NO_MULTI],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        group: "server",
        since: "2.8.0",
        summary: "A replica asks for the changes after its offset; Strata answers with a full synchronisation.",
        complexity: "",
        run: Run::Handler(repl::psync),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "replconf",
        arity: -1,
        flags: flags![ADMIN, NOSCRIPT, LOADING, STALE, ALLOW_BUSY],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        group: "server",
        since: "3.0.0",
        summary: "What a replica tells its primary about itself during the handshake.",
        complexity: "O(1)",
        run: Run::Handler(repl::replconf),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "replicaof",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, STALE, NO_ASYNC_LOADING],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        group: "server",
        since: "5.0.0",
        summary: "Makes this server a replica of another, or (NO ONE) a primary again.",
        complexity: "O(1)",
        run: Run::Handler(repl::replicaof),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "slaveof",
        arity: 3,
        flags: flags![ADMIN, NOSCRIPT, STALE, NO_ASYNC_LOADING],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        group: "server",
        since: "1.0.0",
        summary: "REPLICAOF's older name.",
        complexity: "O(1)",
        run: Run::Handler(repl::replicaof),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "failover",
        arity: -1,
        flags: flags![ADMIN, NOSCRIPT, STALE],
        acl: categories![ADMIN, SLOW, DANGEROUS],
        group: "server",
        since: "6.2.0",
        summary: "Switches roles with a replica, pausing writes until it holds every one of them.",
        complexity: "O(1)",
        run: Run::Handler(repl::failover),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "role",
        arity: 1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST],
        acl: categories![ADMIN, FAST, DANGEROUS],
        group: "server",
        since: "2.8.12",
        summary: "Tells whether this server is a primary or a replica, with its offset and its replicas or primary.",
        complexity: "O(1)",
        run: Run::Handler(repl::role),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
];
