//! How a stream's entries are stored (module docs of `stream`): each
//! node's entries back to back in one byte run, complete nodes' runs in
//! shared chunks, and the reading of a run ([`entries_of`], [`Fields`]).

use super::id::StreamId;
use crate::varint::{read_bytes, read_varint, write_varint};

/// A node and its entries, back to back (module docs): per entry the
/// varints `ms - master.ms`, `seq` and a header `len << 2 | same_names << 1
/// | deleted`, then `len` bytes of fields: a varint count of fields and
/// values, then each as a varint length and its bytes (values only when
/// the names are the first entry's).
#[derive(Clone, Debug, Default)]
pub(super) struct Packed {
    pub(super) node: Node,
    pub(super) run: Run,
}

/// Where a node's run is: the last node's grows on its own; a complete
/// node's is copied into a chunk shared with the nodes before and after
/// it, so that it takes its bytes and not an allocator's size class (a
/// 3.7 KB node in its own allocation took a 4 KB block: 13 bytes more an
/// entry of 100 bytes).
#[derive(Clone, Debug)]
pub(super) enum Run {
    Open(Vec<u8>),
    Closed { chunk: u32, at: u32, len: u32 },
}

impl Default for Run {
    fn default() -> Run {
        Run::Open(Vec::new())
    }
}

/// The chunks complete nodes' runs are copied into, in order: each
/// twice the one before (from 4 KB up to 256 KB), so a small stream
/// takes little and a large one wastes at most a node's bytes per chunk.
/// A chunk is freed when its last node goes (streams are trimmed from
/// their oldest entries, so chunks empty in order, and the emptied ones
/// at the front leave the list).
#[derive(Clone, Debug, Default)]
pub(super) struct Chunks {
    pub(super) list: std::collections::VecDeque<Option<Chunk>>,
    /// The number of the chunk at the front of `list`.
    pub(super) base: u32,
    /// Bytes the chunks hold allocated.
    pub(super) bytes: usize,
}

#[derive(Clone, Debug)]
pub(super) struct Chunk {
    pub(super) data: Vec<u8>,
    /// Nodes whose runs are in it.
    pub(super) nodes: u32,
}

pub(super) const CHUNK_BYTES_MIN: usize = 4 << 10;
pub(super) const CHUNK_BYTES_MAX: usize = 256 << 10;

impl Chunks {
    pub(super) fn run<'a>(&'a self, run: &'a Run) -> &'a [u8] {
        match run {
            Run::Open(data) => data,
            &Run::Closed { chunk, at, len } => {
                let chunk = self.list[(chunk - self.base) as usize]
                    .as_ref()
                    .expect("a node's chunk");
                &chunk.data[at as usize..(at + len) as usize]
            }
        }
    }

    pub(super) fn run_mut<'a>(&'a mut self, run: &'a mut Run) -> &'a mut [u8] {
        match run {
            Run::Open(data) => data,
            &mut Run::Closed { chunk, at, len } => {
                let chunk = self.list[(chunk - self.base) as usize]
                    .as_mut()
                    .expect("a node's chunk");
                &mut chunk.data[at as usize..(at + len) as usize]
            }
        }
    }

    /// Copies a complete node's run into the last chunk (a new one when
    /// it has no room).
    pub(super) fn store(&mut self, run: &[u8]) -> Run {
        let room = |c: &Option<Chunk>| c.as_ref().map_or(0, |c| c.data.capacity() - c.data.len());
        if self.list.back().is_none_or(|last| room(last) < run.len()) {
            let previous = (self.list.iter().rev())
                .find_map(|c| c.as_ref().map(|c| c.data.capacity()))
                .unwrap_or(CHUNK_BYTES_MIN / 2);
            let size = (previous * 2)
                .clamp(CHUNK_BYTES_MIN, CHUNK_BYTES_MAX)
                .max(run.len());
            self.list.push_back(Some(Chunk {
                data: Vec::with_capacity(size),
                nodes: 0,
            }));
            self.bytes += size;
        }
        let index = self.list.len() - 1;
        let chunk = self.list[index].as_mut().expect("just made");
        let at = chunk.data.len();
        chunk.data.extend_from_slice(run);
        chunk.nodes += 1;
        Run::Closed {
            chunk: self.base + index as u32,
            at: at as u32,
            len: run.len() as u32,
        }
    }

    /// A node's run is no longer needed: its chunk goes with its last one.
    pub(super) fn release(&mut self, run: &Run) {
        let &Run::Closed { chunk, .. } = run else {
            return;
        };
        let slot = &mut self.list[(chunk - self.base) as usize];
        let emptied = slot.as_mut().is_some_and(|c| {
            c.nodes -= 1;
            c.nodes == 0
        });
        if emptied {
            self.bytes -= slot.take().map_or(0, |c| c.data.capacity());
            while self.list.front().is_some_and(Option::is_none) {
                self.list.pop_front();
                self.base += 1;
            }
        }
    }
}

