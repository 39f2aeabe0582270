//! One SVG picture a person can read: throughput per second over time
//! (top), each second's p99 latency over time (middle, log scale) and the
//! latency percentile curve (bottom, log scales), one line per run, so runs
//! against different servers can be compared on one chart. Stalls, seconds
//! whose throughput fell below a tenth of the run's median (an fsync that
//! blocked writes, a fork), are shaded in the run's colour in both time
//! panels.

use std::fmt::Write;

use serde_json::Value;

/// A run to draw: a label, ops/s per second, each second's p99 latency
/// (ms; `None` where the file has none), and (percent, latency ms).
#[derive(Debug)]
pub struct Series {
    pub label: String,
    pub ops_per_sec: Vec<f64>,
    pub p99_per_sec: Vec<Option<f64>>,
    pub percentiles: Vec<(f64, f64)>,
}

/// The key of the 99th percentile in a second's entry, strata-bench's and
/// memtier's alike.
const P99_KEY: &str = "p99.00";

/// Extracts every run of a JSON result document: strata-bench's, or
/// memtier_benchmark's own ([`memtier_series`]).
pub fn series_from_json(label: &str, document: &Value) -> Result<Vec<Series>, String> {
    // Every run is under "strata" (files before memtier's layout had it
    // at the top).
    let runs = document
        .get("strata")
        .and_then(|strata| strata.get("runs"))
        .or_else(|| document.get("runs"))
        .and_then(Value::as_array);
    let Some(runs) = runs else {
        return memtier_series(label, document).map(|series| vec![series]);
    };
    let mut out = Vec::new();
    for run in runs {
        let number = run.get("run").and_then(Value::as_u64).unwrap_or(1);
        let seconds = run
            .get("Time series")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let ops_per_sec = seconds
            .iter()
            .filter_map(|p| p.get("ops/sec").and_then(Value::as_f64))
            .collect();
        let p99_per_sec = seconds
            .iter()
            .filter(|p| p.get("ops/sec").is_some())
            .map(|p| {
                p.get("percentile_latencies_ms")
                    .and_then(|l| l.get(P99_KEY))
                    .and_then(Value::as_f64)
            })
            .collect();
        let percentiles = run
            .pointer("/Latency distribution/Totals")
            .and_then(Value::as_array)
            .map(|points| {
                points
                    .iter()
                    .filter_map(|p| Some((p.get(1)?.as_f64()?, p.get(0)?.as_f64()?)))
                    .collect()
            })
            .unwrap_or_default();
        let label = if runs.len() > 1 {
            format!("{label} #{number}")
        } else {
            label.to_owned()
        };
        out.push(Series {
            label,
            ops_per_sec,
            p99_per_sec,
            percentiles,
        });
    }
    Ok(out)
}

/// A memtier_benchmark JSON file's totals: its `ALL STATS` (with -x, the
/// aggregated runs, else the best): each second's `Count` of the
/// `Time-Serie`, and the `Percentile Latencies`.
fn memtier_series(label: &str, document: &Value) -> Result<Series, String> {
    let object = document.as_object().ok_or("not a JSON object")?;
    let section = object
        .get("ALL STATS")
        .or_else(|| {
            let aggregated = object.keys().find(|k| k.starts_with("AGGREGATED AVERAGE RESULTS"));
            aggregated.and_then(|k| object.get(k))
        })
        .or_else(|| object.get("BEST RUN RESULTS"))
        .and_then(|stats| stats.get("Totals"))
        .ok_or("neither a strata-bench nor a memtier_benchmark JSON file: no \"strata\".\"runs\" and no \"ALL STATS\".\"Totals\"")?;
    let mut seconds: Vec<(u64, f64, Option<f64>)> = section
        .get("Time-Serie")
        .and_then(Value::as_object)
        .map(|serie| {
            serie
                .iter()
                .filter_map(|(second, entry)| {
                    let p99 = entry.get(P99_KEY).and_then(Value::as_f64);
                    Some((second.parse().ok()?, entry.get("Count")?.as_f64()?, p99))
                })
                .collect()
        })
        .unwrap_or_default();
    seconds.sort_by_key(|(second, _, _)| *second);
    let mut percentiles: Vec<(f64, f64)> = section
        .get("Percentile Latencies")
        .and_then(Value::as_object)
        .map(|points| {
            points
                .iter()
                .filter_map(|(name, value)| {
                    Some((name.strip_prefix('p')?.parse().ok()?, value.as_f64()?))
                })
                .collect()
        })
        .unwrap_or_default();
    percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Series {
        label: label.to_owned(),
        ops_per_sec: seconds.iter().map(|(_, count, _)| *count).collect(),
        p99_per_sec: seconds.iter().map(|(_, _, p99)| *p99).collect(),
        percentiles,
    })
}

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 300.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 220.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Position of a percentile on the "nines" axis: 90 → 1, 99 → 2, 99.9 → 3.
fn nines(percent: f64) -> f64 {
    -(1.0 - (percent / 100.0).min(0.999_999)).log10()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn svg(series: &[Series]) -> String {
    let height = 3.0 * PANEL_HEIGHT + 240.0;
    let plot_width = WIDTH - LEFT - RIGHT;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);

    let top = 40.0;
    let panel = PANEL_HEIGHT + 80.0;
    // Both time panels share one time axis: the longest run's seconds.
    let seconds = series
        .iter()
        .map(|s| s.ops_per_sec.len())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    throughput_panel(&mut out, series, top, plot_width, seconds);
    p99_panel(&mut out, series, top + panel, plot_width, seconds);
    latency_panel(&mut out, series, top + 2.0 * panel, plot_width);
    legend(&mut out, series);
    out.push_str("</svg>\n");
    out
}

