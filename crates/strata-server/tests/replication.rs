//! Replication against real processes: a Strata replica of a Strata
//! primary, redis-server 7.0 as a replica of Strata and as a primary of
//! Strata, a replica that stops reading, and a replica that is killed.
//! Each compares the whole dataset of both ends, key by key.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;

const DBS: i64 = 16;

/// Every key of every database, with its type, value and deadline, in a
/// canonical text: two servers with equal datasets give equal maps.
/// Queries are pipelined per database (the copy test has 50 000 keys).
fn dataset(con: &mut redis::Connection, field_deadlines: bool) -> BTreeMap<(i64, String), String> {
    let mut all = BTreeMap::new();
    for db in 0..DBS {
        redis::cmd("SELECT").arg(db).query::<()>(con).unwrap();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
        if keys.is_empty() {
            continue;
        }
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("TYPE").arg(key).cmd("PEXPIRETIME").arg(key);
        }
        let shapes: Vec<(String, i64)> = pipe.query(con).unwrap();
        let mut pipe = redis::pipe();
        for (key, (kind, _)) in keys.iter().zip(&shapes) {
            match kind.as_str() {
                "string" => pipe.cmd("GET").arg(key),
                "list" => pipe.cmd("LRANGE").arg(key).arg(0).arg(-1),
                "set" => pipe.cmd("SMEMBERS").arg(key),
                "zset" => pipe.cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES"),
                "hash" => pipe.cmd("HGETALL").arg(key),
                "stream" => pipe.cmd("XRANGE").arg(key).arg("-").arg("+"),
                other => panic!("unexpected type {other}"),
            };
        }
        let values: Vec<redis::Value> = pipe.query(con).unwrap();
        for ((key, (kind, deadline)), value) in keys.into_iter().zip(shapes).zip(values) {
            let text = match kind.as_str() {
                "set" => {
                    let mut members: Vec<Vec<u8>> = redis::from_redis_value(value).unwrap();
                    members.sort();
                    format!("{members:?}")
                }
                "hash" => hash_text(con, &key, value, field_deadlines),
                "stream" => stream_text(con, &key, value),
                _ => format!("{value:?}"),
            };
            all.insert((db, key), format!("{kind} {deadline} {text}"));
        }
    }
    redis::cmd("SELECT").arg(0).query::<()>(con).unwrap();
    all
}

fn query<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con).unwrap()
}

fn hash_text(
    con: &mut redis::Connection,
    key: &str,
    all: redis::Value,
    field_deadlines: bool,
) -> String {
    let mut fields: Vec<(String, String)> = redis::from_redis_value(all).unwrap();
    fields.sort();
    let mut text = format!("{fields:?}");
    if field_deadlines {
        for (name, _) in &fields {
            let at: Vec<i64> = query(con, &["HPEXPIRETIME", key, "FIELDS", "1", name.as_str()]);
            text.push_str(&format!(" {name}@{at:?}"));
        }
    }
    text
}

/// Entries, and per group its last ID, consumers and pending entries
/// with their owners and delivery counts.
fn stream_text(con: &mut redis::Connection, key: &str, entries: redis::Value) -> String {
    let mut text = format!("{entries:?}");
    let groups: Vec<redis::Value> = query(con, &["XINFO", "GROUPS", key]);
    for group in groups {
        let map: BTreeMap<String, redis::Value> = redis::from_redis_value(group).unwrap();
        let name: String = redis::from_redis_value(map["name"].clone()).unwrap();
        let last: String = redis::from_redis_value(map["last-delivered-id"].clone()).unwrap();
        let pending: redis::Value = query(con, &["XPENDING", key, &name, "-", "+", "1000"]);
        // (Deliveries' idle times differ by when each end is asked: only
        // IDs, owners and counts are compared.)
        let pending: Vec<(String, String, i64, i64)> = redis::from_redis_value(pending).unwrap();
        let pending: Vec<_> = pending
            .into_iter()
            .map(|(id, owner, _, n)| (id, owner, n))
            .collect();
        text.push_str(&format!(" group {name} last {last} pending {pending:?}"));
    }
    text
}

/// Writes of every type, in every shape the change records have.
fn write_everything(con: &mut redis::Connection, round: u32, field_deadlines: bool) {
    let r = round.to_string();
    let cmds: Vec<Vec<String>> = vec![
        vec!["SET".into(), format!("s:{r}"), "value".into()],
        vec!["SET".into(), format!("ttl:{r}"), "v".into(), "EX".into(), "1000".into()],
        vec!["INCRBY".into(), "counter".into(), "7".into()],
        vec!["APPEND".into(), "appended".into(), format!("+{r}")],
        vec!["SETRANGE".into(), "ranged".into(), "3".into(), "xyz".into()],
        vec!["RPUSH".into(), "list".into(), "a".into(), "b".into(), "c".into(), r.clone()],
        vec!["LPUSH".into(), "list".into(), "head".into()],
        vec!["LPOP".into(), "list".into()],
        vec!["LSET".into(), "list".into(), "0".into(), "set0".into()],
        vec!["LINSERT".into(), "list".into(), "BEFORE".into(), "b".into(), "ins".into()],
        vec!["LREM".into(), "list".into(), "1".into(), "c".into()],
        vec!["LTRIM".into(), "list".into(), "0".into(), "50".into()],
        vec!["SADD".into(), "set".into(), "m1".into(), "m2".into(), "m3".into(), r.clone()],
        vec!["SPOP".into(), "set".into()],
        vec!["SREM".into(), "set".into(), "m1".into()],
        vec!["ZADD".into(), "zset".into(), "1.5".into(), "a".into(), "2".into(), r.clone()],
        vec!["ZINCRBY".into(), "zset".into(), "0.25".into(), "a".into()],
        vec!["ZPOPMIN".into(), "zset".into()],
        vec!["HSET".into(), "hash".into(), "f".into(), r.clone(), "g".into(), "2".into()],
        vec!["HINCRBYFLOAT".into(), "hash".into(), "n".into(), "1.5".into()],
        vec!["HDEL".into(), "hash".into(), "g".into()],
        vec!["XADD".into(), "stream".into(), "*".into(), "round".into(), r.clone()],
        vec!["XADD".into(), "stream".into(), "MAXLEN".into(), "20".into(), "*".into(), "x".into(), "y".into()],
        vec!["XREADGROUP".into(), "GROUP".into(), "g".into(), "c1".into(), "COUNT".into(), "1".into(), "STREAMS".into(), "stream".into(), ">".into()],
        vec!["EXPIRE".into(), format!("s:{r}"), "5000".into()],
        vec!["PERSIST".into(), format!("ttl:{}", round.saturating_sub(1))],
        vec!["RENAME".into(), format!("s:{r}"), format!("renamed:{r}")],
        vec!["COPY".into(), "list".into(), format!("listcopy:{r}"), "REPLACE".into()],
        vec!["DEL".into(), format!("renamed:{}", round.saturating_sub(2))],
        vec![
            "EVAL".into(),
            "redis.call('SET', KEYS[1], ARGV[1]); redis.call('RPUSH', KEYS[2], ARGV[1]); return redis.call('SPOP', KEYS[3])".into(),
            "3".into(),
            format!("{{t}}:a{r}"),
            "{t}:list".into(),
            "set".into(),
            r.clone(),
        ],
    ];
    for args in cmds {
        let mut cmd = redis::cmd(&args[0]);
        for arg in &args[1..] {
            cmd.arg(arg);
        }
        let _: redis::Value = cmd.query(con).unwrap_or(redis::Value::Nil);
    }
    if field_deadlines {
        let _: redis::Value = redis::cmd("HPEXPIRE")
            .arg("hash")
            .arg(900_000)
            .arg("FIELDS")
            .arg(1)
            .arg("f")
            .query(con)
            .unwrap();
    }
    redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("multi:a")
        .arg(&r)
        .cmd("INCR")
        .arg("multi:n")
        .cmd("SELECT")
        .arg(3)
        .cmd("SET")
        .arg("db3")
        .arg(&r)
        .cmd("SELECT")
        .arg(0)
        .query::<()>(con)
        .unwrap();
}

fn setup_groups(con: &mut redis::Connection) {
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("stream")
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(con)
        .unwrap();
}

/// Keys to their canonical text (see [`dataset`]).
type Dataset = BTreeMap<(i64, String), String>;

