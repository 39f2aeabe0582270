//! Sorted sets against the real server: a randomized model of the write
//! commands and ranges, encodings converting at CONFIG SET thresholds,
//! kill -9 around checkpoints, cold sorted sets read back exactly, ZSCAN
//! completeness on a skiplist, and BZPOPMIN/BZMPOP woken by ZADD from
//! another connection. Replies and errors (score formatting included) are
//! compared with redis-server's in `redis_replies.rs`.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use redis::Commands;

type Model = BTreeMap<String, f64>;

/// The model's entries in sorted set order.
fn ordered(model: &Model) -> Vec<(String, f64)> {
    let mut entries: Vec<(String, f64)> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
    entries.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
    entries
}

fn all(con: &mut redis::Connection, key: &str) -> Vec<(String, f64)> {
    con.zrange_withscores(key, 0, -1).unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Add(Vec<(i8, u8)>, u8),
    Incr(i8, u8),
    Rem(Vec<u8>),
    Pop(bool, usize),
    RemByScore(i8, i8),
    RemByRank(i8, i8),
}

fn op() -> impl Strategy<Value = Op> {
    let entry = (-6..6i8, 0..14u8);
    prop_oneof![
        4 => (proptest::collection::vec(entry, 1..4), 0..6u8).prop_map(|(e, f)| Op::Add(e, f)),
        2 => (-3..3i8, 0..14u8).prop_map(|(s, m)| Op::Incr(s, m)),
        2 => proptest::collection::vec(0..14u8, 1..3).prop_map(Op::Rem),
        1 => (any::<bool>(), 0..3usize).prop_map(|(max, n)| Op::Pop(max, n)),
        1 => (-6..6i8, -6..6i8).prop_map(|(a, b)| Op::RemByScore(a, b)),
        1 => (-5..5i8, -5..5i8).prop_map(|(a, b)| Op::RemByRank(a, b)),
    ]
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn sorted_set_commands_behave_like_a_model() {
    use proptest::test_runner::{Config, TestRunner};
    let server = TestServer::start();
    let mut con = server.client();
    // Small limits, so both encodings and the conversion are crossed.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-listpack-entries")
        .arg(5)
        .query(&mut con)
        .unwrap();
    let con = std::cell::RefCell::new(con);
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let member = |m: u8| format!("m{m:02}");
    let result = runner.run(&proptest::collection::vec(op(), 1..50), |ops| {
        let mut con = con.borrow_mut();
        let _: () = redis::cmd("FLUSHALL").query(&mut *con).unwrap();
        let mut model = Model::new();
        for op in ops {
            match op {
                Op::Add(entries, flags) => {
                    // 0 plain, 1 NX, 2 XX, 3 GT, 4 LT, 5 CH.
                    let flag = ["", "NX", "XX", "GT", "LT", "CH"][flags as usize];
                    let mut cmd = redis::cmd("ZADD");
                    cmd.arg("z");
                    if !flag.is_empty() {
                        cmd.arg(flag);
                    }
                    let (mut added, mut changed) = (0, 0);
                    for (score, m) in &entries {
                        let (score, m) = (*score as f64 / 2.0, member(*m));
                        cmd.arg(score).arg(&m);
                        match model.get(&m).copied() {
                            Some(old) => {
                                let update = match flag {
                                    "NX" => false,
                                    "GT" => score > old,
                                    "LT" => score < old,
                                    _ => true,
                                };
                                if update && score != old {
                                    model.insert(m, score);
                                    changed += 1;
                                }
                            }
                            None if flag != "XX" => {
                                model.insert(m, score);
                                added += 1;
                            }
                            None => {}
                        }
                    }
                    let got: i64 = cmd.query(&mut *con).unwrap();
                    let want = if flag == "CH" { added + changed } else { added };
                    prop_assert_eq!(got, want);
                }
                Op::Incr(by, m) => {
                    let (by, m) = (by as f64 / 4.0, member(m));
                    let got: f64 = con.zincr("z", &m, by).unwrap();
                    let new = model.get(&m).copied().unwrap_or(0.0) + by;
                    model.insert(m, new);
                    prop_assert_eq!(got, new);
                }
                Op::Rem(ms) => {
                    let ms: Vec<String> = ms.into_iter().map(member).collect();
                    let want = ms.iter().filter(|m| model.remove(*m).is_some()).count();
                    let got: usize = con.zrem("z", &ms).unwrap();
                    prop_assert_eq!(got, want);
                }
                Op::Pop(max, n) => {
                    let got: Vec<(String, f64)> =
                        redis::cmd(if max { "ZPOPMAX" } else { "ZPOPMIN" })
                            .arg("z")
                            .arg(n)
                            .query(&mut *con)
                            .unwrap();
                    let mut order = ordered(&model);
                    if max {
                        order.reverse();
                    }
                    order.truncate(n);
                    for (m, _) in &order {
                        model.remove(m);
                    }
                    prop_assert_eq!(got, order);
                }
                Op::RemByScore(a, b) => {
                    let (min, max) = (a as f64 / 2.0, b as f64 / 2.0);
                    let got: usize = con.zrembyscore("z", min, max).unwrap();
                    let before = model.len();
                    model.retain(|_, s| *s < min || *s > max);
                    prop_assert_eq!(got, before - model.len());
                }
                Op::RemByRank(a, b) => {
                    let got: usize = con.zremrangebyrank("z", a as isize, b as isize).unwrap();
                    let order = ordered(&model);
                    let len = order.len() as i64;
                    let norm = |i: i64| if i < 0 { (i + len).max(0) } else { i };
                    let (start, stop) = (norm(a as i64), norm(b as i64).min(len - 1));
                    let mut removed = 0;
                    if start <= stop && start < len && !(b < 0 && b as i64 + len < 0) {
                        for (m, _) in &order[start as usize..=stop as usize] {
                            model.remove(m);
                            removed += 1;
                        }
                    }
                    prop_assert_eq!(got, removed);
                }
            }
        }
        let want = ordered(&model);
        prop_assert_eq!(all(&mut con, "z"), want.clone());
        let card: usize = con.zcard("z").unwrap();
        prop_assert_eq!(card, want.len());
        for (rank, (m, s)) in want.iter().enumerate() {
            let r: Option<usize> = con.zrank("z", m).unwrap();
            prop_assert_eq!(r, Some(rank));
            let score: Option<f64> = con.zscore("z", m).unwrap();
            prop_assert_eq!(score, Some(*s));
        }
        let in_range: Vec<String> = con.zrangebyscore("z", -1.0, 1.0).unwrap();
        let want_range: Vec<String> = want
            .iter()
            .filter(|(_, s)| (-1.0..=1.0).contains(s))
            .map(|(m, _)| m.clone())
            .collect();
        prop_assert_eq!(in_range, want_range);
        Ok(())
    });
    result.unwrap();
}

fn encoding(con: &mut redis::Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(con)
        .unwrap()
}

#[test]
fn encodings_convert_at_the_limits_and_survive_kill9() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.zadd_multiple("small", &[(1, "a"), (2, "b")]).unwrap();
    assert_eq!(encoding(&mut con, "small"), "listpack");
    let _: () = con.zadd("small", "x".repeat(65), 3).unwrap();
    assert_eq!(encoding(&mut con, "small"), "skiplist");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("zset-max-ziplist-entries")
        .arg(3)
        .query(&mut con)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("zset-max-listpack-entries")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, ["zset-max-listpack-entries", "3"]);
    let _: () = con
        .zadd_multiple("four", &[(1, "a"), (2, "b"), (3, "c"), (4, "d")])
        .unwrap();
    assert_eq!(encoding(&mut con, "four"), "skiplist");
    // Many members and a checkpoint, then more, then kill -9.
    let mut model = Model::new();
    for round in 0..3 {
        let entries: Vec<(f64, String)> = (0..400)
            .map(|i| ((i * 7 % 101) as f64 + round as f64 / 10.0, format!("m{i}")))
            .collect();
        let _: () = con.zadd_multiple("big", &entries).unwrap();
        for (s, m) in entries {
            model.insert(m, s);
        }
        let popped: Vec<(String, f64)> = redis::cmd("ZPOPMIN")
            .arg("big")
            .arg(5)
            .query(&mut con)
            .unwrap();
        for (m, _) in popped {
            model.remove(&m);
        }
        if round == 1 {
            let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
        }
    }
    let _: () = con.zincr("big", "m7", 0.5).unwrap();
    *model.get_mut("m7").unwrap() += 0.5;
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    assert_eq!(all(&mut con, "big"), ordered(&model));
    assert_eq!(
        all(&mut con, "small"),
        vec![("a".into(), 1.0), ("b".into(), 2.0), ("x".repeat(65), 3.0)]
    );
}

