//! Results as memtier prints them (the `ALL STATS` table and the latency
//! distribution) and as JSON (the same figures, the full latency
//! distribution and the per-second series), which `report` can plot.

use std::fmt::Write;

use serde_json::{Value, json};

use crate::config::Config;
use crate::run::{OpResult, RunResult};

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

/// The `ALL STATS` table.
pub fn table(config: &Config, result: &RunResult) -> String {
    let mut out = String::new();
    let percentiles = &config.print_percentiles;
    let width = 64 + 16 * percentiles.len();
    let _ = writeln!(out, "\nALL STATS\n{}", "=".repeat(width));
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
            "KB/sec": s.bytes as f64 / 1024.0,
        })).collect::<Vec<_>>(),
    })
}

/// The whole JSON document: configuration and every run.
pub fn document(config: &Config, runs: &[Value]) -> Value {
    json!({
        "configuration": {
            "server": config.server,
            "port": config.port,
            "protocol": if config.resp3 { "resp3" } else { "resp2" },
            "threads": config.threads,
            "clients": config.clients,
            "requests": match config.requests {
                crate::config::Requests::PerClient(n) => json!(n),
                crate::config::Requests::AllKeys => json!("allkeys"),
            },
            "test_time": config.test_time.map(|t| t.as_secs()),
            "ratio": format!("{}:{}", config.ratio_sets, config.ratio_gets),
            "pipeline": config.pipeline,
            "data_size": format!("{:?}", config.data_size),
            "key_pattern": format!("{:?}:{:?}", config.set_pattern, config.get_pattern),
            "key_minimum": config.key_min,
            "key_maximum": config.key_max,
            "rate": config.rate,
            "commands": config.commands.iter().map(|c| c.args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")).collect::<Vec<_>>(),
        },
        "runs": runs,
    })
}
