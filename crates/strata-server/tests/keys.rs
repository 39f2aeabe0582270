//! Generic key commands and expiry against the real server.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{Reply, TestServer, b, e, i, ok};

#[test]
fn del_exists_type_touch() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_reply!(r, ["EXISTS", "a", "a", "nope"], i(2));
    assert_reply!(r, ["TYPE", "a"], Reply::simple("string"));
    assert_reply!(r, ["TYPE", "nope"], Reply::simple("none"));
    assert_reply!(r, ["TOUCH", "a", "b", "nope"], i(2));
    assert_reply!(r, ["DEL", "a", "b", "nope"], i(2));
    assert_reply!(r, ["UNLINK", "c", "c"], i(1));
    assert_reply!(r, ["DBSIZE"], i(0));
    assert_reply!(
        r,
        ["DEL"],
        e("ERR wrong number of arguments for 'del' command")
    );
}

#[test]
fn keys_scan_randomkey() {
    let server = TestServer::start();
    let mut r = server.raw();
    for n in 0..200 {
        r.cmd(&["SET", &format!("user:{n}"), "x"]);
    }
    r.cmd(&["SET", "other", "y"]);
    let mut keys: Vec<String> = r
        .cmd(&["KEYS", "user:1?"])
        .as_array()
        .iter()
        .map(|k| k.as_text())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        (10..20).map(|n| format!("user:{n}")).collect::<Vec<_>>()
    );
    assert_eq!(r.cmd(&["KEYS", "*"]).as_array().len(), 201);
    assert_reply!(r, ["KEYS", "h[^a]llo"], Reply::Array(vec![]));

    let mut seen = HashSet::new();
    let mut cursor = "0".to_owned();
    // Bounded: a cursor that never came back to 0 would loop for ever.
    for calls in 0.. {
        assert!(calls < 10_000, "SCAN never finished");
        let reply = r.cmd(&["SCAN", &cursor, "MATCH", "user:*", "COUNT", "7"]);
        let parts = reply.as_array();
        cursor = parts[0].as_text();
        for key in parts[1].as_array() {
            assert!(key.as_text().starts_with("user:"));
            seen.insert(key.as_text());
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 200);
    let reply = r.cmd(&["SCAN", "0", "TYPE", "list", "COUNT", "1000"]);
    assert!(reply.as_array()[1].as_array().is_empty());
    assert_reply!(r, ["SCAN", "abc"], e("ERR invalid cursor"));
    assert_reply!(r, ["SCAN", "0", "COUNT", "0"], e("ERR syntax error"));
    assert_reply!(r, ["SCAN", "0", "MATCH"], e("ERR syntax error"));
    let random = r.cmd(&["RANDOMKEY"]).as_text();
    assert!(random.starts_with("user:") || random == "other");
    r.cmd(&["FLUSHDB"]);
    assert_reply!(r, ["RANDOMKEY"], Reply::NullBulk);
}

#[test]
fn scan_returns_every_key_present_throughout_despite_concurrent_writes() {
    let server = TestServer::start();
    let mut writer = server.client();
    let mut r = server.raw();
    let stable: HashSet<String> = (0..3000).map(|n| format!("stable:{n}")).collect();
    let mut pipe = redis::pipe();
    for key in &stable {
        pipe.set(key, "v").ignore();
    }
    pipe.query::<()>(&mut writer).unwrap();
    let mut seen = Vec::new();
    let mut cursor = "0".to_owned();
    let mut round = 0;
    loop {
        assert!(round < 10_000, "SCAN never finished");
        let reply = r.cmd(&["SCAN", &cursor, "COUNT", "50"]);
        cursor = reply.as_array()[0].as_text();
        seen.extend(reply.as_array()[1].as_array().iter().map(|k| k.as_text()));
        // Churn: add and remove other keys so tables grow and shrink.
        let mut churn = redis::pipe();
        for n in 0..100 {
            churn.set(format!("churn:{round}:{n}"), "v").ignore();
        }
        if round > 0 {
            for n in 0..100 {
                churn.del(format!("churn:{}:{n}", round - 1)).ignore();
            }
        }
        churn.query::<()>(&mut writer).unwrap();
        round += 1;
        if cursor == "0" {
            break;
        }
    }
    let seen_stable: HashSet<String> = seen
        .iter()
        .filter(|k| k.starts_with("stable:"))
        .cloned()
        .collect();
    assert_eq!(seen_stable, stable);
}

