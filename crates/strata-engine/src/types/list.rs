//! List values (Redis lists): byte strings in order, pushed and popped at
//! both ends, and the image codec that turns a list into one record
//! payload and back.
//!
//! A list is a deque of *nodes*, each a packed run of elements (a varint
//! length, the bytes and a back-length, one after another, as a Redis
//! listpack holds them, so either end is reached without a walk), bounded
//! by `list-max-listpack-size` ([`Limits`]): pushing or
//! popping at either end touches one node, and an index skips whole nodes
//! by their counts (Redis' quicklist). OBJECT ENCODING answers as Redis
//! 7.2+ converts a list (`ListValue::encoding_name`): `listpack` while it
//! fits one, `quicklist` once it outgrew it, `listpack` again at half the
//! limit; every [`ListOp`] applies those conversions after its change.
//!
//! The image (a SET record's payload, a checkpoint's) is a varint count
//! followed by every element in that same layout, whatever the nodes, so
//! an image becomes a list of any node size and back.
//!
//! Commands change a list through a [`ListOp`], which is also what the
//! log records (a LIST_OP record): replaying the same operation on the
//! same list gives the same list, so the bytes logged grow with the
//! command's arguments, never with the list. The model test below pins
//! the list's behaviour to a plain `VecDeque` of byte strings.

use std::collections::VecDeque;

use crate::varint::{read_bytes, read_varint, varint_len, write_varint};

/// How big one node may grow (`list-max-listpack-size`), and from what
/// size an element is *plain*: alone in a node of its own, never packed
/// with others (Redis 7's quicklist "plain nodes", whose threshold is 1 GB
/// and which DEBUG QUICKLIST-PACKED-THRESHOLD lowers for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub node_entries_max: usize,
    pub node_bytes_max: usize,
    pub plain_bytes_min: usize,
}

/// Redis' default packed threshold: elements of 1 GB and more are plain.
pub(crate) const PLAIN_BYTES_MIN_DEFAULT: usize = 1 << 30;

impl Limits {
    /// Redis' `list-max-listpack-size`: a positive value caps a node's
    /// elements (0 counts as 1, as in Redis 7.2+); -1 to -5 cap its bytes
    /// at 4, 8, 16, 32 or 64 KiB (values below -5 count as -5).
    pub(crate) fn from_listpack_size(size: i64) -> Limits {
        if size >= 0 {
            Limits {
                node_entries_max: size.max(1) as usize,
                node_bytes_max: usize::MAX,
                plain_bytes_min: PLAIN_BYTES_MIN_DEFAULT,
            }
        } else {
            let step = size.unsigned_abs().clamp(1, 5) as u32;
            Limits {
                node_entries_max: usize::MAX,
                node_bytes_max: 4096 << (step - 1),
                plain_bytes_min: PLAIN_BYTES_MIN_DEFAULT,
            }
        }
    }
}

impl Default for Limits {
    /// Redis 7's default, -2: 8 KiB per node.
    fn default() -> Self {
        Limits::from_listpack_size(-2)
    }
}

/// A damaged or foreign list image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadImage;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

/// Elements back to back, each an *entry*: the element as an image
/// encodes it (a varint length and the bytes), then that encoding's
/// length written backwards (a varint read from its last byte), so the
/// last element is found from the node's end without a walk, as Redis'
/// listpack back-lengths allow: popping at the tail is O(1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Node {
    bytes: Vec<u8>,
    count: usize,
    /// Bytes these elements take in an image (without back-lengths).
    image_bytes: usize,
}

/// Appends the entry of `element` to `out`.
fn encode_entry(element: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    encode(element, out);
    let mut n = out.len() - start;
    let mut groups = [0u8; 10];
    let mut used = 0;
    loop {
        groups[used] = (n & 0x7f) as u8;
        n >>= 7;
        used += 1;
        if n == 0 {
            break;
        }
    }
    // Most significant group first, unflagged; the others flagged, so a
    // reader from the end knows when to stop.
    for i in (0..used).rev() {
        out.push(groups[i] | if i + 1 == used { 0 } else { 0x80 });
    }
}

/// The element of the entry at `*at`; advances `*at` past the entry.
fn read_entry<'a>(bytes: &'a [u8], at: &mut usize) -> &'a [u8] {
    let start = *at;
    let element = read_bytes(bytes, at).expect("nodes are well formed");
    *at += varint_len(*at - start);
    element
}

/// Where the entry that ends at `end` starts.
fn entry_start_before(bytes: &[u8], end: usize) -> usize {
    let (mut n, mut shift, mut at) = (0usize, 0, end);
    loop {
        at -= 1;
        let byte = bytes[at];
        n |= ((byte & 0x7f) as usize) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    at - n
}

/// Bytes `element` takes in an image.
fn image_bytes_of(element: &[u8]) -> usize {
    varint_len(element.len()) + element.len()
}

/// A node's elements from either end, read in place (back-lengths find
/// the previous entry), without allocating.
struct NodeIter<'a> {
    bytes: &'a [u8],
    /// Where the next entry from the front starts.
    front: usize,
    /// Where the next entry from the back ends.
    back: usize,
}

