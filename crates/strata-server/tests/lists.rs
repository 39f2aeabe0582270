//! Lists against the real server: kept across `kill -9` and checkpoints,
//! a randomized model of the list commands, cold lists read back from
//! disk with TYPE known without reading, generic key commands on lists,
//! and `kill -9` right after pipelined list load losing no acknowledged
//! change.
//! Replies themselves (errors, RESP2 and RESP3 reply types) are compared
//! with redis-server's in `redis_replies.rs`.

mod common;

use std::collections::{BTreeMap, VecDeque};

use common::*;
use redis::Commands;

type Model = BTreeMap<String, VecDeque<String>>;

fn lrange(con: &mut redis::Connection, key: &str) -> Vec<String> {
    con.lrange(key, 0, -1).unwrap()
}

fn check(con: &mut redis::Connection, model: &Model) {
    for (key, list) in model {
        assert_eq!(lrange(con, key), Vec::from(list.clone()), "list {key}");
    }
}

#[test]
fn lists_survive_kill9_and_checkpoints() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut model = Model::new();
    let write = |con: &mut redis::Connection, model: &mut Model, round: u32| {
        for k in 0..40 {
            let key = format!("l{k}");
            let list = model.entry(key.clone()).or_default();
            for e in 0..(k % 5 + 2) {
                let element = format!("r{round}-{k}-{e}");
                if e % 2 == 0 {
                    let _: () = con.rpush(&key, &element).unwrap();
                    list.push_back(element);
                } else {
                    let _: () = con.lpush(&key, &element).unwrap();
                    list.push_front(element);
                }
            }
            if k % 3 == 0 {
                let popped: Option<String> = con.lpop(&key, None).unwrap();
                assert_eq!(popped, list.pop_front());
            }
            if k % 4 == 0 {
                let _: () = con.lset(&key, 0, format!("set-{round}")).unwrap();
                list[0] = format!("set-{round}");
            }
        }
    };
    write(&mut con, &mut model, 1);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    write(&mut con, &mut model, 2);
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    check(&mut con, &model);
    // And once more from a checkpoint written with lists in it.
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    check(&mut con, &model);
    let kind: String = redis::cmd("TYPE").arg("l3").query(&mut con).unwrap();
    assert_eq!(kind, "list");
}

#[derive(Clone, Debug)]
enum Op {
    Push(bool, u8, Vec<u8>),
    Pop(bool, u8, Option<u8>),
    Set(u8, i8, u8),
    Insert(u8, bool, u8, u8),
    Rem(u8, i8, u8),
    Trim(u8, i8, i8),
    Move(u8, u8, bool, bool),
    Mpop(Vec<u8>, bool, u8),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let key = 0u8..3;
    let element = 0u8..4;
    prop_oneof![
        4 => (any::<bool>(), key.clone(), proptest::collection::vec(element.clone(), 1..4))
            .prop_map(|(left, k, e)| Op::Push(left, k, e)),
        2 => (any::<bool>(), key.clone(), proptest::option::of(0u8..4))
            .prop_map(|(left, k, c)| Op::Pop(left, k, c)),
        1 => (key.clone(), -4i8..4, element.clone()).prop_map(|(k, i, e)| Op::Set(k, i, e)),
        1 => (key.clone(), any::<bool>(), element.clone(), element.clone())
            .prop_map(|(k, a, p, e)| Op::Insert(k, a, p, e)),
        1 => (key.clone(), -2i8..3, element.clone()).prop_map(|(k, c, e)| Op::Rem(k, c, e)),
        1 => (key.clone(), -5i8..5, -5i8..5).prop_map(|(k, s, t)| Op::Trim(k, s, t)),
        1 => (key.clone(), key.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(s, d, f, t)| Op::Move(s, d, f, t)),
        1 => (proptest::collection::vec(key.clone(), 1..3), any::<bool>(), 1u8..3)
            .prop_map(|(k, l, c)| Op::Mpop(k, l, c)),
    ]
}

