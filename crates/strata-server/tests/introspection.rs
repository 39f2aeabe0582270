//! SLOWLOG: what is logged, how entries look, the limits and the
//! directives, through a real client.

mod common;

use common::*;

/// Entries of SLOWLOG GET: (id, duration µs, args, name).
fn entries(con: &mut Raw, count: &str) -> Vec<(i64, i64, Vec<String>, String)> {
    con.cmd(&["SLOWLOG", "GET", count])
        .as_array()
        .iter()
        .map(|entry| {
            let fields = entry.as_array();
            assert_eq!(fields.len(), 6);
            let args = fields[3].as_array().iter().map(Reply::as_text).collect();
            (
                fields[0].as_int(),
                fields[2].as_int(),
                args,
                fields[5].as_text(),
            )
        })
        .collect()
}

#[test]
fn slowlog_records_slow_commands_newest_first() {
    let server = TestServer::start();
    let mut con = server.raw();
    // The default threshold (10 ms): a quick command is not logged, a
    // script that spins for 30 ms is, and not the commands it calls.
    assert_eq!(con.cmd(&["SET", "k", "v"]), ok());
    // (It spins on os.clock: TIME is frozen inside a script, as in Redis.)
    let spin = "local start = os.clock() while os.clock() - start < 0.03 do end return 1";
    assert_eq!(con.cmd(&["EVAL", spin, "0"]), Reply::Int(1));
    let logged = entries(&mut con, "-1");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0].2[0], "EVAL");
    assert!(logged[0].1 >= 30_000, "{logged:?}");
    // Threshold 0: everything, with the client's name; long commands cut.
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        ok()
    );
    assert_eq!(con.cmd(&["CLIENT", "SETNAME", "reporter"]), ok());
    let mut push = vec!["RPUSH".to_string(), "list".to_string()];
    push.extend((0..38).map(|i| i.to_string()));
    push.push("x".repeat(300));
    let push: Vec<&str> = push.iter().map(String::as_str).collect();
    assert_eq!(con.cmd(&push), Reply::Int(39));
    assert!(matches!(con.cmd(&["AUTH", "secret"]), Reply::Error(_)));
    let logged = entries(&mut con, "3");
    assert_eq!(logged.len(), 3);
    assert_eq!(logged[0].2, ["AUTH", "(redacted)"]);
    let rpush = &logged[1];
    assert_eq!(rpush.2.len(), 32);
    assert_eq!(rpush.2[31], "... (10 more arguments)");
    assert_eq!(rpush.3, "reporter");
    assert_eq!(logged[2].2, ["CLIENT", "SETNAME", "reporter"]);
    assert!(logged[0].0 > logged[1].0 && logged[1].0 > logged[2].0);
    // SLOWLOG GET's default count is 10.
    for _ in 0..12 {
        con.cmd(&["PING"]);
    }
    assert_eq!(entries(&mut con, "10").len(), 10);
    assert_eq!(con.cmd(&["SLOWLOG", "GET"]).as_array().len(), 10);
    // The length limit, shrinking at once; RESET; -1 turns logging off.
    assert_eq!(con.cmd(&["CONFIG", "SET", "slowlog-max-len", "3"]), ok());
    assert_eq!(con.cmd(&["SLOWLOG", "LEN"]), Reply::Int(3));
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        ok()
    );
    assert_eq!(con.cmd(&["SLOWLOG", "RESET"]), ok());
    con.cmd(&["PING"]);
    assert_eq!(con.cmd(&["SLOWLOG", "LEN"]), Reply::Int(0));
    for bad in ["-2", "x"] {
        assert_eq!(
            con.cmd(&["SLOWLOG", "GET", bad]),
            e("ERR count should be greater than or equal to -1")
        );
    }
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-2"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument must be between -1 and 9223372036854775807 inclusive"
        )
    );
}