impl<'a> Iterator for NodeIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        (self.front < self.back).then(|| read_entry(self.bytes, &mut self.front))
    }
}

impl DoubleEndedIterator for NodeIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let start = entry_start_before(self.bytes, self.back);
        self.back = start;
        let mut at = start;
        Some(read_entry(self.bytes, &mut at))
    }
}

impl Node {
    fn iter(&self) -> NodeIter<'_> {
        NodeIter {
            bytes: &self.bytes,
            front: 0,
            back: self.bytes.len(),
        }
    }

    /// Byte range of the entry of element `index`.
    fn span(&self, index: usize) -> std::ops::Range<usize> {
        debug_assert!(index < self.count);
        if index + 1 == self.count {
            let end = self.bytes.len();
            return entry_start_before(&self.bytes, end)..end;
        }
        let mut at = 0;
        for _ in 0..index {
            read_entry(&self.bytes, &mut at);
        }
        let start = at;
        read_entry(&self.bytes, &mut at);
        start..at
    }

    /// The element of the entry at `span`.
    fn element(&self, span: &std::ops::Range<usize>) -> &[u8] {
        let mut at = span.start;
        read_entry(&self.bytes, &mut at)
    }

    fn fits(&self, element_len: usize, limits: Limits) -> bool {
        self.count < limits.node_entries_max
            && self.bytes.len() + 2 * varint_len(element_len + 10) + element_len
                <= limits.node_bytes_max
            && element_len < limits.plain_bytes_min
            && !self.holds_plain(limits)
    }

    /// Whether the node holds an element of the plain size.
    fn holds_plain(&self, limits: Limits) -> bool {
        // A plain element makes its node at least that big: most nodes
        // are answered without a walk.
        self.bytes.len() >= limits.plain_bytes_min
            && self.iter().any(|e| e.len() >= limits.plain_bytes_min)
    }

    fn with(elements: &[&[u8]]) -> Node {
        let mut node = Node::default();
        for element in elements {
            encode_entry(element, &mut node.bytes);
            node.count += 1;
            node.image_bytes += image_bytes_of(element);
        }
        node
    }

    /// Recounts `image_bytes` after a change inside the node.
    fn recount(&mut self) {
        self.image_bytes = self.iter().map(image_bytes_of).sum();
    }
}

fn encode(element: &[u8], out: &mut Vec<u8>) {
    write_varint(out, element.len());
    out.extend_from_slice(element);
}

/// The image of a list of `elements`, head first, for a new key's value.
pub fn image_of<'e>(elements: impl ExactSizeIterator<Item = &'e [u8]>) -> Vec<u8> {
    let mut image = Vec::new();
    write_varint(&mut image, elements.len());
    for element in elements {
        encode(element, &mut image);
    }
    image
}

/// A list value (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListValue {
    nodes: VecDeque<Node>,
    len: usize,
    /// What Redis 7.2+ would hold it as: a `quicklist` once it outgrew one
    /// listpack, a `listpack` again once it shrank to one node of at most
    /// half the limits (OBJECT ENCODING; [`ListValue::encoding_name`]).
    quicklist: bool,
}

/// The byte limit Redis applies to one listpack when `list-max-listpack-size`
/// counts entries (its SIZE_SAFETY_LIMIT).
const SIZE_SAFETY_LIMIT_BYTES: usize = 8192;
/// A listpack's header and end byte.
const LISTPACK_OVERHEAD_BYTES: usize = 7;

impl ListValue {
    pub fn new() -> ListValue {
        ListValue::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// OBJECT ENCODING's name, as Redis 7.2+ answers: `listpack` for a
    /// list that fits one listpack, `quicklist` once it outgrew one, until
    /// it shrinks to one node of at most half the limits (so that a list
    /// at the edge does not flip at every push and pop). Redis 7.0 said
    /// `quicklist` for every list.
    pub fn encoding_name(&self) -> &'static str {
        match self.quicklist {
            true => "quicklist",
            false => "listpack",
        }
    }

    /// The list's size as one listpack would have it (its entries are
    /// encoded alike: a length, the bytes, a back length).
    fn listpack_bytes(&self) -> usize {
        LISTPACK_OVERHEAD_BYTES + self.nodes.iter().map(|n| n.bytes.len()).sum::<usize>()
    }

    /// Whether one listpack of this list would pass the limits (Redis'
    /// `quicklistNodeExceedsLimit`); `half` for a shrinking list.
    fn over_limits(&self, limits: Limits, half: bool) -> bool {
        self.over_limits_adding(limits, half, 0)
    }

    /// [`ListValue::over_limits`] with one more element of `added` bytes
    /// in its image (0: none).
    fn over_limits_adding(&self, limits: Limits, half: bool, added: usize) -> bool {
        let divide = if half { 2 } else { 1 };
        let (len, bytes) = match added {
            0 => (self.len, self.listpack_bytes()),
            _ => (self.len + 1, self.listpack_bytes() + added),
        };
        if limits.node_bytes_max != usize::MAX {
            return bytes > limits.node_bytes_max / divide;
        }
        // Counted entries; a grown listpack also has the safety byte limit.
        len > limits.node_entries_max / divide || (!half && bytes > SIZE_SAFETY_LIMIT_BYTES)
    }

