//! The `hashtable` encoding of a hash: every field in one byte arena, in
//! the stored field layout, found through a hash index of 4-byte offsets.
//!
//! Why not a table of boxed fields: at a million fields the boxes' 16-byte
//! pointers in a table kept under 7/8 full (so often half empty) cost more
//! than the fields themselves, and each field paid an allocation. Here a
//! field costs its bytes in the arena plus about 10 bytes of index: less
//! than Redis' dict entry and two sds strings.
//!
//! A field replaced by one of the same length is overwritten in place;
//! otherwise the new bytes are appended and the old ones become a hole.
//! Holes are reclaimed by compacting the arena once they are half of it.
//! Offsets are 32-bit, so the arena holds at most 4 GiB: callers keep a
//! hash's image under [`super::IMAGE_BYTES_MAX`], and compaction runs
//! before an append would pass the limit.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::field::Field;

/// Arenas smaller than this are not compacted (not worth a pass).
const COMPACT_BYTES_MIN: usize = 4096;

pub(super) struct FieldTable {
    arena: Vec<u8>,
    index: HashTable<u32>,
    hasher: RandomState,
    /// Bytes of `arena` no field uses.
    holes: usize,
}

impl FieldTable {
    pub(super) fn with_capacity(fields: usize, bytes: usize) -> FieldTable {
        FieldTable {
            arena: Vec::with_capacity(bytes),
            index: HashTable::with_capacity(fields),
            hasher: RandomState::default(),
            holes: 0,
        }
    }

    fn at(&self, offset: u32) -> (Field<'_>, usize) {
        Field::parse(&self.arena[offset as usize..]).expect("stored fields are well formed")
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Bytes the fields take in an image (the arena without its holes).
    pub(super) fn image_bytes(&self) -> usize {
        self.arena.len() - self.holes
    }

    pub(super) fn get(&self, name: &[u8]) -> Option<Field<'_>> {
        let offset = self
            .index
            .find(self.hasher.hash_one(name), |&o| self.at(o).0.name == name)?;
        Some(self.at(*offset).0)
    }

    /// Every field, in index order.
    pub(super) fn iter(&self) -> impl Iterator<Item = Field<'_>> + '_ {
        self.index.iter().map(|&o| self.at(o).0)
    }

    /// The stored bytes of every field, in index order (an image's body).
    pub(super) fn raw_fields(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.index.iter().map(|&o| {
            let used = self.at(o).1;
            &self.arena[o as usize..o as usize + used]
        })
    }

