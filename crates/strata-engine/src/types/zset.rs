//! Sorted set values (Redis zsets): members with scores, ordered by score
//! then member bytes, in the two encodings Redis names, and the image
//! codec.
//!
//! - `listpack`: at most `zset-max-listpack-entries` members of at most
//!   `zset-max-listpack-value` bytes, in order in one buffer (each the
//!   score's 8 bytes, a varint length and the member): every operation is
//!   a scan of at most 128 small entries, as in Redis.
//! - `skiplist`: a member → score table for O(1) ZSCORE, plus the order as
//!   a list of sorted *chunks* of at most [`CHUNK_MAX`] entries. A position
//!   is found by binary search over the chunks' last entries and then in
//!   the chunk; a rank adds the lengths of the chunks before. That is
//!   O(log n + n / CHUNK_MAX) where Redis' skiplist is O(log n): at a
//!   million members about 8 000 additions, a few microseconds, in exchange
//!   for half the pointers of a skiplist and no unsafe code. (OBJECT
//!   ENCODING says `skiplist`, Redis' name for this encoding.)
//!
//! Every query is a *position*: [`ZSetValue::partition_point`] finds the
//! first position where a monotone predicate turns false, which answers
//! score bounds, lex bounds and ranks alike; ranges are positions.
//!
//! Scores are never NaN (commands refuse NaN results, as Redis does), so
//! the order is total; -0 and 0 compare equal, as in Redis.
//!
//! Commands change a sorted set through a [`ZSetOp`] (put members with
//! their final scores, or remove members), which is also what the log
//! records (a ZSET_OP record): ZINCRBY logs the score it computed, ZPOPMIN
//! the members it removed, so replay recomputes nothing.

use std::cmp::Ordering;
use std::collections::HashMap;

use foldhash::fast::RandomState;

use crate::types::limits::CollectionLimits;
use crate::varint::{read_bytes, read_varint, varint_len, write_varint};

/// Entries per chunk of a `skiplist`-encoded set before it splits.
pub(crate) const CHUNK_MAX: usize = 256;

/// A damaged sorted set image or operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadImage;

/// The order of entries: score, then member bytes.
pub fn cmp_entry(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

pub enum ZSetValue {
    Packed { bytes: Vec<u8>, count: usize },
    Sorted(Box<Sorted>),
}

pub struct Sorted {
    scores: HashMap<Box<[u8]>, f64, RandomState>,
    chunks: Vec<Vec<(f64, Box<[u8]>)>>,
}

/// Reads the packed entry at `*at`: (score, member); advances `*at`.
fn read_packed<'a>(bytes: &'a [u8], at: &mut usize) -> Option<(f64, &'a [u8])> {
    let score = f64::from_le_bytes(bytes.get(*at..*at + 8)?.try_into().ok()?);
    *at += 8;
    let member = read_bytes(bytes, at)?;
    Some((score, member))
}

fn write_packed(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    out.extend_from_slice(&score.to_le_bytes());
    write_varint(out, member.len());
    out.extend_from_slice(member);
}

/// A score as a `listpack` entry holds it: an integral score of at most
/// 2^53 in magnitude as a zigzag varint shifted left once (low bit 0), as
/// Redis' listpack stores integral scores as integers; any other score as
/// the byte 1 and its 8 bytes. -0 is integral too: it reads back as 0, as
/// from Redis' listpack (a `skiplist` keeps -0, as Redis' does).
fn write_mem(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    const EXACT: f64 = (1u64 << 53) as f64;
    if score.fract() == 0.0 && score.abs() <= EXACT {
        let n = score as i64;
        let zigzag = ((n << 1) ^ (n >> 63)) as u64;
        write_varint(out, (zigzag as usize) << 1);
    } else {
        out.push(1);
        out.extend_from_slice(&score.to_le_bytes());
    }
    write_varint(out, member.len());
    out.extend_from_slice(member);
}

