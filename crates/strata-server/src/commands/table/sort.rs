//! SORT and SORT_RO's entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[
    cmd(
        "sort",
        -2,
        &["write", "denyoom"],
        &[
            range(&["RO", "access"], 1, 0, 1),
            unknown(
                "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
                &["RO", "access"],
            ),
            unknown(
                "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array",
                &["OW", "update"],
            ),
        ],
        &["write", "set", "sortedset", "list", "slow", "dangerous"],
        "generic",
        "1.0.0",
        "Sort the elements in a list, set or sorted set",
        "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).",
        so::sort,
    ),
    cmd(
        "sort_ro",
        -2,
        &["readonly"],
        &[
            range(&["RO", "access"], 1, 0, 1),
            unknown(
                "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
                &["RO", "access"],
            ),
        ],
        &["read", "set", "sortedset", "list", "slow", "dangerous"],
        "generic",
        "7.0.0",
        "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
        "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).",
        so::sort_ro,
    ),
];