#[test]
fn rename_copy_move() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "src", "v", "EX", "100"]);
    assert_reply!(r, ["RENAME", "src", "dst"], ok());
    assert_reply!(r, ["GET", "dst"], b("v"));
    assert_reply!(r, ["TTL", "dst"], i(100));
    assert_reply!(r, ["EXISTS", "src"], i(0));
    assert_reply!(r, ["RENAME", "src", "x"], e("ERR no such key"));
    assert_reply!(r, ["RENAME", "dst", "dst"], ok());
    r.cmd(&["SET", "other", "o"]);
    assert_reply!(r, ["RENAMENX", "dst", "other"], i(0));
    assert_reply!(r, ["RENAMENX", "dst", "fresh"], i(1));
    assert_reply!(r, ["RENAMENX", "missing", "x"], e("ERR no such key"));
    assert_reply!(r, ["COPY", "fresh", "copy1"], i(1));
    assert_reply!(r, ["COPY", "fresh", "other"], i(0));
    assert_reply!(r, ["COPY", "fresh", "other", "REPLACE"], i(1));
    assert_reply!(r, ["GET", "other"], b("v"));
    assert_reply!(r, ["TTL", "copy1"], i(100));
    assert_reply!(r, ["COPY", "fresh", "indb3", "DB", "3"], i(1));
    assert_reply!(
        r,
        ["COPY", "fresh", "fresh"],
        e("ERR source and destination objects are the same")
    );
    assert_reply!(
        r,
        ["COPY", "fresh", "x", "DB", "99"],
        e("ERR DB index is out of range")
    );
    assert_reply!(r, ["COPY", "nokey", "x"], i(0));
    assert_reply!(r, ["MOVE", "fresh", "5"], i(1));
    assert_reply!(r, ["EXISTS", "fresh"], i(0));
    assert_reply!(r, ["SELECT", "5"], ok());
    assert_reply!(r, ["GET", "fresh"], b("v"));
    assert_reply!(r, ["SELECT", "3"], ok());
    assert_reply!(r, ["GET", "indb3"], b("v"));
    r.cmd(&["SET", "clash", "3"]);
    r.cmd(&["SELECT", "0"]);
    r.cmd(&["SET", "clash", "0"]);
    assert_reply!(r, ["MOVE", "clash", "3"], i(0));
    assert_reply!(
        r,
        ["MOVE", "clash", "0"],
        e("ERR source and destination objects are the same")
    );
    assert_reply!(
        r,
        ["MOVE", "clash", "16"],
        e("ERR DB index is out of range")
    );
    assert_reply!(
        r,
        ["MOVE", "clash", "x"],
        e("ERR value is not an integer or out of range")
    );
}

