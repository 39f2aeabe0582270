//! Results as memtier prints them (the `ALL STATS` table and the latency
//! distribution) and as JSON, which `report` can plot.
//!
//! The JSON document has memtier_benchmark 2.x's layout, so tools that
//! read memtier's files read strata-bench's: `configuration` (memtier's
//! keys), `run information`, and `ALL STATS` (`Runtime`, then `Sets` /
//! `Gets` / `Waits` or the custom commands, then `Totals`, with memtier's
//! fields) for the last run. What memtier does not have stays under
//! `strata`: its own configuration fields, and every run with the full
//! latency distribution and the per-second series (`runs`).

use std::fmt::Write;

use serde_json::{Value, json};

use crate::config::Config;
use crate::run::{OpResult, RunResult, Second};

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn per_sec(count: u64, result: &RunResult) -> f64 {
    count as f64 / result.duration.as_secs_f64().max(1e-9)
}

fn percentile_label(p: f64) -> String {
    let text = format!("{p}");
    format!("p{text}")
}

/// A result table under `title` (`ALL STATS`, `BEST RUN RESULTS`, …).
pub fn table(config: &Config, result: &RunResult, title: &str) -> String {
    let mut out = String::new();
    let percentiles = &config.print_percentiles;
    let width = 64 + 16 * percentiles.len();
    let _ = writeln!(out, "\n{title}\n{}", "=".repeat(width));
    let _ = write!(
        out,
        "{:<10}{:>12}{:>13}{:>13}{:>16}",
        "Type", "Ops/sec", "Hits/sec", "Misses/sec", "Avg. Latency"
    );
    for p in percentiles {
        let _ = write!(out, "{:>16}", format!("{} Latency", percentile_label(*p)));
    }
    let _ = writeln!(out, "{:>13}\n{}", "KB/sec", "-".repeat(width));
    let totals = result.totals();
    let is_set_get = config.commands.is_empty();
    for (i, op) in result
        .ops
        .iter()
        .chain(std::iter::once(&totals))
        .enumerate()
    {
        let hits_apply = is_set_get && (i == 1 || i == result.ops.len());
        write_row(&mut out, result, op, hits_apply, percentiles);
    }
    if !result.errors.is_empty() {
        let total: u64 = result.errors.values().sum();
        let detail: Vec<String> = result
            .errors
            .iter()
            .map(|(code, n)| format!("{code}: {n}"))
            .collect();
        let _ = writeln!(
            out,
            "Errors      {total} error replies ({}), not counted as hits",
            detail.join(", ")
        );
    }
    out
}

fn write_row(
    out: &mut String,
    result: &RunResult,
    op: &OpResult,
    hits_apply: bool,
    percentiles: &[f64],
) {
    let (hits, misses) = if hits_apply {
        (
            format!("{:.2}", per_sec(op.hits, result)),
            format!("{:.2}", per_sec(op.misses, result)),
        )
    } else {
        ("---".to_owned(), "---".to_owned())
    };
    let _ = write!(
        out,
        "{:<10}{:>12.2}{:>13}{:>13}",
        op.name,
        per_sec(op.ops, result),
        hits,
        misses
    );
    if op.ops == 0 {
        let _ = write!(out, "{:>16}", "---");
        for _ in percentiles {
            let _ = write!(out, "{:>16}", "---");
        }
    } else {
        let _ = write!(out, "{:>16.5}", op.latency.mean() / 1000.0);
        for p in percentiles {
            let _ = write!(out, "{:>16.5}", ms(op.latency.value_at_quantile(p / 100.0)));
        }
    }
    let _ = writeln!(out, "{:>13.2}", per_sec(op.bytes, result) / 1024.0);
}

/// The cumulative latency distribution per operation type.
pub fn histogram(result: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nRequest Latency Distribution\n{:<10}{:>14}{:>14}\n{}",
        "Type",
        "<= msec",
        "Percent",
        "-".repeat(38)
    );
    for op in result.ops.iter().filter(|o| o.ops > 0) {
        let label = match op.name.as_str() {
            "Sets" => "SET",
            "Gets" => "GET",
            command => command,
        };
        for (latency_ms, percent) in distribution(op) {
            let _ = writeln!(out, "{:<10}{:>14.3}{:>14.3}", label, latency_ms, percent);
        }
        let _ = writeln!(out, "---");
    }
    out
}

