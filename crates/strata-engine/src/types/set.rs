//! Set values (Redis sets): distinct byte strings, in the three encodings
//! Redis 7.2 names, and the image codec.
//!
//! - `intset`: every member is an integer's canonical text and there are
//!   at most `set-max-intset-entries`: a sorted `Vec<i64>`, found by
//!   binary search (8 bytes a member).
//! - `listpack`: at most `set-max-listpack-entries` members of at most
//!   `set-max-listpack-value` bytes: one buffer of varint-length-prefixed
//!   members, found by a linear scan (a member costs its bytes plus one).
//! - `hashtable`: an insertion-ordered hash set (`indexmap`), so a member
//!   is found in O(1) *and* a uniformly random member is one index away
//!   (SPOP, SRANDMEMBER), which a plain hash table cannot give. Removal
//!   swaps the last member into the hole: O(1).
//!
//! A set converts up (intset → listpack → hashtable) when an add passes a
//! limit ([`crate::types::limits`]) and never back, as in Redis. The image (a SET
//! record's payload, a checkpoint's) is a varint count and the members,
//! each a varint length and the bytes, in any order; decoding picks the
//! smallest encoding the members allow.
//!
//! Commands change a set through a [`SetOp`] (add or remove members),
//! which is also what the log records (a SET_OP record). SPOP chooses its
//! members first and logs their removal, so replay needs no randomness.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use indexmap::IndexSet;

use crate::types::decimal::parse_canonical_i64;
use crate::types::limits::CollectionLimits;
use crate::varint::{read_bytes, read_varint, varint_len, write_varint};

/// A damaged set image or operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadImage;

/// A set's members in one of Redis' encodings.
pub enum SetValue {
    Ints(Vec<i64>),
    Packed {
        bytes: Vec<u8>,
        count: usize,
    },
    /// Boxed: the table's header is larger than the other encodings.
    Table(Box<IndexSet<Box<[u8]>, RandomState>>),
}

/// A member as the set compares it: an integer set holds numbers.
fn as_int(member: &[u8]) -> Option<i64> {
    parse_canonical_i64(member)
}

fn packed_iter(bytes: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < bytes.len())
            .then(|| read_bytes(bytes, &mut at).expect("packed members are well formed"))
    })
}

/// The byte range of `member` in a packed buffer.
fn packed_find(bytes: &[u8], member: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        let found = read_bytes(bytes, &mut at).expect("packed members are well formed");
        if found == member {
            return Some(start..at);
        }
    }
    None
}

fn new_table(capacity: usize) -> Box<IndexSet<Box<[u8]>, RandomState>> {
    Box::new(IndexSet::with_capacity_and_hasher(
        capacity,
        RandomState::default(),
    ))
}

impl Default for SetValue {
    fn default() -> Self {
        SetValue::Ints(Vec::new())
    }
}

impl SetValue {
    pub fn len(&self) -> usize {
        match self {
            SetValue::Ints(ints) => ints.len(),
            SetValue::Packed { count, .. } => *count,
            SetValue::Table(table) => table.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members its hash table holds before it grows (`None`: not a table).
    pub(crate) fn table_capacity(&self) -> Option<usize> {
        match self {
            SetValue::Table(table) => Some(table.capacity()),
            _ => None,
        }
    }

    /// The encoding's name, as OBJECT ENCODING replies it.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            SetValue::Ints(_) => "intset",
            SetValue::Packed { .. } => "listpack",
            SetValue::Table(_) => "hashtable",
        }
    }

