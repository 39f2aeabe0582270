//! Hashes against the real server: kept across `kill -9` and checkpoints,
//! cold hashes read back from disk, TYPE known without reading, and the
//! conversion to a table past 128 fields. Replies themselves are compared
//! with redis-server's in `redis_replies.rs`.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::*;
use redis::Commands;

type Model = BTreeMap<String, BTreeMap<String, String>>;

fn hgetall(con: &mut redis::Connection, key: &str) -> BTreeMap<String, String> {
    let got: HashMap<String, String> = con.hgetall(key).unwrap();
    got.into_iter().collect()
}

fn check(con: &mut redis::Connection, model: &Model) {
    for (key, fields) in model {
        assert_eq!(&hgetall(con, key), fields, "hash {key}");
    }
}

#[test]
fn hashes_survive_kill9_and_checkpoints() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut model = Model::new();
    let write = |con: &mut redis::Connection, model: &mut Model, round: u32| {
        for k in 0..50 {
            let key = format!("h{k}");
            let fields = model.entry(key.clone()).or_default();
            for f in 0..(k % 7 + 1) {
                let (field, value) = (format!("f{f}"), format!("v{round}-{k}-{f}"));
                let _: () = con.hset(&key, &field, &value).unwrap();
                fields.insert(field, value);
            }
            if k % 5 == 0 {
                let _: () = con.hdel(&key, "f0").unwrap();
                fields.remove("f0");
            }
            let n: i64 = con.hincr(&key, "counter", k as i64).unwrap();
            fields.insert("counter".into(), n.to_string());
        }
        model.retain(|_, fields| !fields.is_empty());
    };
    write(&mut con, &mut model, 1);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    write(&mut con, &mut model, 2);
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    check(&mut con, &model);
    // And once more from a checkpoint written with hashes in it.
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    check(&mut con, &model);
    let kind: String = redis::cmd("TYPE").arg("h3").query(&mut con).unwrap();
    assert_eq!(kind, "hash");
}

#[test]
fn cold_hashes_read_back_and_type_needs_no_disk_read() {
    const KEYS: u64 = 3_000;
    let server = TestServer::start_with(&["--maxmemory", "4mb"]);
    let mut con = server.client();
    let value = |k: u64, f: u64| format!("{k}:{f}:{}", "x".repeat(300));
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(32) {
        let mut pipe = redis::pipe();
        for &k in chunk {
            let fields: Vec<(String, String)> =
                (0..8).map(|f| (format!("f{f}"), value(k, f))).collect();
            pipe.cmd("HSET").arg(key(k)).arg(fields).ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }
    let cold: Vec<u64> = (0..KEYS)
        .filter(|&k| {
            let residency: String = redis::cmd("OBJECT")
                .arg("RESIDENCY")
                .arg(key(k))
                .query(&mut con)
                .unwrap();
            residency == "disk"
        })
        .collect();
    assert!(cold.len() > KEYS as usize / 3, "{} cold hashes", cold.len());
    let reads = info_u64(&mut con, "tiering", "disk_reads");
    for &k in &cold[..50] {
        let kind: String = redis::cmd("TYPE").arg(key(k)).query(&mut con).unwrap();
        assert_eq!(kind, "hash");
    }
    assert_eq!(
        info_u64(&mut con, "tiering", "disk_reads"),
        reads,
        "TYPE read the disk"
    );
    for &k in &cold[..200] {
        let got: String = con.hget(key(k), "f5").unwrap();
        assert_eq!(got, value(k, 5));
    }
    assert!(info_u64(&mut con, "tiering", "disk_reads") > reads);
    // A restart brings every hash back, cold ones included.
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--maxmemory", "4mb"], None, READY);
    let mut con = server.client();
    for k in (0..KEYS).step_by(7) {
        let got = hgetall(&mut con, &key(k));
        let want: BTreeMap<String, String> =
            (0..8).map(|f| (format!("f{f}"), value(k, f))).collect();
        assert_eq!(got, want, "{}", key(k));
    }
}

#[test]
fn a_hash_past_128_fields_becomes_a_table() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for f in 0..128 {
        raw.cmd(&["HSET", "big", &format!("f{f}"), "v"]);
    }
    assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "big"]), b("listpack"));
    raw.cmd(&["HSET", "big", "one-more", "v"]);
    assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "big"]), b("hashtable"));
    assert_eq!(raw.cmd(&["HLEN", "big"]), i(129));
    raw.cmd(&["HSET", "long", "f", &"v".repeat(65)]);
    assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "long"]), b("hashtable"));
}
