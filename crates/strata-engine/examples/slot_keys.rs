//! How long finding the keys of many cluster slots takes: one read of
//! each shard for all the slots (`Keyspace::keys_in_slots`, what a node
//! deleting the slots it moved away uses) against a read of the slot's
//! shard per slot, twice (`keys_in_slot`: once to find the keys, once to
//! see none are left), as that deletion did before.
//!
//! `cargo run --release -p strata-engine --example slot_keys [KEYS] [SLOTS]`
//! (1 000 000 keys and 4 096 slots by default; three rounds, each way
//! alternated).

use std::time::Instant;

use strata_engine::keyspace::shards::Sharding;
use strata_engine::{Keyspace, Value};

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: u32 = args.next().map_or(1_000_000, |n| n.parse().expect("KEYS"));
    let slots: u16 = args.next().map_or(4096, |n| n.parse().expect("SLOTS"));
    let ks = Keyspace::with_seed(1, 7, Sharding::Slots);
    for i in 0..keys {
        let name = format!("key:{i}");
        let key = ks.key(name.as_bytes());
        ks.lock(key)
            .set(0, key, Value::from_bytes(b"v"), None, false, 0);
    }
    let slots: Vec<u16> = (0..slots).collect();
    for round in 1..=3 {
        let start = Instant::now();
        let mut found = 0;
        for &slot in &slots {
            found += ks.keys_in_slot(None, 0, slot, 512, 0).1.len();
            let _ = ks.keys_in_slot(None, 0, slot, 512, 0);
        }
        let per_slot = start.elapsed();
        let start = Instant::now();
        let mut found_once = 0;
        ks.keys_in_slots(0, &slots, 0, |keys| found_once += keys.len());
        let once = start.elapsed();
        assert_eq!(found, found_once);
        println!(
            "round {round}: {found} keys of {} slots: per slot {:.1} ms, once per shard {:.1} ms",
            slots.len(),
            per_slot.as_secs_f64() * 1e3,
            once.as_secs_f64() * 1e3
        );
    }
}
