//! String commands against the real server: replies, options and Redis'
//! exact error strings.

mod common;

use common::{READY, Reply, TestServer, b, e, i, ok};
use redis::Commands;

#[test]
fn get_set_with_the_redis_crate() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = con.set("greeting", "hello").unwrap();
    assert_eq!(con.get::<_, String>("greeting").unwrap(), "hello");
    assert_eq!(con.get::<_, Option<String>>("missing").unwrap(), None);
    let big = vec![7u8; 3 * 1024 * 1024];
    let _: () = con.set("big", &big).unwrap();
    assert_eq!(con.get::<_, Vec<u8>>("big").unwrap(), big);
    let binary: Vec<u8> = (0..=255).collect();
    let _: () = con.set(&binary, &binary).unwrap();
    assert_eq!(con.get::<_, Vec<u8>>(&binary).unwrap(), binary);
}

#[test]
fn set_options() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["SET", "k", "v1", "NX"], ok());
    assert_reply!(r, ["SET", "k", "v2", "NX"], Reply::NullBulk);
    assert_reply!(r, ["SET", "k", "v3", "XX"], ok());
    assert_reply!(r, ["SET", "absent", "v", "XX"], Reply::NullBulk);
    assert_reply!(r, ["SET", "k", "v4", "GET"], b("v3"));
    assert_reply!(r, ["SET", "new", "v", "GET"], Reply::NullBulk);
    assert_reply!(r, ["SET", "k", "v5", "NX", "GET"], b("v4"));
    assert_reply!(r, ["GET", "k"], b("v4"));
    assert_reply!(r, ["SET", "k", "v", "EX", "100"], ok());
    assert_reply!(r, ["TTL", "k"], i(100));
    assert_reply!(r, ["SET", "k", "v", "PX", "100000"], ok());
    assert!((99_000..=100_000).contains(&r.cmd(&["PTTL", "k"]).as_int()));
    assert_reply!(r, ["SET", "k", "w", "KEEPTTL"], ok());
    assert!(r.cmd(&["PTTL", "k"]).as_int() > 0);
    assert_reply!(r, ["SET", "k", "w"], ok());
    assert_reply!(r, ["TTL", "k"], i(-1));
    let future_s = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1000)
        .to_string();
    assert_reply!(r, ["SET", "k", "v", "EXAT", &future_s], ok());
    assert_reply!(r, ["EXPIRETIME", "k"], i(future_s.parse().unwrap()));
    let future_ms = (future_s.parse::<i64>().unwrap() * 1000).to_string();
    assert_reply!(r, ["SET", "k", "v", "PXAT", &future_ms], ok());
    assert_reply!(r, ["PEXPIRETIME", "k"], i(future_ms.parse().unwrap()));
    assert_reply!(r, ["SET", "k", "v", "PXAT", "1"], ok());
    assert_reply!(r, ["EXISTS", "k"], i(0));
    // Errors.
    assert_reply!(r, ["SET", "k", "v", "NX", "XX"], e("ERR syntax error"));
    assert_reply!(
        r,
        ["SET", "k", "v", "EX", "10", "PX", "10"],
        e("ERR syntax error")
    );
    assert_reply!(
        r,
        ["SET", "k", "v", "EX", "10", "KEEPTTL"],
        e("ERR syntax error")
    );
    assert_reply!(r, ["SET", "k", "v", "EX"], e("ERR syntax error"));
    assert_reply!(r, ["SET", "k", "v", "BOGUS"], e("ERR syntax error"));
    assert_reply!(
        r,
        ["SET", "k", "v", "EX", "0"],
        e("ERR invalid expire time in 'set' command")
    );
    assert_reply!(
        r,
        ["SET", "k", "v", "EX", "-5"],
        e("ERR invalid expire time in 'set' command")
    );
    assert_reply!(
        r,
        ["SET", "k", "v", "EX", "9223372036854775807"],
        e("ERR invalid expire time in 'set' command")
    );
    assert_reply!(
        r,
        ["SET", "k", "v", "EX", "ten"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(
        r,
        ["SET", "k"],
        e("ERR wrong number of arguments for 'set' command")
    );
}

#[test]
fn setnx_setex_getset_getdel_getex() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["SETNX", "k", "a"], i(1));
    assert_reply!(r, ["SETNX", "k", "b"], i(0));
    assert_reply!(r, ["SETEX", "k", "50", "c"], ok());
    assert_reply!(r, ["TTL", "k"], i(50));
    assert_reply!(
        r,
        ["SETEX", "k", "0", "c"],
        e("ERR invalid expire time in 'setex' command")
    );
    assert_reply!(
        r,
        ["PSETEX", "k", "-1", "c"],
        e("ERR invalid expire time in 'psetex' command")
    );
    assert_reply!(r, ["PSETEX", "k", "50000", "d"], ok());
    assert_reply!(r, ["GETSET", "k", "e"], b("d"));
    assert_reply!(r, ["TTL", "k"], i(-1));
    assert_reply!(r, ["GETSET", "nokey", "x"], Reply::NullBulk);
    assert_reply!(r, ["GETDEL", "k"], b("e"));
    assert_reply!(r, ["GETDEL", "k"], Reply::NullBulk);
    assert_reply!(r, ["SET", "k", "v"], ok());
    assert_reply!(r, ["GETEX", "k", "EX", "30"], b("v"));
    assert_reply!(r, ["TTL", "k"], i(30));
    assert_reply!(r, ["GETEX", "k"], b("v"));
    assert_reply!(r, ["TTL", "k"], i(30));
    assert_reply!(r, ["GETEX", "k", "PERSIST"], b("v"));
    assert_reply!(r, ["TTL", "k"], i(-1));
    assert_reply!(
        r,
        ["GETEX", "k", "PX", "0"],
        e("ERR invalid expire time in 'getex' command")
    );
    assert_reply!(
        r,
        ["GETEX", "k", "EX", "10", "PERSIST"],
        e("ERR syntax error")
    );
    assert_reply!(r, ["GETEX", "k", "PXAT", "1"], b("v"));
    assert_reply!(r, ["EXISTS", "k"], i(0));
    assert_reply!(r, ["GETEX", "missing", "EX", "10"], Reply::NullBulk);
}

