//! Streams against the real server: every change (entries, trims, groups,
//! deliveries, acknowledgements, claims) kept exactly across `kill -9`
//! and checkpoints; blocking XREAD and XREADGROUP woken by XADD; DUMP
//! payloads moving both ways between redis-server and Strata; cold
//! streams read back from disk; the generic key commands on streams.
//! Replies and errors themselves are compared with redis-server's in
//! `redis_replies.rs`.

mod common;

use common::*;

/// Every observable part of the stream at `key`: its entries, and XINFO
/// STREAM FULL (groups, consumers and pending entries with their times
/// and counts, which replay must rebuild exactly).
fn snapshot(raw: &mut Raw, key: &str) -> Vec<Reply> {
    vec![
        raw.cmd(&["XRANGE", key, "-", "+"]),
        raw.cmd(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]),
        raw.cmd(&["XINFO", "GROUPS", key]),
    ]
}

/// A stream with most of what a stream holds: entries with shared and
/// different fields, deletions, a trim, two groups, deliveries, acks,
/// claims, a consumer made by hand, a moved last ID.
fn build(raw: &mut Raw, key: &str, round: u32) {
    for n in 0..150u32 {
        let value = format!("r{round}-{n}");
        let reply = if n % 7 == 0 {
            raw.cmd(&["XADD", key, "*", "other", &value, "extra", "x"])
        } else {
            raw.cmd(&["XADD", key, "*", "field", &value])
        };
        assert!(matches!(reply, Reply::Bulk(_)), "{reply:?}");
    }
    let first = raw.cmd(&["XRANGE", key, "-", "+", "COUNT", "3"]);
    let ids: Vec<String> = first
        .as_array()
        .iter()
        .map(|e| e.as_array()[0].as_text())
        .collect();
    assert_eq!(raw.cmd(&["XDEL", key, &ids[1]]), i(1));
    assert!(raw.cmd(&["XTRIM", key, "MAXLEN", "~", "120"]).as_int() >= 0);
    let group = format!("g{round}");
    assert_eq!(raw.cmd(&["XGROUP", "CREATE", key, &group, "0"]), ok());
    raw.cmd(&[
        "XREADGROUP",
        "GROUP",
        &group,
        "alice",
        "COUNT",
        "20",
        "STREAMS",
        key,
        ">",
    ]);
    raw.cmd(&[
        "XREADGROUP",
        "GROUP",
        &group,
        "bob",
        "COUNT",
        "5",
        "STREAMS",
        key,
        ">",
    ]);
    raw.cmd(&[
        "XREADGROUP",
        "GROUP",
        &group,
        "alice",
        "COUNT",
        "3",
        "STREAMS",
        key,
        "0",
    ]);
    let pending = raw.cmd(&["XPENDING", key, &group, "-", "+", "4", "alice"]);
    let acked: Vec<String> = pending
        .as_array()
        .iter()
        .map(|p| p.as_array()[0].as_text())
        .collect();
    let mut ack = vec!["XACK", key, group.as_str()];
    ack.extend(acked.iter().map(String::as_str));
    assert_eq!(raw.cmd(&ack), i(4));
    let bobs = raw.cmd(&["XPENDING", key, &group, "-", "+", "2", "bob"]);
    let claimed = bobs.as_array()[0].as_array()[0].as_text();
    let reply = raw.cmd(&[
        "XCLAIM",
        key,
        &group,
        "carol",
        "0",
        &claimed,
        "RETRYCOUNT",
        "7",
    ]);
    assert_eq!(reply.as_array().len(), 1, "{reply:?}");
    raw.cmd(&["XAUTOCLAIM", key, &group, "dave", "0", "0", "COUNT", "2"]);
    assert_eq!(
        raw.cmd(&["XGROUP", "CREATECONSUMER", key, &group, "erin"]),
        i(1)
    );
    let late = format!("late{round}");
    assert_eq!(raw.cmd(&["XGROUP", "CREATE", key, &late, "$"]), ok());
}

#[test]
fn streams_survive_kill9_and_checkpoints() {
    let server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut raw = server.raw();
    build(&mut raw, "s", 1);
    let before = snapshot(&mut raw, "s");
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(snapshot(&mut raw, "s"), before, "replayed from the log");
    // From a checkpoint holding the stream's image, then the log after it.
    assert_eq!(raw.cmd(&["SAVE"]), ok());
    build(&mut raw, "s", 2);
    raw.cmd(&["XSETID", "s", "99999999999999-0", "ENTRIESADDED", "1000"]);
    let before = snapshot(&mut raw, "s");
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(snapshot(&mut raw, "s"), before, "checkpoint and log");
    assert_eq!(raw.cmd(&["TYPE", "s"]), Reply::simple("stream"));
}

fn blocked(con: &mut redis::Connection) -> u64 {
    info_u64(con, "clients", "blocked_clients")
}

/// Sends `args` on `raw` and waits until the server counts one more
/// blocked client.
fn block_on(raw: &mut Raw, con: &mut redis::Connection, args: &[&str]) {
    let before = blocked(con);
    raw.send(args);
    wait_until("the client to block", || blocked(con) > before);
}

