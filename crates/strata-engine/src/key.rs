//! A key with its hash ([`KeyRef`]): the hash, computed once per command,
//! picks the key's shard (its top [`SHARD_BITS`] bits) and its bucket in
//! the shard's table ([`slot_hash`]).

use foldhash::quality::SeedableRandomState;

pub(crate) type RandomState = SeedableRandomState;

pub const SHARD_BITS: u32 = 10;
pub const SHARD_COUNT: usize = 1 << SHARD_BITS;

/// A key together with its hash; computed once per command.
#[derive(Clone, Copy, Debug)]
pub struct KeyRef<'a> {
    pub bytes: &'a [u8],
    pub hash: u64,
}

impl KeyRef<'_> {
    pub fn shard(&self) -> usize {
        (self.hash >> (64 - SHARD_BITS)) as usize
    }

    pub(crate) fn slot_hash(&self) -> u64 {
        slot_hash(self.hash)
    }
}

/// The hash a shard's table uses for `hash`.
///
/// Every key in a shard has the same top [`SHARD_BITS`] bits, and hashbrown
/// takes its 7-bit control tag from the top of the hash and the bucket from
/// the bottom. Fed the raw hash, every key of a shard would carry the same
/// tag and each probe would compare full keys; rotating moves the shard
/// bits to the middle, where neither tag nor bucket index looks.
pub(crate) fn slot_hash(hash: u64) -> u64 {
    hash.rotate_right(SHARD_BITS)
}