/// The top panel, from `top` down: throughput per second over time, one
/// line per run.
fn throughput_panel(out: &mut String, series: &[Series], top: f64, plot_width: f64, seconds: f64) {
    let ops_max = nice_ceiling(
        series
            .iter()
            .flat_map(|s| s.ops_per_sec.iter().copied())
            .fold(1.0, f64::max)
            * 1.05,
    );
    frame(out, "Throughput (ops/sec) per second", top, plot_width);
    for i in 0..=5 {
        let value = ops_max * i as f64 / 5.0;
        let y = top + PANEL_HEIGHT - PANEL_HEIGHT * i as f64 / 5.0;
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{y}" text-anchor="end" dy="4">{value:.0}</text><line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/>"##,
            LEFT - 6.0,
            LEFT + plot_width
        );
    }
    time_axis(out, top, plot_width, seconds);
    stall_bands(out, series, top, plot_width, seconds);
    for (n, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .ops_per_sec
            .iter()
            .enumerate()
            .map(|(i, ops)| {
                format!(
                    "{:.1},{:.1}",
                    LEFT + plot_width * (i as f64 + 1.0) / seconds,
                    top + PANEL_HEIGHT - PANEL_HEIGHT * ops / ops_max
                )
            })
            .collect();
        polyline(out, n, &points);
    }
}

/// The middle panel, from `top` down: each second's p99 latency over
/// time, on a logarithmic axis (a stall's seconds-long replies and the
/// usual milliseconds both show). A second without a figure breaks the
/// line.
fn p99_panel(out: &mut String, series: &[Series], top: f64, plot_width: f64, seconds: f64) {
    frame(out, "p99 latency (ms) per second", top, plot_width);
    let scale = LogScale::over(
        series
            .iter()
            .flat_map(|s| s.p99_per_sec.iter().flatten().copied()),
        top,
    );
    scale.grid(out, plot_width);
    time_axis(out, top, plot_width, seconds);
    stall_bands(out, series, top, plot_width, seconds);
    for (n, s) in series.iter().enumerate() {
        let mut segment = Vec::new();
        for (i, p99) in s.p99_per_sec.iter().enumerate() {
            match p99 {
                Some(ms) => segment.push(format!(
                    "{:.1},{:.1}",
                    LEFT + plot_width * (i as f64 + 1.0) / seconds,
                    scale.y(*ms)
                )),
                None => {
                    polyline(out, n, &segment);
                    segment.clear();
                }
            }
        }
        polyline(out, n, &segment);
    }
}

/// The bottom panel, from `top` down: latency by percentile, both axes
/// logarithmic, so the rare slow requests get as much room as the median.
fn latency_panel(out: &mut String, series: &[Series], top: f64, plot_width: f64) {
    frame(out, "Latency (ms) by percentile", top, plot_width);
    let scale = LogScale::over(
        series
            .iter()
            .flat_map(|s| s.percentiles.iter().map(|p| p.1)),
        top,
    );
    let x_max = 5.0;
    let x_of = |percent: f64| LEFT + plot_width * nines(percent).min(x_max) / x_max;
    scale.grid(out, plot_width);
    for label in ["0", "90", "99", "99.9", "99.99", "99.999"] {
        let x = x_of(label.parse().unwrap_or(0.0));
        centered(out, x, top + PANEL_HEIGHT + 16.0, &format!("p{label}"));
    }
    centered(
        out,
        LEFT + plot_width / 2.0,
        top + PANEL_HEIGHT + 34.0,
        "percentile of requests (each step: ten times rarer)",
    );
    for (n, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .percentiles
            .iter()
            .map(|(p, ms)| format!("{:.1},{:.1}", x_of(*p), scale.y(*ms)))
            .collect();
        polyline(out, n, &points);
    }
}