#[test]
fn blocked_reads_are_woken_by_xadd() {
    let server = TestServer::start();
    let (mut reader, mut writer) = (server.raw(), server.raw());
    let mut con = server.client();
    // `$` on a missing stream: only what is added after the call.
    block_on(
        &mut reader,
        &mut con,
        &["XREAD", "BLOCK", "10000", "STREAMS", "s", "$"],
    );
    assert!(matches!(
        writer.cmd(&["XADD", "s", "5-0", "f", "v"]),
        Reply::Bulk(_)
    ));
    let expected = Reply::Array(vec![Reply::Array(vec![
        b("s"),
        Reply::Array(vec![Reply::Array(vec![
            b("5-0"),
            Reply::Array(vec![b("f"), b("v")]),
        ])]),
    ])]);
    assert_eq!(reader.read(), expected, "woken by XADD");
    // `$` stands for the last ID when the call blocked, not when woken:
    // a change that adds nothing (XDEL) keeps it waiting.
    block_on(
        &mut reader,
        &mut con,
        &["XREAD", "BLOCK", "10000", "STREAMS", "s", "$"],
    );
    writer.cmd(&["XADD", "other", "1-0", "f", "v"]);
    writer.cmd(&["XADD", "s", "6-0", "f", "w"]);
    let woken = reader.read();
    let entries = woken.as_array()[0].as_array()[1].as_array().to_vec();
    assert_eq!(entries.len(), 1, "{woken:?}");
    assert_eq!(entries[0].as_array()[0], b("6-0"));
    // A key that becomes another type keeps the reader waiting (Redis'
    // "XREAD: XADD + DEL + LPUSH should not awake client"); DEBUG LOADAOF
    // rebuilds the values and changes nothing seen.
    block_on(
        &mut reader,
        &mut con,
        &["XREAD", "BLOCK", "10000", "STREAMS", "t", "$"],
    );
    writer.cmd(&["XADD", "t", "1-0", "f", "v"]);
    let first = reader.read();
    assert_eq!(first.as_array()[0].as_array()[0], b("t"));
    block_on(
        &mut reader,
        &mut con,
        &["XREAD", "BLOCK", "10000", "STREAMS", "t", "$"],
    );
    writer.cmd(&["DEL", "t"]);
    writer.cmd(&["LPUSH", "t", "x"]);
    writer.cmd(&["DEL", "t"]);
    assert_eq!(writer.cmd(&["DEBUG", "LOADAOF"]), ok());
    writer.cmd(&["XADD", "t", "2-0", "f", "w"]);
    let woken = reader.read();
    assert_eq!(
        woken.as_array()[0].as_array()[1].as_array()[0].as_array()[0],
        b("2-0"),
        "{woken:?}"
    );
    // A timeout answers a null array.
    assert_eq!(
        reader.cmd(&["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]),
        Reply::NullArray
    );
    // A group reader is woken too, and the entry is then pending with it.
    assert_eq!(writer.cmd(&["XGROUP", "CREATE", "s", "g", "$"]), ok());
    let args = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "10000",
        "STREAMS",
        "s",
        ">",
    ];
    block_on(&mut reader, &mut con, &args);
    writer.cmd(&["XADD", "s", "7-0", "f", "x"]);
    let woken = reader.read();
    assert_eq!(woken.as_array()[0].as_array()[1].as_array().len(), 1);
    let summary = writer.cmd(&["XPENDING", "s", "g"]);
    assert_eq!(summary.as_array()[0], i(1));
    assert_eq!(summary.as_array()[1], b("7-0"));
}

/// The value after `name` in a reply of alternating names and values.
fn field(reply: &Reply, name: &str) -> Reply {
    let items = reply.as_array();
    let at = items
        .iter()
        .position(|r| *r == b(name))
        .unwrap_or_else(|| panic!("no {name} in {reply:?}"));
    items[at + 1].clone()
}

#[test]
fn dump_payloads_move_between_redis_and_strata() {
    let Some(redis) = RedisServer::start_unless_missing("the stream DUMP exchange") else {
        return;
    };
    let server = TestServer::start();
    let (mut ours, mut theirs) = (server.raw(), Raw::connect(redis.port));
    // What both servers must then agree on (no clocks in it: the IDs
    // are given, delivery times are compared through XPENDING's counts).
    let views = |raw: &mut Raw, key: &str| {
        vec![
            raw.cmd(&["XRANGE", key, "-", "+"]),
            raw.cmd(&["XLEN", key]),
            raw.cmd(&["XINFO", "GROUPS", key]),
            raw.cmd(&["XPENDING", key, "g"]),
            // Radix tree nodes are Redis' own layout: not compared.
            match raw.cmd(&["XINFO", "STREAM", key]) {
                Reply::Array(mut fields) => {
                    assert_eq!(fields[4], b("radix-tree-nodes"));
                    fields[5] = Reply::Int(0);
                    Reply::Array(fields)
                }
                other => other,
            },
        ]
    };
    for redis_first in [true, false] {
        let (from, to) = if redis_first {
            (&mut theirs, &mut ours)
        } else {
            (&mut ours, &mut theirs)
        };
        from.cmd(&["FLUSHALL"]);
        to.cmd(&["FLUSHALL"]);
        // 250 entries: three listpack nodes, fields shared or not.
        for n in 1..=250u32 {
            let id = format!("{n}-{}", n % 3);
            let value = n.to_string();
            if n % 10 == 0 {
                from.cmd(&["XADD", "s", &id, "a", &value, "b", "long value here"]);
            } else {
                from.cmd(&["XADD", "s", &id, "a", &value]);
            }
        }
        from.cmd(&["XDEL", "s", "5-2", "150-0"]);
        from.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
        from.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "30",
            "STREAMS",
            "s",
            ">",
        ]);
        from.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ]);
        from.cmd(&["XACK", "s", "g", "1-1", "2-2"]);
        let payload = match from.cmd(&["DUMP", "s"]) {
            Reply::Bulk(payload) => payload,
            other => panic!("DUMP: {other:?}"),
        };
        let restored = to.cmd_bytes(&[b"RESTORE", b"s", b"0", &payload]);
        assert_eq!(restored, ok(), "RESTORE of the other server's payload");
        if redis_first {
            // Redis 7.0's payload has no active times: a consumer's is
            // its seen time then (as Redis 7.4 loads it).
            let full = to.cmd(&["XINFO", "STREAM", "s", "FULL"]);
            let groups = field(&full, "groups");
            let consumers = field(&groups.as_array()[0], "consumers");
            for consumer in consumers.as_array() {
                assert_eq!(field(consumer, "active-time"), field(consumer, "seen-time"));
            }
        }
        assert_eq!(views(to, "s"), views(from, "s"));
    }
}