    /// A field in a random bucket, if that bucket holds one.
    pub(super) fn in_bucket(&self, random: u64) -> Option<Field<'_>> {
        let bucket = (random % self.index.num_buckets() as u64) as usize;
        self.index.get_bucket(bucket).map(|&o| self.at(o).0)
    }

    /// Stores `field`, replacing the field of that name.
    pub(super) fn put(&mut self, field: Field) {
        let mut encoded = Vec::with_capacity(field.name.len() + field.value.len() + 20);
        field.encode(&mut encoded);
        let hash = self.hasher.hash_one(field.name);
        let arena = &self.arena;
        let found = self.index.find(hash, |&o| {
            Field::parse(&arena[o as usize..])
                .expect("well formed")
                .0
                .name
                == field.name
        });
        let mut replaced = 0;
        if let Some(&offset) = found {
            let old = self.at(offset).1;
            if old == encoded.len() {
                let start = offset as usize;
                self.arena[start..start + old].copy_from_slice(&encoded);
                return;
            }
            replaced = old;
        }
        let offset = self.append(&encoded);
        let (arena, hasher) = (&self.arena, &self.hasher);
        match self.index.find_mut(hash, |&o| {
            o != offset
                && Field::parse(&arena[o as usize..])
                    .expect("well formed")
                    .0
                    .name
                    == field.name
        }) {
            Some(slot) => {
                *slot = offset;
                self.holes += replaced;
            }
            None => {
                self.index.insert_unique(hash, offset, |&o| {
                    let name = Field::parse(&arena[o as usize..])
                        .expect("well formed")
                        .0
                        .name;
                    hasher.hash_one(name)
                });
            }
        }
        self.compact_if_sparse();
    }

    /// Appends encoded field bytes; returns their offset.
    fn append(&mut self, encoded: &[u8]) -> u32 {
        if self.arena.len() + encoded.len() > u32::MAX as usize {
            self.compact();
        }
        assert!(
            self.arena.len() + encoded.len() <= u32::MAX as usize,
            "hash images are kept under IMAGE_BYTES_MAX"
        );
        if self.arena.len() + encoded.len() > self.arena.capacity() {
            // Grow by a quarter rather than double: a big hash's arena is
            // most of its memory.
            self.arena
                .reserve_exact(encoded.len().max(self.arena.len() / 4).max(64));
        }
        let offset = self.arena.len() as u32;
        self.arena.extend_from_slice(encoded);
        offset
    }

    /// Removes the field `name`; returns it as it was (copied), if there.
    pub(super) fn remove(&mut self, name: &[u8]) -> Option<bool> {
        let hash = self.hasher.hash_one(name);
        let arena = &self.arena;
        let found = self.index.find_entry(hash, |&o| {
            Field::parse(&arena[o as usize..])
                .expect("well formed")
                .0
                .name
                == name
        });
        let Ok(found) = found else {
            return None;
        };
        let (offset, _) = found.remove();
        let (field, used) = self.at(offset);
        let had_deadline = field.deadline.is_some();
        self.holes += used;
        self.compact_if_sparse();
        Some(had_deadline)
    }

    fn compact_if_sparse(&mut self) {
        if self.arena.len() >= COMPACT_BYTES_MIN && self.holes * 2 > self.arena.len() {
            self.compact();
        }
    }

    /// Rewrites the arena without holes (offsets change; hashes do not, so
    /// the index is updated in place).
    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.image_bytes() + self.image_bytes() / 8);
        for offset in self.index.iter_mut() {
            let start = *offset as usize;
            let used = Field::parse(&self.arena[start..]).expect("well formed").1;
            *offset = arena.len() as u32;
            arena.extend_from_slice(&self.arena[start..start + used]);
        }
        self.arena = arena;
        self.holes = 0;
        if self.index.capacity() > 64 && self.index.len() < self.index.capacity() / 8 {
            let (arena, hasher) = (&self.arena, &self.hasher);
            self.index.shrink_to_fit(|&o| {
                hasher.hash_one(
                    Field::parse(&arena[o as usize..])
                        .expect("well formed")
                        .0
                        .name,
                )
            });
        }
    }

    /// Bytes of RAM held (requested sizes).
    /// Fields the index holds before it grows.
    pub(super) fn capacity(&self) -> usize {
        self.index.capacity()
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.arena.capacity() + self.index.num_buckets() * (size_of::<u32>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn field<'a>(name: &'a [u8], value: &'a [u8]) -> Field<'a> {
        Field {
            name,
            value,
            deadline: None,
        }
    }

    #[test]
    fn replaced_and_removed_fields_are_reclaimed_and_the_rest_stays() {
        let mut table = FieldTable::with_capacity(0, 0);
        let mut model = HashMap::new();
        for round in 0..20u32 {
            for n in 0..500u32 {
                let name = format!("field-{n}");
                // Lengths change every round: most puts leave a hole.
                let value = "v".repeat((n + round) as usize % 37);
                table.put(field(name.as_bytes(), value.as_bytes()));
                model.insert(name, value);
            }
            for n in (round..500).step_by(7) {
                let name = format!("field-{n}");
                assert_eq!(
                    table.remove(name.as_bytes()).is_some(),
                    model.remove(&name).is_some()
                );
            }
            assert_eq!(table.len(), model.len());
            assert!(
                table.holes * 2 <= table.arena.len().max(COMPACT_BYTES_MIN),
                "holes are reclaimed: {} of {}",
                table.holes,
                table.arena.len()
            );
            for (name, value) in &model {
                assert_eq!(
                    table.get(name.as_bytes()).map(|f| f.value),
                    Some(value.as_bytes())
                );
            }
            let stored: usize = table.raw_fields().map(<[u8]>::len).sum();
            assert_eq!(stored, table.image_bytes());
        }
    }
}
