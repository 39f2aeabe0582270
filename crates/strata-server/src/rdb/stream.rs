//! Streams in DUMP payloads, as Redis lays them out (`RDB_TYPE_STREAM_*`).
//!
//! The entries travel as listpack nodes keyed by a *master ID* (16 bytes,
//! big-endian milliseconds then sequence). A node's listpack starts with
//! a master entry — live count, deleted count, the master fields, a 0 —
//! and then holds each entry as flags (1: deleted, 2: same fields as the
//! master), its ID as differences from the master ID, its fields (a count
//! and field-value pairs, or only the values when the fields are the
//! master's), and the number of elements it took. After the nodes: the
//! length, the last ID, and from type 19 on the first ID, the largest
//! deleted ID and the entries ever added; then each consumer group (name,
//! last ID, from 19 on its entries-read counter, its pending entries with
//! delivery time and count) and its consumers (name, seen time, from type
//! 21 on the active time, and the IDs pending with it).
//!
//! Strata writes type 19 (Redis 7.0's, RDB 10, which every Redis 7 reads)
//! with nodes of up to 100 entries, and reads 15, 19 and 21.

use strata_engine::Value;
use strata_engine::types::stream::{Group, StreamId, StreamValue};

use super::encoding::{Malformed, Reader, write_len, write_string};
use super::listpack;

pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;

/// Entries per node (Redis' `stream-node-max-entries` default).
const NODE_ENTRIES: usize = 100;
const FLAG_DELETED: u64 = 1;
const FLAG_SAME_FIELDS: u64 = 2;

/// Writes `stream` as a type 19 body (after its type byte).
pub fn write(out: &mut Vec<u8>, stream: &StreamValue) {
    let ids: Vec<StreamId> = stream
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|(id, _)| id)
        .collect();
    let nodes: Vec<&[StreamId]> = ids.chunks(NODE_ENTRIES).collect();
    write_len(out, nodes.len() as u64);
    for node in nodes {
        let master = node[0];
        write_string(out, &raw_id(master));
        write_string(out, &node_listpack(stream, master, node));
    }
    write_len(out, stream.len() as u64);
    write_id(out, stream.last_id);
    write_id(out, stream.first_id().unwrap_or_default());
    write_id(out, stream.max_deleted);
    write_len(out, stream.entries_added);
    write_len(out, stream.groups.len() as u64);
    for (name, group) in &stream.groups {
        write_string(out, name);
        write_id(out, group.last_id);
        // Redis writes -1 ("unknown") as a 64-bit length.
        write_len(out, group.entries_read.unwrap_or(u64::MAX));
        write_len(out, group.pending.len() as u64);
        for (id, pending) in &group.pending {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&pending.delivered_ms.to_le_bytes());
            write_len(out, pending.deliveries);
        }
        write_len(out, group.consumers.len() as u64);
        for (name, consumer) in &group.consumers {
            write_string(out, name);
            out.extend_from_slice(&consumer.seen_ms.to_le_bytes());
            write_len(out, consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}

fn node_listpack(stream: &StreamValue, master: StreamId, ids: &[StreamId]) -> Vec<u8> {
    let fields_of = |id: StreamId| -> Vec<&[u8]> {
        stream
            .get(id)
            .map(|f| f.iter().collect())
            .unwrap_or_default()
    };
    let master_pairs = fields_of(master);
    let master_fields: Vec<&[u8]> = master_pairs.iter().step_by(2).copied().collect();
    let mut numbers: Vec<Vec<u8>> = Vec::new();
    let mut plan: Vec<Element> = Vec::new();
    // Numbers are int64 in Redis' listpacks (a difference may be negative).
    let mut number = |n: i64, plan: &mut Vec<Element>| {
        numbers.push(n.to_string().into_bytes());
        plan.push(Element::Number(numbers.len() - 1));
    };
    number(ids.len() as i64, &mut plan);
    number(0, &mut plan);
    number(master_fields.len() as i64, &mut plan);
    plan.extend(master_fields.iter().map(|f| Element::Bytes(f)));
    number(0, &mut plan);
    let mut entry_pairs = Vec::with_capacity(ids.len());
    for &id in ids {
        entry_pairs.push((id, fields_of(id)));
    }
    for (id, pairs) in &entry_pairs {
        let fields: Vec<&[u8]> = pairs.iter().step_by(2).copied().collect();
        let same = fields == master_fields;
        number(if same { FLAG_SAME_FIELDS } else { 0 } as i64, &mut plan);
        number(id.ms.wrapping_sub(master.ms) as i64, &mut plan);
        // A sequence below the master's (a later millisecond) is a negative
        // difference, as Redis' subtraction stored in an int64 gives.
        number(id.seq.wrapping_sub(master.seq) as i64, &mut plan);
        if same {
            plan.extend(pairs.iter().skip(1).step_by(2).map(|v| Element::Bytes(v)));
        } else {
            number(fields.len() as i64, &mut plan);
            plan.extend(pairs.iter().map(|v| Element::Bytes(v)));
        }
        let taken = 3 + if same { fields.len() } else { 1 + pairs.len() };
        number(taken as i64, &mut plan);
    }
    let elements: Vec<&[u8]> = plan
        .iter()
        .map(|e| match e {
            Element::Number(i) => &numbers[*i][..],
            Element::Bytes(b) => *b,
        })
        .collect();
    listpack::encode(&elements)
}

enum Element<'a> {
    Number(usize),
    Bytes(&'a [u8]),
}

fn raw_id(id: StreamId) -> [u8; 16] {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&id.ms.to_be_bytes());
    raw[8..].copy_from_slice(&id.seq.to_be_bytes());
    raw
}

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// Reads a stream body of type `kind` (15, 19 or 21).
pub fn read(reader: &mut Reader, kind: u8) -> Result<Value<'static>, Malformed> {
    let mut stream = StreamValue::new();
    let nodes = reader.len()?;
    for _ in 0..nodes {
        let master = parse_raw_id(&reader.string()?)?;
        read_node(&mut stream, master, &listpack::elements(&reader.string()?)?)?;
    }
    let length = reader.len()?;
    if length != stream.len() as u64 {
        return Err(Malformed);
    }
    stream.last_id = read_id(reader)?;
    if kind >= TYPE_STREAM_LISTPACKS_2 {
        let _first = read_id(reader)?;
        stream.max_deleted = read_id(reader)?;
        stream.entries_added = reader.len()?;
    } else {
        stream.entries_added = length;
    }
    for _ in 0..reader.len()? {
        let name = reader.string()?;
        let mut group = Group {
            last_id: read_id(reader)?,
            ..Group::default()
        };
        if kind >= TYPE_STREAM_LISTPACKS_2 {
            let read = reader.len()?;
            group.entries_read = (read as i64 >= 0).then_some(read);
        } else {
            group.entries_read = stream.entries_up_to(group.last_id);
        }
        read_group(reader, kind, &mut group)?;
        if stream.groups.insert(name, group).is_some() {
            return Err(Malformed);
        }
    }
    Ok(Value::Stream(stream.image().into()))
}

