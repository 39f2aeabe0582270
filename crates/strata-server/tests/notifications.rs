//! Keyspace notifications against the real server: the events of each
//! command family with Redis' names and channels, the `del` that follows a
//! collection emptied, expiry (lazy and in the background), hash-field
//! expiry, eviction by a key-deleting policy, new keys, the class mask,
//! and writes from many connections (on several server threads) all
//! reaching one subscriber.

mod common;

use common::*;

/// A subscriber to every keyevent channel of database 0, reading
/// `(event, key)` pairs.
struct Events(Raw);

impl Events {
    fn subscribe(server: &TestServer) -> Events {
        let mut raw = server.raw();
        assert_eq!(
            raw.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]),
            Reply::Array(vec![b("psubscribe"), b("__keyevent@0__:*"), i(1)])
        );
        Events(raw)
    }

    fn next(&mut self) -> (String, String) {
        let message = self.0.read();
        let parts = message.as_array();
        assert_eq!(parts[0], b("pmessage"), "{message:?}");
        let channel = parts[2].as_text();
        let event = channel
            .strip_prefix("__keyevent@0__:")
            .unwrap_or_else(|| panic!("{channel}"))
            .to_owned();
        (event, parts[3].as_text())
    }

    /// The next `n` events, as "event key" strings.
    fn take(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let (event, key) = self.next();
                format!("{event} {key}")
            })
            .collect()
    }
}

fn run(con: &mut Raw, commands: &[&[&str]]) {
    for command in commands {
        let reply = con.cmd(command);
        assert!(!matches!(reply, Reply::Error(_)), "{command:?}: {reply:?}");
    }
}

/// Runs `commands`, then checks the events they fired, in order.
fn expect(con: &mut Raw, events: &mut Events, commands: &[&[&str]], fired: &[&str]) {
    run(con, commands);
    assert_eq!(events.take(fired.len()), fired, "after {commands:?}");
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn each_family_fires_redis_events() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        ok()
    );
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "notify-keyspace-events"]),
        Reply::Array(vec![b("notify-keyspace-events"), b("AKE")])
    );
    let mut events = Events::subscribe(&server);
    expect(
        &mut con,
        &mut events,
        &[
            &["SET", "s", "1"],
            &["SET", "s", "2", "EX", "100"],
            &["INCRBY", "s", "3"],
            &["APPEND", "s", "x"],
            &["SETRANGE", "s", "0", "9"],
            &["MSET", "m1", "a", "m2", "b"],
            &["GETDEL", "m2"],
            &["PERSIST", "s"],
            &["EXPIRE", "m1", "100"],
            &["RENAME", "m1", "m3"],
            &["COPY", "m3", "m4"],
            &["DEL", "m3", "m4", "missing"],
            &["SETBIT", "bits", "3", "1"],
            &["PFADD", "hll", "x"],
        ],
        &[
            "set s",
            "set s",
            "expire s",
            "incrby s",
            "append s",
            "setrange s",
            "set m1",
            "set m2",
            "del m2",
            "persist s",
            "expire m1",
            "rename_from m1",
            "rename_to m3",
            "copy_to m4",
            "del m3",
            "del m4",
            "setbit bits",
            "pfadd hll",
        ],
    );
    expect(
        &mut con,
        &mut events,
        &[
            &["RPUSH", "l", "a", "b", "c"],
            &["LPUSH", "l", "z"],
            &["LSET", "l", "0", "y"],
            &["LINSERT", "l", "BEFORE", "a", "w"],
            &["LREM", "l", "1", "w"],
            &["LTRIM", "l", "0", "1"],
            &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
            &["RPOP", "l"],
            &["SORT", "l2", "ALPHA", "STORE", "sorted"],
        ],
        &[
            "rpush l",
            "lpush l",
            "lset l",
            "linsert l",
            "lrem l",
            "ltrim l",
            "rpush l2",
            "lpop l",
            // The list is left empty: its key is deleted.
            "rpop l",
            "del l",
            "sortstore sorted",
        ],
    );
    expect(
        &mut con,
        &mut events,
        &[
            &["SADD", "a", "1", "2", "3"],
            // Nothing added, nothing fired.
            &["SADD", "a", "1"],
            &["SREM", "a", "1"],
            &["SMOVE", "a", "b", "2"],
            &["SPOP", "a"],
            &["SUNIONSTORE", "c", "b"],
            &["SINTERSTORE", "c", "b", "nothing"],
        ],
        &[
            "sadd a",
            "srem a",
            "srem a",
            "sadd b",
            "spop a",
            "del a",
            "sunionstore c",
            // An empty result deletes the destination.
            "del c",
        ],
    );
    expect(
        &mut con,
        &mut events,
        &[
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZADD", "z", "1", "a"],
            &["ZINCRBY", "z", "5", "a"],
            &["ZREM", "z", "b"],
            &["ZPOPMIN", "z"],
            &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"],
            &["GEOADD", "g", "13.361389", "38.115556", "Palermo"],
        ],
        &[
            "zadd z",
            "zincr z",
            "zrem z",
            "zpopmin z",
            "zremrangebyscore z",
            "del z",
            "zadd g",
        ],
    );
    expect(
        &mut con,
        &mut events,
        &[
            &["HSET", "h", "f", "1", "g", "2"],
            &["HINCRBY", "h", "f", "2"],
            &["HINCRBYFLOAT", "h", "f", "0.5"],
            &["HEXPIRE", "h", "100", "FIELDS", "1", "g"],
            &["HPERSIST", "h", "FIELDS", "1", "g"],
            &["HDEL", "h", "f", "g"],
        ],
        &[
            "hset h",
            "hincrby h",
            "hincrbyfloat h",
            "hexpire h",
            "hpersist h",
            "hdel h",
            "del h",
        ],
    );
    // The class mask: only list events now.
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "notify-keyspace-events", "El"]),
        ok()
    );
    expect(
        &mut con,
        &mut events,
        &[&["SET", "x", "1"], &["DEL", "x"], &["RPUSH", "q", "1"]],
        &["rpush q"],
    );
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Eq"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        )
    );
}

