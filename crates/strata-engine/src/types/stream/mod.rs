//! The stream type: entries by ID, consumer groups, their pending lists.
//!
//! A stream is an ordered run of entries by [`StreamId`] (milliseconds
//! and a sequence number), each with its field-value pairs, plus what
//! Redis keeps beside them: the last ID
//! ever given, how many entries were ever added, the largest ID ever
//! deleted, and the consumer groups. A group has its last delivered ID,
//! its entries-read counter (`None` where Redis says -1, "unknown"), its
//! pending entries (who has each, since when, how often delivered) and
//! its consumers.
//!
//! Commands change a stream through [`StreamOp`]s, which the log records
//! as they are (delta records: an XADD logs its entry, an XACK its IDs,
//! never the stream). Each operation is deterministic given the stream it
//! applies to and the times it carries, so replaying it rebuilds exactly
//! the state the command left, group counters included. Checkpoints and
//! cold values use the image ([`StreamValue::encode_image`]).
//!
//! Entries live as Redis keeps them: in nodes of up to
//! `stream-node-max-entries` entries and `stream-node-max-bytes` bytes
//! (Redis' listpacks), each node one byte run of its entries back to back
//! under a B-tree keyed by the node's first ID (Redis' radix tree). An
//! entry is its ID as deltas from the node's first, a header (its length,
//! whether it is deleted, whether it has the first entry's field names)
//! and its fields and values, the names left out when they are the first
//! entry's, as Redis leaves them out. XDEL and trimming inside a node
//! mark entries deleted; a node goes when its last live entry does.
//! A complete node's run is copied into a chunk shared with its
//! neighbours ([`Chunks`]), so it takes its bytes rather than an
//! allocator size class. Finding an ID is O(log N) plus a walk of one
//! node, a range O(1) per entry. 100-byte entries take about 112 bytes
//! each (Redis 7.0: 115).

use std::collections::{BTreeMap, BTreeSet};

use std::ops::Bound;

use crate::varint::{read_bytes, varint_len, write_varint};

mod id;
mod packed;

pub use id::StreamId;
use id::{read_u64, read_usize, write_u64};
use packed::{Chunks, Packed, Run, entries_of, live_in};
pub use packed::{Fields, Node};

/// A pending entry: delivered to `consumer` and not acknowledged yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub consumer: Vec<u8>,
    /// When it was last delivered (Unix ms).
    pub delivered_ms: u64,
    pub deliveries: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// When it last tried anything (read, claimed), Unix ms.
    pub seen_ms: u64,
    /// When it last got something (`None`: never).
    pub active_ms: Option<u64>,
    /// The IDs pending with it.
    pub pending: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries the group has read, when known (Redis' -1 is `None`).
    pub entries_read: Option<u64>,
    pub pending: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

/// A stream (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct StreamValue {
    /// Nodes by their first ID (Redis' master ID).
    nodes: BTreeMap<StreamId, Packed>,
    /// Where complete nodes' runs live.
    chunks: Chunks,
    /// Live entries.
    len: usize,
    pub last_id: StreamId,
    pub entries_added: u64,
    pub max_deleted: StreamId,
    pub groups: BTreeMap<Vec<u8>, Group>,
    /// Bytes the last node's run holds allocated (the chunks count
    /// their own).
    data_bytes: usize,
}

/// Two streams are equal when their live entries, nodes, counters and
/// groups are: what deleted entries still take in a node is not state.
impl PartialEq for StreamValue {
    fn eq(&self, other: &Self) -> bool {
        let entries = |s: &StreamValue| -> Vec<(StreamId, Vec<u8>)> {
            (s.range(StreamId::MIN, StreamId::MAX, false))
                .map(|(id, fields)| (id, fields.to_packed()))
                .collect()
        };
        self.len == other.len
            && self.last_id == other.last_id
            && self.entries_added == other.entries_added
            && self.max_deleted == other.max_deleted
            && self.groups == other.groups
            && self.nodes().eq(other.nodes())
            && entries(self) == entries(other)
    }
}

impl Eq for StreamValue {}

/// Bytes a node's B-tree slot and bookkeeping take, roughly.
const NODE_OVERHEAD: usize = 96;

/// Bytes a pending entry's B-tree slot takes, roughly.
const PENDING_OVERHEAD: usize = 48;

impl StreamValue {
    pub fn new() -> StreamValue {
        StreamValue::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn encoding_name(&self) -> &'static str {
        "stream"
    }

    pub fn memory_bytes(&self) -> usize {
        let groups: usize = (self.groups.iter())
            .map(|(name, g)| {
                name.len()
                    + 64
                    + g.pending.len() * (PENDING_OVERHEAD + 24)
                    + (g.consumers.iter())
                        .map(|(n, c)| n.len() + 64 + c.pending.len() * 24)
                        .sum::<usize>()
            })
            .sum();
        size_of::<StreamValue>()
            + self.data_bytes
            + self.chunks.bytes
            + self.nodes.len() * NODE_OVERHEAD
            + groups
    }

    pub fn first_id(&self) -> Option<StreamId> {
        self.first().map(|(id, _)| id)
    }