    /// Bytes of RAM the members take (MEMORY USAGE, the RAM budget).
    pub fn memory_bytes(&self) -> usize {
        match self {
            SetValue::Ints(ints) => ints.capacity() * 8,
            SetValue::Packed { bytes, .. } => bytes.capacity(),
            SetValue::Table(table) => {
                // Entries (hash and box) plus the index of 8-byte slots
                // and control bytes, and each member's allocation.
                table.capacity() * (8 + 16 + 9)
                    + table.iter().map(|m| m.len().max(8)).sum::<usize>()
            }
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(ints) => as_int(member).is_some_and(|n| ints.binary_search(&n).is_ok()),
            SetValue::Packed { bytes, .. } => packed_find(bytes, member).is_some(),
            SetValue::Table(table) => table.contains(member),
        }
    }

    /// Every member, each once, in the encoding's order (integers
    /// ascending for an intset, insertion order otherwise).
    pub fn for_each(&self, mut visit: impl FnMut(&[u8])) {
        match self {
            SetValue::Ints(ints) => {
                let mut digits = itoa::Buffer::new();
                for n in ints {
                    visit(digits.format(*n).as_bytes());
                }
            }
            SetValue::Packed { bytes, .. } => packed_iter(bytes).for_each(visit),
            SetValue::Table(table) => table.iter().for_each(|m| visit(m)),
        }
    }

    /// Every member, owned.
    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// The member at position `index` (< [`SetValue::len`]) of the
    /// encoding's order: what a uniformly random index picks.
    pub fn member_at(&self, index: usize) -> Vec<u8> {
        match self {
            SetValue::Ints(ints) => itoa::Buffer::new().format(ints[index]).as_bytes().to_vec(),
            SetValue::Packed { bytes, .. } => {
                packed_iter(bytes).nth(index).expect("index < len").to_vec()
            }
            SetValue::Table(table) => table[index].to_vec(),
        }
    }

    /// Adds `member`; false when it was there. Converts past `limits`.
    pub fn add(&mut self, member: &[u8], limits: &CollectionLimits) -> bool {
        if self.contains(member) {
            return false;
        }
        let int = as_int(member);
        match self {
            SetValue::Ints(ints) if int.is_some() && ints.len() < limits.set_intset_entries => {
                let n = int.expect("checked");
                let at = ints.binary_search(&n).unwrap_err();
                ints.insert(at, n);
                return true;
            }
            SetValue::Ints(ints) => {
                let widest = [ints.first(), ints.last()]
                    .into_iter()
                    .flatten()
                    .map(|n| itoa::Buffer::new().format(*n).len())
                    .max()
                    .unwrap_or(0);
                let fits_packed = ints.len() < limits.set_listpack_entries
                    && member.len() <= limits.set_listpack_value
                    && widest <= limits.set_listpack_value
                    && int.is_none();
                *self = if fits_packed {
                    let mut packed = SetValue::Packed {
                        bytes: Vec::new(),
                        count: 0,
                    };
                    self_members_into(&SetValue::Ints(std::mem::take(ints)), &mut packed);
                    packed
                } else {
                    let mut table = new_table(ints.len() + 1);
                    let mut digits = itoa::Buffer::new();
                    for n in ints.iter() {
                        table.insert(digits.format(*n).as_bytes().into());
                    }
                    SetValue::Table(table)
                };
            }
            SetValue::Packed { bytes, count } => {
                if *count >= limits.set_listpack_entries || member.len() > limits.set_listpack_value
                {
                    let mut table = new_table(*count + 1);
                    for m in packed_iter(bytes) {
                        table.insert(m.into());
                    }
                    *self = SetValue::Table(table);
                }
            }
            SetValue::Table(_) => {}
        }
        match self {
            SetValue::Packed { bytes, count } => {
                write_varint(bytes, member.len());
                bytes.extend_from_slice(member);
                *count += 1;
            }
            SetValue::Table(table) => {
                table.insert(member.into());
            }
            SetValue::Ints(_) => unreachable!("converted above"),
        }
        true
    }

