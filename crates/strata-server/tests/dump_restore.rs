//! DUMP and RESTORE against the real server, and against Debian's
//! redis-server: every type in every encoding Redis 7 writes moves from
//! Redis to Strata and back, with its contents intact; RESTORE's options
//! and errors are Redis'.

mod common;

use common::*;
use redis::Value;

/// Creates one key of every type and encoding on `con` (a Redis or a
/// Strata connection), and returns their names.
fn create_keys(con: &mut redis::Connection) -> Vec<&'static str> {
    let mut pipe = redis::pipe();
    pipe.set("s_int", 12345)
        .set("s_small", "hello")
        .set("s_lzf", "abc".repeat(100))
        .set("s_binary", vec![0u8, 255, 10, 13]);
    pipe.rpush("l_small", &["a", "1", "-7", "300000", "x"]);
    pipe.rpush(
        "l_big",
        (0..2000)
            .map(|n| format!("element-{n}"))
            .collect::<Vec<_>>(),
    );
    pipe.rpush("l_long_elements", vec!["y".repeat(9000), "z".to_owned()]);
    pipe.sadd("set_int", &[1i64, 2, 3, -5]);
    pipe.sadd("set_int64", &[i64::MIN, 0, i64::MAX]);
    pipe.sadd("set_small", &["a", "b", "c"]);
    pipe.sadd(
        "set_big",
        (0..1000).map(|n| format!("m{n}")).collect::<Vec<_>>(),
    );
    pipe.zadd_multiple("z_small", &[(1.5, "a"), (-2.0, "b"), (3.0, "c")]);
    pipe.zadd_multiple(
        "z_big",
        &(0..300)
            .map(|n| (n as f64 / 3.0, format!("m{n}")))
            .collect::<Vec<_>>(),
    );
    pipe.cmd("ZADD")
        .arg("z_inf")
        .arg("+inf")
        .arg("top")
        .arg("-inf")
        .arg("bottom");
    pipe.hset_multiple("h_small", &[("f1", "v1"), ("f2", "22")]);
    pipe.hset_multiple(
        "h_big",
        &(0..1000)
            .map(|n| (format!("f{n}"), n.to_string()))
            .collect::<Vec<_>>(),
    );
    pipe.hset("h_long_value", "f", "v".repeat(5000));
    let () = pipe.query(con).expect("keys created");
    vec![
        "s_int",
        "s_small",
        "s_lzf",
        "s_binary",
        "l_small",
        "l_big",
        "l_long_elements",
        "set_int",
        "set_int64",
        "set_small",
        "set_big",
        "z_small",
        "z_big",
        "z_inf",
        "h_small",
        "h_big",
        "h_long_value",
    ]
}

/// A key's contents in a form that compares across servers: its type and
/// its elements (sets and hashes sorted).
fn contents(con: &mut redis::Connection, key: &str) -> String {
    let kind: String = redis::cmd("TYPE").arg(key).query(con).unwrap();
    let read =
        |cmd: &mut redis::Cmd, con: &mut redis::Connection| -> Value { cmd.query(con).unwrap() };
    let value = match kind.as_str() {
        "string" => read(redis::cmd("GET").arg(key), con),
        "list" => read(redis::cmd("LRANGE").arg(key).arg(0).arg(-1), con),
        "set" => {
            let mut members: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query(con).unwrap();
            members.sort();
            return format!("set {members:?}");
        }
        "zset" => {
            // Scores as values: redis-server 7.0 prints them `%.17g`,
            // Strata as Redis 7.2+ does (the shortest text).
            let pairs: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(con)
                .unwrap();
            return format!("zset {pairs:?}");
        }
        "hash" => {
            let mut pairs: Vec<(Vec<u8>, Vec<u8>)> =
                redis::cmd("HGETALL").arg(key).query(con).unwrap();
            pairs.sort();
            return format!("hash {pairs:?}");
        }
        other => panic!("{key} has type {other}"),
    };
    format!("{kind} {value:?}")
}

fn dump(con: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(con).unwrap()
}

fn restore(con: &mut redis::Connection, key: &str, payload: &[u8]) -> redis::RedisResult<()> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .query(con)
}

fn redis_connection(server: &RedisServer) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))
        .unwrap()
        .get_connection_with_timeout(TIMEOUT)
        .unwrap()
}

/// Creates every key on `from`, DUMPs each and RESTOREs it into `to`, and
/// checks the contents match.
fn move_keys(from: &mut redis::Connection, to: &mut redis::Connection) -> Vec<&'static str> {
    let keys = create_keys(from);
    for key in &keys {
        let payload = dump(from, key);
        restore(to, key, &payload).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(contents(to, key), contents(from, key), "{key}");
    }
    keys
}