    /// Redis' conversions after a change: a growing listpack becomes a
    /// quicklist past the limits; a shrinking quicklist of one node
    /// becomes a listpack again at half of them.
    fn convert(&mut self, growing: bool, limits: Limits) {
        if growing && !self.quicklist && self.over_limits(limits, false) {
            self.quicklist = true;
        } else if !growing
            && self.quicklist
            && self.nodes.len() <= 1
            && !self.nodes.iter().any(|n| n.holds_plain(limits))
            && !self.over_limits(limits, true)
        {
            self.quicklist = false;
        }
    }

    /// How many nodes hold the list (DEBUG OBJECT's `ql_nodes`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes' bytes together (DEBUG OBJECT's `ql_uncompressed_size`).
    pub fn node_bytes(&self) -> usize {
        self.nodes.iter().map(|n| n.bytes.len()).sum()
    }

    /// Bytes of RAM the list holds (node buffers and the deque).
    pub fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * size_of::<Node>()
            + self.nodes.iter().map(|n| n.bytes.capacity()).sum::<usize>()
    }

    /// Every element, head first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + '_ {
        self.nodes.iter().flat_map(Node::iter)
    }

    /// Adds `element` at `end`.
    pub fn push(&mut self, end: End, element: &[u8], limits: Limits) {
        let fits = match end {
            End::Head => self.nodes.front(),
            End::Tail => self.nodes.back(),
        }
        .is_some_and(|node| node.fits(element.len(), limits));
        if !fits {
            match end {
                End::Head => self.nodes.push_front(Node::default()),
                End::Tail => self.nodes.push_back(Node::default()),
            }
        }
        let node = match end {
            End::Head => self.nodes.front_mut(),
            End::Tail => self.nodes.back_mut(),
        }
        .expect("a node at that end");
        match end {
            End::Tail => encode_entry(element, &mut node.bytes),
            End::Head => {
                let mut encoded =
                    Vec::with_capacity(2 * varint_len(element.len() + 10) + element.len());
                encode_entry(element, &mut encoded);
                node.bytes.splice(0..0, encoded);
            }
        }
        node.count += 1;
        node.image_bytes += image_bytes_of(element);
        self.len += 1;
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let node = match end {
            End::Head => self.nodes.front_mut(),
            End::Tail => self.nodes.back_mut(),
        }?;
        let span = match end {
            End::Head => node.span(0),
            End::Tail => node.span(node.count - 1),
        };
        let element = node.element(&span).to_vec();
        node.bytes.drain(span);
        node.count -= 1;
        node.image_bytes -= image_bytes_of(&element);
        if node.count == 0 {
            match end {
                End::Head => self.nodes.pop_front(),
                End::Tail => self.nodes.pop_back(),
            };
        }
        self.len -= 1;
        Some(element)
    }

    /// The node holding element `index` and the element's index in it.
    fn find(&self, mut index: usize) -> Option<(usize, usize)> {
        if index >= self.len {
            return None;
        }
        for (position, node) in self.nodes.iter().enumerate() {
            if index < node.count {
                return Some((position, index));
            }
            index -= node.count;
        }
        unreachable!("index below len is in some node")
    }

    /// Element `index` (from the head).
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        let (node, within) = self.find(index)?;
        self.nodes[node].iter().nth(within)
    }

    /// Elements `start..=stop` (indices from the head, `stop` below the
    /// length), head first, skipping whole nodes before `start`.
    pub fn range(&self, start: usize, stop: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let (first, within) = self.find(start).unwrap_or((self.nodes.len(), 0));
        self.nodes
            .iter()
            .skip(first)
            .flat_map(Node::iter)
            .skip(within)
            .take((stop + 1).saturating_sub(start))
    }

    /// Replaces element `index`; false when out of range.
    pub fn set(&mut self, index: usize, element: &[u8], limits: Limits) -> bool {
        let Some((position, within)) = self.find(index) else {
            return false;
        };
        // Redis 7.2+ judges the encoding before LSET as if the element
        // were added (it does not subtract the one replaced), then as
        // shrinking after it.
        if !self.quicklist && self.over_limits_adding(limits, false, image_bytes_of(element)) {
            self.quicklist = true;
        }
        let node = &mut self.nodes[position];
        let span = node.span(within);
        node.image_bytes -= image_bytes_of(node.element(&span));
        node.image_bytes += image_bytes_of(element);
        let mut encoded = Vec::new();
        encode_entry(element, &mut encoded);
        node.bytes.splice(span, encoded);
        self.split_if_over(position, limits);
        self.convert(false, limits);
        true
    }

    /// Inserts `element` before or after the first `pivot` from the head;
    /// the new length, or `None` when there is no such pivot.
    pub fn insert(
        &mut self,
        pivot: &[u8],
        after: bool,
        element: &[u8],
        limits: Limits,
    ) -> Option<usize> {
        let index = self.iter().position(|e| e == pivot)?;
        let at = index + usize::from(after);
        self.insert_at(at, element, limits);
        Some(self.len)
    }

    /// Inserts `element` so that it becomes element `at`.
    fn insert_at(&mut self, at: usize, element: &[u8], limits: Limits) {
        if at == self.len {
            return self.push(End::Tail, element, limits);
        }
        let (position, within) = self.find(at).expect("at is below len");
        let node = &mut self.nodes[position];
        let offset = node.span(within).start;
        let mut encoded = Vec::new();
        encode_entry(element, &mut encoded);
        node.bytes.splice(offset..offset, encoded);
        node.count += 1;
        node.image_bytes += image_bytes_of(element);
        self.len += 1;
        self.split_if_over(position, limits);
    }

    /// A node grown past the limits by a change inside it is cut in two;
    /// one that came to hold a plain element beside others is cut around
    /// it.
    fn split_if_over(&mut self, position: usize, limits: Limits) {
        if self.separate_plain(position, limits) {
            return;
        }
        let node = &self.nodes[position];
        if node.count <= 1
            || (node.count <= limits.node_entries_max && node.bytes.len() <= limits.node_bytes_max)
        {
            return;
        }
        let half = node.count / 2;
        let cut = node.span(half).start;
        let mut tail = Node {
            bytes: node.bytes[cut..].to_vec(),
            count: node.count - half,
            image_bytes: 0,
        };
        tail.recount();
        let node = &mut self.nodes[position];
        node.bytes.truncate(cut);
        node.count = half;
        node.recount();
        self.nodes.insert(position + 1, tail);
    }

    /// Cuts node `position` into runs of packed elements and plain ones
    /// alone; false when it holds no plain element beside others.
    fn separate_plain(&mut self, position: usize, limits: Limits) -> bool {
        let node = &self.nodes[position];
        if node.count <= 1 || !node.holds_plain(limits) {
            return false;
        }
        let mut pieces: Vec<Node> = Vec::new();
        let mut run: Vec<&[u8]> = Vec::new();
        for element in node.iter() {
            if element.len() >= limits.plain_bytes_min {
                if !run.is_empty() {
                    pieces.push(Node::with(&run));
                    run.clear();
                }
                pieces.push(Node::with(&[element]));
            } else {
                run.push(element);
            }
        }
        if !run.is_empty() {
            pieces.push(Node::with(&run));
        }
        // Each run was part of a node within the limits less the plain
        // element: it fits.
        self.nodes.remove(position);
        for (offset, piece) in pieces.into_iter().enumerate() {
            self.nodes.insert(position + offset, piece);
        }
        true
    }

    /// LREM: removes up to `count` elements equal to `element` from the
    /// head (`count` > 0), from the tail (< 0), or all of them (0).
    /// Returns how many went.
    pub fn remove(&mut self, count: i64, element: &[u8]) -> usize {
        let wanted = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs().try_into().unwrap_or(usize::MAX)
        };
        let mut matches: Vec<usize> = self
            .iter()
            .enumerate()
            .filter(|(_, e)| *e == element)
            .map(|(i, _)| i)
            .collect();
        if count < 0 {
            matches.reverse();
        }
        matches.truncate(wanted);
        matches.sort_unstable();
        let removed = matches.len();
        if removed > 0 {
            let mut doomed = matches.into_iter().peekable();
            self.retain_indices(|index| {
                if doomed.peek() == Some(&index) {
                    doomed.next();
                    false
                } else {
                    true
                }
            });
        }
        removed
    }

    /// LTRIM: keeps elements `start..=stop` (indices from the head; an
    /// empty range when `start > stop` or `start >= len`).
    pub fn trim(&mut self, start: usize, stop: usize) {
        if start > stop || start >= self.len {
            *self = ListValue::new();
            return;
        }
        let stop = stop.min(self.len - 1);
        self.retain_indices(|index| (start..=stop).contains(&index));
    }

    /// Keeps the elements whose index `keep` accepts, rebuilding only
    /// the nodes that lose some.
    fn retain_indices(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let mut index = 0;
        let nodes = std::mem::take(&mut self.nodes);
        for node in nodes {
            let kept: Vec<bool> = (index..index + node.count).map(&mut keep).collect();
            index += node.count;
            if kept.iter().all(|&k| k) {
                self.nodes.push_back(node);
                continue;
            }
            let remaining: Vec<&[u8]> = node
                .iter()
                .zip(&kept)
                .filter(|(_, k)| **k)
                .map(|(e, _)| e)
                .collect();
            if !remaining.is_empty() {
                self.nodes.push_back(Node::with(&remaining));
            }
        }
        self.len = self.nodes.iter().map(|n| n.count).sum();
    }

    /// LPOS: the indices of elements equal to `element`, searching from
    /// the head for `rank` > 0 (skipping the first `rank - 1` matches) or
    /// from the tail for `rank` < 0, at most `count` of them (0: all),
    /// looking at no more than `maxlen` elements (0: all).
    pub fn positions(&self, element: &[u8], rank: i64, count: usize, maxlen: usize) -> Vec<usize> {
        debug_assert!(rank != 0, "RANK 0 is refused by the command");
        let skip = (rank.unsigned_abs() - 1) as usize;
        let take = if count == 0 { usize::MAX } else { count };
        let look = if maxlen == 0 { usize::MAX } else { maxlen };
        let matching = |(i, e): (usize, &[u8])| (e == element).then_some(i);
        if rank > 0 {
            self.iter()
                .enumerate()
                .take(look)
                .filter_map(matching)
                .skip(skip)
                .take(take)
                .collect()
        } else {
            let last = self.len.wrapping_sub(1);
            self.iter()
                .rev()
                .enumerate()
                .take(look)
                .map(|(i, e)| (last - i, e))
                .filter_map(matching)
                .skip(skip)
                .take(take)
                .collect()
        }
    }

    /// Bytes of the image, without encoding it.
    pub fn image_len(&self) -> usize {
        varint_len(self.len) + self.nodes.iter().map(|n| n.image_bytes).sum::<usize>()
    }

    /// The image: a varint count, then every element.
    pub fn encode_image(&self, out: &mut Vec<u8>) {
        write_varint(out, self.len);
        out.reserve(self.image_len());
        for element in self.iter() {
            encode(element, out);
        }
    }

    /// The list an image holds, in nodes of at most `limits`.
    pub(crate) fn decode_image(image: &[u8], limits: Limits) -> Result<ListValue, BadImage> {
        let (count, mut at) = read_varint(image).ok_or(BadImage)?;
        let mut list = ListValue::new();
        for _ in 0..count {
            let element = read_bytes(image, &mut at).ok_or(BadImage)?;
            list.push(End::Tail, element, limits);
        }
        if at != image.len() {
            return Err(BadImage);
        }
        list.shrink();
        // As Redis picks a loaded or newly built list's encoding: a
        // listpack when it fits one (however its elements would be held
        // in a quicklist's nodes).
        list.quicklist = list.over_limits(limits, false);
        Ok(list)
    }

    /// Gives back the spare capacity of the node deque and the nodes (a
    /// list built whole: most lists are small and stay so).
    fn shrink(&mut self) {
        self.nodes.shrink_to_fit();
        for node in &mut self.nodes {
            node.bytes.shrink_to_fit();
        }
    }
}