#[test]
fn object_subcommands() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "k", "v"]);
    assert_reply!(r, ["OBJECT", "ENCODING", "k"], b("embstr"));
    assert_reply!(r, ["OBJECT", "ENCODING", "nope"], Reply::NullBulk);
    assert_reply!(r, ["OBJECT", "REFCOUNT", "k"], i(1));
    assert!(r.cmd(&["OBJECT", "IDLETIME", "k"]).as_int() <= 1);
    let freq = r.cmd(&["OBJECT", "FREQ", "k"]).as_text();
    assert!(
        freq.starts_with("ERR An LFU maxmemory policy is not selected"),
        "{freq}"
    );
    assert_reply!(
        r,
        ["OBJECT", "NOPE", "k"],
        e("ERR unknown subcommand 'NOPE'. Try OBJECT HELP.")
    );
    assert_reply!(
        r,
        ["OBJECT", "ENCODING"],
        e("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert!(r.cmd(&["OBJECT", "HELP"]).as_array().len() > 4);
}

#[test]
fn expire_options_and_ttl() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "k", "v"]);
    assert_reply!(r, ["TTL", "k"], i(-1));
    assert_reply!(r, ["TTL", "nope"], i(-2));
    assert_reply!(r, ["PTTL", "nope"], i(-2));
    assert_reply!(r, ["EXPIRETIME", "k"], i(-1));
    assert_reply!(r, ["EXPIRE", "k", "100", "XX"], i(0));
    assert_reply!(r, ["EXPIRE", "k", "100", "GT"], i(0));
    assert_reply!(r, ["EXPIRE", "k", "100", "NX"], i(1));
    assert_reply!(r, ["EXPIRE", "k", "200", "NX"], i(0));
    assert_reply!(r, ["EXPIRE", "k", "50", "GT"], i(0));
    assert_reply!(r, ["EXPIRE", "k", "200", "GT"], i(1));
    assert_reply!(r, ["EXPIRE", "k", "300", "LT"], i(0));
    assert_reply!(r, ["EXPIRE", "k", "150", "LT"], i(1));
    assert_reply!(r, ["TTL", "k"], i(150));
    assert_reply!(r, ["PEXPIRE", "k", "150000", "XX"], i(1));
    assert!((149_000..=150_000).contains(&r.cmd(&["PTTL", "k"]).as_int()));
    assert_reply!(r, ["PERSIST", "k"], i(1));
    assert_reply!(r, ["PERSIST", "k"], i(0));
    assert_reply!(r, ["EXPIRE", "k", "100", "LT"], i(1));
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 500;
    assert_reply!(r, ["EXPIREAT", "k", &at.to_string()], i(1));
    assert_reply!(r, ["EXPIRETIME", "k"], i(at as i64));
    assert_reply!(r, ["PEXPIREAT", "k", &(at * 1000).to_string()], i(1));
    assert_reply!(r, ["PEXPIRETIME", "k"], i(at as i64 * 1000));
    assert_reply!(r, ["EXPIRE", "nope", "10"], i(0));
    assert_reply!(
        r,
        ["EXPIRE", "k", "10", "NX", "XX"],
        e("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_reply!(
        r,
        ["EXPIRE", "k", "10", "GT", "LT"],
        e("ERR GT and LT options at the same time are not compatible")
    );
    assert_reply!(
        r,
        ["EXPIRE", "k", "10", "YY"],
        e("ERR Unsupported option YY")
    );
    assert_reply!(
        r,
        ["EXPIRE", "k", "ten"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(
        r,
        ["EXPIRE", "k", "9223372036854775807"],
        e("ERR invalid expire time in 'expire' command")
    );
    // A deadline in the past deletes the key.
    assert_reply!(r, ["EXPIRE", "k", "-1"], i(1));
    assert_reply!(r, ["EXISTS", "k"], i(0));
}

#[test]
fn expired_keys_are_invisible_and_actively_reclaimed() {
    let server = TestServer::start();
    let mut r = server.raw();
    for n in 0..100 {
        r.cmd(&["SET", &format!("short:{n}"), "v", "PX", "50"]);
    }
    r.cmd(&["SET", "keep", "v"]);
    r.cmd(&["SET", "lazy", "v", "PX", "50"]);
    std::thread::sleep(Duration::from_millis(120));
    assert_reply!(r, ["GET", "lazy"], Reply::NullBulk);
    assert_reply!(r, ["EXISTS", "short:1"], i(0));
    assert_reply!(r, ["KEYS", "*"], Reply::Array(vec![b("keep")]));
    // Without touching the keys, the active cycle removes them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while r.cmd(&["DBSIZE"]).as_int() != 1 {
        assert!(
            Instant::now() < deadline,
            "active expiry did not reclaim keys"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let info = r.cmd(&["INFO", "stats"]).as_text();
    assert!(info.contains("expired_keys:101"), "{info}");
}

/// SCAN reclaims the keys past their deadline its cursor passes, as Redis'
/// does: INFO keyspace then counts only the live keys (with active expiry
/// off, nothing else would have removed them), and the reclaimed keys are
/// expired keys in INFO stats.
#[test]
fn scan_reclaims_the_expired_keys_it_passes() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    for n in 0..200 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), "v"]), ok());
    }
    assert_eq!(raw.cmd(&["SET", "gone", "v", "PX", "1"]), ok());
    assert_eq!(raw.cmd(&["HSET", "gone-hash", "f", "v"]), i(1));
    assert_eq!(raw.cmd(&["PEXPIRE", "gone-hash", "1"]), i(1));
    std::thread::sleep(std::time::Duration::from_millis(5));
    let mut cursor = "0".to_string();
    let mut seen = 0;
    loop {
        let reply = raw.cmd(&["SCAN", &cursor, "TYPE", "string", "COUNT", "10"]);
        let parts = reply.as_array();
        cursor = parts[0].as_text();
        seen += parts[1].as_array().len();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, 200);
    let keyspace = raw.cmd(&["INFO", "keyspace"]).as_text();
    assert!(keyspace.contains("db0:keys=200,"), "{keyspace}");
    let stats = raw.cmd(&["INFO", "stats"]).as_text();
    assert_eq!(common::info_field(&stats, "expired_keys"), "2", "{stats}");
    // Inside a transaction (which holds every shard) as well: a whole scan
    // in one EXEC, with COUNT beyond the keys.
    assert_eq!(raw.cmd(&["SET", "late", "v", "PX", "1"]), ok());
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(
        raw.cmd(&["SCAN", "0", "COUNT", "100000"]),
        Reply::simple("QUEUED")
    );
    let replies = raw.cmd(&["EXEC"]);
    let scanned = &replies.as_array()[0].as_array()[1];
    assert_eq!(scanned.as_array().len(), 200);
    let keyspace = raw.cmd(&["INFO", "keyspace"]).as_text();
    assert!(keyspace.contains("db0:keys=200,"), "{keyspace}");
}