/// Every key Redis dumps restores in Strata with the same contents.
#[test]
fn keys_move_from_redis_to_strata() {
    let Some(redis_server) = RedisServer::start_unless_missing("DUMP from Redis") else {
        return;
    };
    let mut redis_con = redis_connection(&redis_server);
    // Make Redis write a list node holding one element as is ("plain").
    let () = redis::cmd("DEBUG")
        .arg("QUICKLIST-PACKED-THRESHOLD")
        .arg(1000)
        .query(&mut redis_con)
        .unwrap();
    let server = TestServer::start();
    move_keys(&mut redis_con, &mut server.client());
}

/// Every key Strata dumps restores in Redis with the same contents, and
/// in Strata again under another name.
#[test]
fn keys_move_from_strata_to_redis() {
    let Some(redis_server) = RedisServer::start_unless_missing("RESTORE into Redis") else {
        return;
    };
    let server = TestServer::start();
    let mut strata = server.client();
    for key in move_keys(&mut strata, &mut redis_connection(&redis_server)) {
        let copy = format!("{key}_again");
        let payload = dump(&mut strata, key);
        restore(&mut strata, &copy, &payload).unwrap();
        assert_eq!(contents(&mut strata, &copy), contents(&mut strata, key));
    }
}

#[test]
fn restore_options_and_errors_are_redis() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let mut con = server.client();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("value")
        .query(&mut con)
        .unwrap();
    let payload = dump(&mut con, "k");
    let restore_raw = |raw: &mut Raw, args: &[&[u8]]| {
        let mut full: Vec<&[u8]> = vec![b"RESTORE"];
        full.extend_from_slice(args);
        raw.cmd_bytes(&full)
    };
    assert_eq!(
        restore_raw(&mut raw, &[b"k", b"0", &payload]),
        e("BUSYKEY Target key name already exists.")
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"-1", &payload]),
        e("ERR Invalid TTL value, must be >= 0")
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"x", &payload]),
        e("ERR value is not an integer or out of range")
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"0", b"garbage-payload"]),
        e("ERR DUMP payload version or checksum are wrong")
    );
    let mut damaged = payload.clone();
    damaged[2] ^= 0x55;
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"0", &damaged]),
        e("ERR DUMP payload version or checksum are wrong")
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"0", &payload, b"IDLETIME", b"-1"]),
        e("ERR Invalid IDLETIME value, must be >= 0")
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"0", &payload, b"FREQ", b"256"]),
        e("ERR Invalid FREQ value, must be >= 0 and <= 255")
    );
    assert_eq!(
        restore_raw(
            &mut raw,
            &[b"k2", b"0", &payload, b"IDLETIME", b"1", b"FREQ", b"1"]
        ),
        e("ERR syntax error")
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k2", b"0", &payload, b"BOGUS"]),
        e("ERR syntax error")
    );
    assert_eq!(raw.cmd(&["DUMP", "missing"]), Reply::NullBulk);

    // REPLACE, a relative TTL, IDLETIME.
    let other = {
        let _: () = redis::cmd("SET")
            .arg("src")
            .arg("other")
            .query(&mut con)
            .unwrap();
        dump(&mut con, "src")
    };
    assert_eq!(
        restore_raw(
            &mut raw,
            &[b"k", b"50000", &other, b"REPLACE", b"IDLETIME", b"1000"]
        ),
        ok()
    );
    let idle = raw.cmd(&["OBJECT", "IDLETIME", "k"]).as_int();
    assert!((1000..1010).contains(&idle), "idle {idle}");
    assert_eq!(raw.cmd(&["GET", "k"]), b("other"));
    let ttl = raw.cmd(&["PTTL", "k"]).as_int();
    assert!((40_000..=50_000).contains(&ttl), "pttl {ttl}");

    // ABSTTL: a deadline in the future is kept; one in the past deletes a
    // replaced key and adds nothing.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let future = (now_ms + 100_000).to_string();
    assert_eq!(
        restore_raw(&mut raw, &[b"abs", future.as_bytes(), &payload, b"ABSTTL"]),
        ok()
    );
    assert_eq!(
        raw.cmd(&["PEXPIRETIME", "abs"]).as_int(),
        (now_ms + 100_000) as i64
    );
    assert_eq!(
        restore_raw(&mut raw, &[b"k", b"1", &payload, b"ABSTTL", b"REPLACE"]),
        ok()
    );
    assert_eq!(raw.cmd(&["EXISTS", "k"]), i(0));
}