#[test]
fn cold_sorted_sets_read_back_exactly() {
    const KEYS: u64 = 1_500;
    let server = TestServer::start_with(&["--maxmemory", "4mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    let member = |k: u64, m: u64| format!("{k}:{m}:{}", "z".repeat(100));
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(32) {
        let mut pipe = redis::pipe();
        for &k in chunk {
            let entries: Vec<(f64, String)> =
                (0..20).map(|m| (m as f64 * 1.5, member(k, m))).collect();
            pipe.cmd("ZADD").arg(key(k)).arg(entries).ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }
    let cold: Vec<u64> = (0..KEYS).filter(|&k| on_disk(&mut con, &key(k))).collect();
    assert!(
        cold.len() > KEYS as usize / 3,
        "{} cold sorted sets",
        cold.len()
    );
    let kind: String = redis::cmd("TYPE")
        .arg(key(cold[0]))
        .query(&mut con)
        .unwrap();
    assert_eq!(kind, "zset");
    let want = |k: u64| -> Vec<(String, f64)> {
        (0..20).map(|m| (member(k, m), m as f64 * 1.5)).collect()
    };
    for &k in &cold[..50] {
        assert_eq!(all(&mut con, &key(k)), want(k));
    }
    let k = cold[60];
    let _: () = con.zadd(key(k), "added", -1).unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(
        dir,
        &["--maxmemory", "4mb", "--maxmemory-policy", "tiered"],
        None,
        READY,
    );
    let mut con = server.client();
    let mut expected = vec![("added".to_string(), -1.0)];
    expected.extend(want(k));
    assert_eq!(all(&mut con, &key(k)), expected);
}

#[test]
fn zscan_returns_every_member_of_a_skiplist() {
    let server = TestServer::start();
    let mut con = server.client();
    let entries: Vec<(f64, String)> = (0..3000).map(|i| (i as f64, format!("e{i}"))).collect();
    for chunk in entries.chunks(500) {
        let _: () = con.zadd_multiple("z", chunk).unwrap();
    }
    assert_eq!(encoding(&mut con, "z"), "skiplist");
    let mut seen = BTreeMap::new();
    let mut cursor = 0u64;
    for calls in 0.. {
        assert!(calls < 1000, "ZSCAN does not finish");
        let (next, batch): (u64, Vec<(String, f64)>) = redis::cmd("ZSCAN")
            .arg("z")
            .arg(cursor)
            .query(&mut con)
            .unwrap();
        seen.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let want: BTreeMap<String, f64> = entries.into_iter().map(|(s, m)| (m, s)).collect();
    assert_eq!(seen, want);
    // A rank range near the end of a big set answers from positions.
    let last: Vec<String> = con.zrevrange("z", 0, 2).unwrap();
    assert_eq!(last, ["e2999", "e2998", "e2997"]);
}

#[test]
fn blocking_pops_are_woken_by_zadd_from_another_connection() {
    let server = TestServer::start();
    let mut con = server.client();
    let blocked = |con: &mut redis::Connection| info_u64(con, "clients", "blocked_clients");
    let mut waiter = server.raw();
    waiter.send(&["BZPOPMIN", "none", "z", "0"]);
    wait_until("the client to block", || blocked(&mut con) == 1);
    let mut second = server.raw();
    second.send(&["BZMPOP", "0", "1", "z", "MAX", "COUNT", "2"]);
    wait_until("the second client to block", || blocked(&mut con) == 2);
    let _: () = con
        .zadd_multiple("z", &[(1, "a"), (2, "b"), (3, "c")])
        .unwrap();
    assert_eq!(waiter.read(), Reply::Array(vec![b("z"), b("a"), b("1")]));
    assert_eq!(
        second.read(),
        Reply::Array(vec![
            b("z"),
            Reply::Array(vec![
                Reply::Array(vec![b("c"), b("3")]),
                Reply::Array(vec![b("b"), b("2")]),
            ])
        ])
    );
    let exists: bool = con.exists("z").unwrap();
    assert!(!exists);
    assert_eq!(waiter.cmd(&["BZPOPMAX", "z", "0.05"]), Reply::NullArray);
}