/// Waits until `replica` has applied everything `primary` has sent it
/// (its offset reached the primary's), then returns both datasets.
fn settled(
    primary: &mut redis::Connection,
    replica: &mut redis::Connection,
    field_deadlines: bool,
) -> (Dataset, Dataset) {
    let offset = |con: &mut redis::Connection, name: &str| -> u64 {
        let info: String = redis::cmd("INFO").arg("replication").query(con).unwrap();
        info_field(&info, name).parse().unwrap()
    };
    let mut tries = 0;
    loop {
        let sent = offset(primary, "master_repl_offset");
        wait_until("the replica to apply what it was sent", || {
            offset(replica, "slave_repl_offset") >= sent
        });
        let want = dataset(primary, field_deadlines);
        let got = dataset(replica, field_deadlines);
        tries += 1;
        if want == got || tries == 5 {
            return (want, got);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn assert_same(want: &Dataset, got: &Dataset) {
    for (key, value) in want {
        assert_eq!(
            got.get(key),
            Some(value),
            "key {key:?} differs on the replica"
        );
    }
    for key in got.keys() {
        assert!(want.contains_key(key), "key {key:?} only on the replica");
    }
    assert!(!want.is_empty());
}

fn replicaof(con: &mut redis::Connection, port: u16) {
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .query(con)
        .unwrap();
}

/// REPLICAOF `port` on 127.0.0.1, and waits until the link is up.
fn follow(con: &mut redis::Connection, port: u16) {
    replicaof(con, port);
    wait_until("the link to come up", || link_up(con));
}

fn link_up(con: &mut redis::Connection) -> bool {
    let info: String = redis::cmd("INFO").arg("replication").query(con).unwrap();
    info.contains("master_link_status:up")
}

/// A Strata replica of a Strata primary: the copy, writes made while it
/// is taken, then every kind of change after, end identical; the replica
/// refuses writes until REPLICAOF NO ONE.
#[test]
fn a_strata_replica_ends_identical_to_its_primary_for_every_type() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    setup_groups(&mut p);
    for round in 0..20 {
        write_everything(&mut p, round, true);
    }
    let _: () = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=lib\nredis.register_function('f1', function() return 'one' end)")
        .query(&mut p)
        .unwrap();
    // Enough keys that the copy takes a while, and writes go on while the
    // replica connects and copies: changes made during the copy are
    // either in it or sent after it, never both.
    fill(&mut p, 50_000, 1, 50);
    let url = primary.url();
    let writer = std::thread::spawn(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        for round in 20..200 {
            write_everything(&mut con, round, true);
        }
    });
    follow(&mut r, primary.port);
    writer.join().unwrap();
    for round in 200..220 {
        write_everything(&mut p, round, true);
    }
    let (want, got) = settled(&mut p, &mut r, true);
    assert_same(&want, &got);
    // One copy: what the copy held was left out of the stream and padded
    // (a restart would show as a second copy).
    assert_eq!(stat(&mut p, "sync_full"), 1);
    let f1: String = redis::cmd("FCALL").arg("f1").arg(0).query(&mut r).unwrap();
    assert_eq!(f1, "one");

    let refused = redis::cmd("SET")
        .arg("x")
        .arg("y")
        .query::<()>(&mut r)
        .unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    let role: redis::Value = redis::cmd("ROLE").query(&mut r).unwrap();
    assert!(format!("{role:?}").contains("slave"), "{role:?}");
    let info: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
    assert!(info.contains("connected_slaves:1"), "{info}");
    assert!(info.contains(",state=online,"), "{info}");
    let replicas: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("replica")
        .query(&mut p)
        .unwrap();
    assert_eq!(replicas.matches("flags=S").count(), 1, "{replicas}");
    let masters: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("master")
        .query(&mut r)
        .unwrap();
    assert_eq!(masters.matches("flags=M").count(), 1, "{masters}");

    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    let _: () = redis::cmd("SET").arg("x").arg("y").query(&mut r).unwrap();
    let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
    assert!(info.contains("role:master"), "{info}");
    assert_eq!(dataset(&mut r, true).len(), want.len() + 1);
}

/// A connection to `url` running [`write_everything`] from round `first`
/// on until the flag returned is set; the thread answers the next round.
/// A writer of [`write_everything`] rounds from `first` on, until told to
/// stop: its stop flag, the rounds it has finished, and its thread.
struct Writer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    round: std::sync::Arc<std::sync::atomic::AtomicU32>,
    thread: std::thread::JoinHandle<u32>,
}

fn write_until_stopped(url: String, first: u32) -> Writer {
    use std::sync::atomic::Ordering::Relaxed;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let round = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(first));
    let (writing, written) = (stop.clone(), round.clone());
    let thread = std::thread::spawn(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        while !writing.load(Relaxed) {
            write_everything(&mut con, written.load(Relaxed), true);
            written.fetch_add(1, Relaxed);
        }
        written.load(Relaxed)
    });
    Writer {
        stop,
        round,
        thread,
    }
}

impl Writer {
    /// Waits until the writer finishes a round it had not started yet.
    fn wait_for_progress(&self) {
        let started = self.round.load(std::sync::atomic::Ordering::Relaxed) + 1;
        wait_until("the writer to write on", || {
            self.round.load(std::sync::atomic::Ordering::Relaxed) > started
        });
    }

    /// Stops the writer; the rounds it wrote up to.
    fn stop(self) -> u32 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// A replica killed with -9 while it applies a stream of every kind of
/// change (LPUSH, APPEND, INCRBY: applying one twice or skipping one
/// shows), and started again with `replicaof` in its configuration,
/// continues from the position its own log kept: no second copy, even
/// after a checkpoint cut the log below that position, and it ends
/// identical.
#[test]
fn a_replica_killed_and_restarted_continues_without_a_copy() {
    let primary = TestServer::start();
    let mut p = primary.client();
    setup_groups(&mut p);
    for round in 0..30 {
        write_everything(&mut p, round, true);
    }
    let port = primary.port.to_string();
    let args = ["--replicaof", "127.0.0.1", &port];
    let mut replica = TestServer::start_with(&args);
    wait_until("the link to come up", || link_up(&mut replica.client()));
    let (want, got) = settled(&mut p, &mut replica.client(), true);
    assert_same(&want, &got);
    let writer = write_until_stopped(primary.url(), 30);
    for cycle in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        if cycle == 1 {
            // A checkpoint cycle on the replica: the position must then
            // come back from the checkpoint, not only the log.
            let mut r = replica.client();
            let _: String = redis::cmd("BGSAVE").query(&mut r).unwrap();
            wait_until("the checkpoint to finish", || {
                let info: String = redis::cmd("INFO").arg("persistence").query(&mut r).unwrap();
                info.contains("rdb_bgsave_in_progress:0")
            });
        }
        let dir = replica.kill9();
        replica = TestServer::spawn(dir, &args, None, READY);
        wait_until("the link to come up again", || {
            link_up(&mut replica.client())
        });
        // The primary's writes went on across the cut and still do: the
        // replica continues from a stream that moved while it was down.
        writer.wait_for_progress();
    }
    let rounds = writer.stop();
    assert!(rounds > 33, "the writer ran throughout ({rounds} rounds)");
    let (want, got) = settled(&mut p, &mut replica.client(), true);
    assert_same(&want, &got);
    assert_eq!(stat(&mut p, "sync_full"), 1, "one copy, at the first start");
    assert_eq!(stat(&mut p, "sync_partial_ok"), 3);
}

/// redis-server 7.0 follows a Strata primary (the way back out of
/// Strata), and a Strata replica follows redis-server (the way in).
#[test]
fn redis_server_and_strata_replicate_from_each_other() {
    let Some(redis_server) = RedisServer::start_unless_missing("replication with Redis") else {
        return;
    };
    let mut redis_con = redis::Client::open(format!("redis://127.0.0.1:{}/", redis_server.port))
        .unwrap()
        .get_connection()
        .unwrap();
    // Out: Redis follows Strata.
    let primary = TestServer::start();
    let mut p = primary.client();
    setup_groups(&mut p);
    for round in 0..40 {
        write_everything(&mut p, round, false);
    }
    replicaof(&mut redis_con, primary.port);
    wait_until("Redis' link to come up", || link_up(&mut redis_con));
    for round in 40..80 {
        write_everything(&mut p, round, false);
    }
    let (want, got) = settled(&mut p, &mut redis_con, false);
    assert_same(&want, &got);

    // In: Strata follows Redis (promoted first).
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut redis_con)
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut redis_con).unwrap();
    setup_groups(&mut redis_con);
    for round in 0..40 {
        write_everything(&mut redis_con, round, false);
    }
    let replica = TestServer::start();
    let mut r = replica.client();
    replicaof(&mut r, redis_server.port);
    wait_until("the link to Redis to come up", || link_up(&mut r));
    for round in 40..80 {
        write_everything(&mut redis_con, round, false);
    }
    let (want, got) = settled(&mut redis_con, &mut r, false);
    assert_same(&want, &got);
}