/// MONITOR shows every command other clients run, in Redis' line format
/// and order (a script's commands after its EVAL, a transaction's when
/// EXEC runs them, then EXEC), hides admin commands and secrets, and
/// stops at RESET.
#[test]
fn monitor_shows_commands_as_redis_does() {
    let server = TestServer::start();
    let mut monitor = server.raw();
    assert_eq!(monitor.cmd(&["MONITOR"]), ok());
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SET", "k", "a \"b\"\n"]), ok());
    assert_eq!(
        con.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]),
        b("a \"b\"\n")
    );
    assert_eq!(con.cmd(&["MULTI"]), ok());
    assert_eq!(con.cmd(&["INCR", "n"]), Reply::simple("QUEUED"));
    assert_eq!(con.cmd(&["EXEC"]), Reply::Array(vec![Reply::Int(1)]));
    assert!(con.cmd(&["CONFIG", "GET", "port"]).as_array().len() == 2);
    assert!(matches!(con.cmd(&["AUTH", "secret"]), Reply::Error(_)));
    assert_eq!(con.cmd(&["SELECT", "3"]), ok());
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
    let port = con.stream.local_addr().unwrap().port();
    let me = format!("127.0.0.1:{port}");
    let expected = [
        format!("[0 {me}] \"SET\" \"k\" \"a \\\"b\\\"\\n\""),
        format!("[0 {me}] \"EVAL\" \"return redis.call('get', KEYS[1])\" \"1\" \"k\""),
        "[0 lua] \"get\" \"k\"".to_string(),
        format!("[0 {me}] \"MULTI\""),
        format!("[0 {me}] \"INCR\" \"n\""),
        format!("[0 {me}] \"EXEC\""),
        format!("[0 {me}] \"AUTH\" \"(redacted)\""),
        format!("[3 {me}] \"SELECT\" \"3\""),
        format!("[3 {me}] \"PING\""),
    ];
    for want in &expected {
        let Reply::Simple(line) = monitor.read() else {
            panic!("not a monitor line")
        };
        let (time, rest) = line.split_once(' ').unwrap();
        let (seconds, micros) = time.split_once('.').unwrap();
        assert!(
            seconds.parse::<u64>().is_ok() && micros.len() == 6,
            "{line}"
        );
        assert_eq!(rest, want);
    }
    let list = con.cmd(&["CLIENT", "LIST"]).as_text();
    assert!(list.contains("flags=O"), "{list}");
    // RESET ends it: the monitor's next reply is its own.
    assert_eq!(monitor.cmd(&["RESET"]), Reply::simple("RESET"));
    assert_eq!(con.cmd(&["SET", "after", "1"]), ok());
    assert_eq!(monitor.cmd(&["PING"]), Reply::simple("PONG"));
}

/// A blocked command shows once, when it blocks, not again when a push
/// serves it (Redis' "MONITOR log blocked command only once"); MIGRATE's
/// AUTH password shows redacted.
#[test]
fn monitor_shows_a_blocked_command_once_and_hides_migrate_passwords() {
    let server = TestServer::start();
    let mut watcher = server.client();
    let mut monitor = server.raw();
    assert_eq!(monitor.cmd(&["MONITOR"]), ok());
    let mut blocked = server.raw();
    blocked.send(&["BLPOP", "q", "0"]);
    wait_until("the BLPOP to block", || {
        info_u64(&mut watcher, "clients", "blocked_clients") == 1
    });
    let mut con = server.raw();
    assert_eq!(con.cmd(&["LPUSH", "q", "1"]), Reply::Int(1));
    assert_eq!(blocked.read(), Reply::Array(vec![b("q"), b("1")]));
    assert_eq!(con.cmd(&["LPUSH", "q", "2"]), Reply::Int(1));
    let port = server.port.to_string();
    let migrate = [
        "MIGRATE",
        "127.0.0.1",
        &port,
        "nokey",
        "0",
        "5000",
        "AUTH",
        "pw",
    ];
    assert_eq!(con.cmd(&migrate), Reply::simple("NOKEY"));
    let mut lines = Vec::new();
    while lines.len() < 4 {
        let Reply::Simple(line) = monitor.read() else {
            panic!("not a monitor line")
        };
        if !line.contains("\"INFO\"") && !line.contains("\"info\"") {
            lines.push(
                line.split_once(" [")
                    .unwrap()
                    .1
                    .split_once("] ")
                    .unwrap()
                    .1
                    .to_string(),
            );
        }
    }
    assert_eq!(
        lines,
        [
            "\"BLPOP\" \"q\" \"0\"".to_string(),
            "\"LPUSH\" \"q\" \"1\"".to_string(),
            "\"LPUSH\" \"q\" \"2\"".to_string(),
            format!(
                "\"MIGRATE\" \"127.0.0.1\" \"{port}\" \"nokey\" \"0\" \"5000\" \"AUTH\" \"(redacted)\""
            ),
        ]
    );
}

/// A monitor that does not read is disconnected at its output limit;
/// the server and the other clients go on.
#[test]
fn a_monitor_that_does_not_read_is_disconnected() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(
        con.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 256kb 0 0"
        ]),
        ok()
    );
    let mut monitor = server.raw();
    assert_eq!(monitor.cmd(&["MONITOR"]), ok());
    let value = "v".repeat(100_000);
    wait_until("the monitor to be disconnected", || {
        for _ in 0..20 {
            assert_eq!(con.cmd(&["SET", "k", &value]), ok());
        }
        !con.cmd(&["CLIENT", "LIST"]).as_text().contains("flags=O")
    });
    assert_eq!(con.cmd(&["GET", "k"]), b(&value));
}