/// Reads the `listpack` entry at `*at` (see [`write_mem`]).
fn read_mem<'a>(bytes: &'a [u8], at: &mut usize) -> Option<(f64, &'a [u8])> {
    let score = if bytes.get(*at)? & 1 == 1 {
        let score = f64::from_le_bytes(bytes.get(*at + 1..*at + 9)?.try_into().ok()?);
        *at += 9;
        score
    } else {
        let (shifted, used) = read_varint(&bytes[*at..])?;
        *at += used;
        let zigzag = (shifted >> 1) as u64;
        ((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64)) as f64
    };
    let member = read_bytes(bytes, at)?;
    Some((score, member))
}

fn packed_iter(bytes: &[u8]) -> impl Iterator<Item = (f64, &[u8])> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < bytes.len())
            .then(|| read_mem(bytes, &mut at).expect("packed entries are well formed"))
    })
}

/// What [`ZSetValue::put`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    Added,
    Updated,
    Unchanged,
}

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue::Packed {
            bytes: Vec::new(),
            count: 0,
        }
    }
}

impl Sorted {
    fn new() -> Sorted {
        Sorted {
            scores: HashMap::with_hasher(RandomState::default()),
            chunks: Vec::new(),
        }
    }

    /// The chunk that holds (or would hold) `entry`, and the position in it.
    fn locate(&self, entry: (f64, &[u8])) -> (usize, usize) {
        let chunk = self
            .chunks
            .partition_point(|c| {
                let (s, m) = c.last().expect("chunks are never empty");
                cmp_entry((*s, m), entry) == Ordering::Less
            })
            .min(self.chunks.len().saturating_sub(1));
        let at = self.chunks.get(chunk).map_or(0, |c| {
            c.partition_point(|(s, m)| cmp_entry((*s, m), entry) == Ordering::Less)
        });
        (chunk, at)
    }

    fn insert(&mut self, score: f64, member: &[u8]) {
        self.scores.insert(member.into(), score);
        if self.chunks.is_empty() {
            self.chunks.push(vec![(score, member.into())]);
            return;
        }
        let (chunk, at) = self.locate((score, member));
        let entries = &mut self.chunks[chunk];
        entries.insert(at, (score, member.into()));
        if entries.len() > CHUNK_MAX {
            let upper = entries.split_off(entries.len() / 2);
            self.chunks.insert(chunk + 1, upper);
        }
    }

    fn remove(&mut self, score: f64, member: &[u8]) {
        let (chunk, at) = self.locate((score, member));
        let entries = &mut self.chunks[chunk];
        debug_assert!(&*entries[at].1 == member);
        entries.remove(at);
        let left = entries.len();
        if left == 0 {
            self.chunks.remove(chunk);
        } else if left < CHUNK_MAX / 4
            && chunk + 1 < self.chunks.len()
            && left + self.chunks[chunk + 1].len() <= CHUNK_MAX
        {
            let next = self.chunks.remove(chunk + 1);
            self.chunks[chunk].extend(next);
        }
        self.scores.remove(member);
    }
}

