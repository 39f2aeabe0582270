//! The Prometheus endpoint (`metrics-port`): scraped over HTTP, checked
//! against the text exposition format, and its figures against INFO and
//! the commands run.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;

use common::*;

/// `GET path` on `port`: (status line, body).
fn http_get(port: u16, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("metrics port answers");
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// promlint's unit rules for one metric name: abbreviated units, non-base
/// units and prefixed units, one problem per word.
fn unit_problems(name: &str) -> Vec<&'static str> {
    const ABBREVIATIONS: [&str; 14] = [
        "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d",
    ];
    const UNITS: [&str; 10] = [
        "amperes", "bytes", "celsius", "grams", "joules", "kelvin", "meters", "metres", "seconds",
        "volts",
    ];
    const NOT_BASE_UNITS: [&str; 14] = [
        "minutes",
        "hours",
        "days",
        "weeks",
        "kelvins",
        "fahrenheit",
        "rankine",
        "inches",
        "yards",
        "miles",
        "bits",
        "calories",
        "pounds",
        "ounces",
    ];
    const PREFIXES: [&str; 18] = [
        "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega",
        "mebi", "giga", "gibi", "tera", "tebi", "peta", "pebi",
    ];
    let mut problems = Vec::new();
    for word in name.split('_') {
        if ABBREVIATIONS.contains(&word) {
            problems.push("metric names should not contain abbreviated units");
        }
        if NOT_BASE_UNITS.contains(&word) {
            problems.push("use base unit instead of a non-base one");
        }
        for prefix in PREFIXES {
            if word
                .strip_prefix(prefix)
                .is_some_and(|unit| UNITS.contains(&unit))
            {
                problems.push("use base unit instead of a prefixed one");
            }
        }
    }
    problems
}

/// Prometheus' naming rules, as `promtool check metrics` (Prometheus
/// 2.42's promlint) applies them to every family: a HELP line; counters
/// and only counters end in `_total`; no abbreviated units (`_sec`,
/// `_us`, …) and no non-base units (`milliseconds`, `kilobytes`, …); no
/// type in the name; no `:` and no camelCase; `_bucket`, `_count`, `_sum`
/// and the `le`/`quantile` labels kept for histograms and summaries.
/// Returns each problem as "name: what".
fn promlint(body: &str) -> Vec<String> {
    let camel = |text: &str| {
        text.as_bytes()
            .windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
    };
    let mut helped = std::collections::HashSet::new();
    let mut families: Vec<(String, String)> = Vec::new();
    let mut labels: Vec<(String, String)> = Vec::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split(' ').next().unwrap_or_default().to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.push((name.to_owned(), kind.to_owned()));
        } else if let Some((name, rest)) = line.split_once('{') {
            for pair in rest.split("\",") {
                if let Some((label, _)) = pair.split_once("=\"") {
                    labels.push((name.to_owned(), label.to_owned()));
                }
            }
        }
    }
    let mut problems = Vec::new();
    for (name, kind) in &families {
        let mut problem = |what: &str| problems.push(format!("{name}: {what}"));
        if !helped.contains(name) {
            problem("no help text");
        }
        if kind == "counter" && !name.ends_with("_total") {
            problem("counter metrics should have \"_total\" suffix");
        }
        if kind != "counter" && name.ends_with("_total") {
            problem("non-counter metrics should not have \"_total\" suffix");
        }
        for what in unit_problems(name) {
            problem(what);
        }
        for type_name in ["counter", "gauge", "histogram", "summary", "untyped"] {
            if name.contains(&format!("_{type_name}_")) || name.ends_with(&format!("_{type_name}"))
            {
                problem("metric name should not include its type");
            }
        }
        if name.contains(':') {
            problem("metric names should not contain ':'");
        }
        if camel(name) {
            problem("metric names should be written in 'snake_case' not 'camelCase'");
        }
        if kind != "histogram" && name.ends_with("_bucket") {
            problem("non-histogram metrics should not have \"_bucket\" suffix");
        }
        if kind != "histogram"
            && kind != "summary"
            && (name.ends_with("_count") || name.ends_with("_sum"))
        {
            problem(
                "non-histogram and non-summary metrics should not have \"_count\" or \"_sum\" suffix",
            );
        }
    }
    for (series, label) in &labels {
        let family = families
            .iter()
            .find(|(name, kind)| {
                series == name
                    || kind == "histogram"
                        && ["_bucket", "_count", "_sum"]
                            .iter()
                            .any(|suffix| series.strip_suffix(suffix) == Some(name.as_str()))
            })
            .map_or("", |(_, kind)| kind.as_str());
        if camel(label) {
            problems.push(format!(
                "{series}: label names should be written in 'snake_case'"
            ));
        }
        if label == "le" && family != "histogram" {
            problems.push(format!(
                "{series}: non-histogram metrics should not have \"le\" label"
            ));
        }
        if label == "quantile" && family != "summary" {
            problems.push(format!(
                "{series}: non-summary metrics should not have \"quantile\" label"
            ));
        }
    }
    problems
}