/// A hash with field deadlines keeps them through DUMP / RESTORE in
/// Strata; Redis 7.0, which has no field deadlines, refuses the payload
/// instead of restoring the hash without them.
#[test]
fn field_deadlines_travel_or_are_refused() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["HSET", "h", "a", "1", "b", "2"]), i(2));
    assert_eq!(
        raw.cmd(&["HEXPIRE", "h", "1000", "FIELDS", "1", "a"])
            .as_array(),
        &[i(1)]
    );
    let payload = match raw.cmd(&["DUMP", "h"]) {
        Reply::Bulk(bytes) => bytes,
        other => panic!("DUMP replied {other:?}"),
    };
    assert_eq!(raw.cmd_bytes(&[b"RESTORE", b"h2", b"0", &payload]), ok());
    let ttl = raw.cmd(&["HTTL", "h2", "FIELDS", "2", "a", "b"]);
    let ttl = ttl.as_array();
    assert!((990..=1000).contains(&ttl[0].as_int()), "{ttl:?}");
    assert_eq!(ttl[1], i(-1));
    if let Some(redis_server) = RedisServer::start_unless_missing("field deadline payloads") {
        let mut redis_con = redis_connection(&redis_server);
        let refused = restore(&mut redis_con, "h", &payload).unwrap_err();
        assert!(refused.to_string().contains("payload version"), "{refused}");
    }
}

/// MIGRATE moves keys to a redis-server and to another Strata, with
/// COPY, REPLACE, KEYS, AUTH and the TTL; errors are Redis'.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn migrate_moves_keys_to_redis_and_to_strata() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let target = TestServer::start_with(&["--requirepass", "secret"]);
    let mut target_raw = target.raw();
    assert_eq!(target_raw.cmd(&["AUTH", "secret"]), ok());
    let port = target.port.to_string();

    assert_eq!(raw.cmd(&["SET", "k", "v", "PX", "60000"]), ok());
    assert_eq!(raw.cmd(&["RPUSH", "l", "a", "b"]), i(2));
    // Wrong password: the target's error, and nothing moves.
    let refused = raw.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "k",
        "0",
        "5000",
        "AUTH",
        "nope",
    ]);
    assert!(
        refused
            .as_text()
            .starts_with("ERR Target instance replied with error: WRONGPASS"),
        "{refused:?}"
    );
    assert_eq!(raw.cmd(&["EXISTS", "k"]), i(1));
    assert_eq!(
        raw.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "k",
            "3",
            "5000",
            "AUTH",
            "secret"
        ]),
        ok()
    );
    assert_eq!(raw.cmd(&["EXISTS", "k"]), i(0), "moved, not copied");
    assert_eq!(target_raw.cmd(&["SELECT", "3"]), ok());
    assert_eq!(target_raw.cmd(&["GET", "k"]), b("v"));
    let ttl = target_raw.cmd(&["PTTL", "k"]).as_int();
    assert!((50_000..=60_000).contains(&ttl), "the TTL travels: {ttl}");

    // KEYS with COPY: the existing ones go, the source keeps them.
    assert_eq!(
        raw.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "3",
            "5000",
            "COPY",
            "AUTH2",
            "default",
            "secret",
            "KEYS",
            "l",
            "missing",
        ]),
        ok()
    );
    assert_eq!(raw.cmd(&["LLEN", "l"]), i(2));
    assert_eq!(
        target_raw.cmd(&["LRANGE", "l", "0", "-1"]).as_array(),
        &[b("a"), b("b")]
    );
    // Without REPLACE an existing key is the target's BUSYKEY.
    let busy = raw.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "l",
        "3",
        "5000",
        "AUTH",
        "secret",
    ]);
    assert_eq!(
        busy,
        e("ERR Target instance replied with error: BUSYKEY Target key name already exists.")
    );
    assert_eq!(raw.cmd(&["LLEN", "l"]), i(2), "kept after an error");
    assert_eq!(raw.cmd(&["RPUSH", "l", "c"]), i(3));
    assert_eq!(
        raw.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "l",
            "3",
            "5000",
            "REPLACE",
            "AUTH",
            "secret"
        ]),
        ok()
    );
    assert_eq!(target_raw.cmd(&["LLEN", "l"]), i(3));
    assert_eq!(raw.cmd(&["EXISTS", "l"]), i(0));

    // Nothing to move; argument errors; nobody listening.
    assert_eq!(
        raw.cmd(&["MIGRATE", "127.0.0.1", &port, "nokey", "0", "100"]),
        Reply::Simple("NOKEY".into())
    );
    assert_eq!(
        raw.cmd(&["MIGRATE", "127.0.0.1", &port, "x", "0", "100", "KEYS", "a"]),
        e("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string")
    );
    assert_eq!(
        raw.cmd(&["MIGRATE", "127.0.0.1", &port, "x", "0", "100", "BOGUS"]),
        e("ERR syntax error")
    );
    assert_eq!(raw.cmd(&["SET", "stay", "1"]), ok());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert_eq!(
        raw.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &closed.to_string(),
            "stay",
            "0",
            "500"
        ]),
        e("IOERR error or timeout connecting to the client")
    );
    assert_eq!(raw.cmd(&["GET", "stay"]), b("1"));

    if let Some(redis_server) = RedisServer::start_unless_missing("MIGRATE to Redis") {
        let mut redis_con = redis_connection(&redis_server);
        assert_eq!(raw.cmd(&["HSET", "h", "f", "v"]), i(1));
        let redis_port = redis_server.port.to_string();
        assert_eq!(
            raw.cmd(&["MIGRATE", "127.0.0.1", &redis_port, "h", "0", "5000"]),
            ok()
        );
        let moved: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg("h")
            .query(&mut redis_con)
            .unwrap();
        assert_eq!(moved, vec![("f".to_owned(), "v".to_owned())]);
        assert_eq!(raw.cmd(&["EXISTS", "h"]), i(0));
    }
}

