//! Sets against the real server: a randomized model of the set commands,
//! encodings converting at CONFIG SET thresholds (and back to the smallest
//! on reload), kill -9 around checkpoints, cold sets read back exactly,
//! SSCAN completeness on a hash table, and SPOP/SRANDMEMBER reaching every
//! member. Replies and errors are compared with redis-server's in
//! `redis_replies.rs`.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use proptest::prelude::*;
use redis::Commands;

fn members(con: &mut redis::Connection, key: &str) -> BTreeSet<String> {
    con.smembers(key).unwrap()
}

fn encoding(con: &mut redis::Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(con)
        .unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Add(u8, Vec<u8>),
    Rem(u8, Vec<u8>),
    Pop(u8, usize),
    Move(u8, u8, u8),
    Store(u8, u8, u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..3u8;
    let members = proptest::collection::vec(0..12u8, 1..5);
    prop_oneof![
        3 => (key.clone(), members.clone()).prop_map(|(k, m)| Op::Add(k, m)),
        2 => (key.clone(), members).prop_map(|(k, m)| Op::Rem(k, m)),
        1 => (key.clone(), 0..4usize).prop_map(|(k, n)| Op::Pop(k, n)),
        1 => (key.clone(), key.clone(), 0..12u8).prop_map(|(a, b, m)| Op::Move(a, b, m)),
        1 => (0..3u8, key.clone(), key.clone(), key).prop_map(|(o, d, a, b)| Op::Store(o, d, a, b)),
    ]
}

/// Members 0–5 are integers, 6–11 strings, so sets cross encodings.
fn member(m: u8) -> String {
    if m < 6 {
        m.to_string()
    } else {
        format!("m{m}")
    }
}

#[test]
fn set_commands_behave_like_a_model() {
    use proptest::test_runner::{Config, TestRunner};
    let server = TestServer::start();
    let mut con = server.client();
    // Small limits, so every encoding and conversion is crossed.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("set-max-intset-entries")
        .arg(3)
        .arg("set-max-listpack-entries")
        .arg(4)
        .query(&mut con)
        .unwrap();
    let con = std::cell::RefCell::new(con);
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let name = |k: u8| format!("s{k}");
    let result = runner.run(&proptest::collection::vec(op(), 1..40), |ops| {
        let mut con = con.borrow_mut();
        let _: () = redis::cmd("FLUSHALL").query(&mut *con).unwrap();
        let mut model: BTreeMap<u8, BTreeSet<String>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Add(k, ms) => {
                    let ms: Vec<String> = ms.into_iter().map(member).collect();
                    let set = model.entry(k).or_default();
                    let want = ms.iter().filter(|m| set.insert((*m).clone())).count();
                    let got: usize = con.sadd(name(k), &ms).unwrap();
                    prop_assert_eq!(got, want);
                }
                Op::Rem(k, ms) => {
                    let ms: Vec<String> = ms.into_iter().map(member).collect();
                    let set = model.entry(k).or_default();
                    let want = ms.iter().filter(|m| set.remove(*m)).count();
                    let got: usize = con.srem(name(k), &ms).unwrap();
                    prop_assert_eq!(got, want);
                }
                Op::Pop(k, n) => {
                    let popped: Vec<String> = redis::cmd("SPOP")
                        .arg(name(k))
                        .arg(n)
                        .query(&mut *con)
                        .unwrap();
                    let set = model.entry(k).or_default();
                    prop_assert_eq!(popped.len(), n.min(set.len()));
                    for m in &popped {
                        prop_assert!(set.remove(m), "popped {} not in the set", m);
                    }
                }
                Op::Move(a, b, m) => {
                    let m = member(m);
                    let got: bool = con.smove(name(a), name(b), &m).unwrap();
                    let present = model.get(&a).is_some_and(|s| s.contains(&m));
                    prop_assert_eq!(got, present);
                    if present && a != b {
                        model.get_mut(&a).unwrap().remove(&m);
                        model.entry(b).or_default().insert(m);
                    }
                }
                Op::Store(which, d, a, b) => {
                    let (sa, sb) = (
                        model.get(&a).cloned().unwrap_or_default(),
                        model.get(&b).cloned().unwrap_or_default(),
                    );
                    let (command, result): (&str, BTreeSet<String>) = match which {
                        0 => ("SINTERSTORE", sa.intersection(&sb).cloned().collect()),
                        1 => ("SUNIONSTORE", sa.union(&sb).cloned().collect()),
                        _ => ("SDIFFSTORE", sa.difference(&sb).cloned().collect()),
                    };
                    let got: usize = redis::cmd(command)
                        .arg(name(d))
                        .arg(name(a))
                        .arg(name(b))
                        .query(&mut *con)
                        .unwrap();
                    prop_assert_eq!(got, result.len());
                    model.insert(d, result);
                }
            }
            model.retain(|_, s| !s.is_empty());
        }
        for k in 0..3u8 {
            let want = model.get(&k).cloned().unwrap_or_default();
            prop_assert_eq!(members(&mut con, &name(k)), want.clone());
            let card: usize = con.scard(name(k)).unwrap();
            prop_assert_eq!(card, want.len());
            let exists: bool = con.exists(name(k)).unwrap();
            prop_assert_eq!(exists, !want.is_empty());
        }
        Ok(())
    });
    result.unwrap();
}