/// The naming rules catch what promtool does.
#[test]
fn promlint_finds_what_promtool_finds() {
    let body = "# HELP ok_seconds_total x\n# TYPE ok_seconds_total counter\nok_seconds_total 1\n\
                # TYPE save_time_sec gauge\nsave_time_sec 1\n\
                # HELP wait_us_total x\n# TYPE wait_us_total gauge\nwait_us_total 1\n\
                # HELP calls x\n# TYPE calls counter\ncalls{cmdName=\"x\",le=\"1\"} 1\n\
                # HELP delay_milliseconds x\n# TYPE delay_milliseconds gauge\ndelay_milliseconds 1\n\
                # HELP latency x\n# TYPE latency histogram\nlatency_bucket{le=\"+Inf\"} 1\nlatency_sum 1\nlatency_count 1\n\
                # HELP uptime_in_days x\n# TYPE uptime_in_days gauge\nuptime_in_days 1\n";
    let problems = promlint(body);
    let of = |name: &str| {
        problems
            .iter()
            .filter(|p| p.starts_with(&format!("{name}:")))
            .count()
    };
    assert_eq!(of("ok_seconds_total"), 0, "{problems:?}");
    assert_eq!(
        of("save_time_sec"),
        2,
        "no help, abbreviation: {problems:?}"
    );
    assert_eq!(
        of("wait_us_total"),
        2,
        "gauge _total, abbreviation: {problems:?}"
    );
    assert_eq!(
        of("calls"),
        3,
        "no _total, camelCase label, le: {problems:?}"
    );
    assert_eq!(of("delay_milliseconds"), 1, "{problems:?}");
    assert_eq!(of("latency"), 0, "{problems:?}");
    assert_eq!(of("uptime_in_days"), 1, "{problems:?}");
    assert_eq!(problems.len(), 9, "{problems:?}");
}

/// Samples by `name{labels}`, checking the exposition format on the way:
/// every sample's family has one TYPE line before it, names are valid and
/// values are numbers.
fn parse(body: &str) -> HashMap<String, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    let valid_name = |name: &str| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(valid_name(name), "{line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                types.insert(name.to_owned(), kind.to_owned()).is_none(),
                "TYPE twice: {line}"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let name = series.split('{').next().unwrap();
        assert!(valid_name(name), "{line}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE before {line}");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("{line}")),
        };
        assert!(
            samples.insert(series.to_owned(), value).is_none(),
            "twice: {line}"
        );
    }
    samples
}

