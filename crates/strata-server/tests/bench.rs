//! strata-bench against real servers: the real strata-server binary, and
//! Debian's redis-server when it is installed (CI installs it).

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, Reply, TestServer, b, bench, i};

/// Prefills keys 0..=999, then reads 0..=1999 exactly once: exactly 1000
/// hits and 1000 misses, on any correct server.
fn check_hits_and_misses(port: u16) {
    let fill = bench(
        port,
        &[
            "-t",
            "1",
            "-c",
            "4",
            "-n",
            "allkeys",
            "--key-maximum=999",
            "--key-pattern=P:P",
            "--ratio=1:0",
            "-d",
            "100",
        ],
    );
    let sets = &fill.ops[0];
    assert_eq!((sets.ops, sets.errors), (1000, 0));
    let read = bench(
        port,
        &[
            "-t",
            "2",
            "-c",
            "3",
            "-n",
            "allkeys",
            "--key-maximum=1999",
            "--key-pattern=S:S",
            "--ratio=0:1",
        ],
    );
    let gets = &read.ops[1];
    assert_eq!(
        (gets.ops, gets.hits, gets.misses, gets.errors),
        (2000, 1000, 1000, 0)
    );
    assert!(gets.latency.len() == 2000 && gets.latency.max() > 0);
}

#[test]
fn reports_hits_and_misses_after_a_known_prefill() {
    let server = TestServer::start();
    check_hits_and_misses(server.port);
    let mut r = server.raw();
    assert_eq!(r.cmd(&["DBSIZE"]), i(1000));
    assert_eq!(r.cmd(&["STRLEN", "memtier-999"]), i(100));
}

#[test]
fn reports_hits_and_misses_against_redis_server_when_installed() {
    let Some(redis) = RedisServer::start_unless_missing("the hits-and-misses comparison") else {
        return;
    };
    check_hits_and_misses(redis.port);
}

#[test]
fn ratio_auth_select_and_resp3() {
    let server = TestServer::start_with(&["--requirepass", "pw"]);
    let result = bench(
        server.port,
        &[
            "-t",
            "2",
            "-c",
            "2",
            "-n",
            "1000",
            "--ratio=1:4",
            "-a",
            "pw",
            "--protocol=resp3",
            "--select-db=3",
            "--key-maximum=99",
        ],
    );
    let (sets, gets) = (&result.ops[0], &result.ops[1]);
    assert_eq!(sets.ops + gets.ops, 4000);
    assert_eq!(
        (sets.ops, gets.ops),
        (800, 3200),
        "1:4 over 1000 requests per client"
    );
    assert_eq!(sets.errors + gets.errors, 0);
    assert_eq!(gets.hits + gets.misses, gets.ops);
    let mut r = server.raw();
    r.cmd(&["AUTH", "pw"]);
    r.cmd(&["SELECT", "3"]);
    assert!(r.cmd(&["DBSIZE"]).as_int() > 0);
    r.cmd(&["SELECT", "0"]);
    assert_eq!(r.cmd(&["DBSIZE"]), i(0));
}

#[test]
fn error_replies_are_counted_not_treated_as_hits() {
    let server = TestServer::start();
    let mut r = server.raw();
    r.cmd(&["SET", "memtier-1", "not a number"]);
    let result = bench(
        server.port,
        &[
            "-t",
            "1",
            "-c",
            "1",
            "-n",
            "50",
            "--command=INCR __key__",
            "--command-key-pattern=S",
            "--key-minimum=1",
            "--key-maximum=1",
        ],
    );
    let incr = &result.ops[0];
    assert_eq!(incr.name, "INCR");
    assert_eq!((incr.ops, incr.errors), (50, 50));
    assert_eq!(result.errors.get("ERR"), Some(&50));
    assert_eq!(r.cmd(&["GET", "memtier-1"]), b("not a number"));
    // __data__ is substituted too.
    let result = bench(
        server.port,
        &[
            "-t",
            "1",
            "-c",
            "1",
            "-n",
            "10",
            "--command=SET __key__ __data__",
            "--command-key-pattern=P",
            "-d",
            "7",
            "--key-prefix=cmd:",
            "--key-maximum=9",
        ],
    );
    assert_eq!((result.ops[0].ops, result.ops[0].errors), (10, 0));
    assert_eq!(r.cmd(&["GET", "cmd:3"]), b("xxxxxxx"));
}

#[test]
fn open_loop_latency_includes_a_server_stall() {
    let server = TestServer::start();
    let port = server.port;
    let pauser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        let mut r = common::Raw::connect(port);
        let started = Instant::now();
        assert_eq!(r.cmd(&["DEBUG", "SLEEP", "0.5"]), Reply::simple("OK"));
        started.elapsed()
    });
    let result = bench(
        server.port,
        &[
            "-t",
            "1",
            "-c",
            "1",
            "--rate=400",
            "--test-time=2",
            "--ratio=1:1",
            "--key-maximum=100",
        ],
    );
    let stall = pauser.join().unwrap();
    assert!(
        stall >= Duration::from_millis(450),
        "the server paused for {stall:?}"
    );
    let totals = result.totals();
    let max_ms = totals.latency.max() as f64 / 1000.0;
    assert!(
        max_ms >= 400.0,
        "max latency {max_ms} ms does not show the 500 ms stall"
    );
    // Requests that were due during the stall count from their due time,
    // so many of them, not one, carry the stall.
    let slow = totals.latency.count_between(100_000, u64::MAX);
    assert!(
        slow >= 50,
        "only {slow} requests saw the stall at 400 req/s"
    );
    // The rate was held: about 400/s for 2 s (a slow, loaded machine may
    // start late or stop before the last due requests; never faster).
    assert!(
        (550..=810).contains(&totals.ops),
        "sent {} requests",
        totals.ops
    );
}

#[test]
fn expiry_range_and_out_file() {
    let server = TestServer::start();
    let out = server.dir.join("report.txt");
    let out_text = out.display().to_string();
    let result = bench(
        server.port,
        &[
            "-t",
            "1",
            "-c",
            "2",
            "-n",
            "allkeys",
            "--key-maximum=99",
            "--key-pattern=P:P",
            "--ratio=1:0",
            "--expiry-range=100-200",
            "--out-file",
            &out_text,
        ],
    );
    assert_eq!((result.ops[0].ops, result.ops[0].errors), (100, 0));
    let mut r = server.raw();
    for key in ["memtier-0", "memtier-50", "memtier-99"] {
        let ttl = r.cmd(&["TTL", key]).as_int();
        assert!((99..=200).contains(&ttl), "{key} ttl {ttl}");
    }
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(
        report.contains("ALL STATS") && report.contains("Totals"),
        "{report}"
    );
}