/// CLIENT KILL TYPE: pubsub and normal clients apart, types Strata has
/// no client of match nobody, an unknown type is Redis' error.
#[test]
fn client_kill_by_type() {
    let server = TestServer::start();
    let mut con = server.raw();
    let mut subscriber = server.raw();
    subscriber.send(&["SUBSCRIBE", "news"]);
    assert_eq!(subscriber.read().as_array().len(), 3);
    // A round trip, so the server has registered it before the kills.
    let mut idle = server.raw();
    assert_eq!(idle.cmd(&["PING"]), Reply::simple("PONG"));
    assert_eq!(
        con.cmd(&["CLIENT", "KILL", "TYPE", "master"]),
        Reply::Int(0)
    );
    assert_eq!(
        con.cmd(&["CLIENT", "KILL", "TYPE", "wrong_type"]),
        e("ERR Unknown client type 'wrong_type'")
    );
    assert_eq!(
        con.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]),
        Reply::Int(1)
    );
    assert!(subscriber.try_read().is_none(), "the subscriber was closed");
    // The idle normal client, not this one (SKIPME yes).
    assert_eq!(
        con.cmd(&["CLIENT", "KILL", "TYPE", "normal"]),
        Reply::Int(1)
    );
    assert_eq!(con.cmd(&["PING"]), Reply::simple("PONG"));
}

/// CLIENT PAUSE WRITE holds the commands that may write (EXEC, EVAL and
/// PUBLISH included) and lets reads through; CLIENT UNPAUSE releases them
/// at once, in order; CLIENT PAUSE ALL holds everything for its time.
#[test]
fn client_pause_holds_writes_until_unpaused() {
    use std::time::{Duration, Instant};
    let server = TestServer::start();
    let mut admin = server.raw();
    let mut writer = server.raw();
    assert_eq!(admin.cmd(&["SET", "k", "before"]), ok());
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "20000", "WRITE"]), ok());
    // Reads run at once, from anyone, and so do scripts that declare no
    // writes and commands with a wrong argument count (their error).
    assert_eq!(writer.cmd(&["GET", "k"]), b("before"));
    assert_eq!(
        writer.cmd(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('GET', 'k')",
            "0"
        ]),
        b("before")
    );
    assert_eq!(
        writer.cmd(&["SET", "k"]),
        e("ERR wrong number of arguments for 'set' command")
    );
    writer.send(&["SET", "k", "during"]);
    writer.send(&["GET", "k"]);
    writer.send(&["EVAL", "return redis.call('INCR', 'n')", "0"]);
    let patience = Some(Duration::from_millis(300));
    writer.stream.set_read_timeout(patience).unwrap();
    assert_eq!(writer.try_read(), None, "the SET waits");
    writer.stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    assert_eq!(admin.cmd(&["GET", "k"]), b("before"));
    let released = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(writer.read(), ok());
    assert_eq!(writer.read(), b("during"));
    assert_eq!(writer.read(), Reply::Int(1));
    assert!(released.elapsed() < Duration::from_secs(5));
    // ALL: even a PING waits for the pause's end.
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "300", "ALL"]), ok());
    let started = Instant::now();
    assert_eq!(writer.cmd(&["PING"]), Reply::simple("PONG"));
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    for (args, error) in [
        (
            ["CLIENT", "PAUSE", "x", "ALL"],
            "ERR timeout is not an integer or out of range",
        ),
        (["CLIENT", "PAUSE", "-1", "ALL"], "ERR timeout is negative"),
        (["CLIENT", "PAUSE", "10", "MAYBE"], "ERR syntax error"),
    ] {
        assert_eq!(admin.cmd(&args), e(error));
    }
}

/// DEBUG is refused unless `enable-debug-command` allows it (`no` by
/// default, as in Redis 7), before its subcommand is looked at; `local`
/// lets loopback clients in.
#[test]
fn debug_is_behind_enable_debug_command() {
    const REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";
    let closed = TestServer::start_with(&["--enable-debug-command", "no"]);
    let mut raw = closed.raw();
    assert_eq!(raw.cmd(&["DEBUG", "SLEEP", "0"]), e(REFUSED));
    assert_eq!(raw.cmd(&["DEBUG", "NOSUCH"]), e(REFUSED));
    assert_eq!(
        raw.cmd(&["DEBUG"]),
        e("ERR wrong number of arguments for 'debug' command")
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "enable-debug-command", "yes"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'enable-debug-command') - can't set immutable config"
        )
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "GET", "enable-debug-command"])
            .as_array(),
        &[b("enable-debug-command"), b("no")]
    );
    let local = TestServer::start_with(&["--enable-debug-command", "local"]);
    assert_eq!(local.raw().cmd(&["DEBUG", "SLEEP", "0"]), ok());
    let open = TestServer::start_with(&["--enable-debug-command", "yes"]);
    assert_eq!(open.raw().cmd(&["DEBUG", "SLEEP", "0"]), ok());
}

