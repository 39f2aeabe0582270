//! A key's value as DUMP writes it and RESTORE reads it: one RDB object
//! (a type byte, then the type's body) followed by the payload footer
//! (see the parent module).
//!
//! Strata writes the plainest layouts Redis 7.0 reads, so its payloads
//! restore into Redis 7.0 and later: a string; a list, set or hash as a
//! count and its strings; a sorted set as a count and member / binary
//! score pairs. A hash with field deadlines has no Redis 7.0 layout: it
//! is written as Redis 7.4 writes one (`HASH_METADATA`, RDB version 12),
//! which Redis before 7.4 refuses as too new rather than restoring
//! without its deadlines.
//!
//! RESTORE reads every layout Redis 6 to 7.4 writes for the types Strata
//! has: the plain ones above, ziplists, intsets, listpacks, quicklists
//! and the 7.4 hash layouts with field deadlines. Streams and module
//! values are refused (Strata has neither); so is anything damaged,
//! empty, or with a member twice (Redis refuses those too).

use std::collections::HashSet;

use strata_engine::types::hash::{self, Field};
use strata_engine::{Value, ValueRef, types::list, types::set, types::zset};

use super::encoding::{self, Malformed, Reader, write_len, write_string};
use super::{intset, listpack, ziplist};

const TYPE_STRING: u8 = 0;
const TYPE_LIST: u8 = 1;
const TYPE_SET: u8 = 2;
const TYPE_ZSET: u8 = 3;
const TYPE_HASH: u8 = 4;
const TYPE_ZSET_2: u8 = 5;
const TYPE_LIST_ZIPLIST: u8 = 10;
const TYPE_SET_INTSET: u8 = 11;
const TYPE_ZSET_ZIPLIST: u8 = 12;
const TYPE_HASH_ZIPLIST: u8 = 13;
const TYPE_LIST_QUICKLIST: u8 = 14;
const TYPE_HASH_LISTPACK: u8 = 16;
const TYPE_ZSET_LISTPACK: u8 = 17;
const TYPE_LIST_QUICKLIST_2: u8 = 18;
const TYPE_SET_LISTPACK: u8 = 20;
const TYPE_HASH_METADATA: u8 = 24;
const TYPE_HASH_LISTPACK_EX: u8 = 25;

/// Quicklist 2 node containers: one element stored as is, or a listpack.
const QUICKLIST_NODE_PLAIN: u64 = 1;
const QUICKLIST_NODE_PACKED: u64 = 2;

/// The RDB version of payloads with field deadlines (Redis 7.4's).
const VERSION_HASH_METADATA: u16 = 12;

/// The DUMP payload of `value` (fields already expired at `now_ms` left
/// out).
pub fn dump(value: ValueRef, now_ms: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut version = encoding::RDB_VERSION;
    match value {
        ValueRef::Str { bytes, .. } => {
            out.push(TYPE_STRING);
            write_string(&mut out, bytes);
        }
        ValueRef::List(list) => {
            out.push(TYPE_LIST);
            write_len(&mut out, list.len() as u64);
            for element in list.iter() {
                write_string(&mut out, element);
            }
        }
        ValueRef::Set(set) => {
            out.push(TYPE_SET);
            write_len(&mut out, set.len() as u64);
            set.for_each(|member| write_string(&mut out, member));
        }
        ValueRef::ZSet(zset) => {
            out.push(TYPE_ZSET_2);
            write_len(&mut out, zset.len() as u64);
            zset.for_each(|score, member| {
                write_string(&mut out, member);
                out.extend_from_slice(&score.to_le_bytes());
            });
        }
        ValueRef::Stream(stream) => {
            out.push(super::stream::TYPE_STREAM_LISTPACKS_2);
            super::stream::write(&mut out, stream);
        }
        ValueRef::Hash(hash) => {
            let fields: Vec<Field> = hash.fields().filter(|f| f.is_live(now_ms)).collect();
            let first_deadline = fields.iter().filter_map(|f| f.deadline).min();
            match first_deadline {
                None => out.push(TYPE_HASH),
                Some(first) => {
                    version = VERSION_HASH_METADATA;
                    out.push(TYPE_HASH_METADATA);
                    out.extend_from_slice(&first.to_le_bytes());
                }
            }
            write_len(&mut out, fields.len() as u64);
            for field in &fields {
                if let Some(first) = first_deadline {
                    // 0: no deadline; otherwise relative to the first, plus 1.
                    write_len(&mut out, field.deadline.map_or(0, |at| at - first + 1));
                }
                write_string(&mut out, field.name);
                write_string(&mut out, field.value);
            }
        }
    }
    encoding::seal_version(&mut out, version);
    out
}

