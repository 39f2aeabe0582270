//! A key with its hash ([`KeyRef`]), and where a key lives.
//!
//! The 64-bit hash, computed once per command, picks the key's shard (its
//! top [`SHARD_BITS`] bits) and its bucket in the shard's table
//! ([`slot_hash`]). The shard follows the key's Redis Cluster slot
//! ([`key_slot`]: CRC16 of the key, or of its `{hash tag}`, mod 16384):
//! slot `s` lives in shard `s mod 1024`, so the keys of one slot are always
//! in one known shard (moving a slot to another node will touch one shard,
//! and keys sharing a hash tag share a lock), and each node's slot range
//! still spreads over every shard. The remaining bits come from a hash
//! seeded per data directory (foldhash), against hash flooding.
//!
//! Data directories written before slots decided shards keep the old rule
//! (the top bits of the seeded hash): which rule a directory uses is kept
//! in its checkpoints, like the seed ([`Sharding`]).

use std::hash::BuildHasher;

use foldhash::SharedSeed;
use foldhash::quality::SeedableRandomState;

pub(crate) const SHARD_BITS: u32 = 10;
pub const SHARD_COUNT: usize = 1 << SHARD_BITS;
/// Redis Cluster's slot count.
pub const SLOT_COUNT: u16 = 16384;

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

/// How a data directory maps keys to shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sharding {
    /// By Redis Cluster slot (every directory created by this version).
    #[default]
    Slots,
    /// By the seeded hash's top bits (directories of checkpoint format 3
    /// and before).
    Hash,
}

impl Sharding {
    /// The number checkpoints store.
    pub fn code(self) -> u32 {
        match self {
            Sharding::Hash => 0,
            Sharding::Slots => 1,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<Sharding> {
        match code {
            0 => Some(Sharding::Hash),
            1 => Some(Sharding::Slots),
            _ => None,
        }
    }
}

/// Computes keys' hashes for one data directory: its seed and sharding.
#[derive(Clone)]
pub(crate) struct KeyHasher {
    seeded: SeedableRandomState,
    sharding: Sharding,
}

impl KeyHasher {
    pub(crate) fn new(seed: u64, sharding: Sharding) -> KeyHasher {
        KeyHasher {
            seeded: SeedableRandomState::with_seed(seed, SharedSeed::global_fixed()),
            sharding,
        }
    }

    pub(crate) fn sharding(&self) -> Sharding {
        self.sharding
    }

    /// The hash of `key`: its shard in the top bits, then seeded bits.
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        let seeded = self.seeded.hash_one(key);
        match self.sharding {
            Sharding::Hash => seeded,
            Sharding::Slots => {
                let shard = (key_slot(key) as u64) % SHARD_COUNT as u64;
                (shard << (64 - SHARD_BITS)) | (seeded >> SHARD_BITS)
            }
        }
    }
}

impl KeyHasher {
    /// What [`slot_hash`] of [`KeyHasher::hash`] gives in the bits a key
    /// table reads ([`crate::keyspace::table::TABLE_HASH_BITS`]), without
    /// the cluster slot: the seeded bits alone. A table rebuild hashes
    /// every entry, and the slot's CRC16 is a fifth of that.
    pub(crate) fn table_hash(&self, key: &[u8]) -> u64 {
        let seeded = self.seeded.hash_one(key);
        slot_hash(match self.sharding {
            Sharding::Hash => seeded,
            Sharding::Slots => seeded >> SHARD_BITS,
        })
    }
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of the key mod 16384,
/// or of the part between the first `{` and the next `}` when that part is
/// not empty (a hash tag), as the cluster specification defines it.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOT_COUNT
}

/// CRC16 with polynomial 0x1021, initial value 0, no reflection (XMODEM).
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// Slicing-by-8 tables: `CRC16_SLICES[k][b]` is the CRC of byte `b`
/// followed by `k` zero bytes. The CRC is linear and its register is 16
/// bits, so after 8 bytes it is the XOR of each byte's share: 8
/// independent lookups instead of 8 dependent steps (every command hashes
/// its keys' slots: 13 bytes took some 300 instructions bytewise).
const CRC16_SLICES: [[u16; 256]; 8] = {
    let mut slices = [CRC16_TABLE; 8];
    let mut k = 1;
    while k < 8 {
        let mut byte = 0;
        while byte < 256 {
            let previous = slices[k - 1][byte];
            slices[k][byte] = (previous << 8) ^ CRC16_TABLE[(previous >> 8) as usize];
            byte += 1;
        }
        k += 1;
    }
    slices
};

fn crc16(bytes: &[u8]) -> u16 {
    let mut chunks = bytes.chunks_exact(8);
    let mut crc = 0u16;
    for chunk in &mut chunks {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = *chunk else {
            unreachable!("chunks of 8")
        };
        let t = &CRC16_SLICES;
        crc = t[7][((crc >> 8) as u8 ^ b0) as usize]
            ^ t[6][(crc as u8 ^ b1) as usize]
            ^ t[5][b2 as usize]
            ^ t[4][b3 as usize]
            ^ t[3][b4 as usize]
            ^ t[2][b5 as usize]
            ^ t[1][b6 as usize]
            ^ t[0][b7 as usize];
    }
    chunks.remainder().iter().fold(crc, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_hash_agrees_with_the_lookup_hash_where_tables_read() {
        use crate::keyspace::table::TABLE_HASH_BITS;
        for sharding in [Sharding::Slots, Sharding::Hash] {
            let hasher = KeyHasher::new(0x5eed, sharding);
            for n in 0..10_000 {
                let key = format!("key:{{{}}}:{n}", n % 17);
                let lookup = slot_hash(hasher.hash(key.as_bytes()));
                let table = hasher.table_hash(key.as_bytes());
                assert_eq!(lookup & TABLE_HASH_BITS, table & TABLE_HASH_BITS, "{key}");
            }
        }
    }

    #[test]
    fn slots_as_the_cluster_specification_gives_them() {
        // The specification's check value: CRC16("123456789") = 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        // An empty tag, or no closing brace: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar"), crc16(b"foo{bar") % 16384);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn slicing_by_8_matches_the_bytewise_crc() {
        let bytewise = |bytes: &[u8]| {
            bytes.iter().fold(0u16, |crc, &b| {
                (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize]
            })
        };
        let mut data = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..300 {
            assert_eq!(crc16(&data), bytewise(&data), "length {len}");
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.push(x as u8);
        }
    }

    #[test]
    fn keys_of_one_slot_share_a_shard() {
        let hasher = KeyHasher::new(7, Sharding::Slots);
        let shard = |key: &[u8]| {
            KeyRef {
                bytes: key,
                hash: hasher.hash(key),
            }
            .shard()
        };
        assert_eq!(shard(b"{tag}a"), shard(b"{tag}b"));
        assert_eq!(shard(b"k"), key_slot(b"k") as usize % SHARD_COUNT);
        // Different seeds keep the shard, change the rest of the hash.
        let other = KeyHasher::new(8, Sharding::Slots);
        assert_eq!(hasher.hash(b"k") >> 54, other.hash(b"k") >> 54);
        assert_ne!(hasher.hash(b"k"), other.hash(b"k"));
    }
}