/// RANDOMKEY deletes the expired keys it meets, as Redis' does (its
/// replication stream then carries their DELs): with active expiry off,
/// nothing else removes them. Alone and inside MULTI (which holds every
/// shard).
#[test]
fn randomkey_deletes_the_expired_keys_it_meets() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    for transaction in [false, true] {
        assert_eq!(raw.cmd(&["SET", "a", "v", "PX", "1"]), ok());
        assert_eq!(raw.cmd(&["SET", "b", "v", "PX", "1"]), ok());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let reply = match transaction {
            false => raw.cmd(&["RANDOMKEY"]),
            true => {
                assert_eq!(raw.cmd(&["MULTI"]), ok());
                assert_eq!(raw.cmd(&["RANDOMKEY"]), Reply::Simple("QUEUED".into()));
                raw.cmd(&["EXEC"]).as_array()[0].clone()
            }
        };
        assert_eq!(reply, Reply::NullBulk, "transaction: {transaction}");
        assert_eq!(raw.cmd(&["DBSIZE"]), i(0), "transaction: {transaction}");
    }
    let stats = raw.cmd(&["INFO", "stats"]).as_text();
    assert_eq!(common::info_field(&stats, "expired_keys"), "4", "{stats}");
}

/// `rdb_changes_since_last_save` grows as Redis' does for commands that
/// log more than one record: LMOVE and RPOPLPUSH (a pop and a push),
/// RENAME, RENAMENX and MOVE (a delete and a set) count one change, SMOVE
/// two, each against redis-server in the same test; and BLMOVE served
/// from a block one (Redis 7.4's unit/type/list checks it). (Redis also counts
/// elements of some commands, LPUSH of three counts three; Strata counts
/// one change per command there: docs/compatibility.md.)
#[test]
fn changes_are_counted_as_redis_counts_them() {
    let Some(redis) = common::RedisServer::start_unless_missing("the change-count comparison")
    else {
        return;
    };
    // No save points: FLUSHALL between cases then checkpoints nothing in
    // the background (which would reset the count under the test).
    let server = TestServer::start_with(&["--save", ""]);
    let cases: &[(&[&[&str]], &[&str])] = &[
        (
            &[&["RPUSH", "a", "1", "2"]],
            &["LMOVE", "a", "b", "LEFT", "RIGHT"],
        ),
        (&[&["RPUSH", "a", "1"]], &["RPOPLPUSH", "a", "b"]),
        (
            &[&["SET", "k", "v"], &["SET", "k2", "x"]],
            &["RENAME", "k", "k2"],
        ),
        (&[&["SET", "k", "v"]], &["RENAMENX", "k", "k2"]),
        (&[&["SET", "k", "v"]], &["MOVE", "k", "1"]),
        (&[&["SADD", "s", "1", "2"]], &["SMOVE", "s", "t", "1"]),
        (&[&["SET", "k", "v"]], &["COPY", "k", "k2"]),
        (
            &[&["SET", "a", "1"], &["SET", "b", "1"]],
            &["DEL", "a", "b", "c"],
        ),
        (&[], &["SETBIT", "bits", "7", "1"]),
        (
            &[&["SETBIT", "bits", "7", "1"]],
            &["SETBIT", "bits", "7", "1"],
        ),
        (&[&["SET", "n", "1"]], &["INCR", "n"]),
    ];
    let changes = |r: &mut common::Raw| -> i64 {
        let info = r.cmd(&["INFO", "persistence"]).as_text();
        common::info_field(&info, "rdb_changes_since_last_save")
            .parse()
            .unwrap()
    };
    let mut ours = server.raw();
    let mut theirs = common::Raw::connect(redis.port);
    for (setup, command) in cases {
        let mut counted = Vec::new();
        for r in [&mut ours, &mut theirs] {
            r.cmd(&["FLUSHALL"]);
            for step in *setup {
                r.cmd(step);
            }
            let before = changes(r);
            r.cmd(command);
            counted.push(changes(r) - before);
        }
        assert_eq!(counted[0], counted[1], "{command:?}: strata, redis");
    }
    // BLMOVE served when a push arrives: the push and the move, as Redis
    // 7.2+ counts them (7.0.15 counted the push alone).
    {
        let mut r = server.raw();
        let mut blocked = server.raw();
        r.cmd(&["FLUSHALL"]);
        let before = changes(&mut r);
        blocked.send(&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !r.cmd(&["CLIENT", "LIST"]).as_text().contains("cmd=blmove") {
            assert!(Instant::now() < deadline, "BLMOVE did not block");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(r.cmd(&["LPUSH", "src", "a"]), i(1));
        assert_eq!(blocked.read(), b("a"));
        assert_eq!(changes(&mut r) - before, 2);
    }
}
