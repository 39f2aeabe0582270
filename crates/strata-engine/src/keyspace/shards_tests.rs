//! The keyspace's unit tests, beside `keyspace.rs`.

use super::*;
use crate::types::value::Value;
use std::collections::HashSet;

fn set(ks: &Keyspace, db: usize, key: &[u8], value: &[u8], expire_at_ms: Option<u64>, now_ms: u64) {
    let k = ks.key(key);
    ks.lock(k)
        .set(db, k, Value::from_bytes(value), expire_at_ms, false, now_ms);
}

/// A command's lock set: its keys' shards, once; the LSN and the keys
/// of what it changed come back from the commit; and (debug builds) a key it did
/// not declare is refused even when it shares a locked shard.
#[test]
fn a_command_runs_under_the_locks_of_its_declared_keys() {
    let ks = Keyspace::new(1);
    let (a, b, c) = (ks.key(b"{t}a"), ks.key(b"{t}b"), ks.key(b"other"));
    assert_eq!(a.shard(), b.shard());
    let mut locked = ks.lock_keys(&[a, c]);
    locked
        .shard(a)
        .set(0, a, Value::from_bytes(b"1"), None, false, 0);
    locked
        .shard(c)
        .set(0, c, Value::from_bytes(b"2"), None, false, 0);
    // No log attached: nothing to wait for; the keys changed, in the
    // order they were changed, all the same.
    let commit = locked.commit();
    assert_eq!(commit.lsn, None);
    let changed: Vec<_> = commit.changed.iter().collect();
    assert_eq!(
        changed,
        vec![(Kind::Set, 0, &b"{t}a"[..]), (Kind::Set, 0, &b"other"[..])]
    );
    // Reading changes nothing.
    let mut locked = ks.lock_keys(&[a]);
    assert!(locked.shard(a).contains(0, a, 0));
    assert!(locked.commit().changed.is_empty());
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut locked = ks.lock_keys(&[a]);
        locked.shard(b).contains(0, b, 0)
    }));
    assert_eq!(refused.is_err(), cfg!(debug_assertions));
    assert!(ks.lock(a).contains(0, a, 0) && ks.lock(c).contains(0, c, 0));
}

/// A lock set owns one log group, lent to whichever of its shards it
/// hands out: changes made through several shards, in any order, and
/// through a shard added later (escalation moves the others' positions),
/// are one commit listing every change in the order made.
#[test]
fn a_lock_set_s_changes_form_one_group_whichever_shard_they_touch() {
    let ks = Keyspace::new(1);
    // Three keys of three shards, in ascending shard order.
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut shards = HashSet::new();
    for i in 0.. {
        let bytes = format!("k{i}").into_bytes();
        if shards.insert(ks.key(&bytes).shard()) {
            keys.push(bytes);
            if keys.len() == 3 {
                break;
            }
        }
    }
    keys.sort_by_key(|bytes| ks.key(bytes).shard());
    let (low, middle, high) = (ks.key(&keys[0]), ks.key(&keys[1]), ks.key(&keys[2]));
    let mut locked = ks.lock_pinned(&[low, high], false);
    assert!(!ks.lock_nothing().append_position(b"nothing held"));
    let value = || Value::from_bytes(b"v");
    locked.shard(high).set(0, high, value(), None, false, 0);
    // Taken between the two held: positions move under the lent group.
    let added = locked.shard_or_escalate(middle).expect("free, so taken");
    added.set(0, middle, value(), None, false, 0);
    locked.shard(low).set(0, low, value(), None, false, 0);
    assert_eq!(locked.pending_count(), 3);
    locked.shard(high).remove(0, high, 0);
    let mut pending = Vec::new();
    locked.pending_changes(2, |kind, _, key| pending.push((kind, key.to_vec())));
    assert_eq!(
        pending,
        vec![(Kind::Set, keys[0].clone()), (Kind::Del, keys[2].clone())]
    );
    let commit = locked.commit();
    let changed: Vec<_> = commit
        .changed
        .iter()
        .map(|(kind, _, key)| (kind, key.to_vec()))
        .collect();
    assert_eq!(
        changed,
        vec![
            (Kind::Set, keys[2].clone()),
            (Kind::Set, keys[1].clone()),
            (Kind::Set, keys[0].clone()),
            (Kind::Del, keys[2].clone()),
        ]
    );
    // The next lock set starts with an empty group.
    let mut next = ks.lock_keys(&[low]);
    assert_eq!(next.pending_count(), 0);
    assert!(next.shard(low).contains(0, low, 0));
    assert!(next.commit().changed.is_empty());
}

