//! The bitmaps commands' entries of the command table.

use super::prelude::*;

pub(super) const COMMANDS: &[Spec] = &[
    Spec {
        name: "setbit",
        arity: 4,
        flags: flags![WRITE, DENYOOM],
        keys: &[range(K_RW_ACCESS_UPDATE, 1, 0, 1)],
        acl: categories![WRITE, BITMAP, SLOW],
        group: "bitmap",
        since: "2.2.0",
        summary: "Writes a 0 or 1 at a bit offset of a string, growing or creating it as needed.",
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
        summary: "Reads the bit at an offset in a string.",
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
        summary: "Counts the 1 bits in a string, optionally within a byte or bit range.",
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
        summary: "Locates the first 0 or 1 bit in a string, optionally within a range.",
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
        summary: "Combines strings bitwise (AND, OR, XOR, NOT) and stores the result in a key.",
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
        summary: "Reads, writes and increments integer fields of any width inside a string.",
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
        summary: "Reads integer fields of any width inside a string (GET only, no writes).",
        complexity: "O(1) for each subcommand specified",
        run: Run::Handler(bits::bitfield_ro),
        ..Spec::DEFAULT
    },
];