/// DEBUG OBJECT: Redis' one-line summary, with the serialized length
/// DUMP's payload implies.
#[test]
fn debug_object_describes_the_value() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "k", "hello"]), ok());
    let line = raw.cmd(&["DEBUG", "OBJECT", "k"]).as_text();
    assert!(line.starts_with("Value at:0x"), "{line}");
    for field in [
        "refcount:1",
        "encoding:embstr",
        "serializedlength:6",
        "lru_seconds_idle:0",
    ] {
        assert!(line.contains(field), "{field} in {line}");
    }
    assert_eq!(raw.cmd(&["RPUSH", "l", "a"]), i(1));
    assert!(
        raw.cmd(&["DEBUG", "OBJECT", "l"])
            .as_text()
            .contains("encoding:listpack")
    );
    assert_eq!(
        raw.cmd(&["DEBUG", "OBJECT", "missing"]),
        e("ERR no such key")
    );
}

/// DEBUG HTSTATS-KEY: Redis' words for the hash table a set, hash or
/// sorted set is kept in (Redis' unit/type/set runs it and stopped there);
/// DEBUG CHANGE-REPL-ID: a new replication ID, the second one cleared.
#[test]
fn debug_htstats_key_and_change_repl_id() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let members: Vec<String> = (0..600).map(|n| format!("m{n}")).collect();
    for (kind, key) in [("SADD", "s"), ("ZADD", "z"), ("HSET", "h")] {
        let mut args = vec![kind, key];
        for member in &members {
            match kind {
                "ZADD" => args.extend(["1", member]),
                "HSET" => args.extend([member, "1"]),
                _ => args.push(member),
            }
        }
        raw.cmd(&args);
        let text = raw.cmd(&["DEBUG", "HTSTATS-KEY", key]).as_text();
        assert!(
            text.starts_with("Hash table 0 stats (main hash table):\n"),
            "{text}"
        );
        assert!(text.contains(" number of elements: 600\n"), "{key}: {text}");
        let size: usize = text
            .split(" table size: ")
            .nth(1)
            .and_then(|rest| rest.split('\n').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(size >= 600, "{key}: {text}");
        assert!(!text.contains("rehashing target"), "{text}");
        let full = raw.cmd(&["DEBUG", "HTSTATS-KEY", key, "FULL"]).as_text();
        assert!(full.contains(" max chain length: 1\n"), "{full}");
    }
    raw.cmd(&["SADD", "small", "a"]);
    assert_eq!(
        raw.cmd(&["DEBUG", "HTSTATS-KEY", "small"]),
        e("ERR The value stored at the specified key is not represented using an hash table")
    );
    assert_eq!(
        raw.cmd(&["DEBUG", "HTSTATS-KEY", "missing"]),
        e("ERR no such key")
    );
    let field = |raw: &mut Raw, name: &str| {
        let info = raw.cmd(&["INFO", "replication"]).as_text();
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}:")).map(str::to_string))
            .unwrap_or_else(|| panic!("{name} in {info}"))
    };
    let before = field(&mut raw, "master_replid");
    assert_eq!(raw.cmd(&["DEBUG", "CHANGE-REPL-ID"]), ok());
    let after = field(&mut raw, "master_replid");
    assert_eq!(after.len(), 40);
    assert_ne!(before, after);
    assert_eq!(field(&mut raw, "master_replid2"), "0".repeat(40));
}

/// LATENCY: events over `latency-monitor-threshold` (LATEST, HISTORY,
/// GRAPH, DOCTOR, RESET), and per-command histograms (LATENCY HISTOGRAM,
/// INFO latencystats) cleared by CONFIG RESETSTAT.
#[test]
fn latency_monitor_and_histograms() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert!(
        raw.cmd(&["LATENCY", "DOCTOR"])
            .as_text()
            .contains("monitor is off")
    );
    assert_eq!(raw.cmd(&["DEBUG", "SLEEP", "0.06"]), ok());
    assert_eq!(
        raw.cmd(&["LATENCY", "LATEST"]),
        Reply::Array(vec![]),
        "off by default"
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "50"]),
        ok()
    );
    assert_eq!(
        raw.cmd(&["DEBUG", "SLEEP", "0.01"]),
        ok(),
        "under the threshold"
    );
    assert_eq!(raw.cmd(&["LATENCY", "LATEST"]), Reply::Array(vec![]));
    assert_eq!(raw.cmd(&["DEBUG", "SLEEP", "0.08"]), ok());
    let latest = raw.cmd(&["LATENCY", "LATEST"]);
    let latest = latest.as_array();
    assert_eq!(latest.len(), 1, "{latest:?}");
    let event = latest[0].as_array();
    assert_eq!(event[0], b("command"));
    assert!((80..200).contains(&event[2].as_int()), "{event:?}");
    assert_eq!(event[2], event[3], "the worst so far");
    let history = raw.cmd(&["LATENCY", "HISTORY", "command"]);
    assert_eq!(history.as_array().len(), 1);
    assert_eq!(history.as_array()[0].as_array()[0], event[1]);
    let graph = raw.cmd(&["LATENCY", "GRAPH", "command"]).as_text();
    assert!(graph.starts_with("command - high "), "{graph}");
    assert_eq!(
        raw.cmd(&["LATENCY", "GRAPH", "nosuch"]),
        e("ERR No samples available for event 'nosuch'")
    );
    let doctor = raw.cmd(&["LATENCY", "DOCTOR"]).as_text();
    assert!(doctor.contains("command: 1 latency spikes"), "{doctor}");
    assert_eq!(raw.cmd(&["LATENCY", "RESET", "nosuch"]), i(0));
    assert_eq!(raw.cmd(&["LATENCY", "RESET"]), i(1));
    assert_eq!(raw.cmd(&["LATENCY", "LATEST"]), Reply::Array(vec![]));

    assert_eq!(raw.cmd(&["CONFIG", "RESETSTAT"]), ok());
    for _ in 0..3 {
        assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
    }
    let histograms = raw.cmd(&["LATENCY", "HISTOGRAM", "set", "get", "nosuch"]);
    let histograms = histograms.as_array();
    assert_eq!(histograms.len(), 2, "only SET was called: {histograms:?}");
    assert_eq!(histograms[0], b("set"));
    let fields = histograms[1].as_array();
    assert_eq!(&fields[..2], &[b("calls"), i(3)]);
    assert_eq!(fields[2], b("histogram_usec"));
    let buckets = fields[3].as_array();
    // Cumulative counts at growing µs edges, ending at every call.
    assert_eq!(buckets.last(), Some(&i(3)));
    let info = raw.cmd(&["INFO", "latencystats"]).as_text();
    let line = info_field(&info, "latency_percentiles_usec_set");
    assert!(
        line.starts_with("p50=") && line.contains(",p99=") && line.contains(",p99.9="),
        "{line}"
    );
    assert!(
        !raw.cmd(&["INFO"]).as_text().contains("latencystats"),
        "not a default section"
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "latency-tracking-info-percentiles", "90"]),
        ok()
    );
    let info = raw.cmd(&["INFO", "latencystats"]).as_text();
    assert!(info_field(&info, "latency_percentiles_usec_set").starts_with("p90="));
}