#[test]
fn set_get_remove() {
    let ks = Keyspace::new(16);
    set(&ks, 0, b"a", b"1", None, 1000);
    let k = ks.key(b"a");
    assert_eq!(
        ks.lock(k)
            .get(0, k, 1000)
            .unwrap()
            .unwrap()
            .value()
            .as_int(),
        Some(1)
    );
    assert!(
        ks.lock(k).get(1, k, 1000).unwrap().is_none(),
        "databases are separate"
    );
    assert!(ks.lock(k).remove(0, k, 1000).is_some());
    assert!(ks.lock(k).get(0, k, 1000).unwrap().is_none());
}

#[test]
fn expired_keys_are_invisible_and_reclaimed() {
    let ks = Keyspace::new(1);
    set(&ks, 0, b"lazy", b"v", Some(2000), 1000);
    set(&ks, 0, b"active", b"v", Some(2000), 1000);
    set(&ks, 0, b"later", b"v", Some(9000), 1000);
    let lazy = ks.key(b"lazy");
    assert!(ks.lock(lazy).get(0, lazy, 1999).unwrap().is_some());
    assert!(ks.lock(lazy).get(0, lazy, 2000).unwrap().is_none());
    assert_eq!(
        ks.active_expire_cycle(2000, 100),
        1,
        "only 'active' is still due"
    );
    assert_eq!(ks.dbsize(0), 1);
    assert_eq!(ks.expired_keys(), 2);
    assert_eq!(ks.keys(0, b"*", 9000), Vec::<Vec<u8>>::new());
}

/// Under a volatile-* policy, a shard with no key that has a deadline
/// is passed over without its lock once eviction has seen that, until
/// a command locks it; then its volatile key is found and evicted.
#[test]
fn volatile_eviction_passes_over_shards_without_deadlines() {
    use crate::tiering::eviction::{EvictionPolicy, KeyRank};
    let ks = Keyspace::new(1);
    for i in 0..2000 {
        set(&ks, 0, format!("k{i}").as_bytes(), b"v", None, 1000);
    }
    let policy = EvictionPolicy::Keys {
        volatile_only: true,
        rank: KeyRank::Idle,
    };
    let done = ks.evict(policy, u64::MAX, 5, 1 << 20, 1000);
    assert_eq!(done.keys, 0);
    let marked = (0..SHARD_COUNT)
        .filter(|&i| ks.hints[i].no_volatile.load(Relaxed))
        .count();
    assert_eq!(marked, SHARD_COUNT, "every shard seen without deadlines");
    let locks = shard_locks_taken();
    assert_eq!(ks.evict(policy, u64::MAX, 5, 1 << 20, 1000).keys, 0);
    assert_eq!(shard_locks_taken(), locks, "a second cycle took locks");
    set(&ks, 0, b"k7", b"v", Some(9000), 1000);
    let shard = ks.key(b"k7").shard();
    assert!(
        !ks.hints[shard].no_volatile.load(Relaxed),
        "cleared by the write"
    );
    let done = ks.evict(policy, u64::MAX, 5, 1 << 20, 1000);
    assert_eq!(done.keys, 1);
    assert_eq!(done.deleted_keys, vec![Box::from(&b"k7"[..])]);
    // Allkeys policies do not look at the hint.
    let allkeys = EvictionPolicy::Keys {
        volatile_only: false,
        rank: KeyRank::Idle,
    };
    assert_eq!(ks.evict(allkeys, 1, 5, 1, 1000).keys, 1);
}