    /// The live entries of the node at `master`, in `from..=to`.
    fn node_entries<'a>(
        &'a self,
        master: StreamId,
        packed: &'a Packed,
        from: StreamId,
        to: StreamId,
    ) -> impl Iterator<Item = (StreamId, Fields<'a>)> {
        live_in(master, self.chunks.run(&packed.run), from, to)
    }

    pub fn first(&self) -> Option<(StreamId, Fields<'_>)> {
        // A node with no live entry is gone: the first node has one.
        let (&master, packed) = self.nodes.iter().next()?;
        self.node_entries(master, packed, StreamId::MIN, StreamId::MAX)
            .next()
    }

    pub fn last(&self) -> Option<(StreamId, Fields<'_>)> {
        let (&master, packed) = self.nodes.iter().next_back()?;
        self.node_entries(master, packed, StreamId::MIN, StreamId::MAX)
            .last()
    }

    pub fn get(&self, id: StreamId) -> Option<Fields<'_>> {
        let (&master, packed) = self.nodes.range(..=id).next_back()?;
        self.node_entries(master, packed, id, id)
            .next()
            .map(|(_, fields)| fields)
    }

    /// Entries with IDs in `from..=to`, in order (reversed with `rev`).
    pub fn range(
        &self,
        from: StreamId,
        to: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (StreamId, Fields<'_>)> + '_> {
        if from > to {
            return Box::new(std::iter::empty());
        }
        // The node holding `from` may begin before it.
        let start = (self.nodes.range(..=from).next_back()).map_or(from, |(&master, _)| master);
        let nodes = self
            .nodes
            .range((Bound::Included(start), Bound::Included(to)));
        if rev {
            Box::new(nodes.rev().flat_map(move |(&master, packed)| {
                let mut entries: Vec<_> = self.node_entries(master, packed, from, to).collect();
                entries.reverse();
                entries
            }))
        } else {
            Box::new(
                nodes
                    .flat_map(move |(&master, packed)| self.node_entries(master, packed, from, to)),
            )
        }
    }

    /// Whether `from..=to` may hold a deleted entry (Redis' tombstone
    /// test, which only knows the largest ID deleted).
    pub(crate) fn has_tombstones(&self, from: StreamId, to: StreamId) -> bool {
        if self.is_empty() || self.max_deleted.is_zero() {
            return false;
        }
        if self
            .first_id()
            .is_some_and(|first| first > self.max_deleted)
        {
            return false;
        }
        from <= self.max_deleted && self.max_deleted <= to
    }

    /// How many entries were added up to and including `id`, when that
    /// can be told (Redis' estimate of an ID's distance from the first
    /// entry ever).
    pub fn entries_up_to(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.is_empty() && id <= self.last_id {
            return Some(self.entries_added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(self.entries_added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        let first = self.first_id().unwrap_or(StreamId::MAX);
        if self.max_deleted.is_zero() || self.max_deleted < first {
            let len = self.len as u64;
            match id.cmp(&first) {
                std::cmp::Ordering::Less => return Some(self.entries_added - len),
                std::cmp::Ordering::Equal => return Some(self.entries_added - len + 1),
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's lag (entries it has not read yet), when it can be told.
    /// Signed, as Redis answers it: a group given an ENTRIESREAD past the
    /// entries added lags by a negative count.
    pub fn lag(&self, group: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let lag = |read: u64| (self.entries_added as i64).wrapping_sub(read as i64);
        if let Some(read) = group.entries_read
            && !self.has_tombstones(group.last_id, StreamId::MAX)
        {
            return Some(lag(read));
        }
        self.entries_up_to(group.last_id).map(lag)
    }

    /// The nodes, in order, with their first IDs.
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, Node)> + '_ {
        self.nodes.iter().map(|(id, packed)| (*id, packed.node))
    }

    /// Whether an entry of `bytes` packed bytes would start a new node
    /// under Redis' limits (`stream-node-max-entries`, `-max-bytes`; 0
    /// is no limit).
    pub fn starts_node(&self, bytes: usize, max_entries: u64, max_bytes: u64) -> bool {
        let Some((_, Packed { node: last, .. })) = self.nodes.iter().next_back() else {
            return true;
        };
        (max_entries > 0 && last.total >= max_entries)
            || (max_bytes > 0 && last.bytes + node_bytes(bytes) > max_bytes)
    }

    /// Where `trim` cuts, as Redis trims: every entry up to and including
    /// the returned ID goes (`None`: nothing goes).
    pub fn trim_cut(&self, trim: Trim) -> Option<StreamId> {
        let mut len = self.len as u64;
        let mut deleted = 0u64;
        let mut cut = None;
        for (&master, packed) in &self.nodes {
            let node = &packed.node;
            if trim.reached(len) {
                break;
            }
            if trim.limit() > 0 && deleted + node.live > trim.limit() {
                break;
            }
            let whole = trim.takes_whole(node, len);
            if whole {
                len -= node.live;
                deleted += node.live;
                cut = Some(node.last);
                continue;
            }
            if trim.approx() {
                break;
            }
            // Entry by entry inside this node, from its first.
            for (id, _) in self.node_entries(master, packed, StreamId::MIN, StreamId::MAX) {
                if trim.stops_at(id, len) {
                    break;
                }
                len -= 1;
                cut = Some(id);
            }
            break;
        }
        cut
    }

    /// Whether a consumer group still needs entry `id` (Redis 8.2's
    /// "referenced", which XDELEX, XACKDEL and trimming with ACKED spare):
    /// some group has not had it delivered yet (its last delivered ID is
    /// before it), or has it pending. Entries read counts do not matter.
    pub fn is_referenced(&self, id: StreamId) -> bool {
        self.is_referenced_apart_from(id, None)
    }

    /// [`StreamValue::is_referenced`], not counting `group`'s pending
    /// entries (XACKDEL ACKED asks once it has acknowledged the entry).
    pub fn is_referenced_apart_from(&self, id: StreamId, group: Option<&[u8]>) -> bool {
        let undelivered = self.groups.values().any(|g| g.last_id < id);
        undelivered
            || self
                .groups
                .iter()
                .any(|(name, g)| Some(&name[..]) != group && g.pending.contains_key(&id))
    }

    /// The groups that have any of `ids` pending, each with those of them
    /// it has (what DELREF takes out of every pending list).
    pub fn pending_among(&self, ids: &[StreamId]) -> Vec<(Vec<u8>, Vec<StreamId>)> {
        self.groups
            .iter()
            .filter_map(|(name, g)| {
                let held: Vec<StreamId> = (ids.iter())
                    .filter(|id| g.pending.contains_key(id))
                    .copied()
                    .collect();
                (!held.is_empty()).then(|| (name.clone(), held))
            })
            .collect()
    }

    /// The entries `trim` removes when references count (Redis 8.2's
    /// DELREF and ACKED trimming): nodes go entry by entry, so `~` trims
    /// as exactly as `=` (within LIMIT, still counted per node); with
    /// `spare_referenced` (ACKED) an entry some group still needs is
    /// skipped and trimming goes on past it.
    pub fn trim_entries(&self, trim: Trim, spare_referenced: bool) -> Vec<StreamId> {
        let mut len = self.len as u64;
        let mut ids = Vec::new();
        for (&master, packed) in &self.nodes {
            let node = &packed.node;
            if trim.reached(len) {
                break;
            }
            if trim.limit() > 0 && ids.len() as u64 + node.live > trim.limit() {
                break;
            }
            let whole = trim.takes_whole(node, len);
            for (id, _) in self.node_entries(master, packed, StreamId::MIN, StreamId::MAX) {
                if trim.stops_at(id, len) {
                    break;
                }
                if spare_referenced && self.is_referenced(id) {
                    continue;
                }
                ids.push(id);
                len -= 1;
            }
            if !whole {
                break;
            }
        }
        ids
    }

    // --- what operations do -------------------------------------------

    /// Appends entry `id` (past every other) to the last node, or to a
    /// new node when `new_node` ([`StreamValue::starts_node`]).
    fn insert(&mut self, id: StreamId, fields: &[&[u8]], new_node: bool) {
        let full: usize = fields.iter().map(|f| varint_len(f.len()) + f.len()).sum();
        let bytes = node_bytes(varint_len(fields.len()) + full);
        if new_node || self.nodes.is_empty() {
            self.close_last_node();
            self.nodes.insert(id, Packed::default());
        } else {
            self.reopen_last_node();
        }
        let (&master, packed) = self.nodes.iter_mut().next_back().expect("a node");
        debug_assert!(id >= packed.node.last && id >= master);
        let Run::Open(data) = &mut packed.run else {
            unreachable!("the last node's run is open")
        };
        let same_names = packed.node.total > 0 && {
            let first = entries_of(master, data).next().map(|slot| slot.fields);
            first.is_some_and(|first| first.has_names(fields))
        };
        let before = data.capacity();
        write_varint(data, (id.ms - master.ms) as usize);
        write_varint(data, id.seq as usize);
        let mut entry = Vec::with_capacity(full + 10);
        write_varint(&mut entry, fields.len());
        for (i, field) in fields.iter().enumerate() {
            if same_names && i % 2 == 0 {
                continue;
            }
            write_varint(&mut entry, field.len());
            entry.extend_from_slice(field);
        }
        write_varint(data, entry.len() << 2 | (same_names as usize) << 1);
        data.extend_from_slice(&entry);
        self.data_bytes += data.capacity() - before;
        let node = &mut packed.node;
        node.total += 1;
        node.live += 1;
        node.last = id;
        node.bytes += bytes;
        self.len += 1;
    }

    /// XDEL of one entry: its node goes when it was the last one in it.
    fn remove(&mut self, id: StreamId) -> bool {
        self.remove_entry(id, true)
    }

    /// Removes one entry (marks it deleted in its node, or drops the node
    /// with it); `tombstone`: the largest deleted ID follows (XDEL does,
    /// trimming does not).
    fn remove_entry(&mut self, id: StreamId, tombstone: bool) -> bool {
        let Some((&master, packed)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let data = self.chunks.run_mut(&mut packed.run);
        let found = entries_of(master, data)
            .find(|slot| slot.id == id && !slot.deleted)
            .map(|slot| slot.header_at);
        let Some(header_at) = found else {
            return false;
        };
        // The header's lowest bit: setting it keeps the varint's length.
        data[header_at] |= 1;
        packed.node.live -= 1;
        if packed.node.live == 0 {
            self.drop_node(master);
        }
        self.len -= 1;
        if tombstone && id > self.max_deleted {
            self.max_deleted = id;
        }
        true
    }

    /// The last node is complete: its run gives back what it held spare.
    /// (A copy of its exact size: shrinking in place let the allocator
    /// keep the doubled block, 209 bytes an entry instead of 112.)
    fn close_last_node(&mut self) {
        if let Some((_, last)) = self.nodes.iter_mut().next_back()
            && let Run::Open(data) = &last.run
        {
            self.data_bytes -= data.capacity();
            last.run = self.chunks.store(data);
        }
    }

    /// The last node grows again (a loaded stream's last node was
    /// stored complete): its run comes back out of its chunk.
    fn reopen_last_node(&mut self) {
        if let Some((_, last)) = self.nodes.iter_mut().next_back()
            && let Run::Closed { .. } = last.run
        {
            let data = self.chunks.run(&last.run).to_vec();
            self.chunks.release(&last.run);
            self.data_bytes += data.capacity();
            last.run = Run::Open(data);
        }
    }

    fn drop_node(&mut self, master: StreamId) {
        if let Some(packed) = self.nodes.remove(&master) {
            match &packed.run {
                Run::Open(data) => self.data_bytes -= data.capacity(),
                closed => self.chunks.release(closed),
            }
        }
    }

    /// Trimming: the entries up to `cut` go, and the nodes that ended
    /// before it (Redis' trimming leaves the largest deleted ID alone).
    fn remove_through(&mut self, cut: StreamId) -> u64 {
        let mut removed = 0;
        while let Some((&master, packed)) = self.nodes.iter_mut().next() {
            if master > cut {
                break;
            }
            if packed.node.last <= cut {
                removed += packed.node.live;
                self.drop_node(master);
                continue;
            }
            let data = self.chunks.run_mut(&mut packed.run);
            let going: Vec<usize> = entries_of(master, data)
                .take_while(|slot| slot.id <= cut)
                .filter(|slot| !slot.deleted)
                .map(|slot| slot.header_at)
                .collect();
            for at in &going {
                data[*at] |= 1;
            }
            packed.node.live -= going.len() as u64;
            removed += going.len() as u64;
            break;
        }
        self.len -= removed as usize;
        removed
    }

    fn consumer<'g>(group: &'g mut Group, name: &[u8], now_ms: u64) -> &'g mut Consumer {
        group
            .consumers
            .entry(name.to_vec())
            .or_insert_with(|| Consumer {
                seen_ms: now_ms,
                active_ms: None,
                pending: BTreeSet::new(),
            })
    }

    /// Gives `id` to `consumer` in `group`, taking it from whoever had it.
    fn assign(
        group: &mut Group,
        id: StreamId,
        consumer: &[u8],
        delivered_ms: u64,
        deliveries: u64,
    ) {
        if let Some(old) = group.pending.get(&id)
            && let Some(owner) = group.consumers.get_mut(&old.consumer)
        {
            owner.pending.remove(&id);
        }
        group.pending.insert(
            id,
            Pending {
                consumer: consumer.to_vec(),
                delivered_ms,
                deliveries,
            },
        );
        if let Some(owner) = group.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
    }

    /// The read counter `group` will have once new entries `ids` (in
    /// ascending order) are delivered from it, as [`StreamOp::Deliver`]
    /// moves it.
    pub fn read_counter_after(&self, group: &Group, ids: &[StreamId]) -> Option<u64> {
        let mut moved = Group {
            last_id: group.last_id,
            entries_read: group.entries_read,
            ..Group::default()
        };
        for &id in ids {
            if id > moved.last_id {
                moved.entries_read = self.read_counter(&moved, id);
                moved.last_id = id;
            }
        }
        moved.entries_read
    }

    /// The group's read counter after it reads the new entry `id`.
    fn read_counter(&self, group: &Group, id: StreamId) -> Option<u64> {
        match group.entries_read {
            Some(read) if !self.has_tombstones(id, StreamId::MAX) => Some(read + 1),
            _ if self.entries_added > 0 => self.entries_up_to(id),
            current => current,
        }
    }
}

/// Rebuilding a stream from another format (RESTORE of Redis' DUMP
/// payload): entries, consumers and pending entries as they were, with no
/// counter moved.
impl StreamValue {
    pub fn restore_entry(&mut self, id: StreamId, fields: &[&[u8]], new_node: bool) {
        self.insert(id, fields, new_node);
    }
}

impl Group {
    pub fn restore_consumer(&mut self, name: &[u8], seen_ms: u64, active_ms: Option<u64>) {
        let consumer = StreamValue::consumer(self, name, seen_ms);
        consumer.seen_ms = seen_ms;
        consumer.active_ms = active_ms;
    }

    pub fn restore_pending(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        delivered_ms: u64,
        deliveries: u64,
    ) {
        StreamValue::consumer(self, consumer, delivered_ms);
        StreamValue::assign(self, id, consumer, delivered_ms, deliveries);
    }
}

/// How XADD and XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Down to `len` entries.
    MaxLen { len: u64, approx: bool, limit: u64 },
    /// Every entry before `id`.
    MinId {
        id: StreamId,
        approx: bool,
        limit: u64,
    },
}

impl Trim {
    /// Whether a stream of `len` entries is trimmed enough (MAXLEN).
    fn reached(self, len: u64) -> bool {
        matches!(self, Trim::MaxLen { len: max, .. } if len <= max)
    }

    /// Whether trimming stops at entry `id` with `len` entries left.
    fn stops_at(self, id: StreamId, len: u64) -> bool {
        match self {
            Trim::MaxLen { len: max, .. } => len <= max,
            Trim::MinId { id: min, .. } => id >= min,
        }
    }

    /// Whether all of `node` goes with `len` entries in the stream.
    fn takes_whole(self, node: &Node, len: u64) -> bool {
        match self {
            Trim::MaxLen { len: max, .. } => len - node.live >= max,
            Trim::MinId { id, .. } => node.last < id,
        }
    }

    fn approx(self) -> bool {
        match self {
            Trim::MaxLen { approx, .. } | Trim::MinId { approx, .. } => approx,
        }
    }

    /// Most entries one trim removes (0: no bound).
    fn limit(self) -> u64 {
        match self {
            Trim::MaxLen { limit, .. } | Trim::MinId { limit, .. } => limit,
        }
    }
}

/// Bytes an entry of `packed` bytes adds to a node, roughly as Redis'
/// listpack lays it out (flags, ID deltas and a count beside the fields).
fn node_bytes(packed: usize) -> u64 {
    packed as u64 + 8
}

/// A change of a stream, as commands make it and the log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamOp<'a> {
    /// XADD: a new entry (fields and values alternating) with an ID past
    /// the last one.
    Add {
        id: StreamId,
        fields: Vec<&'a [u8]>,
        /// Whether it begins a new node ([`StreamValue::starts_node`]).
        new_node: bool,
    },
    /// XDEL: these entries go.
    Delete(Vec<StreamId>),
    /// XTRIM and XADD's trimming: every entry up to and including this
    /// ID goes ([`StreamValue::trim_cut`]).
    TrimThrough(StreamId),
    /// Trimming with DELREF or ACKED (Redis 8.2): these entries go
    /// ([`StreamValue::trim_entries`]); as any trimming, it leaves the
    /// largest deleted ID alone.
    TrimEntries(Vec<StreamId>),
    /// XSETID.
    SetId {
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    },
    /// XGROUP CREATE (with MKSTREAM, it makes the stream).
    CreateGroup {
        group: &'a [u8],
        last_id: StreamId,
        entries_read: Option<u64>,
    },
    /// XGROUP SETID.
    SetGroupId {
        group: &'a [u8],
        last_id: StreamId,
        entries_read: Option<u64>,
    },
    /// XGROUP DESTROY.
    DestroyGroup { group: &'a [u8] },
    /// XGROUP CREATECONSUMER (and a consumer a read or claim names).
    CreateConsumer {
        group: &'a [u8],
        consumer: &'a [u8],
        now_ms: u64,
    },
    /// XGROUP DELCONSUMER: the consumer and its pending entries go.
    DeleteConsumer { group: &'a [u8], consumer: &'a [u8] },
    /// XREADGROUP: `ids` delivered to `consumer` (created if new) at
    /// `now_ms`. New entries (`>`) move the group's last ID and counter
    /// and become pending (unless `noack`); history reads count another
    /// delivery of entries already pending with the consumer.
    Deliver {
        group: &'a [u8],
        consumer: &'a [u8],
        now_ms: u64,
        ids: Vec<StreamId>,
        history: bool,
        noack: bool,
        /// The group's read counter after the delivery
        /// ([`StreamValue::read_counter_after`]), for the replication
        /// stream's `XGROUP SETID … ENTRIESREAD`. Applying recomputes it;
        /// records written before it existed decode `None`.
        entries_read: Option<u64>,
    },
    /// XACK (and claims of deleted entries): these stop being pending.
    Ack { group: &'a [u8], ids: Vec<StreamId> },
    /// XCLAIM, XAUTOCLAIM: these pending entries now belong to
    /// `consumer`, each delivered at its time and count.
    Claim {
        group: &'a [u8],
        consumer: &'a [u8],
        now_ms: u64,
        claims: Vec<(StreamId, u64, u64)>,
        /// Whether the claim counts as the consumer being active (not
        /// with JUSTID).
        active: bool,
    },
}

const OP_ADD: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_TRIM_THROUGH: u8 = 3;
const OP_SET_ID: u8 = 4;
const OP_CREATE_GROUP: u8 = 5;
const OP_SET_GROUP_ID: u8 = 6;
const OP_DESTROY_GROUP: u8 = 7;
const OP_CREATE_CONSUMER: u8 = 8;
const OP_DELETE_CONSUMER: u8 = 9;
const OP_DELIVER: u8 = 10;
const OP_ACK: u8 = 11;
const OP_CLAIM: u8 = 12;
const OP_TRIM_ENTRIES: u8 = 13;

/// In a DELIVER record's flags: the group's read counter follows the IDs.
const DELIVER_COUNTER: u8 = 4;

/// A stream image or operation that does not decode.
#[derive(Debug, PartialEq, Eq)]
pub struct BadImage;

impl<'a> StreamOp<'a> {
    /// Applies the operation; answers how many entries (or pending
    /// entries, groups, consumers) it added or removed.
    pub fn apply(&self, stream: &mut StreamValue) -> u64 {
        match self {
            StreamOp::Add {
                id,
                fields,
                new_node,
            } => {
                stream.insert(*id, fields, *new_node);
                stream.last_id = stream.last_id.max(*id);
                stream.entries_added += 1;
                1
            }
            StreamOp::Delete(ids) => ids.iter().filter(|id| stream.remove(**id)).count() as u64,
            StreamOp::TrimThrough(id) => stream.remove_through(*id),
            StreamOp::TrimEntries(ids) => ids
                .iter()
                .filter(|id| stream.remove_entry(**id, false))
                .count() as u64,
            StreamOp::SetId {
                last_id,
                entries_added,
                max_deleted,
            } => {
                stream.last_id = *last_id;
                if let Some(added) = entries_added {
                    stream.entries_added = *added;
                }
                if let Some(deleted) = max_deleted {
                    stream.max_deleted = *deleted;
                }
                1
            }
            op @ (StreamOp::CreateGroup { .. }
            | StreamOp::SetGroupId { .. }
            | StreamOp::DestroyGroup { .. }
            | StreamOp::CreateConsumer { .. }
            | StreamOp::DeleteConsumer { .. }) => apply_group_change(op, stream),
            StreamOp::Deliver {
                group,
                consumer,
                now_ms,
                ids,
                history,
                noack,
                ..
            } => deliver(stream, group, consumer, *now_ms, ids, *history, *noack),
            StreamOp::Ack { group, ids } => {
                let Some(found) = stream.groups.get_mut(*group) else {
                    return 0;
                };
                let mut acked = 0;
                for id in ids {
                    if let Some(pending) = found.pending.remove(id) {
                        if let Some(owner) = found.consumers.get_mut(&pending.consumer) {
                            owner.pending.remove(id);
                        }
                        acked += 1;
                    }
                }
                acked
            }
            StreamOp::Claim {
                group,
                consumer,
                now_ms,
                claims,
                active,
            } => {
                let Some(found) = stream.groups.get_mut(*group) else {
                    return 0;
                };
                let owner = StreamValue::consumer(found, consumer, *now_ms);
                owner.seen_ms = *now_ms;
                if *active && !claims.is_empty() {
                    owner.active_ms = Some(*now_ms);
                }
                for &(id, delivered_ms, deliveries) in claims {
                    StreamValue::assign(found, id, consumer, delivered_ms, deliveries);
                }
                claims.len() as u64
            }
        }
    }

    /// The operation's record payload.
    // One arm per operation, each a few writes: a table, long by nature.
    #[allow(clippy::too_many_lines)]
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            StreamOp::Add {
                id,
                fields,
                new_node,
            } => {
                out.push(OP_ADD);
                out.push(*new_node as u8);
                id.write(out);
                write_varint(out, fields.len());
                for field in fields {
                    write_bytes(out, field);
                }
            }
            StreamOp::Delete(ids) => {
                out.push(OP_DELETE);
                write_ids(out, ids);
            }
            StreamOp::TrimThrough(id) => {
                out.push(OP_TRIM_THROUGH);
                id.write(out);
            }
            StreamOp::TrimEntries(ids) => {
                out.push(OP_TRIM_ENTRIES);
                write_ids(out, ids);
            }
            StreamOp::SetId {
                last_id,
                entries_added,
                max_deleted,
            } => {
                out.push(OP_SET_ID);
                last_id.write(out);
                write_option(out, *entries_added);
                out.push(max_deleted.is_some() as u8);
                max_deleted.unwrap_or_default().write(out);
            }
            StreamOp::CreateGroup {
                group,
                last_id,
                entries_read,
            }
            | StreamOp::SetGroupId {
                group,
                last_id,
                entries_read,
            } => {
                let tag = match self {
                    StreamOp::CreateGroup { .. } => OP_CREATE_GROUP,
                    _ => OP_SET_GROUP_ID,
                };
                out.push(tag);
                write_bytes(out, group);
                last_id.write(out);
                write_option(out, *entries_read);
            }
            StreamOp::DestroyGroup { group } => {
                out.push(OP_DESTROY_GROUP);
                write_bytes(out, group);
            }
            StreamOp::CreateConsumer {
                group,
                consumer,
                now_ms,
            } => {
                out.push(OP_CREATE_CONSUMER);
                write_bytes(out, group);
                write_bytes(out, consumer);
                write_u64(out, *now_ms);
            }
            StreamOp::DeleteConsumer { group, consumer } => {
                out.push(OP_DELETE_CONSUMER);
                write_bytes(out, group);
                write_bytes(out, consumer);
            }
            StreamOp::Deliver {
                group,
                consumer,
                now_ms,
                ids,
                history,
                noack,
                entries_read,
            } => {
                out.push(OP_DELIVER);
                write_bytes(out, group);
                write_bytes(out, consumer);
                write_u64(out, *now_ms);
                // Bit 2: the read counter follows the IDs (an older
                // record ends with them).
                out.push(*history as u8 | (*noack as u8) << 1 | DELIVER_COUNTER);
                write_ids(out, ids);
                write_option(out, *entries_read);
            }
            StreamOp::Ack { group, ids } => {
                out.push(OP_ACK);
                write_bytes(out, group);
                write_ids(out, ids);
            }
            StreamOp::Claim {
                group,
                consumer,
                now_ms,
                claims,
                active,
            } => {
                out.push(OP_CLAIM);
                write_bytes(out, group);
                write_bytes(out, consumer);
                write_u64(out, *now_ms);
                out.push(*active as u8);
                write_varint(out, claims.len());
                for (id, delivered_ms, deliveries) in claims {
                    id.write(out);
                    write_u64(out, *delivered_ms);
                    write_u64(out, *deliveries);
                }
            }
        }
    }

    /// A record payload written by [`StreamOp::encode`].
    pub fn decode(payload: &'a [u8]) -> Result<StreamOp<'a>, BadImage> {
        decode_op(payload).ok_or(BadImage)
    }
}

/// The group and consumer changes of [`StreamOp::apply`].
fn apply_group_change(op: &StreamOp<'_>, stream: &mut StreamValue) -> u64 {
    match op {
        StreamOp::CreateGroup {
            group,
            last_id,
            entries_read,
        } => {
            if stream.groups.contains_key(*group) {
                return 0;
            }
            let created = Group {
                last_id: *last_id,
                entries_read: *entries_read,
                ..Group::default()
            };
            stream.groups.insert(group.to_vec(), created);
            1
        }
        StreamOp::SetGroupId {
            group,
            last_id,
            entries_read,
        } => match stream.groups.get_mut(*group) {
            Some(found) => {
                found.last_id = *last_id;
                found.entries_read = *entries_read;
                1
            }
            None => 0,
        },
        StreamOp::DestroyGroup { group } => stream.groups.remove(*group).is_some() as u64,
        StreamOp::CreateConsumer {
            group,
            consumer,
            now_ms,
        } => {
            let Some(found) = stream.groups.get_mut(*group) else {
                return 0;
            };
            if found.consumers.contains_key(*consumer) {
                return 0;
            }
            StreamValue::consumer(found, consumer, *now_ms);
            1
        }
        StreamOp::DeleteConsumer { group, consumer } => {
            let Some(found) = stream.groups.get_mut(*group) else {
                return 0;
            };
            let Some(gone) = found.consumers.remove(*consumer) else {
                return 0;
            };
            for id in &gone.pending {
                found.pending.remove(id);
            }
            gone.pending.len() as u64
        }
        _ => unreachable!("the other operations are applied by StreamOp::apply"),
    }
}

fn deliver(
    stream: &mut StreamValue,
    group: &[u8],
    consumer: &[u8],
    now_ms: u64,
    ids: &[StreamId],
    history: bool,
    noack: bool,
) -> u64 {
    let Some(mut found) = stream.groups.remove(group) else {
        return 0;
    };
    let owner = StreamValue::consumer(&mut found, consumer, now_ms);
    owner.seen_ms = now_ms;
    if !ids.is_empty() {
        owner.active_ms = Some(now_ms);
    }
    for &id in ids {
        if history {
            if let Some(pending) = found.pending.get_mut(&id) {
                pending.delivered_ms = now_ms;
                pending.deliveries += 1;
            }
            continue;
        }
        if id > found.last_id {
            found.entries_read = stream.read_counter(&found, id);
            found.last_id = id;
        }
        if !noack {
            StreamValue::assign(&mut found, id, consumer, now_ms, 1);
        }
    }
    stream.groups.insert(group.to_vec(), found);
    ids.len() as u64
}

// One arm per operation, mirroring `encode`: a table, long by nature.
#[allow(clippy::too_many_lines)]
fn decode_op(p: &[u8]) -> Option<StreamOp<'_>> {
    let mut at = 1;
    let op = match *p.first()? {
        OP_ADD => {
            let new_node = *p.get(at)? != 0;
            at += 1;
            let id = StreamId::read(p, &mut at)?;
            let count = read_usize(p, &mut at)?;
            let mut fields = Vec::with_capacity(count.min(p.len()));
            for _ in 0..count {
                fields.push(read_bytes(p, &mut at)?);
            }
            StreamOp::Add {
                id,
                fields,
                new_node,
            }
        }
        OP_DELETE => StreamOp::Delete(read_ids(p, &mut at)?),
        OP_TRIM_THROUGH => StreamOp::TrimThrough(StreamId::read(p, &mut at)?),
        OP_TRIM_ENTRIES => StreamOp::TrimEntries(read_ids(p, &mut at)?),
        OP_SET_ID => {
            let last_id = StreamId::read(p, &mut at)?;
            let entries_added = read_option(p, &mut at)?;
            let has_deleted = *p.get(at)? != 0;
            at += 1;
            let deleted = StreamId::read(p, &mut at)?;
            StreamOp::SetId {
                last_id,
                entries_added,
                max_deleted: has_deleted.then_some(deleted),
            }
        }
        tag @ (OP_CREATE_GROUP | OP_SET_GROUP_ID) => {
            let group = read_bytes(p, &mut at)?;
            let last_id = StreamId::read(p, &mut at)?;
            let entries_read = read_option(p, &mut at)?;
            if tag == OP_CREATE_GROUP {
                StreamOp::CreateGroup {
                    group,
                    last_id,
                    entries_read,
                }
            } else {
                StreamOp::SetGroupId {
                    group,
                    last_id,
                    entries_read,
                }
            }
        }
        OP_DESTROY_GROUP => StreamOp::DestroyGroup {
            group: read_bytes(p, &mut at)?,
        },
        OP_CREATE_CONSUMER => StreamOp::CreateConsumer {
            group: read_bytes(p, &mut at)?,
            consumer: read_bytes(p, &mut at)?,
            now_ms: read_u64(p, &mut at)?,
        },
        OP_DELETE_CONSUMER => StreamOp::DeleteConsumer {
            group: read_bytes(p, &mut at)?,
            consumer: read_bytes(p, &mut at)?,
        },
        OP_DELIVER => {
            let group = read_bytes(p, &mut at)?;
            let consumer = read_bytes(p, &mut at)?;
            let now_ms = read_u64(p, &mut at)?;
            let flags = *p.get(at)?;
            at += 1;
            let ids = read_ids(p, &mut at)?;
            let entries_read = match flags & DELIVER_COUNTER {
                0 => None,
                _ => read_option(p, &mut at)?,
            };
            StreamOp::Deliver {
                group,
                consumer,
                now_ms,
                ids,
                history: flags & 1 != 0,
                noack: flags & 2 != 0,
                entries_read,
            }
        }
        OP_ACK => StreamOp::Ack {
            group: read_bytes(p, &mut at)?,
            ids: read_ids(p, &mut at)?,
        },
        OP_CLAIM => {
            let group = read_bytes(p, &mut at)?;
            let consumer = read_bytes(p, &mut at)?;
            let now_ms = read_u64(p, &mut at)?;
            let active = *p.get(at)? != 0;
            at += 1;
            let count = read_usize(p, &mut at)?;
            let mut claims = Vec::with_capacity(count.min(p.len()));
            for _ in 0..count {
                let id = StreamId::read(p, &mut at)?;
                claims.push((id, read_u64(p, &mut at)?, read_u64(p, &mut at)?));
            }
            StreamOp::Claim {
                group,
                consumer,
                now_ms,
                claims,
                active,
            }
        }
        _ => return None,
    };
    (at == p.len()).then_some(op)
}

// --- the image ---------------------------------------------------------

const IMAGE_VERSION: u8 = 1;

impl StreamValue {
    /// The image of this stream (checkpoints, cold values, COPY).
    pub fn image(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.data_bytes + self.chunks.bytes + self.len * 24 + 64);
        self.encode_image(&mut out);
        out
    }

    pub fn image_len(&self) -> usize {
        // Exact enough for buffers: encoding is cheap next to a write.
        let mut out = Vec::new();
        self.encode_image(&mut out);
        out.len()
    }

    pub fn encode_image(&self, out: &mut Vec<u8>) {
        out.push(IMAGE_VERSION);
        self.last_id.write(out);
        write_u64(out, self.entries_added);
        self.max_deleted.write(out);
        write_varint(out, self.len);
        for (id, fields) in self.range(StreamId::MIN, StreamId::MAX, false) {
            id.write(out);
            match fields.names {
                None => write_bytes(out, fields.packed),
                Some(_) => write_bytes(out, &fields.to_packed()),
            }
        }
        write_varint(out, self.nodes.len());
        for (master, Packed { node, .. }) in &self.nodes {
            master.write(out);
            write_u64(out, node.total);
            write_u64(out, node.live);
            node.last.write(out);
            write_u64(out, node.bytes);
        }
        write_varint(out, self.groups.len());
        for (name, group) in &self.groups {
            write_bytes(out, name);
            group.last_id.write(out);
            write_option(out, group.entries_read);
            write_varint(out, group.consumers.len());
            for (name, consumer) in &group.consumers {
                write_bytes(out, name);
                write_u64(out, consumer.seen_ms);
                write_option(out, consumer.active_ms);
            }
            write_varint(out, group.pending.len());
            for (id, pending) in &group.pending {
                id.write(out);
                write_bytes(out, &pending.consumer);
                write_u64(out, pending.delivered_ms);
                write_u64(out, pending.deliveries);
            }
        }
    }

    pub(crate) fn decode_image(image: &[u8]) -> Result<StreamValue, BadImage> {
        decode_image(image).ok_or(BadImage)
    }
}

fn decode_image(p: &[u8]) -> Option<StreamValue> {
    if *p.first()? != IMAGE_VERSION {
        return None;
    }
    let mut at = 1;
    let mut stream = StreamValue {
        last_id: StreamId::read(p, &mut at)?,
        entries_added: read_u64(p, &mut at)?,
        max_deleted: StreamId::read(p, &mut at)?,
        ..StreamValue::default()
    };
    let count = read_usize(p, &mut at)?;
    let mut entries = Vec::with_capacity(count.min(p.len()));
    for _ in 0..count {
        let id = StreamId::read(p, &mut at)?;
        let packed = read_bytes(p, &mut at)?;
        let fields = Fields {
            packed,
            names: None,
        };
        // Every field must be there: readers walk them without checks.
        if fields.iter().count() != fields.len() {
            return None;
        }
        let items: Vec<&[u8]> = fields.iter().collect();
        entries.push((id, items));
    }
    // The nodes must hold every entry, in order: trimming walks them.
    let mut entries = entries.into_iter();
    let mut previous = None;
    for _ in 0..read_usize(p, &mut at)? {
        let master = StreamId::read(p, &mut at)?;
        let node = Node {
            total: read_u64(p, &mut at)?,
            live: read_u64(p, &mut at)?,
            last: StreamId::read(p, &mut at)?,
            bytes: read_u64(p, &mut at)?,
        };
        if node.live == 0 || previous.is_some_and(|last| master <= last) || node.last < master {
            return None;
        }
        previous = Some(node.last);
        // The node keeps its first ID even when that entry was deleted.
        stream.close_last_node();
        stream.nodes.insert(master, Packed::default());
        for _ in 0..node.live {
            let (id, items) = entries.next()?;
            if id < master || id > node.last {
                return None;
            }
            stream.insert(id, &items, false);
        }
        stream.nodes.get_mut(&master)?.node = node;
    }
    if entries.next().is_some() {
        return None;
    }
    stream.close_last_node();
    for _ in 0..read_usize(p, &mut at)? {
        let name = read_bytes(p, &mut at)?.to_vec();
        let mut group = Group {
            last_id: StreamId::read(p, &mut at)?,
            entries_read: read_option(p, &mut at)?,
            ..Group::default()
        };
        for _ in 0..read_usize(p, &mut at)? {
            let name = read_bytes(p, &mut at)?.to_vec();
            let consumer = Consumer {
                seen_ms: read_u64(p, &mut at)?,
                active_ms: read_option(p, &mut at)?,
                pending: BTreeSet::new(),
            };
            group.consumers.insert(name, consumer);
        }
        for _ in 0..read_usize(p, &mut at)? {
            let id = StreamId::read(p, &mut at)?;
            let consumer = read_bytes(p, &mut at)?;
            let delivered_ms = read_u64(p, &mut at)?;
            let deliveries = read_u64(p, &mut at)?;
            StreamValue::consumer(&mut group, consumer, delivered_ms);
            StreamValue::assign(&mut group, id, consumer, delivered_ms, deliveries);
        }
        stream.groups.insert(name, group);
    }
    (at == p.len()).then_some(stream)
}

/// Checks a stream image (a record's or a checkpoint's).
pub(crate) fn check_image(image: &[u8]) -> Result<(), BadImage> {
    decode_image(image).map(|_| ()).ok_or(BadImage)
}

// --- encoding helpers ----------------------------------------------------

fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    write_varint(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// `None` as 0, `Some(n)` as n + 1.
fn write_option(out: &mut Vec<u8>, n: Option<u64>) {
    write_u64(out, n.map_or(0, |n| n.wrapping_add(1)));
}

fn read_option(bytes: &[u8], at: &mut usize) -> Option<Option<u64>> {
    let n = read_u64(bytes, at)?;
    Some(n.checked_sub(1))
}

fn write_ids(out: &mut Vec<u8>, ids: &[StreamId]) {
    write_varint(out, ids.len());
    for id in ids {
        id.write(out);
    }
}

fn read_ids(p: &[u8], at: &mut usize) -> Option<Vec<StreamId>> {
    let count = read_usize(p, at)?;
    let mut ids = Vec::with_capacity(count.min(p.len()));
    for _ in 0..count {
        ids.push(StreamId::read(p, at)?);
    }
    Some(ids)
}

#[cfg(test)]
mod tests;