/// (latency in ms, cumulative percent) points of an operation's latencies.
pub fn distribution(op: &OpResult) -> Vec<(f64, f64)> {
    op.latency
        .iter_quantiles(2)
        .map(|v| (ms(v.value_iterated_to()), v.quantile_iterated_to() * 100.0))
        .collect()
}

fn op_json(op: &OpResult, result: &RunResult, percentiles: &[f64]) -> Value {
    let mut latencies = serde_json::Map::new();
    for p in percentiles {
        let value = if op.ops == 0 {
            0.0
        } else {
            ms(op.latency.value_at_quantile(p / 100.0))
        };
        latencies.insert(format!("p{p:.2}"), json!(value));
    }
    json!({
        "Count": op.ops,
        "Ops/sec": per_sec(op.ops, result),
        "Hits/sec": per_sec(op.hits, result),
        "Misses/sec": per_sec(op.misses, result),
        "Errors": op.errors,
        "Average Latency": if op.ops == 0 { 0.0 } else { op.latency.mean() / 1000.0 },
        "Min Latency": if op.ops == 0 { 0.0 } else { ms(op.latency.min()) },
        "Max Latency": if op.ops == 0 { 0.0 } else { ms(op.latency.max()) },
        "Percentile Latencies": latencies,
        "KB/sec": per_sec(op.bytes, result) / 1024.0,
    })
}

/// One run as JSON.
pub fn run_json(config: &Config, run: usize, result: &RunResult) -> Value {
    let totals = result.totals();
    let mut stats = serde_json::Map::new();
    for op in result.ops.iter().chain(std::iter::once(&totals)) {
        stats.insert(
            op.name.clone(),
            op_json(op, result, &config.print_percentiles),
        );
    }
    stats.insert(
        "Runtime".into(),
        json!({ "Total duration": result.duration.as_secs_f64() * 1000.0 }),
    );
    let mut distributions = serde_json::Map::new();
    for op in result
        .ops
        .iter()
        .chain(std::iter::once(&totals))
        .filter(|o| o.ops > 0)
    {
        distributions.insert(op.name.clone(), json!(distribution(op)));
    }
    json!({
        "run": run,
        "ALL STATS": stats,
        "Errors": result.errors,
        "Latency distribution": distributions,
        "Time series": result.series.iter().map(|s| json!({
            "second": s.second,
            "ops/sec": s.ops,
            "avg_latency_ms": s.avg_latency_ms,
            "max_latency_ms": s.max_latency_ms,
            "percentile_latencies_ms": second_percentiles(s, &config.print_percentiles),
            "KB/sec": s.bytes as f64 / 1024.0,
        })).collect::<Vec<_>>(),
    })
}

