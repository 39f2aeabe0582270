//! The bitmaps commands' entries of the command table.

use super::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "setbit",
        arity: 4,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(K_RW_ACCESS_UPDATE, 1, 0, 1)],
        acl: categories![WRITE, BITMAP, SLOW],
        group: "bitmap",
        since: "2.2.0",
        summary: "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
        complexity: "O(1)",
        run: Run::Handler(bits::setbit),
        ..Spec::DEFAULT
    },
    Spec {
        name: "getbit",
        arity: 3,
        flags: flags![READONLY, FAST],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, BITMAP, FAST],
        group: "bitmap",
        since: "2.2.0",
        summary: "Returns a bit value by offset.",
        complexity: "O(1)",
        run: Run::Handler(bits::getbit),
        ..Spec::DEFAULT
    },
    Spec {
        name: "bitcount",
        arity: -2,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, BITMAP, SLOW],
        group: "bitmap",
        since: "2.6.0",
        summary: "Counts the number of set bits (population counting) in a string.",
        complexity: "O(N)",
        run: Run::Handler(bits::bitcount),
        ..Spec::DEFAULT
    },
    Spec {
        name: "bitpos",
        arity: -3,
        flags: flags![READONLY],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, BITMAP, SLOW],
        group: "bitmap",
        since: "2.8.7",
        summary: "Finds the first set (1) or clear (0) bit in a string.",
        complexity: "O(N)",
        run: Run::Handler(bits::bitpos),
        ..Spec::DEFAULT
    },
    Spec {
        name: "bitop",
        arity: -4,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(K_OW_UPDATE, 2, 0, 1), range(K_RO_ACCESS, 3, -1, 1)],
        acl: categories![WRITE, BITMAP, SLOW],
        group: "bitmap",
        since: "2.6.0",
        summary: "Performs bitwise operations on multiple strings, and stores the result.",
        complexity: "O(N)",
        run: Run::Handler(bits::bitop),
        ..Spec::DEFAULT
    },
    Spec {
        name: "bitfield",
        arity: -2,
        flags: flags![WRITE, DENYOOM],
        keys: &[noted(
            "This command allows both access and modification of the key",
            range(K_RW_ACCESS_UPDATE_VARIABLE, 1, 0, 1),
        )],
        keys_hook: Some(keyspec::bitfield_keys),
        acl: categories![WRITE, BITMAP, SLOW],
        group: "bitmap",
        since: "3.2.0",
        summary: "Performs arbitrary bitfield integer operations on strings.",
        complexity: "O(1) for each subcommand specified",
        run: Run::Handler(bits::bitfield),
        ..Spec::DEFAULT
    },
    Spec {
        name: "bitfield_ro",
        arity: -2,
        flags: flags![READONLY, FAST],
        keys: &[range(K_RO_ACCESS, 1, 0, 1)],
        acl: categories![READ, BITMAP, FAST],
        group: "bitmap",
        since: "6.0.0",
        summary: "Performs arbitrary read-only bitfield integer operations on strings.",
        complexity: "O(1) for each subcommand specified",
        run: Run::Handler(bits::bitfield_ro),
        ..Spec::DEFAULT
    },
];