/// A replica that stops reading is dropped once the changes waiting for
/// it pass `client-output-buffer-limit replica`; the primary's writers
/// never wait for it.
#[test]
fn a_replica_that_stops_reading_is_dropped_and_never_slows_writers() {
    let primary = TestServer::start_with(&["--client-output-buffer-limit", "replica 1mb 0 0"]);
    let mut stalled = Raw::connect(primary.port);
    stalled.send(&["PSYNC", "?", "-1"]);
    let mut p = primary.client();
    wait_until("the replica to be attached", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
        info.contains("connected_slaves:1")
    });
    let value = vec![b'v'; 10_000];
    let started = Instant::now();
    for n in 0..3_000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{n}"))
            .arg(&value)
            .query(&mut p)
            .unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "30 MB of writes took {:?}",
        started.elapsed()
    );
    wait_until("the stalled replica to be dropped", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
        info.contains("connected_slaves:0")
    });
    primary.wait_for_log("fell behind");
}

fn wait_replicas(con: &mut redis::Connection, replicas: i64, timeout_ms: i64) -> i64 {
    redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout_ms)
        .query(con)
        .unwrap()
}

fn waitaof(con: &mut redis::Connection, local: i64, replicas: i64, timeout_ms: i64) -> (i64, i64) {
    redis::cmd("WAITAOF")
        .arg(local)
        .arg(replicas)
        .arg(timeout_ms)
        .query(con)
        .unwrap()
}

/// WAITAOF counts the replicas that synced the connection's writes to
/// their own log (their `FACK`): one with a log does within a second or
/// so (its everysec sync), one without a log never does, and WAITAOF on a
/// replica is refused with Redis' text.
#[test]
fn waitaof_counts_replicas_that_synced_the_writes() {
    let primary = TestServer::start();
    let logged = TestServer::start();
    let unlogged = TestServer::start_with(&["--appendonly", "no"]);
    let mut p = primary.client();
    for replica in [&logged, &unlogged] {
        let mut r = replica.client();
        replicaof(&mut r, primary.port);
        wait_until("the link to come up", || link_up(&mut r));
    }
    for n in 0..5 {
        let _: () = redis::cmd("RPUSH").arg("l").arg(n).query(&mut p).unwrap();
        let started = Instant::now();
        assert_eq!(waitaof(&mut p, 1, 1, 10_000), (1, 1), "round {n}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "WAITAOF took {:?}",
            started.elapsed()
        );
        let len: i64 = redis::cmd("LLEN")
            .arg("l")
            .query(&mut logged.client())
            .unwrap();
        assert_eq!(len, n + 1, "WAITAOF said the replica held the push");
    }
    // The replica without a log never counts: the timeout answers.
    let started = Instant::now();
    assert_eq!(waitaof(&mut p, 1, 2, 1_500), (1, 1));
    // Deadlines are whole milliseconds of the wall clock, as in Redis: a
    // timeout may answer up to a millisecond before 1.5 s by Instant.
    assert!(
        started.elapsed() >= Duration::from_millis(1_495),
        "{:?}",
        started.elapsed()
    );
    let err = redis::cmd("WAITAOF")
        .arg(0)
        .arg(1)
        .arg(0)
        .query::<(i64, i64)>(&mut logged.client())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("WAITAOF cannot be used with replica instances"),
        "{err}"
    );
}

/// WAIT counts the replicas that hold the connection's writes: at once
/// when one does, the count so far when the timeout passes, none when the
/// replica stopped (SIGSTOP) before it acknowledged; min-replicas-to-write
/// refuses writes without a good replica.
/// Reads from `stream` until `done` holds for what arrived, or `within`
/// passes; everything read.
fn read_until(
    stream: &mut std::net::TcpStream,
    within: Duration,
    done: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    use std::io::Read;
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    while !done(&got) && Instant::now() < deadline {
        if let Ok(n) = stream.read(&mut chunk) {
            assert!(n > 0, "the primary closed the stream");
            got.extend_from_slice(&chunk[..n]);
        }
    }
    got
}

/// WAITs that find a `REPLCONF GETACK` already in the stream after their
/// writes send no other: each WAIT used to send one, and under load
/// every acknowledgement woke every WAIT, which sent one more each.
#[test]
fn waits_covered_by_a_getack_on_its_way_send_no_other() {
    use std::io::Write;
    let primary = TestServer::start();
    let mut p = primary.client();
    let _: () = redis::cmd("SET").arg("x").arg(1).query(&mut p).unwrap();
    // A replica that never acknowledges (the old SYNC): every WAIT times
    // out, and the GETACKs it is sent can be counted.
    let mut sync = std::net::TcpStream::connect(("127.0.0.1", primary.port)).unwrap();
    sync.write_all(b"SYNC\r\n").unwrap();
    let copied = |got: &[u8]| {
        let text = String::from_utf8_lossy(got);
        let start = text.trim_start_matches('\n');
        let skipped = text.len() - start.len();
        let Some(header) = start.strip_prefix('$').and_then(|r| r.split_once("\r\n")) else {
            return false;
        };
        let len: usize = header.0.parse().unwrap();
        got.len() >= skipped + 1 + header.0.len() + 2 + len
    };
    let got = read_until(&mut sync, Duration::from_secs(10), copied);
    assert!(copied(&got), "no copy within 10 s");
    let _: () = redis::cmd("SET").arg("x").arg(2).query(&mut p).unwrap();
    for _ in 0..10 {
        assert_eq!(wait_replicas(&mut p, 1, 20), 0);
    }
    let stream = read_until(&mut sync, Duration::from_millis(500), |_| false);
    let getacks = String::from_utf8_lossy(&stream).matches("GETACK").count();
    assert_eq!(getacks, 1, "{}", String::from_utf8_lossy(&stream));
}

#[test]
fn wait_counts_replicas_that_hold_the_writes() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    assert_eq!(wait_replicas(&mut p, 1, 100), 0, "no replica yet");
    follow(&mut r, primary.port);
    for n in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{n}"))
            .arg(n)
            .query(&mut p)
            .unwrap();
        let started = Instant::now();
        assert_eq!(wait_replicas(&mut p, 1, 5_000), 1);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "WAIT took {:?}",
            started.elapsed()
        );
        let got: Option<i64> = redis::cmd("GET")
            .arg(format!("k{n}"))
            .query(&mut r)
            .unwrap();
        assert_eq!(got, Some(n), "WAIT said the replica held k{n}");
    }
    let started = Instant::now();
    assert_eq!(
        wait_replicas(&mut p, 2, 300),
        1,
        "one replica of the two asked for"
    );
    assert!(started.elapsed() >= Duration::from_millis(295));
    let err = redis::cmd("WAIT")
        .arg(1)
        .arg(0)
        .query::<i64>(&mut r)
        .unwrap_err();
    assert!(err.to_string().contains("replica"), "{err}");

    // A stopped replica acknowledges nothing: WAIT times out with 0.
    let pid = replica.pid().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    // (The stop reaches every thread of the process within moments.)
    std::thread::sleep(Duration::from_millis(200));
    let _: () = redis::cmd("SET")
        .arg("after-stop")
        .arg(1)
        .query(&mut p)
        .unwrap();
    assert_eq!(wait_replicas(&mut p, 1, 500), 0);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("min-replicas-to-write")
        .arg(1)
        .arg("min-replicas-max-lag")
        .arg(1)
        .query(&mut p)
        .unwrap();
    std::thread::sleep(Duration::from_millis(2_100));
    let refused = redis::cmd("SET")
        .arg("x")
        .arg(1)
        .query::<()>(&mut p)
        .unwrap_err();
    assert_eq!(refused.code(), Some("NOREPLICAS"), "{refused}");
    assert!(
        std::process::Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );
    wait_until("the replica to be good again", || {
        redis::cmd("SET")
            .arg("x")
            .arg(1)
            .query::<()>(&mut p)
            .is_ok()
    });
    assert_eq!(wait_replicas(&mut p, 1, 5_000), 1);
}

/// Under a load that WAITs for one replica after each write, the primary
/// is killed with -9; the replica, promoted, has every write WAIT
/// acknowledged.
#[test]
fn no_wait_acknowledged_write_is_lost_when_the_primary_dies() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut r = replica.client();
    follow(&mut r, primary.port);
    let url = primary.url();
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, acked) = (url.clone(), acked.clone());
            std::thread::spawn(move || {
                let Ok(mut con) = redis::Client::open(url).unwrap().get_connection() else {
                    return;
                };
                for n in 0.. {
                    let key = format!("w{w}:{n}");
                    if redis::cmd("SET")
                        .arg(&key)
                        .arg(n)
                        .query::<()>(&mut con)
                        .is_err()
                    {
                        return;
                    }
                    match redis::cmd("WAIT").arg(1).arg(1000).query::<i64>(&mut con) {
                        Ok(1) => acked.lock().unwrap().push(key),
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_500));
    primary.kill9();
    for writer in writers {
        writer.join().unwrap();
    }
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 100,
        "only {} writes acknowledged",
        acked.len()
    );
    for chunk in acked.chunks(500) {
        let values: Vec<Option<i64>> = redis::cmd("MGET").arg(chunk).query(&mut r).unwrap();
        for (key, value) in chunk.iter().zip(values) {
            assert!(
                value.is_some(),
                "{key} was acknowledged by WAIT but is missing"
            );
        }
    }
}

