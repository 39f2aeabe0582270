//! MULTI/EXEC/DISCARD/WATCH/UNWATCH against the real server: Redis'
//! replies and errors, atomicity seen by an observer while clients on
//! several threads run transactions over keys on different shards, WATCH
//! races, and a large transaction cut by `kill -9` coming back whole or
//! not at all.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use redis::Commands;

fn queued() -> Reply {
    Reply::simple("QUEUED")
}

#[test]
fn queued_commands_run_in_order_with_their_own_errors() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SET", "a", "1"]), queued());
    assert_eq!(raw.cmd(&["INCR", "a"]), queued());
    assert_eq!(raw.cmd(&["LPUSH", "a", "x"]), queued());
    assert_eq!(raw.cmd(&["GET", "a"]), queued());
    assert_eq!(
        raw.cmd(&["EXEC"]),
        Reply::Array(vec![
            ok(),
            i(2),
            e("WRONGTYPE Operation against a key holding the wrong kind of value"),
            b("2"),
        ])
    );
    assert_eq!(raw.cmd(&["EXEC"]), e("ERR EXEC without MULTI"));
    assert_eq!(raw.cmd(&["DISCARD"]), e("ERR DISCARD without MULTI"));
    // An empty transaction answers an empty array.
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["MULTI"]), e("ERR MULTI calls can not be nested"));
    assert_eq!(
        raw.cmd(&["WATCH", "a"]),
        e("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(raw.cmd(&["EXEC"]), Reply::Array(vec![]));
}

#[test]
fn an_error_while_queuing_discards_the_transaction() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SET", "k", "v"]), queued());
    assert_eq!(
        raw.cmd(&["SET", "k"]),
        e("ERR wrong number of arguments for 'set' command")
    );
    assert!(
        raw.cmd(&["NOSUCH", "x"])
            .as_text()
            .starts_with("ERR unknown command 'NOSUCH'")
    );
    assert_eq!(
        raw.cmd(&["SAVE"]),
        e("ERR Command not allowed inside a transaction")
    );
    assert_eq!(
        raw.cmd(&["EXEC"]),
        e("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(raw.cmd(&["EXISTS", "k"]), i(0), "nothing ran");
    // DISCARD forgets the queue.
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SET", "k", "v"]), queued());
    assert_eq!(raw.cmd(&["DISCARD"]), ok());
    assert_eq!(raw.cmd(&["EXISTS", "k"]), i(0));
    // CLIENT LIST shows the queue.
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SET", "k", "v"]), queued());
    let mut other = server.client();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut other).unwrap();
    assert!(
        list.contains("flags=x") && list.contains("multi=1"),
        "{list}"
    );
    assert_eq!(raw.cmd(&["DISCARD"]), ok());
}

#[test]
fn a_queue_over_the_query_buffer_limit_fails_the_transaction() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "client-query-buffer-limit", "1mb"]),
        ok()
    );
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    let value = "v".repeat(200_000);
    let mut queued_count = 0;
    loop {
        match raw.cmd(&["SET", "big", &value]) {
            Reply::Simple(text) if text == "QUEUED" => queued_count += 1,
            Reply::Error(text) => {
                assert!(text.contains("client-query-buffer-limit"), "{text}");
                break;
            }
            other => panic!("{other:?}"),
        }
        assert!(queued_count < 10, "the queue was never refused");
    }
    assert_eq!(queued_count, 5, "1 MB holds five 200 KB commands");
    assert_eq!(
        raw.cmd(&["EXEC"]),
        e("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(raw.cmd(&["EXISTS", "big"]), i(0), "nothing ran");
    assert_eq!(raw.cmd(&["PING"]), Reply::simple("PONG"));
}

#[test]
fn database_wide_commands_and_blocking_commands_inside_exec() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "old", "1"]), ok());
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    for args in [
        &["SET", "x", "1"][..],
        &["DBSIZE"],
        &["KEYS", "*"],
        &["INFO", "keyspace"],
        &["FLUSHALL"],
        &["DBSIZE"],
        &["BLPOP", "nothing", "0"],
        &["SORT", "nothing", "BY", "w_*"],
        &["SET", "after", "1"],
    ] {
        assert_eq!(raw.cmd(args), queued());
    }
    let replies = raw.cmd(&["EXEC"]);
    let replies = replies.as_array();
    assert_eq!(replies[0], ok());
    assert_eq!(replies[1], i(2));
    let mut keys: Vec<String> = replies[2].as_array().iter().map(Reply::as_text).collect();
    keys.sort();
    assert_eq!(keys, ["old", "x"]);
    assert!(replies[3].as_text().starts_with("# Keyspace"));
    assert_eq!(replies[4], ok());
    assert_eq!(replies[5], i(0));
    assert_eq!(replies[6], Reply::NullArray, "BLPOP does not wait in EXEC");
    assert_eq!(replies[7], Reply::Array(vec![]));
    assert_eq!(replies[8], ok());
    assert_eq!(raw.cmd(&["DBSIZE"]), i(1));
}