/// During CLIENT PAUSE, keys past their deadline read as absent but are
/// not deleted (by reads or the active cycle): `expired_keys` stays; after
/// UNPAUSE the next read deletes them.
#[test]
fn expiry_waits_for_the_end_of_a_client_pause() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let expired = |raw: &mut Raw| -> u64 {
        info_field(&raw.cmd(&["INFO", "stats"]).as_text(), "expired_keys")
            .parse()
            .unwrap()
    };
    let before = expired(&mut raw);
    assert_eq!(raw.cmd(&["MULTI"]), ok());
    assert_eq!(
        raw.cmd(&["SET", "k", "v", "PX", "20"]),
        Reply::simple("QUEUED")
    );
    assert_eq!(
        raw.cmd(&["CLIENT", "PAUSE", "50000", "WRITE"]),
        Reply::simple("QUEUED")
    );
    assert_eq!(raw.cmd(&["EXEC"]).as_array().len(), 2);
    wait_until("the key to read as expired", || {
        raw.cmd(&["GET", "k"]) == Reply::NullBulk
    });
    // Several cron cycles: the active cycle deletes nothing either.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(expired(&mut raw), before);
    assert_eq!(raw.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(raw.cmd(&["GET", "k"]), Reply::NullBulk);
    assert_eq!(expired(&mut raw), before + 1);
}