#[test]
fn cold_streams_read_back_exactly() {
    // About 3 MB of fields for a 2 MB budget: most streams go cold.
    const KEYS: u64 = 1_200;
    let server = TestServer::start_with(&["--maxmemory", "2mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    let field = |k: u64, n: u64| format!("{k}:{n}:{}", "x".repeat(300));
    for k in 0..KEYS {
        let mut pipe = redis::pipe();
        for n in 1..=8 {
            pipe.cmd("XADD")
                .arg(key(k))
                .arg(format!("{n}-0"))
                .arg("f")
                .arg(field(k, n))
                .ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }
    let cold: Vec<u64> = (0..KEYS).filter(|&k| on_disk(&mut con, &key(k))).collect();
    assert!(
        cold.len() > KEYS as usize / 4,
        "{} cold streams",
        cold.len()
    );
    for &k in cold.iter().take(40) {
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(key(k))
            .arg("-")
            .arg("+")
            .query(&mut con)
            .unwrap();
        assert_eq!(entries.len(), 8, "{}", key(k));
        for (n, (id, fields)) in entries.iter().enumerate() {
            let n = n as u64 + 1;
            assert_eq!(id, &format!("{n}-0"));
            assert_eq!(fields, &vec![("f".to_string(), field(k, n))]);
        }
    }
}

#[test]
fn key_commands_work_on_streams() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.cmd(&["XADD", "s", "1-0", "f", "v"]);
    raw.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    assert_eq!(raw.cmd(&["COPY", "s", "t"]), i(1));
    assert_eq!(snapshot(&mut raw, "t"), snapshot(&mut raw, "s"));
    assert_eq!(raw.cmd(&["RENAME", "t", "u"]), ok());
    assert_eq!(raw.cmd(&["XLEN", "u"]), i(1));
    assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "u"]), b("stream"));
    assert!(raw.cmd(&["MEMORY", "USAGE", "u"]).as_int() > 0);
    let scan = raw.cmd(&["SCAN", "0", "TYPE", "stream", "COUNT", "100"]);
    let mut found: Vec<String> = scan.as_array()[1]
        .as_array()
        .iter()
        .map(Reply::as_text)
        .collect();
    found.sort();
    assert_eq!(found, ["s", "u"]);
    // An emptied stream stays, with its groups.
    assert_eq!(raw.cmd(&["XDEL", "s", "1-0"]), i(1));
    assert_eq!(raw.cmd(&["EXISTS", "s"]), i(1));
    assert_eq!(raw.cmd(&["XINFO", "GROUPS", "s"]).as_array().len(), 1);
    // Keyspace notifications name the stream events.
    raw.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Et"]);
    let mut sub = server.raw();
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:xadd"]);
    raw.cmd(&["XADD", "s", "2-0", "f", "v"]);
    let event = sub.read();
    assert_eq!(event.as_array()[2], b("s"), "{event:?}");
}

/// CPU time (user + system, in clock ticks) process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// `calls=` of INFO commandstats for `command`.
fn calls(raw: &mut Raw, command: &str) -> String {
    let info = raw.cmd(&["INFO", "commandstats"]).as_text();
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{command}:")))
        .unwrap_or_default()
        .to_owned();
    let fields = line.split(':').nth(1).unwrap_or_default();
    fields.split(',').next().unwrap_or_default().to_owned()
}