/// `redis-cli --rdb` saves the dataset from a Strata server as an RDB
/// file (REPLCONF rdb-only, then SYNC); the file reads back key by key.
#[test]
fn redis_cli_rdb_saves_the_dataset() {
    let server = TestServer::start();
    let mut con = server.client();
    setup_groups(&mut con);
    for round in 0..10 {
        write_everything(&mut con, round, true);
    }
    let keys = dataset(&mut con, true).len();
    let path = temp_dir().join("dump.rdb");
    let port = server.port.to_string();
    let mut command = std::process::Command::new("redis-cli");
    command.args(["-p", &port, "--rdb", path.to_str().unwrap()]);
    let (code, output) = run_bounded(&mut command);
    assert_eq!(code, 0, "{output}");
    let bytes = std::fs::read(&path).unwrap();
    let mut read = 0;
    strata_server::rdb::file::read(&bytes, |item| {
        if let strata_server::rdb::file::Item::Key { .. } = item {
            read += 1;
        }
    })
    .unwrap();
    assert_eq!(read, keys);
    // The connection closed after the file: no replica stays attached.
    wait_until("the rdb-only client to be gone", || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut con)
            .unwrap();
        info.contains("connected_slaves:0")
    });
}

fn stat(con: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    info_field(&info, name).parse().unwrap()
}

/// The id of the primary's connection serving a replica.
fn replica_client_id(con: &mut redis::Connection) -> String {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(con).unwrap();
    let line = list
        .lines()
        .find(|line| line.contains("cmd=psync"))
        .expect("a replica's connection");
    line.split(' ')
        .next()
        .unwrap()
        .trim_start_matches("id=")
        .to_string()
}

/// A replica whose connection breaks under writes continues from its
/// offset (`+CONTINUE`, no copy); after a promotion, the other replica
/// continues from the promoted one's history too.
#[test]
fn broken_links_and_failovers_continue_without_a_full_sync() {
    let primary = TestServer::start();
    let replicas = [TestServer::start(), TestServer::start()];
    let mut p = primary.client();
    setup_groups(&mut p);
    for replica in &replicas {
        replicaof(&mut replica.client(), primary.port);
        wait_until("the link to come up", || link_up(&mut replica.client()));
    }
    let url = primary.url();
    let writer = std::thread::spawn(move || {
        let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
        for round in 0..150 {
            write_everything(&mut con, round, true);
        }
    });
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(100));
        wait_until("both replicas to be connected", || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut p).unwrap();
            list.matches("cmd=psync").count() == 2
        });
        let id = replica_client_id(&mut p);
        let _: () = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(&id)
            .query(&mut p)
            .unwrap();
    }
    // And both at once, by type.
    wait_until("both replicas to be connected again", || {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut p).unwrap();
        list.matches("cmd=psync").count() == 2
    });
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("slave")
        .query(&mut p)
        .unwrap();
    assert_eq!(killed, 2);
    writer.join().unwrap();
    let mut a = replicas[0].client();
    let (want, got) = settled(&mut p, &mut a, true);
    assert_same(&want, &got);
    let mut b = replicas[1].client();
    let (want, got) = settled(&mut p, &mut b, true);
    assert_same(&want, &got);
    assert_eq!(
        stat(&mut p, "sync_full"),
        2,
        "one copy per replica, no more"
    );
    assert!(stat(&mut p, "sync_partial_ok") >= 5);

    // Failover: A becomes the primary, B follows it and continues.
    drop(p);
    primary.kill9();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut a)
        .unwrap();
    replicaof(&mut b, replicas[0].port);
    wait_until("B to follow A", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut b).unwrap();
        info.contains(&format!("master_port:{}", replicas[0].port))
            && info.contains("master_link_status:up")
    });
    for round in 150..170 {
        write_everything(&mut a, round, true);
    }
    let (want, got) = settled(&mut a, &mut b, true);
    assert_same(&want, &got);
    assert_eq!(stat(&mut a, "sync_full"), 0, "B needed no copy from A");
    assert_eq!(stat(&mut a, "sync_partial_ok"), 1);
}

/// A replica leaves expired keys to its primary: they read as absent but
/// stay until the primary's DEL arrives (Redis' rule: a replica whose
/// clock runs ahead must not delete a key the primary may still keep).
#[test]
fn a_replica_deletes_expired_keys_only_when_its_primary_does() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let (mut p, mut r) = (primary.client(), replica.client());
    follow(&mut r, primary.port);
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query(&mut p)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("PX")
        .arg(200)
        .query(&mut p)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .arg("g")
        .arg("w")
        .query(&mut p)
        .unwrap();
    let _: redis::Value = redis::cmd("HPEXPIRE")
        .arg("h")
        .arg(200)
        .arg("FIELDS")
        .arg(1)
        .arg("f")
        .query(&mut p)
        .unwrap();
    wait_until("the replica to have them", || {
        redis::cmd("EXISTS").arg("k").query::<i64>(&mut r).unwrap() == 1
            && redis::cmd("HLEN").arg("h").query::<i64>(&mut r).unwrap() == 2
    });
    std::thread::sleep(Duration::from_millis(1_500));
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(value, None, "an expired key reads as absent on the replica");
    let size: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(size, 2, "the replica deleted an expired key by itself");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut r).unwrap();
    assert_eq!(info_field(&info, "expired_keys"), "0");
    // The primary expires it on access and tells the replica.
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut p).unwrap();
    assert_eq!(value, None);
    let fields: Vec<String> = redis::cmd("HKEYS").arg("h").query(&mut p).unwrap();
    assert_eq!(fields, ["g"]);
    wait_until("the primary's deletes to reach the replica", || {
        redis::cmd("DBSIZE").query::<i64>(&mut r).unwrap() == 1
            && redis::cmd("HLEN").arg("h").query::<i64>(&mut r).unwrap() == 1
    });
}

/// FAILOVER under writes: the roles switch, the old primary follows the
/// new one without a copy, and every write the old primary acknowledged
/// is on the new one.
#[test]
fn failover_switches_roles_without_losing_an_acknowledged_write() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let (mut p, mut r) = (primary.client(), replica.client());
    let refused = redis::cmd("FAILOVER").query::<()>(&mut p).unwrap_err();
    assert!(
        refused.to_string().contains("requires connected replicas"),
        "{refused}"
    );
    follow(&mut r, primary.port);
    let refused = redis::cmd("FAILOVER").query::<()>(&mut r).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("not valid when server is a replica"),
        "{refused}"
    );
    let url = primary.url();
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writer = {
        let acked = acked.clone();
        std::thread::spawn(move || {
            let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
            for n in 0..100_000 {
                let key = format!("f:{n}");
                match redis::cmd("SET").arg(&key).arg(n).query::<()>(&mut con) {
                    Ok(()) => acked.lock().unwrap().push(key),
                    // READONLY once the switch is done.
                    Err(_) => return,
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // The replica falls behind (stopped) when FAILOVER begins: the switch
    // must wait for it to catch up.
    let pid = replica.pid().to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &pid])
            .status();
        assert!(status.unwrap().success());
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_millis(300));
    let _: () = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(replica.port)
        .arg("TIMEOUT")
        .arg(10_000)
        .query(&mut p)
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    signal("-CONT");
    writer.join().unwrap();
    wait_until("the roles to switch", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.contains("role:master")
    });
    let info: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
    assert!(info.contains("role:slave"), "{info}");
    wait_until("the old primary to follow", || link_up(&mut p));
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 100, "only {} writes", acked.len());
    for chunk in acked.chunks(500) {
        let values: Vec<Option<i64>> = redis::cmd("MGET").arg(chunk).query(&mut r).unwrap();
        for (key, value) in chunk.iter().zip(values) {
            assert!(value.is_some(), "{key} was acknowledged but is missing");
        }
    }
    assert_eq!(
        stat(&mut r, "sync_full"),
        0,
        "the old primary needed a copy"
    );
    assert_eq!(stat(&mut r, "sync_partial_ok"), 1);
    let _: () = redis::cmd("SET")
        .arg("on-new")
        .arg(1)
        .query(&mut r)
        .unwrap();
    wait_until("a write on the new primary to reach the old one", || {
        redis::cmd("EXISTS")
            .arg("on-new")
            .query::<i64>(&mut p)
            .unwrap()
            == 1
    });
}