/// DEBUG RELOAD NOSAVE loads an RDB file left where Redis keeps its own
/// (`dir`/`dbfilename`), as Redis' reload does: here the dump.rdb a real
/// redis-server saved, with a deadline, a list, a hash and a function
/// library. What Strata held before (a key, a library) is replaced; the
/// loaded data is logged (it is there after `kill -9`); a damaged file
/// fails as in Redis and changes nothing.
#[test]
fn debug_reload_nosave_loads_the_rdb_file_redis_saved() {
    let Some(redis_server) = RedisServer::start_unless_missing("loading Redis' RDB file") else {
        return;
    };
    let mut redis = redis_connection(&redis_server);
    let library = "#!lua name=lib1\nredis.register_function('func1', function() return 123 end)";
    let _: () = redis::cmd("SET")
        .arg(&["s", "v", "EX", "1000"])
        .query(&mut redis)
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(&["l", "a", "b", "c"])
        .query(&mut redis)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&["h", "f", "1", "g", "2"])
        .query(&mut redis)
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg(&["LOAD", library])
        .query(&mut redis)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut redis).unwrap();
    let config: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "dir"])
        .query(&mut redis)
        .unwrap();
    let saved = std::path::PathBuf::from(&config[1]).join("dump.rdb");

    let server = TestServer::start();
    let mut r = server.raw();
    let dir = r.cmd(&["CONFIG", "GET", "dir"]);
    let dump = std::path::PathBuf::from(dir.as_array()[1].as_text()).join("dump.rdb");
    r.cmd(&["SET", "gone", "1"]);
    r.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=other\nredis.register_function('f2', function() return 1 end)",
    ]);
    std::fs::copy(&saved, &dump).unwrap();
    assert_eq!(r.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), ok());
    let check = |r: &mut Raw| {
        assert_eq!(r.cmd(&["DBSIZE"]), Reply::Int(3));
        assert_eq!(r.cmd(&["GET", "gone"]), Reply::NullBulk);
        assert_eq!(r.cmd(&["GET", "s"]), b("v"));
        assert!(r.cmd(&["TTL", "s"]).as_int() > 990);
        assert_eq!(
            r.cmd(&["LRANGE", "l", "0", "-1"]),
            Reply::Array(vec![b("a"), b("b"), b("c")])
        );
        assert_eq!(r.cmd(&["HGET", "h", "g"]), b("2"));
        assert_eq!(r.cmd(&["FCALL", "func1", "0"]), Reply::Int(123));
        assert_eq!(
            r.cmd(&["FCALL", "f2", "0"]),
            Reply::err("ERR Function not found")
        );
    };
    check(&mut r);
    // A damaged file: Redis' error, and the data as it was.
    std::fs::write(&dump, b"REDIS0011 not really").unwrap();
    assert_eq!(
        r.cmd(&["DEBUG", "RELOAD", "NOSAVE"]),
        Reply::err("ERR Error trying to load the RDB dump, check server logs.")
    );
    check(&mut r);
    std::fs::remove_file(&dump).unwrap();
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    check(&mut r);
    // `redis-cli --functions-rdb` asks for the libraries alone (REPLCONF
    // rdb-filter-only functions); reloaded, that file leaves no key.
    let port = server.port.to_string();
    let (code, output) = run_bounded(
        std::process::Command::new("redis-cli")
            .args(["-p", &port, "--functions-rdb"])
            .arg(&dump),
    );
    assert_eq!(code, 0, "redis-cli --functions-rdb: {output}");
    assert_eq!(r.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), ok());
    assert_eq!(r.cmd(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(r.cmd(&["FCALL", "func1", "0"]), Reply::Int(123));
    assert_eq!(
        r.cmd(&["REPLCONF", "rdb-filter-only", "keys"]),
        Reply::err("ERR Unsupported rdb-filter-only option: keys")
    );
}