#[test]
fn a_blocked_group_read_ends_when_its_stream_or_group_goes() {
    let server = TestServer::start();
    let (mut reader, mut writer) = (server.raw(), server.raw());
    let mut con = server.client();
    let read = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ];
    writer.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    block_on(&mut reader, &mut con, &read);
    // INFO counts the key, and as one whose deletion ends a wait.
    let info = writer.cmd(&["INFO", "clients"]).as_text();
    assert!(info.contains("total_blocking_keys:1\r\n"), "{info}");
    assert!(
        info.contains("total_blocking_keys_on_nokey:1\r\n"),
        "{info}"
    );
    writer.cmd(&["DEL", "s"]);
    // Redis 7.4 runs the command again: its own errors (7.0 answered
    // "UNBLOCKED the stream key no longer exists").
    let no_group = "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option";
    assert_eq!(reader.read(), e(no_group));
    writer.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    block_on(&mut reader, &mut con, &read);
    writer.cmd(&["SET", "s", "not a stream"]);
    assert_eq!(
        reader.read(),
        e("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    writer.cmd(&["DEL", "s"]);
    writer.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    block_on(&mut reader, &mut con, &read);
    writer.cmd(&["XGROUP", "DESTROY", "s", "g"]);
    assert_eq!(reader.read(), e(no_group));
    // Each blocked call counted once, however often it ran again; and
    // a blocked reader does not wake itself (its runs again change
    // nothing): it ran once to block, and once per change of its key.
    writer.cmd(&["CONFIG", "RESETSTAT"]);
    writer.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    block_on(&mut reader, &mut con, &read);
    let cpu_before = cpu_ticks(server.pid());
    std::thread::sleep(std::time::Duration::from_millis(500));
    let spent = cpu_ticks(server.pid()) - cpu_before;
    // An idle server spends a tick or two (1/100 s each) in 0.5 s; one
    // waking itself for ever spent the whole half second.
    assert!(
        spent < 20,
        "a blocked reader kept the server busy: {spent} ticks in 0.5 s"
    );
    writer.cmd(&["XADD", "other", "*", "f", "v"]);
    writer.cmd(&["XADD", "s", "*", "f", "v"]);
    assert_eq!(reader.read().as_array().len(), 1);
    assert_eq!(calls(&mut writer, "xreadgroup"), "calls=1");
    assert_eq!(
        reader.cmd(&["XREAD", "BLOCK", "20", "STREAMS", "s", "$"]),
        Reply::NullArray
    );
    assert_eq!(calls(&mut writer, "xread"), "calls=1");
}

/// Redis 7.4's "Blocking XREADGROUP for stream key that has clients
/// blocked on list": a group reader queued behind a BLPOP of the same
/// key hears of the key's deletion, though the BLPOP keeps its place.
#[test]
fn a_group_reader_behind_a_list_waiter_hears_of_the_deletion() {
    let server = TestServer::start();
    let (mut list_waiter, mut reader, mut writer) = (server.raw(), server.raw(), server.raw());
    let mut con = server.client();
    block_on(&mut list_waiter, &mut con, &["BLPOP", "k", "0"]);
    writer.cmd(&["XADD", "k", "1-0", "f", "v"]);
    writer.cmd(&["XGROUP", "CREATE", "k", "g", "$"]);
    block_on(
        &mut reader,
        &mut con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "k",
            ">",
        ],
    );
    writer.cmd(&["DEL", "k"]);
    let reply = reader.read();
    assert!(
        matches!(&reply, Reply::Error(text) if text.starts_with("NOGROUP")),
        "{reply:?}"
    );
    // The list waiter is still there and served by a push.
    writer.cmd(&["RPUSH", "k", "x"]);
    assert_eq!(list_waiter.read(), Reply::Array(vec![b("k"), b("x")]));
}

fn ints(values: &[i64]) -> Reply {
    Reply::Array(values.iter().map(|&v| Reply::Int(v)).collect())
}

fn ids_of(reply: &Reply) -> Vec<String> {
    reply
        .as_array()
        .iter()
        .map(|entry| entry.as_array()[0].as_text())
        .collect()
}