/// REPLICAOF is what CONFIG GET replicaof and CONFIG REWRITE say, so a
/// replica restarted from its rewritten file follows the same primary.
#[test]
fn replicaof_is_kept_by_config_rewrite() {
    let primary = TestServer::start();
    let dir = temp_dir();
    let conf = dir.join("strata.conf");
    std::fs::write(&conf, "appendonly yes\n").unwrap();
    let replica = TestServer::spawn(dir.clone(), &[conf.to_str().unwrap()], None, READY);
    let mut r = replica.client();
    replicaof(&mut r, primary.port);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("replicaof")
        .query(&mut r)
        .unwrap();
    assert_eq!(
        got,
        [
            "replicaof".to_string(),
            format!("127.0.0.1 {}", primary.port)
        ]
    );
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut r).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains(&format!("replicaof 127.0.0.1 {}", primary.port)),
        "{text}"
    );
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("replicaof")
        .query(&mut r)
        .unwrap();
    assert_eq!(got, ["replicaof", ""]);
}

/// A full synchronisation under a steady write load ends in step even
/// when the writes made during the copy are many times the backlog: what
/// the syncing replica has not read stays (up to its output buffer limit)
/// instead of sending it back to another copy.
#[test]
fn a_sync_under_writes_larger_than_the_backlog_completes() {
    let primary = TestServer::start_with(&["--repl-backlog-size", "1mb"]);
    let replica = TestServer::start();
    let mut p = primary.client();
    fill(&mut p, 30_000, 1, 1_000);
    let url = primary.url();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
            let value = vec![b'w'; 1_000];
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut pipe = redis::pipe();
                for _ in 0..100 {
                    pipe.cmd("SET")
                        .arg(format!("w:{}", n % 20_000))
                        .arg(&value)
                        .ignore();
                    n += 1;
                }
                pipe.query::<()>(&mut con).unwrap();
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut r = replica.client();
    replicaof(&mut r, primary.port);
    wait_until("the replica to come into step under writes", || {
        link_up(&mut r)
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 5_000, "only {written} writes");
    let (want, got) = settled(&mut p, &mut r, false);
    assert_same(&want, &got);
    assert_eq!(
        stat(&mut p, "sync_full"),
        1,
        "the replica synchronised more than once"
    );
}

/// EXEC checks its queue as Redis does: a transaction that writes is
/// refused whole (EXECABORT … NOREPLICAS / OOM) when the condition arose
/// after it was queued; a read-only one runs.
#[test]
fn exec_refuses_a_queued_write_that_may_no_longer_run() {
    let server = TestServer::start();
    let mut r = server.raw();
    let mut other = server.client();
    assert_eq!(r.cmd(&["SET", "xx", "1"]), ok());
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(r.cmd(&["INCR", "xx"]), Reply::simple("QUEUED"));
    config_set(&mut other, "min-replicas-to-write", "1");
    let refused = r.cmd(&["EXEC"]).as_text();
    assert!(
        refused.starts_with("EXECABORT") && refused.contains("NOREPLICAS"),
        "{refused}"
    );
    assert_eq!(r.cmd(&["GET", "xx"]), b("1"));
    config_set(&mut other, "min-replicas-to-write", "0");

    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(r.cmd(&["SET", "x", "1"]), Reply::simple("QUEUED"));
    config_set(&mut other, "maxmemory", "1");
    let refused = r.cmd(&["EXEC"]).as_text();
    assert!(
        refused.starts_with("EXECABORT") && refused.contains("OOM"),
        "{refused}"
    );
    assert_eq!(r.cmd(&["MULTI"]), ok());
    assert_eq!(r.cmd(&["GET", "xx"]), Reply::simple("QUEUED"));
    assert_eq!(r.cmd(&["EXEC"]), Reply::Array(vec![b("1")]));
    config_set(&mut other, "maxmemory", "0");
}

/// The stream selects a database only when it changes: a replica that
/// continues after a broken link (and one that starts from a copy) goes on
/// in the database the stream had selected.
#[test]
fn a_continued_stream_stays_in_its_database() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    let _: () = redis::cmd("SELECT").arg(5).query(&mut p).unwrap();
    let _: () = redis::cmd("SET")
        .arg("before")
        .arg(1)
        .query(&mut p)
        .unwrap();
    follow(&mut r, primary.port);
    let _: () = redis::cmd("SET")
        .arg("after-copy")
        .arg(1)
        .query(&mut p)
        .unwrap();
    let id = replica_client_id(&mut p);
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut p)
        .unwrap();
    wait_until("the replica to continue", || {
        stat(&mut p, "sync_partial_ok") == 1
    });
    let _: () = redis::cmd("SET")
        .arg("after-continue")
        .arg(1)
        .query(&mut p)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(5).query(&mut r).unwrap();
    wait_until("the writes to reach database 5 of the replica", || {
        redis::cmd("EXISTS")
            .arg("before")
            .arg("after-copy")
            .arg("after-continue")
            .query::<i64>(&mut r)
            .unwrap()
            == 3
    });
    let _: () = redis::cmd("SELECT").arg(0).query(&mut r).unwrap();
    let stray: i64 = redis::cmd("DBSIZE").query(&mut r).unwrap();
    assert_eq!(stray, 0, "writes of database 5 landed in database 0");
}

/// Two clients publishing from database 0 until stopped: pipelines of
/// `publishes` PUBLISHes, each ended by `WAIT 1 1000` when `wait` is set
/// (its GETACK goes into the stream from the client's thread too).
struct Publishers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Publishers {
    fn start(url: &str, publishes: usize, wait: bool) -> Publishers {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..2)
            .map(|n| {
                let url = url.to_string();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let mut pipe = redis::pipe();
                        for _ in 0..publishes {
                            pipe.cmd("PUBLISH").arg("noise").arg(n).ignore();
                        }
                        if wait {
                            pipe.cmd("WAIT").arg(1).arg(1000).ignore();
                        }
                        pipe.query::<()>(&mut con).unwrap();
                    }
                })
            })
            .collect();
        Publishers { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads {
            thread.join().unwrap();
        }
    }
}

/// Commands that go into the stream from client threads (PUBLISH, and
/// the GETACK a WAIT sends) while the producer appends groups that
/// switch databases never put the stream back in the database it had
/// before: every write reaches the replica in its own database.
#[test]
fn publish_and_wait_never_move_the_stream_to_another_database() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    follow(&mut r, primary.port);
    let noisy = Publishers::start(&primary.url(), 50, true);
    for round in 0..100 {
        let mut pipe = redis::pipe();
        for i in 0..50 {
            let n = round * 50 + i;
            pipe.cmd("SELECT").arg(0).ignore();
            pipe.cmd("SET").arg(format!("zero-{n}")).arg(n).ignore();
            pipe.cmd("SELECT").arg(7).ignore();
            pipe.cmd("SET").arg(format!("seven-{n}")).arg(n).ignore();
        }
        pipe.query::<()>(&mut p).unwrap();
    }
    noisy.stop();
    let (want, got) = settled(&mut p, &mut r, false);
    assert_eq!(want.len(), 10_000);
    assert_same(&want, &got);
}

/// Writes that all go to one database while PUBLISHes from another go
/// into the stream between them: each write still reaches that database
/// of the replica. The producer translates a batch of writes before it
/// appends them, knowing the database the stream had selected when it
/// began; a PUBLISH appended meanwhile selects its own, and the batch
/// must select its database again. A build that appended without
/// selecting again put writes into database 0 of the replica.
#[test]
fn writes_stay_in_their_database_while_publishes_from_another_go_between() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    follow(&mut r, primary.port);
    let noisy = Publishers::start(&primary.url(), 20, false);
    let _: () = redis::cmd("SELECT").arg(7).query(&mut p).unwrap();
    for round in 0..400 {
        let mut pipe = redis::pipe();
        for i in 0..100 {
            pipe.cmd("SET")
                .arg(format!("seven-{}", round * 100 + i))
                .arg(i)
                .ignore();
        }
        pipe.query::<()>(&mut p).unwrap();
    }
    noisy.stop();
    let (want, got) = settled(&mut p, &mut r, false);
    assert_eq!(want.len(), 40_000);
    assert_same(&want, &got);
}

/// PUBLISH on the primary reaches subscribers of its replica, as Redis
/// sends it in the stream.
#[test]
fn publish_reaches_subscribers_of_the_replica() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    follow(&mut r, primary.port);
    let mut subscriber = replica.raw();
    subscriber.send(&["SUBSCRIBE", "news"]);
    let _ = subscriber.read();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("hello")
        .query(&mut p)
        .unwrap();
    assert_eq!(
        subscriber.read(),
        Reply::Array(vec![b("message"), b("news"), b("hello")])
    );
}