    /// Removes `member`; false when it was not there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Ints(ints) => match as_int(member).map(|n| ints.binary_search(&n)) {
                Some(Ok(at)) => {
                    ints.remove(at);
                    true
                }
                _ => false,
            },
            SetValue::Packed { bytes, count } => match packed_find(bytes, member) {
                Some(span) => {
                    bytes.drain(span);
                    *count -= 1;
                    true
                }
                None => false,
            },
            SetValue::Table(table) => table.swap_remove(member),
        }
    }

    /// Bytes of the image.
    pub fn image_len(&self) -> usize {
        let mut len = varint_len(self.len());
        self.for_each(|m| len += varint_len(m.len()) + m.len());
        len
    }

    pub fn encode_image(&self, out: &mut Vec<u8>) {
        write_varint(out, self.len());
        self.for_each(|m| {
            write_varint(out, m.len());
            out.extend_from_slice(m);
        });
    }

    /// The set an image holds, in the smallest encoding its members allow.
    pub(crate) fn decode_image(
        image: &[u8],
        limits: &CollectionLimits,
    ) -> Result<SetValue, BadImage> {
        let (count, mut at) = read_varint(image).ok_or(BadImage)?;
        let mut set = SetValue::default();
        for _ in 0..count {
            let member = read_bytes(image, &mut at).ok_or(BadImage)?;
            set.add(member, limits);
        }
        if at != image.len() {
            return Err(BadImage);
        }
        match &mut set {
            SetValue::Ints(ints) => ints.shrink_to_fit(),
            SetValue::Packed { bytes, .. } => bytes.shrink_to_fit(),
            SetValue::Table(table) => table.shrink_to_fit(),
        }
        Ok(set)
    }
}

/// Adds every member of `from` to `to` (a packed set being built).
fn self_members_into(from: &SetValue, to: &mut SetValue) {
    let SetValue::Packed { bytes, count } = to else {
        unreachable!("only a packed set is built this way");
    };
    from.for_each(|m| {
        write_varint(bytes, m.len());
        bytes.extend_from_slice(m);
        *count += 1;
    });
}

/// Whether `image` is a well-formed set image.
pub(crate) fn check_image(image: &[u8]) -> Result<(), BadImage> {
    let (count, mut at) = read_varint(image).ok_or(BadImage)?;
    for _ in 0..count {
        read_bytes(image, &mut at).ok_or(BadImage)?;
    }
    if at == image.len() {
        Ok(())
    } else {
        Err(BadImage)
    }
}

/// The image of a set of `members` (distinct), for a new key's value.
pub fn image_of<'m>(members: impl ExactSizeIterator<Item = &'m [u8]>) -> Vec<u8> {
    let mut image = Vec::new();
    write_varint(&mut image, members.len());
    for m in members {
        write_varint(&mut image, m.len());
        image.extend_from_slice(m);
    }
    image
}

/// The image of a new set of `members` (duplicates allowed) and how many
/// distinct members it holds: what an add to a missing key creates.
pub fn image_of_added(members: &[&[u8]]) -> (Vec<u8>, usize) {
    let mut distinct = members.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let count = distinct.len();
    (image_of(distinct.into_iter()), count)
}

