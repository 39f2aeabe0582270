//! Prometheus metrics on `metrics-port` (off by default): `GET /metrics`
//! answers the text exposition format (version 0.0.4), so no exporter is
//! needed.
//!
//! What is exported:
//! - every numeric field of INFO (all sections but the per-command ones)
//!   as `strata_<field>`: the server, clients, memory, persistence (log,
//!   checkpoint, compaction), tiering and stats figures. Fields Redis
//!   defines as running totals (`total_*`, `expired_keys`, `keyspace_hits`
//!   …) are counters named `…_total`; the rest are gauges. Names follow
//!   Prometheus' conventions (`promtool check metrics` finds nothing):
//!   INFO's abbreviated units become base units (`…_sec` → `…_seconds`,
//!   `…_per_sec` → `…_per_second`, `…_us` and `…_ms` → `…_seconds` with
//!   the value scaled), and a gauge loses a trailing `_total`
//!   (`used_memory_vm_total` → `strata_used_memory_vm`). `uptime_in_days`
//!   is left out (`strata_uptime_in_seconds` says it) and `arch_bits` is
//!   a label of `strata_info`;
//! - per database: `strata_db_keys`, `strata_db_keys_expiring`,
//!   `strata_db_avg_ttl_seconds` with a `db` label;
//! - per command: `strata_commands_total`, `strata_commands_rejected_total`,
//!   `strata_commands_failed_total`, and `strata_command_duration_seconds`,
//!   a histogram (buckets at 2^k µs) from the latency histograms;
//! - per error code: `strata_errors_total`.
//!
//! Who may read it: the endpoint listens on `metrics-bind` (loopback by
//! default, not `bind`), and once clients need a password (`requirepass`,
//! or a default user that is off or has one) a scrape must carry HTTP
//! Basic credentials of an ACL user who may run INFO (Prometheus'
//! `basic_auth`); without them it gets `401`.
//!
//! The endpoint is a deliberately small HTTP/1.1 server: one request per
//! connection, the request head limited to [`REQUEST_BYTES_MAX`] and
//! [`REQUEST_TIMEOUT`], then `Connection: close`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::commands::Node;
use crate::observe::histogram::{self, BUCKETS};
use crate::util::now_ms;
use crate::{log_notice, log_warning};

const REQUEST_BYTES_MAX: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Histogram bucket edges: 1024·2^k ns for k in 0..=25 (about 1 µs to
/// 34 s), edges of the latency histograms, so the counts are exact.
const HISTOGRAM_EDGES: u32 = 26;

/// INFO fields not exported as metrics of their own: `uptime_in_days`
/// repeats `uptime_in_seconds` in a unit Prometheus does not use,
/// `arch_bits` describes the build (a label of `strata_info`), and the
/// replication ids are names, not numbers (an id of zeros would parse).
const NOT_METRICS: &[&str] = &[
    "uptime_in_days",
    "arch_bits",
    "master_replid",
    "master_replid2",
];

/// INFO fields that count since start (or CONFIG RESETSTAT): exported as
/// counters.
const COUNTERS: &[&str] = &[
    "expired_keys",
    "evicted_keys",
    "keyspace_hits",
    "keyspace_misses",
    "rejected_connections",
    "lazyfreed_objects",
    "rdb_saves",
    "aof_rewrites",
    "strata_log_writes",
    "strata_log_bytes_written",
    "strata_log_fsyncs",
    "strata_log_write_errors",
    "ram_hits",
    "disk_hits",
    "disk_reads",
    "disk_read_bytes",
    "sync_reads",
    "read_errors",
    "promotions",
    "evictions",
    "eviction_writes",
    "oom_rejections",
    "over_budget_buffers",
    "eviction_waits",
    "eviction_wait_us",
    "compaction_records_moved",
    "compaction_bytes_read",
    "compaction_errors",
];

/// Serves `/metrics` on `listeners` until the process exits.
pub fn spawn(server: Arc<Node>, listeners: Vec<std::net::TcpListener>) {
    for listener in listeners {
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let listener = match listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
        {
            Ok(listener) => listener,
            Err(e) => {
                log_warning!("Metrics listener on {local}: {e}");
                continue;
            }
        };
        log_notice!("Serving metrics on http://{local}/metrics");
        let server = server.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let server = server.clone();
                        tokio::spawn(async move {
                            let _ =
                                tokio::time::timeout(REQUEST_TIMEOUT, answer(server, stream)).await;
                        });
                    }
                    Err(e) => {
                        log_warning!("Accepting a metrics connection: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
}

/// Reads one request head and answers it.
async fn answer(server: Arc<Node>, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > REQUEST_BYTES_MAX {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"",
            )
            .await;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    if method == b"GET" && path == b"/metrics" && !authorized(&server, &head) {
        return respond_unauthorized(&mut stream).await;
    }
    match (method, path) {
        (b"GET", b"/metrics") => {
            let body = tokio::task::spawn_blocking(move || render(&server))
                .await
                .unwrap_or_default();
            respond(
                &mut stream,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                body.as_bytes(),
            )
            .await
        }
        (b"GET", _) => {
            respond(
                &mut stream,
                "404 Not Found",
                "text/plain",
                b"see /metrics\n",
            )
            .await
        }
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", b"").await,
    }
}

/// Whether the request may read the metrics: always when clients need
/// no password; otherwise with HTTP Basic credentials of an ACL user who
/// may run INFO (what the figures come from).
fn authorized(server: &Node, head: &[u8]) -> bool {
    if !server.acl.auth_required() {
        return true;
    }
    let Some(credentials) = basic_credentials(head) else {
        return false;
    };
    let Some(colon) = credentials.iter().position(|&b| b == b':') else {
        return false;
    };
    let (name, password) = (&credentials[..colon], &credentials[colon + 1..]);
    let Some(user) = server.acl.authenticate(name, password) else {
        return false;
    };
    let Some(info) = server.commands.lookup(b"info") else {
        return false;
    };
    let args = [bytes::Bytes::from_static(b"INFO")];
    server
        .acl
        .check(&user, &server.commands, info, &args)
        .is_ok()
}

/// The decoded `user:password` of a request head's `Authorization: Basic`.
fn basic_credentials(head: &[u8]) -> Option<Vec<u8>> {
    head.split(|&b| b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !name.eq_ignore_ascii_case(b"authorization") {
            return None;
        }
        let scheme_end = value.iter().position(|&b| b == b' ')?;
        if !value[..scheme_end].eq_ignore_ascii_case(b"basic") {
            return None;
        }
        base64_decode(value[scheme_end + 1..].trim_ascii())
    })
}

/// Standard base64 (with `=` padding), or None when it is not.
fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for quad in text.chunks(4) {
        let padding = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if padding > 2 {
            return None;
        }
        let mut bits = 0u32;
        for &c in &quad[..4 - padding] {
            bits = bits << 6 | digit(c)?;
        }
        bits <<= 6 * padding as u32;
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - padding]);
    }
    Some(out)
}