impl ZSetValue {
    /// Members its hash table (member to score) holds before it grows
    /// (`None`: packed).
    pub(crate) fn table_capacity(&self) -> Option<usize> {
        match self {
            ZSetValue::Packed { .. } => None,
            ZSetValue::Sorted(sorted) => Some(sorted.scores.capacity()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSetValue::Packed { count, .. } => *count,
            ZSetValue::Sorted(sorted) => sorted.scores.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding_name(&self) -> &'static str {
        match self {
            ZSetValue::Packed { .. } => "listpack",
            ZSetValue::Sorted(_) => "skiplist",
        }
    }

    /// Bytes of RAM the entries take (MEMORY USAGE, the RAM budget).
    pub fn memory_bytes(&self) -> usize {
        match self {
            ZSetValue::Packed { bytes, .. } => bytes.capacity(),
            ZSetValue::Sorted(sorted) => {
                let members: usize = sorted.scores.keys().map(|m| 2 * m.len().max(8)).sum();
                sorted.scores.capacity() * (16 + 8 + 1)
                    + sorted
                        .chunks
                        .iter()
                        .map(|c| c.capacity() * 24 + 24)
                        .sum::<usize>()
                    + members
            }
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSetValue::Packed { bytes, .. } => packed_iter(bytes)
                .find(|(_, m)| *m == member)
                .map(|(s, _)| s),
            ZSetValue::Sorted(sorted) => sorted.scores.get(member).copied(),
        }
    }

    /// The first position whose entry makes `below` false (`below` must be
    /// true for a prefix of the order and false after it).
    pub fn partition_point(&self, below: impl Fn(f64, &[u8]) -> bool) -> usize {
        match self {
            ZSetValue::Packed { bytes, .. } => {
                packed_iter(bytes).take_while(|(s, m)| below(*s, m)).count()
            }
            ZSetValue::Sorted(sorted) => {
                let chunk = sorted.chunks.partition_point(|c| {
                    let (s, m) = c.last().expect("chunks are never empty");
                    below(*s, m)
                });
                let before: usize = sorted.chunks[..chunk].iter().map(Vec::len).sum();
                before
                    + sorted
                        .chunks
                        .get(chunk)
                        .map_or(0, |c| c.partition_point(|(s, m)| below(*s, m)))
            }
        }
    }

    /// The 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.partition_point(|s, m| cmp_entry((s, m), (score, member)) == Ordering::Less))
    }

    /// Entries at positions `start..end` (clamped), ascending.
    pub fn range(&self, start: usize, end: usize) -> Vec<(f64, &[u8])> {
        let end = end.min(self.len());
        if start >= end {
            return Vec::new();
        }
        match self {
            ZSetValue::Packed { bytes, .. } => {
                packed_iter(bytes).skip(start).take(end - start).collect()
            }
            ZSetValue::Sorted(sorted) => {
                let mut out = Vec::with_capacity(end - start);
                let mut skip = start;
                for chunk in &sorted.chunks {
                    if skip >= chunk.len() {
                        skip -= chunk.len();
                        continue;
                    }
                    for (s, m) in &chunk[skip..] {
                        if out.len() == end - start {
                            return out;
                        }
                        out.push((*s, &m[..]));
                    }
                    skip = 0;
                }
                out
            }
        }
    }

    /// Visits every entry in ascending order.
    pub fn for_each(&self, mut visit: impl FnMut(f64, &[u8])) {
        match self {
            ZSetValue::Packed { bytes, .. } => packed_iter(bytes).for_each(|(s, m)| visit(s, m)),
            ZSetValue::Sorted(sorted) => {
                for (s, m) in sorted.chunks.iter().flatten() {
                    visit(*s, m);
                }
            }
        }
    }

    /// Sets `member`'s score, adding it if new; converts past `limits`.
    pub fn put(&mut self, score: f64, member: &[u8], limits: &CollectionLimits) -> Put {
        debug_assert!(!score.is_nan());
        let old = self.score(member);
        if old == Some(score) {
            return Put::Unchanged;
        }
        if let Some(old) = old {
            self.remove_entry(old, member);
        }
        if let ZSetValue::Packed { bytes, count } = self
            && (*count >= limits.zset_listpack_entries || member.len() > limits.zset_listpack_value)
        {
            let mut sorted = Sorted::new();
            for (s, m) in packed_iter(bytes) {
                sorted.insert(s, m);
            }
            *self = ZSetValue::Sorted(Box::new(sorted));
        }
        match self {
            ZSetValue::Packed { bytes, count } => {
                let mut at = 0;
                while at < bytes.len() {
                    let mut next = at;
                    let (s, m) = read_mem(bytes, &mut next).expect("well formed");
                    if cmp_entry((s, m), (score, member)) == Ordering::Greater {
                        break;
                    }
                    at = next;
                }
                let mut entry = Vec::with_capacity(9 + member.len());
                write_mem(&mut entry, score, member);
                bytes.splice(at..at, entry);
                *count += 1;
            }
            ZSetValue::Sorted(sorted) => sorted.insert(score, member),
        }
        if old.is_some() {
            Put::Updated
        } else {
            Put::Added
        }
    }

    fn remove_entry(&mut self, score: f64, member: &[u8]) {
        match self {
            ZSetValue::Packed { bytes, count } => {
                let mut at = 0;
                while at < bytes.len() {
                    let start = at;
                    let (_, m) = read_mem(bytes, &mut at).expect("well formed");
                    if m == member {
                        bytes.drain(start..at);
                        *count -= 1;
                        return;
                    }
                }
            }
            ZSetValue::Sorted(sorted) => sorted.remove(score, member),
        }
    }

    /// Removes `member`; false when it was not there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.score(member) {
            Some(score) => {
                self.remove_entry(score, member);
                true
            }
            None => false,
        }
    }

    pub fn image_len(&self) -> usize {
        let mut len = varint_len(self.len());
        self.for_each(|_, m| len += 8 + varint_len(m.len()) + m.len());
        len
    }

    /// The image: a varint count and the entries in order.
    pub fn encode_image(&self, out: &mut Vec<u8>) {
        write_varint(out, self.len());
        self.for_each(|s, m| write_packed(out, s, m));
    }

    pub(crate) fn decode_image(
        image: &[u8],
        limits: &CollectionLimits,
    ) -> Result<ZSetValue, BadImage> {
        let (count, mut at) = read_varint(image).ok_or(BadImage)?;
        let mut zset = ZSetValue::default();
        for _ in 0..count {
            let (score, member) = read_packed(image, &mut at).ok_or(BadImage)?;
            if score.is_nan() {
                return Err(BadImage);
            }
            zset.put(score, member, limits);
        }
        if at != image.len() {
            return Err(BadImage);
        }
        if let ZSetValue::Packed { bytes, .. } = &mut zset {
            bytes.shrink_to_fit();
        }
        Ok(zset)
    }
}