#[test]
fn encodings_convert_at_the_configured_limits_and_shrink_on_reload() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.sadd("s", &[1, 2, 3]).unwrap();
    assert_eq!(encoding(&mut con, "s"), "intset");
    let _: () = con.sadd("s", "a").unwrap();
    assert_eq!(encoding(&mut con, "s"), "listpack");
    let _: () = con.sadd("s", "x".repeat(65)).unwrap();
    assert_eq!(encoding(&mut con, "s"), "hashtable");
    // The limits are settable, under both names of the old ones.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("set-max-intset-entries")
        .arg(2)
        .query(&mut con)
        .unwrap();
    let _: () = con.sadd("ints", &[1, 2, 3]).unwrap();
    assert_eq!(encoding(&mut con, "ints"), "hashtable");
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("set-max-*")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        got.chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("set-max-intset-entries".into(), "2".into()),
            ("set-max-listpack-entries".into(), "128".into()),
            ("set-max-listpack-value".into(), "64".into()),
        ])
    );
    // No conversion back while running, as in Redis; loading a checkpoint
    // rebuilds each set in the smallest encoding its members allow (as
    // loading an RDB file does).
    let _: () = con.srem("s", &["a".to_string(), "x".repeat(65)]).unwrap();
    assert_eq!(encoding(&mut con, "s"), "hashtable");
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    assert_eq!(encoding(&mut con, "s"), "intset");
    assert_eq!(
        members(&mut con, "s"),
        BTreeSet::from(["1".into(), "2".into(), "3".into()])
    );
}

#[test]
fn sets_survive_kill9_and_checkpoints() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let write = |con: &mut redis::Connection,
                 model: &mut BTreeMap<String, BTreeSet<String>>,
                 round: u32| {
        for k in 0..30 {
            let key = format!("set{k}");
            let set = model.entry(key.clone()).or_default();
            // Some sets stay small, some pass 128 members.
            let count = if k % 5 == 0 { 150 } else { k % 7 + 1 };
            let ms: Vec<String> = (0..count).map(|i| format!("r{round}-{i}")).collect();
            let _: () = con.sadd(&key, &ms).unwrap();
            set.extend(ms);
            if k % 3 == 0 {
                let gone = format!("r{round}-0");
                let _: () = con.srem(&key, &gone).unwrap();
                set.remove(&gone);
            }
        }
    };
    write(&mut con, &mut model, 1);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    write(&mut con, &mut model, 2);
    let popped: Vec<String> = redis::cmd("SPOP")
        .arg("set5")
        .arg(10)
        .query(&mut con)
        .unwrap();
    for m in &popped {
        model.get_mut("set5").unwrap().remove(m);
    }
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    for (key, set) in &model {
        assert_eq!(&members(&mut con, key), set, "{key}");
    }
}