/// DEBUG RELOAD writes a checkpoint and rebuilds every value as loading
/// does: data and deadlines unchanged, encodings chosen afresh (a set
/// grown past its compact limit and shrunk back becomes compact again, as
/// in Redis), WATCHed keys touched; the data survives `kill -9` after it.
#[test]
fn debug_reload_rebuilds_values_as_a_load_would() {
    let server = TestServer::start();
    let mut r = server.raw();
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(members.iter().map(String::as_str));
    r.cmd(&sadd);
    assert_eq!(r.cmd(&["OBJECT", "ENCODING", "set"]), b("hashtable"));
    let mut srem = vec!["SREM", "set"];
    srem.extend(members[3..].iter().map(String::as_str));
    r.cmd(&srem);
    assert_eq!(r.cmd(&["OBJECT", "ENCODING", "set"]), b("hashtable"));
    r.cmd(&["SET", "s", "v", "EX", "1000"]);
    r.cmd(&["RPUSH", "l", "a", "b"]);
    r.cmd(&["HSET", "h", "f", "1"]);
    let mut watcher = server.raw();
    assert_eq!(watcher.cmd(&["WATCH", "l"]), ok());
    let saves = info_u64(&mut server.client(), "persistence", "rdb_saves");
    assert_eq!(r.cmd(&["DEBUG", "RELOAD"]), ok());
    assert_eq!(
        info_u64(&mut server.client(), "persistence", "rdb_saves"),
        saves + 1
    );
    assert_eq!(r.cmd(&["OBJECT", "ENCODING", "set"]), b("listpack"));
    assert_eq!(r.cmd(&["SCARD", "set"]), Reply::Int(3));
    assert_eq!(r.cmd(&["GET", "s"]), b("v"));
    assert!(r.cmd(&["TTL", "s"]).as_int() > 990);
    assert_eq!(
        r.cmd(&["LRANGE", "l", "0", "-1"]),
        Reply::Array(vec![b("a"), b("b")])
    );
    assert_eq!(watcher.cmd(&["MULTI"]), ok());
    watcher.cmd(&["GET", "l"]);
    assert_eq!(watcher.cmd(&["EXEC"]), Reply::NullArray);
    assert_eq!(r.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), ok());
    // NOFLUSH alone would load every key on top of itself: refused, as
    // in Redis; with MERGE it is a reload.
    assert_eq!(
        r.cmd(&["DEBUG", "RELOAD", "NOFLUSH", "NOSAVE"]),
        Reply::err("ERR Error trying to load the RDB dump, check server logs.")
    );
    assert_eq!(r.cmd(&["DEBUG", "RELOAD", "NOFLUSH", "MERGE"]), ok());
    assert_eq!(
        r.cmd(&["DEBUG", "RELOAD", "BOGUS"]),
        Reply::err("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut r = server.raw();
    assert_eq!(r.cmd(&["SCARD", "set"]), Reply::Int(3));
    assert_eq!(r.cmd(&["HGET", "h", "f"]), b("1"));
    assert!(r.cmd(&["TTL", "s"]).as_int() > 990);
}

/// CLIENT LIST and CLIENT INFO as Redis 7.4 writes them: `watch=` counts
/// the keys under WATCH, and the caller's own request still counts in
/// `qbuf` (26 bytes for `CLIENT LIST` in RESP) and its arguments in
/// `argv-mem`, as in Redis' introspection tests.
#[test]
fn client_list_counts_watched_keys_and_the_callers_request() {
    let server = TestServer::start();
    let mut con = server.raw();
    let line = con.cmd(&["CLIENT", "LIST"]).as_text();
    assert!(
        line.contains(" multi=-1 watch=0 qbuf=26 qbuf-free=0 argv-mem=10 "),
        "{line}"
    );
    assert_eq!(con.cmd(&["WATCH", "a", "b", "a"]), ok());
    let line = con.cmd(&["CLIENT", "INFO"]).as_text();
    assert!(line.contains(" watch=2 qbuf=26 "), "{line}");
    let mut other = server.raw();
    let list = other.cmd(&["CLIENT", "LIST"]).as_text();
    assert!(
        list.lines().any(|l| l.contains(" watch=2 qbuf=0 ")),
        "{list}"
    );
    assert_eq!(con.cmd(&["MULTI"]), ok());
    assert_eq!(con.cmd(&["EXEC"]), Reply::Array(vec![]));
    let list = other.cmd(&["CLIENT", "LIST"]).as_text();
    assert!(!list.contains(" watch=2 "), "{list}");
    assert_eq!(
        con.cmd(&["CLIENT", "KILL", "MAXAGE", "-1"]),
        e("ERR maxage should be greater than 0")
    );
    assert_eq!(
        con.cmd(&["CLIENT", "KILL", "MAXAGE", "x"]),
        e("ERR maxage is not an integer or out of range")
    );
}

/// CONFIG GET as Redis 7.4: a pattern leaves out the options kept for
/// tests (`key-load-delay`), which only their exact name shows; an old
/// name (`slaveof`) is an option of its own. A percentage over 100 for
/// `maxmemory-clients` has Redis' message and changes nothing.
#[test]
fn config_get_hides_test_options_and_shows_old_names() {
    let server = TestServer::start();
    let mut con = server.raw();
    let all = con.cmd(&["CONFIG", "GET", "*"]);
    let names: Vec<String> = all
        .as_array()
        .iter()
        .step_by(2)
        .map(Reply::as_text)
        .collect();
    assert!(!names.iter().any(|n| n == "key-load-delay"), "{names:?}");
    assert!(names.iter().any(|n| n == "slaveof") && names.iter().any(|n| n == "replicaof"));
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "key-load-delay"]),
        Reply::Array(vec![b("key-load-delay"), b("0")])
    );
    let of = con.cmd(&["CONFIG", "GET", "*of"]);
    let names: Vec<String> = of
        .as_array()
        .iter()
        .step_by(2)
        .map(Reply::as_text)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(
        con.cmd(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "maxmemory-clients",
            "200%"
        ]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be less or equal to 100"
        )
    );
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "maxmemory"]),
        Reply::Array(vec![b("maxmemory"), b("0")])
    );
}