/// Whether `image` is a well-formed sorted set image.
pub(crate) fn check_image(image: &[u8]) -> Result<(), BadImage> {
    let (count, mut at) = read_varint(image).ok_or(BadImage)?;
    for _ in 0..count {
        let (score, _) = read_packed(image, &mut at).ok_or(BadImage)?;
        if score.is_nan() {
            return Err(BadImage);
        }
    }
    if at == image.len() {
        Ok(())
    } else {
        Err(BadImage)
    }
}

/// The image of `entries` (distinct members, any order), for a new
/// key's value.
pub fn image_of<'m>(entries: impl IntoIterator<Item = (f64, &'m [u8])>) -> Vec<u8> {
    let mut sorted: Vec<(f64, &[u8])> = entries.into_iter().collect();
    sorted.sort_by(|a, b| cmp_entry(*a, *b));
    let mut image = Vec::new();
    write_varint(&mut image, sorted.len());
    for (s, m) in sorted {
        write_packed(&mut image, s, m);
    }
    image
}

/// The image of a new sorted set of `entries` (a later entry for the same
/// member wins, as applying them in order does) and how many distinct
/// members it holds: what a put to a missing key creates.
pub(crate) fn image_of_put(entries: &[(f64, &[u8])]) -> (Vec<u8>, usize) {
    let mut last: std::collections::HashMap<&[u8], f64> = Default::default();
    for (score, member) in entries {
        last.insert(member, *score);
    }
    let count = last.len();
    (image_of(last.into_iter().map(|(m, s)| (s, m))), count)
}

