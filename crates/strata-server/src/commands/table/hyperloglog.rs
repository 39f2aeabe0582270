//! The HyperLogLog commands' entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[
    cmd(
        "pfadd",
        -2,
        &["write", "denyoom", "fast"],
        &[range(&["RW", "insert"], 1, 0, 1)],
        &["write", "hyperloglog", "fast"],
        "hyperloglog",
        "2.8.9",
        "Adds the specified elements to the specified HyperLogLog.",
        "O(1) to add every element.",
        hll::pfadd,
    ),
    cmd(
        "pfcount",
        -2,
        &["readonly", "may_replicate"],
        &[noted(
            "RW because it may change the internal representation of the key, and propagate to replicas",
            range(&["RW", "access"], 1, -1, 1),
        )],
        &["read", "hyperloglog", "slow"],
        "hyperloglog",
        "2.8.9",
        "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
        "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
        hll::pfcount,
    ),
    cmd(
        "pfmerge",
        -2,
        &["write", "denyoom"],
        &[
            range(&["RW", "access", "insert"], 1, 0, 1),
            range(&["RO", "access"], 2, -1, 1),
        ],
        &["write", "hyperloglog", "slow"],
        "hyperloglog",
        "2.8.9",
        "Merge N different HyperLogLogs into a single one.",
        "O(N) to merge N HyperLogLogs, but with high constant times.",
        hll::pfmerge,
    ),
];