/// A logarithmic latency axis over a panel: whole powers of ten from
/// below the smallest positive value to above the largest.
struct LogScale {
    top: f64,
    low_exp: f64,
    high_exp: f64,
}

impl LogScale {
    fn over(values: impl Iterator<Item = f64>, top: f64) -> LogScale {
        let (low, high) = values
            .filter(|v| *v > 0.0)
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (low_exp, high_exp) = if low <= high {
            (
                low.log10().floor(),
                high.log10().ceil().max(low.log10().floor() + 1.0),
            )
        } else {
            (-2.0, 1.0)
        };
        LogScale {
            top,
            low_exp,
            high_exp,
        }
    }

    fn y(&self, ms: f64) -> f64 {
        let exp = ms.max(10f64.powf(self.low_exp)).log10();
        self.top + PANEL_HEIGHT
            - PANEL_HEIGHT * (exp - self.low_exp) / (self.high_exp - self.low_exp)
    }

    /// A labelled grid line at each power of ten.
    fn grid(&self, out: &mut String, plot_width: f64) {
        let mut exp = self.low_exp;
        while exp <= self.high_exp {
            let y = self.y(10f64.powf(exp));
            let _ = writeln!(
                out,
                r##"<text x="{}" y="{y}" text-anchor="end" dy="4">{}</text><line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/>"##,
                LEFT - 6.0,
                10f64.powf(exp),
                LEFT + plot_width
            );
            exp += 1.0;
        }
    }
}

/// The seconds under a time panel starting at `top`.
fn time_axis(out: &mut String, top: f64, plot_width: f64, seconds: f64) {
    for i in 0..=5 {
        let second = seconds * i as f64 / 5.0;
        let x = LEFT + plot_width * i as f64 / 5.0;
        centered(out, x, top + PANEL_HEIGHT + 16.0, &format!("{second:.0}s"));
    }
    centered(
        out,
        LEFT + plot_width / 2.0,
        top + PANEL_HEIGHT + 34.0,
        "time since start",
    );
}

/// The seconds of run `s` whose throughput fell below a tenth of its
/// median: its stalls.
fn stalls(s: &Series) -> Vec<usize> {
    let mut sorted = s.ops_per_sec.clone();
    sorted.sort_by(f64::total_cmp);
    let half = sorted.len() / 2;
    let median = match sorted.len() {
        0 => return Vec::new(),
        n if n % 2 == 1 => sorted[half],
        _ => (sorted[half - 1] + sorted[half]) / 2.0,
    };
    (0..s.ops_per_sec.len())
        .filter(|&i| s.ops_per_sec[i] < median / 10.0)
        .collect()
}

/// Each run's stalls as bands of its colour across a time panel.
fn stall_bands(out: &mut String, series: &[Series], top: f64, plot_width: f64, seconds: f64) {
    for (n, s) in series.iter().enumerate() {
        for i in stalls(s) {
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{top}" width="{:.1}" height="{PANEL_HEIGHT}" fill="{}" fill-opacity="0.15"/>"#,
                LEFT + plot_width * i as f64 / seconds,
                plot_width / seconds,
                COLORS[n % COLORS.len()],
            );
        }
    }
}

/// Each run's label beside the panels, in its line's colour, with its
/// number of stalls, and what the shading means.
fn legend(out: &mut String, series: &[Series]) {
    let note_y = 60.0 + 20.0 * series.len() as f64 + 10.0;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{note_y}" font-size="11">shaded: stalls, seconds below</text><text x="{}" y="{}" font-size="11">a tenth of the run's median</text>"#,
        WIDTH - RIGHT + 20.0,
        WIDTH - RIGHT + 20.0,
        note_y + 14.0
    );
    for (n, s) in series.iter().enumerate() {
        let y = 60.0 + 20.0 * n as f64;
        let x = WIDTH - RIGHT + 20.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{}" width="14" height="4" fill="{}"/><text x="{}" y="{y}">{}</text>"#,
            y - 6.0,
            COLORS[n % COLORS.len()],
            x + 20.0,
            escape(&match stalls(s).len() {
                0 => s.label.clone(),
                1 => format!("{} (1 stall)", s.label),
                k => format!("{} ({k} stalls)", s.label),
            })
        );
    }
}

/// Series `n`'s line through `points` ("x,y" pairs), in its colour.
fn polyline(out: &mut String, n: usize, points: &[String]) {
    if points.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke-width="2" stroke="{}" points="{}"/>"#,
        COLORS[n % COLORS.len()],
        points.join(" ")
    );
}

