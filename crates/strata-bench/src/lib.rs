//! strata-bench: a memtier_benchmark-compatible load generator.
//!
//! - [`config`]: memtier's flags, names, meanings and defaults;
//! - [`workload`]: key patterns (S, R, G, P), value sizes, operation cycle;
//! - [`run`]: threads and pipelined clients, closed or open loop
//!   (`--rate`, latency from the intended send time), HdrHistogram latencies
//!   and a per-second series; [`pacer`]: the open loop's precise waits
//!   (timerfd, not tokio's millisecond timer);
//! - [`report`]: memtier's `ALL STATS` table, the latency distribution and
//!   JSON; [`plot`]: an SVG of throughput over time and latency percentiles.
//!
//! The binary is thin; tests and other tools use [`run_benchmark`].

pub mod config;
pub mod pacer;
pub mod plot;
pub mod report;
pub mod run;
pub mod workload;

use std::sync::Arc;

pub use config::Config;
pub use run::RunResult;

/// Runs every iteration (`--run-count`), printing memtier-style reports to
/// stdout, and writes the JSON and SVG outputs asked for.
pub fn run_benchmark(config: Config, print: bool) -> Result<Vec<RunResult>, String> {
    let config = Arc::new(config);
    let mut results = Vec::new();
    let mut documents = Vec::new();
    let mut text = String::new();
    if config.show_config {
        text.push_str(&format!("{config:#?}\n"));
    }
    for run in 1..=config.run_count {
        let result = run::run(&config, run)?;
        documents.push(report::run_json(&config, run, &result));
        results.push(result);
    }
    let sections = sections(&config, &results);
    for (title, result) in &sections {
        text.push_str(&report::table(&config, result, title));
        if !config.hide_histogram {
            text.push_str(&report::histogram(result));
        }
    }
    match &config.out_file {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| format!("writing {}: {e}", path.display()))?
        }
        None if print => print!("{text}"),
        None => {}
    }
    let titled: Vec<(String, &RunResult)> = sections.iter().map(|(t, r)| (t.clone(), r)).collect();
    let document = report::document(&config, &titled, &documents);
    if let Some(path) = &config.json_out_file {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&document).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(path) = &config.plot {
        let series = plot::series_from_json("this run", &document)?;
        std::fs::write(path, plot::svg(&series))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(results)
}

/// What is reported, as memtier reports it: one run's `ALL STATS`; with
/// -x, each run (`--print-all-runs`), then the best and worst by
/// requests per second, and the runs aggregated.
fn sections(config: &Config, results: &[RunResult]) -> Vec<(String, RunResult)> {
    if results.len() == 1 {
        return vec![("ALL STATS".into(), results[0].clone())];
    }
    let mut sections = Vec::new();
    if config.print_all_runs {
        for (i, result) in results.iter().enumerate() {
            sections.push((format!("RUN #{} RESULTS", i + 1), result.clone()));
        }
    }
    let by_rate = |a: &&RunResult, b: &&RunResult| a.ops_per_sec().total_cmp(&b.ops_per_sec());
    if let (Some(best), Some(worst)) = (
        results.iter().max_by(by_rate),
        results.iter().min_by(by_rate),
    ) {
        sections.push(("BEST RUN RESULTS".into(), best.clone()));
        sections.push(("WORST RUN RESULTS".into(), worst.clone()));
    }
    if let Some(all) = RunResult::aggregate(results) {
        let title = format!("AGGREGATED AVERAGE RESULTS ({} runs)", results.len());
        sections.push((title, all));
    }
    sections
}

/// `strata-bench report --plot out.svg a.json b.json …`
pub fn plot_files(
    plot_path: &std::path::Path,
    inputs: &[std::path::PathBuf],
) -> Result<(), String> {
    let mut series = Vec::new();
    for input in inputs {
        let text = std::fs::read_to_string(input)
            .map_err(|e| format!("reading {}: {e}", input.display()))?;
        let document: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", input.display()))?;
        let label = input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        series.extend(plot::series_from_json(&label, &document)?);
    }
    std::fs::write(plot_path, plot::svg(&series))
        .map_err(|e| format!("writing {}: {e}", plot_path.display()))
}