#[test]
fn active_expiry_skips_idle_shards_until_a_deadline_or_a_change() {
    let ks = Keyspace::new(1);
    set(&ks, 0, b"soon", b"v", Some(5000), 1000);
    let soon = ks.key(b"soon");
    let shard = soon.shard();
    assert_eq!(ks.active_expire_cycle(1000, 100), 0);
    assert_eq!(
        ks.hints[shard].expiry.load(Relaxed),
        5000,
        "nothing due in that shard before its deadline"
    );
    assert_eq!(
        ks.hints[(shard + 1) % SHARD_COUNT].expiry.load(Relaxed),
        u64::MAX,
        "nothing due ever in an empty shard"
    );
    let locks = shard_locks_taken();
    assert_eq!(ks.active_expire_cycle(4999, 100), 0);
    assert_eq!(shard_locks_taken(), locks, "an idle cycle takes no lock");
    // A key with an earlier deadline, added since: the change clears
    // the hint, so the next cycle looks at the shard again.
    let earlier = (0..)
        .map(|n| format!("earlier{n}").into_bytes())
        .find(|name| ks.key(name).shard() == shard)
        .unwrap();
    set(&ks, 0, &earlier, b"v", Some(2000), 1000);
    assert_eq!(ks.active_expire_cycle(2000, 100), 1);
    assert_eq!(ks.active_expire_cycle(5000, 100), 1);
    assert_eq!(ks.dbsize(0), 0);
}

/// Keys that all expire in one cycle leave no table allocated behind:
/// the shards' hints then say nothing is due, and no later cycle looks
/// at them again.
#[test]
fn tables_emptied_by_one_expiry_cycle_are_freed() {
    let ks = Keyspace::new(1);
    for i in 0..50_000 {
        set(&ks, 0, format!("k{i}").as_bytes(), b"v", Some(2000), 1000);
    }
    assert_eq!(ks.active_expire_cycle(2000, 1000), 50_000);
    assert_eq!(ks.active_expire_cycle(3000, 1000), 0);
    let left: usize = (0..SHARD_COUNT)
        .map(|i| ks.shards[i].lock().tables[0].entries.capacity())
        .sum();
    assert_eq!(left, 0, "slots still allocated");
}

#[test]
fn keep_ttl_and_overwrite() {
    let ks = Keyspace::new(1);
    set(&ks, 0, b"k", b"v", Some(5000), 1000);
    let k = ks.key(b"k");
    ks.lock(k)
        .set(0, k, Value::from_bytes(b"w"), None, true, 1000);
    assert_eq!(
        ks.lock(k).get(0, k, 1000).unwrap().unwrap().expire_at_ms(),
        Some(5000)
    );
    ks.lock(k)
        .set(0, k, Value::from_bytes(b"x"), None, false, 1000);
    assert_eq!(
        ks.lock(k).get(0, k, 1000).unwrap().unwrap().expire_at_ms(),
        None
    );
    assert_eq!(
        ks.db_stats(1000)[0],
        DbStats {
            keys: 1,
            expires: 0,
            avg_ttl_ms: 0
        }
    );
}

#[test]
fn avg_ttl_is_the_exact_mean_of_remaining_ttls() {
    let ks = Keyspace::new(1);
    set(&ks, 0, b"a", b"v", Some(11_000), 1000);
    set(&ks, 0, b"b", b"v", Some(31_000), 1000);
    set(&ks, 0, b"c", b"v", None, 1000);
    assert_eq!(
        ks.db_stats(1000)[0],
        DbStats {
            keys: 3,
            expires: 2,
            avg_ttl_ms: 20_000
        }
    );
    let b = ks.key(b"b");
    ks.lock(b).set_expire(0, b, Some(21_000), 1000);
    let a = ks.key(b"a");
    ks.lock(a).remove(0, a, 1000);
    assert_eq!(
        ks.db_stats(1000)[0],
        DbStats {
            keys: 2,
            expires: 1,
            avg_ttl_ms: 20_000
        }
    );
    ks.active_expire_cycle(30_000, 10);
    assert_eq!(
        ks.db_stats(30_000)[0],
        DbStats {
            keys: 1,
            expires: 0,
            avg_ttl_ms: 0
        }
    );
}