#[test]
fn expiry_eviction_and_new_keys_come_from_the_change_feed() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Exeh"]),
        ok()
    );
    let mut events = Events::subscribe(&server);
    // Background expiry.
    run(&mut con, &[&["SET", "soon", "1", "PX", "50"]]);
    assert_eq!(events.take(1), ["expired soon"]);
    // Lazy expiry: the reader meets the expired key first.
    run(
        &mut con,
        &[
            &["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
            &["SET", "lazy", "1", "PX", "20"],
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(con.cmd(&["GET", "lazy"]), Reply::NullBulk);
    assert_eq!(events.take(1), ["expired lazy"]);
    run(&mut con, &[&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]]);
    // Hash fields expiring: hexpired, then del when none is left.
    run(
        &mut con,
        &[
            &["HSET", "h", "a", "1", "b", "2"],
            &["HPEXPIRE", "h", "50", "FIELDS", "1", "a"],
        ],
    );
    // (`h` also holds the commands' own hash events.)
    assert_eq!(events.take(3), ["hset h", "hexpire h", "hexpired h"]);
    assert_eq!(
        con.cmd(&["HGETALL", "h"]),
        Reply::Array(vec![b("b"), b("2")])
    );
    // (`del` is a generic event: not asked for here.)
    assert_eq!(con.cmd(&["UNLINK", "h"]), i(1));
    // Lazy field expiry (Redis 7.4): with active expiry off, the read
    // that meets the expired fields removes them, and the hash with them.
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Exehg"]),
        ok()
    );
    run(
        &mut con,
        &[
            &["DEBUG", "SET-ACTIVE-EXPIRE", "0"],
            &["HSET", "lazyh", "f1", "1", "f2", "2"],
            &["HPEXPIRE", "lazyh", "10", "FIELDS", "2", "f1", "f2"],
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(
        con.cmd(&["HMGET", "lazyh", "f1", "f2"]),
        Reply::Array(vec![Reply::NullBulk, Reply::NullBulk])
    );
    assert_eq!(con.cmd(&["EXISTS", "lazyh"]), i(0));
    assert_eq!(
        events.take(4),
        ["hset lazyh", "hexpire lazyh", "hexpired lazyh", "del lazyh"]
    );
    run(
        &mut con,
        &[
            &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            &["CONFIG", "SET", "notify-keyspace-events", "Exeh"],
        ],
    );
    // A key-deleting policy evicts.
    run(
        &mut con,
        &[
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
            &["SET", "victim", "v"],
            &["CONFIG", "SET", "maxmemory", "1"],
        ],
    );
    assert_eq!(events.take(1), ["evicted victim"]);
    run(&mut con, &[&["CONFIG", "SET", "maxmemory", "0"]]);
    // New keys: only the first SET of a key.
    run(
        &mut con,
        &[
            &["CONFIG", "SET", "notify-keyspace-events", "En"],
            &["SET", "fresh", "1"],
            &["SET", "fresh", "2"],
            &["RPUSH", "fresh-list", "a"],
        ],
    );
    assert_eq!(events.take(2), ["new fresh", "new fresh-list"]);
}

#[test]
fn writes_from_many_connections_all_notify() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 200;
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "notify-keyspace-events", "E$"]),
        ok()
    );
    let mut events = Events::subscribe(&server);
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let port = server.port;
            scope.spawn(move || {
                let mut con = Raw::connect(port);
                for n in 0..PER_WRITER {
                    let key = format!("w{writer}:{n}");
                    assert_eq!(con.cmd(&["SET", &key, "v"]), ok());
                }
            });
        }
    });
    let mut seen: Vec<String> = events.take(WRITERS * PER_WRITER);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), WRITERS * PER_WRITER);
    assert!(seen.iter().all(|s| s.starts_with("set w")));
}