/// A Redis index into a list of `len`, or `None` out of range.
fn index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { i + len as i64 } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// Every list command's reply and effect against a plain deque model,
/// random operations over three keys, then the whole state.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn list_commands_behave_like_a_model() {
    use proptest::test_runner::{Config, TestRunner};
    // (The list type's own model test crosses its nodes at every step;
    // this one checks the commands' replies and effects.)
    let server = TestServer::start();
    let raw = std::cell::RefCell::new(server.raw());
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let name = |k: u8| format!("k{k}");
    let el = |e: u8| format!("e{e}");
    let bulks = |items: &[String]| Reply::Array(items.iter().map(|i| b(i)).collect());
    let result = runner.run(&proptest::collection::vec(op(), 1..40), |ops| {
        let mut raw = raw.borrow_mut();
        raw.cmd(&["FLUSHALL"]);
        let mut state: BTreeMap<u8, VecDeque<String>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Push(left, k, elements) => {
                    let elements: Vec<String> = elements.into_iter().map(el).collect();
                    let mut args = vec![if left { "LPUSH" } else { "RPUSH" }.to_string(), name(k)];
                    args.extend(elements.iter().cloned());
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let list = state.entry(k).or_default();
                    for e in elements {
                        if left {
                            list.push_front(e)
                        } else {
                            list.push_back(e)
                        }
                    }
                    assert_eq!(raw.cmd(&args), i(list.len() as i64), "{args:?}");
                }
                Op::Pop(left, k, count) => {
                    let cmd = if left { "LPOP" } else { "RPOP" };
                    let got = match count {
                        Some(c) => raw.cmd(&[cmd, &name(k), &c.to_string()]),
                        None => raw.cmd(&[cmd, &name(k)]),
                    };
                    let list = state.entry(k).or_default();
                    let want = if list.is_empty() {
                        match count {
                            Some(_) => Reply::NullArray,
                            None => Reply::NullBulk,
                        }
                    } else {
                        let popped: Vec<String> = (0..count.unwrap_or(1))
                            .map_while(|_| {
                                if left {
                                    list.pop_front()
                                } else {
                                    list.pop_back()
                                }
                            })
                            .collect();
                        match count {
                            Some(_) => bulks(&popped),
                            None => b(&popped[0]),
                        }
                    };
                    assert_eq!(got, want, "{cmd} {} {count:?}", name(k));
                }
                Op::Set(k, at, x) => {
                    let list = state.entry(k).or_default();
                    let got = raw.cmd(&["LSET", &name(k), &at.to_string(), &el(x)]);
                    if list.is_empty() {
                        assert_eq!(got, e("ERR no such key"));
                    } else if let Some(at) = index(at as i64, list.len()) {
                        list[at] = el(x);
                        assert_eq!(got, ok());
                    } else {
                        assert_eq!(got, e("ERR index out of range"));
                    }
                }
                Op::Insert(k, after, pivot, e) => {
                    let list = state.entry(k).or_default();
                    let got = raw.cmd(&[
                        "LINSERT",
                        &name(k),
                        if after { "AFTER" } else { "BEFORE" },
                        &el(pivot),
                        &el(e),
                    ]);
                    let want = if list.is_empty() {
                        0
                    } else {
                        match list.iter().position(|x| *x == el(pivot)) {
                            Some(at) => {
                                list.insert(at + usize::from(after), el(e));
                                list.len() as i64
                            }
                            None => -1,
                        }
                    };
                    assert_eq!(got, i(want));
                }
                Op::Rem(k, count, e) => {
                    let list = state.entry(k).or_default();
                    let mut at: Vec<usize> =
                        (0..list.len()).filter(|&i| list[i] == el(e)).collect();
                    if count < 0 {
                        at.reverse();
                    }
                    if count != 0 {
                        at.truncate(count.unsigned_abs() as usize);
                    }
                    at.sort_unstable();
                    for &i in at.iter().rev() {
                        list.remove(i);
                    }
                    let got = raw.cmd(&["LREM", &name(k), &count.to_string(), &el(e)]);
                    assert_eq!(got, i(at.len() as i64));
                }
                Op::Trim(k, start, stop) => {
                    let list = state.entry(k).or_default();
                    let len = list.len() as i64;
                    let s = if start < 0 {
                        (start as i64 + len).max(0)
                    } else {
                        start as i64
                    };
                    let t = if stop < 0 {
                        stop as i64 + len
                    } else {
                        (stop as i64).min(len - 1)
                    };
                    let kept: VecDeque<String> = if s <= t && s < len {
                        list.iter()
                            .skip(s as usize)
                            .take((t - s + 1) as usize)
                            .cloned()
                            .collect()
                    } else {
                        VecDeque::new()
                    };
                    *list = kept;
                    let got = raw.cmd(&["LTRIM", &name(k), &start.to_string(), &stop.to_string()]);
                    assert_eq!(got, ok());
                }
                Op::Move(s, d, from_left, to_left) => {
                    let got = raw.cmd(&[
                        "LMOVE",
                        &name(s),
                        &name(d),
                        if from_left { "LEFT" } else { "RIGHT" },
                        if to_left { "LEFT" } else { "RIGHT" },
                    ]);
                    let source = state.entry(s).or_default();
                    let moved = if from_left {
                        source.pop_front()
                    } else {
                        source.pop_back()
                    };
                    match moved {
                        Some(e) => {
                            let dest = state.entry(d).or_default();
                            if to_left {
                                dest.push_front(e.clone())
                            } else {
                                dest.push_back(e.clone())
                            }
                            assert_eq!(got, b(&e));
                        }
                        None => assert_eq!(got, Reply::NullBulk),
                    }
                }
                Op::Mpop(keys, left, count) => {
                    let mut args = vec!["LMPOP".to_string(), keys.len().to_string()];
                    args.extend(keys.iter().map(|&k| name(k)));
                    args.push(if left { "LEFT" } else { "RIGHT" }.into());
                    args.extend(["COUNT".into(), count.to_string()]);
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let got = raw.cmd(&args);
                    let first = keys
                        .iter()
                        .copied()
                        .find(|k| state.get(k).is_some_and(|l| !l.is_empty()));
                    let want = match first {
                        Some(k) => {
                            let list = state.get_mut(&k).expect("found");
                            let popped: Vec<String> = (0..count)
                                .map_while(|_| {
                                    if left {
                                        list.pop_front()
                                    } else {
                                        list.pop_back()
                                    }
                                })
                                .collect();
                            Reply::Array(vec![b(&name(k)), bulks(&popped)])
                        }
                        None => Reply::NullArray,
                    };
                    assert_eq!(got, want, "{args:?}");
                }
            }
            state.retain(|_, list| !list.is_empty());
        }
        for k in 0..3u8 {
            let want: Vec<Reply> = state
                .get(&k)
                .map(|l| l.iter().map(|e| b(e)).collect())
                .unwrap_or_default();
            assert_eq!(
                raw.cmd(&["LRANGE", &name(k), "0", "-1"]),
                Reply::Array(want)
            );
            let exists = raw.cmd(&["EXISTS", &name(k)]);
            assert_eq!(exists, i(state.contains_key(&k) as i64), "{}", name(k));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn cold_lists_read_back_and_type_needs_no_disk_read() {
    const KEYS: u64 = 2_000;
    let server = TestServer::start_with(&["--maxmemory", "4mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    let element = |k: u64, e: u64| format!("{k}:{e}:{}", "x".repeat(200));
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(32) {
        let mut pipe = redis::pipe();
        for &k in chunk {
            let elements: Vec<String> = (0..10).map(|e| element(k, e)).collect();
            pipe.cmd("RPUSH").arg(key(k)).arg(elements).ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }
    let cold: Vec<u64> = (0..KEYS).filter(|&k| on_disk(&mut con, &key(k))).collect();
    assert!(cold.len() > KEYS as usize / 3, "{} cold lists", cold.len());
    let reads = info_u64(&mut con, "tiering", "disk_reads");
    for &k in &cold[..50] {
        let kind: String = redis::cmd("TYPE").arg(key(k)).query(&mut con).unwrap();
        assert_eq!(kind, "list");
    }
    assert_eq!(
        info_u64(&mut con, "tiering", "disk_reads"),
        reads,
        "TYPE read the disk"
    );
    for &k in &cold[..100] {
        let got: String = con.lindex(key(k), 7).unwrap();
        assert_eq!(got, element(k, 7));
    }
    assert!(info_u64(&mut con, "tiering", "disk_reads") > reads);
    // A cold list changed: read in, changed, its change logged.
    let k = cold[150];
    let _: () = con.rpush(key(k), "tail").unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(
        dir,
        &["--maxmemory", "4mb", "--maxmemory-policy", "tiered"],
        None,
        READY,
    );
    let mut con = server.client();
    for k in (0..KEYS).step_by(7) {
        let mut want: Vec<String> = (0..10).map(|e| element(k, e)).collect();
        if k == cold[150] {
            want.push("tail".into());
        }
        assert_eq!(lrange(&mut con, &key(k)), want, "{}", key(k));
    }
    let got: Vec<String> = con.lrange(key(cold[150]), -1, -1).unwrap();
    assert_eq!(got, vec!["tail".to_string()]);
}

#[test]
fn key_commands_work_on_lists() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let elements = |raw: &mut Raw, key: &str| raw.cmd(&["LRANGE", key, "0", "-1"]);
    assert_eq!(raw.cmd(&["RPUSH", "a", "1", "2", "3"]), i(3));
    let abc = Reply::Array(vec![b("1"), b("2"), b("3")]);
    assert_eq!(raw.cmd(&["COPY", "a", "b"]), i(1));
    assert_eq!(elements(&mut raw, "b"), abc);
    assert_eq!(raw.cmd(&["RENAME", "b", "c"]), ok());
    assert_eq!(elements(&mut raw, "c"), abc);
    assert_eq!(raw.cmd(&["MOVE", "c", "1"]), i(1));
    assert_eq!(raw.cmd(&["SELECT", "1"]), ok());
    assert_eq!(elements(&mut raw, "c"), abc);
    assert_eq!(raw.cmd(&["SELECT", "0"]), ok());
    assert_eq!(raw.cmd(&["SET", "s", "x"]), ok());
    assert_eq!(
        raw.cmd(&["SCAN", "0", "TYPE", "list", "COUNT", "100"]),
        Reply::Array(vec![b("0"), Reply::Array(vec![b("a")])])
    );
    assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "a"]), b("listpack"));
    assert!(matches!(raw.cmd(&["MEMORY", "USAGE", "a"]), Reply::Int(n) if n > 0));
    assert_eq!(raw.cmd(&["PEXPIRE", "a", "50"]), i(1));
    wait_until("the list to expire", || raw.cmd(&["EXISTS", "a"]) == i(0));
    assert_eq!(raw.cmd(&["GET", "c"]), Reply::NullBulk);
    assert_eq!(raw.cmd(&["RPUSH", "l", "x"]), i(1));
    assert_eq!(
        raw.cmd(&["GET", "l"]),
        e("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(raw.cmd(&["DEL", "l"]), i(1));
}

#[test]
fn kill9_after_list_load_loses_no_acknowledged_change() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let server = TestServer::start_with(&["--appendfsync", "everysec"]);
    let stop = Arc::new(AtomicBool::new(false));
    let acked_count = Arc::new(AtomicU64::new(0));
    // Each writer pushes numbered elements onto its own list and pops
    // from its head now and then: the acknowledged list is known exactly.
    let writers: Vec<_> = (0..3)
        .map(|writer| {
            let (port, stop, acked_count) = (server.port, stop.clone(), acked_count.clone());
            std::thread::spawn(move || {
                let key = format!("q{writer}");
                let mut acked: VecDeque<String> = VecDeque::new();
                let mut raw = Raw::connect(port);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut wire = Vec::new();
                    let mut batch = Vec::new();
                    for _ in 0..20 {
                        n += 1;
                        let pop = n.is_multiple_of(3);
                        let element = format!("e{n}");
                        let args: Vec<&[u8]> = if pop {
                            vec![b"LPOP", key.as_bytes()]
                        } else {
                            vec![b"RPUSH", key.as_bytes(), element.as_bytes()]
                        };
                        wire.extend(Raw::encode(&args));
                        batch.push((pop, element));
                    }
                    if std::io::Write::write_all(&mut raw.stream, &wire).is_err() {
                        break;
                    }
                    for (pop, element) in batch {
                        match raw.read() {
                            Reply::Int(_) if !pop => acked.push_back(element),
                            Reply::Bulk(got) if pop => {
                                assert_eq!(acked.pop_front().map(String::into_bytes), Some(got));
                            }
                            Reply::NullBulk if pop => assert!(acked.is_empty()),
                            other => panic!("unexpected reply {other:?}"),
                        }
                        acked_count.fetch_add(1, Ordering::Relaxed);
                    }
                }
                (key, acked)
            })
        })
        .collect();
    wait_until("6 000 acknowledged list changes", || {
        acked_count.load(Ordering::Relaxed) >= 6_000
    });
    // The writers stop after a whole batch, so every change they made was
    // acknowledged (one cut mid-batch may or may not have been applied);
    // then the kill, with the last writes still unsynced (`everysec`).
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<(String, VecDeque<String>)> =
        writers.into_iter().map(|w| w.join().unwrap()).collect();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut con = server.client();
    for (key, list) in acked {
        assert_eq!(
            lrange(&mut con, &key),
            Vec::from(list),
            "{key} after kill -9"
        );
    }
}