/// `replica-read-only` and `replica-serve-stale-data` take effect when
/// CONFIG SET changes them, on a replica already following.
#[test]
fn replica_settings_apply_when_changed() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut r = replica.client();
    follow(&mut r, primary.port);
    let refused = redis::cmd("SET")
        .arg("local")
        .arg(1)
        .query::<()>(&mut r)
        .unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    config_set(&mut r, "replica-read-only", "no");
    let _: () = redis::cmd("SET").arg("local").arg(1).query(&mut r).unwrap();
    let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
    assert_eq!(info_field(&info, "slave_read_only"), "0");
    config_set(&mut r, "replica-serve-stale-data", "no");
    drop(primary);
    wait_until("the link to go down", || !link_up(&mut r));
    let refused = redis::cmd("GET")
        .arg("local")
        .query::<()>(&mut r)
        .unwrap_err();
    assert_eq!(refused.code(), Some("MASTERDOWN"), "{refused}");
}

/// A TCP proxy between a replica and its primary that can stop
/// forwarding, as a network partition does: nothing is closed, bytes just
/// stop arriving. When the cut ends, the connections that lived through
/// it are closed (as a partition's peers find out) and new ones forward.
/// It can also forward slowly, as a thin link does.
struct Proxy {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    epoch: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Bytes each direction forwards per 10 ms at most (0: no limit).
    slow: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(AtomicBool::new(false));
        let epoch = std::sync::Arc::new(AtomicU64::new(0));
        let slow = std::sync::Arc::new(AtomicU64::new(0));
        let (cut_, epoch_, slow_) = (cut.clone(), epoch.clone(), slow.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(upstream) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let born = epoch_.load(Relaxed);
                for (from, to) in [
                    (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                    (upstream, client),
                ] {
                    let (cut, epoch, slow) = (cut_.clone(), epoch_.clone(), slow_.clone());
                    std::thread::spawn(move || pump(from, to, &cut, &epoch, &slow, born));
                }
            }
        });
        Proxy {
            port,
            cut,
            epoch,
            slow,
        }
    }

    /// Forwards at most `bytes` per 10 ms in each direction from now on.
    fn slow_down(&self, bytes: u64) {
        self.slow.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn heal(&self) {
        use std::sync::atomic::Ordering::{AcqRel, Release};
        // The epoch first: a pump that sees the cut lifted sees it too.
        self.epoch.fetch_add(1, AcqRel);
        self.cut.store(false, Release);
    }
}

/// Copies `from` to `to` while not cut; ends (closing both) once the
/// connection outlived a cut or either side closed.
fn pump(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    cut: &std::sync::atomic::AtomicBool,
    epoch: &std::sync::atomic::AtomicU64,
    slow: &std::sync::atomic::AtomicU64,
    born: u64,
) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering::{Acquire, Relaxed};
    from.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    // A connection made during a cut must never forward: the replica gave
    // it up, and a handshake it left buffered reaching the primary after
    // the heal made a second PSYNC (`sync_partial_ok` 2, once in a full
    // run). So the epoch is read after the cut is seen lifted (heal moves
    // it first) and again before every write.
    loop {
        if cut.load(Acquire) {
            if epoch.load(Acquire) != born {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        if epoch.load(Acquire) != born {
            break;
        }
        let limit = match slow.load(Relaxed) {
            0 => buf.len(),
            bytes => {
                std::thread::sleep(Duration::from_millis(10));
                (bytes as usize).min(buf.len())
            }
        };
        match from.read(&mut buf[..limit]) {
            Ok(0) => break,
            Ok(n) => {
                if epoch.load(Acquire) != born || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// A network cut (the proxy stops forwarding) long enough that both ends
/// give up on the link, with more writes meanwhile than the backlog keeps
/// in RAM (64 MB): the replica continues from the history on disk, no
/// second copy, and ends identical.
#[test]
fn a_network_cut_longer_than_the_ram_backlog_ends_in_a_partial_resync() {
    let primary = TestServer::start_with(&["--repl-timeout", "2"]);
    let replica = TestServer::start_with(&["--repl-timeout", "2"]);
    let proxy = Proxy::start(primary.port);
    let mut p = primary.client();
    let mut r = replica.client();
    setup_groups(&mut p);
    for round in 0..10 {
        write_everything(&mut p, round, true);
    }
    replicaof(&mut r, proxy.port);
    wait_until("the link to come up", || link_up(&mut r));
    let (want, got) = settled(&mut p, &mut r, true);
    assert_same(&want, &got);

    proxy.cut();
    wait_until("the replica to see the link down", || !link_up(&mut r));
    wait_until("the primary to drop the replica", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
        info.contains("connected_slaves:0")
    });
    // 96 MB of values while cut off: more than RAM keeps of the stream.
    let value = "v".repeat(10_000);
    for batch in 0..96 {
        let mut pipe = redis::pipe();
        for i in 0..100 {
            pipe.cmd("SET")
                .arg(format!("big:{}", (batch * 100 + i) % 3000))
                .arg(&value)
                .ignore();
        }
        pipe.query::<()>(&mut p).unwrap();
    }
    for round in 10..20 {
        write_everything(&mut p, round, true);
    }
    proxy.heal();
    wait_until("the link to come up again", || link_up(&mut r));
    let (want, got) = settled(&mut p, &mut r, true);
    assert_same(&want, &got);
    assert_eq!(stat(&mut p, "sync_full"), 1, "no second copy");
    assert_eq!(stat(&mut p, "sync_partial_ok"), 1);
    let info: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
    let histlen: u64 = info_field(&info, "repl_backlog_histlen").parse().unwrap();
    assert!(
        histlen > 96_000_000,
        "the backlog holds the whole cut: {histlen}"
    );
}

/// A small primary keeps a small part of its replication history in RAM
/// (the rest is on disk): 20 MB of stream over ten 10 KB keys leave at
/// most about 1 MB of it in RAM (1/64 of the memory in use, at least
/// 1 MB), where a fixed 16 MB window kept 16 MB; the replica still gets
/// every write, and a reconnect continues from the disk.
#[test]
fn a_small_primary_keeps_a_small_backlog_in_ram() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    let mut p = primary.client();
    let mut r = replica.client();
    follow(&mut r, primary.port);
    for round in 0..200 {
        let value = format!("{round}:").repeat(10_000)[..10_000].to_string();
        let mut pipe = redis::pipe();
        for key in 0..10 {
            pipe.cmd("SET").arg(format!("k{key}")).arg(&value).ignore();
        }
        pipe.query::<()>(&mut p).unwrap();
    }
    let memory: String = redis::cmd("INFO").arg("memory").query(&mut p).unwrap();
    let in_ram: u64 = info_field(&memory, "mem_replication_backlog")
        .parse()
        .unwrap();
    let used: u64 = info_field(&memory, "used_memory").parse().unwrap();
    assert!(used < 64 << 20, "a small primary: {used}");
    assert!(
        in_ram < 2 << 20,
        "{in_ram} bytes of the stream in RAM with {used} in use"
    );
    let replication: String = redis::cmd("INFO").arg("replication").query(&mut p).unwrap();
    let held: u64 = info_field(&replication, "repl_backlog_histlen")
        .parse()
        .unwrap();
    assert!(held > 20_000_000, "the files hold the history: {held}");
    let last = "199:".repeat(2_500);
    wait_until("the replica to apply every write", || {
        (0..10).all(|key| {
            let got: Option<String> = redis::cmd("GET")
                .arg(format!("k{key}"))
                .query(&mut r)
                .unwrap();
            got.as_deref() == Some(last.as_str())
        })
    });
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut p)
        .unwrap();
    wait_until("the replica to continue from the backlog", || {
        stat(&mut p, "sync_partial_ok") == 1
    });
    assert_eq!(stat(&mut p, "sync_full"), 1, "no second copy");
}

/// A primary that goes silent in the middle of a full synchronisation's
/// transfer (the connection stays open, nothing more comes) is given up
/// after `repl-timeout`, and the replica connects again; it keeps serving
/// meanwhile. The primary here is a fake that answers the handshake,
/// announces a copy and sends ten of its bytes.
#[test]
fn a_primary_silent_during_the_transfer_is_given_up_after_repl_timeout() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counted.fetch_add(1, Relaxed);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                // Command names: the line after each `*n` array's first `$len`.
                let mut expect_name = 0;
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let text = line.trim_end();
                    if text.starts_with('*') {
                        expect_name = 3;
                    }
                    if expect_name > 0 {
                        expect_name -= 1;
                        if expect_name > 0 {
                            continue;
                        }
                        let reply: &[u8] = match text.to_ascii_uppercase().as_str() {
                            "PING" => b"+PONG\r\n",
                            "PSYNC" => b"+FULLRESYNC 0123456789012345678901234567890123456789 0\r\n$100000\r\nREDIS0011\n",
                            _ => b"+OK\r\n",
                        };
                        if stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let replica = TestServer::start_with(&["--repl-timeout", "2"]);
    let mut r = replica.client();
    replicaof(&mut r, port);
    wait_until("the transfer to begin", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.lines().any(|line| line == "master_sync_read_bytes:10")
    });
    let started = Instant::now();
    wait_until("the replica to connect again", || {
        connections.load(Relaxed) >= 2
    });
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "gave up after {waited:?}, before repl-timeout"
    );
    let pong: String = redis::cmd("PING").query(&mut r).unwrap();
    assert_eq!(pong, "PONG");
    assert!(!link_up(&mut r));
}