/// One entry of a node as [`entries_of`] walks it.
pub(super) struct Slot<'a> {
    pub(super) id: StreamId,
    pub(super) fields: Fields<'a>,
    pub(super) deleted: bool,
    /// Where its header varint starts in the node's run.
    pub(super) header_at: usize,
}

/// The entries of the node at `master`, deleted ones included, in order.
pub(super) fn entries_of(master: StreamId, data: &[u8]) -> impl Iterator<Item = Slot<'_>> {
    let mut at = 0;
    let mut names: Option<&[u8]> = None;
    std::iter::from_fn(move || {
        if at >= data.len() {
            return None;
        }
        let (ms, used) = read_varint(&data[at..])?;
        at += used;
        let (seq, used) = read_varint(&data[at..])?;
        at += used;
        let header_at = at;
        let (header, used) = read_varint(&data[at..])?;
        at += used;
        let len = header >> 2;
        let packed = data.get(at..at + len)?;
        at += len;
        let fields = if header & 2 != 0 {
            Fields { packed, names }
        } else {
            Fields {
                packed,
                names: None,
            }
        };
        if names.is_none() {
            // The first entry's names, for the entries that share them.
            names = Some(packed);
        }
        Some(Slot {
            id: StreamId::new(master.ms + ms as u64, seq as u64),
            fields,
            deleted: header & 1 != 0,
            header_at,
        })
    })
}

/// The live entries of a node within `from..=to`.
pub(super) fn live_in(
    master: StreamId,
    data: &[u8],
    from: StreamId,
    to: StreamId,
) -> impl Iterator<Item = (StreamId, Fields<'_>)> {
    entries_of(master, data)
        .take_while(move |slot| slot.id <= to)
        .filter(move |slot| !slot.deleted && slot.id >= from)
        .map(|slot| (slot.id, slot.fields))
}

/// An entry's field-value pairs, packed: a varint count of fields and
/// values, then each as a varint length and its bytes; or, for an entry
/// with its node's first entry's names (`names`, that entry's packed
/// pairs), the count and its values only.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    pub(super) packed: &'a [u8],
    pub(super) names: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    /// Fields and values, alternating.
    pub fn iter(self) -> impl Iterator<Item = &'a [u8]> {
        let items = |bytes: &'a [u8]| {
            let (count, used) = read_varint(bytes).unwrap_or((0, 0));
            let mut at = used;
            (0..count).map_while(move |_| read_bytes(bytes, &mut at))
        };
        let own = items(self.packed);
        let names = self.names.map(|names| items(names).step_by(2));
        let mut pairs = names.into_iter().flatten().zip(own.clone());
        let mut pending = None;
        let mut own = Some(own);
        std::iter::from_fn(move || {
            if self.names.is_none() {
                return own.as_mut()?.next();
            }
            if let Some(value) = pending.take() {
                return Some(value);
            }
            let (name, value) = pairs.next()?;
            pending = Some(value);
            Some(name)
        })
    }

    /// How many fields and values (twice the pairs).
    pub fn len(self) -> usize {
        read_varint(self.packed).map_or(0, |(n, _)| n)
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Whether `fields` (names and values alternating) has these names,
    /// in this order.
    pub(super) fn has_names(self, fields: &[&[u8]]) -> bool {
        self.names.is_none()
            && self.len() == fields.len()
            && (self.iter().step_by(2)).eq(fields.iter().step_by(2).copied())
    }

    /// The pairs in their full packed form (names and values).
    pub(super) fn to_packed(self) -> Vec<u8> {
        if self.names.is_none() {
            return self.packed.to_vec();
        }
        let mut out = Vec::with_capacity(self.packed.len() * 2);
        write_varint(&mut out, self.len());
        for item in self.iter() {
            write_varint(&mut out, item.len());
            out.extend_from_slice(item);
        }
        out
    }
}

/// A node of Redis' stream layout: a run of entries Redis keeps in one
/// listpack. Strata keeps the entries in one map, but tracks where Redis'
/// nodes would begin and end, because approximate trimming (`MAXLEN ~`,
/// `MINID ~`) removes whole nodes only and XINFO reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Node {
    /// Entries the node was given, deleted ones included.
    pub total: u64,
    /// Entries still in it.
    pub live: u64,
    /// Its last entry's ID (deleted or not).
    pub last: StreamId,
    /// Bytes its entries take, roughly as a listpack holds them.
    pub bytes: u64,
}