/// Redis 8.2's reference strategies: XDELEX, XACKDEL, and XADD/XTRIM with
/// KEEPREF, DELREF and ACKED, as redis-server 8.6.3 answers them (the
/// same commands were run against both; they differ only in XINFO's
/// rax node count). Replayed after `kill -9`, the stream and every
/// pending list are as they were.
#[test]
// One scenario told in order, as the two servers were compared.
#[allow(clippy::too_many_lines)]
fn xdelex_xackdel_and_trimming_by_references() {
    let server = TestServer::start();
    let mut r = server.raw();
    for n in 1..=5 {
        r.cmd(&["XADD", "s", &format!("{n}-0"), "f", "v"]);
    }
    r.cmd(&["XGROUP", "CREATE", "s", "g1", "0"]);
    r.cmd(&["XGROUP", "CREATE", "s", "g2", "0"]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "c1",
        "COUNT",
        "3",
        "STREAMS",
        "s",
        ">",
    ]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g2",
        "c2",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    // 1-0 is pending in both groups, 4-0 undelivered, 9-0 past every
    // group's last delivered ID: all still needed.
    assert_eq!(
        r.cmd(&["XDELEX", "s", "ACKED", "IDS", "3", "1-0", "4-0", "9-0"]),
        ints(&[2, 2, 2])
    );
    r.cmd(&["XACK", "s", "g1", "1-0"]);
    assert_eq!(
        r.cmd(&["XDELEX", "s", "ACKED", "IDS", "1", "1-0"]),
        ints(&[2])
    );
    r.cmd(&["XACK", "s", "g2", "1-0"]);
    assert_eq!(
        r.cmd(&["XDELEX", "s", "ACKED", "IDS", "2", "1-0", "1-0"]),
        ints(&[1, -1])
    );
    // XACKDEL (KEEPREF): acknowledged and deleted; a second time, not
    // pending any more; 5-0 was never delivered to g1.
    assert_eq!(
        r.cmd(&["XACKDEL", "s", "g1", "IDS", "3", "2-0", "2-0", "5-0"]),
        ints(&[1, -1, -1])
    );
    // g2 still has 2-0 pending (a dangling reference, KEEPREF kept it).
    assert_eq!(r.cmd(&["XPENDING", "s", "g2"]).as_array()[0], Reply::Int(1));
    // ACKED: g2 has not had 3-0 yet, so g1's acknowledgement stays and
    // the entry too.
    assert_eq!(
        r.cmd(&["XACKDEL", "s", "g2", "ACKED", "IDS", "1", "3-0"]),
        ints(&[-1])
    );
    assert_eq!(
        r.cmd(&["XACKDEL", "s", "g1", "ACKED", "IDS", "1", "3-0"]),
        ints(&[2])
    );
    assert_eq!(r.cmd(&["XPENDING", "s", "g1"]).as_array()[0], Reply::Int(0));
    assert_eq!(r.cmd(&["XLEN", "s"]), Reply::Int(3));
    assert_eq!(
        r.cmd(&["XACKDEL", "s", "g2", "DELREF", "IDS", "1", "2-0"]),
        ints(&[1])
    );
    // Missing key or group: -1 each, the IDs not even parsed.
    assert_eq!(
        r.cmd(&["XACKDEL", "s", "nogroup", "IDS", "2", "1-0", "abc"]),
        ints(&[-1, -1])
    );
    assert_eq!(
        r.cmd(&["XDELEX", "nokey", "IDS", "2", "abc", "def"]),
        ints(&[-1, -1])
    );
    for (args, error) in [
        (
            &["XDELEX", "s", "IDS", "1", "abc"][..],
            "ERR Invalid stream ID specified as stream command argument",
        ),
        (
            &["XDELEX", "s", "KEEPREF", "DELREF", "IDS", "1", "1-1"],
            "ERR syntax error",
        ),
        (
            &["XDELEX", "s", "IDS", "0", "1-1"],
            "ERR Number of IDs must be a positive integer",
        ),
        (
            &["XDELEX", "s", "IDS", "3", "1-1"],
            "ERR The `numids` parameter must match the number of arguments",
        ),
        (
            &["XDELEX", "s", "IDS", "1", "1-1", "2-2"],
            "ERR syntax error",
        ),
        (
            &["XTRIM", "s", "MAXLEN", "1", "KEEPREF", "ACKED"],
            "ERR syntax error",
        ),
        (
            &["XADD", "s", "KEEPREF", "DELREF", "*", "f", "v"],
            "ERR Invalid stream ID specified as stream command argument",
        ),
    ] {
        assert_eq!(r.cmd(args), e(error), "{args:?}");
    }
    // The strategy may follow the IDs.
    assert_eq!(
        r.cmd(&["XDELEX", "s", "IDS", "1", "4-0", "DELREF"]),
        ints(&[1])
    );

    for n in 1..=6 {
        r.cmd(&["XADD", "t", &format!("{n}-0"), "f", "v"]);
    }
    r.cmd(&["XGROUP", "CREATE", "t", "g", "0"]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "3",
        "STREAMS",
        "t",
        ">",
    ]);
    r.cmd(&["XACK", "t", "g", "1-0", "3-0"]);
    // ACKED trimming skips what the group needs and goes on past it.
    assert_eq!(
        r.cmd(&["XTRIM", "t", "MAXLEN", "2", "ACKED"]),
        Reply::Int(2)
    );
    assert_eq!(
        ids_of(&r.cmd(&["XRANGE", "t", "-", "+"])),
        ["2-0", "4-0", "5-0", "6-0"]
    );
    r.cmd(&["XGROUP", "SETID", "t", "g", "$"]);
    assert_eq!(
        r.cmd(&["XTRIM", "t", "MAXLEN", "2", "ACKED"]),
        Reply::Int(2)
    );
    assert_eq!(ids_of(&r.cmd(&["XRANGE", "t", "-", "+"])), ["2-0", "6-0"]);
    // DELREF takes 2-0 out of the pending list with the entry.
    assert_eq!(
        r.cmd(&["XTRIM", "t", "MAXLEN", "0", "DELREF"]),
        Reply::Int(2)
    );
    assert_eq!(r.cmd(&["XPENDING", "t", "g"]).as_array()[0], Reply::Int(0));

    // `~` with DELREF trims exactly; KEEPREF by whole nodes.
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"]),
        ok()
    );
    for key in ["u", "w"] {
        for n in 1..=10 {
            r.cmd(&["XADD", key, &format!("{n}-0"), "f", "v"]);
        }
    }
    assert_eq!(
        r.cmd(&["XTRIM", "u", "MAXLEN", "~", "5", "DELREF"]),
        Reply::Int(5)
    );
    assert_eq!(r.cmd(&["XTRIM", "w", "MAXLEN", "~", "5"]), Reply::Int(4));
    r.cmd(&["XGROUP", "CREATE", "u", "g", "0"]);
    r.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "1",
        "STREAMS",
        "u",
        ">",
    ]);
    assert!(matches!(
        r.cmd(&["XADD", "u", "MAXLEN", "=", "1", "DELREF", "11-0", "f", "v"]),
        Reply::Bulk(_)
    ));
    assert_eq!(r.cmd(&["XPENDING", "u", "g"]).as_array()[0], Reply::Int(0));
    assert_eq!(ids_of(&r.cmd(&["XRANGE", "u", "-", "+"])), ["11-0"]);

    let before: Vec<Vec<Reply>> = ["s", "t", "u", "w"]
        .iter()
        .map(|k| snapshot(&mut r, k))
        .collect();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    let after: Vec<Vec<Reply>> = ["s", "t", "u", "w"]
        .iter()
        .map(|k| snapshot(&mut r, k))
        .collect();
    assert_eq!(before, after);
}