/// DEBUG DIGEST-VALUE, as Redis' own tests compare a COPY with its
/// source: the same digest for equal values whatever their history (a
/// hash past its listpack limit keeps its fields in table order), zeros
/// for a missing key, another digest once a value or deadline changes.
#[test]
fn debug_digest_value_is_equal_for_equal_values() {
    let server = TestServer::start();
    let mut raw = server.raw();
    // A table from the first field on, filled one field at a time (as
    // Redis' COPY test does).
    let set_entries = ["CONFIG", "SET", "hash-max-listpack-entries", "0"];
    assert_eq!(raw.cmd(&set_entries), Reply::simple("OK"));
    for n in 0..64u64 {
        let field = format!("{:x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        assert_eq!(
            raw.cmd(&["HSET", "h", &field, &n.to_string()]),
            Reply::Int(1)
        );
    }
    assert_eq!(
        raw.cmd(&["OBJECT", "ENCODING", "h"]),
        Reply::Bulk(b"hashtable".to_vec())
    );
    assert_eq!(raw.cmd(&["COPY", "h", "h2"]), Reply::Int(1));
    assert_eq!(raw.cmd(&["SADD", "s", "b", "a", "c"]), Reply::Int(3));
    assert_eq!(raw.cmd(&["SADD", "s2", "c", "b", "a"]), Reply::Int(3));
    let digests = |raw: &mut Raw, keys: &[&str]| -> Vec<String> {
        let mut args = vec!["DEBUG", "DIGEST-VALUE"];
        args.extend_from_slice(keys);
        raw.cmd(&args)
            .as_array()
            .iter()
            .map(Reply::as_text)
            .collect()
    };
    let found = digests(&mut raw, &["h", "h2", "s", "s2", "missing"]);
    assert_eq!(found[0], found[1], "a hash and its copy");
    assert_eq!(found[2], found[3], "sets of the same members");
    assert_ne!(found[0], found[2]);
    assert_eq!(found[4], "0".repeat(40));
    assert_eq!(raw.cmd(&["PEXPIRE", "h2", "100000"]), Reply::Int(1));
    let after = digests(&mut raw, &["h", "h2"]);
    assert_ne!(after[0], after[1], "a deadline counts");
}

/// The INFO fields of Redis 7 that Strata does not give, each for a reason
/// docs/compatibility.md states. Every other field of Redis 7.0.15's `INFO
/// everything` is in Strata's, in the same section: what monitoring
/// (redis_exporter, Datadog, …) reads is there under Redis' name.
const INFO_FIELDS_NOT_GIVEN: &[&str] = &[
    // Built by rustc; no Redis build.
    "gcc_version",
    "redis_build_id",
    // Not measured yet.
    "current_eviction_exceeded_time",
    "total_eviction_exceeded_time",
    "expire_cycle_cpu_milliseconds",
    "instantaneous_input_repl_kbps",
    "instantaneous_output_repl_kbps",
    "total_net_repl_input_bytes",
    "total_net_repl_output_bytes",
    // Redis' mechanisms Strata does not have: sampled active expiry with
    // a time cap, opt-in deep sanitization of payloads (Strata checks
    // every one), reply buffers that grow and shrink, errors from a
    // primary or an AOF, expiring keys written on a replica, a main
    // thread that runs commands.
    "expired_stale_perc",
    "expired_time_cap_reached_count",
    "dump_payload_sanitizations",
    "reply_buffer_expands",
    "reply_buffer_shrinks",
    "unexpected_error_replies",
    "slave_expires_tracked_keys",
    "used_cpu_sys_main_thread",
    "used_cpu_user_main_thread",
];

/// (section, field) of every field of an INFO reply.
fn info_fields(text: &str) -> std::collections::BTreeSet<(String, String)> {
    let mut section = String::new();
    let mut fields = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("# ") {
            section = title.to_owned();
        } else if let Some((name, _)) = line.split_once(':') {
            // Per-command and per-error lines differ with what ran.
            if !["Commandstats", "Errorstats", "Latencystats", "Keyspace"]
                .contains(&section.as_str())
            {
                fields.insert((section.clone(), name.to_owned()));
            }
        }
    }
    fields
}

#[test]
fn info_has_every_field_of_redis_7_in_its_section_but_the_documented_ones() {
    let Some(redis) = RedisServer::start_unless_missing("the INFO field comparison") else {
        return;
    };
    let server = TestServer::start();
    let theirs = Raw::connect(redis.port)
        .cmd(&["INFO", "everything"])
        .as_text();
    let ours = server.raw().cmd(&["INFO", "everything"]).as_text();
    let section_titles = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# ").map(str::to_owned))
            .collect()
    };
    let our_sections = section_titles(&ours);
    for title in section_titles(&theirs) {
        assert!(
            our_sections.contains(&title),
            "section {title} missing: {ours}"
        );
    }
    let ours = info_fields(&ours);
    let theirs = info_fields(&theirs);
    let mut missing: Vec<&str> = theirs
        .iter()
        .filter(|field| !ours.contains(*field))
        .map(|(_, name)| name.as_str())
        .collect();
    missing.sort_unstable();
    let mut expected: Vec<&str> = INFO_FIELDS_NOT_GIVEN.to_vec();
    expected.sort_unstable();
    assert_eq!(
        missing, expected,
        "Redis' fields Strata lacks (left) against the documented list (right)"
    );
}