/// A change to a list, as a command makes it and the log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListOp<'a> {
    /// Elements pushed one after another at an end (LPUSH pushes its
    /// arguments to the head in order, so the last one ends first).
    Push(End, Vec<&'a [u8]>),
    /// Up to this many elements popped at an end.
    Pop(End, usize),
    /// One element pushed at an end: the element the pop just before it
    /// in the same group took (LMOVE, RPOPLPUSH and their blocking
    /// forms). Applied as a push; the replication stream sends the pair
    /// as one LMOVE.
    Moved(End, &'a [u8]),
    /// Element `index` (from the head) replaced.
    Set(usize, &'a [u8]),
    /// `element` inserted before or after the first `pivot`.
    Insert {
        pivot: &'a [u8],
        after: bool,
        element: &'a [u8],
    },
    /// LREM's `count` elements equal to `element` removed.
    Remove { count: i64, element: &'a [u8] },
    /// Elements `start..=stop` kept (indices from the head).
    Trim(usize, usize),
}

/// What a [`ListOp`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Push, Insert: the new length (Insert: `None` without the pivot).
    Len(Option<usize>),
    /// Pop: the elements, in pop order.
    Popped(Vec<Vec<u8>>),
    /// Set: whether the index was in range.
    Set(bool),
    /// Remove: how many went.
    Removed(usize),
    Trimmed,
}

const OP_PUSH: u8 = 1;
const OP_POP: u8 = 2;
const OP_SET: u8 = 3;
const OP_INSERT: u8 = 4;
const OP_REMOVE: u8 = 5;
const OP_TRIM: u8 = 6;
const OP_MOVED: u8 = 7;

fn end_code(end: End) -> u8 {
    match end {
        End::Head => 0,
        End::Tail => 1,
    }
}

impl<'a> ListOp<'a> {
    /// Applies the change to `list`.
    pub fn apply(&self, list: &mut ListValue, limits: Limits) -> Applied {
        let applied = self.apply_only(list, limits);
        match self {
            ListOp::Push(..) | ListOp::Moved(..) | ListOp::Insert { .. } => {
                list.convert(true, limits)
            }
            // LSET: a growing check for the new element, then a shrinking
            // one (Redis does both).
            ListOp::Set(..) => {
                list.convert(true, limits);
                list.convert(false, limits);
            }
            ListOp::Pop(..) | ListOp::Remove { .. } | ListOp::Trim(..) => {
                list.convert(false, limits);
            }
        }
        applied
    }

    fn apply_only(&self, list: &mut ListValue, limits: Limits) -> Applied {
        match self {
            ListOp::Push(end, elements) => {
                for element in elements {
                    list.push(*end, element, limits);
                }
                Applied::Len(Some(list.len()))
            }
            ListOp::Moved(end, element) => {
                list.push(*end, element, limits);
                Applied::Len(Some(list.len()))
            }
            ListOp::Pop(end, count) => {
                let popped = (0..*count).map_while(|_| list.pop(*end)).collect();
                Applied::Popped(popped)
            }
            ListOp::Set(index, element) => Applied::Set(list.set(*index, element, limits)),
            ListOp::Insert {
                pivot,
                after,
                element,
            } => Applied::Len(list.insert(pivot, *after, element, limits)),
            ListOp::Remove { count, element } => Applied::Removed(list.remove(*count, element)),
            ListOp::Trim(start, stop) => {
                list.trim(*start, *stop);
                Applied::Trimmed
            }
        }
    }

    /// The record payload: an operation byte, then its arguments
    /// (varints, elements as a varint length and the bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ListOp::Push(end, elements) => {
                out.extend_from_slice(&[OP_PUSH, end_code(*end)]);
                write_varint(out, elements.len());
                for element in elements {
                    encode(element, out);
                }
            }
            ListOp::Pop(end, count) => {
                out.extend_from_slice(&[OP_POP, end_code(*end)]);
                write_varint(out, *count);
            }
            ListOp::Moved(end, element) => {
                out.extend_from_slice(&[OP_MOVED, end_code(*end)]);
                encode(element, out);
            }
            ListOp::Set(index, element) => {
                out.push(OP_SET);
                write_varint(out, *index);
                encode(element, out);
            }
            ListOp::Insert {
                pivot,
                after,
                element,
            } => {
                out.extend_from_slice(&[OP_INSERT, u8::from(*after)]);
                encode(pivot, out);
                encode(element, out);
            }
            ListOp::Remove { count, element } => {
                out.push(OP_REMOVE);
                out.extend_from_slice(&count.to_le_bytes());
                encode(element, out);
            }
            ListOp::Trim(start, stop) => {
                out.push(OP_TRIM);
                write_varint(out, *start);
                write_varint(out, *stop);
            }
        }
    }

    /// The operation a record payload holds.
    pub fn decode(payload: &'a [u8]) -> Result<ListOp<'a>, BadImage> {
        let (&op, rest) = payload.split_first().ok_or(BadImage)?;
        let mut at = 0;
        let varint = |at: &mut usize| -> Result<usize, BadImage> {
            let (n, used) = read_varint(rest.get(*at..).ok_or(BadImage)?).ok_or(BadImage)?;
            *at += used;
            Ok(n)
        };
        let end = |code: Option<&u8>| match code {
            Some(0) => Ok(End::Head),
            Some(1) => Ok(End::Tail),
            _ => Err(BadImage),
        };
        let decoded = match op {
            OP_PUSH => {
                let end = end(rest.first())?;
                at = 1;
                let count = varint(&mut at)?;
                let mut elements = Vec::with_capacity(count.min(rest.len()));
                for _ in 0..count {
                    elements.push(read_bytes(rest, &mut at).ok_or(BadImage)?);
                }
                ListOp::Push(end, elements)
            }
            OP_POP => {
                let end = end(rest.first())?;
                at = 1;
                ListOp::Pop(end, varint(&mut at)?)
            }
            OP_MOVED => {
                let end = end(rest.first())?;
                at = 1;
                ListOp::Moved(end, read_bytes(rest, &mut at).ok_or(BadImage)?)
            }
            OP_SET => {
                let index = varint(&mut at)?;
                ListOp::Set(index, read_bytes(rest, &mut at).ok_or(BadImage)?)
            }
            OP_INSERT => {
                let after = match rest.first() {
                    Some(0) => false,
                    Some(1) => true,
                    _ => return Err(BadImage),
                };
                at = 1;
                let pivot = read_bytes(rest, &mut at).ok_or(BadImage)?;
                let element = read_bytes(rest, &mut at).ok_or(BadImage)?;
                ListOp::Insert {
                    pivot,
                    after,
                    element,
                }
            }
            OP_REMOVE => {
                let count =
                    i64::from_le_bytes(rest.get(..8).ok_or(BadImage)?.try_into().expect("8 bytes"));
                at = 8;
                ListOp::Remove {
                    count,
                    element: read_bytes(rest, &mut at).ok_or(BadImage)?,
                }
            }
            OP_TRIM => {
                let start = varint(&mut at)?;
                ListOp::Trim(start, varint(&mut at)?)
            }
            _ => return Err(BadImage),
        };
        if at != rest.len() {
            return Err(BadImage);
        }
        Ok(decoded)
    }
}

