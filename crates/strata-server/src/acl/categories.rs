//! ACL categories (`@read`, `@admin`, …): Redis 7's list, in its order
//! (ACL CAT lists them so), and each command's categories as bits, read
//! from the command table's `acl` field once at start.

use crate::commands::CommandTable;

/// Redis 7's categories, in its order.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Per command id, its categories as bits (bit i: `CATEGORIES[i]`).
pub struct Categories {
    by_id: Vec<u32>,
}

impl Categories {
    pub fn new(table: &CommandTable) -> Categories {
        let by_id = table
            .specs
            .iter()
            .map(|spec| {
                spec.acl.iter().fold(0, |bits, name| {
                    bits | Self::bit_of(name)
                        .unwrap_or_else(|| panic!("unknown ACL category '{name}' in the table"))
                })
            })
            .collect();
        Categories { by_id }
    }

    /// The bit of a category by its name (lower case, without `@`).
    pub fn bit_of(name: &str) -> Option<u32> {
        CATEGORIES
            .iter()
            .position(|c| *c == name)
            .map(|index| 1 << index)
    }

    pub fn of(&self, id: usize) -> u32 {
        self.by_id[id]
    }
}