fn read_group(reader: &mut Reader, kind: u8, group: &mut Group) -> Result<(), Malformed> {
    let mut pel = std::collections::BTreeMap::new();
    for _ in 0..reader.len()? {
        let id = parse_raw_id(reader.take(16)?)?;
        let delivered = reader.u64_le()?;
        pel.insert(id, (delivered, reader.len()?));
    }
    for _ in 0..reader.len()? {
        let name = reader.string()?;
        let seen = reader.u64_le()?;
        // Before type 21 there is no active time: Redis takes the seen
        // time for it.
        let active = if kind >= TYPE_STREAM_LISTPACKS_3 {
            Some(reader.u64_le()?).filter(|&t| t as i64 >= 0)
        } else {
            Some(seen)
        };
        group.restore_consumer(&name, seen, active);
        for _ in 0..reader.len()? {
            let id = parse_raw_id(reader.take(16)?)?;
            // Every ID a consumer has must be in the group's list, once.
            let (delivered, count) = pel.remove(&id).ok_or(Malformed)?;
            group.restore_pending(id, &name, delivered, count);
        }
    }
    if pel.is_empty() {
        Ok(())
    } else {
        Err(Malformed)
    }
}

/// The entries of one node into `stream`.
fn read_node(stream: &mut StreamValue, master: StreamId, e: &[Vec<u8>]) -> Result<(), Malformed> {
    let mut at = 0;
    let number = |bytes: &[u8]| -> Result<u64, Malformed> {
        let n = strata_engine::types::value::parse_canonical_i64(bytes).ok_or(Malformed)?;
        Ok(n as u64)
    };
    let _live = number(take(e, &mut at)?)?;
    let _deleted = number(take(e, &mut at)?)?;
    let field_count = number(take(e, &mut at)?)? as usize;
    let mut master_fields = Vec::with_capacity(field_count.min(e.len()));
    for _ in 0..field_count {
        master_fields.push(take(e, &mut at)?.to_vec());
    }
    if number(take(e, &mut at)?)? != 0 {
        return Err(Malformed);
    }
    let mut new_node = true;
    while at < e.len() {
        let flags = number(take(e, &mut at)?)?;
        let ms = master
            .ms
            .checked_add(number(take(e, &mut at)?)?)
            .ok_or(Malformed)?;
        let seq = master.seq.wrapping_add(number(take(e, &mut at)?)?);
        let mut pairs: Vec<Vec<u8>> = Vec::new();
        if flags & FLAG_SAME_FIELDS != 0 {
            for field in &master_fields {
                pairs.push(field.clone());
                pairs.push(take(e, &mut at)?.to_vec());
            }
        } else {
            let count = number(take(e, &mut at)?)? as usize;
            for _ in 0..count.min(e.len()) * 2 {
                pairs.push(take(e, &mut at)?.to_vec());
            }
        }
        let _taken = take(e, &mut at)?;
        if flags & FLAG_DELETED == 0 {
            let id = StreamId::new(ms, seq);
            // Entries come in ID order, each once.
            if stream.last().is_some_and(|(last, _)| last >= id) {
                return Err(Malformed);
            }
            let fields: Vec<&[u8]> = pairs.iter().map(|p| &p[..]).collect();
            stream.restore_entry(id, &fields, new_node);
            new_node = false;
        }
    }
    Ok(())
}

fn take<'a>(elements: &'a [Vec<u8>], at: &mut usize) -> Result<&'a [u8], Malformed> {
    let element = elements.get(*at).ok_or(Malformed)?;
    *at += 1;
    Ok(element)
}

fn parse_raw_id(raw: &[u8]) -> Result<StreamId, Malformed> {
    if raw.len() != 16 {
        return Err(Malformed);
    }
    let ms = u64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
    let seq = u64::from_be_bytes(raw[8..].try_into().expect("8 bytes"));
    Ok(StreamId::new(ms, seq))
}

fn read_id(reader: &mut Reader) -> Result<StreamId, Malformed> {
    Ok(StreamId::new(reader.len()?, reader.len()?))
}
