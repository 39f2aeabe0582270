//! The stream commands' entries of the command table (flags, key specs and
//! ACL categories as Redis 7.4 declares them).

use super::prelude::*;

/// XREAD's and XREADGROUP's keys: after STREAMS (searched from `from`),
/// the first half of what follows.
const fn after_streams(flags: &'static [&'static str], from: i32) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Keyword {
            keyword: "STREAMS",
            start_from: from,
        },
        find: FindKeys::Range {
            last_key: -1,
            step: 1,
            limit: 2,
        },
    }
}

const XGROUP_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "create",
        arity: -5,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(K_RW_INSERT, 2, 0, 1)],
        acl: categories![WRITE, STREAM, SLOW],
        since: "5.0.0",
        summary: "Creates a consumer group, and with MKSTREAM the stream too.",
        complexity: "O(1)",
        run: Run::Handler(xs::xgroup_create),
        ..Spec::DEFAULT
    },
    Spec {
        name: "setid",
        arity: -5,
        flags: flags![WRITE],
        keys: &[range(K_RW_UPDATE, 2, 0, 1)],
        acl: categories![WRITE, STREAM, SLOW],
        since: "5.0.0",
        summary: "Moves a consumer group's last delivered ID.",
        complexity: "O(1)",
        run: Run::Handler(xs::xgroup_setid),
        ..Spec::DEFAULT
    },
    Spec {
        name: "destroy",
        arity: 4,
        flags: flags![WRITE],
        keys: &[range(K_RW_DELETE, 2, 0, 1)],
        acl: categories![WRITE, STREAM, SLOW],
        since: "5.0.0",
        summary: "Removes a consumer group with its consumers and pending entries.",
        complexity: "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        run: Run::Handler(xs::xgroup_destroy),
        ..Spec::DEFAULT
    },
    Spec {
        name: "createconsumer",
        arity: 5,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(K_RW_INSERT, 2, 0, 1)],
        acl: categories![WRITE, STREAM, SLOW],
        since: "6.2.0",
        summary: "Adds a consumer to a consumer group.",
        complexity: "O(1)",
        run: Run::Handler(xs::xgroup_createconsumer),
        ..Spec::DEFAULT
    },
    Spec {
        name: "delconsumer",
        arity: 5,
        flags: flags![WRITE],
        keys: &[range(K_RW_DELETE, 2, 0, 1)],
        acl: categories![WRITE, STREAM, SLOW],
        since: "5.0.0",
        summary: "Removes a consumer from a group, dropping what was pending with it.",
        complexity: "O(1)",
        run: Run::Handler(xs::xgroup_delconsumer),
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![STREAM, SLOW],
        since: "5.0.0",
        summary: "Lists the XGROUP subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(xs::xgroup_help),
        ..Spec::DEFAULT
    },
];