/// REPLICAOF NO ONE while the copy is on its way stops the transfer: the
/// copy is not loaded afterwards over what is now a primary (its data
/// stays, and it keeps its own history), as Redis cancels the transfer.
#[test]
fn replicaof_no_one_during_the_transfer_loads_nothing() {
    let primary = TestServer::start();
    let replica = TestServer::start();
    // A thin link: the copy (about 5 MB) takes seconds to cross it.
    let proxy = Proxy::start(primary.port);
    proxy.slow_down(20_000);
    let mut p = primary.client();
    let mut r = replica.client();
    let value = "p".repeat(1000);
    for batch in 0..5 {
        let mut pipe = redis::pipe();
        for i in 0..1000 {
            pipe.cmd("SET")
                .arg(format!("primary:{}", batch * 1000 + i))
                .arg(&value)
                .ignore();
        }
        pipe.query::<()>(&mut p).unwrap();
    }
    let _: () = redis::cmd("SET").arg("mine").arg(1).query(&mut r).unwrap();
    replicaof(&mut r, proxy.port);
    wait_until("the transfer to begin", || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info_field(&info, "master_sync_in_progress") == "1"
            && info_field(&info, "master_sync_read_bytes") != "0"
    });
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut r)
        .unwrap();
    let primary_id = info_field(
        &redis::cmd("INFO")
            .arg("replication")
            .query::<String>(&mut p)
            .unwrap(),
        "master_replid",
    )
    .to_string();
    // Long enough for the rest of the copy to cross and load, were the
    // transfer still going.
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let size = redis::cmd("DBSIZE").query::<i64>(&mut r);
        assert!(
            matches!(size, Ok(1)),
            "the copy was loaded after REPLICAOF NO ONE: {size:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mine: Option<String> = redis::cmd("GET").arg("mine").query(&mut r).unwrap();
    assert_eq!(mine.as_deref(), Some("1"));
    let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
    assert_eq!(info_field(&info, "role"), "master");
    assert_ne!(info_field(&info, "master_replid"), primary_id);
}

/// Two replicas asking for a full synchronisation at the same time share
/// one copy (one set of reads of the keyspace, one file), under writes,
/// and both end identical to the primary.
#[test]
fn replicas_that_sync_at_once_share_one_copy() {
    let primary = TestServer::start();
    let replicas = [TestServer::start(), TestServer::start()];
    let mut p = primary.client();
    setup_groups(&mut p);
    fill(&mut p, 80_000, 1, 1_000);
    let writer = write_until_stopped(primary.url(), 0);
    for replica in &replicas {
        replicaof(&mut replica.client(), primary.port);
    }
    primary.wait_for_log("shares the copy being made");
    for replica in &replicas {
        wait_until("the link to come up", || link_up(&mut replica.client()));
    }
    writer.stop();
    for replica in &replicas {
        let (want, got) = settled(&mut p, &mut replica.client(), true);
        assert_same(&want, &got);
    }
    assert_eq!(stat(&mut p, "sync_full"), 2, "one full sync per replica");
}

fn bgsave_and_wait(con: &mut redis::Connection) {
    let _: String = redis::cmd("BGSAVE").query(con).unwrap();
    wait_until("the checkpoint to finish", || {
        let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
        info.contains("rdb_bgsave_in_progress:0")
    });
}

/// A replica restarted with `appendonly no` keeps no position (nothing
/// would keep it in step with the data): it synchronises in full, and its
/// checkpoints do not carry an old position into a later run with the
/// log on, which would then continue from it on newer data.
#[test]
fn a_replica_without_its_log_keeps_no_position_across_runs() {
    let primary = TestServer::start();
    let mut p = primary.client();
    setup_groups(&mut p);
    let port = primary.port.to_string();
    let with_log = ["--replicaof", "127.0.0.1", &port];
    let without_log = [
        "--replicaof",
        "127.0.0.1",
        &port,
        "--appendonly",
        "no",
        "--save",
        "3600 1",
    ];
    let mut round = 0;
    let mut replica = TestServer::start_with(&with_log);
    for args in [&without_log[..], &with_log[..]] {
        for _ in 0..10 {
            write_everything(&mut p, round, true);
            round += 1;
        }
        wait_until("the link to come up", || link_up(&mut replica.client()));
        let (want, got) = settled(&mut p, &mut replica.client(), true);
        assert_same(&want, &got);
        // A checkpoint of this run, with what it knows of its position.
        bgsave_and_wait(&mut replica.client());
        let dir = replica.kill9();
        replica = TestServer::spawn(dir, args, None, READY);
    }
    wait_until("the link to come up", || link_up(&mut replica.client()));
    for _ in 0..10 {
        write_everything(&mut p, round, true);
        round += 1;
    }
    let (want, got) = settled(&mut p, &mut replica.client(), true);
    assert_same(&want, &got);
    assert_eq!(stat(&mut p, "sync_full"), 3, "a full sync at every start");
}

/// Reads one line (without its CRLF) of what `SYNC` sends.
fn stream_line(stream: &mut std::io::BufReader<std::net::TcpStream>) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

/// The next command of a replication stream (after its RDB file), its
/// arguments joined by spaces, lower-case name first; PINGs skipped.
fn stream_command(stream: &mut std::io::BufReader<std::net::TcpStream>) -> String {
    use std::io::Read;
    loop {
        let header = stream_line(stream);
        let count: usize = header.strip_prefix('*').unwrap().parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..count {
            let len: usize = stream_line(stream)[1..].parse().unwrap();
            let mut arg = vec![0; len + 2];
            stream.read_exact(&mut arg).unwrap();
            arg.truncate(len);
            args.push(String::from_utf8_lossy(&arg).into_owned());
        }
        args[0] = args[0].to_ascii_lowercase();
        if args[0] != "ping" {
            return args.join(" ");
        }
    }
}

/// Attaches to the replication stream of the server on `port` as Redis'
/// tests do (SYNC), and reads past its RDB file.
fn attach_stream(port: u16) -> std::io::BufReader<std::net::TcpStream> {
    use std::io::Read;
    let socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = socket.try_clone().unwrap();
    std::io::Write::write_all(&mut writer, b"SYNC\r\n").unwrap();
    let mut stream = std::io::BufReader::new(socket);
    let mut header = stream_line(&mut stream);
    while header.is_empty() {
        // Newlines keep the link alive while the copy is made.
        header = stream_line(&mut stream);
    }
    let rdb_len: usize = header.strip_prefix('$').unwrap().parse().unwrap();
    let mut rdb = vec![0; rdb_len];
    stream.read_exact(&mut rdb).unwrap();
    stream
}

/// What a server on `port` sends its replicas for `commands` (run after
/// `setup`, which the replica receives in its copy), up to `SET end 1`,
/// each command's arguments joined by spaces; the time an XCLAIM carries
/// reads `TIME *`.
fn stream_for(port: u16, setup: &[&[&str]], commands: &[&[&str]]) -> Vec<String> {
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut run = |args: &[&str]| {
        let _: redis::Value = redis::cmd(args[0]).arg(&args[1..]).query(&mut con).unwrap();
    };
    setup.iter().for_each(|args| run(args));
    let mut stream = attach_stream(port);
    commands.iter().for_each(|args| run(args));
    run(&["SET", "end", "1"]);
    let mut seen = Vec::new();
    while seen.last().is_none_or(|c: &String| c != "set end 1") {
        let command = stream_command(&mut stream);
        let mut words: Vec<&str> = command.split(' ').collect();
        if let Some(at) = words.iter().position(|w| *w == "TIME") {
            words[at + 1] = "*";
        }
        seen.push(words.join(" "));
        assert!(seen.len() < 40, "{seen:?}");
    }
    seen
}

