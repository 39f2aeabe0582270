//! ACL categories (`@read`, `@admin`, …): Redis 7's list, in its order
//! (ACL CAT lists them so), and each command's categories as bits, taken
//! from the command table's `acl` field once at start.

use crate::commands::Categories as TableCategories;
use crate::commands::catalog::{CommandTable, RunKind};

/// Redis 7's categories, in its order (the command table's bits).
pub const CATEGORIES: [&str; 21] = {
    let mut names = [""; 21];
    let mut i = 0;
    while i < names.len() {
        names[i] = TableCategories::NAMES[i].0;
        i += 1;
    }
    names
};

/// Per command id, its categories as bits (bit i: `CATEGORIES[i]`).
pub struct Categories {
    by_id: Vec<u32>,
}

impl Categories {
    pub fn new<R: RunKind>(table: &CommandTable<R>) -> Categories {
        let by_id = table.specs.iter().map(|spec| spec.acl.bits()).collect();
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