/// A label centred on `x`, escaped.
fn centered(out: &mut String, x: f64, y: f64, text: &str) {
    let _ = writeln!(
        out,
        r#"<text x="{x}" y="{y}" text-anchor="middle">{}</text>"#,
        escape(text)
    );
}

/// The smallest 1, 2 or 5 × 10^k at or above `value`, for round axis ticks.
fn nice_ceiling(value: f64) -> f64 {
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|v| *v >= value)
        .unwrap_or(10.0 * magnitude)
}

/// A panel's title above it and its two axes.
fn frame(out: &mut String, title: &str, top: f64, plot_width: f64) {
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="15">{}</text>"#,
        top - 12.0,
        escape(title)
    );
    axes(out, top, plot_width);
}

fn axes(out: &mut String, top: f64, plot_width: f64) {
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{}" stroke="black"/><line x1="{LEFT}" x2="{}" y1="{}" y2="{}" stroke="black"/>"#,
        top + PANEL_HEIGHT,
        LEFT + plot_width,
        top + PANEL_HEIGHT,
        top + PANEL_HEIGHT
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file memtier_benchmark wrote (its layout, trimmed) is plotted
    /// from its totals.
    #[test]
    fn memtier_json_is_read() {
        let document: Value = serde_json::from_str(
            r#"{"configuration": {}, "ALL STATS": {"Totals": {
                "Time-Serie": {"1": {"Count": 900, "p99.00": 2.5}, "0": {"Count": 1000, "p99.00": 1.5}, "10": {"Count": 5}},
                "Percentile Latencies": {"p99.900": 3.5, "p50.000": 0.2, "p99.000": 1.0}}}}"#,
        )
        .unwrap();
        let series = series_from_json("memtier", &document).unwrap();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].ops_per_sec, vec![1000.0, 900.0, 5.0]);
        assert_eq!(series[0].p99_per_sec, vec![Some(1.5), Some(2.5), None]);
        assert_eq!(
            series[0].percentiles,
            vec![(50.0, 0.2), (99.0, 1.0), (99.9, 3.5)]
        );
        let runs: Value = serde_json::from_str(
            r#"{"AGGREGATED AVERAGE RESULTS (3 runs)": {"Totals": {"Percentile Latencies": {"p50.000": 1.0}}}}"#,
        )
        .unwrap();
        assert_eq!(
            series_from_json("x", &runs).unwrap()[0].percentiles,
            vec![(50.0, 1.0)]
        );
        let other: Value = serde_json::from_str(r#"{"a": 1}"#).unwrap();
        assert!(
            series_from_json("x", &other)
                .unwrap_err()
                .contains("memtier_benchmark")
        );
    }

    #[test]
    fn draws_every_series_with_its_label() {
        let series = vec![
            Series {
                label: "strata".into(),
                ops_per_sec: vec![100.0, 120.0],
                p99_per_sec: vec![Some(1.0), Some(2.0)],
                percentiles: vec![(0.0, 0.1), (50.0, 0.2), (99.9, 3.0)],
            },
            Series {
                label: "redis <7>".into(),
                ops_per_sec: vec![90.0],
                p99_per_sec: vec![None],
                percentiles: vec![(50.0, 0.3)],
            },
        ];
        let svg = svg(&series);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // Throughput and percentiles for both, p99 per second for the
        // run that has it.
        assert_eq!(svg.matches("<polyline").count(), 5);
        assert!(!svg.contains("fill-opacity"), "no stalls");
        assert!(svg.contains("strata") && svg.contains("redis &lt;7&gt;"));
        assert!((nines(99.0) - 2.0).abs() < 1e-9);
        assert_eq!(nice_ceiling(1_136_626.0), 2_000_000.0);
        assert_eq!(nice_ceiling(430.0), 500.0);
    }

    /// A second below a tenth of the run's median throughput is a stall:
    /// shaded in both time panels and counted in the legend; a second
    /// without a p99 breaks that line in two.
    #[test]
    fn stalls_are_shaded_and_counted() {
        let series = vec![Series {
            label: "redis everysec".into(),
            ops_per_sec: vec![100.0, 100.0, 100.0, 9.0, 0.0, 100.0, 11.0],
            p99_per_sec: vec![
                Some(1.0),
                Some(1.0),
                Some(1.0),
                Some(900.0),
                None,
                Some(1.0),
                Some(1.0),
            ],
            percentiles: vec![(50.0, 1.0)],
        }];
        assert_eq!(stalls(&series[0]), vec![3, 4]);
        let svg = svg(&series);
        assert_eq!(svg.matches("fill-opacity").count(), 4);
        assert!(svg.contains("redis everysec (2 stalls)"));
        assert_eq!(svg.matches("<polyline").count(), 4);
    }
}