/// A sorted set change as commands make it and the log records it.
#[derive(Clone, Debug, PartialEq)]
pub enum ZSetOp<'a> {
    /// Members with their final scores.
    Put(Vec<(f64, &'a [u8])>),
    Remove(Vec<&'a [u8]>),
    /// The members ZPOPMIN (`max` false) or ZPOPMAX and their blocking and
    /// ZMPOP kin popped, lowest (highest) first: replayed as a removal of
    /// exactly those; a replica is sent the pop, as Redis sends it.
    Pop {
        max: bool,
        members: Vec<&'a [u8]>,
    },
}

const OP_PUT: u8 = 1;
const OP_REMOVE: u8 = 2;
const OP_POP_MIN: u8 = 3;
const OP_POP_MAX: u8 = 4;

impl<'a> ZSetOp<'a> {
    /// Applies the change; returns how many members were added (a put) or
    /// removed.
    pub fn apply(&self, zset: &mut ZSetValue, limits: &CollectionLimits) -> usize {
        self.apply_telling(zset, limits).0
    }

    /// [`ZSetOp::apply`], and whether anything changed: a put of members
    /// that already have those scores changes nothing (Redis then counts
    /// no write: no WATCH broken, nothing propagated).
    pub fn apply_telling(&self, zset: &mut ZSetValue, limits: &CollectionLimits) -> (usize, bool) {
        match self {
            ZSetOp::Put(entries) => {
                let (mut added, mut changed) = (0, false);
                for (score, member) in entries {
                    match zset.put(*score, member, limits) {
                        Put::Added => {
                            added += 1;
                            changed = true;
                        }
                        Put::Updated => changed = true,
                        Put::Unchanged => {}
                    }
                }
                (added, changed)
            }
            ZSetOp::Remove(members) | ZSetOp::Pop { members, .. } => {
                let removed = members.iter().filter(|m| zset.remove(m)).count();
                (removed, removed > 0)
            }
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ZSetOp::Put(entries) => {
                out.push(OP_PUT);
                write_varint(out, entries.len());
                for (s, m) in entries {
                    write_packed(out, *s, m);
                }
            }
            ZSetOp::Remove(members) | ZSetOp::Pop { members, .. } => {
                out.push(match self {
                    ZSetOp::Pop { max: false, .. } => OP_POP_MIN,
                    ZSetOp::Pop { max: true, .. } => OP_POP_MAX,
                    _ => OP_REMOVE,
                });
                write_varint(out, members.len());
                for m in members {
                    write_varint(out, m.len());
                    out.extend_from_slice(m);
                }
            }
        }
    }

    pub fn decode(payload: &'a [u8]) -> Result<ZSetOp<'a>, BadImage> {
        let (&code, rest) = payload.split_first().ok_or(BadImage)?;
        let (count, mut at) = read_varint(rest).ok_or(BadImage)?;
        let op = match code {
            OP_PUT => {
                let mut entries = Vec::with_capacity(count.min(rest.len()));
                for _ in 0..count {
                    let (score, member) = read_packed(rest, &mut at).ok_or(BadImage)?;
                    if score.is_nan() {
                        return Err(BadImage);
                    }
                    entries.push((score, member));
                }
                ZSetOp::Put(entries)
            }
            OP_REMOVE | OP_POP_MIN | OP_POP_MAX => {
                let mut members = Vec::with_capacity(count.min(rest.len()));
                for _ in 0..count {
                    members.push(read_bytes(rest, &mut at).ok_or(BadImage)?);
                }
                match code {
                    OP_REMOVE => ZSetOp::Remove(members),
                    _ => ZSetOp::Pop {
                        max: code == OP_POP_MAX,
                        members,
                    },
                }
            }
            _ => return Err(BadImage),
        };
        if at != rest.len() {
            return Err(BadImage);
        }
        Ok(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn small() -> CollectionLimits {
        CollectionLimits {
            zset_listpack_entries: 5,
            zset_listpack_value: 6,
            ..CollectionLimits::default()
        }
    }

    /// The model's order: by score, then member.
    fn model_order(model: &BTreeMap<Vec<u8>, f64>) -> Vec<(f64, Vec<u8>)> {
        let mut entries: Vec<(f64, Vec<u8>)> = model.iter().map(|(m, s)| (*s, m.clone())).collect();
        entries.sort_by(|a, b| cmp_entry((a.0, &a.1), (b.0, &b.1)));
        entries
    }

    proptest! {
        #[test]
        fn a_sorted_set_behaves_like_a_sorted_model(ops in proptest::collection::vec(
            (0..4u8, "[a-f]{1,8}", -5..5i32),
            1..1500,
        )) {
            let limits = small();
            let mut zset = ZSetValue::default();
            let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            for (kind, member, score) in &ops {
                let member = member.as_bytes();
                let score = *score as f64 / 2.0;
                // 0 removes, 3 pops (logged as a removal of what it took).
                let op = match kind {
                    0 => ZSetOp::Remove(vec![member]),
                    3 => ZSetOp::Pop { max: score > 0.0, members: vec![member] },
                    _ => ZSetOp::Put(vec![(score, member)]),
                };
                let mut payload = Vec::new();
                op.encode(&mut payload);
                let decoded = ZSetOp::decode(&payload).unwrap();
                prop_assert_eq!(&decoded, &op);
                let changed = decoded.apply(&mut zset, &limits);
                let expected = if *kind == 0 || *kind == 3 {
                    model.remove(member).is_some() as usize
                } else {
                    model.insert(member.to_vec(), score).is_none() as usize
                };
                prop_assert_eq!(changed, expected);
            }
            let order = model_order(&model);
            prop_assert_eq!(zset.len(), order.len());
            let got: Vec<(f64, Vec<u8>)> = zset.range(0, usize::MAX).into_iter().map(|(s, m)| (s, m.to_vec())).collect();
            prop_assert_eq!(&got, &order);
            for (rank, (score, member)) in order.iter().enumerate() {
                prop_assert_eq!(zset.rank(member), Some(rank));
                prop_assert_eq!(zset.score(member), Some(*score));
                let one = zset.range(rank, rank + 1);
                prop_assert_eq!(one[0].1, &member[..]);
            }
            // Score bounds: the first entry with score >= 0.
            let first_nonneg = order.iter().take_while(|(s, _)| *s < 0.0).count();
            prop_assert_eq!(zset.partition_point(|s, _| s < 0.0), first_nonneg);
            let mut image = Vec::new();
            zset.encode_image(&mut image);
            prop_assert_eq!(image.len(), zset.image_len());
            check_image(&image).unwrap();
            let back = ZSetValue::decode_image(&image, &limits).unwrap();
            let again: Vec<(f64, Vec<u8>)> = back.range(0, usize::MAX).into_iter().map(|(s, m)| (s, m.to_vec())).collect();
            prop_assert_eq!(again, order);
        }
    }

    #[test]
    fn encodings_convert_at_the_limits_and_chunks_split_and_merge() {
        let limits = small();
        let mut zset = ZSetValue::default();
        for n in 0..5 {
            zset.put(n as f64, format!("m{n}").as_bytes(), &limits);
        }
        assert_eq!(zset.encoding_name(), "listpack");
        zset.put(9.0, b"m9", &limits);
        assert_eq!(zset.encoding_name(), "skiplist");
        let mut zset = ZSetValue::default();
        zset.put(1.0, b"longmember", &limits);
        assert_eq!(zset.encoding_name(), "skiplist");
        // Many chunks: positions stay right through splits and merges.
        let mut big = ZSetValue::default();
        let n = CHUNK_MAX * 10;
        for i in 0..n {
            big.put((i % 97) as f64, format!("{i:06}").as_bytes(), &limits);
        }
        for i in (0..n).step_by(3) {
            assert!(big.remove(format!("{i:06}").as_bytes()));
        }
        let all = big.range(0, usize::MAX);
        assert_eq!(all.len(), big.len());
        assert!(
            all.windows(2)
                .all(|w| cmp_entry(w[0], w[1]) == Ordering::Less)
        );
        for (rank, (_, m)) in all.iter().enumerate().step_by(17) {
            assert_eq!(big.rank(m), Some(rank));
        }
    }
}
