//! The HyperLogLog commands' entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "pfadd",
        arity: -2,
        flags: flags![WRITE, DENYOOM, FAST],
        keys: &[range(&["RW", "insert"], 1, 0, 1)],
        acl: categories![WRITE, HYPERLOGLOG, FAST],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Adds elements to a HyperLogLog, creating it if needed.",
        complexity: "O(1) to add every element.",
        run: Run::Handler(hll::pfadd),
        ..Spec::DEFAULT
    },
    Spec {
        name: "pfcount",
        arity: -2,
        flags: flags![READONLY, MAY_REPLICATE],
        keys: &[noted(
            "RW because it may change the internal representation of the key, and propagate to replicas",
            range(&["RW", "access"], 1, -1, 1),
        )],
        acl: categories![READ, HYPERLOGLOG, SLOW],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Estimates the number of distinct elements seen by one or more HyperLogLogs.",
        complexity: "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
        run: Run::Handler(hll::pfcount),
        ..Spec::DEFAULT
    },
    Spec {
        name: "pfmerge",
        arity: -2,
        flags: flags![WRITE, DENYOOM],
        keys: &[
            range(&["RW", "access", "insert"], 1, 0, 1),
            range(&["RO", "access"], 2, -1, 1),
        ],
        acl: categories![WRITE, HYPERLOGLOG, SLOW],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Merges several HyperLogLogs into a destination key.",
        complexity: "O(N) to merge N HyperLogLogs, but with high constant times.",
        run: Run::Handler(hll::pfmerge),
        ..Spec::DEFAULT
    },
    Spec {
        name: "pfdebug",
        arity: 3,
        flags: flags![WRITE, DENYOOM, ADMIN],
        keys: &[range(&["RW", "access"], 2, 0, 1)],
        acl: categories![WRITE, HYPERLOGLOG, ADMIN, SLOW, DANGEROUS],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Inspects the internal representation of a HyperLogLog (for debugging).",
        complexity: "N/A",
        run: Run::Handler(hll::pfdebug),
        ..Spec::DEFAULT
    },
    Spec {
        name: "pfselftest",
        arity: 1,
        flags: flags![ADMIN],
        keys: &[],
        acl: categories![HYPERLOGLOG, ADMIN, SLOW, DANGEROUS],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Runs the self-test of the HyperLogLog implementation (for testing).",
        complexity: "N/A",
        run: Run::Handler(hll::pfselftest),
        ..Spec::DEFAULT
    },
];
