//! The entry's unit tests (its changes, hash and string), beside
//! `entry.rs`.

use super::*;
use crate::tiering::tier::LiveCounts;
use crate::types::hash::Field;

const NOW_MS: u64 = 1_700_000_000_000;
const KEY: &[u8] = b"memtier-123456";

fn limits() -> Limits {
    Limits {
        max_packed_entries: 2,
        max_packed_value: 8,
    }
}

fn hash_image(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut hash = HashValue::new();
    for (name, value) in fields {
        hash.put(
            Field {
                name,
                value,
                deadline: None,
            },
            Limits::default(),
        );
    }
    let mut image = Vec::new();
    hash.encode_image(&mut image);
    image
}

/// Changes `entry` as a command would, with throwaway shard state.
fn change(entry: &mut Entry, change: impl FnOnce(EntryMut)) {
    let mut live = LiveCounts::default();
    let mut fields_due = FieldsDue::new();
    let mut group = GroupSlot::default();
    change(EntryMut {
        entry,
        live: &mut live,
        limits: limits(),
        fields_due: &mut fields_due,
        group: &mut group,
    });
}

#[test]
fn sizes_per_key() {
    assert_eq!(size_of::<Entry>(), 8, "one pointer per table slot");
    // A 14-byte key whose value is on disk: one 29-byte allocation (the
    // length in one byte, word, shape, location, key length, key).
    let cold = Entry::new_cold(KEY, 0, false, ValueType::String, 42, NOW_MS);
    assert_eq!(cold.memory_bytes(), 8 + 29);
    assert_eq!(cold.loc_raw(), 42);
    // A 100-byte value in RAM without tiering: header 7 bytes.
    let hot = Entry::new(
        KEY,
        Value::from_bytes(&[b'v'; 100]),
        0,
        limits(),
        NOW_MS,
        false,
    );
    assert_eq!(hot.head_len(), 7 + KEY.len());
    assert_eq!(hot.value_len_in_ram(), 100);
}

#[test]
fn fields_survive_each_change() {
    let mut entry = Entry::new(KEY, Value::Int(12), 0, limits(), NOW_MS, false);
    assert_eq!(entry.value().as_int(), Some(12));
    assert_eq!(entry.loc(), None);
    entry.set_deadline_raw(NOW_MS + 5000);
    entry.set_loc(7 << 32 | 96);
    assert_eq!((entry.key(), entry.deadline()), (KEY, NOW_MS + 5000));
    assert_eq!(entry.loc(), Some(7 << 32 | 96));
    // INCR's in-place path, then a longer integer that rebuilds.
    entry.replace_value(Value::Int(13), limits());
    entry.replace_value(Value::Int(-130), limits());
    assert_eq!(entry.value().as_int(), Some(-130));
    assert_eq!(entry.deadline(), NOW_MS + 5000);
    assert_eq!(entry.loc(), Some(7 << 32 | 96));
    let freed = entry.drop_value();
    assert_eq!(freed, 4);
    assert!(entry.is_cold() && entry.is_int());
    assert_eq!(entry.cold_loc(), Some(7 << 32 | 96));
    entry.install(b"-130", true, limits()).expect("a string");
    assert_eq!(entry.value().as_int(), Some(-130));
    entry.set_deadline_raw(0);
    assert_eq!((entry.key(), entry.deadline()), (KEY, 0));
    entry.touch(NOW_MS + 3000);
    assert_eq!(entry.idle_s(NOW_MS + 4000), 1);
    assert!(!entry.has(VOLATILE));
}

#[test]
fn long_keys_and_hashes_beside_the_entry() {
    let key = vec![b'k'; 300];
    let small = hash_image(&[(b"a", b"1")]);
    let mut entry = Entry::new(&key, Value::Hash(small.into()), 0, limits(), NOW_MS, true);
    assert_eq!(entry.key(), &key[..]);
    assert_eq!(entry.value().encoding_name(), "listpack");
    // Past the packed limits the hash moves beside the entry.
    change(&mut entry, |e| {
        let put = |name| {
            FieldChange::Put(Field {
                name,
                value: b"v",
                deadline: None,
            })
        };
        e.change_hash(0, &[put(b"b"), put(b"c")], NOW_MS);
    });
    assert_eq!(entry.value().encoding_name(), "hashtable");
    assert_eq!(entry.value().hash().map(|h| h.len()), Some(3));
    entry.set_deadline_raw(NOW_MS + 1);
    entry.set_loc(5);
    assert_eq!(entry.value().hash().map(|h| h.len()), Some(3));
    // A big hash replaced by a string is freed (Miri checks leaks).
    entry.replace_value(Value::from_bytes(b"text"), limits());
    assert_eq!(entry.value().as_bytes(), b"text");
    assert!(!entry.is_hash());
    let big = hash_image(&[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]);
    entry.replace_value(Value::Hash(big.as_slice().into()), limits());
    assert_eq!(entry.value().encoding_name(), "hashtable");
    entry.drop_value();
    entry.install(&big, false, limits()).expect("a hash");
    assert_eq!(entry.value().hash().map(|h| h.len()), Some(3));
    assert_eq!(entry.key(), &key[..]);
}

#[test]
fn writes_grow_in_place() {
    let mut entry = Entry::new(KEY, Value::from_bytes(b"abc"), 0, limits(), NOW_MS, false);
    change(&mut entry, |e| assert_eq!(e.write_at(0, 5, b"xy"), 7));
    assert_eq!(entry.value().as_bytes(), b"abc\0\0xy");
    change(&mut entry, |e| assert_eq!(e.write_at(0, 1, b"Z"), 7));
    assert_eq!(entry.value().as_bytes(), b"aZc\0\0xy");
    assert_eq!(entry.big_string_identity(), None);
}

// Megabytes: too slow under Miri.
#[cfg(not(miri))]
#[test]
fn big_strings_live_beside_and_keep_their_identity() {
    let mut entry = Entry::new(KEY, Value::from_bytes(b"abc"), 0, limits(), NOW_MS, false);
    change(&mut entry, |e| {
        e.write_at(0, BIG_STRING_BYTES, b"!");
    });
    let identity = entry.big_string_identity().expect("beside");
    assert_eq!(entry.value().len(), BIG_STRING_BYTES + 1);
    assert_eq!(&entry.value().as_bytes()[..4], b"abc\0");
    change(&mut entry, |e| {
        e.write_at(0, 3 * BIG_STRING_BYTES, b"?");
    });
    entry.set_deadline_raw(NOW_MS + 1);
    assert_eq!(entry.big_string_identity(), Some(identity));
    assert_eq!(entry.value().len(), 3 * BIG_STRING_BYTES + 1);
    entry.replace_value(Value::from_bytes(b"small"), limits());
    assert_eq!(entry.big_string_identity(), None);
    let big = Value::owned(vec![7u8; BIG_STRING_BYTES + 1]);
    let entry = Entry::new(KEY, big, 0, limits(), NOW_MS, true);
    assert!(entry.big_string_identity().is_some());
    assert!(entry.value().as_bytes().iter().all(|&b| b == 7));
}
