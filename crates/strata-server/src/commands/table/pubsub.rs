//! The pub/sub commands' entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "subscribe",
        arity: -2,
        flags: flags![PUBSUB, NOSCRIPT, LOADING, STALE, SENTINEL],
        keys: &[],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "2.0.0",
        summary: "Subscribes the connection to messages sent to the given channels.",
        complexity: "O(N) where N is the number of channels to subscribe to.",
        run: Run::Handler(ps::subscribe),
        traits: traits![WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "unsubscribe",
        arity: -1,
        flags: flags![PUBSUB, NOSCRIPT, LOADING, STALE, SENTINEL],
        keys: &[],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "2.0.0",
        summary: "Ends the connection's subscriptions to the given channels, or to all.",
        complexity: "O(N) where N is the number of clients already subscribed to a channel.",
        run: Run::Handler(ps::unsubscribe),
        traits: traits![WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "psubscribe",
        arity: -2,
        flags: flags![PUBSUB, NOSCRIPT, LOADING, STALE, SENTINEL],
        keys: &[],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "2.0.0",
        summary: "Subscribes the connection to channels whose names match glob patterns.",
        complexity: "O(N) where N is the number of patterns the client is already subscribed to.",
        run: Run::Handler(ps::psubscribe),
        traits: traits![WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "punsubscribe",
        arity: -1,
        flags: flags![PUBSUB, NOSCRIPT, LOADING, STALE, SENTINEL],
        keys: &[],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "2.0.0",
        summary: "Ends the connection's subscriptions to the given patterns, or to all.",
        complexity: "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).",
        run: Run::Handler(ps::punsubscribe),
        traits: traits![WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "ssubscribe",
        arity: -2,
        flags: flags![PUBSUB, NOSCRIPT, LOADING, STALE],
        keys: &[range(&["not_key"], 1, -1, 1)],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "7.0.0",
        summary: "Subscribes the connection to messages sent to the given shard channels.",
        complexity: "O(N) where N is the number of shard channels to subscribe to.",
        run: Run::Handler(ps::ssubscribe),
        traits: traits![WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "sunsubscribe",
        arity: -1,
        flags: flags![PUBSUB, NOSCRIPT, LOADING, STALE],
        keys: &[range(&["not_key"], 1, -1, 1)],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "7.0.0",
        summary: "Ends the connection's subscriptions to the given shard channels, or to all.",
        complexity: "O(N) where N is the number of clients already subscribed to a shard channel.",
        run: Run::Handler(ps::sunsubscribe),
        traits: traits![WHEN_SUBSCRIBED, NEVER_FROM_SCRIPTS],
        ..Spec::DEFAULT
    },
    Spec {
        name: "publish",
        arity: 3,
        flags: flags![PUBSUB, LOADING, STALE, FAST, MAY_REPLICATE, SENTINEL],
        keys: &[],
        acl: categories![PUBSUB, FAST],
        group: "pubsub",
        since: "2.0.0",
        summary: "Sends a message to a channel and counts the subscribers that received it.",
        complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        run: Run::Handler(ps::publish),
        ..Spec::DEFAULT
    },
    Spec {
        name: "spublish",
        arity: 3,
        flags: flags![PUBSUB, LOADING, STALE, FAST, MAY_REPLICATE],
        keys: &[range(&["not_key"], 1, 0, 1)],
        acl: categories![PUBSUB, FAST],
        group: "pubsub",
        since: "7.0.0",
        summary: "Sends a message to a shard channel and counts the subscribers that received it.",
        complexity: "O(N) where N is the number of clients subscribed to the receiving shard channel.",
        run: Run::Handler(ps::spublish),
        ..Spec::DEFAULT
    },
    Spec {
        name: "pubsub",
        arity: -2,
        flags: flags![],
        acl: categories![PUBSUB, SLOW],
        group: "pubsub",
        since: "2.8.0",
        summary: "Groups the subcommands that inspect Pub/Sub channels and subscriptions.",
        complexity: "Depends on subcommand.",
        run: Run::Container,
        subcommands: PUBSUB_SUBCOMMANDS,
        ..Spec::DEFAULT
    },
];

const PUBSUB_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "channels",
        arity: -2,
        flags: flags![PUBSUB, LOADING, STALE],
        acl: categories![PUBSUB, SLOW],
        since: "2.8.0",
        summary: "Lists channels that have subscribers, optionally those matching a pattern.",
        complexity: "O(1)",
        run: Run::Handler(ps::pubsub_channels),
        ..Spec::DEFAULT
    },
    Spec {
        name: "numsub",
        arity: -2,
        flags: flags![PUBSUB, LOADING, STALE],
        acl: categories![PUBSUB, SLOW],
        since: "2.8.0",
        summary: "Counts the subscribers of each given channel.",
        complexity: "O(1)",
        run: Run::Handler(ps::pubsub_numsub),
        ..Spec::DEFAULT
    },
    Spec {
        name: "numpat",
        arity: 2,
        flags: flags![PUBSUB, LOADING, STALE],
        acl: categories![PUBSUB, SLOW],
        since: "2.8.0",
        summary: "Counts the distinct patterns that clients are subscribed to.",
        complexity: "O(1)",
        run: Run::Handler(ps::pubsub_numpat),
        ..Spec::DEFAULT
    },
    Spec {
        name: "shardchannels",
        arity: -2,
        flags: flags![PUBSUB, LOADING, STALE],
        acl: categories![PUBSUB, SLOW],
        since: "7.0.0",
        summary: "Lists shard channels that have subscribers, optionally matching a pattern.",
        complexity: "O(1)",
        run: Run::Handler(ps::pubsub_shardchannels),
        ..Spec::DEFAULT
    },
    Spec {
        name: "shardnumsub",
        arity: -2,
        flags: flags![PUBSUB, LOADING, STALE],
        acl: categories![PUBSUB, SLOW],
        since: "7.0.0",
        summary: "Counts the subscribers of each given shard channel.",
        complexity: "O(1)",
        run: Run::Handler(ps::pubsub_shardnumsub),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![SLOW],
        since: "6.2.0",
        summary: "Lists the PUBSUB subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(ps::pubsub_help),
        ..Spec::DEFAULT
    },
];