#[test]
fn multi_key_strings() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["MSET", "a", "1", "b", "2", "c", "3"], ok());
    assert_reply!(
        r,
        ["MGET", "a", "nope", "c"],
        Reply::Array(vec![b("1"), Reply::NullBulk, b("3")])
    );
    assert_reply!(
        r,
        ["MSET", "a", "1", "b"],
        e("ERR wrong number of arguments for 'mset' command")
    );
    assert_reply!(r, ["MSETNX", "x", "1", "a", "9"], i(0));
    assert_reply!(r, ["EXISTS", "x"], i(0));
    assert_reply!(r, ["MSETNX", "x", "1", "y", "2"], i(1));
    assert_reply!(r, ["MGET", "x", "y"], Reply::Array(vec![b("1"), b("2")]));
    assert_reply!(
        r,
        ["MSETNX", "x"],
        e("ERR wrong number of arguments for 'msetnx' command")
    );
}

#[test]
fn append_strlen_ranges() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["APPEND", "s", "Hello"], i(5));
    assert_reply!(r, ["APPEND", "s", " World"], i(11));
    assert_reply!(r, ["STRLEN", "s"], i(11));
    assert_reply!(r, ["STRLEN", "nope"], i(0));
    assert_reply!(r, ["GETRANGE", "s", "0", "4"], b("Hello"));
    assert_reply!(r, ["GETRANGE", "s", "-5", "-1"], b("World"));
    assert_reply!(r, ["GETRANGE", "s", "0", "-1"], b("Hello World"));
    assert_reply!(r, ["GETRANGE", "s", "5", "3"], b(""));
    assert_reply!(r, ["GETRANGE", "s", "100", "200"], b(""));
    assert_reply!(r, ["SUBSTR", "s", "6", "100"], b("World"));
    assert_reply!(r, ["GETRANGE", "nope", "0", "-1"], b(""));
    assert_reply!(
        r,
        ["GETRANGE", "s", "a", "1"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(r, ["SETRANGE", "s", "6", "Redis"], i(11));
    assert_reply!(r, ["GET", "s"], b("Hello Redis"));
    assert_reply!(r, ["SETRANGE", "pad", "3", "x"], i(4));
    assert_reply!(r, ["GET", "pad"], Reply::Bulk(b"\0\0\0x".to_vec()));
    assert_reply!(r, ["SETRANGE", "empty", "5", ""], i(0));
    assert_reply!(r, ["EXISTS", "empty"], i(0));
    assert_reply!(
        r,
        ["SETRANGE", "s", "-1", "x"],
        e("ERR offset is out of range")
    );
    assert_reply!(
        r,
        ["SETRANGE", "s", "536870911", "xx"],
        e("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    // Appending to an integer-encoded value.
    assert_reply!(r, ["SET", "n", "12"], ok());
    assert_reply!(r, ["APPEND", "n", "3"], i(3));
    assert_reply!(r, ["INCR", "n"], i(124));
}

#[test]
fn counters() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["INCR", "c"], i(1));
    assert_reply!(r, ["INCRBY", "c", "10"], i(11));
    assert_reply!(r, ["DECR", "c"], i(10));
    assert_reply!(r, ["DECRBY", "c", "20"], i(-10));
    assert_reply!(r, ["SET", "c", "9223372036854775807"], ok());
    assert_reply!(
        r,
        ["INCR", "c"],
        e("ERR increment or decrement would overflow")
    );
    assert_reply!(
        r,
        ["DECRBY", "c", "-9223372036854775808"],
        e("ERR decrement would overflow")
    );
    assert_reply!(r, ["SET", "c", "abc"], ok());
    assert_reply!(
        r,
        ["INCR", "c"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(r, ["SET", "c", " 1"], ok());
    assert_reply!(
        r,
        ["INCR", "c"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(
        r,
        ["INCRBY", "c", "1.5"],
        e("ERR value is not an integer or out of range")
    );
    assert_reply!(r, ["SET", "t", "5", "EX", "100"], ok());
    assert_reply!(r, ["INCR", "t"], i(6));
    assert_reply!(r, ["TTL", "t"], i(100));
    assert_reply!(r, ["INCRBYFLOAT", "f", "10.5"], b("10.5"));
    assert_reply!(r, ["INCRBYFLOAT", "f", "0.1"], b("10.6"));
    assert_reply!(r, ["INCRBYFLOAT", "f", "-5"], b("5.6"));
    assert_reply!(r, ["SET", "f", "5.0e3"], ok());
    assert_reply!(r, ["INCRBYFLOAT", "f", "2.0e2"], b("5200"));
    assert_reply!(
        r,
        ["INCRBYFLOAT", "f", "abc"],
        e("ERR value is not a valid float")
    );
    assert_reply!(
        r,
        ["INCRBYFLOAT", "f", "inf"],
        e("ERR increment would produce NaN or Infinity")
    );
    assert_reply!(r, ["SET", "f", "x"], ok());
    assert_reply!(
        r,
        ["INCRBYFLOAT", "f", "1"],
        e("ERR value is not a valid float")
    );
    assert_reply!(r, ["OBJECT", "ENCODING", "c"], b("embstr"));
    assert_reply!(r, ["SET", "n", "123"], ok());
    assert_reply!(r, ["OBJECT", "ENCODING", "n"], b("int"));
    assert_reply!(r, ["SET", "long", &"x".repeat(45)], ok());
    assert_reply!(r, ["OBJECT", "ENCODING", "long"], b("raw"));
}

#[test]
fn concurrent_increments_from_many_connections_are_exact() {
    let server = TestServer::start();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let mut con = server.client();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let _: i64 = con.incr("counter", 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut con = server.client();
    assert_eq!(con.get::<_, i64>("counter").unwrap(), 4000);
}

#[test]
fn lcs() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_reply!(r, ["MSET", "key1", "ohmytext", "key2", "mynewtext"], ok());
    assert_reply!(r, ["LCS", "key1", "key2"], b("mytext"));
    assert_reply!(r, ["LCS", "key1", "key2", "LEN"], i(6));
    let range = |a: i64, b: i64| Reply::Array(vec![i(a), i(b)]);
    assert_reply!(
        r,
        ["LCS", "key1", "key2", "IDX"],
        Reply::Array(vec![
            b("matches"),
            Reply::Array(vec![
                Reply::Array(vec![range(4, 7), range(5, 8)]),
                Reply::Array(vec![range(2, 3), range(0, 1)])
            ]),
            b("len"),
            i(6),
        ])
    );
    assert_reply!(
        r,
        [
            "LCS",
            "key1",
            "key2",
            "IDX",
            "MINMATCHLEN",
            "4",
            "WITHMATCHLEN"
        ],
        Reply::Array(vec![
            b("matches"),
            Reply::Array(vec![Reply::Array(vec![range(4, 7), range(5, 8), i(4)])]),
            b("len"),
            i(6)
        ])
    );
    assert_reply!(
        r,
        ["LCS", "key1", "key2", "LEN", "IDX"],
        e("ERR If you want both the length and indexes, please just use IDX.")
    );
    assert_reply!(r, ["LCS", "key1", "nokey"], b(""));
    assert_reply!(r, ["LCS", "key1", "key2", "FOO"], e("ERR syntax error"));
}

#[test]
fn size_limits_follow_proto_max_bulk_len() {
    let server = TestServer::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut r = server.raw();
    let half = "x".repeat(600 * 1024);
    assert_reply!(r, ["SET", "s", &half], ok());
    assert_reply!(
        r,
        ["APPEND", "s", &half],
        e("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_reply!(r, ["STRLEN", "s"], i(600 * 1024));
    // LCS needs (len1 + 1) × (len2 + 1) × 4 bytes of table: 4 MB here.
    assert_reply!(r, ["SET", "a", &"a".repeat(1000)], ok());
    assert_reply!(r, ["SET", "b", &"b".repeat(1000)], ok());
    assert_reply!(
        r,
        ["LCS", "a", "b"],
        e("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    );
    assert_reply!(r, ["SET", "c", "abc"], ok());
    assert_reply!(r, ["LCS", "a", "c"], b("a"));
}

/// Redis 8.4's compare-and-set (SET IFEQ/IFNE) and compare-and-delete
/// (DELEX), the way a lock is released: only by its holder.
#[test]
fn set_ifeq_ifne_and_delex_compare_before_they_write() {
    let server = TestServer::start();
    let mut r = server.raw();
    // IFEQ never creates; IFNE creates a missing key.
    assert_eq!(r.cmd(&["SET", "lock", "a", "IFEQ", "x"]), Reply::NullBulk);
    assert_eq!(r.cmd(&["EXISTS", "lock"]), i(0));
    assert_eq!(r.cmd(&["SET", "lock", "a", "IFNE", "x"]), ok());
    assert_eq!(r.cmd(&["SET", "lock", "b", "IFEQ", "x"]), Reply::NullBulk);
    assert_eq!(r.cmd(&["SET", "lock", "b", "IFEQ", "a", "GET"]), b("a"));
    assert_eq!(r.cmd(&["SET", "lock", "c", "IFNE", "b", "GET"]), b("b"));
    assert_eq!(r.cmd(&["GET", "lock"]), b("b"));
    assert_eq!(
        r.cmd(&["SET", "lock", "c", "IFNE", "a", "PX", "100000"]),
        ok()
    );
    assert!(r.cmd(&["PTTL", "lock"]).as_int() > 0);
    for bad in [
        &["SET", "lock", "v", "IFEQ", "a", "NX"][..],
        &["SET", "lock", "v", "XX", "IFNE", "a"],
        &["SET", "lock", "v", "IFEQ", "a", "IFNE", "b"],
        &["SET", "lock", "v", "IFEQ"],
    ] {
        assert_eq!(r.cmd(bad), e("ERR syntax error"), "{bad:?}");
    }
    r.cmd(&["RPUSH", "list", "x"]);
    assert_eq!(
        r.cmd(&["SET", "list", "v", "IFEQ", "x"]),
        e("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    // DELEX: a plain delete without a condition, of any type.
    assert_eq!(r.cmd(&["DELEX", "lock", "IFEQ", "other"]), i(0));
    assert_eq!(r.cmd(&["DELEX", "lock", "IFNE", "c"]), i(0));
    assert_eq!(r.cmd(&["DELEX", "lock", "IFEQ", "c"]), i(1));
    assert_eq!(r.cmd(&["DELEX", "lock", "IFNE", "c"]), i(0));
    // Redis' own message for a condition on another type.
    assert_eq!(
        r.cmd(&["DELEX", "list", "IFEQ", "x"]),
        e("ERR Key should be of string type if conditions are specified")
    );
    assert_eq!(r.cmd(&["DELEX", "list"]), i(1));
    assert_eq!(r.cmd(&["DELEX", "list"]), i(0));
    assert_eq!(
        r.cmd(&["DELEX", "k", "IFEQ"]),
        e("ERR wrong number of arguments for 'delex' command")
    );
    // The condition survives a restart: it is an ordinary logged write.
    assert_eq!(r.cmd(&["SET", "held", "me", "IFNE", "x"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    assert_eq!(r.cmd(&["GET", "held"]), b("me"));
}

/// DIGEST and the digest conditions (Redis 8.4): XXH3-64 of the value in
/// 16 lowercase hex digits, compared in any case; replies checked against
/// redis-server 8.6.3 (`00006c38adf31777` is Redis' own test of the
/// leading zeros).
#[test]
fn digest_and_the_digest_conditions() {
    let server = TestServer::start();
    let mut r = server.raw();
    let value = "v8lf0c11xh8ymlqztfd3eeq16kfn4sspw7fqmnuuq3k3t75em5wdizgcdw7uc26nnf961u2jkfzkjytls2kwlj7626sd";
    assert_eq!(r.cmd(&["SET", "foo", value]), ok());
    assert_eq!(r.cmd(&["DIGEST", "foo"]), b("00006c38adf31777"));
    assert_eq!(r.cmd(&["SET", "empty", ""]), ok());
    assert_eq!(r.cmd(&["DIGEST", "empty"]), b("2d06800538d394c2"));
    assert_eq!(r.cmd(&["SET", "n", "12345"]), ok());
    assert_eq!(r.cmd(&["DIGEST", "n"]), b("f34099ede96b5581"));
    assert_eq!(r.cmd(&["DIGEST", "missing"]), Reply::NullBulk);
    r.cmd(&["RPUSH", "list", "x"]);
    assert_eq!(
        r.cmd(&["DIGEST", "list"]),
        e("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    // IFDEQ in upper case matches; a digest of another length is an
    // error only when there is a value to compare it with.
    assert_eq!(
        r.cmd(&["SET", "foo", "x", "IFDEQ", "00006C38ADF31777"]),
        ok()
    );
    assert_eq!(r.cmd(&["GET", "foo"]), b("x"));
    assert_eq!(
        r.cmd(&["SET", "foo", "y", "IFDEQ", "abc"]),
        e("ERR must be exactly 16 hexadecimal characters")
    );
    assert_eq!(r.cmd(&["SET", "new", "v", "IFDEQ", "abc"]), Reply::NullBulk);
    assert_eq!(r.cmd(&["SET", "new", "v", "IFDNE", "abc"]), ok());
    assert_eq!(
        r.cmd(&["SET", "new", "w", "IFDNE", "2d06800538d394c2"]),
        ok()
    );
    assert_eq!(
        r.cmd(&["SET", "empty", "w", "IFDNE", "2d06800538d394c2"]),
        Reply::NullBulk
    );
    // The same condition twice: the last one counts, as in Redis.
    assert_eq!(
        r.cmd(&["SET", "foo", "z", "IFEQ", "nope", "IFEQ", "x"]),
        ok()
    );
    let digest = r.cmd(&["DIGEST", "foo"]).as_text();
    assert_eq!(r.cmd(&["DELEX", "foo", "IFDNE", &digest]), i(0));
    assert_eq!(
        r.cmd(&["DELEX", "foo", "IFDEQ", &digest.to_uppercase()]),
        i(1)
    );
    assert_eq!(r.cmd(&["DELEX", "nokey", "BOGUS", "x"]), i(0));
    assert_eq!(
        r.cmd(&["DELEX", "n", "BOGUS", "x"]),
        e("ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE")
    );
}

/// MSETEX (Redis 8.4): one expiry for every key, all or nothing under
/// NX/XX, Redis' errors (checked against redis-server 8.6.3), and keys
/// that survive a restart with their expiry.
#[test]
fn msetex_sets_every_key_or_none() {
    let server = TestServer::start();
    let mut r = server.raw();
    assert_eq!(
        r.cmd(&["MSETEX", "2", "a", "1", "b", "2", "EX", "100", "NX"]),
        i(1)
    );
    let ttl = r.cmd(&["TTL", "b"]).as_int();
    assert!((99..=100).contains(&ttl), "{ttl}");
    // NX: `a` exists, so `c` is not set either.
    assert_eq!(r.cmd(&["MSETEX", "2", "a", "9", "c", "9", "NX"]), i(0));
    assert_eq!(r.cmd(&["EXISTS", "c"]), i(0));
    assert_eq!(r.cmd(&["GET", "a"]), b("1"));
    // XX: `c` is missing.
    assert_eq!(r.cmd(&["MSETEX", "2", "a", "9", "c", "9", "XX"]), i(0));
    // KEEPTTL keeps the expiry; without options the expiry goes, and a
    // key of another type becomes a string.
    assert_eq!(r.cmd(&["MSETEX", "1", "b", "3", "KEEPTTL", "XX"]), i(1));
    assert!(r.cmd(&["TTL", "b"]).as_int() > 0);
    r.cmd(&["RPUSH", "list", "x"]);
    assert_eq!(r.cmd(&["MSETEX", "2", "b", "4", "list", "s"]), i(1));
    assert_eq!(r.cmd(&["TTL", "b"]), i(-1));
    assert_eq!(r.cmd(&["GET", "list"]), b("s"));
    assert_eq!(
        r.cmd(&["MSETEX", "1", "p", "v", "PX", "100000", "PX", "200000"]),
        i(1)
    );
    assert!(r.cmd(&["PTTL", "p"]).as_int() > 150_000);
    for (args, error) in [
        (&["MSETEX", "0", "a", "1"][..], "ERR invalid numkeys value"),
        (&["MSETEX", "x", "a", "1"], "ERR invalid numkeys value"),
        (
            &["MSETEX", "2", "a", "1", "b"],
            "ERR wrong number of key-value pairs",
        ),
        (
            &["MSETEX", "2147483647", "a", "1", "EX", "10"],
            "ERR wrong number of key-value pairs",
        ),
        (&["MSETEX", "1", "a", "1", "b", "2"], "ERR syntax error"),
        (&["MSETEX", "1", "a", "1", "NX", "XX"], "ERR syntax error"),
        (
            &["MSETEX", "1", "a", "1", "KEEPTTL", "EX", "5"],
            "ERR syntax error",
        ),
        (
            &["MSETEX", "1", "a", "1", "EX", "5", "PX", "5"],
            "ERR syntax error",
        ),
        (&["MSETEX", "1", "a", "1", "GET"], "ERR syntax error"),
        (
            &["MSETEX", "1", "a", "1", "EX", "0"],
            "ERR invalid expire time in 'msetex' command",
        ),
        (
            &["MSETEX", "1", "a"],
            "ERR wrong number of arguments for 'msetex' command",
        ),
    ] {
        assert_eq!(r.cmd(args), e(error), "{args:?}");
    }
    assert_eq!(r.cmd(&["GET", "a"]), b("1"));
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    assert_eq!(r.cmd(&["GET", "list"]), b("s"));
    assert!(r.cmd(&["PTTL", "p"]).as_int() > 100_000);
}