/// The value in a payload's body (checked by [`super::verify`]).
pub fn restore(body: &[u8]) -> Result<Value<'static>, Malformed> {
    let mut reader = Reader::new(body);
    let value = read(&mut reader)?;
    if !reader.is_empty() {
        return Err(Malformed);
    }
    Ok(value)
}

/// The object at the reader: its type byte, then the type's body (as in
/// a payload's body, or after a key in an RDB file).
pub fn read(reader: &mut Reader) -> Result<Value<'static>, Malformed> {
    let kind = reader.byte()?;
    read_typed(reader, kind)
}

/// The body of an object of type `kind` at the reader.
pub fn read_typed(reader: &mut Reader, kind: u8) -> Result<Value<'static>, Malformed> {
    let value = match kind {
        TYPE_STRING => {
            let bytes = reader.string()?;
            match strata_engine::types::value::parse_canonical_i64(&bytes) {
                Some(n) => Value::Int(n),
                None => Value::owned(bytes),
            }
        }
        TYPE_LIST => list_value(strings(reader)?)?,
        TYPE_LIST_ZIPLIST => list_value(ziplist::entries(&reader.string()?)?)?,
        TYPE_LIST_QUICKLIST => {
            let mut elements = Vec::new();
            for _ in 0..reader.len()? {
                elements.extend(ziplist::entries(&reader.string()?)?);
            }
            list_value(elements)?
        }
        TYPE_LIST_QUICKLIST_2 => list_value(quicklist_2(reader)?)?,
        TYPE_SET => set_value(strings(reader)?)?,
        TYPE_SET_INTSET => set_value(intset::members(&reader.string()?)?)?,
        TYPE_SET_LISTPACK => set_value(listpack::elements(&reader.string()?)?)?,
        TYPE_ZSET | TYPE_ZSET_2 => {
            let count = reader.len()?;
            let mut entries = Vec::with_capacity(capacity(count, reader));
            for _ in 0..count {
                let member = reader.string()?;
                let score = if kind == TYPE_ZSET {
                    text_score(reader)?
                } else {
                    f64::from_le_bytes(reader.take(8)?.try_into().expect("8 bytes"))
                };
                entries.push((score, member));
            }
            zset_value(entries)?
        }
        TYPE_ZSET_ZIPLIST => zset_value(scored(ziplist::entries(&reader.string()?)?)?)?,
        TYPE_ZSET_LISTPACK => zset_value(scored(listpack::elements(&reader.string()?)?)?)?,
        TYPE_HASH => {
            let count = reader.len()?;
            let mut fields = Vec::with_capacity(capacity(count, reader));
            for _ in 0..count {
                fields.push((reader.string()?, reader.string()?, None));
            }
            hash_value(fields)?
        }
        TYPE_HASH_METADATA => hash_value(hash_metadata(reader)?)?,
        TYPE_HASH_ZIPLIST => hash_value(pairs(ziplist::entries(&reader.string()?)?)?)?,
        TYPE_HASH_LISTPACK => hash_value(pairs(listpack::elements(&reader.string()?)?)?)?,
        TYPE_HASH_LISTPACK_EX => hash_value(hash_listpack_ex(reader)?)?,
        kind @ (super::stream::TYPE_STREAM_LISTPACKS
        | super::stream::TYPE_STREAM_LISTPACKS_2
        | super::stream::TYPE_STREAM_LISTPACKS_3) => super::stream::read(reader, kind)?,
        _ => return Err(Malformed),
    };
    Ok(value)
}

/// A quicklist (RDB 11) of plain and listpack nodes: its elements.
fn quicklist_2(reader: &mut Reader) -> Result<Vec<Vec<u8>>, Malformed> {
    let mut elements = Vec::new();
    for _ in 0..reader.len()? {
        match reader.len()? {
            QUICKLIST_NODE_PLAIN => elements.push(reader.string()?),
            QUICKLIST_NODE_PACKED => {
                let node = listpack::elements(&reader.string()?)?;
                if node.is_empty() {
                    return Err(Malformed);
                }
                elements.extend(node);
            }
            _ => return Err(Malformed),
        }
    }
    Ok(elements)
}

/// A hash's field, value and deadline (ms), as payloads carry them.
type HashField = (Vec<u8>, Vec<u8>, Option<u64>);

/// A hash with field deadlines (Redis 7.4): the first deadline, then each
/// field's relative to it (0: none).
fn hash_metadata(reader: &mut Reader) -> Result<Vec<HashField>, Malformed> {
    let first = reader.u64_le()?;
    let count = reader.len()?;
    let mut fields = Vec::with_capacity(capacity(count, reader));
    for _ in 0..count {
        let deadline = match reader.len()? {
            0 => None,
            relative => Some((relative - 1).checked_add(first).ok_or(Malformed)?),
        };
        fields.push((reader.string()?, reader.string()?, deadline));
    }
    Ok(fields)
}

