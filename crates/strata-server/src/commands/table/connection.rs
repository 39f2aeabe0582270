//! The connection commands' entries of the command table.

use super::prelude::*;
use super::subcommands::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "ping",
        arity: -1,
        flags: flags![FAST],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "1.0.0",
        summary: "Checks the connection: replies PONG, or with the message given.",
        complexity: "O(1)",
        run: Run::Handler(conn::ping),
        traits: traits![WHEN_SUBSCRIBED],
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "echo",
        arity: 2,
        flags: flags![FAST, LOADING, STALE],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "1.0.0",
        summary: "Replies with the message it was sent.",
        complexity: "O(1)",
        run: Run::Handler(conn::echo),
        ..Spec::DEFAULT
    },
    Spec {
        name: "quit",
        arity: -1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "1.0.0",
        summary: "Asks the server to close the connection once it has replied.",
        complexity: "O(1)",
        run: Run::Handler(conn::quit),
        traits: traits![RUNS_AT_ONCE, WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "reset",
        arity: 1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "6.2.0",
        summary: "Returns the connection's state (transaction, subscriptions, db, user) to defaults.",
        complexity: "O(1)",
        run: Run::Handler(conn::reset),
        traits: traits![RUNS_AT_ONCE, WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "hello",
        arity: -1,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "6.0.0",
        summary: "Negotiates the protocol version, optionally logging in and naming the connection.",
        complexity: "O(1)",
        run: Run::Handler(conn::hello),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "auth",
        arity: -2,
        flags: flags![NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "1.0.0",
        summary: "Logs the connection in with a password, or a username and password.",
        complexity: "O(N) where N is the number of passwords defined for the user",
        run: Run::Handler(conn::auth),
        traits: traits![NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "select",
        arity: 2,
        flags: flags![FAST, LOADING, STALE],
        acl: categories![FAST, CONNECTION],
        group: "connection",
        since: "1.0.0",
        summary: "Switches the connection to another numbered database.",
        complexity: "O(1)",
        run: Run::Handler(conn::select),
        ..Spec::DEFAULT
    },
    Spec {
        name: "client",
        arity: -2,
        flags: flags![],
        acl: categories![SLOW],
        group: "connection",
        since: "2.4.0",
        summary: "Groups the subcommands that inspect and control client connections.",
        complexity: "Depends on subcommand.",
        run: Run::Container,
        subcommands: CLIENT_SUBCOMMANDS,
        ..Spec::DEFAULT
    },
];
