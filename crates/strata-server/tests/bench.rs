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

/// memtier's `--uri` (credentials, port and database in one) and
/// `--ipv4` reach the server as -a, -p and --select-db do.
#[test]
fn a_memtier_uri_sets_credentials_port_and_database() {
    let server = TestServer::start_with(&["--requirepass", "pw"]);
    let uri = format!("redis://:pw@localhost:{}/5", server.port);
    let args = [
        "-p", "1", "--uri", &uri, "--ipv4", "-t", "1", "-c", "1", "-n", "100",
    ];
    let config = strata_bench::config::parse(&args).unwrap();
    let result = strata_bench::run_benchmark(config, false)
        .unwrap()
        .pop()
        .unwrap();
    let (sets, gets) = (&result.ops[0], &result.ops[1]);
    assert_eq!((sets.ops + gets.ops, sets.errors + gets.errors), (100, 0));
    let mut r = server.raw();
    r.cmd(&["AUTH", "pw"]);
    r.cmd(&["SELECT", "5"]);
    assert!(
        r.cmd(&["DBSIZE"]).as_int() > 0,
        "the SETs went to database 5"
    );
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

/// The JSON file has memtier_benchmark 2.x's layout (its keys, from its
/// source: `config_print_to_json`, `run information`, `result_print_to_json`,
/// `Runtime`), so tools that read memtier's files read strata-bench's;
/// Strata's own fields are under `strata`.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn json_out_file_has_memtiers_layout() {
    let server = TestServer::start();
    let path = server.dir.join("result.json");
    let path_text = path.display().to_string();
    let result = bench(
        server.port,
        &[
            "-t",
            "2",
            "-c",
            "3",
            "-n",
            "100",
            "--ratio=1:1",
            "--json-out-file",
            &path_text,
        ],
    );
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let keys = |value: &serde_json::Value| -> Vec<String> {
        value
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect()
    };
    let mut top = keys(&document);
    top.sort();
    assert_eq!(
        top,
        ["ALL STATS", "configuration", "run information", "strata"]
    );
    let configuration = &document["configuration"];
    for key in [
        "server",
        "port",
        "uri",
        "unix socket",
        "address family",
        "protocol",
        "out_file",
        "client_stats",
        "run_count",
        "debug",
        "requests",
        "rate_limit",
        "clients",
        "threads",
        "test_time",
        "ratio",
        "pipeline",
        "data_size",
        "data_offset",
        "random_data",
        "data_size_range",
        "data_size_list",
        "data_size_pattern",
        "expiry_range",
        "data_import",
        "data_verify",
        "verify_only",
        "generate_keys",
        "key_prefix",
        "key_minimum",
        "key_maximum",
        "key_pattern",
        "key_stddev",
        "key_median",
        "key_zipf_exp",
        "reconnect_interval",
        "connection_timeout",
        "multi_key_get",
        "authenticate",
        "select-db",
        "no-expiry",
        "wait-ratio",
        "num-slaves",
        "wait-timeout",
        "print-all-runs",
    ] {
        assert!(configuration.get(key).is_some(), "configuration.{key}");
    }
    assert_eq!(configuration["threads"], 2);
    assert_eq!(configuration["ratio"], "1:1");
    assert_eq!(configuration["key_pattern"], "R:R");
    let information = &document["run information"];
    assert_eq!(information["Threads"], 2);
    assert_eq!(information["Connections per thread"], 3);
    assert_eq!(information["Requests per client"], 100);
    assert_eq!(information["Format version"], 2);
    let stats = &document["ALL STATS"];
    let mut names = keys(stats);
    names.sort();
    assert_eq!(names, ["Gets", "Runtime", "Sets", "Totals", "Waits"]);
    let runtime = &stats["Runtime"];
    assert_eq!(runtime["Time unit"], "MILLISECONDS");
    assert!(runtime["Finish time"].as_u64() >= runtime["Start time"].as_u64());
    for op in ["Sets", "Gets", "Waits", "Totals"] {
        for field in [
            "Count",
            "Ops/sec",
            "Hits/sec",
            "Misses/sec",
            "Connection Errors/sec",
            "Connection Errors",
            "Latency",
            "Average Latency",
            "Accumulated Latency",
            "Min Latency",
            "Max Latency",
            "KB/sec",
            "KB/sec RX/TX",
            "KB/sec RX",
            "KB/sec TX",
            "Time-Serie",
            "Percentile Latencies",
        ] {
            assert!(stats[op].get(field).is_some(), "{op}.{field}");
        }
    }
    let totals = &stats["Totals"];
    assert_eq!(totals["Count"], 600);
    assert_eq!(totals["Count"].as_u64(), Some(result.totals().ops));
    assert_eq!(stats["Waits"]["Count"], 0);
    let sets = stats["Sets"]["Count"].as_u64().unwrap();
    let gets = stats["Gets"]["Count"].as_u64().unwrap();
    assert_eq!(sets + gets, 600);
    assert!(totals["Ops/sec"].as_f64().unwrap() > 0.0);
    let rx = totals["KB/sec RX"].as_f64().unwrap();
    let tx = totals["KB/sec TX"].as_f64().unwrap();
    assert!(rx > 0.0 && tx > 0.0);
    assert!((totals["KB/sec"].as_f64().unwrap() - (rx + tx)).abs() < 1e-6 * (rx + tx) + 1e-9);
    // memtier writes `p%.3f` into 7 bytes: six characters are kept.
    for p in ["p50.00", "p99.00", "p99.90"] {
        assert!(
            totals["Percentile Latencies"][p].as_f64().unwrap() > 0.0,
            "{p}"
        );
    }
    // Strata's full runs, which `strata-bench report` plots.
    assert_eq!(document["strata"]["runs"].as_array().unwrap().len(), 1);
    let series = strata_bench::plot::series_from_json("x", &document).unwrap();
    assert_eq!(series.len(), 1);
}