/// Checks that `image` is a well-formed list image.
pub(crate) fn check_image(image: &[u8]) -> Result<(), BadImage> {
    let (count, mut at) = read_varint(image).ok_or(BadImage)?;
    for _ in 0..count {
        read_bytes(image, &mut at).ok_or(BadImage)?;
    }
    if at != image.len() {
        return Err(BadImage);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Nodes of at most three elements, so that every operation crosses
    /// node boundaries.
    const SMALL: Limits = Limits {
        node_entries_max: 3,
        node_bytes_max: usize::MAX,
        plain_bytes_min: PLAIN_BYTES_MIN_DEFAULT,
    };

    /// [`SMALL`] with elements of 100 bytes and more plain (the long
    /// elements of [`element`]).
    const SMALL_WITH_PLAIN: Limits = Limits {
        plain_bytes_min: 100,
        ..SMALL
    };

    fn list_of(elements: &[&str], limits: Limits) -> ListValue {
        let mut list = ListValue::new();
        for e in elements {
            list.push(End::Tail, e.as_bytes(), limits);
        }
        list
    }

    fn contents(list: &ListValue) -> Vec<String> {
        list.iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    #[test]
    fn limits_follow_redis_listpack_size() {
        assert_eq!(Limits::default().node_bytes_max, 8192);
        assert_eq!(Limits::from_listpack_size(-1).node_bytes_max, 4096);
        assert_eq!(Limits::from_listpack_size(-5).node_bytes_max, 65536);
        assert_eq!(Limits::from_listpack_size(-9).node_bytes_max, 65536);
        assert_eq!(Limits::from_listpack_size(0).node_entries_max, 1);
        assert_eq!(Limits::from_listpack_size(128).node_entries_max, 128);
    }

    #[test]
    fn lrem_lpos_and_ltrim_semantics() {
        let mut list = list_of(&["a", "b", "a", "c", "a", "b"], SMALL);
        assert_eq!(list.positions(b"a", 1, 0, 0), vec![0, 2, 4]);
        assert_eq!(list.positions(b"a", 2, 1, 0), vec![2]);
        assert_eq!(list.positions(b"a", -1, 2, 0), vec![4, 2]);
        assert_eq!(list.positions(b"a", 1, 0, 3), vec![0, 2]);
        assert_eq!(list.remove(-2, b"a"), 2);
        assert_eq!(contents(&list), ["a", "b", "c", "b"]);
        assert_eq!(list.remove(0, b"b"), 2);
        assert_eq!(contents(&list), ["a", "c"]);
        let mut list = list_of(&["0", "1", "2", "3", "4", "5", "6"], SMALL);
        list.trim(2, 4);
        assert_eq!(contents(&list), ["2", "3", "4"]);
        list.trim(5, 9);
        assert!(list.is_empty());
        assert_eq!(list.insert(b"x", true, b"y", SMALL), None);
    }

    #[test]
    fn a_big_element_gets_a_node_of_its_own() {
        let limits = Limits::from_listpack_size(-1);
        let mut list = list_of(&["small"], limits);
        assert_eq!(list.encoding_name(), "listpack");
        let big = vec![b'x'; 10_000];
        ListOp::Push(End::Tail, vec![&big]).apply(&mut list, limits);
        ListOp::Push(End::Head, vec![&big]).apply(&mut list, limits);
        assert_eq!(list.len(), 3);
        assert_eq!(list.get(1), Some(&b"small"[..]));
        assert_eq!(list.get(2).map(<[u8]>::len), Some(10_000));
        assert_eq!(list.encoding_name(), "quicklist");
    }

    /// Redis 7.2's conversions: a quicklist past the limit, a listpack
    /// again only at half of it.
    #[test]
    fn the_encoding_turns_at_the_limit_and_back_at_half() {
        let limits = Limits::from_listpack_size(4);
        let mut list = ListValue::new();
        ListOp::Push(End::Tail, vec![b"a", b"b", b"c", b"d"]).apply(&mut list, limits);
        assert_eq!(list.encoding_name(), "listpack");
        ListOp::Push(End::Tail, vec![b"e"]).apply(&mut list, limits);
        assert_eq!(list.encoding_name(), "quicklist");
        ListOp::Pop(End::Tail, 2).apply(&mut list, limits);
        assert_eq!(list.encoding_name(), "quicklist", "3 > 4 / 2");
        ListOp::Remove {
            count: 0,
            element: b"c",
        }
        .apply(&mut list, limits);
        assert_eq!(list.encoding_name(), "listpack", "2 <= 4 / 2");
    }

    #[test]
    fn images_round_trip_across_node_sizes() {
        let list = list_of(&["a", "", "ccc", "dddd", "e"], SMALL);
        let mut image = Vec::new();
        list.encode_image(&mut image);
        check_image(&image).unwrap();
        let back = ListValue::decode_image(&image, Limits::default()).unwrap();
        assert_eq!(contents(&back), contents(&list));
        assert_eq!(back.encoding_name(), "listpack", "fits one listpack");
        let spread = ListValue::decode_image(&image, Limits::from_listpack_size(2)).unwrap();
        assert_eq!(spread.encoding_name(), "quicklist", "5 entries over 2");
        assert_eq!(check_image(&image[..image.len() - 1]), Err(BadImage));
        let mut trailing = image.clone();
        trailing.push(0);
        assert_eq!(check_image(&trailing), Err(BadImage));
    }

    #[test]
    fn operations_round_trip_through_their_records() {
        let ops = [
            ListOp::Push(End::Head, vec![&b"a"[..], b"", b"ccc"]),
            ListOp::Pop(End::Tail, 3),
            ListOp::Moved(End::Head, b"moved"),
            ListOp::Set(7, b"x"),
            ListOp::Insert {
                pivot: b"p",
                after: true,
                element: b"e",
            },
            ListOp::Remove {
                count: -2,
                element: b"r",
            },
            ListOp::Trim(1, 300),
        ];
        for op in ops {
            let mut payload = Vec::new();
            op.encode(&mut payload);
            assert_eq!(ListOp::decode(&payload), Ok(op.clone()));
            assert_eq!(
                ListOp::decode(&payload[..payload.len() - 1]),
                Err(BadImage),
                "{op:?}"
            );
        }
        assert_eq!(ListOp::decode(&[9]), Err(BadImage));
        assert_eq!(ListOp::decode(&[]), Err(BadImage));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool),
        Set(usize, Vec<u8>),
        Insert(Vec<u8>, bool, Vec<u8>),
        Remove(i64, Vec<u8>),
        Trim(usize, usize),
    }

    /// Mostly short elements (so that values repeat), some long enough
    /// for two-byte lengths and back-lengths.
    fn element() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'c']), 0..3),
            1 => (120usize..300).prop_map(|n| vec![b'L'; n]),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<bool>(), element()).prop_map(|(h, e)| Op::Push(h, e)),
            2 => any::<bool>().prop_map(Op::Pop),
            1 => (0..12usize, element()).prop_map(|(i, e)| Op::Set(i, e)),
            1 => (element(), any::<bool>(), element()).prop_map(|(p, a, e)| Op::Insert(p, a, e)),
            1 => (-3..3i64, element()).prop_map(|(c, e)| Op::Remove(c, e)),
            1 => (0..12usize, 0..12usize).prop_map(|(s, t)| Op::Trim(s, t)),
        ]
    }

    /// Runs `ops` on a list with `limits` and on a plain deque, checking
    /// after each step that they agree (both ways, by index, by range),
    /// that the image round-trips, and that plain elements sit alone.
    fn run_model(ops: Vec<Op>, limits: Limits) -> Result<(), TestCaseError> {
        let mut list = ListValue::new();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for op in ops {
            match op {
                Op::Push(head, e) => {
                    list.push(if head { End::Head } else { End::Tail }, &e, limits);
                    if head {
                        model.push_front(e)
                    } else {
                        model.push_back(e)
                    }
                }
                Op::Pop(head) => {
                    let got = list.pop(if head { End::Head } else { End::Tail });
                    let want = if head {
                        model.pop_front()
                    } else {
                        model.pop_back()
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Set(i, e) => {
                    let done = list.set(i, &e, limits);
                    prop_assert_eq!(done, i < model.len());
                    if done {
                        model[i] = e;
                    }
                }
                Op::Insert(pivot, after, e) => {
                    let got = list.insert(&pivot, after, &e, limits);
                    let want = model.iter().position(|x| *x == pivot).map(|i| {
                        model.insert(i + usize::from(after), e.clone());
                        model.len()
                    });
                    prop_assert_eq!(got, want);
                }
                Op::Remove(count, e) => {
                    let mut indices: Vec<usize> =
                        (0..model.len()).filter(|&i| model[i] == e).collect();
                    if count < 0 {
                        indices.reverse();
                    }
                    if count != 0 {
                        indices.truncate(count.unsigned_abs() as usize);
                    }
                    indices.sort_unstable();
                    for &i in indices.iter().rev() {
                        model.remove(i);
                    }
                    prop_assert_eq!(list.remove(count, &e), indices.len());
                }
                Op::Trim(start, stop) => {
                    list.trim(start, stop);
                    let kept: VecDeque<Vec<u8>> = model
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| start <= stop && (start..=stop).contains(i))
                        .map(|(_, e)| e.clone())
                        .collect();
                    model = kept;
                }
            }
            prop_assert_eq!(list.len(), model.len());
            let got: Vec<&[u8]> = list.iter().collect();
            let want: Vec<&[u8]> = model.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(&got, &want);
            let back: Vec<&[u8]> = list.iter().rev().collect();
            let want_back: Vec<&[u8]> = model.iter().rev().map(Vec::as_slice).collect();
            prop_assert_eq!(back, want_back);
            for (i, e) in model.iter().enumerate() {
                prop_assert_eq!(list.get(i), Some(e.as_slice()));
            }
            if !model.is_empty() {
                let (s, t) = (model.len() / 3, model.len() - 1);
                let got: Vec<&[u8]> = list.range(s, t).collect();
                prop_assert_eq!(got, want[s..=t].to_vec());
            }
            let mut image = Vec::new();
            list.encode_image(&mut image);
            prop_assert_eq!(list.image_len(), image.len());
            let decoded = ListValue::decode_image(&image, limits).unwrap();
            prop_assert!(decoded.iter().eq(list.iter()));
            for node in &list.nodes {
                prop_assert!(node.count == 1 || !node.holds_plain(limits));
            }
        }
        Ok(())
    }

    proptest! {
        /// Every operation, checked against a plain deque after each step,
        /// with nodes small enough that each one crosses node boundaries.
        #[test]
        fn behaves_like_a_deque(ops in prop::collection::vec(op(), 1..60)) {
            run_model(ops, SMALL)?;
        }

        /// The same with the long elements plain (alone in their nodes),
        /// as DEBUG QUICKLIST-PACKED-THRESHOLD makes them.
        #[test]
        fn behaves_like_a_deque_with_plain_elements(ops in prop::collection::vec(op(), 1..60)) {
            run_model(ops, SMALL_WITH_PLAIN)?;
        }
    }
}