/// The whole JSON document (see the module documentation): memtier's
/// layout, a section per titled result (`ALL STATS`, or with -x the best,
/// worst and aggregated runs), and every run under `strata`.
pub fn document(config: &Config, sections: &[(String, &RunResult)], runs: &[Value]) -> Value {
    let mut document = serde_json::Map::new();
    document.insert("configuration".into(), memtier_configuration(config));
    let mut information = serde_json::Map::new();
    information.insert("Threads".into(), json!(config.threads));
    information.insert("Connections per thread".into(), json!(config.clients));
    match (config.requests, config.test_time) {
        (_, Some(time)) => information.insert("Seconds".into(), json!(time.as_secs())),
        (crate::config::Requests::PerClient(n), None) => {
            information.insert("Requests per client".into(), json!(n))
        }
        (crate::config::Requests::AllKeys, None) => information.insert(
            "Requests per client".into(),
            json!(
                (config.key_max - config.key_min + 1)
                    / (config.threads * config.clients).max(1) as u64
            ),
        ),
    };
    information.insert("Format version".into(), json!(2));
    document.insert("run information".into(), Value::Object(information));
    for (title, result) in sections {
        document.insert(title.clone(), memtier_stats(config, result));
    }
    document.insert(
        "strata".into(),
        json!({
            "configuration": {
                "protocol": if config.resp3 { "resp3" } else { "resp2" },
                "requests": match config.requests {
                    crate::config::Requests::PerClient(n) => json!(n),
                    crate::config::Requests::AllKeys => json!("allkeys"),
                },
                "data_size": format!("{:?}", config.data_size),
                "rate": config.rate,
                "commands": config.commands.iter().map(|c| c.args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")).collect::<Vec<_>>(),
            },
            "runs": runs,
        }),
    );
    Value::Object(document)
}

fn pattern_letter(pattern: crate::config::KeyPattern) -> char {
    match pattern {
        crate::config::KeyPattern::Sequential => 'S',
        crate::config::KeyPattern::Random => 'R',
        crate::config::KeyPattern::Gaussian => 'G',
        crate::config::KeyPattern::Parallel => 'P',
    }
}

/// memtier's `configuration` object, key for key.
/// memtier's `rate_limit`: requests per second per connection (0:
/// none), --rate's total shared over the connections, a whole number as
/// memtier writes it.
fn rate_limit(config: &Config) -> u64 {
    let connections = (config.threads * config.clients) as f64;
    config
        .rate
        .map_or(0, |rate| (rate / connections).round() as u64)
}

/// memtier's settings of what strata-bench does not do (it refuses the
/// flags): TLS, reconnection, connection jitter, MGET, WAIT.
fn memtier_fixed_fields() -> [(&'static str, Value); 14] {
    [
        ("reconnect_interval", json!(0)),
        ("thread_conn_start_min_jitter_micros", json!(0)),
        ("thread_conn_start_max_jitter_micros", json!(0)),
        ("multi_key_get", json!(0)),
        ("no-expiry", json!("false")),
        ("wait-ratio", json!("0:0")),
        ("num-slaves", json!("0:0")),
        ("wait-timeout", json!("0-0")),
        ("tls", json!("false")),
        ("cert", Value::Null),
        ("key", Value::Null),
        ("cacert", Value::Null),
        ("tls_skip_verify", json!("false")),
        ("sni", Value::Null),
    ]
}

fn memtier_configuration(config: &Config) -> Value {
    let (data_size, range, pattern) = match config.data_size {
        crate::config::DataSize::Fixed(size) => (size, (0, 0), "R"),
        crate::config::DataSize::Range {
            min,
            max,
            spread_over_keys,
        } => (0, (min, max), if spread_over_keys { "S" } else { "R" }),
    };
    let expiry = config.expiry_range.unwrap_or((0, 0));
    let text = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let fields: Vec<(&str, Value)> = vec![
        ("server", json!(config.server)),
        ("port", json!(config.port)),
        ("uri", json!("")),
        ("unix socket", json!("")),
        ("address family", json!("Unspecified")),
        (
            "protocol",
            json!(if config.resp3 { "resp3" } else { "redis" }),
        ),
        ("out_file", json!(text(&config.out_file))),
        ("client_stats", json!("")),
        ("run_count", json!(config.run_count)),
        ("debug", json!(0)),
        (
            "requests",
            json!(match config.requests {
                crate::config::Requests::PerClient(n) => n,
                crate::config::Requests::AllKeys => 0,
            }),
        ),
        ("rate_limit", json!(rate_limit(config))),
        ("clients", json!(config.clients)),
        ("threads", json!(config.threads)),
        (
            "test_time",
            json!(config.test_time.map_or(0, |t| t.as_secs())),
        ),
        (
            "ratio",
            json!(format!("{}:{}", config.ratio_sets, config.ratio_gets)),
        ),
        ("pipeline", json!(config.pipeline)),
        ("data_size", json!(data_size)),
        ("data_offset", json!(0)),
        (
            "random_data",
            json!(if config.random_data { "true" } else { "false" }),
        ),
        ("data_size_range", json!(format!("{}:{}", range.0, range.1))),
        ("data_size_list", json!("")),
        ("data_size_pattern", json!(pattern)),
        ("expiry_range", json!(format!("{}:{}", expiry.0, expiry.1))),
        ("data_import", json!("")),
        ("data_verify", json!("false")),
        ("verify_only", json!("false")),
        ("generate_keys", json!("false")),
        ("key_prefix", json!(config.key_prefix)),
        ("key_minimum", json!(config.key_min)),
        ("key_maximum", json!(config.key_max)),
        (
            "key_pattern",
            json!(format!(
                "{}:{}",
                pattern_letter(config.set_pattern),
                pattern_letter(config.get_pattern)
            )),
        ),
        ("key_stddev", json!(config.key_stddev)),
        ("key_median", json!(config.key_median)),
        ("key_zipf_exp", json!(0.0)),
        ("connection_timeout", json!(0)),
        (
            "authenticate",
            json!(if config.auth.is_some() {
                "(hidden)"
            } else {
                ""
            }),
        ),
        ("select-db", json!(config.select_db.unwrap_or(0))),
        (
            "print-all-runs",
            json!(if config.print_all_runs {
                "true"
            } else {
                "false"
            }),
        ),
    ];
    (fields.into_iter().chain(memtier_fixed_fields()))
        .map(|(k, v)| (k.to_owned(), v))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// memtier's key for a percentile: `p%.3f` written into 7 bytes, so
/// six characters are kept (`p50.00`, `p99.90`, `p100.0`, `p5.000`).
fn memtier_percentile_key(p: f64) -> String {
    format!("p{p:.3}").chars().take(6).collect()
}

/// One second's latency percentiles under memtier's keys (`p50.00`, …).
fn second_percentiles(second: &Second, percentiles: &[f64]) -> Value {
    let map: serde_json::Map<String, Value> = percentiles
        .iter()
        .zip(&second.percentiles_ms)
        .map(|(p, ms)| (memtier_percentile_key(*p), json!(ms)))
        .collect();
    Value::Object(map)
}

/// memtier's `ALL STATS` object of one run.
fn memtier_stats(config: &Config, result: &RunResult) -> Value {
    let mut stats = serde_json::Map::new();
    let duration_ms = result.duration.as_millis() as u64;
    stats.insert(
        "Runtime".into(),
        json!({
            "Start time": result.started_unix_ms,
            "Finish time": result.started_unix_ms + duration_ms,
            "Total duration": duration_ms,
            "Time unit": "MILLISECONDS",
            "Interrupted": "false",
        }),
    );
    let totals = result.totals();
    let waits = OpResult::empty("Waits");
    let mut ops: Vec<&OpResult> = result.ops.iter().collect();
    if config.commands.is_empty() {
        ops.push(&waits);
    }
    for op in ops {
        stats.insert(op.name.clone(), memtier_op(op, result, config, false));
    }
    stats.insert("Totals".into(), memtier_op(&totals, result, config, true));
    Value::Object(stats)
}

/// One operation type's figures, with memtier's names, units (ms, KB/s)
/// and number formats.
fn memtier_op(op: &OpResult, result: &RunResult, config: &Config, with_series: bool) -> Value {
    let has = op.ops > 0;
    let average = if has { op.latency.mean() / 1000.0 } else { 0.0 };
    let mut percentiles = serde_json::Map::new();
    for p in &config.print_percentiles {
        let value = if has {
            ms(op.latency.value_at_quantile(p / 100.0))
        } else {
            0.0
        };
        percentiles.insert(memtier_percentile_key(*p), json!(value));
    }
    // The per-second series is kept over all operation types: memtier's
    // per-type series are left empty.
    // As memtier, a second without replies has only its bytes and count.
    let mut series = serde_json::Map::new();
    if with_series {
        for second in &result.series {
            let mut entry = json!({
                "Bytes RX": second.bytes_rx,
                "Bytes TX": second.bytes - second.bytes_rx,
                "Count": second.ops,
            });
            if second.ops > 0 {
                let entry = entry.as_object_mut().expect("an object");
                let latencies = json!({
                    "Average Latency": second.avg_latency_ms,
                    "Accumulated Latency": (second.avg_latency_ms * second.ops as f64) as u64,
                    "Min Latency": second.min_latency_ms,
                    "Max Latency": second.max_latency_ms,
                });
                let percentiles = second_percentiles(second, &config.print_percentiles);
                for part in [latencies, percentiles] {
                    if let Value::Object(fields) = part {
                        entry.extend(fields);
                    }
                }
            }
            series.insert(second.second.to_string(), entry);
        }
    }
    let kb = |bytes: u64| per_sec(bytes, result) / 1024.0;
    json!({
        "Count": op.ops,
        "Ops/sec": per_sec(op.ops, result),
        "Hits/sec": per_sec(op.hits, result),
        "Misses/sec": per_sec(op.misses, result),
        "Connection Errors/sec": 0.0,
        "Connection Errors": 0,
        "Latency": average,
        "Average Latency": average,
        "Accumulated Latency": if has { (op.latency.mean() * op.ops as f64 / 1000.0) as u64 } else { 0 },
        "Min Latency": if has { ms(op.latency.min()) } else { 0.0 },
        "Max Latency": if has { ms(op.latency.max()) } else { 0.0 },
        "KB/sec": kb(op.bytes),
        "KB/sec RX/TX": kb(op.bytes),
        "KB/sec RX": kb(op.bytes_rx),
        "KB/sec TX": kb(op.bytes_tx),
        "Time-Serie": series,
        "Percentile Latencies": percentiles,
    })
}