#[test]
fn watch_fails_exec_after_any_change_and_not_otherwise() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let mut other = server.client();
    let transaction = |raw: &mut Raw| {
        assert_eq!(raw.cmd(&["MULTI"]), ok());
        assert_eq!(raw.cmd(&["INCR", "n"]), queued());
        raw.cmd(&["EXEC"])
    };
    // Untouched: runs.
    assert_eq!(raw.cmd(&["WATCH", "n", "m"]), ok());
    assert_eq!(transaction(&mut raw), Reply::Array(vec![i(1)]));
    // Written by another client: fails, and the key is unwatched after.
    assert_eq!(raw.cmd(&["WATCH", "n"]), ok());
    let _: () = other.set("n", 10).unwrap();
    assert_eq!(transaction(&mut raw), Reply::NullArray);
    assert_eq!(transaction(&mut raw), Reply::Array(vec![i(11)]));
    // Deleted, expired by EXPIRE, flushed: each fails.
    for change in [
        &["DEL", "n"][..],
        &["PEXPIRE", "n", "1"],
        &["FLUSHDB"],
        &["SWAPDB", "0", "1"],
    ] {
        let _: () = other.set("n", 1).unwrap();
        assert_eq!(raw.cmd(&["WATCH", "n"]), ok());
        let _: redis::Value = redis::cmd(change[0])
            .arg(&change[1..])
            .query(&mut other)
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(transaction(&mut raw), Reply::NullArray, "{change:?}");
    }
    let _: () = redis::cmd("FLUSHALL").query(&mut other).unwrap();
    // A watched key that expires by itself fails EXEC.
    let _: () = other.pset_ex("n", 1, 50).unwrap();
    assert_eq!(raw.cmd(&["WATCH", "n"]), ok());
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(transaction(&mut raw), Reply::NullArray);
    // SMOVE of a member the destination already has leaves the
    // destination untouched (Redis' unit/type/set test): EXEC runs.
    let _: () = redis::cmd("SADD")
        .arg("src")
        .arg("a")
        .query(&mut other)
        .unwrap();
    let _: () = redis::cmd("SADD")
        .arg("n")
        .arg("a")
        .query(&mut other)
        .unwrap();
    assert_eq!(raw.cmd(&["WATCH", "n"]), ok());
    let moved: i64 = redis::cmd("SMOVE")
        .arg("src")
        .arg("n")
        .arg("a")
        .query(&mut other)
        .unwrap();
    assert_eq!(moved, 1);
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["SCARD", "n"]), queued());
    assert_eq!(raw.cmd(&["EXEC"]), Reply::Array(vec![i(1)]), "SMOVE into n");
    let _: () = redis::cmd("DEL").arg("n").query(&mut other).unwrap();
    // UNWATCH forgets.
    assert_eq!(raw.cmd(&["WATCH", "n"]), ok());
    assert_eq!(raw.cmd(&["UNWATCH"]), ok());
    let _: () = other.set("n", 1).unwrap();
    assert_eq!(transaction(&mut raw), Reply::Array(vec![i(2)]));
}