async fn respond_unauthorized(stream: &mut TcpStream) -> std::io::Result<()> {
    let head = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"strata\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    stream.shutdown().await
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    kind: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}

/// A metric name made of INFO field `field` (Strata's own fields already
/// start with `strata_`), and the factor its value is multiplied by: the
/// words of the field with abbreviated units spelt as base units
/// (`sec` → `seconds`, or `second` after `per`; `us` and `ms` →
/// `seconds`, scaled), a counter ending in `_total` and a gauge not.
fn metric_name(field: &str, counter: bool) -> (String, f64) {
    let field = field.strip_prefix("strata_").unwrap_or(field);
    let clean: String = field
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let mut scale = 1.0;
    let mut words: Vec<&str> = Vec::new();
    for word in clean.split('_') {
        let after_per = words.last() == Some(&"per");
        words.push(match word {
            "sec" if after_per => "second",
            "sec" => "seconds",
            "ms" => {
                scale = 1e-3;
                "seconds"
            }
            "us" => {
                scale = 1e-6;
                "seconds"
            }
            other => other,
        });
    }
    if words.last() == Some(&"total") {
        words.pop();
    }
    if counter {
        words.push("total");
    }
    (format!("strata_{}", words.join("_")), scale)
}

/// The whole exposition.
pub fn render(server: &Node) -> String {
    let mut out = String::new();
    // INFO's sections but the per-command and per-database ones, which
    // get labelled metrics below.
    let sections: Vec<String> = crate::observe::info::ALL_SECTIONS
        .iter()
        .filter(|s| {
            !matches!(
                **s,
                "commandstats" | "errorstats" | "latencystats" | "keyspace"
            )
        })
        .map(|s| s.to_string())
        .collect();
    let info = crate::observe::info::render(server, &sections, now_ms(), &mut None);
    let mut seen = std::collections::HashSet::new();
    for line in info.lines() {
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        let Ok(number) = value.trim().parse::<f64>() else {
            continue;
        };
        if NOT_METRICS.contains(&field) || !seen.insert(field.to_owned()) {
            continue;
        }
        let counter = field.starts_with("total_") || COUNTERS.contains(&field);
        let (name, scale) = metric_name(field, counter);
        let kind = if counter { "counter" } else { "gauge" };
        let _ = write!(
            out,
            "# HELP {name} INFO field {field}.\n# TYPE {name} {kind}\n{name} {}\n",
            number * scale
        );
    }
    let _ = write!(
        out,
        "# HELP strata_info The server's versions, run id and word size.\n# TYPE strata_info gauge\n\
         strata_info{{redis_version=\"{}\",strata_version=\"{}\",run_id=\"{}\",arch_bits=\"{}\"}} 1\n",
        crate::util::REDIS_VERSION,
        env!("CARGO_PKG_VERSION"),
        server.run_id,
        usize::BITS
    );
    databases(server, &mut out);
    commands(server, &mut out);
    errors(server, &mut out);
    out
}

type DbFigure = fn(&strata_engine::DbStats) -> f64;