/// One step of the stream model test.
#[derive(Clone, Debug)]
enum StreamStep {
    /// XADD with the next ID `ms` later (0: the next sequence), trimmed
    /// to a length with `MAXLEN =` when given.
    Add(u8, Option<u8>),
    Del(Vec<u8>),
    TrimLen(u8),
    TrimMinId(u8),
    Range(u8, u8, Option<u8>, bool),
    ReadNew(u8, u8, u8),
    ReadHistory(u8, u8),
    Ack(u8, Vec<u8>),
    Claim(u8, u8, Vec<u8>),
}

fn stream_step() -> impl proptest::strategy::Strategy<Value = StreamStep> {
    use proptest::prelude::*;
    let ms = 0u8..24;
    let ids = proptest::collection::btree_set(ms.clone(), 1..4)
        .prop_map(|set| set.into_iter().collect::<Vec<u8>>());
    prop_oneof![
        6 => (0u8..3, proptest::option::weighted(0.15, 0u8..6))
            .prop_map(|(d, t)| StreamStep::Add(d, t)),
        1 => ids.clone().prop_map(StreamStep::Del),
        1 => (0u8..8).prop_map(StreamStep::TrimLen),
        1 => ms.clone().prop_map(StreamStep::TrimMinId),
        2 => (ms.clone(), ms.clone(), proptest::option::of(1u8..4), any::<bool>())
            .prop_map(|(a, b, c, rev)| StreamStep::Range(a, b, c, rev)),
        3 => (0u8..2, 0u8..2, 1u8..4).prop_map(|(g, c, n)| StreamStep::ReadNew(g, c, n)),
        1 => (0u8..2, 0u8..2).prop_map(|(g, c)| StreamStep::ReadHistory(g, c)),
        2 => (0u8..2, ids.clone()).prop_map(|(g, ids)| StreamStep::Ack(g, ids)),
        1 => (0u8..2, 0u8..2, ids).prop_map(|(g, c, ids)| StreamStep::Claim(g, c, ids)),
    ]
}

/// A consumer group as the model keeps it.
#[derive(Default)]
struct ModelGroup {
    last: (u64, u64),
    /// ID -> (consumer, deliveries).
    pending: std::collections::BTreeMap<(u64, u64), (String, i64)>,
}

/// The stream model: entries by ID with their value, two groups.
#[derive(Default)]
struct StreamModel {
    entries: std::collections::BTreeMap<(u64, u64), String>,
    last: (u64, u64),
    groups: [ModelGroup; 2],
    added: u64,
}

impl StreamModel {
    fn entry(&self, id: (u64, u64)) -> Reply {
        Reply::Array(vec![
            b(&format!("{}-{}", id.0, id.1)),
            Reply::Array(vec![b("f"), b(&self.entries[&id])]),
        ])
    }

    fn trim_to(&mut self, len: usize) -> i64 {
        let mut removed = 0;
        while self.entries.len() > len {
            self.entries.pop_first();
            removed += 1;
        }
        removed
    }

    /// The IDs step arguments name: the first entry at or after `ms`
    /// (or `ms-0` when there is none), so most of them exist.
    fn pick(&self, ms: u8) -> (u64, u64) {
        let at = (ms as u64, 0);
        self.entries.range(at..).next().map_or(at, |(id, _)| *id)
    }
}

fn text(id: (u64, u64)) -> String {
    format!("{}-{}", id.0, id.1)
}