/// A listpack of field, value, deadline triples (Redis 7.4).
fn hash_listpack_ex(reader: &mut Reader) -> Result<Vec<HashField>, Malformed> {
    reader.u64_le()?; // the first deadline, which the triples repeat
    let elements = listpack::elements(&reader.string()?)?;
    if !elements.len().is_multiple_of(3) {
        return Err(Malformed);
    }
    let mut fields = Vec::with_capacity(elements.len() / 3);
    let mut elements = elements.into_iter();
    while let (Some(name), Some(value), Some(ttl)) =
        (elements.next(), elements.next(), elements.next())
    {
        let deadline = std::str::from_utf8(&ttl)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or(Malformed)?;
        fields.push((name, value, (deadline != 0).then_some(deadline)));
    }
    Ok(fields)
}

/// Room to reserve for `count` items: never more than the bytes left
/// could hold, whatever a damaged count claims.
fn capacity(count: u64, reader: &Reader) -> usize {
    (count as usize).min(reader.remaining())
}

/// A count, then that many strings.
fn strings(reader: &mut Reader) -> Result<Vec<Vec<u8>>, Malformed> {
    let count = reader.len()?;
    let mut out = Vec::with_capacity(capacity(count, reader));
    for _ in 0..count {
        out.push(reader.string()?);
    }
    Ok(out)
}

/// A score in the old text layout: a length byte (253 NaN, 254 +inf,
/// 255 -inf) then that many characters.
fn text_score(reader: &mut Reader) -> Result<f64, Malformed> {
    match reader.byte()? {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        len => parse_score(reader.take(len as usize)?),
    }
}

fn parse_score(text: &[u8]) -> Result<f64, Malformed> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or(Malformed)
}

/// Member, score, member, score… as (score, member) pairs.
fn scored(elements: Vec<Vec<u8>>) -> Result<Vec<(f64, Vec<u8>)>, Malformed> {
    if !elements.len().is_multiple_of(2) {
        return Err(Malformed);
    }
    let mut out = Vec::with_capacity(elements.len() / 2);
    let mut elements = elements.into_iter();
    while let (Some(member), Some(score)) = (elements.next(), elements.next()) {
        out.push((parse_score(&score)?, member));
    }
    Ok(out)
}

/// Field, value, field, value… as fields without deadlines.
type RawField = (Vec<u8>, Vec<u8>, Option<u64>);

fn pairs(elements: Vec<Vec<u8>>) -> Result<Vec<RawField>, Malformed> {
    if !elements.len().is_multiple_of(2) {
        return Err(Malformed);
    }
    let mut out = Vec::with_capacity(elements.len() / 2);
    let mut elements = elements.into_iter();
    while let (Some(name), Some(value)) = (elements.next(), elements.next()) {
        out.push((name, value, None));
    }
    Ok(out)
}

/// Refuses an empty collection or one with an item twice.
fn distinct<'a>(items: impl ExactSizeIterator<Item = &'a [u8]>) -> Result<(), Malformed> {
    if items.len() == 0 {
        return Err(Malformed);
    }
    let mut seen = HashSet::new();
    for item in items {
        if !seen.insert(item) {
            return Err(Malformed);
        }
    }
    Ok(())
}

fn list_value(elements: Vec<Vec<u8>>) -> Result<Value<'static>, Malformed> {
    if elements.is_empty() {
        return Err(Malformed);
    }
    Ok(Value::List(
        list::image_of(elements.iter().map(Vec::as_slice)).into(),
    ))
}

fn set_value(members: Vec<Vec<u8>>) -> Result<Value<'static>, Malformed> {
    distinct(members.iter().map(Vec::as_slice))?;
    Ok(Value::Set(
        set::image_of(members.iter().map(Vec::as_slice)).into(),
    ))
}

fn zset_value(entries: Vec<(f64, Vec<u8>)>) -> Result<Value<'static>, Malformed> {
    distinct(entries.iter().map(|(_, member)| member.as_slice()))?;
    if entries.iter().any(|(score, _)| score.is_nan()) {
        return Err(Malformed);
    }
    Ok(Value::ZSet(
        zset::image_of(
            entries
                .iter()
                .map(|(score, member)| (*score, member.as_slice())),
        )
        .into(),
    ))
}

fn hash_value(fields: Vec<RawField>) -> Result<Value<'static>, Malformed> {
    distinct(fields.iter().map(|(name, _, _)| name.as_slice()))?;
    let fields: Vec<Field> = fields
        .iter()
        .map(|(name, value, deadline)| Field {
            name,
            value,
            deadline: *deadline,
        })
        .collect();
    Ok(Value::Hash(hash::image_of(&fields).into()))
}

