//! The stream type's unit tests.
use super::*;

/// Entries packed per node: the names of a node's first entry are
/// shared by the entries that have them, a deleted entry is marked in
/// place, a node keeps its first ID after that entry goes (also
/// through an image), and a node goes with its last live entry.
#[test]
fn nodes_pack_their_entries() {
    let mut stream = StreamValue::new();
    let add = |stream: &mut StreamValue, ms: u64, fields: &[&[u8]]| {
        let new_node = stream.starts_node(8, 3, 0);
        let id = StreamId::new(ms, 0);
        StreamOp::Add {
            id,
            fields: fields.to_vec(),
            new_node,
        }
        .apply(stream);
    };
    add(&mut stream, 1, &[b"name", b"a"]);
    add(&mut stream, 2, &[b"name", b"b"]);
    add(&mut stream, 3, &[b"other", b"c", b"x", b"y"]);
    add(&mut stream, 4, &[b"name", b"d"]);
    let all = |s: &StreamValue| -> Vec<(u64, Vec<Vec<u8>>)> {
        (s.range(StreamId::MIN, StreamId::MAX, false))
            .map(|(id, f)| (id.ms, f.iter().map(<[u8]>::to_vec).collect()))
            .collect()
    };
    let v = |items: &[&str]| {
        items
            .iter()
            .map(|i| i.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        all(&stream),
        vec![
            (1, v(&["name", "a"])),
            (2, v(&["name", "b"])),
            (3, v(&["other", "c", "x", "y"])),
            (4, v(&["name", "d"])),
        ]
    );
    assert_eq!(stream.nodes().count(), 2);
    // The first entry of the first node goes; the node stays under 1-0.
    StreamOp::Delete(vec![StreamId::new(1, 0)]).apply(&mut stream);
    assert_eq!(stream.nodes().next().unwrap().0, StreamId::new(1, 0));
    assert_eq!(stream.get(StreamId::new(2, 0)).unwrap().iter().count(), 2);
    assert!(stream.get(StreamId::new(1, 0)).is_none());
    let image = stream.image();
    let back = StreamValue::decode_image(&image).unwrap();
    assert_eq!(back, stream);
    assert_eq!(back.nodes().next().unwrap().0, StreamId::new(1, 0));
    // Reversed ranges cross nodes backwards.
    let rev: Vec<u64> = (back.range(StreamId::MIN, StreamId::MAX, true))
        .map(|(id, _)| id.ms)
        .collect();
    assert_eq!(rev, [4, 3, 2]);
    // A loaded stream's last node takes more entries.
    let mut back = back;
    let (id, fields) = (StreamId::new(5, 0), vec![&b"name"[..], b"e"]);
    StreamOp::Add {
        id,
        fields,
        new_node: false,
    }
    .apply(&mut back);
    assert_eq!(back.nodes().count(), 2);
    assert_eq!(
        back.last().unwrap().1.iter().collect::<Vec<_>>(),
        [&b"name"[..], &b"e"[..]]
    );
    // The node's last live entries go: the node with them.
    StreamOp::Delete(vec![StreamId::new(2, 0), StreamId::new(3, 0)]).apply(&mut stream);
    assert_eq!(stream.nodes().count(), 1);
    assert_eq!(stream.first_id(), Some(StreamId::new(4, 0)));
    assert_eq!(stream.len(), 1);
}

fn added(stream: &mut StreamValue, ms: u64, seq: u64) {
    let fields: Vec<&[u8]> = vec![b"f", b"v"];
    let id = StreamId::new(ms, seq);
    let new_node = stream.starts_node(4, 2, 0);
    StreamOp::Add {
        id,
        fields,
        new_node,
    }
    .apply(stream);
}

#[test]
fn operations_round_trip_through_their_records_and_images() {
    let mut stream = StreamValue::new();
    let ops = [
        StreamOp::Add {
            id: StreamId::new(1, 0),
            fields: vec![b"a", b"1", b"b", b""],
            new_node: true,
        },
        StreamOp::Add {
            id: StreamId::new(2, 5),
            fields: vec![b"a", b"2"],
            new_node: false,
        },
        StreamOp::CreateGroup {
            group: b"g",
            last_id: StreamId::MIN,
            entries_read: None,
        },
        StreamOp::Deliver {
            group: b"g",
            consumer: b"alice",
            now_ms: 100,
            ids: vec![StreamId::new(1, 0), StreamId::new(2, 5)],
            history: false,
            noack: false,
            entries_read: Some(7),
        },
        StreamOp::Claim {
            group: b"g",
            consumer: b"bob",
            now_ms: 200,
            claims: vec![(StreamId::new(2, 5), 200, 3)],
            active: true,
        },
        StreamOp::Ack {
            group: b"g",
            ids: vec![StreamId::new(1, 0)],
        },
        StreamOp::Delete(vec![StreamId::new(1, 0)]),
        StreamOp::TrimEntries(vec![StreamId::new(2, 5)]),
        StreamOp::SetId {
            last_id: StreamId::new(9, 9),
            entries_added: Some(7),
            max_deleted: None,
        },
    ];
    for op in &ops {
        let mut payload = Vec::new();
        op.encode(&mut payload);
        assert_eq!(&StreamOp::decode(&payload).unwrap(), op);
        op.apply(&mut stream);
    }
    let image = stream.image();
    assert_eq!(StreamValue::decode_image(&image).unwrap(), stream);
    let group = &stream.groups[&b"g"[..]];
    assert_eq!(group.last_id, StreamId::new(2, 5));
    assert_eq!(group.entries_read, Some(2));
    assert_eq!(group.pending.len(), 1);
    assert_eq!(group.pending[&StreamId::new(2, 5)].consumer, b"bob");
    assert!(group.consumers[&b"alice"[..]].pending.is_empty());
    // Trimming 2-5 emptied the stream and, unlike XDEL, left the
    // largest deleted ID where it was.
    assert_eq!(stream.len(), 0);
    assert_eq!(stream.max_deleted, StreamId::new(1, 0));
    assert_eq!(stream.entries_added, 7);
    assert!(StreamValue::decode_image(&image[..image.len() - 1]).is_err());
}

#[test]
fn lag_follows_redis_rules() {
    let mut stream = StreamValue::new();
    for ms in 1..=5 {
        added(&mut stream, ms, 0);
    }
    let group = Group::default();
    assert_eq!(stream.lag(&group), Some(5));
    assert_eq!(stream.entries_up_to(StreamId::new(5, 0)), Some(5));
    assert_eq!(stream.entries_up_to(StreamId::new(1, 0)), Some(1));
    // A deletion in the middle makes the middle unknowable.
    StreamOp::Delete(vec![StreamId::new(3, 0)]).apply(&mut stream);
    assert_eq!(stream.entries_up_to(StreamId::new(2, 0)), None);
    assert_eq!(stream.lag(&group), None);
    StreamOp::TrimThrough(StreamId::new(3, 0)).apply(&mut stream);
    assert_eq!(stream.len(), 2);
    assert_eq!(stream.entries_up_to(StreamId::new(4, 0)), Some(4));
}

#[test]
fn approximate_trims_take_whole_nodes() {
    // Nodes of 2 entries: [1 2] [3 4] [5 6] [7].
    let mut stream = StreamValue::new();
    for ms in 1..=7 {
        added(&mut stream, ms, 0);
    }
    assert_eq!(stream.nodes().count(), 4);
    let approx = |len| Trim::MaxLen {
        len,
        approx: true,
        limit: 0,
    };
    let exact = |len| Trim::MaxLen {
        len,
        approx: false,
        limit: 0,
    };
    assert_eq!(stream.trim_cut(approx(6)), None);
    assert_eq!(stream.trim_cut(approx(5)), Some(StreamId::new(2, 0)));
    assert_eq!(stream.trim_cut(approx(4)), Some(StreamId::new(2, 0)));
    assert_eq!(stream.trim_cut(exact(4)), Some(StreamId::new(3, 0)));
    let limited = Trim::MaxLen {
        len: 0,
        approx: true,
        limit: 3,
    };
    assert_eq!(stream.trim_cut(limited), Some(StreamId::new(2, 0)));
    let min = Trim::MinId {
        id: StreamId::new(4, 0),
        approx: false,
        limit: 0,
    };
    assert_eq!(stream.trim_cut(min), Some(StreamId::new(3, 0)));
    StreamOp::TrimThrough(StreamId::new(3, 0)).apply(&mut stream);
    assert_eq!(stream.len(), 4);
    assert_eq!(stream.nodes().count(), 3);
    assert_eq!(stream.max_deleted, StreamId::MIN, "trimming is no deletion");
    // XDEL of a node's last live entry removes the node.
    StreamOp::Delete(vec![StreamId::new(4, 0)]).apply(&mut stream);
    assert_eq!(stream.nodes().count(), 2);
    let image = stream.image();
    assert_eq!(StreamValue::decode_image(&image).unwrap(), stream);
}

#[test]
fn ids_step_across_their_parts() {
    assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
    assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
    assert_eq!(StreamId::MAX.next(), None);
    assert_eq!(StreamId::MIN.prev(), None);
}

/// A DELIVER record carries the group's read counter after it, which is
/// what applying it makes; a record written before the counter existed
/// (flags without bit 2, nothing after the IDs) still decodes.
#[test]
fn deliveries_carry_the_read_counter_they_make() {
    let mut stream = StreamValue::new();
    for ms in 1..=3 {
        added(&mut stream, ms, 0);
    }
    StreamOp::CreateGroup {
        group: b"g",
        last_id: StreamId::new(0, 0),
        entries_read: Some(0),
    }
    .apply(&mut stream);
    let ids = vec![StreamId::new(1, 0), StreamId::new(2, 0)];
    let counter = stream.read_counter_after(&stream.groups[&b"g"[..]], &ids);
    let op = StreamOp::Deliver {
        group: b"g",
        consumer: b"alice",
        now_ms: 5,
        ids: ids.clone(),
        history: false,
        noack: false,
        entries_read: counter,
    };
    op.apply(&mut stream);
    assert_eq!(counter, Some(2));
    assert_eq!(stream.groups[&b"g"[..]].entries_read, counter);

    let mut payload = Vec::new();
    op.encode(&mut payload);
    assert_eq!(StreamOp::decode(&payload).unwrap(), op);
    // The old layout: the same bytes without the counter and its flag
    // (tag, "g" and "alice" with their lengths, now_ms 5, then the flags;
    // each number a one-byte varint here).
    let flags_at = 1 + 2 + 6 + 1;
    assert_eq!(payload[flags_at], 4, "the counter's flag");
    payload[flags_at] = 0;
    assert_eq!(payload.pop(), Some(3), "Some(2), written as 3");
    let StreamOp::Deliver {
        entries_read,
        ids: read_ids,
        ..
    } = StreamOp::decode(&payload).unwrap()
    else {
        panic!("not a delivery");
    };
    assert_eq!((entries_read, read_ids), (None, ids));
}