/// XREADGROUP reaches replicas as Redis 7.4 sends it: XCLAIM … FORCE
/// JUSTID LASTID per new entry, then `XGROUP SETID … ENTRIESREAD`, and
/// XGROUP CREATECONSUMER only with NOACK (an XCLAIM makes the consumer
/// otherwise), inside MULTI/EXEC. The expected stream is what
/// redis-server 7.4.1 (built from its tag) sent for the same commands;
/// Debian's 7.0.15 sends SETID only with NOACK. Strata sent
/// CREATECONSUMER every time and SETID without the read counter, so a
/// replica's XINFO lag was unknown. A read of the consumer's history
/// sends XCLAIMs that count the delivery (Redis sends nothing, and its
/// replicas' delivery counts fall behind: a deliberate difference).
#[test]
fn xreadgroup_reaches_replicas_as_redis_sends_it() {
    let strata = TestServer::start();
    let setup: &[&[&str]] = &[
        &["XADD", "s", "1-0", "a", "1"],
        &["XADD", "s", "2-0", "b", "2"],
        &["XADD", "s", "3-0", "c", "3"],
        &["XADD", "s", "4-0", "d", "4"],
        &["XGROUP", "CREATE", "s", "g", "0"],
    ];
    let commands: &[&[&str]] = &[
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "NOACK",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ],
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"],
    ];
    let claim =
        |at: &str| format!("xclaim s g alice 0 {at} TIME * RETRYCOUNT 1 FORCE JUSTID LASTID {at}");
    let mut want = vec![
        "multi".to_string(),
        "select 0".to_string(),
        claim("1-0"),
        claim("2-0"),
    ];
    want.extend(
        [
            "xgroup SETID s g 2-0 ENTRIESREAD 2",
            "exec",
            "multi",
            "xgroup CREATECONSUMER s g bob",
            "xgroup SETID s g 3-0 ENTRIESREAD 3",
            "exec",
            // Strata's own: the history read counts its deliveries.
            "multi",
            "xclaim s g alice 0 1-0 TIME *",
            "xclaim s g alice 0 2-0 TIME *",
            "exec",
            "multi",
        ]
        .map(String::from),
    );
    want.push(claim("4-0"));
    want.extend(["xgroup SETID s g 4-0 ENTRIESREAD 4", "exec", "set end 1"].map(String::from));
    assert_eq!(stream_for(strata.port, setup, commands), want);
}

/// A move goes to replicas as one LMOVE, as Redis sends it (a blocked
/// BLMOVE that a push serves as `lmove … left right`, Redis' own words):
/// LMOVE, RPOPLPUSH and a served BLMOVE. They went as MULTI, LPOP, RPUSH,
/// EXEC. A MULTI of a pop and a push stays as it was.
#[test]
fn moves_reach_replicas_as_lmove() {
    let server = TestServer::start();
    let blocked = {
        let mut con = server.client();
        std::thread::spawn(move || {
            let moved: Option<String> = redis::cmd("BLMOVE")
                .arg(&["q", "dst", "LEFT", "RIGHT", "10"])
                .query(&mut con)
                .unwrap();
            moved
        })
    };
    let mut con = server.client();
    wait_until("the BLMOVE to block", || {
        info_u64(&mut con, "clients", "blocked_clients") == 1
    });
    let setup: &[&[&str]] = &[&["RPUSH", "src", "a", "b", "c"]];
    let commands: &[&[&str]] = &[
        &["LMOVE", "src", "dst", "LEFT", "RIGHT"],
        &["RPOPLPUSH", "src", "dst"],
        &["LPUSH", "q", "v"],
        &["MULTI"],
        &["LPOP", "src"],
        &["RPUSH", "dst", "z"],
        &["EXEC"],
    ];
    let got = stream_for(server.port, setup, commands);
    assert_eq!(blocked.join().unwrap().as_deref(), Some("v"));
    assert_eq!(
        got,
        [
            "select 0",
            "lmove src dst left right",
            "lmove src dst right left",
            "lpush q v",
            "lmove q dst left right",
            "multi",
            "lpop src 1",
            "rpush dst z",
            "exec",
            "set end 1"
        ]
    );
}

/// Function libraries reach replicas one by one: FUNCTION LOAD … REPLACE
/// of the library loaded, FUNCTION DELETE of the one deleted, and FLUSH
/// as FUNCTION FLUSH alone (the whole set went as FUNCTION FLUSH and
/// RESTORE at every change).
#[test]
fn function_libraries_reach_replicas_one_by_one() {
    let server = TestServer::start();
    let one = "#!lua name=one\nredis.register_function('f1', function() return 1 end)";
    let two = "#!lua name=Two\nredis.register_function('f2', function() return 2 end)";
    let commands: &[&[&str]] = &[
        &["FUNCTION", "LOAD", one],
        &["FUNCTION", "LOAD", two],
        &["FUNCTION", "DELETE", "one"],
        &["FUNCTION", "FLUSH"],
    ];
    let got = stream_for(server.port, &[], commands);
    let load = |code: &str| format!("function LOAD REPLACE {code}");
    assert_eq!(
        got,
        [
            "select 0".to_string(),
            load(one),
            load(two),
            "function DELETE one".to_string(),
            "function FLUSH".to_string(),
            "set end 1".to_string(),
        ]
    );
}

/// As Redis' own tests read the stream (`attach_to_replication_stream`):
/// a collection a command creates goes to a replica as that command (it
/// went as RESTORE of the whole value), a pop of more than the list holds
/// as the count popped, ZPOPMAX as ZPOPMAX (it went as ZREM), and the DEL of the list that pop emptied not at
/// all (the replica's pop deletes it), SPOP of a whole set as DEL (UNLINK
/// under lazyfree-lazy-server-del) and UNLINK as UNLINK; a PUBLISH first in the stream
/// selects its client's database first.
#[test]
fn the_stream_carries_the_commands_redis_sends_for_new_and_emptied_collections() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut con).unwrap();
    let mut stream = attach_stream(server.port);
    for args in [
        &["PUBLISH", "ch", "hi"][..],
        &["RPUSH", "l", "a", "b"],
        &["LPUSH", "l2", "x", "y"],
        &["SADD", "s", "m"],
        &["ZADD", "z", "1", "m", "2", "n"],
        &["ZPOPMAX", "z", "5"],
        &["HSET", "h", "f", "1", "f", "2"],
        &["LPOP", "l", "5"],
        &["SPOP", "s", "5"],
        &["CONFIG", "SET", "lazyfree-lazy-server-del", "yes"],
        &["SADD", "s3", "a"],
        &["SPOP", "s3", "2"],
        &["CONFIG", "SET", "lazyfree-lazy-server-del", "no"],
        &["UNLINK", "l2"],
        &["SET", "end", "1"],
    ] {
        let _: redis::Value = redis::cmd(args[0]).arg(&args[1..]).query(&mut con).unwrap();
    }
    let mut seen = Vec::new();
    while seen.last().is_none_or(|c: &String| c != "set end 1") {
        seen.push(stream_command(&mut stream));
        assert!(seen.len() < 20, "{seen:?}");
    }
    assert_eq!(
        seen,
        [
            "select 3",
            "publish ch hi",
            "rpush l a b",
            "lpush l2 x y",
            "sadd s m",
            "zadd z 1 m 2 n",
            "zpopmax z 2",
            "hset h f 1 f 2",
            "lpop l 2",
            "del s",
            "sadd s3 a",
            "unlink s3",
            "unlink l2",
            "set end 1"
        ]
    );
}

/// A REPLICAOF drops this server's replicas, but what was committed
/// before it reaches them first, as in Redis (whose replicas got the
/// writes it propagated before it read the REPLICAOF): Redis' "MULTI /
/// EXEC with REPLICAOF" test. Sent in one write with the SET before it,
/// the REPLICAOF used to stop the sender before it had sent that SET (the
/// test failed about one run in five of Redis' suite, and 8 rounds of this
/// one in 8 failed without the wait).
#[test]
fn writes_before_a_replicaof_reach_the_dropped_replicas() {
    let server = TestServer::start();
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unused_port = unused.local_addr().unwrap().port().to_string();
    drop(unused);
    for round in 0..8 {
        let mut stream = attach_stream(server.port);
        let mut raw = server.raw();
        let key = format!("before{round}");
        let mut pipeline = Vec::new();
        for args in [
            &["SET", key.as_str(), "v"][..],
            &["MULTI"],
            &["SET", "inside", "v"],
            &["REPLICAOF", "127.0.0.1", unused_port.as_str()],
            &["EXEC"],
        ] {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            pipeline.extend(Raw::encode(&args));
        }
        raw.send_raw(&pipeline);
        let replies: Vec<Reply> = (0..5).map(|_| raw.read()).collect();
        assert_eq!(replies[0], ok(), "round {round}: {replies:?}");
        let mut seen = Vec::new();
        while !seen.iter().any(|c: &String| c.starts_with("set before")) {
            seen.push(stream_command(&mut stream));
            assert!(seen.len() < 10, "round {round}: {seen:?}");
        }
        assert_eq!(
            seen.last().unwrap(),
            &format!("set {key} v"),
            "round {round}"
        );
        assert_eq!(raw.cmd(&["REPLICAOF", "NO", "ONE"]), ok());
    }
}