#[test]
fn scan_returns_every_key_once_while_tables_change() {
    let ks = Keyspace::new(1);
    let stable: Vec<Vec<u8>> = (0..5000)
        .map(|i| format!("stable:{i}").into_bytes())
        .collect();
    for key in &stable {
        set(&ks, 0, key, b"v", None, 0);
    }
    let mut seen = Vec::new();
    let mut cursor = 0;
    let mut step = 0;
    loop {
        let (next, keys) = ks.scan(0, cursor, 10, 0, |_| true);
        seen.extend(keys);
        // Grow and shrink tables mid-iteration.
        for i in 0..20 {
            set(
                &ks,
                0,
                format!("churn:{step}:{i}").as_bytes(),
                b"v",
                None,
                0,
            );
        }
        if step % 3 == 0 {
            ks.flush_db(0);
            for key in &stable {
                set(&ks, 0, key, b"v", None, 0);
            }
        }
        step += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let seen_stable: Vec<&Vec<u8>> = seen.iter().filter(|k| k.starts_with(b"stable:")).collect();
    let unique: HashSet<&Vec<u8>> = seen_stable.iter().copied().collect();
    assert_eq!(unique.len(), stable.len(), "every stable key returned");
    assert_eq!(seen_stable.len(), stable.len(), "and only once");
}

#[test]
fn scan_of_empty_db_finishes_quickly() {
    let ks = Keyspace::new(1);
    let mut calls = 0;
    let mut cursor = 0;
    loop {
        let (next, keys) = ks.scan(0, cursor, 10, 0, |_| true);
        assert!(keys.is_empty());
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert!(calls <= 2, "took {calls} calls");
}

#[test]
fn keys_of_one_shard_get_varied_table_tags_and_buckets() {
    let ks = Keyspace::new(1);
    let names: Vec<String> = (0..200_000).map(|i| format!("k{i}")).collect();
    let same_shard: Vec<u64> = names
        .iter()
        .map(|name| ks.key(name.as_bytes()))
        .filter(|k| k.shard() == 0)
        .map(|k| k.slot_hash())
        .collect();
    assert!(same_shard.len() > 100);
    let tags: HashSet<u64> = same_shard.iter().map(|h| h >> 57).collect();
    let buckets: HashSet<u64> = same_shard.iter().map(|h| h & 1023).collect();
    assert!(tags.len() > 64, "only {} distinct 7-bit tags", tags.len());
    assert!(
        buckets.len() > same_shard.len() / 2,
        "buckets cluster: {}",
        buckets.len()
    );
}

#[test]
fn swap_and_random() {
    let ks = Keyspace::new(2);
    set(&ks, 0, b"k", b"v", None, 0);
    ks.swap_db(0, 1);
    assert_eq!(ks.dbsize(0), 0);
    assert_eq!(ks.random_key(1, 0), Some(b"k".to_vec()));
    assert_eq!(ks.random_key(0, 0), None);
}

/// `keys_in_slots` hands over the live keys of the slots asked, each
/// shard's at once and each shard once, under either sharding; keys of
/// other slots, of other databases and expired ones stay out.
#[test]
fn keys_in_slots_reads_each_shard_once() {
    for sharding in [Sharding::Slots, Sharding::Hash] {
        let ks = Keyspace::with_seed(2, 7, sharding);
        let mut want = HashSet::new();
        let slots: Vec<u16> = (0..64u16).map(|i| i * 3).collect();
        for i in 0..4000u32 {
            let key = format!("key:{i}").into_bytes();
            let slot = key_slot(&key);
            set(&ks, 0, &key, b"v", None, 0);
            if slots.contains(&slot) {
                want.insert(key);
            }
        }
        set(&ks, 1, b"other-db", b"v", None, 0);
        let expired = (0..)
            .map(|i| format!("gone:{i}").into_bytes())
            .find(|key| slots.contains(&key_slot(key)))
            .unwrap();
        set(&ks, 0, &expired, b"v", Some(5), 0);
        let mut got = HashSet::new();
        let mut calls = 0;
        ks.keys_in_slots(0, &slots, 10, |keys| {
            calls += 1;
            for key in keys {
                assert!(got.insert(key), "a key handed over twice");
            }
        });
        assert!(!want.is_empty());
        assert_eq!(got, want, "{sharding:?}");
        let shards: HashSet<usize> = want.iter().map(|key| ks.key(key).shard()).collect();
        assert_eq!(calls, shards.len(), "one call per shard holding them");
    }
}