#[cfg(test)]
mod tests {
    use super::super::encoding::{seal, verify};
    use super::super::listpack::tests::listpack_of;
    use super::*;
    use strata_engine::ValueType;

    fn sealed(body: Vec<u8>) -> Vec<u8> {
        let mut payload = body;
        seal(&mut payload);
        payload
    }

    fn restored(payload: &[u8]) -> Result<Value<'static>, Malformed> {
        restore(verify(payload).ok_or(Malformed)?)
    }

    /// Every image a restore makes is one the engine accepts.
    fn checked(value: &Value) {
        let (kind, image) = match value {
            Value::Hash(i) => (ValueType::Hash, i),
            Value::List(i) => (ValueType::List, i),
            Value::Set(i) => (ValueType::Set, i),
            Value::ZSet(i) => (ValueType::ZSet, i),
            _ => return,
        };
        kind.checked_image(image)
            .expect("collection")
            .expect("valid");
    }

    #[test]
    fn listpack_layouts_restore() {
        let mut hash = vec![TYPE_HASH_LISTPACK];
        write_string(&mut hash, &listpack_of(&[b"f1", b"v1", b"f2", b"42"]));
        let value = restored(&sealed(hash)).unwrap();
        checked(&value);
        let Value::Hash(image) = &value else { panic!() };
        let expected = hash::image_of(&[
            Field {
                name: b"f1",
                value: b"v1",
                deadline: None,
            },
            Field {
                name: b"f2",
                value: b"42",
                deadline: None,
            },
        ]);
        assert_eq!(image.as_ref(), expected.as_slice());

        let mut zset = vec![TYPE_ZSET_LISTPACK];
        write_string(&mut zset, &listpack_of(&[b"a", b"1", b"b", b"2.5"]));
        let value = restored(&sealed(zset)).unwrap();
        checked(&value);
        assert_eq!(
            value,
            Value::ZSet(zset::image_of([(1.0, &b"a"[..]), (2.5, b"b")]).into())
        );

        let mut list = vec![TYPE_LIST_QUICKLIST_2];
        write_len(&mut list, 2);
        write_len(&mut list, QUICKLIST_NODE_PACKED);
        write_string(&mut list, &listpack_of(&[b"x", b"-7"]));
        write_len(&mut list, QUICKLIST_NODE_PLAIN);
        write_string(&mut list, b"big");
        let value = restored(&sealed(list)).unwrap();
        checked(&value);
        assert_eq!(
            value,
            Value::List(list::image_of([&b"x"[..], b"-7", b"big"].into_iter()).into())
        );
    }

    #[test]
    fn damaged_empty_and_duplicate_payloads_are_refused() {
        let mut dup = vec![TYPE_SET];
        write_len(&mut dup, 2);
        write_string(&mut dup, b"m");
        write_string(&mut dup, b"m");
        assert_eq!(restored(&sealed(dup)), Err(Malformed));
        let mut empty = vec![TYPE_LIST];
        write_len(&mut empty, 0);
        assert_eq!(restored(&sealed(empty)), Err(Malformed));
        let mut trailing = vec![TYPE_STRING];
        write_string(&mut trailing, b"v");
        trailing.push(0);
        assert_eq!(restored(&sealed(trailing)), Err(Malformed));
        let mut huge = vec![TYPE_SET];
        write_len(&mut huge, u32::MAX as u64);
        assert_eq!(restored(&sealed(huge)), Err(Malformed));
        assert_eq!(restored(&sealed(vec![15, 0])), Err(Malformed), "a stream");
    }

    #[test]
    fn field_deadlines_travel_in_the_7_4_layout() {
        let fields = [
            Field {
                name: b"a",
                value: b"1",
                deadline: Some(5_000),
            },
            Field {
                name: b"b",
                value: b"2",
                deadline: None,
            },
            Field {
                name: b"c",
                value: b"3",
                deadline: Some(9_000),
            },
        ];
        let image = hash::image_of(&fields);
        let mut value = hash::HashValue::new();
        for field in fields {
            value.put(field, hash::Limits::NEVER_CONVERT);
        }
        let hash = value.as_ref();
        let payload = dump(ValueRef::Hash(hash), 1_000);
        assert_eq!(payload[0], TYPE_HASH_METADATA);
        assert_eq!(
            u16::from_le_bytes([payload[payload.len() - 10], payload[payload.len() - 9]]),
            VERSION_HASH_METADATA
        );
        assert_eq!(
            restored(&payload).unwrap(),
            Value::Hash(image.clone().into())
        );
        // Fields past their deadline are left out.
        let later = dump(ValueRef::Hash(hash), 6_000);
        let Value::Hash(left) = restored(&later).unwrap() else {
            panic!()
        };
        assert_eq!(left.as_ref(), hash::image_of(&fields[1..]).as_slice());
    }
}
