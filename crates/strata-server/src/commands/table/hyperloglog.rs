//! The HyperLogLog commands' entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "pfadd",
        arity: -2,
        flags: flags![WRITE, DENYOOM, FAST],
        keys: &[range(&["RW", "insert"], 1, 0, 1)],
        acl: categories![WRITE, HYPERLOGLOG, FAST],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Adds the specified elements to the specified HyperLogLog.",
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
        summary: "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
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
        summary: "Merge N different HyperLogLogs into a single one.",
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
        summary: "Internal commands for debugging HyperLogLog values",
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
        summary: "An internal command for testing HyperLogLog values",
        complexity: "N/A",
        run: Run::Handler(hll::pfselftest),
        ..Spec::DEFAULT
    },
];