#[test]
fn deleting_a_big_collection_frees_it_in_the_background() {
    let server = TestServer::start();
    let mut con = server.client();
    let freed = |con: &mut redis::Connection| info_u64(con, "memory", "lazyfreed_objects");
    for chunk in 0..20 {
        let elements: Vec<String> = (0..5000).map(|i| format!("{chunk}:{i}")).collect();
        let _: () = con.rpush("big", elements).unwrap();
    }
    let _: () = con.rpush("small", &["a", "b"]).unwrap();
    let _: () = con.sadd("bigset", (0..1000).collect::<Vec<i32>>()).unwrap();
    let before = freed(&mut con);
    let _: () = con.del("small").unwrap();
    let _: () = con.del("big").unwrap();
    let _: () = redis::cmd("UNLINK").arg("bigset").query(&mut con).unwrap();
    wait_until("the background frees", || freed(&mut con) == before + 2);
    assert_eq!(info_u64(&mut con, "memory", "lazyfree_pending_objects"), 0);
    let exists: usize = con.exists(&["big", "small", "bigset"]).unwrap();
    assert_eq!(exists, 0);
    // CONFIG RESETSTAT starts the count again (Redis' lazyfree tests
    // count from there).
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut con)
        .unwrap();
    assert_eq!(freed(&mut con), 0);
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD: with a tiny threshold every element
/// is stored alone in its node (Redis' plain nodes); pushes, inserts,
/// LSET, LTRIM and pops give the same lists, which survive a restart.
#[test]
fn plain_nodes_behave_like_packed_ones() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_eq!(
        r.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"]),
        Reply::err("ERR argument must be a memory value bigger than 1 and smaller than 4gb")
    );
    assert_eq!(r.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1b"]), ok());
    let big = |c: char| c.to_string().repeat(500);
    for c in ['a', 'b', 'c', 'd'] {
        r.cmd(&["LPUSH", "plain", &big(c)]);
    }
    for c in ['e', 'f'] {
        r.cmd(&["LINSERT", "plain", "AFTER", &big('d'), &big(c)]);
    }
    assert_eq!(r.cmd(&["LSET", "plain", "1", "small"]), ok());
    assert_eq!(r.cmd(&["LTRIM", "plain", "0", "4"]), ok());
    let expected = [big('d'), "small".into(), big('e'), big('c'), big('b')];
    let got = r.cmd(&["LRANGE", "plain", "0", "-1"]);
    assert_eq!(
        got,
        Reply::Array(expected.iter().map(|e| b(e)).collect::<Vec<_>>())
    );
    assert_eq!(r.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]), ok());
    assert_eq!(r.cmd(&["RPUSH", "plain", "x", "y"]), Reply::Int(7));
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    let got = r.cmd(&["LRANGE", "plain", "0", "-1"]);
    let mut all: Vec<Reply> = expected.iter().map(|e| b(e)).collect();
    all.extend([b("x"), b("y")]);
    assert_eq!(got, Reply::Array(all));
}