#[test]
fn watch_ignores_values_leaving_ram() {
    let server = TestServer::start_with(&["--maxmemory", "2mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    let mut raw = server.raw();
    let _: () = con.set("w", "x".repeat(100_000)).unwrap();
    assert_eq!(raw.cmd(&["WATCH", "w"]), ok());
    // Push the watched value out to disk with other writes.
    let mut n = 0;
    while !on_disk(&mut con, "w") {
        let _: () = con.set(format!("fill{n}"), "y".repeat(100_000)).unwrap();
        n += 1;
        assert!(n < 1_000, "the value never left RAM");
    }
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(raw.cmd(&["STRLEN", "w"]), queued());
    assert_eq!(raw.cmd(&["EXEC"]), Reply::Array(vec![i(100_000)]));
}

/// Clients on several threads transfer between keys on different shards
/// in transactions while an observer reads both keys atomically: the sum
/// never changes, and the counters agree at the end.
#[test]
fn transactions_are_atomic_across_shards_and_threads() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 300;
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.mset(&[("acct:a", 1000), ("acct:b", 1000)]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let mut con = server.client();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let (a, b): (i64, i64) = con.mget(&["acct:a", "acct:b"]).unwrap();
                assert_eq!(a + b, 2000, "a transfer was seen half done");
                let (x, y): (i64, i64) = redis::pipe()
                    .cmd("GET")
                    .arg("inc:x")
                    .cmd("GET")
                    .arg("inc:y")
                    .atomic()
                    .query(&mut con)
                    .map(|(x, y): (Option<i64>, Option<i64>)| (x.unwrap_or(0), y.unwrap_or(0)))
                    .unwrap();
                assert_eq!(x, y, "one INCR of a transaction was seen alone");
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let mut con = server.client();
            std::thread::spawn(move || {
                for n in 0..PER_WRITER {
                    let (from, to) = if (n + w) % 2 == 0 {
                        ("acct:a", "acct:b")
                    } else {
                        ("acct:b", "acct:a")
                    };
                    let _: () = redis::pipe()
                        .atomic()
                        .decr(from, 7)
                        .ignore()
                        .incr(to, 7)
                        .ignore()
                        .incr("inc:x", 1)
                        .ignore()
                        .incr("inc:y", 1)
                        .ignore()
                        .query(&mut con)
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads = observer.join().unwrap();
    assert!(reads > 0);
    let (x, y): (i64, i64) = con.mget(&["inc:x", "inc:y"]).unwrap();
    assert_eq!(
        (x, y),
        ((WRITERS * PER_WRITER) as i64, (WRITERS * PER_WRITER) as i64)
    );
}

/// The optimistic-locking loop clients write with WATCH: concurrent
/// increments through GET + MULTI/SET/EXEC lose none.
#[test]
fn watch_races_between_threads_lose_no_update() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 100;
    let server = TestServer::start();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let mut raw = server.raw();
            std::thread::spawn(move || {
                let mut retries = 0;
                for _ in 0..PER_THREAD {
                    // Bounded: a WATCH that always failed would loop for ever.
                    for attempt in 0.. {
                        assert!(attempt < 10_000, "WATCH never let an EXEC through");
                        assert_eq!(raw.cmd(&["WATCH", "counter"]), ok());
                        let current = match raw.cmd(&["GET", "counter"]) {
                            Reply::NullBulk => 0,
                            reply => reply.as_text().parse::<i64>().unwrap(),
                        };
                        assert_eq!(raw.cmd(&["MULTI"]), ok());
                        let next = (current + 1).to_string();
                        assert_eq!(raw.cmd(&["SET", "counter", &next]), queued());
                        match raw.cmd(&["EXEC"]) {
                            Reply::NullArray => retries += 1,
                            reply => {
                                assert_eq!(reply, Reply::Array(vec![ok()]));
                                break;
                            }
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let retries: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let mut con = server.client();
    let counter: usize = con.get("counter").unwrap();
    assert_eq!(counter, THREADS * PER_THREAD, "after {retries} retries");
}

/// A transaction of many large writes cut by `kill -9` while its group is
/// being written (the kill comes once the log has grown by 1 MB of the
/// group's 8 MB) is all there or not there at all after the restart. The
/// test demands that the kill really cut a commit on disk (strata-check
/// sees a torn tail) in some round: a kill before or after the write
/// proves nothing about a partial commit, and the old version of this
/// test never cut one.
#[test]
fn a_transaction_cut_by_kill_9_is_whole_or_absent() {
    const KEYS: usize = 400;
    const ROUNDS: usize = 8;
    let mut cuts = 0;
    for round in 0..ROUNDS {
        let server = TestServer::start();
        let mut raw = server.raw();
        let value = "v".repeat(20_000);
        let mut wire = Raw::encode(&[b"MULTI"]);
        for k in 0..KEYS {
            let key = format!("t{k}");
            wire.extend(Raw::encode(&[b"SET", key.as_bytes(), value.as_bytes()]));
        }
        std::io::Write::write_all(&mut raw.stream, &wire).unwrap();
        assert_eq!(raw.read(), ok());
        for _ in 0..KEYS {
            assert_eq!(raw.read(), queued());
        }
        let before = newest_segment_bytes(&server.dir);
        raw.send(&["EXEC"]);
        let dir = kill9_while_the_log_grows(server, before, 1 << 20);
        cuts += has_torn_tail(&dir) as usize;
        let server = TestServer::spawn(dir, &[], None, READY);
        let mut con = server.client();
        let present: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert!(
            present == 0 || present == KEYS,
            "round {round}: {present} keys"
        );
        if present == KEYS {
            let got: String = con.get("t7").unwrap();
            assert_eq!(got, value);
        }
    }
    assert!(cuts > 0, "no round cut a commit in {ROUNDS}");
}

/// A write that changes nothing (SREM or ZREM of absent members, ZADD of
/// a member with its own score, XDEL of
/// absent IDs, XACK of nothing pending, XTRIM that trims nothing, BITFIELD
/// INCRBY that leaves its field as it was) breaks no WATCH
/// and counts as no change, as in Redis: the differential fuzzer found
/// EXEC failing after them.
#[test]
fn writes_that_change_nothing_break_no_watch() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SADD", "s", "a"]);
    r.cmd(&["ZADD", "z", "1", "a"]);
    r.cmd(&["XADD", "x", "1-0", "f", "v"]);
    r.cmd(&["XGROUP", "CREATE", "x", "g", "0"]);
    r.cmd(&["SET", "b", "h"]);
    let changes = |r: &mut Raw| -> String {
        let info = r.cmd(&["INFO", "persistence"]).as_text();
        info_field(&info, "rdb_changes_since_last_save")
    };
    let before = changes(&mut r);
    // BITFIELD INCRBY that leaves the field as it was (by 0, or round to
    // the same value) is no change either, as its SET of the same value.
    let unchanged_field = || Reply::Array(vec![i(104)]);
    let no_ops: &[(&[&str], Reply)] = &[
        (&["SREM", "s", "absent"], i(0)),
        (&["SADD", "s", "a"], i(0)),
        (&["ZREM", "z", "absent"], i(0)),
        (&["ZADD", "z", "1", "a"], i(0)),
        (&["XDEL", "x", "9-9"], i(0)),
        (&["XACK", "x", "g", "1-0"], i(0)),
        (&["XTRIM", "x", "MAXLEN", "5"], i(0)),
        (
            &["BITFIELD", "b", "INCRBY", "u8", "#0", "0"],
            unchanged_field(),
        ),
        (
            &["BITFIELD", "b", "INCRBY", "u8", "#0", "256"],
            unchanged_field(),
        ),
    ];
    for (command, expected) in no_ops {
        let key = command[1];
        assert_eq!(r.cmd(&["WATCH", key]), ok());
        let reply = r.cmd(command);
        assert_eq!(&reply, expected, "{command:?}");
        assert_eq!(r.cmd(&["MULTI"]), ok());
        r.cmd(&["PING"]);
        assert_eq!(
            r.cmd(&["EXEC"]),
            Reply::Array(vec![Reply::simple("PONG")]),
            "{command:?} broke the WATCH"
        );
    }
    assert_eq!(changes(&mut r), before);
    // A write that changes something still breaks it.
    r.cmd(&["WATCH", "s"]);
    r.cmd(&["SREM", "s", "a"]);
    r.cmd(&["MULTI"]);
    r.cmd(&["PING"]);
    assert_eq!(r.cmd(&["EXEC"]), Reply::NullArray);
}