/// memtier's per-second entries carry the bytes each second received
/// and sent and the second's latency percentiles, and `rate_limit` is the
/// --rate-limiting asked for.
#[test]
fn json_seconds_carry_bytes_and_the_rate_limit_is_kept() {
    let server = TestServer::start();
    let path = server.dir.join("seconds.json");
    let path_text = path.display().to_string();
    bench(
        server.port,
        &[
            "-t",
            "1",
            "-c",
            "2",
            "--test-time",
            "2",
            "--rate-limiting",
            "200",
            "--json-out-file",
            &path_text,
        ],
    );
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(document["configuration"]["rate_limit"], 200);
    let seconds = document["ALL STATS"]["Totals"]["Time-Serie"]
        .as_object()
        .expect("a per-second series");
    assert!(!seconds.is_empty());
    for (second, entry) in seconds {
        assert!(entry["Count"].as_u64().unwrap() > 0, "second {second}");
        assert!(
            entry["Bytes RX"].as_u64().unwrap() > 0,
            "second {second}: {entry}"
        );
        assert!(
            entry["Bytes TX"].as_u64().unwrap() > 0,
            "second {second}: {entry}"
        );
        let min = entry["Min Latency"].as_f64().unwrap();
        let max = entry["Max Latency"].as_f64().unwrap();
        assert!(0.0 < min && min <= max, "second {second}: {entry}");
        assert!(entry["Accumulated Latency"].as_u64().is_some(), "{entry}");
        // memtier 2.x's per-second percentiles, `p%.2f` in 7 bytes.
        let p50 = entry["p50.00"].as_f64().unwrap();
        let p99 = entry["p99.00"].as_f64().unwrap();
        let p999 = entry["p99.90"].as_f64().unwrap();
        assert!(
            min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max * 1.001,
            "second {second}: {entry}"
        );
    }
    // Strata's own runs carry them too, and the plot draws them.
    let run = &document["strata"]["runs"][0]["Time series"][0];
    assert!(
        run["percentile_latencies_ms"]["p99.00"].as_f64().unwrap() > 0.0,
        "{run}"
    );
    let series = strata_bench::plot::series_from_json("x", &document).unwrap();
    assert!(
        series[0].p99_per_sec.iter().all(Option::is_some),
        "{series:?}"
    );
}