const XINFO_SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "stream",
        arity: -3,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 2, 0, 1)],
        acl: categories![READ, STREAM, SLOW],
        since: "5.0.0",
        summary: "Describes a stream: its length, IDs, edges, and with FULL its entries and groups.",
        complexity: "O(1)",
        run: Run::Handler(xs::xinfo_stream),
        ..Spec::DEFAULT
    },
    Spec {
        name: "groups",
        arity: 3,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 2, 0, 1)],
        acl: categories![READ, STREAM, SLOW],
        since: "5.0.0",
        summary: "Lists a stream's consumer groups with their progress.",
        complexity: "O(1)",
        run: Run::Handler(xs::xinfo_groups),
        ..Spec::DEFAULT
    },
    Spec {
        name: "consumers",
        arity: 4,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 2, 0, 1)],
        acl: categories![READ, STREAM, SLOW],
        since: "5.0.0",
        summary: "Lists the consumers of a group with their pending counts and idle times.",
        complexity: "O(1)",
        run: Run::Handler(xs::xinfo_consumers),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "help",
        arity: 2,
        flags: flags![LOADING, STALE],
        acl: categories![STREAM, SLOW],
        since: "5.0.0",
        summary: "Lists the XINFO subcommands with a short description of each.",
        complexity: "O(1)",
        run: Run::Handler(xs::xinfo_help),
        ..Spec::DEFAULT
    },
];

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "xadd",
        arity: -5,
        flags: flags![WRITE, DENYOOM, FAST],
        keys: &[noted(
            "UPDATE instead of INSERT because of the optional trimming feature",
            range(K_RW_UPDATE, 1, 0, 1),
        )],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "5.0.0",
        summary: "Appends an entry to a stream, creating the stream if needed, and may trim it.",
        complexity: "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
        run: Run::Handler(xs::xadd),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "xlen",
        arity: 2,
        flags: flags![READONLY, FAST],
        keys: &[range(K_RO, 1, 0, 1)],
        acl: categories![READ, STREAM, FAST],
        group: "stream",
        since: "5.0.0",
        summary: "Counts the entries of a stream.",
        complexity: "O(1)",
        run: Run::Handler(xs::xlen),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xrange",
        arity: -4,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, STREAM, SLOW],
        group: "stream",
        since: "5.0.0",
        summary: "Lists a stream's entries between two IDs, oldest first.",
        complexity: "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
        run: Run::Handler(xs::xrange),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xrevrange",
        arity: -4,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, STREAM, SLOW],
        group: "stream",
        since: "5.0.0",
        summary: "Lists a stream's entries between two IDs, newest first.",
        complexity: "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
        run: Run::Handler(xs::xrevrange),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xdel",
        arity: -3,
        flags: flags![WRITE, FAST],
        keys: &[range(K_RW_DELETE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "5.0.0",
        summary: "Deletes entries of a stream by ID.",
        complexity: "O(1) for each single item to delete in the stream, regardless of the stream size.",
        run: Run::Handler(xs::xdel),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xdelex",
        arity: -5,
        flags: flags![WRITE, FAST],
        keys: &[range(K_RW_DELETE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "8.2.0",
        summary: "Deletes one or multiple entries from the stream.",
        complexity: "O(1) for each single item to delete in the stream, regardless of the stream size.",
        run: Run::Handler(xs::xdelex),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xackdel",
        arity: -6,
        flags: flags![WRITE, FAST],
        keys: &[range(&["RW", "update", "delete"], 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "8.2.0",
        summary: "Acknowledges and deletes one or multiple messages for a stream consumer group.",
        complexity: "O(1) for each entry ID processed.",
        run: Run::Handler(xs::xackdel),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xtrim",
        arity: -4,
        flags: flags![WRITE],
        keys: &[range(K_RW_DELETE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, SLOW],
        group: "stream",
        since: "5.0.0",
        summary: "Removes a stream's oldest entries, down to a length or up to an ID.",
        complexity: "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.",
        run: Run::Handler(xs::xtrim),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "xsetid",
        arity: -3,
        flags: flags![WRITE, DENYOOM, FAST],
        keys: &[range(K_RW_UPDATE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "5.0.0",
        summary: "Sets a stream's last ID, and optionally its added count and largest deleted ID.",
        complexity: "O(1)",
        run: Run::Handler(xs::xsetid),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xread",
        arity: -4,
        flags: flags![BLOCKING, READONLY],
        keys: &[after_streams(K_RO_ACCESS, 1)],
        acl: categories![READ, STREAM, SLOW, BLOCKING],
        group: "stream",
        since: "5.0.0",
        summary: "Reads entries after given IDs from one or more streams, waiting for new ones with BLOCK.",
        complexity: "",
        run: Run::Handler(xs::xread),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xreadgroup",
        arity: -7,
        flags: flags![BLOCKING, WRITE],
        keys: &[after_streams(K_RO_ACCESS, 4)],
        acl: categories![WRITE, STREAM, SLOW, BLOCKING],
        group: "stream",
        since: "5.0.0",
        summary: "Reads entries for a consumer of a group: new ones (>) or its own pending ones.",
        complexity: "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.",
        run: Run::Handler(xs::xreadgroup),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xack",
        arity: -4,
        flags: flags![WRITE, FAST],
        keys: &[range(K_RW_UPDATE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "5.0.0",
        summary: "Acknowledges entries, removing them from a group's pending list.",
        complexity: "O(1) for each message ID processed.",
        run: Run::Handler(xs::xack),
        ..Spec::DEFAULT
    },
    Spec {
        name: "xpending",
        arity: -3,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, STREAM, SLOW],
        group: "stream",
        since: "5.0.0",
        summary: "Describes a group's pending entries: a summary, or a range with idle times and delivery counts.",
        complexity: "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.",
        run: Run::Handler(xs::xpending),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "xclaim",
        arity: -6,
        flags: flags![WRITE, FAST],
        keys: &[range(K_RW_UPDATE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "5.0.0",
        summary: "Gives pending entries idle long enough to another consumer.",
        complexity: "O(log N) with N being the number of messages in the PEL of the consumer group.",
        run: Run::Handler(xs::xclaim),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "xautoclaim",
        arity: -6,
        flags: flags![WRITE, FAST],
        keys: &[range(K_RW_DELETE, 1, 0, 1)],
        acl: categories![WRITE, STREAM, FAST],
        group: "stream",
        since: "6.2.0",
        summary: "Claims the pending entries idle long enough, scanning the pending list from an ID.",
        complexity: "O(1) if COUNT is small.",
        run: Run::Handler(xs::xautoclaim),
        tips: &["nondeterministic_output"],
        ..Spec::DEFAULT
    },
    Spec {
        name: "xgroup",
        arity: -2,
        flags: flags![],
        acl: categories![SLOW],
        group: "stream",
        since: "5.0.0",
        summary: "Groups the subcommands that manage consumer groups.",
        complexity: "Depends on subcommand.",
        run: Run::Container,
        subcommands: XGROUP_SUBCOMMANDS,
        ..Spec::DEFAULT
    },
    Spec {
        name: "xinfo",
        arity: -2,
        flags: flags![],
        acl: categories![SLOW],
        group: "stream",
        since: "5.0.0",
        summary: "Groups the subcommands that describe streams, groups and consumers.",
        complexity: "Depends on subcommand.",
        run: Run::Container,
        subcommands: XINFO_SUBCOMMANDS,
        ..Spec::DEFAULT
    },
];