/// OBJECT ENCODING of a list as Redis 7.2+ answers it: `listpack` while it
/// fits one, `quicklist` past `list-max-listpack-size` (or with an element
/// past the node's byte limit), `listpack` again only once it shrank to
/// half the limit.
#[test]
fn list_encodings_follow_redis_7_2() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let encoding = |raw: &mut Raw, key: &str| raw.cmd(&["OBJECT", "ENCODING", key]).as_text();
    assert_eq!(raw.cmd(&["RPUSH", "l", "a", "b", "c"]), i(3));
    assert_eq!(encoding(&mut raw, "l"), "listpack");
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "list-max-listpack-size", "4"]),
        ok()
    );
    assert_eq!(raw.cmd(&["RPUSH", "l", "d"]), i(4));
    assert_eq!(encoding(&mut raw, "l"), "listpack", "4 entries fit 4");
    assert_eq!(raw.cmd(&["RPUSH", "l", "e"]), i(5));
    assert_eq!(encoding(&mut raw, "l"), "quicklist");
    assert_eq!(raw.cmd(&["RPOP", "l", "2"]).as_array().len(), 2);
    assert_eq!(encoding(&mut raw, "l"), "quicklist", "3 is over half of 4");
    assert_eq!(raw.cmd(&["RPOP", "l"]), b("c"));
    assert_eq!(encoding(&mut raw, "l"), "listpack", "2 is half of 4");
    // A new list built past the limit, and one element past the bytes.
    assert_eq!(raw.cmd(&["RPUSH", "m", "1", "2", "3", "4", "5"]), i(5));
    assert_eq!(encoding(&mut raw, "m"), "quicklist");
    // DEBUG OBJECT shows a quicklist's shape, as Redis 7.2+ does.
    let object = raw.cmd(&["DEBUG", "OBJECT", "m"]).as_text();
    assert!(
        object.contains(" ql_nodes:2 ql_avg_node:2.50 ql_listpack_max:4 ql_compressed:0"),
        "{object}"
    );
    let object = raw.cmd(&["DEBUG", "OBJECT", "l"]).as_text();
    assert!(!object.contains("ql_"), "a listpack has none: {object}");
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "list-max-listpack-size", "-2"]),
        ok()
    );
    let big = "x".repeat(8192);
    assert_eq!(raw.cmd(&["RPUSH", "big", &big]), i(1));
    assert_eq!(encoding(&mut raw, "big"), "quicklist");
    assert_eq!(raw.cmd(&["RPUSH", "small", "hello"]), i(1));
    assert_eq!(encoding(&mut raw, "small"), "listpack");
    // DUMP and RESTORE pick the encoding again, as a load does.
    let dumped = raw.cmd(&["DUMP", "small"]);
    let Reply::Bulk(payload) = dumped else {
        panic!("DUMP: {dumped:?}");
    };
    assert_eq!(raw.cmd_bytes(&[b"RESTORE", b"copy", b"0", &payload]), ok());
    assert_eq!(encoding(&mut raw, "copy"), "listpack");
    // DEBUG DIGEST-VALUE: equal for the copy, zeros for a missing key,
    // another for another value.
    let digests = raw.cmd(&["DEBUG", "DIGEST-VALUE", "small", "copy", "missing", "m"]);
    let digests: Vec<String> = digests.as_array().iter().map(Reply::as_text).collect();
    assert_eq!(digests.len(), 4);
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[2], "0".repeat(40));
    assert_ne!(digests[3], digests[0]);
    assert!(digests.iter().all(|d| d.len() == 40), "{digests:?}");
    // Redis 7.2+ refuses the one rank whose negation overflows.
    assert_eq!(
        raw.cmd(&["LPOS", "l", "a", "RANK", "-9223372036854775808"]),
        e(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        )
    );
    assert_eq!(
        raw.cmd(&["LPOS", "l", "a", "RANK", "-9223372036854775807"]),
        Reply::NullBulk
    );
}