/// `-x 3` reports as memtier does: the best and worst runs by requests
/// per second and the runs aggregated, in the text and as the JSON's
/// sections; `--print-all-runs` adds each run first.
#[test]
fn run_count_reports_best_worst_and_aggregated_runs() {
    let server = TestServer::start();
    let out = server.dir.join("report.txt");
    let json = server.dir.join("runs.json");
    let (out_text, json_text) = (out.display().to_string(), json.display().to_string());
    let port = server.port.to_string();
    let args = [
        "-s",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "-c",
        "2",
        "-n",
        "200",
        "-x",
        "3",
        "--print-all-runs",
        "--hide-histogram",
        "-o",
        &out_text,
        "--json-out-file",
        &json_text,
    ];
    let config = strata_bench::config::parse(&args).unwrap();
    let results = strata_bench::run_benchmark(config, false).unwrap();
    assert_eq!(results.len(), 3);
    let report = std::fs::read_to_string(&out).unwrap();
    let titles = [
        "RUN #1 RESULTS",
        "RUN #2 RESULTS",
        "RUN #3 RESULTS",
        "BEST RUN RESULTS",
        "WORST RUN RESULTS",
        "AGGREGATED AVERAGE RESULTS (3 runs)",
    ];
    let mut at = 0;
    for title in titles {
        let found = report[at..].find(&format!("\n{title}\n"));
        at += found.unwrap_or_else(|| panic!("{title} missing or out of order:\n{report}"));
    }
    assert!(!report.contains("ALL STATS"), "{report}");
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rates: Vec<f64> = results.iter().map(|r| r.ops_per_sec()).collect();
    let best = rates.iter().copied().fold(f64::MIN, f64::max);
    let section = |title: &str| document[title]["Totals"]["Count"].as_u64();
    assert_eq!(section("AGGREGATED AVERAGE RESULTS (3 runs)"), Some(1200));
    assert_eq!(section("BEST RUN RESULTS"), Some(400));
    let best_rate = document["BEST RUN RESULTS"]["Totals"]["Ops/sec"]
        .as_f64()
        .unwrap();
    assert!(
        (best_rate - best).abs() <= best * 1e-6,
        "{best_rate} vs {rates:?}"
    );
    assert!(section("WORST RUN RESULTS").is_some() && section("RUN #2 RESULTS").is_some());
}

/// Every key path of a JSON document, `/`-joined, with the seconds of a
/// `Time-Serie` written as `*`.
fn key_paths(
    value: &serde_json::Value,
    prefix: &str,
    out: &mut std::collections::BTreeSet<String>,
) {
    if let Some(object) = value.as_object() {
        for (key, child) in object {
            let key = if prefix.ends_with("Time-Serie") {
                "*"
            } else {
                key.as_str()
            };
            let path = format!("{prefix}/{key}");
            out.insert(path.clone());
            key_paths(child, &path, out);
        }
    }
}

/// memtier_benchmark itself and strata-bench on the same short load: every
/// key strata-bench writes outside `strata` is one memtier writes, and the
/// keys memtier writes that strata-bench does not are only the two things
/// docs/strata-bench.md says are not reproduced (the compressed HDR
/// histogram and the per-type `Time-Serie`). memtier is not a Debian
/// package, so the test needs `MEMTIER` (bench/memtier.sh builds one) and
/// is ignored otherwise.
#[test]
#[ignore = "needs memtier_benchmark, which no Debian package has: MEMTIER=/path/to/memtier_benchmark cargo test -p strata-server --test bench -- --ignored"]
fn json_keys_match_memtier_benchmarks_own() {
    let memtier = std::env::var("MEMTIER").expect("MEMTIER=/path/to/memtier_benchmark");
    let server = TestServer::start();
    let load = ["-t", "1", "-c", "2", "--test-time", "2", "--json-out-file"];
    let memtier_path = server.dir.join("memtier.json");
    let status = std::process::Command::new(&memtier)
        .args([
            "-s",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "--hide-histogram",
        ])
        .args(load)
        .arg(&memtier_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{memtier}: {e}"));
    assert!(status.success(), "{memtier}: {status}");
    let strata_path = server.dir.join("strata.json");
    let strata_path_text = strata_path.display().to_string();
    let mut args = load.to_vec();
    args.push(&strata_path_text);
    bench(server.port, &args);
    let documents: Vec<_> = [memtier_path, strata_path]
        .iter()
        .map(|path| {
            let document: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let mut paths = std::collections::BTreeSet::new();
            key_paths(&document, "", &mut paths);
            paths
        })
        .collect();
    let (memtier, strata) = (&documents[0], &documents[1]);
    let ours: Vec<_> = strata
        .iter()
        .filter(|p| !p.starts_with("/strata"))
        .filter(|p| !memtier.contains(*p))
        .collect();
    assert!(
        ours.is_empty(),
        "strata-bench writes keys memtier does not: {ours:#?}"
    );
    let not_reproduced = |path: &str| {
        path.contains("/Histogram log format")
            || path.contains("/Time-Serie/") && !path.starts_with("/ALL STATS/Totals/")
    };
    let missing: Vec<_> = memtier
        .iter()
        .filter(|p| !strata.contains(*p) && !not_reproduced(p))
        .collect();
    assert!(
        missing.is_empty(),
        "memtier writes keys strata-bench does not: {missing:#?}"
    );
    // Each second's percentiles are there in both.
    assert!(
        strata.contains("/ALL STATS/Totals/Time-Serie/*/p99.00"),
        "{strata:#?}"
    );
}