#[test]
fn metrics_endpoint_exports_info_commands_and_histograms() {
    let port = free_port();
    let server = TestServer::start_with(&["--metrics-port", &port.to_string()]);
    server.wait_for_log("Serving metrics on http://127.0.0.1:");
    let mut raw = server.raw();
    for n in 0..25 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), "v"]), ok());
    }
    assert_eq!(raw.cmd(&["EXPIRE", "k0", "100"]), i(1));
    assert!(matches!(raw.cmd(&["INCR", "k1"]), Reply::Error(_)));

    let (status, body) = http_get(port, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let samples = parse(&body);
    let problems = promlint(&body);
    assert!(
        problems.is_empty(),
        "promtool check metrics would say: {problems:#?}"
    );
    let get = |series: &str| {
        *samples
            .get(series)
            .unwrap_or_else(|| panic!("{series} missing"))
    };
    assert_eq!(get("strata_commands_total{cmd=\"set\"}"), 25.0);
    assert_eq!(get("strata_commands_failed_total{cmd=\"incr\"}"), 1.0);
    assert_eq!(get("strata_errors_total{code=\"ERR\"}"), 1.0);
    assert_eq!(get("strata_db_keys{db=\"db0\"}"), 25.0);
    assert_eq!(get("strata_db_keys_expiring{db=\"db0\"}"), 1.0);
    assert!(get("strata_total_commands_processed_total") >= 27.0);
    assert!(get("strata_used_memory") > 0.0);
    // The log's, the checkpoint's and the tiering figures are there too.
    for series in [
        "strata_log_writes_total",
        "strata_log_fsyncs_total",
        "strata_checkpoint_lsn",
        "strata_keys_value_on_disk",
        "strata_disk_log_bytes",
        "strata_compaction_records_moved_total",
    ] {
        get(series);
    }
    assert_eq!(
        samples
            .keys()
            .filter(|s| s.starts_with("strata_info{"))
            .count(),
        1
    );
    // SET's histogram: cumulative buckets ending at its count.
    let mut buckets: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|(series, value)| {
            let le = series
                .strip_prefix("strata_command_duration_seconds_bucket{cmd=\"set\",le=\"")?
                .strip_suffix("\"}")?;
            Some((
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                },
                *value,
            ))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(buckets.len() > 10);
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
    assert_eq!(buckets.last().unwrap().1, 25.0);
    assert_eq!(
        get("strata_command_duration_seconds_count{cmd=\"set\"}"),
        25.0
    );

    assert_eq!(http_get(port, "/").0, "HTTP/1.1 404 Not Found");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream.write_all(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 405"), "{reply}");
    // An endless request head is cut off, and the server carries on.
    let mut flood = TcpStream::connect(("127.0.0.1", port)).unwrap();
    flood.set_read_timeout(Some(TIMEOUT)).unwrap();
    let _ = flood.write_all(&vec![b'x'; 64 * 1024]);
    let mut reply = Vec::new();
    let _ = flood.read_to_end(&mut reply);
    assert!(reply.starts_with(b"HTTP/1.1 431") || reply.is_empty());
    assert_eq!(raw.cmd(&["PING"]), Reply::simple("PONG"));
}

#[test]
fn metrics_are_off_by_default() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["CONFIG", "GET", "metrics-port"]).as_array(),
        &[b("metrics-port"), b("0")]
    );
    assert!(
        !server
            .startup_log()
            .iter()
            .any(|l| l.contains("Serving metrics"))
    );
}

/// A port free now (the kernel's pick for a listener dropped at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics` with an `Authorization` header (None: without): the
/// status line.
fn http_get_as(port: u16, credentials: Option<&str>) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("metrics port answers");
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let header = credentials
        .map(|c| format!("Authorization: Basic {}\r\n", base64(c.as_bytes())))
        .unwrap_or_default();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{header}\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let mut quad = [0u8; 3];
        quad[..chunk.len()].copy_from_slice(chunk);
        let bits = u32::from_be_bytes([0, quad[0], quad[1], quad[2]]);
        for n in 0..4 {
            if n <= chunk.len() {
                out.push(DIGITS[(bits >> (18 - 6 * n) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// With a password set, the endpoint wants the credentials of a user
/// who may run INFO (it served INFO's figures to anyone before); it
/// listens on loopback whatever `bind` says.
#[test]
fn metrics_need_credentials_once_clients_do() {
    let port = free_port();
    let server = TestServer::start_with(&[
        "--metrics-port",
        &port.to_string(),
        "--bind",
        "0.0.0.0",
        "--requirepass",
        "s3cret",
    ]);
    let line = server.wait_for_log("Serving metrics on http://");
    assert!(line.contains("http://127.0.0.1:"), "{line}");
    let mut admin = server.raw();
    assert_eq!(admin.cmd(&["AUTH", "s3cret"]), ok());
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "metrics-bind"]).as_array(),
        &[b("metrics-bind"), b("127.0.0.1 -::1")]
    );
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "scraper", "on", ">pw", "+info"]),
        ok()
    );
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "nosy", "on", ">pw", "+get"]),
        ok()
    );
    for (credentials, status) in [
        (None, "401"),
        (Some("default:wrong"), "401"),
        (Some("nosy:pw"), "401"),
        (Some("default:s3cret"), "200"),
        (Some("scraper:pw"), "200"),
    ] {
        let line = http_get_as(port, credentials);
        assert!(line.contains(status), "{credentials:?}: {line}");
    }
}