/// MODULE where `enable-module-command` allows it: Strata loads no module,
/// so the list is empty and a load fails as Redis' load of a library that
/// is not there does (Redis 7.0.15 answers these same texts).
#[test]
fn module_commands_answer_that_no_module_is_loaded() {
    let server = TestServer::start_with(&["--enable-module-command", "yes"]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["MODULE", "LIST"]), Reply::Array(vec![]));
    assert_eq!(
        raw.cmd(&["MODULE", "LOAD", "/nonexistent/module.so"]),
        e("ERR Error loading the extension. Please check the server logs.")
    );
    assert_eq!(
        raw.cmd(&["MODULE", "UNLOAD", "m"]),
        e("ERR Error unloading module: no such module with that name")
    );
    server.wait_for_log("Module /nonexistent/module.so failed to load");
}

/// DEBUG DIGEST: forty zeros for an empty dataset; equal for equal
/// datasets whatever order they were written in, and after a restart;
/// different after any change (a value, a deadline, a database).
#[test]
fn debug_digest_fingerprints_the_whole_dataset() {
    const EMPTY: &str = "0000000000000000000000000000000000000000";
    let one = TestServer::start();
    let two = TestServer::start();
    let (mut a, mut b) = (one.raw(), two.raw());
    assert_eq!(a.cmd(&["DEBUG", "DIGEST"]), Reply::simple(EMPTY));
    for (raw, order) in [(&mut a, ["k1", "k2"]), (&mut b, ["k2", "k1"])] {
        for key in order {
            assert_eq!(raw.cmd(&["SET", key, key]), ok());
        }
        assert_eq!(raw.cmd(&["RPUSH", "list", "x", "y"]), i(2));
    }
    let digest = a.cmd(&["DEBUG", "DIGEST"]);
    assert_ne!(digest, Reply::simple(EMPTY));
    assert_eq!(
        b.cmd(&["DEBUG", "DIGEST"]),
        digest,
        "write order does not count"
    );
    assert_eq!(b.cmd(&["EXPIRE", "k1", "1000"]), i(1));
    assert_ne!(b.cmd(&["DEBUG", "DIGEST"]), digest, "a deadline counts");
    assert_eq!(b.cmd(&["PERSIST", "k1"]), i(1));
    assert_eq!(b.cmd(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(b.cmd(&["MOVE", "k1", "3"]), i(1));
    assert_ne!(b.cmd(&["DEBUG", "DIGEST"]), digest, "the database counts");
    drop(a);
    let one = TestServer::spawn(one.kill9(), &[], None, READY);
    assert_eq!(one.raw().cmd(&["DEBUG", "DIGEST"]), digest, "after kill -9");
}

/// As Redis 7.4.1's unit/slowlog has it: CONFIG SET masteruser is
/// redacted like the other secrets, so are ACL SETUSER, GETUSER and
/// DELUSER's arguments, and whether a CONFIG SET of
/// slowlog-log-slower-than is logged depends on the value it leaves (off:
/// not logged; on: logged).
#[test]
fn slowlog_redacts_masteruser_and_judges_config_set_by_its_result() {
    let server = TestServer::start();
    let mut con = server.raw();
    assert_eq!(con.cmd(&["SLOWLOG", "RESET"]), ok());
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        ok()
    );
    assert_eq!(con.cmd(&["CONFIG", "SET", "masteruser", ""]), ok());
    assert_eq!(con.cmd(&["ACL", "SETUSER", "u", "on"]), ok());
    assert!(!matches!(
        con.cmd(&["ACL", "GETUSER", "u"]),
        Reply::Error(_)
    ));
    assert_eq!(con.cmd(&["ACL", "DELUSER", "u", "nobody"]), Reply::Int(1));
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        ok()
    );
    let logged = entries(&mut con, "-1");
    let commands: Vec<&[String]> = logged.iter().map(|e| &e.2[..]).collect();
    assert_eq!(
        commands,
        [
            &["ACL", "DELUSER", "(redacted)", "(redacted)"][..],
            &["ACL", "GETUSER", "(redacted)"][..],
            &["ACL", "SETUSER", "(redacted)", "(redacted)"][..],
            &["CONFIG", "SET", "masteruser", "(redacted)"][..],
            &["CONFIG", "SET", "slowlog-log-slower-than", "0"][..],
        ],
        "{logged:?}"
    );
}

/// DEBUG POPULATE refuses a value size beyond `proto-max-bulk-len` (a
/// value no client could have written) and adds nothing.
#[test]
fn debug_populate_refuses_values_beyond_the_bulk_limit() {
    let server = TestServer::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["DEBUG", "POPULATE", "3", "big", "2000000"]),
        e("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_eq!(raw.cmd(&["DBSIZE"]), i(0));
    assert_eq!(raw.cmd(&["DEBUG", "POPULATE", "3", "ok", "1000"]), ok());
    assert_eq!(raw.cmd(&["STRLEN", "ok:2"]), i(1000));
}