/// XADD, XDEL, XTRIM, XRANGE/XREVRANGE and consumer groups (XREADGROUP
/// new and history reads, XACK, XCLAIM, XPENDING) against a plain model
/// of Redis' rules: random steps, every reply compared, then the whole
/// stream and every pending list.
#[test]
#[allow(clippy::too_many_lines, reason = "one model, read top to bottom")]
fn streams_and_groups_behave_like_a_model() {
    use proptest::test_runner::{Config, TestRunner};
    let server = TestServer::start();
    let raw = std::cell::RefCell::new(server.raw());
    // Small nodes, so that steps cross them (entries are packed per node).
    let node_max = ["CONFIG", "SET", "stream-node-max-entries", "3"];
    assert_eq!(raw.borrow_mut().cmd(&node_max), ok());
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let group = |g: u8| format!("g{g}");
    let consumer = |c: u8| format!("c{c}");
    let steps = proptest::collection::vec(stream_step(), 1..50);
    let result = runner.run(&steps, |steps| {
        let mut raw = raw.borrow_mut();
        raw.cmd(&["FLUSHALL"]);
        for g in 0..2 {
            assert_eq!(
                raw.cmd(&["XGROUP", "CREATE", "s", &group(g), "0", "MKSTREAM"]),
                ok()
            );
        }
        let mut m = StreamModel::default();
        for step in steps {
            let label = format!("{step:?}");
            match step {
                StreamStep::Add(delta, trim) => {
                    let id = if delta == 0 {
                        (m.last.0, m.last.1 + 1)
                    } else {
                        (m.last.0 + delta as u64, 0)
                    };
                    m.added += 1;
                    let value = format!("v{}", m.added);
                    let mut args = vec!["XADD".to_string(), "s".into()];
                    if let Some(len) = trim {
                        args.extend(["MAXLEN".into(), "=".into(), len.to_string()]);
                    }
                    args.extend([text(id), "f".into(), value.clone()]);
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    assert_eq!(raw.cmd(&args), b(&text(id)), "{label}");
                    m.entries.insert(id, value);
                    m.last = id;
                    if let Some(len) = trim {
                        m.trim_to(len as usize);
                    }
                }
                StreamStep::Del(picks) => {
                    let ids: Vec<(u64, u64)> = picks.iter().map(|&p| m.pick(p)).collect();
                    let mut args = vec!["XDEL".to_string(), "s".into()];
                    args.extend(ids.iter().map(|&id| text(id)));
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let mut gone = 0;
                    for id in &ids {
                        gone += m.entries.remove(id).is_some() as i64;
                    }
                    assert_eq!(raw.cmd(&args), i(gone), "{label}");
                }
                StreamStep::TrimLen(len) => {
                    let want = m.trim_to(len as usize);
                    let got = raw.cmd(&["XTRIM", "s", "MAXLEN", "=", &len.to_string()]);
                    assert_eq!(got, i(want), "{label}");
                }
                StreamStep::TrimMinId(ms) => {
                    let min = (ms as u64, 0);
                    let before = m.entries.len();
                    m.entries = m.entries.split_off(&min);
                    let want = (before - m.entries.len()) as i64;
                    let got = raw.cmd(&["XTRIM", "s", "MINID", &text(min)]);
                    assert_eq!(got, i(want), "{label}");
                }
                StreamStep::Range(a, z, count, rev) => {
                    let (start, end) = ((a as u64, 0), (z as u64, u64::MAX));
                    let mut want: Vec<Reply> = if start <= end {
                        m.entries
                            .range(start..=end)
                            .map(|(id, _)| m.entry(*id))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    if rev {
                        want.reverse();
                    }
                    if let Some(c) = count {
                        want.truncate(c as usize);
                    }
                    let (from, to) = (a.to_string(), z.to_string());
                    let mut args = if rev {
                        vec!["XREVRANGE", "s", &to, &from]
                    } else {
                        vec!["XRANGE", "s", &from, &to]
                    };
                    let c = count.map(|c| c.to_string());
                    if let Some(c) = &c {
                        args.extend(["COUNT", c]);
                    }
                    assert_eq!(raw.cmd(&args), Reply::Array(want), "{label}");
                }
                StreamStep::ReadNew(g, c, n) => {
                    let gm = &m.groups[g as usize];
                    let ids: Vec<(u64, u64)> = (m.entries.range((gm.last.0, gm.last.1 + 1)..))
                        .take(n as usize)
                        .map(|(id, _)| *id)
                        .collect();
                    let want = if ids.is_empty() {
                        Reply::NullArray
                    } else {
                        let entries = ids.iter().map(|id| m.entry(*id)).collect();
                        Reply::Array(vec![Reply::Array(vec![b("s"), Reply::Array(entries)])])
                    };
                    let gm = &mut m.groups[g as usize];
                    for &id in &ids {
                        gm.pending.insert(id, (consumer(c), 1));
                        gm.last = id;
                    }
                    let count = n.to_string();
                    let (gn, cn) = (group(g), consumer(c));
                    let args = [
                        "XREADGROUP",
                        "GROUP",
                        &gn,
                        &cn,
                        "COUNT",
                        &count,
                        "STREAMS",
                        "s",
                        ">",
                    ];
                    assert_eq!(raw.cmd(&args), want, "{label}");
                }
                StreamStep::ReadHistory(g, c) => {
                    let name = consumer(c);
                    let mut entries = Vec::new();
                    let StreamModel {
                        groups,
                        entries: stored,
                        ..
                    } = &mut m;
                    for (id, (owner, deliveries)) in &mut groups[g as usize].pending {
                        if *owner == name {
                            // A deleted entry shows as nil, its count
                            // unchanged (Redis 7.0 and 8.6 alike).
                            entries.push(match stored.get(id) {
                                Some(value) => {
                                    *deliveries += 1;
                                    Reply::Array(vec![
                                        b(&text(*id)),
                                        Reply::Array(vec![b("f"), b(value)]),
                                    ])
                                }
                                None => Reply::Array(vec![b(&text(*id)), Reply::NullArray]),
                            });
                        }
                    }
                    let want =
                        Reply::Array(vec![Reply::Array(vec![b("s"), Reply::Array(entries)])]);
                    let gn = group(g);
                    let args = ["XREADGROUP", "GROUP", &gn, &name, "STREAMS", "s", "0"];
                    assert_eq!(raw.cmd(&args), want, "{label}");
                }
                StreamStep::Ack(g, picks) => {
                    let gm = &mut m.groups[g as usize];
                    let ids: Vec<(u64, u64)> = picks
                        .iter()
                        .map(|&p| {
                            let at = (p as u64, 0);
                            gm.pending.range(at..).next().map_or(at, |(id, _)| *id)
                        })
                        .collect();
                    let mut acked = 0;
                    for id in &ids {
                        acked += gm.pending.remove(id).is_some() as i64;
                    }
                    let mut args = vec!["XACK".to_string(), "s".into(), group(g)];
                    args.extend(ids.iter().map(|&id| text(id)));
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    assert_eq!(raw.cmd(&args), i(acked), "{label}");
                }
                StreamStep::Claim(g, c, picks) => {
                    let name = consumer(c);
                    let gm = &mut m.groups[g as usize];
                    let mut ids: Vec<(u64, u64)> = picks
                        .iter()
                        .map(|&p| {
                            let at = (p as u64, 0);
                            gm.pending.range(at..).next().map_or(at, |(id, _)| *id)
                        })
                        .collect();
                    ids.dedup();
                    let mut claimed = Vec::new();
                    for id in &ids {
                        let Some((owner, deliveries)) = gm.pending.get_mut(id) else {
                            continue;
                        };
                        if m.entries.contains_key(id) {
                            *owner = name.clone();
                            *deliveries += 1;
                            claimed.push(*id);
                        } else {
                            // A deleted entry leaves the pending list.
                            gm.pending.remove(id);
                        }
                    }
                    let want = Reply::Array(claimed.iter().map(|id| m.entry(*id)).collect());
                    let mut args =
                        vec!["XCLAIM".to_string(), "s".into(), group(g), name, "0".into()];
                    args.extend(ids.iter().map(|&id| text(id)));
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    assert_eq!(raw.cmd(&args), want, "{label}");
                }
            }
        }
        let all: Vec<Reply> = m.entries.keys().map(|id| m.entry(*id)).collect();
        assert_eq!(raw.cmd(&["XRANGE", "s", "-", "+"]), Reply::Array(all));
        for (g, gm) in m.groups.iter().enumerate() {
            let got = raw.cmd(&["XPENDING", "s", &group(g as u8), "-", "+", "1000"]);
            let got: Vec<(String, String, i64)> = got
                .as_array()
                .iter()
                .map(|p| {
                    let p = p.as_array();
                    (p[0].as_text(), p[1].as_text(), p[3].as_int())
                })
                .collect();
            let want: Vec<(String, String, i64)> = gm
                .pending
                .iter()
                .map(|(id, (owner, n))| (text(*id), owner.clone(), *n))
                .collect();
            assert_eq!(got, want, "pending of g{g}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Reading a consumer's pending entries again (XREADGROUP with an ID) is
/// no change to the dataset, as in Redis 7.4 (its unit/type/stream-cgroups
/// checks `rdb_changes_since_last_save`) unless it creates the consumer,
/// yet the delivery counts it raises survive kill -9: the record is logged
/// and replayed, only not counted.
#[test]
fn rereading_pending_entries_is_no_change_but_survives_kill9() {
    let server = TestServer::start();
    let mut r = server.raw();
    let changes = |r: &mut Raw| -> i64 {
        let info = r.cmd(&["INFO", "persistence"]).as_text();
        info_field(&info, "rdb_changes_since_last_save")
            .parse()
            .unwrap()
    };
    r.cmd(&["XADD", "x", "1-0", "f", "a"]);
    r.cmd(&["XADD", "x", "2-0", "f", "b"]);
    r.cmd(&["XGROUP", "CREATE", "x", "g", "0"]);
    let before = changes(&mut r);
    r.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">"]);
    let after_new = changes(&mut r);
    assert!(after_new > before, "a read of new entries is a change");
    for _ in 0..2 {
        r.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", "0"]);
    }
    assert_eq!(changes(&mut r), after_new, "rereading pending entries");
    // A consumer the read creates is a change (Redis counts it too).
    r.cmd(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "x", "0"]);
    assert_eq!(changes(&mut r), after_new + 1, "a consumer created");
    let pending = |r: &mut Raw| r.cmd(&["XPENDING", "x", "g", "-", "+", "10"]);
    let delivered = |reply: Reply| -> Vec<i64> {
        reply
            .as_array()
            .iter()
            .map(|entry| entry.as_array()[3].as_int())
            .collect()
    };
    assert_eq!(delivered(pending(&mut r)), vec![3, 3]);
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    assert_eq!(delivered(pending(&mut r)), vec![3, 3]);
}

/// XCLAIM FORCE of an entry no consumer has pending makes it delivered
/// once and then counts the claim, as redis-server 7.0 and 7.4 do (seen by
/// the differential fuzzer): 2 deliveries, 1 with JUSTID.
#[test]
fn xclaim_force_counts_as_redis_does() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["XADD", "x", "1-0", "f", "v"]);
    r.cmd(&["XADD", "x", "2-0", "f", "v"]);
    r.cmd(&["XGROUP", "CREATE", "x", "g", "$"]);
    r.cmd(&["XCLAIM", "x", "g", "c", "0", "1-0", "FORCE"]);
    r.cmd(&["XCLAIM", "x", "g", "c", "0", "2-0", "FORCE", "JUSTID"]);
    let pending = r.cmd(&["XPENDING", "x", "g", "-", "+", "10"]);
    let counts: Vec<i64> = pending
        .as_array()
        .iter()
        .map(|entry| entry.as_array()[3].as_int())
        .collect();
    assert_eq!(counts, [2, 1], "{pending:?}");
}