/// A set change as commands make it and the log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetOp<'a> {
    Add(Vec<&'a [u8]>),
    Remove(Vec<&'a [u8]>),
}

const OP_ADD: u8 = 1;
const OP_REMOVE: u8 = 2;

impl<'a> SetOp<'a> {
    /// Applies the change; returns how many members were added or removed.
    pub fn apply(&self, set: &mut SetValue, limits: &CollectionLimits) -> usize {
        match self {
            SetOp::Add(members) => members.iter().filter(|m| set.add(m, limits)).count(),
            SetOp::Remove(members) => members.iter().filter(|m| set.remove(m)).count(),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let (code, members) = match self {
            SetOp::Add(members) => (OP_ADD, members),
            SetOp::Remove(members) => (OP_REMOVE, members),
        };
        out.push(code);
        write_varint(out, members.len());
        for m in members {
            write_varint(out, m.len());
            out.extend_from_slice(m);
        }
    }

    pub fn decode(payload: &'a [u8]) -> Result<SetOp<'a>, BadImage> {
        let (&code, rest) = payload.split_first().ok_or(BadImage)?;
        let (count, mut at) = read_varint(rest).ok_or(BadImage)?;
        let mut members = Vec::with_capacity(count.min(rest.len()));
        for _ in 0..count {
            members.push(read_bytes(rest, &mut at).ok_or(BadImage)?);
        }
        if at != rest.len() {
            return Err(BadImage);
        }
        match code {
            OP_ADD => Ok(SetOp::Add(members)),
            OP_REMOVE => Ok(SetOp::Remove(members)),
            _ => Err(BadImage),
        }
    }
}

/// A member's place in SSCAN's order: a hash with a fixed seed, so the
/// order survives the set being rebuilt or reloaded.
pub fn scan_position(member: &[u8]) -> u64 {
    foldhash::fast::FixedState::with_seed(0x7373_6361_6e5f_7631).hash_one(member)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn small() -> CollectionLimits {
        CollectionLimits {
            set_intset_entries: 4,
            set_listpack_entries: 3,
            set_listpack_value: 4,
            ..CollectionLimits::default()
        }
    }

    #[test]
    fn encodings_convert_up_at_the_limits() {
        let limits = small();
        let mut set = SetValue::default();
        for n in ["1", "2", "3", "4"] {
            assert!(set.add(n.as_bytes(), &limits));
        }
        assert_eq!(set.encoding_name(), "intset");
        assert!(!set.add(b"3", &limits));
        assert!(set.add(b"5", &limits));
        assert_eq!(set.encoding_name(), "hashtable", "past the intset limit");
        let mut set = SetValue::default();
        set.add(b"1", &limits);
        set.add(b"a", &limits);
        assert_eq!(set.encoding_name(), "listpack");
        set.add(b"toolong", &limits);
        assert_eq!(set.encoding_name(), "hashtable");
        assert!(set.contains(b"1") && set.contains(b"a") && set.contains(b"toolong"));
        // "01" is not an integer's canonical text: a string member.
        let mut set = SetValue::default();
        set.add(b"01", &limits);
        assert_eq!(set.encoding_name(), "listpack");
        assert!(!set.contains(b"1"));
    }

    proptest! {
        #[test]
        fn a_set_behaves_like_a_btreeset(ops in proptest::collection::vec(
            (any::<bool>(), prop_oneof![
                (0..20i64).prop_map(|n| n.to_string()),
                "[a-c]{1,6}",
            ]),
            1..120,
        )) {
            let limits = small();
            let mut set = SetValue::default();
            let mut model = BTreeSet::new();
            for (add, member) in &ops {
                let op = if *add { SetOp::Add(vec![member.as_bytes()]) } else { SetOp::Remove(vec![member.as_bytes()]) };
                let mut payload = Vec::new();
                op.encode(&mut payload);
                let decoded = SetOp::decode(&payload).unwrap();
                prop_assert_eq!(&decoded, &op);
                let changed = decoded.apply(&mut set, &limits);
                let expected = if *add { model.insert(member.clone()) } else { model.remove(member) };
                prop_assert_eq!(changed, expected as usize);
                prop_assert_eq!(set.len(), model.len());
            }
            let members: BTreeSet<String> = set.members().into_iter().map(|m| String::from_utf8(m).unwrap()).collect();
            prop_assert_eq!(&members, &model);
            let mut image = Vec::new();
            set.encode_image(&mut image);
            prop_assert_eq!(image.len(), set.image_len());
            check_image(&image).unwrap();
            let back = SetValue::decode_image(&image, &limits).unwrap();
            let again: BTreeSet<String> = back.members().into_iter().map(|m| String::from_utf8(m).unwrap()).collect();
            prop_assert_eq!(again, model);
            for i in 0..set.len() {
                prop_assert!(set.contains(&set.member_at(i)));
            }
        }
    }
}