fn databases(server: &Node, out: &mut String) {
    let stats = server.keyspace.db_stats(now_ms());
    let figures: [(&str, &str, DbFigure); 3] = [
        ("strata_db_keys", "Keys in the database.", |s| s.keys as f64),
        (
            "strata_db_keys_expiring",
            "Keys with a TTL in the database.",
            |s| s.expires as f64,
        ),
        (
            "strata_db_avg_ttl_seconds",
            "Average TTL of the keys with one.",
            |s| s.avg_ttl_ms as f64 / 1000.0,
        ),
    ];
    for (name, help, figure) in figures {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n");
        for (db, stats) in stats.iter().enumerate().filter(|(_, s)| s.keys > 0) {
            let _ = writeln!(out, "{name}{{db=\"db{db}\"}} {}", figure(stats));
        }
    }
}

fn commands(server: &Node, out: &mut String) {
    let names = &server.commands.full_names;
    let sum = |id: usize, f: fn(&crate::observe::stats::CommandCounters) -> u64| -> u64 {
        server.thread_stats.iter().map(|t| f(&t.commands[id])).sum()
    };
    let called: Vec<usize> = (0..names.len())
        .filter(|&id| {
            sum(id, |c| c.calls.load(Relaxed)) + sum(id, |c| c.rejected.load(Relaxed)) > 0
        })
        .collect();
    type Counter = fn(&crate::observe::stats::CommandCounters) -> u64;
    let counters: [(&str, &str, Counter); 3] = [
        ("strata_commands_total", "Calls per command.", |c| {
            c.calls.load(Relaxed)
        }),
        (
            "strata_commands_rejected_total",
            "Calls refused before running (arity, OOM, ACL…).",
            |c| c.rejected.load(Relaxed),
        ),
        (
            "strata_commands_failed_total",
            "Calls that ran and replied an error.",
            |c| c.failed.load(Relaxed),
        ),
    ];
    for (name, help, counter) in counters {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} counter\n");
        for &id in &called {
            let _ = writeln!(out, "{name}{{cmd=\"{}\"}} {}", names[id], sum(id, counter));
        }
    }
    let name = "strata_command_duration_seconds";
    let _ = write!(
        out,
        "# HELP {name} Time commands took to run (latency-tracking).\n# TYPE {name} histogram\n"
    );
    for &id in &called {
        let counts = crate::observe::info::command_histogram(server, id);
        let total = histogram::total(&counts);
        if total == 0 {
            continue;
        }
        let command = &names[id];
        let (mut cumulative, mut next) = (0u64, 0usize);
        for k in 0..HISTOGRAM_EDGES {
            let edge_ns = 1024u64 << k;
            while next < BUCKETS && histogram::upper_ns(next) < edge_ns {
                cumulative += counts[next];
                next += 1;
            }
            let le = edge_ns as f64 / 1e9;
            let _ = writeln!(
                out,
                "{name}_bucket{{cmd=\"{command}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let seconds = sum(id, |c| c.usec.load(Relaxed)) as f64 / 1e6;
        let _ = writeln!(
            out,
            "{name}_bucket{{cmd=\"{command}\",le=\"+Inf\"}} {total}"
        );
        let _ = writeln!(out, "{name}_sum{{cmd=\"{command}\"}} {seconds}");
        let _ = writeln!(out, "{name}_count{{cmd=\"{command}\"}} {total}");
    }
}

fn errors(server: &Node, out: &mut String) {
    let name = "strata_errors_total";
    let _ = write!(
        out,
        "# HELP {name} Error replies per error code.\n# TYPE {name} counter\n"
    );
    for (code, count) in server.stats.errors_by_code.lock().iter() {
        let _ = writeln!(out, "{name}{{code=\"{}\"}} {count}", escape_label(code));
    }
}

/// A label value with `\`, `"` and newlines escaped, as the format wants.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_valid() {
        let name = |field: &str, counter: bool| metric_name(field, counter).0;
        assert_eq!(name("used_memory", false), "strata_used_memory");
        assert_eq!(
            name("mem_fragmentation_ratio", false),
            "strata_mem_fragmentation_ratio"
        );
        assert_eq!(name("a-b.c", false), "strata_a_b_c");
        assert_eq!(name("strata_log_fsyncs", true), "strata_log_fsyncs_total");
        assert_eq!(
            name("total_commands_processed", true),
            "strata_total_commands_processed_total"
        );
        // Gauges lose `_total`; abbreviated units become base units.
        assert_eq!(name("used_memory_vm_total", false), "strata_used_memory_vm");
        assert_eq!(
            name("rdb_last_bgsave_time_sec", false),
            "strata_rdb_last_bgsave_time_seconds"
        );
        assert_eq!(
            name("instantaneous_ops_per_sec", false),
            "strata_instantaneous_ops_per_second"
        );
        assert_eq!(
            metric_name("strata_log_last_fsync_us", false),
            ("strata_log_last_fsync_seconds".to_owned(), 1e-6)
        );
        assert_eq!(
            metric_name("eviction_wait_us", true),
            ("strata_eviction_wait_seconds_total".to_owned(), 1e-6)
        );
        assert_eq!(escape_label("x\"y\\z\n"), "x\\\"y\\\\z\\n");
    }
}