#[test]
fn cold_sets_read_back_exactly() {
    const KEYS: u64 = 1_500;
    let server = TestServer::start_with(&["--maxmemory", "4mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    let member = |k: u64, m: u64| format!("{k}:{m}:{}", "y".repeat(100));
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(32) {
        let mut pipe = redis::pipe();
        for &k in chunk {
            let ms: Vec<String> = (0..20).map(|m| member(k, m)).collect();
            pipe.cmd("SADD").arg(key(k)).arg(ms).ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }
    let cold: Vec<u64> = (0..KEYS).filter(|&k| on_disk(&mut con, &key(k))).collect();
    assert!(cold.len() > KEYS as usize / 3, "{} cold sets", cold.len());
    let kind: String = redis::cmd("TYPE")
        .arg(key(cold[0]))
        .query(&mut con)
        .unwrap();
    assert_eq!(kind, "set");
    for &k in &cold[..50] {
        let want: BTreeSet<String> = (0..20).map(|m| member(k, m)).collect();
        assert_eq!(members(&mut con, &key(k)), want);
    }
    // A cold set changed, then recovered from the log.
    let k = cold[60];
    let _: () = con.srem(key(k), member(k, 3)).unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(
        dir,
        &["--maxmemory", "4mb", "--maxmemory-policy", "tiered"],
        None,
        READY,
    );
    let mut con = server.client();
    let mut want: BTreeSet<String> = (0..20).map(|m| member(k, m)).collect();
    want.remove(&member(k, 3));
    assert_eq!(members(&mut con, &key(k)), want);
}

#[test]
fn sscan_returns_every_member_and_random_picks_reach_every_member() {
    let server = TestServer::start();
    let mut con = server.client();
    let all: BTreeSet<String> = (0..5000).map(|i| format!("member:{i}")).collect();
    for chunk in all.iter().collect::<Vec<_>>().chunks(500) {
        let _: () = con.sadd("big", chunk).unwrap();
    }
    assert_eq!(encoding(&mut con, "big"), "hashtable");
    let mut seen = BTreeSet::new();
    let mut cursor = 0u64;
    let mut calls = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg("big")
            .arg(cursor)
            .arg("COUNT")
            .arg(100)
            .query(&mut con)
            .unwrap();
        seen.extend(batch);
        calls += 1;
        if next == 0 {
            break;
        }
        cursor = next;
        assert!(calls < 1000, "SSCAN does not finish");
    }
    assert_eq!(seen, all);
    // SRANDMEMBER with a negative count repeats; every member of a small
    // set comes up; SPOP empties a set exactly.
    let _: () = con.sadd("small", &["a", "b", "c"]).unwrap();
    let picks: Vec<String> = con.srandmember_multiple("small", -300).unwrap();
    assert_eq!(picks.len(), 300);
    let distinct: BTreeSet<String> = picks.into_iter().collect();
    assert_eq!(distinct.len(), 3);
    let mut popped = BTreeSet::new();
    while let Some(m) = con.spop::<_, Option<String>>("big").unwrap() {
        assert!(popped.insert(m));
    }
    assert_eq!(popped, all);
    let exists: bool = con.exists("big").unwrap();
    assert!(!exists);
}

#[test]
fn key_commands_work_on_sets_and_sorted_sets() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.sadd("s", &["a", "b"]).unwrap();
    let _: () = con.zadd_multiple("z", &[(1, "x"), (2, "y")]).unwrap();
    for (key, kind) in [("s", "set"), ("z", "zset")] {
        let got: String = redis::cmd("TYPE").arg(key).query(&mut con).unwrap();
        assert_eq!(got, kind);
        let copy = format!("{key}-copy");
        let _: () = redis::cmd("COPY")
            .arg(key)
            .arg(&copy)
            .query(&mut con)
            .unwrap();
        let moved = format!("{key}-moved");
        let _: () = con.rename(&copy, &moved).unwrap();
        let _: () = redis::cmd("MOVE")
            .arg(&moved)
            .arg(1)
            .query(&mut con)
            .unwrap();
        let usage: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query(&mut con)
            .unwrap();
        assert!(usage > 0);
        let _: () = con.expire(key, 100).unwrap();
        let ttl: i64 = con.ttl(key).unwrap();
        assert!(ttl > 90);
        let (_, found): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(0)
            .arg("TYPE")
            .arg(kind)
            .arg("COUNT")
            .arg(1000)
            .query(&mut con)
            .unwrap();
        assert_eq!(found, [key]);
    }
    let _: () = redis::cmd("SELECT").arg(1).query(&mut con).unwrap();
    assert_eq!(
        members(&mut con, "s-moved"),
        BTreeSet::from(["a".into(), "b".into()])
    );
    let got: Vec<(String, f64)> = con.zrange_withscores("z-moved", 0, -1).unwrap();
    assert_eq!(got, [("x".into(), 1.0), ("y".into(), 2.0)]);
    // WRONGTYPE both ways.
    let wrong: redis::RedisResult<i64> = con.sadd("z-moved", "a");
    assert!(wrong.unwrap_err().to_string().contains("WRONGTYPE"));
    let wrong: redis::RedisResult<i64> = con.zadd("s-moved", "a", 1);
    assert!(wrong.unwrap_err().to_string().contains("WRONGTYPE"));
    let wrong: redis::RedisResult<String> = con.get("s-moved");
    assert!(wrong.unwrap_err().to_string().contains("WRONGTYPE"));
}

#[test]
fn random_member_counts_beyond_any_reply_are_refused() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.cmd(&["SADD", "s", "a"]);
    raw.cmd(&["ZADD", "z", "1", "a"]);
    // 2^24 repeats are allowed; more could not be sent under any limit.
    for command in ["SRANDMEMBER", "ZRANDMEMBER"] {
        let key = if command == "SRANDMEMBER" { "s" } else { "z" };
        assert_eq!(
            raw.cmd(&[command, key, "-16777217"]),
            e("ERR value is out of range")
        );
    }
    assert_eq!(raw.cmd(&["SCARD", "s"]), i(1));
    assert_eq!(raw.cmd(&["ZCARD", "z"]), i(1));
}
