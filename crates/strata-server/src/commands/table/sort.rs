//! SORT and SORT_RO's entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "sort",
        arity: -2,
        flags: flags![WRITE, DENYOOM],
        keys: &[
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
        keys_hook: Some(keyspec::sort_keys),
        acl: categories![WRITE, SET, SORTEDSET, LIST, SLOW, DANGEROUS],
        group: "generic",
        since: "1.0.0",
        summary: "Sorts the elements of a list, set or sorted set, optionally storing them.",
        complexity: "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).",
        run: Run::Handler(so::sort),
        traits: traits![DATABASE_WIDE],
        ..Spec::DEFAULT
    },
    Spec {
        name: "sort_ro",
        arity: -2,
        flags: flags![READONLY],
        keys: &[
            range(&["RO", "access"], 1, 0, 1),
            unknown(
                "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
                &["RO", "access"],
            ),
        ],
        acl: categories![READ, SET, SORTEDSET, LIST, SLOW, DANGEROUS],
        group: "generic",
        since: "7.0.0",
        summary: "Sorts the elements of a list, set or sorted set, without storing them.",
        complexity: "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).",
        run: Run::Handler(so::sort_ro),
        traits: traits![DATABASE_WIDE],
        ..Spec::DEFAULT
    },
];
